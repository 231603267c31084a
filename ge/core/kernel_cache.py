"""The kernel compile cache (`--op_compiler_cache_mode`, `--op_compiler_cache_dir`).

CANN keeps the operator binaries it compiled in a disk cache and reuses them for an
operator of the same compile inputs. Here the "binary" is the lowered kernel of one
kernel scope (`passes.lower_to_kernel`): its tiling, block_dim, core type, workspace,
pipe program and compute region, stored as the kernel op's IR text.

Where: `op_compiler_cache_dir`, else `$ASCEND_CACHE_PATH`, else `$HOME/atc_data`;
the entries go to its `kernel_cache/` folder and `op_cache.ini` beside that folder,
where the reference puts it.

Modes, as the reference has them: `enable` reads and fills the cache;
`force` rebuilds every kernel and rewrites its entry; `disable` neither reads nor
writes and touches no directory. The same folder's `model_cache/` keeps whole builds
(`ge.model_cache`), which is what makes a warm compile fast: parsing a kernel entry's
IR text takes longer than building the kernel (benchmarks/kernel_cache.py). CANN
enables the cache by default; here `disable` is the default, because a whole build's
entry is a copy of its `.om` (200 MB for BERT-base), which a user should choose to
keep in their home. The cache is off whatever the mode when
`op_debug_level` is non-zero, or when an `op_debug_config` file has no
`op_debug_list`; with a list, the listed ops (node names, `OpType::Type`) are rebuilt
and left out of the cache, the others use it.

An entry, `<sha256 of the key>.kernel`, is one line of JSON (format, the full key,
the SHA-256 of the body) and the body, the kernel's IR text. The key is the scope's
own (`Scope.key`: SoC, ops, properties, types, impl mode, virtual cores) after the
compiler's version: the package's, xDSL's, and a digest of the files the lowering is
made of (`compiler_version`), so that changing the lowering invalidates every entry.
An entry whose header or digest does not check, or that holds another key (a hash
collision), is logged at info, removed and rebuilt, never loaded. Entries are written
to a temporary file in the folder and renamed into place, so processes compiling
into one folder at once only ever see whole entries.

Ageing (`op_cache.ini`'s `[op_compiler_cache]`, else `ASCEND_MAX_OP_CACHE_SIZE` /
`ASCEND_REMAIN_CACHE_SIZE_RATIO`, else 500 MB and 50%): after a compile, when the
entries exceed max_op_cache_size MB, those unused for more than half an hour go,
oldest first, until remain_cache_size_ratio percent of the maximum is left; -1 turns
ageing off. An entry's modification time records its last use (a hit touches it,
except with -1), because access times are unreliable on relatime/noatime mounts.
A source (the ini file, the environment) counts only if every value it gives is
valid, as the reference says of op_cache.ini. The ini file is written after a
compile, with the limits in effect, when it does not exist.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from pathlib import Path

from ge.core.errors import OptionError
from ge.core.files import FileError, published, read_text

log = logging.getLogger("ge")

FOLDER = "kernel_cache"
INI = "op_cache.ini"
SECTION = "op_compiler_cache"
SUFFIX = ".kernel"
FORMAT = 1
DEFAULT_MAX_MB = 500
DEFAULT_RATIO = 50
IDLE_SECONDS = 30 * 60
"""Entries used within the last half hour are never aged."""
DEBUG_CONFIG_OPTIONS = ("oom", "dump_cce", "dump_loc", "ccec_O0", "ccec_g", "check_flag")


def default_dir(environ: Mapping[str, str] = os.environ) -> str:
    """Where the cache lives when op_compiler_cache_dir is not given."""
    return environ.get("ASCEND_CACHE_PATH") or os.path.join(os.path.expanduser("~"), "atc_data")


# ------------------------------------------------------------------ limits


@dataclass(frozen=True)
class Limits:
    """The ageing limits: max_mb (-1: no ageing) and the percentage kept when ageing."""

    max_mb: int = DEFAULT_MAX_MB
    ratio: int = DEFAULT_RATIO

    @property
    def ageing(self) -> bool:
        return self.max_mb != -1


def _limits_from(values: Mapping[str, tuple[str, str | None]], source: str) -> dict[str, int] | None:
    """The limits a source gives ({field: (its spelling there, text)}), or None (logged)
    when any value it gives is invalid."""
    parsed: dict[str, int] = {}
    for name, (spelling, text) in values.items():
        if text is None or not text.strip():
            continue
        number = int(text) if text.strip().lstrip("-").isdigit() else None
        valid = number is not None and (
            (name == "max_mb" and (number == -1 or number >= 1)) or (name == "ratio" and 1 <= number <= 100)
        )
        if not valid:
            log.info("kernel cache: %s ignored: %s=%s is not valid (sizes: -1 or >= 1 MB, ratio: 1-100)", source, spelling, text)
            return None
        parsed[name] = number  # type: ignore[assignment]
    return parsed


def read_limits(root: str, environ: Mapping[str, str] = os.environ) -> Limits:
    """The limits from `root`/op_cache.ini, else the environment, else the defaults."""
    values: dict[str, int] = {}
    ini = os.path.join(root, INI)
    parser = configparser.ConfigParser()
    try:
        parser.read(ini, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError) as e:
        log.info("kernel cache: %s ignored: %s", ini, str(e).splitlines()[0])
    else:
        if parser.has_section(SECTION):
            section = parser[SECTION]
            from_ini = _limits_from(
                {name: (spelling, section.get(spelling)) for name, spelling in (("max_mb", "max_op_cache_size"), ("ratio", "remain_cache_size_ratio"))},
                ini,
            )
            values.update(from_ini or {})
    from_env = _limits_from(
        {name: (spelling, environ.get(spelling)) for name, spelling in (("max_mb", "ASCEND_MAX_OP_CACHE_SIZE"), ("ratio", "ASCEND_REMAIN_CACHE_SIZE_RATIO"))},
        "the environment",
    )
    for name, value in (from_env or {}).items():
        values.setdefault(name, value)
    return Limits(**values)


# ------------------------------------------------------------------ op_debug_config


@dataclass(frozen=True)
class DebugConfig:
    """An op_debug_config file: its debug options and the ops they are limited to."""

    options: tuple[str, ...]
    ops: tuple[str, ...] | None
    """Node names and `OpType::Type` entries of op_debug_list; None when it is absent."""

    def lists(self, names: Iterable[str], op_types: Iterable[str]) -> bool:
        """True if op_debug_list names one of these nodes or op types."""
        wanted = {o.lower() if o.lower().startswith("optype::") else o for o in self.ops or ()}
        return any(n in wanted for n in names) or any(f"optype::{t.lower()}" in wanted for t in op_types)


def read_debug_config(path: str) -> DebugConfig:
    """Parse `op_debug_config = a,b` and `op_debug_list = Name,OpType::Type` lines."""
    fields: dict[str, tuple[str, ...]] = {}
    for number, line in enumerate(read_text(path, "op_debug_config").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, equals, value = (part.strip() for part in line.partition("="))
        if not equals or name not in ("op_debug_config", "op_debug_list"):
            raise OptionError(
                f"op_debug_config '{path}' line {number}: '{line}' is not allowed; use op_debug_config=... or op_debug_list=..."
            )
        fields[name] = tuple(item.strip() for item in value.split(",") if item.strip())
    unknown = [o for o in fields.get("op_debug_config", ()) if o not in DEBUG_CONFIG_OPTIONS]
    if unknown:
        raise OptionError(f"op_debug_config '{path}': '{unknown[0]}' is not allowed; use {', '.join(DEBUG_CONFIG_OPTIONS)}")
    return DebugConfig(fields.get("op_debug_config", ()), fields.get("op_debug_list"))


# ------------------------------------------------------------------ version


@cache
def compiler_version(sources: tuple[str, ...]) -> str:
    """The package's and xDSL's versions and a digest of the lowering's files (directories
    are read whole), so that any change to what builds a kernel makes a new key."""
    digest = hashlib.sha256()
    for source in sources:
        paths = sorted(Path(source).rglob("*")) if os.path.isdir(source) else [Path(source)]
        for p in paths:
            if p.is_file() and "__pycache__" not in p.parts:
                digest.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return f"ascend-ge {_version('ascend-ge')}, xdsl {_version('xdsl')}, lowering {digest.hexdigest()[:16]}"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


# ------------------------------------------------------------------ the cache


@dataclass
class KernelCache:
    """One compile's view of a cache folder: lookups, stores, and what they found."""

    root: str
    mode: str
    """enable or force (the option table's op_compiler_cache_mode; disable opens no cache)."""
    limits: Limits = field(default_factory=Limits)
    debug: DebugConfig | None = None
    hits: int = 0
    misses: int = 0

    @property
    def folder(self) -> str:
        return os.path.join(self.root, FOLDER)

    @classmethod
    def open(cls, root: str, mode: str, debug: DebugConfig | None = None) -> KernelCache:
        """The cache in `root`, its folder made; a folder that cannot be made or written is refused."""
        folder = os.path.join(root, FOLDER)
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as e:
            raise OptionError(
                f"op_compiler_cache_dir '{root}': cannot create '{folder}' ({e.strerror or e}); "
                "give a writable directory or --op_compiler_cache_mode=disable"
            ) from None
        if not os.access(folder, os.W_OK | os.X_OK):
            raise OptionError(
                f"op_compiler_cache_dir '{root}': '{folder}' is not writable; "
                "give a writable directory or --op_compiler_cache_mode=disable"
            )
        return cls(root, mode, read_limits(root), debug)

    def path(self, key: str) -> str:
        return os.path.join(self.folder, hashlib.sha256(key.encode()).hexdigest() + SUFFIX)

    def listed(self, names: Iterable[str], op_types: Iterable[str]) -> bool:
        """True for a kernel op_debug_list asks for: built anew and kept out of the cache."""
        return self.debug is not None and self.debug.lists(names, op_types)

    def load(self, key: str) -> str | None:
        """The body stored for `key`, or None (a miss); a bad entry is removed."""
        path = self.path(key)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            log.info("kernel cache: %s cannot be read (%s); rebuilding it", path, e.strerror or e)
            return None
        body = _checked(data, key)
        if isinstance(body, Reject):
            self.discard(path, body.reason)
            return None
        if self.limits.ageing:
            touch(path)
        return body

    def discard(self, path: str, reason: str) -> None:
        log.info("kernel cache: discarding %s: %s", path, reason)
        remove(path)

    def store(self, key: str, body: str) -> None:
        """Write the entry for `key` whole, or not at all (a failure is logged, the compile goes on)."""
        data = body.encode()
        header = {"format": FORMAT, "key": key, "sha256": hashlib.sha256(data).hexdigest()}
        content = json.dumps(header, sort_keys=True).encode() + b"\n" + data
        try:
            with published(self.path(key), "wb", what="kernel cache entry") as f:
                f.write(content)
        except (OSError, FileError) as e:
            log.warning("kernel cache: cannot write an entry in %s: %s", self.folder, e)

    def finish(self) -> None:
        """After a compile: write op_cache.ini if there is none, then age the entries."""
        ini = os.path.join(self.root, INI)
        if not os.path.exists(ini):
            text = f"[{SECTION}]\nmax_op_cache_size={self.limits.max_mb}\nremain_cache_size_ratio={self.limits.ratio}\n"
            _create(ini, text.encode())
        if self.limits.ageing:
            age(self.folder, self.limits)

    def report(self) -> dict[str, object]:
        return {"mode": self.mode, "dir": self.folder, "hits": self.hits, "misses": self.misses}


