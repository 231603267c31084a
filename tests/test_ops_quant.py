"""Quantization end to end: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
MatMulInteger, ConvInteger, QLinearConv, QLinearMatMul, the int8 cube and
QuantCubeFusionPass.

Each op case is a one-node ONNX model run by onnxruntime, by the reference
interpreter (after import) and compiled and simulated (precision_mode
must_keep_origin_dtype, so the model's dtypes are kept); integer results must be
equal, float ones within the dtype's tolerance. The model cases quantize a small CNN
with onnxruntime's `quantize_static` (QDQ and QOperator formats) and check that it
runs its convolutions and its Gemm as int8 cube kernels and matches onnxruntime's
quantized model within a few quantization steps."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.dialects.builtin import IntegerType, f32
from xdsl.ir import Attribute

import ge
from dialects import ascend_graph as ag
from dialects import formats
from dialects.ascend_kernel import KernelOp
from dialects.shapes import ShapeError
from ge.core import ir, opinfo, reference
from ge.core.errors import ModelError
from ge.om import Model
from ge.sim.kernels import cube
from passes import quant_fusion
from passes.registry import get_pass

SOC = "Ascend910B1"
TOLERANCE = {np.dtype(np.float32): 1e-6, np.dtype(np.float16): 1e-3}
RNG = np.random.default_rng(7)


def node_model(
    op_type: str,
    inputs: Sequence[tuple[str, np.ndarray | None]],
    outputs: Sequence[tuple[str, int]],
    opset: int,
    constants: Sequence[str] = (),
    **attrs: object,
) -> onnx.ModelProto:
    """One node: `inputs` as (name, value), a None value an absent input, the names in
    `constants` initializers, the others graph inputs; `outputs` as (name, element type)."""
    names = [name if value is not None else "" for name, value in inputs]
    node = helper.make_node(op_type, names, [n for n, _ in outputs], **attrs)
    given = [(n, v) for n, v in inputs if v is not None]
    graph = helper.make_graph(
        [node],
        op_type.lower(),
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for n, v in given
            if n not in constants
        ],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        [numpy_helper.from_array(v, n) for n, v in given if n in constants],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def run_all(
    model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], compiled: bool = True
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """onnxruntime's outputs, the reference interpreter's and (if `compiled`) the simulator's."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, dict(feeds))
    names = [o.name for o in model.graph.output]
    module, _ = ge.load_onnx(model)
    ref = reference.run(module, feeds)
    if not compiled:
        return want, [ref[n] for n in names], []
    model_ = ge.compile(module, {"soc_version": SOC, "precision_mode": "must_keep_origin_dtype"})
    with ge.Session() as session_:
        simulated = session_.run(model_, feeds).outputs
    return want, [ref[n] for n in names], [simulated[n] for n in names]


def assert_matches(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    if want.dtype.kind == "f":
        tol = TOLERANCE[want.dtype]
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max(initial=0))))
    else:
        np.testing.assert_array_equal(got, want)


def check(
    op_type: str,
    inputs: Sequence[tuple[str, np.ndarray | None]],
    outputs: Sequence[tuple[str, int]],
    opset: int,
    constants: Sequence[str] = (),
    compiled: bool = True,
    **attrs: object,
) -> None:
    """Both routes agree with onnxruntime. `compiled=False` checks the reference
    route only: for an integer product the int8 cube cannot take (a weight that
    does not fit int8 once its zero point is subtracted, or one the graph computes),
    which is an int32 AI CPU op, and this branch lowers no AI CPU op."""
    model = node_model(op_type, inputs, outputs, opset, constants, **attrs)
    feeds = {n: v for n, v in inputs if v is not None and n not in constants}
    want, ref, sim = run_all(model, feeds, compiled)
    for w, r in zip(want, ref):
        assert_matches(r, w)
    for w, s in zip(want, sim):
        assert_matches(s, w)


def refused(
    op_type: str,
    inputs: Sequence[tuple[str, np.ndarray | None]],
    outputs: Sequence[tuple[str, int]],
    opset: int,
    match: str,
    **attrs: object,
) -> None:
    with pytest.raises(ModelError, match=match):
        ge.load_onnx(node_model(op_type, inputs, outputs, opset, **attrs))


