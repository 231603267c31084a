"""Operator tuning's search: per kernel, the analytic tiling as the seed, then local
search over its neighbours (`passes.lowering.space`), timed by the simulator.

Rounds: each kernel still searching proposes up to `WIDTH` untimed neighbours of its
best tiling (in an order drawn from `random.Random(seed)`, the moves that keep its
program's knobs before those that change them: the knobs are tried once the
tiling's neighbourhood is spent, and a knob that helps opens a new one), or, once its
neighbourhood is spent, as many tilings drawn from its whole space (a restart);
a kernel's proposals are one job (a batch: its text shipped and parsed once), and
the round's jobs go to the backend together. A candidate whose lower bound (the kernel's roofline, or its largest block's cube work at peak)
is not below the kernel's best is pruned untimed; a kernel within `ROOFLINE_SLACK`
of its roofline, or whose space is spent, stops. The budget is a number of timed
candidates (deterministic: the same seed and budget time the same candidates) or
seconds (checked between rounds).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ge.aoe import measure
from ge.distributed import Backend
from passes.lowering.program import FRACTAL
from passes.lowering.space import (
    CUBE_KEYS,
    CUBE_KNOBS,
    SHARED,
    SOFTMAX,
    AttentionSpace,
    CubeSpace,
    Space,
    Tiling,
    knobs_of,
)

WIDTH = 6
"""Neighbours a kernel proposes per round."""
ROOFLINE_SLACK = 0.02
"""A kernel this close to its roofline is not searched further."""
SPACE_SAMPLE = 20_000
"""The most tilings of a kernel's space a restart draws from (the first, in the space's order)."""


@dataclass(frozen=True)
class Budget:
    """Timed candidates (over all kernels) and seconds; None: no limit of that kind."""

    candidates: int | None = None
    seconds: float | None = None


@dataclass
class Kernel:
    """One kernel being tuned."""

    name: str
    text: str
    space: Space
    seed: Tiling | None
    """The analytic tiling in the space's terms, if legal there."""
    launches: int
    inputs: list[int]
    outputs: list[int]
    resident: list[tuple[int, list[float]]]
    """See `measure.Job`."""
    op_types: tuple[str, ...] = ()
    analytic: float = math.inf
    roofline: float = 0.0
    best: Tiling | None = None
    best_cycles: float = math.inf
    live: float = math.inf
    """The least cycles timed so far, as results come back (progress only)."""
    timed: dict[tuple[int, ...], float] = field(default_factory=dict)
    pruned: int = 0
    done: bool = False
    _pool: list[Tiling] | None = None

    def job(self, soc: str, tilings: list[Tiling | None]) -> measure.Job:
        return {"kernel": self.text, "soc": soc, "tilings": tilings, "inputs": self.inputs, "outputs": self.outputs, "resident": self.resident}

    def bound(self, t: Tiling) -> float:
        """No kernel with tiling `t` runs faster (all its launches): the roofline, and for
        a cube kernel its largest block's padded cube blocks at one a cycle per launch."""
        if not isinstance(self.space, CubeSpace):
            return self.roofline
        bb, mbf, nbf = self.space.blocks(t)
        m0f, n0f = t["m0"] // FRACTAL, t["n0"] // FRACTAL
        return max(self.roofline, self.launches * bb * -(-mbf // m0f) * m0f * -(-nbf // n0f) * n0f * self.space.kf)

    def pool(self, rng: random.Random) -> list[Tiling]:
        """The kernel's space (its first SPACE_SAMPLE tilings) in a random order, drawn once."""
        if self._pool is None:
            pool = []
            for t in self.space.candidates():
                pool.append(t)
                if len(pool) >= SPACE_SAMPLE:
                    break
            rng.shuffle(pool)
            self._pool = pool
        return self._pool

    def propose(self, rng: random.Random, width: int) -> list[Tiling]:
        """Up to `width` untimed tilings worth timing; the kernel is done when there are none."""
        proposed: list[Tiling] = []
        seen = set(self.timed)
        if self.best is not None:
            near = self.space.neighbours(self.best)
            rng.shuffle(near)
            knobs = knobs_of(self.best)
            near.sort(key=lambda t: knobs_of(t) != knobs)  # the tiling's moves first, then the knobs'
            proposed += self._keep(near, seen, width)
        if len(proposed) < width:
            proposed += self._keep(self.pool(rng), seen | {_sig(t) for t in proposed}, width - len(proposed))
        self.done = not proposed
        return proposed

    def _keep(self, tilings: list[Tiling], seen: set[tuple[int, ...]], width: int) -> list[Tiling]:
        kept: list[Tiling] = []
        for t in tilings:
            if len(kept) >= width:
                break
            sig = _sig(t)
            if sig in seen:
                continue
            seen.add(sig)
            if self.bound(t) >= self.best_cycles:
                self.timed[sig] = math.inf  # pruned: never better than the best
                self.pruned += 1
                continue
            kept.append(t)
        return kept

    def record(self, t: Tiling, cycles: float) -> None:
        self.timed[_sig(t)] = cycles
        if cycles < self.best_cycles * (1 - 1e-9):
            self.best, self.best_cycles = t, cycles

    @property
    def settled(self) -> bool:
        return self.done or self.best_cycles <= self.roofline * (1 + ROOFLINE_SLACK)


def _sig(t: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(t[k] for k in sorted(t))


@dataclass(frozen=True)
class Progress:
    """What a progress bar shows after each timed candidate."""

    evaluated: int
    total: int | None
    """The budget's candidates, if it has a count."""
    best_cycles: float
    """The kernels' time at their best tilings so far (all their launches)."""
    analytic_cycles: float
    elapsed: float


@dataclass
class _Tally:
    """One round's progress as its candidates come back, in whatever order."""

    kernels: list[Kernel]
    owners: list[Kernel]
    """The kernel of each batch of the round."""
    base: int
    total: int | None
    analytic: float
    started: float
    on_progress: Callable[[Progress], None] | None
    count: int = 0

    def done(self, i: int, timed: list[float]) -> None:
        self.count += len(timed)
        owner = self.owners[i]
        owner.live = min(owner.live, *timed)
        if self.on_progress is not None:
            best = sum(min(k.live, k.analytic) for k in self.kernels)
            self.on_progress(Progress(self.base + self.count, self.total, best, self.analytic, time.perf_counter() - self.started))


def search(
    kernels: list[Kernel], soc: str, backend: Backend, budget: Budget, seed: int = 0,
    on_progress: Callable[[Progress], None] | None = None,
) -> int:
    """Tune `kernels` in place (their `best`); the number of candidates timed."""
    started = time.perf_counter()
    rng = random.Random(seed)
    for k in kernels:
        measure.warm(k.text)
    first = backend.map(measure.cycles, [k.job(soc, [None]) for k in kernels])
    bounds = backend.map(measure.roofline, [k.job(soc, []) for k in kernels])
    for k, (cycles,), bound in zip(kernels, first, bounds):
        k.analytic, k.roofline = cycles, bound
        k.best_cycles = k.live = cycles
        if k.seed is not None and k.space.legal(k.seed):
            k.timed[_sig(k.seed)] = cycles
            k.best = dict(k.seed)
    analytic = sum(k.analytic for k in kernels)
    evaluated = 0

    def out_of_budget() -> bool:
        spent = budget.candidates is not None and evaluated >= budget.candidates
        late = budget.seconds is not None and time.perf_counter() - started >= budget.seconds
        return spent or late

    while not out_of_budget():
        batches: list[tuple[Kernel, list[Tiling]]] = []
        room = math.inf if budget.candidates is None else budget.candidates - evaluated
        for k in kernels:
            if room <= 0:
                break
            proposed = k.propose(rng, int(min(room, WIDTH))) if not k.settled else []
            if proposed:
                batches.append((k, proposed))
                room -= len(proposed)
        if not batches:
            break
        tally = _Tally(kernels, [k for k, _ in batches], evaluated, budget.candidates, analytic, started, on_progress)
        results = backend.map(measure.cycles, [k.job(soc, list(ts)) for k, ts in batches], tally.done)
        for (k, ts), timed in zip(batches, results):
            for t, cycles in zip(ts, timed):
                k.record(t, cycles)  # in order: the same best whatever order the batches finished in
            evaluated += len(ts)
    return evaluated


def seed_of(space: Space, tiling: Mapping[str, int], block_dim: int) -> Tiling | None:
    """The analytic tiling (a kernel's `tiling` attribute) in the space's terms: the
    cube keys and the knobs it sets (the analytic choice of A's residency)."""
    if isinstance(space, CubeSpace):
        knobs = {k: int(tiling[k]) for k in CUBE_KNOBS if k in tiling}
        return {**{k: int(tiling[k]) for k in CUBE_KEYS}, **knobs} if all(k in tiling for k in CUBE_KEYS) else None
    if isinstance(space, AttentionSpace):
        keys = [p + k for p in space.prefixes for k in CUBE_KEYS] + ([] if space.flash else [SOFTMAX])
        if not all(k in tiling for k in keys):
            return None
        knobs = {p + k: int(tiling[p + k]) for p in space.prefixes for k in CUBE_KNOBS if p + k in tiling}
        return {k: int(tiling[k]) for k in keys} | knobs | ({SHARED: 1} if tiling.get(SHARED) else {})
    if "tile_rows" not in tiling:
        return None
    return {"block_dim": block_dim, "tile_rows": int(tiling["tile_rows"])}
