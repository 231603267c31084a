"""The cube-tail UB fusion passes: a cube op and the elementwise ops after it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from dialects import ascend_graph as ag
from dialects.kernel_boundary import op_type
from passes.fusion import Band, FusionCounts, fusion_pass
from passes.ub_fusion.scopes import (
    BATCH_MATMUL_TYPES,
    CONV_TYPES,
    DOUBLE_IN_FORMATS,
    MATMUL_TYPES,
    MAX_SCOPE_OPS,
    Group,
    ScopeGraph,
    UbFusionPass,
    fits,
    is_elementwise,
    single_user_of,
    unscoped,
)


@dataclass(frozen=True)
class CubeTailPass(UbFusionPass):
    """A cube op and the elementwise ops after it, found per anchor by `tail`."""

    anchors: ClassVar[frozenset[str]]

    def scopes(self, graph, soc, counts):
        for op in list(graph.ops):
            if op_type(op) not in self.anchors or not unscoped(graph, op):
                continue
            scope = self.tail(graph, op, counts)
            if scope is None or len(scope) < 2 or not fits(scope, soc):
                continue
            graph.add(Group(scope))
            yield scope

    def tail(self, graph: ScopeGraph, anchor: Operation, counts: FusionCounts) -> list[Operation] | None:
        """Grow the elementwise tail of `anchor` (see the module docstring)."""
        members, inside = [anchor], {anchor}
        best = 1
        horizon = max((graph.pos[u] for u in graph.users(anchor)), default=-1)
        for i in range(graph.pos[anchor] + 1, len(graph.ops)):  # no slice: a copy to the end per anchor is n^2
            op = graph.ops[i]
            if i > horizon or len(members) == MAX_SCOPE_OPS:
                break
            producers = graph.producers(op)
            if not inside.intersection(producers) or not is_elementwise(op) or not unscoped(graph, op):
                continue
            counts.match(anchor)
            if graph.path_exists(inside, {p for p in producers if p not in inside}):
                continue
            members.append(op)
            inside.add(op)
            horizon = max([horizon, *(graph.pos[u] for u in graph.users(op))])
            if len(graph.escaping(inside)) == 1:
                best = len(members)
        return members[:best]


@fusion_pass
@dataclass(frozen=True)
class TbeMatmulElemwiseFusionPass(CubeTailPass):
    """UB fusion: MatMulV2 / GEMM / FullyConnection with its elementwise tail (bias, GELU, residual)."""

    name = "TbeMatmulElemwiseFusionPass"
    anchors = MATMUL_TYPES


@fusion_pass
@dataclass(frozen=True)
class TbeBatchMatmulElementWiseFusionPass(CubeTailPass):
    """UB fusion: BatchMatMulV2 with its elementwise tail."""

    name = "TbeBatchMatmulElementWiseFusionPass"
    anchors = BATCH_MATMUL_TYPES


def _outside_operands_ok(graph: ScopeGraph, op: Operation, inside: set[Operation], chain: Operation) -> bool:
    """`op` takes exactly one input from `chain` and none from elsewhere in the
    scope, and its other inputs do not depend on the scope."""
    from_chain = [v for v in op.operands if v.owner is chain]
    others = {p for p in graph.producers(op) if p is not chain}
    return len(from_chain) == 1 and not others & inside and not graph.path_exists(inside, others)


@fusion_pass
@dataclass(frozen=True)
class TbeCommonRules0FusionPass(CubeTailPass):
    """UB fusion: Conv2D and a chain of up to 5 elementwise ops, each with one input from the chain."""

    name = "TbeCommonRules0FusionPass"
    anchors = CONV_TYPES
    MAX_ELEMWISE: ClassVar[int] = 5

    def tail(self, graph, anchor, counts):
        members, inside = [anchor], {anchor}
        last = anchor
        while len(members) <= self.MAX_ELEMWISE:
            user = single_user_of(last)
            if user is None or not is_elementwise(user) or not unscoped(graph, user):
                break
            counts.match(anchor)
            if not _outside_operands_ok(graph, user, inside, last):
                break
            members.append(user)
            inside.add(user)
            last = user
        return members


def _origin_format(value: SSAValue) -> str:
    t = value.type
    assert isinstance(t, TensorType)
    if isinstance(t.encoding, ag.FormatAttr):
        return t.encoding.origin_format.data
    return "NCHW" if len(t.get_shape()) == 4 else "ND"


@fusion_pass
@dataclass(frozen=True)
class TbeConvDoubleInFusionPass(CubeTailPass):
    """UB fusion: Conv2D + a two-input elementwise op (residual Add) + a one-input activation."""

    name = "TbeConvDoubleInFusionPass"
    band = Band.TOP
    anchors = CONV_TYPES

    def tail(self, graph, anchor, counts):
        first = single_user_of(anchor)
        if first is None or not isinstance(first, ag.BinaryOp) or not unscoped(graph, first):
            return None
        second = single_user_of(first)
        if second is None or not is_elementwise(second) or not unscoped(graph, second):
            return None
        counts.match(anchor)
        if _origin_format(anchor.results[0]) not in DOUBLE_IN_FORMATS:
            return None
        if not _outside_operands_ok(graph, first, {anchor}, anchor):
            return None
        if not _outside_operands_ok(graph, second, {anchor, first}, first):
            return None
        return [anchor, first, second]
