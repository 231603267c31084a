"""Resize's tf_crop_and_resize and TfIdfVectorizer: each imported, run in the reference
interpreter and compiled and simulated, compared with onnxruntime; and what they refuse."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.core.errors import ModelError
from ge.om.tasks import AicpuTask

SOC = "Ascend910B1"


def model_of(nodes: list, inputs: list, outputs: list[str], opset: int, inits: list | None = None) -> onnx.ModelProto:
    outs = [helper.make_empty_tensor_value_info(n) for n in outputs]
    graph = helper.make_graph(nodes, "g", inputs, outs, inits or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check(model: onnx.ModelProto, feeds: dict[str, np.ndarray], tmp_path: Path, rtol: float = 1e-5) -> ge.Model:
    """The reference interpreter and the compiled model give onnxruntime's outputs."""
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    module, _ = ge.load_onnx(path)
    got = ge.reference.run(module, feeds)
    compiled = ge.compile(path, {"soc_version": SOC, "export_compile_stat": 0, "precision_mode": "must_keep_origin_dtype"})
    with ge.Session() as session:
        ran = session.run(compiled, feeds).outputs
    for output, expected in zip(model.graph.output, want):
        for route, outputs in (("reference", got), ("compiled", ran)):
            value = outputs[output.name]
            assert value.dtype == expected.dtype and value.shape == expected.shape, (route, value.shape, expected.shape)
            np.testing.assert_allclose(value, expected, rtol=rtol, atol=rtol, err_msg=route)
    return compiled


def refused(model: onnx.ModelProto, message: str, tmp_path: Path) -> None:
    onnx.save(model, tmp_path / "m.onnx")
    with pytest.raises(ModelError, match=message):
        ge.load_onnx(tmp_path / "m.onnx")


# ------------------------------------------------------------ Resize tf_crop_and_resize


def crop_model(opset: int, roi: list[float], sizes: list[int] | None, scales: list[float] | None, **attrs: object) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.array(roi, np.float32), "roi")]
    inputs = ["x", "roi", "", ""]
    if scales is not None:
        inits.append(numpy_helper.from_array(np.array(scales, np.float32), "scales"))
        inputs[2] = "scales"
    if sizes is not None:
        inits.append(numpy_helper.from_array(np.array(sizes, np.int64), "sizes"))
        inputs[3] = "sizes"
    node = helper.make_node("Resize", inputs, ["y"], coordinate_transformation_mode="tf_crop_and_resize", **attrs)
    return model_of([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 6])], ["y"], opset, inits)


@pytest.mark.parametrize("opset", [13, 18, 19])
@pytest.mark.parametrize(
    ("roi", "sizes", "scales", "attrs"),
    [
        ([0, 0, 0.2, 0.1, 1, 1, 0.9, 0.7], [1, 2, 4, 3], None, {"mode": "linear"}),
        ([0, 0, 0.2, 0.1, 1, 1, 1.3, 0.7], [1, 2, 4, 5], None, {"mode": "linear", "extrapolation_value": -2.5}),
        ([0, 0, -0.2, 0.13, 1, 1, 0.9, 1.2], [1, 2, 3, 4], None, {"mode": "nearest"}),  # no ties: float32 and float64 round them apart
        ([0, 0, 0.1, 0.3, 1, 1, 0.8, 0.9], [1, 2, 7, 8], None, {"mode": "cubic"}),
        ([0, 0, 0.1, 0.3, 1, 1, 0.8, 0.5], [1, 2, 1, 1], None, {"mode": "linear"}),
        ([0, 0, 0.25, 0.0, 1, 1, 1.25, 0.5], None, [1, 1, 0.8, 1.5], {"mode": "linear", "extrapolation_value": 3.0}),
    ],
)
def test_resize_tf_crop_and_resize(opset: int, roi: list, sizes: list | None, scales: list | None, attrs: dict, tmp_path: Path) -> None:
    x = np.random.default_rng(opset).standard_normal((1, 2, 5, 6)).astype(np.float32)
    check(crop_model(opset, roi, sizes, scales, **attrs), {"x": x}, tmp_path)


@pytest.mark.parametrize(("axes", "roi"), [([2, 3], [0.2, 0.1, 1.1, 0.8]), ([3, 2], [0.1, 0.2, 0.8, 1.1]), ([-1], [0.3, 0.6])])
def test_resize_tf_crop_and_resize_axes(axes: list[int], roi: list[float], tmp_path: Path) -> None:
    sizes = [4, 3][: len(axes)]
    model = crop_model(19, roi, sizes, None, mode="linear", axes=axes, extrapolation_value=7.0)
    x = np.random.default_rng(1).standard_normal((1, 2, 5, 6)).astype(np.float32)
    check(model, {"x": x}, tmp_path)


