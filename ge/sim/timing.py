"""Timing: the cycles of one block's pipe program, and of kernels spread over cores.

A block. The scalar unit (S) walks the program in order and issues each instruction
into the queue of its pipe (S, V, M, MTE1, MTE2, MTE3, FIX); each pipe runs its
queue in order, one instruction at a time, the cost of each from `ge.sim.costs`
(via `ge.sim.program`), so the pipes run in parallel and meet only where the
program makes them:

- `set_flag src -> dst, id` runs on `src` once its earlier work is done and takes
  `FLAG_CYCLES`; `wait_flag` holds `dst` until that flag is set, and clears it;
- a queue holds `QUEUE_DEPTH` instructions: when it is full, the scalar unit stalls
  until the oldest one starts, and with it the issue of everything after;
- where a cube kernel's vector half runs on a vector core apart (`program.
  vector_half_apart`: the 910B), the vector core's scalar unit (`AIV_S`) issues the
  half's instructions (V, MTE3 and its MTE2), in program order, and the cube core's
  the rest: a vector queue that is full stalls only the vector core's issue;
- `pipe_barrier p` orders `p` after its earlier instructions, which a pipe that
  runs one instruction at a time already does: it costs nothing more here;
- `sync_all` waits until every pipe is idle, then costs `SYNC_ALL_CYCLES` (a
  cross-core barrier through GM); at the top level it ends a phase of the kernel.

A loop of identical iterations is timed in closed form. The state after an
iteration (every touched pipe's clock, its queue, the pending flags) is a max-plus
function of the state before it, so after a transient the state moves by the same
shift every c iterations (the steady state; c is 1 or, for a ping-pong pair of
bodies, 2). The prologue iterations are simulated one by one until the shift is
seen twice in a row; the steady state is then applied at once for as many whole
periods as remain, and the remaining iterations (the epilogue) and everything
after the loop are simulated again one by one. Where no steady state shows within
`MAX_EXPLICIT_TRIPS` iterations, each clock is extrapolated along its last
iteration's advance (an approximation, logged at debug level).

Kernels. A kernel's blocks all run the same program (the tiling gives every block
the largest share), so its block time is computed once per kernel. The blocks go to
the cores of the kernel's kind (AI cores, or vector cores on parts that split them)
in order, each to the core that frees first: `block_dim` above the core count runs
in waves, and kernels on different streams share the cores. GM bandwidth is the
chip's (`ai_cores * gm_bytes_per_cycle` of the SoC profile, the cap `ge.sim.costs`
also applies to one core), and everything placed on the chip in one run (every
stream, every model of a virtual-instance run) shares it through a `GmLedger`: a
phase's GM bytes over all its blocks ask for a rate (bytes over the phase's
unstretched cycles); from its start it gets, piece by piece of time, that rate or
what the phases placed before it left over, whichever is less, and is stretched
until its bytes are through; what it got is then reserved. A phase alone on the
chip is stretched exactly to bytes / chip rate when that is longer than its blocks.
With the L2 cache (`ge.sim.l2`), the reads L2 serves go through a second ledger at
the chip's L2 bandwidth instead of GM's, and a phase takes the longer of the two
grants.

Host and runtime costs are explicit constants below (in microseconds): they are
estimates of CANN's sink-mode runtime on these parts, not measurements, and every
report shows them apart from the cores' time.
"""

from __future__ import annotations

import bisect
import heapq
import logging
import math
from collections import deque
from dataclasses import dataclass

from ge.core.errors import ModelError
from ge.core.soc import QUEUE_DEPTH, SocProfile
from ge.sim.program import AIV_S, BARRIER, LOOP, PIPE, RUN, S_PIPE, SET, SYNC_ALL, VECTOR_HALF, WAIT

log = logging.getLogger("ge.sim")

FLAG_CYCLES = 1.0
"""A set_flag's own cost on its source pipe; the waiting pipe may go on from then."""
SYNC_ALL_CYCLES = 600.0
"""A cross-core barrier: each block writes and polls a GM counter (two GM round trips,
~300 cycles each on the 910B1 fits)."""
MAX_EXPLICIT_TRIPS = 128
"""Iterations of one loop simulated one by one, at most, before its steady state is assumed."""

