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

`--mode` picks ATC's other jobs (`MODES`; the JSON and tables are `ge.cli.om_info`'s):
1 a `.om` (or, with `--framework=5`, an ONNX model) as JSON; 3 the pre-check
(`ge.frontend.precheck`), its report where ATC puts it (`--check_report`, else
`$ASCEND_WORK_PATH`, else the current directory: not beside `--output`, which ATC does
not use for it); 5 a graph dump as JSON; 6 a `.om`'s key information. Mode 5 keeps
ATC's meaning (a GE dump to JSON) rather than making dumps: `DUMP_GE_GRAPH` with
`ge atc` or `ge optimize` already writes one per phase, and a CANN user's
`--mode=5 --om=DUMP --json=OUT` command line then works here too. The mode is read
first: it decides the flags. Each mode's usage line says what it requires and takes
([optional]); any other flag is refused, but for --mode=3, which accepts a whole
compile's command line (checking its options and warning that they do not change
the import). Outputs are checked before any work and written whole
(`ge.core.files.published`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from ge.core.errors import OptionError
from ge.core.files import STDOUT, check_output, published
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
    """Compile an ONNX model into NAME.om (ATC's --mode=0), or show, dump or
    pre-check a model (--mode=1, 3, 5, 6), with ATC's --name=value options.

    --mode=0 (the default): --model=FILE.onnx --framework=5 --output=NAME
    --soc_version=SOC, and any compile option below. --load-pass-plugin=FILE.py
    or MODULE (repeatable) adds outside passes, as in ge-opt.

    --mode=1 --om=X.om --json=X.json: an offline model as JSON (its graph of
    kernels, tasks, kernels, memory plan, inputs/outputs, options, build record).
    With --framework=5 and --om=X.onnx: an ONNX model as JSON, the data of
    tensors over 16 elements left out.

    --mode=3 --model=FILE.onnx --framework=5, with --input_shape and
    --check_report=FILE if wanted: pre-check the import, listing every
    unsupported op and bad attribute or shape at once in check_result.json
    (--check_report, else $ASCEND_WORK_PATH, else the current directory).
    Exit code 0 when the model passes, 1 when not. A compile's other options
    are checked, and warned about: they do not change the import.

    --mode=5 --om=DUMP.mlir --json=X.json: a graph dump (the ge_onnx_*.mlir of
    DUMP_GE_GRAPH=1 or 2, or ge optimize --output) as JSON.

    --mode=6 --om=X.om: an offline model's key information.
    """
    mode = mode_of(ctx.args)
    if mode == COMPILE:
        compile_model(parse_flags(load_plugins(ctx.args)))
        return
    flags = parse_flags(ctx.args)
    flags.pop("mode")
    check_mode_flags(mode, flags)
    MODES[mode].run(flags)


def compile_model(flags: dict[str, str]) -> None:
    """--mode=0: compile, save the .om, report."""
    flags.pop("mode", None)
    for name in OTHER_MODES_ONLY:
        if name in flags:
            users = ", ".join(f"--mode={m}" for m, spec in MODES.items() if name in (*spec.required, *spec.optional))
            raise OptionError(f"--{name} is not an option of --mode=0 (compile); it belongs to {users}")
    for name in REQUIRED:
        if name not in flags:
            raise OptionError(f"--{name} is required (ge atc --model=M.onnx --framework=5 --output=NAME --soc_version=SOC)")
    check_framework(flags.pop("framework"))
    model = Path(flags.pop("model"))
    output = om_path(flags.pop("output"))
    options = compile_options(flags, extra=(*REQUIRED, "mode"))
    if not model.is_file():
        raise OptionError(f"--model={model}: no such file")
    check_output(output, "--output")

    import ge

    compiled = ge.compile(model, options)
    started = time.perf_counter()
    compiled.save(output)
    report(model, output, compiled, time.perf_counter() - started)


def check_framework(framework: str) -> None:
    if framework != ONNX:
        known = FRAMEWORKS.get(framework)
        what = f"{known} is not supported here" if known else "is not an ATC framework"
        raise OptionError(f"--framework={framework}: {what}; use --framework={ONNX} (ONNX)")


# ------------------------------------------------------------------------- modes


@dataclass(frozen=True)
class Mode:
    """An ATC mode other than compiling: what it does, its usage line, what runs it.
    The usage line is the one place its flags are spelled: those in [brackets] are
    optional, the others required."""

    what: str
    usage: str
    run: Callable[[dict[str, str]], None]

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(n for n in _FLAG.findall(re.sub(r"\[.*?\]", "", self.usage)) if n != "mode")

    @property
    def optional(self) -> tuple[str, ...]:
        return tuple(n for n in _FLAG.findall("".join(re.findall(r"\[.*?\]", self.usage))) if n not in self.required)


_FLAG = re.compile(r"--(\w+)=")
"""A flag in a mode's usage line; those in [brackets] are optional."""


def mode_of(args: list[str]) -> str:
    """The --mode of a command line (0 when absent), read before the flags are parsed:
    it decides which flags are allowed."""
    values = [arg.partition("=")[2] for arg in args if arg.startswith("--mode=")]
    values += [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "--mode"]
    mode = values[0] if values else COMPILE
    if mode != COMPILE and mode not in MODES:
        allowed = "; ".join([f"{COMPILE} (compile)", *(f"{m} ({spec.what})" for m, spec in MODES.items())])
        raise OptionError(f"--mode={mode} is not an ATC mode here; allowed: {allowed}")
    return mode


def check_mode_flags(mode: str, flags: dict[str, str]) -> None:
    """Refuse a missing flag of the mode and one that does not belong to it; --mode=3
    also takes a compile's options (checked, warned about: they do not change the import)."""
    spec = MODES[mode]
    for name in spec.required:
        if name not in flags:
            raise OptionError(f"--mode={mode} needs --{name} ({spec.usage})")
    taken = (*spec.required, *spec.optional)
    foreign = [name for name in flags if name not in taken]
    compiling = [name for name in foreign if mode == PRECHECK and (name == "output" or is_compile_option(name))]
    refused = [name for name in foreign if name not in compiling]
    if refused:
        raise OptionError(f"--{refused[0]} does not apply to --mode={mode} ({spec.what}); it takes: {spec.usage}")
    if compiling:
        compile_options({name: flags[name] for name in compiling if name != "output"})
        log.warning("--mode=3 checks the import only: %s ha%s no effect", ", ".join(f"--{n}" for n in compiling), "ve" if len(compiling) > 1 else "s")


def is_compile_option(name: str) -> bool:
    from ge.core.options import OPTION

    return name in OPTION and ATC in OPTION[name].tools


def existing(path: str, flag: str) -> Path:
    if not Path(path).is_file():
        raise OptionError(f"--{flag}={path}: no such file")
    return Path(path)


def to_json(flags: dict[str, str]) -> None:
    """--mode=1: an offline model, or with --framework=5 an ONNX model, as JSON."""
    from ge.cli import om_info

    source = existing(flags["om"], "om")
    output = flags["json"]
    check_output(output, "--json")
    if "framework" in flags:
        check_framework(flags["framework"])
        from ge.frontend.onnx_importer import read_onnx

        text = om_info.onnx_json(read_onnx(source)[0])
    else:
        text = json.dumps(om_info.om_json(load_om(source), str(source)), indent=1)
    write_json(output, text)


def load_om(path: Path):
    """The .om at `path`; an ONNX model given as one is named as such."""
    import ge
    from ge.om import OmError

    try:
        return ge.load_model(path)
    except OmError as e:
        if path.suffix == ".onnx":
            raise OptionError(f"--om={path} is an ONNX model, not a .om; add --framework=5 to write it as JSON") from e
        raise


def write_json(output: str, text: str, what: str = "--json") -> None:
    with published(output, "w", what=what) as f:
        f.write(text + "\n")


def written(source: Path, output: str) -> None:
    """Say what was written where, unless standard output holds the JSON: it then holds it alone."""
    if output != STDOUT:
        console.print(f"{source} -> {output}", soft_wrap=True)


CHECK_RESULT = "check_result.json"


def check_report_path(flags: dict[str, str]) -> str:
    """Where --mode=3 writes its report, in ATC's order: --check_report, then
    $ASCEND_WORK_PATH, then the current directory (never beside --output: ATC does not)."""
    if "check_report" in flags:
        return flags["check_report"]
    work = os.environ.get("ASCEND_WORK_PATH")
    return os.path.join(work, CHECK_RESULT) if work else CHECK_RESULT


def pre_check(flags: dict[str, str]) -> None:
    """--mode=3: every problem importing the model meets, in check_result.json; exit 1 if any."""
    check_framework(flags["framework"])
    model = existing(flags["model"], "model")
    report_path = check_report_path(flags)
    check_output(report_path, "--check_report")
    from ge.frontend.precheck import precheck

    result = precheck(model, flags.get("input_shape"))
    write_json(report_path, json.dumps(result.to_json(), indent=1), "--check_report")
    if result.passed:
        console.print(f"pre-check of {model}: passed, {result.nodes} nodes; report: {report_path}", soft_wrap=True)
        return
    problems = Table(title="problems", title_justify="left")
    for column in ("node", "op type", "category", "message"):
        problems.add_column(column, overflow="fold")
    for p in result.problems:
        problems.add_row(p.node or "(model)", p.op_type or "", p.category, p.message)
    console.print(problems)
    counts = ", ".join(f"{n} {c}" for c, n in result.categories.items())
    console.print(f"pre-check of {model}: failed, {len(result.problems)} problems ({counts}) in {result.nodes} nodes; report: {report_path}", soft_wrap=True)
    raise SystemExit(1)


def dump_to_json(flags: dict[str, str]) -> None:
    """--mode=5: a graph dump (ascend_graph IR) as JSON."""
    from xdsl.utils.exceptions import ParseError

    from ge.cli import om_info
    from ge.core import ir
    from ge.core.errors import ModelError
    from ge.core.files import read_text

    source = existing(flags["om"], "om")
    output = flags["json"]
    check_output(output, "--json")
    try:
        module = ir.parse(read_text(source, "--om"), str(source))
    except ParseError as e:
        raise ModelError(
            f"--om={source} is not an IR graph dump ({e.span.get_location()}: {e.msg.splitlines()[0]}); "
            "--mode=5 reads DUMP_GE_GRAPH=1 or 2 dumps (ge_onnx_*.mlir) and ge optimize --output"
        ) from e
    write_json(output, json.dumps(om_info.dump_json(module, str(source)), indent=1))


def display(flags: dict[str, str]) -> None:
    """--mode=6: the key information of an offline model."""
    from ge.cli import om_info

    source = existing(flags["om"], "om")
    om_info.show(load_om(source), str(source), console)


COMPILE, PRECHECK = "0", "3"
MODES: dict[str, Mode] = {
    "1": Mode(
        "a model to JSON", "ge atc --mode=1 --om=X.om --json=X.json [--framework=5 with --om=X.onnx]", to_json
    ),
    PRECHECK: Mode(
        "pre-check", "ge atc --mode=3 --model=M.onnx --framework=5 [--input_shape=SHAPES] [--check_report=FILE]", pre_check
    ),
    "5": Mode("a graph dump to JSON", "ge atc --mode=5 --om=ge_onnx_..._Phase.mlir --json=X.json", dump_to_json),
    "6": Mode("an offline model's key information", "ge atc --mode=6 --om=X.om", display),
}
OTHER_MODES_ONLY = ("om", "json", "check_report")


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
    from ge.om.tasks import AicpuTask, KernelTask

    launches = [t for t in compiled.tasks if isinstance(t, KernelTask) and not isinstance(t, AicpuTask)]
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
    """What the compile cache did: kernel hits and misses in its folder, or why it was off,
    and whether the whole build came from the model cache."""
    if "off" in cache:
        return f"kernel cache: off ({cache['off']})"
    line = f"kernel cache: {cache['hits']} hits, {cache['misses']} misses ({cache['mode']}, {cache['dir']})"
    return f"{line}; the whole build from the model cache" if cache.get("model_cache") == "hit" else line


def report(model: Path, output: Path, compiled, saved: float) -> None:
    """What a compile made: phases with their times, kernels, tasks, streams, the memory plan."""
    from ge.cli import gears
    from ge.om import Region
    from ge.om.memory import human_bytes

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
        f"kernels: {compiled.build['kernels']} ({compiled.build['aicpu_kernels']} on AI CPU), tasks: {compiled.build['tasks']}, "
        f"streams: {compiled.streams}, event ids: {compiled.events}"
    )
    console.print(block_dims(compiled))
    console.print(cache_line(compiled.build["kernel_cache"]))
    if "tune_bank" in compiled.build:
        bank = compiled.build["tune_bank"]
        console.print(f"{bank['tuned']} of {bank['kernels']} kernels took their tiling from the tune bank ({bank['path']})", soft_wrap=True)
        if bank.get("closed_passes"):
            console.print(f"fusion switches from the tune bank's graph entry: {', '.join(bank['closed_passes'])} off", soft_wrap=True)
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
    gears.show(compiled, console)
    console.print("ATC run success")
