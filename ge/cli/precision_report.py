"""`ge precision-report MODEL.onnx`: what precision selection chose, layer by layer, and what it cost.

    ge precision-report bert.onnx --precision_mode=allow_mix_precision --soc_version=Ascend910B1 --top 20

The report itself is `ge.precision_report.build_report` (two compiles, one with the
options given and one keeping float32, compared layer by layer on the same inputs:
`--input name=file.npy`, else seeded random values). This command prints it as a
table; `--top N` shows the N layers with the largest relative error instead;
`--csv FILE` writes every row. A last table lists the constants saturated when
converted to 16 bits (their count of out-of-range values, and the worst).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from ge.core.errors import OptionError

if TYPE_CHECKING:
    import numpy as np


WIDE = 240
"""Columns of the table when the output is not a terminal (a file keeps every row on one line)."""


# ------------------------------------------------------------------------ the command


def _opt(*names: str, help: str):
    return typer.Option(*names, help=help, show_default=False)


def precision_report(
    ctx: typer.Context,
    model: Annotated[Path, typer.Argument(help="An ONNX model.", show_default=False)],
    input: Annotated[list[str] | None, _opt("--input", help="NAME=FILE.npy for a graph input (repeat); the others are random.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random inputs.")] = 0,
    top: Annotated[int | None, _opt("--top", help="Show only the N layers with the largest relative error.")] = None,
    csv_file: Annotated[Path | None, _opt("--csv", help="Write every layer's row to this CSV file.")] = None,
) -> None:
    """Per layer: the dtype precision selection chose, why, and its error against float32.

    Every compile option of `ge atc` is taken as --name=value (listed below), the
    precision options among them, and --load-pass-plugin=FILE.py|MODULE (repeatable)
    adds outside passes.
    """
    import numpy as np

    from ge.cli.atc import compile_options, load_plugins, parse_flags
    from ge.cli.gears import refuse_gears
    from ge.core.files import check_output

    if top is not None and top < 1:
        raise OptionError(f"--top {top} is not allowed; give a count >= 1")
    options = compile_options(parse_flags(load_plugins(ctx.args)), extra=("input", "seed", "top", "csv"), export_compile_stat=0)
    refuse_gears(options, "ge precision-report")
    soc_version = options.soc_version
    from ge.precision_report import build_report, write_csv

    if csv_file is not None:
        check_output(csv_file, "--csv")
    report = build_report(model, options, _given_inputs(input or []), seed)
    rows = report.rows
    if top is not None:
        rows = sorted((r for r in rows if r.max_rel_error is not None), key=lambda r: -np.nan_to_num(r.max_rel_error, nan=np.inf))[:top]
    title = f"{model.name}: {options.precision_settings().spelled} on {soc_version}"
    table = Table(title=title + (f", the {top} largest errors" if top is not None else ""), title_justify="left")
    for column, justify in (("#", "right"), ("layer", "left"), ("op type", "left"), ("dtype", "left"), ("engine", "left"),
                            ("impl mode", "left"), ("why", "left"), ("max abs err", "right"), ("max rel err", "right")):
        table.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    console = Console() if sys.stdout.isatty() else Console(width=WIDE)
    for r in rows:
        table.add_row(str(r.index), r.name, r.op_type, r.dtype, r.engine, r.impl_mode, r.reason, _fmt(r.max_abs_error), _fmt(r.max_rel_error))
    console.print(table)
    for name, (abs_err, rel_err) in report.outputs.items():
        console.print(f"output [bold]{name}[/]: max abs error {_fmt(abs_err)}, max rel error {_fmt(rel_err)}")
    if report.saturated:
        saturated = Table(title="constants saturated to the largest finite value of their new dtype", title_justify="left")
        for column, justify in (("constant", "left"), ("dtype", "left"), ("values", "right"), ("worst", "right")):
            saturated.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
        for s in report.saturated:
            saturated.add_row(s.name, s.dtype, str(s.count), f"{s.worst:.6g}")
        console.print(saturated)
    if csv_file is not None:
        write_csv(csv_file, report.rows)
        console.print(f"{len(report.rows)} rows written to {csv_file}")


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.3g}"


def _given_inputs(specs: list[str]) -> dict[str, np.ndarray]:
    import numpy as np

    feeds = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise OptionError(f"--input '{spec}' is not NAME=FILE.npy")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise OptionError(f"--input {name}: cannot read '{path}' as a .npy array: {e}") from e
    return feeds
