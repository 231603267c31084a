"""The AI CPU engine: ops precision selection sends to DNN_VM_AICPU become AiCpu kernels
of their own, launched by KERNEL_EX tasks, computed by the reference kernels and timed
by the SoC's AI CPU cost model; the task kind survives a `.om` round trip and a
tampered one is refused."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import ge
from dialects.ascend_kernel import AICPU, KernelOp
from ge.core import soc as socs
from ge.core.errors import ModelError
from ge.om import OmError, limits
from ge.om import model as om
from ge.om.tasks import AicpuTask, KernelTask
from ge.sim.runtime import Runtime, aicpu_cycles
from tests.test_om_hostile import entries, sealed, with_description

SOC = "Ascend910B1"
KEEP = {"soc_version": SOC, "precision_mode": "must_keep_origin_dtype", "export_compile_stat": 0}
NP = {TensorProto.FLOAT: np.float32, TensorProto.DOUBLE: np.float64, TensorProto.UINT16: np.uint16,
      TensorProto.UINT32: np.uint32, TensorProto.UINT64: np.uint64, TensorProto.BOOL: np.bool_}


def one_op(op_type: str, dtype: int, shape: list[int], out_dtype: int | None = None, n_inputs: int = 2, **attrs) -> onnx.ModelProto:
    names = [f"x{i}" for i in range(n_inputs)]
    inputs = [helper.make_tensor_value_info(n, dtype, shape) for n in names]
    out = helper.make_tensor_value_info("y", out_dtype if out_dtype is not None else dtype, None)
    graph = helper.make_graph([helper.make_node(op_type, names, ["y"], name=op_type.lower(), **attrs)], "g", inputs, [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for vi in model.graph.input:
        dtype = NP[vi.type.tensor_type.elem_type]
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        out[vi.name] = rng.integers(1, 200, shape).astype(dtype) if np.issubdtype(dtype, np.integer) else rng.normal(size=shape).astype(dtype)
    return out


def run_both(model: onnx.ModelProto, tmp_path: Path, options: dict | None = None) -> tuple[ge.Model, ge.session.Result, list[np.ndarray]]:
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    compiled = ge.compile(path, options or KEEP)
    x = feeds(model)
    with ge.Session() as session:
        result = session.run(compiled, x)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, x)
    return compiled, result, expected


def aicpu_tasks(model: ge.Model) -> list[AicpuTask]:
    return [t for t in model.tasks if isinstance(t, AicpuTask)]


@pytest.mark.parametrize(
    ("op_type", "dtype", "out_dtype"),
    [
        ("Add", TensorProto.UINT32, None),
        ("Mul", TensorProto.UINT64, None),
        ("Sub", TensorProto.UINT16, None),
        ("Max", TensorProto.DOUBLE, None),
        ("Div", TensorProto.DOUBLE, None),
        ("Greater", TensorProto.UINT64, TensorProto.BOOL),
        ("Equal", TensorProto.UINT16, TensorProto.BOOL),
    ],
)
def test_float64_and_unsigned_ops_run_on_ai_cpu(op_type: str, dtype: int, out_dtype: int | None, tmp_path: Path) -> None:
    model = one_op(op_type, dtype, [3, 5], out_dtype)
    compiled, result, expected = run_both(model, tmp_path)
    (task,) = aicpu_tasks(compiled)
    assert task.op_type in (op_type, "Maximum") and task.block_dim == 1 and task.workspace == ()
    assert not any(type(t) is KernelTask for t in compiled.tasks)
    assert compiled.build["aicpu_kernels"] == 1
    np.testing.assert_array_equal(result.outputs["y"], expected[0])
    assert result.outputs["y"].dtype == expected[0].dtype
    (row,) = result.profile.rows()
    assert (row.record.kind, row.record.core_type, row.bound) == ("KERNEL_EX", AICPU, "aicpu")


@pytest.mark.parametrize(("src", "dst"), [(TensorProto.DOUBLE, TensorProto.FLOAT), (TensorProto.UINT32, TensorProto.FLOAT), (TensorProto.FLOAT, TensorProto.UINT64)])
def test_casts_from_and_to_types_ai_core_lacks_run_on_ai_cpu(src: int, dst: int, tmp_path: Path) -> None:
    model = one_op("Cast", src, [4, 6], dst, n_inputs=1, to=dst)
    compiled, result, expected = run_both(model, tmp_path)
    assert [t.op_type for t in aicpu_tasks(compiled)] == ["Cast"]
    np.testing.assert_array_equal(result.outputs["y"], expected[0])


def sandwich() -> onnx.ModelProto:
    """Relu (AI Core) -> Cast to float64 -> Mul in float64 (AI CPU) -> Cast back -> Relu, Add (AI Core)."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Cast", ["r"], ["r64"], name="up", to=TensorProto.DOUBLE),
        helper.make_node("Mul", ["r64", "r64"], ["m"], name="square64"),
        helper.make_node("Cast", ["m"], ["m32"], name="down", to=TensorProto.FLOAT),
        helper.make_node("Relu", ["m32"], ["s"], name="relu2"),
        helper.make_node("Add", ["s", "x"], ["y"], name="add"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])


