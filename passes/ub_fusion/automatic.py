"""AutomaticUbFusion: elementwise, broadcast and row-reduction ops joined producer to consumer."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation

from dialects.kernel_boundary import is_no_task
from passes.fusion import Band, fusion_pass
from passes.ub_fusion.scopes import (
    Group,
    ScopeGraph,
    UbFusionPass,
    fits,
    is_elementwise,
    is_row_reduction,
)


@fusion_pass
@dataclass(frozen=True)
class AutomaticUbFusion(UbFusionPass):
    """UB fusion: merge elementwise/broadcast producers and consumers (and reductions) into one kernel."""

    name = "AutomaticUbFusion"
    band = Band.DOWN

    def scopes(self, graph, soc, counts):
        for op in graph.ops:
            if not self._eligible(graph, op):
                continue
            mine = self._group(graph, op)
            theirs: list[Group] = []
            for producer in graph.producers(op):
                group = self._group(graph, producer) if self._eligible(graph, producer) else None
                if group is not None and group is not mine and all(group is not g for g in theirs):
                    theirs.append(group)
            for group in theirs:
                counts.match(group.ops[0])
            # All producers at once first: a value used by `op` and made by one of
            # them stays inside, so the union may fit where a pair does not.
            attempts = [theirs] + ([[g] for g in theirs] if len(theirs) > 1 else [])
            for attempt in attempts:
                if not attempt:
                    continue
                mine = self._group(graph, op)
                if any(group is mine for group in attempt):
                    continue
                merged = sorted({o for g in (mine, *attempt) for o in g.ops}, key=graph.pos.__getitem__)
                if fits(merged, soc) and graph.convex(set(merged)):
                    graph.add(Group(merged))
                    if attempt is theirs:
                        break
        new = [g for g in graph.groups if g.scope is None and len(g.ops) > 1]
        yield from (g.ops for g in sorted(new, key=lambda g: graph.pos[g.ops[0]]))

    @staticmethod
    def _eligible(graph: ScopeGraph, op: Operation) -> bool:
        """An elementwise op or keep-dims reduction in no marked scope."""
        if not (is_elementwise(op) or is_row_reduction(op)) or is_no_task(op):
            return False
        group = graph.group.get(op)
        return group is None or group.scope is None

    @staticmethod
    def _group(graph: ScopeGraph, op: Operation) -> Group:
        group = graph.group.get(op)
        return group if group is not None else Group([op])
