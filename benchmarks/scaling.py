"""Compile time against graph size: every phase of `ge.compile` on graphs of 1k to 50k nodes.

Two kinds of graph, generated here with `onnx.helper` and tiny shapes, so that the
time is the graph's size and not the numerics:
- `chain`: a chain of N elementwise Adds, `x_{k+1} = x_k + w_k` (each `w_k` its
  own 1x16 weight);
- `transformer`: N/15 blocks of MatMul + bias Add, Softmax, MatMul + bias Add, a
  residual Add and a LayerNorm written out as ONNX exporters write it
  (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add), on an 8x16 tensor.

Each size is compiled as `ge.compile` (and so `ge atc`) compiles a model, one step
at a time so that each is timed: `load_onnx` (import), `ge.pipeline.optimize`
(every optimisation pass, timed alone), `Compilation.lower`, `ge.backend.build`
(streams, memory, tasks, verify, weights, kernels) and `Model.save` (.om write),
for Ascend310P3 with the default options. The growth exponent of a column is the
least-squares slope of log(seconds) against log(nodes) over the sizes measured;
1 is linear.

    .venv/bin/python benchmarks/scaling.py [--only chain] [--sizes 1000 5000] [--runs 1]
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from rich.console import Console
from rich.table import Table

SIZES = (1_000, 5_000, 20_000, 50_000)
KINDS = ("chain", "transformer")
SOC = "Ascend310P3"
WIDTH = 16
ROWS = 8
BLOCK_NODES = 15
GOAL_EXPONENT = 1.2
GOAL_20K_S = 30.0
CPU = "CPU"


def chain_graph(nodes: int) -> onnx.ModelProto:
    """`nodes` Adds in a chain, each adding its own weight."""
    rng = np.random.default_rng(0)
    weights, body, x = [], [], "x"
    for k in range(nodes):
        weights.append(numpy_helper.from_array(rng.standard_normal((1, WIDTH)).astype(np.float32), f"w{k}"))
        body.append(helper.make_node("Add", [x, f"w{k}"], [f"a{k}"], name=f"add_{k}"))
        x = f"a{k}"
    return _model("chain", body, weights, x, [1, WIDTH])


def transformer_graph(nodes: int) -> onnx.ModelProto:
    """`nodes // 15` blocks: attention-like MatMul/Softmax/MatMul, residual Add, LayerNorm."""
    rng = np.random.default_rng(0)
    weights, body, x = [], [], "x"

    def weight(name: str, *shape: int) -> str:
        weights.append(numpy_helper.from_array((0.1 * rng.standard_normal(shape)).astype(np.float32), name))
        return name

    weights.append(numpy_helper.from_array(np.array([2.0], np.float32), "two"))
    weights.append(numpy_helper.from_array(np.array([1e-5], np.float32), "eps"))
    for b in range(max(1, nodes // BLOCK_NODES)):
        p = f"b{b}_"

        def node(op: str, inputs: list[str], out: str, **attrs) -> str:
            body.append(helper.make_node(op, inputs, [p + out], name=p + out, **attrs))
            return p + out

        h = node("MatMul", [x, weight(p + "w1", WIDTH, WIDTH)], "mm1")
        h = node("Add", [h, weight(p + "b1", WIDTH)], "bias1")
        h = node("Softmax", [h], "softmax", axis=-1)
        h = node("MatMul", [h, weight(p + "w2", WIDTH, WIDTH)], "mm2")
        h = node("Add", [h, weight(p + "b2", WIDTH)], "bias2")
        r = node("Add", [x, h], "residual")
        mean = node("ReduceMean", [r], "mean", axes=[-1], keepdims=1)
        d = node("Sub", [r, mean], "centered")
        sq = node("Pow", [d, "two"], "square")
        var = node("ReduceMean", [sq], "variance", axes=[-1], keepdims=1)
        e = node("Add", [var, "eps"], "plus_eps")
        sd = node("Sqrt", [e], "std")
        n = node("Div", [d, sd], "normalized")
        g = node("Mul", [n, weight(p + "gamma", WIDTH)], "scaled")
        x = node("Add", [g, weight(p + "beta", WIDTH)], "shifted")
    return _model("transformer", body, weights, x, [ROWS, WIDTH])


def _model(name: str, body: list, weights: list, out: str, shape: list[int]) -> onnx.ModelProto:
    graph = helper.make_graph(
        body,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, shape)],
        initializer=weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


GRAPHS = {"chain": chain_graph, "transformer": transformer_graph}


def compile_timed(path: Path, output: Path) -> tuple[dict[str, float], float]:
    """Seconds of each step of `ge.compile(path)` and the `.om` write, by step (passes by
    name), and the CPU seconds of the whole (steadier than the wall clock on a shared machine)."""
    from ge import backend, pipeline
    from ge.core.options import CompileOptions
    from ge.frontend import load_onnx

    options = CompileOptions(soc_version=SOC, export_compile_stat=0)
    times: dict[str, float] = {}
    cpu = time.process_time()
    started = time.perf_counter()
    module, _ = load_onnx(str(path))
    times["import"] = time.perf_counter() - started
    compilation = pipeline.optimize(module, options)
    times.update(compilation.pass_timings)
    compilation.lower()
    times["lowering"] = compilation.timings["lowering"]
    settings = backend.BuildOptions(soc_version=SOC, max_streams=options.aicore_streams, options=options.given())
    build: dict[str, float] = {}
    model = backend.build(module, settings, build)
    times.update({f"build: {k}": v for k, v in build.items()})
    started = time.perf_counter()
    model.save(output)
    times[".om write"] = time.perf_counter() - started
    return times, time.process_time() - cpu


def measure(kind: str, nodes: int, runs: int, workdir: Path) -> tuple[int, dict[str, float]]:
    """ONNX node count and the median seconds of each step over `runs` compiles (and
    of the CPU time, as the step `CPU`)."""
    model = GRAPHS[kind](nodes)
    path = workdir / f"{kind}_{nodes}.onnx"
    onnx.save(model, str(path))
    samples: list[dict[str, float]] = []
    for _ in range(runs):
        gc.collect()
        from ge.compiler import collecting_less

        with collecting_less():  # as ge.compile does
            steps, cpu = compile_timed(path, workdir / f"{kind}_{nodes}.om")
        samples.append({**steps, CPU: cpu})
    steps = list(samples[0])
    return len(model.graph.node), {s: statistics.median(t[s] for t in samples) for s in steps}


def exponent(nodes: list[int], seconds: list[float]) -> float | None:
    """Least-squares slope of log(seconds) on log(nodes)."""
    if len(nodes) < 2 or min(seconds) <= 0:
        return None
    return float(np.polyfit(np.log(nodes), np.log(seconds), 1)[0])


def columns(steps: dict[str, float], phase_of: dict[str, str]) -> dict[str, float]:
    """The steps summed by phase: import, each optimisation phase, lowering, each build step, .om write."""
    out: dict[str, float] = {}
    for step, seconds in steps.items():
        label = phase_of.get(step, step)
        out[label] = out.get(label, 0.0) + seconds
    return out


def phase_labels() -> dict[str, str]:
    """Each optimisation pass's phase (the pipeline's phase names)."""
    from ge import pipeline
    from ge.core.options import CompileOptions

    return {str(p.name): stage.name for stage in pipeline.phases(CompileOptions(soc_version=SOC)) for p in stage.passes}


def report(console: Console, kind: str, rows: list[tuple[int, dict[str, float]]], markdown: bool) -> None:
    """A table of seconds per phase (rows) and size (columns) with each phase's exponent,
    then the same for the slowest optimisation passes, then the verdicts."""
    labels = phase_labels()
    nodes = [n for n, _ in rows]
    by_phase = [columns({k: v for k, v in steps.items() if k != CPU}, labels) for _, steps in rows]
    totals = [sum(c.values()) for c in by_phase]
    cpu = [steps[CPU] for _, steps in rows]
    header = ["phase", *(f"{n:,}" for n in nodes), "exponent"]
    body = [_row(k, [c.get(k, 0.0) for c in by_phase], nodes) for k in dict.fromkeys(k for c in by_phase for k in c)]
    body.append(_row("total", totals, nodes))
    body.append(_row("total CPU", cpu, nodes))
    body.append(["ms/node", *(f"{1e3 * t / n:.2f}" for n, t in zip(nodes, totals)), ""])
    _table(console, f"{kind}: seconds per phase", header, body, markdown)

    passes = [k for k in dict.fromkeys(k for _, s in rows for k in s) if k in labels]
    slowest = sorted(passes, key=lambda k: -rows[-1][1].get(k, 0.0))[:8]
    body = [_row(k, [s.get(k, 0.0) for _, s in rows], nodes) for k in slowest]
    _table(console, f"{kind}: the slowest optimisation passes, seconds", ["pass", *header[1:]], body, markdown)

    slope = exponent(nodes, totals)
    verdict = "met" if slope is not None and slope <= GOAL_EXPONENT else "NOT met"
    console.print(f"- {kind}: total time grows as nodes^{_slope(slope)} (goal: exponent <= {GOAL_EXPONENT}): {verdict}")
    for n, t, c in zip(nodes, totals, cpu):
        if 20_000 <= n < 21_000:
            met = "met" if t < GOAL_20K_S else "NOT met"
            console.print(f"- {kind}: {n:,} nodes in {t:.1f} s, {c:.1f} s of CPU (goal: 20,000 in under {GOAL_20K_S:.0f} s): {met}")


def _row(label: str, seconds: list[float], nodes: list[int]) -> list[str]:
    return [label, *(f"{s:.2f}" for s in seconds), _slope(exponent(nodes, seconds))]


def _slope(s: float | None) -> str:
    return "" if s is None else f"{s:.2f}"


def _table(console: Console, title: str, header: list[str], body: list[list[str]], markdown: bool) -> None:
    if markdown:
        console.print(f"\n{title}\n", markup=False)
        console.print("| " + " | ".join(header) + " |", markup=False, soft_wrap=True)
        console.print("|" + "---|" * len(header), markup=False, soft_wrap=True)
        for row in body:
            console.print("| " + " | ".join(row) + " |", markup=False, soft_wrap=True)
        return
    table = Table(title=title)
    for i, h in enumerate(header):
        table.add_column(h, justify="left" if i == 0 else "right")
    for row in body:
        table.add_row(*row)
    console.print(table)


def cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=KINDS, help="graph kinds to measure (default: both)")
    parser.add_argument("--sizes", nargs="*", type=int, default=list(SIZES), help="node counts (default: %(default)s)")
    parser.add_argument("--runs", type=int, default=1, help="compiles per size; the median is reported")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables (for the README)")
    args = parser.parse_args()
    console = Console(width=250 if args.markdown else None)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    console.print(
        f"{date.today().isoformat()}, {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{SOC}, median of {args.runs} run(s), load average {load} at the start",
        markup=False,
    )
    with tempfile.TemporaryDirectory() as workdir:
        for kind in args.only or KINDS:
            rows = []
            for n in sorted(args.sizes):
                rows.append(measure(kind, n, args.runs, Path(workdir)))
                print(f"measured {kind} {n:,}: {rows[-1][1][CPU]:.1f} s of CPU", file=sys.stderr, flush=True)
            report(console, kind, rows, args.markdown)


if __name__ == "__main__":
    main()
