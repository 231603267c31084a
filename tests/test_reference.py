"""The reference interpreter against onnxruntime, on one-op graphs built with the
dialect's constructors, plus hand-checked edge semantics and input validation."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import helper
from xdsl.builder import ImplicitBuilder
from xdsl.dialects.builtin import DenseArrayBase, DenseIntOrFPElementsAttr, ModuleOp, StringAttr, f64
from xdsl.ir import Block, Operation, Region, SSAValue

from dialects.ascend_graph import (
    AbsOp, AddOp, ArgMaxOp, ArgMinOp, AvgPoolOp, BatchMatMulOp, BatchNormOp, CastOp, CeilOp,
    ClipByValueOp, ConcatOp, ConstOp, Conv2DOp, CosOp, DataOp, DepthToSpaceOp, DivOp, EluOp,
    EqualOp, ErfOp, ExpandOp, ExpOp, FlattenOp, FloorOp, GatherElementsOp, GatherOp, GeluOp,
    GemmOp, GlobalAveragePoolOp, GlobalMaxPoolOp, GraphOp, GreaterEqualOp, GreaterOp,
    HardSigmoidOp, HardSwishOp, IdentityOp, InstanceNormOp, LayerNormOp, LeakyReluOp,
    LessEqualOp, LessOp, LogicalAndOp, LogicalNotOp, LogicalOrOp, LogicalXorOp, LogOp,
    LogSoftmaxOp, MatMulV2Op, MaximumOp, MaxPoolOp, MinimumOp, MulOp, NegOp, NetOutputOp, PadOp,
    PowOp, PReluOp, ReciprocalOp, ReduceMaxOp, ReduceMeanOp, ReduceMinOp, ReduceProdOp,
    ReduceSumOp, ReluOp, ReshapeOp, ResizeOp, RoundOp, RsqrtOp, SelectOp, SeluOp, SigmoidOp,
    SignOp, SinOp, SoftmaxOp, SoftplusOp, SoftsignOp, SpaceToDepthOp, SplitOp, SplitVOp, SqrtOp,
    SqueezeOp, StridedSliceOp, SubOp, TanhOp, TileOp, TransposeOp, UnsqueezeOp, bool_attr,
    float_attr, int_attr, ints, tensor,
)
from dialects.shapes import DYN
from ge.core import dtypes, reference
from ge.core.errors import GEError, InputError, ModelError
from ge.core.weights import WeightStore, attach

BF16 = np.dtype(ml_dtypes.bfloat16)

# ------------------------------------------------------------------------ helpers


def module_of(
    inputs: Sequence[tuple[str, np.dtype, Sequence[int]]],
    body: Callable[..., Operation | SSAValue | Sequence[Operation | SSAValue]],
) -> ModuleOp:
    """A verified module whose graph feeds Data ops to `body` and outputs what it returns."""
    block = Block()
    with ImplicitBuilder(block):
        datas = [DataOp(i, tensor(dtypes.from_numpy(dt), shape), name) for i, (name, dt, shape) in enumerate(inputs)]
        outs = body(*(d.out for d in datas))
        outs = list(outs) if isinstance(outs, list | tuple) else [outs]
        NetOutputOp(outs, [f"y{i}" for i in range(len(outs))])
    module = ModuleOp([GraphOp("main", Region(block))])
    module.verify()
    return module


def ref(body: Callable[..., object], *arrays: np.ndarray) -> list[np.ndarray]:
    """Run a graph of `body` over arrays fed as Data x0, x1, ..."""
    module = module_of([(f"x{i}", a.dtype, a.shape) for i, a in enumerate(arrays)], body)
    return list(reference.run(module, list(arrays)).values())


def ort_run(op_type: str, inputs: Sequence[np.ndarray | None], n_out: int = 1, opset: int = 21, **attrs) -> list[np.ndarray]:
    """One ONNX node in onnxruntime; every array is a graph input, None an omitted one."""
    names = ["" if a is None else f"i{k}" for k, a in enumerate(inputs)]
    node = helper.make_node(op_type, names, [f"o{k}" for k in range(n_out)], **attrs)
    infos = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for n, a in zip(names, inputs)
        if a is not None
    ]
    graph = helper.make_graph([node], "g", infos, [helper.make_empty_tensor_value_info(f"o{k}") for k in range(n_out)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {n: a for n, a in zip(names, inputs) if a is not None})


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)


def rand(shape: Sequence[int], dtype: np.dtype = np.float32, seed: int = 0, low: float = -3, high: float = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(low, high, size=shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) < 0.5
    return rng.uniform(low, high, size=shape).astype(dtype)


def strs(value: str) -> StringAttr:
    return StringAttr(value)


# ------------------------------------------------------------------- elementwise

BINARY = [
    (AddOp, "Add"), (SubOp, "Sub"), (MulOp, "Mul"), (DivOp, "Div"),
    (MaximumOp, "Max"), (MinimumOp, "Min"), (PowOp, "Pow"),
]


@pytest.mark.parametrize("cls,onnx_op", BINARY)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
@settings(max_examples=10)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4))
def test_binary_broadcasting_matches_onnxruntime(cls, onnx_op, dtype, shapes):
    a_shape, b_shape = shapes.input_shapes
    a = rand(a_shape, dtype, 1, -9, 9)
    b = rand(b_shape, dtype, 2, -9, 9)
    if onnx_op == "Pow":
        a, b = rand(a_shape, dtype, 1, 0, 4), rand(b_shape, dtype, 2, 0, 4)
    if onnx_op == "Div" and np.dtype(dtype).kind == "i":
        b = np.where(b == 0, 3, b).astype(dtype)
    (got,) = ref(lambda x, y: cls([x, y]), a, b)
    (want,) = ort_run(onnx_op, [a, b])
    assert_close(got, want, rtol=1e-3 if dtype == np.float16 else 1e-5)


@pytest.mark.parametrize(
    "cls,onnx_op",
    [(EqualOp, "Equal"), (LessOp, "Less"), (LessEqualOp, "LessOrEqual"), (GreaterOp, "Greater"), (GreaterEqualOp, "GreaterOrEqual")],
)
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_comparisons_match_onnxruntime(cls, onnx_op, dtype):
    a, b = rand((3, 4), dtype, 1, -2, 2).round(), rand((4,), dtype, 2, -2, 2).round()
    (got,) = ref(lambda x, y: cls([x, y]), a, b)
    assert_close(got, ort_run(onnx_op, [a, b])[0])


@pytest.mark.parametrize("cls,onnx_op", [(LogicalAndOp, "And"), (LogicalOrOp, "Or"), (LogicalXorOp, "Xor")])
def test_logical_binaries_match_onnxruntime(cls, onnx_op):
    a, b = rand((2, 3), np.bool_, 1), rand((3,), np.bool_, 2)
    (got,) = ref(lambda x, y: cls([x, y]), a, b)
    assert_close(got, ort_run(onnx_op, [a, b])[0])
    (got,) = ref(lambda x: LogicalNotOp([x]), a)
    assert_close(got, ort_run("Not", [a])[0])


def test_prelu_broadcasts_slope_per_channel():
    x, slope = rand((2, 3, 4, 5)), rand((3, 1, 1), seed=5)
    (got,) = ref(lambda a, s: PReluOp([a, s]), x, slope)
    assert_close(got, ort_run("PRelu", [x, slope])[0])


UNARY = [
    (NegOp, "Neg", {}, {}), (AbsOp, "Abs", {}, {}), (SignOp, "Sign", {}, {}), (ReluOp, "Relu", {}, {}),
    (IdentityOp, "Identity", {}, {}), (SqrtOp, "Sqrt", {}, {"low": 0}), (ExpOp, "Exp", {}, {}),
    (LogOp, "Log", {}, {"low": 0.01}), (ReciprocalOp, "Reciprocal", {}, {"low": 0.1}), (TanhOp, "Tanh", {}, {}),
    (SigmoidOp, "Sigmoid", {}, {"low": -30, "high": 30}), (SinOp, "Sin", {}, {}), (CosOp, "Cos", {}, {}),
    (FloorOp, "Floor", {}, {}), (CeilOp, "Ceil", {}, {}), (RoundOp, "Round", {}, {}),
    (SoftplusOp, "Softplus", {}, {"low": -30, "high": 30}), (SoftsignOp, "Softsign", {}, {}),
    (HardSwishOp, "HardSwish", {}, {"low": -5, "high": 5}), (ErfOp, "Erf", {}, {}),
    (GeluOp, "Gelu", {}, {}),
    (GeluOp, "Gelu", {"approximate": strs("tanh")}, {"atol": 1e-6}),  # onnxruntime cancels in float32
    (LeakyReluOp, "LeakyRelu", {"negative_slope": float_attr(0.1)}, {}),
    (EluOp, "Elu", {"alpha": float_attr(0.7)}, {}),
    (SeluOp, "Selu", {"alpha": float_attr(1.67326), "gamma": float_attr(1.0507)}, {}),
    (HardSigmoidOp, "HardSigmoid", {"alpha": float_attr(0.3), "beta": float_attr(0.4)}, {}),
]
ONNX_ATTRS = {"negative_slope": "alpha", "approximate": "approximate", "alpha": "alpha", "gamma": "gamma", "beta": "beta"}


@pytest.mark.parametrize("cls,onnx_op,props,opts", UNARY, ids=[u[1] + ("-tanh" if "approximate" in u[2] else "") for u in UNARY])
def test_unary_float32_matches_onnxruntime(cls, onnx_op, props, opts):
    x = rand((4, 257), np.float32, 3, opts.get("low", -6), opts.get("high", 6))
    x[0, :5] = [0.5, 1.5, 2.5, -0.5, -2.5]  # Round's ties
    (got,) = ref(lambda a: cls([a], props), x)
    attrs = {ONNX_ATTRS[k]: (v.data if isinstance(v, StringAttr) else v.value.data) for k, v in props.items()}
    (want,) = ort_run(onnx_op, [x], **attrs)
    assert_close(got, want, rtol=2e-6, atol=opts.get("atol", 2e-7))


def test_gelu_is_exact_where_its_formula_cancels():
    x = np.array([-4.880494594573975, -9.0, -2.0, 0.5, 3.0], np.float32)
    wide = x.astype(np.float64)
    z = math.sqrt(2 / math.pi) * (wide + 0.044715 * wide**3)
    (tanh_form,) = ref(lambda a: GeluOp([a], {"approximate": strs("tanh")}), x)
    np.testing.assert_array_equal(tanh_form, (wide / (1 + np.exp(-2 * z))).astype(np.float32))
    (erf_form,) = ref(lambda a: GeluOp([a]), x)
    want = [0.5 * v * math.erfc(-v / math.sqrt(2)) for v in wide]
    np.testing.assert_allclose(erf_form, want, rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize("cls,onnx_op", [(ErfOp, "Erf"), (TanhOp, "Tanh"), (SigmoidOp, "Sigmoid"), (ExpOp, "Exp")])
def test_unary_float16_matches_onnxruntime(cls, onnx_op):
    x = rand((1000,), np.float16, 4, -4, 4)
    (got,) = ref(lambda a: cls([a]), x)
    assert_close(got, ort_run(onnx_op, [x])[0], rtol=1e-3, atol=1e-3)


def test_rsqrt_is_one_over_sqrt():
    x = np.array([0.25, 4.0, 2.0, 0.0, -1.0], np.float32)
    (got,) = ref(lambda a: RsqrtOp([a]), x)
    np.testing.assert_array_equal(got, np.array([2.0, 0.5, 1 / np.sqrt(np.float32(2)), np.inf, np.nan], np.float32))


def test_erf_and_erfc_are_within_a_few_ulp_of_math():
    rng = np.random.default_rng(7)
    x = np.concatenate(
        [rng.normal(0, 3, 20000), rng.uniform(-7, 7, 20000), np.logspace(-300, 1, 500), -np.logspace(-300, 1, 500), [0.0, 6.0, 5.999, 0.0078125]]
    )
    want = np.array([math.erf(v) for v in x])
    ulps = np.abs(reference.erf(x) - want) / np.spacing(np.abs(want))
    assert ulps.max() <= 2
    edges = reference.erf(np.array([np.inf, -np.inf, np.nan, -0.0]))
    assert edges[0] == 1 and edges[1] == -1 and np.isnan(edges[2]) and np.signbit(edges[3])
    tails = np.concatenate([rng.uniform(-10, 27, 20000), np.logspace(-300, 1.4, 500)])
    want = np.array([math.erfc(v) for v in tails])
    normal = want > 1e-300  # float64 subnormals carry fewer bits
    ulps = np.abs(reference.erfc(tails) - want)[normal] / np.spacing(want[normal])
    assert ulps.max() <= 4
    np.testing.assert_array_equal(reference.erfc(np.array([np.inf, -np.inf, 30.0])), [0.0, 2.0, 0.0])
    f32 = rng.normal(0, 2, 20000).astype(np.float32)
    (got,) = ref(lambda a: ErfOp([a]), f32)
    np.testing.assert_array_equal(got, np.array([math.erf(v) for v in f32.astype(np.float64)]).astype(np.float32))


@pytest.mark.parametrize("low,high", [(None, 1.5), (-0.5, None), (-0.5, 1.5), (2.0, 1.0)])
def test_clip_matches_onnxruntime(low, high):
    x = rand((5, 6))
    props = {k: float_attr(v) for k, v in (("min", low), ("max", high)) if v is not None}
    (got,) = ref(lambda a: ClipByValueOp([a], props), x)
    bounds = [None if v is None else np.array(v, np.float32) for v in (low, high)]
    assert_close(got, ort_run("Clip", [x, *bounds])[0])


def test_clip_saturates_float_bounds_for_integers():
    x = np.array([-128, 0, 127], np.int8)
    (got,) = ref(lambda a: ClipByValueOp([a], {"min": float_attr(-1000.0), "max": float_attr(5.0)}), x)
    np.testing.assert_array_equal(got, np.array([-128, 0, 5], np.int8))


CASTS = [
    (np.float32, np.int32), (np.float32, np.int8), (np.float32, np.uint8), (np.float32, np.bool_),
    (np.float32, np.float16), (np.float16, np.float32), (np.int64, np.float32), (np.bool_, np.float32),
    (np.int32, np.int8), (np.float64, np.float32), (np.float32, np.int64), (np.uint8, np.int32),
]


@pytest.mark.parametrize("src,dst", CASTS)
def test_cast_matches_onnxruntime(src, dst):
    x = rand((64,), src, 6, -100 if np.dtype(src).kind != "u" else 0, 200)
    if np.dtype(src).kind == "f":
        x[:4] = [2.7, -2.7, 0.0, 0.5]
    if np.dtype(dst).kind == "u":
        x = np.abs(x)
    if np.dtype(dst) == np.int8 and np.dtype(src).kind == "f":
        x = np.clip(x, -128, 127)
    (got,) = ref(lambda a: CastOp([a], {"dst_type": dtypes.from_numpy(dst)}), x)
    (want,) = ort_run("Cast", [x], to=helper.np_dtype_to_tensor_dtype(np.dtype(dst)))
    assert_close(got, want, rtol=0, atol=0)


def test_cast_truncates_toward_zero_and_rounds_to_nearest_even():
    x = np.array([2.7, -2.7, -0.5, 1e-9, 0.0, np.nan], np.float32)
    (ints_,) = ref(lambda a: CastOp([a], {"dst_type": dtypes.from_numpy(np.dtype(np.int32))}), x[:5])
    np.testing.assert_array_equal(ints_, [2, -2, 0, 0, 0])
    (flags,) = ref(lambda a: CastOp([a], {"dst_type": dtypes.from_numpy(np.dtype(np.bool_))}), x)
    np.testing.assert_array_equal(flags, [True, True, True, True, False, True])
    halfway = np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-9], np.float32)
    (b,) = ref(lambda a: CastOp([a], {"dst_type": dtypes.from_numpy(BF16)}), halfway)
    assert b.dtype == BF16
    np.testing.assert_array_equal(b.astype(np.float32), [1.0, 1 + 2**-6, 1.0])
    (back,) = ref(lambda a: CastOp([a], {"dst_type": dtypes.from_numpy(np.dtype(np.int8))}), np.array([-2.5, 3.9], BF16))
    np.testing.assert_array_equal(back, np.array([-2, 3], np.int8))


def test_select_matches_onnxruntime():
    c, a, b = rand((3, 1), np.bool_, 1), rand((1, 4), seed=2), rand((3, 4), seed=3)
    (got,) = ref(lambda x, y, z: SelectOp([x, y, z]), c, a, b)
    assert_close(got, ort_run("Where", [c, a, b])[0])


def test_integer_division_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 6, -1, 0, -128], np.int8)
    b = np.array([2, 2, -2, -2, 3, 2, 5, -1], np.int8)
    (got,) = ref(lambda x, y: DivOp([x, y]), a, b)
    np.testing.assert_array_equal(got, np.array([3, -3, -3, 3, 2, 0, 0, -128], np.int8))
    u = np.array([7, 255], np.uint8)
    (got,) = ref(lambda x, y: DivOp([x, y]), u, np.array([2, 16], np.uint8))
    np.testing.assert_array_equal(got, np.array([3, 15], np.uint8))


def test_integer_pow_wraps_and_truncates_negative_exponents():
    a = np.array([2, 3, 1, -1, -1, 5, 2], np.int32)
    b = np.array([10, 21, -3, -3, -2, -1, 31], np.int32)
    (got,) = ref(lambda x, y: PowOp([x, y]), a, b)
    np.testing.assert_array_equal(got, np.array([1024, 1870418611, 1, -1, 1, 0, -(2**31)], np.int32))


def test_integer_add_wraps_around():
    (got,) = ref(lambda x, y: AddOp([x, y]), np.array([127, -128], np.int8), np.array([1, -1], np.int8))
    np.testing.assert_array_equal(got, np.array([-128, 127], np.int8))


def test_round_is_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.5000002], np.float32)
    (got,) = ref(lambda a: RoundOp([a]), x)
    np.testing.assert_array_equal(got, np.array([0, 2, 2, -0.0, -2, -2, 3], np.float32))
    assert np.signbit(got[3])


def test_float16_vector_ops_round_once_to_nearest_even():
    one = np.array([1.0, 1.0, 1 + 2**-10], np.float16)
    tiny = np.array([2**-11, 3 * 2**-12, 2**-11], np.float16)
    (got,) = ref(lambda x, y: AddOp([x, y]), one, tiny)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got.astype(np.float64), [1.0, 1 + 2**-10, 1 + 2**-9])
    (got,) = ref(lambda x, y: MulOp([x, y]), np.array([65504.0], np.float16), np.array([2.0], np.float16))
    assert np.isinf(got[0])


def test_bfloat16_vector_ops_compute_in_float32_and_round():
    a = np.array([1.0, 1.0, 3.0, 256.0], BF16)
    b = np.array([2**-8, 3 * 2**-9, 1e-3, 1.0], BF16)
    (got,) = ref(lambda x, y: AddOp([x, y]), a, b)
    assert got.dtype == BF16
    np.testing.assert_array_equal(got.astype(np.float32), [1.0, 1 + 2**-7, 3.0, 256.0])
    (e,) = ref(lambda x: ExpOp([x]), np.array([1.0], BF16))
    assert e.dtype == BF16 and e.astype(np.float32)[0] == np.float32(ml_dtypes.bfloat16(math.e))


# ----------------------------------------------------------------------- reductions

REDUCE = [(ReduceSumOp, "ReduceSum"), (ReduceMeanOp, "ReduceMean"), (ReduceMaxOp, "ReduceMax"), (ReduceMinOp, "ReduceMin"), (ReduceProdOp, "ReduceProd")]


@pytest.mark.parametrize("cls,onnx_op", REDUCE)
@pytest.mark.parametrize("axes", [[], [1], [0, -1], [2, 1]])
@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_reductions_match_onnxruntime(cls, onnx_op, axes, keep, dtype):
    x = rand((3, 4, 5), dtype, 8, -3, 3) if dtype == np.float32 else rand((3, 4, 5), dtype, 8, -2, 3)
    if onnx_op == "ReduceProd" and dtype == np.float32:
        x = rand((3, 4, 5), dtype, 8, 0.5, 1.5)
    (got,) = ref(lambda a: cls([a], {"axes": ints(axes), "keep_dims": bool_attr(keep)}), x)
    axes_input = np.array(axes, np.int64) if axes else None
    (want,) = ort_run(onnx_op, [x, axes_input], keepdims=int(keep), opset=18)
    assert_close(got, want)


def test_reduce_mean_of_integers_truncates_and_max_of_nothing_is_lowest():
    x = np.array([[-3, -4], [3, 4]], np.int32)
    (got,) = ref(lambda a: ReduceMeanOp([a], {"axes": ints([1]), "keep_dims": bool_attr(False)}), x)
    np.testing.assert_array_equal(got, [-3, 3])
    empty = np.zeros((2, 0), np.float32)
    (got,) = ref(lambda a: ReduceMaxOp([a], {"axes": ints([1]), "keep_dims": bool_attr(False)}), empty)
    np.testing.assert_array_equal(got, [-np.inf, -np.inf])


def test_reduce_sum_of_float16_accumulates_in_float32():
    x = np.full((4096,), 1.0, np.float16)  # a float16 running sum stalls at 2048
    (got,) = ref(lambda a: ReduceSumOp([a], {"axes": ints([]), "keep_dims": bool_attr(False)}), x)
    assert got.dtype == np.float16 and float(got) == 4096.0


@pytest.mark.parametrize("cls,onnx_op", [(ArgMaxOp, "ArgMax"), (ArgMinOp, "ArgMin")])
@pytest.mark.parametrize("axis", [0, -1, 1])
@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("last", [True, False])
def test_arg_max_min_match_onnxruntime(cls, onnx_op, axis, keep, last):
    x = rand((3, 4, 5), np.int32, 9, 0, 3).astype(np.float32)  # many ties
    props = {"axis": int_attr(axis), "keep_dims": bool_attr(keep), "select_last_index": bool_attr(last)}
    (got,) = ref(lambda a: cls([a], props), x)
    assert_close(got, ort_run(onnx_op, [x], axis=axis, keepdims=int(keep), select_last_index=int(last))[0])


@pytest.mark.parametrize("cls,onnx_op", [(SoftmaxOp, "Softmax"), (LogSoftmaxOp, "LogSoftmax")])
@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_softmax_matches_onnxruntime(cls, onnx_op, axis):
    x = rand((3, 4, 5), np.float32, 10, -50, 50)
    (got,) = ref(lambda a: cls([a], {"axes": ints([axis])}), x)
    assert_close(got, ort_run(onnx_op, [x], axis=axis)[0], rtol=1e-5, atol=1e-6)


def test_softmax_over_several_axes_normalises_them_jointly():
    x = rand((2, 3, 4), np.float32, 11, -80, 80)
    (got,) = ref(lambda a: SoftmaxOp([a], {"axes": ints([1, 2])}), x)
    flat = x.reshape(2, 12).astype(np.float64)
    want = np.exp(flat - flat.max(1, keepdims=True))
    np.testing.assert_allclose(got, (want / want.sum(1, keepdims=True)).reshape(2, 3, 4), rtol=1e-5, atol=1e-7)
    (logs,) = ref(lambda a: LogSoftmaxOp([a], {"axes": ints([1, 2])}), x)
    np.testing.assert_allclose(np.exp(logs).sum(axis=(1, 2)), [1, 1], rtol=1e-5)


# -------------------------------------------------------------------- normalisation


@pytest.mark.parametrize("begin", [-1, -2, 1])
@pytest.mark.parametrize("with_beta", [True, False])
def test_layer_norm_matches_onnxruntime(begin, with_beta):
    x = rand((2, 3, 8), np.float32, 12)
    gamma, beta = rand((3, 8)[begin:] if begin < 0 else (3, 8), seed=13), rand((3, 8)[begin:] if begin < 0 else (3, 8), seed=14)
    props = {"begin_norm_axis": int_attr(begin), "epsilon": float_attr(1e-5)}
    operands = [x, gamma, beta] if with_beta else [x, gamma]
    (got,) = ref(lambda *v: LayerNormOp(list(v), props), *operands)
    (want,) = ort_run("LayerNormalization", operands, axis=begin, epsilon=1e-5, opset=17)
    assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_layer_norm_float16_uses_float32_statistics():
    x = (rand((2, 512), np.float32, 15) + 1000).astype(np.float16)  # float16 sums would overflow the mean
    gamma = np.ones((512,), np.float16)
    (got,) = ref(lambda a, g: LayerNormOp([a, g], {"begin_norm_axis": int_attr(-1), "epsilon": float_attr(1e-5)}), x, gamma)
    wide = x.astype(np.float64)
    want = (wide - wide.mean(-1, keepdims=True)) / np.sqrt(wide.var(-1, keepdims=True) + 1e-5)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float64), want, atol=2e-3, rtol=2e-3)


def test_batch_norm_matches_onnxruntime():
    x = rand((2, 3, 4, 5), seed=16)
    scale, offset, mean = rand((3,), seed=17), rand((3,), seed=18), rand((3,), seed=19)
    var = rand((3,), seed=20, low=0.1, high=2)
    (got,) = ref(lambda *v: BatchNormOp(list(v), {"epsilon": float_attr(1e-3)}), x, scale, offset, mean, var)
    assert_close(got, ort_run("BatchNormalization", [x, scale, offset, mean, var], epsilon=1e-3)[0], rtol=1e-5, atol=1e-5)


def test_instance_norm_matches_onnxruntime():
    x, gamma, beta = rand((2, 3, 4, 5), seed=21), rand((3,), seed=22), rand((3,), seed=23)
    (got,) = ref(lambda *v: InstanceNormOp(list(v), {"epsilon": float_attr(1e-5)}), x, gamma, beta)
    assert_close(got, ort_run("InstanceNormalization", [x, gamma, beta], epsilon=1e-5)[0], rtol=1e-4, atol=1e-5)


# -------------------------------------------------------------------------- cube ops


def conv_props(strides, pads, dilations, groups) -> dict:
    return {
        "strides": ints([1, 1, *strides]),
        "pads": ints(pads),
        "dilations": ints([1, 1, *dilations]),
        "groups": int_attr(groups),
    }


@st.composite
def conv_cases(draw):
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cin, cout = groups * draw(st.integers(1, 3)), groups * draw(st.integers(1, 3))
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    p = [draw(st.integers(0, 2)) for _ in range(4)]
    h = draw(st.integers(max(1, d[0] * (k[0] - 1) + 1 - p[0] - p[1]), 9))
    w = draw(st.integers(max(1, d[1] * (k[1] - 1) + 1 - p[2] - p[3]), 9))
    return draw(st.integers(1, 2)), cin, cout, (h, w), k, s, d, p, groups, draw(st.booleans())


@settings(max_examples=60)
@given(conv_cases())
def test_conv2d_matches_onnxruntime(case):
    n, cin, cout, (h, w), k, s, d, p, groups, with_bias = case
    x, wt, b = rand((n, cin, h, w), seed=24), rand((cout, cin // groups, *k), seed=25), rand((cout,), seed=26)
    operands = [x, wt, b] if with_bias else [x, wt]
    (got,) = ref(lambda *v: Conv2DOp(list(v), conv_props(s, p, d, groups)), *operands)
    onnx_pads = [p[0], p[2], p[1], p[3]]
    (want,) = ort_run("Conv", operands, strides=list(s), pads=onnx_pads, dilations=list(d), group=groups)
    assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_depthwise_conv_matches_onnxruntime():
    x, wt = rand((1, 8, 12, 12), seed=27), rand((8, 1, 3, 3), seed=28)
    (got,) = ref(lambda a, b: Conv2DOp([a, b], conv_props((2, 2), [1, 1, 1, 1], (1, 1), 8)), x, wt)
    assert_close(got, ort_run("Conv", [x, wt], strides=[2, 2], pads=[1, 1, 1, 1], group=8)[0], rtol=1e-4, atol=1e-5)


def test_depthwise_conv_with_a_channel_multiplier_matches_onnxruntime():
    x, wt, b = rand((2, 3, 7, 6), seed=64), rand((6, 1, 3, 2), seed=65), rand((6,), seed=66)
    (got,) = ref(lambda *v: Conv2DOp(list(v), conv_props((1, 2), [0, 1, 1, 0], (2, 1), 3)), x, wt, b)
    (want,) = ort_run("Conv", [x, wt, b], strides=[1, 2], pads=[0, 1, 1, 0], dilations=[2, 1], group=3)
    assert_close(got, want, rtol=1e-4, atol=1e-5)


def naive_conv(x: np.ndarray, w: np.ndarray, pads: Sequence[int]) -> np.ndarray:
    """A direct float64 convolution, stride and dilation 1, one group."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[1]), (pads[2], pads[3])))
    cout, _, kh, kw = w.shape
    oh, ow = x.shape[2] - kh + 1, x.shape[3] - kw + 1
    y = np.zeros((x.shape[0], cout, oh, ow))
    for i in range(oh):
        for j in range(ow):
            y[:, :, i, j] = np.tensordot(x[:, :, i : i + kh, j : j + kw], w.astype(np.float64), axes=([1, 2, 3], [1, 2, 3]))
    return y


