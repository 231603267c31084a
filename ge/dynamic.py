"""Fully dynamic shapes and the hybrid build: compile once, tile on the host per shape.

    model = ge.compile("bert.onnx")                                   # its own dynamic dims: -1, unbounded
    model = ge.compile("resnet.onnx", {"input_shape": "input:1~32,3,224,224"})
    session.run(model, {"input": batch_of_5})                         # any shape within the ranges

A compile is fully dynamic when, without a gear option, a graph input keeps a
dynamic dim: `--input_shape` marks it -1 or `lo~hi`, or the model declares it
dynamic and `--input_shape` leaves it so; NPURunConfig's `dynamic_input` with
`dynamic_inputs_shape_range` (the graph inputs in order, `data:[1~8,128],[..]`) and
`compile_dynamic_mode` (every input dim -1) ask for it too. A dim without a range is
unbounded, as in GE: nothing compiled here depends on the upper bound (see below).

Compile time (once): import with the dynamic dims `?`, then every optimisation phase
of `ge.pipeline` (constant folding, graph fusion, precision and format selection, UB
fusion, Split no-task) on the dynamic graph. Their decisions do not depend on the
size of a dynamic dim: graph fusion patterns match op types and static attributes,
format selection reads channel dims (batch, H, W and sequence do not change a
format), and UB fusion sizes a scope by the footprint of one tile, a cube fractal (a
dynamic dim counted as a whole 16, `passes.ub_fusion.scopes`) or a 32-byte block, so no
upper bound is needed. Where a pass needs a static shape to decide, it leaves the
dynamic graph as it is, so the graph can have more kernels than a static build of a
shape: UB fusion does not fuse a row-cut scope whose reduced dims are dynamic.
MultiHeadAttention fusion traces the head split over dynamic batch and sequence dims
at two probe sizes (`passes.attention_fusion`), so attention fuses as in a static build. The `.om` keeps the
optimised graph as IR text, the ranges and the weights (`ge.om.dynamic`); it holds no
task list and no kernel. The compile also infers the graph's shapes at a probe size
(`PROBE_DIM` per dynamic dim), as a run does, to refuse a graph whose shapes depend on
data (a NonZero's count, a Reshape to an ArgMax), which no run could build.

Run time (per input shape, `ShapeBuilds`): the shapes are checked against the ranges
(an `InputError` listing them), every tensor's shape is inferred on the host by each
op's shape rule, and, as GE's host InferShape does, the values shapes depend on (the
Shape -> Gather -> Concat chains of transformer exports) are computed on the host by
the reference kernels, so that a DynamicReshape, BroadcastTo, StridedSliceV2 or Range
takes its size from them and the chains fold to constants (`infer_shapes`); each kernel scope is tiled for its concrete shape by the lowering's
`plan` (the host tiling function) and the streams, memory plan and task list of that
shape are built; all of it is cached per shape, so a shape seen again costs only the
run. The simulator then runs that task list with every task launched from the host
(no sink scheduling): `timing.HOST_TILING_US` per kernel op and `timing.HOST_LAUNCH_US`
per task on the host's timeline, a task starting no earlier than its launch; the
profile's `host_us` column shows it per op. Where the dynamic graph was optimised as a
static one would be (ResNet-style CNNs), the kernels are those a static compile of the
shape builds, and the outputs equal the static build's.

Hybrid (`dynamic_fallback=1` with a gear option): the gears (`ge.gears`) and the
dynamic graph in one model; a run takes the gear its inputs match, else the dynamic
graph, whose ranges are `--input_shape`'s (-1 or `lo~hi` on the gear dims).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import threading
import time
from collections.abc import Mapping

import numpy as np
from ml_dtypes import bfloat16
from xdsl.dialects.builtin import IntegerType, ModuleOp, TensorType
from xdsl.ir import Attribute, SSAValue
from xdsl.rewriter import Rewriter
from xdsl.traits import Pure

from dialects import ascend_graph as ag
from dialects.shapes import DYN, Shape, ShapeError
from dialects.shapes import fmt as shapes_fmt
from ge import backend, pipeline
from ge.core import dtypes, ir, shape_ranges
from ge.core.errors import GEError, InputError, ModelError, OptionError
from ge.core.options import CompileOptions
from ge.core.reference import const_value, evaluate_op
from ge.core.shape_ranges import UNBOUNDED, Ranges
from ge.core.weights import WeightStore, attach, digest, store_of
from ge.frontend.input_shape import parse_input_shape
from ge.frontend.onnx_importer import _input_shapes, _utf8, prepare
from ge.om import Model, OmError
from ge.om.dynamic import DynamicGraph, Port, WeightEntry
from ge.om.memory import REGION_ORDER, MemoryPlan, Region, align
from ge.om.tasks import KernelTask
from ge.sim import timing
from ge.sim.config import RunConfig
from ge.sim.runtime import Runtime
from passes.graph_match import new_constant, store_around

STRATEGY = "dynamic"
HYBRID = "hybrid"
RUN_TIME_STEPS = "shape inference, tiling (lower-to-kernel), streams, memory and tasks per input shape, on the host"
COMPILE_TIME_PHASES = "import, constant folding, graph fusion, precision and format selection, UB fusion, Split no-task"


def requested(options: CompileOptions) -> bool:
    """Whether the options themselves ask for a fully dynamic build (a model's own dynamic
    dims, seen at import, make one too)."""
    if options.generalise_inputs or options.shape_range is not None:
        return True
    text = options.input_shape or ""
    return "~" in text or bool(re.search(r"(^|[:,])\s*-1\s*(?=,|;|$)", text))


def ranges_of(options: CompileOptions, declared: Mapping[str, Shape | None]) -> Ranges:
    """Every graph input's ranges (in the model's input order): compile_dynamic_mode's
    (all -1), else dynamic_inputs_shape_range's, else `--input_shape`'s over the model's
    declared dims (a dynamic one unbounded)."""
    order = list(declared)
    if options.generalise_inputs:
        unknown = [n for n, s in declared.items() if s is None]
        if unknown:
            raise OptionError(f"compile_dynamic_mode generalises every dim to -1, but input '{unknown[0]}' has no declared rank; give its shape with input_shape")
        return {n: tuple((1, UNBOUNDED) for _ in s) for n, s in declared.items()}  # type: ignore[union-attr]
    if options.shape_range is not None:
        given, source = shape_ranges.from_shape_range(options.shape_range, order), "dynamic_inputs_shape_range"
    else:
        given, source = (shape_ranges.from_input_shape(options.input_shape, order) if options.input_shape else {}), "--input_shape"
    ranges: Ranges = {}
    for name, shape in declared.items():
        if name in given:
            if shape is not None and len(shape) != len(given[name]):
                raise OptionError(f"{source}: input '{name}' has rank {len(shape)}, but {len(given[name])} dims are given")
            ranges[name] = given[name]
        elif shape is None:
            raise OptionError(f"{source}: input '{name}' has no declared rank; give its shape (with -1 or lo~hi for dynamic dims)")
        else:
            ranges[name] = tuple((1, UNBOUNDED) if d == DYN else (d, d) for d in shape)
    return ranges


def _import_shapes(ranges: Ranges) -> dict[str, tuple[int, ...]]:
    """The shapes the import takes: a ranged dim -1 (`?`), a fixed one its size."""
    return {n: tuple(lo if lo == hi else -1 for lo, hi in dims) for n, dims in ranges.items()}


def compile(model: str | os.PathLike | ModuleOp, options: CompileOptions, imported_s: float = 0.0) -> Model:
    """The fully dynamic model of an ONNX file (imported here) or of a module imported with
    its dynamic dims (`imported_s`: the seconds that import took)."""
    started = time.perf_counter()
    if isinstance(model, ModuleOp):
        module = model
        declared = {d.label: ag.shape_of(d.out.type) for d in ir.graph_of(module).inputs}
        ranges = ranges_of(options, declared)
        _check_module(module, ranges)
    else:
        importer, _, where = prepare(os.fspath(model))
        ranges = ranges_of(options, _input_shapes(importer.model))
        with _utf8(where):
            module = importer.run(parse_input_shape(_import_shapes(ranges), _input_shapes(importer.model)))
    if not shape_ranges.is_dynamic(ranges):
        raise OptionError(f"the shape ranges {shape_ranges.shown(ranges)} fix every dim; compile it static (no -1 or lo~hi)")
    timings = {"import": imported_s + time.perf_counter() - started}
    compilation = pipeline.optimize(module, options)
    timings.update(compilation.timings)
    probed = time.perf_counter()
    infer_shapes(module.clone(), _probe(ranges), probe=True)  # refuse now what no shape could run
    timings["shape check"] = time.perf_counter() - probed
    compilation.finish()
    graph, blob = _graph(module, ranges)
    return _model(options, graph, blob, timings)


def _check_module(module: ModuleOp, ranges: Ranges) -> None:
    """A module passed in keeps its own input types: the ranges must fit them."""
    for data in ir.graph_of(module).inputs:
        shape = ag.shape_of(data.out.type)
        for d, (lo, hi) in zip(shape, ranges[data.label]):
            if d != DYN and (lo, hi) != (d, d):
                raise OptionError(f"input '{data.label}' of the module has dims {list(shape)}; a module is compiled with its own dims, so only its '?' dims take ranges")


def _graph(module: ModuleOp, ranges: Ranges) -> tuple[DynamicGraph, bytes]:
    """The module's section of the `.om` and the weight region holding each weight it uses."""
    store = store_of(module)
    graph = ir.graph_of(module)
    blob = bytearray()
    entries: dict[str, WeightEntry] = {}
    for op in module.walk():
        if isinstance(op, ag.ConstOp) and isinstance(op.value, ag.WeightRefAttr) and op.value.weight.data not in entries:
            array = np.ascontiguousarray(store.get(op.value))
            entries[op.value.weight.data] = WeightEntry(op.value.weight.data, op.value.digest.data, str(array.dtype), tuple(array.shape), len(blob))
            blob += array.reshape(-1).view(np.uint8).tobytes()
            blob += bytes(align(len(blob)) - len(blob))
    inputs = tuple(Port(d.label, dtypes.name(ag.dtype_of(d.out.type))) for d in graph.inputs)
    net = graph.output
    outputs = tuple(Port(n.data, dtypes.name(ag.dtype_of(v.type))) for n, v in zip(net.names, net.outputs))
    return DynamicGraph(dict(ranges), inputs, outputs, ir.to_text(module), tuple(entries.values())), bytes(blob)


