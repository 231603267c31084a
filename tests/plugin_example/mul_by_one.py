"""An outside fusion pass, written as a user of ge would: `x * 1` becomes `x`.

    ge atc --load-pass-plugin=mul_by_one.py --model=m.onnx --framework=5 --output=m --soc_version=Ascend310P3
    ge-opt --load-pass-plugin=mul_by_one.py m.onnx -p 'MulByOneFusionPass{tolerance=0.0}'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ones import is_ones  # a module beside this file
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from dialects.ascend_graph import MulOp, shape_of
from passes.fusion import FusionCounts, FusionPass, FusionPattern, fusion_pass
from passes.graph_match import constant_value


class DropMulByOne(FusionPattern):
    def __init__(self, counts: FusionCounts, tolerance: float):
        super().__init__(counts)
        self.tolerance = tolerance

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: MulOp, rewriter: PatternRewriter) -> None:
        for x, one in ((op.x1, op.x2), (op.x2, op.x1)):
            value = constant_value(one)  # inline or in the weight store
            if value is None:
                continue
            self.matched(op)
            if not is_ones(value, self.tolerance) or shape_of(x.type) != shape_of(op.y.type) or x.type != op.y.type:
                return  # broadcasting by the constant changes the shape: not the identity
            rewriter.replace(op, [], [x])
            self.effected()
            return


@fusion_pass
@dataclass(frozen=True)
class MulByOneFusionPass(FusionPass):
    """Forward x for x * 1 (an outside pass, loaded as a plug-in)."""

    name = "MulByOneFusionPass"
    tolerance: float = 0.0
    """How far from 1 a constant may be and still count as one."""

    def patterns(self, counts: FusionCounts) -> Sequence[RewritePattern]:
        return [DropMulByOne(counts, self.tolerance)]
