"""Shapes: what multi-gear builds cost against static builds, in compile time and latency.

For each model, a static compile of every shape the gears take, then N-gear builds
(N = 2, 4, 8: the first N of the model's gear values; GE's gear options take 2 to
100 gears, so N = 1 is the static build) through `--dynamic_batch_size` (ResNet) or
`--dynamic_dims` (BERT: sequence lengths), serially as `ge.compile` builds them
and, with `--parallel`, over `ge.distributed.backend("local")` (a job per gear on
one forked worker per core; the faster of two builds). Every build runs timing
only on each of its shapes. The table gives, per N: the N-gear compile time (wall, and this
process's CPU time, steadier when other jobs share the cores); the ratio of its CPU
time to N static compiles of the reference shape (the first gear value) and to the
sum of the static compiles of the same N shapes; the parallel build's wall time
over N static compiles' wall time; what the gears shared (weights derived once,
kernels taken from an earlier gear); the largest gear-latency / static-latency
ratio over the gears (the gear runs inside GE's Case: the gear-index copy, the
LABEL_SWITCH_BY_INDEX, its LABEL_SET and STREAM_ACTIVE, then its static tasks);
and the feature map planned against the sum over the gears. A second table splits
the largest serial build's time by phase, summed over its gears, beside the same
phase summed over the static compiles of the same shapes: where a phase's work is
shared between the gears, the gears take less of it than the statics. Models: the real
ResNet-50 export of `ge.testing.real_models` (batch gears), a BERT-like encoder of
`ge.testing.gear_models` (hidden 256, 4 layers; the real BERT-base export and the
bundled tiny BERT are traced at one batch and sequence length, which their Reshapes
hold as constants, so they take no gears), and the bundled tiny ResNet. The BERT-base
export with dynamic batch and sequence (`ge.testing.real_models.dynamic_path`, TorchScript
exporter; its shape chains are sized on the host per shape, `ge.dynamic.infer_shapes`)
is measured fully dynamic only, at its first two sequence lengths, the batch pinned to 1.

    .venv/bin/python benchmarks/shapes.py [--only resnet50 bert_like bert_base_dynamic tiny_resnet] [--parallel] [--readme]

The fully dynamic build (`ge.dynamic`: the -1 input_shape, compiled once, built and
tiled on the host per input shape at run time, every task launched from the host) gets
its own table: its compile time against the static compile of the reference shape, and
at each of `DYNAMIC_SHAPES` values the static and the dynamic latency (timing only),
the dynamic graph's build of that shape run as a sunk task list (what its kernels
alone cost: the difference from the static latency is fusion the dynamic graph lacks),
their difference, the host tiling and launch time the simulator charged
(`ge.sim.timing.HOST_TILING_US` per kernel op, `HOST_LAUNCH_US` per task) and the
first run's host build (shape inference, tiling, build) in wall-clock seconds. The
gap is the part of the host's serial tiling and launches the device did not hide
behind earlier kernels. `--strategies dynamic` measures it alone.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

import ge
from ge import distributed, gears
from ge.core.options import CompileOptions
from ge.dynamic import ShapeBuilds
from ge.models import DEMO_MODELS
from ge.om import Region
from ge.session import Session
from ge.sim import timing
from ge.sim.config import RunConfig
from ge.sim.runtime import input_specs
from ge.testing.gear_models import bert_like
from ge.testing.real_models import dynamic_path, model_path

console = Console(width=160)
GEARS = (2, 4, 8)
BERT_HIDDEN, BERT_LAYERS = 256, 4
DYNAMIC_SHAPES = 4
"""The first values of a model's gear values at which the dynamic build is measured."""
COMPILE_GOAL = 0.6
"""The issue's goal: an 8-gear compile under 0.6 x 8 static compiles."""
PHASE_FLOOR = 0.01
"""Phases under this share of the largest build's time are left out of the phase table."""
PARALLEL_RUNS = 2
"""Parallel builds per N, the fastest kept: their wall time is what other jobs on the cores leave them."""
LATENCY_GOAL = 1.02
"""The issue's goal: a gear's latency within 2% of the static model's."""


