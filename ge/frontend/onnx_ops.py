"""ONNX op converters: ONNX node -> `ascend_graph` ops, one function per op family.

Each converter reads its node through `Node` (inputs, constant inputs, attributes)
and builds ops with `Node.emit`, which names them (the node's name for the op that
produces the node's output, `<node>/<tag>` for the helpers of a decomposition) and
folds them when all their operands are constant (but for the DequantizeLinear of a
constant: a quantized weight stays int8, see its converter). It returns the node's outputs in
order, `None` for an output it cannot produce (an error only if the graph uses it).

`CONVERTERS` maps an op type to its converter and to the newest schema version of
the op that was checked against it. The schemas of opsets 22 to 27 (onnx 1.22) were
reviewed op by op: most only widen the element types (to bfloat16, or to int4,
int2, float8 and float4, which the importer refuses as element types). The others:
- Cast/CastLike-24 add `round_mode`, which only rounds to float8e8m0 (refused);
- MaxPool/AveragePool-22 say a window starting in the right padding is dropped,
  which the dialect's window arithmetic already does;
- Range-27 computes float16/bfloat16 ranges in float32 (`stash_type`); we compute
  every range in float64 and round once.
So every converter accepts the newest schema of onnx 1.22, and a schema a later
onnx release adds is refused until it is reviewed here.

Ops that compute shapes (Size, ConstantOfShape, Range, EyeLike) and the signal
constants (HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix) have no
`ascend_graph` op: they are evaluated at import, and refused when their inputs are
not static. Shape is evaluated when its input's dims are static, and is a Shape op
otherwise. What the graph computes from dynamic dims is followed symbolically
(`ge.frontend.symbolic`): an input proven constant is taken as one, and a Reshape,
Expand, Slice or Range whose target, ends or bounds stay symbolic is an op that reads
them at run time (DynamicReshape, BroadcastTo, StridedSliceV2, Range), typed with the
dims the symbols prove. Inputs that GE's ops take as attributes must be constants where they
shape the result (axes, pads, sizes, OneHot's depth); where they do not, a computed
one stays an operand that the kernel reads when it runs: Trilu's k, CumSum's and
CumProd's axis, and Clip's bounds (Maximum/Minimum with them). A model of an opset
below 11 is upgraded to 11 before import, which makes its Upsample a Resize and its
Scatter a ScatterElements (neither has a converter: both are deprecated).
`LayerNormalization`'s `stash_type` (the precision of the mean and
variance) is left to precision selection, which decides every op's compute dtype.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import helper
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    IntegerType,
    Signedness,
    StringAttr,
    TensorType,
    f32,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, SSAValue

from dialects import ascend_graph as ag
from dialects.ascend_graph import bool_attr, float_attr, int_attr, ints
from dialects.formats import element_bits
from dialects.shapes import DYN, Shape, fmt, is_static, norm_axes, norm_axis, numel
from ge.core import dtypes
from ge.core.errors import ModelError
from ge.core.limits import check_folded
from ge.core.weights import INLINE_LIMIT
from ge.frontend import symbolic
from ge.frontend.tensors import element_type, sparse_array, tensor_array

if TYPE_CHECKING:
    from ge.frontend.onnx_importer import Importer

INT64_MAX = 2**63 - 1


def _attr_value(attr: onnx.AttributeProto) -> Any:
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", "replace") for v in value]
    return value


class Node:
    """One ONNX node under conversion: its inputs and attributes, and the op builder."""

    def __init__(self, importer: Importer, proto: onnx.NodeProto, name: str, since: int):
        self.importer = importer
        self.proto = proto
        self.name = name
        self.op_type = proto.op_type
        self.since = since
        self.attrs: dict[str, Any] = {a.name: _attr_value(a) for a in proto.attribute}

    def error(self, reason: str) -> ModelError:
        return ModelError(f"node '{self.name}' ({self.op_type}): {reason}")

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    # ------------------------------------------------------------------ inputs

    def has(self, i: int) -> bool:
        return i < len(self.proto.input) and self.proto.input[i] != ""

    def x(self, i: int) -> SSAValue:
        if not self.has(i):
            raise self.error(f"input {i} is missing")
        return self.importer.value(self.proto.input[i])

    def opt(self, i: int) -> SSAValue | None:
        return self.x(i) if self.has(i) else None

    def inputs(self) -> list[SSAValue]:
        return [self.importer.value(name) for name in self.proto.input if name]

    def array(self, i: int, what: str) -> np.ndarray | None:
        """The value of constant input `i` (None if absent), or of one the graph computes
        from dynamic dims that the symbolic dims prove constant; any other is an error."""
        if not self.has(i):
            return None
        name = self.proto.input[i]
        array = self.importer.constant_value(name)
        if array is not None:
            return array
        computed = self.exprs(i)
        if computed is not None and all(e.constant is not None for e in computed):
            return np.array([e.constant for e in computed], np.int64).reshape(shape(self.x(i)))
        if computed is not None:
            raise self.error(
                f"input {i} ({what}, '{name}') is {symbolic.fmt(computed)}, computed from the model's dynamic dims, "
                "and must be a constant here; pin those dims with --input_shape, or build gears of them "
                "(--dynamic_batch_size, --dynamic_dims)"
            )
        raise self.error(f"input {i} ({what}, '{name}') must be a constant, but the graph computes it")

    def exprs(self, i: int) -> tuple[symbolic.Expr, ...] | None:
        """The elements of input `i` as expressions of the dynamic dims, when the graph
        computes it from them (see `ge.frontend.symbolic`)."""
        return self.importer.symbolic.values.get(self.proto.input[i]) if self.has(i) else None

    def computed(self, *indices: int) -> bool:
        """Whether some of these inputs are computed from the model's dynamic dims (and
        the others constant or absent): what a run-time shaped op may take."""
        computed = [i for i in indices if self.has(i) and self.importer.constant_value(self.proto.input[i]) is None]
        return bool(computed) and all(self.exprs(i) is not None for i in computed)

    def dims(self, i: int) -> tuple[symbolic.Expr, ...] | None:
        """The dims of input `i` as expressions of the dynamic dims."""
        return self.importer.tracer.dims(self.proto.input[i]) if self.has(i) else None

    def ints(self, i: int, what: str) -> list[int] | None:
        array = self.array(i, what)
        if array is None:
            return None
        if array.dtype.kind not in "iu":
            raise self.error(f"input {i} ({what}) must hold integers, not {array.dtype}")
        return [int(v) for v in array.reshape(-1).tolist()]

    def scalar_input(self, i: int, what: str) -> float | int | None:
        array = self.array(i, what)
        if array is None or array.size == 0:
            return None
        if array.size != 1:
            raise self.error(f"input {i} ({what}) must be a scalar, got shape {list(array.shape)}")
        return array.reshape(-1)[0].item()

    def used(self, i: int) -> bool:
        return i < len(self.proto.output) and self.proto.output[i] in self.importer.needed

    # ------------------------------------------------------------------ ops

    def label(self, tag: str | None) -> str:
        return self.name if tag is None else f"{self.name}/{tag}"

    def emit_all(
        self, cls: type[ag.AscendOp], operands: Sequence[SSAValue], props: dict[str, Attribute] | None = None,
        tag: str | None = None,
    ) -> list[SSAValue]:
        return self.importer.build(cls(operands, props or {}, self.label(tag)))

    def emit(
        self, cls: type[ag.AscendOp], operands: Sequence[SSAValue], props: dict[str, Attribute] | None = None,
        tag: str | None = None,
    ) -> SSAValue:
        return self.emit_all(cls, operands, props, tag)[0]

    def const(self, array: np.ndarray, tag: str | None = None) -> SSAValue:
        return self.importer.constant(np.asarray(array), self.label(tag))

    def scalar(self, value: float, like: SSAValue, tag: str) -> SSAValue:
        """A rank-0 constant of `like`'s element type (broadcasts against it)."""
        return self.const(np.array(value, dtypes.to_numpy(dtype(like))), tag)


def shape(value: SSAValue) -> Shape:
    assert isinstance(value.type, TensorType)
    return tuple(value.type.get_shape())


def dtype(value: SSAValue) -> Attribute:
    assert isinstance(value.type, TensorType)
    return value.type.element_type


Outputs = Sequence[SSAValue | None]


@dataclass(frozen=True)
class Converter:
    """How one ONNX op type is imported, and the newest schema version checked for it."""

    fn: Callable[[Node], Outputs]
    newest: int


CONVERTERS: dict[str, Converter] = {}


def converts(**newest: int) -> Callable[[Callable[[Node], Outputs]], Callable[[Node], Outputs]]:
    """Register a converter for op types given as `OpType=<newest schema version>`."""

    def register(fn: Callable[[Node], Outputs]) -> Callable[[Node], Outputs]:
        for op_type, version in newest.items():
            CONVERTERS[op_type] = Converter(fn, version)
        return fn

    return register


# ------------------------------------------------------------------------ elementwise

_UNARY: dict[str, tuple[type[ag.AscendOp], int]] = {
    "Neg": (ag.NegOp, 13), "Abs": (ag.AbsOp, 13), "Sign": (ag.SignOp, 13),
    "Relu": (ag.ReluOp, 14), "Sqrt": (ag.SqrtOp, 13), "Reciprocal": (ag.ReciprocalOp, 13), "Exp": (ag.ExpOp, 13),
    "Log": (ag.LogOp, 13), "Erf": (ag.ErfOp, 13), "Tanh": (ag.TanhOp, 13), "Sigmoid": (ag.SigmoidOp, 13),
    "Sin": (ag.SinOp, 22), "Cos": (ag.CosOp, 22), "Floor": (ag.FloorOp, 13), "Ceil": (ag.CeilOp, 13),
    "Round": (ag.RoundOp, 22), "Softplus": (ag.SoftplusOp, 22), "Softsign": (ag.SoftsignOp, 22),
    "HardSwish": (ag.HardSwishOp, 22), "Not": (ag.LogicalNotOp, 1),
}

_BINARY: dict[str, tuple[type[ag.AscendOp], int]] = {
    "Add": (ag.AddOp, 14), "Sub": (ag.SubOp, 14), "Mul": (ag.MulOp, 14), "Div": (ag.DivOp, 14),
    "PRelu": (ag.PReluOp, 16), "Equal": (ag.EqualOp, 19), "Less": (ag.LessOp, 13),
    "LessOrEqual": (ag.LessEqualOp, 16), "Greater": (ag.GreaterOp, 13), "GreaterOrEqual": (ag.GreaterEqualOp, 16),
    "And": (ag.LogicalAndOp, 7), "Or": (ag.LogicalOrOp, 7), "Xor": (ag.LogicalXorOp, 7),
}


def _unary(cls: type[ag.AscendOp]) -> Callable[[Node], Outputs]:
    return lambda n: [n.emit(cls, [n.x(0)])]


def _binary(cls: type[ag.AscendOp]) -> Callable[[Node], Outputs]:
    return lambda n: [n.emit(cls, [n.x(0), n.x(1)])]


for _op_type, (_cls, _newest) in _UNARY.items():
    CONVERTERS[_op_type] = Converter(_unary(_cls), _newest)
for _op_type, (_cls, _newest) in _BINARY.items():
    CONVERTERS[_op_type] = Converter(_binary(_cls), _newest)


@converts(Pow=15)
def _pow(n: Node) -> Outputs:
    """ONNX lets the exponent's type differ from the base's; ours casts it to the base's."""
    base, exponent = n.x(0), n.x(1)
    if dtype(exponent) != dtype(base):
        exponent = n.emit(ag.CastOp, [exponent], {"dst_type": dtype(base)}, "cast")
    return [n.emit(ag.PowOp, [base, exponent])]


def _chain(n: Node, cls: type[ag.AscendOp], tag: str, last: bool = True) -> SSAValue:
    """Fold a variadic op into a chain of binary ops; the last one carries the node's
    name (when `last`). One input is the identity."""
    xs = n.inputs()
    if not xs:
        raise n.error("needs at least one input")
    if len(xs) == 1:
        return n.emit(ag.IdentityOp, xs)
    acc = xs[0]
    for i, x in enumerate(xs[1:], 1):
        final = last and i == len(xs) - 1
        acc = n.emit(cls, [acc, x], tag=None if final else f"{tag}_{i}")
    return acc


@converts(Max=13)
def _max(n: Node) -> Outputs:
    return [_chain(n, ag.MaximumOp, "maximum")]


@converts(Min=13)
def _min(n: Node) -> Outputs:
    return [_chain(n, ag.MinimumOp, "minimum")]


@converts(Sum=13)
def _sum(n: Node) -> Outputs:
    return [_chain(n, ag.AddOp, "add")]


@converts(Mean=13)
def _mean(n: Node) -> Outputs:
    count = len(n.inputs())
    if count <= 1:
        return [_chain(n, ag.AddOp, "add")]
    total = _chain(n, ag.AddOp, "add", last=False)
    return [n.emit(ag.DivOp, [total, n.scalar(count, total, "count")])]


@converts(Gelu=20)
def _gelu(n: Node) -> Outputs:
    approximate = n.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise n.error(f"approximate '{approximate}' is not 'none' or 'tanh'")
    props = {"approximate": StringAttr("tanh")} if approximate == "tanh" else {}
    return [n.emit(ag.GeluOp, [n.x(0)], props)]


@converts(LeakyRelu=16)
def _leaky_relu(n: Node) -> Outputs:
    return [n.emit(ag.LeakyReluOp, [n.x(0)], {"negative_slope": float_attr(n.attr("alpha", 0.01))})]


@converts(Elu=22)
def _elu(n: Node) -> Outputs:
    return [n.emit(ag.EluOp, [n.x(0)], {"alpha": float_attr(n.attr("alpha", 1.0))})]


@converts(Selu=22)
def _selu(n: Node) -> Outputs:
    alpha = n.attr("alpha", 1.67326319217681884765625)
    gamma = n.attr("gamma", 1.05070102214813232421875)
    return [n.emit(ag.SeluOp, [n.x(0)], {"alpha": float_attr(alpha), "gamma": float_attr(gamma)})]


@converts(Celu=12)
def _celu(n: Node) -> Outputs:
    """celu(x) = alpha * elu(x / alpha) with elu's alpha = 1."""
    x = n.x(0)
    alpha = n.scalar(n.attr("alpha", 1.0), x, "alpha")
    scaled = n.emit(ag.DivOp, [x, alpha], tag="div")
    elu = n.emit(ag.EluOp, [scaled], {"alpha": float_attr(1.0)}, "elu")
    return [n.emit(ag.MulOp, [elu, alpha])]


@converts(HardSigmoid=22)
def _hard_sigmoid(n: Node) -> Outputs:
    props = {"alpha": float_attr(n.attr("alpha", 0.2)), "beta": float_attr(n.attr("beta", 0.5))}
    return [n.emit(ag.HardSigmoidOp, [n.x(0)], props)]


@converts(Mish=22)
def _mish(n: Node) -> Outputs:
    """mish(x) = x * tanh(softplus(x))."""
    x = n.x(0)
    soft = n.emit(ag.SoftplusOp, [x], tag="softplus")
    return [n.emit(ag.MulOp, [x, n.emit(ag.TanhOp, [soft], tag="tanh")])]


@converts(Clip=13)
def _clip(n: Node) -> Outputs:
    """Bounds come from the inputs: the `min`/`max` attributes of Clip before opset 11
    are refused as unknown attributes, as ONNX's checker does. Constant bounds are
    ClipByValue's properties; a computed bound is the tensor input of CANN's
    ClipByValue, which is Maximum (min) or Minimum (max) with it, read when it runs."""
    computed = [n.has(i) and n.importer.constant_value(n.proto.input[i]) is None for i in (1, 2)]
    if not any(computed):
        props: dict[str, Attribute] = {}
        for i, key in ((1, "min"), (2, "max")):
            bound = n.scalar_input(i, key)
            if bound is not None:
                props[key] = float_attr(bound)
        return [n.emit(ag.ClipByValueOp, [n.x(0)], props)]
    steps: list[tuple[type[ag.AscendOp], list[SSAValue], dict[str, Attribute], str]] = []
    for i, key, cls in ((1, "min", ag.MaximumOp), (2, "max", ag.MinimumOp)):
        if computed[i - 1]:
            bound = n.x(i)
            if numel(shape(bound)) != 1 or len(shape(bound)) > len(shape(n.x(0))):
                raise n.error(f"{key} must be one value (a scalar), got shape {fmt(shape(bound))}")
            steps.append((cls, [bound], {}, key))
        elif (value := n.scalar_input(i, key)) is not None:
            steps.append((ag.ClipByValueOp, [], {key: float_attr(value)}, key))
    y = n.x(0)
    for j, (cls, operands, props, key) in enumerate(steps):
        y = n.emit(cls, [y, *operands], props, None if j == len(steps) - 1 else key)
    return [y]


@converts(Cast=25)
def _cast(n: Node) -> Outputs:
    target = element_type(n.attr("to"), "attribute 'to'")
    return [n.emit(ag.CastOp, [n.x(0)], {"dst_type": target})]


@converts(CastLike=25)
def _cast_like(n: Node) -> Outputs:
    return [n.emit(ag.CastOp, [n.x(0)], {"dst_type": dtype(n.x(1))})]


@converts(Where=16)
def _where(n: Node) -> Outputs:
    return [n.emit(ag.SelectOp, [n.x(0), n.x(1), n.x(2)])]


def _identity(n: Node, x: SSAValue) -> SSAValue:
    """The identity of a constant is that constant (exporters put Identity on shared
    weights, and passes look for constants, not copies of them)."""
    if n.importer.array_of(x) is not None:
        return x
    return n.emit(ag.IdentityOp, [x])


