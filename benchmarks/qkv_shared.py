"""Self-attention's Q/K/V projections as one phase: the MultiHeadAttention kernels of
ViT-B/16 (batch 1 and 64) and BERT-base (sequence 128, batch 1 and 16) on Ascend310P3
and Ascend910B1, timing only, before (each projection its own phase:
`attention.separate_projections`) and after (the analytic plan sharing them where its
estimate says so): the attention kernels' time and roofline bound (sums over the
model's attention kernels), whether they share, and the model's latency and compile time.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/qkv_shared.py [--only vit_b_16_b64] [--soc Ascend910B1]
"""

from __future__ import annotations

import argparse
import time
from contextlib import nullcontext
from dataclasses import dataclass

import ge
from ge.session import Session
from ge.sim import program
from ge.sim.config import RunConfig
from ge.testing.real_models import batched_path
from passes.lowering.attention import separate_projections

OP_TYPE = "MultiHeadAttention"
SOCS = ("Ascend310P3", "Ascend910B1")


@dataclass(frozen=True)
class Case:
    name: str
    model: str
    batch: int


CASES = (
    Case("vit_b_16_b1", "vit_b_16", 1), Case("vit_b_16_b64", "vit_b_16", 64),
    Case("bert_base_b1", "bert_base", 1), Case("bert_base_b16", "bert_base", 16),
)


@dataclass(frozen=True)
class Figures:
    kernels_us: float
    bound_us: float
    shared: int
    kernels: int
    latency_us: float
    compile_s: float


def measure(case: Case, soc: str, share: bool) -> Figures:
    """The model's attention kernels' time and bound, and its latency, with or without sharing."""
    started = time.perf_counter()
    with nullcontext() if share else separate_projections():
        om = ge.compile(batched_path(case.model, case.batch), {"soc_version": soc})
    compile_s = time.perf_counter() - started
    attention = [k for k in program.split_kernels(om.kernels).values() if OP_TYPE in k.header.op_types]
    with Session(RunConfig(timing_only=True)) as session:
        profile = session.run(om).profile
    clock = profile.clock_mhz
    rows = [r for r in profile.rows() if r.record.op_type == OP_TYPE]
    return Figures(
        sum(r.record.duration for r in rows) / clock, sum(r.roofline.cycles for r in rows) / clock,
        sum("qkv_shared" in k.header_line for k in attention), len(attention), profile.latency_us, compile_s,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help=f"cases (default all: {', '.join(c.name for c in CASES)})")
    parser.add_argument("--soc", action="append", help=f"SoCs (default {', '.join(SOCS)})")
    args = parser.parse_args()
    lines = [
        "| case | soc | MHA us before | MHA us after | bound us | x bound before | x bound after | kernels sharing | latency us before | latency us after | compile s before / after |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for soc in args.soc or SOCS:
        for case in (c for c in CASES if not args.only or c.name in args.only):
            before, after = measure(case, soc, False), measure(case, soc, True)
            print(f"{case.name} on {soc}: {before.kernels_us:,.1f} -> {after.kernels_us:,.1f} us", flush=True)
            lines.append(
                f"| {case.name} | {soc} | {before.kernels_us:,.1f} | {after.kernels_us:,.1f} | {after.bound_us:,.1f} | "
                f"{before.kernels_us / before.bound_us:.2f} | {after.kernels_us / after.bound_us:.2f} | "
                f"{after.shared} of {after.kernels} | {before.latency_us:,.1f} | {after.latency_us:,.1f} | "
                f"{before.compile_s:.1f} / {after.compile_s:.1f} |"
            )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
