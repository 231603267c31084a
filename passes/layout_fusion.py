"""Layout graph fusions: Reshape, Transpose and Cast chains.

- RedundantReshapeTransposeFusionPass: a Reshape (Flatten, Squeeze, Unsqueeze:
  Reshapes too) to the shape it already has and a Transpose by the identity go;
  a Reshape of any of them becomes one Reshape; a Transpose of a
  Transpose becomes one (or none, when they cancel). GE does this cleanup in its
  own graph passes (trans-op depth fusion, reshape removal) before the fusion
  passes run, and has no fusion-switch name for it; we name it in the style of
  its fusion passes so that it is switched and counted like them, and run it in
  `Band.TOP`, before TransposeReshapeFusionPass pairs what is left.
- TransposeReshapeFusionPass: Transpose -> Reshape, or Reshape -> Transpose,
  becomes one ConfusionTransposeD (`transpose_first` says which came first).
- CastCastFusionPass: Cast A -> B -> C becomes Cast A -> C, and A -> B -> A goes,
  when B holds every value of A exactly: the second Cast then sees the very value
  x had, so converting x directly gives the same result.

Merging two ops needs the intermediate value to have no other user (else both
stay alive and nothing is saved); removing an identity op does not. A Cast A -> C
replacing B -> C is never worse, so CastCastFusionPass fuses whatever else reads B.
"""

from __future__ import annotations

from collections.abc import Sequence

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import i1
from xdsl.ir import Attribute, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from dialects.ascend_graph import (
    CastOp,
    ConfusionTransposeOp,
    FlattenOp,
    ReshapeOp,
    SqueezeOp,
    TransposeOp,
    UnsqueezeOp,
    bool_attr,
    dtype_of,
    ints,
    is_float,
    shape_of,
)
from dialects.shapes import DYN
from ge.core import dtypes
from passes.fusion import Band, FusionCounts, FusionPass, FusionPattern, fusion_pass

RESHAPES = (ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp)
"""Ops that only reinterpret the shape: row-major order is kept."""


def _same_shape(x: SSAValue, y: SSAValue) -> bool:
    """y has x's shape, so a Reshape from x to y is the identity: equal shapes with
    at most one unknown dim (a reshape resolves at most one)."""
    shape = shape_of(x.type)
    return shape == shape_of(y.type) and shape.count(DYN) <= 1


def _replaced(rewriter: PatternRewriter, old: ReshapeOp | TransposeOp, new: ReshapeOp | ConfusionTransposeOp) -> bool:
    """Replace `old` by `new` when it computes the same type; False (and nothing done) otherwise."""
    if new.results[0].type != old.results[0].type:
        return False
    rewriter.replace(old, new)
    return True


class RemoveRedundantReshape(FusionPattern):
    """Reshape of a reshape -> one Reshape; a reshape to the same shape -> nothing."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, reshape: ReshapeOp | FlattenOp | SqueezeOp | UnsqueezeOp, rewriter: PatternRewriter
    ) -> None:
        inner = reshape.x.owner
        chained = isinstance(reshape, ReshapeOp) and isinstance(inner, RESHAPES)
        if chained and reshape.x.has_one_use():
            assert isinstance(inner, RESHAPES)
            self.matched(reshape)
            if _replaced(rewriter, reshape, ReshapeOp([inner.x], dict(reshape.properties))):
                rewriter.erase(inner)
                self.effected()
            return
        if _same_shape(reshape.x, reshape.y):
            self.matched(reshape)
            rewriter.replace(reshape, [], [reshape.x])
            self.effected()
            return
        if chained:
            self.matched(reshape)  # the intermediate has another user: both must stay


def _composed(first: Sequence[int], second: Sequence[int]) -> tuple[int, ...]:
    """The perm of transposing by `first`, then by `second`."""
    return tuple(first[p] for p in second)


class RemoveRedundantTranspose(FusionPattern):
    """Transpose by the identity -> nothing; Transpose of a Transpose -> one (or none)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, transpose: TransposeOp, rewriter: PatternRewriter) -> None:
        perm = transpose.props.ints("perm")
        if perm == tuple(range(len(perm))):
            self.matched(transpose)
            rewriter.replace(transpose, [], [transpose.x])
            self.effected()
            return
        inner = transpose.x.owner
        if not isinstance(inner, TransposeOp):
            return
        self.matched(transpose)
        if not transpose.x.has_one_use():
            return
        perm = _composed(inner.props.ints("perm"), perm)
        if perm == tuple(range(len(perm))):
            rewriter.replace(transpose, [], [inner.x])
        else:
            rewriter.replace(transpose, TransposeOp([inner.x], {"perm": ints(perm)}, transpose.label))
        rewriter.erase(inner)
        self.effected()


