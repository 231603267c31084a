"""Canonicalization patterns of `ascend_graph` (what `-p canonicalize` rewrites beside
the folds of `FoldsToOperand`): a reshape of a reshape is one reshape, and a
negation of a negation is the value itself. Each pattern keeps every value exact."""

from __future__ import annotations

from xdsl.dialects.builtin import DenseArrayBase, i64
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from dialects import ascend_graph as ag
from dialects.shapes import is_static


class ReshapeOfReshape(RewritePattern):
    """reshape(reshape(x)) -> reshape(x) to the outer result's (static) shape."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ag.ReshapeOp, rewriter: PatternRewriter) -> None:
        inner = op.x.owner
        shape = ag.shape_of(op.y.type)
        if not isinstance(inner, ag.ReshapeOp) or not is_static(shape):
            return
        props = {**op.properties, "shape": DenseArrayBase.from_list(i64, shape)}
        rewriter.replace(op, ag.ReshapeOp([inner.x], props, None, [op.y.type]))


class NegOfNeg(RewritePattern):
    """-(-x) -> x."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ag.NegOp, rewriter: PatternRewriter) -> None:
        inner = op.x.owner
        if isinstance(inner, ag.NegOp) and inner.x.type == op.y.type:
            rewriter.replace(op, [], [inner.x])


PATTERNS: tuple[RewritePattern, ...] = (ReshapeOfReshape(), NegOfNeg())
