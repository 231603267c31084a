"""Values on the host's InferShape (`ge.dynamic.infer_shapes`): a fully dynamic build of a
graph whose shapes are computed from its input shapes (Shape -> Gather -> Concat ->
Reshape, Expand, Slice and Range chains with several unknown dims, as transformer
exports write them) compiles once and runs at any shape, equal to onnxruntime; the
chains fold to constants and static ops per shape; a shape that depends on data is
refused at compile, a value that contradicts the dims proven at import or is too large
for the host at run time, each naming the op. Slow: the GPT-2 and BERT-base dynamic
exports compiled once fully dynamic, run at three (batch, sequence) shapes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
from dialects import ascend_graph as ag
from ge import dynamic
from ge.core.errors import ModelError
from ge.session import Session
from ge.testing.real_models import (
    DYNAMIC_EXPORTERS,
    dynamic_path,
    model_inputs,
    onnxruntime_outputs,
)

SOC = "Ascend310P3"
F = TensorProto.FLOAT
TOLERANCE = {"rtol": 2e-2, "atol": 2e-2}
"""float16 compute against onnxruntime's float32, as tests/test_dynamic_shapes.py."""
RUNTIME_SIZED = (ag.ShapeOp, ag.DynamicReshapeOp, ag.BroadcastToOp, ag.StridedSliceV2Op, ag.RangeOp)


def const(name: str, value: object, dtype: type = np.int64) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], name=name, value=numpy_helper.from_array(np.array(value, dtype)))


def unsqueeze(x: str, out: str, opset: int) -> list[onnx.NodeProto]:
    """`x` (a scalar) as a 1-element vector, as each opset spells Unsqueeze."""
    if opset < 13:
        return [helper.make_node("Unsqueeze", [x], [out], name=out, axes=[0])]
    return [const(out + "_axes", [0]), helper.make_node("Unsqueeze", [x, out + "_axes"], [out], name=out)]


def dim(shape: str, index: int, out: str, opset: int) -> list[onnx.NodeProto]:
    """Dim `index` of the Shape `shape` as a scalar `out` and a 1-element vector `out`1."""
    return [const(out + "_i", index), helper.make_node("Gather", [shape, out + "_i"], [out], name=out, axis=0), *unsqueeze(out, out + "1", opset)]


def save(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[str], path: Path, opset: int = 17) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_empty_tensor_value_info(o) for o in outputs])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8), path)
    return path


