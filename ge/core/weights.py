"""The weight store: numpy arrays kept outside the IR, addressed by handles.

The IR names a weight with `#ascend_graph.weight<name, digest>`; the arrays live
here. A module points at its store with the module attribute `ascend_graph.weights`,
a key: in this process the key finds the live store; in a new process (a `.mlir`
file read back by `ge-opt`) the key is a path to an `.onnx` or `.npz` file from which
the store is reloaded, and every handle's digest is checked against the bytes.

DESIGN.md places the store in `ge/frontend/`; it lives here instead because the
frontend, the passes, the reference interpreter and the build all read it, and none
of them should import the frontend to do so.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
import zlib
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr

from dialects.ascend_graph import WeightRefAttr
from ge.core.errors import ModelError
from ge.core.files import published

WEIGHTS_ATTR = "ascend_graph.weights"

_live: dict[str, WeightStore] = {}

T = TypeVar("T")
_derivations: ContextVar[dict[Hashable, object] | None] = ContextVar("derivations", default=None)

INLINE_LIMIT = 64
"""Constants with at most this many elements stay inline in the IR; larger ones live
in the weight store (the importer and every pass that makes constants agree)."""


class WeightError(ModelError):
    """A weight is missing, or its bytes do not match its handle."""


def digest(array: np.ndarray) -> str:
    """A 16-hex-digit prefix of the SHA-256 of dtype, shape and bytes (SHA-NI makes it the fastest here)."""
    h = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
    h.update(np.ascontiguousarray(array).reshape(-1).view(np.uint8).data)  # bytes of any dtype, bfloat16 too
    return h.hexdigest()[:16]


class WeightStore:
    """Named arrays, read through handles whose digests they must match."""

    def __init__(self, key: str):
        self.key = key
        self._arrays: dict[str, np.ndarray] = {}
        self._digests: dict[str, str] = {}

    def add(self, name: str, array: np.ndarray) -> WeightRefAttr:
        """Store `array` under `name` (made unique if taken by other bytes)."""
        array = np.require(array, requirements="C")  # ascontiguousarray would make a scalar [1]
        d = digest(array)
        unique, n = name, 1
        while unique in self._arrays and self._digests[unique] != d:
            unique, n = f"{name}_{n}", n + 1
        self._arrays[unique] = array
        self._digests[unique] = d
        return WeightRefAttr(unique, d)

    def get(self, ref: WeightRefAttr) -> np.ndarray:
        name = ref.weight.data
        if name not in self._arrays:
            raise WeightError(f"weight '{name}' is not in the weight store '{self.key}'")
        if self._digests[name] != ref.digest.data:
            raise WeightError(
                f"weight '{name}' in '{self.key}' has digest {self._digests[name]}, "
                f"but the IR expects {ref.digest.data}"
            )
        return self._arrays[name]

    def __contains__(self, name: str) -> bool:
        return name in self._arrays

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self._arrays.values())

    def save(self, path: str) -> None:
        """Write every weight to an `.npz` file that `open_store` can reload."""
        with published(path, "wb", what="weight file") as f:
            np.savez(f, **self._arrays)

    @classmethod
    def load(cls, path: str) -> WeightStore:
        """Reload a store from an `.npz` file or from an ONNX model's tensors."""
        if not os.path.isfile(path):
            raise WeightError(f"weight file '{path}' does not exist")
        if path.endswith(".npz"):
            return cls._load_npz(path)
        return cls._load_onnx(path)

    @classmethod
    def _load_npz(cls, path: str) -> WeightStore:
        store = cls(path)
        try:
            with np.load(path, allow_pickle=False) as data:
                for name in data.files:
                    store.add(name, data[name])
        except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:
            # np.load refuses pickled (object) arrays with a ValueError, as we want
            raise WeightError(f"weight file '{path}' is not a valid .npz of arrays: {e}") from None
        return store

    @classmethod
    def _load_onnx(cls, path: str) -> WeightStore:
        import onnx
        from onnx import numpy_helper

        model = onnx.ModelProto()
        try:
            with open(path, "rb") as f:
                model.ParseFromString(f.read())
        except Exception as e:  # protobuf raises DecodeError, or RuntimeError from its C++ core
            raise WeightError(f"weight file '{path}' is not an ONNX model: {e}") from None
        load_external_data(model, path)
        store = cls(path)
        for init in model.graph.initializer:
            store.add(init.name, numpy_helper.to_array(init))
        for node in model.graph.node:
            for attr in node.attribute:
                if node.op_type == "Constant" and attr.name == "value":
                    store.add(node.output[0], numpy_helper.to_array(attr.t))
        return store