MODEL_LAUNCH_US = 10.0
"""The host's model execute call until the device runs the first task (sink mode:
the task list is on the device already)."""
HOST_SYNC_US = 5.0
"""The host seeing the model's end (stream synchronise returning)."""
HOST_TILING_US = 6.0
"""A dynamic-shape run's host work per kernel op before its launch: InferShape, the op's
tiling function on the actual shape, and the tiling data's copy into the launch
arguments. An estimate (CANN's tiling functions of conv, matmul and elementwise ops take
a few microseconds on a server CPU); the simulator charges it on the host's timeline."""
HOST_LAUNCH_US = 4.0
"""A dynamic-shape run launches every task from the host (no sink scheduling: the task
list is not on the device beforehand), as rtKernelLaunch or rtMemcpyAsync: its host
time per task. An estimate, of the order of CANN's single-op launch cost."""
KERNEL_LAUNCH_US = 2.0
"""The task scheduler reading a KERNEL task and starting its blocks on the cores."""
EVENT_RECORD_US = 0.5
EVENT_WAIT_US = 0.5
"""An EVENT_RECORD or EVENT_WAIT task's own time on its stream."""
MODEL_END_US = 0.5
"""MODEL_END_GRAPH: the end of the task list."""
LABEL_US = 0.5
"""A LABEL_SET or LABEL_GOTO task's own time on its stream."""
STREAM_ACTIVE_US = 0.5
"""STREAM_ACTIVE: the stream's scheduler starting other streams (a task like an event record)."""
LABEL_SWITCH_US = 1.5
"""LABEL_SWITCH_BY_INDEX: the stream's scheduler reading the index from GM (once the
task before it has written it), then going on at the label it picks."""
D2D_LATENCY_US = 2.0
"""A device-to-device MEMCPY_ASYNC's fixed cost (an SDMA descriptor); its bytes then
move at the chip's GM bandwidth, read once and written once."""
MEMCPY_LATENCY_US = 8.0
"""A host <-> device copy's fixed cost (DMA descriptor, PCIe round trip)."""
PCIE_BYTES_PER_US = 24_000.0
"""Host <-> device bandwidth: PCIe 4.0 x16 at about 24 GB/s in practice (every part here has it)."""
HOST = "Host"
"""The core type of an op run by the host framework (mix_compile_mode)."""
HOST_OP_US = 5.0
"""The host framework dispatching one op (its executor, the kernel lookup). An
estimate: the reference gives no figure for mixed computing."""
HOST_ELEMENTS_PER_US = 2_000.0
HOST_BYTES_PER_US = 10_000.0
"""One host core's rates (a 3 GHz server core's vectorised loop, its caches'
streaming rate): estimates, as the AI CPU's are."""


def host_op_us(in_bytes: int, out_bytes: int, elements: int) -> float:
    """An op the host framework runs in a device graph (mix_compile_mode): the device
    stream synchronised up to it, its inputs copied out over PCIe, the op on one host
    core, its outputs copied back, and the rest of the graph launched again."""
    d2h = MEMCPY_LATENCY_US + in_bytes / PCIE_BYTES_PER_US
    h2d = MEMCPY_LATENCY_US + out_bytes / PCIE_BYTES_PER_US
    compute = HOST_OP_US + (in_bytes + out_bytes) / HOST_BYTES_PER_US + elements / HOST_ELEMENTS_PER_US
    return HOST_SYNC_US + d2h + compute + h2d + MODEL_LAUNCH_US

LATENCY_BOUND = 0.5
"""A kernel whose best utilisation (cube, vector, or GM traffic at peak rate) is below
this is latency-bound: its time goes on fixed costs, latencies and waits."""


@dataclass(frozen=True)
class Span:
    """A pipe's activity in a block, relative to the block's start (`busy` < 1 for a
    steady-state stretch shown as one span)."""

    pipe: int
    start: float
    end: float
    label: str
    busy: float = 1.0


