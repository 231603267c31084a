"""MultiHeadAttention fusion over dynamic batch and sequence dims (issue 12, [shapes]).

A fully dynamic build fuses attention as a static build of any shape does: the head
views are traced at two probe sizes (`passes.attention_fusion.PROBES`), a head split
computed from a Shape chain (DynamicReshape) included, so the dynamic graph runs the
static build's kernels. Near misses, where the dynamic dims are not just batch and
sequence, stay unfused and still compute the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.session import Session
from ge.testing.gear_models import bert_like, bert_like_inputs

TOLERANCE = {"rtol": 2e-2, "atol": 2e-2}
"""float16 compute (force_fp16) against onnxruntime's float32."""
HEADS, WIDTH = 4, 8
FUSED = "ascend_graph.multi_head_attention"


def onnxruntime(path: str | Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def attention(path: Path, split: Sequence[int | str] = ("B", "S", HEADS, WIDTH), masked: bool = True) -> Path:
    """A torch-style attention block over x [B, S, E] (both dynamic): Q, K, V projections
    with biases, each cut into heads by a Reshape to `split` ("B" and "S" are x's dims
    read by Shape -> Gather, as exports compute them) and a Transpose, scaled Q @ K^T,
    an optional additive mask [B, 1, 1, S], softmax, @ V, heads merged to [B, S, E]."""
    width = HEADS * WIDTH
    rng = np.random.default_rng(12)
    inits: list[onnx.TensorProto] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value, name))
        return name

    dims = {"B": "batch", "S": "seq"}
    nodes = [helper.make_node("Shape", ["x"], ["x_shape"])]
    for i, name in enumerate(dims.values()):
        nodes += [
            helper.make_node("Gather", ["x_shape", const(f"at{i}", np.array(i, np.int64))], [name + "_dim"], axis=0),
            helper.make_node("Unsqueeze", [name + "_dim", const(f"axis{i}", np.array([0], np.int64))], [name]),
        ]

    def target(name: str, parts: Sequence[int | str]) -> str:
        inputs = [dims[p] if isinstance(p, str) else const(f"{name}{i}", np.array([p], np.int64)) for i, p in enumerate(parts)]
        nodes.append(helper.make_node("Concat", inputs, [name], axis=0))
        return name

    split_to, merge_to = target("split", split), target("merge", ("B", "S", width))
    for n in "qkv":
        nodes += [
            helper.make_node("MatMul", ["x", const("w" + n, (rng.standard_normal((width, width)) * width**-0.5).astype(np.float32))], [n + "_p"]),
            helper.make_node("Add", [n + "_p", const("b" + n, (rng.standard_normal(width) * 0.1).astype(np.float32))], [n + "_b"]),
            helper.make_node("Reshape", [n + "_b", split_to], [n + "_r"]),
            helper.make_node("Transpose", [n + "_r"], [n + "_t"], perm=[0, 2, 3, 1] if n == "k" else [0, 2, 1, 3]),
        ]
    nodes += [
        helper.make_node("MatMul", ["q_t", "k_t"], ["scores"]),
        helper.make_node("Div", ["scores", const("root", np.array(WIDTH**0.5, np.float32))], ["scaled"]),
        *([helper.make_node("Add", ["scaled", "mask"], ["masked"])] if masked else []),
        helper.make_node("Softmax", ["masked" if masked else "scaled"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "v_t"], ["context"]),
        helper.make_node("Transpose", ["context"], ["merged"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["merged", merge_to], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", width])]
    if masked:
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["B", 1, 1, "S"]))
    graph = helper.make_graph(nodes, "attention", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def attention_inputs(batch: int, seq: int, masked: bool = True) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(batch * 100 + seq)
    feeds = {"x": rng.standard_normal((batch, seq, HEADS * WIDTH)).astype(np.float32)}
    if masked:
        feeds["mask"] = np.where(rng.random((batch, 1, 1, seq)) < 0.25, -1e4, 0.0).astype(np.float32)
    return feeds


def fused(model: ge.Model) -> int:
    """How many MultiHeadAttention ops the dynamic graph holds."""
    assert model.dynamic is not None
    return model.dynamic.graph.count(FUSED)


def kernels(result) -> list[str]:
    return [r.name for r in result.profile.kernels() + result.profile.aicpu_kernels()]


def test_the_dynamic_bert_like_encoder_runs_the_static_builds_kernels(tmp_path: Path) -> None:
    """Compiled from its own dynamic dims ([1, seq]): one fused attention per layer, and at
    each sequence length the static build's kernels and onnxruntime's outputs."""
    path = bert_like(tmp_path / "bert.onnx", hidden=32, layers=2)
    model = ge.compile(path)
    assert fused(model) == 2
    assert "softmax" not in model.dynamic.graph  # type: ignore[union-attr]
    session = Session()
    for seq in (8, 24, 40):
        feeds = bert_like_inputs(seq)
        static = ge.compile(path, {"input_shape": f"input_ids:1,{seq};attention_mask:1,{seq}"})
        got, want = session.run(model, feeds), session.run(static, feeds)
        assert kernels(got) == kernels(want)
        np.testing.assert_allclose(got.outputs["last_hidden_state"], onnxruntime(path, feeds), **TOLERANCE)


def test_multi_head_attention_over_dynamic_batch_and_sequence_fuses(tmp_path: Path) -> None:
    """Heads split and merged by DynamicReshapes whose targets come from Shape(x): fused
    into one op with its biases and mask, equal to the static builds and onnxruntime."""
    path = attention(tmp_path / "attention.onnx")
    model = ge.compile(path)
    assert fused(model) == 1
    assert "reshape_dynamic" not in model.dynamic.graph  # type: ignore[union-attr]
    session = Session()
    for batch, seq in ((1, 8), (2, 5), (3, 17)):
        feeds = attention_inputs(batch, seq)
        static = ge.compile(path, {"input_shape": f"x:{batch},{seq},{HEADS * WIDTH};mask:{batch},1,1,{seq}"})
        got, want = session.run(model, feeds), session.run(static, feeds)
        assert kernels(got) == kernels(want)
        np.testing.assert_allclose(got.outputs["y"], onnxruntime(path, feeds), **TOLERANCE)


@pytest.mark.parametrize(
    ("split", "why"),
    [
        (("B", HEADS, "S", WIDTH), "the sequence is cut into the head split: rows of one head hold columns of several"),
        (("S", "B", HEADS, WIDTH), "batch and sequence swapped by a Reshape (not a Transpose): looks like BSH only when B == S"),
    ],
)
def test_a_head_split_mixing_the_dynamic_dims_does_not_fuse(tmp_path: Path, split: tuple[int | str, ...], why: str) -> None:
    path = attention(tmp_path / "near_miss.onnx", split, masked=False)
    model = ge.compile(path)
    assert fused(model) == 0, why
    feeds = attention_inputs(2, 3, masked=False)
    np.testing.assert_allclose(Session().run(model, feeds).outputs["y"], onnxruntime(path, feeds), **TOLERANCE)
