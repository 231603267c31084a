"""UB fusion: marking the ops that the build compiles into one kernel.

UB (Unified Buffer) fusion changes no op and no value: it gives every op of a
*scope* the discardable attribute `_fusion_scope = <id> : i64` (ids unique per
module), and the build makes one kernel of each scope, whose intermediate values
stay in the AI core's Unified Buffer instead of going through global memory.

Passes, in the order the pipeline runs them (band, then name):

| pass (GE name)                        | band | scope |
|---------------------------------------|------|-------|
| TbeConvDoubleInFusionPass             | top  | Conv2D + Elemwise1 taking a second tensor (a residual Add) + a one-input Elemwise2 fed only by Elemwise1 |
| TbeBatchMatmulElementWiseFusionPass   | main | BatchMatMulV2 + an elementwise tail |
| TbeCommonRules0FusionPass             | main | Conv2D + a chain of 1..5 elementwise ops, each taking one input from the chain |
| TbeMatmulElemwiseFusionPass           | main | MatMulV2 / GEMM / FullyConnection + an elementwise tail |
| AutomaticUbFusion                     | down | elementwise and broadcast ops (and keep-dims reductions) joined producer to consumer |
| MatmulTransdataFusionPass             | down | a matmul scope and the TransData FRACTAL_NZ -> ND after it |

`TbeConvDoubleInFusionPass` is GE's pass for Conv2D + Elemwise + Elemwise (origin
formats NCHW/NHWC/HWCN only). It runs in the top band so that the generic
`TbeCommonRules0FusionPass` (GE's catch-all "conv + eltwise*N" rule, which GE also
registers after its specific conv passes) does not take its residual blocks first.
GE's `TbeConv2DReluv2Pass` was not used: it fuses ReluV2, the two-output ReLU of
training graphs, which an inference graph does not have.

A cube pass's *tail* grows from the cube op through elementwise users in program
order; each op joins when one of its operands is in the scope and its other
operands cannot be reached from the scope (else the scope would feed itself). The
scope is cut back to the longest prefix with exactly one value used outside it (a
fused cube kernel writes one output), and a scope holds at most
`MAX_SCOPE_OPS` ops, GE's limit for one buffer-fusion pattern. The GELU
decomposition `x * 0.5 * (1 + erf(x / sqrt(2)))`, whose `x` has two users, is such
a tail.

`AutomaticUbFusion` visits ops in program order and merges each eligible op's
group with the groups of its eligible producers (all of them at once, else one
by one: a value passed between them then stays inside, so the union can fit the
UB where a pair cannot), when the merged scope
- is convex: no path leaves it and comes back, even through other scopes, so the
  graph of kernels stays acyclic (GE's cycle detection);
- reduces, if at all, one set of axes of one shape, and every other tensor of it
  broadcasts into that shape (a tile then holds whole rows; a reduction feeding
  elementwise ops, or fed by them, needs nothing else, as TBE's reduce schedules);
- fits the Unified Buffer of the pass's `soc_version` (see `working_set`).
A scope may have several outputs (GE's multi-output UB fusion).

`MatmulTransdataFusionPass` lets a matmul write its result in ND itself (MTE3
stores the fractals row by row): a TransData FRACTAL_NZ -> ND that alone uses the
matmul scope's one output joins the scope. It runs after the elementwise tails are
in that scope. GE's pass of that name also takes the TransData ND -> FRACTAL_NZ
feeding the matmul; here a kernel starts with its cube op (`passes.lowering`), so
that side stays a kernel of its own until the cube program loads ND operands.

The working set of a scope is the peak, over its ops in program order, of the
bytes one tile keeps live in the UB. A tile is the smallest block the scope's
schedule can compute alone:
- with a reduction: whole rows, i.e. the reduction input's axes from the first
  reduced axis on (every tensor takes its own dims on those axes);
- with a cube op: one fractal of its result, 16 x 16 elements of the two innermost
  axes (the cube hands its result to the vector unit fractal by fractal);
- otherwise: one 32-byte block of every tensor (elementwise work splits freely).
Tiles are cut from logical (origin) shapes, the shapes reduction axes and
broadcasting refer to; the padding of a device format is not counted. Each
tensor's tile is rounded up to the UB's alignment (32 bytes). A value from
outside the scope is live from its first to its last use in the scope, one made
inside from its producer to its last use, or to the end of the tile if it leaves
the scope; values loaded from or written to global memory count twice (double
buffering). A cube op's own operands go through L1/L0A/L0B, not the UB.

Which ops make a kernel at all (views, `_no_task` ops and structural ops do not)
is the IR's kernel-boundary vocabulary, `dialects.kernel_boundary`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import IntegerAttr, ModuleOp, TensorType, i64
from xdsl.ir import Operation, SSAValue

from dialects import ascend_graph as ag
from dialects.formats import nbytes
from dialects.kernel_boundary import SCOPE_ATTR, is_no_task, op_type, scope_of
from dialects.shapes import DYN
from ge.core import soc as socs
from ge.core.options import DEFAULT_SOC_VERSION, check_fields, option_field
from passes.fusion import Band, FusionCounts, FusionKind, FusionPass, fusion_pass

MAX_SCOPE_OPS = 10
"""GE's limit on the ops of one buffer-fusion pattern."""
FRACTAL = 16
BLOCK_BYTES = 32