@dataclass(frozen=True)
class Spec:
    """How a model's gears are given: the option, the -1 input_shape and its values."""

    path: str
    option: str
    inputs: tuple[tuple[str, str], ...]
    """(input name, its dims with {} for the gear value)"""
    values: tuple[int, ...]
    strategies: tuple[str, ...] = ("gears", "dynamic")
    measured: int = DYNAMIC_SHAPES
    """How many of `values` the dynamic build is measured at."""

    def input_shape(self, value: int | str) -> str:
        return ";".join(f"{name}:{dims.format(value)}" for name, dims in self.inputs)

    def gears(self, n: int) -> str:
        chosen = self.values[:n]
        if self.option == "dynamic_batch_size":
            return ",".join(map(str, chosen))
        return ";".join(",".join([str(v)] * len(self.inputs)) for v in chosen)


def specs(folder: Path) -> dict[str, Callable[[], Spec]]:
    batches = (1, 2, 4, 8, 3, 6, 12, 16)
    seqs = (128, 64, 256, 32, 96, 192, 48, 160)
    bert = (("input_ids", "1,{}"), ("attention_mask", "1,{}"))
    bert_base = (*bert, ("token_type_ids", "1,{}"))
    return {
        "resnet50": lambda: Spec(str(model_path("resnet50")), "dynamic_batch_size", (("input", "{},3,224,224"),), batches),
        "bert_like": lambda: Spec(bert_like(folder / "bert_like.onnx", hidden=BERT_HIDDEN, layers=BERT_LAYERS), "dynamic_dims", bert, seqs),
        "tiny_resnet": lambda: Spec(str(DEMO_MODELS[0].path), "dynamic_batch_size", (("input", "{},3,32,32"),), batches),
        "bert_base_dynamic": lambda: Spec(str(dynamic_path("bert_base", "torchscript")), "dynamic_dims", bert_base, seqs, ("dynamic",), 2),
    }


def compiled(path: str, flags: dict[str, str]) -> tuple[ge.Model, float]:
    started = time.perf_counter()
    model = ge.compile(path, {"export_compile_stat": 0, **flags})
    return model, time.perf_counter() - started


