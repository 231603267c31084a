"""The elementwise, bitwise, triangular, cumulative, one-hot and determinant ops: each ONNX
op imported, run by the reference interpreter and compiled and simulated, both equal to
onnxruntime on the same model; and the models they refuse, with the reason."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnxruntime.capi.onnxruntime_pybind11_state import (
    NotImplemented as OrtNotImplemented,
)
from xdsl.dialects.builtin import StringAttr

import ge
from dialects import ascend_graph as ag
from ge.core import dtypes, opinfo
from ge.core.ir import graph_of
from ge.core.options import AICPU_ENGINE
from ge.core.precision_files import resolve
from ge.testing.refusals import refused as refusal
from passes.precision_selection import ENGINE, select_precision

RNG = np.random.default_rng(7)
COMPILE = {"precision_mode": "must_keep_origin_dtype", "soc_version": "Ascend910B1"}


def model(
    op_type: str,
    feeds: Mapping[str, np.ndarray],
    inputs: Sequence[str] | None = None,
    consts: Mapping[str, np.ndarray] | None = None,
    opset: int = 21,
    outputs: int = 1,
    **attrs: object,
) -> onnx.ModelProto:
    """One node of `op_type` reading `inputs` (graph inputs `feeds`, initializers `consts`)."""
    consts = dict(consts or {})
    names = list(inputs) if inputs is not None else [*feeds, *consts]
    outs = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op_type, names, outs, name="node", **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()],
        [helper.make_empty_tensor_value_info(o) for o in outs],
        initializer=[numpy_helper.from_array(v, k) for k, v in consts.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def oracle(m: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime's results; where it has no kernel for the node (Swish at opset 26,
    BitCast from bool, OneHot with int32 or float depth), the ONNX reference
    evaluator's, which generated the backend node tests."""
    try:
        session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    except OrtNotImplemented:
        return [np.asarray(v) for v in ReferenceEvaluator(m).run(None, dict(feeds))]
    return session.run(None, dict(feeds))


def tolerance(dtype: np.dtype) -> dict[str, float]:
    if dtype == np.float16:
        return {"rtol": 2e-3, "atol": 1e-3}
    if dtype == np.float32:
        return {"rtol": 1e-5, "atol": 1e-6}
    return {"rtol": 1e-12, "atol": 0.0}


def assert_same(got: Mapping[str, np.ndarray], want: Sequence[np.ndarray]) -> None:
    for i, expected in enumerate(want):
        actual = got[f"y{i}"]
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual.dtype, actual.shape)
        if expected.dtype.kind == "f":
            np.testing.assert_allclose(actual, expected, equal_nan=True, **tolerance(expected.dtype))
        else:
            np.testing.assert_array_equal(actual, expected)


def check(m: onnx.ModelProto, feeds: Mapping[str, np.ndarray], tmp_path: Path, compiled: bool = True) -> ge.Model | None:
    """The reference interpreter, and the compiled model on the simulator, equal onnxruntime."""
    path = tmp_path / "model.onnx"
    onnx.save(m, path)
    want = oracle(m, feeds)
    module, _ = ge.load_onnx(str(path))
    assert_same(ge.reference.run(module, dict(feeds)), want)
    if not compiled:
        return None
    om = ge.compile(str(path), COMPILE)
    with ge.Session() as session:
        assert_same(session.run(om, dict(feeds)).outputs, want)
    return om


def refused(m: onnx.ModelProto, *fragments: str) -> None:
    """Refused, naming the node."""
    refusal(m, "node 'node'", *fragments)


def ints(low: int, high: int, shape: Sequence[int], dtype: type) -> np.ndarray:
    return RNG.integers(low, high, shape).astype(dtype)


def floats(shape: Sequence[int], dtype: type = np.float32, low: float = -3.0, high: float = 3.0) -> np.ndarray:
    return RNG.uniform(low, high, shape).astype(dtype)


def op_types(m: onnx.ModelProto) -> list[str]:
    """The op types the model imports as, but its inputs, constants and outputs."""
    module, _ = ge.load_onnx(m)
    structural = (ag.DataOp, ag.ConstOp, ag.NetOutputOp)
    return [op.OP_TYPE for op in graph_of(module).body.block.ops if isinstance(op, ag.AscendOp) and not isinstance(op, structural)]


# --------------------------------------------------------------------------------- Mod


