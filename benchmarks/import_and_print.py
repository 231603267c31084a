"""Import and print times of real and synthetic ONNX graphs, next to onnxruntime.

For each model: `ge.load_onnx` (read the file, import, infer and verify the module)
and printing the module to text are each timed over several runs and the median
is reported, with the IR text size and milliseconds per ONNX node. As a peer
figure, onnxruntime's session creation with graph optimisations off
(ORT_DISABLE_ALL, CPU provider) is timed on the same file: it too reads the
protobuf, checks the graph and resolves its shapes and weights.

Models: ResNet-50 and BERT-base from ge/testing/real_models.py (exported on first use), and
synthetic diamond chains of 2,500, 5,000 and 10,000 nodes generated here, to show
how the time grows with the node count.

    .venv/bin/python benchmarks/import_and_print.py [--runs 5] [--only resnet50 ...]
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.core.ir import to_text
from ge.testing.real_models import CACHE_DIR, model_path


SYNTHETIC_SIZES = (2_500, 5_000, 10_000)
WIDTH = 256
GOAL_RESNET_IMPORT_S = 1.5
GOAL_TEXT_BYTES = 1_000_000


def synthetic_graph(nodes: int) -> Path:
    """A chain of diamonds, 4 nodes each: m = x * w_k; x = Relu(m) + Sigmoid(m).

    Every diamond has its own [1, WIDTH] weight, so the importer handles one
    weight per four nodes as well as the graph structure.
    """
    assert nodes % 4 == 0, nodes
    path = CACHE_DIR / f"synthetic_diamonds_v1_{nodes}.onnx"
    if path.exists():
        return path
    rng = np.random.default_rng(nodes)
    graph_nodes, weights = [], []
    x = "x"
    for k in range(nodes // 4):
        weights.append(numpy_helper.from_array(rng.standard_normal((1, WIDTH)).astype(np.float32), f"w{k}"))
        graph_nodes += [
            helper.make_node("Mul", [x, f"w{k}"], [f"m{k}"], name=f"mul_{k}"),
            helper.make_node("Relu", [f"m{k}"], [f"r{k}"], name=f"relu_{k}"),
            helper.make_node("Sigmoid", [f"m{k}"], [f"s{k}"], name=f"sigmoid_{k}"),
            helper.make_node("Add", [f"r{k}", f"s{k}"], [f"a{k}"], name=f"add_{k}"),
        ]
        x = f"a{k}"
    graph = helper.make_graph(
        graph_nodes,
        f"diamonds_{nodes}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, WIDTH])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    onnx.save(model, str(tmp))
    os.replace(tmp, path)
    return path


def median_seconds(action: Callable[[], object], runs: int) -> tuple[float, object]:
    """The median wall time of `runs` calls, and the last call's result."""
    times, result = [], None
    for _ in range(runs):
        result = None
        gc.collect()
        start = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def ort_session_seconds(path: Path, runs: int) -> float:
    import onnxruntime as ort

    def create():
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.intra_op_num_threads = 1
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    return median_seconds(create, runs)[0]


@dataclass
class Row:
    model: str
    nodes: int
    import_s: float
    print_s: float
    text_bytes: int
    ort_s: float

    @property
    def ms_per_node(self) -> float:
        return 1e3 * (self.import_s + self.print_s) / self.nodes

    def cells(self) -> list[str]:
        return [
            self.model,
            f"{self.nodes:,}",
            f"{1e3 * self.import_s:,.0f}",
            f"{1e3 * self.print_s:,.0f}",
            f"{self.text_bytes / 1e3:,.0f}",
            f"{self.ms_per_node:.3f}",
            f"{1e3 * self.ort_s:,.0f}",
            f"{self.import_s / self.ort_s:.1f}x",
        ]


HEADER = ["model", "ONNX nodes", "import ms", "print ms", "IR text KB", "ms/node", "ORT session ms", "import / ORT"]


def measure(name: str, path: Path, runs: int) -> Row:
    nodes = len(onnx.load(str(path), load_external_data=False).graph.node)
    import_s, (module, _) = median_seconds(lambda: ge.load_onnx(str(path)), runs)
    print_s, text = median_seconds(lambda: to_text(module), runs)
    return Row(name, nodes, import_s, print_s, len(text.encode()), ort_session_seconds(path, runs))


def table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r.cells()) + " |" for r in rows]
    return "\n".join(lines)


def verdicts(rows: list[Row]) -> list[str]:
    by_name = {r.model: r for r in rows}
    out = []
    if "resnet50" in by_name:
        r = by_name["resnet50"]
        out.append(
            f"ResNet-50 import {r.import_s:.2f} s (goal < {GOAL_RESNET_IMPORT_S} s): "
            + ("met" if r.import_s < GOAL_RESNET_IMPORT_S else "NOT met")
        )
        out.append(
            f"ResNet-50 IR text {r.text_bytes:,} bytes (goal < {GOAL_TEXT_BYTES:,}): "
            + ("met" if r.text_bytes < GOAL_TEXT_BYTES else "NOT met")
        )
    synthetic = sorted((r for r in rows if r.model.startswith("synthetic")), key=lambda r: r.nodes)
    if len(synthetic) >= 2:
        first, last = synthetic[0], synthetic[-1]
        growth = last.ms_per_node / first.ms_per_node
        out.append(
            f"ms/node at {last.nodes:,} nodes is {growth:.2f}x that at {first.nodes:,} "
            f"({last.nodes / first.nodes:.0f}x the nodes; linear growth keeps it near 1): "
            + ("linear" if growth < 1.3 else "NOT linear")
        )
    return out


def cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.machine()


def main() -> None:
    models = {"resnet50": lambda: model_path("resnet50"), "bert_base": lambda: model_path("bert_base")}
    for n in SYNTHETIC_SIZES:
        models[f"synthetic_{n}"] = lambda n=n: synthetic_graph(n)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per figure; the median is reported")
    parser.add_argument("--only", nargs="*", choices=list(models), help="models to measure (default: all)")
    args = parser.parse_args()
    names = args.only or list(models)
    rows = []
    for name in names:
        rows.append(measure(name, models[name](), args.runs))
        print(f"measured {name}", file=sys.stderr)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"{date.today().isoformat()}, {cpu_model()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, median of {args.runs} runs, load average {load}\n"
    )
    print(table(rows))
    print()
    for line in verdicts(rows):
        print(f"- {line}")


if __name__ == "__main__":
    main()