@dataclass(frozen=True)
class BlockTiming:
    """What one block of a kernel does and how long it takes, in cycles."""

    cycles: float
    phases: tuple[float, ...]
    """The cycles of each top-level phase (`sync_all` ends one); they sum to `cycles`."""
    phase_gm_bytes: tuple[float, ...]
    busy: tuple[float, ...]
    """Busy cycles per pipe, in `ge.sim.program.PIPE` order."""
    gm_bytes: float
    gm_ideal: float
    """Cycles the GM traffic takes at each path's peak rate."""
    cube_blocks: float
    """Cube blocks (m0 x k0 x n0 MACs each, one a cycle at peak) of every mmad."""
    vector_cycles: float
    instructions: float
    spans: tuple[Span, ...] | None
    ops: float = 0.0
    """Operations for a roofline: 2 per cube MAC, 1 per vector element (`ge.sim.program`)."""
    vector_ideal: float = 0.0
    """Cycles the vector instructions take at the unit's peak (a 256-byte repeat a cycle)."""
    gm_read: float = 0.0
    """The bytes of `gm_bytes` read from GM (the rest are written): what L2 may serve."""
    phase_gm_read: tuple[float, ...] = ()
    """`gm_read` by phase."""
    arg_reads: tuple[float, ...] = ()
    """`gm_read` by the kernel argument read (the program's block arguments, in order);
    reads of no known argument are in `gm_read` only."""
    phase_scratch: tuple[float, ...] = ()
    """The bytes of `phase_gm_bytes` moved to or from the kernel's workspace (by phase)."""
    phase_scratch_read: tuple[float, ...] = ()
    """Those of them read."""

    @property
    def scratch(self) -> float:
        """The bytes the block moves to or from the kernel's workspace."""
        return sum(self.phase_scratch)

    @property
    def scratch_read(self) -> float:
        return sum(self.phase_scratch_read)