@converts(Identity=25)
def _identity_node(n: Node) -> Outputs:
    return [_identity(n, n.x(0))]


@converts(Dropout=22)
def _dropout(n: Node) -> Outputs:
    """Inference: the identity, and a mask of all true. So is training mode with a
    ratio of 0; any other training mode (random) is refused."""
    training = n.has(2) and n.scalar_input(2, "training_mode")
    ratio = n.scalar_input(1, "ratio") if n.has(1) else 0.5
    if training and ratio != 0:
        raise n.error(f"training_mode=true with ratio {ratio} is unsupported (inference only)")
    x = n.x(0)
    if not n.used(1):
        return [_identity(n, x), None]
    if not is_static(shape(x)):
        raise n.error(f"the mask output needs a static input shape, got {fmt(shape(x))}")
    keep = n.const(np.array(True), "keep")
    mask = n.emit(ag.ExpandOp, [keep], {"shape": ints(shape(x))}, "mask")
    return [_identity(n, x), mask]


# ------------------------------------------------------------------------- reductions

_REDUCE: dict[str, type[ag.ReduceOp]] = {
    "ReduceMean": ag.ReduceMeanOp, "ReduceSum": ag.ReduceSumOp, "ReduceMax": ag.ReduceMaxOp,
    "ReduceMin": ag.ReduceMinOp, "ReduceProd": ag.ReduceProdOp,
}


def _reduce_axes(n: Node) -> tuple[int, ...] | None:
    """The reduced axes (empty = all), or None for a no-op (noop_with_empty_axes). An
    axes input of no elements needs no value: computed or not, it is empty."""
    from_input = n.since >= 18 or (n.op_type == "ReduceSum" and n.since >= 13)
    computed = from_input and n.has(1) and n.importer.constant_value(n.proto.input[1]) is None
    if computed and numel(shape(n.x(1))) == 0:
        axes: list[int] = []
    else:
        axes = (n.ints(1, "axes") if from_input else n.attr("axes")) or []
    if not axes and n.attr("noop_with_empty_axes", 0):
        return None
    return tuple(axes)


def _reduce(n: Node, cls: type[ag.ReduceOp], x: SSAValue, axes: tuple[int, ...] | None, keep: bool,
            tag: str | None = None) -> SSAValue:
    if axes is None:
        return n.emit(ag.IdentityOp, [x], tag=tag)
    return n.emit(cls, [x], {"axes": ints(axes), "keep_dims": bool_attr(keep)}, tag)


@converts(ReduceMean=18, ReduceSum=13, ReduceMax=20, ReduceMin=20, ReduceProd=18)
def _reduce_plain(n: Node) -> Outputs:
    return [_reduce(n, _REDUCE[n.op_type], n.x(0), _reduce_axes(n), bool(n.attr("keepdims", 1)))]


@converts(ReduceL1=18, ReduceL2=18, ReduceSumSquare=18, ReduceLogSum=18)
def _reduce_composite(n: Node) -> Outputs:
    """The sum of f(x), then g: with noop_with_empty_axes, g(f(x)) elementwise as ONNX."""
    x, axes, keep = n.x(0), _reduce_axes(n), bool(n.attr("keepdims", 1))
    kind = n.op_type
    if kind == "ReduceL1":
        terms = n.emit(ag.AbsOp, [x], tag="abs")
    elif kind in ("ReduceL2", "ReduceSumSquare"):
        terms = n.emit(ag.MulOp, [x, x], tag="square")
    else:
        terms = x
    if kind == "ReduceL2":
        return [n.emit(ag.SqrtOp, [_reduce(n, ag.ReduceSumOp, terms, axes, keep, "reduce_sum")])]
    if kind == "ReduceLogSum":
        return [n.emit(ag.LogOp, [_reduce(n, ag.ReduceSumOp, terms, axes, keep, "reduce_sum")])]
    return [_reduce(n, ag.ReduceSumOp, terms, axes, keep)]


@converts(ReduceLogSumExp=18)
def _reduce_log_sum_exp(n: Node) -> Outputs:
    """log(sum(exp(x - m))) + m with m the maximum, so that exp cannot overflow."""
    x, axes, keep = n.x(0), _reduce_axes(n), bool(n.attr("keepdims", 1))
    if axes is None:
        return [n.emit(ag.IdentityOp, [x])]
    peak = _reduce(n, ag.ReduceMaxOp, x, axes, True, "reduce_max")
    shifted = n.emit(ag.ExpOp, [n.emit(ag.SubOp, [x, peak], tag="sub")], tag="exp")
    log = n.emit(ag.LogOp, [_reduce(n, ag.ReduceSumOp, shifted, axes, keep, "reduce_sum")], tag="log")
    if not keep:
        rank = len(shape(x))
        squeezed = norm_axes(axes, rank) if axes else tuple(range(rank))
        peak = n.emit(ag.SqueezeOp, [peak], {"axis": ints(squeezed)}, "squeeze")
    return [n.emit(ag.AddOp, [log, peak])]


@converts(ArgMax=13, ArgMin=13)
def _arg(n: Node) -> Outputs:
    cls = ag.ArgMaxOp if n.op_type == "ArgMax" else ag.ArgMinOp
    props = {
        "axis": int_attr(n.attr("axis", 0)),
        "keep_dims": bool_attr(n.attr("keepdims", 1)),
        "select_last_index": bool_attr(n.attr("select_last_index", 0)),
    }
    return [n.emit(cls, [n.x(0)], props)]


@converts(Softmax=13, LogSoftmax=13)
def _softmax(n: Node) -> Outputs:
    """Before opset 13 the op works on the input coerced to 2-D at `axis`: axes axis..rank-1."""
    x = n.x(0)
    rank = len(shape(x))
    if n.since < 13:
        axes = tuple(range(norm_axis(n.attr("axis", 1), rank), rank))
    else:
        axes = (n.attr("axis", -1),)
    cls = ag.SoftmaxOp if n.op_type == "Softmax" else ag.LogSoftmaxOp
    return [n.emit(cls, [x], {"axes": ints(axes)})]


# ----------------------------------------------------------------------- normalisation


@converts(BatchNormalization=15)
def _batch_norm(n: Node) -> Outputs:
    if n.attr("training_mode", 0):
        raise n.error("training_mode=1 is unsupported (inference only)")
    if any(n.used(i) for i in range(1, 5)):
        raise n.error("the training outputs (running or saved mean and variance) are unsupported")
    operands = [n.x(i) for i in range(5)]
    return [n.emit(ag.BatchNormOp, operands, {"epsilon": float_attr(n.attr("epsilon", 1e-5))})]


@converts(LayerNormalization=17)
def _layer_norm(n: Node) -> Outputs:
    """LayerNorm for Y; the Mean and InvStdDev outputs, when used, are computed beside it
    (in stash_type, float32 by default) as ONNX defines them, over the normalised axes."""
    x = n.x(0)
    operands = [x, n.x(1)] + ([n.x(2)] if n.has(2) else [])
    epsilon = n.attr("epsilon", 1e-5)
    props = {"begin_norm_axis": int_attr(n.attr("axis", -1)), "epsilon": float_attr(epsilon)}
    y = n.emit(ag.LayerNormOp, operands, props)
    if not (n.used(1) or n.used(2)):
        return [y]
    axis = norm_axis(n.attr("axis", -1), len(shape(x)))
    axes = tuple(range(axis, len(shape(x))))
    stash = dtypes.from_numpy(helper.tensor_dtype_to_np_dtype(n.attr("stash_type", onnx.TensorProto.FLOAT)))
    if dtype(x) != stash:
        x = n.emit(ag.CastOp, [x], {"dst_type": stash}, "stash")
    mean = _reduce(n, ag.ReduceMeanOp, x, axes, True, "mean")
    centered = n.emit(ag.SubOp, [x, mean], tag="centered")
    variance = _reduce(n, ag.ReduceMeanOp, n.emit(ag.MulOp, [centered, centered], tag="square"), axes, True, "variance")
    shifted = n.emit(ag.AddOp, [variance, n.scalar(epsilon, variance, "epsilon")], tag="variance_epsilon")
    inv_std_dev = n.emit(ag.RsqrtOp, [shifted], tag="inv_std_dev")
    return [y, mean if n.used(1) else None, inv_std_dev if n.used(2) else None]


@converts(InstanceNormalization=22)
def _instance_norm(n: Node) -> Outputs:
    """Scale and bias hold one value per channel (dim 1), which ONNX's inference does not check."""
    operands = [n.x(0), n.x(1), n.x(2)]
    channels = shape(operands[0])[1:2]
    for what, value in (("scale", operands[1]), ("B", operands[2])):
        if channels and channels[0] != DYN and shape(value) != channels:
            raise n.error(f"{what} has shape {fmt(shape(value))}, expected {fmt(channels)} (the channels)")
    return [n.emit(ag.InstanceNormOp, operands, {"epsilon": float_attr(n.attr("epsilon", 1e-5))})]


# --------------------------------------------------------------------------- windows