def heads(path: Path, opset: int) -> Path:
    """x [batch, seq, 32] split into 4 heads ([batch, seq, 4, 8], a Concat of two Gathers
    and a constant), transposed, and merged to [batch, 4, seq * 8]: two Reshapes with two
    unknown dims each."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        *dim("s", 0, "b", opset), *dim("s", 1, "q", opset), const("heads", [4, 8]), const("four", [4]), const("eight", 8),
        helper.make_node("Concat", ["b1", "q1", "heads"], ["split_to"], name="split_to", axis=0),
        helper.make_node("Reshape", ["x", "split_to"], ["split"], name="split_heads"),
        helper.make_node("Transpose", ["split"], ["t"], name="transpose", perm=[0, 2, 1, 3]),
        helper.make_node("Mul", ["q", "eight"], ["q8"], name="q8"), *unsqueeze("q8", "q81", opset),
        helper.make_node("Concat", ["b1", "four", "q81"], ["merge_to"], name="merge_to", axis=0),
        helper.make_node("Reshape", ["t", "merge_to"], ["y"], name="merge_heads"),
    ]
    return save(nodes, [helper.make_tensor_value_info("x", F, ["batch", "seq", 32])], ["y"], path, opset)


def masks(path: Path) -> Path:
    """The positions and the attention mask of a decoder: a table sliced to the sequence
    (StridedSliceV2), the mask [batch, seq] expanded to [batch, 1, seq, seq] (BroadcastTo),
    and Range(0, seq) added along the sequence."""
    table = np.random.default_rng(0).standard_normal((128, 16)).astype(np.float32)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        *dim("s", 0, "b", 17), *dim("s", 1, "q", 17), const("zero", 0), const("one", 1), const("zeros", [0]), const("ones", [1]),
        helper.make_node("Constant", [], ["table"], name="table", value=numpy_helper.from_array(table)),
        helper.make_node("Slice", ["table", "zeros", "q1", "zeros"], ["pos"], name="positions"),
        helper.make_node("Add", ["x", "pos"], ["y"], name="add_positions"),
        const("mask_axes", [1, 2]), helper.make_node("Unsqueeze", ["mask", "mask_axes"], ["m4"], name="mask4"),
        helper.make_node("Concat", ["b1", "ones", "q1", "q1"], ["square"], name="square", axis=0),
        helper.make_node("Expand", ["m4", "square"], ["mask_out"], name="expand_mask"),
        helper.make_node("Range", ["zero", "q", "one"], ["r"], name="steps"),
        helper.make_node("Cast", ["r"], ["rf"], name="steps_f", to=F),
        const("last", [1]), helper.make_node("Unsqueeze", ["rf", "last"], ["rc"], name="steps_column"),
        helper.make_node("Add", ["x", "rc"], ["stepped"], name="add_steps"),
    ]
    inputs = [helper.make_tensor_value_info("x", F, ["batch", "seq", 16]), helper.make_tensor_value_info("mask", F, ["batch", "seq"])]
    return save(nodes, inputs, ["y", "mask_out", "stepped"], path)


def thirds(path: Path) -> Path:
    """x [a, b, c], all three dims unknown, to [a * b, c / 2, 2] (an integer Div the
    symbols leave unknown), then transposed and through a Relu."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        *dim("s", 0, "a", 17), *dim("s", 1, "b", 17), *dim("s", 2, "c", 17), const("two", 2), const("pair", [2]),
        helper.make_node("Mul", ["a", "b"], ["ab"], name="ab"), *unsqueeze("ab", "ab1", 17),
        helper.make_node("Div", ["c", "two"], ["half"], name="half"), *unsqueeze("half", "half1", 17),
        helper.make_node("Concat", ["ab1", "half1", "pair"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["r"], name="regroup"),
        helper.make_node("Transpose", ["r"], ["t"], name="transpose", perm=[0, 2, 1]),
        helper.make_node("Relu", ["t"], ["y"], name="relu"),
    ]
    return save(nodes, [helper.make_tensor_value_info("x", F, [None, None, None])], ["y"], path)


