"""Distributed jobs: throughput of candidate evaluation on 1 and 2 workers, local and
Ray, and what a Ray task costs.

The job stands for a tuning candidate's evaluation: compile a one-kernel model
(a Conv or a MatMul, several shapes) with `ge.compile` and time it on the simulator
(timing only). Each backend first runs one round of the jobs (a pool's workers
start, a Ray worker imports the compiler), then the measured round: jobs per second
over the wall time of `Backend.map`, and the speedup over one worker in this process.
Beside them, the machine's ceiling: the speedup of 2 local workers over 1 on a
CPU-only loop, measured before and after (on an idle 2-core machine, 2.0).
Ray's per-task cost is measured with an empty job: one task's round trip (submit and
get, one after the other), and a map of many empty jobs one job a task against
batches of `BATCH`.

    PYTHONPATH=. .venv/bin/python benchmarks/distributed.py [--rounds 2] [--readme]

The machine's load matters: where other work keeps the cores busy, the jobs wait for
a CPU, and two workers do not get twice the CPU of one (Linux's autogroup scheduling
shares the CPU between sessions, not processes: all of this run's processes, pool
and Ray workers alike, share one session's part); the table gives the load average
(last minute) after each measurement, and the ceiling says what was reachable.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import onnx
from onnx import TensorProto, helper, numpy_helper
from rich.console import Console
from rich.table import Table

import ge
from ge.distributed import Backend, InProcess, LocalPool
from ge.distributed.cluster import RayBackend

SOC = "Ascend310P3"
CONVS = ((1, 64, 56, 56, 64, 3), (1, 128, 28, 28, 128, 3), (1, 256, 14, 14, 256, 3), (4, 64, 56, 56, 128, 1))
"""Conv cases: batch, in channels, height, width, out channels, kernel size."""
MATMULS = ((128, 768, 768), (128, 768, 3072), (512, 1024, 1024), (64, 4096, 1024))
"""MatMul cases: M, K, N."""
EMPTY_JOBS = 400
BATCH = 20
ROUND_TRIPS = 50
SPIN = 2_000_000


def conv_model(n: int, c: int, h: int, w: int, k: int, r: int) -> onnx.ModelProto:
    import numpy as np

    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((k, c, r, r)).astype(np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[r // 2] * 4)
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, k, h, w])], [weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def matmul_model(m: int, k: int, n: int) -> onnx.ModelProto:
    import numpy as np

    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((k, n)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "matmul", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], [weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def evaluate(path: str) -> float:
    """One candidate: compile the kernel's model, time it on the simulator."""
    model = ge.compile(path, {"soc_version": SOC})
    return ge.Session(ge.RunConfig(timing_only=True)).run(model).latency_us


def empty(x: int) -> int:
    return x


def spin(n: int) -> int:
    """A pure-Python loop: CPU only, no memory traffic, no imports."""
    total = 0
    for i in range(n):
        total += i * i
    return total


def ceiling() -> float:
    """The speedup of 2 local workers over 1 on a CPU-only job: what the machine's other
    work leaves to this run's processes (2.0 on an idle 2-core machine)."""
    items = [SPIN] * 8
    here, _ = timed(InProcess(), spin, items)
    pool = LocalPool(2)
    pool.map(spin, items[:2])
    two, _ = timed(pool, spin, items)
    pool.close()
    return here / two


def models(folder: Path) -> list[str]:
    paths = []
    for i, case in enumerate(CONVS):
        paths.append(str(folder / f"conv{i}.onnx"))
        onnx.save(conv_model(*case), paths[-1])
    for i, case in enumerate(MATMULS):
        paths.append(str(folder / f"matmul{i}.onnx"))
        onnx.save(matmul_model(*case), paths[-1])
    return paths


def timed(runner: Backend, fn: Callable[[object], object], items: list) -> tuple[float, list]:
    started = time.perf_counter()
    results = runner.map(fn, items)
    return time.perf_counter() - started, results