def _model(options: CompileOptions, graph: DynamicGraph, blob: bytes, timings: dict[str, float]) -> Model:
    """A fully dynamic model: the dynamic section, the weight region, and no task list."""
    sizes = {r: 0 for r in REGION_ORDER} | {Region.WEIGHT: len(blob)}
    memory = MemoryPlan(STRATEGY, (), {r: 0 for r in REGION_ORDER}, sizes, 0, 0, {})
    cache = {"mode": options.op_compiler_cache_mode, "off": "a dynamic model's kernels are tiled at run time, per input shape"}
    build = {"timings": timings, "kernels": 0, "aicpu_kernels": 0, "tasks": 0, "kernel_cache": cache, "dynamic": _summary(graph, STRATEGY)}
    return Model(options.soc_version, options.given(), (), (), memory, 1, 0, "", (), memoryview(blob).toreadonly(), build, dynamic=graph)


def _summary(graph: DynamicGraph, strategy: str) -> dict[str, object]:
    return {
        "strategy": strategy,
        "ranges": shape_ranges.shown(graph.ranges),
        "compile_time": COMPILE_TIME_PHASES,
        "run_time": RUN_TIME_STEPS,
        "weights": len(graph.weights),
        "host_tiling_us_per_op": timing.HOST_TILING_US,
        "host_launch_us_per_task": timing.HOST_LAUNCH_US,
    }