def feeds_of(model: ge.Model, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """Zeros of `shapes` in the model's input dtypes (a dynamic model's from its graph)."""
    dtypes = {p.name: np.dtype(p.dtype) for p in model.dynamic.inputs} if model.dynamic is not None else {n: d for n, d, _ in input_specs(model)}
    return {name: np.zeros(shape, dtypes[name]) for name, shape in shapes.items()}


@dataclass(frozen=True)
class Timed:
    """A compile's model, wall seconds and this process's CPU seconds."""

    model: ge.Model
    wall: float
    cpu: float


def timed(path: str, flags: dict[str, str], workers: distributed.Backend | None = None) -> Timed:
    """A compile (a multi-gear one over `workers` when given), timed in wall and CPU seconds."""
    started, cpu = time.perf_counter(), time.process_time()
    options = {"export_compile_stat": 0, **flags}
    if workers is None:
        model = ge.compile(path, options)
    else:
        model = gears.compile(path, CompileOptions.from_flags(**options), workers)
    return Timed(model, time.perf_counter() - started, time.process_time() - cpu)


def latency_us(session: Session, model: ge.Model, shapes: dict[str, tuple[int, ...]]) -> float:
    """Simulated latency (timing only) on inputs of `shapes`, which pick the gear."""
    return session.run(model, feeds_of(model, shapes)).latency_us


def bench_dynamic(name: str, spec: Spec, rows: list[list[str]], notes: list[str]) -> None:
    """The fully dynamic build against static builds of the same shapes."""
    session = Session(RunConfig(timing_only=True))
    compiled(spec.path, {"input_shape": spec.input_shape(spec.values[0])})  # warm-up
    _, reference = compiled(spec.path, {"input_shape": spec.input_shape(spec.values[0])})
    model, seconds = compiled(spec.path, {"input_shape": spec.input_shape(-1)})
    console.print(f"[dim]{name}: dynamic {spec.input_shape(-1)} compiled in {seconds:.1f} s[/]")
    gaps = []
    same = True
    for value in spec.values[: spec.measured]:
        static, _ = compiled(spec.path, {"input_shape": spec.input_shape(value)})
        shapes = {d.name: d.origin_shape for d in static.inputs}
        ran = session.run(static, feeds_of(static, shapes))
        fixed, static_kernels = ran.latency_us, len(ran.profile.kernels() + ran.profile.aicpu_kernels())
        started = time.perf_counter()
        result = session.run(model, feeds_of(model, shapes))
        built = time.perf_counter() - started
        kernels = result.profile.kernels() + result.profile.aicpu_kernels()
        sunk = session.run(ShapeBuilds(model, session.config).build(shapes), feeds_of(static, shapes)).latency_us
        charged = len(result.profile.records) * timing.HOST_LAUNCH_US + len(kernels) * timing.HOST_TILING_US
        gaps.append((result.latency_us - fixed) / len(kernels))
        same = same and [r.name for r in kernels] == [r.name for r in ran.profile.kernels() + ran.profile.aicpu_kernels()]
        rows.append([
            name, spec.input_shape(value), f"{seconds:.2f}", f"{seconds / reference:.2f}", f"{fixed:,.1f}", f"{sunk:,.1f}", f"{result.latency_us:,.1f}",
            f"{result.latency_us / fixed:.3f}", f"{result.latency_us - fixed:,.1f}", f"{charged:,.0f}", f"{static_kernels} / {len(kernels)}",
            f"{(result.latency_us - fixed) / len(kernels):.1f}", f"{built:.2f}",
        ])  # fmt: skip
    notes.append(
        f"{name}, fully dynamic: one compile of {seconds:.2f} s ({seconds / reference:.2f} x the static compile) for every shape; "
        f"per kernel op the host charges {timing.HOST_TILING_US:g} us tiling + {timing.HOST_LAUNCH_US:g} us launch, and the latency "
        f"grows by {min(gaps):.1f} to {max(gaps):.1f} us per kernel op over the static build's"
        + (" (the same kernels and task list)" if same else " (the dynamic graph has other kernels: see 'kernel ops')")
    )


def bench(name: str, spec: Spec, rows: list[list[str]], notes: list[str], phases: list[list[str]], parallel: bool) -> None:
    session = Session(RunConfig(timing_only=True))
    compiled(spec.path, {"input_shape": spec.input_shape(spec.values[0])})  # warm-up: imports, caches, the file in the page cache
    statics: dict[int, Timed] = {}
    for value in spec.values[: max(GEARS)]:
        statics[value] = timed(spec.path, {"input_shape": spec.input_shape(value)})
        console.print(f"[dim]{name}: static {spec.input_shape(value)} compiled in {statics[value].wall:.1f} s ({statics[value].cpu:.1f} s CPU)[/]")
    static_latency = {v: latency_us(session, t.model, {d.name: d.origin_shape for d in t.model.inputs}) for v, t in statics.items()}
    reference = statics[spec.values[0]]
    first = reference.model
    rows.append([name, "1 (static)", spec.input_shape(spec.values[0]), f"{reference.wall:.2f}", f"{reference.cpu:.2f}", "1.00", "1.00", "-", "-", "-",
                 "1.000", f"{first.memory.sizes[Region.FEATURE_MAP]:,}", "-"])
    dynamic = spec.input_shape(-1)
    pool = distributed.backend("local") if parallel else None
    for n in GEARS:
        flags = {"input_shape": dynamic, spec.option: spec.gears(n)}
        built = timed(spec.path, flags)
        model, cpu = built.model, built.cpu
        console.print(f"[dim]{name}: {n} gears compiled in {built.wall:.1f} s ({cpu:.1f} s CPU)[/]")
        in_parallel = f"{min(timed(spec.path, flags, pool).wall for _ in range(PARALLEL_RUNS)) / (n * reference.wall):.2f}" if pool is not None else "-"
        ratios = [latency_us(session, model, g.shapes) / static_latency[spec.values[i]] for i, g in enumerate(model.gears)]
        same = sum(statics[v].cpu for v in spec.values[:n])
        shared = model.build["gears"]
        made = shared["compile"]  # type: ignore[index]
        fm_sum = shared["feature_map"]["sum_of_gears_bytes"]  # type: ignore[index]
        rows.append([
            name, str(n), spec.gears(n), f"{built.wall:.2f}", f"{cpu:.2f}", f"{cpu / (n * reference.cpu):.2f}", f"{cpu / same:.2f}", in_parallel,
            str(made["derived_weights"]), f"{made['kernels_taken']} of {made['kernels_lowered'] + made['kernels_taken']}",
            f"{max(ratios):.3f}", f"{model.memory.sizes[Region.FEATURE_MAP]:,}", f"{fm_sum:,}",
        ])
        if n == max(GEARS):
            timings = model.build["timings"]
            total = sum(timings.values())  # type: ignore[arg-type]
            alone = {p: sum(statics[v].model.build["timings"].get(p, 0.0) for v in spec.values[:n]) for p in timings}  # type: ignore[union-attr]
            for phase, spent in sorted(timings.items(), key=lambda kv: -kv[1]):  # type: ignore[union-attr]
                if spent >= PHASE_FLOOR * total:
                    ratio = f"{spent / alone[phase]:.2f}" if alone[phase] else "-"
                    phases.append([name, phase, f"{spent:.2f}", f"{100 * spent / total:.0f} %", f"{alone[phase]:.2f}", ratio])
            w, k = shared["weights"], shared["kernels"]  # type: ignore[index]
            notes.append(
                f"{name}, {n} gears: compile {cpu / (n * reference.cpu):.2f} x N static compiles in CPU time (goal < {COMPILE_GOAL}: "
                f"{'met' if cpu / (n * reference.cpu) < COMPILE_GOAL else 'NOT met'}), {cpu / same:.2f} x the static compiles of "
                f"the same shapes{f', {in_parallel} x N static compiles in wall time in parallel' if pool is not None else ''}; worst gear latency "
                f"{max(ratios):.3f} x static (goal <= {LATENCY_GOAL}: {'met' if max(ratios) <= LATENCY_GOAL else 'NOT met'}); weights "
                f"stored {w['stored_bytes']:,} bytes for {w['per_gear_bytes']:,} over the gears, {made['derived_weights']} derived once; "
                f"kernels {k['stored']} stored for {k['per_gear']}, {made['kernels_taken']} taken from an earlier gear"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=["resnet50", "bert_like", "bert_base_dynamic"], choices=["resnet50", "bert_like", "bert_base_dynamic", "tiny_resnet"])
    parser.add_argument("--strategies", nargs="*", default=["gears", "dynamic"], choices=["gears", "dynamic"])
    parser.add_argument("--parallel", action="store_true", help="also build the gears over ge.distributed.backend('local')")
    parser.add_argument("--readme", action="store_true", help="print the tables as Markdown for benchmarks/README.md")
    args = parser.parse_args()
    rows: list[list[str]] = []
    dynamic_rows: list[list[str]] = []
    notes: list[str] = []
    phases: list[list[str]] = []
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    console.print(f"{date.today()}, {os.cpu_count()} cores, Python {platform.python_version()}, load average {load} at the start")
    with tempfile.TemporaryDirectory() as folder:
        every = specs(Path(folder))
        for name in args.only:
            spec = every[name]()
            if "gears" in args.strategies and "gears" in spec.strategies:
                bench(name, spec, rows, notes, phases, args.parallel)
            if "dynamic" in args.strategies and "dynamic" in spec.strategies:
                bench_dynamic(name, spec, dynamic_rows, notes)
    columns = ["model", "gears", "gear values", "compile s", "CPU s", "/ (N x static)", "/ sum of statics", "parallel / (N x static)",
               "weights derived once", "kernels taken", "gear / static latency (worst)", "feature map B", "sum over gears B"]
    phase_columns = ["model", f"phase ({max(GEARS)} gears)", "gears s", "share", "statics s", "gears / statics"]
    dynamic_columns = ["model", "shape", "dynamic compile s", "/ static compile", "static us", "dynamic graph sunk us", "dynamic us", "dynamic / static",
                       "+ us", "host us charged", "kernel ops static / dynamic", "+ us per op", "first-run host build s"]  # fmt: skip
    tables = [(t, c, r) for t, c, r in (("static and multi-gear builds", columns, rows), ("where the largest build's time goes", phase_columns, phases),
                                         ("fully dynamic builds", dynamic_columns, dynamic_rows)) if r]  # fmt: skip
    for title, cols, body in tables:
        table = Table(title=title, title_justify="left")
        for c in cols:
            table.add_column(c, justify="left" if c in ("model", "gear values", "shape", cols[1]) else "right")
        for row in body:
            table.add_row(*row)
        console.print(table)
    for note in notes:
        console.print(note)
    if args.readme:
        for _, cols, body in tables:
            print("| " + " | ".join(cols) + " |")
            print("|" + "---|" * len(cols))
            for row in body:
                print("| " + " | ".join(row) + " |")
            print()
        for note in notes:
            print(f"- {note}")


if __name__ == "__main__":
    main()