def graph_tensors(graph):
    """Every tensor of an ONNX graph that can hold data (inline or external):
    initializers, sparse ones, node attributes, in subgraphs too."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("sparse_tensor"):
                yield attr.sparse_tensor.values
                yield attr.sparse_tensor.indices
            if attr.HasField("g"):
                yield from graph_tensors(attr.g)
            for g in attr.graphs:
                yield from graph_tensors(g)


def load_external_data(model, path: str | None) -> None:
    """Load an ONNX model's external tensor data, refusing any location outside the
    model's folder (our check, before onnx's loader opens anything)."""
    from onnx.external_data_helper import load_external_data_for_model, uses_external_data

    external = [t for t in graph_tensors(model.graph) if uses_external_data(t)]
    if not external:
        return
    if path is None:
        raise ModelError(
            f"tensor '{external[0].name}' keeps its data in an external file, which needs the "
            "model's location: pass the model's path instead of a ModelProto"
        )
    base = os.path.realpath(os.path.dirname(path))
    for tensor in external:
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        if not location:
            raise ModelError(f"tensor '{tensor.name}' uses external data but names no location")
        resolved = os.path.realpath(os.path.join(base, location))
        if os.path.isabs(location) or os.path.commonpath([base, resolved]) != base:
            raise ModelError(
                f"tensor '{tensor.name}': external data location '{location}' is outside the "
                f"model's directory '{base}'; only relative paths inside it are allowed"
            )
        if not os.path.isfile(resolved):
            raise ModelError(f"tensor '{tensor.name}': external data file '{location}' does not exist in '{base}'")
    try:
        load_external_data_for_model(model, base)
    except Exception as e:
        raise ModelError(f"cannot load the external data of '{path}': {e}") from e


def sidecar(module: ModuleOp, output: str, refs: Iterable[WeightRefAttr]) -> WeightStore:
    """The weights `refs` of `module` as a store beside `output`, named by their content,
    and made the module's store. The IR written to `output` names this file, so runs
    that write one output at once never pair one run's IR with another's weights."""
    refs = sorted(refs, key=lambda r: r.weight.data)
    content = hashlib.sha256("".join(f"{r.weight.data}\0{r.digest.data}\0" for r in refs).encode())
    folder, name = os.path.split(os.path.realpath(output))
    saved = WeightStore(os.path.join(folder, f"{name}.{content.hexdigest()[:16]}.npz"))
    source = store_of(module)
    for ref in refs:
        saved.add(ref.weight.data, source.get(ref))
    attach(module, saved)
    return saved


@contextmanager
def derived_once(memo: dict[Hashable, object] | None = None) -> Iterator[dict[Hashable, object]]:
    """Within it, a weight a pass derives from weights (a folded BatchNorm, a layout, a
    dtype) is computed once for the same inputs (`derived`): a multi-gear compile's gears
    derive the same weights from the same initializers. Yields the memo (its size is
    what was derived), `memo` when given: what an earlier such context derived."""
    token = _derivations.set(memo if memo is not None else {})
    try:
        yield _derivations.get()  # type: ignore[misc]
    finally:
        _derivations.reset(token)


def derived(key: Hashable, make: Callable[[], T]) -> T:
    """`make()`, or within `derived_once` its result for the same `key` (which must name
    everything the result depends on: the store, the source weights' digests, the
    transform and its parameters). A pass computes the same bytes and handle either way."""
    memo = _derivations.get()
    if memo is None:
        return make()
    if key not in memo:
        memo[key] = make()
    return memo[key]  # type: ignore[return-value]


def store_for(key: str) -> WeightStore:
    """The live store under `key`, or a new one: importing a model twice shares its
    store, so weights a pass derived for one import stay visible to the other."""
    return _live.get(key) or WeightStore(key)


def attach(module: ModuleOp, store: WeightStore) -> None:
    """Make `store` the weight store of `module` (live in this process)."""
    _live[store.key] = store
    module.attributes[WEIGHTS_ATTR] = StringAttr(store.key)


def store_of(module: ModuleOp) -> WeightStore:
    """The module's weight store: the live one, else reloaded from its key's file."""
    key = module.attributes.get(WEIGHTS_ATTR)
    if not isinstance(key, StringAttr):
        store = WeightStore(f"<anonymous {id(module):x}>")
        attach(module, store)
        return store
    if key.data not in _live:
        _live[key.data] = WeightStore.load(key.data)
    return _live[key.data]
