"""The host's values in a fully dynamic build: what `ge.dynamic.infer_shapes` folds per
input shape on the real dynamic exports, and what it costs.

For BERT-base and a small GPT-2 decoder exported with dynamic batch and sequence by
torch's TorchScript and dynamo exporters (`ge.testing.real_models.dynamic_path`),
compiled once fully dynamic (no `--input_shape`): the compiled dynamic graph's ops and
those sized at run time (Shape, DynamicReshape, BroadcastTo, StridedSliceV2, Range);
per input shape, the ops the host folds into constants and static ops and the sized ops
left (none: every one became a constant or its static op); and the wall-clock seconds
of the host's shape inference with values (`infer_shapes`, median of `--runs`) beside
the parse and weight check of the graph that every shape's build pays too.

    .venv/bin/python benchmarks/dynamic_values.py [--runs 3] [--shape 2,64]
"""

from __future__ import annotations

import argparse
import statistics
import time

from rich.console import Console
from rich.table import Table

import ge
from dialects import ascend_graph as ag
from ge import dynamic
from ge.core import ir
from ge.core.weights import attach
from ge.testing.real_models import DYNAMIC_EXPORTERS, DYNAMIC_MODELS, dynamic_path

SIZED = (ag.ShapeOp, ag.DynamicReshapeOp, ag.BroadcastToOp, ag.StridedSliceV2Op, ag.RangeOp)
SOC = "Ascend310P3"
COLUMNS = ["model", "exporter", "graph ops", "run-time-sized ops", "ops folded to constants", "sized ops left", "infer_shapes s", "parse + weights s"]


def graph_ops(module: object) -> list[ag.AscendOp]:
    return [o for o in module.walk() if isinstance(o, ag.AscendOp) and not isinstance(o, ag.ConstOp | ag.DataOp | ag.NetOutputOp)]  # type: ignore[attr-defined]


def row(name: str, exporter: str, shape: tuple[int, int], runs: int) -> list[str]:
    model = ge.compile(dynamic_path(name, exporter), {"soc_version": SOC})
    assert model.dynamic is not None
    shapes = {p.name: shape for p in model.dynamic.inputs}
    before = graph_ops(ir.parse(model.dynamic.graph))
    parsed, inferred = [], []
    for _ in range(runs):
        started = time.perf_counter()
        module = ir.parse(model.dynamic.graph)
        attach(module, dynamic._store(model.dynamic, model.weights, f"<bench {name}>"))
        middle = time.perf_counter()
        dynamic.infer_shapes(module, shapes)
        parsed.append(middle - started)
        inferred.append(time.perf_counter() - middle)
    after = graph_ops(module)
    return [
        name, exporter, str(len(before)), str(sum(isinstance(o, SIZED) for o in before)), str(len(before) - len(after)),
        str(sum(isinstance(o, SIZED) for o in after)), f"{statistics.median(inferred):.3f}", f"{statistics.median(parsed):.2f}",
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--shape", default="2,64", help="batch,sequence of every input")
    args = parser.parse_args()
    batch, sequence = (int(d) for d in args.shape.split(","))
    rows = [row(name, exporter, (batch, sequence), args.runs) for name in DYNAMIC_MODELS for exporter in DYNAMIC_EXPORTERS]
    table = Table(title=f"host values per shape ({batch}, {sequence})", title_justify="left")
    for c in COLUMNS:
        table.add_column(c, justify="left" if c in ("model", "exporter") else "right")
    for r in rows:
        table.add_row(*r)
    Console(width=160).print(table)
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
