"""The model cache: a whole build kept in the compile cache, for a warm `ge atc`.

The kernel cache (`ge.core.kernel_cache`) saves only the lowering, 10-20 % of a
compile (benchmarks/kernel_cache.py): import, constant folding, precision and format
selection and the build run again, and a warm `ge atc` was no faster than a cold
one. CANN's ATC has no model-level cache, but a model's build is a pure function of
its inputs, so when every one of them is the same the `.om` it made is the answer:
the entry `<sha256 of the key>.om` in the cache's `model_cache/` folder beside
`kernel_cache/`, used and aged as the kernel entries are (op_compiler_cache_mode
enable reads and fills it, force rebuilds and rewrites it, disable touches nothing;
op_cache.ini's limits apply to each folder).

The key is everything the build reads: the compiler's version (a digest of every
source file of `ge`, `passes` and `dialects`, so any change to the engine misses, and
the versions of xDSL, onnx, numpy and ml_dtypes),
the ONNX file's SHA-256, every compile option but the cache's own and debug_dir
(`NOT_RECORDED`), and the SHA-256 of each option that names a file (switch file,
precision lists, ...). External data files are found when the entry is stored (the
ONNX file is read then anyway) and recorded in the entry with their digests; a hit
checks them again, so a changed data file misses.

The cache is not used (the kernel cache still is) when the build does more than
make a model: DUMP_GE_GRAPH dumps, an op_debug_config listing ops to debug, pass
plug-ins (code outside the compiler's version). fusion_result.json is not such a
side effect: the entry keeps its compile's document and a hit writes it as the
compile would.

An entry is one line of JSON (format, the full key, the external data files, the
fusion_result.json document) and the sealed `.om` bytes. The seal is checked when
the entry is read (`ge.om.read_from`): a truncated, corrupt or foreign entry is
logged at info, removed and rebuilt, never loaded. Entries are written by rename.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import os
from dataclasses import dataclass
from importlib import metadata

import dialects
import ge
import passes
from ge.core import kernel_cache
from ge.core.files import FileError, published
from ge.core.kernel_cache import KernelCache
from ge.core.options import NOT_RECORDED, CompileOptions
from ge.om import Model, OmError
from ge.om.model import read_from, write_to

log = logging.getLogger("ge")

FOLDER = "model_cache"
SUFFIX = ".om"
FORMAT = 1
SOURCES = tuple(os.path.dirname(p.__file__) for p in (ge, passes, dialects))  # type: ignore[arg-type]
"""Everything a build is made from: a change to any file here makes new keys."""
READERS = ("onnx", "numpy", "ml_dtypes")
"""The packages besides xDSL whose version can change a build: the ONNX reader and its
version converter (opsets 7-10), constant folding's arithmetic."""


@dataclass(frozen=True)
class Hit:
    """A build taken from the cache: the model and the fusion_result.json document its compile recorded."""

    model: Model
    fusion_result: dict[str, object]