def feeds_of(path: Path, shapes: dict[str, tuple[int, ...]], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


def agrees_with_onnxruntime(model: ge.Model, path: Path, feeds: dict[str, np.ndarray]) -> None:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    got = Session().run(model, feeds).outputs
    assert got.keys() == want.keys()
    for name, value in want.items():
        assert got[name].shape == value.shape, name
        np.testing.assert_allclose(got[name], value, **TOLERANCE, err_msg=name)


CASES = {
    "heads-11": (lambda p: heads(p, 11), [{"x": (2, 5, 32)}, {"x": (1, 17, 32)}, {"x": (3, 64, 32)}]),
    "heads-17": (lambda p: heads(p, 17), [{"x": (2, 5, 32)}, {"x": (1, 17, 32)}, {"x": (3, 64, 32)}]),
    "masks": (masks, [{"x": (1, 7, 16), "mask": (1, 7)}, {"x": (2, 16, 16), "mask": (2, 16)}, {"x": (3, 100, 16), "mask": (3, 100)}]),
    "thirds": (thirds, [{"x": (2, 3, 8)}, {"x": (1, 5, 4)}, {"x": (3, 2, 12)}]),
}


@pytest.mark.parametrize("case", CASES)
def test_a_shape_chain_compiles_once_and_runs_at_three_shapes_as_onnxruntime(case: str, tmp_path: Path) -> None:
    build, runs = CASES[case]
    path = build(tmp_path / f"{case}.onnx")
    module, _ = ge.load_onnx(path)
    assert any(isinstance(op, RUNTIME_SIZED[1:]) for op in module.walk())  # sized at run time, not at import
    model = ge.compile(path, {"soc_version": SOC})
    assert model.dynamic is not None
    for seed, shapes in enumerate(runs):
        agrees_with_onnxruntime(model, path, feeds_of(path, shapes, seed))


def test_each_shape_folds_the_chains_into_the_static_ops_of_a_static_build(tmp_path: Path) -> None:
    """The specialised graph holds no op sized at run time, and builds as many kernels as
    the static compile of that shape."""
    path = heads(tmp_path / "heads.onnx", 17)
    model = ge.compile(path, {"soc_version": SOC})
    assert model.dynamic is not None
    builds = dynamic.ShapeBuilds(model, Session().config)
    shapes = {"x": (2, 9, 32)}
    module = dynamic.specialise(model.dynamic, model.weights, shapes, builds.key)
    assert not [op for op in module.walk() if isinstance(op, RUNTIME_SIZED)]
    static = ge.compile(path, {"soc_version": SOC, "input_shape": "x:2,9,32"})
    assert builds.build(shapes).build["kernels"] == static.build["kernels"]


def test_a_reshape_to_a_value_computed_from_data_is_refused_at_compile_naming_the_source(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"), *dim("s", 0, "b", 17),
        helper.make_node("ArgMax", ["k"], ["width"], name="widest", axis=0, keepdims=1),
        helper.make_node("Concat", ["b1", "width"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"], name="by_data"),
    ]
    inputs = [helper.make_tensor_value_info("x", F, ["batch", 6]), helper.make_tensor_value_info("k", F, [4])]
    path = save(nodes, inputs, ["y"], tmp_path / "by_data.onnx")
    with pytest.raises(ModelError, match=r"DynamicReshape 'by_data': its result shape depends on values computed from data \(ArgMaxV2 'widest'\)"):
        ge.compile(path, {"soc_version": SOC})


def test_a_data_dependent_count_is_refused_at_compile(tmp_path: Path) -> None:
    nodes = [helper.make_node("NonZero", ["x"], ["y"], name="nonzero")]
    path = save(nodes, [helper.make_tensor_value_info("x", F, ["n", 4])], ["y"], tmp_path / "nonzero.onnx")
    with pytest.raises(ModelError, match=r"NonZero 'nonzero': its result shape \[2, \?\] depends on the values of its inputs \(data\)"):
        ge.compile(path, {"soc_version": SOC})


def test_a_value_that_contradicts_the_dims_proven_at_import_is_a_model_error_naming_the_op(tmp_path: Path) -> None:
    module, _ = ge.load_onnx(heads(tmp_path / "heads.onnx", 17))
    split = next(op for op in module.walk() if isinstance(op, ag.DynamicReshapeOp) and op.label == "split_heads")
    split.properties["dims"] = ag.ints([-1, -1, 4, 7])
    model = ge.compile(module, {"soc_version": SOC})
    with pytest.raises(ModelError, match=r"DynamicReshape 'split_heads': .*differs from the dims \[-1, -1, 4, 7\] proved at import"):
        Session().run(model, {"x": np.zeros((1, 3, 32), np.float32)})


def test_the_host_computes_no_value_beyond_its_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Range longer than HOST_VALUE_LIMIT is refused naming it (no device kernel computes
    one), within the bound it runs."""
    path = masks(tmp_path / "masks.onnx")
    model = ge.compile(path, {"soc_version": SOC})
    monkeypatch.setattr(dynamic, "HOST_VALUE_LIMIT", 64)
    agrees_with_onnxruntime(model, path, feeds_of(path, {"x": (1, 64, 16), "mask": (1, 64)}, 0))
    with pytest.raises(ModelError, match=r"Range 'steps': its 65 elements are more than the host computes while it infers shapes \(64\)"):
        Session().run(model, feeds_of(path, {"x": (1, 65, 16), "mask": (1, 65)}, 0))


# ---------------------------------------------------------------- real exports (slow)

REAL_SHAPES = ((1, 16), (2, 9), (3, 40))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.slow
@pytest.mark.parametrize(("name", "exporter"), [("gpt2_small", e) for e in DYNAMIC_EXPORTERS] + [("bert_base", "dynamo")])  # as test_dynamic_exports.EXPORTS
def test_a_dynamic_transformer_export_compiles_once_and_runs_at_any_batch_and_sequence(name: str, exporter: str) -> None:
    """No option: the export's batch and sequence are -1; the float16 outputs agree with
    onnxruntime's float32 ones as tests/test_dynamic_exports.py asks (a cosine above 0.999)."""
    path = dynamic_path(name, exporter)
    model = ge.compile(path, {"soc_version": SOC})
    assert model.dynamic is not None
    session = Session()
    for shape in REAL_SHAPES:
        feeds = model_inputs(path, seed=shape[1], shape=shape)
        want = onnxruntime_outputs(path, feeds)
        got = session.run(model, feeds).outputs
        assert got.keys() == want.keys()
        for output, value in want.items():
            assert got[output].shape == value.shape, output
            assert cosine(got[output], value) > 0.999, (shape, output)
