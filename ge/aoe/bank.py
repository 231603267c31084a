"""The knowledge base of tuned tilings (AOE's custom repository).

Where: `$TUNE_BANK_PATH`, else `$ASCEND_CACHE_PATH/aoe_data`, else
`~/Ascend/latest/data/aoe/custom`, as CANN places its custom banks. Inside, as
CANN lays out its operator bank, a folder per SoC with a folder per kind of kernel:

    <root>/Ascend310P3/cube/<sha256 of the key>.json
    <root>/Ascend310P3/vector/<sha256 of the key>.json

An entry is one kernel signature's tiling: the key (`lower_to_kernel.bank_key`: the
compiler's version, the SoC, the scope's op types, properties, shapes, dtypes,
formats, impl mode and virtual cores), the tiling, the cycles of the kernel alone
with the analytic and the tuned tiling, and the SHA-256 of all that. Entries are
written to a temporary file in their folder and renamed into place, so that tuners
writing one bank at once (a process per worker, several machines on a shared
folder) leave only whole entries. One that is not JSON, of another format, whose
digest or key does not check (corrupt, truncated, a hash collision, another
compiler's) is ignored with an info line, never loaded, and left where it is.

A compile (`ge.compile`, `ge atc`) takes its tilings from the bank whenever the
SoC's folder has entries, as ATC uses a custom bank that exists.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ge.core.errors import OptionError
from ge.core.files import FileError, published
from passes.lowering.space import CUBE_KEYS, VECTOR_KEYS

log = logging.getLogger("ge")

FORMAT = 1
KINDS = {"cube": CUBE_KEYS, "vector": VECTOR_KEYS}
SUFFIX = ".json"


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
        return sum(len(self.names(kind)) for kind in KINDS)

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

    def store(self, entry: Entry) -> str:
        """Write `entry` whole (a temporary file renamed into place); its path."""
        path = self.path(entry.key, entry.kind)
        payload = entry.payload()
        content = json.dumps({**payload, "sha256": _digest(payload)}, sort_keys=True, indent=1)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with published(path, "w", what="tune bank entry") as f:
                f.write(content + "\n")
        except (OSError, FileError) as e:
            raise OptionError(f"tune bank '{self.root}': cannot write an entry: {e}; give a writable TUNE_BANK_PATH") from None
        self._names.pop(entry.kind, None)
        return path

    def report(self) -> dict[str, object]:
        return {"path": self.folder, "kernels": self.looked, "tuned": self.taken}


def _read(path: str, key: str, kind: str) -> Entry | None:
    """The entry at `path` if it checks (JSON, format, digest, key, tiling), else None, logged."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        log.info("tune bank: ignoring %s: not a readable JSON entry (%s)", path, str(e).splitlines()[0] if str(e) else type(e).__name__)
        return None
    reason = _problem(data, key, kind)
    if reason:
        log.info("tune bank: ignoring %s: %s", path, reason)
        return None
    cycles = data["cycles"]
    return Entry(key, kind, tuple(data["op_types"]), dict(data["tiling"]), float(cycles["analytic"]), float(cycles["tuned"]))


def _problem(data: object, key: str, kind: str) -> str:
    """Why `data` is not a good entry for `key` of `kind` ('' when it is)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return f"not a tune bank entry of format {FORMAT}"
    payload = {k: v for k, v in data.items() if k != "sha256"}
    if data.get("sha256") != _digest(payload):
        return "its content does not match its digest (corrupt or edited)"
    if data.get("key") != key:
        return "it holds another key (another compiler version, or a hash collision)"
    tiling = data.get("tiling")
    if data.get("kind") != kind or not isinstance(tiling, dict) or sorted(tiling) != sorted(KINDS[kind]):
        return f"its tiling is not a {kind} tiling ({', '.join(KINDS[kind])})"
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in tiling.values()):
        return "its tiling's values are not integers"
    cycles = data.get("cycles")
    if not isinstance(cycles, dict) or not all(isinstance(cycles.get(k), (int, float)) for k in ("analytic", "tuned")):
        return "its cycles are missing"
    if not isinstance(data.get("op_types"), list):
        return "its op types are missing"
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
