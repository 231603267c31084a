"""Real models, compiled and run on the simulator, against onnxruntime (slow).

ResNet-50, MobileNetV2, BERT-base and ViT-B/16 (random weights, `ge/testing/real_models.py`)
compiled for the Ascend910B1 with the default precision (force_fp16): the float16
outputs agree with onnxruntime's float32 ones in the top-1 class and within a
cosine of 0.999; with must_keep_origin_dtype (float32 cube ops, the 910B's
16x8x16 float32 mode) within 1e-4 relative.
"""

from __future__ import annotations

import numpy as np
import pytest

import ge
from ge.session import Session
from ge.testing.real_models import model_inputs, model_path, onnxruntime_outputs

pytestmark = pytest.mark.slow

SOC = "Ascend910B1"
MODELS = ("resnet50", "mobilenet_v2", "bert_base", "vit_b_16")
CLASSIFIERS = ("resnet50", "mobilenet_v2", "vit_b_16")


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("name", MODELS)
def test_float16_outputs_agree_with_onnxruntime(name: str) -> None:
    path = model_path(name)
    feeds = model_inputs(path)
    want = onnxruntime_outputs(path, feeds)
    got = Session().run(ge.compile(path, {"soc_version": SOC}), feeds).outputs
    assert got.keys() == want.keys()
    for output, value in want.items():
        assert got[output].shape == value.shape
        assert cosine(got[output], value) > 0.999, output
    if name in CLASSIFIERS:
        np.testing.assert_array_equal(got["output"].argmax(-1), want["output"].argmax(-1))


@pytest.mark.parametrize("name", MODELS)
def test_origin_dtype_outputs_match_onnxruntime(name: str) -> None:
    path = model_path(name)
    feeds = model_inputs(path)
    want = onnxruntime_outputs(path, feeds)
    got = Session().run(ge.compile(path, {"soc_version": SOC, "precision_mode": "must_keep_origin_dtype"}), feeds).outputs
    for output, value in want.items():
        np.testing.assert_allclose(got[output], value, rtol=1e-4, atol=1e-4 * float(np.abs(value).max()))
