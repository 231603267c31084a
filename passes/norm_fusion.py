"""LayerNorm and softmax graph fusions: ONNX decompositions back into one op each.

Exports below opset 17 spell LayerNorm as ReduceMean, Sub, Pow, ReduceMean, Add,
Sqrt, Div, Mul, Add, and softmax appears as Exp, ReduceSum and Div, with or without
the max shift. GE's LayerNormONNXFusionPass and SoftmaxFusionPass make them one
LayerNorm and one SoftmaxV2, which run as one kernel each and store no intermediate.

Both run in the top band, before the main band's fusions that look for their
ops (MultiHeadAttentionFusionPass matches SoftmaxV2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from dialects import shapes
from dialects.ascend_graph import (
    AddOp,
    ConstOp,
    DivOp,
    ExpOp,
    LayerNormOp,
    MulOp,
    PowOp,
    ReciprocalOp,
    ReduceMaxOp,
    ReduceMeanOp,
    ReduceOp,
    ReduceSumOp,
    RsqrtOp,
    SoftmaxOp,
    SqrtOp,
    SubOp,
    dtype_of,
    float_attr,
    int_attr,
    ints,
    shape_of,
    tensor,
)
from passes.fusion import Band, FusionCounts, FusionPass, FusionPattern, fusion_pass
from passes.graph_match import erase_dead, node_name, other_operand, scalar, sole_user, split_scalar, user


def reduced_axes(op: ReduceOp) -> tuple[int, ...]:
    """The axes a reduction runs over, normalised and sorted (all of them when none are given)."""
    rank = len(shape_of(op.x.type))
    return tuple(sorted(shapes.norm_axes(op.props.ints("axes"), rank))) or tuple(range(rank))


class LayerNormDecomposition(FusionPattern):
    """(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps), or times rsqrt(...), then
    optionally * gamma and + beta, into LayerNorm from the first reduced axis.

    Exact only when: both means reduce the same trailing axes with keep_dims; the
    square is Pow by exactly 2 or d * d; eps is a one-element constant added to the
    variance without broadcasting it; gamma and beta are constants covering only the
    normalised axes; and no intermediate has a user outside the pattern."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, mean: ReduceMeanOp, rewriter: PatternRewriter) -> None:
        x = mean.x
        sub = user(mean.y, SubOp, lambda op: op.x1 is x and op.x2 is mean.y)
        if sub is None:
            return
        d = sub.y
        square = user(d, PowOp, lambda op: op.x1 is d) or user(d, MulOp, lambda op: op.x1 is d and op.x2 is d)
        variance = user(square.y, ReduceMeanOp) if square is not None else None
        shifted = user(variance.y, AddOp) if variance is not None else None
        root = (user(shifted.y, SqrtOp) or user(shifted.y, RsqrtOp)) if shifted is not None else None
        if root is None:
            return
        if isinstance(root, SqrtOp):
            norm = user(d, DivOp, lambda op: op.x1 is d and op.x2 is root.y)
        else:
            norm = user(d, MulOp, lambda op: other_operand(op, d) is root.y)
        if norm is None:
            return
        self.matched(mean)

        rank = len(shape_of(x.type))
        axes = reduced_axes(mean)
        begin = rank - len(axes)
        if axes != reduced_axes(variance) or axes != tuple(range(begin, rank)):
            return
        if not (mean.props.bool("keep_dims") and variance.props.bool("keep_dims")):
            return
        if isinstance(square, PowOp) and (scalar(square.x2) != 2.0 or square.y.type != d.type):
            return
        epsilon = split_scalar(shifted)
        if epsilon is None or epsilon[0] is not variance.y:
            return
        d_uses = 3 if isinstance(square, MulOp) else 2
        singles = (mean.y, square.y, variance.y, shifted.y, root.y)
        if d.uses.get_length() != d_uses or any(v.uses.get_length() != 1 for v in singles):
            return

        chain: list[Operation] = [mean, sub, square, variance, shifted, root, norm]
        gamma = self._affine(norm.y, MulOp, x, begin)
        if gamma is not None:
            chain.append(gamma.owner_op)
        beta = self._affine(chain[-1].results[0], AddOp, x, begin)
        if beta is not None:
            chain.append(beta.owner_op)
        new_ops: list[Operation] = []
        if gamma is None:
            normalised = shape_of(x.type)[begin:]
            if not shapes.is_static(normalised):
                return
            ones = tensor(dtype_of(x.type), normalised)
            new_ops.append(ConstOp(DenseIntOrFPElementsAttr.from_list(ones, [1.0]), ones))
        operands = [x, gamma.value if gamma is not None else new_ops[0].results[0]]
        if beta is not None:
            operands.append(beta.value)
        props = {"begin_norm_axis": int_attr(begin), "epsilon": float_attr(scalar(epsilon[1]))}
        new_ops.append(LayerNormOp(operands, props, node_name(chain[-1])))
        rewriter.replace(chain[-1], new_ops)
        erase_dead(rewriter, reversed(chain[:-1]))
        self.effected()

    @staticmethod
    def _affine(y: SSAValue, cls: type[MulOp] | type[AddOp], x: SSAValue, begin: int) -> _Affine | None:
        """The constant that y's only user (a `cls`) scales or shifts y by, if it
        covers only the normalised axes; the op stays outside the pattern otherwise."""
        op = sole_user(y)
        if not isinstance(op, cls) or op.y.type != y.type:
            return None
        value = other_operand(op, y)
        if value is None or not isinstance(value.owner, ConstOp):
            return None
        x_shape, shape = shape_of(x.type), shape_of(value.type)
        normalised = x_shape[begin:]
        try:
            fits = len(shape) <= len(normalised) and shapes.broadcast(normalised, shape) == normalised
        except shapes.ShapeError:
            return None
        return _Affine(value, op) if fits else None


