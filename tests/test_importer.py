"""The ONNX importer: op mappings, constants, shapes, ordering, and every error path.

Models are built with onnx.helper. Each import is printed, parsed back and printed
again (the two texts must be equal); numeric checks run the imported graph on the
reference interpreter and the ONNX model on onnxruntime.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp, TensorType

import ge
from dialects import ascend_graph as ag
from dialects.shapes import DYN
from ge.core.errors import ModelError, OptionError
from ge.frontend import load_onnx
from ge.frontend.onnx_ops import CONVERTERS
from ge.core.ir import parse, to_text
from ge.core.weights import WeightStore

F = TensorProto.FLOAT
I64 = TensorProto.INT64
RNG = np.random.default_rng(0)


# --------------------------------------------------------------------------- helpers


def vi(name: str, elem: int, shape: Sequence[int | str | None] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def make(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto | str],
    inits: Sequence[onnx.TensorProto] = (),
    opset: int = 17,
    name: str = "test",
    value_info: Sequence[onnx.ValueInfoProto] = (),
) -> onnx.ModelProto:
    outs = [helper.make_empty_tensor_value_info(o) if isinstance(o, str) else o for o in outputs]
    graph = helper.make_graph(list(nodes), name, list(inputs), outs, initializer=list(inits), value_info=list(value_info))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def imported(model: onnx.ModelProto | str, input_shape=None) -> ModuleOp:
    """Import, and check that printing, parsing and printing again is stable."""
    module, _ = load_onnx(model, input_shape)
    text = to_text(module)
    assert to_text(parse(text)) == text
    return module


def graph_ops(module: ModuleOp) -> list[ag.AscendOp]:
    graph = next(op for op in module.ops if isinstance(op, ag.GraphOp))
    return list(graph.body.block.ops)


def kinds(module: ModuleOp) -> list[str]:
    """The op names of the graph, without data, const and net_output."""
    skip = (ag.DataOp, ag.ConstOp, ag.NetOutputOp)
    return [op.name.removeprefix("ascend_graph.") for op in graph_ops(module) if not isinstance(op, skip)]


def output_types(module: ModuleOp) -> list[TensorType]:
    return [v.type for v in graph_ops(module)[-1].operands]


def rand(*shape: int, dtype=np.float32, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return RNG.uniform(low, high, shape).astype(dtype)


def check_numerics(
    model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], rtol: float = 1e-5, atol: float = 1e-6,
    input_shape=None,
) -> ModuleOp:
    """The imported graph on the reference interpreter equals onnxruntime on the model."""
    module = imported(model, input_shape)
    ours = ge.reference.run(module, dict(feeds))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = session.run(None, dict(feeds))
    for out, expected in zip(model.graph.output, theirs):
        got = ours[out.name]
        assert got.dtype == expected.dtype, out.name
        assert got.shape == expected.shape, out.name
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=out.name)
    return module


def assert_model_error(model: onnx.ModelProto | str, *fragments: str, input_shape=None) -> str:
    """The import fails with one line of ModelError naming every fragment."""
    with pytest.raises(ModelError) as info:
        load_onnx(model, input_shape)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def unary_model(op_type: str, shape=(2, 3, 4), opset: int = 17, elem: int = F, **attrs) -> onnx.ModelProto:
    node = helper.make_node(op_type, ["x"], ["y"], name="n", **attrs)
    return make([node], [vi("x", elem, shape)], ["y"], opset=opset)


# ------------------------------------------------------------------ elementwise ops

UNARY = {
    "Neg": "neg", "Abs": "abs", "Sign": "sign", "Relu": "relu", "Exp": "exp", "Erf": "erf", "Tanh": "tanh",
    "Sigmoid": "sigmoid", "Sin": "sin", "Cos": "cos", "Floor": "floor", "Ceil": "ceil", "Round": "round",
    "Softplus": "softplus", "Softsign": "softsign", "HardSwish": "hard_swish", "Reciprocal": "reciprocal",
}


@pytest.mark.parametrize("op_type", sorted(UNARY))
def test_unary(op_type):
    module = check_numerics(unary_model(op_type), {"x": rand(2, 3, 4)}, rtol=1e-5, atol=1e-6)
    assert kinds(module) == [UNARY[op_type]]
    assert graph_ops(module)[1].properties["name"].data == "n"


@pytest.mark.parametrize("op_type", ["Sqrt", "Log"])
def test_unary_positive(op_type):
    module = check_numerics(unary_model(op_type), {"x": rand(2, 3, 4, low=0.1)})
    assert kinds(module) == [op_type.lower()]


BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "PRelu": "prelu"}


@pytest.mark.parametrize("op_type", sorted(BINARY))
def test_binary_broadcast(op_type):
    node = helper.make_node(op_type, ["a", "b"], ["y"])
    model = make([node], [vi("a", F, [2, 3, 4]), vi("b", F, [3, 1])], ["y"])
    module = check_numerics(model, {"a": rand(2, 3, 4), "b": rand(3, 1, low=0.5)})
    assert kinds(module) == [BINARY[op_type]]
    assert output_types(module)[0].get_shape() == (2, 3, 4)


def test_pow_casts_an_integer_exponent_to_the_base_type():
    exponent = init("e", np.array(3, np.int64))
    model = make([helper.make_node("Pow", ["x", "e"], ["y"])], [vi("x", F, [4])], ["y"], [exponent])
    module = check_numerics(model, {"x": rand(4)})
    assert kinds(module) == ["pow"]  # the cast of a constant exponent is folded


COMPARE = {"Equal": "equal", "Less": "less", "LessOrEqual": "less_equal", "Greater": "greater",
           "GreaterOrEqual": "greater_equal"}


@pytest.mark.parametrize("op_type", sorted(COMPARE))
def test_comparison(op_type):
    model = make([helper.make_node(op_type, ["a", "b"], ["y"])], [vi("a", I64, [6]), vi("b", I64, [6])], ["y"])
    feeds = {"a": np.array([1, 2, 3, 4, 5, 6]), "b": np.array([6, 2, 4, 4, 1, 7])}
    module = check_numerics(model, feeds)
    assert kinds(module) == [COMPARE[op_type]]
    assert output_types(module)[0].element_type == ag.i1


@pytest.mark.parametrize("op_type", ["And", "Or", "Xor"])
def test_logical(op_type):
    b = TensorProto.BOOL
    nodes = [helper.make_node(op_type, ["a", "b"], ["t"]), helper.make_node("Not", ["t"], ["y"])]
    model = make(nodes, [vi("a", b, [4]), vi("b", b, [4])], ["y"])
    module = check_numerics(model, {"a": np.array([0, 0, 1, 1], bool), "b": np.array([0, 1, 0, 1], bool)})
    assert kinds(module) == [f"logical_{op_type.lower()}", "logical_not"]


@pytest.mark.parametrize("op_type,dialect", [("Max", "maximum"), ("Min", "minimum"), ("Sum", "add")])
def test_variadic_ops_become_chains(op_type, dialect):
    node = helper.make_node(op_type, ["a", "b", "c"], ["y"], name="v")
    model = make([node], [vi(k, F, [2, 3]) for k in "abc"], ["y"])
    module = check_numerics(model, {k: rand(2, 3) for k in "abc"})
    assert kinds(module) == [dialect, dialect]
    names = [op.properties["name"].data for op in graph_ops(module) if op.name.endswith(dialect)]
    assert names == [f"v/{dialect}_1", "v"]


def test_mean_divides_the_sum():
    model = make([helper.make_node("Mean", ["a", "b", "c"], ["y"])], [vi(k, F, [5]) for k in "abc"], ["y"])
    module = check_numerics(model, {k: rand(5) for k in "abc"})
    assert kinds(module) == ["add", "add", "div"]


@pytest.mark.parametrize("op_type", ["Max", "Sum", "Mean"])
def test_variadic_with_one_input_is_identity(op_type):
    model = make([helper.make_node(op_type, ["a"], ["y"])], [vi("a", F, [5])], ["y"])
    assert kinds(check_numerics(model, {"a": rand(5)})) == ["identity"]


ACTIVATIONS = [
    ("LeakyRelu", {"alpha": 0.2}, ["leaky_relu"], 17),
    ("Elu", {"alpha": 0.7}, ["elu"], 17),
    ("Selu", {}, ["selu"], 17),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, ["hard_sigmoid"], 17),
    ("Celu", {"alpha": 1.5}, ["div", "elu", "mul"], 17),
    ("Mish", {}, ["softplus", "tanh", "mul"], 18),
    ("Gelu", {}, ["gelu"], 20),
    ("Gelu", {"approximate": "tanh"}, ["gelu"], 20),
]


@pytest.mark.parametrize("op_type,attrs,expected,opset", ACTIVATIONS)
def test_activations(op_type, attrs, expected, opset):
    model = unary_model(op_type, opset=opset, **attrs)
    module = check_numerics(model, {"x": rand(2, 3, 4)}, rtol=1e-5, atol=1e-6)
    assert kinds(module) == expected


def test_decomposition_names_derive_from_the_node():
    module = imported(unary_model("Mish", opset=18))
    names = [op.properties["name"].data for op in graph_ops(module) if isinstance(op, ag.AscendOp) and "name" in op.properties]
    assert names[-3:] == ["n/softplus", "n/tanh", "n"]


@pytest.mark.parametrize("bounds", [("lo", "hi"), ("lo", ""), ("", "hi"), ()])
def test_clip(bounds):
    inits = [init("lo", np.array(-0.5, np.float32)), init("hi", np.array(0.75, np.float32))]
    model = make([helper.make_node("Clip", ["x", *bounds], ["y"])], [vi("x", F, [10])], ["y"], inits)
    module = check_numerics(model, {"x": rand(10)})
    clip = next(op for op in graph_ops(module) if isinstance(op, ag.ClipByValueOp))
    assert ("min" in clip.properties) == ("lo" in bounds)
    assert ("max" in clip.properties) == ("hi" in bounds)


def test_cast_castlike_where():
    nodes = [
        helper.make_node("Cast", ["x"], ["i"], to=TensorProto.INT32),
        helper.make_node("CastLike", ["i", "like"], ["f"]),
        helper.make_node("Greater", ["x", "zero"], ["m"]),
        helper.make_node("Where", ["m", "x", "f"], ["y"]),
    ]
    inits = [init("like", np.zeros(1, np.float32)), init("zero", np.array(0.0, np.float32))]
    model = make(nodes, [vi("x", F, [3, 4])], ["y"], inits)
    module = check_numerics(model, {"x": rand(3, 4, low=-5, high=5)})
    assert kinds(module) == ["cast", "cast", "greater", "select"]


@pytest.mark.parametrize("to,elem", [(TensorProto.FLOAT16, "f16"), (TensorProto.BFLOAT16, "bf16"),
                                     (TensorProto.UINT8, "ui8"), (TensorProto.INT8, "i8"), (TensorProto.BOOL, "i1"),
                                     (TensorProto.DOUBLE, "f64"), (TensorProto.UINT64, "ui64")])
def test_element_types(to, elem):
    module = imported(unary_model("Cast", to=to))
    assert str(output_types(module)[0].element_type) == elem


def test_dropout_in_inference_is_identity():
    ratio = init("r", np.array(0.5, np.float32))
    model = make([helper.make_node("Dropout", ["x", "r"], ["y"])], [vi("x", F, [4])], ["y"], [ratio])
    assert kinds(check_numerics(model, {"x": rand(4)})) == ["identity"]


def test_dropout_in_training_mode_is_refused():
    inits = [init("r", np.array(0.5, np.float32)), init("t", np.array(True))]
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y"], name="d")
    assert_model_error(make([node], [vi("x", F, [4])], ["y"], inits), "node 'd' (Dropout)", "training_mode")


def test_dropout_mask_in_inference_is_all_true():
    node = helper.make_node("Dropout", ["x"], ["y", "mask"])
    module = check_numerics(make([node], [vi("x", F, [8, 10])], ["y", "mask"]), {"x": rand(8, 10)})
    assert sorted(kinds(module)) == ["expand_d", "identity"]  # a mask of 80 elements is too large to fold


def test_dropout_training_with_ratio_zero_is_identity():
    inits = [init("r", np.array(0.0, np.float32)), init("t", np.array(True))]
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y"])
    assert kinds(check_numerics(make([node], [vi("x", F, [4])], ["y"], inits), {"x": rand(4)})) == ["identity"]


def test_identity_of_a_constant_is_that_constant():
    weight = init("w", rand(3, 3))
    nodes = [helper.make_node("Identity", ["w"], ["w2"]), helper.make_node("MatMul", ["x", "w2"], ["y"])]
    module = imported(make(nodes, [vi("x", F, [2, 3])], ["y"], [weight]))
    assert kinds(module) == ["matmul_v2"]


# ------------------------------------------------------------------------ reductions


@pytest.mark.parametrize("op_type", ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
                                     "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("opset", [13, 18])
def test_reductions(op_type, keepdims, opset):
    axes = [0, -1]
    axes_from_input = opset >= 18 or op_type == "ReduceSum"
    inputs = ["x", "axes"] if axes_from_input else ["x"]
    attrs = {} if axes_from_input else {"axes": axes}
    node = helper.make_node(op_type, inputs, ["y"], keepdims=keepdims, **attrs)
    inits = [init("axes", np.array(axes, np.int64))] if axes_from_input else []
    model = make([node], [vi("x", F, [3, 4, 5])], ["y"], inits, opset=opset)
    module = check_numerics(model, {"x": rand(3, 4, 5, low=0.1, high=1.5)}, rtol=1e-5)
    assert output_types(module)[0].get_shape() == ((1, 4, 1) if keepdims else (4,))


@pytest.mark.parametrize("op_type", ["ReduceSum", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"])
def test_reduce_noop_with_empty_axes(op_type):
    node = helper.make_node(op_type, ["x"], ["y"], noop_with_empty_axes=1)
    model = make([node], [vi("x", F, [3, 4])], ["y"], opset=18)
    module = check_numerics(model, {"x": rand(3, 4, low=0.1)})
    assert not any(k.startswith("reduce") for k in kinds(module))


def test_reduce_without_axes_reduces_everything():
    model = make([helper.make_node("ReduceMean", ["x"], ["y"], keepdims=0)], [vi("x", F, [3, 4])], ["y"], opset=18)
    module = check_numerics(model, {"x": rand(3, 4)})
    assert output_types(module)[0].get_shape() == ()


@pytest.mark.parametrize("op_type", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("keepdims,last", [(0, 0), (1, 1)])
def test_arg_reductions(op_type, keepdims, last):
    node = helper.make_node(op_type, ["x"], ["y"], axis=1, keepdims=keepdims, select_last_index=last)
    model = make([node], [vi("x", F, [3, 4])], ["y"])
    x = np.array([[1, 3, 3, 0], [2, 2, 1, 1], [0, 5, 5, 5]], np.float32)
    assert kinds(check_numerics(model, {"x": x})) == [f"arg_{op_type[3:].lower()}"]


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset,axis", [(11, 1), (11, -2), (13, 1), (13, -1)])
def test_softmax_axes_per_opset(op_type, opset, axis):
    model = make([helper.make_node(op_type, ["x"], ["y"], axis=axis)], [vi("x", F, [2, 3, 4])], ["y"], opset=opset)
    module = check_numerics(model, {"x": rand(2, 3, 4)})
    softmax = graph_ops(module)[1]
    expected = list(range(axis % 3, 3)) if opset < 13 else [axis]
    assert list(softmax.properties["axes"].get_values()) == expected


# ----------------------------------------------------------------------- normalisation


def test_batch_norm():
    c = 4
    inits = [init("s", rand(c)), init("b", rand(c)), init("m", rand(c)), init("v", rand(c, low=0.5))]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)
    module = check_numerics(make([node], [vi("x", F, [2, c, 3, 3])], ["y"], inits), {"x": rand(2, c, 3, 3)})
    assert kinds(module) == ["batch_norm"]


def test_batch_norm_training_is_refused():
    inits = [init(k, rand(4)) for k in "sbmv"]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1, name="bn")
    model = make([node], [vi("x", F, [2, 4, 3, 3])], ["y"], inits, opset=15)
    assert_model_error(model, "node 'bn' (BatchNormalization)", "training_mode=1")


def test_layer_norm_and_instance_norm():
    nodes = [
        helper.make_node("LayerNormalization", ["x", "g", "b"], ["l"], axis=-1, epsilon=1e-5),
        helper.make_node("InstanceNormalization", ["l", "s", "t"], ["y"], epsilon=1e-5),
    ]
    inits = [init("g", rand(5)), init("b", rand(5)), init("s", rand(3)), init("t", rand(3))]
    module = check_numerics(make(nodes, [vi("x", F, [2, 3, 5])], ["y"], inits), {"x": rand(2, 3, 5)}, rtol=1e-4, atol=1e-5)
    assert kinds(module) == ["layer_norm", "instance_norm"]


@pytest.mark.parametrize("axis, params", [(-1, (5,)), (1, (3, 5))])
def test_layer_norm_statistics_outputs_match_onnxruntime(axis, params):
    node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y", "mean", "inv"], name="ln", axis=axis)
    model = make([node], [vi("x", F, [2, 3, 5])], ["y", "mean", "inv"], [init("g", rand(*params)), init("b", rand(*params))])
    check_numerics(model, {"x": rand(2, 3, 5)})


# ------------------------------------------------------------------------ convolution


@pytest.mark.parametrize("attrs", [
    {"pads": [1, 1, 1, 1]},
    {"pads": [0, 1, 2, 0], "strides": [2, 1]},
    {"dilations": [2, 2], "pads": [2, 2, 2, 2]},
    {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
    {"auto_pad": "SAME_LOWER", "strides": [2, 2]},
    {"auto_pad": "VALID"},
    {"group": 2, "pads": [1, 1, 1, 1]},
])
def test_conv2d(attrs):
    groups = attrs.get("group", 1)
    inits = [init("w", rand(6, 4 // groups, 3, 3)), init("b", rand(6))]
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], **attrs)
    module = check_numerics(make([node], [vi("x", F, [1, 4, 9, 8])], ["y"], inits), {"x": rand(1, 4, 9, 8)},
                            rtol=1e-4, atol=1e-5)
    conv = next(op for op in graph_ops(module) if isinstance(op, ag.Conv2DOp))
    assert len(conv.props.ints("strides")) == 4 and len(conv.props.ints("dilations")) == 4


def test_conv_pads_are_top_bottom_left_right():
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 2, 3, 4])  # h_begin, w_begin, h_end, w_end
    module = imported(make([node], [vi("x", F, [1, 1, 5, 5])], ["y"], [init("w", rand(1, 1, 3, 3))]))
    conv = next(op for op in graph_ops(module) if isinstance(op, ag.Conv2DOp))
    assert conv.props.ints("pads") == (1, 3, 2, 4)


def test_conv1d_runs_as_conv2d_of_height_one():
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 2], strides=[2], name="c1")
    inits = [init("w", rand(8, 3, 4)), init("b", rand(8))]  # a filter too large to fold its unsqueeze
    module = check_numerics(make([node], [vi("x", F, [2, 3, 11])], ["y"], inits), {"x": rand(2, 3, 11)}, rtol=1e-4)
    assert kinds(module) == ["unsqueeze", "unsqueeze", "conv2d", "squeeze"]
    assert [op.properties["name"].data for op in graph_ops(module) if isinstance(op, ag.SqueezeOp)] == ["c1"]


def test_conv4d_is_refused():
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="c4")
    model = make([node], [vi("x", F, [1, 1, 4, 4, 4, 4])], ["y"], [init("w", rand(1, 1, 2, 2, 2, 2))])
    assert_model_error(model, "node 'c4' (Conv)", "only 1-D, 2-D and 3-D")


def test_matmul_and_gemm():
    nodes = [
        helper.make_node("MatMul", ["a", "w"], ["m"]),
        helper.make_node("Gemm", ["m", "g", "c"], ["y"], transB=1, alpha=0.5, beta=2.0),
        helper.make_node("MatMul", ["b3", "w"], ["z"]),
    ]
    inits = [init("w", rand(4, 5)), init("g", rand(6, 5)), init("c", rand(6))]
    model = make(nodes, [vi("a", F, [3, 4]), vi("b3", F, [2, 3, 4])], ["y", "z"], inits)
    module = check_numerics(model, {"a": rand(3, 4), "b3": rand(2, 3, 4)}, rtol=1e-5)
    assert kinds(module) == ["matmul_v2", "gemm", "batch_matmul"]


# ----------------------------------------------------------------------------- pooling


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [2, 3], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
])
def test_pool2d(op_type, attrs):
    if op_type == "MaxPool":
        attrs = {k: v for k, v in attrs.items() if k != "count_include_pad"}
    node = helper.make_node(op_type, ["x"], ["y"], **attrs)
    module = check_numerics(make([node], [vi("x", F, [1, 2, 7, 8])], ["y"]), {"x": rand(1, 2, 7, 8)})
    assert kinds(module) == ["max_pool" if op_type == "MaxPool" else "avg_pool"]


def test_pool1d_and_global_pools():
    nodes = [
        helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3], strides=[2], pads=[1, 1]),
        helper.make_node("GlobalAveragePool", ["p"], ["y"]),
        helper.make_node("GlobalMaxPool", ["x"], ["z"]),
    ]
    module = check_numerics(make(nodes, [vi("x", F, [2, 3, 10])], ["y", "z"]), {"x": rand(2, 3, 10)})
    assert kinds(module) == ["unsqueeze", "max_pool", "squeeze", "global_average_pool", "global_max_pool"]


def test_max_pool_indices_of_a_4d_window_are_refused():
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2, 2, 2], name="mp")
    model = make([node], [vi("x", F, [1, 1, 4, 4, 4, 4])], ["y", "i"])
    assert_model_error(model, "node 'mp' (MaxPool)", "kernel_shape [2, 2, 2, 2] must be 1-D to 3-D")


# --------------------------------------------------------------------------- shape ops


def test_reshape_resolves_zero_and_minus_one():
    node = helper.make_node("Reshape", ["x", "s"], ["y"])
    model = make([node], [vi("x", F, [2, 3, 4])], ["y"], [init("s", np.array([0, -1], np.int64))])
    module = check_numerics(model, {"x": rand(2, 3, 4)})
    assert graph_ops(module)[1].props.ints("shape") == (2, -1)
    assert output_types(module)[0].get_shape() == (2, 12)


def test_reshape_with_a_computed_shape_is_refused():
    node = helper.make_node("Reshape", ["x", "s"], ["y"], name="r")
    model = make([node], [vi("x", F, [2, 3]), vi("s", I64, [2])], ["y"])
    assert_model_error(model, "node 'r' (Reshape)", "input 1 (shape, 's') must be a constant")


def test_shape_subgraph_is_folded():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape: one reshape remains."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    inits = [init("zero", np.array(0, np.int64)), init("ax", np.array([0], np.int64)),
             init("minus1", np.array([-1], np.int64))]
    module = check_numerics(make(nodes, [vi("x", F, [2, 3, 4])], ["y"], inits), {"x": rand(2, 3, 4)})
    assert kinds(module) == ["reshape"]
    assert not any(isinstance(op, ag.ConstOp) for op in graph_ops(module))


def test_flatten_transpose_squeeze_unsqueeze():
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"]),
        helper.make_node("Unsqueeze", ["t", "ax"], ["u"]),
        helper.make_node("Squeeze", ["u", "ax"], ["s"]),
        helper.make_node("Flatten", ["s"], ["y"], axis=2),
    ]
    model = make(nodes, [vi("x", F, [2, 3, 4])], ["y"], [init("ax", np.array([1], np.int64))], opset=13)
    module = check_numerics(model, {"x": rand(2, 3, 4)})
    assert kinds(module) == ["transpose_d", "unsqueeze", "squeeze", "flatten"]
    assert graph_ops(module)[1].props.ints("perm") == (2, 1, 0)


def test_squeeze_unsqueeze_axes_attribute_before_opset_13():
    nodes = [helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0, 3]), helper.make_node("Squeeze", ["u"], ["y"])]
    module = check_numerics(make(nodes, [vi("x", F, [2, 3])], ["y"], opset=11), {"x": rand(2, 3)})
    assert output_types(module)[0].get_shape() == (2, 3)


@pytest.mark.parametrize("sizes,expected", [(None, "split_d"), ([1, 3, 2], "split_v_d")])
def test_split(sizes, expected):
    inputs = ["x", "sp"] if sizes else ["x"]
    inits = [init("sp", np.array(sizes, np.int64))] if sizes else []
    node = helper.make_node("Split", inputs, ["a", "b", "c"], axis=1)
    module = check_numerics(make([node], [vi("x", F, [2, 6])], ["a", "b", "c"], inits, opset=13), {"x": rand(2, 6)})
    assert kinds(module) == [expected]


def test_split_num_outputs_uneven():
    node = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=0, num_outputs=3)
    module = check_numerics(make([node], [vi("x", F, [7, 2])], ["a", "b", "c"], opset=18), {"x": rand(7, 2)})
    split = graph_ops(module)[1]
    assert split.props.ints("size_splits") == (3, 3, 1)


def test_concat():
    node = helper.make_node("Concat", ["a", "b"], ["y"], axis=-1)
    module = check_numerics(make([node], [vi("a", F, [2, 3]), vi("b", F, [2, 5])], ["y"]), {"a": rand(2, 3), "b": rand(2, 5)})
    assert output_types(module)[0].get_shape() == (2, 8)


SLICES = [
    ([1, 0], [3, 10], None, None),
    ([-3], [-1], [1], None),
    ([10], [-100], [1], [-1]),
    ([-1, 0], [-1000, 100], [0, 1], [-2, 3]),
    ([2], [2**63 - 1], [-1], [1]),
    ([0], [-(2**63)], [0], [-1]),
    ([5], [1], [0], [1]),
]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICES)
def test_slice_clamps_as_onnx(starts, ends, axes, steps):
    names = ["x", "starts", "ends"]
    inits = [init("starts", np.array(starts, np.int64)), init("ends", np.array(ends, np.int64))]
    if axes is not None or steps is not None:
        names.append("axes" if axes is not None else "")
        if axes is not None:
            inits.append(init("axes", np.array(axes, np.int64)))
    if steps is not None:
        names.append("steps")
        inits.append(init("steps", np.array(steps, np.int64)))
    model = make([helper.make_node("Slice", names, ["y"])], [vi("x", F, [5, 6])], ["y"], inits)
    assert kinds(check_numerics(model, {"x": rand(5, 6)})) == ["strided_slice_d"]


def test_gather_and_gather_elements():
    nodes = [
        helper.make_node("Gather", ["x", "i"], ["g"], axis=1),
        helper.make_node("GatherElements", ["x", "j"], ["e"], axis=0),
    ]
    inits = [init("i", np.array([[0, 2], [-1, 1]], np.int64)), init("j", np.array([[1, 0, 2, 0]], np.int64))]
    module = check_numerics(make(nodes, [vi("x", F, [3, 4])], ["g", "e"], inits), {"x": rand(3, 4)})
    assert kinds(module) == ["gather_v2", "gather_elements"]


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad(mode):
    inits = [init("p", np.array([0, 1, 2, 1, 0, 2], np.int64)), init("v", np.array(1.5, np.float32))]
    inputs = ["x", "p", "v"] if mode == "constant" else ["x", "p"]
    node = helper.make_node("Pad", inputs, ["y"], mode=mode)
    module = check_numerics(make([node], [vi("x", F, [2, 3, 4])], ["y"], inits, opset=13), {"x": rand(2, 3, 4)})
    assert graph_ops(module)[1].props.ints("paddings") == (0, 1, 1, 0, 2, 2)


def test_pad_with_axes():
    inits = [init("p", np.array([1, 2, 3, 4], np.int64)), init("a", np.array([-1, 0], np.int64))]
    node = helper.make_node("Pad", ["x", "p", "", "a"], ["y"])
    module = check_numerics(make([node], [vi("x", F, [2, 3])], ["y"], inits, opset=18), {"x": rand(2, 3)})
    assert output_types(module)[0].get_shape() == (2 + 2 + 4, 3 + 1 + 3)


def test_pad_unknown_mode_is_refused():
    node = helper.make_node("Pad", ["x", "p"], ["y"], mode="circular", name="pw")
    model = make([node], [vi("x", F, [3])], ["y"], [init("p", np.array([1, 1], np.int64))], opset=19)
    assert_model_error(model, "node 'pw' (Pad)", "mode 'circular' is unsupported; supported: constant, reflect, edge, wrap")


RESIZES = [
    ({"mode": "nearest"}, [1, 1, 2, 2], None),
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, [1, 1, 1.5, 2.5], None),
    ({"mode": "linear"}, [1, 1, 0.5, 1.7], None),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, None, [1, 2, 7, 3]),
    ({"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, None, [1, 2, 9, 11]),
    ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, None, [1, 2, 1, 5]),
]


@pytest.mark.parametrize("attrs,scales,sizes", RESIZES)
def test_resize(attrs, scales, sizes):
    inits = [init("scales", np.array(scales, np.float32))] if scales else [init("sizes", np.array(sizes, np.int64))]
    inputs = ["x", "", "scales"] if scales else ["x", "", "", "sizes"]
    model = make([helper.make_node("Resize", inputs, ["y"], **attrs)], [vi("x", F, [1, 2, 4, 6])], ["y"], inits, opset=13)
    module = check_numerics(model, {"x": rand(1, 2, 4, 6)}, rtol=1e-4, atol=1e-5)
    assert kinds(module) == ["resize"]


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
def test_resize_keep_aspect_ratio(policy):
    inits = [init("sizes", np.array([7, 7], np.int64))]
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], axes=[2, 3], keep_aspect_ratio_policy=policy)
    model = make([node], [vi("x", F, [1, 1, 4, 6])], ["y"], inits, opset=18)
    module = check_numerics(model, {"x": rand(1, 1, 4, 6)})
    assert output_types(module)[0].get_shape() == ((1, 1, 5, 7) if policy == "not_larger" else (1, 1, 7, 11))


def test_expand_tile_depth_space():
    nodes = [
        helper.make_node("Expand", ["x", "shape"], ["e"]),
        helper.make_node("Tile", ["e", "reps"], ["t"]),
        helper.make_node("DepthToSpace", ["t"], ["d"], blocksize=2, mode="CRD"),
        helper.make_node("SpaceToDepth", ["d"], ["y"], blocksize=2),
    ]
    inits = [init("shape", np.array([2, 8, 1, 1], np.int64)), init("reps", np.array([1, 1, 2, 3], np.int64))]
    module = check_numerics(make(nodes, [vi("x", F, [8, 1, 1])], ["y"], inits), {"x": rand(8, 1, 1)})
    assert kinds(module) == ["expand_d", "tile_d", "depth_to_space", "space_to_depth"]


# -------------------------------------------------------- shape computations, constants


def test_constant_of_shape_range_eye_like_size():
    nodes = [
        helper.make_node("ConstantOfShape", ["s"], ["c"], value=helper.make_tensor("v", F, [1], [2.5])),
        helper.make_node("Range", ["r0", "r1", "r2"], ["r"]),
        helper.make_node("Cast", ["r"], ["rf"], to=F),
        helper.make_node("Add", ["c", "rf"], ["a"]),
        helper.make_node("EyeLike", ["x"], ["eye"], k=1),
        helper.make_node("Add", ["x", "eye"], ["b"]),
        helper.make_node("Size", ["x"], ["n"]),
    ]
    inits = [init("s", np.array([3, 4], np.int64)), init("r0", np.array(1, np.int64)),
             init("r1", np.array(9, np.int64)), init("r2", np.array(2, np.int64))]
    model = make(nodes, [vi("x", F, [3, 4])], ["a", "b", "n"], inits)
    module = check_numerics(model, {"x": rand(3, 4)})
    assert kinds(module) == ["add"]  # a and n are constants; only x + eye is computed


def test_large_constant_of_shape_broadcasts_a_scalar():
    node = helper.make_node("ConstantOfShape", ["s"], ["y"], value=helper.make_tensor("v", TensorProto.INT32, [1], [7]))
    model = make([node], [], ["y"], [init("s", np.array([16, 16], np.int64))])
    module = check_numerics(model, {})
    assert kinds(module) == ["expand_d"]


@pytest.mark.parametrize("attr,value,dtype", [
    ("value_float", 1.5, np.float32), ("value_floats", [1.0, 2.0], np.float32),
    ("value_int", 3, np.int64), ("value_ints", list(range(100)), np.int64),
])
def test_constant_value_attributes(attr, value, dtype):
    node = helper.make_node("Constant", [], ["y"], **{attr: value})
    module = imported(make([node], [], ["y"]))
    const = graph_ops(module)[0]
    assert isinstance(const.value, DenseIntOrFPElementsAttr)
    np.testing.assert_array_equal(ge.reference.run(module, {})["y"], np.array(value, dtype))


def test_sparse_constant():
    sparse = helper.make_sparse_tensor(
        helper.make_tensor("v", F, [2], [5.0, 6.0]), helper.make_tensor("i", I64, [2], [1, 4]), [2, 3])
    module = imported(make([helper.make_node("Constant", [], ["y"], sparse_value=sparse)], [], ["y"]))
    np.testing.assert_array_equal(ge.reference.run(module, {})["y"], [[0, 5, 0], [0, 6, 0]])


def test_constants_large_in_the_store_small_inline(tmp_path):
    big, small = rand(10, 10), rand(4)
    nodes = [
        helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(rand(8, 10), "k")),
        helper.make_node("MatMul", ["x", "big"], ["m"]),
        helper.make_node("MatMul", ["k", "m"], ["p"]),
        helper.make_node("Add", ["p", "small"], ["y"]),
    ]
    inits = [init("big", big), init("small", np.resize(small, 10))]
    path = tmp_path / "model.onnx"
    onnx.save(make(nodes, [vi("x", F, [10, 10])], ["y"], inits), path)
    module, store = load_onnx(str(path))
    consts = {op.properties["name"].data: op.value for op in graph_ops(module) if isinstance(op, ag.ConstOp)}
    assert isinstance(consts["big"], ag.WeightRefAttr) and consts["big"].weight.data == "big"
    assert isinstance(consts["small"], DenseIntOrFPElementsAttr)
    assert isinstance(consts["Constant_0"], ag.WeightRefAttr) and consts["Constant_0"].weight.data == "k"
    assert store.key == str(path.resolve())
    reloaded = WeightStore.load(store.key)
    for ref in consts.values():
        if isinstance(ref, ag.WeightRefAttr):
            np.testing.assert_array_equal(reloaded.get(ref), store.get(ref))


def test_in_memory_models_have_a_memory_key():
    _, store = load_onnx(unary_model("Relu"))
    assert store.key.startswith("<memory:")


def test_initializer_listed_as_input_is_a_constant():
    model = make([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", F, [3]), vi("w", F, [3])], ["y"],
                 [init("w", rand(3))])
    module = imported(model)
    assert [op.properties["name"].data for op in graph_ops(module) if isinstance(op, ag.DataOp)] == ["x"]


def test_op_without_a_converter_is_folded_on_constants():
    """Exporters compute shapes with ops we have no op for; ONNX's evaluator folds them."""
    nodes = [
        helper.make_node("Mod", ["a", "b"], ["m"]),
        helper.make_node("Concat", ["m", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    inits = [init("a", np.array([7], np.int64)), init("b", np.array([5], np.int64)),
             init("minus1", np.array([-1], np.int64))]
    module = check_numerics(make(nodes, [vi("x", F, [2, 6])], ["y"], inits), {"x": rand(2, 6)})
    assert kinds(module) == ["reshape"]
    assert output_types(module)[0].get_shape() == (2, 6)


def test_op_without_a_converter_on_computed_inputs_is_refused():
    node = helper.make_node("Bernoulli", ["x"], ["y"], name="bernoulli")
    model = make([node], [vi("x", F, [2])], ["y"])
    assert_model_error(model, "node 'bernoulli' (Bernoulli)", "op type Bernoulli is unsupported")


def test_random_ops_are_not_folded():
    node = helper.make_node("RandomNormal", [], ["y"], shape=[2], name="rnd")
    assert_model_error(make([node], [], ["y"]), "node 'rnd' (RandomNormal)", "unsupported")


def test_folding_refuses_large_results():
    from io import BytesIO

    from PIL import Image

    encoded = BytesIO()
    Image.new("RGB", (10, 10), (200, 40, 9)).save(encoded, "BMP")
    node = helper.make_node("ImageDecoder", ["w"], ["y"], name="decode")
    w = init("w", np.frombuffer(encoded.getvalue(), np.uint8))
    assert_model_error(make([node], [], ["y"], [w], opset=20), "node 'decode' (ImageDecoder)", "too large to fold")


def test_input_type_outside_the_schema():
    model = make([helper.make_node("Sqrt", ["x"], ["y"], name="s")], [vi("x", I64, [2])], ["y"])
    assert_model_error(model, "node 's' (Sqrt)", "input 0 ('x') is int64, which Sqrt does not accept", "float")


# ---------------------------------------------------------------- shapes and input_shape


def test_symbolic_dims_are_dynamic():
    model = make([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, ["batch", 3])], ["y"])
    assert output_types(imported(model))[0].get_shape() == (DYN, 3)


@pytest.mark.parametrize("spec,expected", [
    ("x:4,3", (4, 3)),
    ("x:-1,3", (DYN, 3)),
    ("x:1~16,3", (DYN, 3)),
    ({"x": [8, 3]}, (8, 3)),
    ({"x": (-1, 3)}, (DYN, 3)),
])
def test_input_shape(spec, expected):
    model = make([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [2, 3])], [vi("y", F, [2, 3])])
    module = imported(model, input_shape=spec)
    assert graph_ops(module)[0].out.type.get_shape() == expected
    assert output_types(module)[0].get_shape() == expected


def test_input_shape_with_colons_in_the_name():
    model = make([helper.make_node("Relu", ["in:0"], ["y"])], [vi("in:0", F, [2, 3])], ["y"])
    assert output_types(imported(model, input_shape="in:0:5,3"))[0].get_shape() == (5, 3)


@pytest.mark.parametrize("spec,fragment", [
    ("nope:1,3", "the model has no input 'nope'"),
    ("x:1,3,4", "has rank 2, but 3 dims are given"),
    ("x:1;x:2", "given twice"),
    ("x1,3", "is not 'name:d0,d1,...'"),
    ("x:a,3", "dimension 'a'"),
    ("x:0,3", "must be >= 1"),
    ("x:5~2,3", "needs 1 <= lo <= hi"),
    ({"x": [1.5, 3]}, "is not an integer"),
    ({"x": 3}, "not a sequence of dims"),
])
def test_bad_input_shape(spec, fragment):
    model = make([helper.make_node("Add", ["x", "m"], ["y"])], [vi("x", F, [2, 3]), vi("m", F, [2, 3])], ["y"])
    with pytest.raises(OptionError) as info:
        load_onnx(model, spec)
    assert fragment in str(info.value)
    assert "x[2,3], m[2,3]" in str(info.value)


def test_input_without_shape_needs_input_shape():
    model = make([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, None)], ["y"])
    assert_model_error(model, "graph input 'x' has no shape")
    assert output_types(imported(model, "x:2,2"))[0].get_shape() == (2, 2)


