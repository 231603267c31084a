"""Control flow: ONNX If, Loop and Scan as `ascend_graph.if`, `loop` and `scan`.

Hand-built graphs (a computed If condition, Loops with and without a trip count and a
condition, carried values that grow or trade places, scan outputs, Scans in both
directions and on other axes, bodies nested in bodies) are imported and run by the
reference interpreter, before and after the graph optimisation (which runs inside
the bodies), and compiled to label tasks and run on the simulator; each must give
onnxruntime's outputs, and so must torch's exports (torch.cond through the dynamo
exporter, a scripted Python loop through the TorchScript one). The profile holds a
loop body's kernels once per iteration; the printed IR parses back to itself; what
cannot be built (dynamic shapes, scan outputs of unknown length) is refused with
one sentence.
"""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

import ge
from dialects import ascend_graph as ag
from ge import om, pipeline
from ge.backend.verify import UnsafeModel, verify
from ge.core import ir
from ge.core.errors import ModelError
from ge.core.options import CompileOptions
from ge.session import Session
from ge.sim.config import RunConfig
from ge.sim.runtime import RunOutput, Runtime

SOC = "Ascend910B1"
RNG = np.random.default_rng(20261126)
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def info(name: str, elem: int = F, shape: list | None = None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def scalar(name: str, value: float, elem: int = F) -> onnx.TensorProto:
    return helper.make_tensor(name, elem, [], [value])


def make(nodes, inputs, outputs, initializer=(), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializer))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def onnxruntime(proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def check(
    proto: onnx.ModelProto, feeds: dict[str, np.ndarray], rtol: float = 1e-5, atol: float = 1e-6, compiled: bool = True
) -> RunOutput | None:
    """The reference interpreter gives onnxruntime's outputs, before and after the
    graph optimisation phases (which run inside the bodies), and so does the compiled
    model on the simulator (when `compiled`); its run is returned."""
    want = onnxruntime(proto, feeds)
    imported = ge.load_onnx(proto)[0]
    optimised = ge.load_onnx(proto)[0]
    pipeline.optimize(optimised, CompileOptions(soc_version=SOC, precision_mode="must_keep_origin_dtype"))
    routes = {"imported": ge.reference.run(imported, feeds), "optimised": ge.reference.run(optimised, feeds)}
    run = None
    if compiled:
        model = ge.compile(ge.load_onnx(proto)[0], {"soc_version": SOC, "precision_mode": "must_keep_origin_dtype"})
        run = Session().run(model, feeds)
        routes["compiled"] = run.outputs
    for route, got in routes.items():
        assert sorted(got) == sorted(want), route
        for name, value in want.items():
            assert got[name].dtype == value.dtype and got[name].shape == value.shape, (route, name)
            np.testing.assert_allclose(got[name], value, rtol=rtol, atol=atol, err_msg=f"{route} {name}")
    return run


def ops_of(proto: onnx.ModelProto, cls: type) -> list:
    return [op for op in ge.load_onnx(proto)[0].walk() if isinstance(op, cls)]


def normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------------------- If


def if_model(opset: int = 17, branch_shapes: bool = False) -> onnx.ModelProto:
    """out = x + y when sum(x) > 0, else x * 3 (or, with `branch_shapes`, x's first row:
    the branches give different shapes)."""
    then = helper.make_graph([helper.make_node("Add", ["x", "y"], ["t"])], "then", [], [info("t")])
    if branch_shapes:
        else_nodes = [helper.make_node("Gather", ["x", "zero_i"], ["e"], axis=0)]
        else_init = [helper.make_tensor("zero_i", I64, [1], [0])]
    else:
        else_nodes = [helper.make_node("Mul", ["x", "k"], ["e"])]
        else_init = [scalar("k", 3.0)]
    other = helper.make_graph(else_nodes, "else", [], [info("e")], initializer=else_init)
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["out"], name="if", then_branch=then, else_branch=other),
    ]
    return make(nodes, [info("x", F, [2, 3]), info("y", F, [2, 3])], [info("out")], [scalar("zero", 0.0)], opset)