def throughput(paths: list[str], rounds: int) -> list[tuple[str, int, float, float, float]]:
    """(backend, workers, jobs per second, speedup over one worker here, the machine's
    load average over the last minute) for each backend."""
    items = paths * rounds
    rows: list[tuple[str, int, float, float, float]] = []
    reference: list | None = None
    for name, workers, make in (
        ("local", 1, InProcess), ("local", 2, lambda: LocalPool(2)),
        ("ray", 1, lambda: RayBackend(workers=1)), ("ray", 2, lambda: RayBackend(workers=2)),
    ):
        runner = make()
        runner.map(evaluate, paths[: 2 * workers])  # warm up: workers started, the compiler imported
        seconds, results = timed(runner, evaluate, items)
        runner.close()
        reference = reference or results
        assert results == reference, f"{name} x{workers} gave other latencies"
        rate = len(items) / seconds
        rows.append((name, workers, rate, rate / rows[0][2] if rows else 1.0, os.getloadavg()[0]))
    return rows


def ray_overhead() -> dict[str, float]:
    """Milliseconds: one empty task's round trip, and per empty job in a map, one a task and batched."""
    import ray

    runner = RayBackend(workers=2)
    runner.map(empty, list(range(4)))
    noop = ray.remote(empty)
    ray.get(noop.remote(0))
    started = time.perf_counter()
    for i in range(ROUND_TRIPS):
        ray.get(noop.remote(i))
    trip = (time.perf_counter() - started) / ROUND_TRIPS
    items = list(range(EMPTY_JOBS))
    item, _ = timed(runner, empty, items)
    batched = RayBackend(workers=2, batch=BATCH)
    batch, _ = timed(batched, empty, items)
    local, _ = timed(LocalPool(2), empty, items)
    runner.close()
    return {"round trip": trip * 1e3, "item": item / EMPTY_JOBS * 1e3, "batched": batch / EMPTY_JOBS * 1e3, "local": local / EMPTY_JOBS * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="times each model is evaluated in the measured map")
    parser.add_argument("--readme", action="store_true", help="print the tables as Markdown for benchmarks/README.md")
    args = parser.parse_args()
    console = Console()
    with tempfile.TemporaryDirectory(prefix="ge-distributed-") as folder:
        paths = models(Path(folder))
        limit = ceiling()
        rows = throughput(paths, args.rounds)
        limit = (limit + ceiling()) / 2
    overhead = ray_overhead()
    jobs = len(paths) * args.rounds
    title = f"{jobs} candidate evaluations (compile + timing-only run of a Conv or MatMul, {len(paths)} shapes), {os.cpu_count()} cores"
    table = Table(title=title, title_justify="left")
    for column in ("backend", "workers", "jobs/s", "speedup", "load average"):
        table.add_column(column, justify="left" if column == "backend" else "right")
    for name, workers, rate, speedup, load in rows:
        table.add_row(name, str(workers), f"{rate:.2f}", f"{speedup:.2f}x", f"{load:.1f}")
    console.print(table)
    console.print(f"the machine's ceiling: 2 local workers run a CPU-only loop {limit:.2f}x as fast as 1 (mean of before and after)")
    costs = Table(title="Ray's cost per task (ms), 2 workers, empty jobs", title_justify="left")
    for column in ("one task's round trip", "map, one job a task", f"map, {BATCH} jobs a task", "local pool map"):
        costs.add_column(column, justify="right")
    costs.add_row(*(f"{overhead[k]:.3f}" for k in ("round trip", "item", "batched", "local")))
    console.print(costs)
    if args.readme:
        print("| backend | workers | jobs/s | speedup | load average |\n|---|---:|---:|---:|---:|")
        for name, workers, rate, speedup, load in rows:
            print(f"| {name} | {workers} | {rate:.2f} | {speedup:.2f}x | {load:.1f} |")
        print(f"\nCeiling (a CPU-only loop, 2 local workers over 1): {limit:.2f}x")
        print(f"\n| one task's round trip | map, one job a task | map, {BATCH} jobs a task | local pool map |\n|---:|---:|---:|---:|")
        print("| " + " | ".join(f"{overhead[k]:.3f} ms" for k in ("round trip", "item", "batched", "local")) + " |")


if __name__ == "__main__":
    main()
