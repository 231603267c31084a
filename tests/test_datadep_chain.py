"""Data-dependent chains: ops reading the result of NonZero, Unique, ... (directly or
through another such op) run on the AI CPU, allocated at the upper bound their shape
rule gives on their operands' bounds, and read their inputs at the actual shapes the
run reported. The users' boolean-mask model and chains built with onnx.helper are
compiled, simulated and compared with onnxruntime; what cannot be bounded is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.dialects.builtin import f16, f32, i64

import ge
from dialects import ascend_graph as ag
from dialects.ascend_kernel import AICPU, KernelOp
from dialects.kernel_boundary import is_aicpu
from ge.core import ir
from ge.core.errors import ModelError
from ge.om.tasks import AicpuTask, KernelTask
from ge.testing.user_models import user_model
from passes.lower_to_kernel import LowerToKernel
from passes.precision_selection import PrecisionSelection

SOCS = ("Ascend910B1", "Ascend310P3")


def model_of(nodes: list, inputs: list, outputs: list[str], opset: int, inits: list | None = None) -> onnx.ModelProto:
    outs = [helper.make_empty_tensor_value_info(n) for n in outputs]
    graph = helper.make_graph(nodes, "g", inputs, outs, inits or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def onnxruntime(model: onnx.ModelProto | Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    source = str(model) if isinstance(model, Path) else model.SerializeToString()
    session = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray], what: str, float16: tuple[str, ...] = ()) -> None:
    """Every output of onnxruntime's dtype and shape, and its values: exact but for
    float32 rounding (the chains compute in their own dtypes on the AI CPU), within
    float16's for the outputs named in `float16` (AI Core ops under force_fp16)."""
    for name, expected in want.items():
        value = got[name]
        assert value.dtype == expected.dtype and value.shape == expected.shape, (what, name, value.shape, expected.shape)
        tolerance = 2e-3 if name in float16 else 1e-6
        np.testing.assert_allclose(value, expected, rtol=tolerance, atol=tolerance, err_msg=f"{what} {name}")


def check(
    model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]], tmp_path: Path, soc: str = "Ascend910B1", float16: tuple[str, ...] = (),
) -> ge.Model:
    """The reference interpreter and the compiled model give onnxruntime's outputs for each feed."""
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    module, _ = ge.load_onnx(path)
    compiled = ge.compile(path, {"soc_version": soc, "export_compile_stat": 0})
    with ge.Session() as session:
        for i, feed in enumerate(feeds):
            want = onnxruntime(model, feed)
            assert_same(ge.reference.run(module, feed), want, f"reference, feed {i}")
            assert_same(session.run(compiled, feed).outputs, want, f"compiled, feed {i}", float16)
    return compiled


def aicpu_op_types(compiled: ge.Model) -> list[str]:
    return [t.op_type for t in compiled.tasks if isinstance(t, AicpuTask)]


# --------------------------------------------------------------- the users' model


def mask_inputs(x: np.ndarray) -> list[np.ndarray]:
    """The sample, and inputs selecting none, all, one and most of the elements."""
    one = -np.ones_like(x)
    one[2, 3] = 0.5
    return [x, -np.abs(x) - 1, np.abs(x) + 1, one, np.where(x == x.min(), -1.0, np.abs(x) + 0.25).astype(x.dtype)]


@pytest.fixture(scope="module", params=SOCS)
def mask_select(request) -> tuple[str, Path, dict[str, np.ndarray], ge.Model]:
    path, feeds = user_model("mask_select")
    return request.param, path, feeds, ge.compile(path, {"soc_version": request.param, "export_compile_stat": 0})


def test_mask_select_compiles_and_equals_onnxruntime(mask_select) -> None:
    soc, path, feeds, compiled = mask_select
    selected = []
    with ge.Session() as session:
        for x in mask_inputs(feeds["x"]):
            want = onnxruntime(path, {"x": x})
            assert_same(session.run(compiled, {"x": x}).outputs, want, soc)
            selected.append(want["y"].size)
    assert selected == [int((feeds["x"] > 0).sum()), 0, 20, 1, 19]
    assert aicpu_op_types(compiled) == ["NonZero", "TransposeD", "GatherNd", "Mul"]
    assert compiled.outputs[0].shape == (20,)  # described by its upper bound