def ints(dtype: type, shape: Sequence[int], low: int | None = None, high: int | None = None) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(info.min if low is None else low, (info.max if high is None else high) + 1, shape).astype(dtype)


def floats(shape: Sequence[int], scale: float = 1.0, dtype: type = np.float32) -> np.ndarray:
    return (RNG.normal(size=shape) * scale).astype(dtype)


I8, U8, I16, U16, I32 = TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16, TensorProto.UINT16, TensorProto.INT32
F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16


# ------------------------------------------------------------------ QuantizeLinear


@pytest.mark.parametrize("opset", [13, 19, 21])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_quantize_linear_per_tensor_rounds_half_to_even_and_saturates(opset: int, dtype: type) -> None:
    x = np.array([-300, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.49, 300, 127.5], np.float32)
    x = np.concatenate([x, floats([22], 40.0)])
    zero = np.array(3 if dtype == np.int8 else 128, dtype)
    check(
        "QuantizeLinear",
        [("x", x), ("s", np.array(0.5, np.float32)), ("z", zero)],
        [("y", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))],
        opset,
    )


@pytest.mark.parametrize("opset", [13, 21])
def test_quantize_linear_per_axis_matches_onnxruntime(opset: int) -> None:
    x = floats([2, 3, 4, 5], 3.0)
    scale = np.array([0.05, 0.1, 0.02], np.float32)
    zero = np.array([-3, 0, 7], np.int8)
    check("QuantizeLinear", [("x", x), ("s", scale), ("z", zero)], [("y", I8)], opset, axis=1)
    check(
        "QuantizeLinear",
        [("x", x), ("s", np.full(5, 0.1, np.float32)), ("z", np.arange(5, dtype=np.int8))],
        [("y", I8)],
        opset,
        axis=-1,
    )


def test_quantize_linear_21_blocked_int16_and_output_dtype_match_onnxruntime() -> None:
    x = floats([3, 8], 100.0)
    scale = np.abs(floats([3, 2], 0.01)) + 0.005
    check(
        "QuantizeLinear",
        [("x", x), ("s", scale), ("z", ints(np.int16, [3, 2], -50, 50))],
        [("y", I16)],
        21,
        axis=1,
        block_size=4,
    )
    check("QuantizeLinear", [("x", x), ("s", scale)], [("y", U16)], 21, axis=1, block_size=4, output_dtype=U16)
    check("QuantizeLinear", [("x", x), ("s", np.array(0.3, np.float32))], [("y", U8)], 21)


@pytest.mark.parametrize("opset", [19, 25])
def test_quantize_linear_of_float16_matches_onnxruntime(opset: int) -> None:
    """Before version 23 the quotient is float32's; from 23 on it is the scale's dtype's."""
    x = floats([200], 10.0, np.float16)
    inputs = [("x", x), ("s", np.array(0.07, np.float16)), ("z", np.array(-5, np.int8))]
    check("QuantizeLinear", inputs, [("y", I8)], opset)


@pytest.mark.parametrize("precision", [TensorProto.FLOAT, TensorProto.FLOAT16])
def test_quantize_linear_25_divides_in_its_precision(precision: int) -> None:
    inputs = [("x", floats([300], 10.0, np.float16)), ("s", np.array(0.07, np.float16)), ("z", np.array(-5, np.int8))]
    check("QuantizeLinear", inputs, [("y", I8)], 25, precision=precision)


def test_quantize_linear_refuses_an_integer_precision() -> None:
    inputs = [("x", floats([4])), ("s", np.array(0.07, np.float32))]
    refused("QuantizeLinear", inputs, [("y", U8)], 25, "precision must be a floating-point type", precision=I32)


