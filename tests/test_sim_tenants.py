"""Virtual instances: models side by side on disjoint slices of one chip, sharing its
GM bandwidth through the ledger (`ge.sim.chip`, `timing.GmLedger`, `ge run --instances`)."""

from __future__ import annotations

import csv
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ge
from ge.core import soc as socs
from ge.core.errors import OptionError
from ge.models import DEMO_MODELS
from ge.session import Session
from ge.sim import chip as chips
from ge.sim import timing
from ge.sim.config import RunConfig

SOC = "Ascend310P3"
BIN = Path(sys.executable).parent
RESNET, BERT = DEMO_MODELS


@pytest.fixture(scope="module")
def demos(tmp_path_factory) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("tenants")
    paths = []
    for demo in (RESNET, BERT):
        path = directory / f"{demo.name}.om"
        ge.compile(demo.path, {"soc_version": SOC}).save(path)
        paths.append(path)
    return paths[0], paths[1]


@pytest.fixture(scope="module")
def memory_bound(tmp_path_factory) -> ge.Model:
    """Four elementwise ops on 2^21 float16 values, each its own kernel (UB fusion off):
    on 4 of the 8 cores each already asks for about the chip's GM bandwidth."""
    directory = tmp_path_factory.mktemp("chain")
    n = 1 << 21
    nodes = [helper.make_node("Add", ["a", "b"], ["y0"], name="op0")]
    for i in range(1, 4):
        nodes.append(helper.make_node("Mul" if i % 2 else "Add", [f"y{i - 1}", "b" if i % 2 else "a"], [f"y{i}"], name=f"op{i}"))
    inputs = [helper.make_tensor_value_info(x, TensorProto.FLOAT16, [n]) for x in "ab"]
    graph = helper.make_graph(nodes, "chain", inputs, [helper.make_tensor_value_info("y3", TensorProto.FLOAT16, [n])])
    path = directory / "chain.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    switch = directory / "switch.cfg"
    switch.write_text("AutomaticUbFusion:off\n")
    return ge.compile(path, {"soc_version": SOC, "fusion_switch_file": str(switch)})


# ------------------------------------------------------------------- ledger


def test_a_phase_alone_is_stretched_only_past_the_chips_bandwidth() -> None:
    ledger = timing.GmLedger(100.0)
    assert ledger.offer(0.0, 100.0, 8_000.0).cycles == 100.0
    assert ledger.offer(0.0, 100.0, 30_000.0).cycles == 30_000.0 / 100.0


def test_concurrent_phases_past_the_chips_bandwidth_stretch_the_later_one() -> None:
    """The first takes 80 of 100 bytes a cycle; the second gets the 20 left while the
    first runs, then all 100, and so ends 75 cycles later than alone."""
    ledger = timing.GmLedger(100.0)
    first = ledger.offer(0.0, 100.0, 8_000.0)
    ledger.reserve(first, first.cycles)
    second = ledger.offer(0.0, 100.0, 8_000.0)
    assert second.cycles == pytest.approx(175.0)
    assert sum((hi - lo) * rate for lo, hi, rate in second.pieces) == pytest.approx(8_000.0)
    ledger.reserve(second, second.cycles)
    assert ledger.offer(175.0, 100.0, 8_000.0).cycles == 100.0  # after both: the chip is free again


def test_concurrent_phases_within_the_bandwidth_do_not_stretch() -> None:
    ledger = timing.GmLedger(100.0)
    for _ in range(2):
        grant = ledger.offer(10.0, 100.0, 4_000.0)
        assert grant.cycles == 100.0
        ledger.reserve(grant, 110.0)


def test_kernels_on_two_slices_share_the_ledger() -> None:
    t = timing.BlockTiming(1000.0, (1000.0,), (60_000.0,), (0.0,) * 7, 60_000.0, 0.0, 0.0, 0.0, 1.0, None)
    rate = 4 * 60.0  # four blocks at once move 4 * 60 bytes a cycle: the chip's rate, exactly
    alone = timing.run_kernel(timing.Cores({"AiCore": 4}), "AiCore", 0.0, 4, t, timing.GmLedger(rate))
    ledger = timing.GmLedger(rate)
    first = timing.run_kernel(timing.Cores({"AiCore": 4}), "AiCore", 0.0, 4, t, ledger)
    second = timing.run_kernel(timing.Cores({"AiCore": 4}), "AiCore", 0.0, 4, t, ledger)
    assert alone.end == first.end == 1000.0 and alone.stretch == 1.0
    assert second.end == pytest.approx(2000.0) and second.stretch == pytest.approx(2.0)


