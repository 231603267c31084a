"""Timing one kernel with one tiling: the job a tuner sends to its workers.

A job is plain data (`Job`: the kernel's IR text, the SoC, a tiling), so that it
travels to a worker process or a Ray worker without compiler state. The worker
rebuilds the kernel from the scope its compute region holds with that tiling,
prints it as the build would, decodes its program as the simulator does, and
places its blocks on an idle chip (`ge.sim.timing.run_kernel`): the kernel's cycles
alone, launch excluded, GM bandwidth shared by its blocks, L2 cold. The model run
(`ge.aoe.tune`) is the final judge, L2 state between kernels included.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TypedDict

from ge.core import soc as socs
from ge.core.errors import ModelError
from ge.sim import program, timing
from passes.lower_to_kernel import Scope, build_kernel, kernel_text, parse_kernel, scope_of_kernel
from passes.lowering.program import element_bytes, numel


class Job(TypedDict):
    kernel: str
    """The kernel's IR text (its compute region is the scope)."""
    soc: str
    tiling: dict[str, int] | None
    """None: the analytic tiling."""


@lru_cache(maxsize=64)
def _scope(text: str) -> Scope:
    """The scope of a kernel text, parsed once per process."""
    return scope_of_kernel(parse_kernel(text))


def cycles(job: Job) -> float:
    """The kernel's cycles alone with the job's tiling; inf when the tiling is refused."""
    profile = socs.load(job["soc"])
    try:
        kernel = build_kernel(job["soc"], _scope(job["kernel"]), job["tiling"])
    except ModelError:
        return math.inf
    text = next(iter(program.split_kernels(kernel_text(kernel)).values()))
    try:
        block = timing.time_block(text.program())
    except ModelError:
        return math.inf
    counts = {"AiCore": profile.ai_cores, "VectorCore": profile.vector_cores}
    kind = text.header.core_type if counts.get(text.header.core_type) else "AiCore"
    run = timing.run_kernel(timing.Cores(counts), kind, 0.0, text.header.block_dim, block, timing.GmLedger(timing.chip_gm_bytes_per_cycle(profile)))
    return run.end


def roofline(job: Job) -> float:
    """The least cycles of the kernel on this chip whatever its tiling: its arguments
    moved once at the chip's GM rate, or its cube work at peak on every core."""
    profile = socs.load(job["soc"])
    scope = _scope(job["kernel"])
    nbytes = sum(numel(v) * element_bytes(v) for v in (*scope.inputs, *scope.outputs))
    memory = nbytes / timing.chip_gm_bytes_per_cycle(profile)
    kernel = build_kernel(job["soc"], scope, None)
    text = next(iter(program.split_kernels(kernel_text(kernel)).values()))
    block = timing.time_block(text.program())
    return max(memory, text.header.block_dim * block.cube_blocks / max(profile.ai_cores, 1))
