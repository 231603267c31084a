"""Precision options and files: malformed input gives one clear error naming the
file, the line and what is allowed; the pipeline and `ge precision-report` use them."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ge
from dialects.ascend_graph import Conv2DOp, dtype_of
from ge import pipeline
from ge.core.errors import OptionError
from ge.models import DEMO_MODELS
from ge.core.options import CompileOptions
from ge.core.precision_files import (
    read_customize_dtypes,
    read_keep_dtype,
    read_mixlist,
    read_op_precision_mode,
)

BIN = Path(sys.executable).parent
RESNET = DEMO_MODELS[0]


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# ------------------------------------------------------------------------- options


def test_unknown_modes_list_the_allowed_values() -> None:
    with pytest.raises(OptionError, match="precision_mode 'fp16' is not allowed; use one of force_fp16, allow_fp32_to_fp16, "):
        CompileOptions(precision_mode="fp16")
    with pytest.raises(OptionError, match="precision_mode_v2 'force_fp16' is not allowed; use one of fp16, origin, "):
        CompileOptions(precision_mode_v2="force_fp16")
    with pytest.raises(OptionError, match="op_select_implmode 'fast' is not allowed; use one of high_precision, "):
        CompileOptions(op_select_implmode="fast")


def test_precision_mode_with_precision_mode_v2_is_one_error() -> None:
    with pytest.raises(OptionError, match=r"precision_mode \(force_fp16\) and precision_mode_v2 \(origin\) cannot both be set"):
        CompileOptions(precision_mode="force_fp16", precision_mode_v2="origin")


def test_compile_options_check_files_when_made(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match="keep_dtype '/no/such/file' does not exist"):
        CompileOptions(keep_dtype="/no/such/file")
    bad = write(tmp_path, "bad.ini", "[ByType]\n")
    with pytest.raises(OptionError, match=f"op_precision_mode '{bad}' line 1: unknown section"):
        CompileOptions(op_precision_mode=bad)
    settings = CompileOptions(precision_mode_v2="mixed_float16").precision_settings()
    assert (settings.policy, settings.spelled, settings.mixed) == ("allow_mix_precision_fp16", "precision_mode_v2=mixed_float16", True)


# ----------------------------------------------------------------------- the files


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{\n  "black-list": {\n    "to-add": ["Relu",]\n  }\n}\n', "line 3: not valid JSON"),
        ('["Relu"]', "must be a JSON object with keys from black-list, white-list, gray-list"),
        ('{\n "grey-list": {}\n}', "line 2: unknown key 'grey-list'; use black-list, white-list, gray-list"),
        ('{"white-list": {"add": ["Relu"]}}', "'white-list' has unknown key 'add'; use 'to-add' or 'to-remove'"),
        ('{"white-list": ["Relu"]}', "'white-list' must be an object"),
        ('{"gray-list": {"to-remove": ["Relu"]}}', "'gray-list' has no 'to-remove'"),
        ('{"white-list": {"to-add": "Relu"}}', "'white-list'.'to-add' must be a list of op type names"),
        ('{"white-list": {"to-add": ["Relu"]},\n "black-list": {"to-add": ["Relu"]}}', "'Relu' is in 'to-add' of both 'white-list' and 'black-list'"),
    ],
)
def test_malformed_mixlist(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "mix.json", text)
    with pytest.raises(OptionError, match=f"modify_mixlist '{path}'.*{_re(message)}"):
        read_mixlist(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("relu\nOpType::\n", "line 2: 'OpType::' is not OpType::TypeName"),
        ("a::b\n", "line 1: 'a::b' is neither a node name nor OpType::TypeName"),
        ("OpType::Relu:x\n", "line 1: 'OpType::Relu:x' is not OpType::TypeName"),
    ],
)
def test_malformed_keep_dtype(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "keep.cfg", text)
    with pytest.raises(OptionError, match=f"keep_dtype '{path}' {_re(message)}"):
        read_keep_dtype(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("relu:InputDtype:float16\n", "line 1: 'relu:InputDtype:float16' has no '::'"),
        ("relu::InputDtype:float17,OutputDtype:float16\n", "line 1: unknown dtype 'float17'; use float16, float, float32"),
        ("OpType::Relu\n", "line 1: 'OpType::Relu' names no dtypes"),
        ("relu::Dtype:float16\n", "line 1: 'Dtype:float16' is not InputDtype:d1,...,OutputDtype:d1,..."),
        ("::InputDtype:float16\n", "line 1: '::InputDtype:float16' names no node or op type"),
        ("# c\nrelu::OutputDtype:float16\nrelu::InputDtype:float16\n", "line 3: 'relu' is configured again (first on line 2)"),
    ],
)
def test_malformed_customize_dtypes(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "c.cfg", text)
    with pytest.raises(OptionError, match=f"customize_dtypes '{path}' {_re(message)}"):
        read_customize_dtypes(path)


def test_customize_dtypes_reads_both_forms(tmp_path: Path) -> None:
    path = write(
        tmp_path, "c.cfg",
        "# By operator name\nresnet_v1_50/block1/Relu::InputDtype:float16,int8,OutputDtype:float16,int8\n"
        "OpType::Relu:InputDtype:float,OutputDtype:double\nconv::OutputDtype:float32\n",
    )
    rules = read_customize_dtypes(path)
    assert rules.names["resnet_v1_50/block1/Relu"].inputs == ("float16", "int8")
    assert rules.names["resnet_v1_50/block1/Relu"].outputs == ("float16", "int8")
    assert (rules.op_types["Relu"].inputs, rules.op_types["Relu"].outputs) == (("float32",), ("float64",))
    assert (rules.names["conv"].inputs, rules.names["conv"].outputs, rules.names["conv"].source.line) == (None, ("float32",), 4)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[ByOpType\n", "line 1: unknown section '[ByOpType'; use [ByOpType] or [ByNodeName]"),
        ("[ByOpType]\nSoftmaxV2 high_precision\n", "line 2: 'SoftmaxV2 high_precision' is not key=mode"),
        ("[ByOpType]\n=high_precision\n", "line 2: '=high_precision' has no op type or node name before '='"),
        ("[ByNodeName]\nsm=fast\n", "line 2: 'fast' is not an implementation mode; use high_precision, high_performance, super_performance, keep_fp16, support_out_of_bound_index"),
        ("[ByOpType]\nSoftmaxV2=keep_fp16\nSoftmaxV2=high_precision\n", "line 3: 'SoftmaxV2' is set again in [ByOpType] (first on line 2)"),
    ],
)
def test_malformed_op_precision_mode(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "p.ini", text)
    with pytest.raises(OptionError, match=f"op_precision_mode '{path}' {_re(message)}"):
        read_op_precision_mode(path)


def test_op_precision_mode_sections_and_comments(tmp_path: Path) -> None:
    path = write(tmp_path, "p.ini", "; modes\nGelu=super_performance\n[ByNodeName]\n# names\nlayer/sm = keep_fp16\n")
    modes = read_op_precision_mode(path)
    assert {k: r.mode for k, r in modes.op_types.items()} == {"Gelu": "super_performance"}
    assert {k: (r.mode, r.source.line) for k, r in modes.names.items()} == {"layer/sm": ("keep_fp16", 5)}


def test_unreadable_files(tmp_path: Path) -> None:
    path = tmp_path / "binary.cfg"
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(OptionError, match=f"keep_dtype '{path}' is not UTF-8 text"):
        read_keep_dtype(str(path))
    with pytest.raises(OptionError, match=f"modify_mixlist '{tmp_path}' is a directory, not a file"):
        read_mixlist(str(tmp_path))


def _re(text: str) -> str:
    import re

    return re.escape(text)


# ------------------------------------------------------------------------ pipeline


def test_pipeline_runs_precision_selection_after_fusion_and_dumps_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DUMP_GE_GRAPH", "2")
    monkeypatch.setenv("DUMP_GRAPH_LEVEL", "OptimizeOriginalGraph|AfterPrecision")
    monkeypatch.setenv("ASCEND_WORK_PATH", str(tmp_path))
    module, _ = ge.load_onnx(str(RESNET.path))
    result = pipeline.optimize(module, CompileOptions(export_compile_stat=0))
    names = [Path(p).name for p in result.dumps]
    assert [n.split("_graph_0_")[1] for n in names] == ["OptimizeOriginalGraph.mlir", "AfterPrecision.mlir"]
    before, after = (Path(p).read_text() for p in result.dumps)
    assert "_precision_reason" not in before and '_precision_reason = "precision_mode=force_fp16 (default)"' in after
    assert "precision selection" in result.timings
    convs = [op for op in module.walk() if isinstance(op, Conv2DOp)]
    assert convs and all(dtype_of(c.y.type) == dtype_of(c.x.type) for c in convs)
    assert all(str(dtype_of(c.x.type)) == "f16" for c in convs)


def test_pipeline_must_keep_origin_dtype_matches_the_imported_graph() -> None:
    module, store = ge.load_onnx(str(RESNET.path))
    imported = module.clone()
    pipeline.optimize(module, CompileOptions(precision_mode="must_keep_origin_dtype", export_compile_stat=0))
    inputs = RESNET.sample_inputs(0)
    want = ge.reference.run(imported, inputs, store)
    got = ge.reference.run(module, inputs, store)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5 * np.max(np.abs(want[name])))


# -------------------------------------------------------------- ge precision-report


def run_ge(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "ge"), *map(str, args)], capture_output=True, text=True, cwd=cwd)


def test_precision_report_prints_layers_and_writes_csv(tmp_path: Path) -> None:
    out = tmp_path / "layers.csv"
    result = run_ge("precision-report", RESNET.path, "--precision_mode=allow_mix_precision", "--soc_version=Ascend910B1", "--top", "3", "--csv", out)
    assert result.returncode == 0, result.stderr
    assert "the 3 largest errors" in result.stdout and "output logits: max abs error" in result.stdout
    assert sum(line.startswith("│") for line in result.stdout.splitlines()) == 3
    rows = list(csv.DictReader(out.open()))
    assert rows and [r["index"] for r in rows] == [str(i) for i in range(len(rows))]
    by_type = {r["op_type"]: r for r in rows}
    assert by_type["Conv2D"]["dtype"] == "float16" and by_type["Conv2D"]["reason"].endswith("white list")
    assert by_type["Conv2D"]["engine"] == "AI Core"
    compared = [r for r in rows if r["max_rel_error"]]  # ops the compile inserted may have no counterpart
    assert {r["op_type"] for r in compared} >= {"Conv2D", "Relu", "Add", "MatMulV2"}
    assert all(float(r["max_rel_error"]) < 0.05 for r in compared)
    assert all(r["reason"] for r in rows if r["op_type"] not in ("Cast", "TransData"))


def test_precision_report_takes_given_inputs(tmp_path: Path) -> None:
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 3, 32, 32), np.float32))
    name = next(iter(RESNET.sample_inputs(0)))
    result = run_ge("precision-report", RESNET.path, "--precision_mode=must_keep_origin_dtype", "--input", f"{name}={x}")
    assert result.returncode == 0, result.stderr
    assert "max abs error 0," in result.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--precision_mode=fp16",), "precision_mode 'fp16' is not allowed"),
        (("--precision_mode=force_fp16", "--precision_mode_v2=fp16"), "cannot both be set"),
        (("--input", "x"), "--input 'x' is not NAME=FILE.npy"),
        (("--top", "0"), "--top 0 is not allowed"),
        (("--precision_mode=allow_fp32_to_bf16",), "needs bfloat16, which Ascend310P3 does not have"),
    ],
)
def test_precision_report_fails_with_one_line(args: tuple[str, ...], fragment: str) -> None:
    result = run_ge("precision-report", RESNET.path, *args)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ge: error: ") and fragment in lines[0], result.stderr
