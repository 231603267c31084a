"""NonZero, Compress, Unique and NonMaxSuppression: ops whose result shapes depend on
their input values. Each imports with `?` dims, runs in the reference interpreter and,
compiled, on the AI CPU engine (the build allocates the upper bound, the run gives the
actual shape), both compared with onnxruntime; an op reading such a result runs on the
AI CPU too (tests/test_datadep_chain.py has the chains)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
from dialects import ascend_graph as ag
from dialects.shapes import DYN
from ge.core.errors import ModelError
from ge.om.tasks import AicpuTask

SOC = "Ascend910B1"


def model_of(nodes: list, inputs: list, outputs: list[str], opset: int, inits: list | None = None) -> onnx.ModelProto:
    outs = [helper.make_empty_tensor_value_info(n) for n in outputs]
    graph = helper.make_graph(nodes, "g", inputs, outs, inits or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check(model: onnx.ModelProto, feeds: dict[str, np.ndarray], tmp_path: Path, soc: str = SOC) -> ge.Model:
    """The reference interpreter and the compiled model give onnxruntime's outputs, shapes and all."""
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    names = [o.name for o in model.graph.output]
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    module, _ = ge.load_onnx(path)
    got = ge.reference.run(module, feeds)
    compiled = ge.compile(path, {"soc_version": soc, "export_compile_stat": 0})
    with ge.Session() as session:
        ran = session.run(compiled, feeds).outputs
    for name, expected in zip(names, want):
        for route, outputs in (("reference", got), ("compiled", ran)):
            value = outputs[name]
            assert value.dtype == expected.dtype and value.shape == expected.shape, (route, name, value.shape, expected.shape)
            np.testing.assert_array_equal(value, expected, err_msg=f"{route} {name}")
    assert all(isinstance(t, AicpuTask) for t in compiled.tasks if t.KIND.startswith("KERNEL"))
    return compiled


def ops_of(path: Path, cls: type) -> list:
    module, _ = ge.load_onnx(path)
    return [op for op in module.walk() if isinstance(op, cls)]


# ------------------------------------------------------------------------ NonZero


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize(("dtype", "shape"), [(np.float32, (3, 4)), (np.bool_, (2, 2, 3)), (np.int64, (7,)), (np.float32, (2, 3))])
def test_non_zero(opset: int, dtype: type, shape: tuple[int, ...], tmp_path: Path) -> None:
    rng = np.random.default_rng(len(shape))
    x = (rng.integers(0, 3, shape) * (rng.random(shape) > 0.4)).astype(dtype)
    if shape == (2, 3):
        x = np.zeros(shape, dtype)  # nothing non-zero: a [rank, 0] result
    node = helper.make_node("NonZero", ["x"], ["y"])
    model = model_of([node], [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape)], ["y"], opset)
    compiled = check(model, {"x": x}, tmp_path)
    assert compiled.outputs[0].shape == (len(shape), x.size)  # allocated for every element non-zero


def test_non_zero_types_its_result_with_a_dynamic_dim(tmp_path: Path) -> None:
    node = helper.make_node("NonZero", ["x"], ["y"])
    model = model_of([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])], ["y"], 13)
    onnx.save(model, tmp_path / "m.onnx")
    (op,) = ops_of(tmp_path / "m.onnx", ag.NonZeroOp)
    assert ag.shape_of(op.y.type) == (2, DYN) and op.upper_bounds() == [(2, 12)]


def test_non_zero_of_a_scalar_is_refused(tmp_path: Path) -> None:
    node = helper.make_node("NonZero", ["x"], ["y"])
    onnx.save(model_of([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])], ["y"], 13), tmp_path / "m.onnx")
    with pytest.raises(ModelError, match="at least one dim"):
        ge.load_onnx(tmp_path / "m.onnx")


# ----------------------------------------------------------------------- Compress