def test_an_ai_cpu_op_between_ai_core_ops_is_a_kernel_of_its_own(tmp_path: Path) -> None:
    compiled, result, expected = run_both(sandwich(), tmp_path)
    kernels = [op for op in compiled.kernel_module().ops if isinstance(op, KernelOp)]
    on_cpu = [k for k in kernels if k.core_type.data == AICPU]
    assert [k.op_types.data[0].data for k in on_cpu if k.op_types.data[0].data == "Mul"] == ["Mul"]
    for k in kernels:  # a UB scope never mixes engines
        engines = {op.attributes.get("_engine") is not None for op in k.compute.block.ops if hasattr(op, "OP_TYPE")}
        assert engines == {k.core_type.data == AICPU}, k.sym_name.data
    assert any(k.core_type.data != AICPU for k in kernels)
    order = [t.KIND for t in compiled.tasks if isinstance(t, KernelTask)]
    assert "KERNEL" in order and "KERNEL_EX" in order
    np.testing.assert_allclose(result.outputs["y"], expected[0], rtol=1e-6, atol=1e-6)
    engines = {r.record.name: r.record.core_type for r in result.profile.rows()}
    assert engines["square64"] == AICPU and engines["relu"] != AICPU


def test_the_profile_shows_the_engine(tmp_path: Path) -> None:
    _, result, _ = run_both(sandwich(), tmp_path)
    result.profile.write(tmp_path / "prof")
    with open(tmp_path / "prof" / "op_summary.csv") as f:
        rows = {r["op_name"]: r for r in csv.DictReader(f)}
    assert rows["square64"]["core_type"] == AICPU and rows["square64"]["bound"] == "aicpu"
    assert rows["relu"]["core_type"] != AICPU
    trace = json.loads((tmp_path / "prof" / "trace.json").read_text())["traceEvents"]
    assert any(e["ph"] == "M" and e["args"].get("name", "").startswith("AI CPU") for e in trace)
    (task,) = [e for e in trace if e.get("cat") == "KERNEL_EX" and e["name"] == "square64"]
    assert task["args"]["engine"] == "DNN_VM_AICPU" and task["args"]["op_type"] == "Mul"
    assert result.profile.summary()["aicpu_kernels"] == len(result.profile.aicpu_kernels()) >= 1


@pytest.mark.parametrize("shape", [[16], [4096], [262144]])
def test_the_cost_model_is_the_socs(shape: list[int], tmp_path: Path) -> None:
    _, result, _ = run_both(one_op("Add", TensorProto.UINT32, shape), tmp_path)
    (row,) = result.profile.rows()
    n = int(np.prod(shape))
    assert row.record.duration == pytest.approx(aicpu_cycles(socs.load(SOC), 3 * 4 * n, 3 * n))


def test_timing_grows_with_size(tmp_path: Path) -> None:
    durations = []
    for n in (64, 16384, 1 << 20):
        model = one_op("Add", TensorProto.UINT32, [n])
        path = tmp_path / f"m{n}.onnx"
        onnx.save(model, path)
        compiled = ge.compile(path, KEEP)
        run = Runtime(compiled, ge.RunConfig(timing_only=True)).run()
        (record,) = run.profile.aicpu_kernels()
        durations.append(record.duration)
    assert durations == sorted(durations) and durations[-1] > 10 * durations[0]
    launch = socs.load(SOC).aicpu.launch_us * socs.load(SOC).clock_mhz
    assert durations[0] == pytest.approx(launch, rel=0.05)  # a small task is mostly its launch


