"""The rest of [options]: `ge run --op_debug_config`, graph_max_parallel_model_num's
thread pool in `ge.Session`, and the whole-model build cache behind a warm `ge atc`."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest

import ge
from ge import model_cache
from ge.models import DEMO_MODELS
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
