"""Where the cube kernels' time goes beyond their roofline bounds: the rows of
benchmarks/kernels.py, each cube kernel's time cut at its block's first and last
mmad (from its pipe trace), summed per model.

For each model and SoC (the cases and SoCs of `kernels.py`), with the L2 cache and
without, over the AI Core kernel tasks that run the cube:

- time: the tasks' durations (`TaskRecord.duration`: from their blocks' start), and
  their roofline bounds;
- wait: the tasks' waits before their blocks start (`TaskRecord.wait`: the launch,
  `timing.KERNEL_LAUNCH_US`, and on a second stream the time another stream's
  kernels hold the cores: ResNet-50's downsampling branch), in the latency but not
  in the time;
- first loads: from a block's start to its first mmad (the tiling read, the
  bias table, the first A and B panels, the first L0 moves);
- mmads: from the first mmad's start to the last one's end, and the cube's
  busy share of it (below 1: the cube waits on MTE1 or MTE2 in between);
- drain: from the last mmad's end to the block's end (the last tile through FIX
  or the vector epilogue);
- the rest: waves beyond the first and the stretch of the chip's GM or L2
  bandwidth (a kernel's bytes over the chip's rate longer than its blocks).

Then the kernel time over the roofline sum of every kernel (as kernels.py), and
the same with the waits added. `--readme` writes the tables into the kernel_gaps
section of benchmarks/README.md (between its two markers).

    .venv/bin/python benchmarks/kernel_gaps.py [--only resnet50_b1] [--soc Ascend910B1] [--readme]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import date

import kernels

from ge.session import Session
from ge.sim.config import RunConfig
from ge.sim.profile import Profile
from ge.sim.program import PIPE

BEGIN, END = "<!-- kernel_gaps.py results -->", "<!-- end kernel_gaps.py results -->"


@dataclass
class Gaps:
    """Microseconds summed over a run's cube kernels (see the module docstring)."""

    kernels: int = 0
    time: float = 0.0
    bound: float = 0.0
    wait: float = 0.0
    first: float = 0.0
    mmads: float = 0.0
    cube_busy: float = 0.0
    drain: float = 0.0
    rest: float = 0.0

    @classmethod
    def of(cls, profile: Profile) -> Gaps:
        clock = profile.clock_mhz
        gaps = cls()
        for row in profile.rows():
            r, t = row.record, row.record.block_timing
            if r.kind != "KERNEL" or t is None or t.cube_blocks <= 0 or t.spans is None:
                continue
            cube = [s for s in t.spans if s.pipe == PIPE["M"]]
            start, end = min(s.start for s in cube), max(s.end for s in cube)
            gaps.kernels += 1
            gaps.time += r.duration / clock
            gaps.bound += row.roofline.cycles / clock
            gaps.wait += r.wait / clock
            gaps.first += start / clock
            gaps.mmads += (end - start) / clock
            gaps.cube_busy += sum((s.end - s.start) * s.busy for s in cube) / clock
            gaps.drain += (t.cycles - end) / clock
            gaps.rest += (r.duration - t.cycles) / clock
        return gaps

    def cells(self) -> list[str]:
        return [
            str(self.kernels), f"{self.time:,.1f}", f"{self.bound:,.1f}", f"{self.wait:,.1f}", f"{self.first:,.1f}",
            f"{self.mmads:,.1f}", f"{self.cube_busy / self.mmads:.0%}" if self.mmads else "-", f"{self.drain:,.1f}", f"{self.rest:,.1f}",
        ]  # fmt: skip


HEADER = (
    "| model | batch | L2 | cube kernels | time us | bound us | wait us | first loads us | mmads us | cube busy in mmads "
    "| drain us | rest us | all kernels / roofline | with waits |"
)


def run(om, l2: bool) -> Profile:
    return Session(RunConfig(timing_only=True, l2_cache=l2, profile_level="pipe")).run(om).profile


def row(case: kernels.Case, profile: Profile, l2: bool) -> str:
    rows = profile.rows()
    waits = sum(r.record.wait for r in rows)
    time = sum(r.record.duration for r in rows)
    bound = sum(r.roofline.cycles for r in rows)
    cells = [case.model, str(case.batch), "on" if l2 else "off", *Gaps.of(profile).cells()]
    return "| " + " | ".join([*cells, f"{time / bound:.2f}", f"{(time + waits) / bound:.2f}"]) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="case names to run (default all)")
    parser.add_argument("--soc", action="append", help=f"SoCs (default {', '.join(kernels.SOCS)})")
    parser.add_argument("--readme", action="store_true", help="write the tables into benchmarks/README.md")
    args = parser.parse_args()
    cases = [c for c in kernels.CASES if not args.only or c.name in args.only]
    lines: list[str] = []
    for soc in args.soc or kernels.SOCS:
        lines += ["", f"#### {soc}", "", HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
        for case in cases:
            om = kernels.compiled(case, soc)
            lines += [row(case, run(om, l2), l2) for l2 in (True, False)]
    lines += ["", f"- Measured {date.today().isoformat()}, timing only, default options (force_fp16)."]
    print("\n".join(lines))
    if args.readme:
        text = kernels.README.read_text()
        if BEGIN not in text or END not in text:
            raise SystemExit(f"{kernels.README} has no '{BEGIN}' ... '{END}' markers to write between")
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        kernels.README.write_text(head + BEGIN + "\n" + "\n".join(lines).lstrip("\n") + "\n" + END + tail)


if __name__ == "__main__":
    main()
