"""GELU graph fusion: the erf and tanh formulas exporters write, back into one Gelu.

ONNX has no Gelu before opset 20, so torch writes nn.GELU as
x * 0.5 * (1 + erf(x / sqrt(2))), and its tanh approximation (nn.GELU(approximate=
"tanh"), Hugging Face's gelu_new) as 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715
* x^3))), the products in several orders. GE's GeluONNXFusionPass makes each one
Gelu: one vector kernel instead of eight to eleven, and no intermediate stored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from dialects.ascend_graph import AddOp, ErfOp, GeluOp, MulOp, PowOp, TanhOp
from passes.fusion import Band, FusionCounts, FusionPass, FusionPattern, fusion_pass
from passes.graph_match import (
    erase_dead,
    node_name,
    other_operand,
    scalar,
    scalar_near,
    scaling,
    sole_user,
    split_scalar,
    user,
)

Check = tuple[SSAValue, float]
"""A constant of the formula and the value it must hold."""


def _plus_one(value: SSAValue) -> tuple[AddOp, Check] | None:
    """The user of `value` adding a one-element constant to it, and the check that it is 1."""
    for use in value.uses:
        op = use.operation
        if isinstance(op, AddOp) and (split := split_scalar(op)) is not None and split[0] is value:
            return op, (split[1], 1.0)
    return None


def _product(x: SSAValue, p: SSAValue) -> tuple[list[Operation], list[Check]] | None:
    """The ops multiplying p (1 + erf or 1 + tanh) by x and by 0.5, in graph order,
    in any order exporters write: (x * p) * 0.5, (x * 0.5) * p or x * (p * 0.5),
    each product either way round, and / 2 for * 0.5."""
    first = user(p, MulOp, lambda op: other_operand(op, p) is not None)
    other = other_operand(first, p) if first is not None else None
    if first is None or other is None:
        return None
    if other is x:
        half = scaling(sole_user(first.y), first.y)
        return ([first, half.op], [half.expects(0.5)]) if half is not None else None
    half = scaling(other.owner, x)
    if half is not None:
        return [half.op, first], [half.expects(0.5)]
    last = sole_user(first.y)
    if scalar(other) is None or not isinstance(last, MulOp) or other_operand(last, first.y) is not x:
        return None
    return [first, last], [(other, 0.5)]


class GeluFormula(FusionPattern):
    """The rewrite both forms share: check the constants and single uses, put a Gelu in."""

    approximate: ClassVar[str]

    def fuse(
        self, anchor: Operation, x: SSAValue, ops: list[Operation], checks: list[Check], rewriter: PatternRewriter
    ) -> None:
        """Replace `ops` (in graph order, the last giving the result) by Gelu(x)."""
        self.matched(anchor)
        root = ops[-1]
        if root.results[0].type != x.type:
            return
        if not all(scalar_near(c, want) for c, want in checks):
            return
        if any(op.results[0].uses.get_length() != 1 for op in ops[:-1]):
            return
        rewriter.replace(root, GeluOp([x], {"approximate": StringAttr(self.approximate)}, node_name(root)))
        erase_dead(rewriter, reversed(ops[:-1]))
        self.effected()


class GeluErfFormula(GeluFormula):
    """x * 0.5 * (1 + erf(x / sqrt(2))) -> Gelu(approximate="none"), x / sqrt(2) also
    as x * (1 / sqrt(2)). Each constant must be its value to within the precision of
    its dtype: the fused op uses the exact ones, which changes rounding only."""

    approximate = "none"

    @op_type_rewrite_pattern
    def match_and_rewrite(self, erf: ErfOp, rewriter: PatternRewriter) -> None:
        scaled = scaling(erf.x.owner)
        plus_one = _plus_one(erf.y)
        if scaled is None or plus_one is None:
            return
        one, one_check = plus_one
        product = _product(scaled.base, one.y)
        if product is None:
            return
        tail, tail_checks = product
        checks = [scaled.expects(1 / math.sqrt(2)), one_check, *tail_checks]
        self.fuse(erf, scaled.base, [scaled.op, erf, one, *tail], checks, rewriter)


class GeluTanhFormula(GeluFormula):
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) -> Gelu(approximate=
    "tanh"), x^3 as Pow(x, 3) (exactly 3) or x * (x * x) either way round."""

    approximate = "tanh"

    @op_type_rewrite_pattern
    def match_and_rewrite(self, tanh: TanhOp, rewriter: PatternRewriter) -> None:
        outer = scaling(tanh.x.owner)
        plus_one = _plus_one(tanh.y)
        if outer is None or plus_one is None or not isinstance(outer.base.owner, AddOp):
            return
        cubic = self._cubic(outer.base.owner)
        if cubic is None:
            return
        x, inner_ops, inner_checks = cubic
        one, one_check = plus_one
        product = _product(x, one.y)
        if product is None:
            return
        tail, tail_checks = product
        ops = [*inner_ops, outer.op, tanh, one, *tail]
        checks = [*inner_checks, outer.expects(math.sqrt(2 / math.pi)), one_check, *tail_checks]
        self.fuse(tanh, x, ops, checks, rewriter)

    @staticmethod
    def _cubic(add: AddOp) -> tuple[SSAValue, list[Operation], list[Check]] | None:
        """x, the ops of x + 0.044715 * x^3 in graph order, and the check of 0.044715."""
        for x, term in ((add.x1, add.x2), (add.x2, add.x1)):
            scaled = scaling(term.owner)
            if scaled is None:
                continue
            cube = scaled.base.owner
            if isinstance(cube, PowOp) and cube.x1 is x and scalar(cube.x2) == 3.0 and cube.y.type == x.type:
                return x, [cube, scaled.op, add], [scaled.expects(0.044715)]
            square = other_operand(cube, x) if isinstance(cube, MulOp) else None
            inner = square.owner if square is not None else None
            if isinstance(cube, MulOp) and isinstance(inner, MulOp) and inner.x1 is x and inner.x2 is x:
                return x, [inner, cube, scaled.op, add], [scaled.expects(0.044715)]
        return None


@fusion_pass
@dataclass(frozen=True)
class GeluONNXFusionPass(FusionPass):
    """Fuse GELU formulas (erf form and tanh approximation) into Gelu."""

    name = "GeluONNXFusionPass"
    band: ClassVar[Band] = Band.TOP

    def patterns(self, counts: FusionCounts) -> list[RewritePattern]:
        return [GeluErfFormula(counts), GeluTanhFormula(counts)]
