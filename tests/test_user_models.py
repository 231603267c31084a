"""Users' models (`ge.testing.user_models`), compiled with the default options and
simulated, give onnxruntime's answer within the tolerance of the dtypes the compiler
chose (float16 by default: 2% of the output's scale, which also covers the int8
models' quantization steps), with no inf or NaN that onnxruntime does not have.

The exports are made once per cache version (torch's two exporters, onnxruntime's
quantization tools), so the first run takes longer; the tests are marked slow."""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
import pytest

import ge
from ge.sim.dump import NonFiniteWarning
from ge.testing.user_models import USER_MODELS, user_model

pytestmark = pytest.mark.slow
TOLERANCE = 0.02


def _onnxruntime(path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


@pytest.mark.parametrize("soc", ["Ascend910B1", "Ascend310P3"])
@pytest.mark.parametrize("name", sorted(USER_MODELS))
def test_user_model_matches_onnxruntime(name: str, soc: str) -> None:
    path, feeds = user_model(name)
    want = _onnxruntime(path, feeds)
    with warnings.catch_warnings():
        warnings.simplefilter("error", category=NonFiniteWarning)
        model = ge.compile(path, {"soc_version": soc})
        with ge.Session() as session:
            got = session.run(model, feeds).outputs
    assert set(got) == set(want)
    for out, ref in want.items():
        value = np.asarray(got[out])
        assert value.shape == ref.shape, (out, value.shape, ref.shape)
        assert np.isfinite(value).all() or not np.isfinite(ref).all(), out
        scale = max(float(np.max(np.abs(ref), initial=0.0)), 1e-6)
        error = float(np.max(np.abs(value.astype(np.float64) - ref), initial=0.0)) / scale
        assert error <= TOLERANCE, f"{name} on {soc}: output '{out}' differs by {error:.3g} of its scale"
