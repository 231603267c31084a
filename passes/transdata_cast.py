"""TransdataCastFusionPass: a Cast and the TransData beside it become one kernel.

Under `force_fp16` a float32 graph input gets a Cast to float16 and then a TransData
to the device format (NCHW -> NC1HWC0), and a float32 output a TransData back and a
Cast to float32: two vector kernels, each reading and writing the whole tensor in
global memory, where the float32 graph has one. GE's pass of this name makes the
pair one TransData that converts the dtype too. Here the two ops keep their meaning
and get one kernel scope (`_fusion_scope`): the vector lowering already computes
a scope's ops tile by tile in the Unified Buffer (the cast, then the layout change
with VNCHWCONV), so a fused op would only repeat both ops' semantics. As in GE it is a
graph fusion pass, run right after format selection (`AFTER_FORMAT_SELECTION`),
when the TransData exist.

It fuses a Cast whose one user is a TransData, or a TransData whose one user is a
Cast, when neither is in a scope or `_no_task` and the pair fits the UB. A pair
TransData FRACTAL_NZ -> ND and Cast after a matmul then joins the matmul's kernel
(`MatmulTransdataFusionPass`): the cube's epilogue casts the NZ tile and stores it
in ND, so the float32 output of a float16 matmul costs no kernel of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from xdsl.ir import Operation

from dialects import ascend_graph as ag
from ge.core import soc as socs
from passes.fusion import Band, FusionCounts, FusionKind, fusion_pass
from passes.ub_fusion.scopes import Group, ScopeGraph, UbFusionPass, fits, single_user_of, unscoped


@fusion_pass
@dataclass(frozen=True)
class TransdataCastFusionPass(UbFusionPass):
    """Cast -> TransData, or TransData -> Cast, becomes one vector kernel."""

    name = "TransdataCastFusionPass"
    kind: ClassVar[FusionKind] = FusionKind.GRAPH
    """GE's kind: a graph fusion pass, though what it makes is a kernel scope."""
    band = Band.DOWN
    """After TransdataTransdataPass, which may cancel a TransData this pass would take."""

    def scopes(self, graph: ScopeGraph, soc: socs.SocProfile, counts: FusionCounts) -> Iterator[list[Operation]]:
        for op in list(graph.ops):
            pair = _pair(graph, op)
            if pair is None:
                continue
            counts.match(op)
            if not fits(pair, soc):
                continue
            graph.add(Group(pair))
            yield pair


def _pair(graph: ScopeGraph, first: Operation) -> list[Operation] | None:
    """[first, its one user] when they are a free Cast and TransData, in either order."""
    if not isinstance(first, ag.CastOp | ag.TransDataOp) or not unscoped(graph, first):
        return None
    second = single_user_of(first)
    if second is None or not unscoped(graph, second):
        return None
    if isinstance(first, ag.CastOp) and isinstance(second, ag.TransDataOp):
        return [first, second]
    if isinstance(first, ag.TransDataOp) and isinstance(second, ag.CastOp):
        return [first, second]
    return None
