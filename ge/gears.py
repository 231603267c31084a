"""Multi-gear compile: one static build per gear, packaged into one offline model.

    model = ge.compile("resnet.onnx", {"input_shape": "input:-1,3,224,224", "dynamic_batch_size": "1,4,8"})
    session.run(model, {"input": batch_of_4})        # runs the gear of batch 4

The dims marked -1 in `--input_shape` (or, without it, the model's own dynamic
dims) take each gear's values: `--dynamic_batch_size` sets dim 0 of every input
(the only -1 allowed), `--dynamic_image_size` sets H and W (by `--input_format`,
NCHW unless it says NHWC), `--dynamic_dims` sets every -1 in order (the inputs in
`--input_shape`'s order, then the model's other dynamic inputs). Each gear is then
a fully static graph, imported, optimised, fused, tiled and built by the whole
static pipeline (`ge.compiler`), so its kernels are those of a static compile of
that shape.

Work that does not depend on the gear is done once: the ONNX file is read,
checked, upgraded and its functions inlined once (`prepare`), and the gears are
converted from that one proto, each initializer read and hashed into the weight
store once (`GearImporter`). While the gears build, a weight a pass derives from
weights (a BatchNorm folded into a filter, a FRACTAL_Z or NC1HWC0 layout, a float16
conversion) is computed once for all of them (`ge.core.weights.derived_once`), and a
scope whose kernel an earlier gear lowered (the same key, as the kernel cache keys
it) takes a copy of it (`passes.lower_to_kernel.shared_kernels`): either way the
gear gets the bytes its static compile would make. The graph passes themselves run
per gear: fusion, precision and format selection and the lowering read the shapes
(UB fusion by the footprint, tilings by the sizes), so each gear is optimised at its
own shapes. The gears are then merged
(`merge`): each distinct weight is stored once, each distinct kernel once, and the
memory layout is shared: the feature map as large as the largest gear's (gears
never run at once), the inputs and outputs as the largest gear's, and after the
inputs the gear-index input. What was shared is in `Model.build["gears"]`. As GE
clones the graph into a Case of N branches behind a MapIndex, the device runs the
Case (`ge.om.gears.case`): the runtime maps the input shapes to the gear
(`ge.om.gears.pick`) and fills the gear index, and a LABEL_SWITCH_BY_INDEX jumps to
that gear's tasks.

Fully dynamic shapes are `ge.dynamic`'s; with dynamic_fallback=1 a dynamic graph is
compiled beside the gears (`ge.dynamic.hybrid`) and runs the inputs no gear matches.
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import math
import os
import re
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from xdsl.ir import Attribute, SSAValue

from dialects.ascend_graph import ConstOp
from dialects.shapes import DYN, Shape
from ge.core.errors import GEError, ModelError, OptionError
from ge.core.gear_options import gear_option, parse_gears
from ge.core.options import CompileOptions
from ge.core.weights import derived_once
from ge.distributed import Backend
from ge.frontend.input_shape import parse_input_shape
from ge.frontend.onnx_importer import Importer, _input_shapes, _utf8, prepare
from ge.om import (
    REGION_ORDER,
    Arg,
    MemoryPlan,
    Model,
    Placement,
    Region,
    Task,
    TensorDesc,
    limits,
)
from ge.om.gears import GEAR_INDEX, GEAR_INDEX_DTYPE, Gear, describe
from ge.om.memory import align
from passes.lower_to_kernel import SharedKernels, shared_kernels

GearShapes = dict[str, tuple[int, ...]]
"""Every graph input's static shape in one gear, in the model's input order."""


def gear_shapes(options: CompileOptions, declared: Mapping[str, Shape | None]) -> tuple[str, list[GearShapes]]:
    """The gear option's name and every gear's input shapes, for a model whose inputs are
    `declared` (name -> shape, DYN for a dynamic dim); each mismatch a clear `OptionError`."""
    given = gear_option(dataclasses.asdict(options))
    assert given is not None
    name, text = given
    gears = parse_gears(name, text)
    if options.input_shape is not None and "~" in options.input_shape:
        raise OptionError(
            f"--input_shape='{options.input_shape}': a range lo~hi bounds a fully dynamic graph; "
            f"with --{name} mark the gear dims -1 (or add dynamic_fallback=1 for gears with a dynamic fallback over the ranges)"
        )
    parsed = parse_input_shape(options.input_shape, declared) if options.input_shape is not None else {}
    shapes: dict[str, Shape] = {}
    for input_name in [*parsed, *(n for n in declared if n not in parsed)]:
        shape = parsed.get(input_name, declared[input_name])
        if shape is None:
            raise OptionError(f"--{name}: input '{input_name}' has no declared rank; give its shape with --input_shape")
        shapes[input_name] = shape
    dynamic = [(n, i) for n, shape in shapes.items() for i, d in enumerate(shape) if d == DYN]
    if not dynamic:
        raise OptionError(
            f"--{name} needs dims marked -1 in --input_shape (or dynamic in the model), and there are none; "
            f"the inputs are {describe({n: tuple(s) for n, s in shapes.items()})}"
        )
    _check_positions(name, options.input_format, shapes, dynamic, len(gears[0]))
    result = []
    for gear in gears:
        values = _values(name, gear, dynamic)
        result.append({n: tuple(values.get((n, i), d) for i, d in enumerate(shapes[n])) for n in declared})
    return name, result


def _check_positions(name: str, fmt: str | None, shapes: Mapping[str, Shape], dynamic: Sequence[tuple[str, int]], arity: int) -> None:
    """Only the dims the option sets are -1, and each gear has one value per -1."""
    marked = ", ".join(f"'{n}' dim {i}" for n, i in dynamic)
    if name == "dynamic_batch_size":
        wrong = [(n, i) for n, i in dynamic if i != 0]
        if wrong:
            raise OptionError(f"--dynamic_batch_size sets dim 0 (the batch) only, but -1 marks {marked}; mark only dim 0 with -1")
    elif name == "dynamic_image_size":
        for n in dict.fromkeys(n for n, _ in dynamic):
            rank = len(shapes[n])
            hw = (1, 2) if fmt == "NHWC" else (2, 3)
            if rank != 4 or sorted(i for m, i in dynamic if m == n) != list(hw):
                raise OptionError(
                    f"--dynamic_image_size sets H and W (dims {hw[0]} and {hw[1]} of a 4-D {fmt or 'NCHW'} input) only, "
                    f"but -1 marks {marked}; mark exactly H and W with -1"
                )
    elif arity != len(dynamic):
        raise OptionError(
            f"--dynamic_dims gives {arity} values per gear, but there are {len(dynamic)} dims marked -1 ({marked}); "
            f"give one value per -1, in order"
        )


def _values(name: str, gear: tuple[int, ...], dynamic: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
    if name == "dynamic_batch_size":
        return {at: gear[0] for at in dynamic}
    if name == "dynamic_image_size":
        return {at: gear[0] if j % 2 == 0 else gear[1] for j, at in enumerate(dynamic)}
    return dict(zip(dynamic, gear))


def compile(model: str | os.PathLike, options: CompileOptions, workers: Backend | None = None) -> Model:
    """The multi-gear model of an ONNX file: its import prepared once, each gear built
    static by the whole pipeline, the builds merged.

    With `workers` (a `ge.distributed` backend of forked processes, or this one), each
    gear is a job on the workers, the largest first: a worker inherits the prepared
    import and every initializer read once here (by converting the first gear's
    graph), and shares derived weights and kernels among the gears it builds."""
    started = time.perf_counter()
    importer, _, where = prepare(os.fspath(model))
    strategy, gears = gear_shapes(options, _input_shapes(importer.model))
    job = _Job(importer, where, {}, options, strategy)
    if workers is None or workers.workers == 1:
        prepared = time.perf_counter() - started
        shares = _Shares()
        built = [_gear_build(job, shares, i, shapes) for i, shapes in enumerate(gears)]
        return merge(built, gears, options.given(), strategy, prepared, shares.counts())
    with _utf8(where):
        GearImporter(importer.model, importer.store.key, importer.opset, job.read).run({n: tuple(s) for n, s in gears[0].items()})
    prepared = time.perf_counter() - started
    global _forked, _worker_shares
    _forked = job
    gc.freeze()  # the forked workers' collector leaves this process's objects alone: no walks over them, no copied pages
    try:
        order = sorted(range(len(gears)), key=lambda i: -sum(math.prod(s) for s in gears[i].values()))
        done = dict(zip(order, workers.map(_gear_job, [(i, gears[i]) for i in order])))
    finally:
        gc.unfreeze()
        _forked = _worker_shares = None
    counts = {k: sum(more[k] for _, more in done.values()) for k in _Shares().counts()}
    built = [done[i][0] for i in range(len(gears))]
    return merge(built, gears, options.given(), strategy, prepared, counts | {"workers": workers.workers})


@dataclass(frozen=True)
class _Job:
    """What every gear's build needs: the prepared import, the initializers read so far, the options."""

    importer: Importer
    where: str
    read: dict[str, _Initializer]
    options: CompileOptions
    strategy: str


