"""How `ge` and `ge-opt` fail: one line on stderr and exit code 1, never a traceback
unless `--log=debug` (as ATC does). Both commands share this so that their messages
read the same and a user can grep them; command-line mistakes that click or argparse
find (an unknown option, a bad value) read and exit the same way."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import typer
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
    PassFailedException,
    VerifyException,
)

from ge.core.errors import GEError, OptionError

LOG_LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "null": logging.CRITICAL + 10,
}
DEFAULT_LOG = "warning"


def log_level_in(argv: Sequence[str]) -> str:
    """The `--log` value in a command line, read before the full parse so that an
    error in the parse itself is reported at the right level."""
    level = DEFAULT_LOG
    for i, arg in enumerate(argv):
        if arg.startswith("--log="):
            level = arg.split("=", 1)[1]
        elif arg == "--log" and i + 1 < len(argv):
            level = argv[i + 1]
    return level.lower() if level.lower() in LOG_LEVELS else DEFAULT_LOG


class _Formatter(logging.Formatter):
    """`tool: warning: message`, the shape of our error lines."""

    def __init__(self, tool: str):
        super().__init__()
        self.tool = tool

    def format(self, record: logging.LogRecord) -> str:
        line = f"{self.tool}: {record.levelname.lower()}: {record.getMessage()}"
        return f"{line}\n{self.formatException(record.exc_info)}" if record.exc_info else line


def configure_logging(tool: str, level: str) -> None:
    """Send our loggers' records at `level` and above to stderr, prefixed like errors."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(tool))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(LOG_LEVELS[level])


def _flat(text: str) -> str:
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def one_line(exc: BaseException) -> str:
    """The exception as one sentence a user can act on."""
    if isinstance(exc, GEError):
        return _flat(str(exc))
    if isinstance(exc, typer.TyperException):  # click's usage errors, as typer raises them
        ctx = getattr(exc, "ctx", None)
        where = f"; see '{ctx.command_path} --help'" if ctx is not None else ""
        return f"[{OptionError.code}] {_flat(exc.format_message()).rstrip('.')}{where}"
    if isinstance(exc, ArgSpecParseError):  # a -t (or -p) spec: its message spans lines, the text third
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        spec = f"'{lines[2]}' " if len(lines) > 3 else ""
        return f"[{OptionError.code}] {spec}is not a pass or target specification: {lines[-1] if lines else exc}"
    if isinstance(exc, ParseError):
        return f"{exc.span.get_location()}: {_flat(exc.msg)}"
    if isinstance(exc, PassFailedException):
        return f"pass failed: {_flat(str(exc))}"
    if isinstance(exc, VerifyException):
        return f"IR does not verify: {_flat(str(exc))}"
    if isinstance(exc, DiagnosticException):
        return _flat(str(exc))
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.strerror or _flat(str(exc))}: '{exc.filename}'"
    if isinstance(exc, OSError):
        return _flat(str(exc))
    return f"internal error: {type(exc).__name__}: {_flat(str(exc))} (rerun with --log=debug for the traceback)"


class Terminated(BaseException):
    """SIGTERM, raised where the program is, so that cleanup (`finally`, the temporary
    files of `ge.core.files.published`) runs as it does for Ctrl-C."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


@contextmanager
def reporting(tool: str, level: str) -> Iterator[None]:
    """Turn any failure inside into `tool: error: <one line>` and exit code 1; SIGTERM
    and Ctrl-C unwind (cleaning up) and exit 143 and 130."""
    main = threading.current_thread() is threading.main_thread()  # only it may set handlers
    previous = signal.signal(signal.SIGTERM, _terminate) if main else None
    try:
        yield
    except (KeyboardInterrupt, typer.Abort):  # click turns Ctrl-C into Abort
        print(f"{tool}: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except (Exception, ArgSpecParseError) as exc:  # xDSL's pipeline syntax error is a BaseException
        if level == "debug":
            traceback.print_exception(exc, file=sys.stderr)
        print(f"{tool}: error: {one_line(exc)}", file=sys.stderr)
        raise SystemExit(1) from None
    except Terminated:
        print(f"{tool}: terminated", file=sys.stderr)
        raise SystemExit(128 + signal.SIGTERM) from None
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
