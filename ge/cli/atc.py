"""`ge atc`: compile an ONNX model into an offline model, with ATC's command line.

    ge atc --model=resnet50.onnx --framework=5 --output=resnet50 --soc_version=Ascend310P3

Arguments are spelled as ATC spells them, `--name=value`. `--model`, `--framework`
(5: ONNX, the only framework imported here), `--output` (`.om` is appended) and
`--soc_version` are required. Every other name is a `CompileOptions` field
(`--input_shape`, `--fusion_switch_file`, `--precision_mode`, ...) and is validated
there; an unknown name lists the known ones. `--log` is read wherever it stands.

Some ATC options are accepted so that existing command lines run, but have no
effect on a simulated part (`NO_EFFECT` says why); each one given is warned about.

The command prints the phases with their times, the kernels, tasks, streams and
events, and the memory plan (feature map beside its theoretical minimum and the
size without reuse, inputs, outputs, weights). The `.om` is written only when the
whole compile succeeded, and atomically.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from ge.core.errors import OptionError

console = Console()
log = logging.getLogger("ge")

FRAMEWORKS = {"0": "Caffe", "1": "MindSpore", "3": "TensorFlow", "5": "ONNX"}
ONNX = "5"
REQUIRED = ("model", "framework", "output", "soc_version")

NO_EFFECT: dict[str, str] = {
    "host_env_os": "the model runs on the simulator, whatever the host's operating system",
    "host_env_cpu": "the model runs on the simulator, whatever the host's CPU architecture",
    "op_compiler_cache_mode": "kernels are generated in every compile; there is no operator compile cache",
    "op_compiler_cache_dir": "kernels are generated in every compile; there is no operator compile cache",
    "debug_dir": "no operator debug files (.o, .json, .cce) exist to be written",
    "op_debug_level": "there is no operator binary to build with debug information",
    "status_check": "there is no operator binary to instrument with overflow checks",
}
"""ATC options accepted for compatibility only, and why they cannot do anything here."""

CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": ["--help", "-h"]}


def atc(ctx: typer.Context) -> None:
    """Compile an ONNX model into NAME.om, with ATC's --name=value options.

    Required: --model=FILE.onnx --framework=5 --output=NAME --soc_version=SOC.

    Also every compile option by its ATC name, e.g. --input_shape="input:1,3,224,224",
    --fusion_switch_file=FILE, --disable_reuse_memory=1, --enable_single_stream=true,
    --stream_max_parallel_num="AIcoreEngine:2"; an unknown name lists them all.

    Accepted without effect, with a warning: --host_env_os, --host_env_cpu,
    --op_compiler_cache_mode, --op_compiler_cache_dir, --debug_dir, --op_debug_level,
    --status_check.
    """
    flags = parse_flags(ctx.args)
    for name in REQUIRED:
        if name not in flags:
            raise OptionError(f"--{name} is required (ge atc --model=M.onnx --framework=5 --output=NAME --soc_version=SOC)")
    framework = flags.pop("framework")
    if framework != ONNX:
        known = FRAMEWORKS.get(framework)
        what = f"{known} is not supported here" if known else "is not an ATC framework"
        raise OptionError(f"--framework={framework}: {what}; use --framework={ONNX} (ONNX)")
    for name in [n for n in flags if n in NO_EFFECT]:
        log.warning("--%s has no effect: %s", name, NO_EFFECT[name])
        del flags[name]
    model = Path(flags.pop("model"))
    output = om_path(flags.pop("output"))
    options = compile_options(flags)
    if not model.is_file():
        raise OptionError(f"--model={model}: no such file")
    if not output.parent.is_dir():
        raise OptionError(f"--output={output}: directory '{output.parent}' does not exist")

    import ge

    compiled = ge.compile(model, options)
    started = time.perf_counter()
    compiled.save(output)
    _report(model, output, compiled, time.perf_counter() - started)


def parse_flags(args: list[str]) -> dict[str, str]:
    """`--name=value` arguments as {name: value}; anything else is refused."""
    flags: dict[str, str] = {}
    for arg in args:
        name, eq, value = arg.partition("=")
        if not name.startswith("--") or not eq or len(name) < 3:
            raise OptionError(f"argument '{arg}' is not --name=value (ATC's spelling, e.g. --model=resnet50.onnx)")
        name = name[2:]
        if name in flags:
            raise OptionError(f"--{name} is given twice")
        flags[name] = value
    return flags


def om_path(output: str) -> Path:
    """ATC's --output names the model without its suffix; `.om` is added."""
    if not output:
        raise OptionError("--output is empty; give the model's path without .om, e.g. --output=out/resnet50")
    return Path(output if output.endswith(".om") else f"{output}.om")