def hybrid(model: str | os.PathLike, options: CompileOptions) -> Model:
    """Gears and a dynamic fallback in one model: the gears built as `ge.gears` builds them
    (their dims -1 in --input_shape), the dynamic graph over `--input_shape`'s ranges."""
    from ge import gears

    if options.input_shape is None:
        raise OptionError("dynamic_fallback=1 needs --input_shape with the gear dims marked -1 or lo~hi (the dynamic graph's ranges)")
    marked = re.sub(r"\d+~-?\d+", "-1", options.input_shape)
    geared = gears.compile(model, dataclasses.replace(options, input_shape=marked, dynamic_fallback=0))
    plain = dataclasses.replace(options, dynamic_fallback=0, dynamic_batch_size=None, dynamic_image_size=None, dynamic_dims=None)
    dynamic = compile(model, plain)
    assert dynamic.dynamic is not None
    for index, gear in enumerate(geared.gears):
        try:
            shape_ranges.check(dynamic.dynamic.ranges, gear.shapes)
        except InputError as e:
            raise OptionError(f"gear {index} lies outside --input_shape's ranges: {e.args[0]}") from None
    return with_dynamic(geared, dynamic, options)


def with_dynamic(geared: Model, dynamic: Model, options: CompileOptions) -> Model:
    """`geared` with `dynamic`'s graph added: its weights after the gears' in the weight
    region (the last region, so no other region moves)."""
    assert dynamic.dynamic is not None
    base = len(geared.weights)
    weights = bytes(geared.weights) + bytes(dynamic.weights)
    graph = dataclasses.replace(dynamic.dynamic, weights=tuple(dataclasses.replace(w, offset=w.offset + base) for w in dynamic.dynamic.weights))

    def grown(plan: MemoryPlan) -> MemoryPlan:
        return dataclasses.replace(plan, sizes={**plan.sizes, Region.WEIGHT: len(weights)})

    timings = dict(geared.build["timings"])  # type: ignore[arg-type]
    for phase, seconds in dynamic.build["timings"].items():  # type: ignore[union-attr]
        timings[f"dynamic {phase}"] = seconds
    build = {**geared.build, "timings": timings, "dynamic": _summary(graph, HYBRID)}
    return dataclasses.replace(
        geared, options=options.given(), memory=grown(geared.memory), weights=memoryview(weights).toreadonly(), build=build,
        gears=tuple(dataclasses.replace(g, memory=grown(g.memory)) for g in geared.gears), dynamic=graph,
    )


