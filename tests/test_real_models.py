"""Real models end to end: ONNX export -> import -> text round trip -> reference run.

The models (ge/testing/real_models.py) are torchvision ResNet-50, MobileNetV2 and ViT-B/16
and a BERT-base-dimension encoder, all at random, non-trivial weights. The
reference interpreter must match onnxruntime (CPU provider, float32, graph
optimisations off) on every output.

Error measure: for each output, `max|ours - ort| / max|ort|`, the largest error
relative to the output's own scale, must be at most `RTOL` (1e-4). A per-element
relative error is ill-conditioned where an output crosses zero (logits, hidden
states), and a float32 sum of a few thousand terms carries an absolute error
proportional to the magnitude of its terms, not of its result. The measure is
only meaningful on outputs of normal magnitude, so that is asserted too: a model
whose activations vanish or explode would hide errors, not reveal them.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from ge.testing.real_models import model_inputs, model_path, onnxruntime_outputs
from onnx import numpy_helper

import ge
from dialects.ascend_graph import BatchNormOp, Conv2DOp
from ge.core.ir import parse, to_text

RTOL = 1e-4
NORMAL_MAGNITUDE = (1e-2, 1e3)

MODELS = ["resnet50", "mobilenet_v2", "vit_b_16", "bert_base"]

pytestmark = pytest.mark.slow


@functools.cache
def imported(name: str):
    """The model imported once per worker: (module, weights, printed text)."""
    module, weights = ge.load_onnx(str(model_path(name)))
    module.verify()
    return module, weights, to_text(module)


@pytest.mark.parametrize("name", MODELS)
def test_print_parse_print_is_identical(name: str) -> None:
    _, _, text = imported(name)
    again = to_text(parse(text, name))
    assert again == text


@pytest.mark.parametrize("name", MODELS)
def test_reference_matches_onnxruntime(name: str) -> None:
    path = model_path(name)
    feeds = model_inputs(path)
    expected = onnxruntime_outputs(path, feeds)
    module, _, _ = imported(name)
    actual = ge.reference.run(module, feeds)
    assert set(actual) == set(expected)
    for out, want in expected.items():
        got = actual[out]
        assert got.dtype == want.dtype and got.shape == want.shape, f"{name}:{out}: {got.dtype}{got.shape}"
        scale = float(np.max(np.abs(want)))
        assert NORMAL_MAGNITUDE[0] <= scale <= NORMAL_MAGNITUDE[1], f"{name}:{out}: max|output| = {scale}"
        error = float(np.max(np.abs(got.astype(np.float64) - want))) / scale
        assert error <= RTOL, f"{name}:{out}: max|ours - ort| / max|ort| = {error:.3g} > {RTOL}"


@pytest.mark.parametrize("name", MODELS)
def test_export_has_no_trivial_float_weights(name: str) -> None:
    """No all-zero bias, all-one gamma or other constant-valued float tensor."""
    graph = onnx.load(str(model_path(name))).graph
    tensors = [*graph.initializer, *(a.t for n in graph.node if n.op_type == "Constant" for a in n.attribute)]
    trivial = []
    for tensor in tensors:
        array = numpy_helper.to_array(tensor)
        if array.dtype.kind == "f" and array.size > 1 and np.all(array == array.flat[0]):
            trivial.append(f"{tensor.name}{list(array.shape)} = {array.flat[0]}")
    assert not trivial, trivial


def test_resnet50_export_keeps_batch_norm(resnet50_onnx) -> None:
    nodes = onnx.load(str(resnet50_onnx), load_external_data=False).graph.node
    assert len(nodes) == 175
    assert sum(n.op_type == "BatchNormalization" for n in nodes) == 53
    module, _, _ = imported("resnet50")
    ops = list(module.walk())
    assert sum(isinstance(op, BatchNormOp) for op in ops) == 53
    assert sum(isinstance(op, Conv2DOp) for op in ops) == 53


def test_resnet50_weights_stay_out_of_the_ir(resnet50_onnx) -> None:
    _, weights, text = imported("resnet50")
    assert len(text.encode()) < 1_000_000, f"IR text is {len(text.encode())} bytes"
    assert weights.nbytes > 90_000_000, f"the weight store holds only {weights.nbytes} bytes"