# ------------------------------------------------------------------ tenants


def test_tenants_compute_their_outputs_alone_and_take_no_less_time(demos: tuple[Path, Path]) -> None:
    feeds = [RESNET.sample_inputs(0), BERT.sample_inputs(0)]
    chip = Session().run_instances([(demos[0], 4), (demos[1], 4)], feeds)
    assert chip.soc == SOC and chip.outputs_match
    for t, path, x in zip(chip.tenants, demos, feeds):
        alone = Session(RunConfig(aicore_num=4)).run(path, x)
        assert t.outputs.keys() == alone.outputs.keys()
        for name, value in alone.outputs.items():
            np.testing.assert_array_equal(t.outputs[name], value)
        assert t.latency_alone_us == alone.latency_us
        assert t.latency_us >= t.latency_alone_us and t.slowdown >= 1.0
        assert t.throughput == pytest.approx(t.shared.batch / (t.latency_us * 1e-6))
    assert [t.shared.cores for t in chip.tenants] == [{"AiCore": 4, "VectorCore": 3}] * 2
    assert [t.first_cores["AiCore"] for t in chip.tenants] == [0, 4]


def test_a_memory_bound_pair_slows_both_tenants(memory_bound: ge.Model) -> None:
    feeds = {"a": np.ones(1 << 21, np.float16), "b": np.full(1 << 21, 2, np.float16)}
    chip = Session().run_instances([(memory_bound, 4), (memory_bound, 4)], [feeds, feeds])
    assert chip.outputs_match
    for t in chip.tenants:
        assert t.latency_us > 1.1 * t.latency_alone_us
        assert max(r.stretch for r in t.shared.kernels()) > max(r.stretch for r in t.alone.kernels())


def test_one_tenant_on_the_whole_chip_runs_as_the_model_alone(memory_bound: ge.Model) -> None:
    chip = Session(RunConfig(timing_only=True)).run_instances([(memory_bound, 8)])
    (t,) = chip.tenants
    alone = Session(RunConfig(timing_only=True)).run(memory_bound).profile
    assert t.shared.records == alone.records and t.slowdown == 1.0


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("slices", "message"),
    [
        ((4, 8), "the instances ask for 12 AI cores (4 + 8); Ascend310P3 has 8, so their slices would overlap"),
        ((3, 4), "asks for 3 AI cores; a virtual instance of Ascend310P3 has 1, 2, 4, 8"),
        ((0, 4), "asks for 0 AI cores; a virtual instance of Ascend310P3 has 1, 2, 4, 8"),
    ],
)
def test_slices_that_do_not_fit_the_chip_are_refused(demos: tuple[Path, Path], slices: tuple[int, int], message: str) -> None:
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        Session(RunConfig(timing_only=True)).run_instances(list(zip(demos, slices)))


def test_a_soc_without_virtual_instances_is_refused() -> None:
    model = ge.compile(RESNET.path, {"soc_version": "Ascend310"})
    with pytest.raises(OptionError, match="Ascend310 has no virtual instances"):
        Session(RunConfig(timing_only=True)).run_instances([(model, 1)])


def test_models_for_different_socs_are_refused(demos: tuple[Path, Path]) -> None:
    other = ge.compile(BERT.path, {"soc_version": "Ascend910B1"})
    with pytest.raises(OptionError, match="model 1 is compiled for Ascend910B1, model 0 for Ascend310P3; every instance must be for the same SoC"):
        Session(RunConfig(timing_only=True)).run_instances([(ge.load_model(demos[0]), 4), (other, 4)])