def test_mismatched_shapes():
    model = make([helper.make_node("Add", ["a", "b"], ["y"], name="add")], [vi("a", F, [2, 3]), vi("b", F, [4, 5])], ["y"])
    assert_model_error(model, "node 'add' (Add)", "cannot be broadcast")


def test_declared_shape_conflict():
    model = make([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", F, [2, 3])], [vi("y", F, [3, 2])])
    assert_model_error(model, "node 'r' (Relu)", "shape conflict", "[3, 2]", "[2, 3]")


def test_value_info_shape_conflict():
    nodes = [helper.make_node("Relu", ["x"], ["t"], name="r"), helper.make_node("Neg", ["t"], ["y"])]
    model = make(nodes, [vi("x", F, [2, 3])], ["y"], value_info=[vi("t", F, [2, 4])])
    assert_model_error(model, "node 'r' (Relu)", "shape conflict", "'t'")


def test_input_shape_drops_stale_declared_shapes():
    nodes = [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Neg", ["t"], ["y"])]
    model = make(nodes, [vi("x", F, [2, 3])], [vi("y", F, [2, 3])], value_info=[vi("t", F, [2, 3])])
    assert output_types(imported(model, "x:7,3"))[0].get_shape() == (7, 3)


def test_dynamic_shape_stays_a_shape_op():
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="sh")]
    module = imported(make(nodes, [vi("x", F, ["n", 3])], ["s"]))
    assert kinds(module) == ["shape"]
    np.testing.assert_array_equal(ge.reference.run(module, {"x": rand(2, 3)})["s"], [2, 3])


def test_shape_of_static_dims_of_a_dynamic_tensor():
    node = helper.make_node("Shape", ["x"], ["s"], start=1)
    module = imported(make([node], [vi("x", F, ["n", 3, 5])], ["s"], opset=15))
    np.testing.assert_array_equal(ge.reference.run(module, {"x": rand(2, 3, 5)})["s"], [3, 5])


# ----------------------------------------------------------------- graph structure


def test_unsorted_nodes_are_sorted():
    nodes = [helper.make_node("Neg", ["t"], ["y"]), helper.make_node("Relu", ["x"], ["t"])]
    module = check_numerics(make(nodes, [vi("x", F, [4])], ["y"]), {"x": rand(4)})
    assert kinds(module) == ["relu", "neg"]


def test_node_names_default_to_type_and_index():
    nodes = [helper.make_node("Neg", ["t"], ["y"]), helper.make_node("Relu", ["x"], ["t"], name="r")]
    module = imported(make(nodes, [vi("x", F, [4])], ["y"]))
    assert [op.properties["name"].data for op in graph_ops(module)[1:-1]] == ["r", "Neg_0"]


def test_output_names_and_graph_name():
    nodes = [helper.make_node("Relu", ["x"], ["out one"])]
    module = imported(make(nodes, [vi("x", F, [4])], ["out one", "x"], name="my graph!"))
    graph = next(iter(module.ops))
    assert graph.sym_name.data == "my_graph_"
    assert [n.data for n in graph_ops(module)[-1].names] == ["out one", "x"]


def test_cycle_is_refused():
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="first"),
        helper.make_node("Relu", ["a"], ["b"], name="second"),
    ]
    assert_model_error(make(nodes, [vi("x", F, [4])], ["b"]), "the graph has a cycle", "'first'", "'second'")


