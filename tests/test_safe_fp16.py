"""Safe float16: constants converted to 16 bits saturate instead of becoming inf, the
precision report lists them, and a run names the first op that made inf/NaN.

A masked-attention module exported from torch (dynamo=False), whose mask is scaled by
torch.finfo(torch.float32).min, must give onnxruntime's answer under the default
precision (force_fp16) on Ascend310P3 and Ascend910B1.
"""

from __future__ import annotations

import io
import subprocess
import sys
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
from dialects import ascend_graph as ag
from ge.core import opinfo
from ge.core.options import CompileOptions
from ge.core.precision_files import settings_of
from ge.core.reference import const_value
from ge.core.weights import WeightStore, store_of
from ge.frontend import load_onnx
from ge.precision_report import build_report
from ge.sim.dump import NonFiniteWarning
from passes.precision_selection import (
    SATURATED,
    SATURATED_WORST,
    PrecisionSelection,
    PrecisionSummary,
    select_precision,
)

ROOT = Path(__file__).resolve().parent.parent
F = TensorProto.FLOAT
RNG = np.random.default_rng(0)
F32_MIN = float(np.finfo(np.float32).min)


def ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def scaled(values: np.ndarray, path: Path) -> Path:
    """y = x * k + b, with k holding `values` (inline) and b 300 rows of them (a weight)."""
    k = numpy_helper.from_array(values.astype(np.float32), "k")
    b = numpy_helper.from_array(np.tile(values.astype(np.float32), (300, 1)), "b")
    nodes = [helper.make_node("Mul", ["x", "k"], ["m"], name="mul"), helper.make_node("Add", ["m", "b"], ["y"], name="add")]
    graph = helper.make_graph(
        nodes, "scaled", [helper.make_tensor_value_info("x", F, [300, values.size])],
        [helper.make_tensor_value_info("y", F, [300, values.size])], [k, b],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def converted(path: Path, soc: str, mode: str) -> tuple[tuple[ag.ConstOp, ...], PrecisionSummary, WeightStore]:
    """The constants of the imported model after precision selection, what it did, the weights."""
    module, _ = load_onnx(path)
    settings = settings_of(PrecisionSelection(soc_version=soc, precision_mode=mode))
    summary = select_precision(module, opinfo.load(soc), settings)
    consts = tuple(op for op in module.walk() if isinstance(op, ag.ConstOp))
    return consts, summary, store_of(module)


VALUES = np.array([F32_MIN, -7e4, -65504.0, -1.5, 0.0, 2.5, 65519.0, 1e5, 3e38, np.inf, -np.inf, np.nan])


@pytest.mark.parametrize("soc", ["Ascend310P3", "Ascend910B1"])
def test_converted_constants_saturate_and_record_it(tmp_path, soc):
    dtype, mode = np.float16, "force_fp16"
    consts, summary, store = converted(scaled(VALUES, tmp_path / "m.onnx"), soc, mode)
    limit = float(ml_dtypes.finfo(dtype).max)
    with np.errstate(over="ignore"):
        plain = VALUES.astype(dtype).astype(np.float64)
    beyond = np.isfinite(VALUES) & np.isinf(plain)
    for const in consts:
        values = const_value(const, store).astype(np.float64).reshape(-1)[: VALUES.size]
        assert np.isfinite(values[np.isfinite(VALUES)]).all()
        np.testing.assert_array_equal(values[beyond], np.sign(VALUES[beyond]) * limit)
        np.testing.assert_array_equal(values[~beyond], plain[~beyond])  # in range, inf and NaN: a plain conversion
        assert const.attributes[SATURATED].value.data == int(beyond.sum()) * (300 if const.label.startswith("b") else 1)
        assert const.attributes[SATURATED_WORST].value.data == F32_MIN
    assert sorted((s.name, s.dtype, s.worst) for s in summary.saturated) == [
        ("b", np.dtype(dtype).name, F32_MIN), ("k", np.dtype(dtype).name, F32_MIN)
    ]


def test_a_bfloat16_weight_saturates_too(tmp_path):
    """Beyond bfloat16's range lies only the top of float32's: its min rounds to -inf."""
    w = np.array([[F32_MIN, 1.0], [3e38, -2.0], [np.finfo(np.float32).max, 0.5]], np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mm",
        [helper.make_tensor_value_info("x", F, [4, 3])], [helper.make_tensor_value_info("y", F, [4, 2])],
        [numpy_helper.from_array(w, "w")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "mm.onnx")
    consts, summary, store = converted(tmp_path / "mm.onnx", "Ascend910B1", "allow_mix_precision_bf16")
    (const,) = consts
    limit = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    values = const_value(const, store).astype(np.float64)
    np.testing.assert_array_equal(values[:, 0], [-limit, float(np.float32(3e38).astype(ml_dtypes.bfloat16)), limit])
    assert [(s.name, s.dtype, s.count, s.worst) for s in summary.saturated] == [("w", "bfloat16", 2, F32_MIN)]


def test_in_range_constants_record_nothing(tmp_path):
    consts, summary, _ = converted(scaled(np.array([-3.0, 0.5, 60000.0]), tmp_path / "m.onnx"), "Ascend310P3", "force_fp16")
    assert summary.saturated == [] and all(SATURATED not in c.attributes for c in consts)


def test_must_keep_origin_dtype_keeps_the_values(tmp_path):
    consts, summary, store = converted(scaled(VALUES, tmp_path / "m.onnx"), "Ascend310P3", "must_keep_origin_dtype")
    assert summary.saturated == []
    k = next(c for c in consts if c.label == "k")
    np.testing.assert_array_equal(const_value(k, store), VALUES.astype(np.float32))


def test_the_precision_report_lists_saturated_constants(tmp_path):
    path = scaled(VALUES[np.isfinite(VALUES)], tmp_path / "m.onnx")
    report = build_report(path, CompileOptions(soc_version="Ascend310P3"))
    rows = {(s.name, s.dtype): (s.count, s.worst) for s in report.saturated}
    assert rows == {("k", "float16"): (4, F32_MIN), ("b", "float16"): (1200, F32_MIN)}


def test_ge_precision_report_prints_them(tmp_path):
    path = scaled(np.array([1.0, F32_MIN]), tmp_path / "m.onnx")
    args = [sys.executable, "-m", "ge.cli.main", "precision-report", str(path), "--soc_version=Ascend310P3"]
    result = subprocess.run(args, check=False, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    table = result.stdout[result.stdout.index("constants saturated"):]
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in table.splitlines() if line.count("│") == 5]
    assert sorted(rows) == [["b", "float16", "300", "-3.40282e+38"], ["k", "float16", "1", "-3.40282e+38"]]


# ---------------------------------------------------------------- the run's overflow warning


def overflowing(path: Path) -> Path:
    """x * 300 then + itself: 300 * 300 * 2 is beyond float16 (the Add overflows)."""
    k = numpy_helper.from_array(np.full((1,), 300.0, np.float32), "k")
    nodes = [helper.make_node("Mul", ["x", "k"], ["m"], name="scale"), helper.make_node("Add", ["m", "m"], ["y"], name="twice")]
    graph = helper.make_graph(
        nodes, "overflow", [helper.make_tensor_value_info("x", F, [2, 8])], [helper.make_tensor_value_info("y", F, [2, 8])], [k],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_the_api_warns_naming_the_first_op_and_the_options(tmp_path):
    model = ge.compile(overflowing(tmp_path / "m.onnx"), {"soc_version": "Ascend310P3"})
    with pytest.warns(NonFiniteWarning) as caught:
        ge.Session().run(model, {"x": np.full((2, 8), 150.0, np.float32)})
    message = str(caught[0].message)
    assert "op 'twice' (Add, kernel task" in message
    assert "--precision_mode=allow_mix_precision" in message and '{"black-list": {"to-add": ["Add"]}}' in message
    assert "--keep_dtype=FILE naming twice (or OpType::Add)" in message
    assert caught[0].filename == __file__  # attributed to the caller's line


def test_the_advice_avoids_the_overflow(tmp_path):
    path = overflowing(tmp_path / "m.onnx")
    (tmp_path / "mix.json").write_text('{"black-list": {"to-add": ["Add"]}}')
    model = ge.compile(path, {"soc_version": "Ascend310P3", "precision_mode": "allow_mix_precision", "modify_mixlist": str(tmp_path / "mix.json")})
    with warnings.catch_warnings():
        warnings.simplefilter("error", NonFiniteWarning)
        result = ge.Session().run(model, {"x": np.full((2, 8), 150.0, np.float32)})
    np.testing.assert_allclose(result.outputs["y"], np.full((2, 8), 90000.0), rtol=1e-3)


def test_ge_run_prints_the_warning_once(tmp_path):
    ge.compile(overflowing(tmp_path / "m.onnx"), {"soc_version": "Ascend310P3"}).save(tmp_path / "m.om")
    np.save(tmp_path / "x.npy", np.full((2, 8), 150.0, np.float32))
    args = [sys.executable, "-m", "ge.cli.main", "run", str(tmp_path / "m.om"), "--input", str(tmp_path / "x.npy")]
    result = subprocess.run(args, check=False, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "inf or NaN" in line]
    assert len(lines) == 1 and lines[0].startswith("ge: warning: output 'y' contains inf or NaN")
    assert "op 'twice' (Add" in lines[0] and "--modify_mixlist" in lines[0]


# ------------------------------------------------------------------ masked attention


def masked_attention(path: Path, additive: bool) -> onnx.ModelProto:
    """Single-head attention whose padding mask becomes (1 - mask) * finfo(float32).min
    added to the scores, or a masked_fill of the scores with finfo(float32).min."""
    torch = pytest.importorskip("torch")

    class Attention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q, self.k, self.v = (torch.nn.Linear(16, 16) for _ in range(3))

        def forward(self, x, mask):
            scores = self.q(x) @ self.k(x).transpose(-1, -2) / 4.0
            if additive:
                scores = scores + (1.0 - mask[:, None, :]) * torch.finfo(torch.float32).min
            else:
                scores = scores.masked_fill(mask[:, None, :] == 0, torch.finfo(torch.float32).min)
            return torch.softmax(scores, -1) @ self.v(x)

    torch.manual_seed(0)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Attention().eval(), (torch.randn(2, 8, 16), torch.ones(2, 8)), buffer, dynamo=False, opset_version=17,
            input_names=["x", "mask"], output_names=["y"],
        )
    model = onnx.load_from_string(buffer.getvalue())
    onnx.save(model, path)
    return model


@pytest.mark.slow
@pytest.mark.parametrize("additive", [True, False])
@pytest.mark.parametrize("soc", ["Ascend310P3", "Ascend910B1"])
def test_masked_attention_matches_onnxruntime_under_the_default_precision(tmp_path, soc, additive):
    path = tmp_path / "attention.onnx"
    model = masked_attention(path, additive)
    x = RNG.standard_normal((2, 8, 16)).astype(np.float32)
    mask = np.ones((2, 8), np.float32)
    mask[0, 5:] = 0
    mask[1, 2:] = 0
    want = ort_run(model, {"x": x, "mask": mask})["y"]
    compiled = ge.compile(str(path), {"soc_version": soc})
    with warnings.catch_warnings():
        warnings.simplefilter("error", NonFiniteWarning)
        got = ge.Session().run(compiled, {"x": x, "mask": mask}).outputs["y"]
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=5e-3)


def test_layer_errors_treat_equal_non_finite_values_as_equal() -> None:
    """The float32 baseline may overflow too: the same infinity (or NaN) in both is no
    error and no RuntimeWarning; a finite value against an infinity is an infinite one."""
    from ge.precision_report import _errors

    want = np.array([np.inf, -np.inf, np.nan, 2.0], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _errors(want.copy(), want) == (0.0, 0.0)
        err, rel = _errors(np.array([np.inf, 1.0, np.nan, 3.0], dtype=np.float16), want)
    assert err == np.inf and rel == np.inf
    assert _errors(np.array([np.inf, -np.inf, np.nan, 1.0]), want) == (1.0, 0.5)
