"""Real exports with dynamic dims (slow): BERT-base exported with dynamic batch and
sequence axes by torch's TorchScript exporter (`dynamic_axes`) and by its dynamo exporter
(`dynamic_shapes`), `ge.testing.real_models.dynamic_path`.

Their Shape -> Gather -> Concat -> Reshape chains are followed symbolically at import
(`ge.frontend.symbolic`); with the dims pinned, by `--input_shape` or by the gears of
`--dynamic_dims`, every chain folds and the static pipeline compiles the model, whose
float16 outputs agree with onnxruntime's float32 ones as `tests/test_sim_models.py`
asks (a cosine above 0.999).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import ge
from ge.core.errors import ModelError, OptionError
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
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def agree(model: ge.Model, path, shape: tuple[int, int]) -> None:
    feeds = model_inputs(path, seed=shape[1], shape=shape)
    want = onnxruntime_outputs(path, feeds)
    got = Session().run(model, feeds).outputs
    assert got.keys() == want.keys()
    for output, value in want.items():
        assert got[output].shape == value.shape, output
        assert cosine(got[output], value) > 0.999, (shape, output)


@pytest.mark.parametrize("exporter", DYNAMIC_EXPORTERS)
def test_the_exports_declare_dynamic_batch_and_sequence(exporter: str) -> None:
    graph = onnx.load(str(dynamic_path("bert_base", exporter)), load_external_data=False).graph
    declared = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.input}
    assert declared == {name: ["batch", "sequence"] for name in INPUTS}


@pytest.mark.parametrize("exporter", DYNAMIC_EXPORTERS)
def test_sequence_gears_equal_onnxruntime(exporter: str) -> None:
    path = dynamic_path("bert_base", exporter)
    options = {
        "input_shape": ";".join(f"{name}:1,-1" for name in INPUTS),
        "dynamic_dims": ";".join(",".join([str(s)] * len(INPUTS)) for s in SEQS),
        "input_format": "ND",
        "soc_version": SOC,
    }
    model = ge.compile(path, options)
    assert [g.shapes["input_ids"] for g in model.gears] == [(1, s) for s in SEQS]
    for seq in SEQS:
        agree(model, path, (1, seq))


@pytest.mark.parametrize("exporter", DYNAMIC_EXPORTERS)
def test_pinning_both_dims_compiles_the_static_model(exporter: str) -> None:
    path = dynamic_path("bert_base", exporter)
    shape = (2, 48)
    model = ge.compile(path, {"input_shape": ";".join(f"{n}:{shape[0]},{shape[1]}" for n in INPUTS), "soc_version": SOC})
    agree(model, path, shape)


@pytest.mark.parametrize("exporter", DYNAMIC_EXPORTERS)
def test_without_pinned_dims_compile_asks_for_them(exporter: str) -> None:
    with pytest.raises((OptionError, ModelError), match=r"--input_shape=\"input_ids:<batch>,<sequence>;"):
        ge.compile(dynamic_path("bert_base", exporter), {"soc_version": SOC})
