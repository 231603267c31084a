"""The offline model (`NAME.om`): what a compile produces and the simulator runs.

The file is our own container, not CANN's: a zip holding

    manifest.json   magic, format version, and the entries below
    model.json      SoC, compile options, inputs/outputs, memory plan, streams,
                    events, the task list and build statistics
    kernels.mlir    the kernels, as `ascend_kernel` IR text
    weights.bin     the weight region, byte for byte (each const at its offset);
                    empty for a model built with external weights (format version
                    2): model.json's `external_weights` then names the directory
                    and each const's `weight_<sha256>` file there, as CANN's
                    FileConstant keeps a weight outside the model

A multi-gear model (format version 3) adds to model.json a gear table, `gears`:
each gear's input shapes, ports, placements, streams, events and tasks in the
model's one memory layout (`ge.om.gears`), checked on read as the model's own are;
from format version 5 also its gear-index input, `gear_index`, which the device's
Case switches on (a multi-gear model of an earlier version has none and is refused).
A fully dynamic or hybrid model (format version 4) adds `dynamic` (`ge.om.dynamic`):
the shape ranges, the optimised graph with its dynamic dims, and its weights' places
in weights.bin; a fully dynamic model has no task list of its own (ports, tasks and
placements empty, the plan its weight region only).

and sealed: the zip's comment, the file's last bytes, is `ge-om sha256:` and the
SHA-256 of every byte before the digest. The seal covers the zip's own headers
too, so any altered byte is caught, not only those inside an entry.

Writing goes through `ge.core.files.published`: the file is delivered only when
complete, so a failed compile leaves no partial `.om`. Reading checks, in
order: a zip (else "not a model file", or "truncated" when only its start is one),
the entries' declared sizes (against `ge.om.limits` and the file's size), our magic
(else "a foreign zip"), a format version this code reads (else "newer"), then the
seal, and fails with an `OmError` naming the file and what is wrong.
`FORMAT_VERSION` goes up whenever the layout changes; a reader accepts every
version up to its own.

The seal catches damage, not malice: whoever alters a file can recompute it. So
the description is then checked field by field before anything is sized by it
(`_model`): types, counts, shapes and dtypes, the memory plan within the SoC's
device memory, every task's stream, event, port, tensor and kernel within what
the model holds. Entries are read through a bounded reader that never takes the
zip's declared sizes on trust; the weights are read only once the plan, checked,
says how many bytes they are. External weight files are read, and checked
against their hash, before the model is returned, so a model whose files are
missing or altered is refused at `read`, not at its first run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO

from ge.core import soc as socs
from ge.core.errors import ModelError
from ge.core.files import published
from ge.om import limits
from ge.om.dynamic import DynamicGraph
from ge.om.gears import GEAR_INDEX, GEAR_INDEX_DTYPE, Gear, case, index_placement
from ge.om.limits import Malformed, integer, items, mapping, text
from ge.om.memory import REGION_ORDER, MemoryPlan, Region
from ge.om.tasks import (
    Arg,
    DeviceCopyTask,
    Direction,
    EventRecordTask,
    EventWaitTask,
    KernelTask,
    LabelGotoTask,
    LabelSetTask,
    LabelSwitchTask,
    MemcpyTask,
    StreamActiveTask,
    Task,
)

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

MAGIC = "ascend-ge-om"
FORMAT_VERSION = 5
"""2: `external_weights`; 3: `gears`; 4: `dynamic`; 5: `gear_index` (older files, without them, are read as before)."""
MANIFEST = "manifest.json"
MODEL = "model.json"
KERNELS = "kernels.mlir"
WEIGHTS = "weights.bin"
ENTRIES = (MODEL, KERNELS, WEIGHTS)
ZIP_START = b"PK\x03\x04"
SEAL = b"ge-om sha256:"
DIGEST_CHARS = 64


class OmError(ModelError):
    """A `.om` file that is not ours, is damaged, or is newer than this reader."""


@dataclass(frozen=True)
class TensorDesc:
    """A graph input or output: its physical type and layout, and where it lives."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    format: str
    origin_format: str
    origin_shape: tuple[int, ...]
    size: int
    addr: int

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "format": self.format,
            "origin_format": self.origin_format,
            "origin_shape": list(self.origin_shape),
            "size": self.size,
            "addr": self.addr,
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> TensorDesc:
        """A port of a `.om` description: a known dtype, shapes of non-negative dims
        (their bytes are checked against the device by `ge.om.model`)."""
        data = mapping(data, where)
        dtype = text(limits.field(data, "dtype", where), f"{where}.dtype")
        if dtype not in limits.ITEMSIZE:
            raise Malformed(f"{where}.dtype is {dtype!r}; allowed: {', '.join(limits.ITEMSIZE)}")
        return cls(
            text(limits.field(data, "name", where), f"{where}.name"),
            dtype,
            _shape(limits.field(data, "shape", where), f"{where}.shape"),
            text(limits.field(data, "format", where), f"{where}.format"),
            text(limits.field(data, "origin_format", where), f"{where}.origin_format"),
            _shape(limits.field(data, "origin_shape", where), f"{where}.origin_shape"),
            integer(limits.field(data, "size", where), f"{where}.size"),
            integer(limits.field(data, "addr", where), f"{where}.addr"),
        )