def test_resize_tf_crop_and_resize_refusals(tmp_path: Path) -> None:
    refused(crop_model(19, [0.1, 0.9], [1, 2, 3, 3], None, mode="linear"), r"roi \[.*\] needs 8 values", tmp_path)
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], coordinate_transformation_mode="tf_crop_and_resize")
    sizes = numpy_helper.from_array(np.array([1, 2, 3, 3], np.int64), "sizes")
    model = model_of([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 6])], ["y"], 19, [sizes])
    refused(model, "tf_crop_and_resize needs the roi input", tmp_path)


# -------------------------------------------------------------------- TfIdfVectorizer

POOL = [2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 3, 3, 3]  # 1-grams 2 3 5 4; 2-grams 56 78 67; 3-gram 333
COUNTS = [0, 4, 10]


def tfidf_model(x_type: int, shape: list[int], **attrs: object) -> onnx.ModelProto:
    attrs = {"min_gram_length": 1, "max_gram_length": 2, "max_skip_count": 0, **attrs}
    attrs = {"ngram_counts": COUNTS, "ngram_indexes": [7, 0, 2, 1, 3, 4, 6, 5], "pool_int64s": POOL, **attrs}
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)
    return model_of([node], [helper.make_tensor_value_info("x", x_type, shape)], ["y"], 9)


@pytest.mark.parametrize("x_type", [TensorProto.INT32, TensorProto.INT64])
@pytest.mark.parametrize("shape", [[12], [3, 9]])
@pytest.mark.parametrize(
    "attrs",
    [
        {"mode": "TF", "min_gram_length": 1, "max_gram_length": 1, "max_skip_count": 0},
        {"mode": "TF", "min_gram_length": 2, "max_gram_length": 2, "max_skip_count": 0},
        {"mode": "TF", "min_gram_length": 1, "max_gram_length": 3, "max_skip_count": 3},
        {"mode": "IDF", "min_gram_length": 1, "max_gram_length": 2, "max_skip_count": 5},
        {"mode": "IDF", "min_gram_length": 1, "max_gram_length": 3, "max_skip_count": 2, "weights": [0.5, 2, 3, 4, 5, 6, 7, 8]},
        {"mode": "TFIDF", "min_gram_length": 2, "max_gram_length": 3, "max_skip_count": 1, "weights": [1, 2, 3, 4, 5, 6, 7, 0.25]},
        {"mode": "TFIDF", "min_gram_length": 1, "max_gram_length": 2, "max_skip_count": 20},
    ],
)
def test_tf_idf_vectorizer(x_type: int, shape: list[int], attrs: dict, tmp_path: Path) -> None:
    dtype = helper.tensor_dtype_to_np_dtype(x_type)
    x = np.random.default_rng(len(shape)).integers(2, 9, shape).astype(dtype)
    x.reshape(-1)[3:6] = 3  # a 3-gram 3 3 3
    compiled = check(tfidf_model(x_type, shape, **attrs), {"x": x}, tmp_path)
    assert [type(t) for t in compiled.tasks if t.KIND.startswith("KERNEL")] == [AicpuTask]  # no AI Core kernel


def test_tf_idf_vectorizer_refusals(tmp_path: Path) -> None:
    strings = tfidf_model(TensorProto.INT64, [5], mode="TF")
    strings.graph.node[0].attribute.remove(next(a for a in strings.graph.node[0].attribute if a.name == "pool_int64s"))
    strings.graph.node[0].attribute.append(helper.make_attribute("pool_strings", ["a"] * len(POOL)))
    refused(strings, "pool_strings is unsupported", tmp_path)
    refused(tfidf_model(TensorProto.INT64, [5], mode="BM25"), "mode 'BM25' is not TF, IDF or TFIDF", tmp_path)
    refused(tfidf_model(TensorProto.INT64, [5], mode="TF", ngram_counts=[0, 4, 9]), "whole 1-grams, 2-grams", tmp_path)
    refused(tfidf_model(TensorProto.INT64, [5], mode="TF", ngram_indexes=[0, 1]), "ngram_indexes has 2 entries, the pool 8 n-grams", tmp_path)
    refused(tfidf_model(TensorProto.FLOAT, [5], mode="TF"), "which TfIdfVectorizer does not accept", tmp_path)


