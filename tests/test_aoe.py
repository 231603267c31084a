"""Tuning (`ge.aoe`, `ge aoe`): the tiling space, the search, and compiles that use the bank."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.aoe import Budget, measure, tune
from ge.aoe import bank as banks
from ge.aoe.tune import Timed, _kernels, _run
from ge.cli.main import main
from ge.core import soc as socs
from ge.core.errors import ModelError, OptionError
from ge.session import Session
from ge.sim.config import RunConfig
from passes.lower_to_kernel import bank_key, build_kernel, parse_kernel, scope_of_kernel
from passes.lowering import space

SOC = "Ascend310P3"
TINY_RESNET = Path(ge.__file__).parent / "models" / "tiny_resnet.onnx"


@pytest.fixture(scope="module")
def conv(tmp_path_factory) -> Path:
    """A 3x3 convolution of 32 channels over 56x56 with a ReLU: small, and its analytic tiling is not the fastest."""
    path = tmp_path_factory.mktemp("aoe") / "conv.onnx"
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((32, 32, 3, 3)).astype(np.float32) * 0.1, "W")
    b = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32) * 0.1, "B")
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 56, 56])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, b],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


@pytest.fixture
def bank_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "bank"
    folder.mkdir()
    monkeypatch.setenv("TUNE_BANK_PATH", str(folder))
    return folder


@pytest.fixture(scope="module")
def tiny() -> tuple[list, Timed]:
    """The tunable kernels of tiny_resnet, and its analytic model's run."""
    compiled, timed = _run(TINY_RESNET, {"soc_version": SOC}, {})
    return _kernels(compiled, SOC)[0], timed


@pytest.fixture(scope="module")
def tiny_kernels(tiny) -> list:
    return tiny[0]


def test_the_space_holds_the_analytic_tiling_and_legal_neighbours(tiny_kernels) -> None:
    cubes = [k for k in tiny_kernels if isinstance(k.space, space.CubeSpace)]
    vectors = [k for k in tiny_kernels if isinstance(k.space, space.VectorSpace)]
    assert cubes and vectors
    for k in tiny_kernels:
        assert k.seed is not None and k.space.legal(k.seed)
        near = k.space.neighbours(k.seed)
        assert all(k.space.legal(t) for t in near) and k.seed not in near
        first = next(k.space.candidates())
        assert k.space.legal(first)


def test_a_kernel_alone_takes_its_time_in_the_model(tiny) -> None:
    """The measure replays the L2 state each launch starts with: alone, a kernel takes
    its time in the model (its launch is the task's wait, not in its time) unless another stream's kernel shares the
    chip with it there (tiny_resnet's shortcut convolutions), which only adds."""
    kernels, timed = tiny
    clock = socs.load(SOC).clock_mhz
    exact = 0
    for k in kernels:
        alone = measure.cycles(k.job(SOC, [None]))[0]
        assert alone <= timed.kernel_us[k.name] * clock * (1 + 1e-9)
        exact += alone == pytest.approx(timed.kernel_us[k.name] * clock, rel=1e-9)
        assert measure.roofline(k.job(SOC, [])) <= alone
    assert exact >= len(kernels) - 2


def test_the_analytic_tiling_given_explicitly_builds_the_same_kernel(tiny_kernels) -> None:
    for k in tiny_kernels:
        assert measure.cycles(k.job(SOC, [k.seed]))[0] == measure.cycles(k.job(SOC, [None]))[0]


def test_a_tiling_that_does_not_fit_is_refused(tiny_kernels) -> None:
    cube = next(k for k in tiny_kernels if isinstance(k.space, space.CubeSpace))
    scope = scope_of_kernel(parse_kernel(cube.text))
    huge = {**cube.seed, "m0": 4096, "n0": 4096}
    assert not cube.space.legal(huge)
    with pytest.raises(ModelError, match="does not fit"):
        build_kernel(SOC, scope, huge)
    vector = next(k for k in tiny_kernels if isinstance(k.space, space.VectorSpace))
    with pytest.raises(ModelError, match="does not fit"):
        build_kernel(SOC, scope_of_kernel(parse_kernel(vector.text)), {**vector.seed, "tile_rows": 10**7})
    assert measure.cycles(cube.job(SOC, [huge])) == [float("inf")]


