"""Attention's scores on chip: the MultiHeadAttention kernels of ViT-B/16 (batch 1 and
64) and BERT-base (sequence 128, batch 1 and 16) on Ascend310P3 (or `--soc`: on the
Ascend910B1 the flash phase runs through the workspace, the cores apart), timing only: each
kernel's time, roofline bound, GM bytes and compulsory bytes (the per-kernel figures
are the mean over the model's attention kernels, which are all alike), and the
model's latency. With L2 off too (`--no-l2`), where every re-read is GM's.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/flash_attention.py [--only vit_b_16_b64] [--soc Ascend310P3] [--no-l2]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import ge
from ge.session import Session
from ge.sim.config import RunConfig
from ge.testing.real_models import batched_path

OP_TYPE = "MultiHeadAttention"


@dataclass(frozen=True)
class Case:
    name: str
    model: str
    batch: int


CASES = (
    Case("vit_b_16_b1", "vit_b_16", 1), Case("vit_b_16_b64", "vit_b_16", 64),
    Case("bert_base_b1", "bert_base", 1), Case("bert_base_b16", "bert_base", 16),
)


def measure(case: Case, soc: str, l2: bool) -> str:
    """One table row: the attention kernels' figures and the model's latency."""
    started = time.perf_counter()
    om = ge.compile(batched_path(case.model, case.batch), {"soc_version": soc})
    compile_s = time.perf_counter() - started
    with Session(RunConfig(timing_only=True, l2_cache=l2)) as session:
        profile = session.run(om).profile
    clock = profile.clock_mhz
    rows = [r for r in profile.rows() if r.record.op_type == OP_TYPE]
    if not rows:
        return f"| {case.name} | {soc} | no {OP_TYPE} kernel | | | | | | {profile.latency_us:,.1f} |"
    n = len(rows)
    us = sum(r.record.duration for r in rows) / clock / n
    bound = sum(r.roofline.cycles for r in rows) / clock / n
    gm = sum(r.gm_bytes for r in rows) / n / 1e6
    compulsory = sum(r.roofline.compulsory_bytes for r in rows) / n / 1e6
    print(f"{case.name} on {soc}: compiled in {compile_s:.0f} s", flush=True)
    return (
        f"| {case.name} | {soc} | {n} | {us:,.1f} | {bound:,.1f} | {us / bound:.2f} | {gm:,.1f} | {compulsory:,.1f} | "
        f"{profile.latency_us:,.1f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help=f"cases (default all: {', '.join(c.name for c in CASES)})")
    parser.add_argument("--soc", action="append", help="SoCs (default Ascend310P3)")
    parser.add_argument("--no-l2", action="store_true", help="run without the L2 cache")
    args = parser.parse_args()
    lines = [
        f"| case | soc | kernels | us per kernel | bound us | x bound | GM MB per kernel | compulsory MB | model latency us (L2 {'off' if args.no_l2 else 'on'}) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for soc in args.soc or ["Ascend310P3"]:
        for case in (c for c in CASES if not args.only or c.name in args.only):
            lines.append(measure(case, soc, not args.no_l2))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
