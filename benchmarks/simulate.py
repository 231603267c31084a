"""The simulator's own speed, and what it says the models take on each part.

Speed: the wall time of the `ge run` command (a fresh process each time: start-up,
imports, reading and checking the `.om`, decoding the kernels, the run, writing the
outputs) on ResNet-50 at batch 1 and 8 and BERT-base at batch 1, compiled for
Ascend910B1, with numerics and with `--timing-only`, next to onnxruntime's CPU
inference of the same ONNX file in the same run (one session, default settings,
median of the inferences after one warm-up; its session creation is not counted).
The CPU seconds of the `ge run` processes are shown too: on a shared machine they
move less than the wall time.

Simulated figures: for each model and SoC, the latency `ge run` reports, the
throughput at the model's batch, and the fraction of the chip's cube peak the run
reaches over its latency (timing only: the numbers do not depend on the values).

The ResNet-50 batch-8 file is the batch-1 export with its input and output batch
set to 8 (ResNet's graph has no batch-dependent constant). Compiled models and
inputs are cached in the model cache's simulate/ folder. `--readme` writes the tables into the
simulator section of benchmarks/README.md (between its two markers).

    .venv/bin/python benchmarks/simulate.py [--runs 3] [--only resnet50_b1] [--readme]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np

import ge
from ge.session import Session
from ge.sim.config import RunConfig
from ge.testing.real_models import CACHE_DIR, batched_path, model_inputs, model_path

ROOT = Path(__file__).resolve().parent.parent


README = ROOT / "benchmarks" / "README.md"
BEGIN, END = "<!-- simulate.py results -->", "<!-- end simulate.py results -->"
CACHE = CACHE_DIR / "simulate"
GE = Path(sys.executable).parent / "ge"
SPEED_SOC = "Ascend910B1"
SOCS = ("Ascend310P3", "Ascend910A", "Ascend910B1")
GOALS = {"resnet50_b1": (3.0, 1.0)}
"""Wall-time goals in seconds (with numerics, timing only)."""


@dataclass(frozen=True)
class Case:
    name: str
    model: str
    batch: int


CASES = (Case("resnet50_b1", "resnet50", 1), Case("resnet50_b8", "resnet50", 8), Case("bert_base_b1", "bert_base", 1))


def onnx_file(case: Case) -> Path:
    """The model's ONNX file, with its batch set to the case's."""
    return batched_path(case.model, case.batch)


def inputs(case: Case) -> dict[str, np.ndarray]:
    feeds = model_inputs(model_path(case.model))
    return {k: np.concatenate([v] * case.batch) for k, v in feeds.items()}


def compiled(case: Case, soc: str) -> Path:
    path = CACHE / f"{case.name}-{soc}.om"
    source = onnx_file(case)
    if not path.exists() or path.stat().st_mtime < source.stat().st_mtime:
        CACHE.mkdir(parents=True, exist_ok=True)
        ge.compile(source, {"soc_version": soc}).save(path)
    return path


def input_args(case: Case) -> list[str]:
    args = []
    for name, value in inputs(case).items():
        file = CACHE / f"{case.name}-{name}.npy"
        np.save(file, value)
        args.append(f"--input={name}={file}")
    return args


def ge_run(args: list[str], runs: int) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds of `ge run args` in fresh processes."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run([str(GE), "run", *args], capture_output=True, text=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"ge run {' '.join(args)} failed: {done.stderr.strip()}")
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def ort_seconds(case: Case, runs: int) -> float:
    import onnxruntime as ort

    session = ort.InferenceSession(str(onnx_file(case)), providers=["CPUExecutionProvider"])
    feeds = inputs(case)
    session.run(None, feeds)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def speed(cases: list[Case], runs: int) -> str:
    rows = []
    for case in cases:
        om = compiled(case, SPEED_SOC)
        out = CACHE / f"{case.name}-outputs"
        full, full_cpu = ge_run([str(om), *input_args(case), f"--output={out}"], runs)
        timed, timed_cpu = ge_run([str(om), "--timing-only"], runs)
        ort = ort_seconds(case, max(runs, 5))
        rows.append((case, full, full_cpu, timed, timed_cpu, ort))
    lines = [
        "| model | batch | `ge run` s | CPU s | `--timing-only` s | CPU s | onnxruntime s | `ge run` / ORT |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for case, full, full_cpu, timed, timed_cpu, ort in rows:
        lines.append(
            f"| {case.model} | {case.batch} | {full:.2f} | {full_cpu:.2f} | {timed:.2f} | {timed_cpu:.2f} | {ort:.3f} | {full / ort:.0f}x |"
        )
    by_name = {r[0].name: r for r in rows}
    notes = []
    for name, (numerics_goal, timing_goal) in GOALS.items():
        if name in by_name:
            _, full, full_cpu, timed, timed_cpu, _ = by_name[name]
            notes.append(
                f"- {name}: with numerics {full:.2f} s wall, {full_cpu:.2f} s CPU (goal: under {numerics_goal:g} s); "
                f"timing only {timed:.2f} s wall, {timed_cpu:.2f} s CPU (goal: under {timing_goal:g} s)."
            )
    if "resnet50_b1" in by_name and "resnet50_b8" in by_name:
        one, eight = by_name["resnet50_b1"], by_name["resnet50_b8"]
        notes.append(
            f"- Batch 8 against batch 1 (ResNet-50, CPU seconds): {eight[2] / one[2]:.2f}x with numerics, "
            f"{eight[4] / one[4]:.2f}x timing only, for 8x the work."
        )
    return "\n".join(lines + [""] + notes)


def simulated(cases: list[Case]) -> str:
    lines = [
        "| model | batch | SoC | latency us | throughput /s | cube peak | kernels | bound (kernels by time share) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for case in cases:
        for soc in SOCS:
            profile = Session(RunConfig(timing_only=True)).run(compiled(case, soc)).profile
            shares: dict[str, float] = {}
            for row in profile.rows():
                shares[row.bound] = shares.get(row.bound, 0.0) + row.record.duration
            total = sum(shares.values())
            bound = ", ".join(f"{k} {v / total:.0%}" for k, v in sorted(shares.items(), key=lambda kv: -kv[1]))
            lines.append(
                f"| {case.model} | {case.batch} | {soc} | {profile.latency_us:,.0f} | {profile.throughput:,.0f} | "
                f"{profile.cube_peak_fraction():.1%} | {len(profile.kernels())} | {bound} |"
            )
    return "\n".join(lines)


def write_readme(text: str) -> None:
    """Replace the block between the simulator markers, leaving the rest of the file alone."""
    readme = README.read_text()
    if BEGIN not in readme or END not in readme:
        raise SystemExit(f"{README} has no '{BEGIN}' ... '{END}' block to fill")
    before, rest = readme.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    README.write_text(f"{before}{BEGIN}\n{text}\n{END}{after}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--only", nargs="*", choices=[c.name for c in CASES], help="cases to run")
    parser.add_argument("--readme", action="store_true", help="write the results into benchmarks/README.md")
    args = parser.parse_args()
    cases = [c for c in CASES if not args.only or c.name in args.only]
    for case in cases:
        for soc in SOCS:
            compiled(case, soc)  # compile first, so that no compile runs inside a timing
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    header = (
        f"{date.today().isoformat()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}, "
        f"median of {args.runs} runs, load average {load} at the start."
    )
    text = "\n".join([header, "", speed(cases, args.runs), "", simulated(cases)])
    print(text)
    if args.readme:
        write_readme(text)


if __name__ == "__main__":
    main()