def test_tenants_needing_more_than_the_devices_memory_are_refused(demos: tuple[Path, Path], monkeypatch) -> None:
    """Each fits the device alone; together they do not."""
    sizes = [ge.load_model(path).memory.total for path in demos]
    small = dataclasses.replace(socs.load(SOC), device_memory_bytes=sum(sizes) - 1)
    monkeypatch.setattr(chips.socs, "load", lambda name: small)
    with pytest.raises(OptionError, match=f"the instances need {sum(sizes):,} bytes of device memory in all; Ascend310P3 has {sum(sizes) - 1:,}"):
        Session(RunConfig(timing_only=True)).run_instances([(demos[0], 4), (demos[1], 4)])


def test_aicore_num_and_instances_together_are_refused(demos: tuple[Path, Path]) -> None:
    with pytest.raises(OptionError, match="aicore_num 2 is for one model"):
        Session(RunConfig(timing_only=True, aicore_num=2)).run_instances([(demos[0], 4)])


# --------------------------------------------------------------------- CLI


def ge_run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "ge"), "run", *map(str, args)], capture_output=True, text=True, cwd=cwd, check=False)


def assert_fails_cleanly(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ge: error: ") and fragment in lines[0], result.stderr


def test_run_instances_prints_the_table_and_writes_both_tenants(demos: tuple[Path, Path], tmp_path: Path) -> None:
    result = ge_run("--instances", f"{demos[0]}:4,{demos[1]}:2", "--seed", "1", "--profile", tmp_path / "prof")
    assert result.returncode == 0, result.stderr
    assert "2 virtual instances on Ascend310P3" in result.stdout and "with numerics" in result.stdout
    for line, path, cores in zip([l for l in result.stdout.splitlines() if ".om" in l], demos, ("4 (+3 vector)", "2 (+1 vector)")):
        assert str(path) in line and cores in line and line.rstrip(" │").endswith("yes")
    with open(tmp_path / "prof" / "op_summary.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["tenant"] for r in rows} == {f"{demos[0]} on 4 AI cores", f"{demos[1]} on 2 AI cores"}
    trace = json.loads((tmp_path / "prof" / "trace.json").read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in trace if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {1: f"tenant 0: {demos[0]} on 4 AI cores", 2: f"tenant 1: {demos[1]} on 2 AI cores"}
    assert {e["pid"] for e in trace if e.get("cat") == "block"} == {1, 2}
    threads = {e["args"]["name"] for e in trace if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == 2}
    assert "AI Core 4: blocks" in threads and "AI Core 0: blocks" not in threads


def test_run_instances_timing_only(demos: tuple[Path, Path]) -> None:
    result = ge_run("--instances", f"{demos[0]}:4, {demos[1]}:4", "--timing-only")
    assert result.returncode == 0, result.stderr
    assert "timing only" in result.stdout and "outputs as alone" not in result.stdout
    chip = Session(RunConfig(timing_only=True)).run_instances([(demos[0], 4), (demos[1], 4)])
    for t in chip.tenants:
        assert f"{t.latency_us:,.1f}" in result.stdout and f"{t.slowdown:.2f}x" in result.stdout


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{r}", "is not MODEL.om:AICORES; use pairs joined by ','"),
        ("{r}:four", "is not MODEL.om:AICORES"),
        ("{r}:4,", "'' is not MODEL.om:AICORES"),
        ("missing.om:4", "'missing.om': no such model file"),
        ("{r}:4,{b}:8", "so their slices would overlap"),
        ("{r}:3", "asks for 3 AI cores; a virtual instance of Ascend310P3 has 1, 2, 4, 8"),
    ],
)
def test_run_instances_refuses_bad_instances(demos: tuple[Path, Path], text: str, fragment: str) -> None:
    assert_fails_cleanly(ge_run("--instances", text.format(r=demos[0], b=demos[1]), "--timing-only"), fragment)


def test_run_instances_refuses_a_model_or_inputs_beside_it(demos: tuple[Path, Path]) -> None:
    assert_fails_cleanly(ge_run(demos[0], "--instances", f"{demos[1]}:4"), "give no model, --input, --output or --aicore_num")
    assert_fails_cleanly(ge_run("--instances", f"{demos[1]}:4", "--aicore_num", "2"), "give no model, --input, --output or --aicore_num")
    assert_fails_cleanly(ge_run("--timing-only"), "give a .om model to run, or --instances")
