"""AutomaticUbFusion: elementwise, broadcast and row-reduction ops joined producer to consumer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import Operation

from dialects import ascend_graph as ag
from dialects.kernel_boundary import is_no_task
from ge.core import soc as socs
from passes.fusion import Band, fusion_pass
from passes.ub_fusion.footprint import Footprint
from passes.ub_fusion.scopes import (
    Group,
    ScopeGraph,
    UbFusionPass,
    broadcasts_into,
    is_elementwise,
    is_row_reduction,
    reduction_cut,
    tile_of,
)


@fusion_pass
@dataclass(frozen=True)
class AutomaticUbFusion(UbFusionPass):
    """UB fusion: merge elementwise/broadcast producers and consumers (and reductions) into one kernel."""

    name = "AutomaticUbFusion"
    band = Band.DOWN

    def scopes(self, graph, soc, counts):
        merger = _Merger(graph, soc)
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
                if merger.merge([mine, *attempt]) and attempt is theirs:
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


class _Merger:
    """Merges groups into one scope when the union fits the UB and is convex.

    Ops are visited in program order, so the op being merged usually comes after
    every op of the groups it joins: the earliest group then takes the others' ops
    at its end, its footprint (`Footprint`) and its users outside it are updated
    by what joins, and a chain of n ops merges in O(n log n), not n^2. Groups that
    interleave are merged by recomputing the union's footprint.
    """

    def __init__(self, graph: ScopeGraph, soc: socs.SocProfile):
        self.graph = graph
        self.soc = soc
        self.footprints: dict[Group, Footprint] = {}
        self.exits: dict[Group, set[Operation]] = {}
        """The users of a group's ops outside it: where a path leaving it starts."""

    def merge(self, groups: Sequence[Group]) -> bool:
        """Merge the groups if the union fits and is convex; whether it does."""
        pos = self.graph.pos
        base = min(groups, key=lambda g: (pos[g.ops[0]], -len(g.ops)))
        footprint = self._footprint(base)
        if footprint is None:
            return False
        rest = sorted({op for g in groups if g is not base for op in g.ops if op not in footprint.members}, key=pos.__getitem__)
        if not rest:
            return True
        cuts = {reduction_cut(op) for op in rest if isinstance(op, ag.ReduceOp)}
        tile = footprint.tile
        if pos[rest[0]] < pos[base.ops[-1]] or (cuts and tile.kind == "block"):
            return self._merge_anew(groups)
        if tile.kind == "rows" and not (cuts <= {(tile.shape, tile.first_axis)} and all(broadcasts_into(op, tile.shape) for op in rest)):
            return False
        exits = self._exits(base)
        footprint.checkpoint()
        for op in rest:
            footprint.append(op)
        members = footprint.members
        starts = [u for u in exits if u not in members]
        starts += [u for op in rest for u in self.graph.users(op) if u not in members]
        if not footprint.fits() or self._cyclic(members, starts, rest[-1]):
            footprint.rollback()
            return False
        footprint.commit()
        if self.graph.group.get(base.ops[0]) is base:
            self.graph.extend(base, rest)
        else:
            base.ops.extend(rest)
            self.graph.add(base)
        self._forget(groups)
        self.footprints[base] = footprint
        self.exits[base] = set(starts)
        return True

    def _merge_anew(self, groups: Sequence[Group]) -> bool:
        ops = sorted({op for g in groups for op in g.ops}, key=self.graph.pos.__getitem__)
        tile = tile_of(ops)
        if tile is None:
            return False
        footprint = Footprint(tile, self.soc, ops)
        members = footprint.members
        starts = [u for op in ops for u in self.graph.users(op) if u not in members]
        if not footprint.fits() or self._cyclic(members, starts, ops[-1]):
            return False
        group = Group(ops)
        self.graph.add(group)
        self._forget(groups)
        self.footprints[group] = footprint
        self.exits[group] = set(starts)
        return True

    def _cyclic(self, members: set[Operation], starts: list[Operation], last: Operation) -> bool:
        """Whether a path leaves the would-be scope and comes back (`ScopeGraph.convex`)."""
        return self.graph.reaches(members, members, starts, self.graph.bound(self.graph.pos[last]))

    def _footprint(self, group: Group) -> Footprint | None:
        footprint = self.footprints.get(group)
        if footprint is not None:
            return footprint
        tile = tile_of(group.ops)
        return None if tile is None else Footprint(tile, self.soc, group.ops)

    def _exits(self, group: Group) -> set[Operation]:
        exits = self.exits.get(group)
        if exits is not None:
            return exits
        members = set(group.ops)
        return {u for op in group.ops for u in self.graph.users(op) if u not in members}

    def _forget(self, groups: Sequence[Group]) -> None:
        for g in groups:
            self.footprints.pop(g, None)
            self.exits.pop(g, None)
