"""`ge`: the graph engine's command, with ATC's `--name=value` options.

`ge demo` imports the bundled models and runs them on the reference interpreter;
`ge inspect MODEL.onnx` shows what the importer made of a model. Heavy modules
(xDSL, onnx, numpy) load inside the commands, so that `ge --help` starts fast.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from ge.cli.errors import DEFAULT_LOG, configure_logging, log_level_in, reporting

if TYPE_CHECKING:
    from ge.cli.summary import GraphSummary
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
def demo(seed: Annotated[int, typer.Option("--seed", help="Seed of the random inputs.")] = 0) -> None:
    """Import every bundled demo model and run it on the reference interpreter."""
    import ge.frontend  # noqa: F401  (loaded before the clock starts,
    import ge.core.reference  # noqa: F401  so that the times show work, not imports)
    from ge.models import DEMO_MODELS

    started = time.perf_counter()
    for model in DEMO_MODELS:
        console.print(_demo_panel(model, seed))
    console.print(f"{len(DEMO_MODELS)} models imported and run in {time.perf_counter() - started:.2f} s")


def _demo_panel(model: DemoModel, seed: int) -> Panel:
    import numpy as np

    import ge
    from ge.core import ir, reference
    from ge.cli.summary import GraphSummary, human_bytes

    started = time.perf_counter()
    module, store = ge.load_onnx(model.path)
    imported = time.perf_counter() - started
    summary = GraphSummary.of(module)
    text = ir.to_text(module)
    lines = text.count("\n")
    inputs = model.sample_inputs(seed)
    started = time.perf_counter()
    outputs = reference.run(module, inputs, store)
    ran = time.perf_counter() - started

    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("ops", f"{sum(summary.ops.values())}: {_op_counts(summary)}")
    grid.add_row(
        "weights",
        f"{len(summary.weights)} constants ({summary.stored} in the weight store), "
        f"{summary.parameters:,} parameters, {human_bytes(summary.weight_bytes)}",
    )
    grid.add_row("IR", f"{human_bytes(len(text.encode()))}, {lines} lines")
    grid.add_row("inputs", ", ".join(f"{n} {a.dtype}{list(a.shape)}" for n, a in inputs.items()))
    grid.add_row("time", f"import {imported * 1e3:.1f} ms, reference run {ran * 1e3:.1f} ms")
    for name, value in outputs.items():
        checksum = float(np.sum(value, dtype=np.float64))
        grid.add_row("output", f"{name} {value.dtype}{list(value.shape)}  checksum (sum) {checksum:.6g}")
    return Panel(grid, title=f"[bold]{model.name}[/]", subtitle=model.summary, title_align="left")


def _op_counts(summary: GraphSummary) -> str:
    return ", ".join(f"{op_type} {n}" for op_type, n in summary.ops.most_common())


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
    from ge.cli.summary import GraphSummary, human_bytes

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

from ge.cli.run import run  # noqa: E402  (its heavy imports happen inside)

app.command(name="run")(run)


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


def main(argv: Sequence[str] | None = None) -> None:
    args = _log_first(sys.argv[1:] if argv is None else argv)
    with reporting("ge", log_level_in(args)):
        app(args=args, prog_name="ge")


if __name__ == "__main__":
    main()