def test_undefined_input_is_refused():
    model = make([helper.make_node("Relu", ["ghost"], ["y"], name="r")], [vi("x", F, [4])], ["y"])
    assert_model_error(model, "node 'r' (Relu)", "input 'ghost' is not produced")


def test_value_defined_twice_is_refused():
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"], name="again")]
    assert_model_error(make(nodes, [vi("x", F, [4])], ["y"]), "node 'again' (Neg)", "already defined")


def test_dead_nodes_are_not_imported():
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("NoSuchOp", ["x"], ["dead"])]
    assert kinds(imported(make(nodes, [vi("x", F, [4])], ["y"]))) == ["relu"]


# ------------------------------------------------------------------------ bad models


def test_unknown_op():
    model = make([helper.make_node("FancyOp", ["x"], ["y"], name="f")], [vi("x", F, [4])], ["y"])
    assert_model_error(model, "node 'f' (FancyOp)", "unsupported")


def test_known_but_unconverted_op():
    model = make([helper.make_node("Multinomial", ["x"], ["y"], name="multinomial")], [vi("x", F, [1, 3])], ["y"])
    assert_model_error(model, "node 'multinomial' (Multinomial)", "op type Multinomial is unsupported")


def test_custom_domain():
    node = helper.make_node("Gelu", ["x"], ["y"], name="g", domain="com.microsoft")
    model = make([node], [vi("x", F, [4])], ["y"])
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    assert_model_error(model, "node 'g' (Gelu)", "domain 'com.microsoft' is unsupported", "11 to 21")


