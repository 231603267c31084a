"""Random command lines through `ge` and `ge-opt`, in process: every one either
succeeds or fails with one `tool: error:` line and exit 1 — never an internal
error, a traceback, or another exit code."""

from __future__ import annotations

import io
import os
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from hypothesis import event, given, settings
from hypothesis import strategies as st

from ge.cli import main as ge_main
from ge.cli import opt as ge_opt
from ge.core.options import OPTIONS
from ge.models import DEMO_MODELS

MODEL = str(DEMO_MODELS[0].path)
HERE = Path(__file__).resolve().parent

VALUES = st.one_of(
    st.sampled_from(
        [
            "", "0", "1", "-1", "99999999999999999999", "1e400", "nan", "h", "-h", "true", "x" * 300,
            "Ascend310P3", "Ascend999", "force_fp16", "input:1,3,32,32", "input:-1,3,32,32", "input:1,3,99999999999999999999,32",
            "input:;", ":", "a:b:c", MODEL, "missing.onnx", "out", "out/", "..", "../../etc/passwd", "\u00e9\u4e2d", "5", "3",
            str(HERE), str(HERE / "conftest.py"),
        ]
    ),
    st.text(max_size=12),
)
NAMES = st.sampled_from(
    [o.name for o in OPTIONS] + ["model", "framework", "output", "soc_version", "mode", "log", "bogus", "help", "input", "seed", "csv"]
)


SENSIBLE = [f"--{o.name}={c}" for o in OPTIONS for c in o.choices] + ["--input_shape=input:1,3,32,32", "--input_shape=input:2,3,16,16"]


@st.composite
def flags(draw) -> list[str]:
    args = []
    for _ in range(draw(st.integers(0, 3))):
        if draw(st.booleans()):  # a valid option, so that compiles get far with odd combinations
            args.append(draw(st.sampled_from(SENSIBLE)))
            continue
        dashes = draw(st.sampled_from(["--", "-", "---", ""]))
        name, value = draw(NAMES), draw(VALUES)
        args.append(f"{dashes}{name}" if draw(st.booleans()) and name != "model" else f"{dashes}{name}={value}")
    return args


def outcome(entry, argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    code = 0
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        try:
            entry(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return code, err.getvalue()


def well_behaved(code: int, stderr: str, tool: str) -> None:
    assert code in (0, 1), (code, stderr)
    assert "internal error" not in stderr, stderr
    assert "Traceback" not in stderr, stderr
    if code == 1:
        errors = [line for line in stderr.splitlines() if line.startswith(f"{tool}: error: ")]
        assert len(errors) == 1, stderr


@settings(max_examples=80)
@given(
    command=st.sampled_from(["atc", "optimize", "precision-report", "inspect", "run"]),
    model=st.sampled_from([MODEL, "", "missing.onnx", str(HERE)]),
    extra=flags(),
)
def test_ge_command_lines(tmp_path_factory, command: str, model: str, extra: list[str]):
    cwd = tmp_path_factory.mktemp("cli")
    base = {
        "atc": [f"--model={model}", "--framework=5", "--output=out", "--soc_version=Ascend310P3"],
        "optimize": [model],
        "precision-report": [model],
        "inspect": [model],
        "run": ["out.om", "--timing-only"],
    }[command]
    here = os.getcwd()
    os.chdir(cwd)
    try:
        code, stderr = outcome(ge_main.main, [command, *base, *extra])
    finally:
        os.chdir(here)
    event(f"exit {code}")
    well_behaved(code, stderr, "ge")


@settings(max_examples=40)
@given(
    source=st.sampled_from([MODEL, str(HERE / "conftest.py"), "missing.mlir"]),
    extra=st.lists(
        st.sampled_from(
            ["-p", "canonicalize", "constant-folding,cse", "nosuch", "lower-to-kernel", "--input-shape", "input:1,3,32,32",
             "input:x", "-o", "out.mlir", "--split-input-file", "-f", "onnx", "mlir", "--log", "info", "--bogus", "-t", "mlir"]
        ),
        max_size=6,
    ),
)
def test_ge_opt_command_lines(tmp_path_factory, source: str, extra: list[str]):
    cwd = tmp_path_factory.mktemp("opt")
    here = os.getcwd()
    os.chdir(cwd)
    try:
        code, stderr = outcome(ge_opt.main, [source, *extra])
    finally:
        os.chdir(here)
    event(f"exit {code}")
    well_behaved(code, stderr, "ge-opt")
