"""The numpy reference interpreter for `ascend_graph`: the oracle of every pass test.

It executes a graph op by op, in the numerics the rest of the engine is checked
against:

- a result has exactly the numpy dtype of its op's result type;
- vector ops on float16/bfloat16 compute in float32 and round once to the result
  dtype; float32 and float64 compute in themselves (but erf and GELU, whose
  formulas cancel, and MatrixDeterminant's LU compute in float64 and round once);
  integers wrap as in C;
- cube ops (Conv2D, MatMulV2, BatchMatMulV2, GEMM) multiply the input values and
  accumulate in float32 for float16/bfloat16 (the product of two such values is
  exact in float32, so widening first is the same thing), in the input dtype for
  float32/float64 (numpy's BLAS), and in int64 for integers; a bias joins the
  accumulator, and the sum is rounded (or wrapped) once to the result dtype;
- an op that comes from ONNX has ONNX's semantics; where the spec leaves room
  (Resize) we follow the ONNX reference implementation, which generated the
  backend node tests that conformance is measured with.

Kernels are plain functions registered per op class in `KERNELS`. `evaluate_op`
runs one op (the importer's constant folding, passes); `run` runs a module's graph,
and `run_block` a block: the graph's, or a body of If, Loop and Scan, whose kernels
(`BODY_KERNELS`) run their bodies with ONNX's semantics.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from functools import cache, reduce
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp, StringAttr, TensorType, i1
from xdsl.ir import Block, Operation, SSAValue
from xdsl.traits import IsTerminator, SymbolTable

from dialects import ascend_graph as ag
from dialects import ascend_kernel as ak
from dialects import formats, shapes
from ge.core import dtypes, limits
from ge.core.ir import graph_of
from ge.core.errors import InputError, ModelError
from ge.core.weights import WEIGHTS_ATTR, WeightError, WeightStore, store_of

Kernel = Callable[[Any, list[np.ndarray]], "np.ndarray | list[np.ndarray]"]

KERNELS: dict[type[Operation], Kernel] = {}
"""The kernel of each op class: (op, operand values) -> result value(s)."""

_LOW_PRECISION = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def _kernel(*classes: type[Operation]) -> Callable[[Kernel], Kernel]:
    def register(fn: Kernel) -> Kernel:
        for cls in classes:
            KERNELS[cls] = fn
        return fn

    return register


def _kind(dtype: np.dtype) -> str:
    """numpy's dtype kind, with bfloat16 (kind 'V' in ml-dtypes) counted as a float."""
    return "f" if dtype in _LOW_PRECISION else dtype.kind


def _vec(x: np.ndarray) -> np.ndarray:
    """The values a vector unit computes with: float16/bfloat16 widened to float32."""
    return x.astype(np.float32) if x.dtype in _LOW_PRECISION else x


def _acc(x: np.ndarray) -> np.ndarray:
    """The values a cube unit accumulates: float32 for float16/bfloat16, int64 for integers."""
    if x.dtype in _LOW_PRECISION:
        return x.astype(np.float32)
    if _kind(x.dtype) in "iub":
        return x.astype(np.int64)
    return x


def _lowest(dtype: np.dtype) -> Any:
    """The identity of max: -inf, the smallest integer, or False."""
    if _kind(dtype) == "f":
        return -np.inf
    if _kind(dtype) == "b":
        return False
    return np.iinfo(dtype).min


def _highest(dtype: np.dtype) -> Any:
    """The identity of min: inf, the largest integer, or True."""
    if _kind(dtype) == "f":
        return np.inf
    if _kind(dtype) == "b":
        return True
    return np.iinfo(dtype).max


def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division rounding toward zero (C, ONNX); a zero divisor gives 0."""
    q = a // b
    return q + ((q < 0) & (q * b != a)).astype(q.dtype)


def _label(op: Operation) -> str:
    """How errors name an op: its CANN type and ONNX node name."""
    return f"{op.OP_TYPE} '{op.label}'" if isinstance(op, ag.AscendOp) else op.name


# ------------------------------------------------------------------------ running


def run(
    module: ModuleOp,
    inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray],
    weights: WeightStore | None = None,
) -> dict[str, np.ndarray]:
    """Execute the module's graph: inputs by Data name or in Data index order, outputs
    by the NetOutput names. Weights come from `weights`, else the module's store."""
    graph = graph_of(module)
    last = graph.body.block.last_op
    if not isinstance(last, ag.NetOutputOp):
        raise ModelError(f"graph @{graph.sym_name.data} has no NetOutput")
    outputs = run_block(graph.body.block, _bind(graph, inputs), weights)
    return {n.data: np.array(v) for n, v in zip(last.names, outputs)}


def run_block(block: Block, values: dict[SSAValue, np.ndarray], weights: WeightStore | None = None) -> list[np.ndarray]:
    """Execute a block's ops on the values of its Data ops or arguments (`values`, which
    it consumes): the values of its terminator's operands (NetOutput, yield)."""
    remaining = {v: v.uses.get_length() for v in values}
    with np.errstate(all="ignore"):
        for op in block.ops:
            if isinstance(op, ag.DataOp):
                continue
            if op is block.last_op and op.has_trait(IsTerminator):
                return [values[v] for v in op.operands]
            results = evaluate_op(op, [values[v] for v in op.operands], weights)
            for v in op.operands:
                remaining[v] -= 1
                if not remaining[v]:
                    del values[v]  # free what no later op reads
            for r, value in zip(op.results, results):
                if count := r.uses.get_length():
                    values[r], remaining[r] = value, count
    raise ModelError("a block of the graph has no terminator")


def _bind(graph: ag.GraphOp, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> dict[SSAValue, np.ndarray]:
    """Pair the given arrays with the graph's Data ops, checking names, dtypes, shapes."""
    datas = graph.inputs
    names = ", ".join(f"'{d.label}'" for d in datas) or "none"
    where = f"graph @{graph.sym_name.data}"
    if isinstance(inputs, np.ndarray | str) or not isinstance(inputs, Mapping | Sequence):
        raise InputError(f"{where}: give inputs as a dict by Data name or a list in Data order, not a {type(inputs).__name__}")
    if isinstance(inputs, Mapping):
        known = {d.label for d in datas}
        for key in inputs:
            if key not in known:
                raise InputError(f"{where}: '{key}' is not one of its inputs ({names})")
        for d in datas:
            if d.label not in inputs:
                raise InputError(f"{where}: input '{d.label}' ({_describe(d.out.type)}) is missing")
        given = [(d, inputs[d.label]) for d in datas]
    else:
        if len(inputs) != len(datas):
            raise InputError(f"{where} takes {len(datas)} inputs ({names}), but {len(inputs)} were given")
        given = list(zip(datas, inputs))
    return {d.out: _check_input(d, value) for d, value in given}


def _describe(t: Any) -> str:
    """dtype and logical shape, and the device format the values are laid out in."""
    layout = f" in {ag.format_of(t)}" if ag.format_of(t) else ""
    return f"{dtypes.name(t.element_type)}{shapes.fmt(ag.shape_of(t))}{layout}"


def _check_input(data: ag.DataOp, value: Any) -> np.ndarray:
    array = np.asarray(value)
    t = data.out.type
    assert isinstance(t, TensorType)
    want = dtypes.to_numpy(t.element_type)
    if array.dtype != want:
        raise InputError(f"input '{data.label}' has dtype {array.dtype}, expected {dtypes.name(t.element_type)}")
    if not shapes.compatible(ag.shape_of(t), array.shape):
        raise InputError(f"input '{data.label}' has shape {shapes.fmt(array.shape)}, expected {shapes.fmt(ag.shape_of(t))}")
    return array


def evaluate_op(op: Operation, inputs: Sequence[np.ndarray], weights: WeightStore | None = None) -> list[np.ndarray]:
    """The results of one op on the given operand values, in the op's result dtypes.

    A constant takes no inputs; a weight handle is looked up in `weights`, else in the
    store of the module around the op. Results may be views of the operands (reshape,
    transpose, expand, ...): no kernel writes into an array, nor should a caller.
    """
    if isinstance(op, ag.ConstOp):
        return [const_value(op, weights)]
    if isinstance(op, ag.ControlFlowOp):
        args = _check_args(op, inputs)
        try:
            produced = BODY_KERNELS[type(op)](op, args, weights)
        except ValueError as e:  # scan slices of different shapes cannot stack
            raise ModelError(f"{_label(op)}: {e}") from e
        return [_conform(op, i, v) for i, v in enumerate(produced)]
    kernel = KERNELS.get(type(op))
    if kernel is None:
        raise ModelError(f"{_label(op)}: the reference interpreter has no kernel for {op.name}")
    args = _check_args(op, inputs)
    _check_result_sizes(op)
    try:
        with np.errstate(all="ignore"):
            produced = kernel(op, args)
    except ValueError as e:  # a runtime shape rule broken (dynamic dims), or a shapes.ShapeError
        raise ModelError(f"{_label(op)}: {e}") from e
    results = produced if isinstance(produced, list) else [produced]
    return [_conform(op, i, value) for i, value in enumerate(results)]


def _check_result_sizes(op: Operation) -> None:
    """Refuse, before computing, a static result larger than a tensor may be or than
    the host can hold: a numpy MemoryError (or the OOM killer) says less."""
    for i, result in enumerate(op.results):
        t = result.type
        if isinstance(t, TensorType):
            what = f"{_label(op)}: result {i}"
            limits.check_host_allocation(ag.shape_of(t), dtypes.to_numpy(t.element_type).itemsize, what)


def _check_args(op: Operation, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    if len(inputs) != len(op.operands):
        raise InputError(f"{_label(op)} takes {len(op.operands)} operands, but {len(inputs)} were given")
    args = []
    for i, (operand, value) in enumerate(zip(op.operands, inputs)):
        array = np.asarray(value)
        t = operand.type
        assert isinstance(t, TensorType)
        if array.dtype != dtypes.to_numpy(t.element_type) or not shapes.compatible(ag.shape_of(t), array.shape):
            raise InputError(
                f"{_label(op)}: operand {i} is {array.dtype}{shapes.fmt(array.shape)}, expected {_describe(t)}"
            )
        args.append(array)
    return args


def _conform(op: Operation, index: int, value: np.ndarray) -> np.ndarray:
    """Round the value to its result's dtype, and check the shape the IR declares."""
    t = op.results[index].type
    assert isinstance(t, TensorType)
    array = np.asarray(value)
    want = dtypes.to_numpy(t.element_type)
    if array.dtype != want:
        array = array.astype(want)
    if not shapes.compatible(ag.shape_of(t), array.shape):
        raise ModelError(
            f"{_label(op)}: result {index} has shape {shapes.fmt(array.shape)}, "
            f"but the IR declares {shapes.fmt(ag.shape_of(t))}"
        )
    return array


# ---------------------------------------------------------------------- constants


def const_value(op: ag.ConstOp, weights: WeightStore | None = None) -> np.ndarray:
    """The value of a constant as a read-only array, so that no caller can change a weight."""
    t = op.out.type
    assert isinstance(t, TensorType)
    want = dtypes.to_numpy(t.element_type)
    if isinstance(op.value, DenseIntOrFPElementsAttr):
        array = _decode_dense(op.value)
    else:
        store = weights if weights is not None else _store_around(op)
        try:
            array = store.get(op.value)
        except WeightError as e:
            raise ModelError(f"Const '{op.label}': {e}") from e
        if array.dtype != want or not shapes.compatible(tuple(t.get_shape()), array.shape):
            raise ModelError(
                f"Const '{op.label}': weight '{op.value.weight.data}' is {array.dtype}{shapes.fmt(array.shape)}, "
                f"but the IR declares {_describe(t)}"
            )
        if isinstance(t.encoding, ag.FormatAttr):  # the store holds a device-format weight as laid out
            enc = t.encoding
            array = formats.to_logical(array, enc.format.data, enc.origin_format.data, enc.origin_shape.get_values())
    view = array.view()
    view.flags.writeable = False
    return view


def _decode_dense(attr: DenseIntOrFPElementsAttr) -> np.ndarray:
    """The array of an inline dense value (xDSL packs it little-endian; i1 as 0/-1 bytes)."""
    element = attr.get_element_type()
    shape = tuple(attr.get_shape())
    raw = attr.data.data
    flat = np.frombuffer(raw, np.int8) != 0 if element == i1 else np.frombuffer(raw, dtypes.to_numpy(element))
    if flat.size == 1 and shapes.numel(shape) != 1:
        return np.broadcast_to(flat, shape)  # a splat
    return flat.reshape(shape)


def _store_around(op: ag.ConstOp) -> WeightStore:
    module = op.get_toplevel_object()
    if not isinstance(module, ModuleOp) or not isinstance(module.attributes.get(WEIGHTS_ATTR), StringAttr):
        raise ModelError(
            f"Const '{op.label}' refers to weight '{op.value.weight.data}', "
            "but no weight store was given and its module has none"
        )
    return store_of(module)


# -------------------------------------------------------------------- elementwise


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Kernel:
    def kernel(op: Any, args: list[np.ndarray]) -> np.ndarray:
        return fn(_vec(args[0]), _vec(args[1]))

    return kernel


def _unary(fn: Callable[[np.ndarray], np.ndarray]) -> Kernel:
    def kernel(op: Any, args: list[np.ndarray]) -> np.ndarray:
        return fn(_vec(args[0]))

    return kernel


KERNELS.update(
    (cls, _binary(fn))
    for cls, fn in {
        ag.AddOp: np.add,
        ag.SubOp: np.subtract,
        ag.MulOp: np.multiply,
        ag.MaximumOp: np.maximum,
        ag.MinimumOp: np.minimum,
        ag.EqualOp: np.equal,
        ag.LessOp: np.less,
        ag.LessEqualOp: np.less_equal,
        ag.GreaterOp: np.greater,
        ag.GreaterEqualOp: np.greater_equal,
        ag.LogicalAndOp: np.logical_and,
        ag.LogicalOrOp: np.logical_or,
        ag.LogicalXorOp: np.logical_xor,
    }.items()
)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-x) without overflow: e^-|x| is at most 1."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


KERNELS.update(
    (cls, _unary(fn))
    for cls, fn in {
        ag.IdentityOp: lambda x: x,
        ag.NegOp: np.negative,
        ag.AbsOp: np.abs,
        ag.SignOp: np.sign,
        ag.ReluOp: lambda x: np.maximum(x, 0),
        ag.LogicalNotOp: np.logical_not,
        ag.SqrtOp: np.sqrt,
        ag.LogOp: np.log,
        ag.TanhOp: np.tanh,
        ag.SinOp: np.sin,
        ag.CosOp: np.cos,
        ag.FloorOp: np.floor,
        ag.CeilOp: np.ceil,
        ag.RoundOp: np.rint,  # half to even
        ag.SoftplusOp: lambda x: np.logaddexp(0, x),
        ag.SoftsignOp: lambda x: x / (1 + np.abs(x)),
        ag.HardSwishOp: lambda x: x * np.clip(x + 3, 0, 6) / 6,
    }.items()
)


@_kernel(ag.DivOp)
def _div(op: ag.DivOp, args: list[np.ndarray]) -> np.ndarray:
    a, b = _vec(args[0]), _vec(args[1])
    return _quotient(_mode(op, args[0]), a, b) if _kind(a.dtype) == "f" else _trunc_div(a, b)


@_kernel(ag.PowOp)
def _pow(op: ag.PowOp, args: list[np.ndarray]) -> np.ndarray:
    """Integer powers wrap like C; a negative exponent gives 1/a**-b truncated toward zero."""
    a, b = _vec(args[0]), _vec(args[1])
    if _kind(a.dtype) == "f":
        return np.power(a, b)
    negative = b < 0
    power = np.power(a, np.where(negative, 0, b).astype(b.dtype))
    if not negative.any():
        return power
    inverse = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0)).astype(a.dtype)
    return np.where(negative, inverse, power)


@_kernel(ag.PReluOp)
def _prelu(op: ag.PReluOp, args: list[np.ndarray]) -> np.ndarray:
    x, slope = _vec(args[0]), _vec(args[1])
    return np.where(x < 0, x * slope, x)


