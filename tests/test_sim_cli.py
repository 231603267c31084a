"""`ge run`, as a user runs it: outputs as .npy files, the summary, the profile files,
and one-line errors with a non-zero exit for every bad input."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ge
from ge.core.inputs import generated
from ge.models import DEMO_MODELS
from ge.sim.config import RunConfig
from ge.session import Session
from ge.sim import timing

BIN = Path(sys.executable).parent
BERT = DEMO_MODELS[1]


def ge_run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "ge"), "run", *map(str, args)], capture_output=True, text=True)


def assert_fails_cleanly(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ge: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture(scope="module")
def bert_om(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("run")
    path = directory / "bert.om"
    ge.compile(BERT.path, {"soc_version": "Ascend910B1"}).save(path)
    for name, value in BERT.sample_inputs(0).items():
        np.save(directory / f"{name}.npy", value)
    return path


def inputs(om: Path) -> list[str]:
    return [f"--input={name}={om.parent / f'{name}.npy'}" for name in ("input_ids", "attention_mask")]


def test_run_writes_the_outputs_the_session_computes(bert_om: Path, tmp_path: Path) -> None:
    result = ge_run(bert_om, *inputs(bert_om), "--output", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    expected = Session().run(bert_om, BERT.sample_inputs(0))
    for name, value in expected.outputs.items():
        np.testing.assert_array_equal(np.load(tmp_path / "out" / f"{name}.npy"), value)
    assert f"latency {expected.latency_us:,.1f} us" in result.stdout
    assert "samples/s at batch 1" in result.stdout
    assert "utilisation: cube" in result.stdout and "top ops by time" in result.stdout
    launches = len(expected.profile.kernels()) * timing.KERNEL_LAUNCH_US  # a wait each, not in the kernels' time
    assert f"their launches wait {launches:,.1f} us besides" in result.stdout


def test_run_writes_the_profile(bert_om: Path, tmp_path: Path) -> None:
    result = ge_run(bert_om, *inputs(bert_om), "--profile", tmp_path / "prof", "--profile-level=pipe")
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "prof" / "op_summary.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(r["bound"] in ("cube", "vector", "memory", "latency") for r in rows)
    trace = json.loads((tmp_path / "prof" / "trace.json").read_text())
    assert any(e.get("cat") == "pipe" for e in trace["traceEvents"])


def test_timing_only_needs_no_inputs_and_takes_fewer_cores(bert_om: Path) -> None:
    all_cores = ge_run(bert_om, "--timing-only")
    two = ge_run(bert_om, "--timing-only", "--aicore_num", "2")
    assert all_cores.returncode == 0 == two.returncode, all_cores.stderr + two.stderr
    assert "timing only" in all_cores.stdout
    assert "2 AI cores, 4 vector cores" in two.stdout
    latency = Session(RunConfig(timing_only=True, aicore_num=2)).run(bert_om).latency_us
    assert f"latency {latency:,.1f} us" in two.stdout


@pytest.mark.parametrize("seed", [None, 7])
def test_without_inputs_the_model_runs_on_generated_ones(bert_om: Path, tmp_path: Path, seed: int | None) -> None:
    """As Ascend's benchmark tool: zeros, or seeded random values with --seed, said in the output."""
    args = [] if seed is None else ["--seed", str(seed)]
    result = ge_run(bert_om, "--output", tmp_path, *args)
    assert result.returncode == 0, result.stderr
    assert ("generated inputs, zeros" if seed is None else f"seeded random values (seed {seed}") in result.stdout
    runtime = Session().runtime(bert_om)
    feeds = generated(runtime.input_specs(), seed)
    assert {n: a.dtype.name for n, a in feeds.items()} == {"input_ids": "int64", "attention_mask": "int64"}
    expected = Session().run(bert_om, feeds)
    for name, value in expected.outputs.items():
        np.testing.assert_array_equal(np.load(tmp_path / f"{name}.npy"), value)


def test_seed_goes_with_generated_inputs_only(bert_om: Path) -> None:
    assert_fails_cleanly(ge_run(bert_om, *inputs(bert_om), "--seed", "1"), "--seed makes inputs for a run without --input")
    assert_fails_cleanly(ge_run(bert_om, "--timing-only", "--seed", "1"), "--seed makes inputs, which --timing-only does not use")


def test_a_single_input_model_takes_a_bare_file(tmp_path: Path) -> None:
    resnet = DEMO_MODELS[0]
    om = ge.compile(resnet.path, {"soc_version": "Ascend310P3"}).save(tmp_path / "r.om")
    np.save(tmp_path / "x.npy", resnet.sample_inputs(0)["input"])
    result = ge_run(om, "--input", tmp_path / "x.npy", "--output", tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "logits.npy").exists()


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        (lambda d: {"attention_mask": d["attention_mask"]}, ["input 'input_ids' (int64[1, 16]) is missing"]),
        (lambda d: {**d, "input_ids": d["input_ids"].astype(np.float32)}, ["input 'input_ids' has dtype float32, expected int64"]),
        (lambda d: {**d, "attention_mask": d["attention_mask"][:, :4]}, ["has shape [1, 4], expected [1, 16]"]),
        (lambda d: {**d, "mask": d["attention_mask"]}, ["'mask' is not an input of the model"]),
    ],
)
def test_bad_inputs_fail_in_one_line(bert_om: Path, tmp_path: Path, change, fragments: list[str]) -> None:
    args = []
    for name, value in change(BERT.sample_inputs(0)).items():
        np.save(tmp_path / f"{name}.npy", value)
        args.append(f"--input={name}={tmp_path / f'{name}.npy'}")
    assert_fails_cleanly(ge_run(bert_om, *args), *fragments)


def test_other_mistakes_fail_in_one_line(bert_om: Path, tmp_path: Path) -> None:
    assert_fails_cleanly(ge_run(tmp_path / "missing.om"), "no such model file")
    assert_fails_cleanly(ge_run(bert_om, "--timing-only", "--aicore_num", "25"), "aicore_num 25 is more than Ascend910B1's 24 AI cores")
    assert_fails_cleanly(ge_run(bert_om, "--input=input_ids=nowhere.npy"), "--input input_ids: no such file 'nowhere.npy'")
    (tmp_path / "text.npy").write_text("not an array")
    assert_fails_cleanly(ge_run(bert_om, f"--input=input_ids={tmp_path / 'text.npy'}"), "is not a .npy array")
    assert_fails_cleanly(ge_run(bert_om, "--timing-only", "--output", tmp_path), "--output has nothing to write with --timing-only")
    assert_fails_cleanly(ge_run(bert_om, "--timing-only", "--profile-level=instr"), "profile_level 'instr' is not allowed")
    assert_fails_cleanly(ge_run(bert_om, "--timing-only", "--input_fusion_size=-1"), "input_fusion_size -1 is not allowed")
    assert_fails_cleanly(ge_run(bert_om, "--input", "x.npy"), "the model has 2 inputs")


def test_a_corrupt_model_fails_in_one_line(bert_om: Path, tmp_path: Path) -> None:
    data = bytearray(bert_om.read_bytes())
    data[100] ^= 0x01
    broken = tmp_path / "broken.om"
    broken.write_bytes(bytes(data))
    assert_fails_cleanly(ge_run(broken, "--timing-only"), "broken.om", "corrupt")
    (tmp_path / "text.om").write_text("hello")
    assert_fails_cleanly(ge_run(tmp_path / "text.om", "--timing-only"), "is not a .om model file")
