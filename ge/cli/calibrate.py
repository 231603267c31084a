"""`ge calibrate`: how well the simulator's instruction cost model predicts the
measured hardware tables, and refitting it to them.

    ge calibrate --check [DIR]            # every row of every table, errors by group
    ge calibrate --check --held-out 0.2   # refit on 80% of the rows, judge the other 20%
    ge calibrate --fit [DIR]              # refit and write ge/sim/cost_model.json

DIR defaults to $GE_CALIBRATION_DIR, else the tables shipped in `ge/sim/calibration_data/`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from ge.core.errors import CalibrationError, OptionError

if TYPE_CHECKING:
    from ge.sim.calibration import Errors, TableReport
    from ge.sim.costs import CostModel

console = Console()

UNPRICED_SHOWN = 5
GROUP_TITLES = {"mte_bandwidth.csv": "path", "mmad_throughput.csv": "instr", "vector_throughput.csv": "instr"}


def calibrate(
    directory: Annotated[
        Path | None,
        typer.Argument(
            metavar="DIR",
            help="Directory of the calibration tables (default: $GE_CALIBRATION_DIR or the shipped tables).",
            show_default=False,
        ),
    ] = None,
    check: Annotated[bool, typer.Option("--check", help="Predict every row and show the errors (the default).")] = False,
    fit: Annotated[bool, typer.Option("--fit", help="Refit the cost model to the tables and write it.")] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="Where --fit writes the model (default: ge/sim/cost_model.json).", show_default=False)
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Fail unless every table's median error is < 5% and its 90th percentile < 15%.")
    ] = False,
    held_out: Annotated[
        float, typer.Option(
            "--held_out", "--held-out", help="With --check: refit without this share of each table's rows and judge those."
        )
    ] = 0.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the --held-out draw.")] = 0,
) -> None:
    """Check the instruction cost model against the measured tables, or refit it."""
    from ge.sim import calibration, costs

    if check and fit:
        raise OptionError("give --check or --fit, not both")
    if not 0 <= held_out < 1:
        raise OptionError(f"--held-out is a share of the rows in [0, 1), not {held_out}")
    if fit and held_out:
        raise OptionError("--held-out goes with --check (--fit always uses every row)")
    folder = directory if directory is not None else calibration.default_dir()
    tables = calibration.load(folder)

    if fit:
        model = calibration.fit(tables)
        target = out if out is not None else costs.MODEL_FILE
        calibration.write_model(model, target)
        console.print(f"wrote {target}: {_fitted_summary(model)}")
        judged, title = tables, f"the refitted model on every row of {folder}"
    elif held_out:
        kept, judged = calibration.split(tables, held_out, seed)
        model = calibration.fit(kept)
        title = f"refitted on {1 - held_out:.0%} of the rows of {folder}, judged on the other {held_out:.0%} (seed {seed})"
    else:
        model, judged, title = costs.default_model(), tables, f"the shipped model on every row of {folder}"

    reports = calibration.evaluate(judged, model)
    console.print(f"[bold]Cost model errors[/]: {title}")
    for report in reports:
        console.print(_group_table(report))
        for line in report.unpriced[:UNPRICED_SHOWN]:
            console.print(f"[yellow]not priced (counted as 100% off)[/]: {line}")
        if len(report.unpriced) > UNPRICED_SHOWN:
            console.print(f"[yellow]... and {len(report.unpriced) - UNPRICED_SHOWN} more rows not priced[/]")
    console.print(_summary_table(reports))
    missed = [r for r in reports if not r.overall.meets_goals]
    if strict and missed:
        raise CalibrationError(
            "calibration goals missed (median < 5%, p90 < 15%): "
            + "; ".join(f"{r.file} median {_pct(r.overall.median)}, p90 {_pct(r.overall.p90)}" for r in missed)
        )


def _fitted_summary(model: CostModel) -> str:
    return ", ".join(
        f"{name} ({len(part.transfers)} paths, {len(part.vector)} vector fits, cube latency {part.cube_latency:.2f})"
        for name, part in sorted(model.parts.items())
    )


def _pct(value: float) -> str:
    return f"{100 * value:.2f}%"


def _error_cells(errors: Errors) -> list[str]:
    return [str(errors.count), _pct(errors.median), _pct(errors.p90), _pct(errors.max)]


def _group_table(report: TableReport) -> Table:
    table = Table(title=report.file, title_justify="left")
    for column in ("soc", GROUP_TITLES.get(report.file, "group")):
        table.add_column(column)
    for column in ("rows", "median", "p90", "max"):
        table.add_column(column, justify="right")
    for (soc, group), errors in report.groups.items():
        style = None if errors.meets_goals else "red"
        table.add_row(soc, group, *_error_cells(errors), style=style)
    table.add_section()
    table.add_row("all", "", *_error_cells(report.overall), style="bold")
    return table


def _summary_table(reports: list[TableReport]) -> Table:
    table = Table(title="per table (goals: median < 5%, p90 < 15%)", title_justify="left")
    table.add_column("table")
    for column in ("rows", "median", "p90", "max"):
        table.add_column(column, justify="right")
    table.add_column("goals")
    for report in reports:
        met = report.overall.meets_goals
        table.add_row(report.file, *_error_cells(report.overall), "[green]met[/]" if met else "[red]missed[/]")
    return table