@_kernel(ag.LeakyReluOp)
def _leaky_relu(op: ag.LeakyReluOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    return np.where(x < 0, x * x.dtype.type(op.props.float("negative_slope")), x)


@_kernel(ag.EluOp)
def _elu(op: ag.EluOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    return np.where(x > 0, x, x.dtype.type(op.props.float("alpha")) * np.expm1(x))


@_kernel(ag.SeluOp)
def _selu(op: ag.SeluOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    alpha, gamma = (x.dtype.type(op.props.float(k)) for k in ("alpha", "gamma"))
    return gamma * np.where(x > 0, x, alpha * np.expm1(x))


@_kernel(ag.HardSigmoidOp)
def _hard_sigmoid(op: ag.HardSigmoidOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    alpha, beta = (x.dtype.type(op.props.float(k)) for k in ("alpha", "beta"))
    return np.clip(alpha * x + beta, 0, 1)


@_kernel(ag.ClipByValueOp)
def _clip(op: ag.ClipByValueOp, args: list[np.ndarray]) -> np.ndarray:
    """ONNX Clip: the lower bound first, so min > max gives max everywhere."""
    x = _vec(args[0])
    if op.props.has("min"):
        x = np.maximum(x, _bound(op.props.float("min"), x.dtype))
    if op.props.has("max"):
        x = np.minimum(x, _bound(op.props.float("max"), x.dtype))
    return x


def _bound(value: float, dtype: np.dtype) -> Any:
    """A float bound in the dtype of the clipped values, saturated for integers."""
    if _kind(dtype) == "f":
        return dtype.type(value)
    return dtype.type(min(max(value, _lowest(dtype)), _highest(dtype)))


@_kernel(ag.CastOp)
def _cast(op: ag.CastOp, args: list[np.ndarray]) -> np.ndarray:
    """numpy's conversions: floats truncate toward zero to integers, nonzero is True."""
    x = args[0]
    to = dtypes.to_numpy(op.y.type.element_type)
    if to == np.bool_:
        return _vec(x) != 0
    return _vec(x).astype(to) if _kind(to) in "iu" else x.astype(to)


@_kernel(ag.TransDataOp)
def _trans_data(op: ag.TransDataOp, args: list[np.ndarray]) -> np.ndarray:
    """A format changes the layout, not the values, and values here are logical."""
    return args[0]


@_kernel(ag.SelectOp)
def _select(op: ag.SelectOp, args: list[np.ndarray]) -> np.ndarray:
    return np.where(args[0], args[1], args[2])


# ------------------------------------------------------------ implementation modes
#
# Precision selection gives ops an `impl_mode` attribute (`--op_select_implmode`,
# `--op_precision_mode`). As CANN describes the modes, they differ for float16
# input: there high_precision refines results (Newton iterations, Taylor terms) and
# high_performance takes the fastest route that keeps a network's accuracy. So a
# mode changes how an op computes when it reads float16 or bfloat16; in float32
# and wider every mode computes as the plain kernel, and an op without the
# attribute computes as the plain kernel in any dtype.
#
# The approximations, each computed in float32 before the result is rounded:
# - `_rec_estimate` models the vector unit's reciprocal estimate: 1/x from the
#   midpoint of x's mantissa bin, 256 bins per octave, |r*x - 1| <= 2^-9.
#   `_rsqrt_estimate` is its 1/sqrt(x) counterpart, within 2^-9 too.
# - `_refined`: two Newton steps r(2 - x r) square the error twice
#   (2^-18, then below float32's rounding): float32-accurate to a few ulps.
# - Exp: e^x = 2^k e^r with |r| <= ln 2 / 2 (ln 2 split in two so that the
#   reduction stays exact); high_performance evaluates e^r by its
#   cubic Taylor polynomial (relative error <= 8e-4, under one float16 ulp),
#   high_precision by the degree-7 one (6e-9; float32 rounding leaves 1e-7).
# - Division, Reciprocal, ReduceMeanD and AvgPoolV2 multiply by the reciprocal
#   (estimate, or refined); Rsqrt is the estimate, or two Newton steps
#   r(3 - x r^2)/2 on it.
# - Sigmoid is the reciprocal of 1 + e^-x with the mode's exp and reciprocal.
# - Gelu: high_performance is the tanh form 0.5x(1 + tanh(sqrt(2/pi)(x +
#   0.044715x^3))) (within 4.8e-4 of the erf form), super_performance x
#   sigmoid(1.702x) (within 2.1e-2); high_precision is the erf form.
# - SoftmaxV2 and LogSoftmaxV2 in high_performance use the fast exp and
#   reciprocal; LayerNorm uses the rsqrt estimate. keep_fp16 (SoftmaxV2,
#   LayerNorm) stores every intermediate in float16, as a kernel that never
#   widens would.
# - support_out_of_bound_index (GatherV2, GatherElements) changes no value: this
#   interpreter checks every index in any mode.

_EXP_TERMS = {"high_performance": 3, "high_precision": 7}
_LN2 = math.log(2)
_LN2_HIGH = np.float32(0.693359375)  # ln 2 to 9 bits: k * _LN2_HIGH is exact in float32
_LN2_LOW = np.float32(_LN2 - 0.693359375)


def _mode(op: Operation, arg: np.ndarray) -> str | None:
    """The op's implementation mode where it matters: for float16/bfloat16 input."""
    attr = op.attributes.get("impl_mode")
    if not isinstance(attr, StringAttr) or arg.dtype not in _LOW_PRECISION:
        return None
    return attr.data


def _rec_estimate(x: np.ndarray) -> np.ndarray:
    """The reciprocal estimate: 1 / (the midpoint of x's mantissa bin), |r*x - 1| <= 2^-9."""
    x = np.asarray(x, np.float32)
    mantissa, exponent = np.frexp(np.abs(x))  # |x| = mantissa * 2^exponent, mantissa in [0.5, 1)
    middle = 0.5 + (np.floor((mantissa - 0.5) * 512) + 0.5) / 512
    r = np.ldexp((1 / middle).astype(np.float32), -exponent)
    r = np.copysign(r, x)
    return np.where(x == 0, np.copysign(np.float32(np.inf), x), np.where(np.isinf(x), np.copysign(np.float32(0), x), r))


def _rsqrt_estimate(x: np.ndarray) -> np.ndarray:
    """The reciprocal square root estimate from x's mantissa bin, within 2^-9 (x > 0)."""
    x = np.asarray(x, np.float32)
    mantissa, exponent = np.frexp(x)
    odd = exponent % 2 == 1
    mantissa = np.where(odd, mantissa / 2, mantissa)  # in [0.25, 1) with an even exponent
    exponent = np.where(odd, exponent + 1, exponent)
    middle = 0.25 + (np.floor((mantissa - 0.25) * 1024) + 0.5) / 1024
    r = np.ldexp((1 / np.sqrt(middle)).astype(np.float32), -exponent // 2)
    return np.where(x == 0, np.float32(np.inf), np.where(np.isinf(x), np.float32(0), np.where(x < 0, np.float32(np.nan), r)))


def _refined(x: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Two Newton steps toward 1/x from the estimate r."""
    for _ in range(2):
        r = np.where(np.isfinite(r) & (r != 0), r * (2 - x * r), r)
    return r


def _reciprocal(mode: str | None, x: np.ndarray) -> np.ndarray:
    if mode == "high_performance":
        return _rec_estimate(x)
    if mode == "high_precision":
        return _refined(x, _rec_estimate(x))
    return np.reciprocal(x)


def _quotient(mode: str | None, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b, as the mode divides: times a reciprocal estimate, refined or not."""
    return a / b if mode not in ("high_performance", "high_precision") else a * _reciprocal(mode, b)


def _rsqrt(mode: str | None, x: np.ndarray) -> np.ndarray:
    if mode == "high_performance":
        return _rsqrt_estimate(x)
    if mode == "high_precision":
        r = _rsqrt_estimate(x)
        for _ in range(2):
            r = np.where(np.isfinite(r) & (r != 0), r * (3 - x * r * r) / 2, r)
        return r
    return np.reciprocal(np.sqrt(x))


def _exp(mode: str | None, x: np.ndarray) -> np.ndarray:
    """e^x by range reduction and the mode's Taylor polynomial (plain exp without a mode)."""
    if mode not in _EXP_TERMS:
        return np.exp(x)
    x = np.asarray(x, np.float32)
    finite = np.isfinite(x)
    k = np.rint(np.where(finite, np.clip(x, -200, 200), 0) / _LN2)
    k32 = k.astype(np.float32)
    r = (np.where(finite, x, 0) - k32 * _LN2_HIGH) - k32 * _LN2_LOW  # Cody and Waite's reduction
    p = np.ones_like(r)
    for n in range(_EXP_TERMS[mode], 0, -1):  # Horner: 1 + r/1 (1 + r/2 (1 + r/3 ...))
        p = 1 + p * r / n
    y = np.ldexp(p, k.astype(np.int32))
    return np.where(finite, y, np.exp(x))


def _sigmoid_in(mode: str | None, x: np.ndarray) -> np.ndarray:
    if mode is None:
        return _sigmoid(x)
    return _reciprocal(mode, 1 + _exp(mode, -x))


def _fast_gelu(x: np.ndarray, mode: str | None) -> np.ndarray:
    """GELU by the tanh form (high_performance) or x sigmoid(1.702x) (super_performance)."""
    if mode == "super_performance":
        return x * _sigmoid(np.float32(1.702) * x)
    inner = np.float32(math.sqrt(2 / math.pi)) * (x + np.float32(0.044715) * x * x * x)
    return x * _sigmoid(2 * inner)


def _mode_kernel(fn: Callable[[str | None, np.ndarray], np.ndarray]) -> Kernel:
    def kernel(op: Any, args: list[np.ndarray]) -> np.ndarray:
        return fn(_mode(op, args[0]), _vec(args[0]))

    return kernel


KERNELS[ag.ReciprocalOp] = _mode_kernel(_reciprocal)
KERNELS[ag.RsqrtOp] = _mode_kernel(_rsqrt)
KERNELS[ag.ExpOp] = _mode_kernel(_exp)
KERNELS[ag.SigmoidOp] = _mode_kernel(_sigmoid_in)


def _softmax_fp16(op: ag.SoftmaxOp, x: np.ndarray) -> np.ndarray:
    """keep_fp16: every intermediate rounded to float16 (the sum is accumulated in float32)."""
    half = np.float16
    axes = shapes.norm_axes(op.props.ints("axes"), x.ndim)
    shifted = (_vec(x) - np.max(_vec(x), axis=axes, keepdims=True)).astype(half)
    e = np.exp(shifted.astype(np.float32)).astype(half)
    total = np.sum(e.astype(np.float32), axis=axes, keepdims=True).astype(half)
    return e.astype(np.float32) / total.astype(np.float32)


def _fast_layer_norm(mode: str, x: np.ndarray, axes: tuple[int, ...], epsilon: float, args: list[np.ndarray]) -> np.ndarray:
    """high_performance: the rsqrt estimate; keep_fp16: each step rounded to float16."""
    def store(v: np.ndarray) -> np.ndarray:
        return v.astype(np.float16).astype(np.float32) if mode == "keep_fp16" else v

    centred = store(x - store(np.mean(x, axis=axes, keepdims=True)))
    variance = store(np.mean(centred * centred, axis=axes, keepdims=True))
    scale = store(_rsqrt("high_performance" if mode == "high_performance" else None, variance + np.float32(epsilon)))
    y = store(centred * scale) * _vec(args[1])
    return y + _vec(args[2]) if len(args) > 2 else y


# ------------------------------------------------------------------------------ erf
#
# numpy has no erf, and np.vectorize(math.erf) is far too slow for a BERT. Each value
# takes a Taylor step from the nearest point of a table built with math.erf (or
# math.erfc). Degree 8 is within an ulp or two of them in float64; degree 5 leaves a
# remainder below 1e-13 (relative), enough for results of float32 and narrower.

_ORDER = 8
_NARROW_ORDER = 5
_ERF = (math.erf, 1.0, 64, 6.0)  # |erf(x)| rounds to 1 in float64 from 6 on
_ERFC = (math.erfc, -1.0, 512, 27.0)  # erfc underflows at 27; its relative slope is -2x


@cache
def _taylor_table(spec: tuple[Callable[[float], float], float, int, float]) -> np.ndarray:
    """Rows k = 0..8 of f^(k)(x0) / k! at x0 = i/steps on [0, limit].

    erf' = 2/sqrt(pi) e^-x^2 = -erfc', and the n-th derivative of e^-x^2 is
    (-1)^n H_n(x) e^-x^2 with the (physicists') Hermite polynomials H_n.
    """
    value, sign, steps, limit = spec
    rows = []
    for i in range(int(limit * steps) + 1):
        x0 = i / steps
        slope = sign * 2 / math.sqrt(math.pi) * math.exp(-x0 * x0)
        hermite = [1.0, 2 * x0]
        while len(hermite) < _ORDER:
            n = len(hermite) - 1
            hermite.append(2 * x0 * hermite[n] - 2 * n * hermite[n - 1])
        terms = [(-1) ** (k - 1) * slope * hermite[k - 1] / math.factorial(k) for k in range(1, _ORDER + 1)]
        rows.append([value(x0), *terms])
    return np.ascontiguousarray(np.array(rows).T)


def _taylor(x: np.ndarray, spec: tuple[Callable[[float], float], float, int, float], beyond: float, order: int) -> np.ndarray:
    """f(|x|) to the given Taylor degree from the table of spec, `beyond` from its
    limit on (and for NaN)."""
    _, _, steps, limit = spec
    a = np.abs(x)
    inside = a < limit
    a = np.where(inside, a, 0.0)
    nearest = np.rint(a * steps).astype(np.intp)
    h = a - nearest / steps  # exact: the two are within a factor of two
    table = _taylor_table(spec)
    y = np.take(table[order], nearest)
    coefficient = np.empty_like(y)
    for k in range(order - 1, -1, -1):  # Horner, in place: this loop is the cost of a GELU
        y *= h
        y += np.take(table[k], nearest, out=coefficient)
    return np.where(inside, y, beyond)


def _order(dtype: np.dtype) -> int:
    return _ORDER if dtype == np.float64 else _NARROW_ORDER


def erf(x: np.ndarray, order: int = _ORDER) -> np.ndarray:
    """erf in float64."""
    x = np.asarray(x, np.float64)
    return np.where(np.isnan(x), x, np.copysign(_taylor(x, _ERF, 1.0, order), x))


def erfc(x: np.ndarray, order: int = _ORDER) -> np.ndarray:
    """1 - erf(x) in float64, accurate also where it is tiny (no cancellation)."""
    x = np.asarray(x, np.float64)
    tail = _taylor(x, _ERFC, 0.0, order)
    return np.where(np.isnan(x), x, np.where(x < 0, 2 - tail, tail))


@_kernel(ag.ErfOp)
def _erf(op: ag.ErfOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    return erf(x, _order(x.dtype)).astype(x.dtype)


@_kernel(ag.GeluOp)
def _gelu(op: ag.GeluOp, args: list[np.ndarray]) -> np.ndarray:
    """In float64, and without cancelling for negative x: 1 + erf(-v) is erfc(v), and
    (1 + tanh(z)) / 2 is sigmoid(2z). The fast modes are `_fast_gelu`."""
    x = _vec(args[0])
    if _mode(op, args[0]) in ("high_performance", "super_performance"):
        return _fast_gelu(x, _mode(op, args[0]))
    wide = x.astype(np.float64)
    if op.props.str("approximate", "none") == "tanh":
        inner = math.sqrt(2 / math.pi) * (wide + 0.044715 * wide**3)
        return (wide * _sigmoid(2 * inner)).astype(x.dtype)
    return (0.5 * wide * erfc(-wide / math.sqrt(2), _order(x.dtype))).astype(x.dtype)


# ----------------------------------------------------------------------- reductions


def _reduced_axes(op: Any, rank: int) -> tuple[int, ...]:
    axes = op.props.ints("axes")
    return shapes.norm_axes(axes, rank) if axes else tuple(range(rank))


@_kernel(ag.ReduceSumOp)
def _reduce_sum(op: ag.ReduceSumOp, args: list[np.ndarray]) -> np.ndarray:
    x = _acc(args[0]) if _kind(args[0].dtype) in "iub" else _vec(args[0])
    return np.sum(x, axis=_reduced_axes(op, x.ndim), keepdims=op.props.bool("keep_dims"))


@_kernel(ag.ReduceMeanOp)
def _reduce_mean(op: ag.ReduceMeanOp, args: list[np.ndarray]) -> np.ndarray:
    """Integers: the int64 sum divided by the count, truncated toward zero."""
    x = args[0]
    axes = _reduced_axes(op, x.ndim)
    keep = op.props.bool("keep_dims")
    if _kind(x.dtype) == "f" and _mode(op, x) is None:
        return np.mean(_vec(x), axis=axes, keepdims=keep)
    if _kind(x.dtype) == "f":
        total = np.sum(_vec(x), axis=axes, keepdims=keep)
        return _quotient(_mode(op, x), total, total.dtype.type(shapes.numel([x.shape[a] for a in axes])))
    total = np.sum(_acc(x), axis=axes, keepdims=keep)
    count = np.int64(shapes.numel([x.shape[a] for a in axes]))
    return _trunc_div(total, count)


@_kernel(ag.ReduceProdOp)
def _reduce_prod(op: ag.ReduceProdOp, args: list[np.ndarray]) -> np.ndarray:
    x = _acc(args[0]) if _kind(args[0].dtype) in "iub" else _vec(args[0])
    return np.prod(x, axis=_reduced_axes(op, x.ndim), keepdims=op.props.bool("keep_dims"))


@_kernel(ag.ReduceMaxOp)
def _reduce_max(op: ag.ReduceMaxOp, args: list[np.ndarray]) -> np.ndarray:
    """Over an empty set: -inf, or the smallest integer (ONNX)."""
    x = _vec(args[0])
    return np.max(x, axis=_reduced_axes(op, x.ndim), keepdims=op.props.bool("keep_dims"), initial=_lowest(x.dtype))


@_kernel(ag.ReduceMinOp)
def _reduce_min(op: ag.ReduceMinOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    return np.min(x, axis=_reduced_axes(op, x.ndim), keepdims=op.props.bool("keep_dims"), initial=_highest(x.dtype))


def _arg(find: Callable[..., np.ndarray]) -> Kernel:
    def kernel(op: Any, args: list[np.ndarray]) -> np.ndarray:
        x = _vec(args[0])
        axis = shapes.norm_axis(op.props.int("axis"), x.ndim)
        if op.props.bool("select_last_index"):
            index = x.shape[axis] - 1 - find(np.flip(x, axis), axis=axis)
        else:
            index = find(x, axis=axis)
        return np.expand_dims(index, axis) if op.props.bool("keep_dims") else index

    return kernel


KERNELS[ag.ArgMaxOp] = _arg(np.argmax)
KERNELS[ag.ArgMinOp] = _arg(np.argmin)


def _shifted(op: Any, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """x minus its maximum over the softmax axes, e^that, and the axes."""
    axes = shapes.norm_axes(op.props.ints("axes"), x.ndim)
    shifted = x - np.max(x, axis=axes, keepdims=True)
    return shifted, np.exp(shifted), axes


@_kernel(ag.SoftmaxOp)
def _softmax(op: ag.SoftmaxOp, args: list[np.ndarray]) -> np.ndarray:
    mode = _mode(op, args[0])
    if mode == "keep_fp16":
        return _softmax_fp16(op, args[0])
    shifted, e, axes = _shifted(op, _vec(args[0]))
    if mode == "high_performance":
        e = _exp(mode, shifted)
    return _quotient(mode, e, np.sum(e, axis=axes, keepdims=True))


@_kernel(ag.LogSoftmaxOp)
def _log_softmax(op: ag.LogSoftmaxOp, args: list[np.ndarray]) -> np.ndarray:
    shifted, e, axes = _shifted(op, _vec(args[0]))
    if _mode(op, args[0]) == "high_performance":
        e = _exp("high_performance", shifted)
    return shifted - np.log(np.sum(e, axis=axes, keepdims=True))


# -------------------------------------------------------------------- normalisation


def _normalise(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> np.ndarray:
    """(x - mean) / sqrt(var + epsilon) over axes; the variance is biased, as in ONNX."""
    centred = x - np.mean(x, axis=axes, keepdims=True)
    variance = np.mean(centred * centred, axis=axes, keepdims=True)
    return centred / np.sqrt(variance + x.dtype.type(epsilon))


@_kernel(ag.LayerNormOp)
def _layer_norm(op: ag.LayerNormOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    begin = shapes.norm_axis(op.props.int("begin_norm_axis"), x.ndim, "begin_norm_axis")
    mode = _mode(op, args[0])
    if mode in ("high_performance", "keep_fp16"):
        return _fast_layer_norm(mode, x, tuple(range(begin, x.ndim)), op.props.float("epsilon"), args)
    y = _normalise(x, tuple(range(begin, x.ndim)), op.props.float("epsilon")) * _vec(args[1])
    return y + _vec(args[2]) if len(args) > 2 else y


def _per_channel(v: np.ndarray, rank: int) -> np.ndarray:
    return _vec(v).reshape((1, -1) + (1,) * (rank - 2))


@_kernel(ag.BatchNormOp)
def _batch_norm(op: ag.BatchNormOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    scale, offset, mean, variance = (_per_channel(v, x.ndim) for v in args[1:])
    return (x - mean) / np.sqrt(variance + x.dtype.type(op.props.float("epsilon"))) * scale + offset


@_kernel(ag.InstanceNormOp)
def _instance_norm(op: ag.InstanceNormOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    y = _normalise(x, tuple(range(2, x.ndim)), op.props.float("epsilon"))
    return y * _per_channel(args[1], x.ndim) + _per_channel(args[2], x.ndim)


# ----------------------------------------------------------------------- attention


@_kernel(ag.MultiHeadAttentionOp)
def _multi_head_attention(op: ag.MultiHeadAttentionOp, args: list[np.ndarray]) -> np.ndarray:
    """The block as its unfused ops compute it, so that fusing it changes rounding
    only: projections (bias in the accumulator), scores and context are cube
    products, scale, mask and softmax vector ops, and each is rounded to the dtype
    where the unfused graph stores a tensor."""
    dtype = args[0].dtype
    heads = op.props.int("head_num")
    inputs = args[:3]
    if op.props.str("input_layout") == "SBH":
        inputs = [np.swapaxes(x, 0, 1) for x in inputs]
    biases = args[6:9] if len(args) >= 9 else [None, None, None]
    q, k, v = (_split_heads(_project(x, w, b).astype(dtype), heads) for x, w, b in zip(inputs, args[3:6], biases))
    scores = _vec(np.matmul(_acc(q), np.swapaxes(_acc(k), -1, -2)).astype(dtype))
    scores = (scores * scores.dtype.type(op.props.float("scale"))).astype(dtype)
    if len(args) in (7, 10):
        scores = (_vec(scores) + _vec(args[-1])).astype(dtype)
    shifted = np.exp(_vec(scores) - np.max(_vec(scores), axis=-1, keepdims=True))
    p = (shifted / np.sum(shifted, axis=-1, keepdims=True)).astype(dtype)
    context = np.matmul(_acc(p), _acc(v))
    b, _, s, _ = context.shape
    y = context.transpose(0, 2, 1, 3).reshape(b, s, -1)
    return np.swapaxes(y, 0, 1) if op.props.str("input_layout") == "SBH" else y


def _project(x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """x [B, S, K] @ w [K, N] (+ b), B and S folded into the rows as BatchMatMulV2's kernel does."""
    y = (_acc(x).reshape(-1, x.shape[-1]) @ _acc(w)).reshape(x.shape[:-1] + w.shape[-1:])
    return y if b is None else y + _acc(b)


def _split_heads(y: np.ndarray, heads: int) -> np.ndarray:
    """[B, S, H * D] -> [B, H, S, D]."""
    b, s, n = y.shape
    return y.reshape(b, s, heads, n // heads).transpose(0, 2, 1, 3)


# ------------------------------------------------------------------------ cube ops


def _taps(
    x: np.ndarray, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int], out: Sequence[int]
) -> list[np.ndarray]:
    """The strided views [N, C, OH, OW] of padded x under each kernel offset, row-major:
    tap (i, j) holds x[.., i * dh + oh * sh, j * dw + ow * sw] at [.., oh, ow]."""
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, strides, dilations, out
    return [
        x[:, :, i * dh : i * dh + (oh - 1) * sh + 1 : sh, j * dw : j * dw + (ow - 1) * sw + 1 : sw]
        for i in range(kh)
        for j in range(kw)
    ]


def _pad_hw(x: np.ndarray, pads: Sequence[int], value: Any) -> np.ndarray:
    """Pad the last two axes by (top, bottom, left, right) with value."""
    if not any(pads):
        return x
    top, bottom, left, right = pads
    return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=value)


@_kernel(ag.Conv2DOp)
def _conv2d(op: ag.Conv2DOp, args: list[np.ndarray]) -> np.ndarray:
    """im2col per group and one (batched) product filter @ columns; a depthwise filter
    instead multiplies and adds each kernel offset's view in place of a tiny product.
    The padding holds `offset_x` (0 without it)."""
    x, w = _acc(args[0]), _acc(args[1])
    n, _, h, wd = x.shape
    cout, cin_g, kh, kw = w.shape
    groups = op.props.int("groups", 1)
    _, _, sh, sw = op.props.ints("strides")
    _, _, dh, dw = op.props.ints("dilations")
    pads = op.props.ints("pads")
    oh = shapes.window_out(h, kh, sh, pads[0], pads[1], dh)
    ow = shapes.window_out(wd, kw, sw, pads[2], pads[3], dw)
    taps = _taps(_pad_hw(x, pads, op.props.int("offset_x")), (kh, kw), (sh, sw), (dh, dw), (oh, ow))
    if cin_g == 1 and cout == groups:
        per_tap = w.reshape(cout, kh * kw)
        y = reduce(np.add, (tap * per_tap[:, k].reshape(1, cout, 1, 1) for k, tap in enumerate(taps)))
    else:
        columns = taps[0] if len(taps) == 1 else np.stack(taps, axis=2)  # [N, C, KH*KW, OH, OW]
        columns = columns.reshape(n, groups, cin_g * kh * kw, oh * ow)
        y = np.matmul(w.reshape(groups, cout // groups, cin_g * kh * kw), columns).reshape(n, cout, oh, ow)
    return y + _acc(args[2]).reshape(1, cout, 1, 1) if len(args) > 2 else y


def _with_bias(y: np.ndarray, args: list[np.ndarray]) -> np.ndarray:
    return y + _acc(args[2]) if len(args) > 2 else y


@_kernel(ag.MatMulV2Op)
def _matmul_v2(op: ag.MatMulV2Op, args: list[np.ndarray]) -> np.ndarray:
    a, b = _acc(args[0]), _acc(args[1])
    a = a.T if op.props.bool("transpose_x1") else a
    b = b.T if op.props.bool("transpose_x2") else b
    return _with_bias(a @ b, args)


@_kernel(ag.BatchMatMulOp)
def _batch_matmul(op: ag.BatchMatMulOp, args: list[np.ndarray]) -> np.ndarray:
    """numpy.matmul; against one matrix, x1's batch dims fold into its rows, as numpy
    would otherwise make one small product per batch element."""
    a, b = _acc(args[0]), _acc(args[1])
    a = np.swapaxes(a, -1, -2) if op.props.bool("adj_x1") else a
    b = np.swapaxes(b, -1, -2) if op.props.bool("adj_x2") else b
    if a.ndim > 2 and b.ndim == 2:
        y = (a.reshape(-1, a.shape[-1]) @ b).reshape(a.shape[:-1] + b.shape[-1:])
    else:
        y = np.matmul(a, b)
    return _with_bias(y, args)


@_kernel(ag.GemmOp)
def _gemm(op: ag.GemmOp, args: list[np.ndarray]) -> np.ndarray:
    a, b = _acc(args[0]), _acc(args[1])
    a = a.T if op.props.bool("trans_a") else a
    b = b.T if op.props.bool("trans_b") else b
    y = a @ b
    alpha, beta = op.props.float("alpha", 1.0), op.props.float("beta", 1.0)
    if alpha != 1.0:
        y = y * alpha
    if len(args) < 3 or beta == 0.0:
        return y
    c = _acc(args[2])
    return y + (c if beta == 1.0 else c * beta)


@_kernel(ag.FullyConnectionOp)
def _fully_connection(op: ag.FullyConnectionOp, args: list[np.ndarray]) -> np.ndarray:
    """The rows of x (its dims from `axis` on, flattened) times w's num_output rows."""
    x, w = _acc(args[0]), _acc(args[1])
    axis, n = op.props.int("axis", 1), op.props.int("num_output")
    rows = x.reshape(shapes.numel(x.shape[:axis]), shapes.numel(x.shape[axis:]))
    y = _with_bias(rows @ (w if op.props.bool("transpose") else w.reshape(n, -1).T), args)
    return y.reshape(x.shape[:axis] + (n,) + (1,) * (x.ndim - axis - 1))


# ------------------------------------------------------------------------- pooling


def _pool_taps(op: ag.MaxPoolOp | ag.AvgPoolOp, x: np.ndarray, fill: Any, dilations: Sequence[int]) -> tuple[list[np.ndarray], tuple[int, ...]]:
    """The kernel-offset views of x padded with `fill`, and the padding applied.

    ceil_mode can want windows past the bottom/right pads: those cells are padded
    too, and the applied padding (top, bottom, left, right) says how far.
    """
    _, _, h, w = x.shape
    k, s, p = op.props.ints("ksize"), op.props.ints("strides"), op.props.ints("pads")
    ceil_mode = op.props.bool("ceil_mode")
    out = (
        shapes.window_out(h, k[0], s[0], p[0], p[1], dilations[0], ceil_mode),
        shapes.window_out(w, k[1], s[1], p[2], p[3], dilations[1], ceil_mode),
    )
    need = [(o - 1) * st + d * (kk - 1) + 1 for o, st, d, kk in zip(out, s, dilations, k)]
    applied = (p[0], max(p[1], need[0] - h - p[0]), p[2], max(p[3], need[1] - w - p[2]))
    return _taps(_pad_hw(x, applied, fill), k, s, dilations, out), applied


@_kernel(ag.MaxPoolOp)
def _max_pool(op: ag.MaxPoolOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    taps, _ = _pool_taps(op, x, _lowest(x.dtype), op.dilations(op.props))
    return reduce(np.maximum, taps)


@_kernel(ag.AvgPoolOp)
def _avg_pool(op: ag.AvgPoolOp, args: list[np.ndarray]) -> np.ndarray:
    """The divisor counts a window's input cells (under its dilated taps), and its
    explicit padding unless `exclusive`; cells added only for ceil_mode never count
    (ONNX, onnxruntime)."""
    x = _vec(args[0])
    dilations = op.dilations(op.props)
    taps, applied = _pool_taps(op, x, 0, dilations)
    total = reduce(np.add, taps)
    _, _, h, w = x.shape
    p = op.props.ints("pads")
    explicit = 0 if op.props.bool("exclusive") else 1
    cells = np.pad(np.ones((h, w), x.dtype), ((p[0], p[1]), (p[2], p[3])), constant_values=explicit)
    cells = np.pad(cells, ((0, applied[1] - p[1]), (0, applied[3] - p[3])))
    k, s = op.props.ints("ksize"), op.props.ints("strides")
    return _quotient(_mode(op, args[0]), total, reduce(np.add, _taps(cells[None, None], k, s, dilations, total.shape[2:])))


@_kernel(ag.GlobalAveragePoolOp)
def _global_average_pool(op: ag.GlobalAveragePoolOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    return np.mean(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@_kernel(ag.GlobalMaxPoolOp)
def _global_max_pool(op: ag.GlobalMaxPoolOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    return np.max(x, axis=tuple(range(2, x.ndim)), keepdims=True)


# ------------------------------------------------------------------------ shape ops


@_kernel(ag.ReshapeOp)
def _reshape(op: ag.ReshapeOp, args: list[np.ndarray]) -> np.ndarray:
    x = args[0]
    return x.reshape(shapes.reshape(x.shape, op.props.ints("shape")))


@_kernel(ag.ShapeOp)
def _shape(op: ag.ShapeOp, args: list[np.ndarray]) -> np.ndarray:
    return np.array(args[0].shape, np.int64)


@_kernel(ag.DynamicReshapeOp)
def _dynamic_reshape(op: ag.DynamicReshapeOp, args: list[np.ndarray]) -> np.ndarray:
    """ONNX's Reshape: 0 copies the input's dim (a real 0 with allowzero), one -1 is inferred."""
    x, target = args[0], [int(d) for d in args[1]]
    if not op.props.bool("allowzero"):
        if any(d == 0 and i >= x.ndim for i, d in enumerate(target)):
            raise ValueError(f"target shape {target} copies a dim beyond the input's rank {x.ndim}")
        target = [x.shape[i] if d == 0 else d for i, d in enumerate(target)]
    if target.count(-1) > 1 or any(d < -1 for d in target):
        raise ValueError(f"target shape {target} may hold one -1 and sizes >= 0 only")
    known = shapes.numel([d for d in target if d != -1])
    if -1 in target and known and x.size % known == 0:
        target = [x.size // known if d == -1 else d for d in target]
    if shapes.numel(target) != x.size:
        raise ValueError(f"cannot reshape {shapes.fmt(x.shape)} ({x.size} elements) to {target}")
    return _as_proved(op, x.reshape(target))


def _as_proved(op: ag.AscendOp, result: np.ndarray) -> np.ndarray:
    """The result of an op whose dims the importer proved (`dims`, -1 for a run-time one),
    checked against them: a proof the inputs break is an error, not a wrong shape."""
    proved = op.props.ints("dims", (-1,) * result.ndim)
    if any(d not in (-1, r) for d, r in zip(proved, result.shape)):
        raise ValueError(f"the result {shapes.fmt(result.shape)} differs from the dims {list(proved)} proved at import")
    return result


@_kernel(ag.RangeOp)
def _range(op: ag.RangeOp, args: list[np.ndarray]) -> np.ndarray:
    """ONNX's Range: start + i * delta for i < max(ceil((limit - start) / delta), 0)."""
    start, limit, delta = (a.item() for a in args)
    if delta == 0:
        raise ValueError("delta is 0")
    count = max(math.ceil((limit - start) / delta), 0) if args[0].dtype.kind == "f" else max(-((start - limit) // delta), 0)
    return (start + np.arange(count, dtype=np.float64 if args[0].dtype.kind == "f" else np.int64) * delta).astype(args[0].dtype)


@_kernel(ag.BroadcastToOp)
def _broadcast_to(op: ag.BroadcastToOp, args: list[np.ndarray]) -> np.ndarray:
    x, target = args[0], tuple(int(d) for d in args[1])
    return _as_proved(op, np.broadcast_to(x, np.broadcast_shapes(x.shape, target)))


@_kernel(ag.StridedSliceV2Op)
def _strided_slice_v2(op: ag.StridedSliceV2Op, args: list[np.ndarray]) -> np.ndarray:
    """ONNX's Slice: negative starts and ends count from the end, then clamp to the dim."""
    x = args[0]
    index = [slice(None)] * x.ndim
    for start, end, axis, step in zip(*(a.astype(np.int64).tolist() for a in args[1:])):
        axis += x.ndim if axis < 0 else 0
        size = x.shape[axis]
        start += size if start < 0 else 0
        end += size if end < 0 else 0
        if step == 0:
            raise ValueError(f"the stride of axis {axis} is 0")
        if step > 0:
            index[axis] = slice(min(max(start, 0), size), min(max(end, 0), size), step)
        else:
            first, stop = min(max(start, 0), size - 1), min(max(end, -1), size - 1)
            index[axis] = slice(first, None if stop < 0 else stop, step)
    return _as_proved(op, x[tuple(index)])


@_kernel(ag.FlattenOp)
def _flatten(op: ag.FlattenOp, args: list[np.ndarray]) -> np.ndarray:
    x = args[0]
    axis = op.props.int("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return x.reshape(shapes.numel(x.shape[:axis]), shapes.numel(x.shape[axis:]))


@_kernel(ag.TransposeOp)
def _transpose(op: ag.TransposeOp, args: list[np.ndarray]) -> np.ndarray:
    return np.transpose(args[0], op.props.ints("perm"))


@_kernel(ag.ConfusionTransposeOp)
def _confusion_transpose(op: ag.ConfusionTransposeOp, args: list[np.ndarray]) -> np.ndarray:
    x, perm, target = args[0], op.props.ints("perm"), op.props.ints("shape")
    if op.props.bool("transpose_first"):
        moved = np.transpose(x, perm)
        return moved.reshape(shapes.reshape(moved.shape, target))
    return np.transpose(x.reshape(shapes.reshape(x.shape, target)), perm)


@_kernel(ag.SqueezeOp)
def _squeeze(op: ag.SqueezeOp, args: list[np.ndarray]) -> np.ndarray:
    x = args[0]
    axes = shapes.norm_axes(op.props.ints("axis"), x.ndim)
    return np.squeeze(x, axis=axes or tuple(i for i, d in enumerate(x.shape) if d == 1))


@_kernel(ag.UnsqueezeOp)
def _unsqueeze(op: ag.UnsqueezeOp, args: list[np.ndarray]) -> np.ndarray:
    x, axes = args[0], op.props.ints("axes")
    return np.expand_dims(x, shapes.norm_axes(axes, x.ndim + len(axes)))


@_kernel(ag.ConcatOp)
def _concat(op: ag.ConcatOp, args: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(args, axis=shapes.norm_axis(op.props.int("concat_dim"), args[0].ndim))


@_kernel(ag.SplitOp)
def _split(op: ag.SplitOp, args: list[np.ndarray]) -> list[np.ndarray]:
    x = args[0]
    return np.split(x, op.props.int("num_split"), axis=shapes.norm_axis(op.props.int("split_dim"), x.ndim))


@_kernel(ag.SplitVOp)
def _split_v(op: ag.SplitVOp, args: list[np.ndarray]) -> list[np.ndarray]:
    x = args[0]
    cuts = np.cumsum(op.props.ints("size_splits"))[:-1]
    return np.split(x, cuts, axis=shapes.norm_axis(op.props.int("split_dim"), x.ndim))


def _slice(begin: int, end: int, stride: int, size: int) -> slice:
    """ONNX Slice's clamping of normalised bounds; end -1 with a negative stride runs
    through index 0, which a Python slice spells as None."""
    if stride > 0:
        return slice(min(max(begin, 0), size), min(max(end, 0), size), stride)
    begin = min(max(begin, 0), size - 1)
    end = min(max(end, -1), size - 1)
    return slice(begin, None if end < 0 else end, stride)


@_kernel(ag.StridedSliceOp)
def _strided_slice(op: ag.StridedSliceOp, args: list[np.ndarray]) -> np.ndarray:
    x = args[0]
    bounds = zip(op.props.ints("begin"), op.props.ints("end"), op.props.ints("strides"), x.shape)
    return x[tuple(_slice(b, e, s, d) for b, e, s, d in bounds)]


def _wrapped(op: Any, indices: np.ndarray, size: int) -> np.ndarray:
    """Indices with negative ones counted from the end; out of range is an error (ONNX)."""
    indices = indices.astype(np.int64)
    bad = (indices < -size) | (indices >= size)
    if bad.any():
        raise ModelError(f"{_label(op)}: index {indices[bad].flat[0]} is out of range for a dimension of {size}")
    return np.where(indices < 0, indices + size, indices)


@_kernel(ag.GatherOp)
def _gather(op: ag.GatherOp, args: list[np.ndarray]) -> np.ndarray:
    x, indices = args
    axis = shapes.norm_axis(op.props.int("axis"), x.ndim)
    return np.take(x, _wrapped(op, indices, x.shape[axis]), axis=axis)


@_kernel(ag.GatherElementsOp)
def _gather_elements(op: ag.GatherElementsOp, args: list[np.ndarray]) -> np.ndarray:
    """The indices may be shorter than x off the axis: x is cut to them first."""
    x, indices = args
    axis = shapes.norm_axis(op.props.int("axis"), x.ndim)
    x = x[tuple(slice(None) if i == axis else slice(0, d) for i, d in enumerate(indices.shape))]
    return np.take_along_axis(x, _wrapped(op, indices, x.shape[axis]), axis=axis)


@_kernel(ag.PadOp)
def _pad(op: ag.PadOp, args: list[np.ndarray]) -> np.ndarray:
    """Negative paddings crop first (ONNX), then the rest pads."""
    x, p = args[0], op.props.ints("paddings")
    before, after = p[0::2], p[1::2]
    x = x[tuple(slice(max(-b, 0), d - max(-a, 0)) for b, a, d in zip(before, after, x.shape))]
    widths = [(max(b, 0), max(a, 0)) for b, a in zip(before, after)]
    mode = op.props.str("mode")
    if mode == "constant":
        fill = np.asarray(op.props.float("constant_value")).astype(x.dtype)
        return np.pad(x, widths, mode="constant", constant_values=fill)
    return np.pad(x, widths, mode=mode)


@_kernel(ag.ExpandOp)
def _expand(op: ag.ExpandOp, args: list[np.ndarray]) -> np.ndarray:
    x = args[0]
    return np.broadcast_to(x, shapes.broadcast(x.shape, op.props.ints("shape")))


@_kernel(ag.TileOp)
def _tile(op: ag.TileOp, args: list[np.ndarray]) -> np.ndarray:
    return np.tile(args[0], op.props.ints("multiples"))


@_kernel(ag.DepthToSpaceOp)
def _depth_to_space(op: ag.DepthToSpaceOp, args: list[np.ndarray]) -> np.ndarray:
    """DCR reads the channels as [block, block, C']; CRD as [C', block, block]."""
    x, b = args[0], op.props.int("block_size")
    n, c, h, w = x.shape
    if op.props.str("mode", "DCR") == "CRD":
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    return y.reshape(n, c // (b * b), h * b, w * b)


@_kernel(ag.SpaceToDepthOp)
def _space_to_depth(op: ag.SpaceToDepthOp, args: list[np.ndarray]) -> np.ndarray:
    x, b = args[0], op.props.int("block_size")
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)


# -------------------------------------------------------------------------- resize


def _source_coords(mode: str, n_out: int, n_in: int, scale: float, crop: tuple[float, float]) -> np.ndarray:
    """Where each output index samples the input axis (ONNX Resize's transforms).

    As in the ONNX reference, `scale * n_in` (not n_out) is the output length that
    align_corners, pytorch_half_pixel, half_pixel_symmetric and tf_crop_and_resize
    use; `crop` is the axis' (start, end) of tf_crop_and_resize's roi.
    """
    y = np.arange(n_out, dtype=np.float64)
    length = scale * n_in
    if mode == "tf_crop_and_resize":
        start, end = crop
        if length <= 1:
            return np.full(n_out, 0.5 * (start + end) * (n_in - 1))
        return start * (n_in - 1) + y * (end - start) * (n_in - 1) / (length - 1)
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        return n_in / 2 * (1 - n_out / length) + (y + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return np.full(n_out, -0.5) if length == 1 else (y + 0.5) / scale - 0.5
    if mode == "align_corners":
        return np.zeros(n_out) if length == 1 else y * (n_in - 1) / (length - 1)
    if mode == "asymmetric":
        return y / scale
    raise ValueError(f"coordinate_transformation_mode {mode!r} is not supported")


_ROUNDS_UP: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "round_prefer_floor": lambda frac: frac > 0.5,
    "round_prefer_ceil": lambda frac: frac >= 0.5,
    "floor": lambda frac: np.zeros(frac.shape, bool),
    "ceil": lambda frac: frac > 0,
}


def _keys(s: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with coefficient a."""
    s = np.abs(s)
    near = ((a + 2) * s - (a + 3)) * s * s + 1
    far = ((a * s - 5 * a) * s + 8 * a) * s - 4 * a
    return np.where(s <= 1, near, np.where(s < 2, far, 0.0))


def _antialiased(op: ag.ResizeOp, x_src: np.ndarray, n_in: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Taps and weights of a shrinking axis with antialias: the kernel is stretched by
    1 / scale (so it averages every input cell it covers) and its weights sum to 1;
    taps past the edge repeat the edge, or drop out with exclude_outside."""
    base = np.floor(x_src)
    t = x_src - base
    reach = 1 if op.props.str("mode") == "linear" else 2
    first = int(np.floor(-reach / scale) + 1)
    steps = np.arange(first, 2 - first)
    distance = (steps[None, :] - t[:, None]) * scale
    if op.props.str("mode") == "linear":
        weights = np.clip(1 - np.abs(distance), 0, None)
    else:
        weights = _keys(distance, op.props.float("cubic_coeff_a", -0.75))
    index = base.astype(np.int64)[:, None] + steps[None, :]
    if op.props.bool("exclude_outside"):
        weights = np.where((index < 0) | (index >= n_in), 0.0, weights)
    total = weights.sum(axis=1, keepdims=True)
    return np.clip(index, 0, n_in - 1), weights / np.where(total == 0, 1.0, total)


def _mix(op: ag.ResizeOp, x_src: np.ndarray, n_in: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """The input indices [n_out, taps] each output mixes, and their weights.

    Like the ONNX reference, a source coordinate on a whole index leans left: its
    taps end at that index with weight 1 there. Taps past the edge repeat the edge,
    or drop out and renormalise with exclude_outside.
    """
    if op.props.bool("antialias") and scale < 1:
        return _antialiased(op, x_src, n_in, scale)
    base = np.floor(x_src)
    whole = x_src == base
    t = np.where(whole, 1.0, x_src - base)
    if op.props.str("mode") == "linear":
        taps, weights = 2, np.stack([1 - t, t], axis=1)
    else:
        a = op.props.float("cubic_coeff_a", -0.75)
        taps, weights = 4, np.stack([_keys(t + 1, a), _keys(t, a), _keys(1 - t, a), _keys(2 - t, a)], axis=1)
    first = base.astype(np.int64) - taps // 2 + np.where(whole, 0, 1)
    index = first[:, None] + np.arange(taps)
    if op.props.bool("exclude_outside"):
        weights = np.where((index < 0) | (index >= n_in), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    return np.clip(index, 0, n_in - 1), weights


def _resize_axis(op: ag.ResizeOp, x: np.ndarray, axis: int, n_out: int, scale: float, crop: tuple[float, float]) -> np.ndarray:
    n_in = x.shape[axis]
    transform = op.props.str("coordinate_transformation_mode")
    x_src = _source_coords(transform, n_out, n_in, scale, crop)
    if op.props.str("mode") == "nearest":
        base = np.floor(x_src)
        rule = _ROUNDS_UP[op.props.str("nearest_mode", "round_prefer_floor")]
        index = base.astype(np.int64) + rule(x_src - base)
        y = np.take(x, np.clip(index, 0, n_in - 1), axis=axis)
    else:
        index, weights = _mix(op, x_src, n_in, scale)
        gathered = np.take(x, index, axis=axis)
        weights = weights.reshape(weights.shape + (1,) * (x.ndim - axis - 1))
        y = np.sum(gathered * weights, axis=axis + 1)
    if transform != "tf_crop_and_resize":
        return y
    outside = ((x_src < 0) | (x_src > n_in - 1)).reshape((n_out,) + (1,) * (x.ndim - axis - 1))
    return np.where(outside, op.props.float("extrapolation_value"), y)


@_kernel(ag.ResizeOp)
def _resize(op: ag.ResizeOp, args: list[np.ndarray]) -> np.ndarray:
    """One axis at a time (the interpolation is separable), in float64 for linear and
    cubic; integers round half to even and saturate, as the ONNX reference does. A
    sample outside tf_crop_and_resize's input fills a whole slice across the other
    axes, so interpolating them afterwards leaves it the extrapolation value."""
    x = args[0]
    if op.props.str("mode") != "nearest":
        x = x.astype(np.float64)
    scales = [float(s) for s in op.scales.get_values()]
    rank = x.ndim
    roi = op.roi.get_values() if op.roi is not None else [0.0] * rank + [1.0] * rank
    for axis, (n_out, scale) in enumerate(zip(op.props.ints("sizes"), scales)):
        crop = (float(roi[axis]), float(roi[rank + axis]))
        if n_out == x.shape[axis] and math.isclose(scale, 1.0) and crop == (0.0, 1.0):
            continue
        x = _resize_axis(op, x, axis, n_out, scale, crop)
    want = args[0].dtype
    if _kind(want) in "iu" and x.dtype != want:
        return np.clip(np.rint(x), np.iinfo(want).min, np.iinfo(want).max)
    return x


# ------------------------------------------------------------------ spatial ops


def _offsets(kernel: Sequence[int]) -> list[tuple[int, ...]]:
    """Every kernel offset, row-major."""
    return list(itertools.product(*(range(k) for k in kernel)))


def _window_views(
    x: np.ndarray, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int], out: Sequence[int],
    offset: Sequence[int],
) -> np.ndarray:
    """The strided view of x's last len(kernel) axes under one kernel offset."""
    lead = (slice(None),) * (x.ndim - len(kernel))
    return x[lead + tuple(slice(o * d, o * d + (n - 1) * s + 1, s) for o, d, n, s in zip(offset, dilations, out, strides))]


def _pad_spatial(x: np.ndarray, pads: Sequence[int], value: Any) -> np.ndarray:
    """Pad the last len(pads) // 2 axes by (before, after) pairs."""
    if not any(pads):
        return x
    k = len(pads) // 2
    return np.pad(x, [(0, 0)] * (x.ndim - k) + [(pads[2 * i], pads[2 * i + 1]) for i in range(k)], constant_values=value)


def _pool_windows(op: Any, x: np.ndarray, fill: Any) -> tuple[list[np.ndarray], list[int], tuple[int, ...]]:
    """The views of x padded with `fill` under each kernel offset, the padding applied
    (ceil_mode's extra cells included) and the output extents."""
    k, s, p, d = op.props.ints("ksize"), op.props.ints("strides"), op.props.ints("pads"), op.props.ints("dilations")
    sizes = x.shape[-len(k):]
    out = tuple(shapes.window_out(n, kk, st, p[2 * i], p[2 * i + 1], dl, op.props.bool("ceil_mode"))
                for i, (n, kk, st, dl) in enumerate(zip(sizes, k, s, d)))
    applied = list(p)
    for i, (n, o, st, dl, kk) in enumerate(zip(sizes, out, s, d, k)):
        applied[2 * i + 1] = max(p[2 * i + 1], (o - 1) * st + dl * (kk - 1) + 1 - n - p[2 * i])
    padded = _pad_spatial(x, applied, fill)
    return [_window_views(padded, k, s, d, out, o) for o in _offsets(k)], applied, out


@_kernel(ag.MaxPool3DOp)
def _max_pool3d(op: ag.MaxPool3DOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    views, _, _ = _pool_windows(op, x, _lowest(x.dtype))
    return reduce(np.maximum, views)


@_kernel(ag.AvgPool3DOp)
def _avg_pool3d(op: ag.AvgPool3DOp, args: list[np.ndarray]) -> np.ndarray:
    """As AvgPoolV2: explicit padding counts unless `exclusive`, ceil_mode's cells never."""
    x = _vec(args[0])
    views, applied, _ = _pool_windows(op, x, 0)
    p = op.props.ints("pads")
    cells = _pad_spatial(np.ones(x.shape[2:], x.dtype), p, 0 if op.props.bool("exclusive") else 1)
    cells = _pad_spatial(cells, [v for i in range(len(p) // 2) for v in (0, applied[2 * i + 1] - p[2 * i + 1])], 0)
    k, s, d = op.props.ints("ksize"), op.props.ints("strides"), op.props.ints("dilations")
    counts = reduce(np.add, (_window_views(cells, k, s, d, views[0].shape[2:], o) for o in _offsets(k)))
    return reduce(np.add, views) / counts


@_kernel(ag.LpPoolOp)
def _lp_pool(op: ag.LpPoolOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    p = op.props.int("p", 2)
    views, _, _ = _pool_windows(op, np.abs(x), 0)
    return reduce(np.add, (v**p for v in views)) ** (1.0 / p)


@_kernel(ag.MaxPoolWithArgmaxOp)
def _max_pool_with_argmax(op: ag.MaxPoolWithArgmaxOp, args: list[np.ndarray]) -> list[np.ndarray]:
    """The first maximum of each window in row-major window order, and the flat index
    of that input cell (padding never wins: it is -inf, or the dtype's lowest)."""
    x = _vec(args[0])
    views, _, _ = _pool_windows(op, x, _lowest(x.dtype))
    spatial = x.shape[2:]
    order = "F" if op.props.int("storage_order") else "C"
    cells = np.arange(shapes.numel(spatial), dtype=np.int64).reshape(spatial, order=order)
    planes = np.arange(x.shape[0] * x.shape[1], dtype=np.int64).reshape(x.shape[:2] + (1,) * len(spatial))
    index_views, _, _ = _pool_windows(op, planes * shapes.numel(spatial) + cells, -1)
    stacked = np.stack(views)
    best = np.argmax(stacked, axis=0)[None]
    return [np.take_along_axis(stacked, best, axis=0)[0], np.take_along_axis(np.stack(index_views), best, axis=0)[0]]


@_kernel(ag.MaxUnpoolOp)
def _max_unpool(op: ag.MaxUnpoolOp, args: list[np.ndarray]) -> np.ndarray:
    """The indices are flat positions in the whole output, as MaxPool's Indices are."""
    x, indices = args
    y = np.zeros(shapes.numel(op.props.ints("output_shape")), x.dtype)
    y[indices.reshape(-1).astype(np.int64)] = x.reshape(-1)
    return y.reshape(op.props.ints("output_shape"))


def _conv_nd(x: np.ndarray, w: np.ndarray, strides: Sequence[int], dilations: Sequence[int], pads: Sequence[int], groups: int) -> np.ndarray:
    """A grouped convolution over every axis after N and C: one product per kernel offset."""
    kernel = w.shape[2:]
    out = [shapes.window_out(n, k, s, pads[2 * i], pads[2 * i + 1], d) for i, (n, k, s, d) in enumerate(zip(x.shape[2:], kernel, strides, dilations))]
    padded = _pad_spatial(x, pads, 0)
    n, cout = x.shape[0], w.shape[0]
    xg = padded.reshape(n, groups, -1, *padded.shape[2:])
    wg = w.reshape(groups, cout // groups, w.shape[1], *kernel)
    y = np.zeros((n, groups, cout // groups, *out), np.result_type(x, w))
    for o in _offsets(kernel):
        view = _window_views(xg, kernel, strides, dilations, out, o)  # [N, G, Cin/g, out...]
        y += np.einsum("ngc...,gkc->ngk...", view, wg[(slice(None),) * 3 + o])
    return y.reshape(n, cout, *out)


def _conv_transpose_nd(
    x: np.ndarray, w: np.ndarray, strides: Sequence[int], dilations: Sequence[int], pads: Sequence[int], extra: Sequence[int],
    groups: int,
) -> np.ndarray:
    """Each input cell adds its filter-weighted kernel into the output at stride
    spacing; the full result is then cut by the pads (output_padding adds cells at the end)."""
    kernel = w.shape[2:]
    n, cin = x.shape[:2]
    full = [(d - 1) * s + dl * (k - 1) + 1 + e for d, s, dl, k, e in zip(x.shape[2:], strides, dilations, kernel, extra)]
    cout_g = w.shape[1]
    xg = x.reshape(n, groups, cin // groups, *x.shape[2:])
    wg = w.reshape(groups, cin // groups, cout_g, *kernel)
    y = np.zeros((n, groups, cout_g, *full), np.result_type(x, w))
    for o in _offsets(kernel):
        contribution = np.einsum("ngc...,gck->ngk...", xg, wg[(slice(None),) * 3 + o])
        y[_window_slices(y.ndim, o, dilations, x.shape[2:], strides)] += contribution
    crop = tuple(slice(pads[2 * i], f - pads[2 * i + 1]) for i, f in enumerate(full))
    return y[(slice(None),) * 3 + crop].reshape(n, groups * cout_g, *(f - pads[2 * i] - pads[2 * i + 1] for i, f in enumerate(full)))


def _window_slices(rank: int, offset: Sequence[int], dilations: Sequence[int], sizes: Sequence[int], strides: Sequence[int]) -> tuple[slice, ...]:
    lead = (slice(None),) * (rank - len(offset))
    return lead + tuple(slice(o * d, o * d + (n - 1) * s + 1, s) for o, d, n, s in zip(offset, dilations, sizes, strides))


@_kernel(ag.Conv3DOp, ag.Conv2DTransposeOp, ag.Conv3DTransposeOp)
def _conv_family(op: ag.ConvFamilyOp, args: list[np.ndarray]) -> np.ndarray:
    x, w = _acc(args[0]), _acc(args[1])
    strides, dilations = op.props.ints("strides")[2:], op.props.ints("dilations")[2:]
    pads, groups = op.props.ints("pads"), op.props.int("groups", 1)
    if op.TRANSPOSED:
        y = _conv_transpose_nd(x, w, strides, dilations, pads, op.props.ints("output_padding")[2:], groups)
    else:
        y = _conv_nd(x, w, strides, dilations, pads, groups)
    return y + _acc(args[2]).reshape(1, -1, *(1,) * (y.ndim - 2)) if len(args) > 2 else y


def _reflect(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """Fold coordinates outside [low, high] back in, mirror after mirror."""
    span = high - low
    if span <= 0:
        return np.full_like(x, low)
    below, above = x < low, x > high
    dx = np.where(below, low - x, np.where(above, x - high, 0.0))
    flips = np.floor(dx / span)
    rest = dx - flips * span
    even = flips % 2 == 0
    from_low = np.where(even, low + rest, high - rest)
    from_high = np.where(even, high - rest, low + rest)
    return np.where(below, from_low, np.where(above, from_high, x))


def _cubic_weights(t: np.ndarray, a: float = -0.75) -> list[np.ndarray]:
    """The four weights of Keys' cubic at distances 1 + t, t, 1 - t, 2 - t."""
    return [_keys(t + 1, a), _keys(t, a), _keys(1 - t, a), _keys(2 - t, a)]


@_kernel(ag.GridSampler2DOp, ag.GridSampler3DOp)
def _grid_sample(op: ag.GridSamplerOp, args: list[np.ndarray]) -> np.ndarray:
    """Grid coordinates are unnormalised per axis; border and reflection padding move
    a bilinear or nearest coordinate into the image first, and every tap (a bicubic
    one only so) reads through the padding: zero outside, the clamped or the
    reflected cell."""
    x, grid = args[0].astype(np.float64), args[1].astype(np.float64)
    n, c = x.shape[:2]
    sizes = x.shape[2:]
    k = len(sizes)
    mode, padding = op.props.str("interpolation_mode"), op.props.str("padding_mode")
    corners = op.props.bool("align_corners")
    coords, bounds = [], []
    for axis, size in enumerate(sizes):
        g = grid[..., k - 1 - axis]  # the grid holds (x, y[, z]): the last axis first
        coords.append((g + 1) / 2 * (size - 1) if corners else ((g + 1) * size - 1) / 2)
        bounds.append((0.0, size - 1.0) if corners else (-0.5, size - 0.5))
    if mode != "bicubic":
        if padding == "border":
            coords = [np.clip(u, 0, size - 1) for u, size in zip(coords, sizes)]
        elif padding == "reflection":
            coords = [_reflect(u, *b) for u, b in zip(coords, bounds)]

    def read(index: list[np.ndarray]) -> np.ndarray:
        """x[n, :, index...] -> [N, C, out...], through the padding."""
        inside = np.ones(index[0].shape, bool)
        fixed = []
        for i, size, b in zip(index, sizes, bounds):
            if padding == "zeros":
                inside &= (i >= 0) & (i < size)
            elif padding == "reflection":
                i = _reflect(i.astype(np.float64), *b).astype(np.int64)
            fixed.append(np.clip(i, 0, size - 1))
        batch = np.arange(n).reshape((n,) + (1,) * (index[0].ndim - 1))
        values = x[(batch, slice(None), *fixed)]  # [N, out..., C]
        values = np.where(inside[..., None], values, 0.0)
        return np.moveaxis(values, -1, 1)

    if mode == "nearest":
        return read([np.rint(u).astype(np.int64) for u in coords])
    base = [np.floor(u) for u in coords]
    frac = [u - b for u, b in zip(coords, base)]
    if mode == "bilinear":
        taps = [[(0, 1 - f), (1, f)] for f in frac]
    else:
        taps = [[(j - 1, wt) for j, wt in enumerate(_cubic_weights(f))] for f in frac]
    y = np.zeros((n, c, *grid.shape[1:-1]))
    for combo in itertools.product(*taps):
        weight = reduce(np.multiply, (wt for _, wt in combo))
        y += read([b.astype(np.int64) + j for b, (j, _) in zip(base, combo)]) * weight[:, None]
    return y


@_kernel(ag.AffineGridOp)
def _affine_grid(op: ag.AffineGridOp, args: list[np.ndarray]) -> np.ndarray:
    """Each output cell's normalised (x, y[, z], 1) times theta's rows."""
    theta = args[0].astype(np.float64)
    size = op.props.ints("size")
    corners = op.props.bool("align_corners")
    axes = []
    for extent in size[2:]:
        if corners:
            axes.append(np.linspace(-1.0, 1.0, extent) if extent > 1 else np.zeros(1))
        else:
            axes.append((np.arange(extent) * 2 + 1) / extent - 1)
    mesh = np.meshgrid(*axes, indexing="ij")  # (d,) h, w
    points = np.stack([*reversed(mesh), np.ones(mesh[0].shape)], axis=-1)  # (x, y[, z], 1)
    return np.einsum("...j,nij->n...i", points, theta)


@_kernel(ag.Col2imOp)
def _col2im(op: ag.Col2imOp, args: list[np.ndarray]) -> np.ndarray:
    x = args[0]
    image, block = op.props.ints("image_shape"), op.props.ints("block_shape")
    strides, pads, dilations = op.props.ints("strides"), op.props.ints("pads"), op.props.ints("dilations")
    padded = [d + pads[2 * i] + pads[2 * i + 1] for i, d in enumerate(image)]
    out = [shapes.window_out(d, k, s, pads[2 * i], pads[2 * i + 1], dl) for i, (d, k, s, dl) in enumerate(zip(image, block, strides, dilations))]
    n = x.shape[0]
    columns = x.reshape(n, -1, *block, *out)
    y = np.zeros((n, columns.shape[1], *padded), x.dtype)
    for o in _offsets(block):
        y[_window_slices(y.ndim, o, dilations, out, strides)] += columns[(slice(None), slice(None), *o)]
    return y[(slice(None), slice(None), *(slice(pads[2 * i], pads[2 * i] + d) for i, d in enumerate(image)))]


def _bilinear_zero(image: np.ndarray, ys: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """image [N, C, H, W] at per-batch points ys, xs [N, ...] -> [N, C, ...]; corners
    outside the image read 0."""
    n, _, h, w = image.shape
    y0, x0 = np.floor(ys), np.floor(xs)
    batch = np.arange(n).reshape((n,) + (1,) * (ys.ndim - 1))
    total = 0.0
    for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1)):
        yi, xi = y0 + dy, x0 + dx
        weight = (1 - np.abs(ys - yi)) * (1 - np.abs(xs - xi))
        inside = (yi >= 0) & (yi < h) & (xi >= 0) & (xi < w)
        values = image[batch, :, np.clip(yi, 0, h - 1).astype(np.int64), np.clip(xi, 0, w - 1).astype(np.int64)]
        total = total + np.moveaxis(np.where(inside[..., None], values * weight[..., None], 0.0), -1, 1)
    return total


@_kernel(ag.DeformableOffsetsOp)
def _deformable_offsets(op: ag.DeformableOffsetsOp, args: list[np.ndarray]) -> np.ndarray:
    x, offsets, mask = (a.astype(np.float64) for a in args)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = op.props.ints("ksize"), op.props.ints("strides"), op.props.ints("dilations")
    top, _, left, _ = op.props.ints("pads")
    groups = op.props.int("deformable_groups", 1)
    oh, ow = offsets.shape[2:]
    offsets = offsets.reshape(n, groups, kh, kw, 2, oh, ow)
    mask = mask.reshape(n, groups, kh, kw, oh, ow)
    rows = (np.arange(oh) * sh - top)[:, None]
    cols = (np.arange(ow) * sw - left)[None, :]
    y = np.zeros((n, groups, c // groups, oh, kh, ow, kw))
    per = x.reshape(n * groups, c // groups, h, w)
    for i, j in _offsets((kh, kw)):
        ys = (rows + i * dh + offsets[:, :, i, j, 0]).reshape(n * groups, oh, ow)
        xs = (cols + j * dw + offsets[:, :, i, j, 1]).reshape(n * groups, oh, ow)
        sampled = _bilinear_zero(per, ys, xs).reshape(n, groups, c // groups, oh, ow)
        y[:, :, :, :, i, :, j] = sampled * mask[:, :, i, j][:, :, None]
    return y.reshape(n, c, oh * kh, ow * kw)


@_kernel(ag.ROIAlignOp)
def _roi_align(op: ag.ROIAlignOp, args: list[np.ndarray]) -> np.ndarray:
    """sample_num (or ceil(roi size / bins)) samples per bin edge, none in an empty
    (aligned) region; a sample more than a cell outside the image counts as 0. avg averages the bilinear samples; max takes
    the largest weighted corner of each sample and the largest over the bin (onnxruntime's rule)."""
    x, rois, batch = args[0].astype(np.float64), args[1].astype(np.float64), args[2].astype(np.int64)
    c = x.shape[1]
    oh, ow = op.props.int("pooled_height"), op.props.int("pooled_width")
    scale, ratio = op.props.float("spatial_scale", 1.0), op.props.int("sample_num")
    shift = 0.5 if op.props.bool("aligned") else 0.0
    use_max = op.props.str("mode") == "max"
    y = np.zeros((len(rois), c, oh, ow))
    for r, (roi, b) in enumerate(zip(rois, batch)):
        x1, y1, x2, y2 = roi * scale - shift
        rw, rh = x2 - x1, y2 - y1
        if not op.props.bool("aligned"):
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        gh = ratio if ratio > 0 else math.ceil(rh / oh)
        gw = ratio if ratio > 0 else math.ceil(rw / ow)
        if not gh * gw:
            continue  # an empty region samples nothing: 0
        ys = y1 + (np.arange(oh)[:, None] + (np.arange(gh)[None, :] + 0.5) / gh) * rh / oh  # [oh, gh]
        xs = x1 + (np.arange(ow)[:, None] + (np.arange(gw)[None, :] + 0.5) / gw) * rw / ow  # [ow, gw]
        corners = _roi_corners(x[b], ys.reshape(-1), xs.reshape(-1))  # [4, C, oh*gh, ow*gw]
        corners = corners.reshape(4, c, oh, gh, ow, gw)
        if use_max:
            y[r] = corners.max(axis=0).max(axis=(2, 4))
        else:
            y[r] = corners.sum(axis=0).sum(axis=(2, 4)) / max(gh * gw, 1)
    return y


def _roi_corners(image: np.ndarray, ys: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """The four weighted corner values [4, C, len(ys), len(xs)] of each sample; a sample
    beyond a cell outside the image weighs 0, one near the last row or column reads it."""
    _, h, w = image.shape

    def axis(v: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        valid = (v >= -1.0) & (v <= size)
        v = np.maximum(v, 0.0)
        low = np.floor(v).astype(np.int64)
        last = low >= size - 1
        low = np.where(last, size - 1, low)
        high = np.where(last, size - 1, low + 1)
        frac = np.where(last, 0.0, v - low)
        return low, high, np.where(valid, 1 - frac, 0.0), np.where(valid, frac, 0.0)

    yl, yh, wy0, wy1 = axis(ys, h)
    xl, xh, wx0, wx1 = axis(xs, w)
    out = []
    for yi, wy in ((yl, wy0), (yh, wy1)):
        for xi, wx in ((xl, wx0), (xh, wx1)):
            out.append(image[:, yi[:, None], xi[None, :]] * (wy[:, None] * wx[None, :]))
    return np.stack(out)


# ------------------------------------------------ attention, rotary embedding and top-k


def _attention_bias(op: ag.FusedInferAttentionScoreOp, mask: np.ndarray | None, lengths: np.ndarray | None,
                    scores: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """What is added to the scores: the float mask, or 0/-inf from a bool one (a short
    last dim padded with -inf), the causal band and the key lengths, in `dtype`."""
    b, _, sq, sk = scores
    bias = np.zeros((1, 1, sq, sk), dtype)
    if mask is not None:
        pad = [(0, 0)] * (mask.ndim - 1) + [(0, sk - mask.shape[-1])]
        if mask.dtype == np.bool_:
            mask = np.where(np.pad(mask, pad, constant_values=False), 0.0, -np.inf).astype(dtype)
        else:
            mask = np.pad(mask, pad, constant_values=-np.inf)
        bias = (_vec(bias) + _vec(mask)).astype(dtype)
    if op.props.has("next_tokens"):
        after = np.arange(sk)[None, :] > np.arange(sq)[:, None] + op.props.int("next_tokens")
        bias = np.where(after, dtype.type(-np.inf), bias)
    if lengths is not None:
        padded = np.arange(sk)[None, :] >= lengths.astype(np.int64)[:, None]
        bias = np.where(padded.reshape(b, 1, 1, sk), dtype.type(-np.inf), bias)
    return bias


@_kernel(ag.FusedInferAttentionScoreOp)
def _fused_infer_attention_score(op: ag.FusedInferAttentionScoreOp, args: list[np.ndarray]) -> list[np.ndarray]:
    """As ONNX's Attention pattern computes it, rounding where its unfused graph
    stores a tensor: q and k each times sqrt(scale), their product on the cube, the
    softcap, the bias and the softmax on the vector unit, p times v on the cube."""
    q, k, v = args[:3]
    dtype = q.dtype
    mask = next((a for a in args[3:] if _kind(a.dtype) not in "iu"), None)
    lengths = next((a for a in args[3:] if _kind(a.dtype) in "iu"), None)
    group = op.props.int("num_heads") // op.props.int("num_key_value_heads")
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    root = np.float32(np.sqrt(op.props.float("scale")))
    q, k = (_vec(q) * root).astype(dtype), (_vec(k) * root).astype(dtype)
    product = np.matmul(_acc(q), np.swapaxes(_acc(k), -1, -2)).astype(dtype)
    capped = product
    softcap = op.props.float("softcap")
    if softcap > 0:
        capped = (np.tanh(_vec(product) / np.float32(softcap)) * np.float32(softcap)).astype(dtype)
    biased = (_vec(capped) + _vec(_attention_bias(op, mask, lengths, product.shape, dtype))).astype(dtype)
    shifted = np.exp(_vec(biased) - np.max(_vec(biased), axis=-1, keepdims=True))
    p = (shifted / np.sum(shifted, axis=-1, keepdims=True)).astype(dtype)
    y = np.matmul(_acc(p), _acc(v))
    if not op.props.has("qk_output_mode"):
        return [y]
    return [y, (product, capped, biased, p)[op.props.int("qk_output_mode")]]


@_kernel(ag.RotaryPositionEmbeddingOp)
def _rotary_position_embedding(op: ag.RotaryPositionEmbeddingOp, args: list[np.ndarray]) -> np.ndarray:
    x, cos, sin = (_vec(a) for a in args)
    if op.props.str("layout") == "BSH":  # [B, S, N * D] -> [B, N, S, D]
        b, s, _ = x.shape
        x = x.reshape(b, s, op.props.int("num_heads"), -1).transpose(0, 2, 1, 3)
    rotary = op.props.int("rotary_dim") or x.shape[-1]
    cos, sin = cos[:, None], sin[:, None]  # [B, 1, S, R / 2]: one row per position, for every head
    part = x[..., :rotary]
    a, b_ = (part[..., 0::2], part[..., 1::2]) if op.props.bool("interleaved") else np.split(part, 2, axis=-1)
    real, imag = a * cos - b_ * sin, a * sin + b_ * cos
    rotated = np.stack([real, imag], axis=-1).reshape(part.shape) if op.props.bool("interleaved") else np.concatenate([real, imag], -1)
    y = np.concatenate([rotated, x[..., rotary:]], axis=-1)
    if op.props.str("layout") == "BSH":
        y = y.transpose(0, 2, 1, 3).reshape(args[0].shape)
    return y


@_kernel(ag.TopKV2Op)
def _top_k_v2(op: ag.TopKV2Op, args: list[np.ndarray]) -> list[np.ndarray]:
    """A stable sort, so equal values keep the lower index first: ascending for the
    smallest; for the largest, the reversed axis sorted ascending, read backwards."""
    x = args[0]
    axis = shapes.norm_axis(op.props.int("dim"), x.ndim)
    n, k = x.shape[axis], op.props.int("k")
    if op.props.bool("largest"):
        order = np.flip(n - 1 - np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    indices = np.take(order, np.arange(k), axis=axis)
    return [np.take_along_axis(x, indices, axis=axis), indices.astype(np.int64)]


# ------------------------------------------------ data-dependent shapes (AI CPU engine)


@_kernel(ag.NonZeroOp)
def _non_zero(op: ag.NonZeroOp, args: list[np.ndarray]) -> np.ndarray:
    x = args[0]
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


@_kernel(ag.CompressOp)
def _compress(op: ag.CompressOp, args: list[np.ndarray]) -> np.ndarray:
    x, condition = args
    if not op.props.has("axis"):
        return np.compress(condition, x.reshape(-1))
    return np.compress(condition, x, axis=shapes.norm_axis(op.props.int("axis"), x.ndim))


@_kernel(ag.UniqueOp)
def _unique(op: ag.UniqueOp, args: list[np.ndarray]) -> list[np.ndarray]:
    """np.unique gives the sorted order; unsorted is the order of first occurrence,
    the inverse indices renumbered to it."""
    x = args[0]
    axis = shapes.norm_axis(op.props.int("axis"), x.ndim) if op.props.has("axis") else None
    source = x.reshape(-1) if axis is None else x
    y, first, inverse, counts = np.unique(source, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not op.props.bool("sorted"):
        order = np.argsort(first, kind="stable")
        y, first, counts = np.take(y, order, axis=0 if axis is None else axis), first[order], counts[order]
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        inverse = rank[inverse]
    return [y, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)]


def _corners(boxes: np.ndarray, center: bool) -> tuple[np.ndarray, ...]:
    """(y1, x1, y2, x2) with y1 <= y2 and x1 <= x2, from corners in either order or from
    [x_center, y_center, width, height]."""
    b = boxes.astype(np.float64)
    if center:
        cx, cy, w, h = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
        return cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2
    return (np.minimum(b[..., 0], b[..., 2]), np.minimum(b[..., 1], b[..., 3]),
            np.maximum(b[..., 0], b[..., 2]), np.maximum(b[..., 1], b[..., 3]))


@_kernel(ag.NonMaxSuppressionOp)
def _non_max_suppression(op: ag.NonMaxSuppressionOp, args: list[np.ndarray]) -> np.ndarray:
    """Per batch and class: the candidates above score_threshold in descending score (ties:
    the lower index first), each kept unless its IoU with a kept box exceeds iou_threshold
    (a box of no area overlaps nothing), up to max_output_boxes_per_class."""
    boxes, scores = args
    y1, x1, y2, x2 = _corners(boxes, op.props.bool("center_point_box"))
    area = (y2 - y1) * (x2 - x1)
    most = op.props.int("max_output_boxes_per_class")
    iou_threshold = op.props.float("iou_threshold")
    rows: list[tuple[int, int, int]] = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c].astype(np.float64)
            candidates = np.arange(s.size) if not op.props.has("score_threshold") else np.nonzero(s > op.props.float("score_threshold"))[0]
            kept: list[int] = []
            for i in candidates[np.argsort(-s[candidates], kind="stable")]:
                if len(kept) >= most:
                    break
                k = np.array(kept, dtype=np.int64)
                inter = np.clip(np.minimum(y2[b, i], y2[b, k]) - np.maximum(y1[b, i], y1[b, k]), 0, None) * np.clip(
                    np.minimum(x2[b, i], x2[b, k]) - np.maximum(x1[b, i], x1[b, k]), 0, None
                )
                union = area[b, i] + area[b, k] - inter
                valid = (area[b, i] > 0) & (area[b, k] > 0) & (union > 0)
                iou = np.where(valid, inter / np.where(union > 0, union, 1.0), 0.0)
                if not np.any(iou > iou_threshold):
                    kept.append(int(i))
            rows += [(b, c, i) for i in kept]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


# ------------------------------------------------------------------------- kernels


def run_kernel(kernel: ak.KernelOp, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """A kernel's outputs: what the ops of its compute region compute from its inputs."""
    block = kernel.compute.block
    if len(inputs) != len(block.args):
        raise InputError(f"kernel @{kernel.sym_name.data} takes {len(block.args)} inputs, but {len(inputs)} were given")
    values: dict[SSAValue, np.ndarray] = dict(zip(block.args, inputs))
    for op in block.ops:
        if isinstance(op, ak.YieldOp):
            return [values[v] for v in op.values]
        for r, value in zip(op.results, evaluate_op(op, [values[v] for v in op.operands])):
            values[r] = value
    raise ModelError(f"kernel @{kernel.sym_name.data}: its compute region does not end in ascend_kernel.yield")


@_kernel(ak.LaunchOp)
def _launch(op: ak.LaunchOp, args: list[np.ndarray]) -> list[np.ndarray]:
    kernel = SymbolTable.lookup_symbol(op, op.kernel)
    if not isinstance(kernel, ak.KernelOp):
        raise ModelError(f"launch '{op.label}': its module has no kernel {op.kernel}")
    return run_kernel(kernel, args)


# ------------------------------------------------------------ losses and normalisations


def _nll(op: ag.NLLLossOp | ag.SoftmaxCrossEntropyLossOp, log_prob: np.ndarray, args: list[np.ndarray]) -> np.ndarray:
    """-log_prob[n, t, d] * weight[t] per target t (0 where t is ignore_index), reduced.

    A target outside 0..C-1 that is not ignore_index is an error, as in ONNX; "mean"
    divides by the sum of the weights taken (NaN when every target is ignored)."""
    target = args[1].astype(np.int64)
    classes = log_prob.shape[1]
    taken = target != op.ignore_index.value.data if op.ignore_index is not None else np.ones(target.shape, bool)
    wrong = target[taken & ((target < 0) | (target >= classes))]
    if wrong.size:
        raise ValueError(f"target {int(wrong.reshape(-1)[0])} is outside the classes 0..{classes - 1}")
    index = np.where(taken, target, 0)
    picked = np.take_along_axis(log_prob, np.expand_dims(index, 1), axis=1).squeeze(1)
    weight = _vec(args[2])[index] if len(args) > 2 else np.ones_like(picked)
    weight = np.where(taken, weight, 0).astype(picked.dtype)
    loss = -picked * weight
    reduction = op.props.str("reduction")
    if reduction == "none":
        return loss
    total = np.sum(loss)
    return total if reduction == "sum" else total / np.sum(weight)


@_kernel(ag.NLLLossOp)
def _nll_loss(op: ag.NLLLossOp, args: list[np.ndarray]) -> np.ndarray:
    return _nll(op, _vec(args[0]), args)


@_kernel(ag.SoftmaxCrossEntropyLossOp)
def _softmax_cross_entropy_loss(op: ag.SoftmaxCrossEntropyLossOp, args: list[np.ndarray]) -> list[np.ndarray]:
    x = _vec(args[0])
    shifted = x - np.max(x, axis=1, keepdims=True)
    log_prob = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return [_nll(op, log_prob, args), log_prob]


@_kernel(ag.RmsNormOp)
def _rms_norm(op: ag.RmsNormOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    axes = tuple(range(shapes.norm_axis(op.props.int("begin_norm_axis"), x.ndim), x.ndim))
    mean_square = np.mean(x * x, axis=axes, keepdims=True)
    return x / np.sqrt(mean_square + x.dtype.type(op.props.float("epsilon"))) * _vec(args[1])


@_kernel(ag.LpNormOp)
def _lp_norm(op: ag.LpNormOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    axes, keep = _reduced_axes(op, x.ndim), op.props.bool("keep_dims")
    if op.props.int("p") == 1:
        return np.sum(np.abs(x), axis=axes, keepdims=keep)
    return np.sqrt(np.sum(x * x, axis=axes, keepdims=keep))


@_kernel(ag.DivNoNanOp)
def _div_no_nan(op: ag.DivNoNanOp, args: list[np.ndarray]) -> np.ndarray:
    x1, x2 = _vec(args[0]), _vec(args[1])
    return np.where(x2 == 0, x1.dtype.type(0), x1 / x2)


@_kernel(ag.GroupNormOp)
def _group_norm(op: ag.GroupNormOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    grouped = x.reshape(x.shape[0], op.props.int("num_groups"), -1)
    y = _normalise(grouped, (2,), op.props.float("epsilon")).reshape(x.shape)
    return y * _per_channel(args[1], x.ndim) + _per_channel(args[2], x.ndim)


@_kernel(ag.MVNV2Op)
def _mvn_v2(op: ag.MVNV2Op, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    axes = shapes.norm_axes(op.props.ints("axes"), x.ndim)
    mean = np.mean(x, axis=axes, keepdims=True)
    deviation = np.sqrt(np.mean(x * x, axis=axes, keepdims=True) - mean * mean)
    return (x - mean) / (deviation + x.dtype.type(op.props.float("eps")))


@_kernel(ag.LRNOp)
def _lrn(op: ag.LRNOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    size, channels = op.props.int("size"), x.shape[1]
    before = (size - 1) // 2
    widths = [(0, 0)] * x.ndim
    widths[1] = (before, size - 1 - before)
    squares = np.pad(x * x, widths)
    window = sum(squares[:, i : i + channels] for i in range(size))
    alpha, beta, bias = (x.dtype.type(op.props.float(k)) for k in ("alpha", "beta", "bias"))
    return x / (bias + alpha / size * window) ** beta


# -------------------------------------------------------------- indexing and signal ops


def _index_tuple(op: Any, indices: np.ndarray, sizes: Sequence[int]) -> tuple[np.ndarray, ...]:
    """The last dim of `indices` as one index array per dim of `sizes`, negatives wrapped."""
    return tuple(_wrapped(op, indices[..., j], size) for j, size in enumerate(sizes))


@_kernel(ag.GatherNdOp)
def _gather_nd(op: ag.GatherNdOp, args: list[np.ndarray]) -> np.ndarray:
    """The `batch_dims` leading dims are flattened into one that indexes data and indices alike."""
    x, indices = args
    b, k = op.props.int("batch_dims"), indices.shape[-1]
    batch = math.prod(x.shape[:b])
    xb = x.reshape((batch, *x.shape[b:]))
    ib = indices.reshape((batch, *indices.shape[b:]))
    rows = np.arange(batch).reshape((batch,) + (1,) * (ib.ndim - 2))
    picked = xb[(rows, *_index_tuple(op, ib, x.shape[b : b + k]))]
    return picked.reshape(indices.shape[:-1] + x.shape[b + k :])


_SCATTER_AT: dict[str, Callable[..., None]] = {
    "add": np.add.at, "mul": np.multiply.at, "max": np.maximum.at, "min": np.minimum.at,
}


def _scatter(op: Any, data: np.ndarray, where: tuple[np.ndarray, ...], updates: np.ndarray) -> np.ndarray:
    """data with updates combined in at `where` by the op's reduction, in order (so the
    last of duplicate indices wins under `none`), computed as a vector unit computes."""
    out = _vec(data).copy()
    values = _vec(updates)
    reduction = op.props.str("reduction", "none")
    if reduction == "none":
        out[where] = values
    else:
        _SCATTER_AT[reduction](out, where, values)
    return out


@_kernel(ag.ScatterNdUpdateOp)
def _scatter_nd_update(op: ag.ScatterNdUpdateOp, args: list[np.ndarray]) -> np.ndarray:
    var, indices, updates = args
    return _scatter(op, var, _index_tuple(op, indices, var.shape[: indices.shape[-1]]), updates)


@_kernel(ag.ScatterElementsOp)
def _scatter_elements(op: ag.ScatterElementsOp, args: list[np.ndarray]) -> np.ndarray:
    data, indices, updates = args
    axis = shapes.norm_axis(op.props.int("axis"), data.ndim)
    where = list(np.indices(indices.shape, sparse=True))
    where[axis] = _wrapped(op, indices, data.shape[axis])
    return _scatter(op, data, tuple(where), updates)


@_kernel(ag.TensorScatterOp)
def _tensor_scatter(op: ag.TensorScatterOp, args: list[np.ndarray]) -> np.ndarray:
    """A linear write past the cache's end is an error; a circular one wraps."""
    cache, update = args[:2]
    axis = shapes.norm_axis(op.props.int("axis"), cache.ndim)
    size, length = cache.shape[axis], update.shape[axis]
    starts = args[2].astype(np.int64) if len(args) > 2 else np.zeros(cache.shape[0], np.int64)
    out = cache.copy()
    for b, start in enumerate(starts.tolist()):
        positions = start + np.arange(length)
        if op.props.str("mode") == "circular":
            positions %= size
        elif length and (start < 0 or positions[-1] >= size):
            raise ModelError(f"{_label(op)}: writing {length} entries from {start} overruns the cache of {size}")
        np.moveaxis(out[b], axis - 1, 0)[positions] = np.moveaxis(update[b], axis - 1, 0)
    return out


@_kernel(ag.ReverseSequenceOp)
def _reverse_sequence(op: ag.ReverseSequenceOp, args: list[np.ndarray]) -> np.ndarray:
    x, lengths = args
    batch = shapes.norm_axis(op.props.int("batch_dim"), x.ndim)
    seq = shapes.norm_axis(op.props.int("seq_dim"), x.ndim)
    steps = x.shape[seq]
    lengths = lengths.astype(np.int64)
    if ((lengths < 0) | (lengths > steps)).any():
        raise ModelError(f"{_label(op)}: sequence lengths {lengths.tolist()} must be in [0, {steps}]")
    t = np.arange(steps)
    source = np.where(t < lengths[:, None], lengths[:, None] - 1 - t, t)  # [batch, time]
    if seq < batch:
        source = source.T
    shape = [1] * x.ndim
    shape[batch], shape[seq] = x.shape[batch], steps
    return np.take_along_axis(x, np.broadcast_to(source.reshape(shape), x.shape), axis=seq)


def _complex(x: np.ndarray) -> np.ndarray:
    """A [..., 1] real or [..., 2] (re, im) signal as complex without the last dim:
    complex64 for float16/bfloat16/float32 (numpy's FFT then computes in single
    precision, as a vector unit would), complex128 for float64."""
    wide = _vec(x)
    kind = np.complex128 if wide.dtype == np.float64 else np.complex64
    signal = wide[..., 0].astype(kind)
    if x.shape[-1] == 2:
        signal.imag = wide[..., 1]
    return signal


def _dft(signal: np.ndarray, n: int, axis: int, inverse: bool, onesided: bool) -> np.ndarray:
    """The transform as [..., 2] (re, im), or [..., 1] for an inverse onesided one."""
    if inverse and onesided:
        return np.fft.irfft(signal, n, axis=axis)[..., None]
    y = np.fft.ifft(signal, n, axis=axis) if inverse else np.fft.fft(signal, n, axis=axis)
    if onesided:
        y = np.take(y, np.arange(n // 2 + 1), axis=axis)
    return np.stack([y.real, y.imag], axis=-1)


@_kernel(ag.DFTOp)
def _dft_kernel(op: ag.DFTOp, args: list[np.ndarray]) -> np.ndarray:
    p = op.props
    return _dft(_complex(args[0]), p.int("length"), p.int("axis"), p.bool("inverse"), p.bool("onesided"))


@_kernel(ag.STFTOp)
def _stft(op: ag.STFTOp, args: list[np.ndarray]) -> np.ndarray:
    signal = _complex(args[0])
    n, step = op.props.int("frame_length"), op.props.int("frame_step")
    frames = 1 + (signal.shape[1] - n) // step
    taps = step * np.arange(frames)[:, None] + np.arange(n)
    framed = signal[:, taps]  # [batch, frames, n]
    if len(args) > 1:
        framed = framed * _vec(args[1])
    return _dft(framed, n, 2, False, op.props.bool("onesided"))


# ------------ elementwise, bitwise, triangular, cumulative, one-hot and determinant ops


@_kernel(ag.FloorModOp)
def _floor_mod(op: ag.FloorModOp, args: list[np.ndarray]) -> np.ndarray:
    """Python's %: the remainder has the divisor's sign; an integer zero divisor gives 0."""
    return np.mod(_vec(args[0]), _vec(args[1]))


@_kernel(ag.ModOp)
def _fmod(op: ag.ModOp, args: list[np.ndarray]) -> np.ndarray:
    """C's fmod: the remainder has the dividend's sign; an integer zero divisor gives 0."""
    return np.fmod(_vec(args[0]), _vec(args[1]))


KERNELS.update(
    (cls, _binary(fn))
    for cls, fn in {
        ag.LeftShiftOp: np.left_shift,  # by the width or more: 0 (numpy defines what C leaves undefined)
        ag.RightShiftOp: np.right_shift,
        ag.BitwiseAndOp: np.bitwise_and,
        ag.BitwiseOrOp: np.bitwise_or,
        ag.BitwiseXorOp: np.bitwise_xor,
    }.items()
)
KERNELS.update(
    (cls, _unary(fn))
    for cls, fn in {
        ag.InvertOp: np.invert,
        ag.IsNanOp: np.isnan,
        ag.TanOp: np.tan,
        ag.AsinOp: np.arcsin,
        ag.AcosOp: np.arccos,
        ag.AtanOp: np.arctan,
        ag.SinhOp: np.sinh,
        ag.CoshOp: np.cosh,
        ag.AsinhOp: np.arcsinh,
        ag.AcoshOp: np.arccosh,
        ag.AtanhOp: np.arctanh,
    }.items()
)


@_kernel(ag.IsInfOp)
def _is_inf(op: ag.IsInfOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    positive = np.isposinf(x) & op.props.bool("detect_positive")
    negative = np.isneginf(x) & op.props.bool("detect_negative")
    return positive | negative


@_kernel(ag.ThresholdedReluOp)
def _thresholded_relu(op: ag.ThresholdedReluOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    return np.where(x > x.dtype.type(op.props.float("alpha")), x, x.dtype.type(0))


@_kernel(ag.ShrinkOp)
def _shrink(op: ag.ShrinkOp, args: list[np.ndarray]) -> np.ndarray:
    """Integers compute in float64 and truncate toward zero to their dtype, as a C cast does."""
    x = _vec(args[0])
    wide = x if _kind(x.dtype) == "f" else x.astype(np.float64)
    lambd, bias = (wide.dtype.type(op.props.float(k)) for k in ("lambd", "bias"))
    return np.where(wide < -lambd, wide + bias, np.where(wide > lambd, wide - bias, wide.dtype.type(0)))


@_kernel(ag.SwishOp)
def _swish(op: ag.SwishOp, args: list[np.ndarray]) -> np.ndarray:
    x = _vec(args[0])
    return x * _sigmoid(x.dtype.type(op.props.float("scale")) * x)


@_kernel(ag.HardmaxOp)
def _hardmax(op: ag.HardmaxOp, args: list[np.ndarray]) -> np.ndarray:
    """The axes are consecutive: they flatten into one, whose first maximum is 1."""
    x = args[0]
    axes = shapes.norm_axes(op.props.ints("axes"), x.ndim)
    first, last = axes[0], axes[-1] + 1
    rows = x.reshape(x.shape[:first] + (shapes.numel(x.shape[first:last]),) + x.shape[last:])
    index = np.expand_dims(np.argmax(_vec(rows), axis=first), first)
    y = np.zeros(rows.shape, x.dtype)
    np.put_along_axis(y, index, 1, axis=first)
    return y.reshape(x.shape)


def _diagonal(op: ag.TrilOp | ag.TriuOp, args: list[np.ndarray]) -> int:
    """The `diagonal` property, or the value of the k operand."""
    return int(args[1].reshape(-1)[0]) if len(args) > 1 else op.props.int("diagonal")


@_kernel(ag.TrilOp)
def _tril(op: ag.TrilOp, args: list[np.ndarray]) -> np.ndarray:
    return np.tril(args[0], _diagonal(op, args))


@_kernel(ag.TriuOp)
def _triu(op: ag.TriuOp, args: list[np.ndarray]) -> np.ndarray:
    return np.triu(args[0], _diagonal(op, args))


def _cumulative(fn: Callable[..., np.ndarray], identity: int) -> Kernel:
    """fn along the axis (the property, or the axis_input operand's value) in the vector
    dtype (integers wrap in their own); `exclusive` shifts the result one place on,
    starting from the identity."""

    def kernel(op: Any, args: list[np.ndarray]) -> np.ndarray:
        x = _vec(args[0])
        given = int(args[1].reshape(-1)[0]) if len(args) > 1 else op.props.int("axis")
        axis = shapes.norm_axis(given, x.ndim)
        reverse = op.props.bool("reverse")
        if reverse:
            x = np.flip(x, axis)
        y = fn(x, axis=axis, dtype=x.dtype)
        if op.props.bool("exclusive"):
            head = np.full(x.shape[:axis] + (1,) + x.shape[axis + 1 :], identity, x.dtype)
            y = np.concatenate([head, np.delete(y, -1, axis=axis)], axis=axis)
        return np.flip(y, axis) if reverse else y

    return kernel


KERNELS[ag.CumsumOp] = _cumulative(np.cumsum, 0)
KERNELS[ag.CumprodOp] = _cumulative(np.cumprod, 1)


@_kernel(ag.BitcastOp)
def _bitcast(op: ag.BitcastOp, args: list[np.ndarray]) -> np.ndarray:
    """The same little-endian bytes read as the new dtype."""
    to = dtypes.to_numpy(op.y.type.element_type)
    return np.ascontiguousarray(args[0]).view(to).reshape(args[0].shape)


@_kernel(ag.OneHotOp)
def _one_hot(op: ag.OneHotOp, args: list[np.ndarray]) -> np.ndarray:
    """An index outside [-depth, depth) sets no position: its row is all off."""
    indices, values = args[0].astype(np.int64), args[1]
    depth = op.props.int("depth")
    axis = shapes.norm_axis(op.props.int("axis"), indices.ndim + 1)
    wrapped = np.where(indices < 0, indices + depth, indices)
    positions = np.arange(depth).reshape((depth,) + (1,) * (indices.ndim - axis))
    return np.where(np.expand_dims(wrapped, axis) == positions, values[1], values[0])


@_kernel(ag.MatrixDeterminantOp)
def _matrix_determinant(op: ag.MatrixDeterminantOp, args: list[np.ndarray]) -> np.ndarray:
    """LU in float64, rounded once to the result dtype."""
    return np.linalg.det(args[0].astype(np.float64))


# ---------------------------------------------------- recurrent layers (LSTM, GRU, RNN)

_RECURRENT_ACTIVATIONS: dict[str, Callable[[np.ndarray, Any, Any], np.ndarray]] = {
    "Relu": lambda x, a, b: np.maximum(x, 0),
    "Tanh": lambda x, a, b: np.tanh(x),
    "Sigmoid": lambda x, a, b: _sigmoid(x),
    "Softsign": lambda x, a, b: x / (1 + np.abs(x)),
    "Softplus": lambda x, a, b: np.logaddexp(0, x),
    "Affine": lambda x, a, b: a * x + b,
    "LeakyRelu": lambda x, a, b: np.where(x < 0, a * x, x),
    "ThresholdedRelu": lambda x, a, b: np.where(x > a, x, 0),
    "ScaledTanh": lambda x, a, b: a * np.tanh(b * x),
    "HardSigmoid": lambda x, a, b: np.clip(a * x + b, 0, 1),
    "Elu": lambda x, a, b: np.where(x > 0, x, a * np.expm1(x)),
}


class _Cell:
    """What every recurrent op's step shares: the named operands, the gate
    activations (their inputs clipped by cell_clip), and the time step each batch
    entry is at."""

    def __init__(self, op: ag.RecurrentOp, args: list[np.ndarray]):
        names = [key for key, _ in type(op).get_irdl_definition().operands if getattr(op, key) is not None]
        self.named = dict(zip(names, args))
        x = self.named["x"]
        self.dtype = x.dtype
        self.steps, self.batch = x.shape[0], x.shape[1]
        lengths = self.named.get("seq_length")
        self.lengths = np.full(self.batch, self.steps) if lengths is None else np.clip(lengths.astype(np.int64), 0, self.steps)
        self.reverse = op.props.str("direction") == "REDIRECTIONAL"
        p = op.props
        self.compute = _vec(np.zeros(0, self.dtype)).dtype
        compute = self.compute.type
        self.functions = [
            (_RECURRENT_ACTIVATIONS[a.data], compute(alpha), compute(beta))
            for a, alpha, beta in zip(op.activations, p.ints("activation_alpha"), p.ints("activation_beta"))
        ]
        self.clip = compute(p.float("cell_clip")) if p.has("cell_clip") else None

    def act(self, k: int, x: np.ndarray, clipped: bool = True) -> np.ndarray:
        """Activation k; cell_clip clips the gates' inputs (`clipped`), not LSTM's c_t before h."""
        fn, alpha, beta = self.functions[k]
        return fn(x if self.clip is None or not clipped else np.clip(x, -self.clip, self.clip), alpha, beta)

    def project(self, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
        """A cube product (the bias in the accumulator), rounded to the dtype as it
        leaves L0C, and widened again for the vector unit."""
        y = _acc(x) @ _acc(w)
        return _vec((y if bias is None else y + _acc(bias)).astype(self.dtype))

    def state(self, key: str, hidden: int) -> np.ndarray:
        """A state as the vector unit keeps it (the cube reads h rounded to the inputs' dtype)."""
        given = self.named.get(key)
        return np.zeros((self.batch, hidden), self.compute) if given is None else _vec(given[0])

    def final(self, state: np.ndarray) -> np.ndarray:
        """A final state [1, B, H]: 0 for an entry of no steps (seq_length 0), as onnxruntime gives."""
        return np.where(self.lengths[:, None] > 0, state, 0)[None]

    def run(self, hidden: int, step: Callable[[np.ndarray, np.ndarray, np.ndarray], None]) -> np.ndarray:
        """Every step s: the time index of each batch entry and whether it is within
        its sequence; `step(t, valid, rows)` advances the states. Returns y."""
        y = np.zeros((self.steps, self.batch, hidden), self.compute)
        rows = np.arange(self.batch)
        for s in range(self.steps):
            valid = s < self.lengths
            if not valid.any():
                break
            t = np.where(valid, self.lengths - 1 - s if self.reverse else s, 0)
            h = step(t, valid, rows)
            y[t[valid], rows[valid]] = h[valid]
        return y



@_kernel(ag.DynamicRNNOp)
def _dynamic_rnn(op: ag.DynamicRNNOp, args: list[np.ndarray]) -> list[np.ndarray]:
    """LSTM, gates ijfo. The states stay in float32 (float64) between steps; the next
    step's product reads h rounded to the inputs' dtype, and the results are rounded
    once to the result dtype."""
    cell = _Cell(op, args)
    n = cell.named
    w = n["w"]
    size = w.shape[1] // 4
    inputs = w.shape[0] - size
    xw = cell.project(n["x"], w[:inputs], n.get("b"))
    h, c = cell.state("init_h", size), cell.state("init_c", size)
    peep = [_vec(n[k]) if k in n else None for k in ("wci", "wcf", "wco")]
    coupled = op.props.bool("input_forget")

    def step(t: np.ndarray, valid: np.ndarray, rows: np.ndarray) -> np.ndarray:
        nonlocal h, c
        gates = xw[t, rows] + cell.project(h.astype(cell.dtype), w[inputs:])
        gi, gj, gf, go = (gates[:, k * size:(k + 1) * size] for k in range(4))
        i = cell.act(0, gi if peep[0] is None else gi + peep[0] * c)
        f = 1 - i if coupled else cell.act(0, gf if peep[1] is None else gf + peep[1] * c)
        c_new = f * c + i * cell.act(1, gj)
        o = cell.act(0, go if peep[2] is None else go + peep[2] * c_new)
        h_new = o * cell.act(2, c_new, clipped=False)
        keep = valid[:, None]
        h, c = np.where(keep, h_new, h), np.where(keep, c_new, c)
        return h

    y = cell.run(size, step)
    return [y, cell.final(h), cell.final(c)]


@_kernel(ag.DynamicGRUV2Op)
def _dynamic_gru_v2(op: ag.DynamicGRUV2Op, args: list[np.ndarray]) -> list[np.ndarray]:
    """GRU, gates zrh. Without reset_after, the hidden gate's product is of r h_{t-1},
    a second product per step."""
    cell = _Cell(op, args)
    n = cell.named
    r_w = n["weight_hidden"]
    size = r_w.shape[0]
    xw = cell.project(n["x"], n["weight_input"], n.get("bias_input"))
    bias = n.get("bias_hidden")
    h = cell.state("init_h", size)
    after = op.props.bool("reset_after")

    def step(t: np.ndarray, valid: np.ndarray, rows: np.ndarray) -> np.ndarray:
        nonlocal h
        x = xw[t, rows]
        stored = h.astype(cell.dtype)
        hr = cell.project(stored, r_w if after else r_w[:, :2 * size], bias if after or bias is None else bias[:2 * size])
        z = cell.act(0, x[:, :size] + hr[:, :size])
        r = cell.act(0, x[:, size:2 * size] + hr[:, size:2 * size])
        if after:
            candidate = x[:, 2 * size:] + r * hr[:, 2 * size:]
        else:
            hidden_bias = None if bias is None else bias[2 * size:]
            candidate = x[:, 2 * size:] + cell.project((r * h).astype(cell.dtype), r_w[:, 2 * size:], hidden_bias)
        h_new = (1 - z) * cell.act(1, candidate) + z * h
        h = np.where(valid[:, None], h_new, h)
        return h

    y = cell.run(size, step)
    return [y, cell.final(h)]


@_kernel(ag.RNNOp)
def _rnn(op: ag.RNNOp, args: list[np.ndarray]) -> list[np.ndarray]:
    cell = _Cell(op, args)
    n = cell.named
    w = n["w"]
    size = w.shape[1]
    inputs = w.shape[0] - size
    xw = cell.project(n["x"], w[:inputs], n.get("b"))
    h = cell.state("init_h", size)

    def step(t: np.ndarray, valid: np.ndarray, rows: np.ndarray) -> np.ndarray:
        nonlocal h
        h_new = cell.act(0, xw[t, rows] + cell.project(h.astype(cell.dtype), w[inputs:]))
        h = np.where(valid[:, None], h_new, h)
        return h

    y = cell.run(size, step)
    return [y, cell.final(h)]


# ----------------------------- quantization (AscendQuant, AscendDequant, AscendRequant)


def _quant_param(op: Any, param: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A scale or offset broadcastable against x: one value, one per index along
    `axis` (reshaped onto it), or one per block of `block_size` along it (repeated)."""
    block = op.props.int("block_size") if op.props.has("block_size") else 0
    if block == 0 and param.size == 1 and param.ndim <= 1:
        return param.reshape(())
    axis = shapes.norm_axis(op.props.int("axis", 1), x.ndim)
    if block == 0:
        return param.reshape((1,) * axis + (-1,) + (1,) * (x.ndim - axis - 1))
    return np.take(np.repeat(param, block, axis=axis), np.arange(x.shape[axis]), axis=axis)


def _saturated(values: np.ndarray, to: np.dtype) -> np.ndarray:
    """Integers held in floats, clamped to `to`'s range and converted (saturation)."""
    info = np.iinfo(to)
    return np.clip(values, info.min, info.max).astype(to)


def _offset(op: Any, args: list[np.ndarray], x: np.ndarray) -> np.ndarray | int:
    return _quant_param(op, args[2].astype(np.int64), x) if len(args) > 2 else 0


@_kernel(ag.AscendQuantOp)
def _ascend_quant(op: ag.AscendQuantOp, args: list[np.ndarray]) -> np.ndarray:
    """The quotient in float32, rounded to the precision (the scale's dtype by
    default, as QuantizeLinear-23 says), then to the nearest integer, ties to even;
    the offset is added exactly and the sum saturates."""
    x = args[0]
    scale = _quant_param(op, args[1], x)
    precision = dtypes.to_numpy(op.precision if op.precision is not None else op.scale.type.element_type)
    quotient = (x.astype(np.float32) / scale.astype(np.float32)).astype(precision).astype(np.float64)
    return _saturated(np.rint(quotient) + _offset(op, args, x), dtypes.to_numpy(op.dst_type))


@_kernel(ag.AscendDequantOp)
def _ascend_dequant(op: ag.AscendDequantOp, args: list[np.ndarray]) -> np.ndarray:
    """(x - offset) exactly in int64, converted to float32 and times the scale in
    float32, rounded once to the result dtype."""
    x = args[0]
    shifted = (x.astype(np.int64) - _offset(op, args, x)).astype(np.float32)
    return shifted * _quant_param(op, args[1], x).astype(np.float32)


@_kernel(ag.AscendRequantOp)
def _ascend_requant(op: ag.AscendRequantOp, args: list[np.ndarray]) -> np.ndarray:
    """The accumulator in float32 times the float32 multiplier, rounded to the nearest
    integer (ties to even), plus the offset, saturated: onnxruntime's requantization."""
    x = args[0]
    product = x.astype(np.float32) * _quant_param(op, args[1], x).astype(np.float32)
    return _saturated(np.rint(product.astype(np.float64)) + _offset(op, args, x), dtypes.to_numpy(op.dst_type))


# --------------------------------------------------------------------- control flow


def _body(region: Any, args: Sequence[np.ndarray], weights: WeightStore | None) -> list[np.ndarray]:
    block = region.block
    return run_block(block, dict(zip(block.args, args)), weights)


def _if(op: ag.IfOp, args: list[np.ndarray], weights: WeightStore | None) -> list[np.ndarray]:
    if args[0].size != 1:
        raise ModelError(f"{_label(op)}: the condition has {args[0].size} elements, not 1")
    taken = op.then_branch if bool(args[0].reshape(-1)[0]) else op.else_branch
    return _body(taken, args[1:], weights)


def _loop(op: ag.LoopOp, args: list[np.ndarray], weights: WeightStore | None) -> list[np.ndarray]:
    """ONNX Loop: `for i in range(trip_count) while cond`, the scan slices stacked."""
    trips, cond, rest = int(args[0].reshape(-1)[0]), bool(args[1].reshape(-1)[0]), args[2:]
    n = op.carried
    carried, captured = list(rest[:n]), rest[n:]
    slices: list[list[np.ndarray]] = [[] for _ in op.results[n:]]
    i = 0
    while i < trips and cond:
        out = _body(op.body, [np.array(i, np.int64), np.array(cond), *carried, *captured], weights)
        cond, carried = bool(out[0].reshape(-1)[0]), out[1:1 + n]
        for kept, value in zip(slices, out[1 + n:]):
            kept.append(value)
        i += 1
    stacked = [_stacked(op, kept, r.type) for kept, r in zip(slices, op.results[n:])]
    return [*carried, *stacked]


def _stacked(op: Operation, kept: list[np.ndarray], t: Any, axis: int = 0) -> np.ndarray:
    """The slices stacked on `axis`, or an empty result of the declared slice shape."""
    if kept:
        return np.stack(kept, axis)
    shape = ag.shape_of(t)
    if not shapes.is_static(shape[:axis] + shape[axis + 1:]):
        raise ModelError(f"{_label(op)}: ran no iteration, and the shape of its empty scan output {_describe(t)} is not static")
    return np.zeros(shape[:axis] + (0,) + shape[axis + 1:], dtypes.to_numpy(t.element_type))


def _scan(op: ag.ScanOp, args: list[np.ndarray], weights: WeightStore | None) -> list[np.ndarray]:
    """ONNX Scan: one body run per position along the scan axes, in their directions."""
    n, m = op.states, op.num_scan_inputs.value.data
    states, scanned, captured = list(args[:n]), args[n:n + m], args[n + m:]
    in_axes, in_dirs = op.scan_input_axes.get_values(), op.scan_input_directions.get_values()
    lengths = {x.shape[a] for x, a in zip(scanned, in_axes)}
    if len(lengths) != 1:
        raise ModelError(f"{_label(op)}: the scan inputs have different lengths {sorted(lengths)} along their scan axes")
    length = lengths.pop()
    slices: list[list[np.ndarray]] = [[] for _ in op.results[n:]]
    for t in range(length):
        steps = [np.take(x, length - 1 - t if d else t, axis=a) for x, a, d in zip(scanned, in_axes, in_dirs)]
        out = _body(op.body, [*states, *steps, *captured], weights)
        states = out[:n]
        for kept, value in zip(slices, out[n:]):
            kept.append(value)
    out_axes, out_dirs = op.scan_output_axes.get_values(), op.scan_output_directions.get_values()
    stacked = [
        _stacked(op, kept[::-1] if d else kept, r.type, a)
        for kept, r, a, d in zip(slices, op.results[n:], out_axes, out_dirs)
    ]
    return [*states, *stacked]


BODY_KERNELS: dict[type[Operation], Callable[[Any, list[np.ndarray], WeightStore | None], list[np.ndarray]]] = {
    ag.IfOp: _if, ag.LoopOp: _loop, ag.ScanOp: _scan,
}
"""The kernels of the ops with bodies (If, Loop, Scan), apart from `KERNELS` because
they run their bodies with the caller's weights."""


# ---------------------------------------------------------------------- TfIdfVectorizer


def _pool_ngrams(op: ag.TfIdfVectorizerOp) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per n-gram length: the pool's n-grams [m, n] and their numbers in ngram_indexes."""
    pool, counts = np.array(op.props.ints("pool"), np.int64), op.props.ints("ngram_counts")
    bounds, grams, number = [*counts, pool.size], {}, 0
    for k, (start, end) in enumerate(itertools.pairwise(bounds)):
        m = (end - start) // (k + 1)
        grams[k + 1] = (pool[start:end].reshape(m, k + 1), np.arange(number, number + m))
        number += m
    return grams


@_kernel(ag.TfIdfVectorizerOp)
def _tf_idf_vectorizer(op: ag.TfIdfVectorizerOp, args: list[np.ndarray]) -> np.ndarray:
    """Every window of n tokens `gap` apart (gap 1 .. max_skip_count + 1; a 1-gram is one
    window per token, not one per gap) is compared with the pool's n-grams of its length."""
    rows = args[0].reshape(-1, args[0].shape[-1]).astype(np.int64)
    length = rows.shape[1]
    found = np.zeros((rows.shape[0], len(op.props.ints("ngram_indexes"))), np.float64)
    grams = _pool_ngrams(op)
    for n in range(op.props.int("min_gram_length"), op.props.int("max_gram_length") + 1):
        if n not in grams or not grams[n][0].size:
            continue
        pool, numbers = grams[n]
        for gap in range(1, op.props.int("max_skip_count") + 2 if n > 1 else 2):
            starts = length - (n - 1) * gap
            if starts <= 0:
                break
            windows = rows[:, np.arange(starts)[:, None] + gap * np.arange(n)]  # [rows, starts, n]
            found[:, numbers] += (windows[:, :, None, :] == pool[None, None]).all(axis=-1).sum(axis=1)
    weights = np.array(op.props.ints("weights", [1.0] * found.shape[1]), np.float64)
    mode = op.props.str("mode")
    scored = found if mode == "TF" else (found > 0) * weights if mode == "IDF" else found * weights
    y = np.zeros((rows.shape[0], max(op.props.ints("ngram_indexes")) + 1), np.float32)
    np.add.at(y, (slice(None), np.array(op.props.ints("ngram_indexes"))), scored.astype(np.float32))
    return y.reshape(args[0].shape[:-1] + y.shape[-1:])
