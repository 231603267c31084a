"""Invalid models are refused, and resource bombs are caught before they run.

Each case is one a tester found: the model was accepted silently (a Split whose
sizes miss the dim, duplicate input names, an empty graph, IR version 99), or it
ran the process out of memory, time or stack (functions that double at every call,
TiB-sized ConstantOfShape/Tile/Expand/Range results, a huge `--input_shape`, 5000
nested modules). Each must fail with one line of a `GEError` naming the node, input
or field, and for a limit the number found and the limit (`ge.core.limits`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.dialects.builtin import ModuleOp

import ge
from dialects import ascend_graph as ag
from ge.cli.main import main as ge_main
from ge.core import ir, limits
from ge.core.limits import LimitError
from ge.core.weights import WeightStore, attach
from ge.frontend import load_onnx
from ge.testing.refusals import refused
from passes.constant_folding import ConstantFoldingPass

F = TensorProto.FLOAT
I64 = TensorProto.INT64


def vi(name: str, elem: int, shape: Sequence[int | str] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def init(name: str, array) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def make(nodes, inputs, outputs, inits=(), ir_version: int = 8, functions=()) -> onnx.ModelProto:
    graph = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), initializer=list(inits))
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("local", 1)] if functions else [])
    model = helper.make_model(graph, opset_imports=opsets, functions=list(functions))
    model.ir_version = ir_version
    return model



# ----------------------------------------------------------------- invalid models


def test_split_sizes_that_miss_the_dim():
    node = helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1, name="split0")
    model = make([node], [vi("x", F, [1, 4])], [vi("a", F, [1, 1]), vi("b", F, [1, 1])],
                 [init("sizes", np.array([1, 1], np.int64))])
    refused(model, "node 'split0' (Split)", "sum of 'split' (2)", "(4)")


def test_duplicate_graph_input_names():
    model = make([helper.make_node("Add", ["x", "x"], ["y"])], [vi("x", F, [2]), vi("x", F, [2])], [vi("y", F, [2])])
    refused(model, "graph input 'x' is declared twice")


def test_duplicate_initializer_names():
    add = helper.make_node("Add", ["x", "w"], ["y"])
    model = make([add], [vi("x", F, [2])], [vi("y", F, [2])], [init("w", np.ones(2, np.float32))] * 2)
    refused(model, "initializer 'w' is declared twice")


def test_empty_graph():
    refused(make([], [], []), "has no graph outputs")


def test_graph_without_outputs():
    refused(make([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [2])], []), "has no graph outputs")


def test_ir_version_newer_than_onnx():
    model = make([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [2])], [vi("y", F, [2])], ir_version=99)
    refused(model, "IR version 99", f"up to {onnx.IR_VERSION}")


def test_unknown_attribute_is_named():
    node = helper.make_node("Relu", ["x"], ["y"], name="r", alpha=0.5)
    refused(make([node], [vi("x", F, [2])], [vi("y", F, [2])]), "node 'r' (Relu)", "attribute 'alpha' is unknown")


def test_attribute_of_the_wrong_kind_is_named():
    node = helper.make_node("Softmax", ["x"], ["y"], name="s", axis=[1])
    refused(make([node], [vi("x", F, [2])], [vi("y", F, [2])]), "node 's' (Softmax)", "'axis' is INTS", "takes INT")


def test_op_type_onnx_does_not_have():
    node = helper.make_node("Frobnicate", ["x"], ["y"])
    refused(make([node], [vi("x", F, [2])], [vi("y", F, [2])]), "node 'Frobnicate_0'", "does not exist in ONNX")


def test_declared_output_shape_conflict_names_the_declaration():
    model = make([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", F, [2, 3])], [vi("y", F, [3, 2])])
    refused(model, "node 'r' (Relu)", "the model declares [3, 2]", "infers [2, 3]")


def test_outputs_without_a_shape_and_unsorted_nodes_still_import():
    """Outputs without a declared shape (ONNX's checker wants one) and unsorted nodes
    are ours to fill in and sort: the checker sees our types and order."""
    nodes = [helper.make_node("Neg", ["t"], ["y"]), helper.make_node("Relu", ["x"], ["t"])]
    model = make(nodes, [vi("x", F, ["n", 4])], [helper.make_empty_tensor_value_info("y")])
    load_onnx(model, "x:2,4")


# ------------------------------------------------------------------ resource bombs


def _doubling_functions(depth: int) -> onnx.ModelProto:
    """f0 calls f1 twice, f1 calls f2 twice, ...: 2^(depth-1) Relu nodes once inlined."""
    functions = []
    for i in range(depth):
        if i == depth - 1:
            body = [helper.make_node("Relu", ["x"], ["y"])]
        else:
            body = [helper.make_node(f"f{i + 1}", ["x"], ["t"], domain="local"),
                    helper.make_node(f"f{i + 1}", ["t"], ["y"], domain="local")]
        opsets = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
        functions.append(helper.make_function("local", f"f{i}", ["x"], ["y"], body, opsets))
    call = helper.make_node("f0", ["x"], ["y"], domain="local", name="call")
    return make([call], [vi("x", F, [2])], [vi("y", F, [2])], functions=functions)


def test_function_bomb_is_counted_before_inlining():
    started = time.perf_counter()
    refused(_doubling_functions(30), f"{2**29} nodes", f"limit of {limits.MAX_NODES}", error=LimitError)
    assert time.perf_counter() - started < 5


def test_node_count_of_a_plain_graph(monkeypatch):
    monkeypatch.setattr(limits, "MAX_NODES", 10)
    nodes = [helper.make_node("Relu", ["x" if i == 0 else f"t{i - 1}"], [f"t{i}"]) for i in range(12)]
    refused(make(nodes, [vi("x", F, [2])], [vi("t11", F, [2])]), "the graph has 12 nodes, more than the limit of 10",
            error=LimitError)


def test_small_functions_still_inline():
    module, _ = load_onnx(_doubling_functions(4))
    assert sum(isinstance(op, ag.ReluOp) for op in module.walk()) == 8


def test_recursive_function_is_refused():
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    body = [helper.make_node("f", ["x"], ["y"], domain="local")]
    function = helper.make_function("local", "f", ["x"], ["y"], body, opsets)
    call = helper.make_node("f", ["x"], ["y"], domain="local")
    refused(make([call], [vi("x", F, [2])], [vi("y", F, [2])], functions=[function]), "'f'", "calls itself")


def _shape_bomb(op_type: str, shape_input: np.ndarray, data: np.ndarray | None = None) -> onnx.ModelProto:
    inputs = ["d", "s"] if data is not None else ["s"]
    nodes = [helper.make_node(op_type, inputs, ["c"], name="bomb"), helper.make_node("Add", ["x", "c"], ["y"])]
    inits = [init("s", shape_input)] + ([init("d", data)] if data is not None else [])
    return make(nodes, [vi("x", F, [1])], [helper.make_empty_tensor_value_info("y")], inits)


@pytest.mark.parametrize(
    "op_type, data",
    [("ConstantOfShape", None), ("Expand", np.ones((1, 1), np.float32)), ("Tile", np.ones((2, 2), np.float32))],
)
def test_tensor_of_tebibytes_is_refused(op_type, data):
    model = _shape_bomb(op_type, np.array([1 << 20, 1 << 20], np.int64), data)
    refused(model, f"node 'bomb' ({op_type})", "TiB", "more than the limit of a tensor", "64 GiB", error=LimitError)


def test_range_of_tebibytes_is_refused():
    inits = [init("a", np.array(0, np.int64)), init("b", np.array(1 << 40, np.int64)), init("c", np.array(1, np.int64))]
    model = make([helper.make_node("Range", ["a", "b", "c"], ["y"], name="range")], [], [vi("y", I64, [1 << 40])], inits)
    refused(model, "node 'range' (Range)", "[1099511627776]", "(8 TiB)", "limit of a constant", error=LimitError)


def test_unsupported_op_is_not_evaluated_to_tebibytes():
    """MaxRoiPool has no converter: ONNX's reference would evaluate it, after the size check."""
    inits = [init("x", np.ones((1, 1, 2, 2), np.float32)), init("rois", np.array([[0, 0, 0, 1, 1]], np.float32))]
    node = helper.make_node("MaxRoiPool", ["x", "rois"], ["y"], name="roipool", pooled_shape=[10**6, 10**6])
    model = make([node], [], [helper.make_empty_tensor_value_info("y")], inits)
    refused(model, "node 'roipool' (MaxRoiPool)", "[1, 1, 1000000, 1000000]", "limit of a constant", error=LimitError)


def test_huge_input_shape_is_refused():
    model = make([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, ["n", "m"])], [vi("y", F, ["n", "m"])])
    refused(model, "graph input 'x'", "[100000000, 100000000]", "PiB", error=LimitError,
            input_shape="x:100000000,100000000")


