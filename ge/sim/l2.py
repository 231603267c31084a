"""The chip's L2 cache during a run: which bytes of device memory it holds, and
how much of each kernel task's GM reads it serves.

Every AI core reads GM through the chip's L2 (`SocProfile.l2_bytes`). The model is
an LRU over address ranges, kept at the granularity of a kernel task's arguments:

- when a kernel task starts, the bytes of each input already in L2 are hits for
  every read of them; the bytes not in L2 are read from GM once, and their further
  reads (the tiling re-reading weight or activation tiles) are hits when the task's
  inputs and outputs fit in L2 together, or when the input's reuse distance fits:
  its own bytes and the task's other traffic between two of its passes (all the
  task's other bytes shared evenly among the input's passes: a weight re-read per
  M tile is hot while the activation streams past it); misses otherwise (an LRU
  evicts a re-read farther than its size);
- each input's reads are those of the program's copies from its GM buffer
  (`BlockTiming.arg_reads`; where a program does not say, the task's reads are
  shared among its inputs by size); its reads of its own outputs and workspace
  (bytes it wrote) are hits when its working set fits;
- after it, its inputs are the most recently used, then its outputs: a write
  allocates its bytes in L2 (the consumer of a feature map finds it there) and
  goes through to GM (every write to an output is charged to GM bandwidth);
- its workspace, scratch it writes and reads back within the task (a mixed
  epilogue's ring of tiles between the cube's FIX and the vector core, attention's
  projections and scores), stays in L2 when its reuse distance fits (`keeps`):
  then its writes and reads alike are L2 traffic. The ring is overwritten in place
  and dies with the task, so a write-back L2 has nothing of it to write out (at
  most its own size, left out here); a workspace that does not fit goes to GM
  both ways, its reads hits only as any own bytes'.
- a range written or read again replaces whatever it overlaps; the least
  recently used ranges leave while the held bytes exceed the size; a range larger
  than L2 streams through it: it flushes everything and stays in none of it (an
  LRU read front to back again evicts its tail before reaching it).

Hits take the chip's L2 bandwidth (`ai_cores * l2_bytes_per_cycle`) through their
own `timing.GmLedger`; misses and writes take GM's. A core's copy costs (latency,
its MTE2 rate) are the same from L2 as from GM: the calibrated single-core
transfers likely read L2-resident buffers already.

Not modelled: cache lines, sets and ways (any range fits anywhere); the order of
reads inside a kernel (a re-read's hit depends only on the working set); dirty
write-back of outputs (only a workspace's writes stay in L2; a feature map that
dies in L2 is still written to GM); host copies (an H2D input is not in L2, a D2H read does not
touch it); L2 left warm by an earlier run (each run starts with an empty L2); the
L2's own latency; the 910B's partitioning of L2 among its dies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ge.core.soc import SocProfile
from ge.sim import timing


def chip_l2_bytes_per_cycle(profile: SocProfile) -> float:
    """L2 read bandwidth of the whole chip, in bytes per cycle."""
    return profile.ai_cores * profile.l2_bytes_per_cycle


@dataclass(frozen=True)
class Reads:
    """How a kernel task's GM reads split between L2 and GM."""

    hits: float
    """Read bytes L2 served (of its arguments; the workspace's are in `scratch`)."""
    resident: float
    """Bytes of its inputs in L2 when it started: its compulsory reads from L2."""
    scratch: float = 0.0
    """Bytes of its workspace traffic, written and read, that L2 kept (0: none or all to GM)."""

    def hit(self, block: timing.BlockTiming, block_dim: int) -> float:
        """The share of the task's other GM reads that L2 served (`timing.run_kernel`'s `hit`)."""
        read = block_dim * (block.gm_read - (block.scratch_read if self.scratch else 0.0))
        return self.hits / read if read > 0 else 0.0