def nonzero(shape: Sequence[int], dtype: type, low: int = -9, high: int = 10) -> np.ndarray:
    values = ints(low, high, shape, dtype)
    return np.where(values == 0, 1, values).astype(dtype)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize(
    ("dtype", "fmod", "shapes_"),
    [
        (np.int32, 0, ([3, 4], [3, 4])),
        (np.int64, 0, ([2, 3, 4], [4])),
        (np.int8, 1, ([3, 4], [3, 4])),
        (np.int64, 1, ([6], [6])),
        (np.uint8, 0, ([5], [5])),
        (np.float32, 1, ([3, 4], [1, 4])),
        (np.float16, 1, ([6], [6])),
    ],
)
def test_mod_mixed_signs(tmp_path: Path, opset: int, dtype: type, fmod: int, shapes_: tuple) -> None:
    kind = np.dtype(dtype).kind
    if kind == "f":
        sign = np.where(RNG.random(shapes_[1]) < 0.5, -1, 1).astype(dtype)
        feeds = {"a": floats(shapes_[0], dtype, -10, 10), "b": floats(shapes_[1], dtype, 0.5, 4) * sign}
    elif kind == "u":
        feeds = {"a": nonzero(shapes_[0], dtype, 0, 100), "b": nonzero(shapes_[1], dtype, 1)}
    else:
        feeds = {"a": nonzero(shapes_[0], dtype, -100, 100), "b": nonzero(shapes_[1], dtype)}
    m = model("Mod", feeds, opset=opset, fmod=fmod)
    assert op_types(m)[-1] == ("Mod" if fmod else "FloorMod")
    check(m, feeds, tmp_path)


def test_mod_wide_unsigned_integers_run_on_ai_cpu(tmp_path: Path) -> None:
    feeds = {"a": ints(0, 60000, [8], np.uint16), "b": ints(1, 300, [8], np.uint16)}
    check(model("Mod", feeds), feeds, tmp_path)


def test_mod_refuses_floored_remainder_of_floats() -> None:
    feeds = {"a": floats([2]), "b": floats([2])}
    refused(model("Mod", feeds), "fmod=0 is defined for integers only", "float32 inputs need fmod=1")


# ----------------------------------------------------------------------- bit operations


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_bit_shift(tmp_path: Path, direction: str, dtype: type) -> None:
    bits = np.dtype(dtype).itemsize * 8
    feeds = {"x": ints(0, 200, [3, 4], dtype), "s": ints(0, bits - 1, [4], dtype)}
    m = model("BitShift", feeds, opset=11, direction=direction)
    assert op_types(m)[-1] == ("LeftShift" if direction == "LEFT" else "RightShift")
    check(m, feeds, tmp_path)


def test_bit_shift_refuses_an_unknown_direction() -> None:
    feeds = {"x": ints(0, 9, [2], np.uint8), "s": ints(0, 3, [2], np.uint8)}
    refused(model("BitShift", feeds, opset=11, direction="UP"), "direction 'UP' is not LEFT or RIGHT")


@pytest.mark.parametrize("op_type", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize(
    ("dtype", "shapes_"),
    [(np.int8, ([3, 4], [3, 4])), (np.int32, ([2, 3, 4], [4])), (np.uint16, ([4], [4])), (np.uint64, ([2, 3], [3]))],
)
@pytest.mark.parametrize("opset", [18, 21])
def test_bitwise_binary(tmp_path: Path, op_type: str, dtype: type, shapes_: tuple, opset: int) -> None:
    info = np.iinfo(dtype)
    feeds = {"a": ints(max(info.min, -(2**31)), min(info.max, 2**31), shapes_[0], dtype),
             "b": ints(max(info.min, -(2**31)), min(info.max, 2**31), shapes_[1], dtype)}
    check(model(op_type, feeds, opset=opset), feeds, tmp_path)


@pytest.mark.parametrize("opset", [18, 21])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64, np.uint32])
def test_bitwise_not(tmp_path: Path, dtype: type, opset: int) -> None:
    info = np.iinfo(dtype)
    feeds = {"x": ints(max(info.min, -(2**31)), min(info.max, 2**31), [3, 5], dtype)}
    m = model("BitwiseNot", feeds, opset=opset)
    assert op_types(m)[-1] == "Invert"
    check(m, feeds, tmp_path)


