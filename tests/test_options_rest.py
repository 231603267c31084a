"""The rest of [options]: `ge run --op_debug_config`; the model cache behind a warm
`ge atc` (hits, keys, damaged entries, side effects); graph_max_parallel_model_num's
thread pool in `ge.Session`; enable_small_channel; mix_compile_mode; and
enable_scope_fusion_passes."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest

import ge
from ge import model_cache
from ge.core import soc as socs
from ge.core.errors import InputError, OptionError
from ge.core.inputs import generated
from ge.models import DEMO_MODELS
from ge.session import Session
from ge.sim import program, timing
from ge.sim.config import RunConfig
from ge.sim.runtime import Runtime
from tests.test_debug_options import SOC, debug_config, overwrite
from tests.test_kernel_cache import om_content

TINY = DEMO_MODELS[0].path

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    model = ge.compile(TINY, {"export_compile_stat": 0, "soc_version": SOC})
    return Path(model.save(tmp_path_factory.mktemp("run") / "tiny.om"))


@pytest.fixture(scope="module")
def overwriting(tiny: Path, tmp_path_factory) -> Path:
    """The tiny model with its first kernel writing four times past its output."""
    return overwrite(tiny, tmp_path_factory.mktemp("run") / "overwriting.om")


def ge_run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "ge"), "run", *args], capture_output=True, text=True, cwd=cwd, check=False)


@pytest.mark.slow
def test_ge_run_op_debug_config_bounds_checks_the_listed_kernels(overwriting: Path, tmp_path: Path) -> None:
    plain = ge_run(tmp_path, str(overwriting), "--timing-only")
    assert plain.returncode == 0, plain.stderr
    every = debug_config(tmp_path, "op_debug_config=oom\n")
    checked = ge_run(tmp_path, str(overwriting), "--timing-only", f"--op_debug_config={every}")
    assert checked.returncode == 1
    assert "oom: task" in checked.stderr and "past its allocation" in checked.stderr, checked.stderr
    other = debug_config(tmp_path, "op_debug_config=oom\nop_debug_list=OpType::MatMulV2\n")
    elsewhere = ge_run(tmp_path, str(overwriting), "--timing-only", f"--op_debug_config={other}")
    assert elsewhere.returncode == 0, elsewhere.stderr


@pytest.mark.slow
def test_ge_run_op_debug_config_refuses_a_bad_file(tiny: Path, tmp_path: Path) -> None:
    bad = debug_config(tmp_path, "op_debug_config=bogus\n")
    result = ge_run(tmp_path, str(tiny), "--timing-only", f"--op_debug_config={bad}")
    assert result.returncode == 1
    assert "'bogus' is not allowed" in result.stderr


# ------------------------------------------------------------------ the model cache


def compile_cached(model: str | Path, cache: Path, **flags: object) -> ge.Model:
    return ge.compile(model, {"op_compiler_cache_dir": str(cache), "op_compiler_cache_mode": "enable", "export_compile_stat": 0, **flags})


def model_entries(cache: Path) -> list[Path]:
    return sorted((cache / model_cache.FOLDER).glob("*.om"))


def whole(model: ge.Model) -> bool:
    return model.build["kernel_cache"].get("model_cache") == "hit"


def test_a_second_compile_takes_the_whole_build_and_makes_the_same_model(tmp_path: Path) -> None:
    cold = compile_cached(TINY, tmp_path)
    warm = compile_cached(TINY, tmp_path)
    assert not whole(cold) and whole(warm)
    assert list(warm.build["timings"]) == ["model cache"]
    assert warm.build["kernel_cache"]["hits"] == cold.build["kernel_cache"]["misses"] and warm.build["kernel_cache"]["misses"] == 0
    assert len(model_entries(tmp_path)) == 1
    reference = om_content(compile_cached(TINY, tmp_path, op_compiler_cache_mode="disable"), tmp_path / "without.om")
    assert om_content(warm, tmp_path / "warm.om") == reference


def test_disable_and_force(tmp_path: Path) -> None:
    compile_cached(TINY, tmp_path, op_compiler_cache_mode="disable")
    assert not (tmp_path / model_cache.FOLDER).exists()
    compile_cached(TINY, tmp_path)
    (entry,) = model_entries(tmp_path)
    past = time.time() - 3600
    os.utime(entry, (past, past))
    forced = compile_cached(TINY, tmp_path, op_compiler_cache_mode="force")
    assert not whole(forced) and entry.stat().st_mtime > past + 60


@pytest.mark.slow
def test_every_input_of_the_build_is_in_the_key(tmp_path: Path) -> None:
    model = tmp_path / "tiny.onnx"
    shutil.copy(TINY, model)
    switch = tmp_path / "switch.cfg"
    switch.write_text('{"Switch": {"GraphFusion": {"ALL": "on"}}}')
    compile_cached(model, tmp_path / "cache", fusion_switch_file=str(switch))
    assert whole(compile_cached(model, tmp_path / "cache", fusion_switch_file=str(switch)))
    assert not whole(compile_cached(model, tmp_path / "cache", fusion_switch_file=str(switch), precision_mode="allow_fp32_to_fp16"))
    closed = compile_cached(model, tmp_path / "cache", fusion_switch_file=str(switch))
    switch.write_text('{"Switch": {"GraphFusion": {"ALL": "off"}}}')
    reopened = compile_cached(model, tmp_path / "cache", fusion_switch_file=str(switch))
    assert whole(closed) and not whole(reopened)
    proto = onnx.load(model)
    proto.doc_string = "changed"
    onnx.save(proto, model)
    assert not whole(compile_cached(model, tmp_path / "cache", fusion_switch_file=str(switch)))


def test_changed_external_data_misses(tmp_path: Path, caplog) -> None:
    proto = onnx.load(TINY)
    onnx.save(proto, tmp_path / "tiny.onnx", save_as_external_data=True, location="tiny.data", size_threshold=0)
    first = compile_cached(tmp_path / "tiny.onnx", tmp_path / "cache")
    assert whole(compile_cached(tmp_path / "tiny.onnx", tmp_path / "cache"))
    data = bytearray((tmp_path / "tiny.data").read_bytes())
    data[:4] = bytes(4)  # the first weight's first value becomes 0
    (tmp_path / "tiny.data").write_bytes(bytes(data))
    with caplog.at_level(logging.INFO, logger="ge"):
        changed = compile_cached(tmp_path / "tiny.onnx", tmp_path / "cache")
    assert not whole(changed) and bytes(changed.weights) != bytes(first.weights)
    assert "external data tiny.data changed" in caplog.text


@pytest.mark.parametrize("damage", ["truncated", "header", "foreign"])
def test_a_damaged_entry_is_discarded_and_rebuilt(tmp_path: Path, caplog, damage: str) -> None:
    compile_cached(TINY, tmp_path)
    (entry,) = model_entries(tmp_path)
    head, _, body = entry.read_bytes().partition(b"\n")
    if damage == "truncated":
        entry.write_bytes(head + b"\n" + body[: len(body) // 2])
    elif damage == "header":
        entry.write_bytes(b"{not json\n" + body)
    else:
        fields = json.loads(head)
        fields["key"] = "another model"
        entry.write_bytes(json.dumps(fields).encode() + b"\n" + body)
    with caplog.at_level(logging.INFO, logger="ge"):
        rebuilt = compile_cached(TINY, tmp_path)
    assert not whole(rebuilt)
    assert f"model cache: discarding {entry}" in caplog.text
    assert whole(compile_cached(TINY, tmp_path)), "the rebuilt entry was not stored"


def test_the_model_cache_stands_aside_for_side_effects(tmp_path: Path, monkeypatch) -> None:
    compile_cached(TINY, tmp_path)
    listed = debug_config(tmp_path, "op_debug_config=dump_cce\nop_debug_list=OpType::MatMulV2\n")
    assert not whole(compile_cached(TINY, tmp_path, op_debug_config=listed, debug_dir=str(tmp_path / "debug")))
    monkeypatch.setenv("DUMP_GE_GRAPH", "3")
    monkeypatch.chdir(tmp_path)
    assert not whole(compile_cached(TINY, tmp_path))
    assert list(tmp_path.glob("ge_onnx_*.mlir"))


def test_a_hit_writes_the_fusion_result_its_compile_wrote(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    compile_cached(TINY, tmp_path / "cache", export_compile_stat=1)
    written = (tmp_path / "fusion_result.json").read_text()
    (tmp_path / "fusion_result.json").unlink()
    assert whole(compile_cached(TINY, tmp_path / "cache", export_compile_stat=1))
    assert (tmp_path / "fusion_result.json").read_text() == written


@pytest.mark.slow
def test_a_warm_atc_says_it_took_the_whole_build(tmp_path: Path) -> None:
    def atc() -> str:
        result = subprocess.run(
            [str(BIN / "ge"), "atc", f"--model={TINY}", "--framework=5", "--soc_version=Ascend310P3", "--output=m",
             "--export_compile_stat=0", "--op_compiler_cache_mode=enable", f"--op_compiler_cache_dir={tmp_path}"],
            capture_output=True, text=True, cwd=tmp_path, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        return " ".join(result.stdout.split())

    assert "the whole build from the model cache" not in atc()
    assert "the whole build from the model cache" in atc()
    assert ge.load_model(tmp_path / "m.om").build["kernel_cache"]["model_cache"] == "hit"


# ------------------------------------------------------------------ graph_max_parallel_model_num


@pytest.fixture(scope="module")
def demo_models() -> list[ge.Model]:
    return [ge.compile(m.path, {"export_compile_stat": 0, "soc_version": SOC}) for m in DEMO_MODELS]


def feeds(model: ge.Model, seed: int) -> dict[str, np.ndarray]:
    runtime = Session().runtime(model)
    return generated(runtime.input_specs(), seed)


def test_graphs_submitted_at_once_all_complete_as_run_one_by_one(demo_models: list[ge.Model]) -> None:
    graphs = [(model, feeds(model, seed)) for seed in range(3) for model in demo_models]
    serial = [Session().run(model, inputs) for model, inputs in graphs]
    with Session(RunConfig(graph_max_parallel_model_num=3)) as session:
        parallel = session.run_all(graphs)
    assert len(parallel) == len(graphs)
    for alone, together in zip(serial, parallel):
        assert alone.latency_us == together.latency_us
        assert alone.outputs.keys() == together.outputs.keys()
        for name, value in alone.outputs.items():
            np.testing.assert_array_equal(together.outputs[name], value)


class Concurrency:
    """Counts the simulator runs in progress at once (each held a while, so that they overlap)."""

    def __init__(self, monkeypatch) -> None:
        self.now, self.peak, self.lock = 0, 0, threading.Lock()
        monkeypatch.setattr(Runtime, "run", self.counting(Runtime.run))

    def counting(self, run: Callable) -> Callable:
        def counted(runtime: Runtime, *args: object, **kwargs: object) -> object:
            with self.lock:
                self.now += 1
                self.peak = max(self.peak, self.now)
            try:
                time.sleep(0.05)
                return run(runtime, *args, **kwargs)
            finally:
                with self.lock:
                    self.now -= 1

        return counted


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_option_bounds_the_graphs_running_at_once(demo_models: list[ge.Model], monkeypatch, threads: int) -> None:
    counter = Concurrency(monkeypatch)
    copies = [dataclasses.replace(demo_models[0]) for _ in range(6)]  # six models: six loaded graphs
    with Session(RunConfig(graph_max_parallel_model_num=threads, timing_only=True)) as session:
        results = session.run_all([(m, None) for m in copies])
    assert counter.peak == threads
    assert len({r.latency_us for r in results}) == 1


def test_runs_of_one_model_take_turns(demo_models: list[ge.Model], monkeypatch) -> None:
    counter = Concurrency(monkeypatch)
    with Session(RunConfig(graph_max_parallel_model_num=4, timing_only=True)) as session:
        futures = [session.submit(demo_models[0]) for _ in range(4)]
        assert all(f.result().latency_us > 0 for f in futures)
    assert counter.peak == 1


def test_a_failing_graph_fails_its_future_and_a_closed_session_takes_none(demo_models: list[ge.Model]) -> None:
    session = Session(RunConfig(graph_max_parallel_model_num=2))
    bad = session.submit(demo_models[0], {"nope": np.zeros(1)})
    good = session.submit(demo_models[1], feeds(demo_models[1], 0))
    with pytest.raises(InputError):
        bad.result()
    assert good.result().outputs
    session.close()
    with pytest.raises(OptionError, match="is closed"):
        session.submit(demo_models[0])


# ------------------------------------------------------------------ enable_small_channel


def conv_times(model: ge.Model) -> dict[str, float]:
    result = Session(RunConfig(timing_only=True)).run(model)
    return {t.name: t.duration for t in result.profile.kernels() if t.op_type.startswith("Conv2D")}


def test_small_channel_shortens_the_rgb_convolution_and_keeps_the_values(demo_models: list[ge.Model]) -> None:
    plain = demo_models[0]
    small = ge.compile(TINY, {"export_compile_stat": 0, "soc_version": SOC, "enable_small_channel": 1})
    before, after = conv_times(plain), conv_times(small)
    first = next(iter(before))  # the stem: 3 input channels
    assert after[first] < before[first]
    assert {k: v for k, v in after.items() if k != first} == pytest.approx({k: v for k, v in before.items() if k != first}), "a wider conv changed"
    inputs = feeds(plain, 0)
    for name, value in Session().run(plain, inputs).outputs.items():
        np.testing.assert_array_equal(Session().run(small, inputs).outputs[name], value)


def test_small_channel_marks_only_ungrouped_convolutions_of_at_most_four_channels(tmp_path: Path) -> None:
    from onnx import TensorProto, helper

    def conv_model(channels: int, group: int) -> Path:
        weight = helper.make_tensor("w", TensorProto.FLOAT, [8, channels // group, 3, 3], np.ones(8 * channels // group * 9).tolist())
        node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=group)
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, 16, 16])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])], [weight])
        path = tmp_path / f"conv_{channels}_{group}.onnx"
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
        return path

    def faster(path: Path) -> bool:
        flags = {"export_compile_stat": 0, "soc_version": SOC}
        return sum(conv_times(ge.compile(path, {**flags, "enable_small_channel": 1})).values()) < sum(conv_times(ge.compile(path, flags)).values())

    assert faster(conv_model(4, 1))
    assert not faster(conv_model(8, 1))
    assert not faster(conv_model(4, 2))


def test_online_inference_fixes_small_channel_at_one() -> None:
    assert RunConfig(graph_run_mode=0).compile_flags()["enable_small_channel"] == 1
    assert "enable_small_channel" not in RunConfig(graph_run_mode=1).compile_flags()
    assert RunConfig(graph_run_mode=1, enable_small_channel=1).compile_flags()["enable_small_channel"] == 1
    with pytest.raises(OptionError, match="enable_small_channel 0 is not allowed with graph_run_mode=0"):
        RunConfig(graph_run_mode=0, enable_small_channel=0)


# ------------------------------------------------------------------ mix_compile_mode


def test_mix_compile_mode_runs_the_ai_cpu_ops_on_the_host_with_their_copies(tmp_path: Path) -> None:
    from tests.test_aicpu import KEEP, one_op
    from tests.test_aicpu import feeds as aicpu_feeds

    elements = 64 * 1024
    model = one_op("Add", onnx.TensorProto.UINT32, [elements])  # no AI Core kernel for uint32: the AI CPU's
    onnx.save(model, tmp_path / "m.onnx")
    compiled = ge.compile(tmp_path / "m.onnx", KEEP)
    inputs = aicpu_feeds(model)
    device = Session().run(compiled, inputs)
    mixed = Session(RunConfig(mix_compile_mode=True)).run(compiled, inputs)
    np.testing.assert_array_equal(mixed.outputs["y"], device.outputs["y"])
    (on_device,) = device.profile.aicpu_kernels()
    (on_host,) = mixed.profile.aicpu_kernels()
    assert (on_device.core_type, on_host.core_type) == ("AiCpu", timing.HOST)
    nbytes = 3 * elements * 4
    clock = socs.load(compiled.soc_version).clock_mhz
    assert on_host.duration == pytest.approx(timing.host_op_us(2 * elements * 4, elements * 4, on_host_elements(compiled)) * clock)
    assert on_host.nbytes == nbytes
    copies = 2 * timing.MEMCPY_LATENCY_US + nbytes / timing.PCIE_BYTES_PER_US
    assert on_host.duration / clock > copies, "the copies out and back are charged"
    assert [row.bound for row in mixed.profile.rows()] == ["host"]
    trace = json.dumps(mixed.profile.trace())
    assert "Host CPU" in trace


def on_host_elements(model: ge.Model) -> int:
    (kernel,) = program.split_kernels(model.kernels).values()
    return kernel.header.elements


# ------------------------------------------------------------------ enable_scope_fusion_passes

NON_GENERAL = '''"""A non-general fusion pass: x * 1 forwarded, for the networks that ask for it."""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from dialects.ascend_graph import MulOp
from passes.fusion import FusionCounts, FusionPass, FusionPattern, fusion_pass
from passes.graph_match import constant_value


class DropMulByOne(FusionPattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: MulOp, rewriter: PatternRewriter) -> None:
        one = constant_value(op.x2)
        if one is None:
            return
        self.matched(op)
        if one.size == 1 and np.all(one == 1) and op.x1.type == op.y.type:
            rewriter.replace(op, [], [op.x1])
            self.effected()


@fusion_pass
@dataclass(frozen=True)
class ScopeMulByOnePass(FusionPass):
    """Forward x for x * 1 (non-general: only when named)."""

    name = "ScopeMulByOnePass"
    general = False

    def patterns(self, counts: FusionCounts) -> Sequence[RewritePattern]:
        return [DropMulByOne(counts)]
'''


@pytest.mark.slow
def test_a_non_general_fusion_pass_runs_only_when_named(tmp_path: Path) -> None:
    from onnx import TensorProto, helper

    plugin = tmp_path / "scope_passes.py"
    plugin.write_text(NON_GENERAL)
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    nodes = [helper.make_node("Mul", ["x", "one"], ["a"], name="times_one"), helper.make_node("Relu", ["a"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], initializer=[one])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")

    def atc(*flags: str) -> tuple[dict, str]:
        result = subprocess.run(
            [str(BIN / "ge"), "atc", f"--load-pass-plugin={plugin}", f"--model={tmp_path / 'm.onnx'}", "--framework=5",
             "--output=m", "--soc_version=Ascend310P3", *flags],
            capture_output=True, text=True, cwd=tmp_path, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        written = tmp_path / "fusion_result.json"
        doc = json.loads(written.read_text()) if written.exists() else {}
        written.unlink(missing_ok=True)
        return doc, result.stderr

    def ran(doc: dict) -> bool:
        return any("ScopeMulByOnePass" in graph.get("graph_fusion", {}) for graph in doc.values())

    assert not ran(atc()[0])
    named, _ = atc("--enable_scope_fusion_passes=ScopeMulByOnePass")
    assert ran(named)
    assert ge.load_model(tmp_path / "m.om").kernels.count("ascend_kernel.kernel @") == 1, "the Mul is gone: one kernel, the Relu"
    doc, warned = atc("--enable_scope_fusion_passes=ScopeMulByOnePass,ConvBatchnormFusionPass,Nope")
    assert ran(doc)
    assert "enable_scope_fusion_passes: ConvBatchnormFusionPass, Nope are no non-general fusion pass" in warned
    assert "the non-general ones: ScopeMulByOnePass" in warned
