"""`ge precision-report MODEL.onnx`: what precision selection chose, layer by layer, and what it cost.

    ge precision-report bert.onnx --precision_mode=allow_mix_precision --soc_version=Ascend910B1 --top 20

It compiles the model twice with `ge.pipeline.optimize`: with the precision options
given, and with must_keep_origin_dtype (the float32 graph, for a float32 model),
the rest of the options alike so that both graphs have the same layers. It runs
both on the same inputs (`--input name=file.npy`, else seeded random values:
standard normal floats, integers 0 or 1, which every index and mask input
accepts) and prints, per layer in topological order, the dtype chosen, the engine,
the implementation mode, why (`_precision_reason`), and the error of the layer's
first output against the same layer of the float32 graph, matched by ONNX node
name: max |ours - fp32| and that divided by max |fp32| (the error relative to the
layer's scale; a per-element ratio is meaningless where an output crosses zero).
`--top N` shows the N layers with the largest relative error instead; `--csv FILE`
writes every row.
"""

from __future__ import annotations

import csv
import dataclasses
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from ge.core.errors import InputError, OptionError

if TYPE_CHECKING:
    import numpy as np
    from xdsl.dialects.builtin import ModuleOp

    from ge.core.options import CompileOptions
    from ge.core.weights import WeightStore

WIDE = 240
"""Columns of the table when the output is not a terminal (a file keeps every row on one line)."""
CSV_COLUMNS = ("index", "name", "op_type", "dtype", "engine", "impl_mode", "reason", "max_abs_error", "max_rel_error")


@dataclass(frozen=True)
class LayerRow:
    """One layer of the compiled graph and its error against the float32 graph."""

    index: int
    name: str
    op_type: str
    dtype: str
    engine: str
    impl_mode: str
    reason: str
    max_abs_error: float | None
    max_rel_error: float | None

    def cells(self) -> list[str]:
        return [str(getattr(self, c)) if getattr(self, c) is not None else "" for c in CSV_COLUMNS]


@dataclass(frozen=True)
class Report:
    rows: list[LayerRow]
    outputs: dict[str, tuple[float, float]]
    """Graph output name -> (max abs error, max rel error) against the float32 graph."""


def build_report(
    model: str | Path, options: CompileOptions, inputs: Mapping[str, np.ndarray] | None = None, seed: int = 0
) -> Report:
    """Compile `model` with `options` and with must_keep_origin_dtype, run both on
    `inputs` (random values for the graph inputs it does not give), compare layers."""
    import ge
    from ge import pipeline

    baseline_options = dataclasses.replace(
        options,
        precision_mode="must_keep_origin_dtype",
        precision_mode_v2=None,
        modify_mixlist=None,
        keep_dtype=None,
        customize_dtypes=None,
    )
    # Both imports of one file share a weight-store key, so each graph runs on its own store.
    compiled, compiled_store = ge.load_onnx(str(model), input_shape=options.input_shape)
    pipeline.optimize(compiled, options)
    baseline, baseline_store = ge.load_onnx(str(model), input_shape=options.input_shape)
    pipeline.optimize(baseline, baseline_options)
    feeds = random_inputs(baseline, seed)
    for name in inputs or {}:
        if name not in feeds:
            raise InputError(f"--input {name}: the model has no input '{name}'; its inputs are {', '.join(feeds)}")
    feeds.update(inputs or {})
    reference_values, reference_outputs = trace(baseline, feeds, baseline_store)
    return _compare(compiled, compiled_store, feeds, reference_values, reference_outputs)