def _shape(data: object, where: str) -> tuple[int, ...]:
    return tuple(integer(d, f"{where}[{i}]") for i, d in enumerate(items(data, where, limits.RANK)))


@dataclass(frozen=True)
class ExternalWeight:
    """A const's bytes at `offset` in the weight region, kept in the file named by their hash."""

    offset: int
    size: int
    digest: str
    """The SHA-256 of the bytes, hex."""

    @property
    def file(self) -> str:
        return f"weight_{self.digest}"

    def load(self, directory: str) -> bytes:
        """The bytes of this weight's file in `directory`, refused if missing or not the hash's."""
        path = os.path.join(directory, self.file)
        try:
            with open(path, "rb") as f:
                data = f.read(self.size + 1)
        except OSError as e:
            raise Malformed(f"external weight file '{path}' cannot be read: {e.strerror or e}") from None
        if len(data) != self.size or hashlib.sha256(data).hexdigest() != self.digest:
            raise Malformed(f"external weight file '{path}' does not match its hash; it was altered or damaged")
        return data


@dataclass(frozen=True)
class Model:
    """A compiled model: everything the `.om` file holds."""

    soc_version: str
    options: dict[str, object]
    inputs: tuple[TensorDesc, ...]
    outputs: tuple[TensorDesc, ...]
    memory: MemoryPlan
    streams: int
    events: int
    kernels: str
    """The module-level `ascend_kernel.kernel` ops, as IR text."""
    tasks: tuple[Task, ...]
    weights: bytes | memoryview = field(repr=False)
    """The weight region's bytes (`memory.sizes[Region.WEIGHT]` of them; read-only)."""
    build: dict[str, object] = field(default_factory=dict)
    """Statistics of the compile: kernel count and phase timings (seconds)."""
    external: tuple[ExternalWeight, ...] = ()
    """The consts kept in `weight_dir` (then `weights` is empty)."""
    weight_dir: str | None = None
    gears: tuple[Gear, ...] = ()
    """A multi-gear model's gears (`ge.om.gears`); empty for a static model."""
    dynamic: DynamicGraph | None = None
    """A fully dynamic or hybrid model's graph and ranges (`ge.om.dynamic`)."""
    gear_index: TensorDesc | None = None
    """A multi-gear model's gear-index input (`ge.om.gears.GEAR_INDEX`), in the input region after every gear's inputs."""

    def gear(self, index: int) -> Model:
        """Gear `index` as the device runs it: its ports and placements over the model's
        memory layout, weights and kernels, the gear-index input after its inputs (the
        runtime fills it with `index`), and GE's Case over every gear as the task list
        (`ge.om.gears.case`)."""
        g = self.gears[index]
        assert self.gear_index is not None
        arg = Arg(len(g.memory.placements), self.gear_index.addr, self.gear_index.size)
        tasks, streams = case(self.gears, arg)
        memory = dataclasses.replace(g.memory, placements=(*g.memory.placements, index_placement(self.gears, arg)))
        return dataclasses.replace(
            self, inputs=(*g.inputs, self.gear_index), outputs=g.outputs, memory=memory, streams=streams,
            events=max(x.events for x in self.gears), tasks=tasks, gears=(), gear_index=None, dynamic=None,
            build={**self.build, "gear": index},
        )

    def weight_bytes(self) -> bytes | memoryview:
        """The weight region's bytes: `weights`, or assembled from the external files."""
        if not self.external:
            return self.weights
        assert self.weight_dir is not None
        region = bytearray(self.memory.sizes[Region.WEIGHT])
        for w in self.external:
            try:
                region[w.offset : w.offset + w.size] = w.load(self.weight_dir)
            except Malformed as e:
                raise OmError(str(e)) from None
        return region

    def save(self, path: str | os.PathLike) -> str:
        """Write the model to `path` atomically; returns the path written."""
        return write(self, path)

    def kernel_module(self) -> ModuleOp:
        """The kernels parsed back into IR (none for a fully dynamic model: its kernels are
        tiled at run time)."""
        from ge.core import ir

        if not self.kernels:
            from xdsl.dialects.builtin import ModuleOp

            return ModuleOp([])
        return ir.parse(self.kernels, KERNELS)

    def description(self) -> dict[str, object]:
        external = {"dir": self.weight_dir, "files": [[w.offset, w.size, w.digest] for w in self.external]}
        return {
            "format_version": FORMAT_VERSION,
            "soc_version": self.soc_version,
            "options": self.options,
            "inputs": [t.to_json() for t in self.inputs],
            "outputs": [t.to_json() for t in self.outputs],
            "memory": self.memory.to_json(),
            "streams": self.streams,
            "events": self.events,
            "tasks": [t.to_json() for t in self.tasks],
            "build": self.build,
        } | ({"external_weights": external} if self.external else {}) | (
            {"gears": [g.to_json() for g in self.gears], "gear_index": self.gear_index.to_json()} if self.gears and self.gear_index else {}
        ) | ({"dynamic": self.dynamic.to_json()} if self.dynamic is not None else {})