@dataclass
class _Shares:
    """What the gears one process builds share: weights derived once, kernels lowered once."""

    weights: dict[Hashable, object] = field(default_factory=dict)
    kernels: SharedKernels = field(default_factory=SharedKernels)

    def counts(self) -> dict[str, int]:
        return {"derived_weights": len(self.weights), "kernels_lowered": len(self.kernels.kernels), "kernels_taken": self.kernels.hits}


_forked: _Job | None = None
"""The job a parallel compile's forked workers inherit (set only while they run)."""
_worker_shares: _Shares | None = None
"""What the gears a worker builds share, from its first gear job to its last."""


def _gear_job(item: tuple[int, GearShapes]) -> tuple[Model, dict[str, int]]:
    """One gear (its index and shapes) built by a worker with the job it inherited, the
    weights as bytes so that the model travels back; and what it added to the worker's shares."""
    from ge.compiler import collecting_less

    global _worker_shares
    assert _forked is not None, "gear jobs run in processes forked by a parallel multi-gear compile"
    if _worker_shares is None:
        _worker_shares = _Shares()
    before = _worker_shares.counts()
    with collecting_less():  # as ge.compile compiles
        built = _gear_build(_forked, _worker_shares, *item)
    after = _worker_shares.counts()
    return dataclasses.replace(built, weights=bytes(built.weights)), {k: after[k] - before[k] for k in after}


