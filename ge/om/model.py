"""The offline model (`NAME.om`): what a compile produces and the simulator runs.

The file is our own container, not CANN's: a zip holding

    manifest.json   magic, format version, and the entries below
    model.json      SoC, compile options, inputs/outputs, memory plan, streams,
                    events, the task list and build statistics
    kernels.mlir    the kernels, as `ascend_kernel` IR text
    weights.bin     the weight region, byte for byte (each const at its offset)

and sealed: the zip's comment, the file's last bytes, is `ge-om sha256:` and the
SHA-256 of every byte before the digest. The seal covers the zip's own headers
too, so any altered byte is caught, not only those inside an entry.

Writing goes to a temporary file beside the target and is renamed over it only
when complete, so a failed compile leaves no partial `.om`. Reading checks, in
order: a zip (else "not a model file", or "truncated" when only its start is one),
our magic (else "a foreign zip"), a format version this code reads (else
"newer"), then the seal, and fails with an `OmError` naming the file and what is
wrong. `FORMAT_VERSION` goes up whenever the layout changes; a reader accepts
every version up to its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO

from ge.om.memory import MemoryPlan, Region
from ge.om.tasks import Task
from ge.core.errors import ModelError
from ge.core.files import published

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

MAGIC = "ascend-ge-om"
FORMAT_VERSION = 1
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
    def from_json(cls, data: dict) -> TensorDesc:
        return cls(
            data["name"],
            data["dtype"],
            tuple(data["shape"]),
            data["format"],
            data["origin_format"],
            tuple(data["origin_shape"]),
            data["size"],
            data["addr"],
        )


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

    def save(self, path: str | os.PathLike) -> str:
        """Write the model to `path` atomically; returns the path written."""
        return write(self, path)

    def kernel_module(self) -> ModuleOp:
        """The kernels parsed back into IR."""
        from ge.core import ir

        return ir.parse(self.kernels, KERNELS)

    def description(self) -> dict[str, object]:
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
        }


def write(model: Model, path: str | os.PathLike) -> str:
    """Write `model` as a sealed `.om` zip at `path`, whole or not at all (`ge.core.files.published`)."""
    path = os.fspath(path)
    manifest = {"magic": MAGIC, "format_version": FORMAT_VERSION, "entries": list(ENTRIES)}
    with published(path, "w+b", what="model") as f:
        with zipfile.ZipFile(f, "w") as z:
            z.writestr(MANIFEST, json.dumps(manifest, indent=1), zipfile.ZIP_DEFLATED)
            z.writestr(MODEL, json.dumps(model.description(), separators=(",", ":")), zipfile.ZIP_DEFLATED)
            z.writestr(KERNELS, model.kernels, zipfile.ZIP_DEFLATED)
            z.writestr(WEIGHTS, model.weights, zipfile.ZIP_STORED)  # weights barely compress
            z.comment = SEAL + b"0" * DIGEST_CHARS
        size = f.seek(0, os.SEEK_END) - DIGEST_CHARS
        f.seek(0)
        digest = _digest(f, size)
        f.seek(-DIGEST_CHARS, os.SEEK_END)
        f.write(digest.encode())
    return path


def read(path: str | os.PathLike) -> Model:
    """Load a `.om` file, refusing anything truncated, altered, foreign or newer."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        if f.read(len(ZIP_START)) != ZIP_START:
            raise OmError(f"'{path}' is not a .om model file (not a zip container)")
        try:
            with zipfile.ZipFile(f) as z:
                _check_manifest(z, path)
                _check_seal(f, z.comment, path)
                entries = {name: z.read(name) for name in ENTRIES}
        except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError, OSError) as e:
            # damaged headers make zipfile fail in many ways: a bad seek, a bad length, a bad name
            raise OmError(f"'{path}' is truncated or corrupt: {e}") from e
    try:
        return _model(json.loads(entries[MODEL]), entries[KERNELS].decode(), entries[WEIGHTS])
    except (ValueError, KeyError, TypeError) as e:
        raise OmError(f"'{path}': the model description is malformed ({type(e).__name__}: {e})") from e


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
    try:
        manifest = json.loads(z.read(MANIFEST))
    except ValueError as e:
        raise OmError(f"'{path}': {MANIFEST} is not valid JSON ({e})") from e
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


def _model(d: dict, kernels: str, weights: bytes) -> Model:
    memory = MemoryPlan.from_json(d["memory"])
    if len(weights) != memory.sizes[Region.WEIGHT]:
        raise ValueError(f"the weight blob has {len(weights)} bytes, the plan's weight region {memory.sizes[Region.WEIGHT]}")
    return Model(
        soc_version=d["soc_version"],
        options=d["options"],
        inputs=_descs(d["inputs"]),
        outputs=_descs(d["outputs"]),
        memory=memory,
        streams=d["streams"],
        events=d["events"],
        kernels=kernels,
        tasks=tuple(Task.from_json(t) for t in d["tasks"]),
        weights=weights,
        build=d["build"],
    )


def _descs(items: Sequence[dict]) -> tuple[TensorDesc, ...]:
    return tuple(TensorDesc.from_json(t) for t in items)