class _Block:
    """The pipes of one block while its program runs."""

    def __init__(self, trace: bool, args: int, vector_half_apart: bool = False):
        n = len(PIPE)
        self.issuer = [PIPE[AIV_S] if vector_half_apart and p in VECTOR_HALF else S_PIPE for p in range(n)]
        """The scalar unit that issues each pipe's instructions."""
        self.t = [0.0] * n
        self.win: list[deque[float]] = [deque(maxlen=QUEUE_DEPTH) for _ in range(n)]
        self.flags: dict[tuple[int, int, int], float] = {}
        self.busy = [0.0] * n
        self.gm_bytes = 0.0
        self.gm_ideal = 0.0
        self.cube = 0.0
        self.vector = 0.0
        self.executed = 0.0
        self.ops = 0.0
        self.vector_ideal = 0.0
        self.gm_read = 0.0
        self.scratch = 0.0
        self.scratch_read = 0.0
        self.arg_reads = [0.0] * args
        self.spans: list[Span] | None = [] if trace else None
        self.phase_ends: list[tuple[float, ...]] = []

    # ------------------------------------------------------------ instructions

    def _issue(self, pipe: int) -> float:
        """When the scalar unit puts the next instruction into `pipe`'s queue."""
        t = self.t
        if pipe == S_PIPE:
            return t[S_PIPE]
        s = self.issuer[pipe]
        w = self.win[pipe]
        if len(w) == QUEUE_DEPTH and w[0] > t[s]:
            t[s] = w[0]  # the queue is full: issue stalls until its oldest entry starts
        return t[s]

    def run(self, program: tuple, top: bool = False) -> None:
        t, win, flags = self.t, self.win, self.flags
        for ins in program:
            op = ins[0]
            if op == LOOP:
                self.loop(ins[1], ins[2], ins[3], ins[4])
                continue
            self.executed += 1
            if op == SYNC_ALL:
                end = max(t) + SYNC_ALL_CYCLES
                for p in range(len(t)):
                    t[p] = end
                if top:
                    self.phase_ends.append(self.mark(end))
                continue
            pipe = ins[1]
            issue = self._issue(pipe)
            start = issue if issue > t[pipe] else t[pipe]
            if op == RUN:
                cost = ins[2]
                t[pipe] = start + cost
                self.busy[pipe] += cost
                self.gm_bytes += ins[3]
                self.gm_ideal += ins[4]
                self.cube += ins[5]
                self.vector += ins[6]
                self.ops += ins[8]
                self.vector_ideal += ins[9]
                self.gm_read += ins[10]
                if ins[12]:
                    self.scratch += ins[12]
                    self.scratch_read += ins[12] if ins[10] else 0
                if ins[11] >= 0:
                    self.arg_reads[ins[11]] += ins[10]
                if self.spans is not None:
                    self.spans.append(Span(pipe, start, start + cost, ins[7]))
            elif op == SET:
                t[pipe] = start + FLAG_CYCLES
                flags[ins[2]] = t[pipe]
            elif op == WAIT:
                ready = flags.pop(ins[2], None)
                if ready is None:
                    # the kernel verifier forbids it, but a `.om`'s kernels are read, not verified
                    raise ModelError(f"its program waits on flag {ins[2]} with no set_flag before it")
                t[pipe] = ready if ready > start else start
            elif op == BARRIER:
                t[pipe] = start
            if pipe != S_PIPE:
                win[pipe].append(start)

    def mark(self, end: float) -> tuple[float, ...]:
        """What a phase ending at `end` leaves behind: the running totals `time_block` cuts phases from."""
        return (end, self.gm_bytes, self.gm_read, self.scratch, self.scratch_read)

    # ----------------------------------------------------------------- loops

    def _state(self, pipes: tuple[int, ...], keys: tuple) -> tuple[tuple, list[float], list[float]]:
        """(shape, clock values, counters) of the touched part of the state."""
        values = [self.t[p] for p in pipes]
        for p in pipes:
            values.extend(self.win[p])
        present = tuple(k in self.flags for k in keys)
        values.extend(self.flags[k] for k, here in zip(keys, present) if here)
        shape = (tuple(len(self.win[p]) for p in pipes), present)
        counters = [*self.busy, self.gm_bytes, self.gm_ideal, self.cube, self.vector, self.executed, self.ops, self.vector_ideal, self.gm_read, self.scratch, self.scratch_read, *self.arg_reads]
        return shape, values, counters

    def _shift(self, pipes: tuple[int, ...], keys: tuple, deltas: list[float]) -> None:
        """Move the touched clocks by `deltas` (in `_state`'s order)."""
        it = iter(deltas)
        for p in pipes:
            self.t[p] += next(it)
        for p in pipes:
            w = self.win[p]
            for i in range(len(w)):
                w[i] += next(it)
        for k in keys:
            if k in self.flags:
                self.flags[k] += next(it)

    def _count(self, counters: list[float]) -> None:
        n = len(self.busy)
        for p in range(n):
            self.busy[p] += counters[p]
        self.gm_bytes += counters[n]
        self.gm_ideal += counters[n + 1]
        self.cube += counters[n + 2]
        self.vector += counters[n + 3]
        self.executed += counters[n + 4]
        self.ops += counters[n + 5]
        self.vector_ideal += counters[n + 6]
        self.gm_read += counters[n + 7]
        self.scratch += counters[n + 8]
        self.scratch_read += counters[n + 9]
        for i, read in enumerate(counters[n + 10 :]):
            self.arg_reads[i] += read

    def loop(self, trips: int, body: tuple, pipes: tuple[int, ...], keys: tuple) -> None:
        history = [self._state(pipes, keys)]
        done = 0
        while done < trips:
            self.run(body)
            done += 1
            history.append(self._state(pipes, keys))
            del history[:-5]
            remaining = trips - done
            if remaining == 0:
                break
            found = _period(history)
            if found is None and done < MAX_EXPLICIT_TRIPS:
                continue
            if found is None:
                c, deltas = 1, [a - b for a, b in zip(history[-1][1], history[-2][1])]
                if history[-1][0] != history[-2][0]:
                    continue
                log.debug("a loop of %d trips shows no steady state in %d; extrapolating", trips, done)
            else:
                c, deltas = found
            periods = remaining // c
            if periods == 0:
                continue
            self._extrapolate(history, c, deltas, periods, pipes, keys)
            done += periods * c
            history = [self._state(pipes, keys)]

    def _extrapolate(self, history: list, c: int, deltas: list[float], periods: int, pipes: tuple[int, ...], keys: tuple) -> None:
        before = [self.t[p] for p in pipes]
        counters = [(a - b) * periods for a, b in zip(history[-1][2], history[-1 - c][2])]
        self._shift(pipes, keys, [d * periods for d in deltas])
        self._count(counters)
        if self.spans is None:
            return
        for p, start in zip(pipes, before):
            end = self.t[p]
            if p in (S_PIPE, PIPE[AIV_S]) or end <= start:  # the scalar units' clocks are when they issue
                continue
            busy = counters[p] / (end - start)
            self.spans.append(Span(p, start, end, f"steady state: {periods * c} iterations", min(busy, 1.0)))