@pytest.mark.parametrize("opset", [11, 17, 21])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_if_on_a_computed_condition_runs_the_branch_it_takes(opset: int, sign: float) -> None:
    proto = if_model(opset)
    x = sign * np.abs(normal(2, 3))
    check(proto, {"x": x, "y": normal(2, 3)})
    (op,) = ops_of(proto, ag.IfOp)
    assert [v.name_hint for v in op.inputs] == ["x", "y"]  # both branches take what either reads


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_if_branches_of_different_shapes_give_a_dynamic_dim(sign: float) -> None:
    proto = if_model(branch_shapes=True)
    check(proto, {"x": sign * np.abs(normal(2, 3)), "y": normal(2, 3)}, compiled=False)
    (op,) = ops_of(proto, ag.IfOp)
    assert ag.shape_of(op.results[0].type) == (ag.DYN, 3)
    with pytest.raises(ModelError, match=r"ascend_graph.if 'if': shape \[\?, 3\] is dynamic; the build plans static shapes only"):
        ge.compile(ge.load_onnx(proto)[0], {"soc_version": SOC})


def test_if_on_a_constant_condition_is_still_the_branch_it_takes() -> None:
    proto = if_model()
    proto.graph.node[1].input[:] = ["zero", "zero"]  # GreaterOp on constants folds at import
    check(proto, {"x": normal(2, 3), "y": normal(2, 3)})
    assert not ops_of(proto, ag.IfOp)


@pytest.mark.slow
def test_torch_cond_exported_with_dynamo_matches_onnxruntime() -> None:
    pytest.importorskip("onnxscript")
    from ge.testing.user_models import user_model

    path, feeds = user_model("cond")
    proto = onnx.load(str(path))
    check(proto, feeds)
    check(proto, {"x": -np.abs(feeds["x"])})
    assert ops_of(proto, ag.IfOp)


# ----------------------------------------------------------------------------- Loop


def loop_model(trip_count: bool = True, condition: bool = True, opset: int = 17, scans: bool = True) -> onnx.ModelProto:
    """y = y * 1.5 + x per iteration (x read from outside the body), while sum(y) < 100
    (when `condition`) and for at most n iterations (when `trip_count`); each iteration's
    y and its iteration number are scanned out (when `scans`)."""
    nodes = [
        helper.make_node("Mul", ["y_in", "k"], ["m"]),
        helper.make_node("Add", ["m", "x"], ["y_out"]),
        helper.make_node("ReduceSum", ["y_out"], ["s"], keepdims=0),
        helper.make_node("Less", ["s", "limit"], ["c_out"]) if condition else helper.make_node("Identity", ["c_in"], ["c_out"]),
        helper.make_node("Identity", ["y_out"], ["y_scan"]),
        helper.make_node("Identity", ["i"], ["i_scan"]),
    ]
    body = helper.make_graph(
        nodes, "body", [info("i", I64, []), info("c_in", B, []), info("y_in")],
        [info("c_out", B, []), info("y_out"), info("y_scan"), info("i_scan", I64)], initializer=[scalar("k", 1.5)],
    )
    outputs = ["y", "ys", "is"] if scans else ["y"]
    if not scans:
        del body.node[4:]
        del body.output[2:]
    loop = helper.make_node("Loop", ["n" if trip_count else "", "", "y0"], outputs, name="loop", body=body)
    inputs = [info("x", F, [2, 3]), info("y0", F, [2, 3])] + ([info("n", I64, [])] if trip_count else [])
    declared = [info("y"), info("ys"), info("is", I64)][: len(outputs)]
    return make([loop], inputs, declared, [scalar("limit", 100.0)], opset)


@pytest.mark.parametrize("opset", [11, 13, 21])
@pytest.mark.parametrize("trips", [1, 4, 40])
def test_loop_with_a_trip_count_and_a_condition(opset: int, trips: int) -> None:
    x = np.abs(normal(2, 3)) + 0.5
    check(loop_model(opset=opset), {"x": x, "y0": x, "n": np.array(trips, np.int64)}, compiled=False)
    check(loop_model(opset=opset, scans=False), {"x": x, "y0": x, "n": np.array(trips, np.int64)})


def test_loop_without_a_trip_count_runs_until_its_condition_fails() -> None:
    x = np.abs(normal(2, 3)) + 0.5
    check(loop_model(trip_count=False), {"x": x, "y0": x}, compiled=False)
    check(loop_model(trip_count=False, scans=False), {"x": x, "y0": x})


