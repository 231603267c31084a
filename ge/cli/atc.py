"""`ge atc`: compile an ONNX model into an offline model, with ATC's command line.

    ge atc --model=resnet50.onnx --framework=5 --output=resnet50 --soc_version=Ascend310P3

Arguments are spelled as ATC spells them, `--name=value`. `--model`, `--framework`
(5: ONNX, the only framework imported here), `--output` (`.om` is appended) and
`--soc_version` are required. Every other name is a compile option of the option
table (`ge.core.options`: `--input_shape`, `--fusion_switch_file`,
`--precision_mode`, ...), parsed and checked there; an unknown name lists the known
ones. `--log` is read wherever it stands. Options the table marks as having no
effect here are accepted, so that existing command lines run, and warned about.

The command prints the phases with their times, the kernels, tasks, streams and
events, and the memory plan (feature map beside its theoretical minimum and the
size without reuse, inputs, outputs, weights). The `.om` is written only when the
whole compile succeeded, and atomically.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from ge.core.errors import OptionError
from ge.core.files import check_output
from ge.core.options import ATC

console = Console()
log = logging.getLogger("ge")

FRAMEWORKS = {"0": "Caffe", "1": "MindSpore", "3": "TensorFlow", "5": "ONNX"}
ONNX = "5"
REQUIRED = ("model", "framework", "output", "soc_version")

CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True}
"""`-h` is read as `--help` before click sees it (`ge.cli.main.atc_spelling`): as a short
option, click would find it inside any single-dash argument with an `h` in it."""


def atc(ctx: typer.Context) -> None:
    """Compile an ONNX model into NAME.om, with ATC's --name=value options.

    Required: --model=FILE.onnx --framework=5 --output=NAME --soc_version=SOC.
    --load-pass-plugin=FILE.py|MODULE (repeatable) adds outside passes, as in ge-opt.
    The compile options (from the option table) follow.
    """
    flags = parse_flags(load_plugins(ctx.args))
    for name in REQUIRED:
        if name not in flags:
            raise OptionError(f"--{name} is required (ge atc --model=M.onnx --framework=5 --output=NAME --soc_version=SOC)")
    framework = flags.pop("framework")
    if framework != ONNX:
        known = FRAMEWORKS.get(framework)
        what = f"{known} is not supported here" if known else "is not an ATC framework"
        raise OptionError(f"--framework={framework}: {what}; use --framework={ONNX} (ONNX)")
    model = Path(flags.pop("model"))
    output = om_path(flags.pop("output"))
    options = compile_options(flags, extra=REQUIRED)
    if not model.is_file():
        raise OptionError(f"--model={model}: no such file")
    check_output(output, "--output")

    import ge

    compiled = ge.compile(model, options)
    started = time.perf_counter()
    compiled.save(output)
    report(model, output, compiled, time.perf_counter() - started)


def options_help(tool: str = ATC) -> str:
    """The options of a command, one paragraph each, from the option table."""
    from ge.core.options import help_lines

    return "\n\n".join(help_lines(tool))


PLUGIN_FLAGS = ("--load-pass-plugin", "--load_pass_plugin")


def load_plugins(args: list[str]) -> list[str]:
    """Load every `--load-pass-plugin=FILE.py|MODULE` (repeatable, as in ge-opt) and return
    the other arguments: an outside fusion pass then joins the compile, its switch-file
    entry and fusion_result.json like a built-in one."""
    from passes.registry import load_plugin

    rest = []
    args = list(args)
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if name not in PLUGIN_FLAGS:
            rest.append(arg)
            continue
        if not eq:
            if not args:
                raise OptionError(f"{name} needs a plug-in: {name}=FILE.py or a module name")
            value = args.pop(0)
        load_plugin(value)
    return rest


def parse_flags(args: list[str]) -> dict[str, str]:
    """`--name=value` (or `--name value`) arguments as {name: value}; `-` in a name reads
    as `_`; anything else is refused."""
    flags: dict[str, str] = {}
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        name, eq, value = arg.partition("=")
        if not eq and name.startswith("--") and rest and not rest[0].startswith("--"):
            value, eq = rest.pop(0), "="
        if not name.startswith("--") or not eq or len(name) < 3:
            raise OptionError(f"argument '{arg}' is not --name=value (ATC's spelling, e.g. --model=resnet50.onnx)")
        name = name[2:].replace("-", "_")
        if name in flags:
            raise OptionError(f"--{name} is given twice")
        flags[name] = value
    return flags


def om_path(output: str) -> Path:
    """ATC's --output names the model without its suffix; `.om` is added."""
    if not output:
        raise OptionError("--output is empty; give the model's path without .om, e.g. --output=out/resnet50")
    return Path(output if output.endswith(".om") else f"{output}.om")


def compile_options(flags: dict[str, str], extra: tuple[str, ...] = (), **fixed: object):
    """CompileOptions from string flags, each parsed by its option in the table; an
    unknown name lists the command's options (and `extra`, its own arguments). `fixed`
    are options the command sets itself, which the user may not give."""
    from ge.core.options import OPTION, CompileOptions, options_of

    unknown = sorted(name for name in flags if name not in OPTION or ATC not in OPTION[name].tools or name in fixed)
    if unknown:
        known = sorted({*extra, *(o.name for o in options_of(ATC))})
        raise OptionError(f"unknown option --{unknown[0]}; known: {', '.join('--' + k for k in known)}")
    return CompileOptions.from_flags(**{name: OPTION[name].parse(value) for name, value in flags.items()}, **fixed)


def block_dims(compiled) -> str:
    """Every kernel's block_dim, counted, and whether the model was built for virtual instances."""
    from collections import Counter

    from ge.core import soc
    from ge.om.tasks import KernelTask

    launches = [t for t in compiled.tasks if isinstance(t, KernelTask)]
    counts = Counter(t.block_dim for t in launches)
    text = "block_dim: " + ", ".join(f"{dim} on {n} kernel task{'s' * (n > 1)}" for dim, n in sorted(counts.items(), reverse=True))
    if compiled.options.get("virtual_type") != 1:
        return text + "; built for the whole chip (--virtual_type=0)"
    sizes = soc.load(compiled.soc_version).virtual_aicore_nums
    single = [t.name for t in launches if t.block_dim == 1]
    soft = f"; on one core (soft-sync): {', '.join(single)}" if single else ""
    return (
        f"{text}; built for virtual instances: balanced on slices of {', '.join(map(str, sizes))} AI cores "
        f"(every block_dim a multiple of {math.lcm(*sizes)}){soft}"
    )


def cache_line(cache: dict) -> str:
    """What the kernel compile cache did: hits and misses in its folder, or why it was off."""
    if "off" in cache:
        return f"kernel cache: off ({cache['off']})"
    return f"kernel cache: {cache['hits']} hits, {cache['misses']} misses ({cache['mode']}, {cache['dir']})"


def report(model: Path, output: Path, compiled, saved: float) -> None:
    """What a compile made: phases with their times, kernels, tasks, streams, the memory plan."""
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
    console.print(block_dims(compiled))
    console.print(cache_line(compiled.build["kernel_cache"]))
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
