"""Self-attention's Q/K/V projections as one phase: the MultiHeadAttention kernels of
ViT-B/16 (batch 1 and 64) and BERT-base (sequence 128, batch 1 and 16) on Ascend310P3
and Ascend910B1, timing only, compiled three ways: the projections as three phases
(before: `attention.forced_projections(False)`), as one phase
(`forced_projections(True)`), and as the analytic plan chooses (after). Per row: the
attention kernels' time (summed over the model's attention kernels) and roofline
bound, the plan's estimate of the projections (`Phases.separate_cost`,
`cube.tile_shared_a`) against the projection phase of one simulated block, the
model's latency and the compile time.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/qkv_shared.py [--only vit_b_16_b64] [--soc Ascend910B1] [--compiles 3]
"""

from __future__ import annotations

import argparse
import time
from contextlib import nullcontext
from dataclasses import dataclass

from flash_attention import CASES, OP_TYPE, Case

import ge
from ge.core import soc as socs
from ge.session import Session
from ge.sim import program
from ge.sim.config import RunConfig
from ge.testing.real_models import batched_path
from passes.lower_to_kernel import parse_kernel, scope_of_kernel
from passes.lowering.attention import attention_phases, forced_projections
from passes.lowering.cube import tile_shared_a

SOCS = ("Ascend310P3", "Ascend910B1")


@dataclass(frozen=True)
class Figures:
    kernels_us: float
    bound_us: float
    projections_us: float
    """The projection phase of one block (simulated)."""
    estimate_us: float
    """The plan's estimate of the projections as built."""
    shared: bool
    latency_us: float
    compile_s: float


def measure(case: Case, soc: str, shared: bool | None, compiles: int) -> Figures:
    """The model compiled with its projections `shared` (None: as the plan chooses), run
    timing only; the compile time the least of `compiles` compiles."""
    profile = socs.load(soc)
    compile_s = float("inf")
    for _ in range(compiles):
        started = time.perf_counter()
        with nullcontext() if shared is None else forced_projections(shared):
            om = ge.compile(batched_path(case.model, case.batch), {"soc_version": soc})
        compile_s = min(compile_s, time.perf_counter() - started)
    with Session(RunConfig(timing_only=True)) as session:
        run = session.run(om).profile
    clock = run.clock_mhz
    rows = [r for r in run.rows() if r.record.op_type == OP_TYPE]
    kernel = next(k for k in program.split_kernels(om.kernels).values() if OP_TYPE in k.header.op_types)
    ph = attention_phases(profile, scope_of_kernel(parse_kernel(kernel.compute_text())).ops[0], profile.ai_cores)
    sharing = "qkv_shared" in kernel.header_line
    found = tile_shared_a(profile, ph.gemms[0], 3, ph.block_dim, ph.shared_fits)
    estimate = found[1] if sharing and found is not None else ph.separate_cost([ph.tiling(i) for i in range(3)])
    return Figures(
        sum(r.record.duration for r in rows) / clock, sum(r.roofline.cycles for r in rows) / clock,
        rows[0].record.block_timing.phases[0] / clock, estimate / profile.clock_mhz, sharing, run.latency_us, compile_s,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help=f"cases (default all: {', '.join(c.name for c in CASES)})")
    parser.add_argument("--soc", action="append", help=f"SoCs (default {', '.join(SOCS)})")
    parser.add_argument("--compiles", type=int, default=1, help="compile each model this many times, timing the fastest (default 1)")
    args = parser.parse_args()
    columns = (
        "case", "soc", "MHA us: 3 phases / 1 phase / analytic", "bound us", "x bound before / after", "analytic shares",
        "projections est us: 3 / 1", "projections sim us: 3 / 1", "latency us before / after", "compile s before / after",
    )
    lines = [f"| {' | '.join(columns)} |", "|" + "---|" * len(columns)]
    for soc in args.soc or SOCS:
        for case in (c for c in CASES if not args.only or c.name in args.only):
            before, one, after = (measure(case, soc, shared, args.compiles) for shared in (False, True, None))
            print(f"{case.name} on {soc}: {before.kernels_us:,.1f} -> {after.kernels_us:,.1f} us", flush=True)
            lines.append(
                f"| {case.name} | {soc} | {before.kernels_us:,.1f} / {one.kernels_us:,.1f} / {after.kernels_us:,.1f} | "
                f"{after.bound_us:,.1f} | {before.kernels_us / before.bound_us:.2f} / {after.kernels_us / after.bound_us:.2f} | "
                f"{'yes' if after.shared else 'no'} | {before.estimate_us:,.2f} / {one.estimate_us:,.2f} | "
                f"{before.projections_us:,.2f} / {one.projections_us:,.2f} | {before.latency_us:,.1f} / {after.latency_us:,.1f} | "
                f"{before.compile_s:.1f} / {after.compile_s:.1f} |"
            )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
