"""The one option table (`ge.core.options`): every compile option, run option, pass
option and command-line help derives from it, and a compile is one `ge-opt` pipeline."""

from __future__ import annotations

import dataclasses
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ge.core import ir
from ge.core.errors import OptionError
from ge.core.options import ATC, OPTION, OPTIONS, RUN, CompileOptions, options_of
from ge.frontend import load_onnx
from ge.models import DEMO_MODELS
from ge.pipeline import optimize
from ge.sim.config import RunConfig
from passes import registry

BIN = Path(sys.executable).parent


def test_every_default_is_allowed_by_its_own_option() -> None:
    for option in OPTIONS:
        option.check(option.default)


@pytest.mark.parametrize(("config", "tool"), [(CompileOptions, ATC), (RunConfig, RUN)])
def test_configs_hold_exactly_their_tools_options_with_the_tables_defaults(config, tool) -> None:
    fields = {f.name: f for f in dataclasses.fields(config) if f.name in OPTION}
    held = {o.name for o in options_of(tool) if o.no_effect is None or tool == RUN}  # RunConfig(name=...) takes every one
    assert set(fields) == held
    for name, f in fields.items():
        assert f.default == OPTION[name].default, name
        assert f.metadata["option"] is OPTION[name]


def test_pass_options_named_after_an_option_come_from_the_table() -> None:
    """`soc_version` is spelled one way, with one default, in every pass."""
    checked = 0
    for name, factory in registry.available_passes().items():
        cls = factory()
        if not dataclasses.is_dataclass(cls):
            continue
        for f in dataclasses.fields(cls):
            assert f.name != "soc", f"{name} spells the SoC option 'soc'; use soc_version"
            if f.name in OPTION:
                assert f.default == OPTION[f.name].default and f.metadata.get("option") is OPTION[f.name], (name, f.name)
                checked += 1
    assert checked >= 10  # precision (9 options), format, lowering and the UB fusion passes


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"soc_version": "Ascend999"}, "soc_version 'Ascend999' is not allowed; use one of Ascend310, "),
        ({"export_compile_stat": 3}, "export_compile_stat 3 is not allowed; use one of 0, 1, 2"),
        ({"enable_single_stream": "yes"}, "enable_single_stream 'yes' is not allowed; use true or false"),
        ({"precision_mode": "fp8"}, "precision_mode 'fp8' is not allowed; use one of force_fp16, "),
        ({"no_such_option": 1}, "unknown option 'no_such_option'; known options: "),
    ],
)
def test_a_bad_compile_option_names_the_option_the_value_and_what_is_allowed(flags, message) -> None:
    with pytest.raises(OptionError, match=re.escape(message)):
        CompileOptions.from_flags(**flags)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"input_fusion_size": -1}, "input_fusion_size -1 is not allowed; use an integer >= 0 and <= 33554432"),
        ({"aicore_num": 0}, "aicore_num 0 is not allowed; use an integer >= 1"),
        ({"aicore_num": True}, "aicore_num True is not allowed"),
        ({"profile_level": "op"}, "profile_level 'op' is not allowed; use one of task, pipe"),
        ({"soc_version": "Ascend310P3"}, "unknown run option 'soc_version'"),
    ],
)
def test_a_bad_run_option_names_the_option_the_value_and_what_is_allowed(flags, message) -> None:
    with pytest.raises(OptionError, match=re.escape(message)):
        RunConfig.from_flags(**flags)


def test_an_option_without_effect_is_accepted_and_warned_about(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="ge"):
        options = CompileOptions.from_flags(status_check=1, soc_version="Ascend910B1")
    assert options.soc_version == "Ascend910B1"
    assert [r.getMessage() for r in caplog.records] == [
        f"--status_check has no effect: {OPTION['status_check'].no_effect}"
    ]


def test_command_line_values_are_parsed_by_the_table() -> None:
    assert OPTION["enable_single_stream"].parse("TRUE") is True
    assert OPTION["disable_reuse_memory"].parse("1") == 1
    with pytest.raises(OptionError, match="--disable_reuse_memory=x2: not an integer; use one of 0, 1"):
        OPTION["disable_reuse_memory"].parse("x2")
    with pytest.raises(OptionError, match="disable_reuse_memory 2 is not allowed; use one of 0, 1"):
        OPTION["disable_reuse_memory"].parse("2")


@pytest.mark.parametrize(("command", "tool"), [("atc", ATC), ("optimize", ATC), ("precision-report", ATC), ("run", RUN)])
def test_the_help_of_each_command_lists_its_options(command: str, tool: str) -> None:
    env = {"COLUMNS": "200", "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}  # this tree's ge, as the test runs it
    result = subprocess.run([BIN / "ge", command, "--help"], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    spelled = result.stdout.replace("-", "_")  # typer options may be spelled with '-'
    for option in options_of(tool):
        assert "__" + option.name in spelled, option.name


@pytest.mark.parametrize("model", DEMO_MODELS, ids=lambda m: m.name)
@pytest.mark.parametrize("soc_version", ["Ascend310P3", "Ascend910B1"])
def test_a_compile_is_the_ge_opt_pipeline_it_prints(model, soc_version: str, tmp_path: Path) -> None:
    """`ge atc --log=info` prints a `ge-opt` command; running it gives the IR the compile lowered."""
    result = subprocess.run(
        [BIN / "ge", "--log=info", "atc", f"--model={model.path}", "--framework=5", "--output=out", f"--soc_version={soc_version}"],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    (command,) = [line.split("ge-opt: ", 1)[1] for line in result.stderr.splitlines() if "the same compile in ge-opt: " in line]
    spec = command.split(" -p ", 1)[1].strip("'")
    opt = subprocess.run([BIN / "ge-opt", model.path, "-p", spec], capture_output=True, text=True, cwd=tmp_path)
    assert opt.returncode == 0, opt.stderr

    module, _ = load_onnx(model.path)
    compilation = optimize(module, CompileOptions(soc_version=soc_version, export_compile_stat=0))
    compilation.lower()
    assert _without_weights_file(opt.stdout) == _without_weights_file(ir.to_text(module))


def _without_weights_file(text: str) -> str:
    """The IR without the module attribute naming where its weights reload from."""
    return re.sub(r'ascend_graph.weights = "[^"]*"', "", text)
