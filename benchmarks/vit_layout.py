"""ViT's attention without its transposes: AttentionLayoutFusionPass on and off.

torchvision's ViT-B/16 (`ge.testing.real_models.batched_path`) at batch 1 and 64,
compiled for each SoC with the default options twice: as is, and with
AttentionLayoutFusionPass closed by a fusion switch file (what the compile did
before the pass). Each build runs timing only; the table gives the kernels, the
latency, the count and time of the layout kernels (those made of TransposeD,
ConfusionTransposeD and TransData only; a TransData fused into a matmul's kernel is
the matmul's) and the MultiHeadAttention kernels' time.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/vit_layout.py [--batch 1] [--soc Ascend310P3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import ge
from ge.session import Session
from ge.sim.config import RunConfig
from ge.sim.profile import Profile
from ge.testing.real_models import batched_path

SOCS = ("Ascend310P3", "Ascend910B1")
BATCHES = (1, 64)
PASS = "AttentionLayoutFusionPass"
LAYOUT_KERNELS = ("TransposeD", "ConfusionTransposeD", "TransData")


def profile(batch: int, soc: str, switch_file: Path | None) -> Profile:
    """The timing-only profile of ViT-B/16 at `batch` built for `soc` (with the switch file, if any)."""
    options = {"soc_version": soc}
    if switch_file is not None:
        options["fusion_switch_file"] = str(switch_file)
    started = time.perf_counter()
    om = ge.compile(batched_path("vit_b_16", batch), options)
    print(f"vit_b_16 b{batch} {soc} {'off' if switch_file else 'on'}: compiled in {time.perf_counter() - started:.0f} s")
    return Session(RunConfig(timing_only=True)).run(om).profile


def _time(p: Profile, kinds: tuple[str, ...]) -> tuple[int, float]:
    """How many kernels are made of `kinds` only (a fused kernel's op types joined by
    '+'), and their time in us."""
    rows = [r for r in p.rows() if all(t in kinds for t in r.record.op_type.split("+"))]
    return len(rows), sum(r.record.duration for r in rows) / p.clock_mhz


def _figures(p: Profile) -> tuple[str, ...]:
    """Kernels, latency, layout kernels and their time, attention time."""
    layout, layout_us = _time(p, LAYOUT_KERNELS)
    _, attention_us = _time(p, ("MultiHeadAttention",))
    return str(len(p.rows())), f"{p.latency_us:,.0f}", str(layout), f"{layout_us:,.0f}", f"{attention_us:,.0f}"


def cells(batch: int, soc: str, before: Profile, after: Profile) -> list[str]:
    pairs = [f"{b} / {a}" for b, a in zip(_figures(before), _figures(after))]
    return [str(batch), soc, *pairs, f"{before.latency_us / after.latency_us:.2f}x"]


HEADER = (
    "| batch | SoC | kernels before / after | latency us | layout kernels | layout kernel us "
    "| MultiHeadAttention us | speed-up |"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, action="append", help=f"batch sizes (default {BATCHES})")
    parser.add_argument("--soc", action="append", help=f"SoCs (default {', '.join(SOCS)})")
    args = parser.parse_args()
    lines = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
    with tempfile.TemporaryDirectory() as folder:
        switch = Path(folder) / "fusion_switch.cfg"
        switch.write_text(f"{PASS}:off\n")
        for batch in args.batch or BATCHES:
            for soc in args.soc or SOCS:
                before, after = profile(batch, soc, switch), profile(batch, soc, None)
                lines.append("| " + " | ".join(cells(batch, soc, before, after)) + " |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
