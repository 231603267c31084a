"""Real exports with dynamic dims (slow): BERT-base and a small GPT-2 decoder (HuggingFace,
random weights) exported with dynamic batch and sequence axes by torch's TorchScript
exporter (`dynamic_axes`) and by its dynamo exporter (`dynamic_shapes`),
`ge.testing.real_models.dynamic_path`.

Their shape arithmetic (Shape -> Gather -> Concat -> Reshape, the position ids sliced
to the sequence, the attention masks built with Range and Expand) is followed
symbolically at import (`ge.frontend.symbolic`): the import has the two symbols only
and the reference interpreter runs it at any shape. With the dims pinned, by
`--input_shape` or by the gears of `--dynamic_dims`, every chain folds and the static
pipeline compiles the model, whose float16 outputs agree with onnxruntime's float32
ones as `tests/test_sim_models.py` asks (a cosine above 0.999).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx
import pytest

import ge
from ge.frontend.symbolic import shapes_of
from ge.session import Session
from ge.testing.real_models import (
    DYNAMIC_EXPORTERS,
    dynamic_path,
    model_inputs,
    onnxruntime_outputs,
)

pytestmark = pytest.mark.slow

SOC = "Ascend910B1"
SEQS = (64, 128, 256)
EXPORTS = [("gpt2_small", exporter) for exporter in DYNAMIC_EXPORTERS] + [("bert_base", "dynamo")]
"""Both exporters on GPT-2, and BERT-base by the dynamo exporter: BERT-base's TorchScript
export (a minute to export, two to run) adds no construct the others lack, and the
suite must stay within its time on CI's 2 cores (benchmarks/symbolic_shapes.py runs all four)."""


@functools.cache
def inputs(path: Path) -> list[str]:
    graph = onnx.load(str(path), load_external_data=False).graph
    return [i.name for i in graph.input]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def agree(model: ge.Model, path: Path, shape: tuple[int, int]) -> None:
    feeds = model_inputs(path, seed=shape[1], shape=shape)
    want = onnxruntime_outputs(path, feeds)
    got = Session().run(model, feeds).outputs
    assert got.keys() == want.keys()
    for output, value in want.items():
        assert got[output].shape == value.shape, output
        assert cosine(got[output], value) > 0.999, (shape, output)


@pytest.mark.parametrize(("name", "exporter"), EXPORTS)
def test_the_exports_declare_dynamic_batch_and_sequence(name: str, exporter: str) -> None:
    graph = onnx.load(str(dynamic_path(name, exporter)), load_external_data=False).graph
    declared = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.input}
    assert declared and all(dims == ["batch", "sequence"] for dims in declared.values())


@pytest.mark.parametrize(("name", "exporter"), EXPORTS)
def test_the_dynamic_import_has_two_symbols_and_runs_at_any_shape(name: str, exporter: str) -> None:
    """Every dim of every value is an expression of `batch` and `sequence` (no dim the
    rules could not tell), and the reference interpreter runs the one import at two
    shapes as onnxruntime does; binding the inputs gives the outputs' shapes."""
    path = dynamic_path(name, exporter)
    module, _ = ge.load_onnx(path)
    table = shapes_of(module)
    assert table is not None and set(table.symbols) == {"batch", "sequence"}
    for shape in ((1, 16), (2, 9)):
        feeds = model_inputs(path, seed=shape[1], shape=shape)
        want = onnxruntime_outputs(path, feeds)
        got = ge.reference.run(module, feeds)
        resolved = table.resolve({n: a.shape for n, a in feeds.items()})
        for output, value in want.items():
            assert got[output].shape == value.shape == resolved[output]
            scale = float(np.abs(value).max())
            assert float(np.abs(got[output] - value).max()) / scale <= 1e-4, (shape, output)


@pytest.mark.parametrize(("name", "exporter"), EXPORTS)
def test_sequence_gears_equal_onnxruntime(name: str, exporter: str) -> None:
    path = dynamic_path(name, exporter)
    names = inputs(path)
    options = {
        "input_shape": ";".join(f"{n}:1,-1" for n in names),
        "dynamic_dims": ";".join(",".join([str(s)] * len(names)) for s in SEQS),
        "input_format": "ND",
        "soc_version": SOC,
    }
    model = ge.compile(path, options)
    assert [g.shapes[names[0]] for g in model.gears] == [(1, s) for s in SEQS]
    for seq in SEQS:
        agree(model, path, (1, seq))


@pytest.mark.parametrize(("name", "exporter"), EXPORTS)
def test_pinning_both_dims_compiles_the_static_model(name: str, exporter: str) -> None:
    path = dynamic_path(name, exporter)
    shape = (2, 48)
    model = ge.compile(path, {"input_shape": ";".join(f"{n}:{shape[0]},{shape[1]}" for n in inputs(path)), "soc_version": SOC})
    agree(model, path, shape)