@pytest.mark.parametrize(
    "op_type, inputs, attrs",
    [
        (
            "ConvInteger",
            [("x", np.uint8, [1, 4, 6, 6]), ("w", np.int8, [3, 4, 3, 3]), ("xz", np.uint8, 131)],
            {"pads": [1, 1, 1, 1]},
        ),
        ("MatMulInteger", [("x", np.uint8, [3, 5]), ("w", np.int8, [5, 4]), ("xz", np.uint8, 7)], {}),
    ],
)
def test_integer_products_of_constant_weights_run_as_int8_cube_kernels(
    op_type: str, inputs: list[tuple[str, type, object]], attrs: dict[str, object]
) -> None:
    """QuantCubeFusionPass moves the widened uint8 input into int8 and corrects the bias."""
    (x_name, x_dtype, x_shape), (w_name, w_dtype, w_shape), (z_name, z_dtype, zero) = inputs
    values = [(x_name, ints(x_dtype, x_shape)), (w_name, ints(w_dtype, w_shape)), (z_name, np.array(zero, z_dtype))]
    check(op_type, values, [("y", I32)], 13, constants=[w_name, z_name], **attrs)
    module, _ = ge.load_onnx(node_model(op_type, values, [("y", I32)], 13, constants=[w_name, z_name], **attrs))
    compiled = ge.compile(module, {"soc_version": SOC, "precision_mode": "must_keep_origin_dtype"})
    assert [
        (str(ag.dtype_of(op.operands[0].type)), str(ag.dtype_of(op.results[0].type))) for op in cube_ops(compiled)
    ] == [("i8", "i32")]


def test_quantize_linear_refuses_int4_and_a_wrong_scale_shape() -> None:
    x, s = floats([2, 3]), np.array(0.1, np.float32)
    refused(
        "QuantizeLinear", [("x", x), ("s", s)], [("y", TensorProto.INT4)], 21, "INT4", output_dtype=TensorProto.INT4
    )
    refused(
        "QuantizeLinear",
        [("x", x), ("s", np.ones(4, np.float32))],
        [("y", U8)],
        13,
        r"scale \[4\] is neither one value nor \[3\]",
    )
    refused(
        "QuantizeLinear",
        [("x", x), ("s", s), ("z", np.array(1, np.uint8))],
        [("y", U8)],
        21,
        "output_dtype",
        output_dtype=I8,
    )


# ---------------------------------------------------------------- DequantizeLinear


@pytest.mark.parametrize("opset", [13, 19, 21])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32])
def test_dequantize_linear_per_tensor_matches_onnxruntime(opset: int, dtype: type) -> None:
    x = ints(dtype, [4, 6], -100000 if dtype == np.int32 else None, 100000 if dtype == np.int32 else None)
    zero = np.array(0 if dtype == np.int32 else 9, dtype)
    check("DequantizeLinear", [("x", x), ("s", np.array(0.031, np.float32)), ("z", zero)], [("y", F32)], opset)


@pytest.mark.parametrize("opset", [13, 21])
def test_dequantize_linear_per_axis_matches_onnxruntime(opset: int) -> None:
    x = ints(np.uint8, [2, 3, 4])
    check(
        "DequantizeLinear",
        [("x", x), ("s", np.array([0.1, 0.2, 0.3], np.float32)), ("z", np.array([1, 128, 255], np.uint8))],
        [("y", F32)],
        opset,
        axis=1,
    )


def test_dequantize_linear_21_blocked_16_bit_and_float16_match_onnxruntime() -> None:
    x = ints(np.int16, [4, 6])
    scale = np.abs(floats([2, 6], 0.01)) + 0.001
    check(
        "DequantizeLinear",
        [("x", x), ("s", scale), ("z", ints(np.int16, [2, 6], -9, 9))],
        [("y", F32)],
        21,
        axis=0,
        block_size=3,
    )
    check("DequantizeLinear", [("x", ints(np.uint16, [8])), ("s", np.array(0.002, np.float16))], [("y", F16)], 21)


def test_dequantize_linear_refuses_a_zero_point_of_another_type() -> None:
    with pytest.raises(ModelError, match="offset is ui8, not x's i8"):
        module = node_model(
            "DequantizeLinear",
            [("x", ints(np.int8, [4])), ("s", np.array(0.1, np.float32)), ("z", np.array(1, np.uint8))],
            [("y", F32)],
            21,
        )
        ge.load_onnx(module)