CONV_TYPES = frozenset({"Conv2D"})
MATMUL_TYPES = frozenset({"MatMulV2", "GEMM", "FullyConnection"})
BATCH_MATMUL_TYPES = frozenset({"BatchMatMulV2"})
CUBE_TYPES = CONV_TYPES | MATMUL_TYPES | BATCH_MATMUL_TYPES
DOUBLE_IN_FORMATS = frozenset({"NCHW", "NHWC", "HWCN"})


# ------------------------------------------------------------------ op classes


def is_cube(op: Operation) -> bool:
    return op_type(op) in CUBE_TYPES


def is_elementwise(op: Operation) -> bool:
    """A vector op computing each output element from the same element of its
    (broadcast) inputs."""
    if isinstance(op, ag.IdentityOp):
        return False
    return isinstance(op, ag.UnaryOp | ag.BinaryOp | ag.CastOp | ag.SelectOp | ag.ExpandOp)


def is_row_reduction(op: Operation) -> bool:
    """A reduction that keeps its axes, so that its result broadcasts back."""
    return isinstance(op, ag.ReduceOp) and op.props.bool("keep_dims")


# ------------------------------------------------------------------- the graph


@dataclass(eq=False)
class Group:
    """The ops of one scope (marked, or proposed by a pass)."""

    ops: list[Operation]
    scope: int | None = None


class ScopeGraph:
    """The ops of one graph block in program order, with their scopes contracted.

    Program order is a topological order, so a path between plain ops only goes
    forward; a scope is one node (its kernel runs as a whole), which may join
    ops far apart.
    """

    def __init__(self, block_ops: Iterable[Operation]):
        self.ops = list(block_ops)
        self.pos = {op: i for i, op in enumerate(self.ops)}
        self.group: dict[Operation, Group] = {}
        self._spans: list[tuple[int, int]] | None = None
        marked: dict[int, Group] = {}
        for op in self.ops:
            scope = scope_of(op)
            if scope is not None:
                marked.setdefault(scope, Group([], scope)).ops.append(op)
        for g in marked.values():
            self.add(g)

    @classmethod
    def of(cls, module: ModuleOp) -> list[ScopeGraph]:
        return [cls(g.body.block.ops) for g in module.walk() if isinstance(g, ag.GraphOp)]

    def add(self, group: Group) -> None:
        for op in group.ops:
            self.group[op] = group
        self._spans = None

    @property
    def groups(self) -> list[Group]:
        return list({id(g): g for g in self.group.values()}.values())

    @staticmethod
    def users(op: Operation) -> list[Operation]:
        return [use.operation for r in op.results for use in r.uses]

    @staticmethod
    def producers(op: Operation) -> list[Operation]:
        return [v.owner for v in op.operands if isinstance(v.owner, Operation)]

    def escaping(self, members: set[Operation]) -> list[SSAValue]:
        """The values of `members` used outside them (a net_output is outside)."""
        return [r for op in members for r in op.results if any(u.operation not in members for u in r.uses)]

    def _bound(self, targets: set[Operation]) -> int:
        """A position after which no op can reach `targets`: past the targets, and
        past every scope that starts before that point (a scope may reach back)."""
        if self._spans is None:
            self._spans = sorted((min(map(self.pos.get, g.ops)), max(map(self.pos.get, g.ops))) for g in self.groups)
        bound = max(self.pos[t] for t in targets)
        for lo, hi in self._spans:
            if lo > bound:
                break
            bound = max(bound, hi)
        return bound

    def path_exists(self, sources: set[Operation], targets: set[Operation]) -> bool:
        """Whether a path leaves `sources` and reaches `targets`, scopes contracted."""
        if not targets:
            return False
        bound = self._bound(targets)
        stack = [u for op in sources for u in self.users(op) if u not in sources]
        seen: set[Operation] = set()
        while stack:
            op = stack.pop()
            if op in targets:
                return True
            if op in seen or op in sources or self.pos.get(op, bound + 1) > bound:
                continue
            group = self.group.get(op)
            members = group.ops if group is not None else [op]
            for m in members:
                if m in targets:
                    return True
                seen.add(m)
            stack.extend(u for m in members for u in self.users(m) if u not in seen)
        return False

    def convex(self, members: set[Operation]) -> bool:
        """No path leaves `members` and comes back (the kernel graph stays acyclic)."""
        return not self.path_exists(members, members)


