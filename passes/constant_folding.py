"""Constant folding (`constant-folding`).

GE folds constant subgraphs in its prepare phase, before the fusion passes: an op
whose operands are all constants is evaluated once at compile time and replaced by
constants. It is not a GE fusion pass (no `fusion_switch.cfg` entry, nothing in
`fusion_result.json`), so it is a plain `ModulePass` with a kebab-case name.

An op is folded only when every operand is an `ascend_graph.const` (so nothing it
computes depends on a graph input), it is `Pure`, its results have static shapes,
and folding does not grow the constants much: each result has at most
`max_elements` elements, or no more than its operands have together (a Cast or
Transpose of a weight always folds; an Expand of a scalar to a large tensor does
not), and never more than `limits.MAX_FOLDED_BYTES` (a splat constant is one value
in the IR, but its full size once computed). The values come from the reference interpreter (`ge.core.reference.evaluate_op`),
so a folded graph computes what the unfolded one did, bit for bit. An op the
interpreter refuses (an index out of range, say) is left for run time to report.

Results of at most `INLINE_LIMIT` elements stay inline in the IR; larger ones go
to the module's weight store, as the importer does.

An AscendDequant that a cube op reads is not folded: of a constant, it is a
quantized model's int8 weight or int32 bias, which QuantCubeFusionPass (after this
pass) puts on the cube as it is; folded, it would be a float weight four times the
size and the int8 product lost. One that only other ops read folds as any op does.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.traits import Pure

from dialects import shapes
from dialects.ascend_graph import (
    AscendDequantOp,
    AscendOp,
    ConstOp,
    CubeOp,
    DataOp,
    NetOutputOp,
)
from ge.core import dtypes
from ge.core.errors import GEError
from ge.core.limits import MAX_FOLDED_BYTES, tensor_bytes
from ge.core.reference import evaluate_op
from passes.graph_match import constant_value, new_constant, store_around

# ----------------------------------------------------------------------------- folding


def _bytes(type: TensorType) -> int:
    return tensor_bytes(type.get_shape(), dtypes.to_numpy(type.element_type).itemsize)


class FoldConstantOp(RewritePattern):
    """An op computed from constants only becomes the constants it computes."""

    def __init__(self, max_elements: int):
        self.max_elements = max_elements

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AscendOp, rewriter: PatternRewriter) -> None:
        if isinstance(op, ConstOp | DataOp | NetOutputOp) or not op.operands:
            return
        if isinstance(op, AscendDequantOp) and any(isinstance(use.operation, CubeOp) for use in op.y.uses):
            return
        if not op.has_trait(Pure):
            return
        if not all(isinstance(v.owner, ConstOp) for v in op.operands):
            return
        types = [r.type for r in op.results]
        if not all(isinstance(t, TensorType) and shapes.is_static(t.get_shape()) for t in types):
            return
        given = sum(shapes.numel(v.type.get_shape()) for v in op.operands)  # type: ignore[attr-defined]
        if any(shapes.numel(t.get_shape()) > max(self.max_elements, given) for t in types):  # type: ignore[union-attr]
            return
        if any(_bytes(t) > MAX_FOLDED_BYTES for t in types):  # type: ignore[arg-type]
            return  # a splat operand is small in the IR, not in memory
        store = store_around(op)
        try:
            values = evaluate_op(op, [constant_value(v) for v in op.operands], store)  # type: ignore[arg-type]
        except GEError:
            return  # the op fails on these values: leave it to fail at run time, as it would
        names = [op.label] if len(types) == 1 else [f"{op.label}:{i}" for i in range(len(types))]
        folded = [
            new_constant(value, t.element_type, name, store)  # type: ignore[union-attr]
            for value, t, name in zip(values, types, names)
        ]
        rewriter.replace(op, folded, [c.out for c in folded])


@dataclass(frozen=True)
class ConstantFoldingPass(ModulePass):
    """Evaluate ops whose operands are all constants and replace them by constants (GE prepare phase)."""

    name = "constant-folding"

    max_elements: int = 1 << 16
    """A result may have this many elements, or as many as its operands together."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        walker = PatternRewriteWalker(GreedyRewritePatternApplier([FoldConstantOp(self.max_elements)]))
        walker.rewrite_module(op)
