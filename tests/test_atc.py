"""`ge atc`: ATC's command line end to end, its report, and how it fails.

A failure is one `ge: error:` line on stderr, exit code 1, no traceback, and no
`.om` (nor a temporary file) left behind. The real-model compiles are slow tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ge
from ge.core import soc
from ge.om import Region
from ge.backend.verify import verify
from ge.models import DEMO_MODELS

BIN = Path(sys.executable).parent
TINY = DEMO_MODELS[0].path


def atc(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "ge"), "atc", *map(str, args)], capture_output=True, text=True, cwd=cwd)


def required(model: Path, output: str = "out", soc_version: str = "Ascend310P3") -> list[str]:
    return [f"--model={model}", "--framework=5", f"--output={output}", f"--soc_version={soc_version}"]


def assert_fails_cleanly(result: subprocess.CompletedProcess[str], cwd: Path, *fragments: str) -> None:
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ge: error: "), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    assert not [p for p in os.listdir(cwd) if p.endswith(".om") or ".tmp" in p], os.listdir(cwd)


def test_atc_compiles_the_demo_model(tmp_path):
    result = atc(*required(TINY, "tiny"), "--export_compile_stat=0", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    model = ge.load_model(tmp_path / "tiny.om")
    verify(model.tasks, model.memory)
    for fragment in ("phases", "import", "optimize original graph", "kernels:", "feature map",
                     "theoretical minimum", "without reuse", "weights", "ATC run success"):
        assert fragment in result.stdout, fragment
    assert os.listdir(tmp_path) == ["tiny.om"]


def test_atc_writes_fusion_result_at_the_normal_end(tmp_path):
    result = atc(*required(TINY, "tiny"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(tmp_path)) == ["fusion_result.json", "tiny.om"]


def test_atc_options_reach_the_build(tmp_path):
    (tmp_path / "out").mkdir()
    result = atc(
        *required(TINY, "out/plain.om"), "--disable_reuse_memory=1", "--enable_single_stream=true",
        "--export_compile_stat=0", cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    model = ge.load_model(tmp_path / "out" / "plain.om")
    assert model.streams == 1 and model.memory.strategy == "no-reuse"
    assert model.memory.sizes[Region.FEATURE_MAP] == model.memory.feature_map_no_reuse
    assert model.options["disable_reuse_memory"] == 1 and model.options["enable_single_stream"] is True


def test_options_accepted_for_compatibility_warn(tmp_path):
    result = atc(*required(TINY, "tiny"), "--host_env_os=linux", "--export_compile_stat=0", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "ge: warning: --host_env_os has no effect" in result.stderr


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--framework=3"], ["--framework=3", "TensorFlow", "--framework=5"]),
        (["--framework=0"], ["Caffe", "--framework=5"]),
        (["--framework=1"], ["MindSpore", "--framework=5"]),
        (["--framework=7"], ["not an ATC framework", "--framework=5"]),
        (["--soc_version=Ascend999"], ["Ascend999", *soc.names()]),
        (["--precision_moed=x"], ["unknown option --precision_moed", "--input_shape"]),
        (["model.onnx"], ["not --name=value"]),
        (["--output=missing_dir/out"], ["missing_dir", "does not exist"]),
        (["--disable_reuse_memory=2"], ["disable_reuse_memory", "0", "1"]),
        (["--disable_reuse_memory=yes"], ["--disable_reuse_memory=yes", "not an integer"]),
        (["--enable_single_stream=maybe"], ["true or false"]),
        (["--stream_max_parallel_num=AIcoreEngine:0"], ["stream_max_parallel_num"]),
    ],
)
def test_bad_command_lines_fail_cleanly(tmp_path, args, fragments):
    names = {a.split("=")[0] for a in args}
    base = [a for a in required(TINY) if a.split("=")[0] not in names]
    assert_fails_cleanly(atc(*base, *args, cwd=tmp_path), tmp_path, *fragments)


def test_a_missing_required_option_is_named(tmp_path):
    for missing in ("--model", "--framework", "--output", "--soc_version"):
        args = [a for a in required(TINY) if not a.startswith(missing + "=")]
        assert_fails_cleanly(atc(*args, cwd=tmp_path), tmp_path, f"{missing} is required")


def test_a_bad_model_fails_without_leaving_an_om(tmp_path):
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"\x08\x07garbage that is not a protobuf")
    assert_fails_cleanly(atc(*required(broken), cwd=tmp_path), tmp_path)
    assert_fails_cleanly(atc(*required(tmp_path / "absent.onnx"), cwd=tmp_path), tmp_path, "absent.onnx")


def test_debug_log_shows_the_traceback(tmp_path):
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not onnx")
    result = atc(*required(broken), "--log=debug", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" in result.stderr


# ------------------------------------------------------------------- real models


@pytest.mark.slow
@pytest.mark.parametrize("soc_version", soc.names())
@pytest.mark.parametrize("fixture", ["resnet50_onnx", "mobilenet_v2_onnx", "bert_base_onnx"])
def test_atc_compiles_real_models_for_every_soc(fixture, soc_version, request, tmp_path):
    path = request.getfixturevalue(fixture)
    result = atc(*required(path, "model", soc_version), "--export_compile_stat=0", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "ATC run success" in result.stdout
    model = ge.load_model(tmp_path / "model.om")
    assert model.soc_version == soc_version and model.build["kernels"] > 0
    verify(model.tasks, model.memory)
