"""Importer upgrades: models below opset 11 converted at import, and inputs with
dynamic dims imported as they are (compiled fully dynamic, `ge.dynamic`).

Models are built with onnx.helper or exported from small torch modules
(dynamo=False); numbers are compared with onnxruntime on the original model.
"""

from __future__ import annotations

import io
import logging
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
import ge.core.ir
from ge.core.errors import InputError, ModelError
from ge.frontend import load_onnx

F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def compiled_run(path, feeds: dict[str, np.ndarray], **options: object) -> dict[str, np.ndarray]:
    model = ge.compile(str(path), {"soc_version": "Ascend910B1", "precision_mode": "must_keep_origin_dtype", **options})
    with ge.Session() as session:
        return dict(session.run(model, feeds).outputs)


def torch_export(module, args: tuple, opset: int, **kwargs: object) -> onnx.ModelProto:
    torch = pytest.importorskip("torch")
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, buffer, dynamo=False, opset_version=opset, **kwargs)
    return onnx.load_from_string(buffer.getvalue())


# ------------------------------------------------------------------ old opsets


def conv_bn_upsample(opset: int) -> onnx.ModelProto:
    """Conv -> BatchNormalization -> Relu -> Upsample(nearest) at `opset`; the filter is
    large enough (1296 values) for the upgrade's light copy to leave its data out."""
    weight = numpy_helper.from_array(RNG.standard_normal((48, 3, 3, 3)).astype(np.float32) * 0.3, "conv.weight")
    bn = [
        numpy_helper.from_array(RNG.uniform(0.5, 1.5, 48).astype(np.float32), "bn.scale"),
        numpy_helper.from_array(RNG.standard_normal(48).astype(np.float32), "bn.bias"),
        numpy_helper.from_array(RNG.standard_normal(48).astype(np.float32) * 0.1, "bn.mean"),
        numpy_helper.from_array(RNG.uniform(0.5, 2.0, 48).astype(np.float32), "bn.var"),
    ]
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", *(t.name for t in bn)], ["n"], name="bn1"),
        helper.make_node("Relu", ["n"], ["r"], name="relu1"),
        helper.make_node("Upsample", ["r", "scales"], ["y"], name="up1", mode="nearest"),
    ]
    graph = helper.make_graph(
        nodes, "old", [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", F, [1, 48, 16, 16])], [weight, *bn, scales],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=5)


def test_opset9_model_is_upgraded_and_runs_end_to_end(tmp_path, caplog):
    model = conv_bn_upsample(9)
    path = tmp_path / "old.onnx"
    onnx.save(model, path)
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    want = ort_run(model, {"x": x})["y"]
    with caplog.at_level(logging.INFO, logger="ge.frontend.onnx_importer"):
        module, _ = load_onnx(path)
    assert any("opset 9 upgraded to 11" in r.getMessage() for r in caplog.records)
    np.testing.assert_allclose(ge.reference.run(module, {"x": x})["y"], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(compiled_run(path, {"x": x})["y"], want, rtol=1e-4, atol=1e-4)


def test_upgraded_nodes_keep_their_names():
    module, _ = load_onnx(conv_bn_upsample(9))
    labels = {op.label for op in module.walk() if hasattr(op, "label") and op.label}
    assert {"conv1", "bn1", "relu1", "up1"} <= labels


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("opset", [7, 9])
def test_upsample_samples_as_before_the_upgrade(mode, opset):
    """onnx's adapter gives the Resize it makes half-pixel sampling; Upsample's is asymmetric."""
    if opset == 7:
        node = helper.make_node("Upsample", ["x"], ["y"], name="up", mode=mode, scales=[1.0, 1.0, 2.0, 3.0])
        inits = []
    else:
        node = helper.make_node("Upsample", ["x", "s"], ["y"], name="up", mode=mode)
        inits = [numpy_helper.from_array(np.array([1, 1, 2, 3], np.float32), "s")]
    graph = helper.make_graph(
        [node], "up", [helper.make_tensor_value_info("x", F, [1, 2, 3, 4])],
        [helper.make_tensor_value_info("y", F, [1, 2, 6, 12])], inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=5)
    x = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)
    module, _ = load_onnx(model)
    np.testing.assert_allclose(ge.reference.run(module, {"x": x})["y"], ort_run(model, {"x": x})["y"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op_type,opset", [("And", 7), ("Xor", 7), ("Or", 9)])
def test_logical_ops_of_opset_7_import(op_type, opset):
    graph = helper.make_graph(
        [helper.make_node(op_type, ["a", "b"], ["y"])], "logic",
        [helper.make_tensor_value_info("a", TensorProto.BOOL, [3, 4]), helper.make_tensor_value_info("b", TensorProto.BOOL, [4])],
        [helper.make_tensor_value_info("y", TensorProto.BOOL, [3, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=4)
    feeds = {"a": RNG.random((3, 4)) > 0.5, "b": RNG.random(4) > 0.5}
    module, _ = load_onnx(model)
    np.testing.assert_array_equal(ge.reference.run(module, feeds)["y"], ort_run(model, feeds)["y"])


def test_large_weights_survive_the_light_copy():
    """The converter sees the large initializers without data; the import has them all."""
    weight = RNG.standard_normal((64, 64)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), helper.make_node("Upsample", ["m"], ["y"], scales=[1.0, 2.0])],
        "big", [helper.make_tensor_value_info("x", F, [2, 64])], [helper.make_tensor_value_info("y", F, [2, 128])],
        [numpy_helper.from_array(weight, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)], ir_version=4)
    x = RNG.standard_normal((2, 64)).astype(np.float32)
    module, _ = load_onnx(model)
    np.testing.assert_allclose(ge.reference.run(module, {"x": x})["y"], ort_run(model, {"x": x})["y"], rtol=1e-5, atol=1e-5)


def test_an_old_opset_model_with_external_weights_compiles(tmp_path):
    """External data is loaded (and checked) before the upgrade; the compile reloads the
    weights by name from the original file."""
    model = conv_bn_upsample(9)
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    want = ort_run(model, {"x": x})["y"]
    path = tmp_path / "external.onnx"
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    module, _ = load_onnx(path)
    np.testing.assert_allclose(ge.reference.run(module, {"x": x})["y"], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(compiled_run(path, {"x": x})["y"], want, rtol=1e-4, atol=1e-4)


def test_a_failing_adapter_is_named():
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["r"], name="relu"),
            helper.make_node("BatchNormalization", ["r", "s", "s", "s", "s"], ["y"], name="bn_per_pixel", spatial=0),
        ],
        "bad", [helper.make_tensor_value_info("x", F, [1, 3, 2, 2]), helper.make_tensor_value_info("s", F, [3, 2, 2])],
        [helper.make_tensor_value_info("y", F, [1, 3, 2, 2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 7)], ir_version=4)
    with pytest.raises(ModelError) as info:
        load_onnx(model)
    message = str(info.value)
    assert "node 'bn_per_pixel' (BatchNormalization)" in message
    assert "from opset 7 to 11" in message and "spatial" in message
    assert "transformers.h" not in message


def test_opsets_below_7_are_refused():
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("y", F, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)], ir_version=3)
    with pytest.raises(ModelError, match=r"opset 6 is unsupported; supported: 11 to 21 .*7 to 10 are upgraded"):
        load_onnx(model)


@pytest.mark.slow
@pytest.mark.parametrize("opset", [7, 9, 10])
def test_torch_exports_of_old_opsets_import(opset, tmp_path):
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(4)
            self.fc = torch.nn.Linear(4 * 4 * 4, 5)

        def forward(self, x):
            y = torch.relu(self.bn(self.conv(x)))
            y = torch.nn.functional.max_pool2d(y, 2)
            return torch.softmax(self.fc(y.flatten(1)), dim=-1)

    torch.manual_seed(0)
    model = torch_export(Net(), (torch.randn(2, 3, 8, 8),), opset, input_names=["x"], output_names=["y"])
    assert model.opset_import[0].version == opset
    path = tmp_path / "net.onnx"
    onnx.save(model, path)
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    want = ort_run(model, {"x": x})["y"]
    module, _ = load_onnx(path)
    np.testing.assert_allclose(ge.reference.run(module, {"x": x})["y"], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(compiled_run(path, {"x": x})["y"], want, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ dynamic dims


INT64_MIN = str(-(2**63))


def dynamic_export(path) -> onnx.ModelProto:
    """Embedding, Linear, a mask, heads split with reshape(b, s, 4, 4): batch and sequence dynamic."""
    torch = pytest.importorskip("torch")

    class Heads(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(50, 16)
            self.fc = torch.nn.Linear(16, 16)

        def forward(self, ids, mask):
            b, s = ids.shape
            h = self.fc(self.emb(ids)) * mask.unsqueeze(-1)
            h = h.reshape(b, s, 4, 4).transpose(1, 2)
            return torch.softmax(h, -1).reshape(b, -1)

    torch.manual_seed(0)
    axes = {0: "batch", 1: "sequence"}
    model = torch_export(
        Heads(), (torch.zeros(2, 8, dtype=torch.long), torch.ones(2, 8)), 17,
        input_names=["input_ids", "mask"], output_names=["y"],
        dynamic_axes={"input_ids": axes, "mask": axes, "y": {0: "batch"}},
    )
    onnx.save(model, path)
    return model


@pytest.mark.slow
def test_dynamic_dims_import_and_run_on_the_reference(tmp_path):
    path = tmp_path / "dynamic.onnx"
    model = dynamic_export(path)
    module, _ = load_onnx(path)
    text = ge.core.ir.to_text(module)
    assert "tensor<?x?xi64>" in text and "ascend_graph.shape" in text and "ascend_graph.reshape_dynamic" in text
    assert ge.core.ir.to_text(ge.core.ir.parse(text)) == text
    for batch, length in [(1, 5), (3, 12)]:
        feeds = {
            "input_ids": RNG.integers(0, 50, (batch, length)).astype(np.int64),
            "mask": (RNG.random((batch, length)) > 0.3).astype(np.float32),
        }
        got = ge.reference.run(module, feeds)["y"]
        np.testing.assert_allclose(got, ort_run(model, feeds)["y"], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_a_shape_computation_compiles_fully_dynamic_and_with_the_input_shape(tmp_path):
    """Its dims dynamic, the model computes a Reshape's target from its input shapes: the
    fully dynamic build sizes it on the host per shape (`ge.dynamic.infer_shapes`), and
    the static build of one shape compiles too; both compute what onnxruntime does."""
    path = tmp_path / "dynamic.onnx"
    model = dynamic_export(path)
    feeds = {"input_ids": RNG.integers(0, 50, (3, 6)).astype(np.int64), "mask": np.ones((3, 6), np.float32)}
    want = ort_run(model, feeds)["y"]
    np.testing.assert_allclose(compiled_run(path, feeds)["y"], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(compiled_run(path, feeds, input_shape="input_ids:3,6;mask:3,6")["y"], want, rtol=1e-4, atol=1e-5)


def test_a_model_with_dynamic_dims_compiles_fully_dynamic_and_so_does_its_module(tmp_path):
    """No --input_shape: the model's own dynamic dims are -1 (`ge.dynamic`), any shape runs."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "b"], ["y"])], "partly",
        [helper.make_tensor_value_info("x", F, ["n", 3, None]), helper.make_tensor_value_info("b", F, [1, 3, 1])],
        [helper.make_tensor_value_info("y", F, ["n", 3, None])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = tmp_path / "partly.onnx"
    onnx.save(model, path)
    module, _ = load_onnx(path)
    for compiled in (ge.compile(str(path), {"soc_version": "Ascend910B1"}), ge.compile(module, {"soc_version": "Ascend910B1"})):
        assert compiled.build["dynamic"]["ranges"] == "x:-1,3,-1;b:1,3,1"
        for shape in [(2, 3, 5), (1, 3, 9)]:
            feeds = {"x": RNG.standard_normal(shape).astype(np.float32), "b": RNG.standard_normal((1, 3, 1)).astype(np.float32)}
            got = ge.Session().run(compiled, feeds).outputs["y"]
            np.testing.assert_allclose(got, ort_run(model, feeds)["y"], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("start,end", [(0, None), (1, None), (0, 1), (-2, -1)])
def test_shape_of_a_dynamic_input_is_an_op_or_a_constant(start, end):
    attrs = {"start": start} | ({"end": end} if end is not None else {})
    graph = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["y"], **attrs)], "shape",
        [helper.make_tensor_value_info("x", F, ["n", 3, 4])], [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)
    module, _ = load_onnx(model)
    kinds = {op.name for op in module.walk()}
    assert ("ascend_graph.shape" in kinds) == (start == 0)
    x = RNG.standard_normal((5, 3, 4)).astype(np.float32)
    np.testing.assert_array_equal(ge.reference.run(module, {"x": x})["y"], ort_run(model, {"x": x})["y"])


@pytest.mark.parametrize("allowzero", [0, 1])
def test_reshape_to_a_computed_target(allowzero):
    """Reshape(x, Concat(Shape(x)[0:1], [0, -1])): ONNX's 0 and -1 resolved at run time."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], end=1),
        helper.make_node("Concat", ["s", "tail"], ["t"], axis=0),
        helper.make_node("Reshape", ["x", "t"], ["y"], allowzero=allowzero),
    ]
    tail = numpy_helper.from_array(np.array([2, -1] if allowzero else [0, -1], np.int64), "tail")
    graph = helper.make_graph(
        nodes, "reshape", [helper.make_tensor_value_info("x", F, ["n", 2, 6])],
        [helper.make_tensor_value_info("y", F, None)], [tail],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)
    module, _ = load_onnx(model)
    x = RNG.standard_normal((3, 2, 6)).astype(np.float32)
    got = ge.reference.run(module, {"x": x})["y"]
    assert got.shape == (3, 2, 6)
    np.testing.assert_array_equal(got, ort_run(model, {"x": x})["y"])


def test_shape_rules_keep_dynamic_dims_dynamic():
    """DYN is a number (INT64_MIN): arithmetic on it makes a wrong size, and messages print it."""
    from xdsl.dialects.builtin import TensorType, f32

    from dialects import ascend_graph as ag
    from dialects.shapes import DYN, ShapeError, reshape

    x = ag.DataOp(0, TensorType(f32, (DYN, DYN, 4, 6)), "x")
    down = ag.DepthToSpaceOp([x], {"block_size": ag.int_attr(3), "mode": ag.StringAttr("DCR")}, "d2s")
    assert down.y.type.get_shape() == (DYN, DYN, 12, 18)
    up = ag.SpaceToDepthOp([x], {"block_size": ag.int_attr(2)}, "s2d")
    assert up.y.type.get_shape() == (DYN, DYN, 2, 3)
    with pytest.raises(ShapeError) as info:
        reshape((2, 3), (DYN, 2))
    assert INT64_MIN not in str(info.value) and "[?, 2]" in str(info.value)


def test_generated_inputs_name_a_dynamic_shape_readably():
    from dialects.shapes import DYN
    from ge.core.inputs import generated

    with pytest.raises(InputError) as info:
        generated([("x", np.dtype(np.float32), (DYN, 3))], seed=0)
    assert "[?, 3]" in str(info.value) and INT64_MIN not in str(info.value)


def test_a_computed_target_not_from_a_shape_must_still_be_constant():
    """A static graph stays static: a target given as a graph input is refused, as before."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["y"], name="r")], "r",
        [helper.make_tensor_value_info("x", F, ["n", 3]), helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", F, None)],
    )
    with pytest.raises(ModelError, match="input 1 .* must be a constant"):
        load_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8))


def test_dynamic_reshape_needs_a_target_of_known_length():
    from xdsl.dialects.builtin import TensorType, f32, i64

    from dialects import ascend_graph as ag
    from dialects.shapes import DYN, ShapeError

    x = ag.DataOp(0, TensorType(f32, (DYN, 3)), "x")
    target = ag.DataOp(1, TensorType(i64, (DYN,)), "target")
    with pytest.raises(ShapeError, match=r"1-D integer tensor of known length, not \[\?\]"):
        ag.DynamicReshapeOp([x, target], {}, "r")


@pytest.mark.parametrize("model,dynamic,static,feeds", [
    ("tiny_resnet.onnx", "input:-1,3,-1,-1", "input:2,3,40,40", {"input": (np.float32, (2, 3, 40, 40))}),
    ("tiny_bert.onnx", "input_ids:-1,-1;attention_mask:-1,-1", "input_ids:1,16;attention_mask:1,16",
     {"input_ids": (np.int64, (1, 16)), "attention_mask": (np.int64, (1, 16))}),
])
def test_bundled_models_with_every_input_dim_dynamic(model, dynamic, static, feeds):
    """Every shape rule the bundled models use keeps a dynamic dim dynamic (never a
    number made of INT64_MIN), and the dynamic graph computes what the static one does."""
    from xdsl.dialects.builtin import TensorType

    from dialects.shapes import DYN

    path = Path(ge.__file__).parent / "models" / model
    module, _ = load_onnx(path, input_shape=dynamic)
    dims = [d for op in module.walk() for r in op.results if isinstance(r.type, TensorType) for d in r.type.get_shape()]
    assert DYN in dims and all(d == DYN or d >= 0 for d in dims)
    values = {name: (RNG.integers(0, 2, shape) if dtype is np.int64 else RNG.standard_normal(shape)).astype(dtype) for name, (dtype, shape) in feeds.items()}
    fixed, _ = load_onnx(path, input_shape=static)
    got, want = ge.reference.run(module, values), ge.reference.run(fixed, values)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


def test_an_opset_8_scan_is_refused_not_upgraded() -> None:
    """Scan-8 takes a batch dim Scan-9 drops: upgrading would change the model's inputs."""
    from ge.testing.conformance import NODE_DIR

    with pytest.raises(ModelError, match=r"node 'Scan_0' \(Scan\): Scan of opset 8 takes a batch dim"):
        ge.load_onnx(str(NODE_DIR / "test_scan_sum" / "model.onnx"))