def _period(history: list) -> tuple[int, list[float]] | None:
    """(c, per-period shift) when the last two periods of c iterations moved every
    touched clock by the same amount, else None."""
    for c in (1, 2):
        if len(history) < 2 * c + 1:
            return None
        (s0, v0, _), (s1, v1, _), (s2, v2, _) = history[-1 - 2 * c], history[-1 - c], history[-1]
        if not s0 == s1 == s2:
            continue
        shift = v2[0] - v1[0]
        tol = 1e-6 + 1e-9 * abs(v2[0])
        if all(abs((b - a) - shift) <= tol and abs((a - z) - shift) <= tol for z, a, b in zip(v0, v1, v2)):
            return c, [shift] * len(v2)
    return None


def time_block(program: tuple, trace: bool = False, vector_half_apart: bool = False) -> BlockTiming:
    """The timing of one block running `program` (as `ge.sim.program` decodes it);
    `vector_half_apart`: its vector half runs on a vector core of its own."""
    block = _Block(trace, _arg_count(program), vector_half_apart)
    block.run(program, top=True)
    end = max(block.t)
    marks = [(0.0,) * 5, *block.phase_ends, block.mark(end)]
    phases, gm, read, scratch, scratch_read = (tuple(b[i] - a[i] for a, b in zip(marks, marks[1:])) for i in range(5))
    return BlockTiming(
        cycles=end,
        phases=phases,
        phase_gm_bytes=gm,
        busy=tuple(block.busy),
        gm_bytes=block.gm_bytes,
        gm_ideal=block.gm_ideal,
        cube_blocks=block.cube,
        vector_cycles=block.vector,
        instructions=block.executed,
        spans=tuple(block.spans) if block.spans is not None else None,
        ops=block.ops,
        vector_ideal=block.vector_ideal,
        gm_read=block.gm_read,
        phase_gm_read=read,
        arg_reads=tuple(block.arg_reads),
        phase_scratch=scratch,
        phase_scratch_read=scratch_read,
    )


def _arg_count(program: tuple) -> int:
    """One more than the highest kernel argument a copy of `program` reads (0: none known)."""
    count = 0
    for ins in program:
        if ins[0] == RUN:
            count = max(count, ins[11] + 1)
        elif ins[0] == LOOP:
            count = max(count, _arg_count(ins[2]))
    return count


# ------------------------------------------------------------------------- cores


@dataclass(frozen=True)
class Placed:
    """One block of a kernel on a core: [start, end) in cycles of the model's timeline."""

    core: int
    start: float
    end: float
    phase: int


class Cores:
    """The cores of one run, by kind, each free from some time on."""

    def __init__(self, counts: dict[str, int]):
        self.counts = dict(counts)
        self._free = {kind: [(0.0, i) for i in range(n)] for kind, n in counts.items()}

    def place(self, kind: str, ready: float, blocks: int, cycles: float, phase: int) -> list[Placed]:
        """`blocks` blocks of `cycles` each, from `ready` on, each on the core free first."""
        heap = self._free[kind]
        placed = []
        for _ in range(blocks):
            free, core = heapq.heappop(heap)
            start = max(ready, free)
            placed.append(Placed(core, start, start + cycles, phase))
            heapq.heappush(heap, (start + cycles, core))
        return placed

    def first_free(self, kind: str) -> float:
        """When the first core of `kind` is free."""
        return self._free[kind][0][0]


@dataclass(frozen=True)
class KernelRun:
    """A kernel's blocks on the cores, and how much the chip's GM bandwidth stretched them."""

    blocks: tuple[Placed, ...]
    start: float
    end: float
    stretch: float
    """The factor the GM bandwidth bound lengthened the blocks by (1: not at all)."""


def chip_gm_bytes_per_cycle(profile: SocProfile) -> float:
    """GM bandwidth of the whole chip, in bytes per cycle."""
    return profile.ai_cores * profile.gm_bytes_per_cycle


@dataclass(frozen=True)
class Grant:
    """What the ledger offers a phase: its cycles, and the rate it gets over each piece of them."""

    cycles: float
    pieces: tuple[tuple[float, float, float], ...]
    """(start, end, bytes per cycle), in time order."""


