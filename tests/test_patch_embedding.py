"""PatchEmbeddingFusionPass: a patch-cutting Conv2D and its flattening into tokens
become a matmul over the image's patches (see passes/patch_embedding.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ge
from dialects.ascend_graph import BatchMatMulOp, Conv2DOp, ReshapeOp, TransposeOp
from ge.core import ir
from ge.core.reference import const_value
from ge.testing import GraphBuilder, GraphCase, assert_equivalent, count_ops, fuse
from ge.testing.real_models import batched_path, model_inputs, onnxruntime_outputs
from passes.fusion import collect_statistics
from passes.patch_embedding import PatchEmbeddingFusionPass


def _patch_embedding(
    batch: int, c: int, kernel: tuple[int, int], patches: tuple[int, int], o: int, *,
    bias: bool = True, stride: tuple[int, int] | None = None, pads: tuple[int, ...] = (0, 0, 0, 0), tokens: bool = True,
) -> GraphCase:
    """x [batch, c, H, W] -> Conv2D (o filters of `kernel`, stride the kernel unless
    given) -> Reshape [batch, o, Hp*Wp] -> Transpose [0, 2, 1] (`tokens`; else the conv's result)."""
    (kh, kw), (hp, wp) = kernel, patches
    sh, sw = stride or kernel
    b = GraphBuilder(seed=batch * 1000 + c * 100 + o)
    x = b.input((batch, c, hp * kh, wp * kw))
    operands = [x, b.random_weight((o, c, kh, kw), low=-0.5, high=0.5)] + ([b.random_weight((o,))] if bias else [])
    conv = b.op(Conv2DOp, operands, strides=[1, 1, sh, sw], pads=list(pads), dilations=[1, 1, 1, 1], groups=1)
    if tokens:
        h = (hp * kh + pads[0] + pads[1] - kh) // sh + 1
        w = (wp * kw + pads[2] + pads[3] - kw) // sw + 1
        b.op(TransposeOp, [b.op(ReshapeOp, [conv], shape=[batch, o, h * w])], perm=[0, 2, 1])
    return b.finish()


@settings(max_examples=25, deadline=None)
@given(
    batch=st.integers(1, 3), c=st.integers(1, 15), kernel=st.tuples(st.integers(1, 4), st.integers(1, 4)).filter(lambda k: k != (1, 1)),
    patches=st.tuples(st.integers(1, 4), st.integers(1, 4)), o=st.integers(1, 24), bias=st.booleans(),
)
def test_a_patch_embedding_becomes_a_matmul_over_the_patches(batch, c, kernel, patches, o, bias) -> None:
    case = _patch_embedding(batch, c, kernel, patches, o, bias=bias)
    after, counts = fuse(case, PatchEmbeddingFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 1)
    assert count_ops(after, Conv2DOp) == 0 and count_ops(after, BatchMatMulOp) == 1
    (matmul,) = [op for op in after.module.walk() if isinstance(op, BatchMatMulOp)]
    assert (matmul.bias is not None) == bias
    (conv,) = [op for op in case.module.walk() if isinstance(op, Conv2DOp)]
    np.testing.assert_array_equal(const_value(matmul.x2.owner), const_value(conv.filter.owner).reshape(o, -1).T)
    assert_equivalent(case, after)


@pytest.mark.parametrize(
    ("kwargs", "matched"),
    [
        ({"c": 16}, False),  # the channels fill C0: the conv pads nothing
        ({"stride": (2, 2)}, False),  # overlapping patches
        ({"pads": (1, 1, 1, 1), "stride": (4, 4)}, True),
        ({"tokens": False}, True),  # the conv's result is not flattened into tokens
    ],
    ids=["channels_fill_c0", "overlapping", "padded", "not_tokens"],
)
def test_other_convs_stay(kwargs: dict, matched: bool) -> None:
    case = _patch_embedding(2, kwargs.pop("c", 3), (4, 4), (2, 3), 8, **kwargs)
    after, counts = fuse(case, PatchEmbeddingFusionPass)
    assert (counts.match_times, counts.effect_times) == (int(matched), 0)
    assert count_ops(after, Conv2DOp) == 1


@pytest.mark.slow
def test_vit_runs_its_patch_embedding_as_a_matmul_with_onnxruntimes_answer() -> None:
    """torchvision's ViT-B/16 (3 channels, 16 x 16 patches): the pass fuses its one
    patch embedding, the graph then gives onnxruntime's answer (within 1e-4 of the
    largest magnitude), and the compiled model has no Conv2D kernel."""
    path = batched_path("vit_b_16", 1)
    module, _ = ge.load_onnx(str(path))
    with collect_statistics() as stats:
        PatchEmbeddingFusionPass().apply(ir.context(), module)
    counts = stats.get(PatchEmbeddingFusionPass.name)
    assert (counts.match_times, counts.effect_times) == (1, 1)
    feeds = model_inputs(path)
    want, got = onnxruntime_outputs(path, feeds), ge.reference.run(module, feeds)
    for name, expected in want.items():
        error = float(np.max(np.abs(got[name].astype(np.float64) - expected))) / float(np.max(np.abs(expected)))
        assert error <= 1e-4, f"{name}: max|ours - ort| / max|ort| = {error:.3g}"
    om = ge.compile(str(path), {"soc_version": "Ascend310P3"})
    with ge.Session(ge.RunConfig(timing_only=True)) as session:
        records = session.run(om).profile.records
    assert not any(r.op_type.startswith("Conv2D") for r in records)
