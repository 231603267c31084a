"""Fuzzing the public entry points with mutated ONNX models.

Small valid models (and the bundled tiny_resnet) are mutated the ways a broken
exporter or a hostile file would: dims of inputs and initializers (0, negative,
10^12), attribute values (out of range, wrong kind, missing, unknown), op types,
input and output names, initializer data and types, the IR version and opset. The
mutated model is serialized, parsed back and given to `ge.frontend.load_onnx` (with
an `--input_shape` of drawn dims, at times), and when it imports, to `ge.compile`. Whatever happens must be one of:

- the model imports (and compiles);
- a `GEError` subclass with a one-line message.

Never another exception (a traceback for the user), never a MemoryError or
RecursionError, and never more than a few seconds (the deadline): a limit of
`ge.core.limits` or a check of the importer must stop a bomb before it runs.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import onnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.core.errors import GEError
from ge.frontend import load_onnx
from ge.frontend.onnx_ops import CONVERTERS

F = TensorProto.FLOAT
I64 = TensorProto.INT64
MODELS = Path(ge.__file__).parent / "models"


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def _model(nodes, inputs, outputs, inits, opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "fuzz", inputs, outputs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _cnn() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "fc"], ["g"], name="gemm", transB=1),
        helper.make_node("Softmax", ["g"], ["y"], name="softmax", axis=1),
    ]
    inits = [
        _init("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32)),
        _init("b", rng.standard_normal(4).astype(np.float32)),
        _init("fc", rng.standard_normal((5, 64)).astype(np.float32)),
    ]
    inputs = [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])]
    return _model(nodes, inputs, [helper.make_tensor_value_info("y", F, [1, 5])], inits)


def _shapes() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Split", ["x", "sizes"], ["a", "b"], name="split", axis=1),
        helper.make_node("ReduceMean", ["a"], ["m"], name="mean", axes=[2], keepdims=1),
        helper.make_node("Transpose", ["b"], ["t"], name="transpose", perm=[0, 2, 1]),
        helper.make_node("Reshape", ["t", "shape"], ["rs"], name="reshape"),
        helper.make_node("Slice", ["rs", "starts", "ends", "axes"], ["sl"], name="slice"),
        helper.make_node("Unsqueeze", ["sl", "uaxes"], ["u"], name="unsqueeze"),
        helper.make_node("Gather", ["u", "idx"], ["gt"], name="gather", axis=2),
        helper.make_node("Concat", ["m", "m"], ["cc"], name="concat", axis=2),
        helper.make_node("Pad", ["cc", "pads"], ["y2"], name="pad", mode="constant"),
        helper.make_node("Squeeze", ["gt", "uaxes"], ["y"], name="squeeze"),
    ]
    inits = [
        _init("sizes", np.array([1, 3], np.int64)),
        _init("shape", np.array([2, -1], np.int64)),
        _init("starts", np.array([0], np.int64)),
        _init("ends", np.array([10], np.int64)),
        _init("axes", np.array([1], np.int64)),
        _init("uaxes", np.array([0], np.int64)),
        _init("idx", np.array([0, 2], np.int64)),
        _init("pads", np.array([0, 0, 1, 0, 0, 1], np.int64)),
    ]
    inputs = [helper.make_tensor_value_info("x", F, [2, 4, 6])]
    outputs = [helper.make_tensor_value_info("y", F, [2, 2]), helper.make_tensor_value_info("y2", F, [2, 1, 4])]
    return _model(nodes, inputs, outputs, inits)


def _constants() -> onnx.ModelProto:
    one = helper.make_tensor("one", F, [1], [1.0])
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("ConstantOfShape", ["s"], ["ones"], name="cos", value=one),
        helper.make_node("Add", ["x", "ones"], ["a"], name="add"),
        helper.make_node("Expand", ["a", "eshape"], ["e"], name="expand"),
        helper.make_node("Tile", ["e", "reps"], ["t"], name="tile"),
        helper.make_node("Range", ["r0", "r1", "r2"], ["r"], name="range"),
        helper.make_node("Cast", ["r"], ["rf"], name="cast", to=F),
        helper.make_node("Mul", ["t", "rf"], ["y"], name="mul"),
    ]
    inits = [
        _init("eshape", np.array([2, 3, 4], np.int64)),
        _init("reps", np.array([1, 1, 2], np.int64)),
        _init("r0", np.array(0, np.int64)),
        _init("r1", np.array(8, np.int64)),
        _init("r2", np.array(1, np.int64)),
    ]
    inputs = [helper.make_tensor_value_info("x", F, [3, 4])]
    return _model(nodes, inputs, [helper.make_tensor_value_info("y", F, [2, 3, 8])], inits)


SEEDS = {
    "cnn": _cnn().SerializeToString(),
    "shapes": _shapes().SerializeToString(),
    "constants": _constants().SerializeToString(),
    "tiny_resnet": (MODELS / "tiny_resnet.onnx").read_bytes(),
}

INTS = st.one_of(
    st.integers(-4, 8),
    st.sampled_from([-(2**63), -(10**12), 64, 10**6, 10**9, 10**12, 2**31, 2**62]),
)
FLOATS = st.sampled_from([0.0, -1.0, 1e-30, 1e30, float("inf"), float("nan")])


def _mutate_dims(model: onnx.ModelProto, data: st.DataObject) -> None:
    graph = model.graph
    targets = [i for i in graph.input if i.type.tensor_type.shape.dim] + [t for t in graph.initializer if t.dims]
    if not targets:
        return
    target = data.draw(st.sampled_from(targets))
    if isinstance(target, onnx.TensorProto):
        i = data.draw(st.integers(0, len(target.dims) - 1))
        target.dims[i] = data.draw(INTS)
        return
    dims = target.type.tensor_type.shape.dim
    if data.draw(st.booleans()):
        dims[data.draw(st.integers(0, len(dims) - 1))].dim_value = data.draw(INTS)
    else:
        dims.add().dim_value = data.draw(st.integers(1, 4))


def _mutate_attribute(model: onnx.ModelProto, data: st.DataObject) -> None:
    if not model.graph.node:
        return
    node = data.draw(st.sampled_from(list(model.graph.node)))
    if not node.attribute or data.draw(st.integers(0, 3)) == 0:
        name = data.draw(st.sampled_from(["axis", "axes", "perm", "split", "pads", "strides", "to", "group", "bogus"]))
        node.attribute.append(helper.make_attribute(name, data.draw(st.one_of(INTS, st.lists(INTS, min_size=1, max_size=4)))))
        return
    index = data.draw(st.integers(0, len(node.attribute) - 1))
    attr = node.attribute[index]
    choice = data.draw(st.integers(0, 3))
    if choice == 0:
        del node.attribute[index]
    elif attr.type == onnx.AttributeProto.INT or choice == 1:
        replacement = helper.make_attribute(attr.name, data.draw(INTS))
        node.attribute[index].CopyFrom(replacement)
    elif attr.type == onnx.AttributeProto.INTS:
        attr.ints[:] = data.draw(st.lists(INTS, max_size=6))
    else:
        node.attribute[index].CopyFrom(helper.make_attribute(attr.name, data.draw(FLOATS)))


def _mutate_op_type(model: onnx.ModelProto, data: st.DataObject) -> None:
    if not model.graph.node:
        return
    node = data.draw(st.sampled_from(list(model.graph.node)))
    node.op_type = data.draw(st.one_of(st.sampled_from(sorted(CONVERTERS)), st.sampled_from(["Mod", "OneHot", "Nope"])))


def _mutate_names(model: onnx.ModelProto, data: st.DataObject) -> None:
    graph = model.graph
    names = [i.name for i in graph.input] + [t.name for t in graph.initializer]
    names += [o for n in graph.node for o in n.output] + ["", "ghost"]
    choice = data.draw(st.integers(0, 3))
    if not graph.node or not graph.input or not graph.output:
        return
    if choice == 0:
        node = data.draw(st.sampled_from(list(graph.node)))
        if node.input:
            node.input[data.draw(st.integers(0, len(node.input) - 1))] = data.draw(st.sampled_from(names))
    elif choice == 1:
        node = data.draw(st.sampled_from(list(graph.node)))
        node.output[0] = data.draw(st.sampled_from(names))
    elif choice == 2:
        graph.input.append(graph.input[0])
    else:
        graph.output[0].name = data.draw(st.sampled_from(names))


def _mutate_initializer(model: onnx.ModelProto, data: st.DataObject) -> None:
    graph = model.graph
    if not graph.initializer:
        return
    tensor = data.draw(st.sampled_from(list(graph.initializer)))
    choice = data.draw(st.integers(0, 3))
    if choice == 0:
        tensor.raw_data = tensor.raw_data[: data.draw(st.integers(0, max(len(tensor.raw_data) - 1, 0)))]
    elif choice == 1:
        tensor.data_type = data.draw(st.sampled_from([TensorProto.INT32, TensorProto.DOUBLE, TensorProto.STRING, 40]))
    elif choice == 2:
        tensor.dims.append(data.draw(INTS))
    else:
        tensor.raw_data = tensor.raw_data * data.draw(st.integers(2, 3))  # more bytes than the dims hold


def _mutate_values(model: onnx.ModelProto, data: st.DataObject) -> None:
    """An integer initializer (a shape, repeats, pads, a Range limit) gets a new value:
    where the bombs are (Expand to 10^12, Range to 2^62)."""
    integers = [t for t in model.graph.initializer if t.data_type == I64]
    if not integers:
        return
    tensor = data.draw(st.sampled_from(integers))
    try:
        array = numpy_helper.to_array(tensor).copy()
    except ValueError:
        return  # an earlier mutation broke it
    if array.size:
        array.reshape(-1)[data.draw(st.integers(0, array.size - 1))] = data.draw(INTS)
    tensor.CopyFrom(_init(tensor.name, array))


def _mutate_versions(model: onnx.ModelProto, data: st.DataObject) -> None:
    if data.draw(st.booleans()):
        model.ir_version = data.draw(st.sampled_from([0, 1, 3, 7, 13, 14, 99]))
    else:
        model.opset_import[0].version = data.draw(st.sampled_from([1, 7, 10, 11, 13, 21, 22, 25, 99]))


def _mutate_structure(model: onnx.ModelProto, data: st.DataObject) -> None:
    graph = model.graph
    choice = data.draw(st.integers(0, 4))
    if not graph.node:
        return
    if choice == 0:
        del graph.output[:]
    elif choice in (1, 2):
        del graph.node[data.draw(st.integers(0, len(graph.node) - 1))]
    else:
        node = data.draw(st.sampled_from(list(graph.node)))
        graph.node.append(node)


MUTATIONS = [
    _mutate_dims, _mutate_attribute, _mutate_op_type, _mutate_names, _mutate_initializer, _mutate_values,
    _mutate_values, _mutate_versions, _mutate_structure,
]


def _input_shape(model: onnx.ModelProto, data: st.DataObject) -> str | None:
    """At times, ATC's `--input_shape` for the first input: its rank, one dim drawn."""
    if not model.graph.input or data.draw(st.integers(0, 3)):
        return None
    first = model.graph.input[0]
    dims = [d.dim_value for d in first.type.tensor_type.shape.dim]
    if dims:
        dims[data.draw(st.integers(0, len(dims) - 1))] = data.draw(INTS)
    return f"{first.name}:" + ",".join(map(str, dims))


@settings(
    max_examples=100,
    deadline=timedelta(seconds=10),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(seed=st.sampled_from(sorted(SEEDS)), data=st.data())
def test_mutated_models_fail_only_with_one_line_errors(seed: str, data: st.DataObject) -> None:
    model = onnx.ModelProto()
    model.ParseFromString(SEEDS[seed])
    for mutate in data.draw(st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=3)):
        mutate(model, data)
    serialized = onnx.ModelProto()
    serialized.ParseFromString(model.SerializeToString())
    try:
        input_shape = _input_shape(model, data)
        module, _ = load_onnx(serialized, input_shape)
        if seed != "tiny_resnet":  # its compile takes seconds: the small seeds compile
            ge.compile(module, {"soc_version": "Ascend310P3"})
    except GEError as e:
        assert "\n" not in str(e), str(e)
