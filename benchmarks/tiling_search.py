"""The cube tiling search's time: `ge.compile` of real models, and `tile_gemm`'s share of it.

For each model, `ge.compile` runs in this process (the kernel cache off, as by
default) `--runs` times; the best wall and CPU (user + system) time is reported,
CPU time being the steadier on a shared machine, with the CPU time spent inside
`passes.lowering.cube.tile_gemm` (every call, from every kernel kind; a timer
wrapped around it where the lowering calls it). One more compile runs under
cProfile for tile_gemm's cumulative share of it (cProfile slows the many small
calls of a search more than the rest, so that share overstates it). To compare
two versions of the search, run the script at each commit on the same machine.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/tiling_search.py [--runs 2] [--only resnet50:1 bert_base:1 resnet50:64] [--soc Ascend310P3]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date

import ge
import passes.lowering
import passes.lowering.attention
import passes.lowering.recurrent
from ge.testing.real_models import batched_path
from passes.lowering import cube

MODELS = ("resnet50:1", "bert_base:1", "resnet50:64")
CALLERS = (passes.lowering, passes.lowering.attention, passes.lowering.recurrent)
"""The modules that call `tile_gemm` (each imported it by name)."""


@contextmanager
def search_timer() -> Iterator[list[float]]:
    """A list that collects the CPU seconds of every `tile_gemm` call meanwhile."""
    seconds: list[float] = []

    def timed_tile_gemm(*args, **kwargs) -> cube.CubeTiling:
        started = time.process_time()
        try:
            return cube.tile_gemm(*args, **kwargs)
        finally:
            seconds.append(time.process_time() - started)

    for module in CALLERS:
        module.tile_gemm = timed_tile_gemm  # type: ignore[attr-defined]
    try:
        yield seconds
    finally:
        for module in CALLERS:
            module.tile_gemm = cube.tile_gemm  # type: ignore[attr-defined]


def timed(name: str, batch: int, soc: str) -> tuple[float, float, float]:
    """Wall and CPU seconds of one `ge.compile`, and the CPU seconds of its searches."""
    path = batched_path(name, batch)
    with search_timer() as searches:
        wall, cpu = time.perf_counter(), time.process_time()
        ge.compile(path, {"soc_version": soc, "export_compile_stat": 0})
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, sum(searches)


def profiled(name: str, batch: int, soc: str) -> tuple[float, float, int]:
    """Under cProfile: the compile's seconds, `tile_gemm`'s cumulative seconds and its calls."""
    path = batched_path(name, batch)
    profile = cProfile.Profile()
    profile.enable()
    ge.compile(path, {"soc_version": soc, "export_compile_stat": 0})
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = max(cumulative for (_, _, function), (_, _, _, cumulative, _) in stats.items() if function == "compile")
    tiling = [(calls, cumulative) for (file, _, function), (calls, _, _, cumulative, _) in stats.items()
              if function == "tile_gemm" and file.endswith("cube.py")]
    return total, sum(c for _, c in tiling), sum(n for n, _ in tiling)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=MODELS, help="name:batch of `ge.testing.real_models`")
    parser.add_argument("--soc", default="Ascend310P3")
    args = parser.parse_args()
    rows = []
    for item in args.only:
        name, batch = item.split(":")
        runs = [timed(name, int(batch), args.soc) for _ in range(args.runs)]
        total, tiling, calls = profiled(name, int(batch), args.soc)
        best = min(runs, key=lambda r: r[1])
        rows.append((item, min(r[0] for r in runs), best[1], best[2], calls, tiling / total))
    load = os.getloadavg()[0]
    print(f"{date.today()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, {args.soc}, best of {args.runs} runs, load average {load:.1f}\n")
    print("| model:batch | compile wall s | compile CPU s | tile_gemm calls | tile_gemm CPU s | its share | its share under cProfile |")
    print("|---|---|---|---|---|---|---|")
    for item, wall, cpu, tiling, calls, profiled_share in rows:
        print(f"| {item} | {wall:.2f} | {cpu:.2f} | {calls} | {tiling:.3f} | {tiling / cpu:.0%} | {profiled_share:.0%} |")


if __name__ == "__main__":
    main()