@pytest.mark.parametrize("command", ["atc", "precision-report"])
def test_huge_input_shape_on_the_command_line(tmp_path, capsys, command):
    model = make([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, ["n", "m"])], [vi("y", F, ["n", "m"])])
    path = tmp_path / "relu.onnx"
    onnx.save(model, path)
    args = [command, f"--model={path}", "--input_shape=x:100000000,100000000", "--soc_version=Ascend310P3"]
    if command == "atc":
        args += ["--framework=5", f"--output={tmp_path / 'out'}"]
    else:
        args = [command, str(path), *args[2:]]
    with pytest.raises(SystemExit) as info:
        ge_main(args)
    assert info.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("ge: error: [E16005] graph input 'x'") and "more than the limit of a tensor" in err, err
    assert "\n" not in err


def test_deeply_nested_modules_are_refused_before_parsing():
    text = "builtin.module {" * 5000 + "}" * 5000
    with pytest.raises(LimitError, match="5000 levels deep, more than the limit of 100"):
        ir.parse(text, "nested.mlir")


def test_nesting_in_string_literals_does_not_count():
    module = ir.parse('builtin.module attributes {note = "' + "{" * 500 + '"} {}')
    assert isinstance(module, ModuleOp)


def test_huge_splat_in_ir_text_is_refused_before_parsing():
    text = (
        "builtin.module {\n  ascend_graph.graph @g {\n"
        '    %c = ascend_graph.const {value = dense<1.0> : tensor<100000x100000xf32>, name = "c"} '
        ": tensor<100000x100000xf32>\n"
        '    ascend_graph.net_output %c {names = ["y"]} : tensor<100000x100000xf32>\n  }\n}\n'
    )
    with pytest.raises(LimitError, match=r"dense attribute of shape \[100000, 100000\] needs 40000000000 bytes"):
        ir.parse(text, "splat.mlir")


