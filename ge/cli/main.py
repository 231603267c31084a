"""`ge`: the graph engine's command, with ATC's `--name=value` options.

`ge demo` imports the bundled models and runs them on the reference interpreter;
`ge inspect MODEL.onnx` shows what the importer made of a model. Heavy modules
(xDSL, onnx, numpy) load inside the commands, so that `ge --help` starts fast.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from ge.cli.errors import DEFAULT_LOG, configure_logging, log_level_in, reporting
from ge.core.files import check_output_directory
from ge.core.options import DEFAULT_SOC_VERSION

if TYPE_CHECKING:
    from ge.models import DemoModel

app = typer.Typer(
    name="ge",
    help="A graph-engine compiler for Ascend-style NPUs (ATC-style options: --name=value).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()


class LogLevel(str, Enum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"
    null = "null"


@app.callback()
def options(
    log: Annotated[
        LogLevel,
        typer.Option("--log", help="Log level, as ATC's --log; debug also shows tracebacks. Accepted anywhere on the line."),
    ] = LogLevel(DEFAULT_LOG),
) -> None:
    configure_logging("ge", log.value)


# ------------------------------------------------------------------------------ demo


@app.command()
def demo(
    output: Annotated[Path, typer.Option("--output", help="Directory for the .om files and the profiles.")] = Path("ge_demo"),
    soc_version: Annotated[str, typer.Option("--soc_version", "--soc-version", help="The SoC to compile for.")] = DEFAULT_SOC_VERSION,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sample inputs.")] = 0,
) -> None:
    """The main job on every bundled model: compile (ge atc), simulate and profile (ge run --profile).

    Prints each compile's phases, kernels and memory plan, then the simulated latency,
    utilisation and top ops, checks the outputs against the reference interpreter,
    and says where the .om, op_summary.csv and trace.json went.
    """
    import ge.compiler  # noqa: F401  (loaded before the clock starts, so that the times show work, not imports)
    import ge.session  # noqa: F401
    from ge.models import DEMO_MODELS

    check_output_directory(output, "--output")
    output.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for model in DEMO_MODELS:
        _demo(model, output, soc_version, seed)
    console.print(f"[bold]{len(DEMO_MODELS)} models compiled, simulated and profiled in {time.perf_counter() - started:.2f} s[/]")


def _demo(model: DemoModel, output: Path, soc_version: str, seed: int) -> None:
    import numpy as np

    import ge
    from ge.cli.atc import report as atc_report
    from ge.cli.run import printing_nonfinite
    from ge.cli.run import report as run_report
    from ge.core import reference

    console.rule(f"[bold]{model.name}[/]: {model.summary}")
    console.print(f"[dim]$ ge atc --model={model.path} --framework=5 --output={output / model.name} --soc_version={soc_version}[/]")
    compiled = ge.compile(model.path, {"soc_version": soc_version})
    started = time.perf_counter()
    om = Path(compiled.save(output / f"{model.name}.om"))
    atc_report(model.path, om, compiled, time.perf_counter() - started)

    profile_dir = output / f"{model.name}_profile"
    console.print(f"[dim]$ ge run {om} --profile {profile_dir}  (inputs: the model's seeded samples, seed {seed})[/]")
    inputs = model.sample_inputs(seed)
    started = time.perf_counter()
    with printing_nonfinite():
        result = ge.Session().run(compiled, inputs)
    wall = time.perf_counter() - started
    run_report(om, result, wall, [], result.profile.write(profile_dir), False)

    module, store = ge.load_onnx(model.path)
    want = reference.run(module, inputs, store)
    for name, value in result.outputs.items():
        err = float(np.max(np.abs(value.astype(np.float64) - want[name].astype(np.float64)), initial=0.0))
        scale = float(np.max(np.abs(want[name]), initial=0.0))
        console.print(
            f"output [bold]{name}[/] {value.dtype}{list(value.shape)}: max abs error {err:.3g} "
            f"against the float32 reference interpreter (outputs up to {scale:.3g})"
        )


# --------------------------------------------------------------------------- inspect

WEIGHTS_SHOWN = 20


@app.command()
def inspect(
    model: Annotated[Path, typer.Argument(help="An ONNX model.", show_default=False)],
    input_shape: Annotated[
        str | None,
        typer.Option("--input_shape", "--input-shape", help="Input shapes, as ATC: 'input:1,3,224,224;mask:1,128'."),
    ] = None,
) -> None:
    """Show a model as the importer sees it: inputs, outputs, ops by type, weights."""
    import ge
    from ge.cli.summary import GraphSummary
    from ge.om.memory import human_bytes

    module, _ = ge.load_onnx(str(model), input_shape=input_shape)
    summary = GraphSummary.of(module)

    console.print(f"[bold]{model}[/]: {sum(summary.ops.values())} ops, {summary.parameters:,} parameters")
    for title, tensors in (("inputs", summary.inputs), ("outputs", summary.outputs)):
        table = Table(title=title, title_justify="left")
        for column in ("name", "dtype", "shape"):
            table.add_column(column)
        for t in tensors:
            table.add_row(t.name, t.dtype, t.shape)
        console.print(table)

    ops = Table(title="ops by type", title_justify="left")
    ops.add_column("op type")
    ops.add_column("count", justify="right")
    for op_type, n in summary.ops.most_common():
        ops.add_row(op_type, str(n))
    console.print(ops)

    heaviest = sorted(summary.weights, key=lambda w: -w.nbytes)
    title = f"weights: {len(heaviest)} constants, {summary.stored} in the weight store, {human_bytes(summary.weight_bytes)}"
    weights = Table(title=title, title_justify="left")
    for column in ("name", "dtype", "shape", "bytes", "kept"):
        weights.add_column(column, justify="right" if column == "bytes" else "left")
    for w in heaviest[:WEIGHTS_SHOWN]:
        weights.add_row(w.name, w.dtype, w.shape, f"{w.nbytes:,}", "store" if w.stored else "inline")
    if len(heaviest) > WEIGHTS_SHOWN:
        rest = heaviest[WEIGHTS_SHOWN:]
        weights.add_row(f"... {len(rest)} more", "", "", f"{sum(w.nbytes for w in rest):,}", "")
    console.print(weights)


# ------------------------------------------------------------------------------- atc

from ge.cli.atc import CONTEXT, atc, options_help  # noqa: E402  (its heavy imports happen inside)

app.command(name="atc", context_settings=CONTEXT, epilog=options_help())(atc)


# -------------------------------------------------------------------------- optimize

from ge.cli.optimize import optimize  # noqa: E402  (its heavy imports happen inside)

app.command(name="optimize", context_settings=CONTEXT, epilog=options_help())(optimize)


# -------------------------------------------------------------------- precision-report

from ge.cli.precision_report import precision_report  # noqa: E402  (its heavy imports happen inside)

app.command(name="precision-report", context_settings=CONTEXT, epilog=options_help())(precision_report)


# ------------------------------------------------------------------------- calibrate

from ge.cli.calibrate import calibrate  # noqa: E402  (its heavy imports happen inside)

app.command(name="calibrate")(calibrate)


# ------------------------------------------------------------------------------- run

from ge.cli.run import options_help as run_options_help, run  # noqa: E402  (its heavy imports happen inside)

app.command(name="run", epilog=run_options_help())(run)


# --------------------------------------------------------------------------- compare

from ge.cli.compare import compare  # noqa: E402  (its heavy imports happen inside)

app.command(name="compare")(compare)


# ------------------------------------------------------------------------------- zoo

from ge.cli.zoo import zoo  # its heavy imports happen inside

app.command(name="zoo")(zoo)


# ------------------------------------------------------------------------------- aoe

from ge.cli.aoe import aoe  # its heavy imports happen inside

app.command(name="aoe")(aoe)


# ------------------------------------------------------------------------------ main


def _log_first(argv: Sequence[str]) -> list[str]:
    """ATC takes `--log` anywhere on the line; click wants it before the command."""
    logs: list[str] = []
    rest: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == "--log":
            logs += [arg, next(args, "")]
        elif arg.startswith("--log="):
            logs.append(arg)
        else:
            rest.append(arg)
    return logs + rest


ATC_FLAG = re.compile(r"-([A-Za-z][A-Za-z0-9_-]+(=.*)?)", re.DOTALL)


def atc_spelling(argv: Sequence[str]) -> list[str]:
    """ATC takes `-name=value` as well as `--name=value`; click would read the single
    dash as a cluster of one-letter flags. `-h` stays the short form of `--help`."""
    return ["--help" if arg == "-h" else ATC_FLAG.sub(r"--\1", arg) if ATC_FLAG.fullmatch(arg) else arg for arg in argv]


def main(argv: Sequence[str] | None = None) -> None:
    args = _log_first(atc_spelling(sys.argv[1:] if argv is None else argv))
    with reporting("ge", log_level_in(args)):
        app(args=args, prog_name="ge", standalone_mode=False)  # errors reach `reporting`


if __name__ == "__main__":
    main()
