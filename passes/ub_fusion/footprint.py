"""A scope's Unified Buffer working set kept up to date as ops join it at its end.

`scopes.working_set` computes the peak from scratch, in time linear in the scope.
AutomaticUbFusion grows a scope op by op, and a chain of n elementwise ops would
become one scope through n such computations, each as long as the scope: n^2 work.
`Footprint` holds the per-step live bytes of a scope of vector ops in a segment
tree, and an op joining after the scope's last op changes them by a few range
additions (the values it uses live longer, or stop crossing global memory) and one
new step, so the peak after each join costs O(log n). A join can be tried and
undone (`checkpoint` / `rollback`), as the pass tries merges that may not fit.

The live ranges and sizes are exactly those of `working_set` (a test checks them
against each other): a value made outside the scope is live from its first to its
last use in the scope; one made inside from its producer to its last use in the
scope, or, if it has no use in the scope but leaves it, to the scope's last op; a
value crossing global memory counts twice. It also keeps what a block-tiled
kernel holds with every value in its own buffer (`scopes.blocks_at_once`): the sum
of the values' element bytes, and the narrowest.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation, SSAValue

from dialects import ascend_graph as ag
from dialects.formats import nbytes
from ge.core import soc as socs
from passes.ub_fusion.scopes import BLOCK_BYTES, Tile, element_bytes, is_cube

_EMPTY = -(1 << 62)
"""A step no scope has: below any sum of sizes."""


class RangeMax:
    """The maximum of a growing list of integers under range additions, each in
    O(log n): a segment tree whose nodes hold their subtree's maximum plus the
    additions made to the whole subtree (bottom-up, no recursion)."""

    def __init__(self) -> None:
        self.size = 0
        self.capacity = 1
        self.node = [_EMPTY, _EMPTY]
        self.pending = [0]

    def max(self) -> int:
        return self.node[1]

    def add(self, lo: int, hi: int, value: int) -> None:
        """Add `value` to the steps lo..hi (inclusive)."""
        if lo > hi or value == 0:
            return
        left, right = lo + self.capacity, hi + 1 + self.capacity
        first, last = left, right - 1
        while left < right:
            if left & 1:
                self._apply(left, value)
                left += 1
            if right & 1:
                right -= 1
                self._apply(right, value)
            left >>= 1
            right >>= 1
        self._pull(first)
        self._pull(last)

    def append(self, value: int) -> None:
        if self.size == self.capacity:
            self._grow()
        leaf = self.size + self.capacity
        self.node[leaf] = value - self._above(leaf)
        self._pull(leaf)
        self.size += 1

    def pop(self) -> None:
        self.size -= 1
        leaf = self.size + self.capacity
        self.node[leaf] = _EMPTY
        self._pull(leaf)

    def _apply(self, p: int, value: int) -> None:
        self.node[p] += value
        if p < self.capacity:
            self.pending[p] += value

    def _pull(self, p: int) -> None:
        while p > 1:
            p >>= 1
            self.node[p] = max(self.node[2 * p], self.node[2 * p + 1]) + self.pending[p]

    def _above(self, leaf: int) -> int:
        """The additions pending above a leaf, which its own value does not hold."""
        total = 0
        p = leaf >> 1
        while p:
            total += self.pending[p]
            p >>= 1
        return total

    def _grow(self) -> None:
        values = [self.node[self.capacity + i] + self._above(self.capacity + i) for i in range(self.size)]
        self.capacity *= 2
        self.node = [_EMPTY] * (2 * self.capacity)
        self.pending = [0] * self.capacity
        self.node[self.capacity : self.capacity + len(values)] = values
        for p in range(self.capacity - 1, 0, -1):
            self.node[p] = max(self.node[2 * p], self.node[2 * p + 1])


_MISSING = object()


class Footprint:
    """The working set of a scope of vector ops under `tile`, as ops join at its end."""

    def __init__(self, tile: Tile, soc: socs.SocProfile, ops: Sequence[Operation] = ()):
        self.tile = tile
        self.soc = soc
        self.ops: list[Operation] = []
        self.members: set[Operation] = set()
        self.live: dict[SSAValue, tuple[int, int]] = {}
        self.bytes: dict[SSAValue, int] = {}
        self.outside: dict[SSAValue, int] = {}
        """Uses outside the scope of each value made inside it."""
        self.used_inside: set[SSAValue] = set()
        """Values made inside the scope that an op of the scope uses."""
        self.dangling = 0
        """Bytes of the values made inside, used only outside: live to the last step."""
        self.weighted = 0
        """Element bytes of all the values, twice for those crossing global memory."""
        self.narrowest = BLOCK_BYTES
        """Element bytes of the narrowest value (a block's, while there is none)."""
        self.weight: dict[SSAValue, int] = {}
        self.steps = RangeMax()
        self._journal: list[tuple] | None = None
        for op in ops:
            self.append(op)

    def peak(self) -> int:
        return self.steps.max()

    def fits(self) -> bool:
        """As `scopes.fits`: the peak fits the UB, and in a block tile all values at once do."""
        return self.peak() <= self.soc.ub_bytes and (self.tile.kind != "block" or self.held() <= self.soc.ub_bytes)

    def held(self) -> int:
        """`scopes.blocks_at_once`: every value its own buffer."""
        return BLOCK_BYTES // self.narrowest * self.weighted

    def checkpoint(self) -> None:
        """Start recording the changes, so that `rollback` can undo them."""
        self._journal = []

    def commit(self) -> None:
        self._journal = None

    def rollback(self) -> None:
        assert self._journal is not None
        for entry in reversed(self._journal):
            kind = entry[0]
            if kind == "add":
                self.steps.add(entry[1], entry[2], -entry[3])
            elif kind == "set":
                _, table, key, old = entry
                if old is _MISSING:
                    del table[key]
                else:
                    table[key] = old
            elif kind == "inner":
                self.used_inside.discard(entry[1])
            elif kind == "sums":
                self.dangling, self.weighted, self.narrowest = entry[1:]
            else:
                op = self.ops.pop()
                self.members.discard(op)
                self.steps.pop()
        self._journal = None

    def append(self, op: Operation) -> None:
        """Let `op`, which comes after every op of the scope, join it at its end."""
        assert not is_cube(op), "a cube op's operands go through L1, not the UB"
        step = len(self.ops)
        last = step - 1
        self._remember_sums()
        at_step = 0
        for v in dict.fromkeys(op.operands):
            uses = sum(1 for w in op.operands if w is v)
            if v in self.outside:
                remaining = self.outside[v] - uses
                old, new = self.bytes[v], self._bytes(v, remaining > 0)
                lo, hi = self.live[v]
                if v in self.used_inside:
                    self._add(lo, hi, new - old)
                    self._add(hi + 1, last, new)
                else:
                    self.dangling -= old
                    self._add(lo, last, new - old)
                    self._mark_inner(v)
                self._set(self.outside, v, remaining)
                self._set_bytes(v, new, remaining > 0)
                self._set(self.live, v, (lo, step))
            elif v in self.live:
                lo, hi = self.live[v]
                self._add(hi + 1, last, self.bytes[v])
                self._set(self.live, v, (lo, step))
            else:
                self._set_bytes(v, self._bytes(v, True), True)
                self._set(self.live, v, (step, step))
            at_step += self.bytes[v]
        at_step += self.dangling
        for r in op.results:
            uses = r.uses.get_length()
            size = self._bytes(r, uses > 0)
            self._set(self.outside, r, uses)
            self._set_bytes(r, size, uses > 0)
            self._set(self.live, r, (step, step))
            at_step += size
            if uses:
                self.dangling += size
        self.ops.append(op)
        self.members.add(op)
        self.steps.append(at_step)
        if self._journal is not None:
            self._journal.append(("op",))

    def _bytes(self, v: SSAValue, crosses_gm: bool) -> int:
        elements = self.tile.elements(ag.shape_of(v.type))
        size = BLOCK_BYTES if elements == 0 else self.soc.align("ub", nbytes(ag.dtype_of(v.type), elements))
        return 2 * size if crosses_gm else size

    def _add(self, lo: int, hi: int, value: int) -> None:
        if lo > hi or value == 0:
            return
        self.steps.add(lo, hi, value)
        if self._journal is not None:
            self._journal.append(("add", lo, hi, value))

    def _set_bytes(self, v: SSAValue, size: int, crosses_gm: bool) -> None:
        weight = element_bytes(v) * (2 if crosses_gm else 1)
        self.weighted += weight - self.weight.get(v, 0)
        self.narrowest = min(self.narrowest, element_bytes(v))
        self._set(self.weight, v, weight)
        self._set(self.bytes, v, size)

    def _set(self, table: dict, key: SSAValue, value: object) -> None:
        if self._journal is not None:
            self._journal.append(("set", table, key, table.get(key, _MISSING)))
        table[key] = value

    def _mark_inner(self, v: SSAValue) -> None:
        self.used_inside.add(v)
        if self._journal is not None:
            self._journal.append(("inner", v))

    def _remember_sums(self) -> None:
        if self._journal is not None:
            self._journal.append(("sums", self.dangling, self.weighted, self.narrowest))