_current: ContextVar[KernelCache | None] = ContextVar("kernel_cache", default=None)


def current() -> KernelCache | None:
    """The cache the lowering uses now: None outside `using` (ge-opt, a pass applied by hand)."""
    return _current.get()


@contextmanager
def using(cache: KernelCache | None) -> Iterator[None]:
    """Lower with `cache`: the compile sets it, so the pass itself stays a pure IR transform."""
    token = _current.set(cache)
    try:
        yield
    finally:
        _current.reset(token)


def for_compile(mode: str, cache_dir: str | None, debug_level: int | None, debug_config: str | None) -> tuple[KernelCache | None, str]:
    """The cache a compile with these options uses, or None and why it is off."""
    if mode == "disable":
        return None, "op_compiler_cache_mode=disable"
    if debug_level:
        return None, f"op_debug_level={debug_level}"
    debug = read_debug_config(debug_config) if debug_config else None
    if debug is not None and debug.ops is None:
        return None, "op_debug_config without op_debug_list"
    return KernelCache.open(cache_dir or default_dir(), mode, debug), ""


@dataclass(frozen=True)
class Reject:
    reason: str


def _checked(data: bytes, key: str) -> str | Reject:
    """The body of an entry whose header, digest and key all check."""
    head, newline, body = data.partition(b"\n")
    if not newline:
        return Reject("truncated: no header line")
    try:
        header = json.loads(head)
    except ValueError:
        return Reject("the header is not JSON")
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        return Reject(f"not an entry of format {FORMAT}")
    if header.get("sha256") != hashlib.sha256(body).hexdigest():
        return Reject("its content does not match its digest (truncated or corrupt)")
    if header.get("key") != key:
        return Reject("it holds another key (a hash collision)")
    try:
        return body.decode()
    except UnicodeDecodeError:
        return Reject("the body is not UTF-8")


