"""`ge optimize MODEL.onnx`: run GE's graph optimisation and show what it did.

It imports the model, runs `ge.pipeline.optimize` with ATC's options, and prints
the time of each phase, the kernels the build would make before and after (see
`dialects.kernel_boundary.kernel_scopes`) and every fusion pass with its match and effect
counts, as fusion_result.json counts them. fusion_result.json is written as
`--export_compile_stat` says: 2 right after the graph is optimised, 1 when the
command ends normally, 0 never. `--output=FILE.mlir` writes the optimised IR; when
the passes made new weights (folded filters), they go to `FILE.mlir.<hash>.npz`,
named by their content, and the IR names that file. Both are written whole or not
at all, after everything else succeeded.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from dialects.ascend_graph import WeightRefAttr
    from ge.pipeline import Compilation

console = Console()
log = logging.getLogger("ge")


def optimize(
    ctx: typer.Context,
    model: Annotated[Path, typer.Argument(help="An ONNX model.", show_default=False)],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the optimised IR here (.mlir).", show_default=False)
    ] = None,
) -> None:
    """Run the graph optimisation (graph fusion, UB fusion, Split no-task) and report it.

    Every compile option of `ge atc` is taken as --name=value (listed below), and
    --load-pass-plugin=FILE.py|MODULE (repeatable) adds outside passes.
    """
    import ge
    from ge import pipeline
    from ge.cli.atc import compile_options, load_plugins, parse_flags
    from ge.cli.gears import refuse_gears
    from ge.cli.opt import weight_refs
    from ge.core.files import check_output
    from dialects.kernel_boundary import kernel_scopes

    options = compile_options(parse_flags(load_plugins(ctx.args)), extra=("output",))
    refuse_gears(options, "ge optimize")
    input_shape, soc_version = options.input_shape, options.soc_version
    if output is not None:
        check_output(output, "--output")
    started = time.perf_counter()
    module, _ = ge.load_onnx(str(model), input_shape=input_shape)
    imported = time.perf_counter() - started
    before, refs = kernel_scopes(module), weight_refs(module)
    compilation = pipeline.optimize(module, options)
    after = kernel_scopes(module)
    if output is not None:
        _write_ir(compilation.module, output, refs)
    compilation.finish()

    console.print(f"[bold]{model}[/] optimised for {soc_version}")
    console.print(_phases(imported, compilation.timings))
    console.print(f"kernels: {before} before, {after} after ({_no_task_splits(module)})")
    console.print(_passes(compilation))
    if compilation.result_file is not None:
        console.print(f"fusion result: {compilation.result_file}")
    if output is not None:
        console.print(f"optimised IR: {output}")


def _phases(imported: float, timings: dict[str, float]) -> Table:
    table = Table(title="phases", title_justify="left")
    table.add_column("phase")
    table.add_column("time", justify="right")
    for name, seconds in [("import", imported), *timings.items()]:
        table.add_row(name, f"{seconds * 1e3:.1f} ms")
    table.add_row("total", f"{(imported + sum(timings.values())) * 1e3:.1f} ms", style="bold")
    return table


def _passes(compilation: Compilation) -> Table:
    """Every fusion pass in run order: its counts, or "off" when the switch file closed it."""
    from passes.fusion import FusionKind, ordered

    ran = {name: counts for (_, name), counts in compilation.statistics.counts.items()}
    table = Table(title="fusion passes", title_justify="left")
    for column in ("pass", "kind", "match_times", "effect_times"):
        table.add_column(column, justify="right" if column.endswith("times") else "left")
    for kind in (FusionKind.GRAPH, FusionKind.UB):
        for cls in ordered(kind):
            if not cls.reported:
                continue
            counts = ran.get(cls.name)
            if counts is None:
                table.add_row(cls.name, kind.value, "off", "off", style="dim")
            else:
                table.add_row(cls.name, kind.value, str(counts.match_times), str(counts.effect_times))
    return table


def _no_task_splits(module: ModuleOp) -> str:
    from dialects.ascend_graph import SplitBase
    from dialects.kernel_boundary import is_no_task

    splits = [op for op in module.walk() if isinstance(op, SplitBase)]
    return f"{sum(map(is_no_task, splits))} of {len(splits)} splits no-task"


def _write_ir(module: ModuleOp, output: Path, input_refs: set[WeightRefAttr]) -> None:
    """The IR, and the weights the passes created beside it (named by their content),
    each written whole or not at all."""
    from ge.core import ir, weights
    from ge.core.files import published, regular_output
    from ge.cli.opt import weight_refs

    refs = weight_refs(module)
    if not refs <= input_refs and not regular_output(output):
        log.warning("%d weight(s) created by the passes are not saved; use --output=FILE.mlir", len(refs - input_refs))
    elif not refs <= input_refs:
        saved = weights.sidecar(module, str(output), refs)
        saved.save(saved.key)
    with published(output, what="IR") as f:
        f.write(ir.to_text(module))