# ------------------------------------------------------------------ run time


def specialise(graph: DynamicGraph, weights: bytes | memoryview, shapes: Mapping[str, tuple[int, ...]], key: str) -> ModuleOp:
    """The graph with every tensor's shape inferred for the input `shapes` (each op's shape
    rule, in order), its weights in a store read from the weight region."""
    try:
        module = ir.parse(graph.graph, "the dynamic graph")
    except Exception as e:  # noqa: BLE001 - a tampered graph fails in the parser or verifier in many ways
        raise OmError(f"the model's dynamic graph does not parse: {e}") from None
    attach(module, _store(graph, weights, key))
    names = [d.label for d in ir.graph_of(module).inputs]
    if names != [p.name for p in graph.inputs]:
        raise OmError(f"the model's dynamic graph has inputs {names[:8]}, its section lists {[p.name for p in graph.inputs][:8]}")
    infer_shapes(module, shapes)
    return module


PROBE_DIM = 64
"""A dynamic dim's size in the compile's shape check (within its range): large enough
for the convolutions and pools of an image model, as a run's sizes are."""


def _probe(ranges: Ranges) -> dict[str, tuple[int, ...]]:
    return {n: tuple(max(lo, PROBE_DIM) if hi == UNBOUNDED else min(max(lo, PROBE_DIM), hi) for lo, hi in dims) for n, dims in ranges.items()}


HOST_VALUE_LIMIT = 1 << 16
"""The most elements a tensor may hold for the host to compute its value while it infers
shapes (a shape computation's vectors and scalars, a Range of positions), as many as
constant folding computes at compile time (`ConstantFoldingPass.max_elements`): a graph
cannot make the host evaluate a big tensor; a larger one stays an op of the graph."""

VALUE_SIZED: tuple[type[ag.AscendOp], ...] = (ag.DynamicReshapeOp, ag.BroadcastToOp, ag.StridedSliceV2Op, ag.RangeOp)
"""The ops whose result shape is read from values (their `?` dims resolved on the host)."""


def infer_shapes(module: ModuleOp, shapes: Mapping[str, tuple[int, ...]], probe: bool = False) -> None:
    """Give every tensor of `module` its shape for the input `shapes`, in place (the host's
    InferShape). As GE's does, it computes on the host the values that shapes depend on:
    a Shape of a typed tensor, small constants and every small op of those (`HOST_VALUE_LIMIT`,
    by its reference kernel) have values, which size the value-sized ops and replace the ops
    computing them by constants; a value-sized op becomes its static form (Reshape, ExpandD,
    StridedSliceD). A shape that depends on data (a NonZero's count, say) is refused. A
    `probe` stops quietly where these `shapes` break a shape rule (other sizes may fit it)."""
    body = ir.graph_of(module)
    values = _HostValues()
    for op in list(body.body.block.ops):
        if isinstance(op, ag.DataOp):
            shape = shapes[op.label]
            Rewriter.replace_value_with_new_type(op.out, ag.tensor(ag.dtype_of(op.out.type), shape))
        elif isinstance(op, ag.ControlFlowOp):
            raise ModelError(f"{op.OP_TYPE} '{op.label}': control flow in a fully dynamic graph is not built; compile it with --input_shape fixing every dim, or with gears")
        elif isinstance(op, ag.AscendOp) and op.results and not isinstance(op, ag.ConstOp):
            try:
                _infer(op, shapes, values)
            except _Refused:
                if probe:
                    return
                raise
    values.erase_unread()
    module.verify()