def write(model: Model, path: str | os.PathLike) -> str:
    """Write `model` as a sealed `.om` zip at `path`, whole or not at all (`ge.core.files.published`)."""
    path = os.fspath(path)
    with published(path, "w+b", what="model") as f:
        write_to(model, f)
    return path


def write_to(model: Model, f: BinaryIO) -> None:
    """Write `model` as a sealed `.om` zip into `f`, an empty file open for reading and writing."""
    manifest = {"magic": MAGIC, "format_version": FORMAT_VERSION, "entries": list(ENTRIES)}
    with zipfile.ZipFile(f, "w") as z:
        z.writestr(MANIFEST, json.dumps(manifest, indent=1), zipfile.ZIP_DEFLATED)
        z.writestr(MODEL, json.dumps(model.description(), separators=(",", ":")), zipfile.ZIP_DEFLATED)
        z.writestr(KERNELS, model.kernels, zipfile.ZIP_DEFLATED)
        z.writestr(WEIGHTS, model.weights, zipfile.ZIP_STORED)  # weights barely compress
        z.comment = SEAL + b"0" * DIGEST_CHARS
    seal(f)


def seal(f: BinaryIO) -> None:
    """Write the digest of every byte before it into the last `DIGEST_CHARS` bytes of
    `f`, an open zip whose comment is `SEAL` and that many placeholder bytes."""
    size = f.seek(0, os.SEEK_END) - DIGEST_CHARS
    f.seek(0)
    digest = _digest(f, size)
    f.seek(-DIGEST_CHARS, os.SEEK_END)
    f.write(digest.encode())


