"""Conv graph fusions: ConvBatchnormFusionPass, ConvScaleFusionPass,
AABiasaddConvFusion and ConvToFullyConnectionFusionPass.

Property tests place a pattern's exact instances and near misses among random ops
that contain no convolution (so every match is a placed one), and check meaning
(reference interpreter before and after), which anchors went, which stayed, and
the counts the fusion framework records.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from xdsl.dialects.builtin import f16, f32
from xdsl.ir import Operation

import ge
from dialects.ascend_graph import (
    AddOp,
    BatchNormOp,
    ConstOp,
    Conv2DOp,
    FullyConnectionOp,
    MulOp,
    Props,
    ReluOp,
    bool_attr,
    int_attr,
)
from dialects.shapes import ShapeError
from ge.core import ir
from ge.testing import (
    GraphBuilder,
    GraphCase,
    alive,
    assert_equivalent,
    conv_bias_add,
    conv_bn_chain,
    conv_covering_input,
    conv_scale_chain,
    count_ops,
    fuse,
    graphs,
    run_pass,
    site_ops,
)
from passes.conv_fusion import (
    AABiasaddConvFusion,
    ConvBatchnormFusionPass,
    ConvScaleFusionPass,
    ConvToFullyConnectionFusionPass,
)
from passes.fusion import FusionCounts, FusionKind, collect_statistics, ordered
from passes.registry import get_pass

NO_CONV_OPS = ("unary", "binary", "branch", "reduce", "softmax", "pool", "reshape", "concat", "split")
"""Random op kinds without Conv2D, BatchNorm or residual blocks (which hold both)."""





def assert_counted(
    counts: FusionCounts, case: GraphCase, pattern: str, *, cascades: bool = False, unmatched: tuple[str, ...] = ()
) -> None:
    """One match per placed site but the `unmatched` near misses (no constant where
    the pattern wants one), one effect per exact site. With `cascades`, a fused conv
    may meet a random op the pass matches too (a second Mul or Add after the
    pattern), which adds matches, and effects where it is exact."""
    exact = len(case.sites_of(pattern, exact=True))
    near = sum(s.variant not in unmatched for s in case.sites_of(pattern, exact=False))
    if cascades:
        assert counts.effect_times >= exact and counts.match_times - counts.effect_times >= near
    else:
        assert (counts.match_times, counts.effect_times) == (exact + near, exact)


# ------------------------------------------------------------------- ConvBatchnorm


@given(graphs(dtypes=(f32, f16), ops=NO_CONV_OPS, max_ops=4, with_pattern=[conv_bn_chain(), conv_bn_chain()]))
def test_conv_batchnorm_fusion_folds_exact_chains_only(case: GraphCase) -> None:
    after, counts = fuse(case, ConvBatchnormFusionPass)
    assert_equivalent(case, after)
    assert not any(alive(bn) for bn in site_ops(after, "conv_bn_chain", BatchNormOp, exact=True))
    assert all(alive(bn) for bn in site_ops(after, "conv_bn_chain", BatchNormOp, exact=False))
    assert_counted(counts, case, "conv_bn_chain")
    assert count_ops(after, BatchNormOp) == count_ops(case, BatchNormOp) - counts.effect_times


def _conv_bn(b: GraphBuilder, *, dynamic_mean: bool = False, bias: bool = True) -> tuple[Conv2DOp, BatchNormOp]:
    x = b.input((1, 3, 5, 5))
    operands = [x, b.random_weight((4, 3, 3, 3), low=-0.3, high=0.3)]
    if bias:
        operands.append(b.random_weight((4,)))
    conv = b.op(Conv2DOp, operands, strides=(1, 1, 1, 1), pads=(1, 1, 1, 1), dilations=(1, 1, 1, 1), groups=1)
    mean = b.input((4,)) if dynamic_mean else b.random_weight((4,))
    params = [b.random_weight((4,), low=0.5, high=1.5), b.random_weight((4,)), mean, b.random_weight((4,), low=0.5, high=2)]
    bn = b.op(BatchNormOp, [conv, *params], epsilon=1e-5)
    assert isinstance(conv, Conv2DOp) and isinstance(bn, BatchNormOp)
    return conv, bn


@pytest.mark.parametrize("bias", [True, False])
def test_conv_batchnorm_fusion_computes_the_folded_filter_and_bias(bias: bool) -> None:
    b = GraphBuilder(seed=1)
    _conv_bn(b, bias=bias)
    case = b.finish()
    after, counts = fuse(case, ConvBatchnormFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 1)
    assert count_ops(after, BatchNormOp) == 0 and count_ops(after, Conv2DOp) == 1
    (conv,) = [op for op in after.module.walk() if isinstance(op, Conv2DOp)]
    assert conv.bias is not None
    assert_equivalent(case, after, rtol=1e-6)


def test_conv_batchnorm_fusion_leaves_a_conv_with_a_second_user() -> None:
    b = GraphBuilder(seed=2)
    conv, _ = _conv_bn(b)
    b.op(ReluOp, [conv])
    case = b.finish()
    after, counts = fuse(case, ConvBatchnormFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 0)
    assert count_ops(after, BatchNormOp) == 1


def test_conv_batchnorm_fusion_leaves_runtime_statistics() -> None:
    b = GraphBuilder(seed=3)
    _conv_bn(b, dynamic_mean=True)
    case = b.finish()
    after, counts = fuse(case, ConvBatchnormFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 0)
    assert count_ops(after, BatchNormOp) == 1


# ---------------------------------------------------------------------- ConvScale


@given(graphs(dtypes=(f32, f16), ops=NO_CONV_OPS, max_ops=4, with_pattern=[conv_scale_chain(), conv_scale_chain()]))
def test_conv_scale_fusion_folds_per_channel_scales_only(case: GraphCase) -> None:
    after, counts = fuse(case, ConvScaleFusionPass)
    assert_equivalent(case, after)
    for site in after.sites_of("conv_scale_chain", exact=True):
        assert not any(alive(op) for op in site.ops if isinstance(op, MulOp | AddOp | Conv2DOp))
    assert all(alive(mul) for mul in site_ops(after, "conv_scale_chain", MulOp, exact=False))
    assert_counted(counts, case, "conv_scale_chain", cascades=True, unmatched=("dynamic_scale",))


def _conv_then(b: GraphBuilder, cls: type, shape: tuple[int, ...], *, bias: bool = False, w: int = 4) -> Operation:
    """Conv2D [1, 4, 4, w] (4 channels), then cls(conv, constant of `shape`)."""
    x = b.input((1, 2, 4, w))
    operands = [x, b.random_weight((4, 2, 1, 1))] + ([b.random_weight((4,))] if bias else [])
    conv = b.op(Conv2DOp, operands, strides=(1, 1, 1, 1), pads=(0, 0, 0, 0), dilations=(1, 1, 1, 1), groups=1)
    return b.op(cls, [conv, b.random_weight(shape, low=0.5, high=1.5)])


def test_conv_scale_fusion_leaves_a_vector_that_broadcasts_along_w() -> None:
    """A [C] constant on NCHW multiplies along W, not C, even when W == C."""
    b = GraphBuilder(seed=4)
    _conv_then(b, MulOp, (4,))
    case = b.finish()
    after, counts = fuse(case, ConvScaleFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 0)
    assert count_ops(after, MulOp) == 1


def test_conv_scale_fusion_folds_the_add_after_the_mul_into_a_new_bias() -> None:
    b = GraphBuilder(seed=5)
    mul = _conv_then(b, MulOp, (1, 4, 1, 1))
    b.op(AddOp, [b.random_weight((4, 1, 1)), mul])
    case = b.finish()
    after, counts = fuse(case, ConvScaleFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 1)
    assert count_ops(after, MulOp) == count_ops(after, AddOp) == 0
    (conv,) = [op for op in after.module.walk() if isinstance(op, Conv2DOp)]
    assert conv.bias is not None
    assert_equivalent(case, after, rtol=1e-6)


# -------------------------------------------------------------------- AABiasaddConv


@given(graphs(dtypes=(f32, f16), ops=NO_CONV_OPS, max_ops=4, with_pattern=[conv_bias_add(), conv_bias_add()]))
def test_biasadd_conv_fusion_moves_per_channel_adds_into_bias_free_convs(case: GraphCase) -> None:
    after, counts = fuse(case, AABiasaddConvFusion)
    assert_equivalent(case, after)
    assert not any(alive(add) for add in site_ops(after, "conv_bias_add", AddOp, exact=True))
    assert all(alive(add) for add in site_ops(after, "conv_bias_add", AddOp, exact=False))
    assert_counted(counts, case, "conv_bias_add", cascades=True)


def test_biasadd_conv_fusion_leaves_a_conv_that_has_a_bias() -> None:
    b = GraphBuilder(seed=6)
    _conv_then(b, AddOp, (4, 1, 1), bias=True)
    case = b.finish()
    after, counts = fuse(case, AABiasaddConvFusion)
    assert (counts.match_times, counts.effect_times) == (1, 0)
    assert count_ops(after, AddOp) == 1


def test_conv_fusions_run_in_ge_order() -> None:
    """ConvBatchnorm and ConvScale (band top) before AABiasaddConvFusion (band main)."""
    graph = [p.name for p in ordered(FusionKind.GRAPH)]
    first = max(graph.index("ConvBatchnormFusionPass"), graph.index("ConvScaleFusionPass"))
    assert first < graph.index("AABiasaddConvFusion")


@pytest.mark.parametrize(("add_first", "left"), [(False, AddOp), (True, BatchNormOp)])
def test_conv_fusions_in_order_on_mixed_chains(add_first: bool, left: type[Operation]) -> None:
    """Conv -> BatchNorm -> Add keeps the Add; Conv -> Add -> BatchNorm keeps the
    BatchNorm (each pass runs once, in band order)."""
    b = GraphBuilder(seed=8)
    x = b.input((1, 2, 3, 3))
    filt = b.random_weight((4, 2, 1, 1))
    y = b.op(Conv2DOp, [x, filt], strides=(1, 1, 1, 1), pads=(0, 0, 0, 0), dilations=(1, 1, 1, 1), groups=1)
    for step in ("add", "bn") if add_first else ("bn", "add"):
        if step == "add":
            y = b.op(AddOp, [y, b.random_weight((4, 1, 1))])
        else:
            params = [b.random_weight((4,), low=0.5, high=1.5) for _ in range(4)]
            y = b.op(BatchNormOp, [y, *params], epsilon=1e-5)
    case = b.finish()
    conv = ("ConvBatchnormFusionPass", "ConvScaleFusionPass", "AABiasaddConvFusion")
    names = [p.name for p in ordered(FusionKind.GRAPH) if p.name in conv]
    after = run_pass(case, ",".join(names))
    assert count_ops(after, AddOp) + count_ops(after, BatchNormOp) == count_ops(after, left) == 1
    assert_equivalent(case, after)


# ---------------------------------------------------------------- ConvToFullyConnection


@given(graphs(dtypes=(f32, f16), ops=NO_CONV_OPS, max_ops=4, with_pattern=[conv_covering_input(), conv_covering_input()]))
def test_conv_to_fully_connection_takes_convs_covering_their_input(case: GraphCase) -> None:
    after, counts = fuse(case, ConvToFullyConnectionFusionPass)
    assert_equivalent(case, after)
    assert not any(alive(c) for c in site_ops(after, "conv_covering_input", Conv2DOp, exact=True))
    assert all(alive(c) for c in site_ops(after, "conv_covering_input", Conv2DOp, exact=False))
    assert_counted(counts, case, "conv_covering_input")
    assert count_ops(after, FullyConnectionOp) == counts.effect_times


def test_fully_connection_kernel_and_shape_rules() -> None:
    """axis 2 with a transposed [K, num_output] weight: y[n, m, :, 0] = x[n, m] (flat) @ w + b."""
    b = GraphBuilder(seed=7)
    x = b.input((2, 3, 4, 5))
    w = b.random_weight((20, 6))
    bias = b.random_weight((6,))
    props = {"num_output": int_attr(6), "transpose": bool_attr(True), "axis": int_attr(2)}
    fc = FullyConnectionOp([x, w, bias], props, "fc")
    assert fc.y.type.get_shape() == (2, 3, 6, 1)
    b.block.add_op(fc)
    b.output(fc)
    case = b.finish()
    text = ir.to_text(case.module)
    assert ir.to_text(ir.parse(text)) == text
    feeds = case.inputs()
    (got,) = ge.reference.run(case.module, feeds, case.store).values()
    weights = [ge.reference.const_value(v.owner, case.store) for v in (w, bias)]
    want = (feeds["input_0"].reshape(2, 3, 20) @ weights[0] + weights[1]).reshape(2, 3, 6, 1)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    with pytest.raises(ShapeError, match="is not \\[num_output"):
        FullyConnectionOp.infer_result_types([x.type, w.type], Props({**props, "transpose": bool_attr(False)}))


# ------------------------------------------------------------------- registry, CLI


def test_every_conv_fusion_is_registered_under_its_ge_name() -> None:
    for cls in (ConvBatchnormFusionPass, ConvScaleFusionPass, AABiasaddConvFusion, ConvToFullyConnectionFusionPass):
        assert get_pass(cls.name) is cls
        assert cls.kind is FusionKind.GRAPH


def test_ge_opt_runs_the_conv_fusions_on_an_onnx_model(tmp_path: Path) -> None:
    """The demo CNN's BatchNorms fold; the .mlir and its .npz of new weights compute
    what the imported model does."""
    from ge.models import DEMO_MODELS

    demo = DEMO_MODELS[0]
    out = tmp_path / "fused.mlir"
    result = subprocess.run(
        [str(Path(sys.executable).parent / "ge-opt"), str(demo.path), "-p",
         "ConvBatchnormFusionPass,ConvScaleFusionPass,AABiasaddConvFusion,ConvToFullyConnectionFusionPass", "-o", str(out)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert "ascend_graph.batch_norm" not in text and "ascend_graph.conv2d" in text
    module, _ = ge.load_onnx(str(demo.path))
    feeds = demo.sample_inputs()
    want, got = ge.reference.run(module, feeds), ge.reference.run(ir.parse(text), feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-4 * float(np.max(np.abs(want[name]))))


# ------------------------------------------------------------------------ ResNet-50


@pytest.mark.slow
def test_resnet50_conv_batchnorm_fusion(resnet50_onnx: Path) -> None:
    from ge.testing.real_models import model_inputs, onnxruntime_outputs

    module, _ = ge.load_onnx(str(resnet50_onnx))
    with collect_statistics() as stats:
        after = run_pass(module, "ConvBatchnormFusionPass")
    counts = stats.get("ConvBatchnormFusionPass")
    assert (counts.match_times, counts.effect_times) == (53, 53)
    assert count_ops(after, BatchNormOp) == 0 and count_ops(after, Conv2DOp) == 53
    assert count_ops(after, ConstOp) < count_ops(module, ConstOp)
    feeds = model_inputs(resnet50_onnx)
    expected = onnxruntime_outputs(resnet50_onnx, feeds)
    actual = ge.reference.run(after, feeds)
    for name, want in expected.items():
        error = float(np.max(np.abs(actual[name].astype(np.float64) - want))) / float(np.max(np.abs(want)))
        assert error <= 1e-4, f"{name}: max|ours - ort| / max|ort| = {error:.3g}"
