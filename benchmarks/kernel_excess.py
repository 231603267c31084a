"""Where the kernels' time over their roofline goes: for each model and SoC of
`kernels.py` (the same compiled models, timing only, with the L2 cache and
without), the kernel time and the sum of the roofline bounds, the kernels' launches
(their waits, `timing.KERNEL_LAUNCH_US` each: in the latency, in neither the time
nor the bound), and the excess (time minus bound) of cube kernels
(those doing mmads) and vector kernels, then the op types of most excess.

    .venv/bin/python benchmarks/kernel_excess.py [--only bert_base_b1] [--soc Ascend910B1] [--top 6]
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from dataclasses import dataclass

from kernels import CASES, SOCS, compiled

from ge.session import Session
from ge.sim import timing
from ge.sim.config import RunConfig
from ge.sim.profile import OpRow, Profile


@dataclass
class Excess:
    """Time, bound and count of a group of kernel tasks (µs)."""

    time: float = 0.0
    bound: float = 0.0
    kernels: int = 0

    @property
    def excess(self) -> float:
        return self.time - self.bound

    def add(self, row: OpRow, clock_mhz: float) -> None:
        self.time += row.record.duration / clock_mhz
        self.bound += row.roofline.cycles / clock_mhz
        self.kernels += 1


def kind(row: OpRow) -> str:
    t = row.record.block_timing
    return "cube" if t is not None and t.cube_blocks > 0 else "vector"


def breakdown(profile: Profile, top: int) -> list[str]:
    total = Excess()
    kinds: dict[str, Excess] = defaultdict(Excess)
    ops: dict[tuple[str, str], Excess] = defaultdict(Excess)
    for row in profile.rows():
        for group in (total, kinds[kind(row)], ops[kind(row), row.record.op_type]):
            group.add(row, profile.clock_mhz)
    launch = sum(row.record.wait for row in profile.rows()) / profile.clock_mhz
    lines = [
        f"kernel time {total.time:,.0f} us, bounds {total.bound:,.0f} us: {total.time / total.bound:.2f}x; "
        f"launches {launch:,.0f} us ({total.kernels} kernels), with them {(total.time + launch) / total.bound:.2f}x; "
        + ", ".join(f"{k} excess {e.excess:,.0f} us ({e.kernels} kernels)" for k, e in sorted(kinds.items())),
        "",
        "| kind | op type | kernels | time us | bound us | excess us | launches us |",
        "|---|---|---|---|---|---|---|",
    ]
    worst = sorted(ops.items(), key=lambda kv: -kv[1].excess)[:top]
    lines += [
        f"| {k} | {op} | {e.kernels} | {e.time:,.1f} | {e.bound:,.1f} | {e.excess:,.1f} | {e.kernels * timing.KERNEL_LAUNCH_US:,.0f} |"
        for (k, op), e in worst
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="case names to run (default all)")
    parser.add_argument("--soc", action="append", help=f"SoCs (default {', '.join(SOCS)})")
    parser.add_argument("--top", type=int, default=6, help="op types to list per run")
    args = parser.parse_args()
    for soc in args.soc or SOCS:
        for case in (c for c in CASES if not args.only or c.name in args.only):
            om = compiled(case, soc)
            for l2 in (True, False):
                profile = Session(RunConfig(timing_only=True, l2_cache=l2)).run(om).profile
                print(f"\n#### {soc}, {case.model} batch {case.batch}, {'L2' if l2 else 'no L2'}\n")
                print("\n".join(breakdown(profile, args.top)))


if __name__ == "__main__":
    main()
