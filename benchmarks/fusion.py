"""The fusion stage (`ge.pipeline.optimize`) next to onnxruntime's graph optimisation.

For each model, on the same ONNX file and in the same run:
- ours: `ge.pipeline.optimize` on a freshly imported module (the import is timed
  apart), all passes on, `--soc_version` Ascend310P3; the kernels the build would
  make before and after (`dialects.kernel_boundary.kernel_scopes`);
- onnxruntime: creating an InferenceSession (CPU provider, one thread) with
  ORT_ENABLE_ALL and with ORT_DISABLE_ALL; their difference is the time its graph
  optimisation takes. Its kernels are the nodes of the optimised model, saved
  once through `SessionOptions.optimized_model_filepath` (outside the timing: the
  save itself writes the weights).

Every time is the median of `--runs` runs. `--readme` writes the table into the
fusion section of benchmarks/README.md (between its two markers).

    .venv/bin/python benchmarks/fusion.py [--runs 5] [--only resnet50] [--readme]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import onnx

import ge
from dialects.kernel_boundary import kernel_scopes
from ge.core.options import CompileOptions
from ge.pipeline import optimize
from ge.testing.real_models import model_path

ROOT = Path(__file__).resolve().parent.parent


README = ROOT / "benchmarks" / "README.md"
BEGIN, END = "<!-- fusion.py results -->", "<!-- end fusion.py results -->"
GOAL_RATIO = 3.0
MODELS = ("resnet50", "bert_base")


def median_seconds(action: Callable[[], object], runs: int, setup: Callable[[], object] | None = None) -> tuple[float, object]:
    """The median wall time of `runs` calls of `action(setup())` (setup untimed)."""
    times, result = [], None
    for _ in range(runs):
        arg = setup() if setup is not None else None
        gc.collect()
        start = time.perf_counter()
        result = action(arg) if setup is not None else action()  # type: ignore[call-arg]
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def ort_session(path: Path, level: str, save_to: str | None = None):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    options.intra_op_num_threads = 1
    if save_to is not None:
        options.optimized_model_filepath = save_to
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def ort_nodes(path: Path) -> int:
    with tempfile.TemporaryDirectory() as folder:
        saved = os.path.join(folder, "optimised.onnx")
        ort_session(path, "ORT_ENABLE_ALL", saved)
        return len(onnx.load(saved, load_external_data=False).graph.node)


@dataclass
class Row:
    model: str
    onnx_nodes: int
    import_s: float
    optimize_s: float
    kernels_before: int
    kernels_after: int
    ort_all_s: float
    ort_none_s: float
    ort_kernels: int
    phases: dict[str, float]
    """The phases of the last optimize run."""

    @property
    def ort_optimize_s(self) -> float:
        return max(self.ort_all_s - self.ort_none_s, 1e-6)

    @property
    def ratio(self) -> float:
        return self.optimize_s / self.ort_optimize_s

    def cells(self) -> list[str]:
        return [
            self.model,
            f"{self.onnx_nodes:,}",
            f"{1e3 * self.import_s:,.0f}",
            f"{1e3 * self.optimize_s:,.0f}",
            f"{self.kernels_before} -> {self.kernels_after}",
            f"{1e3 * self.ort_all_s:,.0f}",
            f"{1e3 * self.ort_optimize_s:,.0f}",
            f"{self.ort_kernels}",
            f"{self.ratio:.1f}x",
            f"{self.kernels_after / self.ort_kernels:.2f}",
        ]


HEADER = [
    "model", "ONNX nodes", "import ms", "optimize ms", "kernels before -> after",
    "ORT ENABLE_ALL session ms", "ORT optimisation ms", "ORT kernels", "optimize / ORT", "kernels / ORT",
]


def measure(name: str, runs: int) -> Row:
    path = model_path(name)
    nodes = len(onnx.load(str(path), load_external_data=False).graph.node)
    options = CompileOptions(export_compile_stat=0)
    import_s, (module, _) = median_seconds(lambda: ge.load_onnx(str(path)), runs)
    before = kernel_scopes(module)
    optimize_s, compilation = median_seconds(lambda m: optimize(m[0], options), runs, lambda: ge.load_onnx(str(path)))
    ort_all_s, _ = median_seconds(lambda: ort_session(path, "ORT_ENABLE_ALL"), runs)
    ort_none_s, _ = median_seconds(lambda: ort_session(path, "ORT_DISABLE_ALL"), runs)
    return Row(
        name, nodes, import_s, optimize_s, before, kernel_scopes(compilation.module),
        ort_all_s, ort_none_s, ort_nodes(path), dict(compilation.timings),
    )


def table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r.cells()) + " |" for r in rows]
    return "\n".join(lines)


def verdicts(rows: list[Row]) -> list[str]:
    out = []
    for r in rows:
        phases = ", ".join(f"{name} {1e3 * s:,.0f}" for name, s in r.phases.items())
        out.append(f"{r.model}: where the fusion stage goes (ms, last run): {phases}")
        out.append(
            f"{r.model}: fusion stage {r.ratio:.1f}x onnxruntime's optimisation (goal <= {GOAL_RATIO:.0f}x): "
            + ("met" if r.ratio <= GOAL_RATIO else "NOT met")
        )
        out.append(
            f"{r.model}: {r.kernels_after} kernels against onnxruntime's {r.ort_kernels} nodes (goal: at most as many): "
            + ("met" if r.kernels_after <= r.ort_kernels else "NOT met")
        )
    return out


def report(rows: list[Row], runs: int) -> str:
    import onnxruntime

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    head = (
        f"{date.today()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}, "
        f"onnxruntime {onnxruntime.__version__}, median of {runs} runs, load average {load}."
    )
    return "\n".join([head, "", table(rows), "", *(f"- {v}" for v in verdicts(rows))])


def write_readme(text: str) -> None:
    """Replace the block between the fusion markers, leaving the rest of the file alone."""
    readme = README.read_text()
    if BEGIN not in readme or END not in readme:
        raise SystemExit(f"{README} has no '{BEGIN}' ... '{END}' block to fill")
    before, rest = readme.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    README.write_text(f"{before}{BEGIN}\n{text}\n{END}{after}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per figure; the median is reported")
    parser.add_argument("--only", nargs="*", choices=MODELS, help="models to measure (default: all)")
    parser.add_argument("--readme", action="store_true", help="write the results into benchmarks/README.md")
    args = parser.parse_args()
    rows = []
    for name in args.only or MODELS:
        rows.append(measure(name, args.runs))
        print(f"measured {name}", file=sys.stderr)
    text = report(rows, args.runs)
    print(text)
    if args.readme:
        write_readme(text)


if __name__ == "__main__":
    main()