def _gear_build(job: _Job, shares: _Shares, index: int, shapes: GearShapes) -> Model:
    """The static build of one gear, its import converted from the prepared proto, sharing `shares`."""
    from ge.compiler import _compile

    static = dataclasses.replace(job.options, input_shape=describe(shapes), **{n: None for n in ("dynamic_batch_size", "dynamic_image_size", "dynamic_dims")})
    t = time.perf_counter()
    try:
        with _utf8(job.where):
            importer = job.importer
            module = GearImporter(importer.model, importer.store.key, importer.opset, job.read).run({n: tuple(s) for n, s in shapes.items()})
        converted = time.perf_counter() - t
        with derived_once(shares.weights), shared_kernels(shares.kernels):
            one = _compile(module, static)
    except GEError as e:  # which gear failed, with the static compile's own message
        raise type(e)(f"gear {index} ({describe(shapes)}) of --{job.strategy}: {e.args[0]}") from e
    timings = dict(one.build["timings"])  # type: ignore[arg-type]
    timings["import"] = timings.get("import", 0.0) + converted
    return dataclasses.replace(one, build={**one.build, "timings": timings})


@dataclass(frozen=True)
class _Initializer:
    """An initializer as the first gear imported it: its const's value (a weight handle,
    or inline), type and name, and its array."""

    value: Attribute
    type: Attribute
    label: str
    hint: str | None
    array: np.ndarray


