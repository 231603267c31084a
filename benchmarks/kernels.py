"""The kernels against the chip's limits: one table per SoC of what the simulator
says the models take, with the L2 cache and without.

For each row of the issue (`CASES`: ResNet-50 and ViT-B/16 at batch 1 and 64,
BERT-base at sequence 128 and batch 1 and 16, MobileNetV2 at batch 4, from
`ge.testing.real_models`) and SoC, compiled with the default options and run
timing only:

- latency (us) with the L2 cache (`ge.sim.l2`) and without it (`l2_cache=False`);
- the kernels' time over their roofline bounds, summed over every kernel task
  (`Profile.roofline_ratio`: 1.0 would be every kernel at the bound of the level
  each of its bytes comes from; a kernel's time is its blocks', msprof's Task
  Duration), and the same with the tasks' waits added (their launches, and on a
  second stream the time another stream's kernels hold the cores);
- the cube's busy share of the chip's peak over the latency (`cube_peak_fraction`);
- the bytes the kernels moved through GM with L2 and without, the reads L2 served,
  and the compulsory bytes (every kernel's arguments, each read or written once).

The issue's goals (#15): kernel time within 1.5x of the roofline sum, GM bytes with
L2 off within 1.3x of the compulsory bytes, ResNet-50 at batch 64 on the 310P3 with
the cube busy 60% of its peak, ResNet-50 in at most 58 kernels. Compiled models are cached in the
model cache's kernels/ folder, builds through the compile caches (rebuilt whenever
the compiler's sources change). `--readme` writes the tables into the kernels
section of benchmarks/README.md (between its two markers).

    .venv/bin/python benchmarks/kernels.py [--only resnet50_b1] [--soc Ascend310P3] [--readme]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import ge
from ge.om import Model
from ge.session import Session
from ge.sim.config import RunConfig
from ge.sim.profile import Profile
from ge.testing.real_models import CACHE_DIR, batched_path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "benchmarks" / "README.md"
BEGIN, END = "<!-- kernels.py results -->", "<!-- end kernels.py results -->"
CACHE = CACHE_DIR / "kernels"
SOCS = ("Ascend310P3", "Ascend910B1")
ROOFLINE_GOAL = 1.5
GM_GOAL = 1.3
CUBE_GOAL = 0.6
KERNELS_GOAL = 58


@dataclass(frozen=True)
class Case:
    name: str
    model: str
    batch: int

    def onnx_file(self) -> Path:
        """The model's ONNX file, exported at the case's batch."""
        return batched_path(self.model, self.batch)


CASES = (
    Case("resnet50_b1", "resnet50", 1),
    Case("resnet50_b64", "resnet50", 64),
    Case("vit_b_16_b1", "vit_b_16", 1),
    Case("vit_b_16_b64", "vit_b_16", 64),
    Case("bert_base_b1", "bert_base", 1),
    Case("bert_base_b16", "bert_base", 16),
    Case("mobilenet_v2_b4", "mobilenet_v2", 4),
)
"""The issue's rows (#15): ResNet-50 and ViT-B/16 at batch 1 and 64, BERT-base at
sequence 128 and batch 1 and 16, MobileNetV2 at batch 4."""


def compiled(case: Case, soc: str) -> Model:
    """The model built for `soc`, through the compile caches (`op_compiler_cache_mode`):
    a build is reused only while the compiler's sources and the options are the same."""
    started = time.perf_counter()
    options = {"soc_version": soc, "op_compiler_cache_mode": "enable", "op_compiler_cache_dir": str(CACHE / "compile_cache")}
    model = ge.compile(case.onnx_file(), options)
    print(f"{case.name} for {soc}: {time.perf_counter() - started:.0f} s to compile or find in the cache")
    return model


