"""Accuracy of every precision_mode on real models, against onnxruntime in float32.

For each `--precision_mode`, ResNet-50 and the BERT-base encoder (ge/testing/real_models.py,
random weights) are compiled for Ascend910B1 (the part with every dtype, so every
mode applies) with `ge.pipeline.optimize` and run on the reference interpreter,
which computes each op in the dtype and implementation mode chosen for it.

- ResNet-50: 32 seeded random images in one batch, at 112x112 (the network is
  convolutional up to its global pooling; a quarter of 224x224's cost keeps the
  test suite's budget). Measures: max |ours - ort| / max |ort| over all logits,
  and how many of the 32 top-1 classes agree.
- BERT: the seeded inputs of ge/testing/real_models.py (sequence 128, 16 masked tokens).
  Measures per output (last_hidden_state, pooler_output): the same relative
  error, and the cosine similarity of the flattened output with onnxruntime's.

Modes whose compiled graphs compute the same (same dtypes and modes everywhere,
e.g. force_fp32 and cube_fp16in_fp32out) are run once; the table says so.

    .venv/bin/python benchmarks/precision_accuracy.py [--only resnet50|bert_base]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import ge
from dialects.ascend_graph import AscendOp, CubeOp, dtype_of, is_float
from ge import pipeline, reference
from ge.core import dtypes
from ge.core.options import PRECISION_MODES, CompileOptions
from ge.testing.real_models import model_inputs, model_path, onnxruntime_outputs


SOC = "Ascend910B1"
IMAGES = 32
IMAGE_SIZE = 112
SEED = 20240611
LAYOUT_OPS = ("Data", "Const", "NetOutput", "Cast", "TransData")
"""Ops that move or convert values between the layers; the dtype summary leaves them out."""


@dataclass
class Row:
    """One model under one precision_mode."""

    model: str
    mode: str
    max_rel_error: float
    """max |ours - ort| / max |ort|, the largest over the model's outputs."""
    agreement: str
    """ResNet: top-1 classes agreeing with onnxruntime, "n/32"; BERT: the smallest cosine similarity."""
    dtypes: str
    """The dtypes of cube and vector ops, e.g. "cube float16->float32, vector float32"."""
    same_as: str = ""
    """The mode this one computes exactly like (run once)."""
    seconds: float = 0.0
    """Reference-interpreter time of the run (0 when shared)."""


def _signature(module) -> tuple:
    """What decides the numerics: every op's operand and result types and its impl mode."""
    return tuple(
        (op.name, tuple(str(v.type) for v in op.operands), tuple(str(r.type) for r in op.results), str(op.attributes.get("impl_mode")))
        for op in module.walk()
    )


def _dtypes(module) -> str:
    """The dtypes each unit computes in: "cube float16, vector float16/float32"."""
    units: dict[str, set[str]] = {"cube": set(), "vector": set()}
    for op in module.walk():
        if not isinstance(op, AscendOp) or op.OP_TYPE in LAYOUT_OPS or not op.results:
            continue
        floats = [dtypes.name(dtype_of(v.type)) for v in op.operands if is_float(dtype_of(v.type))]
        ins = floats[0] if floats else ""
        out = dtypes.name(dtype_of(op.results[0].type))
        if out not in ("float16", "float32", "bfloat16"):
            continue
        units["cube" if isinstance(op, CubeOp) else "vector"].add(out if ins in ("", out) else f"{ins}->{out}")
    return ", ".join(f"{unit} {'/'.join(sorted(kinds))}" for unit, kinds in units.items() if kinds)


def _compile_all(path: Path, input_shape: str | None, modes: Sequence[str]):
    """Each mode's compiled module, from one import (clones share its weight store)."""
    imported, store = ge.load_onnx(str(path), input_shape=input_shape)
    for mode in modes:
        module = imported.clone()
        pipeline.optimize(module, CompileOptions(soc_version=SOC, precision_mode=mode, input_shape=input_shape, export_compile_stat=0))
        yield mode, module, store


def _relative(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - want)) / np.max(np.abs(want)))


def _cosine(got: np.ndarray, want: np.ndarray) -> float:
    a, b = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _evaluate(name: str, path: Path, input_shape: str | None, feeds, expected, measure, modes: Sequence[str]) -> list[Row]:
    rows: list[Row] = []
    runs: dict[tuple, tuple[str, dict[str, np.ndarray]]] = {}
    for mode, module, store in _compile_all(path, input_shape, modes):
        key = _signature(module)
        seconds = 0.0
        if key not in runs:
            started = time.perf_counter()
            runs[key] = (mode, reference.run(module, feeds, store))
            seconds = time.perf_counter() - started
        first, outputs = runs[key]
        error, agreement = measure(outputs, expected)
        rows.append(Row(name, mode, error, agreement, _dtypes(module), "" if first == mode else first, seconds))
    return rows


def resnet50(modes: Sequence[str] = PRECISION_MODES) -> list[Row]:
    """ResNet-50 on 32 images at 112x112, one batch, against onnxruntime image by image."""
    path = model_path("resnet50")
    images = np.random.default_rng(SEED).standard_normal((IMAGES, 3, IMAGE_SIZE, IMAGE_SIZE)).astype(np.float32)
    shape = f"input:{IMAGES},3,{IMAGE_SIZE},{IMAGE_SIZE}"
    expected = _ort_any_shape(path, {"input": images})["output"]

    def measure(outputs, want):
        got = outputs["output"]
        agree = int(np.sum(np.argmax(got, axis=1) == np.argmax(want, axis=1)))
        return _relative(got, want), f"{agree}/{IMAGES}"

    return _evaluate("ResNet-50", path, shape, {"input": images}, expected, measure, modes)


def _ort_any_shape(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime (CPU, optimisations off) on the model with its input and output
    dims made symbolic, since the export fixes 1x3x224x224."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(path))
    for value in (*model.graph.input, *model.graph.output):
        for i, dim in enumerate(value.type.tensor_type.shape.dim):
            dim.dim_param = f"{value.name}_{i}"
    del model.graph.value_info[:]
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def bert_base(modes: Sequence[str] = PRECISION_MODES) -> list[Row]:
    """The BERT-base encoder on ge/testing/real_models.py's seeded inputs."""
    path = model_path("bert_base")
    feeds = model_inputs(path)
    expected = onnxruntime_outputs(path, feeds)

    def measure(outputs, want):
        error = max(_relative(outputs[k], want[k]) for k in want)
        cosine = min(_cosine(outputs[k], want[k]) for k in want)
        return error, f"{cosine:.7f}"

    return _evaluate("BERT-base", path, None, feeds, expected, measure, modes)


def markdown(rows: Sequence[Row]) -> str:
    lines = [
        "| model | precision_mode | max rel error | top-1 agreement / min cosine | dtypes | run |",
        "|---|---|---:|---:|---|---|",
    ]
    for r in rows:
        run = f"same graph as {r.same_as}" if r.same_as else f"{r.seconds:.1f} s"
        lines.append(f"| {r.model} | {r.mode} | {r.max_rel_error:.2e} | {r.agreement} | {r.dtypes} | {run} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("resnet50", "bert_base"), action="append")
    args = parser.parse_args()
    rows: list[Row] = []
    for name, evaluate in (("resnet50", resnet50), ("bert_base", bert_base)):
        if args.only and name not in args.only:
            continue
        rows += evaluate()
    print(markdown(rows))


if __name__ == "__main__":
    main()