def test_bitwise_ops_refuse_floats() -> None:
    feeds = {"a": floats([2]), "b": floats([2])}
    refused(model("BitwiseAnd", feeds, opset=18), "input 0 ('a') is float, which BitwiseAnd does not accept")


# ------------------------------------------------------------------------- IsNaN, IsInf


def special(shape: Sequence[int], dtype: type) -> np.ndarray:
    x = floats(shape, dtype).reshape(-1)
    x[::3] = np.inf
    x[1::5] = -np.inf
    x[2::7] = np.nan
    return x.reshape(shape)


@pytest.mark.parametrize("opset", [13, 20])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_is_nan(tmp_path: Path, opset: int, dtype: type) -> None:
    feeds = {"x": special([4, 6], dtype)}
    check(model("IsNaN", feeds, opset=opset), feeds, tmp_path)


@pytest.mark.parametrize(("opset", "dtype"), [(11, np.float32), (20, np.float32), (20, np.float16)])
@pytest.mark.parametrize(("positive", "negative"), [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_is_inf(tmp_path: Path, opset: int, dtype: type, positive: int, negative: int) -> None:
    """IsInf-10 reads float32 and float64; IsInf-20 adds float16."""
    feeds = {"x": special([4, 6], dtype)}
    check(model("IsInf", feeds, opset=opset, detect_positive=positive, detect_negative=negative), feeds, tmp_path)


# -------------------------------------------------------------------- trigonometric ops

DOMAINS = {
    "Tan": (-1.4, 1.4), "Asin": (-0.99, 0.99), "Acos": (-0.99, 0.99), "Atan": (-10, 10), "Sinh": (-5, 5),
    "Cosh": (-5, 5), "Asinh": (-50, 50), "Acosh": (1, 50), "Atanh": (-0.99, 0.99),
}


@pytest.mark.parametrize("opset", [13, 22])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op_type", sorted(DOMAINS))
def test_trigonometric_and_hyperbolic(tmp_path: Path, opset: int, dtype: type, op_type: str) -> None:
    feeds = {"x": floats([3, 7], dtype, *DOMAINS[op_type])}
    m = model(op_type, feeds, opset=opset)
    assert op_types(m)[-1] == op_type
    check(m, feeds, tmp_path)


def test_trigonometric_outside_the_domain_is_nan(tmp_path: Path) -> None:
    feeds = {"x": np.array([-2.0, 0.5, 2.0], np.float32)}
    check(model("Asin", feeds), feeds, tmp_path)


# ------------------------------------------------------------------------- activations


@pytest.mark.parametrize("opset", [11, 22])
@pytest.mark.parametrize("alpha", [None, 0.5, -1.0])
def test_thresholded_relu(tmp_path: Path, opset: int, alpha: float | None) -> None:
    feeds = {"x": floats([4, 5])}
    attrs = {} if alpha is None else {"alpha": alpha}
    check(model("ThresholdedRelu", feeds, opset=opset, **attrs), feeds, tmp_path)


@pytest.mark.parametrize("opset", [11, 21])
@pytest.mark.parametrize(
    ("dtype", "attrs"),
    [
        (np.float32, {}),
        (np.float32, {"lambd": 1.5}),
        (np.float32, {"lambd": 1.0, "bias": 1.0}),
        (np.float16, {"lambd": 0.5, "bias": 0.5}),
        (np.int8, {"lambd": 2.0, "bias": 1.5}),
        (np.int32, {"lambd": 3.0, "bias": 2.0}),
    ],
)
def test_shrink_hard_and_soft(tmp_path: Path, opset: int, dtype: type, attrs: dict) -> None:
    x = floats([4, 6], dtype) if np.dtype(dtype).kind == "f" else ints(-9, 10, [4, 6], dtype)
    feeds = {"x": x}
    # integers run on AI CPU only, as the op information says; the AI Core takes floats
    check(model("Shrink", feeds, opset=opset, **attrs), feeds, tmp_path)


@pytest.mark.parametrize("opset", [24, 26])
@pytest.mark.parametrize("alpha", [None, 0.5, 2.0])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_swish(tmp_path: Path, opset: int, alpha: float | None, dtype: type) -> None:
    feeds = {"x": floats([3, 8], dtype, -8, 8)}
    attrs = {} if alpha is None else {"alpha": alpha}
    m = model("Swish", feeds, opset=opset, **attrs)
    assert op_types(m)[-1] == "Swish"
    check(m, feeds, tmp_path)


# ------------------------------------------------------------------------------ Hardmax


@pytest.mark.parametrize(
    ("opset", "axis", "axes"),
    [
        (11, None, (1, 2)),  # before 13: the trailing axes from `axis` (default 1) as one
        (11, 0, (0, 1, 2)),
        (11, -1, (2,)),
        (13, None, (2,)),  # from 13: the one axis (default -1)
        (13, 0, (0,)),
        (13, 1, (1,)),
        (13, -2, (1,)),
    ],
)
def test_hardmax_axis_semantics_by_opset(tmp_path: Path, opset: int, axis: int | None, axes: tuple) -> None:
    x = np.round(floats([2, 3, 4]), 0)  # ties: the first maximum wins
    feeds = {"x": x}
    attrs = {} if axis is None else {"axis": axis}
    m = model("Hardmax", feeds, opset=opset, **attrs)
    module, _ = ge.load_onnx(m)
    (op,) = [op for op in graph_of(module).body.block.ops if isinstance(op, ag.HardmaxOp)]
    assert op.props.ints("axes") == axes
    check(m, feeds, tmp_path)


# -------------------------------------------------------------------------------- Trilu


@pytest.mark.parametrize("opset", [14, 21])
@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 0, 1, -1, 3, -5])
@pytest.mark.parametrize(("shape", "dtype"), [([4, 5], np.float32), ([2, 3, 4], np.int64), ([5, 3], np.bool_)])
def test_trilu(tmp_path: Path, opset: int, upper: int, k: int | None, shape: list[int], dtype: type) -> None:
    feeds = {"x": ints(-5, 6, shape, dtype) if dtype != np.bool_ else RNG.random(shape) < 0.7}
    consts = {} if k is None else {"k": np.array(k, np.int64)}
    m = model("Trilu", feeds, consts=consts, opset=opset, upper=upper)
    assert op_types(m)[-1] == ("Triu" if upper else "Tril")
    check(m, feeds, tmp_path)