def read(path: str | os.PathLike) -> Model:
    """Load a `.om` file, refusing anything truncated, altered, foreign, newer or out of bounds."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        return read_from(f, path)


def read_from(f: BinaryIO, path: str) -> Model:
    """Load the `.om` in `f` (a file or bytes in memory, named `path` in errors), checked as `read` checks."""
    if f.read(len(ZIP_START)) != ZIP_START:
        raise OmError(f"'{path}' is not a .om model file (not a zip container)")
    try:
        with zipfile.ZipFile(f) as z:
            _check_sizes(z, f.seek(0, os.SEEK_END))
            _check_manifest(z, path)
            _check_seal(f, z.comment, path)
            return _model(_json(_entry(z, MODEL, limits.DESCRIPTION_BYTES), MODEL), lambda name, most: _entry(z, name, most))
    except Malformed as e:
        raise OmError(f"'{path}': {e}") from e
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError, OSError) as e:
        # damaged headers make zipfile fail in many ways: a bad seek, a bad length, a bad name
        raise OmError(f"'{path}' is truncated or corrupt: {e}") from e


def _check_sizes(z: zipfile.ZipFile, file_size: int) -> None:
    """Refuse an entry whose declared sizes cannot be (a zip bomb, or headers that lie),
    before anything is decompressed."""
    most = {MANIFEST: limits.MANIFEST_BYTES, MODEL: limits.DESCRIPTION_BYTES, KERNELS: limits.KERNELS_BYTES}
    for info in z.infolist():
        name, size, packed = info.filename, info.file_size, info.compress_size
        if packed > file_size:
            raise Malformed(f"{name} declares {packed} compressed bytes in a {file_size}-byte file")
        if name in most and size > most[name]:
            raise Malformed(f"{name} declares {size} bytes; allowed: at most {most[name]}")
        if size > limits.RATIO_FLOOR and size > limits.COMPRESSION_RATIO * max(packed, 1):
            raise Malformed(
                f"{name} declares {size} bytes from {packed} compressed ({size // max(packed, 1)}:1); "
                f"allowed: at most {limits.COMPRESSION_RATIO}:1 (a zip bomb?)"
            )


def _entry(z: zipfile.ZipFile, name: str, most: int) -> bytes:
    """The bytes of entry `name`, refusing more than `most` whatever its header declares."""
    info = z.getinfo(name)
    if info.file_size > most:
        raise Malformed(f"{name} declares {info.file_size} bytes; allowed: at most {most}")
    with z.open(info) as entry:
        data = entry.read(most + 1)
    if len(data) > most:
        raise Malformed(f"{name} holds more than {most} bytes")
    return data


def _json(data: bytes, name: str) -> object:
    """`data` parsed, refusing nesting deeper than `limits.JSON_DEPTH`."""
    try:
        doc = json.loads(data)
    except RecursionError as e:
        raise Malformed(f"{name} nests deeper than {limits.JSON_DEPTH} levels") from e
    except ValueError as e:
        raise Malformed(f"{name} is not valid JSON ({e})") from e
    if limits.depth(doc) > limits.JSON_DEPTH:
        raise Malformed(f"{name} nests deeper than {limits.JSON_DEPTH} levels")
    return doc


def _digest(f: BinaryIO, size: int) -> str:
    """SHA-256 of the first `size` bytes from `f`'s position."""
    h = hashlib.sha256()
    while size > 0:
        chunk = f.read(min(size, 1 << 24))
        if not chunk:
            break
        h.update(chunk)
        size -= len(chunk)
    return h.hexdigest()


def _check_manifest(z: zipfile.ZipFile, path: str) -> None:
    names = set(z.namelist())
    if MANIFEST not in names:
        raise OmError(f"'{path}' is a zip file but not a .om model: it has no {MANIFEST}")
    manifest = _json(_entry(z, MANIFEST, limits.MANIFEST_BYTES), MANIFEST)
    if not isinstance(manifest, dict) or manifest.get("magic") != MAGIC:
        raise OmError(f"'{path}' is a zip file but not a .om model: its manifest lacks the magic '{MAGIC}'")
    version = manifest.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise OmError(f"'{path}': format version {version!r} is not a positive integer")
    if version > FORMAT_VERSION:
        raise OmError(
            f"'{path}' has .om format version {version}, newer than this ge reads (up to {FORMAT_VERSION}); "
            "recompile the model or update ge"
        )
    if manifest.get("entries") != list(ENTRIES) or not set(ENTRIES) <= names:
        raise OmError(f"'{path}': the manifest or the zip does not hold exactly the entries {', '.join(ENTRIES)}")