def random_inputs(module: ModuleOp, seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs for the graph's Data ops: normal floats, integers 0 or 1."""
    import numpy as np

    from dialects.ascend_graph import DataOp, dtype_of, shape_of
    from ge.core import dtypes

    rng = np.random.default_rng(seed)
    feeds = {}
    for op in module.walk():
        if not isinstance(op, DataOp):
            continue
        shape = shape_of(op.out.type)
        if min(shape, default=0) < 0:
            raise InputError(f"input '{op.label}' has a dynamic shape; give --input_shape or --input {op.label}=FILE.npy")
        dtype = dtypes.to_numpy(dtype_of(op.out.type))
        if dtype.kind == "f":
            feeds[op.label] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[op.label] = rng.integers(0, 2, shape).astype(dtype)
    return feeds


def trace(
    module: ModuleOp, feeds: Mapping[str, np.ndarray], store: WeightStore
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Run the graph on the reference interpreter, keeping every named op's first output."""
    import numpy as np

    from dialects import shapes
    from dialects.ascend_graph import AscendOp, ConstOp, DataOp, GraphOp, NetOutputOp, dtype_of, shape_of
    from ge.core import dtypes, reference

    graph = next(op for op in module.ops if isinstance(op, GraphOp))
    values = {}
    for data in graph.inputs:
        value = np.asarray(feeds[data.label])
        want = dtypes.to_numpy(dtype_of(data.out.type))
        if value.dtype != want or not shapes.compatible(shape_of(data.out.type), value.shape):
            raise InputError(
                f"input '{data.label}' is {value.dtype}{list(value.shape)}, expected {want}{list(shape_of(data.out.type))}"
            )
        values[data.out] = value
    layers: dict[str, np.ndarray] = {}
    with np.errstate(all="ignore"):
        for op in graph.body.block.ops:
            if isinstance(op, DataOp):
                continue
            if isinstance(op, NetOutputOp):
                return layers, {n.data: values[v] for n, v in zip(op.names, op.outputs)}
            results = reference.evaluate_op(op, [values[v] for v in op.operands], store)
            values.update(zip(op.results, results))
            if isinstance(op, AscendOp) and not isinstance(op, ConstOp) and op.node_name is not None and results:
                layers[op.label] = results[0]
    raise InputError("the graph has no NetOutput")


def _compare(
    compiled: ModuleOp,
    store: WeightStore,
    feeds: Mapping[str, np.ndarray],
    reference_values: dict[str, np.ndarray],
    reference_outputs: dict[str, np.ndarray],
) -> Report:
    from xdsl.dialects.builtin import StringAttr

    from dialects.ascend_graph import AscendOp, CastOp, ConstOp, DataOp, NetOutputOp, dtype_of
    from ge.core import dtypes
    from passes.precision_selection import BOUNDARY, ENGINE, IMPL_MODE, REASON

    values, outputs = trace(compiled, feeds, store)
    rows: list[LayerRow] = []
    for op in compiled.walk():
        if not isinstance(op, AscendOp) or isinstance(op, DataOp | ConstOp | NetOutputOp) or op.node_name is None:
            continue
        reason = op.attributes.get(REASON)
        if isinstance(op, CastOp) and isinstance(reason, StringAttr) and reason.data == BOUNDARY:
            continue
        ins = [dtypes.name(dtype_of(v.type)) for v in op.operands]
        outs = [dtypes.name(dtype_of(r.type)) for r in op.results]
        dtype = outs[0] if outs else ""
        if ins and outs and ins[0] != outs[0]:
            dtype = f"{ins[0]}->{outs[0]}"
        engine = op.attributes.get(ENGINE)
        mode = op.attributes.get(IMPL_MODE)
        errors = _errors(values.get(op.label), reference_values.get(op.label))
        rows.append(
            LayerRow(
                len(rows),
                op.label,
                op.OP_TYPE,
                dtype,
                "AI CPU" if isinstance(engine, StringAttr) else "AI Core",
                mode.data if isinstance(mode, StringAttr) else "",
                reason.data if isinstance(reason, StringAttr) else "",
                *errors,
            )
        )
    final = {}
    for name, want in reference_outputs.items():
        abs_err, rel_err = _errors(outputs.get(name), want)
        final[name] = (abs_err if abs_err is not None else float("nan"), rel_err if rel_err is not None else float("nan"))
    return Report(rows, final)


def _errors(got: np.ndarray | None, want: np.ndarray | None) -> tuple[float | None, float | None]:
    """max |got - want| and that over max |want|; None where the layers do not compare."""
    import numpy as np

    if got is None or want is None or got.shape != want.shape or want.dtype.kind not in "fc":
        return None, None
    a, b = got.astype(np.float64), want.astype(np.float64)
    err = float(np.max(np.abs(a - b), initial=0.0))
    scale = float(np.max(np.abs(b), initial=0.0))
    return err, (err / scale if scale > 0 else (0.0 if err == 0 else float("inf")))


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
    precision options among them.
    """
    import numpy as np

    from ge.cli.atc import compile_options, parse_flags

    if top is not None and top < 1:
        raise OptionError(f"--top {top} is not allowed; give a count >= 1")
    options = compile_options(parse_flags(ctx.args), extra=("input", "seed", "top", "csv"), export_compile_stat=0)
    soc_version = options.soc_version
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


def write_csv(path: Path, rows: list[LayerRow]) -> None:
    """All rows, atomically."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            writer.writerow(row.cells())
    tmp.replace(path)