def test_trilu_refuses_a_vector() -> None:
    refused(model("Trilu", {"x": floats([3])}, opset=14), "needs a matrix (rank >= 2)")


# -------------------------------------------------------------------- CumSum, CumProd


@pytest.mark.parametrize(("op_type", "opset"), [("CumSum", 11), ("CumSum", 14), ("CumProd", 26)])
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize(("axis", "dtype"), [(0, np.float32), (1, np.float64), (-1, np.int32), (2, np.int64)])
def test_cumulative(tmp_path: Path, op_type: str, opset: int, exclusive: int, reverse: int, axis: int, dtype: type) -> None:
    x = floats([2, 3, 4], dtype, 0.5, 1.5) if np.dtype(dtype).kind == "f" else ints(-4, 5, [2, 3, 4], dtype)
    feeds = {"x": x}
    m = model(op_type, feeds, consts={"axis": np.array(axis, np.int64)}, opset=opset, exclusive=exclusive, reverse=reverse)
    assert op_types(m)[-1] == ("Cumsum" if op_type == "CumSum" else "Cumprod")
    check(m, feeds, tmp_path)


# ------------------------------------------------------------------------------ BitCast


@pytest.mark.parametrize(
    ("source", "target", "shape"),
    [
        (np.float32, np.int32, [3, 4]),
        (np.int32, np.float32, [5]),
        (np.float64, np.uint64, [2, 2]),
        (np.uint16, np.int16, [6]),
        (np.float16, np.uint16, [2, 3]),
        (np.int8, np.uint8, [7]),
        (np.bool_, np.uint8, [4]),
        (np.float32, np.float32, [3]),
    ],
)
def test_bitcast(tmp_path: Path, source: type, target: type, shape: list[int]) -> None:
    if np.dtype(source) == np.bool_:
        x = RNG.random(shape) < 0.5
    elif np.dtype(source).kind == "f":
        x = floats(shape, source)
    else:
        x = ints(-100 if np.dtype(source).kind == "i" else 0, 100, shape, source)
    feeds = {"x": x}
    m = model("BitCast", feeds, opset=26, to=helper.np_dtype_to_tensor_dtype(np.dtype(target)))
    assert op_types(m)[-1] == ("Identity" if source == target else "Bitcast")
    check(m, feeds, tmp_path)