def _window(n: Node, sizes: Shape, kernel: Sequence[int]) -> tuple[list[int], list[int], list[tuple[int, int]]]:
    """Strides, dilations and (begin, end) pads per spatial axis, auto_pad resolved."""
    k = len(kernel)
    strides = list(n.attr("strides", [1] * k))
    dilations = list(n.attr("dilations", [1] * k))
    if len(strides) != k or len(dilations) != k:
        raise n.error(f"strides {strides} and dilations {dilations} need {k} values each")
    auto_pad = n.attr("auto_pad", "NOTSET")
    if auto_pad in ("NOTSET", ""):
        pads = list(n.attr("pads", [0] * 2 * k))
        if len(pads) != 2 * k:
            raise n.error(f"pads {pads} need {2 * k} values")
        return strides, dilations, [(pads[i], pads[i + k]) for i in range(k)]
    if auto_pad == "VALID":
        return strides, dilations, [(0, 0)] * k
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise n.error(f"auto_pad '{auto_pad}' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER")
    pads = []
    for size, kk, s, d in zip(sizes, kernel, strides, dilations):
        if size == DYN:
            raise n.error(f"auto_pad {auto_pad} needs static spatial dims, got {fmt(sizes)}")
        out = -(-size // s)
        total = max(0, (out - 1) * s + (kk - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        pads.append((small, big) if auto_pad == "SAME_UPPER" else (big, small))
    return strides, dilations, pads


def _spatial_rank(n: Node, x: SSAValue) -> int:
    rank = len(shape(x))
    if rank not in (3, 4):
        raise n.error(f"only 1-D, 2-D and 3-D {n.op_type} is supported; the input has shape {fmt(shape(x))}")
    return rank - 2


def _unsqueeze_h(n: Node, x: SSAValue, tag: str) -> SSAValue:
    """[N, C, L] -> [N, C, 1, L]: a 1-D window op runs as a 2-D one of height 1."""
    return n.emit(ag.UnsqueezeOp, [x], {"axes": ints([2])}, tag)


def _squeeze_h(n: Node, y: SSAValue) -> SSAValue:
    return n.emit(ag.SqueezeOp, [y], {"axis": ints([2])})


@converts(Conv=22)
def _conv(n: Node) -> Outputs:
    x, w, b = n.x(0), n.x(1), n.opt(2)
    if len(shape(x)) == 5:
        return [_conv3d(n, x, w, b)]
    return [_conv2d(n, x, w, b)]


def _conv2d(
    n: Node, x: SSAValue, w: SSAValue, b: SSAValue | None, props: dict[str, Attribute] | None = None,
    tag: str | None = None,
) -> SSAValue:
    """The node's 1-D or 2-D convolution of x by w (plus b) as a Conv2D, its result
    named by `tag` (more `props` join its window's)."""
    spatial = _spatial_rank(n, x)
    kernel = shape(w)[2:]
    if len(kernel) != spatial or not is_static(kernel):
        raise n.error(f"filter shape {fmt(shape(w))} does not match a {spatial}-D convolution")
    declared = n.attr("kernel_shape")
    if declared is not None and tuple(declared) != kernel:
        raise n.error(f"kernel_shape {list(declared)} differs from the filter's {list(kernel)}")
    strides, dilations, pads = _window(n, shape(x)[2:], kernel)
    if spatial == 1:
        x, w = _unsqueeze_h(n, x, "unsqueeze"), _unsqueeze_h(n, w, "unsqueeze_filter")
        strides, dilations, pads = [1, *strides], [1, *dilations], [(0, 0), *pads]
    props = {
        "strides": ints([1, 1, *strides]),
        "pads": ints([pads[0][0], pads[0][1], pads[1][0], pads[1][1]]),
        "dilations": ints([1, 1, *dilations]),
        "groups": int_attr(n.attr("group", 1)),
        **(props or {}),
    }
    operands = [x, w] + ([b] if b is not None else [])
    if spatial == 1:
        return n.emit(ag.SqueezeOp, [n.emit(ag.Conv2DOp, operands, props, "conv2d")], {"axis": ints([2])}, tag)
    return n.emit(ag.Conv2DOp, operands, props, tag)


@converts(MaxPool=22, AveragePool=22)
def _pool(n: Node) -> Outputs:
    x = n.x(0)
    if n.op_type == "MaxPool" and n.used(1):
        return _max_pool_with_argmax(n, x)
    if len(shape(x)) == 5:
        return [_pool3d(n, x), None]
    spatial = _spatial_rank(n, x)
    kernel = tuple(n.attr("kernel_shape"))
    if len(kernel) != spatial:
        raise n.error(f"kernel_shape {list(kernel)} does not match a {spatial}-D pooling")
    strides, dilations, pads = _window(n, shape(x)[2:], kernel)
    if spatial == 1:
        x = _unsqueeze_h(n, x, "unsqueeze")
        kernel, strides, dilations, pads = (1, *kernel), [1, *strides], [1, *dilations], [(0, 0), *pads]
    props: dict[str, Attribute] = {
        "ksize": ints(kernel),
        "strides": ints(strides),
        "pads": ints([pads[0][0], pads[0][1], pads[1][0], pads[1][1]]),
        "ceil_mode": bool_attr(n.attr("ceil_mode", 0)),
    }
    if n.op_type == "MaxPool":
        cls: type[ag.PoolOp] = ag.MaxPoolOp
        if any(d != 1 for d in dilations):
            props["dilations"] = ints(dilations)
    else:
        cls = ag.AvgPoolOp
        if any(d != 1 for d in dilations):
            props["dilations"] = ints(dilations)
        props["exclusive"] = bool_attr(not n.attr("count_include_pad", 0))
    if spatial == 1:
        return [_squeeze_h(n, n.emit(cls, [x], props, "pool")), None]
    return [n.emit(cls, [x], props), None]


@converts(GlobalAveragePool=22, GlobalMaxPool=22)
def _global_pool(n: Node) -> Outputs:
    cls = ag.GlobalAveragePoolOp if n.op_type == "GlobalAveragePool" else ag.GlobalMaxPoolOp
    return [n.emit(cls, [n.x(0)])]


# -------------------------------------------------------------------------- cube ops


@converts(MatMul=13)
def _matmul(n: Node) -> Outputs:
    a, b = n.x(0), n.x(1)
    if len(shape(a)) == 2 and len(shape(b)) == 2:
        props = {"transpose_x1": bool_attr(False), "transpose_x2": bool_attr(False)}
        return [n.emit(ag.MatMulV2Op, [a, b], props)]
    return [n.emit(ag.BatchMatMulOp, [a, b], {"adj_x1": bool_attr(False), "adj_x2": bool_attr(False)})]


@converts(Gemm=13)
def _gemm(n: Node) -> Outputs:
    operands = [n.x(0), n.x(1)] + ([n.x(2)] if n.has(2) else [])
    props = {
        "alpha": float_attr(n.attr("alpha", 1.0)),
        "beta": float_attr(n.attr("beta", 1.0)),
        "trans_a": bool_attr(n.attr("transA", 0)),
        "trans_b": bool_attr(n.attr("transB", 0)),
    }
    return [n.emit(ag.GemmOp, operands, props)]


# ------------------------------------------------------------------------ shape ops


@converts(Reshape=25)
def _reshape(n: Node) -> Outputs:
    """Resolve ONNX's 0 (copy the input's dim; with allowzero, a 0 stays: an empty
    tensor) before our reshape.

    A copied dynamic dim becomes the target's -1 when the target has none; two
    unknown dims cannot be a Reshape's. A target the graph computes from dynamic dims
    is resolved symbolically (`ge.frontend.symbolic`): a Reshape when at most one dim
    stays unknown, else a DynamicReshape (the target an operand, resolved at run time)
    with every dim the symbols prove static; a target from a Shape the symbols cannot
    follow is a DynamicReshape too. Any other target must be a constant.
    """
    x = n.x(0)
    src = shape(x)
    allow_zero = n.since >= 14 and n.attr("allowzero", 0)
    computed = n.has(1) and n.importer.constant_value(n.proto.input[1]) is None
    exprs = n.exprs(1) if computed else None
    if exprs is not None and any(e.constant is None for e in exprs):
        return [_symbolic_reshape(n, x, exprs, bool(allow_zero))]
    if computed and exprs is None and _from_shape(n.x(1)):
        return [n.emit(ag.DynamicReshapeOp, [x, n.x(1)], {"allowzero": bool_attr(bool(allow_zero))})]
    target = n.ints(1, "shape") or []
    resolved = []
    for i, d in enumerate(target):
        if d != 0 or allow_zero:
            resolved.append(d)
        elif i >= len(src):
            raise n.error(f"target shape {target} copies dim {i}, but the input has rank {len(src)}")
        else:
            resolved.append(-1 if src[i] == DYN else src[i])
    if resolved.count(-1) > 1:
        raise n.error(f"reshaping {fmt(src)} to {target} leaves more than one dim unknown")
    return [n.emit(ag.ReshapeOp, [x], {"shape": ints(resolved)})]


def _symbolic_reshape(n: Node, x: SSAValue, target: Sequence[symbolic.Expr], allow_zero: bool) -> SSAValue:
    """A Reshape to a target of symbolic dims: a static Reshape with a -1 when one dim
    is unknown, else a DynamicReshape whose type has the dims the symbols prove."""
    src = n.dims(0)
    assert src is not None
    if not allow_zero and any(e.constant == 0 and i >= len(src) for i, e in enumerate(target)):
        raise n.error(f"target shape {symbolic.fmt(target)} copies a dim beyond the input's rank {len(src)}")
    dims = symbolic.known(symbolic.reshape(src, target, allow_zero))
    if dims.count(-1) <= 1:
        return n.emit(ag.ReshapeOp, [x], {"shape": ints(dims)})
    return n.emit(ag.DynamicReshapeOp, [x, n.x(1)], {"allowzero": bool_attr(allow_zero), "dims": ints(dims)})


def _from_shape(value: SSAValue) -> bool:
    """Whether `value` is computed from a Shape op (the dims of a dynamic tensor)."""
    stack, seen = [value], set()
    while stack:
        owner = stack.pop().owner
        if isinstance(owner, ag.ShapeOp):
            return True
        if isinstance(owner, ag.AscendOp) and owner not in seen:
            seen.add(owner)
            stack.extend(owner.operands)
    return False


@converts(Flatten=25)
def _flatten(n: Node) -> Outputs:
    return [n.emit(ag.FlattenOp, [n.x(0)], {"axis": int_attr(n.attr("axis", 1))})]


@converts(Transpose=25)
def _transpose(n: Node) -> Outputs:
    x = n.x(0)
    perm = n.attr("perm", list(reversed(range(len(shape(x))))))
    return [n.emit(ag.TransposeOp, [x], {"perm": ints(perm)})]


def _axes(n: Node, input_since: int) -> list[int] | None:
    """`axes` from input 1 from schema `input_since` on, from the attribute before it."""
    return n.ints(1, "axes") if n.since >= input_since else n.attr("axes")


@converts(Squeeze=25)
def _squeeze(n: Node) -> Outputs:
    return [n.emit(ag.SqueezeOp, [n.x(0)], {"axis": ints(_axes(n, 13) or [])})]


@converts(Unsqueeze=25)
def _unsqueeze(n: Node) -> Outputs:
    axes = _axes(n, 13)
    if not axes:
        raise n.error("axes are missing")
    return [n.emit(ag.UnsqueezeOp, [n.x(0)], {"axes": ints(axes)})]


@converts(Concat=13)
def _concat(n: Node) -> Outputs:
    if any(not shape(x) for x in n.inputs()):
        raise n.error("cannot concatenate scalars")
    return [n.emit(ag.ConcatOp, n.inputs(), {"concat_dim": int_attr(n.attr("axis"))})]


@converts(Split=18)
def _split(n: Node) -> Outputs:
    """Equal parts become SplitD, any other sizes SplitVD."""
    x = n.x(0)
    axis = n.attr("axis", 0)
    if not shape(x):
        raise n.error("cannot split a scalar")
    dim = shape(x)[norm_axis(axis, len(shape(x)))]
    parts = len(n.proto.output)
    sizes = n.ints(1, "split") if n.since >= 13 else n.attr("split")
    if not sizes and n.since >= 18 and n.attr("num_outputs") is not None:
        count = n.attr("num_outputs")
        if count != parts:
            raise n.error(f"num_outputs {count} differs from the node's {parts} outputs")
        if dim != DYN and dim % count:
            chunk = -(-dim // count)
            sizes = [chunk] * (count - 1) + [dim - chunk * (count - 1)]
    if sizes and len(sizes) != parts:
        raise n.error(f"split {sizes} has {len(sizes)} parts, but the node has {parts} outputs")
    props: dict[str, Attribute] = {"split_dim": int_attr(axis), "num_split": int_attr(parts)}
    if not sizes or len(set(sizes)) == 1:
        return n.emit_all(ag.SplitOp, [x], props)
    return n.emit_all(ag.SplitVOp, [x], props | {"size_splits": ints(sizes)})


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


@converts(Slice=13)
def _slice(n: Node) -> Outputs:
    """Resolve negative and out-of-range starts and ends per dim, as ONNX clamps them.

    A dim that is not sliced keeps begin 0, stride 1 and its size as end, or INT64_MAX
    (to the end) when it is dynamic; a sliced dynamic dim is refused.
    """
    x = n.x(0)
    src = shape(x)
    rank = len(src)
    if n.computed(1, 2) and not n.computed(3, 4) and n.dims(0) is not None:
        return [_symbolic_slice(n, x)]
    starts, ends = n.ints(1, "starts") or [], n.ints(2, "ends") or []
    axes = n.ints(3, "axes") or list(range(len(starts)))
    steps = n.ints(4, "steps") or [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise n.error(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} differ in length")
    begin = [0] * rank
    end = [INT64_MAX if d == DYN else d for d in src]
    strides = [1] * rank
    for axis, start, stop, step in zip(norm_axes(axes, rank), starts, ends, steps):
        size = src[axis]
        if step == 0:
            raise n.error(f"step of axis {axis} is 0")
        if size == DYN:
            raise n.error(f"slicing dynamic axis {axis} of {fmt(src)} is unsupported")
        start += size if start < 0 else 0
        stop += size if stop < 0 else 0
        if step > 0:
            begin[axis], end[axis] = _clamp(start, 0, size), _clamp(stop, 0, size)
        else:
            begin[axis], end[axis] = _clamp(start, 0, size - 1), _clamp(stop, -1, size - 1)
        strides[axis] = step
    props = {"begin": ints(begin), "end": ints(end), "strides": ints(strides)}
    return [n.emit(ag.StridedSliceOp, [x], props)]


def _symbolic_slice(n: Node, x: SSAValue) -> SSAValue:
    """A Slice whose starts or ends the graph computes from dynamic dims: a StridedSliceV2
    reading them at run time, its type the dims the symbols prove (position ids sliced
    to the sequence length: [1, sequence])."""
    src = n.dims(0)
    assert src is not None
    count = shape(n.x(1))[0] if len(shape(n.x(1))) == 1 else DYN
    if count == DYN:
        raise n.error(f"starts must be a 1-D tensor of known length, not {fmt(shape(n.x(1)))}")
    axes = n.ints(3, "axes") or list(range(count))
    steps = n.ints(4, "steps") or [1] * count
    if not len(axes) == len(steps) == count:
        raise n.error(f"starts, ends, axes {axes} and steps {steps} differ in length")
    norm_axes(axes, len(src))
    if 0 in steps:
        raise n.error(f"steps {steps} hold a 0")
    dims = symbolic.known(n.importer.tracer.slice_dims(n.proto, src) or (None,) * len(src))
    operands = [x, n.x(1), n.x(2), n.const(np.array(axes, np.int64), "axes"), n.const(np.array(steps, np.int64), "steps")]
    return n.emit(ag.StridedSliceV2Op, operands, {"dims": ints(dims)})


@converts(Gather=13)
def _gather(n: Node) -> Outputs:
    """Constant indices are checked against the axis here: out of range, ONNX says the
    result is an error, and an error found at import names the node."""
    x, axis = n.x(0), n.attr("axis", 0)
    indices = n.importer.array_of(n.x(1))
    if indices is not None and shape(x) and indices.size:
        dim = shape(x)[norm_axis(axis, len(shape(x)))]
        wrong = indices[(indices < -dim) | (indices >= dim)] if dim != DYN else indices.reshape(-1)[:0]
        if wrong.size:
            raise n.error(f"index {int(wrong.reshape(-1)[0])} is out of range for axis {axis} of size {dim}")
    return [n.emit(ag.GatherOp, [x, n.x(1)], {"axis": int_attr(axis)})]


@converts(GatherElements=13)
def _gather_elements(n: Node) -> Outputs:
    return [n.emit(ag.GatherElementsOp, [n.x(0), n.x(1)], {"axis": int_attr(n.attr("axis", 0))})]


@converts(Pad=25)
def _pad(n: Node) -> Outputs:
    x = n.x(0)
    rank = len(shape(x))
    mode = n.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise n.error(f"mode '{mode}' is unsupported; supported: constant, reflect, edge, wrap")
    pads = n.ints(1, "pads")
    if pads is None:
        raise n.error("pads are missing")
    value = n.scalar_input(2, "constant_value") or 0.0
    axes = norm_axes(n.ints(3, "axes") or range(rank), rank)
    if len(pads) != 2 * len(axes):
        raise n.error(f"pads {pads} need {2 * len(axes)} values (begin and end per axis)")
    paddings = [0] * (2 * rank)
    for j, axis in enumerate(axes):
        paddings[2 * axis], paddings[2 * axis + 1] = pads[j], pads[j + len(axes)]
    props = {"paddings": ints(paddings), "mode": StringAttr(mode), "constant_value": float_attr(value)}
    return [n.emit(ag.PadOp, [x], props)]


_RESIZE_COORDINATES = (
    "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize",
)
_RESIZE_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


@converts(Resize=19)
def _resize(n: Node) -> Outputs:
    """Explicit output sizes and per-dim scales, as ONNX derives one from the other."""
    x = n.x(0)
    src = shape(x)
    rank = len(src)
    mode = n.attr("mode", "nearest")
    coordinates = n.attr("coordinate_transformation_mode", "half_pixel")
    nearest = n.attr("nearest_mode", "round_prefer_floor")
    if coordinates not in _RESIZE_COORDINATES:
        raise n.error(f"coordinate_transformation_mode '{coordinates}' is unknown")
    if mode not in ("nearest", "linear", "cubic"):
        raise n.error(f"mode '{mode}' is not nearest, linear or cubic")
    if nearest not in _RESIZE_NEAREST:
        raise n.error(f"nearest_mode '{nearest}' is unknown")
    axes = norm_axes(n.attr("axes", range(rank)), rank)
    scales_in = n.array(2, "scales")
    sizes_in = n.ints(3, "sizes")
    sizes, scales = list(src), [1.0] * rank
    if sizes_in:
        policy = n.attr("keep_aspect_ratio_policy", "stretch")
        if policy not in ("stretch", "not_larger", "not_smaller"):
            raise n.error(f"keep_aspect_ratio_policy '{policy}' is not stretch, not_larger or not_smaller")
        if len(sizes_in) != len(axes):
            raise n.error(f"sizes {sizes_in} need {len(axes)} values")
        if any(src[axis] == DYN for axis in axes):
            raise n.error(f"resizing dynamic axes of {fmt(src)} is unsupported")
        ratios = [size / src[axis] for axis, size in zip(axes, sizes_in)]
        for axis, size, ratio in zip(axes, sizes_in, ratios):
            if policy == "stretch":
                sizes[axis], scales[axis] = size, ratio
                continue
            # one scale for every axis, the output rounded half up, as ONNX says
            scale = min(ratios) if policy == "not_larger" else max(ratios)
            sizes[axis], scales[axis] = int(scale * src[axis] + 0.5), scale
    elif scales_in is not None and scales_in.size:
        factors = [float(s) for s in scales_in.reshape(-1)]
        if len(factors) != len(axes):
            raise n.error(f"scales {factors} need {len(axes)} values")
        for axis, factor in zip(axes, factors):
            if factor <= 0:
                raise n.error(f"scale {factor} of axis {axis} is not positive")
            if factor != 1.0 and src[axis] == DYN:
                raise n.error(f"resizing dynamic axis {axis} of {fmt(src)} is unsupported")
            sizes[axis] = src[axis] if factor == 1.0 else math.floor(src[axis] * factor)
            scales[axis] = factor
    else:
        raise n.error("neither scales nor sizes are given")
    props = {
        "sizes": ints(sizes),
        "scales": DenseArrayBase.from_list(f64, scales),
        "mode": StringAttr(mode),
        "coordinate_transformation_mode": StringAttr(coordinates),
        "nearest_mode": StringAttr(nearest),
        "cubic_coeff_a": float_attr(n.attr("cubic_coeff_a", -0.75)),
        "exclude_outside": bool_attr(n.attr("exclude_outside", 0)),
        "extrapolation_value": float_attr(n.attr("extrapolation_value", 0.0)),
    }
    if n.attr("antialias", 0) and mode != "nearest":
        props["antialias"] = bool_attr(True)
    if coordinates == "tf_crop_and_resize":
        props["roi"] = DenseArrayBase.from_list(f64, _resize_roi(n, axes, rank))
    return [n.emit(ag.ResizeOp, [x], props)]


def _resize_roi(n: Node, axes: Sequence[int], rank: int) -> list[float]:
    """tf_crop_and_resize's crop box over every dim (starts, then ends): the roi input
    gives it for `axes`, the other dims keep their whole extent [0, 1]."""
    roi = n.array(1, "roi")
    if roi is None or not roi.size:
        raise n.error("coordinate_transformation_mode tf_crop_and_resize needs the roi input")
    given = [float(v) for v in roi.reshape(-1)]
    if len(given) != 2 * len(axes):
        raise n.error(f"roi {given} needs {2 * len(axes)} values (the starts, then the ends, of axes {list(axes)})")
    box = [0.0] * rank + [1.0] * rank
    for j, axis in enumerate(axes):
        box[axis], box[rank + axis] = given[j], given[len(axes) + j]
    return box


@converts(Expand=13)
def _expand(n: Node) -> Outputs:
    """A target dim the graph computes from dynamic dims is 1 (the input's dim is kept)
    where the symbols prove it equal to the input's dim there."""
    x = n.x(0)
    target, src = n.exprs(1), n.dims(0)
    if n.importer.constant_value(n.proto.input[1]) is None and target is not None and src is not None:
        lead = len(target) - len(src)
        kept = all(e.constant is not None or (i >= lead and e == src[i - lead]) for i, e in enumerate(target))
        if kept:
            sizes = [1 if e.constant is None else e.constant for e in target]
            return [n.emit(ag.ExpandOp, [x], {"shape": ints(sizes)})]
        if any(e.constant is None for e in target):
            dims = symbolic.known(symbolic.broadcast(src, target))
            return [n.emit(ag.BroadcastToOp, [x, n.x(1)], {"dims": ints(dims)})]
    return [n.emit(ag.ExpandOp, [x], {"shape": ints(n.ints(1, "shape") or [])})]


@converts(Tile=13)
def _tile(n: Node) -> Outputs:
    return [n.emit(ag.TileOp, [n.x(0)], {"multiples": ints(n.ints(1, "repeats") or [])})]


def _nchw(n: Node) -> SSAValue:
    """The 4-D input of a block op, whose blocksize must be positive."""
    x = n.x(0)
    if len(shape(x)) != 4:
        raise n.error(f"the input must be 4-D NCHW, got {fmt(shape(x))}")
    if n.attr("blocksize") < 1:
        raise n.error(f"blocksize {n.attr('blocksize')} must be >= 1")
    return x


@converts(DepthToSpace=13)
def _depth_to_space(n: Node) -> Outputs:
    x = _nchw(n)
    props = {"block_size": int_attr(n.attr("blocksize")), "mode": StringAttr(n.attr("mode", "DCR"))}
    if props["mode"].data not in ("DCR", "CRD"):
        raise n.error(f"mode '{props['mode'].data}' is not DCR or CRD")
    return [n.emit(ag.DepthToSpaceOp, [x], props)]


@converts(SpaceToDepth=13)
def _space_to_depth(n: Node) -> Outputs:
    return [n.emit(ag.SpaceToDepthOp, [_nchw(n)], {"block_size": int_attr(n.attr("blocksize"))})]


# ------------------------------------------------------ shape computations and constants


@converts(Shape=25)
def _shape(n: Node) -> Outputs:
    """The input's dims from `start` to `end` (python slicing, as ONNX clamps them): a
    constant when they are static, else a Shape op (sliced when they are not all)."""
    x = n.x(0)
    src = shape(x)
    picked = range(len(src))[n.attr("start", 0): n.attr("end", len(src))]
    if is_static([src[i] for i in picked]):
        return [n.const(np.array([src[i] for i in picked], np.int64))]
    dims = n.emit(ag.ShapeOp, [x], tag=None if len(picked) == len(src) else "shape")
    if len(picked) == len(src):
        return [dims]
    bounds = {"begin": ints([picked.start]), "end": ints([picked.stop]), "strides": ints([1])}
    return [n.emit(ag.StridedSliceOp, [dims], bounds)]


@converts(Size=25)
def _size(n: Node) -> Outputs:
    src = shape(n.x(0))
    if not is_static(src):
        raise n.error(f"the input's shape {fmt(src)} is dynamic, so Size cannot be computed at import")
    return [n.const(np.array(numel(src), np.int64))]


@converts(ConstantOfShape=25)
def _constant_of_shape(n: Node) -> Outputs:
    """A small result is a constant; a large one broadcasts a scalar constant."""
    dims = n.ints(0, "shape") or []
    if any(d < 0 for d in dims):
        raise n.error(f"shape {dims} has a negative dim")
    fill = n.attr("value")
    value = tensor_array(fill, "attribute 'value'") if fill is not None else np.zeros(1, np.float32)
    if value.size != 1:
        raise n.error(f"attribute 'value' must hold one element, got {value.size}")
    if numel(dims) <= INLINE_LIMIT:
        return [n.const(np.full(dims, value.reshape(-1)[0], value.dtype))]
    scalar = n.const(value.reshape(()), "value")
    return [n.emit(ag.ExpandOp, [scalar], {"shape": ints(dims)})]


@converts(Range=27)
def _range(n: Node) -> Outputs:
    """start + i * delta for i < max(ceil((limit - start) / delta), 0); bounds the graph
    computes from dynamic dims are a Range op's, read at run time."""
    if n.computed(0, 1, 2):
        bounds = [n.x(i) for i in range(3)]
        if any(shape(b) != () for b in bounds):
            raise n.error(f"start, limit and delta must be scalars, not {', '.join(fmt(shape(b)) for b in bounds)}")
        return [n.emit(ag.RangeOp, bounds)]
    arrays = [n.array(i, what) for i, what in enumerate(("start", "limit", "delta"))]
    if any(a is None or a.size != 1 for a in arrays):
        raise n.error("start, limit and delta must be scalars")
    out_dtype = arrays[0].dtype
    start, limit, delta = (a.reshape(-1)[0].item() for a in arrays)
    if delta == 0:
        raise n.error("delta is 0")
    if out_dtype.kind in "iu":
        count = max(-((start - limit) // delta), 0)
    else:
        steps = (limit - start) / delta
        if not math.isfinite(steps):
            raise n.error(f"start {start}, limit {limit} and delta {delta} give no finite number of values")
        count = max(math.ceil(steps), 0)
    check_folded([count], out_dtype.itemsize, "its result")
    kind = np.int64 if out_dtype.kind in "iu" else np.float64
    values = start + np.arange(count, dtype=kind) * delta
    return [n.const(values.astype(out_dtype))]


@converts(EyeLike=22)
def _eye_like(n: Node) -> Outputs:
    x = n.x(0)
    src = shape(x)
    if len(src) != 2 or not is_static(src):
        raise n.error(f"the input must be 2-D and static, got {fmt(src)}")
    target = element_type(n.attr("dtype"), "attribute 'dtype'") if n.attr("dtype") is not None else dtype(x)
    check_folded(src, dtypes.to_numpy(target).itemsize, "its result")
    return [n.const(np.eye(src[0], src[1], n.attr("k", 0), dtypes.to_numpy(target)))]


@converts(Constant=25)
def _constant(n: Node) -> Outputs:
    """A `value` tensor is a weight (named after the output, which the store reloads);
    the other forms are always inline."""
    if len(n.attrs) != 1:
        raise n.error(f"needs exactly one value attribute, got {sorted(n.attrs)}")
    key, value = next(iter(n.attrs.items()))
    output = n.proto.output[0]
    if key == "value":
        array = tensor_array(value, "attribute 'value'")
        return [n.importer.constant(array, n.name, weight=output)]
    if key == "sparse_value":
        return [n.const(sparse_array(value, "attribute 'sparse_value'"))]
    plain = {
        "value_float": np.float32, "value_floats": np.float32, "value_int": np.int64, "value_ints": np.int64,
    }
    if key not in plain:
        raise n.error(f"attribute '{key}' is unsupported (string constants have no element type here)")
    return [n.const(np.array(value, plain[key]))]


# -------------------------------------------------------------- indexing and signal ops


@converts(GatherND=13)
def _gather_nd(n: Node) -> Outputs:
    return [n.emit(ag.GatherNdOp, [n.x(0), n.x(1)], {"batch_dims": int_attr(n.attr("batch_dims", 0))})]


def _scatter_reduction(n: Node) -> StringAttr:
    """The reductions of the node's schema: none only before version 16, add and mul
    from 16, max and min from 18."""
    allowed = ("none", "add", "mul", "max", "min")[: 5 if n.since >= 18 else 3 if n.since >= 16 else 1]
    reduction = n.attr("reduction", "none")
    if reduction not in allowed:
        raise n.error(f"reduction {reduction!r} is not one of {', '.join(allowed)} (version {n.since})")
    return StringAttr(reduction)


@converts(ScatterND=18)
def _scatter_nd(n: Node) -> Outputs:
    return [n.emit(ag.ScatterNdUpdateOp, [n.x(0), n.x(1), n.x(2)], {"reduction": _scatter_reduction(n)})]


@converts(ScatterElements=18)
def _scatter_elements(n: Node) -> Outputs:
    props = {"axis": int_attr(n.attr("axis", 0)), "reduction": _scatter_reduction(n)}
    return [n.emit(ag.ScatterElementsOp, [n.x(0), n.x(1), n.x(2)], props)]


@converts(TensorScatter=24)
def _tensor_scatter(n: Node) -> Outputs:
    mode = n.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise n.error(f"mode {mode!r} is not linear or circular")
    operands = [n.x(0), n.x(1), *([n.x(2)] if n.has(2) else [])]
    props = {"axis": int_attr(n.attr("axis", -2)), "mode": StringAttr(mode)}
    return [n.emit(ag.TensorScatterOp, operands, props)]


@converts(ReverseSequence=10)
def _reverse_sequence(n: Node) -> Outputs:
    props = {"batch_dim": int_attr(n.attr("batch_axis", 1)), "seq_dim": int_attr(n.attr("time_axis", 0))}
    return [n.emit(ag.ReverseSequenceOp, [n.x(0), n.x(1)], props)]


def _positive_int(n: Node, i: int, what: str) -> int | None:
    value = n.scalar_input(i, what)
    if value is None:
        return None
    if not isinstance(value, int) or value < 1:
        raise n.error(f"input {i} ({what}) must be a positive integer, got {value}")
    return value


@converts(DFT=20)
def _dft(n: Node) -> Outputs:
    """DFT-17 has `axis` as an attribute (default 1), DFT-20 as input 2 (default -2);
    a negative axis counts from the end, the (re, im) dim included, as ONNX's reference does."""
    x = n.x(0)
    rank = len(shape(x))
    axis = n.attr("axis", 1) if n.since < 20 else n.scalar_input(2, "axis")
    axis = -2 if axis is None else int(axis)
    if not -rank <= axis <= rank - 2 or axis == -1:
        raise n.error(f"axis {axis} of the rank-{rank} input is not in [-{rank}, -2] or [0, {rank - 2}] (the last dim is (re, im))")
    axis %= rank
    inverse, onesided = bool(n.attr("inverse", 0)), bool(n.attr("onesided", 0))
    length = _positive_int(n, 1, "dft_length")
    if length is None:
        dim = shape(x)[axis]
        if dim == DYN:
            raise n.error(f"the signal dim {axis} is dynamic and no dft_length is given")
        length = 2 * (dim - 1) if inverse and onesided else dim
    props = {"axis": int_attr(axis), "length": int_attr(length), "inverse": bool_attr(inverse), "onesided": bool_attr(onesided)}
    return [n.emit(ag.DFTOp, [x], props)]


@converts(STFT=17)
def _stft(n: Node) -> Outputs:
    """frame_length defaults to the window's length, else to the whole signal."""
    x, window = n.x(0), n.opt(2)
    step = _positive_int(n, 1, "frame_step")
    if step is None:
        raise n.error("input 1 (frame_step) is required")
    length = _positive_int(n, 3, "frame_length")
    if length is None:
        length = shape(window)[0] if window is not None else shape(x)[1] if len(shape(x)) == 3 else DYN
    if length == DYN:
        raise n.error("the frame length is unknown: give frame_length, a static window or a static signal")
    props = {"frame_step": int_attr(step), "frame_length": int_attr(length), "onesided": bool_attr(n.attr("onesided", 1))}
    return [n.emit(ag.STFTOp, [x, *([window] if window is not None else [])], props)]


def _folded(n: Node, values: np.ndarray) -> Outputs:
    """A computed constant in the node's `output_datatype` (float32 by default), inline
    as Range's and EyeLike's are: no weight file could reload it."""
    target = dtypes.to_numpy(element_type(n.attr("output_datatype", onnx.TensorProto.FLOAT), "attribute 'output_datatype'"))
    return [n.const(values.astype(target))]


_WINDOWS: dict[str, tuple[float, ...]] = {
    "HannWindow": (0.5, -0.5), "HammingWindow": (25 / 46, -21 / 46), "BlackmanWindow": (0.42, -0.5, 0.08),
}
"""Each window's cosine series: w[k] = sum_j a_j cos(2 pi j k / N)."""


@converts(HannWindow=17, HammingWindow=17, BlackmanWindow=17)
def _window_op(n: Node) -> Outputs:
    """Folded at import: the window is a constant of its size. N is the size when
    `periodic`, else the size - 1 (a symmetric window; N = 1 for a single point)."""
    size = n.scalar_input(0, "size")
    if not isinstance(size, int) or size < 0:
        raise n.error(f"input 0 (size) must be a non-negative integer, got {size}")
    check_folded([size], 8, "its result")
    period = size if n.attr("periodic", 1) else max(size - 1, 1)
    phase = 2 * np.pi * np.arange(size) / period
    values = sum(a * np.cos(j * phase) for j, a in enumerate(_WINDOWS[n.op_type]))
    return _folded(n, np.asarray(values, np.float64))


def _mel(hertz: np.ndarray | float) -> np.ndarray:
    return 2595 * np.log10(1 + np.asarray(hertz) / 700)


@converts(MelWeightMatrix=17)
def _mel_weight_matrix(n: Node) -> Outputs:
    """Folded at import: [dft_length / 2 + 1, num_mel_bins] triangular filters, their
    edges num_mel_bins + 2 points evenly spaced in mel from lower_edge_hertz, with the
    step (upper - lower) / (num_mel_bins + 2) and rounded down to spectrogram bins, as
    ONNX's reference (which made the backend test) computes them."""
    bins, dft_length, rate = (_positive_int(n, i, what) for i, what in enumerate(("num_mel_bins", "dft_length", "sample_rate")))
    low, high = (n.scalar_input(i, what) for i, what in ((3, "lower_edge_hertz"), (4, "upper_edge_hertz")))
    if None in (bins, dft_length, rate, low, high):
        raise n.error("num_mel_bins, dft_length, sample_rate, lower_edge_hertz and upper_edge_hertz are all required")
    assert bins is not None and dft_length is not None and rate is not None
    check_folded([dft_length // 2 + 1, bins], 8, "its result")
    step = (_mel(high) - _mel(low)) / (bins + 2)
    hertz = 700 * (10 ** ((_mel(low) + step * np.arange(bins + 2)) / 2595) - 1)
    edges = ((dft_length + 1) * hertz // rate).astype(np.int64)
    k = np.arange(dft_length // 2 + 1)[:, None]
    left, center, right = edges[:-2], edges[1:-1], edges[2:]
    rising = np.where(center > left, (k - left) / np.maximum(center - left, 1), k == center)
    falling = (right - k) / np.maximum(right - center, 1)
    values = np.where((k >= left) & (k <= center), rising, 0.0)
    values = np.where((k > center) & (k < right), falling, values)
    return _folded(n, values)


# ------------------------------------------------------------ losses and normalisations


def _loss_props(n: Node) -> dict[str, Attribute]:
    reduction = n.attr("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise n.error(f"reduction '{reduction}' is not none, sum or mean")
    props: dict[str, Attribute] = {"reduction": StringAttr(reduction)}
    if n.attr("ignore_index") is not None:
        props["ignore_index"] = int_attr(n.attr("ignore_index"))
    return props


def _loss_operands(n: Node) -> list[SSAValue]:
    return [n.x(0), n.x(1)] + ([n.x(2)] if n.has(2) else [])


@converts(NegativeLogLikelihoodLoss=22)
def _nll_loss(n: Node) -> Outputs:
    """Schemas 13 and 22 only add element types to 12."""
    return [n.emit(ag.NLLLossOp, _loss_operands(n), _loss_props(n))]


@converts(SoftmaxCrossEntropyLoss=13)
def _softmax_cross_entropy_loss(n: Node) -> Outputs:
    """One op for both outputs: log_prob is its second result (schema 13 only adds
    element types to 12)."""
    loss, log_prob = n.emit_all(ag.SoftmaxCrossEntropyLossOp, _loss_operands(n), _loss_props(n))
    return [loss, log_prob if n.used(1) else None]


def _float_stash(n: Node) -> None:
    """stash_type FLOAT (the default) is what our kernels do: the statistics of a
    float16/bfloat16 input in float32; any other stash type is refused."""
    stash = n.attr("stash_type", onnx.TensorProto.FLOAT)
    if stash != onnx.TensorProto.FLOAT:
        raise n.error(f"stash_type {stash} is unsupported; only 1 (FLOAT, the default) is")


@converts(RMSNormalization=23)
def _rms_normalization(n: Node) -> Outputs:
    _float_stash(n)
    if dtype(n.x(0)) != dtype(n.x(1)):
        raise n.error(f"X is {dtype(n.x(0))} and scale {dtype(n.x(1))}; only a scale of X's type is supported")
    props = {"begin_norm_axis": int_attr(n.attr("axis", -1)), "epsilon": float_attr(n.attr("epsilon", 1e-5))}
    return [n.emit(ag.RmsNormOp, [n.x(0), n.x(1)], props)]


@converts(LpNormalization=22)
def _lp_normalization(n: Node) -> Outputs:
    """x / LpNorm(x) over `axis`: GE's LpNorm computes the norm, a DivNoNan applies
    it, so that a zero vector stays zero as in ONNX's reference and onnxruntime
    (schema 22 only adds bfloat16 to 1)."""
    x, p = n.x(0), n.attr("p", 2)
    if p not in (1, 2):
        raise n.error(f"p {p} is unsupported; only 1 and 2 are")
    props = {"axes": ints([n.attr("axis", -1)]), "keep_dims": bool_attr(True), "p": int_attr(p)}
    norm = n.emit(ag.LpNormOp, [x], props, "norm")
    return [n.emit(ag.DivNoNanOp, [x, norm])]


@converts(GroupNormalization=21)
def _group_normalization(n: Node) -> Outputs:
    """Schema 21 scales and shifts per channel. Schema 18 (opsets 18 to 20) did so per
    group; ONNX deprecated it, and its checker refuses it, so it is refused here
    first, with that reason."""
    x = n.x(0)
    groups = n.attr("num_groups")
    if n.since < 21:
        raise n.error("GroupNormalization-18 (scale and bias per group) is deprecated and ONNX's checker refuses it; "
                      "opset 21 and later (per channel) is supported")
    _float_stash(n)
    if len(shape(x)) < 2:
        raise n.error(f"the input must have rank >= 2 ([N, C, ...]), got {fmt(shape(x))}")
    channels = shape(x)[1]
    if groups < 1 or channels == DYN or channels % groups:
        raise n.error(f"the {fmt(shape(x)[1:2])} channels do not split into num_groups {groups}")
    props = {"num_groups": int_attr(groups), "epsilon": float_attr(n.attr("epsilon", 1e-5))}
    return [n.emit(ag.GroupNormOp, [x, n.x(1), n.x(2)], props)]


@converts(MeanVarianceNormalization=13)
def _mean_variance_normalization(n: Node) -> Outputs:
    """ONNX fixes epsilon at 1e-9 (schema 13 only adds bfloat16 to 9)."""
    props = {"axes": ints(n.attr("axes", [0, 2, 3])), "eps": float_attr(1e-9)}
    return [n.emit(ag.MVNV2Op, [n.x(0)], props)]


@converts(LRN=13)
def _lrn(n: Node) -> Outputs:
    """Schema 13 only adds bfloat16 to 1."""
    props = {
        "size": int_attr(n.attr("size")),
        "alpha": float_attr(n.attr("alpha", 1e-4)),
        "beta": float_attr(n.attr("beta", 0.75)),
        "bias": float_attr(n.attr("bias", 1.0)),
    }
    return [n.emit(ag.LRNOp, [n.x(0)], props)]


# -------------------------------------------------------------------------- spatial ops


def _pairs(pads: Sequence[tuple[int, int]]) -> list[int]:
    """(before, after) per axis, flattened as the dialect's window ops take them."""
    return [v for pair in pads for v in pair]


def _transpose_pads(
    n: Node, sizes: Shape, kernel: Sequence[int], strides: list[int], dilations: list[int], extra: list[int]
) -> list[tuple[int, int]]:
    """ConvTranspose's (begin, end) pads: explicit, or split from the total that makes
    the output `output_shape` (by default, with SAME_*, input * stride); SAME_UPPER puts
    the odd cell at the end, otherwise at the beginning. A negative end pad grows
    `extra` (output_padding) instead."""
    k = len(kernel)
    auto_pad = n.attr("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise n.error(f"auto_pad '{auto_pad}' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER")
    wanted = n.attr("output_shape")
    if wanted is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        wanted = [d * s for d, s in zip(sizes, strides)]
    if wanted is None:
        if auto_pad == "VALID":
            return [(0, 0)] * k
        pads = list(n.attr("pads", [0] * 2 * k))
        if len(pads) != 2 * k:
            raise n.error(f"pads {pads} need {2 * k} values")
        return [(pads[i], pads[i + k]) for i in range(k)]
    wanted = list(wanted)[-k:]
    if len(wanted) != k or not is_static(sizes):
        raise n.error(f"output_shape {list(n.attr('output_shape', []))} needs {k} spatial sizes and a static input {fmt(sizes)}")
    result = []
    for i, (d, kk, s, dl, out) in enumerate(zip(sizes, kernel, strides, dilations, wanted)):
        total = s * (d - 1) + extra[i] + (kk - 1) * dl + 1 - out
        begin, end = (total // 2, total - total // 2) if auto_pad == "SAME_UPPER" else (total - total // 2, total // 2)
        if begin < 0:
            raise n.error(f"output_shape {wanted} is larger than the transposed convolution can produce on axis {i}")
        if end < 0:
            extra[i], end = extra[i] - end, 0
        result.append((begin, end))
    return result


@converts(ConvTranspose=22)
def _conv_transpose(n: Node) -> Outputs:
    """1-D runs as 2-D of height 1 (as Conv does); 2-D is Conv2DTranspose, 3-D Conv3DTranspose."""
    x, w, b = n.x(0), n.x(1), n.opt(2)
    rank = len(shape(x))
    if rank not in (3, 4, 5):
        raise n.error(f"only 1-D, 2-D and 3-D ConvTranspose is supported; the input has shape {fmt(shape(x))}")
    spatial = rank - 2
    kernel = shape(w)[2:]
    if len(shape(w)) != rank or not is_static(kernel):
        raise n.error(f"filter shape {fmt(shape(w))} does not match a {spatial}-D transposed convolution")
    declared = n.attr("kernel_shape")
    if declared is not None and tuple(declared) != kernel:
        raise n.error(f"kernel_shape {list(declared)} differs from the filter's {list(kernel)}")
    strides = list(n.attr("strides", [1] * spatial))
    dilations = list(n.attr("dilations", [1] * spatial))
    extra = list(n.attr("output_padding", [0] * spatial))
    if not len(strides) == len(dilations) == len(extra) == spatial:
        raise n.error(f"strides {strides}, dilations {dilations} and output_padding {extra} need {spatial} values each")
    pads = _transpose_pads(n, shape(x)[2:], kernel, strides, dilations, extra)
    if spatial == 1:
        x, w = _unsqueeze_h(n, x, "unsqueeze"), _unsqueeze_h(n, w, "unsqueeze_filter")
        strides, dilations, extra, pads = [1, *strides], [1, *dilations], [0, *extra], [(0, 0), *pads]
    props = {
        "strides": ints([1, 1, *strides]),
        "pads": ints(_pairs(pads)),
        "dilations": ints([1, 1, *dilations]),
        "output_padding": ints([0, 0, *extra]),
        "groups": int_attr(n.attr("group", 1)),
    }
    cls = ag.Conv3DTransposeOp if spatial == 3 else ag.Conv2DTransposeOp
    operands = [x, w] + ([b] if b is not None else [])
    if spatial == 1:
        return [_squeeze_h(n, n.emit(cls, operands, props, "conv2d_transpose"))]
    return [n.emit(cls, operands, props)]


def _conv3d(n: Node, x: SSAValue, w: SSAValue, b: SSAValue | None) -> SSAValue:
    kernel = shape(w)[2:]
    if len(kernel) != 3 or not is_static(kernel):
        raise n.error(f"filter shape {fmt(shape(w))} does not match a 3-D convolution")
    declared = n.attr("kernel_shape")
    if declared is not None and tuple(declared) != kernel:
        raise n.error(f"kernel_shape {list(declared)} differs from the filter's {list(kernel)}")
    strides, dilations, pads = _window(n, shape(x)[2:], kernel)
    props = {
        "strides": ints([1, 1, *strides]),
        "pads": ints(_pairs(pads)),
        "dilations": ints([1, 1, *dilations]),
        "groups": int_attr(n.attr("group", 1)),
    }
    return n.emit(ag.Conv3DOp, [x, w] + ([b] if b is not None else []), props)


def _pool3d(n: Node, x: SSAValue) -> SSAValue:
    kernel = tuple(n.attr("kernel_shape"))
    if len(kernel) != 3:
        raise n.error(f"kernel_shape {list(kernel)} does not match a 3-D pooling")
    strides, dilations, pads = _window(n, shape(x)[2:], kernel)
    props: dict[str, Attribute] = {
        "ksize": ints(kernel), "strides": ints(strides), "pads": ints(_pairs(pads)), "dilations": ints(dilations),
        "ceil_mode": bool_attr(n.attr("ceil_mode", 0)),
    }
    if n.op_type == "MaxPool":
        return n.emit(ag.MaxPool3DOp, [x], props)
    props["exclusive"] = bool_attr(not n.attr("count_include_pad", 0))
    return n.emit(ag.AvgPool3DOp, [x], props)


def _max_pool_with_argmax(n: Node, x: SSAValue) -> Outputs:
    """MaxPool whose Indices output is used: MaxPoolWithArgmax, 1-D to 3-D."""
    kernel = tuple(n.attr("kernel_shape") or ())
    if len(kernel) not in (1, 2, 3) or len(shape(x)) != len(kernel) + 2:
        raise n.error(f"kernel_shape {list(kernel)} must be 1-D to 3-D and match the input {fmt(shape(x))}")
    strides, dilations, pads = _window(n, shape(x)[2:], kernel)
    props = {
        "ksize": ints(kernel), "strides": ints(strides), "pads": ints(_pairs(pads)), "dilations": ints(dilations),
        "ceil_mode": bool_attr(n.attr("ceil_mode", 0)), "storage_order": int_attr(n.attr("storage_order", 0)),
    }
    return n.emit_all(ag.MaxPoolWithArgmaxOp, [x], props)


@converts(LpPool=22)
def _lp_pool(n: Node) -> Outputs:
    x = n.x(0)
    kernel = tuple(n.attr("kernel_shape") or ())
    if len(kernel) not in (1, 2, 3) or len(shape(x)) != len(kernel) + 2:
        raise n.error(f"kernel_shape {list(kernel)} must be 1-D to 3-D and match the input {fmt(shape(x))}")
    p = n.attr("p", 2)
    if p < 1:
        raise n.error(f"p {p} must be at least 1")
    strides, dilations, pads = _window(n, shape(x)[2:], kernel)
    props = {
        "ksize": ints(kernel), "strides": ints(strides), "pads": ints(_pairs(pads)), "dilations": ints(dilations),
        "ceil_mode": bool_attr(n.attr("ceil_mode", 0)), "p": int_attr(p),
    }
    return [n.emit(ag.LpPoolOp, [x], props)]


@converts(MaxUnpool=22)
def _max_unpool(n: Node) -> Outputs:
    """The output shape is the output_shape input, else what MaxPool's window gives
    back; the indices are flat positions in the output (MaxPool's Indices of the input
    it unpools to), as onnxruntime and PyTorch read them. The node test
    maxunpool_export_with_output_shape expects them in the window's shape padded at
    the end instead: its indices are known to be wrong (onnx/onnx#2398)."""
    x, indices = n.x(0), n.x(1)
    src = shape(x)
    kernel = list(n.attr("kernel_shape") or ())
    k = len(kernel)
    if not k or len(src) != k + 2 or not is_static(src):
        raise n.error(f"kernel_shape {kernel} must match the static input {fmt(src)}")
    strides = list(n.attr("strides", [1] * k))
    pads = list(n.attr("pads", [0] * 2 * k))
    if len(strides) != k or len(pads) != 2 * k:
        raise n.error(f"strides {strides} need {k} values and pads {pads} {2 * k}")
    wanted = n.ints(2, "output_shape")
    if wanted is None:
        wanted = [*src[:2], *((d - 1) * s + kk - pads[i] - pads[i + k] for i, (d, s, kk) in enumerate(zip(src[2:], strides, kernel)))]
    if len(wanted) != len(src) or wanted[:2] != list(src[:2]) or min(wanted) < 1:
        raise n.error(f"output_shape {wanted} must keep the input's N and C {list(src[:2])} and have {len(src)} positive sizes")
    return [n.emit(ag.MaxUnpoolOp, [x, indices], {"output_shape": ints(wanted)})]


_GRID_MODES = {"bilinear": "bilinear", "linear": "bilinear", "nearest": "nearest", "bicubic": "bicubic", "cubic": "bicubic"}


@converts(GridSample=22)
def _grid_sample(n: Node) -> Outputs:
    """GridSample-20 renamed bilinear/bicubic to linear/cubic and allowed 3-D inputs."""
    x, grid = n.x(0), n.x(1)
    rank = len(shape(x))
    names = ("bilinear", "nearest", "bicubic") if n.since < 20 else ("linear", "nearest", "cubic")
    mode = n.attr("mode", names[0])
    if mode not in names:
        raise n.error(f"mode '{mode}' is not {', '.join(names)}")
    padding = n.attr("padding_mode", "zeros")
    if padding not in ("zeros", "border", "reflection"):
        raise n.error(f"padding_mode '{padding}' is not zeros, border or reflection")
    if rank not in (4, 5) or (rank == 5 and n.since < 20):
        raise n.error(f"only 4-D (and from opset 20 5-D) inputs are supported, got {fmt(shape(x))}")
    if rank == 5 and _GRID_MODES[mode] == "bicubic":
        raise n.error("cubic mode is unsupported for 5-D inputs (ONNX allows it on 4-D only)")
    props = {
        "interpolation_mode": StringAttr(_GRID_MODES[mode]),
        "padding_mode": StringAttr(padding),
        "align_corners": bool_attr(n.attr("align_corners", 0)),
    }
    return [n.emit(ag.GridSampler2DOp if rank == 4 else ag.GridSampler3DOp, [x, grid], props)]


@converts(AffineGrid=20)
def _affine_grid(n: Node) -> Outputs:
    size = n.ints(1, "size")
    if size is None or len(size) not in (4, 5):
        raise n.error(f"size {size} must hold 4 (N, C, H, W) or 5 (N, C, D, H, W) values")
    props = {"size": ints(size), "align_corners": bool_attr(n.attr("align_corners", 0))}
    return [n.emit(ag.AffineGridOp, [n.x(0)], props)]


@converts(Col2Im=18)
def _col2im(n: Node) -> Outputs:
    image, block = n.ints(1, "image_shape"), n.ints(2, "block_shape")
    if not image or not block or len(image) != len(block):
        raise n.error(f"image_shape {image} and block_shape {block} must have the same length")
    k = len(block)
    strides = list(n.attr("strides", [1] * k))
    dilations = list(n.attr("dilations", [1] * k))
    pads = list(n.attr("pads", [0] * 2 * k))
    if len(strides) != k or len(dilations) != k or len(pads) != 2 * k:
        raise n.error(f"strides {strides}, dilations {dilations} need {k} values and pads {pads} {2 * k}")
    props = {
        "image_shape": ints(image), "block_shape": ints(block), "strides": ints(strides),
        "pads": ints(_pairs([(pads[i], pads[i + k]) for i in range(k)])), "dilations": ints(dilations),
    }
    return [n.emit(ag.Col2imOp, [n.x(0)], props)]


@converts(CenterCropPad=18)
def _center_crop_pad(n: Node) -> Outputs:
    """A StridedSlice for the axes it crops and a Pad with zeros for those it grows
    (GE has no CenterCropPad op): the crop starts at (size - target) // 2, the padding
    puts (target - size) // 2 before."""
    x = n.x(0)
    src = shape(x)
    rank = len(src)
    target = n.ints(1, "shape") or []
    axes = norm_axes(n.attr("axes", range(rank)), rank)
    if len(target) != len(axes):
        raise n.error(f"shape {target} needs {len(axes)} values, one per axis {list(axes)}")
    if any(src[a] == DYN for a in axes):
        raise n.error(f"cropping or padding dynamic axes of {fmt(src)} is unsupported")
    begin, end, paddings = [0] * rank, list(src), [0] * (2 * rank)
    for axis, size in zip(axes, target):
        if size < src[axis]:
            begin[axis] = (src[axis] - size) // 2
            end[axis] = begin[axis] + size
        elif size > src[axis]:
            paddings[2 * axis] = (size - src[axis]) // 2
            paddings[2 * axis + 1] = size - src[axis] - paddings[2 * axis]
    crop, grow = begin != [0] * rank or end != list(src), any(paddings)
    if not crop and not grow:
        return [_identity(n, x)]
    y = x
    if crop:
        props = {"begin": ints(begin), "end": ints(end), "strides": ints([1] * rank)}
        y = n.emit(ag.StridedSliceOp, [y], props, "crop" if grow else None)
    if grow:
        y = n.emit(ag.PadOp, [y], {"paddings": ints(paddings), "mode": StringAttr("constant"), "constant_value": float_attr(0.0)})
    return [y]


@converts(DeformConv=22)
def _deform_conv(n: Node) -> Outputs:
    """DeformableOffsets then a Conv2D whose stride is the kernel, as GE splits
    DeformableConv2D; a missing mask is all ones."""
    x, w, offsets, b = n.x(0), n.x(1), n.x(2), n.opt(3)
    if len(shape(x)) != 4 or len(shape(w)) != 4:
        raise n.error(f"only 2-D DeformConv is supported; the input has shape {fmt(shape(x))}")
    kernel = shape(w)[2:]
    declared = n.attr("kernel_shape")
    if declared is not None and tuple(declared) != kernel:
        raise n.error(f"kernel_shape {list(declared)} differs from the filter's {list(kernel)}")
    strides, dilations, pads = _window(n, shape(x)[2:], kernel)
    groups = n.attr("offset_group", 1)
    off = shape(offsets)
    mask = n.opt(4)
    if mask is None:
        if not is_static(off):
            raise n.error(f"a missing mask needs static offsets, got {fmt(off)}")
        mask = n.const(np.ones((off[0], off[1] // 2, *off[2:]), dtypes.to_numpy(dtype(x))), "mask")
    props = {
        "ksize": ints(kernel), "strides": ints(strides), "pads": ints(_pairs(pads)), "dilations": ints(dilations),
        "deformable_groups": int_attr(groups),
    }
    sampled = n.emit(ag.DeformableOffsetsOp, [x, offsets, mask], props, "offsets")
    conv = {
        "strides": ints([1, 1, *kernel]), "pads": ints([0, 0, 0, 0]), "dilations": ints([1, 1, 1, 1]),
        "groups": int_attr(n.attr("group", 1)),
    }
    return [n.emit(ag.Conv2DOp, [sampled, w] + ([b] if b is not None else []), conv)]


@converts(RoiAlign=22)
def _roi_align(n: Node) -> Outputs:
    """RoiAlign-16's half_pixel shifts by half a pixel (`aligned`); RoiAlign-10 did not."""
    mode = n.attr("mode", "avg")
    if mode not in ("avg", "max"):
        raise n.error(f"mode '{mode}' is not avg or max")
    transform = n.attr("coordinate_transformation_mode", "half_pixel" if n.since >= 16 else "output_half_pixel")
    if transform not in ("half_pixel", "output_half_pixel"):
        raise n.error(f"coordinate_transformation_mode '{transform}' is not half_pixel or output_half_pixel")
    props = {
        "pooled_height": int_attr(n.attr("output_height", 1)),
        "pooled_width": int_attr(n.attr("output_width", 1)),
        "sample_num": int_attr(n.attr("sampling_ratio", 0)),
        "spatial_scale": float_attr(n.attr("spatial_scale", 1.0)),
        "mode": StringAttr(mode),
        "aligned": bool_attr(transform == "half_pixel"),
    }
    return [n.emit(ag.ROIAlignOp, [n.x(0), n.x(1), n.x(2)], props)]


# ---------------------------------------- attention, rotary embedding, einsum and top-k


def _heads_first(n: Node, x: SSAValue, heads: int, what: str) -> SSAValue:
    """[B, S, N * D] -> [B, N, S, D]: ONNX's 3-D Attention inputs in the fused op's BNSD layout."""
    b, s, hidden = shape(x)
    if hidden == DYN or hidden % heads:
        raise n.error(f"{what} {fmt(shape(x))} does not split into {heads} heads")
    split = n.emit(ag.ReshapeOp, [x], {"shape": ints((b, s, heads, hidden // heads))}, f"{what}_split")
    return n.emit(ag.TransposeOp, [split], {"perm": ints((0, 2, 1, 3))}, f"{what}_bnsd")


@converts(Attention=24)
def _attention(n: Node) -> Outputs:
    """One fused op (FusedInferAttentionScore, BNSD), as GE maps scaled dot-product
    attention. What the fused op does not do is GE's graph around it, as in CANN: a
    3-D Q/K/V is split into heads (Reshape + Transpose) and Y merged back, and the KV
    cache update (past + new -> present) is a ConcatD on the sequence axis."""
    q, k, v = n.x(0), n.x(1), n.x(2)
    ranks = {len(shape(q)), len(shape(k)), len(shape(v))}
    if ranks not in ({3}, {4}):
        raise n.error(f"Q, K and V must all be 3-D or all 4-D, got {fmt(shape(q))}, {fmt(shape(k))}, {fmt(shape(v))}")
    three_d = ranks == {3}
    if three_d:
        heads, kv_heads = n.attr("q_num_heads"), n.attr("kv_num_heads")
        if not heads or not kv_heads:
            raise n.error("3-D Q, K and V need the q_num_heads and kv_num_heads attributes")
        q, k, v = (_heads_first(n, x, h, what) for x, h, what in ((q, heads, "q"), (k, kv_heads, "k"), (v, kv_heads, "v")))
    heads, kv_heads = shape(q)[1], shape(k)[1]
    if n.has(4) != n.has(5):
        raise n.error("past_key and past_value must be given together")
    if n.has(6) and n.has(4):
        raise n.error("nonpad_kv_seqlen cannot be combined with past_key/past_value (ONNX's two KV cache uses)")
    precision = n.attr("softmax_precision")
    if precision is not None and precision not in (onnx.TensorProto.FLOAT, helper.np_dtype_to_tensor_dtype(dtypes.to_numpy(dtype(q)))):
        raise n.error(f"softmax_precision {precision} is unsupported: the softmax runs in float32 or the inputs' dtype")
    past = 0
    if n.has(4):
        if len(shape(n.x(4))) != 4 or len(shape(n.x(5))) != 4:
            raise n.error(f"past_key {fmt(shape(n.x(4)))} and past_value {fmt(shape(n.x(5)))} must be 4-D")
        past = shape(n.x(4))[2]
        k = n.emit(ag.ConcatOp, [n.x(4), k], {"concat_dim": int_attr(2)}, "present_key")
        v = n.emit(ag.ConcatOp, [n.x(5), v], {"concat_dim": int_attr(2)}, "present_value")
    if n.attr("is_causal", 0) and past == DYN:
        raise n.error("is_causal with a past_key of unknown length is unsupported")
    head_size = shape(q)[3]
    if n.attr("scale") is None and head_size == DYN:
        raise n.error("the default scale 1/sqrt(head_size) needs a static head size; give the scale attribute")
    props: dict[str, Attribute] = {
        "num_heads": int_attr(heads),
        "num_key_value_heads": int_attr(kv_heads),
        "scale": float_attr(n.attr("scale", 1.0 / math.sqrt(head_size))),
    }
    if n.attr("softcap", 0.0) > 0:
        props["softcap"] = float_attr(n.attr("softcap"))
    if n.attr("is_causal", 0):
        props["next_tokens"] = int_attr(past)
    if n.used(3):
        props["qk_output_mode"] = int_attr(n.attr("qk_matmul_output_mode", 0))
    operands = [q, k, v] + [n.x(i) for i in (3, 6) if n.has(i)]
    results = n.emit_all(ag.FusedInferAttentionScoreOp, operands, props, "attention" if three_d else None)
    y = results[0]
    if three_d:
        b, _, s, dv = shape(y)
        merged = n.emit(ag.TransposeOp, [y], {"perm": ints((0, 2, 1, 3))}, "y_bsnd")
        y = n.emit(ag.ReshapeOp, [merged], {"shape": ints((b, s, heads * dv))})
    present = [
        (x if n.has(4) else n.emit(ag.IdentityOp, [x], tag=tag)) if n.used(i) else None
        for i, x, tag in ((1, k, "present_key"), (2, v, "present_value"))
    ]
    return [y, *present, results[1] if n.used(3) else None]


@converts(RotaryEmbedding=23)
def _rotary_embedding(n: Node) -> Outputs:
    """RotaryPositionEmbedding on the cos/sin rows of the positions: with position_ids,
    those rows are gathered from the caches first (GatherV2), as GE does before the
    fused kernel."""
    x, cos, sin = n.x(0), n.x(1), n.x(2)
    if n.has(3):
        axis = {"axis": int_attr(0)}
        cos = n.emit(ag.GatherOp, [cos, n.x(3)], axis, "cos")
        sin = n.emit(ag.GatherOp, [sin, n.x(3)], axis, "sin")
    rank = len(shape(x))
    if rank not in (3, 4):
        raise n.error(f"input must be 3-D [batch, sequence, hidden] or 4-D [batch, heads, sequence, head], got {fmt(shape(x))}")
    props: dict[str, Attribute] = {
        "layout": StringAttr("BNSD" if rank == 4 else "BSH"),
        "rotary_dim": int_attr(n.attr("rotary_embedding_dim", 0)),
        "interleaved": bool_attr(n.attr("interleaved", 0)),
    }
    if rank == 3:
        if not n.attr("num_heads", 0):
            raise n.error("a 3-D input needs the num_heads attribute")
        props["num_heads"] = int_attr(n.attr("num_heads"))
    return [n.emit(ag.RotaryPositionEmbeddingOp, [x, cos, sin], props)]


@converts(TopK=24)
def _top_k(n: Node) -> Outputs:
    """k comes from the constant input (every opset we import has it there)."""
    k = n.scalar_input(1, "k")
    if k is None:
        raise n.error("k is missing")
    props = {
        "k": int_attr(k), "dim": int_attr(n.attr("axis", -1)),
        "largest": bool_attr(n.attr("largest", 1)), "sorted": bool_attr(n.attr("sorted", 1)),
    }
    return n.emit_all(ag.TopKV2Op, [n.x(0)], props)


def _einsum_terms(n: Node, operands: Sequence[SSAValue]) -> tuple[list[str], str]:
    """The equation's input terms and output term, one letter per dim: `...` becomes
    the digits 0-9, right-aligned across the inputs; without `->` the output is the
    broadcast dims then the letters that appear once, in alphabetical order."""
    equation = str(n.attr("equation", "")).replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise n.error(f"equation '{equation}' has {len(terms)} input terms for {len(operands)} inputs")
    if any(not (c.isalpha() or c == ".") for c in lhs.replace(",", "") + rhs):
        raise n.error(f"equation '{equation}' may only hold letters, ',', '...' and '->'")
    spans = [len(shape(x)) - len(t.replace("...", "")) for t, x in zip(terms, operands)]
    if any(s < 0 or (s > 0 and "..." not in t) for s, t in zip(spans, terms)):
        raise n.error(f"equation '{equation}' does not match the input ranks {[len(shape(x)) for x in operands]}")
    width = max([s for s, t in zip(spans, terms) if "..." in t], default=0)
    digits = "0123456789"[:width]
    terms = [t.replace("...", digits[width - s :]) for s, t in zip(spans, terms)]
    if not arrow:
        letters = "".join(terms)
        rhs = digits + "".join(sorted(c for c in set(letters) if c.isalpha() and letters.count(c) == 1))
    return terms, rhs.replace("...", digits)


def _einsum_reduce(n: Node, x: SSAValue, term: str, keep: str, tag: str) -> tuple[SSAValue, str]:
    """Take the diagonal of each repeated letter (times the identity, summed) and sum
    the letters not in `keep`."""
    for letter in dict.fromkeys(term):
        while term.count(letter) > 1:
            first, second = term.index(letter), term.index(letter, term.index(letter) + 1)
            rest = [i for i in range(len(term)) if i not in (first, second)]
            x = n.emit(ag.TransposeOp, [x], {"perm": ints(rest + [first, second])}, f"{tag}_{letter}_pair")
            size = shape(x)[-1]
            eye = n.const(np.eye(size, dtype=dtypes.to_numpy(dtype(x))), f"{tag}_{letter}_eye")
            x = n.emit(ag.MulOp, [x, eye], tag=f"{tag}_{letter}_masked")
            x = _reduce(n, ag.ReduceSumOp, x, (-1,), False, f"{tag}_{letter}_diagonal")
            term = "".join(term[i] for i in rest) + letter
    summed = tuple(i for i, c in enumerate(term) if c not in keep)
    if summed:
        x = _reduce(n, ag.ReduceSumOp, x, summed, False, f"{tag}_sum")
        term = "".join(c for c in term if c in keep)
    return x, term


def _einsum_arrange(n: Node, x: SSAValue, term: str, order: str, dims: Sequence[int], tag: str) -> SSAValue:
    """x (letters `term`) transposed to the letters `order`, then reshaped to `dims`."""
    perm = [term.index(c) for c in order]
    if perm != sorted(perm):
        x = n.emit(ag.TransposeOp, [x], {"perm": ints(perm)}, f"{tag}_transpose")
    if tuple(dims) != shape(x):
        x = n.emit(ag.ReshapeOp, [x], {"shape": ints(dims)}, f"{tag}_reshape")
    return x


@converts(Einsum=12)
def _einsum(n: Node) -> Outputs:
    """Transposes, sums and BatchMatMulV2, as CANN's Einsum kernel itself rewrites an
    equation: the diagonals and the letters only one input has are summed first; two
    inputs contract as [batch, left, contracted] @ [batch, contracted, right], more
    inputs pairwise from the left; the result is transposed to the output's order."""
    operands = n.inputs()
    if not operands:
        raise n.error("needs at least one input")
    terms, out = _einsum_terms(n, operands)
    sizes: dict[str, int] = {}
    for term, x in zip(terms, operands):
        for c, d in zip(term, shape(x)):
            if d == DYN:
                raise n.error(f"input {fmt(shape(x))} has a dynamic dim; einsum needs static shapes")
            if sizes.setdefault(c, d) != d:
                raise n.error(f"letter '{c}' has sizes {sizes[c]} and {d} (broadcasting a 1 is unsupported)")
    if any(c not in sizes for c in out) or len(set(out)) != len(out):
        raise n.error(f"output term '{out}' repeats a letter or names one no input has")
    acc, term = _einsum_reduce(n, operands[0], terms[0], out + "".join(terms[1:]), "in0")
    for i, (x, t) in enumerate(zip(operands[1:], terms[1:]), 1):
        later = out + "".join(terms[i + 1 :])
        rhs, t = _einsum_reduce(n, x, t, later + term, f"in{i}")
        acc, term = _einsum_reduce(n, acc, term, later + t, f"acc{i}")
        batch = "".join(c for c in term if c in t and c in later)
        contracted = "".join(c for c in term if c in t and c not in later)
        left, right = "".join(c for c in term if c not in t), "".join(c for c in t if c not in term)
        count = [math.prod(sizes[c] for c in s) for s in (batch, left, contracted, right)]
        a = _einsum_arrange(n, acc, term, batch + left + contracted, (count[0], count[1], count[2]), f"lhs{i}")
        b = _einsum_arrange(n, rhs, t, batch + contracted + right, (count[0], count[2], count[3]), f"rhs{i}")
        product = n.emit(ag.BatchMatMulOp, [a, b], {"adj_x1": bool_attr(False), "adj_x2": bool_attr(False)}, f"matmul{i}")
        term = batch + left + right
        acc = _einsum_arrange(n, product, "abc", "abc", [sizes[c] for c in term], f"product{i}")
    acc, term = _einsum_reduce(n, acc, term, out, "out")
    perm = [term.index(c) for c in out]
    if perm == sorted(perm):
        return [n.emit(ag.IdentityOp, [acc])]
    return [n.emit(ag.TransposeOp, [acc], {"perm": ints(perm)})]


# ------------ elementwise, bitwise, triangular, cumulative, one-hot and determinant ops

_MORE_UNARY: dict[str, tuple[type[ag.AscendOp], int]] = {
    "BitwiseNot": (ag.InvertOp, 18), "IsNaN": (ag.IsNanOp, 20), "Tan": (ag.TanOp, 22), "Asin": (ag.AsinOp, 22),
    "Acos": (ag.AcosOp, 22), "Atan": (ag.AtanOp, 22), "Sinh": (ag.SinhOp, 22), "Cosh": (ag.CoshOp, 22),
    "Asinh": (ag.AsinhOp, 22), "Acosh": (ag.AcoshOp, 22), "Atanh": (ag.AtanhOp, 22), "Det": (ag.MatrixDeterminantOp, 22),
}

_MORE_BINARY: dict[str, tuple[type[ag.AscendOp], int]] = {
    "BitwiseAnd": (ag.BitwiseAndOp, 18), "BitwiseOr": (ag.BitwiseOrOp, 18), "BitwiseXor": (ag.BitwiseXorOp, 18),
}

for _op_type, (_cls, _newest) in _MORE_UNARY.items():
    CONVERTERS[_op_type] = Converter(_unary(_cls), _newest)
for _op_type, (_cls, _newest) in _MORE_BINARY.items():
    CONVERTERS[_op_type] = Converter(_binary(_cls), _newest)


@converts(Mod=13)
def _mod(n: Node) -> Outputs:
    """fmod=0 is the floored remainder (FloorMod), defined by ONNX for integers only;
    fmod=1 is C's fmod (Mod), for integers and floats."""
    a, b = n.x(0), n.x(1)
    fmod = n.attr("fmod", 0)
    if fmod not in (0, 1):
        raise n.error(f"fmod {fmod} is not 0 or 1")
    if fmod == 0 and ag.is_float(dtype(a)):
        raise n.error(f"fmod=0 is defined for integers only; {dtypes.name(dtype(a))} inputs need fmod=1")
    return [n.emit(ag.ModOp if fmod else ag.FloorModOp, [a, b])]


@converts(BitShift=11)
def _bit_shift(n: Node) -> Outputs:
    direction = n.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise n.error(f"direction '{direction}' is not LEFT or RIGHT")
    return [n.emit(ag.LeftShiftOp if direction == "LEFT" else ag.RightShiftOp, [n.x(0), n.x(1)])]


@converts(IsInf=20)
def _is_inf(n: Node) -> Outputs:
    props = {
        "detect_positive": bool_attr(n.attr("detect_positive", 1)),
        "detect_negative": bool_attr(n.attr("detect_negative", 1)),
    }
    return [n.emit(ag.IsInfOp, [n.x(0)], props)]


@converts(ThresholdedRelu=22)
def _thresholded_relu(n: Node) -> Outputs:
    return [n.emit(ag.ThresholdedReluOp, [n.x(0)], {"alpha": float_attr(n.attr("alpha", 1.0))})]


@converts(Shrink=9)
def _shrink(n: Node) -> Outputs:
    props = {"lambd": float_attr(n.attr("lambd", 0.5)), "bias": float_attr(n.attr("bias", 0.0))}
    return [n.emit(ag.ShrinkOp, [n.x(0)], props)]


@converts(Swish=24)
def _swish(n: Node) -> Outputs:
    """ONNX's alpha is CANN Swish's scale: x * sigmoid(alpha * x)."""
    return [n.emit(ag.SwishOp, [n.x(0)], {"scale": float_attr(n.attr("alpha", 1.0))})]


@converts(Hardmax=13)
def _hardmax(n: Node) -> Outputs:
    """Before opset 13 the input is coerced to 2-D at `axis` (default 1): the maximum
    is taken over axes axis..rank-1 together; from 13 over the one `axis` (default -1)."""
    x = n.x(0)
    rank = len(shape(x))
    if n.since < 13:
        axes = tuple(range(norm_axis(n.attr("axis", 1), rank), rank))
    else:
        axes = (norm_axis(n.attr("axis", -1), rank),)
    return [n.emit(ag.HardmaxOp, [x], {"axes": ints(axes)})]


@converts(Trilu=14)
def _trilu(n: Node) -> Outputs:
    """A constant diagonal offset k becomes Tril/Triu's `diagonal`; a computed one stays
    their operand (the result's shape does not depend on it)."""
    cls = ag.TriuOp if n.attr("upper", 1) else ag.TrilOp
    if n.has(1) and n.importer.constant_value(n.proto.input[1]) is None:
        return [n.emit(cls, [n.x(0), n.x(1)])]
    k = n.scalar_input(1, "k") or 0
    return [n.emit(cls, [n.x(0)], {"diagonal": int_attr(int(k))})]


@converts(CumSum=14, CumProd=26)
def _cumulative(n: Node) -> Outputs:
    """A constant axis becomes the `axis` property; a computed one stays the op's
    axis_input operand (the result's shape does not depend on it)."""
    cls = ag.CumsumOp if n.op_type == "CumSum" else ag.CumprodOp
    props: dict[str, Attribute] = {"exclusive": bool_attr(n.attr("exclusive", 0)), "reverse": bool_attr(n.attr("reverse", 0))}
    if n.importer.constant_value(n.proto.input[1]) is None:
        return [n.emit(cls, [n.x(0), n.x(1)], props)]
    axis = n.ints(1, "axis")
    if axis is None or len(axis) != 1:
        raise n.error(f"axis must be one integer, got {axis}")
    return [n.emit(cls, [n.x(0)], {"axis": int_attr(axis[0]), **props})]


@converts(BitCast=26)
def _bit_cast(n: Node) -> Outputs:
    """To its own dtype, the identity; to another of the same width, Bitcast (a view)."""
    x = n.x(0)
    target = element_type(n.attr("to"), "attribute 'to'")
    if target == dtype(x):
        return [_identity(n, x)]
    bits = element_bits(dtype(x)), element_bits(target)
    if bits[0] != bits[1]:
        raise n.error(
            f"'to' {dtypes.name(target)} has {bits[1]} bits, the input's {dtypes.name(dtype(x))} {bits[0]}; "
            "BitCast needs the same width"
        )
    return [n.emit(ag.BitcastOp, [x], {"dst_type": target})]


@converts(OneHot=11)
def _one_hot(n: Node) -> Outputs:
    """depth must be a constant (it sizes the result). Float indices are cast to int64
    (truncated toward zero), as onnxruntime reads them."""
    indices, values = n.x(0), n.x(2)
    depth = n.scalar_input(1, "depth")
    if depth is None or depth < 1:
        raise n.error(f"depth must be a positive scalar, got {depth}")
    if not isinstance(dtype(indices), IntegerType) or dtype(indices) == i1:
        indices = n.emit(ag.CastOp, [indices], {"dst_type": i64}, "indices")
    axis = n.attr("axis", -1)
    rank = len(shape(indices))
    if not -rank - 1 <= axis <= rank:
        raise n.error(f"axis {axis} is outside [{-rank - 1}, {rank}] for indices of rank {rank}")
    return [n.emit(ag.OneHotOp, [indices, values], {"depth": int_attr(int(depth)), "axis": int_attr(axis)})]


# ---------------------------------------------------------------- data-dependent shapes


@converts(NonZero=13)
def _non_zero(n: Node) -> Outputs:
    return [n.emit(ag.NonZeroOp, [n.x(0)])]


@converts(Compress=11)
def _compress(n: Node) -> Outputs:
    axis = n.attr("axis")
    props = {} if axis is None else {"axis": int_attr(axis)}
    return [n.emit(ag.CompressOp, [n.x(0), n.x(1)], props)]


@converts(Unique=11)
def _unique(n: Node) -> Outputs:
    props: dict[str, Attribute] = {"sorted": bool_attr(n.attr("sorted", 1) != 0)}
    if n.attr("axis") is not None:
        props["axis"] = int_attr(n.attr("axis"))
    return n.emit_all(ag.UniqueOp, [n.x(0)], props)


@converts(NonMaxSuppression=11)
def _non_max_suppression(n: Node) -> Outputs:
    """The three scalar inputs must be constants: they bound the result (its upper bound
    is batch x classes x min(boxes, max_output_boxes_per_class) rows)."""
    center = n.attr("center_point_box", 0)
    if center not in (0, 1):
        raise n.error(f"center_point_box is {center}; allowed: 0 (corners) or 1 (center, width, height)")
    most = n.scalar_input(2, "max_output_boxes_per_class")
    iou = n.scalar_input(3, "iou_threshold")
    score = n.scalar_input(4, "score_threshold")
    props: dict[str, Attribute] = {
        "center_point_box": bool_attr(center == 1),
        "max_output_boxes_per_class": int_attr(0 if most is None else int(most)),
        "iou_threshold": float_attr(0.0 if iou is None else float(iou)),
    }
    if score is not None:
        props["score_threshold"] = float_attr(float(score))
    return [n.emit(ag.NonMaxSuppressionOp, [n.x(0), n.x(1)], props)]


# ---------------------------------------------------- recurrent layers (LSTM, GRU, RNN)

_CELLS: dict[str, tuple[type[ag.RecurrentOp], int, tuple[str, ...]]] = {
    "LSTM": (ag.DynamicRNNOp, 4, ("Sigmoid", "Tanh", "Tanh")),
    "GRU": (ag.DynamicGRUV2Op, 3, ("Sigmoid", "Tanh")),
    "RNN": (ag.RNNOp, 1, ("Tanh",)),
}
"""Per ONNX op: our op (one per direction), its gates and its default activations."""
_ACTIVATION_DEFAULTS: dict[str, tuple[float, float]] = {
    "Affine": (1.0, 0.0), "LeakyRelu": (0.01, 0.0), "ThresholdedRelu": (1.0, 0.0), "ScaledTanh": (1.0, 1.0),
    "HardSigmoid": (0.2, 0.5), "Elu": (1.0, 0.0),
}
"""alpha and beta of the activations taking them, where activation_alpha/beta give none."""
_LSTM_GATES = (0, 3, 2, 1)
"""ONNX's LSTM gates i, o, f, c in GE's order i, j (= c), f, o."""
_DIRECTIONS = {"forward": ("UNIDIRECTIONAL",), "reverse": ("REDIRECTIONAL",), "bidirectional": ("UNIDIRECTIONAL", "REDIRECTIONAL")}
"""ONNX's direction -> GE's direction of each op."""
_TAGS = {"UNIDIRECTIONAL": "forward", "REDIRECTIONAL": "reverse"}
"""The name tag of each direction's ops (the op of a one-direction layer takes the node's name)."""


def _recurrent_activations(n: Node, per: int, count: int, defaults: tuple[str, ...]) -> list[tuple[list[str], list[float], list[float]]]:
    """Per direction: the activations (ONNX names them case-insensitively) and their
    alpha and beta. The given alphas and betas are consumed in order by the
    activations that take them, as onnxruntime reads the lists."""
    given = n.attr("activations")
    names = list(given) if given else list(defaults) * count
    if len(names) != per * count:
        raise n.error(f"activations {names} need {per} per direction ({per * count})")
    spelled = {a.lower(): a for a in ag.RECURRENT_ACTIVATIONS}
    alphas, betas = iter(n.attr("activation_alpha", [])), iter(n.attr("activation_beta", []))
    resolved: list[tuple[str, float, float]] = []
    for name in names:
        canonical = spelled.get(name.lower())
        if canonical is None:
            raise n.error(f"activation '{name}' is unsupported; supported: {', '.join(ag.RECURRENT_ACTIVATIONS)}")
        takes = ag.RECURRENT_ACTIVATIONS[canonical]
        alpha, beta = _ACTIVATION_DEFAULTS.get(canonical, (0.0, 0.0))
        alpha = next(alphas, alpha) if takes >= 1 else alpha
        beta = next(betas, beta) if takes >= 2 else beta
        resolved.append((canonical, alpha, beta))
    chunks = [resolved[d * per:(d + 1) * per] for d in range(count)]
    return [([a for a, _, _ in c], [al for _, al, _ in c], [b for _, _, b in c]) for c in chunks]


def _per_direction(n: Node, value: SSAValue | None, count: int, tag: str) -> list[SSAValue | None]:
    """A [D, ...] input cut into D pieces [1, ...] (itself when D is 1)."""
    if value is None:
        return [None] * count
    if shape(value)[0] not in (count, DYN):
        raise n.error(f"{tag} has shape {fmt(shape(value))}; its first dim must be the {count} direction(s)")
    if count == 1:
        return [value]
    return list(n.emit_all(ag.SplitOp, [value], {"split_dim": int_attr(0), "num_split": int_attr(count)}, f"{tag}/split"))


def _gate_matrix(n: Node, part: SSAValue, gates: int, order: Sequence[int] | None, tag: str) -> SSAValue:
    """[1, G*H, K] -> [K, G*H], its blocks of columns in `order` when given."""
    _, rows, k = shape(part)
    m = n.emit(ag.ReshapeOp, [part], {"shape": ints([rows, k])}, f"{tag}/reshape")
    m = n.emit(ag.TransposeOp, [m], {"perm": ints([1, 0])}, f"{tag}/transpose")
    return _gate_order(n, m, gates, order, 1, tag)


def _gate_order(n: Node, value: SSAValue, gates: int, order: Sequence[int] | None, axis: int, tag: str) -> SSAValue:
    """`value` with its `gates` blocks along `axis` in `order` (a Gather, folded for a weight)."""
    if order is None:
        return value
    size = shape(value)[axis] // gates
    index = np.concatenate([np.arange(g * size, (g + 1) * size) for g in order]).astype(np.int64)
    return n.emit(ag.GatherOp, [value, n.const(index, f"{tag}/gates")], {"axis": int_attr(axis)}, f"{tag}/gate_order")


def _stacked(n: Node, parts: Sequence[SSAValue], axis: int, perm: Sequence[int] | None, tag: str) -> SSAValue:
    """The directions' results joined along `axis`, then batch-major when `perm` is given."""
    joined = parts[0] if len(parts) == 1 else n.emit(ag.ConcatOp, list(parts), {"concat_dim": int_attr(axis)}, tag)
    return joined if perm is None else n.emit(ag.TransposeOp, [joined], {"perm": ints(perm)}, f"{tag}/batch_major")


def _cell_weights(
    n: Node, w: SSAValue | None, r: SSAValue | None, b: SSAValue | None, gates: int, where: str
) -> list[SSAValue | None]:
    """One direction's weight operands from its W [1, G*H, I], R [1, G*H, H] and B
    [1, 2*G*H]: DynamicGRUV2's weight_input, weight_hidden, bias_input, bias_hidden;
    DynamicRNN's and RNN's w (W and R stacked) and b (the biases summed), LSTM's
    gates in GE's order."""
    assert w is not None and r is not None
    order = _LSTM_GATES if n.op_type == "LSTM" else None
    w_in, w_h = _gate_matrix(n, w, gates, order, f"{where}/W"), _gate_matrix(n, r, gates, order, f"{where}/R")
    biases: list[SSAValue | None] = [None, None]
    if b is not None:
        flat = n.emit(ag.ReshapeOp, [b], {"shape": ints([shape(b)[-1]])}, f"{where}/B/reshape")
        biases = list(n.emit_all(ag.SplitOp, [flat], {"split_dim": int_attr(0), "num_split": int_attr(2)}, f"{where}/B/split"))
    if n.op_type == "GRU":
        return [w_in, w_h, *biases]
    stacked = n.emit(ag.ConcatOp, [w_in, w_h], {"concat_dim": int_attr(0)}, f"{where}/w")
    if biases[0] is None or biases[1] is None:
        return [stacked, None]
    summed = n.emit(ag.AddOp, [biases[0], biases[1]], tag=f"{where}/b")
    return [stacked, _gate_order(n, summed, gates, order, 0, f"{where}/b")]


@converts(LSTM=22, GRU=22, RNN=22)
def _recurrent(n: Node) -> Outputs:
    """One DynamicRNN (LSTM), DynamicGRUV2 (GRU) or RNN op per direction, as GE's
    parser splits a bidirectional layer: the weights per direction are transposed to
    [K, G*H] (LSTM's gates reordered to GE's ijfo, W and R stacked, the two biases
    summed), which constant folding does once; a batch-major layout (layout = 1) is
    transposed to time major and back; the directions' results are joined."""
    cls, gates, defaults = _CELLS[n.op_type]
    x, w, r = n.x(0), n.x(1), n.x(2)
    direction = n.attr("direction", "forward")
    if direction not in _DIRECTIONS:
        raise n.error(f"direction '{direction}' is not forward, reverse or bidirectional")
    spelled = _DIRECTIONS[direction]
    count = len(spelled)
    layout = n.attr("layout", 0)
    if layout not in (0, 1):
        raise n.error(f"layout {layout} is not 0 (time major) or 1 (batch major)")
    if len(shape(x)) != 3 or len(shape(w)) != 3 or len(shape(r)) != 3:
        raise n.error(f"X {fmt(shape(x))}, W {fmt(shape(w))} and R {fmt(shape(r))} must be 3-D")
    hidden = shape(r)[2]
    if n.attr("hidden_size") is not None and n.attr("hidden_size") != hidden:
        raise n.error(f"hidden_size {n.attr('hidden_size')} differs from R's {fmt(shape(r))}")
    if shape(w)[1] != gates * hidden or shape(r)[1] != gates * hidden:
        raise n.error(f"W {fmt(shape(w))} and R {fmt(shape(r))} need {gates} x hidden_size = {gates * hidden} rows")
    lengths = n.opt(4)
    if lengths is not None and dtypes.name(dtype(lengths)) != "int32":
        raise n.error(f"sequence_lens must be int32, not {dtypes.name(dtype(lengths))}")
    if n.op_type == "LSTM" and n.has(7) and shape(n.x(7))[-1:] != (3 * hidden,):
        raise n.error(f"P {fmt(shape(n.x(7)))} needs 3 x hidden_size = {3 * hidden} columns")
    per = len(defaults)
    activations = _recurrent_activations(n, per, count, defaults)
    if layout:
        x = n.emit(ag.TransposeOp, [x], {"perm": ints([1, 0, 2])}, "time_major")
        states = [n.emit(ag.TransposeOp, [n.x(i)], {"perm": ints([1, 0, 2])}, f"initial_{k}") if n.has(i) else None
                  for i, k in ((5, "h"), (6, "c"))]
    else:
        states = [n.opt(5), n.opt(6) if n.op_type == "LSTM" else None]
    ws, rs = _per_direction(n, w, count, "W"), _per_direction(n, r, count, "R")
    bs = _per_direction(n, n.opt(3), count, "B")
    hs, cs = _per_direction(n, states[0], count, "initial_h"), _per_direction(n, states[1], count, "initial_c")
    ps = _per_direction(n, n.opt(7) if n.op_type == "LSTM" else None, count, "P")
    clip = n.attr("clip")
    results: list[list[SSAValue]] = []
    for d, spelling in enumerate(spelled):
        where = _TAGS[spelling]
        tag = None if count == 1 else where
        names, alphas, betas = activations[d]
        props: dict[str, Attribute] = {
            "direction": StringAttr(spelling),
            "activations": ArrayAttr([StringAttr(a) for a in names]),
            "activation_alpha": DenseArrayBase.from_list(f32, alphas),
            "activation_beta": DenseArrayBase.from_list(f32, betas),
        }
        if clip is not None:
            props["cell_clip"] = float_attr(clip)
        operands = [x, *_cell_weights(n, ws[d], rs[d], bs[d], gates, where), lengths, hs[d]]
        if n.op_type == "GRU":
            props["reset_after"] = bool_attr(n.attr("linear_before_reset", 0))
        if n.op_type == "LSTM":
            props["input_forget"] = bool_attr(n.attr("input_forget", 0))
            peepholes: list[SSAValue | None] = [None, None, None]
            if ps[d] is not None:
                flat = n.emit(ag.ReshapeOp, [ps[d]], {"shape": ints([3 * hidden])}, f"{where}/P/reshape")
                p_i, p_o, p_f = n.emit_all(ag.SplitOp, [flat], {"split_dim": int_attr(0), "num_split": int_attr(3)}, f"{where}/P/split")
                peepholes = [p_i, p_f, p_o]
            operands += [cs[d], *peepholes]
        results.append(n.importer.build(cls(operands, props, n.label(tag))))
    batch_major = (2, 0, 1, 3) if layout else None
    outputs: list[SSAValue | None] = [None]
    if n.used(0):
        ys = [n.emit(ag.UnsqueezeOp, [res[0]], {"axes": ints([1])}, f"{_TAGS[s]}/Y") for res, s in zip(results, spelled)]
        outputs[0] = _stacked(n, ys, 1, batch_major, "Y")
    for i, key in ((1, "Y_h"), (2, "Y_c")):
        if i >= len(results[0]):
            continue
        state = [res[i] for res in results]
        outputs.append(_stacked(n, state, 0, (1, 0, 2) if layout else None, key) if n.used(i) else None)
    return outputs


# ------------------------------------------------------------------------- quantization


def _declared_type(n: Node, key: str) -> Attribute | None:
    """The element type an attribute names (`output_dtype`, `precision`), None when unset (0)."""
    code = n.attr(key, 0)
    return element_type(code, f"node '{n.name}' ({n.op_type}) attribute {key}") if code else None


def _quant_props(n: Node) -> dict[str, Attribute]:
    return {"axis": int_attr(n.attr("axis", 1)), "block_size": int_attr(n.attr("block_size", 0))}


@converts(QuantizeLinear=25)
def _quantize_linear(n: Node) -> Outputs:
    """AscendQuant. The result type is the zero point's, else `output_dtype`, else
    uint8; `saturate` concerns float8 results only, which the importer refuses. Before
    version 23 (which divides in `precision`, by default the scale's dtype) the
    quotient is float32's, as onnxruntime computes it."""
    x, scale, offset = n.x(0), n.x(1), n.opt(2)
    declared = _declared_type(n, "output_dtype")
    if offset is not None and declared is not None and declared != dtype(offset):
        raise n.error(f"output_dtype {declared} differs from the zero point's {dtype(offset)}")
    dst = dtype(offset) if offset is not None else declared or IntegerType(8, Signedness.UNSIGNED)
    props = {**_quant_props(n), "dst_type": dst}
    precision = _declared_type(n, "precision") if n.since >= 23 else f32
    if precision is not None:
        props["precision"] = precision
    return [n.emit(ag.AscendQuantOp, [x, scale, *([offset] if offset is not None else [])], props)]


@converts(DequantizeLinear=25)
def _dequantize_linear(n: Node) -> Outputs:
    """AscendDequant (in the scale's dtype, then a Cast to `output_dtype` if that
    differs). A constant x (a quantized weight) is not folded at import, where its
    users are not known yet: kept int8, the weight is what QuantCubeFusionPass puts on
    the cube (constant folding folds it when no cube op reads it)."""
    x, scale, offset = n.x(0), n.x(1), n.opt(2)
    declared = _declared_type(n, "output_dtype")
    operands = [x, scale, *([offset] if offset is not None else [])]
    tag = None if declared in (None, dtype(scale)) else "dequant"
    if n.importer.array_of(x) is None:
        y = n.emit(ag.AscendDequantOp, operands, _quant_props(n), tag)
    else:
        op = ag.AscendDequantOp(operands, _quant_props(n), n.label(tag))
        n.importer.block.add_op(op)
        y = op.y
    return [y if tag is None else n.emit(ag.CastOp, [y], {"dst_type": declared})]


@converts(DynamicQuantizeLinear=11)
def _dynamic_quantize_linear(n: Node) -> Outputs:
    """ONNX's function body for it, as GE decomposes it: [min(x, 0), max(x, 0)] maps
    onto uint8's [0, 255], scale = (max - min) / 255, zero point = round(-min / scale)
    saturated, and y = AscendQuant(x, scale, zero point)."""
    x = n.x(0)
    zero = n.scalar(0.0, x, "zero")
    high = n.emit(ag.MaximumOp, [_reduce(n, ag.ReduceMaxOp, x, (), False, "max"), zero], tag="high")
    low = n.emit(ag.MinimumOp, [_reduce(n, ag.ReduceMinOp, x, (), False, "min"), zero], tag="low")
    span = n.emit(ag.SubOp, [high, low], tag="span")
    scale = n.emit(ag.DivOp, [span, n.scalar(255.0, x, "levels")], tag="scale")
    shift = n.emit(ag.NegOp, [n.emit(ag.DivOp, [low, scale], tag="low_steps")], tag="shift")
    clipped = n.emit(ag.ClipByValueOp, [shift], {"min": float_attr(0.0), "max": float_attr(255.0)}, "clip")
    uint8 = IntegerType(8, Signedness.UNSIGNED)
    offset = n.emit(ag.CastOp, [n.emit(ag.RoundOp, [clipped], tag="round")], {"dst_type": uint8}, "zero_point")
    props = {"axis": int_attr(1), "block_size": int_attr(0), "dst_type": uint8}
    return [n.emit(ag.AscendQuantOp, [x, scale, offset], props), scale, offset]


def _no_offset(n: Node, zero_point: SSAValue | None) -> bool:
    """The zero point is absent or a constant of zeros."""
    if zero_point is None:
        return True
    values = n.importer.array_of(zero_point)
    return values is not None and not values.any()


def _minus_offset(n: Node, x: SSAValue, zero_point: SSAValue | None, axis: int, tag: str) -> SSAValue:
    """x - zero_point, exactly, in int32. A zero point is one value (rank 0 or [1]) or
    one per index along `axis` of x (reshaped onto it)."""
    wide = n.emit(ag.CastOp, [x], {"dst_type": i32}, f"{tag}_int32")
    if _no_offset(n, zero_point):
        return wide
    assert zero_point is not None
    offset = n.emit(ag.CastOp, [zero_point], {"dst_type": i32}, f"{tag}_zero_point")
    points = shape(zero_point)
    if points not in ((), (1,)):
        rank = len(shape(x))
        if len(points) != 1 or not 0 <= axis < rank or points[0] != shape(x)[axis]:
            raise n.error(
                f"{tag} zero point {fmt(points)} is neither one value "
                f"nor one per index along axis {axis} of {fmt(shape(x))}"
            )
        if axis < rank - 1:
            offset = n.emit(ag.UnsqueezeOp, [offset], {"axes": ints(range(1, rank - axis))}, f"{tag}_zero_point_axes")
    return n.emit(ag.SubOp, [wide, offset], tag=f"{tag}_shifted")


def _integer_operands(
    n: Node, a: SSAValue, a_offset: SSAValue | None, a_axis: int, b: SSAValue, b_offset: SSAValue | None, b_axis: int
) -> tuple[SSAValue, SSAValue, dict[str, Attribute]]:
    """The operands of an integer product (a - a_offset) x (b - b_offset) and the cube
    op's extra properties: int8 operands without offsets go to the int8 cube as they
    are (int32 result); the others are shifted in int32 (QuantCubeFusionPass moves
    what fits back to int8)."""
    if dtype(a) == dtype(b) == IntegerType(8) and _no_offset(n, a_offset) and _no_offset(n, b_offset):
        return a, b, {"dtype": i32}
    return _minus_offset(n, a, a_offset, a_axis, "a"), _minus_offset(n, b, b_offset, b_axis, "b"), {}


def _integer_matmul(n: Node, tag: str | None) -> SSAValue:
    """(A - a_zero_point) @ (B - b_zero_point) in int32, from inputs 0, 2 and 3, 5 (QLinearMatMul's
    order) or 0, 1 and 2, 3 (MatMulInteger's); a zero point per row of A or per column of B.
    A computed B with one-value zero points runs on the int8 cube (`_corrected_matmul`)."""
    quantized = n.op_type == "QLinearMatMul"
    a, b = n.x(0), n.x(3 if quantized else 1)
    a_offset, b_offset = n.opt(2), n.opt(5 if quantized else 3)
    plain = dtype(a) == dtype(b) == IntegerType(8) and _no_offset(n, a_offset) and _no_offset(n, b_offset)
    ranks = min(len(shape(a)), len(shape(b))) >= 2 and shape(a)[-1] != DYN
    if not plain and n.importer.array_of(b) is None and _one_value(a_offset) and _one_value(b_offset) and ranks:
        return _corrected_matmul(n, a, a_offset, b, b_offset, tag)
    x1, x2, props = _integer_operands(n, a, a_offset, len(shape(a)) - 2, b, b_offset, len(shape(b)) - 1)
    return _matmul_op(n, x1, x2, props, tag)


def _matmul_op(n: Node, x1: SSAValue, x2: SSAValue, props: dict[str, Attribute], tag: str | None) -> SSAValue:
    if len(shape(x1)) == 2 and len(shape(x2)) == 2:
        props = props | {"transpose_x1": bool_attr(False), "transpose_x2": bool_attr(False)}
        return n.emit(ag.MatMulV2Op, [x1, x2], props, tag)
    return n.emit(ag.BatchMatMulOp, [x1, x2], props | {"adj_x1": bool_attr(False), "adj_x2": bool_attr(False)}, tag)


def _int8_of(n: Node, x: SSAValue, offset: SSAValue | None, tag: str) -> tuple[SSAValue, SSAValue | None]:
    """x as int8 and its offset in int32 (None for none): a uint8 x moves by -128 into
    int8's range, exactly, and its offset with it."""
    unsigned = dtype(x) != IntegerType(8)
    wide_offset = None if offset is None else n.emit(ag.CastOp, [offset], {"dst_type": i32}, f"{tag}_zero_point")
    if not unsigned:
        return x, wide_offset
    shift = n.const(np.array(128, np.int32), f"{tag}_shift")
    moved = n.emit(ag.SubOp, [n.emit(ag.CastOp, [x], {"dst_type": i32}, f"{tag}_int32"), shift], tag=f"{tag}_moved")
    x8 = n.emit(ag.CastOp, [moved], {"dst_type": IntegerType(8)}, f"{tag}_int8")
    if wide_offset is None:
        return x8, n.const(np.array(-128, np.int32), f"{tag}_moved_zero_point")
    return x8, n.emit(ag.SubOp, [wide_offset, shift], tag=f"{tag}_moved_zero_point")


def _corrected_matmul(
    n: Node, a: SSAValue, a_offset: SSAValue | None, b: SSAValue, b_offset: SSAValue | None, tag: str | None
) -> SSAValue:
    """(a - za) @ (b - zb) = a @ b - za * colsum(b) - zb * rowsum(a) + K * za * zb: the
    product of the int8 values on the int8 cube, the sums and corrections in int32
    vector ops, all exact (a uint8 operand moved into int8 first)."""
    a8, za = _int8_of(n, a, a_offset, "a")
    b8, zb = _int8_of(n, b, b_offset, "b")
    product = _matmul_op(n, a8, b8, {"dtype": i32}, "product")
    terms: list[tuple[type[ag.AscendOp], SSAValue]] = []
    if za is not None:
        b_wide = n.emit(ag.CastOp, [b8], {"dst_type": i32}, "b_sum_int32")
        colsum = _reduce(n, ag.ReduceSumOp, b_wide, (-2,), True, "b_column_sums")
        terms.append((ag.SubOp, n.emit(ag.MulOp, [za, colsum], tag="a_correction")))
    if zb is not None:
        a_wide = n.emit(ag.CastOp, [a8], {"dst_type": i32}, "a_sum_int32")
        rowsum = _reduce(n, ag.ReduceSumOp, a_wide, (-1,), True, "a_row_sums")
        terms.append((ag.SubOp, n.emit(ag.MulOp, [zb, rowsum], tag="b_correction")))
    if za is not None and zb is not None:
        k = n.const(np.array(shape(a)[-1], np.int32), "depth")
        terms.append((ag.AddOp, n.emit(ag.MulOp, [n.emit(ag.MulOp, [za, zb], tag="offsets"), k], tag="offset_term")))
    y = product
    for i, (cls, term) in enumerate(terms):  # a uint8 operand or a zero point: never none
        y = n.emit(cls, [y, term], tag=tag if i == len(terms) - 1 else f"corrected_{i}")
    return y


@converts(MatMulInteger=10)
def _matmul_integer(n: Node) -> Outputs:
    return [_integer_matmul(n, None)]


@converts(ConvInteger=10)
def _conv_integer(n: Node) -> Outputs:
    """conv(x - x_zero_point, w - w_zero_point) in int32; the filter's zero point is one
    value or one per output channel."""
    x, w, x_offset = n.x(0), n.x(1), n.opt(2)
    if not _one_value(x_offset):
        raise n.error(f"x_zero_point {fmt(shape(x_offset))} must be one value")  # type: ignore[arg-type]
    a, b, props = _integer_operands(n, x, x_offset, 1, w, n.opt(3), 0)
    return [_conv2d(n, a, b, None, props)]


def _one_value(value: SSAValue | None) -> bool:
    return value is None or shape(value) in ((), (1,))


def _requantized(n: Node, acc: SSAValue, scales: tuple[int, int, int], offset: int, axis: int) -> SSAValue:
    """The int32 accumulator requantized to y's zero point's dtype by the multiplier
    a_scale * b_scale / y_scale (computed in the scales' dtype, as ONNX does)."""
    a_scale, b_scale, y_scale = (n.x(i) for i in scales)
    if not _one_value(a_scale) or not _one_value(y_scale):
        raise n.error(
            f"the scales of the first input {fmt(shape(a_scale))} and of y {fmt(shape(y_scale))} must be one value each"
        )
    product = n.emit(ag.MulOp, [a_scale, b_scale], tag="scale_product")
    multiplier = n.emit(ag.DivOp, [product, y_scale], tag="multiplier")
    y_offset = n.x(offset)
    props = {"axis": int_attr(axis), "dst_type": dtype(y_offset)}
    return n.emit(ag.AscendRequantOp, [acc, multiplier, y_offset], props)


@converts(QLinearConv=10)
def _qlinear_conv(n: Node) -> Outputs:
    """ConvInteger's product plus the int32 bias, requantized (AscendRequant) by
    x_scale * w_scale / y_scale, one value or one per output channel."""
    x, w, x_offset = n.x(0), n.x(3), n.opt(2)
    if not _one_value(x_offset):
        raise n.error(f"x_zero_point {fmt(shape(x_offset))} must be one value")  # type: ignore[arg-type]
    a, b, props = _integer_operands(n, x, x_offset, 1, w, n.opt(5), 0)
    acc = _conv2d(n, a, b, n.opt(8), props, "conv")
    return [_requantized(n, acc, (1, 4, 6), 7, 1)]


@converts(QLinearMatMul=21)
def _qlinear_matmul(n: Node) -> Outputs:
    """MatMulInteger's product requantized (AscendRequant) by a_scale * b_scale /
    y_scale; b's scale may be one per column."""
    acc = _integer_matmul(n, "matmul")
    return [_requantized(n, acc, (1, 4, 6), 7, len(shape(acc)) - 1)]


# ------------------------------------------------------------------------- control flow


@converts(If=25)
def _if(n: Node) -> Outputs:
    """An If on a computed condition (one constant at import is the branch it takes,
    `Importer._taken_branch`). Both branches take every non-constant value either
    reads from outside (`Importer.captures`), as GE's If passes one input list to both."""
    importer = n.importer
    captured = importer.captures(n.proto)
    then_branch = importer.body(n.proto, "then_branch", n.name, [], captured)
    else_branch = importer.body(n.proto, "else_branch", n.name, [], captured)
    types = ag.IfOp.types_from(ag.IfOp.yielded(then_branch), ag.IfOp.yielded(else_branch))
    operands = [n.x(0), *(importer.value(c) for c in captured)]
    return importer.build(ag.IfOp(operands, [then_branch, else_branch], types, name=n.name))


@converts(Loop=25)
def _loop(n: Node) -> Outputs:
    """A Loop whose body is imported with the initial types of its carried values; a
    body that changes a carried value's shape (a sequence grown by Concat) is imported
    once more with that dim dynamic. The scan outputs have as many rows as iterations:
    the trip count when the loop has no condition that can stop it early."""
    importer = n.importer
    captured = importer.captures(n.proto)
    trips = n.opt(0) or n.const(np.array(INT64_MAX, np.int64), "trip_count")
    cond = n.opt(1) or n.const(np.array(True), "cond")
    carried = [n.x(i) for i in range(2, len(n.proto.input))]
    scalars = [ag.tensor(ag.i64, ()), ag.tensor(ag.i1, ())]
    types: list[Attribute] = [v.type for v in carried]
    for _ in range(2):
        body = importer.body(n.proto, "body", n.name, [*scalars, *types], captured)
        yielded = ag.LoopOp.yielded(body)
        if len(yielded) < 1 + len(carried):
            raise n.error(f"its body yields {len(yielded)} values, fewer than the condition and {len(carried)} carried values")
        results = ag.LoopOp.types_from(types, yielded[1:], _trips(n, body))
        if results[: len(carried)] == types:
            break
        types = results[: len(carried)]
    operands = [trips, cond, *carried, *(importer.value(c) for c in captured)]
    return importer.build(ag.LoopOp(operands, [body], results, {"captures": int_attr(len(captured))}, n.name))


def _trips(n: Node, body: Any) -> int:
    """The loop's iteration count when it is known at import: a constant trip count,
    and a condition that is true and that the body passes on unchanged (or yields true)."""
    importer = n.importer
    count = importer.constant_value(n.proto.input[0]) if n.has(0) else None
    start = importer.constant_value(n.proto.input[1]) if n.has(1) else np.array(True)
    block = body.block
    stays = block.last_op.values[0]
    while isinstance(stays.owner, ag.AscendOp) and (through := stays.owner.folded_operand()) is not None:
        stays = through  # an Identity of the condition
    kept = importer.array_of(stays)
    passed = stays is block.args[1] or (kept is not None and bool(kept.all()))
    if count is None or start is None or not start.all() or not passed:
        return DYN
    return max(int(count.reshape(-1)[0]), 0)


@converts(Scan=25)
def _scan(n: Node) -> Outputs:
    """Scan-9 and later (no batch axis, no sequence_lens): axes are normalised here."""
    importer = n.importer
    m = int(n.attr("num_scan_inputs"))
    inputs = [n.x(i) for i in range(len(n.proto.input))]
    states = len(inputs) - m
    if m < 1 or states < 0:
        raise n.error(f"num_scan_inputs {m} must be between 1 and its {len(inputs)} inputs")
    scanned = inputs[states:]
    in_axes = [norm_axis(a, len(shape(x)), "scan_input_axes") for a, x in zip(n.attr("scan_input_axes", [0] * m), scanned)]
    in_dirs = list(n.attr("scan_input_directions", [0] * m))
    if len(in_axes) != m or len(in_dirs) != m or any(d not in (0, 1) for d in in_dirs):
        raise n.error(f"scan_input_axes and scan_input_directions need {m} values each, directions 0 or 1")
    captured = importer.captures(n.proto)
    slices = ag.ScanOp.slice_types([x.type for x in scanned], in_axes)
    body = importer.body(n.proto, "body", n.name, [*(x.type for x in inputs[:states]), *slices], captured)
    yielded = ag.ScanOp.yielded(body)
    outs = len(yielded) - states
    out_dirs = list(n.attr("scan_output_directions", [0] * outs))
    raw_axes = list(n.attr("scan_output_axes", [0] * outs))
    if outs < 0 or len(raw_axes) != outs or len(out_dirs) != outs or any(d not in (0, 1) for d in out_dirs):
        raise n.error(f"scan_output_axes and scan_output_directions need {outs} values each, directions 0 or 1")
    out_axes = [norm_axis(a, len(ag.shape_of(y)) + 1, "scan_output_axes") for a, y in zip(raw_axes, yielded[states:])]
    length = ag.ScanOp.length([x.type for x in scanned], in_axes)
    results = [x.type for x in inputs[:states]]
    for y, a in zip(yielded[states:], out_axes):
        dims = ag.shape_of(y)
        results.append(ag.tensor(ag.dtype_of(y), (*dims[:a], length, *dims[a:])))
    props = {
        "num_scan_inputs": int_attr(m), "captures": int_attr(len(captured)),
        "scan_input_axes": ints(in_axes), "scan_input_directions": ints(in_dirs),
        "scan_output_axes": ints(out_axes), "scan_output_directions": ints(out_dirs),
    }
    operands = [*inputs, *(importer.value(c) for c in captured)]
    return importer.build(ag.ScanOp(operands, [body], results, props, n.name))


# ---------------------------------------------------------------------- TfIdfVectorizer


@converts(TfIdfVectorizer=9)
def _tf_idf_vectorizer(n: Node) -> Outputs:
    """Integer tokens and pool_int64s only (string tensors are not an element type here);
    the pool's layout is checked here, where the node's attributes name it."""
    if n.attr("pool_strings"):
        raise n.error("pool_strings is unsupported (string tokens): give integer tokens and pool_int64s")
    pool = [int(v) for v in n.attr("pool_int64s", [])]
    if not pool:
        raise n.error("pool_int64s is missing")
    counts = [int(v) for v in n.attr("ngram_counts")]
    bounds = [*counts, len(pool)]
    if not counts or any(not 0 <= a <= b <= len(pool) for a, b in itertools.pairwise(bounds)):
        raise n.error(f"ngram_counts {counts} must rise from 0 to at most the pool's {len(pool)} entries")
    lengths = [b - a for a, b in itertools.pairwise(bounds)]
    if counts[0] != 0 or any(size % (k + 1) for k, size in enumerate(lengths)):
        raise n.error(f"ngram_counts {counts} must start at 0 and split the pool into whole 1-grams, 2-grams, ...")
    mode = n.attr("mode")
    if mode not in ("TF", "IDF", "TFIDF"):
        raise n.error(f"mode '{mode}' is not TF, IDF or TFIDF")
    indexes = [int(v) for v in n.attr("ngram_indexes")]
    total = sum(size // (k + 1) for k, size in enumerate(lengths))
    if len(indexes) != total:
        raise n.error(f"ngram_indexes has {len(indexes)} entries, the pool {total} n-grams")
    props = {
        "min_gram_length": int_attr(n.attr("min_gram_length")),
        "max_gram_length": int_attr(n.attr("max_gram_length")),
        "max_skip_count": int_attr(n.attr("max_skip_count")),
        "mode": StringAttr(mode),
        "ngram_counts": ints(counts),
        "ngram_indexes": ints(indexes),
        "pool": ints(pool),
    }
    if n.attr("weights"):
        props["weights"] = DenseArrayBase.from_list(f64, [float(w) for w in n.attr("weights")])
    return [n.emit(ag.TfIdfVectorizerOp, [n.x(0)], props)]