def test_mask_select_kernels_declare_their_upper_bounds(mask_select) -> None:
    """Each AI CPU kernel's arguments: the upper bounds of its data-dependent values."""
    _, _, _, compiled = mask_select
    kernels = {k.op_types.data[0].data: k for k in compiled.kernel_module().ops if isinstance(k, KernelOp) and k.core_type.data == AICPU}
    shapes = {t: [tuple(a.shape.get_values()) for a in k.args] for t, k in kernels.items()}
    assert shapes == {
        "NonZero": [(4, 5), (2, 20)],
        "TransposeD": [(2, 20), (20, 2)],
        "GatherNd": [(4, 5), (20, 2), (20,)],
        "Mul": [(20,), (), (20,)],
    }


def test_mask_select_survives_the_om_round_trip(mask_select, tmp_path: Path) -> None:
    _, _, feeds, compiled = mask_select
    loaded = ge.load_model(compiled.save(tmp_path / "mask_select.om"))
    with ge.Session() as session:
        for x in mask_inputs(feeds["x"]):
            first, again = session.run(compiled, {"x": x}).outputs["y"], session.run(loaded, {"x": x}).outputs["y"]
            np.testing.assert_array_equal(first, again)


def test_mask_select_places_the_chain_on_the_ai_cpu_in_its_dtypes() -> None:
    """Under the default force_fp16 the Greater before NonZero is a float16 AI Core op;
    the ops after NonZero keep their dtypes on the AI CPU, saying why."""
    path, _ = user_model("mask_select")
    module, _ = ge.load_onnx(path)
    PrecisionSelection(soc_version="Ascend910B1").apply(ir.context(), module)
    ops = {op.label: op for op in module.walk() if isinstance(op, ag.AscendOp) and op.node_name is not None}
    assert not is_aicpu(ops["/Greater"]) and ag.dtype_of(ops["/Greater"].operands[0].type) == f16
    for name, producer, dtype in (
        ("/Transpose", "NonZero '/NonZero'", i64), ("/GatherND", "TransposeD '/Transpose'", f32), ("/Mul", "GatherNd '/GatherND'", f32),
    ):
        op = ops[name]
        assert is_aicpu(op) and ag.dtype_of(op.results[0].type) == dtype, name
        assert op.attributes["_precision_reason"].data == f"reads the data-dependent result of {producer}: AI CPU"


# ------------------------------------------------------------- chains by onnx.helper


def nonzero_gather_mul(opset: int, dtype: int) -> onnx.ModelProto:
    """y = x[x != 0] * k, as torch exports it: NonZero -> Transpose -> GatherND -> Mul."""
    k = numpy_helper.from_array(np.array(3, helper.tensor_dtype_to_np_dtype(dtype)), "k")
    nodes = [
        helper.make_node("NonZero", ["x"], ["nz"], name="nz"),
        helper.make_node("Transpose", ["nz"], ["idx"], name="t", perm=[1, 0]),
        helper.make_node("GatherND", ["x", "idx"], ["g"], name="g"),
        helper.make_node("Mul", ["g", "k"], ["y"], name="mul"),
    ]
    return model_of(nodes, [helper.make_tensor_value_info("x", dtype, [2, 3, 4])], ["y"], opset, [k])


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.INT32, TensorProto.FLOAT16])
def test_nonzero_transpose_gathernd_mul(opset: int, dtype: int, tmp_path: Path) -> None:
    np_dtype = helper.tensor_dtype_to_np_dtype(dtype)
    rng = np.random.default_rng(opset)
    some = (rng.integers(-2, 3, (2, 3, 4)) * (rng.random((2, 3, 4)) > 0.5)).astype(np_dtype)
    feeds = [{"x": some}, {"x": np.zeros((2, 3, 4), np_dtype)}, {"x": np.arange(1, 25, dtype=np_dtype).reshape(2, 3, 4)}]
    compiled = check(nonzero_gather_mul(opset, dtype), feeds, tmp_path)
    assert aicpu_op_types(compiled) == ["NonZero", "TransposeD", "GatherNd", "Mul"]