class FuseTransposeReshape(FusionPattern):
    """Transpose -> Reshape, or Reshape -> Transpose -> ConfusionTransposeD."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ReshapeOp | TransposeOp, rewriter: PatternRewriter) -> None:
        inner = op.x.owner
        pair = (inner, op) if isinstance(op, ReshapeOp) else (op, inner)
        transpose, reshape = pair
        if not isinstance(transpose, TransposeOp) or not isinstance(reshape, ReshapeOp):
            return
        self.matched(op)
        if not op.x.has_one_use():
            return
        props = {
            "perm": transpose.perm,
            "shape": reshape.shape,
            "transpose_first": bool_attr(inner is transpose),
        }
        if _replaced(rewriter, op, ConfusionTransposeOp([inner.x], props, op.label)):
            rewriter.erase(inner)
            self.effected()


def _holds(src: Attribute, dst: Attribute) -> bool:
    """Every value of element type `src` is a value of `dst` (a Cast to it is exact)."""
    if src == dst or src == i1:
        return True
    if dst == i1 or (is_float(src) and not is_float(dst)):
        return False
    a, b = dtypes.to_numpy(src), dtypes.to_numpy(dst)
    if is_float(src):
        fa, fb = ml_dtypes.finfo(a), ml_dtypes.finfo(b)
        return fb.nmant >= fa.nmant and fb.maxexp >= fa.maxexp and fb.minexp - fb.nmant <= fa.minexp - fa.nmant
    ia = np.iinfo(a)
    if is_float(dst):
        fb = ml_dtypes.finfo(b)
        bits = ia.bits - (ia.min < 0)  # magnitude bits: 2**bits - 1 (and -2**bits) must fit
        return fb.nmant + 1 >= bits and fb.maxexp > bits
    ib = np.iinfo(b)
    return ib.min <= ia.min and ia.max <= ib.max


class FuseCastCast(FusionPattern):
    """Cast A -> B -> C with B holding A exactly: Cast A -> C, or nothing when C is A."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, cast: CastOp, rewriter: PatternRewriter) -> None:
        inner = cast.x.owner
        if not isinstance(inner, CastOp):
            return
        self.matched(cast)
        src, mid, dst = dtype_of(inner.x.type), dtype_of(inner.y.type), dtype_of(cast.y.type)
        if not _holds(src, mid):
            return
        if dst == src:
            rewriter.replace(cast, [], [inner.x])
        else:
            rewriter.replace(cast, CastOp([inner.x], {"dst_type": cast.dst_type}, cast.label))
        self.effected()


@fusion_pass
class RedundantReshapeTransposeFusionPass(FusionPass):
    """Remove identity Reshapes/Transposes and merge Reshape and Transpose chains."""

    name = "RedundantReshapeTransposeFusionPass"
    band = Band.TOP

    def patterns(self, counts: FusionCounts) -> Sequence[RewritePattern]:
        return [RemoveRedundantReshape(counts), RemoveRedundantTranspose(counts)]


@fusion_pass
class TransposeReshapeFusionPass(FusionPass):
    """Fuse a Transpose and a Reshape (either order) into one ConfusionTransposeD."""

    name = "TransposeReshapeFusionPass"

    def patterns(self, counts: FusionCounts) -> Sequence[RewritePattern]:
        return [FuseTransposeReshape(counts)]


@fusion_pass
class CastCastFusionPass(FusionPass):
    """Skip the middle of a Cast chain when it holds every value of the source type."""

    name = "CastCastFusionPass"

    def patterns(self, counts: FusionCounts) -> Sequence[RewritePattern]:
        return [FuseCastCast(counts)]