@pytest.mark.parametrize(("trips", "iterations"), [(0, 0), (1, 1), (3, 3), (40, 5)])
def test_compiled_loop_runs_its_body_kernels_once_per_iteration(trips: int, iterations: int) -> None:
    """sum(y) passes 100 in the fifth iteration on these inputs: the condition ends
    the loop then. The profile holds the body's kernels once per iteration."""
    x = np.full((2, 3), 1.0, np.float32)
    run = check(loop_model(scans=False), {"x": x, "y0": x, "n": np.array(trips, np.int64)})
    assert run is not None
    names = [r.name for r in run.profile.records if r.kind == "KERNEL"]
    assert names.count("loop/Mul_0") == iterations and names.count("loop/go") == iterations
    switches = [r for r in run.profile.records if r.kind == "LABEL_SWITCH_BY_INDEX"]
    assert len(switches) == 1 + iterations


def test_loop_with_a_constant_trip_count_and_no_condition_has_static_scan_outputs() -> None:
    proto = loop_model(condition=False)
    proto.graph.initializer.append(helper.make_tensor("n", I64, [], [3]))
    del proto.graph.input[2]
    x = normal(2, 3)
    check(proto, {"x": x, "y0": x})
    (op,) = ops_of(proto, ag.LoopOp)
    assert [ag.shape_of(r.type) for r in op.results] == [(2, 3), (3, 2, 3), (3,)]
    assert op.captures.value.data == 1  # x: the trip count and the factors are constants


def test_loop_whose_carried_value_grows_is_imported_with_a_dynamic_dim() -> None:
    """Each iteration appends a row: the carried value's first dim is dynamic."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Concat", ["acc_in", "row"], ["acc_out"], axis=0)],
        "body", [info("i", I64, []), info("c_in", B, []), info("acc_in")], [info("c_out", B, []), info("acc_out")],
    )
    loop = helper.make_node("Loop", ["n", "", "acc0"], ["acc"], name="grow", body=body)
    proto = make([loop], [info("row", F, [1, 4]), info("acc0", F, [1, 4]), info("n", I64, [])], [info("acc")])
    check(proto, {"row": normal(1, 4), "acc0": normal(1, 4), "n": np.array(3, np.int64)}, compiled=False)
    (op,) = ops_of(proto, ag.LoopOp)
    assert ag.shape_of(op.results[0].type) == (ag.DYN, 4)


def test_loop_inside_an_if_branch() -> None:
    """Bodies nest: the Loop reads x from outside the If, two levels up."""
    loop_body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Add", ["v_in", "x"], ["v_out"])],
        "body", [info("i", I64, []), info("c_in", B, []), info("v_in")], [info("c_out", B, []), info("v_out")],
    )
    then = helper.make_graph(
        [helper.make_node("Loop", ["three", "", "x"], ["t"], name="inner", body=loop_body)], "then", [], [info("t")],
        initializer=[helper.make_tensor("three", I64, [], [3])],
    )
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [info("e")])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["out"], name="if", then_branch=then, else_branch=other),
    ]
    proto = make(nodes, [info("x", F, [2, 3])], [info("out")], [scalar("zero", 0.0)])
    for sign in (1.0, -1.0):
        check(proto, {"x": sign * np.abs(normal(2, 3))})
    (loop,) = ops_of(proto, ag.LoopOp)
    assert isinstance(loop.parent_op(), ag.IfOp) and loop.label == "if/inner"


def test_loop_whose_carried_values_trade_places() -> None:
    """(a, b) -> (b, a + b): the next a is the current b, which the build copies aside
    before b's copy overwrites it."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Add", ["a", "b"], ["s"])],
        "body", [info("i", I64, []), info("c_in", B, []), info("a"), info("b")], [info("c_out", B, []), info("b"), info("s")],
    )
    loop = helper.make_node("Loop", ["n", "", "a0", "b0"], ["a", "b"], name="fib", body=body)
    proto = make([loop], [info("a0", F, [3]), info("b0", F, [3]), info("n", I64, [])], [info("a"), info("b")])
    for trips in (0, 1, 6):
        check(proto, {"a0": normal(3), "b0": normal(3), "n": np.array(trips, np.int64)})