@pytest.mark.parametrize("user, kept", [("MatMul", True), ("Add", False)])
def test_a_constant_dequantization_stays_through_constant_folding_for_a_cube_op(user: str, kept: bool) -> None:
    """Kept for QuantCubeFusionPass when a cube op reads it, folded otherwise."""
    w = ints(np.int8, [16, 16])
    nodes = [helper.make_node("DequantizeLinear", ["w", "s"], ["dw"]), helper.make_node(user, ["x", "dw"], ["y"])]
    consts = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(0.5, np.float32), "s")]
    io = [helper.make_tensor_value_info(n, F32, [16, 16]) for n in ("x", "y")]
    module, _ = ge.load_onnx(helper.make_model(helper.make_graph(nodes, "g", io[:1], io[1:], consts)))
    get_pass("constant-folding")().apply(ir.context(), module)
    assert bool([op for op in module.walk() if isinstance(op, ag.AscendDequantOp)]) == kept
    x = floats([16, 16])
    want = x @ (w * 0.5) if user == "MatMul" else x + w * 0.5
    np.testing.assert_allclose(reference.run(module, {"x": x})["y"], want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------- DynamicQuantizeLinear


@pytest.mark.parametrize(
    "x",
    [
        np.array([0, 2, -3, -2.5, 1.34, 0.5], np.float32),
        np.array([-1.0, -2.1, -1.3, -2.5, -3.34, -4.0], np.float32),
        np.array([[1, 2.1, 1.3, 2.5], [3.34, 4.0, 1.5, 2.6], [3.9, 4.0, 3.0, 2.345]], np.float32),
    ],
)
def test_dynamic_quantize_linear_matches_onnxruntime(x: np.ndarray) -> None:
    check("DynamicQuantizeLinear", [("x", x)], [("y", U8), ("y_scale", F32), ("y_zero_point", U8)], 11)


# ------------------------------------------------------------- integer products


@pytest.mark.parametrize(
    "a_dtype, b_dtype, a_zero, b_zero, compiled",
    [
        (np.int8, np.int8, None, None, True),
        (np.uint8, np.int8, np.array(12, np.uint8), None, True),
        (np.int8, np.uint8, np.array(-3, np.int8), np.array(128, np.uint8), False),
    ],
)
def test_matmul_integer_with_a_constant_weight_matches_onnxruntime(
    a_dtype: type, b_dtype: type, a_zero: np.ndarray | None, b_zero: np.ndarray | None, compiled: bool
) -> None:
    a, b = ints(a_dtype, [4, 5]), ints(b_dtype, [5, 3])
    inputs = [("a", a), ("b", b), ("az", a_zero), ("bz", b_zero)]
    check("MatMulInteger", inputs, [("y", I32)], 13, constants=["b", "az", "bz"], compiled=compiled)


@pytest.mark.parametrize(
    "a_dtype, b_dtype, a_zero, b_zero",
    [
        (np.int8, np.int8, None, None),
        (np.uint8, np.uint8, np.array([7], np.uint8), np.array(200, np.uint8)),
        (np.int8, np.uint8, None, np.array(3, np.uint8)),
    ],
)
def test_matmul_integer_of_two_inputs_runs_on_the_int8_cube(
    a_dtype: type, b_dtype: type, a_zero: np.ndarray | None, b_zero: np.ndarray | None
) -> None:
    """int8 without zero points: the int8 cube as it is; else the int8 product of the
    operands moved into int8 with int32 corrections for the zero points."""
    inputs = [("a", ints(a_dtype, [2, 3, 4, 5])), ("b", ints(b_dtype, [5, 6])), ("az", a_zero), ("bz", b_zero)]
    check("MatMulInteger", inputs, [("y", I32)], 13)
    module, _ = ge.load_onnx(node_model("MatMulInteger", inputs, [("y", I32)], 13))
    products = [op for op in module.walk() if isinstance(op, ag.CubeOp)]
    assert [str(ag.dtype_of(op.operands[0].type)) for op in products] == ["i8"]


@pytest.mark.parametrize(
    "x_dtype, x_zero, w_zero, pads",
    [
        (np.int8, None, None, [0, 0, 0, 0]),
        (np.int8, np.array(-7, np.int8), None, [1, 1, 1, 1]),
        (np.uint8, np.array(130, np.uint8), np.array(0, np.int8), [1, 0, 2, 1]),
    ],
)
def test_conv_integer_matches_onnxruntime(
    x_dtype: type, x_zero: np.ndarray | None, w_zero: np.ndarray | None, pads: list[int]
) -> None:
    inputs = [("x", ints(x_dtype, [1, 4, 6, 6])), ("w", ints(np.int8, [3, 4, 3, 3])), ("xz", x_zero), ("wz", w_zero)]
    check("ConvInteger", inputs, [("y", I32)], 13, constants=["w", "xz", "wz"], pads=pads)


def test_conv_integer_1d_with_a_uint8_filter_matches_onnxruntime() -> None:
    inputs = [
        ("x", ints(np.uint8, [2, 3, 9])),
        ("w", ints(np.uint8, [4, 3, 2])),
        ("xz", np.array(5, np.uint8)),
        ("wz", np.array(9, np.uint8)),
    ]
    check("ConvInteger", inputs, [("y", I32)], 13, constants=["w", "xz", "wz"], compiled=False, strides=[2])


def test_conv_integer_refuses_a_zero_point_per_input_channel() -> None:
    inputs = [("x", ints(np.int8, [1, 2, 4, 4])), ("w", ints(np.int8, [3, 2, 3, 3])), ("xz", np.zeros(2, np.int8))]
    refused("ConvInteger", inputs, [("y", I32)], 13, r"x_zero_point \[2\] must be one value")


@pytest.mark.parametrize("dtype, per_channel", [(np.int8, False), (np.int8, True), (np.uint8, False)])
def test_qlinear_conv_matches_onnxruntime(dtype: type, per_channel: bool) -> None:
    """A uint8 filter with zero point 120 fits int8 once shifted when its values are 0..247."""
    cout = 5
    w_scale = np.abs(floats([cout], 0.01)) + 0.002 if per_channel else np.array(0.01, np.float32)
    w_zero = np.zeros(cout if per_channel else (), np.int8) if dtype == np.int8 else np.array(120, np.uint8)
    inputs = [
        ("x", ints(dtype, [1, 3, 7, 7])),
        ("xs", np.array(0.02, np.float32)),
        ("xz", np.array(-4 if dtype == np.int8 else 128, dtype)),
        ("w", ints(dtype, [cout, 3, 3, 3], None, None if dtype == np.int8 else 247)),
        ("ws", w_scale),
        ("wz", w_zero),
        ("ys", np.array(0.05, np.float32)),
        ("yz", np.array(6 if dtype == np.int8 else 100, dtype)),
        ("b", ints(np.int32, [cout], -2000, 2000)),
    ]
    check(
        "QLinearConv",
        inputs,
        [("y", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))],
        13,
        constants=["xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
        pads=[1, 1, 1, 1],
        strides=[2, 1],
    )


@pytest.mark.parametrize("opset", [13, 21])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_qlinear_matmul_matches_onnxruntime(opset: int, dtype: type) -> None:
    zero = 0 if dtype == np.int8 else 128
    inputs = [
        ("a", ints(dtype, [2, 3, 8])),
        ("as", np.array(0.03, np.float32)),
        ("az", np.array(zero + 3, dtype)),
        ("b", ints(dtype, [8, 4])),
        ("bs", np.array(0.02, np.float32)),
        ("bz", np.array(zero, dtype)),
        ("ys", np.array(0.4, np.float32)),
        ("yz", np.array(zero - 2 if dtype == np.int8 else 120, dtype)),
    ]
    check(
        "QLinearMatMul",
        inputs,
        [("y", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))],
        opset,
        constants=["as", "az", "b", "bs", "bz", "ys", "yz"],
    )


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_qlinear_matmul_of_two_inputs_matches_onnxruntime(dtype: type) -> None:
    """Every input computed (as the ONNX node tests feed them): the corrected int8 product."""
    zero = 0 if dtype == np.int8 else 128
    inputs = [
        ("a", ints(dtype, [2, 4])),
        ("as", np.array([0.03], np.float32)),
        ("az", np.array([zero + 5], dtype)),
        ("b", ints(dtype, [4, 3])),
        ("bs", np.array([0.02], np.float32)),
        ("bz", np.array([zero - 9], dtype)),
        ("ys", np.array([0.1], np.float32)),
        ("yz", np.array([zero + 1], dtype)),
    ]
    check("QLinearMatMul", inputs, [("y", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))], 21)


