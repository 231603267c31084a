"""`ge.Session` features of NPURunConfig: the device a session runs on, graph_run_mode's
precision default for `Session.compile`, iterations_per_loop, deterministic, and the
timeouts (op_execute, op_wait, event_sync, stream_sync) in the simulator's time."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ge
from ge.core.errors import ModelError, OptionError, RunTimeout
from ge.core.options import DEVICES
from ge.models import DEMO_MODELS
from ge.om.tasks import EventRecordTask
from ge.session import Session
from ge.sim import timing
from ge.sim.config import RunConfig

RESNET, BERT = DEMO_MODELS


@pytest.fixture(scope="module")
def resnet() -> ge.Model:
    return Session(RunConfig(graph_run_mode=0)).compile(RESNET.path, {"soc_version": "Ascend310P3"})


@pytest.fixture(scope="module")
def unrecorded(resnet: ge.Model) -> ge.Model:
    """The model without its EVENT_RECORD tasks: its EVENT_WAITs wait forever."""
    return dataclasses.replace(resnet, tasks=tuple(t for t in resnet.tasks if not isinstance(t, EventRecordTask)))


# ---------------------------------------------------------------- devices


def test_sessions_on_different_devices_share_nothing(resnet: ge.Model) -> None:
    image = RESNET.sample_inputs(1)
    first, last = Session(RunConfig(session_device_id=0)), Session(RunConfig(session_device_id=DEVICES - 1))
    a, b = first.run(resnet, image), last.run(resnet, image)
    assert (first.device_id, last.device_id) == (0, DEVICES - 1)
    assert first.runtime(resnet) is not last.runtime(resnet)
    assert all(np.array_equal(a.outputs[k], b.outputs[k]) for k in a.outputs) and a.latency_us == b.latency_us


def test_a_device_that_does_not_exist_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(OptionError, match=f"session_device_id {DEVICES} is not allowed; use an integer >= 0 and <= {DEVICES - 1}"):
        RunConfig(session_device_id=DEVICES)
    monkeypatch.setenv("ASCEND_DEVICE_ID", "3")
    assert Session().device_id == 3
    assert Session(RunConfig(session_device_id=1)).device_id == 1  # the option goes before the variable
    monkeypatch.setenv("ASCEND_DEVICE_ID", "9")
    with pytest.raises(OptionError, match="ASCEND_DEVICE_ID '9' is not allowed; use 0 to 7"):
        Session()


# ---------------------------------------------------------------- graph_run_mode


@pytest.mark.parametrize(("mode", "precision"), [(0, "force_fp16"), (1, "allow_fp32_to_fp16")])
def test_graph_run_mode_sets_the_compile_precision_default(mode: int, precision: str) -> None:
    model = Session(RunConfig(graph_run_mode=mode)).compile(RESNET.path, {"soc_version": "Ascend310P3"})
    assert model.options["precision_mode"] == precision


def test_compile_options_given_go_before_the_run_configs() -> None:
    model = Session(RunConfig()).compile(RESNET.path, {"soc_version": "Ascend310P3", "precision_mode_v2": "mixed_float16"})
    assert model.options["precision_mode_v2"] == "mixed_float16" and "precision_mode" not in model.options


# ---------------------------------------------------------------- iterations_per_loop


def test_iterations_per_loop_pays_the_host_once(resnet: ge.Model) -> None:
    one = Session(RunConfig(timing_only=True)).run(resnet)
    ten = Session(RunConfig(timing_only=True, iterations_per_loop=10)).run(resnet)
    device = one.profile.device_us
    host = timing.MODEL_LAUNCH_US + timing.HOST_SYNC_US
    assert (one.iterations, ten.iterations) == (1, 10)
    assert one.total_us == one.latency_us == pytest.approx(host + device)
    assert ten.total_us == pytest.approx(host + 10 * device)
    assert ten.latency_us == pytest.approx(ten.total_us / 10) and ten.latency_us < one.latency_us
    assert ten.outputs == {} and Session(RunConfig(iterations_per_loop=3)).run(resnet, RESNET.sample_inputs(1)).iterations == 3


def test_every_iteration_is_a_dump_step(resnet: ge.Model, tmp_path: Path) -> None:
    config = RunConfig(enable_dump=True, dump_path=str(tmp_path), dump_layer="avgpool", iterations_per_loop=3)
    Session(config).run(resnet, RESNET.sample_inputs(1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0", "1", "2"]


# ---------------------------------------------------------------- deterministic


@pytest.mark.parametrize("deterministic", [0, 1])
def test_runs_are_bitwise_identical_whatever_deterministic_says(resnet: ge.Model, deterministic: int) -> None:
    """No kernel accumulates across cores in arrival order: 1 costs nothing here."""
    image = RESNET.sample_inputs(2)
    session = Session(RunConfig(deterministic=deterministic))
    a, b = session.run(resnet, image), Session(RunConfig(deterministic=deterministic)).run(resnet, image)
    again = session.run(resnet, image)
    for name in a.outputs:
        assert a.outputs[name].tobytes() == b.outputs[name].tobytes() == again.outputs[name].tobytes()
    assert a.latency_us == b.latency_us == Session(RunConfig(deterministic=1 - deterministic)).run(resnet, image).latency_us


# ---------------------------------------------------------------- timeouts


def test_a_wait_that_is_never_recorded_times_out(unrecorded: ge.Model) -> None:
    with pytest.raises(RunTimeout, match=r"task \d+ \(stream \d, wait event \d\): waited longer than op_wait_timeout=120 s \(no record ever came\)"):
        Session(RunConfig(timing_only=True)).run(unrecorded)
    with pytest.raises(RunTimeout, match="waited longer than event_sync_timeout=5 ms"):
        Session(RunConfig(timing_only=True, event_sync_timeout=5)).run(unrecorded)
    with pytest.raises(RunTimeout, match="stream synchronisation timed out: the model had not ended after stream_sync_timeout=5 ms"):
        Session(RunConfig(timing_only=True, op_wait_timeout=0, stream_sync_timeout=5)).run(unrecorded)
    with pytest.raises(ModelError, match="deadlocks"):  # no timeout at all: the deadlock is reported
        Session(RunConfig(timing_only=True, op_wait_timeout=0)).run(unrecorded)


def test_the_stream_sync_timeout_counts_every_iteration(resnet: ge.Model) -> None:
    device_ms = Session(RunConfig(timing_only=True)).run(resnet).profile.device_us / 1e3
    fits = int(1 / device_ms)  # iterations within 1 ms
    Session(RunConfig(timing_only=True, stream_sync_timeout=1, iterations_per_loop=fits)).run(resnet)
    with pytest.raises(RunTimeout, match="stream_sync_timeout=1 ms"):
        Session(RunConfig(timing_only=True, stream_sync_timeout=1, iterations_per_loop=fits + 1)).run(resnet)


def test_a_kernel_longer_than_op_execute_timeout_fails(tmp_path: Path) -> None:
    """A 16384^3 fp16 matmul on one AI core of an Ascend310P3 takes between 1 and 3 s
    (about 1.7 s with the tiling of today: the exact figure is the tiling's business)."""
    n = 16384
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"])], "mm",
        [helper.make_tensor_value_info(x, TensorProto.FLOAT16, [n, n]) for x in "ab"],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [n, n])],
    )  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "mm.onnx")
    model = ge.compile(str(tmp_path / "mm.onnx"), {"soc_version": "Ascend310P3"})
    Session(RunConfig(timing_only=True, aicore_num=1, op_execute_timeout=3)).run(model)
    with pytest.raises(RunTimeout, match=r"task \d+ \('MatMul_0.*'\): the kernel ran [12]\.\d\d s, longer than op_execute_timeout=1 s"):
        Session(RunConfig(timing_only=True, aicore_num=1, op_execute_timeout=1)).run(model)


def test_ge_run_takes_the_loop_and_timeout_flags(resnet: ge.Model, tmp_path: Path) -> None:
    om = resnet.save(tmp_path / "resnet.om")
    ge_run = [str(Path(sys.executable).parent / "ge"), "run", str(om), "--timing-only"]
    looped = subprocess.run([*ge_run, "--iterations_per_loop", "3", "--deterministic", "1"], capture_output=True, text=True)
    assert looped.returncode == 0, looped.stderr
    assert "3 iterations in" in looped.stdout and "per iteration latency" in looped.stdout
    late = subprocess.run([*ge_run, "--iterations_per_loop", "100", "--stream_sync_timeout", "1"], capture_output=True, text=True)
    assert late.returncode != 0 and "stream_sync_timeout=1 ms" in late.stderr and "Traceback" not in late.stderr


def test_instances_run_once(resnet: ge.Model) -> None:
    with pytest.raises(OptionError, match="iterations_per_loop 2 loops one model; run_instances runs each instance once"):
        Session(RunConfig(timing_only=True, iterations_per_loop=2)).run_instances([(resnet, 4)])