def compile_options(flags: dict[str, str]):
    """CompileOptions from string flags, each converted to its field's type."""
    from ge.options import CompileOptions

    types = {f.name: str(f.type) for f in dataclasses.fields(CompileOptions)}
    unknown = sorted(set(flags) - set(types))
    if unknown:
        known = sorted({*REQUIRED, *types, *NO_EFFECT} - {"session_id", "graph_id"})
        raise OptionError(f"unknown option --{unknown[0]}; known: {', '.join('--' + k for k in known)}")
    return CompileOptions.from_flags(**{name: _convert(name, value, types[name]) for name, value in flags.items()})


def _convert(name: str, value: str, annotation: str) -> object:
    kind = annotation.split("|")[0].strip()
    if kind == "int":
        try:
            return int(value)
        except ValueError:
            raise OptionError(f"--{name}={value}: not an integer") from None
    if kind == "bool":
        if value.lower() not in ("true", "false", "1", "0"):
            raise OptionError(f"--{name}={value}: use true or false")
        return value.lower() in ("true", "1")
    return value


def _report(model: Path, output: Path, compiled, saved: float) -> None:
    from ge.om import Region
    from ge.cli.summary import human_bytes

    timings: dict[str, float] = {**compiled.build["timings"], "write .om": saved}
    phases = Table(title="phases", title_justify="left")
    phases.add_column("phase")
    phases.add_column("time", justify="right")
    for name, seconds in timings.items():
        phases.add_row(name, f"{seconds * 1e3:.1f} ms")
    phases.add_row("total", f"{sum(timings.values()) * 1e3:.1f} ms", style="bold")
    console.print(f"[bold]{model}[/] -> [bold]{output}[/] for {compiled.soc_version}")
    console.print(phases)
    console.print(
        f"kernels: {compiled.build['kernels']}, tasks: {compiled.build['tasks']}, "
        f"streams: {compiled.streams}, event ids: {compiled.events}"
    )
    plan = compiled.memory
    fm = plan.sizes[Region.FEATURE_MAP]
    ratio = f" ({fm / plan.feature_map_minimum:.2f}x)" if plan.feature_map_minimum else ""
    memory = Table(title=f"memory ({plan.strategy})", title_justify="left")
    memory.add_column("region")
    memory.add_column("bytes", justify="right")
    memory.add_column("")
    memory.add_row("feature map", f"{fm:,}", human_bytes(fm) + ratio)
    memory.add_row("  theoretical minimum", f"{plan.feature_map_minimum:,}", human_bytes(plan.feature_map_minimum))
    memory.add_row("  without reuse", f"{plan.feature_map_no_reuse:,}", human_bytes(plan.feature_map_no_reuse))
    for region, label in ((Region.INPUT, "inputs"), (Region.OUTPUT, "outputs"), (Region.WEIGHT, "weights")):
        memory.add_row(label, f"{plan.sizes[region]:,}", human_bytes(plan.sizes[region]))
    memory.add_row("total", f"{plan.total:,}", human_bytes(plan.total), style="bold")
    console.print(memory)
    console.print("ATC run success")