def test_bitcast_is_a_view_that_launches_no_kernel(tmp_path: Path) -> None:
    """Relu then BitCast: one kernel, and the BitCast's result is the Relu's bytes."""
    feeds = {"x": floats([4, 8])}
    relu = helper.make_node("Relu", ["x"], ["r"], name="relu")
    cast = helper.make_node("BitCast", ["r"], ["y0"], name="node", to=TensorProto.INT32)
    graph = helper.make_graph(
        [relu, cast], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_empty_tensor_value_info("y0")],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)], ir_version=10)
    om = check(m, feeds, tmp_path)
    assert om is not None
    assert [t.KIND for t in om.tasks].count("KERNEL") == 1


def test_bitcast_keeps_its_dtypes_under_mixed_precision(tmp_path: Path) -> None:
    """Precision selection never lowers a bitcast's float32 input: its bits are the result."""
    feeds = {"x": floats([16])}
    m = model("BitCast", feeds, opset=26, to=TensorProto.INT32)
    path = tmp_path / "model.onnx"
    onnx.save(m, path)
    (want,) = oracle(m, feeds)
    for mode in ("force_fp16", "allow_mix_precision", "allow_fp32_to_fp16"):
        om = ge.compile(str(path), {"precision_mode": mode, "soc_version": "Ascend910B1"})
        with ge.Session() as session:
            np.testing.assert_array_equal(session.run(om, feeds).outputs["y0"], want)


def test_bitcast_refuses_another_width() -> None:
    refused(model("BitCast", {"x": floats([2])}, opset=26, to=TensorProto.INT64), "BitCast needs the same width")


# ------------------------------------------------------------------------------- OneHot


@pytest.mark.parametrize("axis", [None, 0, 1, -2, -3])
@pytest.mark.parametrize(
    ("index_dtype", "depth", "values"),
    [
        (np.int64, np.array(5, np.int64), np.array([0, 1], np.float32)),
        (np.int64, np.array([6], np.int64), np.array([-2, 7], np.int64)),
        (np.int32, np.array(4, np.int32), np.array([1, 3], np.float32)),
        (np.float32, np.array(4.0, np.float32), np.array([-1, 2], np.float32)),
        (np.int64, np.array(3, np.int64), np.array([0.5, -1.5], np.float16)),
    ],
)
def test_one_hot(tmp_path: Path, axis: int | None, index_dtype: type, depth: np.ndarray, values: np.ndarray) -> None:
    """Negative indices count from depth; one outside [-depth, depth) sets nothing."""
    n = int(depth.reshape(-1)[0])
    indices = RNG.integers(-n - 1, n + 1, [2, 3]).astype(index_dtype)
    feeds = {"indices": indices}
    attrs = {} if axis is None else {"axis": axis}
    m = model("OneHot", feeds, ["indices", "depth", "values"], {"depth": depth, "values": values}, opset=11, **attrs)
    check(m, feeds, tmp_path)


def test_one_hot_refuses_a_computed_or_empty_depth() -> None:
    feeds = {"indices": np.array([0, 1], np.int64), "depth": np.array(3, np.int64)}
    values = {"values": np.array([0, 1], np.float32)}
    refused(model("OneHot", feeds, ["indices", "depth", "values"], values, opset=11), "(depth, 'depth') must be a constant")
    consts = {"depth": np.array(0, np.int64), **values}
    refused(model("OneHot", {"indices": feeds["indices"]}, ["indices", "depth", "values"], consts, opset=11), "depth must be a positive scalar")


def test_one_hot_refuses_values_that_are_not_a_pair() -> None:
    consts = {"depth": np.array(3, np.int64), "values": np.array([0, 1, 2], np.float32)}
    m = model("OneHot", {"indices": np.array([0, 1], np.int64)}, ["indices", "depth", "values"], consts, opset=11)
    refused(m, "values must hold [off, on], got shape [3]")


def test_one_hot_refuses_an_axis_out_of_range() -> None:
    consts = {"depth": np.array(3, np.int64), "values": np.array([0, 1], np.float32)}
    m = model("OneHot", {"indices": np.array([0, 1], np.int64)}, ["indices", "depth", "values"], consts, opset=11, axis=2)
    refused(m, "axis 2 is outside [-2, 1]")


# ---------------------------------------------------------------------------------- Det