class L2Cache:
    """An LRU over byte ranges of device memory, `capacity` bytes in all."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._ranges: list[list[int]] = []
        """[start, end, last use], in no order."""
        self._clock = 0
        self.held = 0

    def resident(self, start: int, end: int) -> int:
        """Bytes of [start, end) in L2."""
        return sum(max(0, min(end, hi) - max(start, lo)) for lo, hi, _ in self._ranges)

    def kernel(
        self, inputs: Sequence[tuple[int, int]], outputs: Sequence[tuple[int, int]], read_bytes: float,
        input_reads: Sequence[float] | None = None, workspace: tuple[int, float, float] = (0, 0.0, 0.0),
    ) -> Reads:
        """A kernel task reading `read_bytes` in all, `input_reads[i]` of them from input i
        (None: unknown, shared among the inputs by size), and writing its outputs ((address,
        size) each), with a `workspace` of (bytes, bytes it moves, bytes of those read):
        what L2 served; then the task's ranges are in L2."""
        sizes = sum(size for _, size in inputs)
        written = sum(size for _, size in outputs)
        fits = sizes + written <= self.capacity
        size, moved, ws_reads = workspace
        kept = self.keeps(size, ws_reads, read_bytes - ws_reads + written)
        if input_reads is None:
            input_reads = [read_bytes * size / sizes for _, size in inputs] if sizes > 0 else [0.0] * len(inputs)
        hits = resident = 0.0
        for (addr, size), reads in zip(inputs, input_reads):
            if size <= 0:
                continue
            held = self.resident(addr, addr + size)
            rereads = max(0.0, reads - size) if fits or self.reused(size, reads, read_bytes + written) else 0.0
            hits += reads * held / size + rereads * (size - held) / size
            resident += held
        if fits:  # its reads of its own outputs and workspace: bytes it wrote
            hits += read_bytes - sum(input_reads) - (ws_reads if kept else 0.0)
        for addr, size in (*inputs, *outputs):
            self.touch(addr, addr + size)
        return Reads(min(max(hits, 0.0), read_bytes), resident, moved if kept else 0.0)

    def keeps(self, size: float, reads: float, other: float) -> bool:
        """Whether L2 keeps a task's workspace of `size` bytes, read `reads` bytes' worth,
        while the task moves `other` bytes besides: scratch written and soon read back
        (a mixed epilogue's ring of tiles between FIX and the vector core, attention's
        projections) stays when its reuse distance fits, its size and the other bytes
        moved between two of its passes. Its writes then stay in L2 too: the ring is
        overwritten in place and dies with the kernel, so a write-back L2 need not
        write it out."""
        if size <= 0 or reads <= 0:
            return False
        return size + other * size / max(reads, size) <= self.capacity

    def reused(self, size: float, reads: float, moved: float) -> bool:
        """Whether an input of `size` bytes read `reads` bytes' worth, in a task moving
        `moved` bytes in all, finds its bytes still in L2 on each pass after the first:
        its reuse distance (its size and the other bytes moved between two passes) fits."""
        if reads <= size:
            return False
        return size + (moved - reads) * size / reads <= self.capacity

    def touch(self, start: int, end: int) -> None:
        """[start, end) becomes the most recently used range (one larger than L2 flushes it)."""
        if end <= start:
            return
        if end - start > self.capacity:
            self._ranges, self.held = [], 0
            return
        kept = []
        for lo, hi, used in self._ranges:
            if hi <= start or end <= lo:
                kept.append([lo, hi, used])
                continue
            if lo < start:
                kept.append([lo, start, used])
            if end < hi:
                kept.append([end, hi, used])
        self._clock += 1
        kept.append([start, end, self._clock])
        self._ranges = kept
        self.held = sum(hi - lo for lo, hi, _ in kept)
        while self.held > self.capacity:
            oldest = min(self._ranges, key=lambda r: r[2])
            self._ranges.remove(oldest)
            self.held -= oldest[1] - oldest[0]


@dataclass(frozen=True)
class L2:
    """The chip's L2 during a run: its contents and its bandwidth over time, shared
    (like GM's) by everything on the chip; `base` places one model's device memory
    among the others' (models run side by side have address spaces of their own)."""

    cache: L2Cache
    ledger: timing.GmLedger
    base: int = 0

    @classmethod
    def of(cls, profile: SocProfile) -> L2:
        """An empty L2 of the part."""
        return cls(L2Cache(profile.l2_bytes), timing.GmLedger(chip_l2_bytes_per_cycle(profile)))

    def task(
        self, inputs: Sequence[tuple[int, int]], outputs: Sequence[tuple[int, int]], block: timing.BlockTiming,
        block_dim: int, workspace: int,
    ) -> Reads:
        """`L2Cache.kernel` for a kernel task of `block_dim` blocks of `block`, at this model's addresses."""
        base = self.base
        args = block.arg_reads
        per_input = [block_dim * (args[i] if i < len(args) else 0.0) for i in range(len(inputs))] if args else None
        return self.cache.kernel(
            [(base + a, n) for a, n in inputs], [(base + a, n) for a, n in outputs], block_dim * block.gm_read, per_input,
            (workspace, block_dim * block.scratch, block_dim * block.scratch_read),
        )