@pytest.mark.parametrize("opset", [11, 13])
def test_unique_add(opset: int, tmp_path: Path) -> None:
    """Unique's values and counts, each read by an Add: the sum of two data-dependent
    values of one actual length, and one with a constant."""
    one = numpy_helper.from_array(np.array([1.5], np.float32), "one")
    nodes = [
        helper.make_node("Unique", ["x"], ["u", "i", "inv", "c"], name="unique", sorted=1),
        helper.make_node("Add", ["u", "one"], ["y"], name="add"),
        helper.make_node("Cast", ["c"], ["cf"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Add", ["u", "cf"], ["z"], name="add2"),
    ]
    model = model_of(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [10])], ["y", "z"], opset, [one])
    feeds = [
        {"x": np.array([4, 4, 2, 9, 2, 2, 7, 4, 1, 1], np.float32)},
        {"x": np.full(10, 3.0, np.float32)},
        {"x": np.arange(10, dtype=np.float32)},
    ]
    compiled = check(model, feeds, tmp_path)
    assert sorted(aicpu_op_types(compiled)) == ["Add", "Add", "Cast", "UniqueWithCountsExt2"]


def test_the_chain_ends_where_a_shape_is_static_again(tmp_path: Path) -> None:
    """A sum of the selected values is a scalar: the ReduceSum reading them runs on the
    AI CPU, and the Mul after it on AI Core; a Reshape with -1 taking the data-dependent
    dim and an Unsqueeze of it are AI CPU kernels, not views."""
    two = numpy_helper.from_array(np.array(2, np.float32), "two")
    flat = numpy_helper.from_array(np.array([-1, 1], np.int64), "flat")
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    nodes = [
        helper.make_node("Greater", ["x", "zero"], ["m"], name="gt"),
        helper.make_node("NonZero", ["m"], ["nz"], name="nz"),
        helper.make_node("Transpose", ["nz"], ["idx"], name="t"),
        helper.make_node("GatherND", ["x", "idx"], ["g"], name="g"),
        helper.make_node("ReduceSum", ["g"], ["s"], name="sum", keepdims=0),
        helper.make_node("Mul", ["s", "two"], ["total"], name="mul"),
        helper.make_node("Reshape", ["g", "flat"], ["col"], name="reshape"),
        helper.make_node("Unsqueeze", ["col", "axes"], ["y"], name="unsqueeze"),
    ]
    zero = numpy_helper.from_array(np.array(0, np.float32), "zero")
    model = model_of(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])], ["total", "y"], 13, [two, flat, axes, zero])
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    compiled = check(model, [{"x": x}, {"x": -np.abs(x)}, {"x": np.abs(x) + 1}], tmp_path, float16=("total",))
    assert sorted(aicpu_op_types(compiled)) == ["GatherNd", "NonZero", "ReduceSumD", "Reshape", "TransposeD", "Unsqueeze"]
    assert [t.name for t in compiled.tasks if isinstance(t, KernelTask) and not isinstance(t, AicpuTask)] == ["x_cast_float16+gt", "sum_cast_float16+mul+mul_cast_float32"]