@pytest.mark.parametrize("opset", [11, 21])
@pytest.mark.parametrize(("axis", "condition"), [(None, [1, 0, 1, 1]), (0, [0, 1, 1]), (1, [1, 0, 1, 0]), (1, [0, 1]), (0, [0, 0, 0])])
def test_compress(opset: int, axis: int | None, condition: list[int], tmp_path: Path) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    attrs = {} if axis is None else {"axis": axis}
    node = helper.make_node("Compress", ["x", "c"], ["y"], **attrs)
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]), helper.make_tensor_value_info("c", TensorProto.BOOL, [len(condition)])]
    check(model_of([node], ins, ["y"], opset), {"x": x, "c": np.array(condition, bool)}, tmp_path)


@pytest.mark.parametrize(("condition", "message"), [((TensorProto.BOOL, [3, 1]), "1-D bool"), ((TensorProto.BOOL, [5]), "more than the 3 slices")])
def test_compress_refuses_a_bad_condition(condition: tuple[int, list[int]], message: str, tmp_path: Path) -> None:
    node = helper.make_node("Compress", ["x", "c"], ["y"], axis=0)
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]), helper.make_tensor_value_info("c", *condition)]
    onnx.save(model_of([node], ins, ["y"], 11), tmp_path / "m.onnx")
    with pytest.raises(ModelError, match=message):
        ge.load_onnx(tmp_path / "m.onnx")


# ------------------------------------------------------------------------- Unique


@pytest.mark.parametrize(
    ("x", "attrs"),
    [
        (np.array([2, 1, 1, 3, 4, 3], np.float32), {"sorted": 0}),
        (np.array([2, 1, 1, 3, 4, 3], np.float32), {}),
        (np.array([[1, 0, 0], [1, 0, 0], [2, 3, 4]], np.float32), {"axis": 0}),
        (np.array([[2, 0, 0], [1, 0, 0], [2, 0, 0]], np.float32), {"axis": -2, "sorted": 0}),
        (np.array([[1, 0, 0], [1, 0, 0], [2, 3, 4]], np.int64), {"axis": -1, "sorted": 1}),
        (np.array([[1, 1], [0, 0], [1, 1]], np.int64), {"axis": 1, "sorted": 0}),
        (np.array([5], np.float32), {}),
    ],
)
def test_unique(x: np.ndarray, attrs: dict, tmp_path: Path) -> None:
    node = helper.make_node("Unique", ["x"], ["y", "indices", "inverse", "counts"], **attrs)
    ins = [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape))]
    check(model_of([node], ins, ["y", "indices", "inverse", "counts"], 11), {"x": x}, tmp_path)


def test_unique_with_its_first_output_only(tmp_path: Path) -> None:
    node = helper.make_node("Unique", ["x"], ["y"], sorted=0)
    x = np.array([3, 3, 1, 2, 1], np.int64)
    check(model_of([node], [helper.make_tensor_value_info("x", TensorProto.INT64, [5])], ["y"], 11), {"x": x}, tmp_path)


# -------------------------------------------------------------- NonMaxSuppression


BOXES = np.array([[[0.0, 0.0, 1.0, 1.0], [0.0, 0.1, 1.0, 1.1], [0.0, -0.1, 1.0, 0.9], [0.0, 10.0, 1.0, 11.0],
                   [0.0, 10.1, 1.0, 11.1], [0.0, 100.0, 1.0, 101.0]]], np.float32)
SCORES = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3]]], np.float32)


def nms_model(opset: int, constants: dict[str, np.ndarray], center: int = 0) -> onnx.ModelProto:
    names = ["boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold"]
    present = [n if i < 2 or n in constants else "" for i, n in enumerate(names)]
    while present[-1] == "":
        present.pop()
    node = helper.make_node("NonMaxSuppression", present, ["selected"], center_point_box=center)
    b, c, n = 2, 2, 6
    ins = [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [b, n, 4]), helper.make_tensor_value_info("scores", TensorProto.FLOAT, [b, c, n])]
    inits = [numpy_helper.from_array(v, k) for k, v in constants.items()]
    return model_of([node], ins, ["selected"], opset, inits)