def test_if_inside_a_loop_body() -> None:
    """Each iteration adds x where the running sum is positive, else subtracts it."""
    then = helper.make_graph([helper.make_node("Add", ["v", "x"], ["t"])], "then", [], [info("t")])
    other = helper.make_graph([helper.make_node("Sub", ["v", "x"], ["e"])], "else", [], [info("e")])
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            helper.make_node("ReduceSum", ["v"], ["s"], keepdims=0),
            helper.make_node("Greater", ["s", "zero"], ["positive"]),
            helper.make_node("If", ["positive"], ["v_out"], name="sign", then_branch=then, else_branch=other),
        ],
        "body", [info("i", I64, []), info("c_in", B, []), info("v")], [info("c_out", B, []), info("v_out")],
    )
    loop = helper.make_node("Loop", ["n", "", "v0"], ["v"], name="walk", body=body)
    proto = make([loop], [info("x", F, [4]), info("v0", F, [4]), info("n", I64, [])], [info("v")], [scalar("zero", 0.0)])
    run = check(proto, {"x": normal(4), "v0": normal(4), "n": np.array(5, np.int64)})
    assert run is not None
    assert sum(r.kind == "LABEL_SWITCH_BY_INDEX" for r in run.profile.records) == 1 + 5 + 5  # start, 5 ifs, 5 tests


@pytest.mark.slow
def test_torch_scripted_loop_matches_onnxruntime() -> None:
    pytest.importorskip("torch")
    from ge.testing.user_models import user_model

    path, feeds = user_model("loop")
    proto = onnx.load(str(path))
    check(proto, feeds)
    assert ops_of(proto, ag.LoopOp)


# ----------------------------------------------------------------------------- Scan


def scan_model(in_axis: int = 0, in_dir: int = 0, out_axis: int = 0, out_dir: int = 0) -> onnx.ModelProto:
    """A running sum of x's slices along `in_axis` (the state), scaled by w (read from
    outside the body); the running sums scanned out along `out_axis`."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "xi"], ["s_out"]), helper.make_node("Mul", ["s_out", "w"], ["o"])],
        "body", [info("s_in", F, [3]), info("xi", F, [3])], [info("s_out", F, [3]), info("o", F, [3])],
    )
    scan = helper.make_node(
        "Scan", ["s0", "x"], ["s", "os"], name="scan", body=body, num_scan_inputs=1, scan_input_axes=[in_axis],
        scan_input_directions=[in_dir], scan_output_axes=[out_axis], scan_output_directions=[out_dir],
    )
    x_shape = [4, 3] if in_axis in (0, -2) else [3, 4]
    return make([scan], [info("s0", F, [3]), info("x", F, x_shape), info("w", F, [3])], [info("s"), info("os")])


@pytest.mark.parametrize(
    ("in_axis", "in_dir", "out_axis", "out_dir"), [(0, 0, 0, 0), (1, 1, 0, 0), (-2, 0, 1, 1), (1, 0, -1, 0)]
)
def test_scan_axes_and_directions(in_axis: int, in_dir: int, out_axis: int, out_dir: int) -> None:
    proto = scan_model(in_axis, in_dir, out_axis, out_dir)
    x_shape = (4, 3) if in_axis in (0, -2) else (3, 4)
    check(proto, {"s0": normal(3), "x": normal(*x_shape), "w": normal(3)})


def test_compiled_scan_runs_its_body_once_per_position() -> None:
    """GE has no Scan: the build runs it as a Loop of its length that gathers each
    position's slice and writes each output row in place."""
    run = check(scan_model(1, 0, 1, 1), {"s0": normal(3), "x": normal(3, 4), "w": normal(3)})
    assert run is not None
    names = [r.name for r in run.profile.records if r.kind == "KERNEL"]
    assert names.count("scan/Add_0") == names.count("scan/slice0") == names.count("scan/write0") == 4
    assert "scan/backwards" not in names  # only a reverse input counts from the end