class GmLedger:
    """The chip's GM bandwidth over time: what placed phases reserved, piecewise constant.

    Breakpoints are kept in one sorted list, so a placement costs a bisection and a
    walk over the pieces it overlaps: the phases of one run are placed roughly in
    time order, and each overlaps few others."""

    def __init__(self, rate: float):
        self.rate = rate
        self._t: list[float] = [-math.inf]
        self._used: list[float] = [0.0]
        """`_used[i]` is reserved over [`_t[i]`, `_t[i + 1]`) (the last piece: to infinity)."""

    def offer(self, start: float, cycles: float, nbytes: float) -> Grant:
        """How long a phase of `cycles` moving `nbytes` takes from `start` on, given what is reserved.

        Alone it takes `max(cycles, nbytes / rate)`, computed exactly so."""
        if cycles <= 0 or nbytes <= 0:
            return Grant(cycles, ())
        demand = nbytes / cycles
        i = bisect.bisect_right(self._t, start) - 1
        left, at, elapsed = 1.0, start, 0.0  # `left`: the fraction of the phase still to run
        pieces = []
        while True:
            until = self._t[i + 1] if i + 1 < len(self._t) else math.inf
            free = self.rate - self._used[i]
            if free >= demand:
                rate, need = demand, left * cycles
            elif free > self.rate * 1e-12:
                rate, need = free, left * nbytes / free
            else:
                rate, need = 0.0, math.inf  # the piece is taken: wait for its end
            if at + need <= until:
                pieces.append((at, at + need, rate))
                return Grant(elapsed + need, tuple(pieces))
            span = until - at
            if rate > 0:
                pieces.append((at, until, rate))
                left -= span * rate / nbytes
            elapsed += span
            at = until
            i += 1

    def reserve(self, grant: Grant, end: float) -> None:
        """Reserve what `grant` gave, its last piece running to `end` (where the phase's blocks ended)."""
        for n, (lo, hi, rate) in enumerate(grant.pieces):
            hi = end if n == len(grant.pieces) - 1 else min(hi, end)
            if hi <= lo or rate <= 0:
                continue
            first, last = self._split(lo), self._split(hi)
            for k in range(first, last):
                self._used[k] += rate

    def _split(self, at: float) -> int:
        """The index of the piece starting at `at`, splitting the piece around it if needed."""
        i = bisect.bisect_right(self._t, at) - 1
        if self._t[i] == at:
            return i
        self._t.insert(i + 1, at)
        self._used.insert(i + 1, self._used[i])
        return i + 1


def run_kernel(
    cores: Cores, kind: str, ready: float, block_dim: int, timing: BlockTiming, ledger: GmLedger,
    l2: GmLedger | None = None, hit: float = 0.0, scratch: bool = False,
) -> KernelRun:
    """Place a kernel's blocks from `ready` on, phase after phase, each phase's GM bytes
    through the chip's bandwidth (`ledger`); with an L2 (`ge.sim.l2`), the fraction `hit`
    of its GM reads goes through the L2's bandwidth (`l2`) instead, and so does all of
    its workspace's traffic where L2 keeps the workspace (`scratch`; `hit` is then of
    the other reads)."""
    count = cores.counts[kind]
    waves = math.ceil(block_dim / count)
    t = ready
    placed: list[Placed] = []
    stretch = 1.0
    none = (0.0,) * len(timing.phases)
    reads = timing.phase_gm_read or none
    kept = timing.phase_scratch if scratch and timing.phase_scratch else none
    kept_reads = timing.phase_scratch_read if scratch and timing.phase_scratch_read else none
    for i, (cycles, gm, read, own, own_read) in enumerate(zip(timing.phases, timing.phase_gm_bytes, reads, kept, kept_reads)):
        natural = waves * cycles
        start = max(t, cores.first_free(kind))
        hits = block_dim * (hit * (read - own_read) + own)
        grants = [(ledger, ledger.offer(start, natural, block_dim * gm - hits))]
        if l2 is not None and hits > 0:
            grants.append((l2, l2.offer(start, natural, hits)))
        longest = max(grant.cycles for _, grant in grants)
        factor = longest / natural if natural > 0 and longest > natural else 1.0
        stretch = max(stretch, factor)
        blocks = cores.place(kind, t, block_dim, cycles * factor, i)
        t = max(b.end for b in blocks)
        for level, grant in grants:
            level.reserve(grant, t)
        placed += blocks
    return KernelRun(tuple(placed), ready, t, stretch)