def _infer(op: ag.AscendOp, shapes: Mapping[str, tuple[int, ...]], values: _HostValues) -> None:
    """Type the results of one op for the input `shapes`, and fold it when the host has its value."""
    try:
        inferred = [ag.shape_of(t) for t in type(op).infer_result_types([v.type for v in op.operands], op.props)]
    except (ShapeError, NotImplementedError) as e:
        raise _Refused(f"{op.OP_TYPE} '{op.label}': its shape for inputs {dict(shapes)} cannot be inferred: {e}") from None
    if isinstance(op, VALUE_SIZED):
        inferred = [_value_sized(op, values)]
    elif any(DYN in s for s in inferred):
        raise ModelError(
            f"{op.OP_TYPE} '{op.label}': its result shape {shapes_fmt(inferred[0])} depends on the values of its inputs "
            f"(data), which a fully dynamic build cannot size before it runs; fix those dims with --input_shape or build gears"
        )
    for r, shape in zip(list(op.results), inferred):
        typed = _retyped(r.type, shape)
        if r.type != typed:
            Rewriter.replace_value_with_new_type(r, typed)
    values.evaluate(op)


def _value_sized(op: ag.AscendOp, values: _HostValues) -> Shape:
    """The result shape of an op sized by values, from the host's values of its operands
    (its data operand, whose shape only it reads, stood in for), checked against the dims
    the importer proved."""
    args = []
    for i, v in enumerate(op.operands):
        value = values.get(v)
        if value is None and i == 0 and not isinstance(op, ag.RangeOp):
            value = _stand_in(v)
        if value is None:
            raise ModelError(
                f"{op.OP_TYPE} '{op.label}': its result shape depends on values computed from data ({_data_source(v, values)}), not from the "
                f"input shapes alone, so no host step can size it before it runs; fix those dims with --input_shape or build gears"
            )
        args.append(value)
    if isinstance(op, ag.RangeOp):
        return (_range_length(op, *args),)
    try:
        (result,) = evaluate_op(op, args)
    except GEError as e:
        raise _Refused(f"{op.OP_TYPE} '{op.label}': its shape cannot be computed from the values of its operands: {e}") from None
    return tuple(result.shape)


def _data_source(value: SSAValue, values: _HostValues) -> str:
    """Where data (not shapes) comes into `value`: the integer op nearest the graph inputs
    on its way (an ArgMax, a NonZero's count), else the input itself."""
    owner, source = value.owner, None
    while isinstance(owner, ag.AscendOp) and not isinstance(owner, ag.DataOp):
        if any(isinstance(ag.dtype_of(r.type), IntegerType) for r in owner.results):
            source = owner
        unknown = [v.owner for v in owner.operands if values.get(v) is None]
        if not unknown:
            break
        owner = unknown[0]
    if source is not None:
        return f"{source.OP_TYPE} '{source.label}'"
    return f"input '{owner.label}'" if isinstance(owner, ag.DataOp) else "a graph input"


