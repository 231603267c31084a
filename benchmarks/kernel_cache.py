"""The kernel compile cache: `ge atc` cold against warm, and where the warm time goes.

For each model, `--runs` times:
- off: `ge atc ... --op_compiler_cache_mode=disable` (no cache at all);
- cold: `ge atc` into an empty cache directory (every kernel built and stored, and
  the whole build stored in the model cache);
- warm: `ge atc` again into the directory the cold run filled (the whole build read
  from the model cache);
- kernels: `ge atc` again with the model cache's folder removed (every kernel read
  from the kernel cache, the rest compiled: what the kernel cache alone buys).
Each is a fresh process, as a user runs it (start-up and imports included), timed by
the wall clock and by its CPU time (user + system, steadier on a shared machine);
its phases are read back from the `.om` it wrote (`build.timings`). As the library
sees it, `ge.compile` is also timed twice in this process into a fresh directory.
Every figure is the median of the runs; the ratio is cold / warm wall time.

    .venv/bin/python benchmarks/kernel_cache.py [--runs 3] [--only resnet50] [--soc Ascend310P3]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import ge
from ge import model_cache
from ge.testing.real_models import model_path

BIN = Path(sys.executable).parent
MODELS = ("resnet50", "bert_base")
GOAL = 3.0
KINDS = ("off", "cold", "warm", "kernels")


def atc(path: Path, soc: str, output: Path, cache: Path, mode: str) -> tuple[float, float, dict[str, float]]:
    """Wall and CPU seconds of one `ge atc` process, and the phases it recorded."""
    command = [
        str(BIN / "ge"), "atc", f"--model={path}", "--framework=5", f"--output={output}", f"--soc_version={soc}",
        "--export_compile_stat=0", f"--op_compiler_cache_dir={cache}", f"--op_compiler_cache_mode={mode}",
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    model = ge.load_model(output.with_suffix(".om"))
    return wall, cpu, dict(model.build["timings"])  # type: ignore[arg-type]


def measure(name: str, soc: str, runs: int, workdir: Path) -> dict[str, object]:
    path = model_path(name)
    samples: dict[str, list[tuple[float, float, dict[str, float]]]] = {k: [] for k in KINDS}
    for run in range(runs):
        cache = workdir / f"{name}-{run}"
        samples["off"].append(atc(path, soc, workdir / "off", cache, "disable"))
        samples["cold"].append(atc(path, soc, workdir / "cold", cache, "enable"))
        samples["warm"].append(atc(path, soc, workdir / "warm", cache, "enable"))
        shutil.rmtree(cache / model_cache.FOLDER)
        samples["kernels"].append(atc(path, soc, workdir / "kernels", cache, "enable"))
    result: dict[str, object] = {"model": name}
    for kind, values in samples.items():
        result[kind] = statistics.median(v[0] for v in values)
        result[f"{kind} cpu"] = statistics.median(v[1] for v in values)
        phases = values[0][2]
        result[f"{kind} phases"] = {p: statistics.median(v[2].get(p, 0.0) for v in values) for p in phases}
    library = []
    for run in range(runs):
        flags = {"soc_version": soc, "export_compile_stat": 0, "op_compiler_cache_mode": "enable", "op_compiler_cache_dir": str(workdir / f"lib-{name}-{run}")}
        times = []
        for _ in range(2):
            started = time.perf_counter()
            ge.compile(path, flags)
            times.append(time.perf_counter() - started)
        library.append(times)
    result["library"] = tuple(statistics.median(x[i] for x in library) for i in range(2))
    return result


def report(results: list[dict[str, object]], runs: int, soc: str) -> None:
    load = os.getloadavg()[0]
    print(f"{date.today()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, {soc}, median of {runs} runs, load average {load:.1f}\n")
    print("| model | off s | cold s | warm s | kernels only s | cold / warm | cold CPU s | warm CPU s | goal (>= 3x) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        ratio = r["cold"] / r["warm"]  # type: ignore[operator]
        print(f"| {r['model']} | {r['off']:.2f} | {r['cold']:.2f} | {r['warm']:.2f} | {r['kernels']:.2f} | {ratio:.2f}x | "
              f"{r['cold cpu']:.2f} | {r['warm cpu']:.2f} | {'met' if ratio >= GOAL else 'not met'} |")
    for r in results:
        print(f"\n{r['model']}: phases in ms (from the .om), median")
        print("\n| phase | " + " | ".join(KINDS) + " |")
        print("|---|---|---|---|---|")
        phases = dict.fromkeys([*r["cold phases"], *r["warm phases"]])  # type: ignore[misc]
        for p in phases:
            print(f"| {p} | " + " | ".join(f"{r[f'{k} phases'].get(p, 0.0) * 1e3:.0f}" for k in KINDS) + " |")  # type: ignore[union-attr]
        totals = [sum(r[f"{k} phases"].values()) for k in KINDS]  # type: ignore[union-attr]
        print("| **all phases** | " + " | ".join(f"{t * 1e3:.0f}" for t in totals) + " |")
        outside = [r[k] - t for k, t in zip(KINDS, totals)]  # type: ignore[operator]
        print("| process start-up, imports, writing the .om | " + " | ".join(f"{o * 1e3:.0f}" for o in outside) + " |")
        cold, warm = r["library"]  # type: ignore[misc]
        print(f"\nin one process (ge.compile twice): {cold * 1e3:.0f} ms cold, {warm * 1e3:.0f} ms warm")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=MODELS, choices=MODELS)
    parser.add_argument("--soc", default="Ascend310P3")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ge-kernel-cache-bench-") as workdir:
        results = [measure(name, args.soc, args.runs, Path(workdir)) for name in args.only]
    report(results, args.runs, args.soc)


if __name__ == "__main__":
    main()