def test_scan_inside_a_loop_body() -> None:
    """The Scan reads the loop's carried value as its state and scales by it."""
    scan_body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "xi"], ["s_out"]), helper.make_node("Mul", ["s_out", "v_in"], ["o"])],
        "scan_body", [info("s_in", F, [3]), info("xi", F, [3])], [info("s_out", F, [3]), info("o", F, [3])],
    )
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            helper.make_node("Scan", ["v_in", "x"], ["s", "os"], name="inner", body=scan_body, num_scan_inputs=1),
            helper.make_node("ReduceSum", ["os", "axis"], ["v_out"], keepdims=0),
        ],
        "body", [info("i", I64, []), info("c_in", B, []), info("v_in", F, [3])], [info("c_out", B, []), info("v_out", F, [3])],
        initializer=[helper.make_tensor("axis", I64, [1], [0])],
    )
    loop = helper.make_node("Loop", ["n", "", "v0"], ["v"], name="outer", body=body)
    proto = make([loop], [info("x", F, [4, 3]), info("v0", F, [3]), info("n", I64, [])], [info("v")], opset=13)
    run = check(proto, {"x": 0.3 * normal(4, 3), "v0": normal(3), "n": np.array(3, np.int64)}, rtol=1e-4, atol=1e-5)
    assert run is not None
    assert [r.name for r in run.profile.records if r.kind == "KERNEL"].count("outer/inner/Add_0") == 3 * 4


def test_scan_of_two_inputs_at_opset_11() -> None:
    body = helper.make_graph(
        [helper.make_node("Mul", ["a", "b"], ["p"]), helper.make_node("Add", ["acc_in", "p"], ["acc_out"])],
        "body", [info("acc_in", F, [2]), info("a", F, [2]), info("b", F, [2])], [info("acc_out", F, [2])],
    )
    scan = helper.make_node("Scan", ["acc0", "a_seq", "b_seq"], ["acc"], body=body, num_scan_inputs=2, scan_input_directions=[0, 1])
    proto = make([scan], [info("acc0", F, [2]), info("a_seq", F, [5, 2]), info("b_seq", F, [5, 2])], [info("acc")], opset=11)
    check(proto, {"acc0": normal(2), "a_seq": normal(5, 2), "b_seq": normal(5, 2)})


def test_compiled_control_flow_survives_the_om_file(tmp_path) -> None:
    """The label tasks and copies are written and read back; a run of the model read
    gives the same outputs (its Add computes in float16 under the default precision
    mode: selected inside the branch), and without numerics the switches take label 0."""
    x = np.abs(normal(2, 3))
    model = ge.compile(ge.load_onnx(if_model())[0], {"soc_version": SOC})
    path = tmp_path / "if.om"
    om.write(model, str(path))
    again = om.read(str(path))
    assert again.tasks == model.tasks
    kinds = [t.KIND for t in again.tasks]
    assert kinds.count("LABEL_SET") == 3 and "LABEL_SWITCH_BY_INDEX" in kinds and "MEMCPY_ASYNC_D2D" in kinds
    np.testing.assert_allclose(Session().run(again, {"x": x, "y": x}).outputs["out"], x + x, rtol=2e-3)
    timed = Runtime(again, RunConfig(timing_only=True)).run()
    ran = [r.name for r in timed.profile.records if r.kind == "KERNEL"]
    assert "if/Mul_0" in ran and "if/Add_0" not in ran


def test_a_jump_to_a_label_no_task_sets_is_refused(tmp_path) -> None:
    model = ge.compile(ge.load_onnx(if_model())[0], {"soc_version": SOC})
    switch = next(i for i, t in enumerate(model.tasks) if isinstance(t, om.LabelSwitchTask))
    tasks = list(model.tasks)
    tasks[switch] = om.LabelSwitchTask(0, tasks[switch].index, (7, 1))
    with pytest.raises(UnsafeModel, match="task .* jumps to label 7, which no task sets"):
        verify(tasks, model.memory)
    path = tmp_path / "bad.om"
    om.write(dataclasses.replace(model, tasks=tuple(tasks)), str(path))
    with pytest.raises(ModelError, match=r"tasks\[\d+\] jumps to label 7, which no LABEL_SET of stream 0 sets"):
        om.read(str(path))


# ------------------------------------------------------------------------ refusals


def test_scan_inputs_of_different_lengths_are_refused() -> None:
    body = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["o"])], "body", [info("a", F, [2]), info("b", F, [2])], [info("o", F, [2])]
    )
    scan = helper.make_node("Scan", ["a_seq", "b_seq"], ["os"], name="scan", body=body, num_scan_inputs=2)
    proto = make([scan], [info("a_seq", F, [5, 2]), info("b_seq", F, [4, 2])], [info("os")])
    with pytest.raises(ModelError, match=r"node 'scan' \(Scan\): the scan inputs have different lengths \[4, 5\]"):
        ge.load_onnx(proto)


