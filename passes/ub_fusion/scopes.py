"""The graph UB fusion works on (ops in program order with scopes contracted), the
Unified Buffer working set a scope needs, and the base of the UB fusion passes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import ClassVar

from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Operation, SSAValue

from dialects import ascend_graph as ag
from dialects.formats import element_bits, nbytes
from dialects.kernel_boundary import SCOPE_ATTR, is_aicpu, is_no_task, op_type, scope_of
from dialects.shapes import DYN
from ge.core import soc as socs
from ge.core.options import DEFAULT_SOC_VERSION, check_fields, option_field
from passes.fusion import FusionCounts, FusionKind, FusionPass

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
    """A cube op on the AI Core (an AI CPU op is never part of a UB scope)."""
    return op_type(op) in CUBE_TYPES and not is_aicpu(op)


QUANTIZATION = ag.AscendQuantOp | ag.AscendDequantOp | ag.AscendRequantOp


def is_elementwise(op: Operation) -> bool:
    """A vector op on the AI Core computing each output element from the same element
    of its (broadcast) inputs; a quantization's scale and offset broadcast along its
    axis (so AscendDequant and AscendQuant join a cube op's tail, as in CANN's
    dequant/quant UB fusions)."""
    if isinstance(op, ag.IdentityOp) or is_aicpu(op):
        return False
    return isinstance(op, ag.UnaryOp | ag.BinaryOp | ag.CastOp | ag.SelectOp | ag.ExpandOp | QUANTIZATION)


def is_row_reduction(op: Operation) -> bool:
    """An AI Core reduction that keeps its axes, so that its result broadcasts back."""
    return isinstance(op, ag.ReduceOp) and op.props.bool("keep_dims") and not is_aicpu(op)


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
        self._reach = PrefixMax(len(self.ops))
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
        positions = [self.pos[op] for op in group.ops]
        if positions:
            self._reach.raise_to(min(positions), max(positions))

    def extend(self, group: Group, ops: Sequence[Operation]) -> None:
        """Add `ops` (in program order, all after the group's ops) to a group in program order."""
        group.ops.extend(ops)
        for op in ops:
            self.group[op] = group
        self._reach.raise_to(self.pos[group.ops[0]], self.pos[ops[-1]])

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

    def bound(self, last: int) -> int:
        """A position after which no op can reach an op at or before `last`: past it,
        and past every scope that starts before that point (a scope may reach back)."""
        bound = last
        while (reach := self._reach.upto(bound)) > bound:
            bound = reach
        return bound

    def path_exists(self, sources: set[Operation], targets: set[Operation]) -> bool:
        """Whether a path leaves `sources` and reaches `targets`, scopes contracted."""
        if not targets:
            return False
        starts = [u for op in sources for u in self.users(op) if u not in sources]
        return self.reaches(sources, targets, starts, self.bound(max(self.pos[t] for t in targets)))

    def reaches(self, sources: set[Operation], targets: set[Operation], starts: Iterable[Operation], bound: int) -> bool:
        """Whether a path from `starts` (users of `sources` outside them) reaches
        `targets` without passing `bound` or re-entering `sources`, scopes contracted."""
        stack = list(starts)
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


class PrefixMax:
    """The largest value set at or before a position, with values that only grow
    (a Fenwick tree): the scope spans `ScopeGraph.bound` extends through, each
    update and query in O(log n) instead of re-sorting the spans after every scope."""

    def __init__(self, size: int):
        self.tree = [-1] * (size + 1)

    def raise_to(self, position: int, value: int) -> None:
        i = position + 1
        while i < len(self.tree):
            if self.tree[i] < value:
                self.tree[i] = value
            i += i & -i

    def upto(self, position: int) -> int:
        best = -1
        i = min(position + 1, len(self.tree) - 1)
        while i > 0:
            best = max(best, self.tree[i])
            i -= i & -i
        return best


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
    cuts = {reduction_cut(op) for op in ops if isinstance(op, ag.ReduceOp)}
    if not cuts:
        return Tile("fractal") if any(is_cube(op) for op in ops) else Tile("block")
    if len(cuts) != 1:
        return None
    shape, first = cuts.pop()
    if DYN in shape[first:]:
        return None
    if not all(broadcasts_into(op, shape) for op in ops):
        return None
    return Tile("rows", shape, first)


def reduction_cut(op: ag.ReduceOp) -> tuple[tuple[int, ...], int]:
    """The shape a reduction reduces and its first reduced axis: a row tile's cut."""
    shape = _dims(op.operands[0])
    axes = sorted(a % len(shape) for a in op.props.ints("axes")) or range(len(shape))
    return shape, min(axes)


def broadcasts_into(op: Operation, shape: tuple[int, ...]) -> bool:
    """Every tensor of the op broadcasts into `shape`."""
    for v in (*op.operands, *op.results):
        dims = _dims(v)
        if len(dims) > len(shape) or any(d not in (1, s) for d, s in zip(reversed(dims), reversed(shape))):
            return False
    return True


def working_set(ops: Sequence[Operation], soc: socs.SocProfile) -> int | None:
    """Peak UB bytes one tile of the scope `ops` (in program order) keeps live;
    None when the scope has no tile (`tile_of`)."""
    values = _live_values(ops, soc)
    if values is None:
        return None
    change = [0] * (len(ops) + 1)
    for _, lo, hi, size, crosses in values:
        size *= 2 if crosses else 1
        change[lo] += size
        change[hi + 1] -= size
    return max(accumulate(change[:-1]))


def blocks_at_once(ops: Sequence[Operation], soc: socs.SocProfile) -> int | None:
    """UB bytes of a scope tiled in blocks when every value has its own buffer, as
    the vector lowering gives them: 32 bytes of the narrowest value's elements each
    (a wider value proportionally more), twice for a value crossing global memory."""
    values = _live_values(ops, soc)
    if values is None:
        return None
    per_byte = BLOCK_BYTES // min(element_bytes(v) for v, *_ in values)
    return sum(per_byte * element_bytes(v) * (2 if crosses else 1) for v, _, _, _, crosses in values)


def element_bytes(v: SSAValue) -> int:
    return max(1, element_bits(ag.dtype_of(v.type)) // 8)


def _live_values(ops: Sequence[Operation], soc: socs.SocProfile) -> list[tuple[SSAValue, int, int, int, bool]] | None:
    """Each value of the scope: its first and last step, its bytes in one tile, and
    whether it crosses global memory."""
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
        return BLOCK_BYTES if elements == 0 else soc.align("ub", nbytes(ag.dtype_of(v.type), elements))

    def crosses_gm(v: SSAValue) -> bool:
        made_inside = isinstance(v.owner, Operation) and v.owner in members
        return not made_inside or any(u.operation not in members for u in v.uses)

    return [(v, lo, hi, tile_bytes(v), crosses_gm(v)) for v, (lo, hi) in live.items()]


def fits(ops: Sequence[Operation], soc: socs.SocProfile) -> bool:
    """The scope's working set fits the UB and, for a scope tiled in 32-byte blocks,
    so do all its values at once (see `passes.ub_fusion`)."""
    size = working_set(ops, soc)
    if size is None or size > soc.ub_bytes:
        return False
    tile = tile_of(ops)
    return tile is None or tile.kind != "block" or (blocks_at_once(ops, soc) or 0) <= soc.ub_bytes


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
            if not fits(g.ops, profile):
                size, held = working_set(g.ops, profile), blocks_at_once(g.ops, profile)
                problems.append(
                    f"scope {g.scope} ({names}) needs {size} bytes of UB at its peak, {held} for all its values; "
                    f"{profile.name} has {profile.ub_bytes}"
                )
    return problems


# ---------------------------------------------------------------------- passes


def next_scope(module: ModuleOp) -> int:
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
        next_id = next_scope(module)
        for graph in ScopeGraph.of(module):
            for ops in self.scopes(graph, profile, counts):
                for op in ops:
                    op.attributes[SCOPE_ATTR] = IntegerAttr(next_id, i64)
                next_id += 1
                counts.effect()

    def scopes(self, graph: ScopeGraph, soc: socs.SocProfile, counts: FusionCounts) -> Iterable[list[Operation]]:
        """The new scopes of one graph, each registered in `graph` as it is found."""
        raise NotImplementedError


def unscoped(graph: ScopeGraph, op: Operation) -> bool:
    """Not in a scope yet, not `_no_task`, and on the AI Core (AI CPU ops stay alone)."""
    return op not in graph.group and not is_no_task(op) and not is_aicpu(op)


def single_user_of(op: Operation) -> Operation | None:
    """The one op using the op's one result (perhaps as several operands)."""
    users = set(ScopeGraph.users(op))
    return users.pop() if len(op.results) == 1 and len(users) == 1 else None