def test_qlinear_matmul_refuses_a_scale_per_row_of_a() -> None:
    inputs = [
        ("a", ints(np.int8, [2, 8])),
        ("as", np.full(2, 0.03, np.float32)),
        ("az", np.array(0, np.int8)),
        ("b", ints(np.int8, [8, 4])),
        ("bs", np.array(0.02, np.float32)),
        ("bz", np.array(0, np.int8)),
        ("ys", np.array(0.4, np.float32)),
        ("yz", np.array(0, np.int8)),
    ]
    refused("QLinearMatMul", inputs, [("y", I8)], 21, "must be one value each")


# -------------------------------------------------------------------- the int8 cube


@pytest.mark.parametrize("offset", [0, -7])
def test_the_simulators_int8_convolution_is_exact(offset: int) -> None:
    """Equal to the reference interpreter's, and with an offset_x to the convolution of
    x - offset padded with zeros, plus offset * sum(w) per channel."""
    x, w = ints(np.int8, [2, 40, 5, 6]), ints(np.int8, [20, 40, 3, 3])
    bias = ints(np.int32, [20], -5000, 5000)
    props = {
        "strides": ag.ints([1, 1, 1, 2]),
        "pads": ag.ints([1, 0, 2, 1]),
        "dilations": ag.ints([1, 1, 1, 1]),
        "groups": ag.int_attr(1),
        "dtype": IntegerType(32),
        "offset_x": ag.int_attr(offset),
    }
    conv = ag.Conv2DOp(
        data_ops([(IntegerType(8), x.shape), (IntegerType(8), w.shape), (IntegerType(32), bias.shape)]), props
    )
    assert cube.fits(conv, "NC1HWC0", "FRACTAL_Z", np.dtype(np.int8))
    b = cube.filter_matrix(formats.to_physical(w, "FRACTAL_Z", "NCHW"))
    got = cube.conv2d(conv, formats.to_physical(x, "NC1HWC0", "NCHW"), b, (3, 3), bias)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, reference.evaluate_op(conv, [x, w, bias])[0])
    wide = {k: v for k, v in props.items() if k not in ("dtype", "offset_x")}
    plain = ag.Conv2DOp(
        data_ops([(IntegerType(32), x.shape), (IntegerType(32), w.shape), (IntegerType(32), bias.shape)]), wide
    )
    shifted = reference.evaluate_op(plain, [x.astype(np.int32) - offset, w.astype(np.int32), bias])[0]
    np.testing.assert_array_equal(got, shifted + offset * w.astype(np.int32).sum(axis=(1, 2, 3)).reshape(1, -1, 1, 1))


