"""The rest of [options]: `ge run --op_debug_config`, graph_max_parallel_model_num's
thread pool in `ge.Session`, and the whole-model build cache behind a warm `ge atc`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.test_debug_options import debug_config, overwriting, tiny  # noqa: F401  (fixtures)

BIN = Path(sys.executable).parent


def ge_run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "ge"), "run", *args], capture_output=True, text=True, cwd=cwd)


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
