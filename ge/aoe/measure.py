"""Timing one kernel with one tiling: the job a tuner sends to its workers.

A job is plain data (`Job`: the kernel's IR text, the SoC, a tiling, its
launches' argument sizes and L2 state), so that it travels to a worker process or
a Ray worker without compiler state. The worker rebuilds the kernel from the scope
its compute region holds with that tiling, prints it as the build would, decodes
its program as the simulator does (a MultiHeadAttention in one flash phase, whose
tuned tilings are its projections', is built as its projections alone: the flash
phase they leave as it is comes from the analytic build, decoded once per process:
a BERT-base candidate on the 310P3 takes 45 ms, not 139), and places its blocks on an idle chip
(`ge.sim.timing.run_kernel`), its reads served by an L2 (`ge.sim.l2`) holding what
the model run held of its inputs when each launch started. That state depends on
the task list only (which ranges the tasks read and write), not on any kernel's
tiling, so it is exact; what the kernel alone does not see is other streams'
kernels sharing the cores and GM bandwidth. The model run (`ge.aoe.tune`) is the
final judge.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TypedDict

from ge.core import soc as socs
from ge.core.errors import ModelError
from ge.sim import program, timing
from ge.sim.l2 import L2, chip_l2_bytes_per_cycle
from passes.lower_to_kernel import (
    Scope,
    build_kernel,
    kernel_text,
    parse_kernel,
    scope_of_kernel,
)
from passes.lowering.attention import projections_only
from passes.lowering.program import element_bytes, numel
from passes.lowering.space import AttentionSpace, CubeSpace, space_of


class Job(TypedDict):
    kernel: str
    """The kernel's IR text (its compute region is the scope)."""
    soc: str
    tilings: list[dict[str, int] | None]
    """The candidates to time, a batch (None: the analytic tiling)."""
    inputs: list[int]
    outputs: list[int]
    """The bytes of each argument of its tasks."""
    resident: list[tuple[int, list[float]]]
    """Launches (how many, the share of each input in L2 as they start); summed."""


@lru_cache(maxsize=64)
def _scope(text: str) -> Scope:
    """The scope of a kernel text, parsed once per process."""
    return scope_of_kernel(parse_kernel(text))


def warm(text: str) -> None:
    """Parse a kernel's text in this process ahead of its jobs: forked workers inherit it."""
    _scope(text)


def cycles(job: Job) -> list[float]:
    """The kernel's cycles alone with each of the job's tilings, in order (one task per
    batch: the kernel is parsed and the job shipped once for all of them)."""
    return [_cycles(job, tiling) for tiling in job["tilings"]]


@lru_cache(maxsize=64)
def _flash_phase(text: str, soc: str) -> tuple | None:
    """Where the kernel's space tunes the projections of one flash phase alone, that
    phase as its analytic build's program decodes it (the top level's last entry,
    after a `sync_all`): built once per process."""
    scope = _scope(text)
    found = space_of(socs.load(soc), scope.ops, scope.inputs, scope.outputs)
    if not isinstance(found, AttentionSpace) or not found.flash:
        return None
    _, decoded = built_whole(soc, scope, None)
    assert decoded[-2][0] == program.SYNC_ALL
    return decoded[-1]


def built(job: Job, tiling: dict[str, int] | None) -> tuple[program.Header, tuple]:
    """The kernel with `tiling` (a `ModelError` where it is refused): its header and one
    block's decoded program. A candidate for the projections of a flash phase is built
    without that phase, which it leaves as it is: the job's kernel's own follows them."""
    flash = _flash_phase(job["kernel"], job["soc"]) if tiling is not None else None
    if flash is None:
        return built_whole(job["soc"], _scope(job["kernel"]), tiling)
    with projections_only():
        header, projections = built_whole(job["soc"], _scope(job["kernel"]), tiling)
    return header, (*projections, flash)


def built_whole(soc: str, scope: Scope, tiling: dict[str, int] | None) -> tuple[program.Header, tuple]:
    """The scope's kernel with `tiling`, built, printed and decoded as the simulator reads it."""
    text = next(iter(program.split_kernels(kernel_text(build_kernel(soc, scope, tiling))).values()))
    return text.header, text.program()


def _cycles(job: Job, tiling: dict[str, int] | None) -> float:
    """The kernel's cycles alone with `tiling`; inf when the tiling is refused."""
    profile = socs.load(job["soc"])
    try:
        header, code = built(job, tiling)
        block = timing.time_block(code, vector_half_apart=program.vector_half_apart(header))
    except ModelError:
        return math.inf
    counts = {"AiCore": profile.ai_cores, "VectorCore": profile.vector_cores}
    kind = header.core_type if counts.get(header.core_type) else "AiCore"
    block_dim = header.block_dim
    starts = [sum(job["inputs"][:i]) for i in range(len(job["inputs"]))]
    base = sum(job["inputs"])
    outputs = [(base + sum(job["outputs"][:i]), n) for i, n in enumerate(job["outputs"])]
    total = 0.0
    for launches, shares in job["resident"]:
        l2 = L2.of(profile)
        for start, size, share in zip(starts, job["inputs"], shares):
            l2.cache.touch(start, start + int(size * share))
        served = l2.task(list(zip(starts, job["inputs"])), outputs, block, block_dim, header.workspace)
        ledger = timing.GmLedger(timing.chip_gm_bytes_per_cycle(profile))
        run = timing.run_kernel(timing.Cores(counts), kind, 0.0, block_dim, block, ledger, l2.ledger, served.hit(block, block_dim), served.scratch > 0)
        total += launches * run.end
    return total


def roofline(job: Job) -> float:
    """The least cycles of the kernel's launches on this chip whatever its tiling: its
    arguments moved once (those in L2 through L2's bandwidth, the others through GM's,
    the two at once), or a cube kernel's unpadded fractal blocks at peak on every core."""
    profile = socs.load(job["soc"])
    scope = _scope(job["kernel"])
    nbytes = sum(numel(v) * element_bytes(v) for v in (*scope.inputs, *scope.outputs))
    found = space_of(profile, scope.ops, scope.inputs, scope.outputs)
    phases = [found] if isinstance(found, CubeSpace) else list(found.spaces) if isinstance(found, AttentionSpace) else []
    cube = sum(math.prod(s.units) * s.kf / max(s.cores, 1) for s in phases)  # an attention kernel's matmuls run one after another
    total = 0.0
    for launches, shares in job["resident"]:
        in_l2 = min(nbytes, sum(size * share for size, share in zip(job["inputs"], shares)))
        memory = max((nbytes - in_l2) / timing.chip_gm_bytes_per_cycle(profile), in_l2 / chip_l2_bytes_per_cycle(profile))
        total += launches * max(memory, cube)
    return total
