"""Importer upgrades: models below opset 11 converted at import, and inputs with
dynamic dims imported as they are (compile refuses them, saying what to pass).

Models are built with onnx.helper or exported from small torch modules
(dynamo=False); numbers are compared with onnxruntime on the original model.
"""

from __future__ import annotations

import io
import logging
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.core.errors import ModelError
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
    """Conv -> BatchNormalization -> Relu -> Upsample(nearest, or linear) at `opset`."""
    weight = numpy_helper.from_array(RNG.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, "conv.weight")
    bn = [
        numpy_helper.from_array(RNG.uniform(0.5, 1.5, 8).astype(np.float32), "bn.scale"),
        numpy_helper.from_array(RNG.standard_normal(8).astype(np.float32), "bn.bias"),
        numpy_helper.from_array(RNG.standard_normal(8).astype(np.float32) * 0.1, "bn.mean"),
        numpy_helper.from_array(RNG.uniform(0.5, 2.0, 8).astype(np.float32), "bn.var"),
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
        [helper.make_tensor_value_info("y", F, [1, 8, 16, 16])], [weight, *bn, scales],
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