class GearImporter(Importer):
    """An importer that converts and stores each initializer once for every gear: a later
    gear's const has the first gear's weight handle and array (reading and hashing the
    weights is most of a large model's import)."""

    def __init__(self, model: onnx.ModelProto, key: str, opset: int, read: dict[str, _Initializer]):
        super().__init__(model, key, opset)
        self.read = read

    def value(self, name: str) -> SSAValue:
        if name in self.values or name not in self.initializers:
            return super().value(name)
        first = self.read.get(name)
        if first is None:
            value = super().value(name)
            op = value.owner
            assert isinstance(op, ConstOp)
            self.read[name] = _Initializer(op.value, value.type, op.label, value.name_hint, self.arrays[value])
            return value
        op = ConstOp(first.value, first.type, first.label)  # type: ignore[arg-type]
        self.block.add_op(op)
        self.arrays[op.out] = first.array
        op.out.name_hint = first.hint
        self.values[name] = op.out
        return op.out


def merge(
    built: Sequence[Model], gears: Sequence[GearShapes], options: dict[str, object], strategy: str, prepared: float,
    shares: Mapping[str, int],
) -> Model:
    """One model of the static builds `built` of `gears`: shared memory layout, weights and
    kernels, the largest gear's ports and tasks as the model's own."""
    from ge.core import soc as socs

    weights, offsets = _shared_weights(built)
    kernels, names = _shared_kernels(built)
    sizes = {r: max(m.memory.sizes[r] for m in built) for r in REGION_ORDER} | {Region.WEIGHT: len(weights)}
    index_at = sizes[Region.INPUT]  # the gear-index input, after the largest gear's inputs
    sizes[Region.INPUT] += align(limits.ITEMSIZE[GEAR_INDEX_DTYPE])
    bases, at = {}, 0
    for r in REGION_ORDER:
        bases[r], at = at, at + sizes[r]
    device = socs.load(built[0].soc_version)
    if at > device.device_memory_bytes:
        raise ModelError(
            f"the {len(built)} gears need {at:,} bytes of device memory (the largest gear's), more than the "
            f"{device.device_memory_bytes:,} bytes of {device.name}; drop the largest gears"
        )
    table = tuple(
        _gear(m, shapes, bases, sizes, offsets[i], names[i]) for i, (m, shapes) in enumerate(zip(built, gears))
    )
    largest = max(range(len(built)), key=lambda i: (sum(t.size for t in built[i].inputs), i))
    top = table[largest]
    shared = {
        "strategy": strategy,
        "count": len(built),
        "largest": largest,
        "import": "read, checked and upgraded once; each initializer read and stored once; the graph converted per gear",
        "prepare_s": prepared,
        "weights": {"stored_bytes": len(weights), "per_gear_bytes": sum(m.memory.sizes[Region.WEIGHT] for m in built)},
        "kernels": {"stored": len(set().union(*(n.values() for n in names))), "per_gear": sum(len(n) for n in names)},
        "feature_map": {"planned_bytes": sizes[Region.FEATURE_MAP], "sum_of_gears_bytes": sum(m.memory.sizes[Region.FEATURE_MAP] for m in built)},
        "compile": dict(shares),
    }
    timings: dict[str, float] = {"import": prepared}
    for m in built:
        for phase, seconds in m.build["timings"].items():  # type: ignore[union-attr]
            timings[phase] = timings.get(phase, 0.0) + seconds
    build = {
        **built[largest].build,
        "kernels": shared["kernels"]["stored"],  # type: ignore[index]
        "tasks": sum(len(g.tasks) for g in table),
        "timings": timings,
        "gears": shared,
    }
    size = limits.ITEMSIZE[GEAR_INDEX_DTYPE]
    index = TensorDesc(GEAR_INDEX, GEAR_INDEX_DTYPE, (1,), "ND", "ND", (1,), size, bases[Region.INPUT] + index_at)
    return Model(
        soc_version=built[0].soc_version,
        options=options,
        inputs=top.inputs,
        outputs=top.outputs,
        memory=top.memory,
        streams=top.streams,
        events=top.events,
        kernels=kernels,
        tasks=top.tasks,
        weights=memoryview(bytes(weights)).toreadonly(),
        build=build,
        gears=table,
        gear_index=index,
    )