def two_branches() -> onnx.ModelProto:
    nodes = [helper.make_node("Add", ["a", "b"], ["y0"], name="left"), helper.make_node("Mul", ["a", "b"], ["y1"], name="right")]
    ins = [helper.make_tensor_value_info(n, TensorProto.UINT32, [1 << 16]) for n in "ab"]
    outs = [helper.make_tensor_value_info(n, TensorProto.UINT32, None) for n in ("y0", "y1")]
    return helper.make_model(helper.make_graph(nodes, "g", ins, outs), opset_imports=[helper.make_opsetid("", 17)])


def test_stream_max_parallel_num_bounds_the_ai_cpu_tasks_at_once(tmp_path: Path, caplog) -> None:
    path = tmp_path / "two.onnx"
    onnx.save(two_branches(), path)
    spans = {}
    for parallel in (None, 1):
        options = dict(KEEP)
        if parallel is not None:
            options["stream_max_parallel_num"] = f"AIcoreEngine:4,DNN_VM_AICPU:{parallel}"
        compiled = ge.compile(path, options)
        assert compiled.build["aicpu_parallel"] == (parallel or socs.load(SOC).aicpu.cores)
        assert len({t.stream for t in aicpu_tasks(compiled)}) == 2
        records = Runtime(compiled, ge.RunConfig(timing_only=True)).run().profile.aicpu_kernels()
        spans[parallel] = sorted((r.blocks[0].start, r.blocks[0].end) for r in records)
    (_, a1), (b0, _) = spans[None]
    assert b0 < a1  # on two AI CPU cores, the branches overlap
    (_, a1), (b0, _) = spans[1]
    assert b0 >= a1  # on one, the second waits for the first
    options = {**KEEP, "stream_max_parallel_num": "DNN_VM_AICPU:99"}
    with caplog.at_level("WARNING", logger="ge"):
        assert ge.compile(path, options).build["aicpu_parallel"] == socs.load(SOC).aicpu.cores
    assert "DNN_VM_AICPU:99 is more than Ascend910B1's" in caplog.text


@pytest.mark.parametrize(("aicore_num", "aicpu"), [(None, 6), (12, 3), (6, 1), (1, 1)])
def test_a_slice_of_the_chip_has_its_share_of_the_ai_cpu_cores(aicore_num: int | None, aicpu: int, tmp_path: Path) -> None:
    onnx.save(two_branches(), tmp_path / "two.onnx")
    compiled = ge.compile(tmp_path / "two.onnx", KEEP)
    runtime = Runtime(compiled, ge.RunConfig(timing_only=True, aicore_num=aicore_num))
    assert socs.load(SOC).aicpu.cores == 6 and runtime.aicpu_parallel == aicpu


def test_om_round_trip_keeps_the_ai_cpu_tasks(tmp_path: Path) -> None:
    compiled, result, _ = run_both(sandwich(), tmp_path)
    loaded = ge.load_model(compiled.save(tmp_path / "s.om"))
    assert loaded == compiled and aicpu_tasks(loaded) == aicpu_tasks(compiled) != []
    with ge.Session() as session:
        again = session.run(loaded, feeds(sandwich()))
    np.testing.assert_array_equal(again.outputs["y"], result.outputs["y"])
    assert [r.record.duration for r in again.profile.rows()] == [r.record.duration for r in result.profile.rows()]


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("aicpu")
    onnx.save(sandwich(), folder / "s.onnx")
    return Path(ge.compile(folder / "s.onnx", KEEP).save(folder / "s.om"))