def test_the_candidate_space_respects_the_buffers(tiny_kernels) -> None:
    profile = socs.load(SOC)
    for k in tiny_kernels:
        if not isinstance(k.space, space.CubeSpace):
            continue
        for t in k.space.candidates():
            assert t["m0"] * t["k0"] * 2 <= profile.l0a_bytes  # a k0 step of A in half of L0A (fp16)
            assert t["n0"] * t["k0"] * 2 <= profile.l0b_bytes
            assert t["m0"] * t["n0"] * 4 <= profile.l0c_bytes // 2
            assert t["batch_dim"] * t["m_dim"] * t["n_dim"] <= profile.ai_cores


@pytest.mark.slow
def test_the_same_seed_finds_the_same_tilings_on_every_backend(conv, bank_dir) -> None:
    one = tune(conv, SOC, backend="inprocess", budget=Budget(candidates=12), seed=3)
    two = tune(conv, SOC, backend="local", workers=2, budget=Budget(candidates=12), seed=3)
    assert [(k.name, k.tiling, k.tuned_cycles) for k in one.kernels] == [(k.name, k.tiling, k.tuned_cycles) for k in two.kernels]
    assert one.evaluated == two.evaluated == 12


@pytest.mark.slow
def test_ray_started_here_finds_the_tilings_this_process_finds(conv, bank_dir) -> None:
    """Ray on 2 CPUs, started in the test: the same seed gives the same tilings as in process."""
    here = tune(conv, SOC, backend="inprocess", budget=Budget(candidates=12), seed=5)
    ray = tune(conv, SOC, backend="ray", workers=2, budget=Budget(candidates=12), seed=5)
    assert ray.backend == "ray" and ray.workers == 2
    assert [(k.name, k.tiling, k.tuned_cycles) for k in here.kernels] == [(k.name, k.tiling, k.tuned_cycles) for k in ray.kernels]


@pytest.mark.slow
def test_atc_uses_the_bank_and_reproduces_the_tuned_latency(conv, bank_dir, tmp_path, capsys) -> None:
    report = tune(conv, SOC, backend="inprocess", budget=Budget(candidates=20), output=tmp_path / "out")
    assert report.tuned and report.after_us < report.before_us
    for k in report.kernels:
        assert k.model_after_us <= k.model_before_us  # never worse on any kernel
        assert k.tuned_cycles <= k.analytic_cycles
    assert (bank_dir / SOC / "cube").is_dir()
    assert json.loads((tmp_path / "out" / "aoe_report.json").read_text())["after_us"] == report.after_us

    tuned = ge.compile(conv, {"soc_version": SOC})
    assert tuned.build["tune_bank"] == {"path": str(bank_dir / SOC), "kernels": len(report.kernels), "tuned": len(report.tuned)}
    session = Session(RunConfig(timing_only=True))
    assert session.run(tuned).latency_us == report.after_us
    with space.using(space.analytic):
        analytic = ge.compile(conv, {"soc_version": SOC})
    assert "tune_bank" not in analytic.build
    assert Session(RunConfig(timing_only=True)).run(analytic).latency_us == report.before_us

    x = {"x": np.random.default_rng(1).standard_normal((1, 32, 56, 56)).astype(np.float32)}
    numerics = Session()
    np.testing.assert_array_equal(numerics.run(tuned, x).outputs["y"], numerics.run(analytic, x).outputs["y"])

    assert main_code(["atc", f"--model={conv}", "--framework=5", f"--output={tmp_path / 'm'}", f"--soc_version={SOC}"]) == 0
    out = capsys.readouterr().out
    assert f"{len(report.tuned)} of {len(report.kernels)} kernels took their tiling from the tune bank ({bank_dir / SOC})" in out


@pytest.mark.slow
def test_ge_aoe_prints_progress_and_the_table(conv, bank_dir, tmp_path, capsys) -> None:
    args = ["aoe", f"--model={conv}", "--framework=5", "--job_type=2", f"--soc_version={SOC}", f"--output={tmp_path}", "--candidates=6", "--workers=1"]
    assert main_code(args) == 0
    out = capsys.readouterr().out
    assert "tuning" in out and "candidates, best so far" in out
    assert "model latency" in out and "te_conv2d_relu" in out
    assert (tmp_path / "aoe_report.json").is_file() and (tmp_path / "conv.om").is_file()


@pytest.mark.slow
def test_subgraph_tuning_writes_a_switch_file(bank_dir, tmp_path) -> None:
    from ge import fusion_switch

    report = tune(TINY_RESNET, SOC, job_type=1, backend="inprocess", budget=Budget(candidates=3), output=tmp_path)
    assert report.job_type == 1 and len(report.passes) == 3
    assert report.after_us <= report.before_us
    switches = fusion_switch.load(str(tmp_path / "fusion_switch.cfg"))
    assert all(switches.enabled(p.name) != p.closed for p in report.passes)