# ---------------------------------------------------------------- working set


def _dims(value: SSAValue) -> tuple[int, ...]:
    """The logical (origin) shape: the one reduction axes and broadcasting refer to."""
    return ag.shape_of(value.type)


@dataclass(frozen=True)
class Tile:
    """How a scope is cut into tiles (see the module docstring): whole `rows` of
    `shape` from `first_axis` on, a cube `fractal`, or a 32-byte `block`."""

    kind: str
    shape: tuple[int, ...] = ()
    first_axis: int = 0

    def elements(self, dims: tuple[int, ...]) -> int:
        """Elements of a tensor of shape `dims` in one tile (0: one block)."""
        if self.kind == "rows":
            aligned = (1,) * (len(self.shape) - len(dims)) + dims
            return _product(aligned[self.first_axis :])
        if self.kind == "fractal":
            return _product(FRACTAL if d == DYN else min(FRACTAL, d) for d in dims[-2:])
        return 0


def _product(values: Iterable[int]) -> int:
    n = 1
    for v in values:
        n *= v
    return n


def tile_of(ops: Sequence[Operation]) -> Tile | None:
    """The tile of a scope; None when none exists: reductions of different axes or
    shapes, a dynamic row, or a tensor that does not broadcast into the rows."""
    reductions = [op for op in ops if isinstance(op, ag.ReduceOp)]
    if not reductions:
        return Tile("fractal") if any(is_cube(op) for op in ops) else Tile("block")
    cuts = set()
    for op in reductions:
        shape = _dims(op.operands[0])
        axes = sorted(a % len(shape) for a in op.props.ints("axes")) or range(len(shape))
        cuts.add((shape, min(axes)))
    if len(cuts) != 1:
        return None
    shape, first = cuts.pop()
    if DYN in shape[first:]:
        return None
    for op in ops:
        for v in (*op.operands, *op.results):
            dims = _dims(v)
            if len(dims) > len(shape) or any(d not in (1, s) for d, s in zip(reversed(dims), reversed(shape))):
                return None
    return Tile("rows", shape, first)


def working_set(ops: Sequence[Operation], soc: socs.SocProfile) -> int | None:
    """Peak UB bytes one tile of the scope `ops` (in program order) keeps live;
    None when the scope has no tile (`tile_of`)."""
    tile = tile_of(ops)
    if tile is None:
        return None
    members = set(ops)
    step_of = {op: i for i, op in enumerate(ops)}
    last = len(ops) - 1
    live: dict[SSAValue, list[int]] = {}
    for step, op in enumerate(ops):
        if not is_cube(op):
            for v in op.operands:
                live.setdefault(v, [step, step])[1] = step
        for r in op.results:
            inner = [step_of[u.operation] for u in r.uses if u.operation in members]
            leaves = len(inner) < r.uses.get_length()
            live[r] = [step, last if leaves else max(inner, default=step)]

    def tile_bytes(v: SSAValue) -> int:
        elements = tile.elements(_dims(v))
        size = BLOCK_BYTES if elements == 0 else soc.align("ub", nbytes(ag.dtype_of(v.type), elements))
        made_inside = isinstance(v.owner, Operation) and v.owner in members
        crosses_gm = not made_inside or any(u.operation not in members for u in v.uses)
        return 2 * size if crosses_gm else size

    sizes = {v: tile_bytes(v) for v in live}
    return max(sum(sizes[v] for v, (lo, hi) in live.items() if lo <= step <= hi) for step in range(len(ops)))


def fits(ops: Sequence[Operation], soc: socs.SocProfile) -> bool:
    size = working_set(ops, soc)
    return size is not None and size <= soc.ub_bytes