def _check_seal(f: BinaryIO, comment: bytes, path: str) -> None:
    if not comment.startswith(SEAL) or len(comment) != len(SEAL) + DIGEST_CHARS:
        raise OmError(f"'{path}' has no SHA-256 seal; it was damaged or not written by ge")
    size = f.seek(0, os.SEEK_END) - DIGEST_CHARS
    f.seek(0)
    if _digest(f, size).encode() != comment[len(SEAL) :] or f.read() != comment[len(SEAL) :]:
        raise OmError(f"'{path}' does not match its SHA-256 seal; the file was altered or damaged")


def _model(d: object, entry: Callable[[str, int], bytes]) -> Model:
    """The model of a description, every field checked before it sizes anything; `entry`
    reads another entry of the file, refusing more than the bytes given."""
    d = mapping(d, MODEL)
    soc = _soc(text(limits.field(d, "soc_version", ""), "soc_version"))
    memory = MemoryPlan.from_json(limits.field(d, "memory", ""))
    _check_plan(memory, soc)
    inputs = _descs(limits.field(d, "inputs", ""), "inputs", memory, soc)
    outputs = _descs(limits.field(d, "outputs", ""), "outputs", memory, soc)
    streams = integer(limits.field(d, "streams", ""), "streams", 1, limits.STREAMS)
    events = integer(limits.field(d, "events", ""), "events", 0, limits.EVENTS)
    tasks = tuple(Task.from_json(t, f"tasks[{i}]") for i, t in enumerate(items(limits.field(d, "tasks", ""), "tasks", limits.TASKS)))
    weight_dir, external = _external(d.get("external_weights"), memory)
    weights = entry(WEIGHTS, 0 if external else memory.sizes[Region.WEIGHT])
    if len(weights) != (0 if external else memory.sizes[Region.WEIGHT]):
        raise Malformed(f"the weight blob has {len(weights)} bytes, the plan's weight region {memory.sizes[Region.WEIGHT]}")
    for w in external:
        w.load(weight_dir)
    kernels = entry(KERNELS, limits.KERNELS_BYTES).decode()
    model = Model(
        soc_version=soc.name,
        options=dict(mapping(limits.field(d, "options", ""), "options")),
        inputs=inputs,
        outputs=outputs,
        memory=memory,
        streams=streams,
        events=events,
        kernels=kernels,
        tasks=tasks,
        weights=weights,
        build=dict(mapping(limits.field(d, "build", ""), "build")),
        external=external,
        weight_dir=weight_dir or None,
    )
    _check_tasks(model)
    dynamic = DynamicGraph.from_json(d["dynamic"], memory.sizes[Region.WEIGHT]) if d.get("dynamic") is not None else None
    if dynamic is not None and external:
        raise Malformed("a dynamic model keeps its weights in weights.bin; it has external_weights")
    gears = _gears(d.get("gears"), model, soc)
    return dataclasses.replace(model, gears=gears, gear_index=_gear_index(d.get("gear_index"), gears, memory, soc), dynamic=dynamic)


def _gear_index(data: object, gears: tuple[Gear, ...], memory: MemoryPlan, soc: socs.SocProfile) -> TensorDesc | None:
    """The gear-index input of a multi-gear model: one int32 in the input region, after every gear's inputs."""
    if not gears:
        if data is not None:
            raise Malformed("gear_index is given, but the model has no gears")
        return None
    if data is None:
        raise Malformed("the model has gears but no gear_index (a multi-gear model written by an older ge); compile it again")
    (desc,) = _descs([data], "gear_index", memory, soc)
    want = (GEAR_INDEX, GEAR_INDEX_DTYPE, (1,), limits.ITEMSIZE[GEAR_INDEX_DTYPE])
    if (desc.name, desc.dtype, desc.origin_shape, desc.size) != want:
        raise Malformed(f"gear_index is {desc.name!r} {desc.dtype}{list(desc.origin_shape)} of {desc.size} bytes; it must be {want[0]!r} {want[1]}[1] of {want[3]} bytes")
    base, end = memory.bases[Region.INPUT], memory.bases[Region.INPUT] + memory.sizes[Region.INPUT]
    taken = max((t.addr + t.size for g in gears for t in g.inputs), default=base)
    if not taken <= desc.addr <= end - desc.size:
        raise Malformed(f"gear_index at {desc.addr} must lie in the input region [{base}, {end}) after every gear's inputs (which end at {taken})")
    return desc