def test_compiles_take_the_fusion_switches_of_the_model_s_graph_entry(bank_dir, tmp_path) -> None:
    """Subgraph tuning's result in the bank closes its passes in later compiles of that
    model with those options, as the same switch file would; other options, a given
    switch file or a corrupt entry leave the switches alone."""
    from ge import fusion_switch
    from ge.aoe.subgraph import matched_passes
    from ge.core.options import CompileOptions

    flags = {"soc_version": SOC}
    closing = matched_passes(str(TINY_RESNET), flags)[:1]
    assert closing
    bank = banks.for_tuning(SOC)
    key = banks.graph_key(TINY_RESNET, CompileOptions.from_flags(**flags))
    path = bank.store(banks.GraphEntry(key, tuple(closing), 2.0, 1.0))
    tuned = ge.compile(TINY_RESNET, flags)
    assert tuned.build["tune_bank"]["closed_passes"] == closing
    switch = tmp_path / "switch.cfg"
    switch.write_text(json.dumps(fusion_switch.closing(closing)))
    by_file = ge.compile(TINY_RESNET, {**flags, "fusion_switch_file": str(switch)})
    assert "closed_passes" not in by_file.build["tune_bank"]
    session = Session(RunConfig(timing_only=True))
    assert session.run(tuned).latency_us == session.run(by_file).latency_us
    assert len(tuned.tasks) == len(by_file.tasks)
    assert "closed_passes" not in ge.compile(TINY_RESNET, {**flags, "precision_mode": "force_fp32"}).build["tune_bank"]
    Path(path).write_text(Path(path).read_text().replace(closing[0], closing[0] + "x"))
    assert "closed_passes" not in ge.compile(TINY_RESNET, flags).build["tune_bank"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--framework=3"], "--framework=3 (TensorFlow) is not supported; allowed: 5 (ONNX)"),
        (["--job_type=3"], "--job_type=3 is not allowed; use 1 (subgraph tuning) or 2 (operator tuning)"),
        (["--tune_time=5", "--candidates=4"], "give --tune_time or --candidates, not both"),
        (["--candidates=0"], "--candidates must be at least 1"),
        (["--model=missing.onnx"], "--model 'missing.onnx' does not exist or is not a file"),
    ],
)
def test_ge_aoe_refuses_bad_options(args, message, capsys) -> None:
    base = {"--model": str(TINY_RESNET), "--job_type": "2"}
    for a in args:
        base[a.split("=")[0]] = a.split("=", 1)[1]
    assert main_code(["aoe", *(f"{k}={v}" for k, v in base.items())]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_tune_refuses_an_unknown_job_type_and_backend(bank_dir) -> None:
    with pytest.raises(OptionError, match="job_type 7 is not allowed"):
        tune(TINY_RESNET, SOC, job_type=7)
    with pytest.raises(OptionError, match="unknown backend"):
        tune(TINY_RESNET, SOC, backend="cluster")


def main_code(args: list[str]) -> int:
    try:
        main(args)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    return 0


@pytest.mark.slow
def test_the_kernel_cache_keys_on_the_tuned_tiling(conv, bank_dir, tmp_path) -> None:
    """A kernel built with a tuned tiling is a different cache entry from the analytic one."""
    flags = {"soc_version": SOC, "op_compiler_cache_mode": "enable", "op_compiler_cache_dir": str(tmp_path / "cache")}
    analytic = ge.compile(conv, flags)
    kernel = next(k for k in _kernels(analytic, SOC)[0] if isinstance(k.space, space.CubeSpace))
    other = another_tiling(kernel)
    banks.Bank(str(bank_dir), SOC).store(banks.Entry(
        bank_key(scope_of_kernel(parse_kernel(kernel.text)), SOC), "cube", kernel.op_types, other, 1.0, 1.0,
    ))
    tuned = ge.compile(conv, flags)
    assert tuned.build["tune_bank"]["tuned"] == 1
    assert tuned.build["kernel_cache"]["misses"] == 1  # the tuned kernel; the others are hits
    assert f"m0 = {other['m0']} : i64, n0 = {other['n0']} : i64" in tuned.kernels


def another_tiling(kernel) -> dict[str, int]:
    """A legal tiling of the kernel other than its analytic one, with another L0 tile."""
    return next(t for t in kernel.space.neighbours(kernel.seed) if (t["m0"], t["n0"]) != (kernel.seed["m0"], kernel.seed["n0"]))
