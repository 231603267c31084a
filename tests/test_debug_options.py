"""The operator debug options' effects: op_debug_config's `oom` fails a kernel whose
program writes past its arguments (a tampered, resealed `.om`), for the kernels
op_debug_list names or all of them; kernel_meta; the options' conflicts; and
enable_exception_dump's dump of a failing kernel."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ge
from ge.core.errors import ModelError, OptionError
from ge.core.options import CompileOptions
from ge.models import DEMO_MODELS
from ge.om import model as om
from ge.sim.config import RunConfig
from ge.sim.runtime import Runtime
from tests.test_om_hostile import entries, sealed, with_description

SOC = "Ascend310"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    model = ge.compile(DEMO_MODELS[0].path, {"export_compile_stat": 0, "soc_version": SOC})
    return Path(model.save(tmp_path_factory.mktemp("debug") / "tiny.om"))


def overwrite(model: Path, path: Path) -> Path:
    """`model` with its first kernel's first GM write made twice as large as the whole
    output (a vector kernel, which writes it in block_dim x tiles copies), resealed."""
    contents = entries(model)
    text = contents[om.KERNELS].decode()
    tiling = re.search(r"block_dim = (\d+) : i64.*?tiles = (\d+) : i64", text)
    write = re.search(r'ascend_kernel\.copy "MTE3" %\w+ -> %\w+, (\d+) bytes', text)
    assert tiling is not None and write is not None
    copies = int(tiling.group(1)) * int(tiling.group(2))
    contents[om.KERNELS] = (text[: write.start(1)] + str(2 * copies * int(write.group(1))) + text[write.end(1) :]).encode()
    return sealed(path, contents)


@pytest.fixture(scope="module")
def overwriting(tiny: Path, tmp_path_factory) -> Path:
    return overwrite(tiny, tmp_path_factory.mktemp("debug") / "overwriting.om")


def atc(cwd: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "ge"), "atc", f"--model={DEMO_MODELS[0].path}", "--framework=5", f"--soc_version={SOC}", *flags],
        capture_output=True, text=True, cwd=cwd,
    )


def debug_config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "op_debug_config.ini"
    path.write_text(text)
    return str(path)


def inputs(runtime: Runtime) -> dict[str, np.ndarray]:
    return {name: np.ones(shape, dtype) for name, dtype, shape in runtime.input_specs()}


def run(model: Path, **options: object) -> dict[str, np.ndarray]:
    runtime = Runtime(om.read(model), RunConfig(enable_exception_dump=0, **options))  # type: ignore[arg-type]
    return runtime.run(inputs(runtime)).outputs


def test_oom_fails_a_kernel_writing_past_its_argument(overwriting: Path, tmp_path: Path):
    config = debug_config(tmp_path, "op_debug_config=oom\n")
    with pytest.raises(ModelError, match=r"oom: task \d+ \('[^']+'\) kernel @te_cast_trans_data_0 writes \d+ bytes to argument 1 .* past its allocation"):
        run(overwriting, op_debug_config=config)
    with pytest.raises(ModelError, match="oom: "):
        run(overwriting, op_debug_config=config, timing_only=True)


def test_without_oom_the_overwrite_goes_unseen(overwriting: Path):
    assert run(overwriting)  # the run completes and returns outputs, wrong ones: only oom looks


def test_oom_keeps_to_op_debug_list(overwriting: Path, tmp_path: Path):
    run(overwriting, op_debug_config=debug_config(tmp_path, "op_debug_config=oom\nop_debug_list=OpType::MatMulV2\n"))
    with pytest.raises(ModelError, match="oom: "):
        run(overwriting, op_debug_config=debug_config(tmp_path, "op_debug_config=oom\nop_debug_list=OpType::TransData\n"))


@pytest.mark.parametrize("model", DEMO_MODELS, ids=lambda m: Path(m.path).stem)
def test_oom_passes_the_compilers_kernels(model, tmp_path: Path):
    compiled = ge.compile(model.path, {"export_compile_stat": 0, "soc_version": SOC})
    checked = Runtime(compiled, RunConfig(op_debug_config=debug_config(tmp_path, "op_debug_config=oom\n")))
    plain = Runtime(compiled)
    got, want = checked.run(inputs(checked)).outputs, plain.run(inputs(plain)).outputs
    for name, value in want.items():  # the check passes every kernel and changes no value
        np.testing.assert_array_equal(got[name], value)


def kernel_meta(folder: Path) -> list[str]:
    return sorted(p.name for p in (folder / "kernel_meta").iterdir())


def test_op_debug_level_1_writes_every_kernel_to_debug_dir(tmp_path: Path):
    model = ge.compile(DEMO_MODELS[0].path, {"export_compile_stat": 0, "soc_version": SOC, "op_debug_level": 1, "debug_dir": str(tmp_path)})
    names = sorted(re.findall(r"^ascend_kernel\.kernel @(\S+)", model.kernels, re.M))
    assert kernel_meta(tmp_path) == sorted([f"{n}.mlir" for n in names] + [f"{n}.pipes.txt" for n in names])
    first = (tmp_path / "kernel_meta" / f"{names[0]}.mlir").read_text()
    assert first.startswith(f"ascend_kernel.kernel @{names[0]} ") and "} program {" in first
    assert "pipe MTE2:" in (tmp_path / "kernel_meta" / f"{names[0]}.pipes.txt").read_text()


def test_op_debug_level_3_writes_nothing(tmp_path: Path):
    ge.compile(DEMO_MODELS[0].path, {"export_compile_stat": 0, "soc_version": SOC, "op_debug_level": 3, "debug_dir": str(tmp_path)})
    assert not (tmp_path / "kernel_meta").exists()


def test_dump_cce_writes_the_listed_kernels_via_ascend_work_path(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("ASCEND_WORK_PATH", str(tmp_path))
    config = debug_config(tmp_path, "op_debug_config=dump_cce\nop_debug_list=OpType::MatMulV2\n")
    ge.compile(DEMO_MODELS[0].path, {"export_compile_stat": 0, "soc_version": SOC, "op_debug_config": config})
    assert kernel_meta(tmp_path) == ["te_mat_mul_v2_trans_data_cast_0.mlir", "te_mat_mul_v2_trans_data_cast_0.pipes.txt"]


def test_atc_writes_kernel_meta_to_debug_dir(tmp_path: Path):
    config = debug_config(tmp_path, "op_debug_config=dump_loc,ccec_g\n")
    result = atc(tmp_path, f"--output={tmp_path / 'tiny'}", f"--op_debug_config={config}", f"--debug_dir={tmp_path / 'debug'}")
    assert result.returncode == 0, result.stderr
    assert "ccec_g have no effect here" in result.stderr
    assert any(name.endswith(".pipes.txt") for name in kernel_meta(tmp_path / "debug"))


@pytest.mark.parametrize(
    ("text", "level", "message"),
    [
        ("op_debug_config=oom,ccec_O0\n", None, "ccec_O0 and oom cannot be enabled at the same time"),
        ("op_debug_config=oom\n", 2, "op_debug_level=2 .* cannot be used with oom"),
    ],
)
def test_debug_conflicts(tmp_path: Path, text: str, level: int | None, message: str):
    with pytest.raises(OptionError, match=message):
        CompileOptions(op_debug_config=debug_config(tmp_path, text), op_debug_level=level)
    with pytest.raises(OptionError, match=message):
        RunConfig(op_debug_config=debug_config(tmp_path, text), op_debug_level=level)


def test_oom_compiled_in_by_atc_is_checked_by_ge_run(tmp_path: Path):
    """As on the device, oom is built into the kernels: a model compiled with it is checked whatever runs it."""
    config = debug_config(tmp_path, "op_debug_config=oom\nop_debug_list=OpType::TransData\n")
    compiled = atc(tmp_path, f"--output={tmp_path / 'tiny'}", f"--op_debug_config={config}")
    assert compiled.returncode == 0, compiled.stderr
    assert "te_cast_trans_data_0" in om.read(tmp_path / "tiny.om").build["oom"]
    tampered = overwrite(tmp_path / "tiny.om", tmp_path / "tampered.om")
    result = subprocess.run([str(BIN / "ge"), "run", str(tampered)], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode != 0
    assert "oom: task" in result.stderr and "@te_cast_trans_data_0" in result.stderr, result.stderr
    assert "the kernel's data and tiling are in ./extra-info/data-dump/0/te_cast_trans_data_0." in result.stderr
    with pytest.raises(ModelError, match="oom: task"):
        ge.Session(RunConfig(enable_exception_dump=0)).run(str(tampered), {"input": np.ones((1, 3, 32, 32), np.float32)})


@pytest.mark.parametrize(("mode", "env", "folder"), [(2, {}, "extra-info/data-dump/3"), (2, {"ASCEND_WORK_PATH": "work"}, "work/extra-info/data-dump/3"), (1, {}, "."), (1, {"NPU_COLLECT_PATH": "collect"}, "collect")])
def test_exception_dump(overwriting: Path, tmp_path: Path, monkeypatch, mode: int, env: dict[str, str], folder: str):
    monkeypatch.chdir(tmp_path)
    for name, value in env.items():
        monkeypatch.setenv(name, str(tmp_path / value))
    config = RunConfig(op_debug_config=debug_config(tmp_path, "op_debug_config=oom\n"), enable_exception_dump=mode, session_device_id=3)
    runtime = Runtime(om.read(overwriting), config)
    given = inputs(runtime)
    with pytest.raises(ModelError, match=r"oom: .* \(enable_exception_dump=\d: the kernel's data and tiling are in (.*\.json)\)") as info:
        runtime.run(given)
    path = Path(re.search(r"are in (.*\.json)\)", str(info.value)).group(1))
    assert path.resolve().parent == (tmp_path / folder).resolve()
    description = json.loads(path.read_text())
    assert description["kernel"] == "te_cast_trans_data_0" and description["error"].startswith("oom: ")
    assert description["tiling"]["block_rows"] > 0
    first = description["args"][0]
    assert first["role"] == "input" and first["dtype"] == "float32" and first["shape"] == [1, 3, 32, 32]
    np.testing.assert_array_equal(np.load(path.parent / first["file"]), next(iter(given.values())))
    assert [a["role"] for a in description["args"]] == ["input", "output"]
    assert all((path.parent / a["file"]).is_file() for a in description["args"])


def test_a_hostile_oom_entry_is_refused(tiny: Path, tmp_path: Path):
    model = with_description(tiny, tmp_path / "hostile.om", lambda d: d["build"].update(oom=[3]))
    with pytest.raises(ModelError, match="the model's build entry 'oom' is \\[3\\]; it must be a list of kernel names"):
        run(model)