@pytest.mark.parametrize("soc", ["Ascend310", "Ascend910B1"])
@pytest.mark.parametrize("precision_mode", ["force_fp16", "allow_mix_precision"])
def test_tf_idf_vectorizer_keeps_float32(soc: str, precision_mode: str, tmp_path: Path) -> None:
    """Its only kernel (AI CPU) writes float32: no precision mode lowers it."""
    model = tfidf_model(TensorProto.INT64, [3, 9], mode="TFIDF", weights=[1, 2, 3, 4, 5, 6, 7, 0.25])
    onnx.save(model, tmp_path / "m.onnx")
    x = np.random.default_rng(0).integers(2, 9, (3, 9))
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = ge.compile(tmp_path / "m.onnx", {"soc_version": soc, "precision_mode": precision_mode, "export_compile_stat": 0})
    with ge.Session() as session:
        got = session.run(compiled, {"x": x}).outputs["y"]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------- computed inputs read when the op runs


def test_trilu_with_a_computed_diagonal(tmp_path: Path) -> None:
    """k fed as a graph input stays Tril/Triu's operand; one compiled model serves every k."""
    node = helper.make_node("Trilu", ["x", "k"], ["y"], upper=0)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 5]), helper.make_tensor_value_info("k", TensorProto.INT64, [])]
    model = model_of([node], inputs, ["y"], 14)
    x = np.random.default_rng(0).standard_normal((2, 4, 5)).astype(np.float32)
    compiled = check(model, {"x": x, "k": np.array(1, np.int64)}, tmp_path)
    for k in (-6, -1, 0, 2, 7):
        with ge.Session() as session:
            got = session.run(compiled, {"x": x, "k": np.array(k, np.int64)}).outputs["y"]
        np.testing.assert_array_equal(got, np.tril(x, k))


@pytest.mark.parametrize("opset", [14, 21])
@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize(("dtype", "k"), [(np.float32, -1), (np.int64, 2), (np.bool_, 0), (np.int32, -9)])
def test_trilu_computed_diagonal_against_onnxruntime(opset: int, upper: int, dtype: type, k: int, tmp_path: Path) -> None:
    node = helper.make_node("Neg", ["k0"], ["k"])  # k computed inside the graph
    trilu = helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)
    x_type = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    inputs = [helper.make_tensor_value_info("x", x_type, [3, 5]), helper.make_tensor_value_info("k0", TensorProto.INT64, [])]
    x = np.random.default_rng(1).integers(-5, 6, (3, 5)).astype(dtype)
    check(model_of([node, trilu], inputs, ["y"], opset), {"x": x, "k0": np.array(-k, np.int64)}, tmp_path)


def test_trilu_refuses_a_computed_diagonal_of_several_values(tmp_path: Path) -> None:
    node = helper.make_node("Trilu", ["x", "k"], ["y"])
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3]), helper.make_tensor_value_info("k", TensorProto.INT64, [2])]
    refused(model_of([node], inputs, ["y"], 14), r"k must be one int64, got i64 \[2\]", tmp_path)


@pytest.mark.parametrize(("op_type", "opset"), [("CumSum", 11), ("CumSum", 14), ("CumProd", 26)])
@pytest.mark.parametrize(("axis_type", "axis"), [(np.int32, 0), (np.int64, 1), (np.int64, -1), (np.int32, -3)])
@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 1)])
def test_cumulative_with_a_computed_axis(op_type: str, opset: int, axis_type: type, axis: int, exclusive: int, reverse: int, tmp_path: Path) -> None:
    """The axis fed as a graph input stays the op's axis_input operand."""
    node = helper.make_node(op_type, ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    a_type = helper.np_dtype_to_tensor_dtype(np.dtype(axis_type))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]), helper.make_tensor_value_info("axis", a_type, [])]
    x = np.random.default_rng(2).uniform(0.5, 1.5, (2, 3, 4)).astype(np.float32)
    check(model_of([node], inputs, ["y"], opset), {"x": x, "axis": np.array(axis, axis_type)}, tmp_path)


def test_cumsum_one_compiled_model_serves_every_axis(tmp_path: Path) -> None:
    node = helper.make_node("CumSum", ["x", "axis"], ["y"])
    inputs = [helper.make_tensor_value_info("x", TensorProto.INT32, [3, 4, 5]), helper.make_tensor_value_info("axis", TensorProto.INT64, [])]
    onnx.save(model_of([node], inputs, ["y"], 14), tmp_path / "m.onnx")
    compiled = ge.compile(tmp_path / "m.onnx", {"soc_version": SOC, "export_compile_stat": 0})
    x = np.random.default_rng(3).integers(-9, 9, (3, 4, 5)).astype(np.int32)
    for axis in (-3, -1, 0, 1, 2):
        with ge.Session() as session:
            got = session.run(compiled, {"x": x, "axis": np.array(axis, np.int64)}).outputs["y"]
        np.testing.assert_array_equal(got, np.cumsum(x, axis=axis, dtype=np.int32))


