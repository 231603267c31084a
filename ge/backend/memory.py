"""Memory planning: where every buffer of a schedule lives in device memory.

Device memory is one address range of four regions, each 512-byte aligned: the
feature map, the graph inputs, the graph outputs and the weights. Only the
feature map is reused. Inputs and outputs keep their own memory for the whole
run (the host copies into and out of them), and weights are laid out one after
another as the model file's weight blob.

Feature-map buffers reuse memory by lifetime. Buffer A's memory may go to buffer
B when every node that touches A happens before the node that writes B (the
relation of the stream assignment: on one stream that is "earlier in task order",
across streams it takes an event). Sizes are rounded up to 512 bytes, GE's
alignment. As GE does, several assigners run and the smallest plan is kept:

- `size-class`: GE's block assigner. Walking the nodes in order, a buffer takes a
  free block (one whose last buffer is dead) of the smallest size class that
  holds it, else grows the largest free block, else opens a block. Sizes are
  rounded up to classes a quarter-octave apart, so freed blocks fit their class
  exactly. Blocks are laid out end to end when the walk is done.
- `best-fit`: offsets over a single range. Buffers are placed one by one, each in
  the smallest gap between the buffers already placed that it conflicts with, or
  after them all; `best-fit` places the largest first, `best-fit-lifetime` the
  largest size x lifetime first (long-lived buffers settle low and short ones
  fill the gaps above them: ResNet-50's fused graph reaches its minimum this way,
  10 % below largest-first).

The plan reports its feature-map size beside two bounds: the theoretical minimum
(the peak of live bytes over the task order: the buffers live at one time all
conflict, so no plan is smaller) and the size without reuse. `reuse=False`
(ATC's `--disable_reuse_memory=1`) gives every buffer its own memory, for
debugging a suspected reuse bug.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from math import ceil, log2

import numpy as np

from ge.backend.schedule import Buffer, Schedule
from ge.backend.streams import Streams
from ge.om.memory import ALIGNMENT, REGION_ORDER, MemoryPlan, Placement, Region, align

CLASSES_PER_OCTAVE = 4

SIZE_CLASS = "size-class"
BEST_FIT = "best-fit"
BEST_FIT_LIFETIME = "best-fit-lifetime"
NO_REUSE = "no-reuse"


def plan(schedule: Schedule, streams: Streams, reuse: bool = True) -> MemoryPlan:
    """Place every buffer of the schedule; the feature map by the better assigner."""
    buffers = schedule.buffers
    offsets = [0] * len(buffers)
    sizes = {r: 0 for r in REGION_ORDER}
    for region in (Region.INPUT, Region.OUTPUT, Region.WEIGHT):
        sizes[region] = _sequential(schedule.of_region(region), offsets)

    fm = schedule.of_region(Region.FEATURE_MAP)
    fm_sizes = [align(b.nbytes) for b in fm]
    no_reuse = sum(fm_sizes)
    minimum = _peak(fm, fm_sizes, len(schedule.nodes))
    if reuse:
        conflicts = _conflicts(fm, streams)
        lifetime = [max(b.accesses) - min(b.accesses) + 1 for b in fm]
        candidates = {
            SIZE_CLASS: _size_classes(fm, fm_sizes, conflicts),
            BEST_FIT: _best_fit(fm, fm_sizes, conflicts, lambda i: (-fm_sizes[i], fm[i].writer, i)),
            BEST_FIT_LIFETIME: _best_fit(fm, fm_sizes, conflicts, lambda i: (-fm_sizes[i] * lifetime[i], fm[i].writer, i)),
        }
    else:
        candidates = {NO_REUSE: _no_reuse(fm_sizes)}
    strategy = min(candidates, key=lambda k: (_extent(candidates[k], fm_sizes), k))
    for b, offset in zip(fm, candidates[strategy]):
        offsets[b.index] = offset
    sizes[Region.FEATURE_MAP] = _extent(candidates[strategy], fm_sizes)

    bases: dict[Region, int] = {}
    cursor = 0
    for region in REGION_ORDER:
        bases[region] = cursor
        cursor += sizes[region]
    placements = tuple(Placement(b.name, b.region, offsets[b.index], align(b.nbytes)) for b in buffers)
    extents = {k: _extent(v, fm_sizes) for k, v in candidates.items()}
    return MemoryPlan(strategy, placements, bases, sizes, minimum, no_reuse, extents)


def _sequential(buffers: Sequence[Buffer], offsets: list[int]) -> int:
    cursor = 0
    for b in buffers:
        offsets[b.index] = cursor
        cursor += align(b.nbytes)
    return cursor


def _extent(offsets: Sequence[int], sizes: Sequence[int]) -> int:
    return max((o + s for o, s in zip(offsets, sizes)), default=0)


def _peak(fm: Sequence[Buffer], sizes: Sequence[int], nodes: int) -> int:
    """The most bytes live at one node, each buffer live from its first to its last access."""
    live = np.zeros(nodes + 1, np.int64)
    for b, size in zip(fm, sizes):
        accesses = b.accesses
        live[min(accesses)] += size
        live[max(accesses) + 1] -= size
    return int(np.cumsum(live).max(initial=0))


def _conflicts(fm: Sequence[Buffer], streams: Streams) -> list[set[int]]:
    """Per buffer, the buffers it conflicts with: neither is dead before the other is written.

    Found without asking every pair. A buffer is dead before another's writer only if
    its last access comes before that writer in node order (happens-before follows
    the node order), so two buffers whose spans [writer, last access] overlap
    conflict. A buffer `a` ending before `b`'s writer conflicts with `b` when one of
    its accesses does not happen before that writer: a node of some stream after
    the last one of that stream the writer waits for (the streams' vector clocks).
    The work follows the conflicts and the nodes that run concurrently, not n^2.
    """
    conflicts: list[set[int]] = [set() for _ in fm]
    last = [max(b.accesses) for b in fm]
    active: list[tuple[int, int]] = []  # (last access, buffer): a heap of the spans still open
    for i in sorted(range(len(fm)), key=lambda i: (fm[i].writer, i)):
        writer = fm[i].writer
        while active and active[0][0] < writer:
            heapq.heappop(active)
        for _, j in active:
            conflicts[i].add(j)
            conflicts[j].add(i)
        heapq.heappush(active, (last[i], i))

    clocks = streams.clocks()
    on_stream: list[list[int]] = [[] for _ in range(streams.count)]
    for node, s in enumerate(streams.stream):
        on_stream[s].append(node)
    touching: dict[int, list[int]] = {}
    for j, b in enumerate(fm):
        for node in dict.fromkeys(b.accesses):
            touching.setdefault(node, []).append(j)
    for i, b in enumerate(fm):
        writer = b.writer
        for s, nodes in enumerate(on_stream):
            for node in nodes[bisect_right(nodes, clocks[writer][s]) : bisect_left(nodes, writer)]:
                for j in touching.get(node, ()):
                    if j != i and last[j] < writer:
                        conflicts[i].add(j)
                        conflicts[j].add(i)
    return conflicts


def _size_class(size: int) -> int:
    units = size // ALIGNMENT
    if units <= 1:
        return ALIGNMENT
    k = ceil(log2(units) * CLASSES_PER_OCTAVE - 1e-9)
    return align(ceil(2 ** (k / CLASSES_PER_OCTAVE)) * ALIGNMENT)


def _size_classes(fm: Sequence[Buffer], sizes: Sequence[int], conflicts: Sequence[set[int]]) -> list[int]:
    """GE-style blocks: reuse the best-fitting free block, grow one, or open one."""
    block_size: list[int] = []
    block_last: list[int] = []  # the latest buffer in each block
    block_of = [0] * len(fm)
    for i in sorted(range(len(fm)), key=lambda i: (fm[i].writer, i)):
        need = _size_class(sizes[i])
        free = [k for k in range(len(block_size)) if block_last[k] not in conflicts[i]]
        fitting = [k for k in free if block_size[k] >= need]
        if fitting:
            k = min(fitting, key=lambda k: (block_size[k], k))
        elif free:
            k = max(free, key=lambda k: (block_size[k], -k))
            block_size[k] = need
        else:
            k = len(block_size)
            block_size.append(need)
            block_last.append(i)
        block_last[k] = i
        block_of[i] = k
    starts = np.concatenate([[0], np.cumsum(block_size, dtype=np.int64)])
    return [int(starts[block_of[i]]) for i in range(len(fm))]


def _best_fit(
    fm: Sequence[Buffer], sizes: Sequence[int], conflicts: Sequence[set[int]], order: Callable[[int], tuple[int, ...]]
) -> list[int]:
    """In `order`, each buffer into the smallest gap left by the placed buffers it conflicts with."""
    offsets = [0] * len(fm)
    placed = [False] * len(fm)
    for i in sorted(range(len(fm)), key=order):
        taken = sorted((offsets[j], offsets[j] + sizes[j]) for j in conflicts[i] if placed[j])
        best: int | None = None
        best_gap = 0
        cursor = 0
        for start, end in taken:
            gap = start - cursor
            if gap >= sizes[i] and (best is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, end)
        offsets[i] = cursor if best is None else best
        placed[i] = True
    return offsets


def _no_reuse(sizes: Sequence[int]) -> list[int]:
    return [int(o) for o in np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])[:-1]]
