"""Sequence-first attention run batch-first: ViT's layout transposes removed.

torch.nn.MultiheadAttention with batch_first=True is exported sequence-first: a
Transpose (perm 1,0,2) turns the [N, L, E] hidden states into [L, N, E], the
attention runs on that (MultiHeadAttentionFusionPass fuses it in SBH), the output
projection works on its rows ([L*N, E] or [L, N, E]) and a second Transpose turns the
result back into [N, L, E]. Each transpose is a kernel, and a [L, 1, E] tensor in
FRACTAL_NZ pads its batch dim 1 to 16 rows, which the fused attention then reads.
AttentionLayoutFusionPass rewrites three things, each exact:

- a MultiHeadAttention in SBH whose query, key and value are one Transpose(1,0,2)
  of x, which nothing else reads, becomes a BSH one on x followed by Transpose(1,0,2)
  of its result (the scores [B, H, S, S], so the mask, are the same in both layouts);
- a Transpose(1,0,2) whose result flows through row-wise ops to another
  Transpose(1,0,2) (or a ConfusionTransposeD reshaping and then transposing so)
  leaves with it: permuting the rows commutes with an op that maps each row on its
  own, so the chain is rebuilt on the untransposed rows. Row-wise here: a Reshape
  between [L, N, C] and [L*N, C] (the rows merged or split, C kept), a MatMulV2 or
  BatchMatMulV2 of the rows by a 2-D weight (bias over the last dim), an Add of a
  value broadcast over the rows. Every value of the chain must have no other user.
  The rebuilt rows stay [N, L, C]: the Reshapes go and a MatMulV2 of merged rows
  becomes a BatchMatMulV2 of the 3-D ones by its weight, which the lowering tiles as
  one matmul of every row and UB fusion joins with the residual Add after it (the
  2-D form needed TransData to and from ND around it on the 310P3);
- then, everywhere, a Transpose (or ConfusionTransposeD) that moves only size-1 axes
  is a Reshape: the elements keep their row-major order (at batch 1 the transpose
  left after the attention, when no chain removed it, is such a one).

The third runs after the first two have finished, so that it does not turn the
transposes they look for into Reshapes first. Static shapes only: a dynamic dim is
left alone. The pass runs in `Band.DOWN`, after the attention fusion has made the
MultiHeadAttention and TransposeReshapeFusionPass the ConfusionTransposeD.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from dialects import shapes
from dialects.ascend_graph import (
    AddOp,
    BatchMatMulOp,
    ConfusionTransposeOp,
    MatMulV2Op,
    MultiHeadAttentionOp,
    ReshapeOp,
    TransposeOp,
    bool_attr,
    ints,
    shape_of,
)
from passes.fusion import Band, FusionCounts, FusionPass, FusionPattern, fusion_pass
from passes.graph_match import node_name

SWAP = (1, 0, 2)
"""The perm exchanging the two leading dims of a 3-D tensor: [N, L, E] <-> [L, N, E]."""


def _swap(value: SSAValue) -> TransposeOp | None:
    """The Transpose(1,0,2) of a static 3-D tensor defining `value`, else None."""
    op = value.owner
    if not isinstance(op, TransposeOp) or op.props.ints("perm") != SWAP:
        return None
    return op if shapes.is_static(shape_of(op.x.type)) else None


class SequenceFirstAttention(FusionPattern):
    """MultiHeadAttention SBH on Transpose(1,0,2) of x -> Transpose(1,0,2) of a BSH one on x."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, mha: MultiHeadAttentionOp, rewriter: PatternRewriter) -> None:
        swap = _swap(mha.query)
        if mha.props.str("input_layout") != "SBH" or swap is None:
            return
        self.matched(mha)
        if not (mha.key is mha.query and mha.value is mha.query):
            return
        if sum(1 for _ in swap.y.uses) != 3:  # query, key and value only
            return
        props = {"head_num": mha.head_num, "scale": mha.scale, "input_layout": StringAttr("BSH")}
        batch_first = MultiHeadAttentionOp([swap.x] * 3 + list(mha.operands[3:]), props, node_name(mha))
        back = TransposeOp([batch_first], {"perm": ints(SWAP)})
        rewriter.replace(mha, [batch_first, back])
        rewriter.erase(swap)
        self.effected()


@dataclass(frozen=True)
class _Step:
    """One row-wise op of a chain: the op and which operand carries the rows."""

    op: Operation
    operand: int


def _row_wise(op: Operation, value: SSAValue, lead: tuple[int, int]) -> int | None:
    """Which operand of `op` `value` is, when `op` maps the rows of `value` ([L, N, C]
    or [L*N, C], with `lead` = (L, N)) each on its own, else None. (A MatMulV2 takes
    2-D operands only, so its rows are the merged ones.)"""
    if isinstance(op, ReshapeOp) and op.x is value:
        out = shape_of(op.y.type)
        same_columns = out[-1:] == shape_of(value.type)[-1:]
        return 0 if same_columns and out[:-1] in ((lead[0] * lead[1],), lead) else None
    if isinstance(op, MatMulV2Op) and op.x1 is value and not op.props.bool("transpose_x1"):
        return 0 if _by_weight(op, value) else None
    if isinstance(op, BatchMatMulOp) and op.x1 is value and not op.props.bool("adj_x1"):
        return 0 if _by_weight(op, value) else None
    if isinstance(op, AddOp) and op.y.type == value.type:
        for index, other in ((0, op.x2), (1, op.x1)):
            if op.operands[index] is value and other is not value and _over_rows(other, value):
                return index
    return None