@pytest.mark.parametrize("opset", [11, 21])
@pytest.mark.parametrize(
    "constants",
    [
        {"max_output_boxes_per_class": np.array([3], np.int64), "iou_threshold": np.array([0.5], np.float32), "score_threshold": np.array([0.0], np.float32)},
        {"max_output_boxes_per_class": np.array([2], np.int64), "iou_threshold": np.array([0.5], np.float32)},
        {"max_output_boxes_per_class": np.array([10], np.int64), "iou_threshold": np.array([0.0], np.float32), "score_threshold": np.array([0.55], np.float32)},
        {"max_output_boxes_per_class": np.array([0], np.int64)},
        {},
    ],
)
@pytest.mark.parametrize("center", [0, 1])
def test_non_max_suppression(opset: int, constants: dict, center: int, tmp_path: Path) -> None:
    rng = np.random.default_rng(opset + center)
    boxes = np.concatenate([BOXES, BOXES[:, ::-1] + rng.random(BOXES.shape).astype(np.float32)], axis=0)
    if center:
        boxes = np.abs(boxes)
    scores = np.concatenate([SCORES, SCORES[:, :, ::-1]], axis=1)
    scores = np.concatenate([scores, rng.random(scores.shape).astype(np.float32)], axis=0)
    compiled = check(nms_model(opset, constants, center), {"boxes": boxes, "scores": scores}, tmp_path)
    most = int(constants.get("max_output_boxes_per_class", [0])[0])
    assert compiled.outputs[0].shape == (2 * 2 * min(6, most), 3)


def test_non_max_suppression_refuses_what_it_cannot_bound(tmp_path: Path) -> None:
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "most"], ["selected"])
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in (("boxes", [1, 6, 4]), ("scores", [1, 1, 6]))]
    ins.append(helper.make_tensor_value_info("most", TensorProto.INT64, [1]))
    onnx.save(model_of([node], ins, ["selected"], 11), tmp_path / "m.onnx")
    with pytest.raises(ModelError, match=r"input 2 \(max_output_boxes_per_class, 'most'\) must be a constant"):
        ge.load_onnx(tmp_path / "m.onnx")
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["selected"], center_point_box=2)
    onnx.save(model_of([node], ins[:2], ["selected"], 11), tmp_path / "c.onnx")
    with pytest.raises(ModelError, match="center_point_box is 2; allowed: 0"):
        ge.load_onnx(tmp_path / "c.onnx")


# ------------------------------------------------------------- what reads them


@pytest.mark.parametrize(
    "after",
    [helper.make_node("Transpose", ["nz"], ["y"], name="transpose"),
     helper.make_node("Cast", ["nz"], ["y"], name="cast", to=TensorProto.FLOAT)],
)
def test_an_op_reading_a_data_dependent_result_runs_on_the_ai_cpu(after, tmp_path: Path) -> None:
    nodes = [helper.make_node("NonZero", ["x"], ["nz"], name="nz"), after]
    model = model_of(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])], ["y"], 13)
    compiled = check(model, {"x": np.eye(3, 4, dtype=np.float32)}, tmp_path)
    assert sum(isinstance(t, AicpuTask) for t in compiled.tasks) == 2


def test_data_dependent_outputs_survive_the_om_round_trip(tmp_path: Path) -> None:
    node = helper.make_node("Unique", ["x"], ["y", "i", "inv", "c"], sorted=0)
    model = model_of([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])], ["y", "i", "inv", "c"], 11)
    onnx.save(model, tmp_path / "u.onnx")
    compiled = ge.compile(tmp_path / "u.onnx", {"soc_version": "Ascend310", "export_compile_stat": 0})
    loaded = ge.load_model(compiled.save(tmp_path / "u.om"))
    x = np.array([4, 4, 2, 9, 2, 2, 7, 4], np.float32)
    with ge.Session() as session:
        first, again = session.run(compiled, {"x": x}).outputs, session.run(loaded, {"x": x}).outputs
    for name in ("y", "i", "inv", "c"):
        np.testing.assert_array_equal(first[name], again[name])
    np.testing.assert_array_equal(first["y"], [4, 2, 9, 7])