@pytest.mark.parametrize("dtype", [np.float16, BF16])
def test_low_precision_conv_accumulates_in_float32(dtype):
    x, w = rand((1, 16, 6, 6), dtype, 29), rand((4, 16, 3, 3), dtype, 30)
    (got,) = ref(lambda a, b: Conv2DOp([a, b], conv_props((1, 1), [1, 1, 1, 1], (1, 1), 1)), x, w)
    assert got.dtype == dtype
    exact = naive_conv(x, w, [1, 1, 1, 1])
    # one rounding of a float32 sum: within one unit of the last place of the dtype
    np.testing.assert_allclose(got.astype(np.float64), exact, rtol=2.0 ** -(10 if dtype == np.float16 else 7), atol=1e-2)


def test_float16_matmul_does_not_round_partial_sums():
    a = np.full((1, 4096), 1.0, np.float16)
    b = np.full((4096, 1), 1.0, np.float16)
    props = {"transpose_x1": bool_attr(False), "transpose_x2": bool_attr(False)}
    (got,) = ref(lambda x, y: MatMulV2Op([x, y], props), a, b)
    assert got.dtype == np.float16 and float(got[0, 0]) == 4096.0


def test_integer_matmul_accumulates_in_int64_then_wraps():
    a, b = np.array([[100, 100]], np.int8), np.array([[1], [1]], np.int8)
    props = {"adj_x1": bool_attr(False), "adj_x2": bool_attr(False)}
    (got,) = ref(lambda x, y: BatchMatMulOp([x, y], props), a, b)
    np.testing.assert_array_equal(got, np.array([[-56]], np.int8))
    big = rand((3, 7), np.int32, 31, -1000, 1000)
    other = rand((7, 2), np.int32, 32, -1000, 1000)
    (got,) = ref(lambda x, y: BatchMatMulOp([x, y], props), big, other)
    assert_close(got, ort_run("MatMul", [big, other])[0])


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_matmul_v2_matches_onnxruntime_gemm(ta, tb, with_bias):
    a = rand((5, 3) if ta else (3, 5), seed=33)
    b = rand((4, 5) if tb else (5, 4), seed=34)
    bias = rand((4,), seed=35)
    props = {"transpose_x1": bool_attr(ta), "transpose_x2": bool_attr(tb)}
    operands = [a, b, bias] if with_bias else [a, b]
    (got,) = ref(lambda *v: MatMulV2Op(list(v), props), *operands)
    assert_close(got, ort_run("Gemm", operands, transA=int(ta), transB=int(tb))[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "a_shape,b_shape",
    [((2, 3, 4), (4, 5)), ((4,), (2, 4, 3)), ((2, 1, 3, 4), (3, 4, 2)), ((2, 3, 4), (4,)), ((4,), (4,))],
)
def test_batch_matmul_broadcasts_like_onnx_matmul(a_shape, b_shape):
    a, b = rand(a_shape, seed=36), rand(b_shape, seed=37)
    props = {"adj_x1": bool_attr(False), "adj_x2": bool_attr(False)}
    (got,) = ref(lambda x, y: BatchMatMulOp([x, y], props), a, b)
    assert_close(got, ort_run("MatMul", [a, b])[0], rtol=1e-5, atol=1e-5)


def test_batch_matmul_adjoints_and_bias():
    a, b, bias = rand((2, 4, 3), seed=38), rand((2, 5, 4), seed=39), rand((5,), seed=40)
    props = {"adj_x1": bool_attr(True), "adj_x2": bool_attr(True)}
    (got,) = ref(lambda x, y, z: BatchMatMulOp([x, y, z], props), a, b, bias)
    want = np.swapaxes(a, 1, 2).astype(np.float64) @ np.swapaxes(b, 1, 2) + bias
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ta,tb,alpha,beta,c_shape", [(False, False, 1.0, 1.0, (4,)), (True, True, 0.5, 2.0, (3, 4)), (False, True, 2.0, 0.0, (3, 1)), (True, False, 1.0, 1.0, None)])
def test_gemm_matches_onnxruntime(ta, tb, alpha, beta, c_shape):
    a = rand((5, 3) if ta else (3, 5), seed=41)
    b = rand((4, 5) if tb else (5, 4), seed=42)
    operands = [a, b] if c_shape is None else [a, b, rand(c_shape, seed=43)]
    props = {"alpha": float_attr(alpha), "beta": float_attr(beta), "trans_a": bool_attr(ta), "trans_b": bool_attr(tb)}
    (got,) = ref(lambda *v: GemmOp(list(v), props), *operands)
    (want,) = ort_run("Gemm", operands, transA=int(ta), transB=int(tb), alpha=alpha, beta=beta)
    assert_close(got, want, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- pooling


@st.composite
def pool_cases(draw):
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    p = [draw(st.integers(0, k[i // 2] - 1)) for i in range(4)]  # ONNX: pads smaller than the kernel
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h, w = draw(st.integers(d[0] * (k[0] - 1) + 1, 9)), draw(st.integers(d[1] * (k[1] - 1) + 1, 9))
    return (h, w), k, s, p, d, draw(st.booleans())


@settings(max_examples=60)
@given(pool_cases())
def test_max_pool_matches_onnxruntime(case):
    (h, w), k, s, p, d, ceil_mode = case
    x = rand((1, 2, h, w), seed=44)
    props = {"ksize": ints(k), "strides": ints(s), "pads": ints(p), "ceil_mode": bool_attr(ceil_mode), "dilations": ints(d)}
    (got,) = ref(lambda a: MaxPoolOp([a], props), x)
    (want,) = ort_run("MaxPool", [x], kernel_shape=list(k), strides=list(s), pads=[p[0], p[2], p[1], p[3]], dilations=list(d), ceil_mode=int(ceil_mode))
    assert_close(got, want, rtol=0, atol=0)


@settings(max_examples=60)
@given(pool_cases(), st.booleans())
def test_avg_pool_matches_onnxruntime(case, exclusive):
    (h, w), k, s, p, _, ceil_mode = case
    x = rand((1, 2, h, w), seed=45)
    props = {"ksize": ints(k), "strides": ints(s), "pads": ints(p), "ceil_mode": bool_attr(ceil_mode), "exclusive": bool_attr(exclusive)}
    (got,) = ref(lambda a: AvgPoolOp([a], props), x)
    (want,) = ort_run(
        "AveragePool", [x], kernel_shape=list(k), strides=list(s), pads=[p[0], p[2], p[1], p[3]],
        ceil_mode=int(ceil_mode), count_include_pad=int(not exclusive),
    )
    assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_pools_of_int8_and_float16():
    x = rand((1, 1, 4, 4), np.int8, 67, -128, 127)
    props = {"ksize": ints([2, 2]), "strides": ints([2, 2]), "pads": ints([1, 0, 1, 0]), "ceil_mode": bool_attr(True)}
    (got,) = ref(lambda a: MaxPoolOp([a], props), x)
    assert_close(got, ort_run("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 0, 0], ceil_mode=1)[0])
    h = rand((1, 2, 5, 5), np.float16, 68)
    avg = {**props, "exclusive": bool_attr(True)}
    (got,) = ref(lambda a: AvgPoolOp([a], avg), h)
    want = ort_run("AveragePool", [h.astype(np.float32)], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 0, 0], ceil_mode=1)[0]
    assert_close(got, want.astype(np.float16), rtol=0, atol=0)  # float32 sums, rounded once


@pytest.mark.parametrize("cls,onnx_op", [(GlobalAveragePoolOp, "GlobalAveragePool"), (GlobalMaxPoolOp, "GlobalMaxPool")])
def test_global_pools_match_onnxruntime(cls, onnx_op):
    x = rand((2, 3, 5, 7), seed=46)
    (got,) = ref(lambda a: cls([a]), x)
    assert_close(got, ort_run(onnx_op, [x])[0])


# ------------------------------------------------------------------------- shape ops


def test_reshape_flatten_transpose_squeeze_unsqueeze():
    x = rand((2, 1, 3, 4), seed=47)
    got = ref(
        lambda a: [
            ReshapeOp([a], {"shape": ints([4, -1])}),
            FlattenOp([a], {"axis": int_attr(2)}),
            FlattenOp([a], {"axis": int_attr(0)}),
            TransposeOp([a], {"perm": ints([3, 0, 2, 1])}),
            SqueezeOp([a], {"axis": ints([])}),
            SqueezeOp([a], {"axis": ints([-3])}),
            UnsqueezeOp([a], {"axes": ints([0, -1])}),
        ],
        x,
    )
    wants = [x.reshape(4, 6), x.reshape(2, 12), x.reshape(1, 24), x.transpose(3, 0, 2, 1), x[:, 0], x[:, 0], x[None, ..., None]]
    for g, wnt in zip(got, wants, strict=True):
        np.testing.assert_array_equal(g, wnt)


def test_concat_and_splits_match_onnxruntime():
    a, b = rand((2, 3, 4), seed=48), rand((2, 5, 4), seed=49)
    (got,) = ref(lambda x, y: ConcatOp([x, y], {"concat_dim": int_attr(-2)}), a, b)
    assert_close(got, ort_run("Concat", [a, b], axis=-2)[0])
    got = ref(lambda x: list(SplitOp([x], {"split_dim": int_attr(1), "num_split": int_attr(4)}).results), a.reshape(2, 12))
    want = ort_run("Split", [a.reshape(2, 12)], n_out=4, axis=1, num_outputs=4, opset=18)
    for g, wnt in zip(got, want, strict=True):
        assert_close(g, wnt)
    sizes = [1, 0, 3]
    got = ref(lambda x: list(SplitVOp([x], {"split_dim": int_attr(-1), "num_split": int_attr(3), "size_splits": ints(sizes)}).results), b)
    want = ort_run("Split", [b, np.array(sizes, np.int64)], n_out=3, axis=-1)
    for g, wnt in zip(got, want, strict=True):
        assert_close(g, wnt)


@pytest.mark.parametrize(
    "begin,end,strides",
    [([0, 1, 0], [4, 5, 6], [1, 2, 3]), ([3, 4, 5], [-1, -1, 0], [-1, -2, -2]), ([1, 0, 2], [3, 1, 2], [1, 1, 1]), ([0, 0, 0], [4, 5, 6], [1, 1, 4]), ([2, 4, 5], [-1, 0, -1], [-3, -1, -6])],
)
def test_strided_slice_matches_onnxruntime_slice(begin, end, strides):
    x = rand((4, 5, 6), seed=50)
    props = {"begin": ints(begin), "end": ints(end), "strides": ints(strides)}
    (got,) = ref(lambda a: StridedSliceOp([a], props), x)
    onnx_end = [e if e >= 0 else -(2**62) for e in end]  # our -1 with a negative stride: through index 0
    (want,) = ort_run("Slice", [x, *(np.array(v, np.int64) for v in (begin, onnx_end, [0, 1, 2], strides))])
    assert_close(got, want)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_wraps_negative_indices(axis):
    x = rand((4, 5, 6), seed=51)
    idx = np.array([[0, -1], [2, -3]], np.int64)
    (got,) = ref(lambda a, i: GatherOp([a, i], {"axis": int_attr(axis)}), x, idx)
    assert_close(got, ort_run("Gather", [x, idx], axis=axis)[0])


def test_gather_out_of_range_is_a_model_error():
    with pytest.raises(ModelError, match="index 5 is out of range"):
        ref(lambda a, i: GatherOp([a, i], {"axis": int_attr(0)}), rand((5,)), np.array([5], np.int32))


@pytest.mark.parametrize("axis", [0, 1])
def test_gather_elements_matches_onnxruntime(axis):
    x = rand((3, 4), seed=52)
    idx = np.array([[0, -1, 1], [2, 0, -2]], np.int64) % (3 if axis == 0 else 4) - (1 if axis == 0 else 2)
    (got,) = ref(lambda a, i: GatherElementsOp([a, i], {"axis": int_attr(axis)}), x, idx)
    assert_close(got, ort_run("GatherElements", [x, idx], axis=axis)[0])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("pads", [[1, 2, 0, 3], [2, 0, 1, 1], [0, -1, 2, -2]])
def test_pad_matches_onnxruntime(mode, pads):
    x = rand((4, 5), seed=53)
    props = {"paddings": ints(pads), "mode": strs(mode), "constant_value": float_attr(1.5)}
    (got,) = ref(lambda a: PadOp([a], props), x)
    onnx_pads = np.array([pads[0], pads[2], pads[1], pads[3]], np.int64)
    (want,) = ort_run("Pad", [x, onnx_pads, np.array(1.5, np.float32)], mode=mode)
    assert_close(got, want)


def test_expand_tile_depth_space_match_onnxruntime():
    x = rand((3, 1), seed=54)
    (got,) = ref(lambda a: ExpandOp([a], {"shape": ints([2, 1, 4])}), x)
    assert_close(got, ort_run("Expand", [x, np.array([2, 1, 4], np.int64)])[0])
    (got,) = ref(lambda a: TileOp([a], {"multiples": ints([2, 3])}), x)
    assert_close(got, ort_run("Tile", [x, np.array([2, 3], np.int64)])[0])
    y = rand((2, 8, 3, 2), seed=55)
    for mode in ("DCR", "CRD"):
        (got,) = ref(lambda a: DepthToSpaceOp([a], {"block_size": int_attr(2), "mode": strs(mode)}), y)
        assert_close(got, ort_run("DepthToSpace", [y], blocksize=2, mode=mode)[0])
    z = rand((2, 3, 4, 6), seed=56)
    (got,) = ref(lambda a: SpaceToDepthOp([a], {"block_size": int_attr(2)}), z)
    assert_close(got, ort_run("SpaceToDepth", [z], blocksize=2)[0])


# --------------------------------------------------------------------------- resize


def resize_props(sizes, scales, mode, ctm, nearest="round_prefer_floor", a=-0.75, exclude=False) -> dict:
    return {
        "sizes": ints(sizes),
        "scales": DenseArrayBase.from_list(f64, scales),
        "mode": strs(mode),
        "coordinate_transformation_mode": strs(ctm),
        "nearest_mode": strs(nearest),
        "cubic_coeff_a": float_attr(a),
        "exclude_outside": bool_attr(exclude),
        "extrapolation_value": float_attr(0.0),
    }


def onnx_reference_resize(x: np.ndarray, sizes, **attrs) -> np.ndarray:
    """The ONNX reference implementation (which generated the backend tests)."""
    from onnx.reference import ReferenceEvaluator

    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape), helper.make_tensor_value_info("sizes", onnx.TensorProto.INT64, [x.ndim])],
        [helper.make_empty_tensor_value_info("y")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    return ReferenceEvaluator(model).run(None, {"x": x, "sizes": np.array(sizes, np.int64)})[0]


RESIZE_MODES = [
    ("nearest", "asymmetric", "floor"), ("nearest", "half_pixel", "round_prefer_floor"),
    ("nearest", "half_pixel", "round_prefer_ceil"), ("nearest", "align_corners", "ceil"),
    ("nearest", "pytorch_half_pixel", "round_prefer_floor"),
    ("linear", "half_pixel", None), ("linear", "align_corners", None), ("linear", "asymmetric", None),
    ("linear", "pytorch_half_pixel", None), ("linear", "half_pixel_symmetric", None),
    ("cubic", "half_pixel", None), ("cubic", "align_corners", None), ("cubic", "asymmetric", None),
]


RESIZE_CASES = [(*m, False) for m in RESIZE_MODES] + [(*m, True) for m in RESIZE_MODES if m[0] == "cubic"]


@pytest.mark.parametrize("mode,ctm,nearest,exclude", RESIZE_CASES)
@pytest.mark.parametrize("sizes", [(1, 2, 8, 9), (1, 2, 3, 2), (1, 2, 1, 7)])
def test_resize_matches_onnx_reference_and_onnxruntime(mode, ctm, nearest, exclude, sizes):
    x = rand((1, 2, 4, 5), seed=57)
    scales = [o / i for o, i in zip(sizes, x.shape)]
    props = resize_props(sizes, scales, mode, ctm, nearest or "round_prefer_floor", -0.5, exclude)
    (got,) = ref(lambda a: ResizeOp([a], props), x)
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm, "cubic_coeff_a": -0.5, "exclude_outside": int(exclude)}
    if nearest:
        attrs["nearest_mode"] = nearest
    # the ONNX reference computes cubic weights in float32 (a float32 `a`), we in float64
    tolerance = 1e-5 if mode == "cubic" else 1e-6
    assert_close(got, onnx_reference_resize(x, sizes, **attrs), rtol=tolerance, atol=tolerance)
    if ctm == "pytorch_half_pixel" and mode == "cubic" or 1 in sizes[2:] and mode == "cubic":
        return  # onnxruntime reads a length-1 output differently from the ONNX reference
    (want,) = ort_run("Resize", [x, None, None, np.array(sizes, np.int64)], **attrs)
    assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_resize_by_scales_uses_the_scale_not_the_size_ratio():
    x = rand((1, 1, 3, 3), seed=58)
    scales = [1.0, 1.0, 1.7, 1.7]  # output floor(3 * 1.7) = 5, but the transform uses 1.7
    props = resize_props([1, 1, 5, 5], scales, "linear", "half_pixel")
    (got,) = ref(lambda a: ResizeOp([a], props), x)
    (want,) = ort_run("Resize", [x, None, np.array(scales, np.float32)], mode="linear")
    assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_resize_of_integers_rounds_half_to_even():
    x = np.array([[[[0, 1, 2, 3]]]], np.uint8)
    props = resize_props([1, 1, 1, 7], [1.0, 1.0, 1.0, 1.75], "linear", "align_corners")
    (got,) = ref(lambda a: ResizeOp([a], props), x)
    np.testing.assert_array_equal(got, np.array([[[[0, 0, 1, 2, 2, 2, 3]]]], np.uint8))  # 0.5 -> 0, 1.5 -> 2, 2.5 -> 2


# ------------------------------------------------------------------------- constants


@pytest.mark.parametrize(
    "values,dtype",
    [
        ([1.5, -2.25, 3.0, 0.1], np.float32), ([1.5, -2.0, 65504.0, 0.1], np.float16), ([1.5, -2.0, 3.0, 0.1], BF16),
        ([True, False, True, True], np.bool_), ([-128, 127, 0, 5], np.int8), ([0, 65535, 7, 1], np.uint16),
        ([-(2**62), 2**40, 0, -1], np.int64), ([0.1, -1e300, 2.0, 3.0], np.float64),
    ],
)
def test_inline_constants_decode_to_the_right_dtype(values, dtype):
    want = np.array(values, dtype).reshape(2, 2)
    t = tensor(dtypes.from_numpy(np.dtype(dtype)), (2, 2))
    attr = DenseIntOrFPElementsAttr.from_list(t, [bool(v) if dtype == np.bool_ else v for v in values])
    module = module_of([], lambda: ConstOp(attr, t, "c"))
    out = reference.run(module, [])["y0"]
    assert out.dtype == want.dtype
    np.testing.assert_array_equal(out.astype(np.float64), want.astype(np.float64))


def test_splat_constant_fills_its_shape():
    t = tensor(dtypes.from_numpy(np.dtype(np.float32)), (2, 3))
    module = module_of([], lambda: ConstOp(DenseIntOrFPElementsAttr.from_list(t, [2.5]), t, "c"))
    np.testing.assert_array_equal(reference.run(module, [])["y0"], np.full((2, 3), 2.5, np.float32))


def weight_module(store: WeightStore, array: np.ndarray) -> ModuleOp:
    ref_attr = store.add("w", array)
    t = tensor(dtypes.from_numpy(array.dtype), array.shape)
    return module_of([("x", array.dtype, array.shape)], lambda x: AddOp([x, ConstOp(ref_attr, t, "w")]))


def test_weights_come_from_the_given_store_or_the_modules():
    w = rand((3,), seed=59)
    store = WeightStore("test-given")
    module = weight_module(store, w)
    x = rand((3,), seed=60)
    np.testing.assert_array_equal(reference.run(module, [x], weights=store)["y0"], x + w)
    with pytest.raises(ModelError, match="no weight store"):
        reference.run(module, [x])
    attach(module, store)
    np.testing.assert_array_equal(reference.run(module, {"x": x})["y0"], x + w)


def test_a_weight_with_other_bytes_is_refused():
    store = WeightStore("test-digest")
    module = weight_module(store, rand((3,), seed=61))
    other = WeightStore("test-digest-other")
    other.add("w", rand((3,), seed=62))
    with pytest.raises(ModelError, match="digest"):
        reference.run(module, [rand((3,))], weights=other)


def test_constants_are_read_only_and_outputs_are_copies():
    store = WeightStore("test-readonly")
    w = rand((3,), seed=63)
    module = weight_module(store, w)
    const = next(op for op in module.walk() if isinstance(op, ConstOp))
    (value,) = reference.evaluate_op(const, [], store)
    assert not value.flags.writeable
    identity = module_of([("x", np.dtype(np.float32), (3,))], lambda x: IdentityOp([x]))
    x = rand((3,))
    out = reference.run(identity, [x])["y0"]
    out[0] = 99
    assert x[0] != 99


# -------------------------------------------------------------------- running, inputs


def two_input_module(shape=(2, DYN)) -> ModuleOp:
    return module_of(
        [("a", np.dtype(np.float32), shape), ("b", np.dtype(np.float32), (1,))],
        lambda a, b: [MulOp([a, b]), AddOp([a, b])],
    )


def test_a_value_read_twice_and_an_output_listed_twice():
    module = module_of([("x", np.dtype(np.int32), (3,))], lambda x: [MulOp([x, x]), x, x])
    x = np.array([1, -2, 3], np.int32)
    out = reference.run(module, [x])
    np.testing.assert_array_equal(out["y0"], x * x)
    out["y1"][0] = 7
    np.testing.assert_array_equal(out["y2"], x)


def test_run_binds_by_name_or_index_and_names_outputs_in_order():
    module = two_input_module()
    a, b = rand((2, 7)), np.array([2.0], np.float32)
    by_index = reference.run(module, [a, b])
    by_name = reference.run(module, {"b": b, "a": a})
    assert list(by_index) == ["y0", "y1"]
    for out in (by_index, by_name):
        np.testing.assert_array_equal(out["y0"], a * 2)
        np.testing.assert_array_equal(out["y1"], a + 2)


@pytest.mark.parametrize(
    "inputs,message",
    [
        ({"a": np.zeros((2, 3), np.float32)}, "input 'b' .*float32\\[1\\].* is missing"),
        ({"a": np.zeros((2, 3), np.float32), "b": np.zeros(1, np.float32), "c": 1}, "'c' is not one of its inputs \\('a', 'b'\\)"),
        ([np.zeros((2, 3), np.float32)], "takes 2 inputs \\('a', 'b'\\), but 1 were given"),
        ([np.zeros((3, 3), np.float32), np.zeros(1, np.float32)], "input 'a' has shape \\[3, 3\\], expected \\[2, \\?\\]"),
        ([np.zeros((2,), np.float32), np.zeros(1, np.float32)], "input 'a' has shape \\[2\\], expected \\[2, \\?\\]"),
        ([np.zeros((2, 3), np.float64), np.zeros(1, np.float32)], "input 'a' has dtype float64, expected float32"),
        (np.zeros((2, 3), np.float32), "give inputs as a dict by Data name or a list"),
    ],
)
def test_bad_inputs_are_input_errors_naming_the_input(inputs, message):
    with pytest.raises(InputError, match=message) as info:
        reference.run(two_input_module(), inputs)
    assert isinstance(info.value, GEError) and "\n" not in str(info.value)


def test_dynamic_dims_accept_any_size_and_results_follow():
    module = module_of([("x", np.dtype(np.float32), (DYN, 4))], lambda x: ReduceSumOp([x], {"axes": ints([1]), "keep_dims": bool_attr(False)}))
    for n in (1, 5):
        assert reference.run(module, [np.ones((n, 4), np.float32)])["y0"].shape == (n,)


def test_a_runtime_shape_clash_is_a_model_error_naming_the_op():
    module = module_of(
        [("a", np.dtype(np.float32), (DYN,)), ("b", np.dtype(np.float32), (DYN,))],
        lambda a, b: AddOp([a, b], None, "the_add"),
    )
    with pytest.raises(ModelError, match="Add 'the_add'"):
        reference.run(module, [np.ones(2, np.float32), np.ones(3, np.float32)])


def test_evaluate_op_checks_operands_and_refuses_ops_without_kernels():
    module = two_input_module((2, 3))
    mul = next(op for op in module.walk() if isinstance(op, MulOp))
    (got,) = reference.evaluate_op(mul, [np.ones((2, 3), np.float32), np.full(1, 3, np.float32)])
    np.testing.assert_array_equal(got, np.full((2, 3), 3, np.float32))
    with pytest.raises(InputError, match="operand 1 is float64\\[1\\], expected float32\\[1\\]"):
        reference.evaluate_op(mul, [np.ones((2, 3), np.float32), np.ones(1)])
    data = next(op for op in module.walk() if isinstance(op, DataOp))
    with pytest.raises(ModelError, match="no kernel"):
        reference.evaluate_op(data, [])


def test_every_dialect_op_has_a_kernel():
    from dialects.ascend_graph import AscendGraph, YieldOp

    structural = {GraphOp, DataOp, ConstOp, NetOutputOp, YieldOp}
    kernels = reference.KERNELS.keys() | reference.BODY_KERNELS.keys()
    assert [op.__name__ for op in AscendGraph.operations if op not in structural and op not in kernels] == []