def _by_weight(op: MatMulV2Op | BatchMatMulOp, rows: SSAValue) -> bool:
    """The matmul multiplies `rows` by a 2-D weight, its bias broadcast over the rows."""
    if len(shape_of(op.x2.type)) != 2 or op.x2 is rows:
        return False
    return op.bias is None or (op.bias is not rows and _over_rows(op.bias, op.y))


def _over_rows(other: SSAValue, value: SSAValue) -> bool:
    """`other` broadcasts over the rows of `value`: it has no more dims, all 1 but the last."""
    shape = shape_of(other.type)
    return len(shape) <= len(shape_of(value.type)) and all(d == 1 for d in shape[:-1])


class SwapThroughRows(FusionPattern):
    """Transpose(1,0,2) -> row-wise ops -> Transpose(1,0,2): the ops on the untransposed rows.

    Anchored on the first Transpose; the chain ends at a Transpose(1,0,2) of [L, N, C]
    or at a ConfusionTransposeD that reshapes to [L, N, C] and then swaps."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, first: TransposeOp, rewriter: PatternRewriter) -> None:
        if _swap(first.y) is None:
            return
        length, batch = shape_of(first.y.type)[:2]
        lead, value, steps = (length, batch), first.y, []
        while value.has_one_use():
            op = value.get_user_of_unique_use()
            assert op is not None
            if self._ends(op, value, lead):
                self.matched(first)
                self._rewrite(first, steps, op, rewriter)
                self.effected()
                return
            operand = _row_wise(op, value, lead)
            if operand is None or len(op.results) != 1:
                return
            steps.append(_Step(op, operand))
            value = op.results[0]

    @staticmethod
    def _ends(op: Operation, value: SSAValue, lead: tuple[int, int]) -> bool:
        """`op` swaps `value`'s rows back: [L, N, C] -> [N, L, C]."""
        columns = shape_of(value.type)[-1]
        if isinstance(op, TransposeOp):
            return op.props.ints("perm") == SWAP and shape_of(value.type) == (*lead, columns)
        if isinstance(op, ConfusionTransposeOp) and not op.props.bool("transpose_first"):
            reshaped = shapes.reshape(shape_of(value.type), op.props.ints("shape"))
            return op.props.ints("perm") == SWAP and reshaped == (*lead, columns)
        return False

    @staticmethod
    def _rewrite(first: TransposeOp, steps: Sequence[_Step], end: Operation, rewriter: PatternRewriter) -> None:
        """Rebuild each step before itself on the untransposed rows, kept as [N, L, C]:
        the Reshapes merging and splitting the rows go, a MatMulV2 of merged rows is a
        BatchMatMulV2 of the 3-D ones by the same weight (one matmul of every row)."""
        value = first.x
        for step in steps:
            op = step.op
            if isinstance(op, ReshapeOp):
                continue
            if isinstance(op, MatMulV2Op):
                props = {"adj_x1": bool_attr(False), "adj_x2": op.transpose_x2}
                new: Operation = BatchMatMulOp([value, *op.operands[1:]], props, node_name(op))
            else:
                operands = list(op.operands)
                operands[step.operand] = value
                new = type(op)(operands, dict(op.properties))
            new.results[0].name_hint = op.results[0].name_hint
            rewriter.insert(new, InsertPoint.before(op))
            value = new.results[0]
        rewriter.replace(end, [], [value])
        for step in reversed(steps):
            rewriter.erase(step.op)
        rewriter.erase(first)


def _moves_only_ones(shape: Sequence[int], perm: Sequence[int]) -> bool:
    """Transposing `shape` by `perm` keeps the order of its dims that are not 1."""
    kept = [p for p in perm if shape[p] != 1]
    return kept == sorted(kept)


class UnitAxesTranspose(FusionPattern):
    """A Transpose or ConfusionTransposeD moving only size-1 axes -> a Reshape."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: TransposeOp | ConfusionTransposeOp, rewriter: PatternRewriter) -> None:
        source, out = shape_of(op.x.type), shape_of(op.y.type)
        if not (shapes.is_static(source) and shapes.is_static(out)):
            return
        perm = op.props.ints("perm")
        if isinstance(op, ConfusionTransposeOp) and not op.props.bool("transpose_first"):
            source = shapes.reshape(source, op.props.ints("shape"))
        if len(perm) != len(source) or not _moves_only_ones(source, perm):
            return
        self.matched(op)
        rewriter.replace(op, ReshapeOp([op.x], {"shape": ints(out)}, node_name(op)))
        self.effected()


@fusion_pass
@dataclass(frozen=True)
class AttentionLayoutFusionPass(FusionPass):
    """Run sequence-first attention batch-first and drop the transposes around it."""

    name = "AttentionLayoutFusionPass"
    band: ClassVar[Band] = Band.DOWN

    def fuse(self, module: ModuleOp, counts: FusionCounts) -> None:
        """The layout rewrites to a fixpoint, then the size-1 transposes left become Reshapes."""
        rewrites: list[RewritePattern] = [SequenceFirstAttention(counts), SwapThroughRows(counts)]
        PatternRewriteWalker(GreedyRewritePatternApplier(rewrites)).rewrite_module(module)
        PatternRewriteWalker(UnitAxesTranspose(counts)).rewrite_module(module)
