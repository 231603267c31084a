"""Symbolic dims at import on real dynamic exports: what the symbols prove, and what they cost.

For BERT-base and a small GPT-2 decoder exported with dynamic batch and sequence axes by
torch's TorchScript and dynamo exporters (`ge.testing.real_models.dynamic_path`):

- the import without pinned dims: its time, its symbols (and dims no rule could tell),
  how many of the IR's result dims are static, the ops that read sizes at run time
  (Shape, DynamicReshape, BroadcastTo, StridedSliceV2, Range), and the share of value
  dims that binding the inputs' shapes resolves (`Shapes.resolve`);
- the import with both dims pinned (`input_shape`, batch 1, sequence 128), with the
  symbolic rules on and with them skipped (`Tracer.node` a no-op), the two runs
  interleaved so that the machine's load falls on both: the rules' cost.

    .venv/bin/python benchmarks/symbolic_shapes.py [--runs 3] [--only bert_base gpt2_small]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from unittest import mock

import onnx

import ge
from dialects import ascend_graph as ag
from dialects.shapes import DYN
from ge.frontend.symbolic import Tracer, shapes_of
from ge.testing.real_models import DYNAMIC_EXPORTERS, DYNAMIC_MODELS, dynamic_path

RUNTIME_SHAPED = (ag.ShapeOp, ag.DynamicReshapeOp, ag.BroadcastToOp, ag.StridedSliceV2Op, ag.RangeOp)


def seconds(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def median_seconds(fn: Callable[[], object], runs: int) -> float:
    return statistics.median(seconds(fn) for _ in range(runs))


def untraced(fn: Callable[[], object]) -> Callable[[], object]:
    """`fn` with the symbolic rules skipped (a pinned import does not need them)."""

    def run() -> object:
        with mock.patch.object(Tracer, "node", lambda self, node, since: None):
            return fn()

    return run


def row(name: str, exporter: str, runs: int) -> list[str]:
    path = dynamic_path(name, exporter)
    proto = onnx.load(str(path), load_external_data=False)
    inputs = [i.name for i in proto.graph.input]
    pinned = ";".join(f"{n}:1,128" for n in inputs)
    dynamic_s = median_seconds(lambda: ge.load_onnx(path), runs)
    module, _ = ge.load_onnx(path)
    table = shapes_of(module)
    assert table is not None
    results = [r for op in module.walk() if isinstance(op, ag.AscendOp) for r in op.results]
    dims = [d for r in results for d in r.type.get_shape()]
    static = sum(d != DYN for d in dims)
    shaped = sum(isinstance(op, RUNTIME_SHAPED) for op in module.walk())
    resolved = table.resolve({n: (1, 128) for n in inputs})
    total = sum(len(d) for d in table.dims.values())
    covered = sum(len(s) for s in resolved.values())
    unknown = len(table.symbols) - len(table.inputs)
    def pinned_import() -> object:
        return ge.load_onnx(path, input_shape=pinned)

    pairs = [(seconds(pinned_import), seconds(untraced(pinned_import))) for _ in range(runs)]  # interleaved: one load
    pinned_s, untraced_s = (statistics.median(p[i] for p in pairs) for i in (0, 1))
    return [
        name, exporter, f"{len(proto.graph.node):,}", f"{dynamic_s:.2f}", ", ".join(sorted(table.inputs)), str(unknown),
        f"{static:,} / {len(dims):,}", str(shaped), f"{covered / total:.1%}", f"{pinned_s:.2f}", f"{untraced_s:.2f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=sorted(DYNAMIC_MODELS))
    args = parser.parse_args()
    header = [
        "model", "exporter", "nodes", "dynamic import s", "symbols", "unknown dims", "static result dims",
        "run-time-shaped ops", "dims resolved by binding", "pinned import s", "pinned, rules skipped s",
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name in args.only:
        for exporter in DYNAMIC_EXPORTERS:
            print("| " + " | ".join(row(name, exporter, args.runs)) + " |", flush=True)


if __name__ == "__main__":
    main()
