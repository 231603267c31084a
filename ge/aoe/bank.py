"""The knowledge base of tuned tilings (AOE's custom repository).

Where: `$TUNE_BANK_PATH`, else `$ASCEND_CACHE_PATH/aoe_data`, else
`~/Ascend/latest/data/aoe/custom`, as CANN places its custom banks. Inside, as
CANN lays out its operator bank, a folder per SoC with a folder per kind of kernel:

    <root>/Ascend310P3/cube/<sha256 of the key>.json
    <root>/Ascend310P3/vector/<sha256 of the key>.json
    <root>/Ascend310P3/attention/<sha256 of the key>.json

An entry is one kernel signature's tiling: the key (`lower_to_kernel.bank_key`: the
compiler's version, the SoC, the scope's op types, properties, shapes, dtypes,
formats, impl mode and virtual cores), the tiling (format 2: a cube tiling's keys
and any of the program's knobs, `space.CUBE_KNOBS`; an attention kernel's phases),
the cycles of the kernel alone with the analytic and the tuned tiling, and the
SHA-256 of all that. Entries are
written to a temporary file in their folder and renamed into place, so that tuners
writing one bank at once (a process per worker, several machines on a shared
folder) leave only whole entries. One that is not JSON, of another format, whose
digest or key does not check (corrupt, truncated, a hash collision, another
compiler's) is ignored with an info line, never loaded, and left where it is.

Subgraph tuning's result, the fusion passes to close for one model, is a graph entry
(`<root>/<soc>/graph/<sha256 of the key>.json`, as CANN keeps a graph bank beside the
operator bank): its key is the compiler's version (every file of `passes` and
`dialects`), the SoC, the SHA-256 of the ONNX file and the compile options that shape
the graph; checked and written as a kernel's entry is.

A compile (`ge.compile`, `ge atc`) takes its tilings from the bank whenever the
SoC's folder has entries, as ATC uses a custom bank that exists, and its fusion
switches from the model's graph entry when it has one and is given no
`fusion_switch_file`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

import dialects
import passes
from ge.core import kernel_cache
from ge.core.errors import OptionError
from ge.core.files import FileError, published
from ge.core.options import CompileOptions
from passes.lowering.space import (
    CUBE_KEYS,
    CUBE_KNOBS,
    SOFTMAX,
    VECTOR_KEYS,
    well_formed,
)

log = logging.getLogger("ge")

FORMAT = 2
"""2: a cube tiling may hold the program's knobs (`space.CUBE_KNOBS`), and attention kernels have entries."""
KINDS = {
    "cube": f"{', '.join(CUBE_KEYS)}, any of {', '.join(CUBE_KNOBS)}",
    "vector": ", ".join(VECTOR_KEYS),
    "attention": f"each matmul phase's cube keys prefixed by its name, and {SOFTMAX}",
}
"""The kinds of kernel entries, with the keys their tilings hold."""
GRAPH = "graph"
SUFFIX = ".json"
NOT_GRAPH_OPTIONS = frozenset({"fusion_switch_file", "export_compile_stat", "op_compiler_cache_mode", "op_compiler_cache_dir", "debug_dir", "session_id", "graph_id"})
"""Compile options that do not change the optimised graph, left out of a graph key."""


def default_root(environ: Mapping[str, str] = os.environ) -> str:
    """The bank's root: TUNE_BANK_PATH, else ASCEND_CACHE_PATH's aoe_data, else under the home."""
    if environ.get("TUNE_BANK_PATH"):
        return environ["TUNE_BANK_PATH"]
    if environ.get("ASCEND_CACHE_PATH"):
        return os.path.join(environ["ASCEND_CACHE_PATH"], "aoe_data")
    return os.path.join(os.path.expanduser("~"), "Ascend", "latest", "data", "aoe", "custom")