def test_cumsum_refuses_a_computed_axis_of_several_values(tmp_path: Path) -> None:
    node = helper.make_node("CumSum", ["x", "axis"], ["y"])
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3]), helper.make_tensor_value_info("axis", TensorProto.INT64, [2])]
    refused(model_of([node], inputs, ["y"], 14), r"axis_input must be one int32 or int64, got i64 \[2\]", tmp_path)


@pytest.mark.parametrize("opset", [12, 13])  # integer Clip from opset 12
@pytest.mark.parametrize(
    ("bounds", "fed"),
    [(("lo", "hi"), ("lo", "hi")), (("lo", "hi"), ("lo",)), (("lo", "hi"), ("hi",)), (("lo", ""), ("lo",)), (("", "hi"), ("hi",))],
)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_clip_with_computed_bounds(opset: int, bounds: tuple[str, str], fed: tuple[str, ...], dtype: type, tmp_path: Path) -> None:
    """A fed bound is Maximum/Minimum with it; a constant one stays ClipByValue's property."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    values = {"lo": np.array(-2, dtype), "hi": np.array(3, dtype)}
    node = helper.make_node("Clip", ["x", *bounds], ["y"])
    inputs = [helper.make_tensor_value_info("x", elem, [4, 5])] + [helper.make_tensor_value_info(b, elem, []) for b in fed]
    inits = [numpy_helper.from_array(values[b], b) for b in bounds if b and b not in fed]
    x = np.random.default_rng(4).uniform(-5, 5, (4, 5)).astype(dtype)
    check(model_of([node], inputs, ["y"], opset, inits), {"x": x, **{b: values[b] for b in fed}}, tmp_path)


def test_clip_with_min_above_max_gives_max(tmp_path: Path) -> None:
    """ONNX applies the lower bound first, so min > max gives max everywhere."""
    node = helper.make_node("Clip", ["x", "lo", "hi"], ["y"])
    inputs = [helper.make_tensor_value_info(v, TensorProto.FLOAT, s) for v, s in (("x", [6]), ("lo", []), ("hi", []))]
    feeds = {"x": np.linspace(-3, 3, 6, dtype=np.float32), "lo": np.array(2, np.float32), "hi": np.array(-1, np.float32)}
    check(model_of([node], inputs, ["y"], 13), feeds, tmp_path)


def test_clip_refuses_a_computed_bound_of_several_values(tmp_path: Path) -> None:
    node = helper.make_node("Clip", ["x", "lo"], ["y"])
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]), helper.make_tensor_value_info("lo", TensorProto.FLOAT, [3])]
    refused(model_of([node], inputs, ["y"], 13), r"min must be one value \(a scalar\), got shape \[3\]", tmp_path)


@pytest.mark.parametrize(("op_type", "opset"), [("ReduceSum", 13), ("ReduceMean", 18), ("ReduceL2", 18), ("ReduceLogSumExp", 18)])
@pytest.mark.parametrize(("keepdims", "noop"), [(1, 0), (0, 0), (1, 1)])
def test_reduce_with_a_computed_empty_axes(op_type: str, opset: int, keepdims: int, noop: int, tmp_path: Path) -> None:
    """An axes input of shape [0] has no value to wait for: it reduces everything, or
    nothing with noop_with_empty_axes."""
    node = helper.make_node(op_type, ["x", "axes"], ["y"], keepdims=keepdims, noop_with_empty_axes=noop)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2, 4]), helper.make_tensor_value_info("axes", TensorProto.INT64, [0])]
    x = np.random.default_rng(5).uniform(0.5, 2.0, (3, 2, 4)).astype(np.float32)
    check(model_of([node], inputs, ["y"], opset), {"x": x, "axes": np.zeros(0, np.int64)}, tmp_path)


def test_reduce_with_computed_axes_is_refused(tmp_path: Path) -> None:
    """Axes with values change the result's shape: they must be constants."""
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"])
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2]), helper.make_tensor_value_info("axes", TensorProto.INT64, [1])]
    refused(model_of([node], inputs, ["y"], 13), r"input 1 \(axes, 'axes'\) must be a constant", tmp_path)