def age(folder: str, limits: Limits, now: float | None = None, suffix: str = SUFFIX) -> list[str]:
    """Remove entries idle for over half an hour, oldest first, while the folder is over
    max_mb, until it is down to ratio percent of it; the removed paths. Entries are the
    files ending in `suffix` (kernels; the model cache's are `.om`). Temporary files
    as old are removed whatever the size."""
    now = time.time() if now is None else now
    entries = []
    for entry in os.scandir(folder):
        try:
            st = entry.stat()
        except FileNotFoundError:
            continue
        if entry.name.endswith(suffix):
            entries.append((st.st_mtime, st.st_size, entry.path))
        elif entry.name.endswith(".tmp") and now - st.st_mtime > IDLE_SECONDS:
            remove(entry.path)  # left by a writer that was killed: a write takes milliseconds
    total = sum(size for _, size, _ in entries)
    if total <= limits.max_mb * 2**20:
        return []
    goal = limits.max_mb * 2**20 * limits.ratio // 100
    removed = []
    for used, size, path in sorted(entries):
        if total <= goal or now - used <= IDLE_SECONDS:
            break
        remove(path)
        total -= size
        removed.append(path)
    if removed:
        log.info("kernel cache: aged %d entries out of %s", len(removed), folder)
    return removed


def touch(path: str) -> None:
    """Record a use of an entry (its modification time, which ageing reads)."""
    try:
        os.utime(path)
    except OSError:
        pass  # aged out by another process, or read-only: the hit stands


def remove(path: str) -> None:
    """Remove an entry, if another process has not already."""
    try:
        os.remove(path)
    except FileNotFoundError:
        pass  # another process removed it first


def _create(path: str, content: bytes) -> None:
    """`content` at `path` unless a file is there (a user's, another process's): a hard link never replaces."""
    fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.link(tmp, path)
    except FileExistsError:
        pass
    except OSError as e:
        log.info("kernel cache: cannot write %s: %s", path, e.strerror or e)
    finally:
        remove(tmp)