@dataclass(frozen=True)
class Row:
    case: Case
    on: Profile
    off: Profile

    def cells(self) -> list[str]:
        on, off = self.on, self.off
        gm_on, l2 = on.traffic()
        gm_off, _ = off.traffic()
        compulsory = off.compulsory_bytes()  # each argument once, at most what was moved: without L2, all of it through GM
        return [
            self.case.model, str(self.case.batch), str(len(on.kernels())),
            f"{on.latency_us:,.0f}", f"{off.latency_us:,.0f}",
            f"{on.roofline_ratio():.2f}", f"{_with_waits(on):.2f}", f"{off.roofline_ratio():.2f}",
            f"{on.cube_peak_fraction():.1%}", f"{off.cube_peak_fraction():.1%}",
            _mb(gm_on), _mb(gm_off), _mb(l2), _mb(compulsory), f"{gm_off / compulsory:.2f}",
        ]  # fmt: skip


HEADER = (
    "| model | batch | kernels | latency us, L2 | latency us, no L2 | kernel time / roofline, L2 | with waits | no L2 "
    "| cube of peak, L2 | no L2 "
    "| GM MB, L2 | GM MB, no L2 | L2 hits MB | compulsory MB | GM no L2 / compulsory |"
)


def measure(case: Case, soc: str) -> Row:
    om = compiled(case, soc)
    on = Session(RunConfig(timing_only=True)).run(om).profile
    off = Session(RunConfig(timing_only=True, l2_cache=False)).run(om).profile
    return Row(case, on, off)


def tables(rows: dict[str, list[Row]]) -> list[str]:
    lines = []
    for soc, soc_rows in rows.items():
        lines += ["", f"#### {soc}", "", HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
        lines += ["| " + " | ".join(row.cells()) + " |" for row in soc_rows]
    return lines


def _with_waits(profile: Profile) -> float:
    """The kernels' time with their tasks' waits over their roofline bounds."""
    rows = profile.rows()
    return sum(r.record.duration + r.record.wait for r in rows) / sum(r.roofline.cycles for r in rows)


def notes(rows: dict[str, list[Row]]) -> list[str]:
    all_rows = [row for soc_rows in rows.values() for row in soc_rows]
    within = sum(row.on.roofline_ratio() <= ROOFLINE_GOAL for row in all_rows)
    gm = sum(row.off.traffic()[0] <= GM_GOAL * row.off.compulsory_bytes() for row in all_rows)
    lines = [
        "",
        (
            f"- Goals (#15): kernel time within {ROOFLINE_GOAL}x of the roofline sum on {within} of {len(all_rows)} rows; "
            f"GM bytes with L2 off within {GM_GOAL}x of the compulsory bytes on {gm} of {len(all_rows)}."
        ),
    ]
    for row in rows.get("Ascend310P3", []):
        if row.case.name == "resnet50_b64":
            cube = row.on.cube_peak_fraction()
            lines.append(f"- ResNet-50 at batch 64 on the 310P3: the cube busy {cube:.1%} of its peak (goal {CUBE_GOAL:.0%}).")
    for soc, soc_rows in rows.items():
        for row in soc_rows:
            if row.case.name == "resnet50_b1":
                count = len(row.on.kernels())
                lines.append(f"- ResNet-50 on the {soc} at the default precision: {count} kernels (goal at most {KERNELS_GOAL}).")
    return [*lines, f"- Measured {date.today().isoformat()}, timing only, default options (force_fp16)."]


def write_readme(lines: list[str]) -> None:
    text = README.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{README} has no '{BEGIN}' ... '{END}' markers to write between")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    README.write_text(head + BEGIN + "\n" + "\n".join(lines).lstrip("\n") + "\n" + END + tail)


def _mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:,.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="case names to run (default all)")
    parser.add_argument("--soc", action="append", help=f"SoCs (default {', '.join(SOCS)})")
    parser.add_argument("--readme", action="store_true", help="write the tables into benchmarks/README.md")
    args = parser.parse_args()
    cases = [c for c in CASES if not args.only or c.name in args.only]
    rows: dict[str, list[Row]] = {}
    for soc in args.soc or SOCS:
        rows[soc] = [measure(case, soc) for case in cases]
    lines = tables(rows) + notes(rows)
    print("\n".join(lines))
    if args.readme:
        write_readme(lines)


if __name__ == "__main__":
    main()
