"""`ge aoe`: tune a model with AOE's options, the simulator as the cost model.

    ge aoe --model=resnet50.onnx --framework=5 --job_type=2 --soc_version=Ascend310P3 --candidates=400
    ge aoe --model=resnet50.onnx --framework=5 --job_type=2 --tune_time=600 --workers=2
    ge aoe --model=bert.onnx --framework=5 --job_type=1 --output=aoe_out

Operator tuning (job_type 2) searches each kernel's tiling and writes the tilings
that make the model faster to the tune bank (`TUNE_BANK_PATH`), which `ge atc`
then uses; subgraph tuning (job_type 1) searches the fusion switches and writes
the best as a fusion switch file. Both print a progress bar while they search and
a before/after table, and leave the report (and the tuned model) in --output.
"""

from __future__ import annotations

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

from ge.cli.distributed import BackendOption, RayAddressOption, WorkersOption
from ge.core.errors import OptionError
from ge.core.files import check_output_directory
from ge.core.options import DEFAULT_SOC_VERSION

if TYPE_CHECKING:
    from ge.aoe import search
    from ge.aoe.tune import Report

console = Console()

FRAMEWORKS = {0: "Caffe", 1: "MindSpore", 3: "TensorFlow", 5: "ONNX"}
DEFAULT_CANDIDATES = 200


def aoe(
    model: Annotated[Path, typer.Option("--model", help="The ONNX model to tune.", show_default=False)],
    job_type: Annotated[int, typer.Option("--job_type", "--job-type", help="1: subgraph tuning (fusion switches); 2: operator tuning (tilings).", show_default=False)],
    framework: Annotated[int, typer.Option("--framework", help="The model's framework: 5 (ONNX), the only one here.")] = 5,
    soc_version: Annotated[str, typer.Option("--soc_version", "--soc-version", help="The SoC to tune for.")] = DEFAULT_SOC_VERSION,
    output: Annotated[Path, typer.Option("--output", help="Working directory for the report and the tuned model.")] = Path("aoe_output"),
    tune_time: Annotated[float | None, typer.Option("--tune_time", "--tune-time", help="Seconds to search (instead of a candidate count).", show_default=False)] = None,
    candidates: Annotated[int | None, typer.Option("--candidates", help=f"Candidates to time (default {DEFAULT_CANDIDATES}; deterministic for a seed).", show_default=False)] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the search's order.")] = 0,
    backend: BackendOption = None,
    workers: WorkersOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Tune a model's kernels (job_type 2) or fusion switches (job_type 1) on the simulator."""
    from ge.aoe import Budget, tune

    if framework not in FRAMEWORKS:
        raise OptionError(f"--framework={framework} is not a framework; allowed: 5 (ONNX)")
    if framework != 5:
        raise OptionError(f"--framework={framework} ({FRAMEWORKS[framework]}) is not supported; allowed: 5 (ONNX)")
    if job_type not in (1, 2):
        raise OptionError(f"--job_type={job_type} is not allowed; use 1 (subgraph tuning) or 2 (operator tuning)")
    if tune_time is not None and candidates is not None:
        raise OptionError("give --tune_time or --candidates, not both")
    if tune_time is not None and tune_time <= 0:
        raise OptionError(f"--tune_time must be a positive number of seconds, not {tune_time}")
    if candidates is not None and candidates < 1:
        raise OptionError(f"--candidates must be at least 1, not {candidates}")
    if not model.is_file():
        raise OptionError(f"--model '{model}' does not exist or is not a file")
    check_output_directory(output, "--output")
    budget = Budget(seconds=tune_time) if tune_time is not None else Budget(candidates=candidates or DEFAULT_CANDIDATES)
    kind = backend.value if backend is not None else ("ray" if ray_address is not None else "local")
    with _bar(budget) as update:
        report = tune(model, soc_version, job_type, kind, workers, seed, budget, output=output, ray_address=ray_address, on_progress=update)
    show(report)
    console.print(f"report and tuned model in {output}", soft_wrap=True)


class _bar:
    """A rich progress bar over the budget: candidates timed (or seconds), best so far, time left."""

    def __init__(self, budget: search.Budget):
        self.budget = budget
        self.progress = Progress(
            TextColumn("[bold]tuning"), BarColumn(), MofNCompleteColumn() if budget.candidates else TextColumn(""),
            TextColumn("{task.fields[evaluated]} candidates, best so far {task.fields[best]}"),
            TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(), console=console, transient=False,
        )

    def __enter__(self):
        self.progress.__enter__()
        total = self.budget.candidates if self.budget.candidates else self.budget.seconds
        self.task = self.progress.add_task("tuning", total=total, evaluated=0, best="-")
        return self.update

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)

    def update(self, p: search.Progress) -> None:
        best = f"{p.best_cycles / p.analytic_cycles:.1%} of the analytic time" if p.analytic_cycles else "-"
        done = p.evaluated if self.budget.candidates else min(p.elapsed, self.budget.seconds or p.elapsed)
        self.progress.update(self.task, completed=done, evaluated=p.evaluated, best=best)


def show(report: Report) -> None:
    """The before/after table per kernel (per fusion pass for subgraph tuning) and for the model."""
    if report.job_type == 1:
        _show_passes(report)
        return
    table = Table(title=f"{report.model} on {report.soc_version}: job_type {report.job_type}", title_justify="left")
    table.add_column("kernel (launches)", overflow="fold")
    table.add_column("alone, cycles", justify="right")
    table.add_column("in the model, us", justify="right")
    table.add_column("change", justify="right")
    for k in report.kernels:
        change = k.model_after_us / k.model_before_us - 1 if k.model_before_us else 0.0
        table.add_row(
            f"{k.name} ({k.launches})", f"{k.analytic_cycles:,.0f} -> {k.tuned_cycles:,.0f}", f"{k.model_before_us:.2f} -> {k.model_after_us:.2f}",
            f"{change:+.1%}", style="green" if k.tiling is not None else None,
        )
    table.add_row("model latency", "", f"{report.before_us:.2f} -> {report.after_us:.2f}", f"{-report.gain:+.1%}", style="bold")
    console.print(table)
    console.print(
        f"{len(report.tuned)} of {len(report.kernels)} kernels tuned; {report.evaluated} candidates timed ({report.pruned} pruned by the roofline) "
        f"in {report.seconds:.0f} s on {report.workers} {report.backend} worker(s); bank: {report.bank}",
        soft_wrap=True,
    )


def _show_passes(report: Report) -> None:
    table = Table(title=f"{report.model} on {report.soc_version}: job_type 1", title_justify="left")
    table.add_column("fusion pass", overflow="fold")
    table.add_column("kind")
    table.add_column("latency closed alone, us", justify="right")
    table.add_column("closed")
    for p in report.passes:
        table.add_row(p.name, p.kind, f"{p.closed_alone_us:.2f}", "yes" if p.closed else "", style="green" if p.closed else None)
    table.add_row("model latency", "", f"{report.before_us:.2f} -> {report.after_us:.2f}", f"{-report.gain:+.1%}", style="bold")
    console.print(table)
    console.print(f"{sum(p.closed for p in report.passes)} fusion passes closed; {report.evaluated} candidates timed in {report.seconds:.0f} s", soft_wrap=True)
