"""`ge zoo models.toml`: compile a model zoo (models x SoCs x option sets, `ge.zoo`)
on a local process pool or a Ray cluster, with a progress bar and one summary table.

    ge zoo models.toml --output=zoo_om --workers=2
    ge zoo models.toml --ray_address=auto          # the Ray cluster this machine joined

A failing compile is a row of the table with its message; the others finish, and the
command then exits 1.
"""

from __future__ import annotations

import time
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from ge.cli.distributed import BackendOption, RayAddressOption, WorkersOption, runner
from ge.core.errors import GEError
from ge.core.files import check_output_directory

if TYPE_CHECKING:
    from ge.zoo import Compiled

console = Console()


def zoo(
    models: Annotated[Path, typer.Argument(help="The zoo: a TOML file of models, SoCs and option sets (see ge.zoo).", show_default=False)],
    output: Annotated[Path, typer.Option("--output", help="Directory for the .om files: <output>/<model>/<soc>/<set>.om.")] = Path("ge_zoo"),
    backend: BackendOption = None,
    workers: WorkersOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Compile every model of a zoo for every SoC and option set, distributed; one summary table."""
    from ge import zoo as engine

    entries = engine.read(models)
    check_output_directory(output, "--output")
    output.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with closing(runner(backend, workers, ray_address)) as jobs, _progress() as progress:
        task = progress.add_task("compiling", total=len(entries))

        def done(c: Compiled) -> None:
            mark = "[green]ok[/]" if c.outcome.ok else "[red]failed[/]"
            progress.update(task, advance=1, description=f"{c.entry.model} {c.entry.soc} {c.entry.option_set}: {mark}")

        compiled = engine.run(entries, output, jobs, done)
    console.print(_table(compiled))
    failed = [c for c in compiled if not c.outcome.ok]
    console.print(f"{len(compiled) - len(failed)} of {len(compiled)} compiles written to {output} in {time.perf_counter() - started:.1f} s", soft_wrap=True)
    if failed:
        names = ", ".join(f"{c.entry.model}/{c.entry.soc}/{c.entry.option_set}" for c in failed)
        raise GEError(f"{len(failed)} of {len(compiled)} compiles failed ({names}); their messages are in the table")


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
        console=console, transient=False,
    )


def _table(compiled: list[Compiled]) -> Table:
    table = Table(title="zoo", title_justify="left")
    for column in ("model", "SoC", "options", "kernels", "latency (us)", "compile (s)", "status"):
        table.add_column(column, justify="right" if column in ("kernels", "latency (us)", "compile (s)") else "left")
    for c in compiled:
        o = c.outcome
        table.add_row(
            c.entry.model, c.entry.soc, c.entry.described,
            "" if o.kernels is None else str(o.kernels),
            "" if o.latency_us is None else f"{o.latency_us:,.1f}",
            f"{o.seconds:.2f}",
            "ok" if o.ok else f"[red]failed[/]: {o.error}",
        )
    return table
