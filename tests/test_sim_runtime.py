"""The simulator's runtime: device memory laid out by the plan, tasks run stream by
stream, numerics through argument addresses only, input fusion, profiles, errors.

The bundled demo models (a small CNN and a BERT-style encoder layer) are compiled
for two parts: the simulated outputs must be the reference interpreter's outputs
of the same compiled graph (the layouts in memory, the plan and the task order
change nothing; only the cube's summation order differs), and onnxruntime's within
the chosen dtypes' tolerance.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import ge
from ge.core import reference
from ge.om import OmError
from ge.om.tasks import KernelTask, MemcpyTask
from ge.core.errors import InputError, ModelError, OptionError
from ge.models import DEMO_MODELS
from ge.sim.config import RunConfig
from ge.session import Session
from ge.sim import timing
from ge.sim.profile import CSV_COLUMNS
from ge.sim.runtime import Runtime

from ge.testing.real_models import onnxruntime_outputs  # noqa: E402

SOCS = ("Ascend310P3", "Ascend910B1")
RESNET, BERT = DEMO_MODELS


@dataclasses.dataclass
class Compiled:
    model: ge.Model
    module: object
    store: object


def compile_demo(demo, soc: str, **options) -> Compiled:
    module, store = ge.load_onnx(demo.path)
    return Compiled(ge.compile(module, {"soc_version": soc, **options}), module, store)


@pytest.fixture(scope="module", params=[(d, s) for d in DEMO_MODELS for s in SOCS], ids=lambda p: f"{p[0].name}-{p[1]}")
def demo(request):
    model, soc = request.param
    return model, compile_demo(model, soc)


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    got, want = got.astype(np.float64), want.astype(np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


# ---------------------------------------------------------------- numerics


def test_outputs_are_the_reference_interpreters_of_the_compiled_graph(demo) -> None:
    """The same graph's values, up to the order of the cube's float32 sums (`ge.sim.kernels.cube`)."""
    model, compiled = demo
    feeds = model.sample_inputs(1)
    want = reference.run(compiled.module, feeds, compiled.store)
    got = Session().run(compiled.model, feeds).outputs
    assert got.keys() == want.keys()
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape
        assert relative_error(got[name], want[name]) < 1e-3, name


def test_outputs_match_onnxruntime_within_float16_tolerance(demo) -> None:
    model, compiled = demo
    feeds = model.sample_inputs(2)
    want = onnxruntime_outputs(model.path, feeds)
    got = Session().run(compiled.model, feeds).outputs
    for name in want:
        assert relative_error(got[name], want[name]) < 5e-3, name


@pytest.mark.parametrize("soc", ["Ascend310P3", "Ascend910B1"])  # on 310P3 the float32 cube ops run on AI CPU
@pytest.mark.parametrize("model", DEMO_MODELS, ids=lambda d: d.name)
def test_keeping_the_origin_dtype_matches_onnxruntime_closely(model, soc: str) -> None:
    compiled = compile_demo(model, soc, precision_mode="must_keep_origin_dtype")
    feeds = model.sample_inputs(3)
    want = onnxruntime_outputs(model.path, feeds)
    got = Session().run(compiled.model, feeds).outputs
    for name in want:
        assert got[name].dtype == want[name].dtype
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-4 * float(np.abs(want[name]).max()))


def kernel_tasks(model: ge.Model) -> list[tuple[int, KernelTask]]:
    return [(i, t) for i, t in enumerate(model.tasks) if isinstance(t, KernelTask)]


def test_a_plan_that_reuses_live_bytes_gives_a_wrong_answer() -> None:
    """Kernels move values only through their argument addresses: point a kernel's
    output at bytes a later kernel still has to read, and the answer changes."""
    compiled = compile_demo(RESNET, "Ascend310P3", enable_single_stream=True)
    model = compiled.model
    feeds = RESNET.sample_inputs(4)
    right = Session().run(model, feeds).outputs["logits"]
    tasks = list(model.tasks)
    kernels = kernel_tasks(model)
    for (i, producer), (j, between), (k, reader) in zip(kernels, kernels[1:], kernels[2:]):
        read = {a.tensor: a for a in reader.inputs}
        victims = [a for a in producer.outputs if a.tensor in read and all(b.tensor != a.tensor for b in between.inputs)]
        if victims and between.outputs[0].size <= victims[0].size:
            out = dataclasses.replace(between.outputs[0], addr=victims[0].addr)
            tasks[j] = dataclasses.replace(between, outputs=(out, *between.outputs[1:]))
            break
    else:
        raise AssertionError("no producer -> other kernel -> reader chain in the model")
    broken = dataclasses.replace(model, tasks=tuple(tasks))
    wrong = Session().run(broken, feeds).outputs["logits"]
    assert not np.array_equal(wrong, right)


def test_weights_are_read_from_the_weight_region() -> None:
    compiled = compile_demo(RESNET, "Ascend310P3")
    weights = bytearray(compiled.model.weights)
    weights[: len(weights) // 2] = bytes(len(weights) // 2)
    zeroed = dataclasses.replace(compiled.model, weights=bytes(weights))
    feeds = RESNET.sample_inputs(5)
    assert not np.array_equal(Session().run(zeroed, feeds).outputs["logits"], Session().run(compiled.model, feeds).outputs["logits"])


# -------------------------------------------------------------- the runtime


def h2d_records(profile) -> list:
    return [r for r in profile.records if r.kind == "MEMCPY_ASYNC" and r.name.startswith("H2D")]


def test_small_inputs_go_in_one_fused_copy() -> None:
    compiled = compile_demo(BERT, "Ascend910B1")
    feeds = BERT.sample_inputs(6)
    fused = Session(RunConfig()).run(compiled.model, feeds)
    apart = Session(RunConfig(input_fusion_size=0)).run(compiled.model, feeds)
    copies = [r for r in h2d_records(fused.profile) if r.duration > 0]
    assert len(copies) == 1 and "fused with 1 more" in copies[0].name
    assert len([r for r in h2d_records(apart.profile) if r.duration > 0]) == 2
    assert apart.latency_us - fused.latency_us == pytest.approx(timing.MEMCPY_LATENCY_US, rel=1e-6)
    for name, value in fused.outputs.items():
        np.testing.assert_array_equal(value, apart.outputs[name])


def test_inputs_above_the_fusion_size_go_alone() -> None:
    compiled = compile_demo(BERT, "Ascend910B1")
    below = min(d.size for d in compiled.model.inputs) - 1
    profile = Session(RunConfig(input_fusion_size=below)).run(compiled.model, BERT.sample_inputs(6)).profile
    assert [r.name for r in h2d_records(profile)] == ["H2D 'input_ids'", "H2D 'attention_mask'"]


def test_timing_only_needs_no_inputs_and_computes_nothing() -> None:
    compiled = compile_demo(RESNET, "Ascend910B1")
    timed = Session(RunConfig(timing_only=True)).run(compiled.model)
    full = Session().run(compiled.model, RESNET.sample_inputs(7))
    assert timed.outputs == {}
    assert timed.latency_us == full.latency_us
    assert timed.profile.records == full.profile.records


def test_fewer_cores_take_longer_and_more_than_the_chip_has_is_refused() -> None:
    compiled = compile_demo(RESNET, "Ascend910B1")
    all_cores = Session(RunConfig(timing_only=True)).run(compiled.model)
    one = Session(RunConfig(timing_only=True, aicore_num=1)).run(compiled.model)
    assert one.profile.device_us > 2 * all_cores.profile.device_us  # the host's share does not depend on the cores
    assert {b.core for r in one.profile.kernels() for b in r.blocks if r.core_type == "AiCore"} == {0}
    with pytest.raises(OptionError, match="aicore_num 25 is more than Ascend910B1's 24 AI cores"):
        Runtime(compiled.model, RunConfig(aicore_num=25))


def test_the_session_takes_a_path_and_a_list_of_inputs(tmp_path) -> None:
    compiled = compile_demo(BERT, "Ascend310P3")
    path = compiled.model.save(tmp_path / "bert.om")
    feeds = BERT.sample_inputs(8)
    session = Session()
    by_name = session.run(path, feeds)
    by_order = session.run(path, [feeds[d.name] for d in compiled.model.inputs])
    assert session.runtime(path) is session.runtime(path)
    for name, value in by_name.outputs.items():
        np.testing.assert_array_equal(value, by_order.outputs[name])
    assert by_name.latency_us == by_name.profile.latency_us > by_name.profile.device_us
    assert by_name.throughput == pytest.approx(1e6 / by_name.latency_us)


# ----------------------------------------------------------------- profiles


def test_profile_files(tmp_path) -> None:
    compiled = compile_demo(RESNET, "Ascend310P3")
    result = Session(RunConfig(profile_level="pipe")).run(compiled.model, RESNET.sample_inputs(9))
    csv_path, trace_path = result.profile.write(tmp_path / "prof")[:2]  # and roofline.png with matplotlib
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert len(rows) == len(kernel_tasks(compiled.model))
    for row in rows:
        assert row["bound"] in ("cube", "vector", "memory", "latency")
        assert float(row["duration_us"]) == pytest.approx(float(row["duration_cycles"]) / 1060, rel=1e-3)
        assert float(row["wait_us"]) >= timing.KERNEL_LAUNCH_US - 1e-3  # the launch (and cores another stream holds): not in the duration
        assert all(0.0 <= float(row[c]) <= 1.0 for c in ("mac_ratio", "vec_ratio", "mte2_ratio", "mte3_ratio"))
    assert {r["bound"] for r in rows if r["op_type"].startswith("Conv2D")} <= {"cube", "memory", "latency"}
    trace = json.loads(Path(trace_path).read_text())["traceEvents"]
    names = {e["args"]["name"] for e in trace if e["ph"] == "M" and e["name"] in ("process_name", "thread_name")}
    assert {"Host", "Streams", "stream 0", "AI Core 0", "blocks", "M", "MTE2"} <= names
    spans = [e for e in trace if e["ph"] == "X"]
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)
    assert {e["cat"] for e in spans} >= {"host", "KERNEL", "MEMCPY_ASYNC", "block", "pipe"}


def test_the_task_level_trace_has_no_pipe_tracks() -> None:
    compiled = compile_demo(RESNET, "Ascend310P3")
    trace = Session(RunConfig(timing_only=True)).run(compiled.model).profile.trace()["traceEvents"]
    assert not [e for e in trace if e.get("cat") == "pipe"]


# ------------------------------------------------------------------- errors


@pytest.fixture(scope="module")
def bert_runtime() -> Runtime:
    return Runtime(compile_demo(BERT, "Ascend310P3").model)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: {k: v for k, v in f.items() if k != "attention_mask"}, "input 'attention_mask' (int64[1, 16]) is missing"),
        (lambda f: {**f, "input_ids": f["input_ids"].astype(np.int32)}, "input 'input_ids' has dtype int32, expected int64"),
        (lambda f: {**f, "input_ids": f["input_ids"][:, :8]}, "input 'input_ids' has shape [1, 8], expected [1, 16]"),
        (lambda f: {**f, "token_type_ids": f["input_ids"]}, "'token_type_ids' is not an input of the model"),
    ],
)
def test_bad_inputs_are_refused(bert_runtime: Runtime, change, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")):
        bert_runtime.run(change(BERT.sample_inputs(0)))


def test_a_corrupt_model_file_is_refused(tmp_path) -> None:
    path = compile_demo(RESNET, "Ascend310P3").model.save(tmp_path / "r.om")
    data = bytearray(Path(path).read_bytes())
    data[len(data) // 2] ^= 0xFF
    Path(path).write_bytes(bytes(data))
    with pytest.raises(OmError, match="does not match its SHA-256 seal"):
        Session().run(path, RESNET.sample_inputs(0))


def test_a_task_for_a_kernel_the_model_lacks_is_refused() -> None:
    model = compile_demo(RESNET, "Ascend310P3").model
    tasks = list(model.tasks)
    i, task = kernel_tasks(model)[0]
    tasks[i] = dataclasses.replace(task, kernel="te_missing_0")
    with pytest.raises(ModelError, match="launches kernel @te_missing_0, which the model does not hold"):
        Runtime(dataclasses.replace(model, tasks=tuple(tasks)))


def test_an_argument_outside_device_memory_is_refused() -> None:
    model = compile_demo(RESNET, "Ascend310P3").model
    tasks = list(model.tasks)
    i, task = next((i, t) for i, t in enumerate(tasks) if isinstance(t, MemcpyTask))
    tasks[i] = dataclasses.replace(task, arg=dataclasses.replace(task.arg, addr=model.memory.total))
    with pytest.raises(ModelError, match="lies outside the"):
        Runtime(dataclasses.replace(model, tasks=tuple(tasks)))


def test_a_wait_without_a_record_deadlocks_with_a_clear_error() -> None:
    model = compile_demo(RESNET, "Ascend310P3").model
    from ge.om.tasks import EventRecordTask

    tasks = [t for t in model.tasks if not isinstance(t, EventRecordTask)]
    with pytest.raises(ModelError, match="deadlocks"):
        Runtime(dataclasses.replace(model, tasks=tuple(tasks)), RunConfig(timing_only=True, op_wait_timeout=0)).run()