@dataclass(frozen=True)
class Entry:
    """One tuned kernel: its kind (cube or vector), tiling and cycles alone (analytic, tuned)."""

    key: str
    kind: str
    op_types: tuple[str, ...]
    tiling: dict[str, int]
    analytic_cycles: float
    tuned_cycles: float

    def payload(self) -> dict[str, object]:
        return {
            "format": FORMAT, "key": self.key, "kind": self.kind, "op_types": list(self.op_types), "tiling": self.tiling,
            "cycles": {"analytic": self.analytic_cycles, "tuned": self.tuned_cycles},
        }


def _digest(payload: Mapping[str, object]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def graph_key(model: str | os.PathLike, options: CompileOptions) -> str:
    """What subgraph tuning's result for `model` compiled with `options` is stored under."""
    with open(model, "rb") as f:
        content = hashlib.file_digest(f, "sha256").hexdigest()
    shaping = {k: v for k, v in sorted(asdict(options).items()) if k not in NOT_GRAPH_OPTIONS}
    version = kernel_cache.compiler_version((os.path.dirname(passes.__file__), os.path.dirname(dialects.__file__)))
    return f"{version}\nmodel {content}\noptions {json.dumps(shaping, sort_keys=True, default=str)}"


@dataclass(frozen=True)
class GraphEntry:
    """One model's tuned fusion switches: the passes to close, and the latency (us) before and after."""

    key: str
    closed: tuple[str, ...]
    before_us: float
    after_us: float

    def payload(self) -> dict[str, object]:
        return {"format": FORMAT, "key": self.key, "kind": GRAPH, "closed": list(self.closed), "latency_us": {"before": self.before_us, "after": self.after_us}}


@dataclass
class Bank:
    """The bank's folder for one SoC: lookups (counted, for the compile's summary) and stores."""

    root: str
    soc: str
    looked: int = 0
    taken: int = 0
    _names: dict[str, set[str]] = field(default_factory=dict, repr=False)

    @property
    def folder(self) -> str:
        return os.path.join(self.root, self.soc)

    def path(self, key: str, kind: str) -> str:
        return os.path.join(self.folder, kind, hashlib.sha256(key.encode()).hexdigest() + SUFFIX)

    def names(self, kind: str) -> set[str]:
        """The entry files of a kind, listed once per bank (a compile's lookups)."""
        if kind not in self._names:
            folder = os.path.join(self.folder, kind)
            self._names[kind] = {n for n in os.listdir(folder) if n.endswith(SUFFIX)} if os.path.isdir(folder) else set()
        return self._names[kind]

    def __len__(self) -> int:
        return sum(len(self.names(kind)) for kind in (*KINDS, GRAPH))

    def graph(self, key: str) -> GraphEntry | None:
        """The graph entry stored for `key`, or None; a bad one is logged and ignored."""
        path = self.path(key, GRAPH)
        if os.path.basename(path) not in self.names(GRAPH):
            return None
        data = _load(path)
        reason = "" if data is None else _graph_problem(data, key)
        if data is None or reason:
            if reason:
                log.info("tune bank: ignoring %s: %s", path, reason)
            return None
        latency = data["latency_us"]
        return GraphEntry(key, tuple(data["closed"]), float(latency["before"]), float(latency["after"]))

    def entry(self, key: str) -> Entry | None:
        """The entry stored for `key`, or None; a bad one is logged and ignored."""
        for kind in KINDS:
            path = self.path(key, kind)
            if os.path.basename(path) in self.names(kind):
                return _read(path, key, kind)
        return None

    def lookup(self, key: str) -> dict[str, int] | None:
        """The tuned tiling for `key` (what the lowering asks), counting lookups and hits."""
        self.looked += 1
        found = self.entry(key)
        if found is None:
            return None
        self.taken += 1
        return found.tiling

    def store(self, entry: Entry | GraphEntry) -> str:
        """Write `entry` whole (a temporary file renamed into place); its path."""
        kind = GRAPH if isinstance(entry, GraphEntry) else entry.kind
        path = self.path(entry.key, kind)
        payload = entry.payload()
        content = json.dumps({**payload, "sha256": _digest(payload)}, sort_keys=True, indent=1)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with published(path, "w", what="tune bank entry") as f:
                f.write(content + "\n")
        except (OSError, FileError) as e:
            raise OptionError(f"tune bank '{self.root}': cannot write an entry: {e}; give a writable TUNE_BANK_PATH") from None
        self._names.pop(kind, None)
        return path

    def report(self) -> dict[str, object]:
        return {"path": self.folder, "kernels": self.looked, "tuned": self.taken}


def _load(path: str) -> object | None:
    """The JSON at `path`, or None (logged) when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        log.info("tune bank: ignoring %s: not a readable JSON entry (%s)", path, str(e).splitlines()[0] if str(e) else type(e).__name__)
        return None


def _read(path: str, key: str, kind: str) -> Entry | None:
    """The entry at `path` if it checks (JSON, format, digest, key, tiling), else None, logged."""
    data = _load(path)
    if data is None:
        return None
    reason = _problem(data, key, kind)
    if reason:
        log.info("tune bank: ignoring %s: %s", path, reason)
        return None
    cycles = data["cycles"]
    return Entry(key, kind, tuple(data["op_types"]), dict(data["tiling"]), float(cycles["analytic"]), float(cycles["tuned"]))


def _problem(data: object, key: str, kind: str) -> str:
    """Why `data` is not a good entry for `key` of `kind` ('' when it is)."""
    reason = _checked(data, key)
    if reason:
        return reason
    assert isinstance(data, dict)
    tiling = data.get("tiling")
    if data.get("kind") != kind or not isinstance(tiling, dict) or not well_formed(kind, tiling):
        return f"its tiling is not a {kind} tiling ({KINDS[kind]})"
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in tiling.values()):
        return "its tiling's values are not integers"
    cycles = data.get("cycles")
    if not isinstance(cycles, dict) or not all(isinstance(cycles.get(k), (int, float)) for k in ("analytic", "tuned")):
        return "its cycles are missing"
    if not isinstance(data.get("op_types"), list):
        return "its op types are missing"
    return ""


def _checked(data: object, key: str) -> str:
    """Why `data` is not a whole entry of this format for `key` ('' when it is)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return f"not a tune bank entry of format {FORMAT}"
    if data.get("sha256") != _digest({k: v for k, v in data.items() if k != "sha256"}):
        return "its content does not match its digest (corrupt or edited)"
    if data.get("key") != key:
        return "it holds another key (another compiler version, or a hash collision)"
    return ""


def _graph_problem(data: object, key: str) -> str:
    """Why `data` is not a good graph entry for `key` ('' when it is)."""
    reason = _checked(data, key)
    if reason:
        return reason
    assert isinstance(data, dict)
    closed, latency = data.get("closed"), data.get("latency_us")
    if data.get("kind") != GRAPH or not isinstance(closed, list) or not all(isinstance(c, str) for c in closed):
        return "its closed passes are not a list of names"
    if not isinstance(latency, dict) or not all(isinstance(latency.get(k), (int, float)) for k in ("before", "after")):
        return "its latencies are missing"
    return ""


def for_compile(soc: str, environ: Mapping[str, str] = os.environ) -> Bank | None:
    """The bank a compile for `soc` uses: the root's folder for the SoC when it has entries."""
    bank = Bank(default_root(environ), soc)
    return bank if len(bank) else None


def for_tuning(soc: str, root: str | None = None, environ: Mapping[str, str] = os.environ) -> Bank:
    """The bank a tuner writes: `root`, else the default's; TUNE_BANK_PATH must be a
    writable folder, as CANN requires; the default is created."""
    explicit = root or environ.get("TUNE_BANK_PATH")
    folder = explicit or default_root(environ)
    if explicit and not os.path.isdir(explicit):
        raise OptionError(f"TUNE_BANK_PATH '{explicit}' is not a directory; create it or unset TUNE_BANK_PATH to use {default_root({})}")
    if explicit and not os.access(explicit, os.W_OK | os.X_OK):
        raise OptionError(f"TUNE_BANK_PATH '{explicit}' is not writable; give a folder you can write")
    return Bank(folder, soc)