def _shared_weights(built: Sequence[Model]) -> tuple[bytearray, list[dict[tuple[int, int], int]]]:
    """The weight region holding each distinct weight once, and per gear each weight
    placement's (offset, size) -> its offset there."""
    blob = bytearray()
    stored: dict[bytes, int] = {}
    offsets = []
    for m in built:
        moved: dict[tuple[int, int], int] = {}
        for p in m.memory.placements:
            if p.region is not Region.WEIGHT or (p.offset, p.size) in moved:
                continue
            data = bytes(m.weights[p.offset : p.offset + p.size])
            if data not in stored:
                stored[data] = len(blob)
                blob += data
            moved[(p.offset, p.size)] = stored[data]
        offsets.append(moved)
    return blob, offsets


_KERNEL = re.compile(r"^ascend_kernel\.kernel @(\S+) attributes \{", re.MULTILINE)


def _shared_kernels(built: Sequence[Model]) -> tuple[str, list[dict[str, str]]]:
    """The kernels of every gear, each distinct one once (named as in the first gear that
    has it, `_g<i>` added on a clash), and per gear its kernel names -> the stored ones."""
    stored: dict[str, str] = {}
    taken: set[str] = set()
    texts: list[str] = []
    names = []
    for i, m in enumerate(built):
        starts = [match.start() for match in _KERNEL.finditer(m.kernels)] + [len(m.kernels)]
        renamed: dict[str, str] = {}
        for a, b in itertools.pairwise(starts):
            chunk = m.kernels[a:b]
            name = _KERNEL.match(chunk).group(1)  # type: ignore[union-attr]
            body = chunk.replace(f"@{name} ", "@ ", 1)
            if body not in stored:
                new = name if name not in taken else f"{name}_g{i}"
                stored[body], taken = new, taken | {new}
                texts.append(chunk.replace(f"@{name} ", f"@{new} ", 1))
            renamed[name] = stored[body]
        names.append(renamed)
    return "".join(texts), names


def _gear(m: Model, shapes: GearShapes, bases: dict[Region, int], sizes: dict[Region, int], weights: dict[tuple[int, int], int], kernels: dict[str, str]) -> Gear:
    """Build `m` of one gear moved into the shared layout: placements, ports and task arguments."""
    old = m.memory

    def offset(p: Placement) -> int:
        return weights[(p.offset, p.size)] if p.region is Region.WEIGHT else p.offset

    def arg(a: Arg) -> Arg:
        p = old.placements[a.tensor]
        return Arg(a.tensor, bases[p.region] + offset(p) + a.addr - old.addr(a.tensor), a.size)

    def desc(t: TensorDesc) -> TensorDesc:
        for i, p in enumerate(old.placements):
            if p.region is not Region.WEIGHT and old.addr(i) <= t.addr < old.addr(i) + max(p.size, 1):
                return dataclasses.replace(t, addr=t.addr - old.bases[p.region] + bases[p.region])
        raise ModelError(f"graph port '{t.name}' at {t.addr} lies in no feature-map, input or output buffer")

    def task(t: Task) -> Task:
        changes: dict[str, object] = {}
        for f in dataclasses.fields(t):
            value = getattr(t, f.name)
            if isinstance(value, Arg):
                changes[f.name] = arg(value)
            elif isinstance(value, tuple) and value and isinstance(value[0], Arg):
                changes[f.name] = tuple(arg(a) for a in value)
        if isinstance(getattr(t, "kernel", None), str):
            changes["kernel"] = kernels[t.kernel]  # type: ignore[attr-defined]
        return dataclasses.replace(t, **changes)

    memory = MemoryPlan(
        old.strategy,
        tuple(Placement(p.name, p.region, offset(p), p.size) for p in old.placements),
        dict(bases),
        dict(sizes),
        old.feature_map_minimum,
        old.feature_map_no_reuse,
        dict(old.candidates),
    )
    build = {k: m.build[k] for k in ("kernels", "aicpu_kernels", "tasks", "timings") if k in m.build} | {
        "feature_map_bytes": old.sizes[Region.FEATURE_MAP]
    }
    return Gear(
        dict(shapes),
        tuple(desc(t) for t in m.inputs),
        tuple(desc(t) for t in m.outputs),
        memory,
        m.streams,
        m.events,
        tuple(task(t) for t in m.tasks),
        build,
    )