def test_conv2d_refuses_an_offset_x_for_a_float_input() -> None:
    props = {
        "strides": ag.ints([1] * 4),
        "pads": ag.ints([0] * 4),
        "dilations": ag.ints([1] * 4),
        "groups": ag.int_attr(1),
    }
    with pytest.raises(ShapeError, match=r"offset_x 3 needs an int8 input"):
        ag.Conv2DOp(data_ops([(f32, (1, 2, 3, 3)), (f32, (2, 2, 1, 1))]), {**props, "offset_x": ag.int_attr(3)})


def data_ops(types: Sequence[tuple[Attribute, Sequence[int]]]) -> list[ag.DataOp]:
    return [ag.DataOp(i, ag.tensor(dtype, shape), f"in{i}") for i, (dtype, shape) in enumerate(types)]


# ----------------------------------------------------------- quantized models


def small_cnn() -> onnx.ModelProto:
    """Conv-Relu-Conv-Relu-GlobalAveragePool-Gemm on a 3x12x12 image."""
    init = {
        "w1": floats([8, 3, 3, 3], 0.3),
        "b1": floats([8], 0.1),
        "w2": floats([16, 8, 3, 3], 0.2),
        "b2": floats([16], 0.1),
        "wf": floats([10, 16], 0.3),
        "bf": floats([10], 0.1),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", F32, [1, 3, 12, 12])],
        [helper.make_tensor_value_info("y", F32, [1, 10])],
        [numpy_helper.from_array(v, k) for k, v in init.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def quantized(tmp_path: Path, model: onnx.ModelProto, quant_format: str = "qdq", unsigned: bool = False) -> Path:
    """`model` (one input x) statically quantized by onnxruntime, calibrated on random
    inputs: int8 weights (per channel in QDQ), int8 or uint8 activations; in QOperator
    format only Conv (the QLinear ops of Gemm and pooling are com.microsoft ops)."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]

    class RandomInputs(CalibrationDataReader):
        def __init__(self) -> None:
            self.inputs = iter([{"x": floats(shape)} for _ in range(16)])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.inputs, None)

    source, target = tmp_path / "float.onnx", tmp_path / f"{quant_format}.onnx"
    onnx.save(model, source)
    qdq = quant_format == "qdq"
    quantize_static(
        source,
        target,
        RandomInputs(),
        quant_format=QuantFormat.QDQ if qdq else QuantFormat.QOperator,
        activation_type=QuantType.QUInt8 if unsigned else QuantType.QInt8,
        weight_type=QuantType.QInt8,
        per_channel=qdq,
        op_types_to_quantize=None if qdq else ["Conv"],
    )
    return target


def cube_ops(model: Model) -> list[ag.CubeOp]:
    return [op for op in model.kernel_module().walk() if isinstance(op, ag.CubeOp)]


def output_step(model: onnx.ModelProto) -> float:
    """What one quantization step is worth at the output: the scale of the output's
    DequantizeLinear (QDQ), else (QOperator: a float Gemm after the last QLinearConv)
    that conv's y_scale times the largest row sum of |Gemm weight|."""
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    last = {n.output[0]: n for n in model.graph.node}["y"]
    if last.op_type == "DequantizeLinear":
        return float(values[last.input[1]].reshape(-1)[0])
    conv = [n for n in model.graph.node if n.op_type == "QLinearConv"][-1]
    return float(values[conv.input[6]].reshape(-1)[0]) * float(np.abs(values[last.input[1]]).sum(axis=1).max())


@pytest.mark.parametrize("quant_format, int8_products", [("qdq", 3), ("qoperator", 2)])
@pytest.mark.parametrize("soc, unsigned", [("Ascend310", False), ("Ascend910B1", False), ("Ascend910B1", True)])
def test_a_statically_quantized_cnn_runs_int8_on_the_cube(
    tmp_path: Path, quant_format: str, int8_products: int, soc: str, unsigned: bool
) -> None:
    """QDQ: both convolutions and the Gemm run int8 x int8 -> int32 on the cube
    (QuantCubeFusionPass); QOperator (only Conv quantized): both QLinearConvs. uint8
    activations move into int8 on the way. The simulated outputs are within a few
    quantization steps of onnxruntime's. The quantization ops join UB fusion scopes."""
    path = quantized(tmp_path, small_cnn(), quant_format, unsigned)
    step = output_step(onnx.load(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    compiled = ge.compile(str(path), {"soc_version": soc})
    int8 = [op for op in cube_ops(compiled) if ag.dtype_of(op.operands[0].type) == IntegerType(8)]
    assert len(int8) == int8_products
    for op in int8:
        assert ag.dtype_of(op.operands[1].type) == IntegerType(8) and ag.dtype_of(op.results[0].type) == IntegerType(32)
    kernels = [[t.data for t in k.op_types] for k in compiled.kernel_module().walk() if isinstance(k, KernelOp)]
    assert any("AscendDequant" in types and len(types) > 1 for types in kernels)  # UB fusion takes quantization ops
    module, _ = ge.load_onnx(str(path))
    with ge.Session() as run:
        for _ in range(3):
            x = floats([1, 3, 12, 12])
            want = session.run(None, {"x": x})[0]
            assert np.abs(run.run(compiled, {"x": x}).outputs["y"] - want).max() <= 3 * step
            np.testing.assert_allclose(reference.run(module, {"x": x})["y"], want, rtol=1e-5, atol=step / 100)


def test_qdq_fusion_leaves_a_weight_with_a_zero_point_in_float(tmp_path: Path) -> None:
    """A weight zero point other than 0 has no int8 product with a bias correction: no fusion."""
    w = numpy_helper.from_array(ints(np.int8, [4, 3]), "w")
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "sx", "zx"], ["dx"]),
        helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["dw"]),
        helper.make_node("MatMul", ["dx", "dw"], ["y"]),
    ]
    consts = [
        w,
        numpy_helper.from_array(np.array(0.1, np.float32), "sx"),
        numpy_helper.from_array(np.array(5, np.int8), "zx"),
        numpy_helper.from_array(np.array(0.2, np.float32), "sw"),
        numpy_helper.from_array(np.array(1, np.int8), "zw"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F32, [2, 4])],
        [helper.make_tensor_value_info("y", F32, [2, 3])],
        consts,
    )
    module, _ = ge.load_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    get_pass("QuantCubeFusionPass")().apply(ir.context(), module)
    assert [str(ag.dtype_of(op.operands[0].type)) for op in module.walk() if isinstance(op, ag.CubeOp)] == ["f32"]


