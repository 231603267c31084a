"""Whole-compile times: `ge atc` next to onnxruntime, TVM and IREE on the same ONNX files.

For each model:
- `ge atc --model=... --framework=5 --output=... --soc_version=...` runs as a user
  runs it (a fresh process: start-up and imports included), timed by the wall
  clock and by its CPU time (user + system, steadier on a shared machine); its
  phase breakdown is read back from the `.om` it wrote (`build.timings`);
- onnxruntime: creating an InferenceSession with ORT_ENABLE_ALL (all graph
  optimisations, CPU provider), in this process;
- TVM (when installed): `relax.frontend.onnx.from_onnx` then `relax.build` for
  `llvm`, untuned, in a fresh process: whole process and compile alone;
- IREE (when installed): `iree-import-onnx` then `iree-compile` for `llvm-cpu`
  (host CPU), the two commands' wall time.

TVM and IREE are benchmark-only tools, never dependencies of the project:
`pip install apache-tvm iree-base-compiler` into the venv to include them; the
script says which it skipped, and which failed on a model. Every figure is the
median of `--runs` runs (TVM and IREE: `--tool-runs`, default 1, as they take
minutes). Ratios divide the other tool's time by `ge atc`'s wall time.

    .venv/bin/python benchmarks/compile.py [--runs 3] [--only resnet50] [--soc Ascend310P3] [--peers ort]
"""

from __future__ import annotations

import argparse
import importlib.util
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

from ge.testing.real_models import model_path

BIN = Path(sys.executable).parent
MODELS = ("resnet50", "bert_base")
PEERS = ("ort", "tvm", "iree")
GOAL_RESNET_S = 3.0

TVM_SCRIPT = """
import sys, time
started = time.perf_counter()
import onnx
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx
imported = time.perf_counter()
module = from_onnx(onnx.load(sys.argv[1]))
converted = time.perf_counter()
relax.build(module, target="llvm")
built = time.perf_counter()
print(imported - started, converted - imported, built - converted)
"""


def median_time(runs: int, fn) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def ge_atc(path: Path, soc: str, runs: int, workdir: Path) -> tuple[float, float, dict[str, float], dict]:
    """Median wall and CPU (user + system) time of `ge atc`, and the phase timings and
    build figures of its last run. CPU time shows the work when other jobs share the cores."""
    output = workdir / path.stem
    command = [
        str(BIN / "ge"), "atc", f"--model={path}", "--framework=5", f"--output={output}",
        f"--soc_version={soc}", "--export_compile_stat=0",
    ]

    def run() -> None:
        done = subprocess.run(command, capture_output=True, text=True, cwd=workdir)
        if done.returncode:
            raise SystemExit(f"ge atc failed on {path.name}: {done.stderr.strip()}")

    cpu: list[float] = []

    def counted() -> None:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        run()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)

    wall = median_time(runs, counted)
    import ge
    from ge.om import Region

    model = ge.load_model(f"{output}.om")
    plan = model.memory
    figures = {
        "kernels": model.build["kernels"],
        "tasks": model.build["tasks"],
        "streams": model.streams,
        "feature_map": plan.sizes[Region.FEATURE_MAP],
        "minimum": plan.feature_map_minimum,
        "no_reuse": plan.feature_map_no_reuse,
        "om_bytes": os.path.getsize(f"{output}.om"),
    }
    return wall, statistics.median(cpu), model.build["timings"], figures


def onnxruntime_session(path: Path, runs: int) -> float:
    import onnxruntime as ort

    def create() -> None:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    create()  # load the provider libraries once, outside the timing
    return median_time(runs, create)


def tvm_build(path: Path, runs: int) -> tuple[float, float] | str:
    """(whole process, from_onnx + relax.build) seconds, or why there are none
    (TVM not installed, or its error on the model)."""
    if importlib.util.find_spec("tvm") is None:
        return "not installed (pip install apache-tvm)"
    walls, compiles = [], []
    for _ in range(runs):
        started = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", TVM_SCRIPT, str(path)], capture_output=True, text=True)
        walls.append(time.perf_counter() - started)
        if out.returncode:
            return f"failed: {_last_error(out.stderr)}"
        _, convert, build = map(float, out.stdout.split()[-3:])
        compiles.append(convert + build)
    return statistics.median(walls), statistics.median(compiles)