def first_ex(description: dict) -> dict:
    return next(t for t in description["tasks"] if t["kind"] == "KERNEL_EX")


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        (lambda t: t.update(op_type=""), ("op_type is empty",)),
        (lambda t: t.update(op_type=7), ("op_type must be a string",)),
        (lambda t: t.update(op_type="x" * (limits.TEXT_CHARS + 1)), ("op_type has", f"at most {limits.TEXT_CHARS}")),
        (lambda t: t.pop("op_type"), ("op_type is missing",)),
        (lambda t: t.update(inputs=[[0, 0, 4]] * (limits.ARGS + 1)), ("inputs has", f"at most {limits.ARGS}")),
        (lambda t: t.update(outputs=[[0, -1, 4]]), ("outputs[0][1] is -1",)),
        (lambda t: t.update(kernel="nowhere"), ("kernel is 'nowhere'",)),
        (lambda t: t.update(stream=99), ("stream is 99",)),
    ],
)
def test_tampered_ai_cpu_task_fields_are_refused(saved: Path, tmp_path: Path, change, fragments: tuple[str, ...]) -> None:
    bad = with_description(saved, tmp_path / "bad.om", lambda d: change(first_ex(d)))
    with pytest.raises(OmError) as info:
        om.read(bad)
    message = str(info.value)
    assert str(bad) in message and "KERNEL_EX" not in message or "tasks[" in message
    for fragment in fragments:
        assert fragment in message, message


def test_a_task_of_the_wrong_kind_for_its_kernel_is_refused(saved: Path, tmp_path: Path) -> None:
    def swap(d: dict) -> None:
        ex = first_ex(d)
        kernel = next(t for t in d["tasks"] if t["kind"] == "KERNEL")
        ex["kernel"], kernel["kernel"] = kernel["kernel"], ex["kernel"]

    bad = om.read(with_description(saved, tmp_path / "swap.om", swap))
    with pytest.raises(ModelError, match=r"a (KERNEL_EX|KERNEL) task launches @\w+, a (AiCore|VectorCore|AiCpu) kernel; AI CPU kernels are launched by KERNEL_EX tasks"):
        Runtime(bad)


@pytest.mark.parametrize("value", [0, 10**9, "6", True])
def test_a_tampered_ai_cpu_parallelism_is_refused(saved: Path, tmp_path: Path, value: object) -> None:
    bad = om.read(with_description(saved, tmp_path / "parallel.om", lambda d: d["build"].update(aicpu_parallel=value)))
    with pytest.raises(ModelError, match="build entry 'aicpu_parallel'"):
        Runtime(bad)


def test_a_huge_argument_dim_in_an_ai_cpu_kernel_is_refused(saved: Path, tmp_path: Path) -> None:
    contents = entries(saved)
    text = contents[om.KERNELS].decode()
    start = text.index("@aicpu_")
    head, tail = text[:start], text[start:]
    contents[om.KERNELS] = (head + tail.replace("array<i64: 4, 64>", "array<i64: " + "9" * 30 + ", 64>", 1)).encode()
    bad = sealed(tmp_path / "dims.om", contents)
    with pytest.raises((OmError, ModelError), match="digits|dim|does not"):
        Runtime(om.read(bad))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('block_dim = 1 : i64, core_type = "AiCpu"', 'block_dim = 2 : i64, core_type = "AiCpu"', "an AiCpu kernel has block_dim 1"),
        ('tiling = {}', 'tiling = {tiles = 1 : i64}', "an AiCpu kernel has block_dim 1, no workspace and no tiling"),
    ],
)
def test_an_ai_cpu_kernel_is_one_block_without_tiling(saved: Path, old: str, new: str, message: str) -> None:
    from xdsl.utils.exceptions import VerifyException

    from ge.core import ir

    text = entries(saved)[om.KERNELS].decode()
    start = text.index("ascend_kernel.kernel @aicpu_")
    kernel = text[start : text.index("\n}\n", text.index("} program {", start)) + 3]
    assert old in kernel
    with pytest.raises(VerifyException, match=message):
        ir.parse(kernel.replace(old, new, 1), "k.mlir")


@pytest.mark.parametrize("op_type", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"])
def test_an_empty_reduction_compiles_to_its_identity(op_type: str, tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 0, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    node = helper.make_node(op_type, ["x", "axes"], ["y"], name="r", keepdims=1)
    model = helper.make_model(helper.make_graph([node], "g", [x], [y], [axes]), opset_imports=[helper.make_opsetid("", 18)])
    _, result, expected = run_both(model, tmp_path)
    np.testing.assert_array_equal(result.outputs["y"], expected[0])