def test_folding_a_splat_beyond_the_limit_is_left_to_run_time(monkeypatch):
    module = ir.parse(
        "builtin.module {\n  ascend_graph.graph @g {\n"
        '    %c = ascend_graph.const {value = dense<1.0> : tensor<64x64xf32>, name = "c"} : tensor<64x64xf32>\n'
        '    %r = ascend_graph.relu %c {name = "r"} : (tensor<64x64xf32>) -> tensor<64x64xf32>\n'
        '    ascend_graph.net_output %r {names = ["y"]} : tensor<64x64xf32>\n  }\n}\n'
    )
    attach(module, WeightStore("<memory:splat>"))
    monkeypatch.setattr("passes.constant_folding.MAX_FOLDED_BYTES", 1024)
    ConstantFoldingPass().apply(ir.context(), module)
    assert any(isinstance(op, ag.ReluOp) for op in module.walk())  # 16 KiB > 1 KiB: not folded
    monkeypatch.undo()
    ConstantFoldingPass().apply(ir.context(), module)
    assert not any(isinstance(op, ag.ReluOp) for op in module.walk())


def test_reference_refuses_a_result_the_host_cannot_hold(monkeypatch):
    monkeypatch.setattr(limits, "host_available_bytes", lambda: 1 << 27)
    module, _ = load_onnx(make([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", F, [1 << 26])],
                               [vi("y", F, [1 << 26])]))
    relu = next(op for op in module.walk() if isinstance(op, ag.ReluOp))
    with pytest.raises(LimitError, match=r"Relu 'r': result 0 of shape \[67108864\] needs 268435456 bytes"):
        ge.reference.evaluate_op(relu, [np.zeros(1 << 26, np.float32)])


# ------------------------------------------------- attributes ONNX's checker lets pass


def test_constant_gather_index_out_of_range():
    node = helper.make_node("Gather", ["x", "i"], ["y"], name="g", axis=1)
    model = make([node], [vi("x", F, [2, 3])], [helper.make_empty_tensor_value_info("y")],
                 [init("i", np.array([0, -4], np.int64))])
    refused(model, "node 'g' (Gather)", "index -4 is out of range for axis 1 of size 3")


def test_instance_norm_scale_of_the_wrong_channel_count():
    node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="norm")
    inits = [init("s", np.ones(7, np.float32)), init("b", np.zeros(3, np.float32))]
    model = make([node], [vi("x", F, [2, 3, 4])], [helper.make_empty_tensor_value_info("y")], inits)
    refused(model, "node 'norm' (InstanceNormalization)", "scale has shape [7], expected [3]")
