"""Convolution graph fusions: folding what follows a Conv2D into its filter and bias.

- ConvBatchnormFusionPass: Conv2D -> BatchNorm becomes one Conv2D.
- ConvScaleFusionPass: Conv2D -> Mul by a per-channel constant (then, optionally,
  Add of one: Caffe's Scale layer as ONNX spells it) becomes one Conv2D.
- AABiasaddConvFusion: Conv2D without bias -> Add of a per-channel constant
  becomes a Conv2D with that bias.
- ConvToFullyConnectionFusionPass: a Conv2D whose kernel covers its whole
  unpadded input is a FullyConnection.

Folding is exact up to rounding: the new filter and bias are computed in float64
from the constants and rounded once to the filter's dtype. It needs the filter,
the bias and every folded value to be constants, a float conv, a conv result used
only by the folded op, and a constant that varies along the channel axis only.
A pattern counts as matched when its ops are there, with a constant in the Mul
or Add it folds (a residual Add of two values is no bias); it takes effect when
the checks above pass too.

Order: the two folds into the filter run in `Band.TOP`, before the main band in
which AABiasaddConvFusion's `AA` prefix (GE's way of saying "first") puts it
first; that is the order GE gives them, normalisation folds ahead of its
built-in fusions. It matters only for chains mixing them: Conv -> BatchNorm ->
Add(per channel) folds the BatchNorm and keeps the Add, since
AABiasaddConvFusion takes bias-free convs only; Conv -> Add(per channel) ->
BatchNorm makes the Add the conv's bias after the BatchNorm pass has run, so
the BatchNorm stays too. Both cases are rare: exporters put a conv's bias in it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.ir import Attribute, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from dialects.ascend_graph import (
    AddOp,
    BatchNormOp,
    ConstOp,
    Conv2DOp,
    FullyConnectionOp,
    MulOp,
    bool_attr,
    dtype_of,
    int_attr,
    is_float,
    shape_of,
)
from ge.core.weights import derived, digest
from passes.graph_match import constant_value, new_constant, store_around
from passes.fusion import Band, FusionCounts, FusionPass, FusionPattern, fusion_pass


def _conv_feeding(value: SSAValue) -> Conv2DOp | None:
    """The float Conv2D defining `value` with a constant filter (and bias, if any),
    when `value` has no other user."""
    conv = value.owner
    if not isinstance(conv, Conv2DOp) or not value.has_one_use():
        return None
    if not is_float(dtype_of(conv.y.type)) or constant_value(conv.filter) is None:
        return None
    if conv.bias is not None and constant_value(conv.bias) is None:
        return None
    return conv


def _bias_of(conv: Conv2DOp) -> np.ndarray:
    """The conv's bias in float64, zeros without one."""
    if conv.bias is None:
        return np.zeros(shape_of(conv.filter.type)[0])
    return np.asarray(constant_value(conv.bias), np.float64)


def per_channel(value: SSAValue, out: Sequence[int]) -> np.ndarray | None:
    """The float64 vector per output channel that the constant `value` applies when
    broadcast against an NCHW result of shape `out`; None when it is not constant,
    varies along another axis ([C] varies along W), or would grow the result."""
    array = constant_value(value)
    if array is None or array.ndim > len(out):
        return None
    aligned = (1,) * (len(out) - array.ndim) + array.shape
    if any(d != 1 for i, d in enumerate(aligned) if i != 1) or aligned[1] not in (1, out[1]):
        return None
    return np.broadcast_to(np.asarray(array, np.float64).reshape(aligned[1]), (out[1],))


def _other(op: AddOp | MulOp, value: SSAValue) -> SSAValue:
    return op.x2 if op.x1 is value else op.x1


def _conv_and_constant(op: AddOp | MulOp) -> SSAValue | None:
    """The conv result `op` takes when its other operand is a constant (the
    structure the fusion looks for; a residual Add of two values is not it)."""
    for value in op.operands:
        if isinstance(value.owner, Conv2DOp) and isinstance(_other(op, value).owner, ConstOp):
            return value
    return None


def _folded_conv(
    conv: Conv2DOp, scale: np.ndarray, bias: np.ndarray | None, rewriter: PatternRewriter
) -> Conv2DOp:
    """`conv` with its filter scaled per output channel and the given bias (float64
    values, rounded here), its new constants inserted before the matched op."""
    store = store_around(conv)
    dtype = dtype_of(conv.y.type)
    name = f"{conv.label}.filter"

    def scaled() -> tuple[Attribute, Attribute]:
        filt = np.asarray(constant_value(conv.filter), np.float64) * scale.reshape(-1, 1, 1, 1)
        made = new_constant(filt, dtype, name, store)
        return made.value, made.out.type

    source = conv.filter.owner.value if isinstance(conv.filter.owner, ConstOp) else conv.filter
    value, type_ = derived(("scaled filter", store.key, source, digest(scale), dtype, name), scaled)
    consts = [ConstOp(value, type_, name)]
    if bias is not None:
        consts.append(new_constant(bias, dtype, f"{conv.label}.bias", store))
    rewriter.insert(consts)
    return Conv2DOp([conv.x, *(c.out for c in consts)], dict(conv.properties))


