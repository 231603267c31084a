"""User-facing errors. Each carries a GE-style code and one sentence that names
what is wrong and what is allowed; the CLI prints it without a traceback."""


class GEError(Exception):
    """An error the user can fix: a bad model, option, file or combination."""

    code = "E19999"

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"[{self.code}] {self.args[0]}"


class ModelError(GEError):
    """The model is malformed, unsupported, or inconsistent (names the node)."""

    code = "E16005"


class InputError(GEError):
    """Inputs given to a graph do not match its Data ops (name, count, dtype or shape)."""

    code = "E10001"


class OptionError(GEError):
    """An option value, option file or option combination is invalid."""

    code = "E10001"


class RunTimeout(GEError):
    """A run on the simulated device exceeded one of its timeouts (op_execute_timeout,
    op_wait_timeout, event_sync_timeout, stream_sync_timeout): names the task and the limit."""

    code = "EZ9999"


class CalibrationError(GEError):
    """A calibration table is missing or malformed (names the file and line), or the
    cost model is asked for a path or instruction it cannot price."""


class DistributedError(GEError):
    """Distributed jobs could not run: the Ray cluster is unreachable, or a job's worker
    died more often than the retries allow (names the jobs)."""