def test_a_reshape_of_a_data_dependent_value_to_a_static_shape(tmp_path: Path) -> None:
    """A Reshape to [3, 5] of values selected from a [3, 5] input (all of them, when the
    model is used right) is an AI CPU kernel reading its input at its actual shape; the
    Mul after it runs on AI Core."""
    target = numpy_helper.from_array(np.array([3, 5], np.int64), "target")
    two = numpy_helper.from_array(np.array(2, np.float32), "two")
    nodes = [
        helper.make_node("NonZero", ["x"], ["nz"], name="nz"),
        helper.make_node("Transpose", ["nz"], ["idx"], name="t"),
        helper.make_node("GatherND", ["x", "idx"], ["g"], name="g"),
        helper.make_node("Reshape", ["g", "target"], ["r"], name="reshape"),
        helper.make_node("Mul", ["r", "two"], ["y"], name="mul"),
    ]
    model = model_of(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])], ["y"], 13, [target, two])
    x = np.arange(1, 16, dtype=np.float32).reshape(3, 5)
    compiled = check(model, [{"x": x}, {"x": x[::-1] * 0.5}], tmp_path, float16=("y",))
    assert aicpu_op_types(compiled) == ["NonZero", "TransposeD", "GatherNd", "Reshape"]


def test_a_data_dependent_op_reading_a_data_dependent_value(tmp_path: Path) -> None:
    """NonZero of Unique's values: its bound comes from theirs."""
    nodes = [
        helper.make_node("Unique", ["x"], ["u"], name="unique"),
        helper.make_node("NonZero", ["u"], ["y"], name="nz"),
    ]
    model = model_of(nodes, [helper.make_tensor_value_info("x", TensorProto.INT64, [6])], ["y"], 13)
    feeds = [{"x": np.array([0, 3, 0, 5, 3, 0], np.int64)}, {"x": np.zeros(6, np.int64)}, {"x": np.arange(6, dtype=np.int64)}]
    compiled = check(model, feeds, tmp_path)
    assert compiled.outputs[0].shape == (1, 6)


# ------------------------------------------------------------------- refusals


def test_a_reshape_to_a_shape_computed_from_the_data_is_refused(tmp_path: Path) -> None:
    """Reshape's target read from the Shape of NonZero's result: no upper bound. The
    reference still runs it."""
    nodes = [
        helper.make_node("NonZero", ["x"], ["nz"], name="nz"),
        helper.make_node("Shape", ["nz"], ["s"], name="shape"),
        helper.make_node("ReduceProd", ["s"], ["p"], name="prod", keepdims=1),
        helper.make_node("Reshape", ["nz", "p"], ["y"], name="reshape"),
    ]
    model = model_of(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])], ["y"], 13)
    onnx.save(model, tmp_path / "m.onnx")
    x = np.eye(3, 4, dtype=np.float32)
    assert_same(ge.reference.run(ge.load_onnx(tmp_path / "m.onnx")[0], {"x": x}), onnxruntime(model, {"x": x}), "reference")
    with pytest.raises(
        ModelError,
        match=r"DynamicReshape 'reshape' reads data-dependent values \(\[2, \?\] <= \[2, 12\]\), and its result \[\?\] has no upper bound.*-1 takes that dim",
    ):
        ge.compile(tmp_path / "m.onnx", {"soc_version": "Ascend910B1", "export_compile_stat": 0})


def test_an_ai_core_op_reading_a_data_dependent_value_is_refused_at_lowering() -> None:
    """Without precision selection (which places it), an op reading such a value is
    refused by the lowering, which names both ops."""
    module = ir.parse(
        """
        builtin.module {
          ascend_graph.graph @g {
            %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<3x4xf32>
            %nz = ascend_graph.non_zero %x {name = "nz", _engine = "DNN_VM_AICPU"} : (tensor<3x4xf32>) -> tensor<2x?xi64>
            %t = ascend_graph.transpose_d %nz {perm = array<i64: 1, 0>, name = "t"} : (tensor<2x?xi64>) -> tensor<?x2xi64>
            ascend_graph.net_output %t {names = ["y"]} : tensor<?x2xi64>
          }
        }
        """
    )
    with pytest.raises(ModelError, match="TransposeD 't' reads the result of NonZero 'nz', whose shape is known only when it runs, and runs on the AI CPU only"):
        LowerToKernel(soc_version="Ascend910B1").apply(ir.context(), module)