def _gears(data: object, model: Model, soc: socs.SocProfile) -> tuple[Gear, ...]:
    """The gear table, each gear in the model's memory layout and checked as the model is."""
    if data is None:
        return ()
    listed = items(data, "gears", limits.GEARS)
    if len(listed) < 2:
        raise Malformed(f"gears has {len(listed)} gears; a multi-gear model has 2 to {limits.GEARS}")
    names = [t.name for t in model.inputs]
    gears = []
    for i, entry in enumerate(listed):
        at = f"gears[{i}]"
        gear = Gear.from_json(entry, at)
        if gear.memory.bases != model.memory.bases or gear.memory.sizes != model.memory.sizes:
            raise Malformed(f"{at}.memory's regions differ from the model's; every gear uses the model's one layout")
        if list(gear.shapes) != names or [t.name for t in gear.inputs] != names:
            raise Malformed(f"{at} has inputs {list(gear.shapes)}; the model's are {names}")
        _descs([t.to_json() for t in gear.inputs], f"{at}.inputs", gear.memory, soc)
        _descs([t.to_json() for t in gear.outputs], f"{at}.outputs", gear.memory, soc)
        gears.append(gear)
        _check_tasks(dataclasses.replace(model, inputs=gear.inputs, outputs=gear.outputs, memory=gear.memory,
                                         streams=gear.streams, events=gear.events, tasks=gear.tasks), f"{at}.")
    return tuple(gears)


def _external(data: object, memory: MemoryPlan) -> tuple[str, tuple[ExternalWeight, ...]]:
    """The directory and weights of `external_weights`, each within the weight region."""
    if data is None:
        return "", ()
    data = mapping(data, "external_weights")
    directory = text(limits.field(data, "dir", "external_weights"), "external_weights.dir")
    region = memory.sizes[Region.WEIGHT]
    weights = []
    for i, piece in enumerate(items(limits.field(data, "files", "external_weights"), "external_weights.files", limits.TENSORS)):
        at = f"external_weights.files[{i}]"
        if len(items(piece, at, 3)) != 3:
            raise Malformed(f"{at} must be [offset, size, hash]")
        offset, size, digest = piece
        offset = integer(offset, f"{at} offset", 0, region, " (within the weight region)")
        size = integer(size, f"{at} size", 0, region - offset, " (within the weight region)")
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise Malformed(f"{at} hash must be 64 hex digits, not {digest!r}")
        weights.append(ExternalWeight(offset, size, digest))
    return directory, tuple(weights)


def _soc(name: str) -> socs.SocProfile:
    if name not in socs.names():
        raise Malformed(f"soc_version is {name!r}; allowed: {', '.join(socs.names())}")
    return socs.load(name)


def _check_plan(memory: MemoryPlan, soc: socs.SocProfile) -> None:
    """Each region within the plan, the plan within the SoC's device memory."""
    capacity = soc.device_memory_bytes
    device = f" ({soc.name}'s device memory, {capacity / limits.GiB:g} GiB)"
    for r in REGION_ORDER:
        integer(memory.sizes[r], f"memory.regions.{r.value}.size", 0, capacity, device)
    integer(memory.total, "the memory plan's total size", 0, capacity, device)
    for r in REGION_ORDER:
        integer(memory.bases[r], f"memory.regions.{r.value}.base", 0, memory.total - memory.sizes[r], " (the region must lie within the plan)")


