"""MatmulTransdataFusionPass: a matmul scope writes its ND result itself."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Operation

from dialects import ascend_graph as ag
from dialects.kernel_boundary import SCOPE_ATTR, is_aicpu, is_no_task, op_type
from ge.core import soc as socs
from passes.fusion import Band, FusionCounts, fusion_pass
from passes.ub_fusion.scopes import (
    BATCH_MATMUL_TYPES,
    MATMUL_TYPES,
    Group,
    ScopeGraph,
    UbFusionPass,
    fits,
    next_scope,
)


def _trans_data(op: Operation | None, src: str, dst: str) -> bool:
    return isinstance(op, ag.TransDataOp) and (op.props.str("src_format"), op.props.str("dst_format")) == (src, dst)


@fusion_pass
@dataclass(frozen=True)
class MatmulTransdataFusionPass(UbFusionPass):
    """UB fusion: a matmul scope writes ND itself (the TransData FRACTAL_NZ -> ND after it joins it)."""

    name = "MatmulTransdataFusionPass"
    band = Band.DOWN

    def fuse(self, module: ModuleOp, counts: FusionCounts) -> None:
        profile = socs.load(self.soc_version)
        next_id = next_scope(module)
        for graph in ScopeGraph.of(module):
            for op in graph.ops:
                if op_type(op) not in MATMUL_TYPES | BATCH_MATMUL_TYPES or is_no_task(op) or is_aicpu(op):
                    continue
                scope = graph.group.get(op)
                members = list(scope.ops) if scope is not None else [op]
                after = self._trans_data_after(graph, set(members))
                if not after:
                    continue
                counts.match(op)
                merged = sorted({*members, *after}, key=graph.pos.__getitem__)
                if not fits(merged, profile) or not graph.convex(set(merged)):
                    continue
                if scope is not None and scope.scope is not None:
                    ident = scope.scope
                else:
                    ident, next_id = next_id, next_id + 1
                for member in merged:
                    member.attributes[SCOPE_ATTR] = IntegerAttr(ident, i64)
                graph.add(Group(merged, ident))
                counts.effect()

    @staticmethod
    def _trans_data_after(graph: ScopeGraph, members: set[Operation]) -> list[Operation]:
        """The TransData FRACTAL_NZ -> ND that alone uses the scope's one output, when
        free, or with the Cast after it when `TransdataCastFusionPass` paired them."""
        outputs = graph.escaping(members)
        if len(outputs) != 1:
            return []
        users = {u.operation for u in outputs[0].uses}
        after = users.pop() if len(users) == 1 else None
        if not _trans_data(after, "FRACTAL_NZ", "ND") or is_no_task(after):
            return []
        assert after is not None
        pair = graph.group.get(after)
        if pair is None:
            return [after]
        cast = pair.ops[-1]
        return list(pair.ops) if len(pair.ops) == 2 and pair.ops[0] is after and isinstance(cast, ag.CastOp) else []