def test_if_branches_of_different_element_types_are_refused() -> None:
    proto = if_model()
    other = next(a.g for a in proto.graph.node[2].attribute if a.name == "else_branch")
    other.node.append(helper.make_node("Cast", ["e"], ["e64"], to=TensorProto.DOUBLE))
    other.output[0].CopyFrom(info("e64", TensorProto.DOUBLE))
    with pytest.raises(ModelError, match=r"node 'if' \(If\): output 0 is f32 in the then branch and f64 in the else branch"):
        ge.load_onnx(proto)


def test_a_loop_body_with_the_wrong_number_of_inputs_is_refused() -> None:
    proto = loop_model()
    proto.graph.node[0].attribute[0].g.input.append(info("extra"))
    with pytest.raises(ModelError, match=r"node 'loop' \(Loop\): its body has 4 inputs, but the op gives it 3"):
        ge.load_onnx(proto)


def test_the_compile_path_refuses_scan_outputs_of_unknown_length() -> None:
    with pytest.raises(ModelError, match=r"Loop 'loop': a scan output of \[\?, 2, 3\] has a row per iteration, and the iterations are not known"):
        ge.compile(ge.load_onnx(loop_model())[0], {"soc_version": SOC})


# ----------------------------------------------------------------- the IR itself


@pytest.mark.parametrize("proto", [if_model(), loop_model(), scan_model(1, 1, 1, 1)], ids=["if", "loop", "scan"])
def test_printed_bodies_parse_back(proto: onnx.ModelProto) -> None:
    module = ge.load_onnx(proto)[0]
    text = ir.to_text(module)
    assert ir.to_text(ir.parse(text)) == text
    generic = io.StringIO()
    Printer(generic, print_generic_format=True).print_op(module)
    assert ir.to_text(ir.parse(generic.getvalue())) == text


def test_a_body_whose_arguments_disagree_with_the_operands_does_not_verify() -> None:
    module = ge.load_onnx(if_model())[0]
    (op,) = [o for o in module.walk() if isinstance(o, ag.IfOp)]
    op.else_branch.block.insert_arg(ag.tensor(ag.f32, (2, 3)), 2)
    with pytest.raises(VerifyException, match=r"If 'if': the else branch's arguments: 3 values, expected 2"):
        module.verify()


def test_format_selection_runs_inside_the_bodies() -> None:
    """A convolution in a branch reads its argument through a TransData to NC1HWC0
    placed at the top of the branch; the If itself passes and yields NCHW."""
    weight = helper.make_tensor("w", F, [4, 2, 3, 3], normal(4, 2, 3, 3).reshape(-1).tolist())
    then = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["t"], pads=[1, 1, 1, 1])], "then", [], [info("t")], [weight])
    other = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["e"], axis=1)], "else", [], [info("e")])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["out"], name="if", then_branch=then, else_branch=other),
    ]
    proto = make(nodes, [info("x", F, [1, 2, 5, 5])], [info("out")], [scalar("zero", 0.0)])
    for sign in (1.0, -1.0):
        check(proto, {"x": sign * np.abs(normal(1, 2, 5, 5))}, rtol=1e-4, atol=1e-5)
    module = ge.load_onnx(proto)[0]
    pipeline.optimize(module, CompileOptions(soc_version="Ascend910B1", precision_mode="must_keep_origin_dtype"))
    (op,) = [o for o in module.walk() if isinstance(o, ag.IfOp)]
    first = op.then_branch.block.first_op
    assert isinstance(first, ag.TransDataOp) and first.x is op.then_branch.block.args[0]
    assert ag.format_of(op.results[0].type) is None


def test_precision_selection_runs_inside_the_bodies() -> None:
    """Under force_fp16 the body's Add computes in float16 between Casts, while the
    If passes and yields float32 as the model declares."""
    module = ge.load_onnx(if_model())[0]
    pipeline.optimize(module, CompileOptions(soc_version="Ascend310", precision_mode="force_fp16"))
    (op,) = [o for o in module.walk() if isinstance(o, ag.IfOp)]
    add = next(o for o in op.then_branch.walk() if isinstance(o, ag.AddOp))
    assert ag.dtype_of(add.results[0].type) == ag.Float16Type()
    assert ag.dtype_of(op.results[0].type) == ag.f32
    x = np.abs(normal(2, 3))
    got = ge.reference.run(module, {"x": x, "y": x})["out"]
    np.testing.assert_allclose(got, x + x, rtol=1e-3)
