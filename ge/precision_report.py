"""The precision report: what precision selection chose, layer by layer, and what it cost.

`build_report` compiles the model twice with `ge.pipeline.optimize`: with the
precision options given, and with must_keep_origin_dtype (the float32 graph, for a
float32 model), the rest of the options alike so that both graphs have the same
layers. It runs both on the same inputs (the given ones, else seeded random values,
`ge.core.inputs.generated`) and gives, per layer in topological order, the dtype
chosen, the engine, the implementation mode, why (`_precision_reason`), and the
error of the layer's first output against the same layer of the float32 graph,
matched by ONNX node name: max |ours - fp32| and that divided by max |fp32| (the
error relative to the layer's scale; a per-element ratio is meaningless where an
output crosses zero). It also lists the constants precision selection saturated
(float32 values beyond the 16-bit dtype's range, now its largest finite value).
`ge precision-report` prints it.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr

from dialects import shapes
from dialects.ascend_graph import (
    AscendOp,
    CastOp,
    ConstOp,
    DataOp,
    NetOutputOp,
    dtype_of,
    shape_of,
)
from ge.compiler import require_static
from ge.core import dtypes, inputs, ir, reference
from ge.core.errors import InputError
from ge.core.files import published
from ge.core.options import CompileOptions
from ge.core.weights import WeightStore
from ge.frontend import load_onnx
from ge.pipeline import optimize
from passes.precision_selection import BOUNDARY, ENGINE, IMPL_MODE, REASON, Saturation

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
    saturated: list[Saturation] = dataclasses.field(default_factory=list)
    """Every constant whose out-of-range values were saturated, in graph order."""


def build_report(
    model: str | Path, options: CompileOptions, inputs: Mapping[str, np.ndarray] | None = None, seed: int = 0
) -> Report:
    """Compile `model` with `options` and with must_keep_origin_dtype, run both on
    `inputs` (random values for the graph inputs it does not give), compare layers."""
    baseline_options = dataclasses.replace(
        options,
        precision_mode="must_keep_origin_dtype",
        precision_mode_v2=None,
        modify_mixlist=None,
        keep_dtype=None,
        customize_dtypes=None,
    )
    # Both imports of one file share a weight-store key, so each graph runs on its own store.
    compiled, compiled_store = load_onnx(str(model), input_shape=options.input_shape)
    require_static(compiled, model)
    optimize(compiled, options)
    baseline, baseline_store = load_onnx(str(model), input_shape=options.input_shape)
    optimize(baseline, baseline_options)
    feeds = random_inputs(baseline, seed)
    for name in inputs or {}:
        if name not in feeds:
            raise InputError(f"--input {name}: the model has no input '{name}'; its inputs are {', '.join(feeds)}")
    feeds.update(inputs or {})
    reference_values, reference_outputs = trace(baseline, feeds, baseline_store)
    return _compare(compiled, compiled_store, feeds, reference_values, reference_outputs)


def random_inputs(module: ModuleOp, seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs for the graph's Data ops (`ge.core.inputs.generated`)."""
    graph = ir.graph_of(module)
    return inputs.generated(
        ((d.label, dtypes.to_numpy(dtype_of(d.out.type)), shape_of(d.out.type)) for d in graph.inputs), seed
    )


def trace(
    module: ModuleOp, feeds: Mapping[str, np.ndarray], store: WeightStore
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Run the graph on the reference interpreter, keeping every named op's first output."""
    graph = ir.graph_of(module)
    values = {}
    for data in graph.inputs:
        value = np.asarray(feeds[data.label])
        want = dtypes.to_numpy(dtype_of(data.out.type))
        if value.dtype != want or not shapes.compatible(shape_of(data.out.type), value.shape):
            raise InputError(
                f"input '{data.label}' is {value.dtype}{shapes.fmt(value.shape)}, expected {want}{shapes.fmt(shape_of(data.out.type))}"
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
    saturated = [s for op in compiled.walk() if isinstance(op, ConstOp) and (s := Saturation.of(op)) is not None]
    return Report(rows, final, saturated)


def _errors(got: np.ndarray | None, want: np.ndarray | None) -> tuple[float | None, float | None]:
    """max |got - want| and that over max finite |want|; None where the layers do not
    compare. Equal values (the same infinity, NaN against NaN) differ by 0, as the
    float32 baseline may overflow too; any other non-finite difference is inf."""
    if got is None or want is None or got.shape != want.shape or want.dtype.kind not in "fc":
        return None, None
    a, b = got.astype(np.float64), want.astype(np.float64)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(a - b))
    err = float(np.max(np.where(np.isnan(diff), np.inf, diff), initial=0.0))
    scale = float(np.max(np.abs(b[np.isfinite(b)]), initial=0.0))
    return err, (err / scale if scale > 0 else (0.0 if err == 0 else float("inf")))


def write_csv(path: Path, rows: list[LayerRow]) -> None:
    """All rows, whole or not at all."""
    with published(path, what="CSV report") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            writer.writerow(row.cells())