def test_ml_domain_only():
    model = make([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [4])], ["y"])
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("ai.onnx.ml", 3))
    assert_model_error(model, "no opset of the default ONNX domain", "ai.onnx.ml", "11 to 21")


@pytest.mark.parametrize("opset", [6, 99])
def test_opset_out_of_range(opset):
    model = make([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [4])], ["y"], opset=opset)
    assert_model_error(model, f"default-domain opset {opset} is unsupported", "11 to 21")


def test_newer_opset_accepted_per_op():
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Reshape", ["r", "s"], ["y"])]
    model = make(nodes, [vi("x", F, [2, 3])], ["y"], [init("s", np.array([-1], np.int64))], opset=24)
    assert kinds(imported(model)) == ["relu", "reshape"]


def test_newer_schema_than_reviewed_is_refused(monkeypatch):
    from ge.frontend import onnx_ops

    monkeypatch.setitem(onnx_ops.CONVERTERS, "Relu", onnx_ops.Converter(CONVERTERS["Relu"].fn, 13))
    model = make([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", F, [2])], ["y"], opset=14)
    assert_model_error(model, "node 'r' (Relu)", "Relu-14", "supported up to Relu-13")


def test_op_missing_from_the_opset():
    model = make([helper.make_node("Gelu", ["x"], ["y"], name="g")], [vi("x", F, [2])], ["y"], opset=17)
    assert_model_error(model, "node 'g' (Gelu)", "does not exist in opset 17")


@pytest.mark.parametrize("elem,label", [(TensorProto.STRING, "STRING"), (TensorProto.COMPLEX64, "COMPLEX64"),
                                        (TensorProto.FLOAT8E4M3FN, "FLOAT8E4M3FN")])
def test_unsupported_input_dtype(elem, label):
    model = make([helper.make_node("Identity", ["x"], ["y"])], [vi("x", elem, [2])], ["y"])
    assert_model_error(model, "graph input 'x'", label, "unsupported")


def test_unsupported_initializer_dtype():
    weight = helper.make_tensor("w", TensorProto.FLOAT8E5M2, [2], [1.0, 2.0])
    model = make([helper.make_node("Cast", ["w"], ["y"], to=F, name="c")], [], ["y"], [weight], opset=19)
    assert_model_error(model, "node 'c' (Cast)", "initializer 'w'", "FLOAT8E5M2")


def test_unsupported_cast_target():
    model = make([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.STRING, name="c")], [vi("x", F, [2])], ["y"])
    assert_model_error(model, "node 'c' (Cast)", "STRING")


def test_wrong_input_count():
    model = make([helper.make_node("Relu", ["x", "x"], ["y"], name="r")], [vi("x", F, [2])], ["y"])
    assert_model_error(model, "node 'r' (Relu)", "has 2 inputs, needs 1 to 1")


def test_missing_required_attribute():
    model = make([helper.make_node("Concat", ["x", "x"], ["y"], name="c")], [vi("x", F, [2])], ["y"])
    assert_model_error(model, "node 'c' (Concat)", "required attribute 'axis'")


def test_graph_output_undefined():
    model = make([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [2])], ["z"])
    assert_model_error(model, "graph output 'z' is not produced")