@pytest.mark.parametrize("opset", [11, 22])
@pytest.mark.parametrize("shape", [[3, 3], [2, 4, 4], [2, 2, 1, 1]])
def test_det(tmp_path: Path, opset: int, shape: list[int]) -> None:
    """MatrixDeterminant has an AI CPU kernel only: precision selection places it there,
    and the compile still gives it a vector program to time."""
    feeds = {"x": floats(shape)}
    m = model("Det", feeds, opset=opset)
    assert op_types(m)[-1] == "MatrixDeterminant"
    check(m, feeds, tmp_path)


def test_det_refuses_a_non_square_matrix() -> None:
    refused(model("Det", {"x": floats([2, 3])}), "needs square matrices in the last two dims")


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_det_is_placed_on_ai_cpu(dtype: type) -> None:
    """The op information gives MatrixDeterminant no AI Core kernel: precision selection
    keeps its dtype and marks it for GE's AI CPU engine."""
    module, _ = ge.load_onnx(model("Det", {"x": floats([2, 3, 3], dtype)}))
    select_precision(module, opinfo.load("Ascend910B1"), resolve(precision_mode="must_keep_origin_dtype"))
    (det,) = [op for op in graph_of(module).body.block.ops if isinstance(op, ag.MatrixDeterminantOp)]
    assert det.attributes[ENGINE] == StringAttr(AICPU_ENGINE)
    assert ag.dtype_of(det.x.type) == dtypes.from_numpy(np.dtype(dtype))


# ------------------------------------------------------------------ in a real pipeline


@pytest.mark.parametrize(
    ("soc", "mode", "tol"),
    [
        ("Ascend910B1", "must_keep_origin_dtype", 1e-5),
        ("Ascend310P3", "force_fp16", 1e-2),
        ("Ascend910B1", "allow_mix_precision", 1e-2),
    ],
)
def test_after_a_convolution_in_device_formats(tmp_path: Path, soc: str, mode: str, tol: float) -> None:
    """A Conv2D's NC1HWC0 result through Atan and a soft Shrink (elementwise: fusable as
    its tail), then Hardmax, CumSum, IsNaN and Trilu (each in its own kernel), in the
    precision mode's dtypes. Its own random values: the 16-bit modes are checked within
    their rounding, which a test order must not move across a discontinuity."""
    rng = np.random.default_rng(11)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Atan", ["c"], ["a"], name="atan"),
        helper.make_node("Shrink", ["a"], ["s"], name="shrink", lambd=0.3, bias=0.3),  # soft: continuous
        helper.make_node("Hardmax", ["s"], ["h"], name="hardmax", axis=1),
        helper.make_node("CumSum", ["s", "axis"], ["cs"], name="cumsum"),
        helper.make_node("IsNaN", ["c"], ["n"], name="isnan"),
        helper.make_node("Trilu", ["s"], ["t"], name="trilu", upper=0),
    ]
    weights = rng.uniform(-1, 1, [16, 3, 3, 3]).astype(np.float32)
    consts = [numpy_helper.from_array(weights, "w"), numpy_helper.from_array(np.array(1, np.int64), "axis")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_empty_tensor_value_info(o) for o in ("s", "h", "cs", "n", "t")], initializer=consts,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    path = tmp_path / "model.onnx"
    onnx.save(m, path)
    feeds = {"x": rng.uniform(-1, 1, [1, 3, 8, 8]).astype(np.float32)}
    want = dict(zip(("s", "h", "cs", "n", "t"), oracle(m, feeds)))
    om = ge.compile(str(path), {"soc_version": soc, "precision_mode": mode})
    with ge.Session() as session:
        got = session.run(om, feeds).outputs
    np.testing.assert_array_equal(got["n"], want["n"])
    assert (got["h"].sum(axis=1) == 1).all()  # one-hot along the axis, at a maximum up to the dtype's rounding
    picked = np.take_along_axis(want["s"], got["h"].argmax(axis=1)[:, None], axis=1)
    np.testing.assert_allclose(picked, want["s"].max(axis=1, keepdims=True), rtol=tol, atol=tol)
    if mode == "must_keep_origin_dtype":
        np.testing.assert_array_equal(got["h"], want["h"])
    for name in ("s", "cs", "t"):
        assert got[name].dtype == np.float32
        np.testing.assert_allclose(got[name], want[name], rtol=tol, atol=tol)

