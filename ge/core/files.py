"""The files users name: how we write them and how we read their text.

Every output goes through `published`, which writes it first to a private
temporary file and delivers it only when the writer succeeded, so a failure,
Ctrl-C or SIGTERM leaves no partial output and no temporary behind. A regular file
(or a new one) is then replaced by a rename, keeping the old file's mode (a new
one gets the umask's). Anything else the path names is written through, never
replaced: `-` is standard output, a device or a FIFO is opened and receives the
whole content, and a symlink is followed to its target.

`check_output` says before a long compile whether its output can be written at all.
`read_text` reads a user's text file with one clear error for each way it can fail.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from ge.core.errors import OptionError

STDOUT = "-"


class FileError(OptionError):
    """A file named by the user (by an option, mostly) cannot be read or written as asked."""


def _target(path: str) -> str:
    """What writing `path` writes: the end of its symlink chain."""
    return os.path.realpath(path)


def _special(path: str) -> bool:
    """True for an existing non-regular, non-directory file: a device, FIFO or socket."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def regular_output(path: str | os.PathLike | None) -> bool:
    """True if `path` names a regular file, or none yet: something can be written beside it."""
    if path is None or os.fspath(path) == STDOUT:
        return False
    target = _target(os.fspath(path))
    return not os.path.exists(target) or os.path.isfile(target)


def check_output(path: str | os.PathLike, what: str = "output") -> None:
    """Refuse an output that cannot be written, before any work is done for it."""
    path = os.fspath(path)
    if path == STDOUT:
        return
    target = _target(path)
    if os.path.isdir(target):
        raise FileError(f"{what} '{path}' is a directory; name a file")
    if _special(target):
        if not os.access(target, os.W_OK):
            raise FileError(f"{what} '{path}' is not writable")
        return
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise FileError(f"{what} '{path}': directory '{os.path.dirname(path) or '.'}' does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise FileError(f"{what} '{path}': directory '{os.path.dirname(path) or '.'}' is not writable")
    if os.path.exists(target) and not os.access(target, os.W_OK):
        raise FileError(f"{what} '{path}' is not writable")


def check_output_directory(path: str | os.PathLike, what: str = "output directory") -> None:
    """Refuse a directory for outputs that cannot be made or written, before any work."""
    path = os.fspath(path)
    existing = path
    while not os.path.exists(existing):  # made with its parents: the nearest existing one decides
        existing = os.path.dirname(existing) or "."
    if not os.path.isdir(existing):
        raise FileError(f"{what} '{path}': '{existing}' is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise FileError(f"{what} '{path}': '{existing}' is not writable")


def _new_file_mode(existing: str) -> int:
    """The old file's permission bits, or what `open` would give a new file."""
    try:
        return stat.S_IMODE(os.stat(existing).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextmanager
def published(path: str | os.PathLike, mode: str = "w", what: str = "output") -> Iterator[IO]:
    """A new file, opened with `mode` ("w", "wb" or "w+b"), whose content becomes
    `path` only if the block succeeds; a device, FIFO or `-` then receives it whole."""
    path = os.fspath(path)
    check_output(path, what)
    target = None if path == STDOUT else _target(path)
    through = target is None or _special(target)
    folder = None if through else os.path.dirname(target)
    name = "stdout" if target is None else os.path.basename(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    text = {} if "b" in mode else {"encoding": "utf-8", "newline": ""}
    try:
        with os.fdopen(fd, mode, **text) as f:
            yield f
        if through:
            _copy(tmp, target)
        else:
            os.chmod(tmp, _new_file_mode(target))
            os.replace(tmp, target)
    except OSError as e:
        if e.filename not in (None, tmp, target):
            raise
        raise FileError(f"cannot write {what} '{path}': {e.strerror or e}") from e
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _copy(source: str, target: str | None) -> None:
    """Write `source` through to a device, a FIFO, or (for None) standard output."""
    with open(source, "rb") as f:
        if target is None:
            sys.stdout.flush()
            shutil.copyfileobj(f, sys.stdout.buffer)
            sys.stdout.buffer.flush()
            return
        with open(target, "wb") as out:
            shutil.copyfileobj(f, out)


def read_text(path: str | os.PathLike, what: str = "file", limit: int = 1 << 30) -> str:
    """The UTF-8 text of a user's file, or one line saying why it cannot be had."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise FileError(f"{what} '{path}' is a directory, not a file")
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise FileError(f"{what} '{path}' does not exist") from None
    except OSError as e:
        raise FileError(f"{what} '{path}' cannot be read: {e.strerror or e}") from None
    if len(data) > limit:
        raise FileError(f"{what} '{path}' is larger than {limit:,} bytes")
    return decoded(data, path, what)


def decoded(data: bytes, path: str, what: str = "file") -> str:
    """`data` read from `path` as UTF-8 text, or a clear error saying where it is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FileError(f"{what} '{path}' is not UTF-8 text (byte {e.start} is 0x{data[e.start]:02x})") from None