def scope_violations(module: ModuleOp, soc: str = DEFAULT_SOC_VERSION) -> list[str]:
    """What is wrong with the module's scopes: a scope that is not convex (the
    kernels would depend on each other in a cycle) or that does not fit the UB."""
    profile = socs.load(soc)
    problems = []
    for graph in ScopeGraph.of(module):
        for g in graph.groups:
            members = set(g.ops)
            names = ", ".join(op_type(op) for op in g.ops)
            if not graph.convex(members):
                problems.append(f"scope {g.scope} ({names}) is not convex")
            size = working_set(g.ops, profile)
            if size is None or size > profile.ub_bytes:
                problems.append(f"scope {g.scope} ({names}) needs {size} bytes of UB, {profile.name} has {profile.ub_bytes}")
    return problems


# ---------------------------------------------------------------------- passes


def _next_scope(module: ModuleOp) -> int:
    return max((s for op in module.walk() if (s := scope_of(op)) is not None), default=-1) + 1


@dataclass(frozen=True)
class UbFusionPass(FusionPass):
    """Base of the UB fusion passes: find scopes graph by graph, mark them."""

    kind: ClassVar[FusionKind] = FusionKind.UB
    soc_version: str = option_field("soc_version")
    """The SoC whose Unified Buffer the scopes must fit."""

    def fuse(self, module: ModuleOp, counts: FusionCounts) -> None:
        check_fields(self)
        profile = socs.load(self.soc_version)
        next_id = _next_scope(module)
        for graph in ScopeGraph.of(module):
            for ops in self.scopes(graph, profile, counts):
                for op in ops:
                    op.attributes[SCOPE_ATTR] = IntegerAttr(next_id, i64)
                next_id += 1
                counts.effect()

    def scopes(self, graph: ScopeGraph, soc: socs.SocProfile, counts: FusionCounts) -> Iterable[list[Operation]]:
        """The new scopes of one graph, each registered in `graph` as it is found."""
        raise NotImplementedError


def _free(graph: ScopeGraph, op: Operation) -> bool:
    """Not in a scope yet and not `_no_task`."""
    return op not in graph.group and not is_no_task(op)


def _single_user(op: Operation) -> Operation | None:
    """The one op using the op's one result (perhaps as several operands)."""
    users = set(ScopeGraph.users(op))
    return users.pop() if len(op.results) == 1 and len(users) == 1 else None


@dataclass(frozen=True)
class CubeTailPass(UbFusionPass):
    """A cube op and the elementwise ops after it, found per anchor by `tail`."""

    anchors: ClassVar[frozenset[str]]

    def scopes(self, graph, soc, counts):
        for op in list(graph.ops):
            if op_type(op) not in self.anchors or not _free(graph, op):
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
        for op in graph.ops[graph.pos[anchor] + 1 :]:
            if graph.pos[op] > horizon or len(members) == MAX_SCOPE_OPS:
                break
            producers = graph.producers(op)
            if not inside.intersection(producers) or not is_elementwise(op) or not _free(graph, op):
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
            user = _single_user(last)
            if user is None or not is_elementwise(user) or not _free(graph, user):
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
        first = _single_user(anchor)
        if first is None or not isinstance(first, ag.BinaryOp) or not _free(graph, first):
            return None
        second = _single_user(first)
        if second is None or not is_elementwise(second) or not _free(graph, second):
            return None
        counts.match(anchor)
        if _origin_format(anchor.results[0]) not in DOUBLE_IN_FORMATS:
            return None
        if not _outside_operands_ok(graph, first, {anchor}, anchor):
            return None
        if not _outside_operands_ok(graph, second, {anchor, first}, first):
            return None
        return [anchor, first, second]


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
        next_id = _next_scope(module)
        for graph in ScopeGraph.of(module):
            for op in graph.ops:
                if op_type(op) not in MATMUL_TYPES | BATCH_MATMUL_TYPES or is_no_task(op):
                    continue
                scope = graph.group.get(op)
                members = list(scope.ops) if scope is not None else [op]
                after = self._trans_data_after(graph, set(members))
                if after is None:
                    continue
                counts.match(op)
                merged = sorted({*members, after}, key=graph.pos.__getitem__)
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
    def _trans_data_after(graph: ScopeGraph, members: set[Operation]) -> Operation | None:
        """The free TransData FRACTAL_NZ -> ND that alone uses the scope's one output."""
        outputs = graph.escaping(members)
        if len(outputs) != 1:
            return None
        users = {u.operation for u in outputs[0].uses}
        after = users.pop() if len(users) == 1 else None
        return after if _trans_data(after, "FRACTAL_NZ", "ND") and _free(graph, after) else None