@dataclass
class ModelCache:
    """The model entries of one compile cache, for one compile."""

    cache: KernelCache
    key: str
    model_path: str

    @property
    def folder(self) -> str:
        return os.path.join(self.cache.root, FOLDER)

    @property
    def path(self) -> str:
        return os.path.join(self.folder, hashlib.sha256(self.key.encode()).hexdigest() + SUFFIX)

    def load(self) -> Hit | None:
        """The build stored for the key, or None (a miss, or a bad entry, removed)."""
        if self.cache.mode == "force":
            return None
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            log.info("model cache: %s cannot be read (%s); rebuilding it", self.path, e.strerror or e)
            return None
        head, newline, body = data.partition(b"\n")
        try:
            header = json.loads(head) if newline else None
        except ValueError:
            header = None
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            self._discard(f"not an entry of format {FORMAT} (truncated or corrupt)")
            return None
        if header.get("key") != self.key:
            self._discard("it holds another key (a hash collision)")
            return None
        changed = [name for name, digest in header.get("depends", []) if _file_digest(self._beside(name)) != digest]
        if changed:
            log.info("model cache: external data %s changed since %s was stored; rebuilding it", ", ".join(changed), self.path)
            return None
        try:
            model = read_from(io.BytesIO(body), self.path)
        except OmError as e:
            self._discard(str(e))
            return None
        if self.cache.limits.ageing:
            kernel_cache.touch(self.path)
        return Hit(model, header.get("fusion_result") or {})

    def store(self, model: Model, fusion_result: dict[str, object]) -> None:
        """Write the entry for the key whole, or not at all (a failure is logged, the compile stands)."""
        header = {"format": FORMAT, "key": self.key, "depends": _external_data(self.model_path), "fusion_result": fusion_result}
        body = io.BytesIO()
        write_to(model, body)
        try:
            os.makedirs(self.folder, exist_ok=True)
            with published(self.path, "wb", what="model cache entry") as f:
                f.write(json.dumps(header, sort_keys=True).encode() + b"\n")
                f.write(body.getbuffer())
        except (OSError, FileError) as e:
            log.warning("model cache: cannot write an entry in %s: %s", self.folder, e)

    def finish(self) -> None:
        """After a compile: age the model entries by the cache's limits."""
        if self.cache.limits.ageing and os.path.isdir(self.folder):
            kernel_cache.age(self.folder, self.cache.limits, suffix=SUFFIX)

    def _discard(self, reason: str) -> None:
        log.info("model cache: discarding %s: %s", self.path, reason)
        kernel_cache.remove(self.path)

    def _beside(self, name: str) -> str:
        return os.path.join(os.path.dirname(os.path.abspath(self.model_path)), name)


def for_compile(cache: KernelCache | None, model: object, options: CompileOptions) -> tuple[ModelCache | None, str]:
    """The model cache of a compile, or None and why the whole build cannot be reused."""
    from passes.registry import plugin_passes

    if cache is None:
        return None, "the kernel cache is off"
    if not isinstance(model, (str, os.PathLike)):
        return None, "the model is an imported module, not a file"
    if os.environ.get("DUMP_GE_GRAPH"):
        return None, "DUMP_GE_GRAPH dumps the graphs of the compile"
    if cache.debug is not None:
        return None, "op_debug_config lists ops to debug"
    plugins = plugin_passes()
    if plugins:
        return None, f"pass plug-ins are loaded ({', '.join(plugins)})"
    return ModelCache(cache, build_key(os.fspath(model), options), os.fspath(model)), ""


def build_key(model_path: str, options: CompileOptions) -> str:
    """Everything the build of `model_path` under `options` reads, as text."""
    values = {f.name: getattr(options, f.name) for f in dataclasses.fields(options) if f.name not in NOT_RECORDED}
    files = {name: _file_digest(value) for name, value in sorted(values.items()) if isinstance(value, str) and os.path.isfile(value)}
    return "\n".join([
        f"model cache format {FORMAT}",
        kernel_cache.compiler_version(SOURCES),
        ", ".join(f"{name} {_version(name)}" for name in READERS),
        f"onnx {_file_digest(model_path)}",
        f"options {json.dumps(values, sort_keys=True, default=repr)}",
        f"option files {json.dumps(files, sort_keys=True)}",
    ])  # fmt: skip


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def _file_digest(path: str) -> str | None:
    """The SHA-256 of a file's bytes, None if it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 24):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def _external_data(model_path: str) -> list[tuple[str, str | None]]:
    """The external data files of the ONNX model (relative to its folder) with their digests."""
    import onnx
    from onnx.external_data_helper import uses_external_data

    from ge.core.weights import graph_tensors

    proto = onnx.load(model_path, load_external_data=False)
    names = sorted({
        e.value for t in graph_tensors(proto.graph) if uses_external_data(t) for e in t.external_data if e.key == "location"
    })  # fmt: skip
    folder = os.path.dirname(os.path.abspath(model_path))
    return [(name, _file_digest(os.path.join(folder, name))) for name in names]