@dataclass(frozen=True)
class _Affine:
    """gamma or beta, and the Mul or Add applying it."""

    value: SSAValue
    owner_op: Operation


class SoftmaxDecomposition(FusionPattern):
    """exp(x - max(x)) / sum(exp(x - max(x))), or exp(x) / sum(exp(x)), over the same
    axes with keep_dims (divided, or times the reciprocal), into SoftmaxV2.

    The max shift is absorbed only when it is the max of x over exactly the summed
    axes; otherwise the Exp's input is the softmax input, which is the same function.
    Without the shift the two differ in rounding only, and where exp(x) overflows
    (x > 88 in float32, > 11 in float16) the decomposition gives inf/inf = NaN while
    SoftmaxV2, which shifts, stays finite: the fusion only removes failures."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, exp: ExpOp, rewriter: PatternRewriter) -> None:
        e = exp.y
        total = user(e, ReduceSumOp)
        if total is None:
            return
        reciprocal = user(total.y, ReciprocalOp)
        out: DivOp | MulOp | None = user(e, DivOp, lambda op: op.x1 is e and op.x2 is total.y)
        if out is None and reciprocal is not None:
            out = user(e, MulOp, lambda op: other_operand(op, e) is reciprocal.y)
        if out is None:
            return
        self.matched(exp)

        axes = reduced_axes(total)
        if not total.props.bool("keep_dims") or out.y.type != e.type:
            return
        chain: list[Operation] = [exp, total] + ([reciprocal] if isinstance(out, MulOp) else [])
        if e.uses.get_length() != 2 or any(op.results[0].uses.get_length() != 1 for op in chain[1:]):
            return
        source = exp.x
        shift = self._max_shift(exp, axes)
        if shift is not None:
            source = shift[0].x
            chain = [*shift, *chain]
        new = SoftmaxOp([source], {"axes": ints(axes)}, node_name(out))
        rewriter.replace(out, new)
        erase_dead(rewriter, reversed(chain))
        self.effected()

    @staticmethod
    def _max_shift(exp: ExpOp, axes: tuple[int, ...]) -> tuple[ReduceMaxOp, SubOp] | None:
        """The ReduceMax and Sub computing exp's input as x - max(x) over `axes`."""
        sub = exp.x.owner
        if not isinstance(sub, SubOp) or sub.y.uses.get_length() != 1:
            return None
        peak = sub.x2.owner
        if not isinstance(peak, ReduceMaxOp) or peak.x is not sub.x1 or peak.y.uses.get_length() != 1:
            return None
        if reduced_axes(peak) != axes or not peak.props.bool("keep_dims"):
            return None
        return peak, sub


@fusion_pass
@dataclass(frozen=True)
class LayerNormONNXFusionPass(FusionPass):
    """Fuse LayerNorm decompositions (ReduceMean, Sub, Pow, ..., Sqrt, Div [, Mul, Add]) into LayerNorm."""

    name = "LayerNormONNXFusionPass"
    band: ClassVar[Band] = Band.TOP

    def patterns(self, counts: FusionCounts) -> list[RewritePattern]:
        return [LayerNormDecomposition(counts)]


@fusion_pass
@dataclass(frozen=True)
class SoftmaxFusionPass(FusionPass):
    """Fuse softmax decompositions (ReduceMax, Sub, Exp, ReduceSum, Div) into SoftmaxV2."""

    name = "SoftmaxFusionPass"
    band: ClassVar[Band] = Band.TOP

    def patterns(self, counts: FusionCounts) -> list[RewritePattern]:
        return [SoftmaxDecomposition(counts)]
