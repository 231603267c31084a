"""The bundled demo models: valid, current, small, importable, and run right."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import ge
from ge.models import DEMO_MODELS, SEQ_LEN, VOCAB_SIZE, DemoModel
from ge.models.build import BUILDERS
from ge.core.weights import WEIGHTS_ATTR

models = pytest.mark.parametrize("model", DEMO_MODELS, ids=lambda m: m.name)


def test_every_builder_has_a_bundled_model():
    assert sorted(BUILDERS) == sorted(m.name for m in DEMO_MODELS)


@models
def test_bundled_file_is_the_deterministic_build(model: DemoModel):
    """Regenerating (`python -m ge.models.build`) gives the bundled bytes."""
    assert BUILDERS[model.name]().SerializeToString(deterministic=True) == model.path.read_bytes()


@models
def test_is_valid_small_onnx(model: DemoModel):
    onnx.checker.check_model(str(model.path), full_check=True)
    proto = onnx.load(str(model.path))
    assert proto.opset_import[0].version == 17
    assert model.path.stat().st_size < 1_000_000


@models
def test_has_nontrivial_weights(model: DemoModel):
    """No zero bias, no identity BatchNorm: a pass dropping a "no-op" must show."""
    proto = onnx.load(str(model.path))
    for init in proto.graph.initializer:
        array = onnx.numpy_helper.to_array(init)
        if init.name.endswith(("bias", "running_mean")):
            assert np.all(array != 0), init.name
        if init.name.endswith(("running_var", "bn.weight")):
            assert not np.allclose(array, 1), init.name


@models
def test_imports_with_the_declared_signature(model: DemoModel):
    module, store = ge.load_onnx(model.path)
    module.verify()
    proto = onnx.load(str(model.path))
    assert len(store) > 0
    assert module.attributes[WEIGHTS_ATTR].data == str(model.path)
    inputs = model.sample_inputs()
    assert [i.name for i in proto.graph.input] == list(inputs)
    outputs = ge.reference.run(module, inputs, store)
    assert [o.name for o in proto.graph.output] == list(outputs)


@models
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reference_matches_onnxruntime(model: DemoModel, seed: int):
    inputs = model.sample_inputs(seed)
    module, store = ge.load_onnx(model.path)
    got = ge.reference.run(module, inputs, store)
    session = ort.InferenceSession(str(model.path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    for name, expected in zip(names, session.run(names, inputs)):
        assert got[name].shape == expected.shape
        np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=1e-5)


def test_token_inputs_are_valid_and_seeded():
    bert = next(m for m in DEMO_MODELS if m.name == "tiny_bert")
    a, b = bert.sample_inputs(5), bert.sample_inputs(5)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
    assert a["input_ids"].min() >= 0 and a["input_ids"].max() < VOCAB_SIZE
    mask = a["attention_mask"][0]
    assert mask.sum() >= SEQ_LEN // 2
    assert np.all(np.diff(mask) <= 0)  # ones, then padding
