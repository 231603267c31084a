"""Small ONNX models of one cube op and its epilogue (or an attention), with seeded inputs: what the
tiling tests compile under forced tilings (`tests/test_aoe_knobs.py`,
`tests/test_a_resident.py`)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from xdsl.ir import Operation, SSAValue

import ge
from dialects.ascend_kernel import CopyOp, LoopOp

F = TensorProto.FLOAT


def conv_relu(c: int, h: int, cout: int, k: int, stride: int, seed: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Conv with a bias, then ReLU (a per-column operand in the epilogue), over an
    [1, c, h, h + 1] input."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array((rng.standard_normal((cout, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32) * 0.1, "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4),
        helper.make_node("Relu", ["y"], ["z"]),
    ]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", F, [1, c, h, h + 1])], [helper.make_tensor_value_info("z", F, None)], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, {"x": rng.standard_normal((1, c, h, h + 1)).astype(np.float32)}


def gemm_tail(m: int, k: int, n: int, seed: int, tail: str = "Relu") -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A Gemm with a bias (its epilogue adds a row of columns), then `tail`: a ReLU is
    FIX's own on a FIX part, a Sigmoid makes a mixed epilogue there (FIX, the
    workspace, then the vector unit)."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(n).astype(np.float32) * 0.1, "b")
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y"]), helper.make_node(tail, ["y"], ["z"])]
    graph = helper.make_graph(nodes, "gemm", [helper.make_tensor_value_info("x", F, [m, k])], [helper.make_tensor_value_info("z", F, None)], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, {"x": rng.standard_normal((m, k)).astype(np.float32)}


def attention(heads: int, sq: int, sk: int, d: int, seed: int, scores: bool = False) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """ONNX Attention (FusedInferAttentionScore) over 4-D query, key and value inputs;
    with `scores`, its scaled scores are a result too (which keeps its phases, and
    their matmuls, on every part)."""
    rng = np.random.default_rng(seed)
    shapes = {"q": [1, heads, sq, d], "k": [1, heads, sk, d], "v": [1, heads, sk, d]}
    outputs = ["o", "", "", "qk"] if scores else ["o"]
    graph = helper.make_graph(
        [helper.make_node("Attention", ["q", "k", "v"], outputs, **({"qk_matmul_output_mode": 0} if scores else {}))], "attention",
        [helper.make_tensor_value_info(n, F, s) for n, s in shapes.items()],
        [helper.make_tensor_value_info(n, F, None) for n in outputs if n],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    return model, {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}


def assert_simulates_to_reference(om: ge.Model, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    """The compiled model's simulated outputs are the reference interpreter's, within
    float16's tolerance, and it times to a finite latency."""
    want = ge.reference.run(ge.load_onnx(model)[0], feeds)
    with ge.Session() as session:
        result = session.run(om, feeds)
    for name, value in want.items():
        got = result.outputs[name]
        assert got.shape == value.shape
        np.testing.assert_allclose(got, value, rtol=2e-2, atol=2e-2 * max(float(np.abs(value).max()), 1.0))
    assert 0 < result.latency_us < float("inf")


def gm_reads(ops: Iterable[Operation], buffer: SSAValue) -> int:
    """Bytes a kernel program copies out of `buffer`, loops counted."""
    total = 0
    for op in ops:
        if isinstance(op, LoopOp):
            total += op.int_prop("trips") * gm_reads(op.body.block.ops, buffer)
        elif isinstance(op, CopyOp) and op.src is buffer:
            total += op.int_prop("bytes")
    return total
