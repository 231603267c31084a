"""Every run option of the table (NPURunConfig's and the simulator's own), from the table:
an accepted value makes a RunConfig, a bad one fails naming the option and what is
allowed, the documented conflicts are refused, and an option without effect here (or
deprecated) is warned about once, whether it comes from Python or from flags."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from ge.core.errors import OptionError
from ge.core.options import RUN, help_lines, options_of
from ge.sim.config import RunConfig

RUN_OPTIONS = options_of(RUN)

FILES = {
    "fusion_switch_file": '{"Switch": {"GraphFusion": {"ALL": "off"}}}',
    "modify_mixlist": '{"black-list": {"to-add": ["MatMul"]}}',
    "customize_dtypes": "OpType::Relu:InputDtype:float16,OutputDtype:float16\n",
    "op_precision_mode": "[ByOpType]\nRelu=high_precision\n",
    "op_debug_config": "op_debug_config=oom\n",
}
"""Options whose value is a file: a small valid one."""
NEEDS = {
    "enable_dump": {"dump_path": "dump"},
    "dump_path": {"enable_dump": True},
    "dump_step": {"enable_dump": True, "dump_path": "dump"},
    "dump_mode": {"enable_dump": True, "dump_path": "dump"},
    "dump_layer": {"enable_dump": True, "dump_path": "dump"},
    "enable_dump_debug": {"dump_debug_path": "debug"},
    "dump_debug_path": {"enable_dump_debug": True},
    "dump_debug_mode": {"enable_dump_debug": True, "dump_debug_path": "debug"},
    "optypelist_for_implmode": {"op_select_implmode": "high_precision"},
    "local_device_list": {"local_rank_id": 0},
    "dynamic_graph_execute_mode": {"dynamic_input": True},
    "dynamic_inputs_shape_range": {"dynamic_input": True},
    "variable_placement": {"mix_compile_mode": True},
    "precision_mode": {"graph_run_mode": 0},
}
"""The other options an option is used with (NPURunConfig's dependencies)."""
VALUES = {"dump_step": "0|2-3", "dump_layer": "conv1", "optypelist_for_implmode": "Pooling", "stream_max_parallel_num": "AIcoreEngine:2",
          "local_device_list": "0,1", "dynamic_inputs_shape_range": "data:[1~4,3]", "stream_sync_timeout": 60000, "event_sync_timeout": 60000}


def accepted(option, tmp_path: Path) -> dict[str, object]:
    """Flags setting `option` to a value other than its default, with what it needs."""
    flags: dict[str, object] = {k: str(tmp_path / v) if k.endswith("path") else v for k, v in NEEDS.get(option.name, {}).items()}
    if option.name in FILES:
        path = tmp_path / option.name
        path.write_text(FILES[option.name])
        value: object = str(path)
    elif option.name in VALUES:
        value = VALUES[option.name]
    elif option.name.endswith("path"):
        value = str(tmp_path / option.name)
    elif option.choices:
        value = next(c for c in option.choices if c != option.default)
    elif option.type is bool:
        value = not option.default
    elif option.type is int:
        value = (option.minimum if option.minimum is not None else 0) + 1
    elif option.type is object:
        value = object()
    else:
        value = "x"
    return {**flags, option.name: value}


def bad(option) -> object:
    """A value the option refuses."""
    if option.choices:
        return "bogus" if option.type is not str else "bogus-value"
    if option.type is int:
        return option.minimum - 1 if option.minimum is not None else "7"
    if option.type is bool:
        return "yes"
    return 5


@pytest.mark.parametrize("option", RUN_OPTIONS, ids=lambda o: o.name)
def test_an_accepted_value_makes_a_config(option, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    flags = accepted(option, tmp_path)
    with caplog.at_level(logging.WARNING, logger="ge"):
        config = RunConfig(**flags)
    assert getattr(config, option.name) == flags[option.name]
    assert config == RunConfig.from_flags(**flags) or option.type is object


@pytest.mark.parametrize("option", [o for o in RUN_OPTIONS if o.type is not object], ids=lambda o: o.name)
def test_a_bad_value_names_the_option_and_what_is_allowed(option) -> None:
    with pytest.raises(OptionError, match=f"^\\[E\\d+\\] {option.name} .* is not allowed; use {option.allowed}"):
        RunConfig(**{option.name: bad(option)})


@pytest.mark.parametrize("option", [o for o in RUN_OPTIONS if o.no_effect or RUN in o.deprecated], ids=lambda o: o.name)
@pytest.mark.parametrize("path", ["python", "flags"])
def test_no_effect_and_deprecated_options_warn_once_when_set(option, path: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    flags = accepted(option, tmp_path)
    with caplog.at_level(logging.WARNING, logger="ge"):
        RunConfig(**flags) if path == "python" else RunConfig.from_flags(**flags)
    if option.no_effect:
        assert caplog.text.count(f"--{option.name} has no effect: {option.no_effect}") == 1
    if RUN in option.deprecated:
        assert caplog.text.count(f"--{option.name} is deprecated") == 1


def test_defaults_warn_about_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ge"):
        RunConfig()
    assert caplog.text == ""


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"iterations_per_loop": 10, "mix_compile_mode": True}, "iterations_per_loop 10 needs mix_compile_mode off"),
        ({"variable_placement": "Host"}, "variable_placement 'Host' needs mix_compile_mode=True"),
        ({"local_device_list": "0,1"}, "local_device_list needs local_rank_id"),
        ({"graph_run_mode": 0, "enable_small_channel": 0}, "enable_small_channel 0 is not allowed with graph_run_mode=0"),
        ({"precision_mode": "force_fp16"}, "precision_mode 'force_fp16' applies only to online inference; set graph_run_mode=0"),
        ({"precision_mode": "force_fp32", "precision_mode_v2": "fp16"}, "precision_mode"),
        ({"optypelist_for_implmode": "Pooling"}, "optypelist_for_implmode"),
        ({"dynamic_inputs_shape_range": "data:[1]"}, "dynamic_inputs_shape_range needs dynamic_input=True"),
        ({"stream_sync_timeout": 0}, "stream_sync_timeout 0 is not allowed; use -1 \\(no limit\\)"),
        ({"session_device_id": 8}, "session_device_id 8 is not allowed; use an integer >= 0 and <= 7"),
        ({"fusion_switch_file": "/no/such/file"}, "fusion_switch_file '/no/such/file' does not exist"),
    ],
)
def test_conflicts_are_refused(flags: dict[str, object], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        RunConfig(**flags)


def test_unknown_flag_lists_the_run_options() -> None:
    with pytest.raises(OptionError, match="unknown run option 'graph_mode'; known options: .*graph_run_mode"):
        RunConfig.from_flags(graph_mode=0)


def test_graph_run_mode_sets_the_compile_defaults() -> None:
    assert RunConfig().compile_flags() == {"precision_mode": "allow_fp32_to_fp16"}
    assert RunConfig(graph_run_mode=0).compile_flags() == {"precision_mode": "force_fp16", "enable_small_channel": 1}
    assert RunConfig(precision_mode_v2="origin").compile_flags() == {"precision_mode_v2": "origin"}


def test_every_npurunconfig_option_of_the_reference_is_a_run_option() -> None:
    """The reference names each option on a line of its own (two are one word)."""
    reference = Path("/work/shared/reference/npu_run_config_options.txt")
    if not reference.exists():
        pytest.skip("the NPURunConfig reference is not on this machine")
    lines = {line.strip() for line in reference.read_text().splitlines()}
    named = {n for n in lines if re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)+", n)} | {"deterministic", "distribute"}
    assert len(named) == 57
    assert named <= {o.name for o in RUN_OPTIONS}


def test_the_readme_lists_the_run_options_as_the_help_does() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = readme.split("tests/test_run_options.py keeps it in step -->\n")[1].split("\n<!-- end of run options -->")[0]
    assert block.splitlines() == ["- " + line for line in help_lines(RUN)]