class FoldBatchNormIntoConv(FusionPattern):
    """Conv2D -> BatchNorm: w' = w * g / sqrt(v + eps), b' = (b - mean) * g / sqrt(v + eps) + beta."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, bn: BatchNormOp, rewriter: PatternRewriter) -> None:
        if not isinstance(bn.x.owner, Conv2DOp):
            return
        self.matched(bn)
        conv = _conv_feeding(bn.x)
        if conv is None:
            return
        params = [constant_value(v) for v in (bn.scale, bn.offset, bn.mean, bn.variance)]
        if any(p is None for p in params):
            return
        scale, offset, mean, variance = (np.asarray(p, np.float64) for p in params)
        factor = scale / np.sqrt(variance + bn.props.float("epsilon"))
        new = _folded_conv(conv, factor, (_bias_of(conv) - mean) * factor + offset, rewriter)
        rewriter.replace(bn, new)
        rewriter.erase(conv)
        self.effected()


class FoldScaleIntoConv(FusionPattern):
    """Conv2D -> Mul(s) [-> Add(t)], s and t per channel: w' = w * s, b' = b * s + t."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, mul: MulOp, rewriter: PatternRewriter) -> None:
        source = _conv_and_constant(mul)
        if source is None:
            return
        self.matched(mul)
        conv = _conv_feeding(source)
        out = shape_of(source.type)
        scale = per_channel(_other(mul, source), out)
        if conv is None or scale is None:
            return
        add = next(iter(mul.y.uses)).operation if mul.y.has_one_use() else None
        shift = per_channel(_other(add, mul.y), out) if isinstance(add, AddOp) else None
        bias = None
        if conv.bias is not None or shift is not None:
            bias = _bias_of(conv) * scale + (0.0 if shift is None else shift)
        new = _folded_conv(conv, scale, bias, rewriter)
        if shift is not None:
            assert isinstance(add, AddOp)
            rewriter.replace(add, new)
            rewriter.erase(mul)
        else:
            rewriter.replace(mul, new)
        rewriter.erase(conv)
        self.effected()


class FoldBiasAddIntoConv(FusionPattern):
    """Conv2D without bias -> Add(t), t per channel: the conv with bias t."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, add: AddOp, rewriter: PatternRewriter) -> None:
        source = _conv_and_constant(add)
        if source is None:
            return
        self.matched(add)
        conv = _conv_feeding(source)
        shift = per_channel(_other(add, source), shape_of(source.type))
        if conv is None or conv.bias is not None or shift is None:
            return
        bias = new_constant(shift, dtype_of(conv.y.type), f"{conv.label}.bias", store_around(conv))
        rewriter.insert(bias)
        rewriter.replace(add, Conv2DOp([conv.x, conv.filter, bias.out], dict(conv.properties)))
        rewriter.erase(conv)
        self.effected()


class ConvAsFullyConnection(FusionPattern):
    """A Conv2D whose kernel is as large as its input is a FullyConnection over C*H*W.

    Its one window reads every input cell once, whatever the strides; a dilation
    above 1 along a kernel dim above 1 would not fit the input, so the verifier
    has ruled it out. Padding would add windows, groups would split K."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, conv: Conv2DOp, rewriter: PatternRewriter) -> None:
        x, w = shape_of(conv.x.type), shape_of(conv.filter.type)
        if x[2:] != w[2:]:
            return
        self.matched(conv)
        if conv.props.int("groups", 1) != 1 or any(conv.props.ints("pads")):
            return
        props = {"num_output": int_attr(w[0]), "transpose": bool_attr(False), "axis": int_attr(1)}
        operands = [conv.x, conv.filter] + ([conv.bias] if conv.bias is not None else [])
        rewriter.replace(conv, FullyConnectionOp(operands, props, conv.label))
        self.effected()


@fusion_pass
class ConvBatchnormFusionPass(FusionPass):
    """Fold an inference BatchNorm into the Conv2D before it (filter and bias)."""

    name = "ConvBatchnormFusionPass"
    band = Band.TOP

    def patterns(self, counts: FusionCounts) -> Sequence[RewritePattern]:
        return [FoldBatchNormIntoConv(counts)]


@fusion_pass
class ConvScaleFusionPass(FusionPass):
    """Fold a per-channel Mul (and an Add after it) into the Conv2D before it."""

    name = "ConvScaleFusionPass"
    band = Band.TOP

    def patterns(self, counts: FusionCounts) -> Sequence[RewritePattern]:
        return [FoldScaleIntoConv(counts)]


@fusion_pass
class AABiasaddConvFusion(FusionPass):
    """Make a per-channel constant Add after a bias-free Conv2D the conv's bias."""

    name = "AABiasaddConvFusion"
    band = Band.MAIN

    def patterns(self, counts: FusionCounts) -> Sequence[RewritePattern]:
        return [FoldBiasAddIntoConv(counts)]


@fusion_pass
class ConvToFullyConnectionFusionPass(FusionPass):
    """Turn a Conv2D whose kernel covers its whole unpadded input into a FullyConnection."""

    name = "ConvToFullyConnectionFusionPass"
    band = Band.MAIN

    def patterns(self, counts: FusionCounts) -> Sequence[RewritePattern]:
        return [ConvAsFullyConnection(counts)]