def test_a_quantized_convolution_over_its_whole_input_runs_as_an_int8_fully_connection(tmp_path: Path) -> None:
    """ConvToFullyConnectionFusionPass makes it a FullyConnection first; the QDQ fusion takes that too."""
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"])],
        "whole",
        [helper.make_tensor_value_info("x", F32, [1, 4, 3, 3])],
        [helper.make_tensor_value_info("y", F32, [1, 6, 1, 1])],
        [numpy_helper.from_array(floats([6, 4, 3, 3], 0.3), "w"), numpy_helper.from_array(floats([6], 0.1), "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    target = quantized(tmp_path, model)
    compiled = ge.compile(str(target), {"soc_version": SOC})
    assert [(type(op).__name__, str(ag.dtype_of(op.operands[0].type))) for op in cube_ops(compiled)] == [
        ("FullyConnectionOp", "i8")
    ]
    x = floats([1, 4, 3, 3])
    want = ort.InferenceSession(str(target), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with ge.Session() as run:
        got = run.run(compiled, {"x": x}).outputs["y"]
    assert np.abs(got - want).max() <= 3 * output_step(onnx.load(target))


def test_qdq_fusion_needs_an_int8_cube_on_the_soc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a SoC whose Conv2D kernel does not read int8 the QDQ convolutions stay float."""
    path = quantized(tmp_path, small_cnn())

    def conv_input_dtypes() -> list[str]:
        module, _ = ge.load_onnx(str(path))
        quant_fusion.QuantCubeFusionPass(soc_version=SOC).apply(ir.context(), module)
        return [str(ag.dtype_of(op.x.type)) for op in module.walk() if isinstance(op, ag.Conv2DOp)]

    assert conv_input_dtypes() == ["i8", "i8"]
    doc = json.loads((Path(opinfo.__file__).parent / f"{SOC}.json").read_text())
    conv = doc["ops"]["Conv2D"]["aicore"]
    keep = [i for i, d in enumerate(conv["x"].split(",")) if d != "int8"]
    doc["ops"]["Conv2D"]["aicore"] = {k: ",".join(v.split(",")[i] for i in keep) for k, v in conv.items()}
    monkeypatch.setattr(quant_fusion.opinfo, "load", lambda soc: opinfo.parse(doc))
    assert conv_input_dtypes() == ["f32", "f32"]


def test_integer_sums_keep_float32_under_force_fp16() -> None:
    """onnxruntime's dynamic quantization scales MatMulInteger's int32 sums after a Cast
    to float: sums beyond 65504 must not pass through float16 on their way (they were
    inf, then NaN, under force_fp16)."""
    rng = np.random.default_rng(0)
    a = helper.make_tensor_value_info("a", TensorProto.INT8, [4, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])
    w = numpy_helper.from_array(rng.integers(100, 127, (64, 8)).astype(np.int8), "w")
    scale = numpy_helper.from_array(np.array(1e-4, np.float32), "scale")
    nodes = [
        helper.make_node("MatMulInteger", ["a", "w"], ["sums"]),
        helper.make_node("Cast", ["sums"], ["sums_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["sums_f", "scale"], ["y"]),
    ]
    model = helper.make_model(helper.make_graph(nodes, "dyn", [a], [y], [w, scale]), opset_imports=[helper.make_opsetid("", 13)])
    feeds = {"a": rng.integers(100, 127, (4, 64)).astype(np.int8)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(["y"], feeds)[0]
    assert np.abs(feeds["a"].astype(np.int64) @ numpy_helper.to_array(w).astype(np.int64)).max() > 65504
    compiled = ge.compile(ge.load_onnx(model)[0], {"soc_version": "Ascend310P3", "precision_mode": "force_fp16"})
    with ge.Session() as session:
        got = session.run(compiled, feeds).outputs["y"]
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=2e-3)