@pytest.fixture
def saved_model(tmp_path):
    weight = init("w", rand(16, 16))
    model = make([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", F, [2, 16])], ["y"], [weight])
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    return path


def test_missing_file(tmp_path):
    assert_model_error(str(tmp_path / "absent.onnx"), "cannot read the model file")


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9, 0.99])
def test_truncated_file(saved_model, fraction):
    data = saved_model.read_bytes()
    saved_model.write_bytes(data[: int(len(data) * fraction)])
    assert_model_error(str(saved_model))


@pytest.mark.parametrize("seed", range(5))
def test_random_bytes(tmp_path, seed):
    path = tmp_path / "random.onnx"
    path.write_bytes(np.random.default_rng(seed).bytes(4096))
    assert_model_error(str(path))


def test_empty_file(tmp_path):
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    assert_model_error(str(path), "has no graph")


def test_name_that_is_not_utf8(tmp_path):
    model = make([helper.make_node("Relu", ["\u00e9"], ["y"])], [vi("\u00e9", F, [2])], ["y"])
    path = tmp_path / "latin.onnx"
    path.write_bytes(model.SerializeToString().replace(b"\xc3\xa9", b"\xc3\x28"))
    assert_model_error(str(path), "not valid UTF-8")


def _mutations(data: bytes, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    mutated = bytearray(data)
    for _ in range(rng.integers(1, 4)):
        mutated[rng.integers(0, len(mutated))] = rng.integers(0, 256)
    return bytes(mutated)


def test_mutated_models_fail_only_with_model_errors():
    """A corrupt but parseable model either imports or raises a one-line GEError."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Shape", ["p"], ["s"]),
        helper.make_node("Gather", ["s", "ax"], ["n"], axis=0),
        helper.make_node("Reshape", ["p", "shp"], ["r"]),
        helper.make_node("Slice", ["r", "st", "en"], ["q"]),
        helper.make_node("Split", ["q"], ["q1", "q2"], axis=1),
        helper.make_node("Resize", ["x", "", "sc"], ["z"], mode="linear"),
    ]
    inits = [init("w", rand(4, 3, 3, 3)), init("ax", np.array([0], np.int64)), init("shp", np.array([0, -1], np.int64)),
             init("st", np.array([0, 1], np.int64)), init("en", np.array([2, -1], np.int64)),
             init("sc", np.array([1, 1, 2, 2], np.float32))]
    data = make(nodes, [vi("x", F, ["N", 3, 8, 8])], ["q1", "q2", "z", "n"], inits, opset=13).SerializeToString()
    outcomes = {"imported": 0, "refused": 0}
    for seed in range(300):
        model = onnx.ModelProto()
        try:
            model.ParseFromString(_mutations(data, seed))
        except Exception:
            continue
        try:
            load_onnx(model, "x:2,3,8,8" if seed % 2 else None)
            outcomes["imported"] += 1
        except ge.GEError as e:
            assert "\n" not in str(e)
            outcomes["refused"] += 1
    assert outcomes["imported"] and outcomes["refused"]


def test_random_nodes_fail_only_with_model_errors():
    """Every converter, given random inputs and attributes, imports or refuses cleanly."""
    rng = np.random.default_rng(0)
    attrs = {"axis": [0, -1, 5], "axes": [[0], [1, -1], [9]], "keepdims": [0, 1], "perm": [[1, 0], [0, 0]],
             "kernel_shape": [[2, 2], [3]], "pads": [[1, 1, 1, 1], [-1, 0, 0, 0]], "strides": [[1, 1], [0, 1]],
             "to": [1, 7, 0, 99], "blocksize": [2, 0], "split": [[1, 1]], "mode": ["constant", "linear", "bogus"],
             "group": [2, 0], "auto_pad": ["SAME_UPPER", "X"], "start": [-1, 5], "dilations": [[0, 1]],
             "num_outputs": [2, 3]}
    elems = [F, I64, TensorProto.BOOL]
    for trial in range(600):
        inputs, infos, inits = [], [], []
        for i in range(int(rng.integers(0, 5))):
            shape = [int(d) for d in rng.integers(1, 5, size=int(rng.integers(0, 5)))]
            elem, kind = elems[int(rng.integers(0, 3))], int(rng.integers(0, 3))
            inputs.append(f"i{i}" if kind < 2 else "")
            if kind == 0:
                infos.append(vi(f"i{i}", elem, shape))
            elif kind == 1:
                values = rng.integers(-3, 5, size=shape).astype(helper.tensor_dtype_to_np_dtype(elem))
                inits.append(init(f"i{i}", values))
        chosen = rng.choice(sorted(attrs), size=int(rng.integers(0, 4)), replace=False)
        node_attrs = {k: attrs[k][int(rng.integers(0, len(attrs[k])))] for k in chosen}
        outputs = [f"o{j}" for j in range(int(rng.integers(1, 3)))]
        op_type = sorted(CONVERTERS)[int(rng.integers(0, len(CONVERTERS)))]
        node = helper.make_node(op_type, inputs, outputs, **node_attrs)
        model = make([node], infos, outputs, inits, opset=int(rng.choice([11, 13, 18, 21])))
        try:
            load_onnx(model)
        except ge.GEError as e:
            assert "\n" not in str(e) and "cannot import it" not in str(e), (op_type, str(e))


def _external_model(tmp_path, location: str) -> str:
    weight = init("w", rand(16, 16))
    model = make([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", F, [2, 16])], ["y"], [weight])
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin",
              size_threshold=0)
    model = onnx.load(path, load_external_data=False)
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = location
    onnx.save(model, path)
    return str(path)


def test_external_data_inside_the_folder(tmp_path):
    path = _external_model(tmp_path, "w.bin")
    module = check_numerics(onnx.load(path), {"x": rand(2, 16)})
    assert kinds(module) == ["matmul_v2"]
    _, store = load_onnx(path)
    assert "w" in store


@pytest.mark.parametrize("location", ["../w.bin", "../sub/../../w.bin", "/etc/passwd"])
def test_external_data_outside_the_folder_is_refused(tmp_path, location):
    path = _external_model(tmp_path, location)
    (tmp_path / "w.bin").write_bytes((tmp_path / "sub" / "w.bin").read_bytes())
    assert_model_error(path, "tensor 'w'", f"'{location}'", "outside the model's directory")


def test_external_data_missing_file(tmp_path):
    path = _external_model(tmp_path, "nowhere.bin")
    assert_model_error(path, "tensor 'w'", "does not exist")


def test_external_data_of_an_in_memory_model_is_refused(tmp_path):
    model = onnx.load(_external_model(tmp_path, "w.bin"), load_external_data=False)
    assert_model_error(model, "tensor 'w'", "pass the model's path")


def test_every_converter_is_in_the_default_domain():
    for op_type in CONVERTERS:
        assert onnx.defs.has(op_type), op_type


# ------------------------------------------------------------------------ real models


def test_torch_cnn_matches_onnxruntime(tmp_path):
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(8)
            self.fc = torch.nn.Linear(8 * 4 * 4, 10)

        def forward(self, x):
            x = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
            return torch.softmax(self.fc(x.flatten(1)), dim=-1)

    path = tmp_path / "net.onnx"
    torch.onnx.export(Net().eval(), torch.randn(2, 3, 8, 8), str(path), dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["y"])
    module = check_numerics(onnx.load(path), {"x": rand(2, 3, 8, 8)}, rtol=1e-4, atol=1e-6)
    assert "conv2d" in kinds(module) and "softmax_v2" in kinds(module)
    assert os.path.isabs(load_onnx(path)[1].key)


def test_value_named_by_digits_keeps_a_printable_name():
    """torch names values `16`; the SSA hint must survive printing and cloning."""
    model = make([helper.make_node("Relu", ["x"], ["16"])], [vi("x", F, [2])], ["16"])
    module = check_numerics(model, {"x": rand(2)})
    module.clone()
    assert "%v16 = ascend_graph.relu" in str(module)


def test_importing_a_file_twice_shares_its_weight_store(tmp_path):
    """A weight a pass adds for one import stays readable through the other's store."""
    path = tmp_path / "m.onnx"
    node = helper.make_node("Add", ["x", "w"], ["y"])
    onnx.save(make([node], [vi("x", F, [100])], ["y"], [init("w", rand(100))]), str(path))
    first, store = ge.load_onnx(path)
    derived = store.add("derived", np.ones(3, np.float32))
    second, again = ge.load_onnx(path)
    assert again is store
    np.testing.assert_array_equal(again.get(derived), np.ones(3, np.float32))
    np.testing.assert_array_equal(ge.reference.run(first, {"x": np.zeros(100, np.float32)})["y"],
                                  ge.reference.run(second, {"x": np.zeros(100, np.float32)})["y"])