def _last_error(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if "Error" in line]
    return (errors or stderr.splitlines() or ["no output"])[-1].strip()


def iree_compile(path: Path, runs: int, workdir: Path) -> float | str:
    """Seconds of iree-import-onnx + iree-compile (llvm-cpu), or why there are none
    (IREE not installed, or its error on the model)."""
    importer, compiler = shutil.which("iree-import-onnx", path=BIN), shutil.which("iree-compile", path=BIN)
    if importer is None or compiler is None:
        return "not installed (pip install iree-base-compiler)"
    mlir, vmfb = workdir / f"{path.stem}.mlir", workdir / f"{path.stem}.vmfb"
    commands = [
        [importer, str(path), "-o", str(mlir)],
        [
            compiler, "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
            "--iree-llvmcpu-target-cpu=host", str(mlir), "-o", str(vmfb),
        ],
    ]
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        for command in commands:
            out = subprocess.run(command, capture_output=True, text=True)
            if out.returncode:
                return f"failed: {_last_error(out.stderr)}"
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tool-runs", type=int, default=1)
    parser.add_argument("--only", nargs="*", choices=MODELS, default=list(MODELS))
    parser.add_argument("--soc", default="Ascend310P3")
    parser.add_argument("--peers", nargs="*", choices=PEERS, default=list(PEERS), help="the other tools to time")
    args = parser.parse_args()

    import onnxruntime

    print(f"{date.today()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, onnxruntime {onnxruntime.__version__}, "
          f"tvm {_version('apache-tvm')}, iree {_version('iree-base-compiler')}; median of {args.runs} "
          f"(TVM, IREE: {args.tool_runs})\n")
    rows, breakdowns = [], []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in args.only:
            path = model_path(name)
            wall, cpu, timings, figures = ge_atc(path, args.soc, args.runs, work)
            ort = onnxruntime_session(path, args.runs) if "ort" in args.peers else None
            tvm = tvm_build(path, args.tool_runs) if "tvm" in args.peers else None
            iree = iree_compile(path, args.tool_runs, work) if "iree" in args.peers else None
            rows.append((name, wall, cpu, sum(timings.values()), ort, tvm, iree, figures))
            breakdowns.append((name, timings))
    _print(rows, breakdowns)


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _s(x: float | str | None) -> str:
    if x is None:
        return "not run"
    return x if isinstance(x, str) else f"{x:.2f}"


def _ratio(x: float | str | None, ge: float) -> str:
    return f"{x / ge:.2f}" if isinstance(x, float) else "-"


def _print(rows, breakdowns) -> None:
    print(
        "| model | ge atc s (CPU s) | ge compile s | ORT_ENABLE_ALL s | TVM s (process / build) | IREE s "
        "| ORT / ge | TVM / ge | IREE / ge |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, wall, cpu, compile_s, ort, tvm, iree, _ in rows:
        tvm_text = f"{tvm[0]:.2f} / {tvm[1]:.2f}" if isinstance(tvm, tuple) else _s(tvm)
        print(
            f"| {name} | {wall:.2f} ({cpu:.2f}) | {compile_s:.2f} | {_s(ort)} | {tvm_text} | {_s(iree)} | "
            f"{_ratio(ort, wall)} | {_ratio(tvm[0] if isinstance(tvm, tuple) else None, wall)} | {_ratio(iree, wall)} |"
        )
    print()
    print("| model | kernels | tasks | streams | feature map | minimum | no reuse | .om bytes |")
    print("|---|---|---|---|---|---|---|---|")
    for name, *_, f in rows:
        print(
            f"| {name} | {f['kernels']} | {f['tasks']} | {f['streams']} | {f['feature_map']:,} | {f['minimum']:,} | "
            f"{f['no_reuse']:,} | {f['om_bytes']:,} |"
        )
    print()
    for name, timings in breakdowns:
        print(f"{name}: " + ", ".join(f"{phase} {seconds * 1e3:.0f} ms" for phase, seconds in timings.items()))
    for name, wall, *_ in rows:
        if name == "resnet50":
            verdict = "met" if wall < GOAL_RESNET_S else "not met"
            print(f"\nResNet-50 ge atc in {wall:.2f} s (goal: under {GOAL_RESNET_S:.0f} s): {verdict}")


if __name__ == "__main__":
    main()