def _range_length(op: ag.RangeOp, start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> int:
    """A Range's length, max(ceil((limit - start) / delta), 0), without computing it
    (exact for integers, as the reference kernel counts)."""
    first, last, step = start.item(), limit.item(), delta.item()
    if step == 0:
        raise _Refused(f"Range '{op.label}': delta is 0")
    if start.dtype.kind == "f":
        return max(math.ceil((last - first) / step), 0)
    return max(-((first - last) // step), 0)


class _Refused(ModelError):
    """These input shapes break a shape rule (a probe's sizes may, where a run's fit)."""


def _stand_in(value: SSAValue) -> np.ndarray:
    """Zeros of the value's (inferred, static) type that take no memory: for a kernel that
    reads only the shape of this operand."""
    return np.broadcast_to(np.zeros((), dtypes.to_numpy(ag.dtype_of(value.type))), ag.shape_of(value.type))


class _HostValues:
    """The values the host computes while it infers shapes: those of Shape ops, small
    constants and small ops of them; each op computed is replaced by a constant."""

    def __init__(self) -> None:
        self._values: dict[SSAValue, np.ndarray] = {}
        self._consts: list[ag.ConstOp] = []

    def get(self, value: SSAValue) -> np.ndarray | None:
        if value not in self._values and isinstance(value.owner, ag.ConstOp) and _small(value):
            self._values[value] = const_value(value.owner)
            self._consts.append(value.owner)
        return self._values.get(value)

    def evaluate(self, op: ag.AscendOp) -> None:
        """Compute the op on the host if it is pure, its operands have values and its results
        are small and logical (a Shape reads its operand's type); then fold it into
        constants, or make a value-sized op static."""
        args = [_stand_in(op.x)] if isinstance(op, ag.ShapeOp) else [self.get(v) for v in op.operands]
        computable = op.has_trait(Pure) and all(_small(r) and ag.format_of(r.type) is None for r in op.results)
        if computable and all(a is not None for a in args):
            try:
                results = evaluate_op(op, args)  # type: ignore[arg-type]
            except GEError as e:
                raise _Refused(f"{op.OP_TYPE} '{op.label}': the host cannot compute its value for this shape: {e}") from None
            self._fold(op, results)
        elif isinstance(op, VALUE_SIZED):
            self._make_static(op)

    def _fold(self, op: ag.AscendOp, results: list[np.ndarray]) -> None:
        store = store_around(op)
        names = [op.label] if len(results) == 1 else [f"{op.label}:{i}" for i in range(len(results))]
        consts = [new_constant(value, ag.dtype_of(r.type), name, store) for value, r, name in zip(results, op.results, names)]
        Rewriter.replace_op(op, consts, [c.out for c in consts])  # type: ignore[arg-type]
        for c, value in zip(consts, results):
            self._values[c.out] = value
        self._consts.extend(consts)

    def _make_static(self, op: ag.AscendOp) -> None:
        """A value-sized op whose shape the host knows, but not its value: the static op."""
        y = op.results[0]
        shape = ag.shape_of(y.type)
        if isinstance(op, ag.DynamicReshapeOp):
            static: ag.AscendOp = ag.ReshapeOp([op.x], {"shape": ag.ints(shape)}, op.label, [y.type])
        elif isinstance(op, ag.BroadcastToOp):
            static = ag.ExpandOp([op.x], {"shape": ag.ints(shape)}, op.label, [y.type])
        elif isinstance(op, ag.StridedSliceV2Op):
            static = ag.StridedSliceOp([op.x], _slice_props(op, [self.get(v) for v in op.operands[1:]]), op.label, [y.type])
        else:
            raise ModelError(
                f"{op.OP_TYPE} '{op.label}': its {shape[0]} elements are more than the host computes while it infers shapes "
                f"({HOST_VALUE_LIMIT}), and no device kernel computes a Range; fix its dims with --input_shape or build gears"
            )
        Rewriter.replace_op(op, static)

    def erase_unread(self) -> None:
        """Erase the constants the host read or made that nothing reads any more (the
        shape chains folded into other constants)."""
        for const in dict.fromkeys(reversed(self._consts)):
            if not const.out.uses:
                Rewriter.erase_op(const)


def _small(value: SSAValue) -> bool:
    shape = ag.shape_of(value.type)
    return DYN not in shape and int(np.prod(shape)) <= HOST_VALUE_LIMIT


def _slice_props(op: ag.StridedSliceV2Op, args: list[np.ndarray | None]) -> dict[str, Attribute]:
    """StridedSliceD's begin, end and strides (one per dim, clamped as ONNX's Slice clamps)
    for the host's values of a StridedSliceV2's starts, ends, axes and steps."""
    x = ag.shape_of(op.x.type)
    begin, end, strides = [0] * len(x), list(x), [1] * len(x)
    starts, ends, axes, steps = (np.asarray(a).astype(np.int64).tolist() for a in args)
    for start, stop, axis, step in zip(starts, ends, axes, steps):
        axis += len(x) if axis < 0 else 0
        size = x[axis]
        start += size if start < 0 else 0
        stop += size if stop < 0 else 0
        if step > 0:
            begin[axis], end[axis] = min(max(start, 0), size), min(max(stop, 0), size)
        else:
            begin[axis], end[axis] = min(max(start, 0), size - 1), min(max(stop, -1), size - 1)
        strides[axis] = step
    return {"begin": ag.ints(begin), "end": ag.ints(end), "strides": ag.ints(strides)}


def _retyped(old: Attribute, shape: Shape) -> TensorType:
    """`old` (its dtype and device format kept, as precision and format selection chose
    them) with the logical `shape` a shape rule inferred."""
    dtype = ag.dtype_of(old)
    fmt = ag.format_of(old)
    if fmt is None:
        return ag.tensor(dtype, shape)
    assert isinstance(old, TensorType) and isinstance(old.encoding, ag.FormatAttr)
    return ag.device_tensor(dtype, fmt, old.encoding.origin_format.data, shape)


def _store(graph: DynamicGraph, weights: bytes | memoryview, key: str) -> WeightStore:
    """The weights of the graph, each checked against its digest."""
    store = WeightStore(key)
    data = bytes(weights)
    for w in graph.weights:
        dtype = np.dtype(bfloat16) if w.dtype == "bfloat16" else np.dtype(w.dtype)
        array = np.frombuffer(data, dtype, count=w.size // dtype.itemsize, offset=w.offset).reshape(w.shape)
        if digest(array) != w.digest:
            raise OmError(f"dynamic weight '{w.name}' does not match its digest; the model was altered")
        store.add(w.name, array)
    return store


class ShapeBuilds:
    """The run time's host step of a dynamic model: per input shape, the build of that shape
    (shape inference, tiling, streams, memory, tasks) and its runtime, cached."""

    def __init__(self, model: Model, config: RunConfig):
        assert model.dynamic is not None
        self.model = model
        self.graph = model.dynamic
        self.config = config
        self._built: dict[tuple[tuple[str, tuple[int, ...]], ...], tuple[Runtime, threading.Lock]] = {}
        self._lock = threading.Lock()
        self.key = f"<dynamic model {id(model):x}>"

    def runtime(self, shapes: Mapping[str, tuple[int, ...]]) -> tuple[Runtime, threading.Lock]:
        """The runtime of the build for `shapes` (checked against the ranges), built once."""
        shape_ranges.check(self.graph.ranges, shapes)
        key = tuple((p.name, tuple(shapes[p.name])) for p in self.graph.inputs)
        with self._lock:
            if key not in self._built:
                static = self.build(dict(key))
                self._built[key] = (Runtime(static, self.config, host_us(static)), threading.Lock())
            return self._built[key]

    def build(self, shapes: Mapping[str, tuple[int, ...]]) -> Model:
        """The static model of one input shape, as the host builds it at run time."""
        started = time.perf_counter()
        options = _build_options(self.model.options, self.model.soc_version)
        module = specialise(self.graph, self.model.weights, shapes, self.key)
        inferred = time.perf_counter()
        pipeline.configured(pipeline.LowerToKernel, options).apply(ir.context(), module)
        tiled = time.perf_counter()
        settings = backend.BuildOptions(options.soc_version, options.aicore_streams, not options.disable_reuse_memory, {}, options.aicpu_parallel)
        timings = {"shape inference": inferred - started, "tiling": tiled - inferred}
        built = backend.build(module, settings, timings)
        return dataclasses.replace(built, options=self.model.options, build={**built.build, "timings": timings, "shapes": {k: list(v) for k, v in shapes.items()}})


def _build_options(given: Mapping[str, object], soc_version: str) -> CompileOptions:
    """The options the run-time build takes from the model's: the SoC, streams, memory reuse."""
    keys = ("enable_single_stream", "stream_max_parallel_num", "disable_reuse_memory")
    try:
        return CompileOptions(soc_version=soc_version, **{k: given[k] for k in keys if k in given})  # type: ignore[arg-type]
    except (OptionError, TypeError) as e:
        raise OmError(f"the model's recorded options are not valid: {e}") from None


def host_us(model: Model) -> tuple[float, ...]:
    """Each task's host time before its launch: the tiling of a kernel op, the launch of every task."""
    return tuple(timing.HOST_LAUNCH_US + (timing.HOST_TILING_US if isinstance(t, KernelTask) else 0.0) for t in model.tasks)