def _descs(data: object, where: str, memory: MemoryPlan, soc: socs.SocProfile) -> tuple[TensorDesc, ...]:
    descs = tuple(TensorDesc.from_json(t, f"{where}[{i}]") for i, t in enumerate(items(data, where, limits.PORTS)))
    for i, desc in enumerate(descs):
        at = f"{where}[{i}]"
        for name, shape in (("shape", desc.shape), ("origin_shape", desc.origin_shape)):
            nbytes = limits.ITEMSIZE[desc.dtype]
            for dim in shape:
                nbytes *= dim
            integer(nbytes, f"the bytes of {at}.{name} {list(shape)}", 0, soc.device_memory_bytes, f" ({soc.name}'s device memory, {soc.device_memory_bytes / limits.GiB:g} GiB)")
        _within(desc.addr, desc.size, memory, at)
    return descs


def _check_tasks(model: Model, prefix: str = "") -> None:
    """Every task's stream, event, port, tensor, addresses, kernel and label exist in the
    model (`prefix` names the gear whose tasks they are)."""
    kernels = set(_KERNEL_NAME.findall(model.kernels))
    ports = {Direction.H2D: len(model.inputs), Direction.D2H: len(model.outputs)}
    tensors = len(model.memory.placements)
    labels = _labels(model.tasks)
    for i, task in enumerate(model.tasks):
        at = f"{prefix}tasks[{i}]"
        integer(task.stream, f"{at}.stream", 0, model.streams - 1, f" (the model has {model.streams} streams)")
        args: tuple[Arg, ...] = ()
        if isinstance(task, EventRecordTask | EventWaitTask):
            integer(task.event, f"{at}.event", 0, model.events - 1, f" (the model has {model.events} event ids)")
        elif isinstance(task, MemcpyTask):
            integer(task.port, f"{at}.port", 0, ports[task.direction] - 1, f" (the model has {ports[task.direction]} {'inputs' if task.direction is Direction.H2D else 'outputs'})")
            args = (task.arg,)
        elif isinstance(task, KernelTask):
            if task.kernel not in kernels:
                raise Malformed(f"{at}.kernel is {task.kernel!r}, which {KERNELS} does not hold")
            args = (*task.inputs, *task.outputs, *task.workspace)
        elif isinstance(task, DeviceCopyTask):
            args = (task.src, task.dst)
        elif isinstance(task, StreamActiveTask):
            for j, stream in enumerate(task.streams):
                integer(stream, f"{at}.streams[{j}]", 0, model.streams - 1, f" (the model has {model.streams} streams)")
        elif isinstance(task, LabelGotoTask | LabelSwitchTask):
            targets = (task.label,) if isinstance(task, LabelGotoTask) else task.labels
            for label in targets:
                if label not in labels or labels[label][0] != task.stream:
                    raise Malformed(f"{at} jumps to label {label}, which no LABEL_SET of stream {task.stream} sets")
            args = (task.index,) if isinstance(task, LabelSwitchTask) else ()
        for j, arg in enumerate(args):
            integer(arg.tensor, f"{at} argument {j}'s tensor", 0, tensors - 1, f" (the plan has {tensors} tensors)")
            _within(arg.addr, arg.size, model.memory, f"{at} argument {j}")


def _labels(tasks: tuple[Task, ...]) -> dict[int, tuple[int, int]]:
    """(stream, task index) of each label, set once."""
    labels: dict[int, tuple[int, int]] = {}
    for i, task in enumerate(tasks):
        if isinstance(task, LabelSetTask):
            if task.label in labels:
                raise Malformed(f"tasks[{i}] sets label {task.label} again (tasks[{labels[task.label][1]}] set it)")
            labels[task.label] = (task.stream, i)
    return labels


def _within(addr: int, size: int, memory: MemoryPlan, where: str) -> None:
    if addr + size > memory.total:
        raise Malformed(f"{where} [{addr}, {addr + size}) lies outside the plan's {memory.total} bytes")


_KERNEL_NAME = re.compile(r"^ascend_kernel\.kernel @(\S+) attributes \{", re.MULTILINE)
"""A kernel's symbol name, as `ge.backend.kernels_text` prints it (and `ge.sim.program` reads it)."""
