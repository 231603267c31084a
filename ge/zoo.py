"""Model-zoo compiles (`ge zoo models.toml`): models x SoCs x option sets, each compile
a job on a `ge.distributed` backend, each `.om` written by the caller.

The file, every key checked (an unknown one is refused, naming what is allowed):

    socs = ["Ascend310P3", "Ascend910B1"]      # every model is compiled for each

    [option_sets]                              # named sets of ATC options; each model
    default = {}                               # is compiled with each set (default:
    mixed = { precision_mode = "allow_mix_precision" }   # one empty set, "default")

    [[models]]
    path = "models/resnet50.onnx"              # relative to this file
    name = "resnet50"                          # default: the file's stem
    options = { input_shape = "x:1,3,224,224" }   # ATC options of every compile of it
    socs = ["Ascend310P3"]                     # default: the top-level socs
    option_sets = ["default"]                  # default: every set

Paths (the model, and the ATC options naming a file or folder) are relative to the
TOML file. Every compile's options are checked as `ge atc` checks them before any
compile starts. A job gets an `Entry` (plain data: the model's absolute path, the SoC,
the options) and returns an `Outcome`: the `.om` as bytes, its kernel count, its
simulated latency (timing only) and compile time, or the error that stopped it. The
`.om` travels back, so that on a cluster only the models need to be visible on
every node (a shared folder); the driver writes the outputs, as `<output>/<model>/<soc>/<set>.om`.
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ge.core import soc
from ge.core.errors import GEError, OptionError
from ge.core.files import published
from ge.core.options import CompileOptions
from ge.distributed import Backend

TOP_KEYS = ("socs", "option_sets", "models")
MODEL_KEYS = ("path", "name", "options", "socs", "option_sets")
PATH_OPTIONS = (
    "fusion_switch_file", "modify_mixlist", "keep_dtype", "customize_dtypes", "op_precision_mode", "op_debug_config",
    "op_compiler_cache_dir", "debug_dir",
)
"""The ATC options that name a file or folder: relative to the TOML file in a zoo."""
NOT_IN_ZOO = {"soc_version": "give the SoCs in 'socs'"}
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
DEFAULT_SET = "default"


@dataclass(frozen=True)
class Entry:
    """One compile of the zoo: plain data, so that it travels to any worker."""

    model: str
    path: str
    soc: str
    option_set: str
    options: dict[str, object]

    @property
    def om(self) -> Path:
        """Where its `.om` goes under the output folder."""
        return Path(self.model) / self.soc / f"{self.option_set}.om"

    @property
    def described(self) -> str:
        """The option set and its options, for the summary."""
        detail = ", ".join(f"{k}={Path(str(v)).name if k in PATH_OPTIONS else v}" for k, v in self.options.items())
        return f"{self.option_set} ({detail})" if detail else self.option_set


@dataclass(frozen=True)
class Outcome:
    """What one compile made, or why it failed."""

    seconds: float
    kernels: int | None = None
    latency_us: float | None = None
    om: bytes | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def read(path: str | os.PathLike) -> list[Entry]:
    """The compiles a zoo file lists, every option checked; an error names the key."""
    source = Path(path)
    try:
        with open(source, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise OptionError(f"{source}: not valid TOML: {exc}") from None
    _known(data, TOP_KEYS, f"{source}", "top-level key")
    where = source.parent
    socs = _socs(data.get("socs"), f"{source}: socs")
    sets = _option_sets(data.get("option_sets", {DEFAULT_SET: {}}), f"{source}: option_sets", where)
    models = data.get("models")
    if not isinstance(models, list) or not models:
        raise OptionError(f"{source}: 'models' must be a non-empty array of tables ([[models]] with at least 'path')")
    entries: list[Entry] = []
    names: dict[str, int] = {}
    for i, model in enumerate(models):
        key = f"{source}: models[{i}]"
        if not isinstance(model, dict):
            raise OptionError(f"{key} must be a table with at least 'path'")
        name = _model(model, key, where, names, i)
        entries += _entries(model, key, name, where, socs, sets)
    return entries


def _known(table: Mapping[str, object], allowed: tuple[str, ...], where: str, what: str) -> None:
    for key in table:
        if key not in allowed:
            raise OptionError(f"{where}: unknown {what} '{key}'; allowed: {', '.join(allowed)}")


def _socs(value: object, key: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise OptionError(f"{key} must be a non-empty list of SoC names, e.g. [\"{soc.names()[0]}\"]")
    for name in value:
        if name not in soc.names():
            raise OptionError(f"{key}: unknown SoC '{name}'; allowed: {', '.join(soc.names())}")
    return value


def _option_sets(value: object, key: str, where: Path) -> dict[str, dict[str, object]]:
    if not isinstance(value, dict) or not value:
        raise OptionError(f"{key} must be a table of named option tables, e.g. default = {{}}")
    sets = {}
    for name, options in value.items():
        if not NAME.fullmatch(name):
            raise OptionError(f"{key}: set name '{name}' must be letters, digits, '_', '.' or '-' (it names the .om file)")
        sets[name] = _options(options, f"{key}.{name}", where)
    return sets


def _options(value: object, key: str, where: Path) -> dict[str, object]:
    if not isinstance(value, dict):
        raise OptionError(f"{key} must be a table of ATC options (name = value)")
    for name in value:
        if name in NOT_IN_ZOO:
            raise OptionError(f"{key}: '{name}' is not allowed in a zoo; {NOT_IN_ZOO[name]}")
    return {name: _resolved(v, where) if name in PATH_OPTIONS and isinstance(v, str) else v for name, v in value.items()}


def _resolved(value: str, where: Path) -> str:
    return str((where / Path(value).expanduser()).resolve())


def _model(model: dict[str, object], key: str, where: Path, names: dict[str, int], i: int) -> str:
    _known(model, MODEL_KEYS, key, "model key")
    path = model.get("path")
    if not isinstance(path, str):
        raise OptionError(f"{key}: 'path' (the ONNX model, relative to the zoo file) is required and must be a string")
    if not Path(_resolved(path, where)).is_file():
        raise OptionError(f"{key}: path '{path}' is not a file (looked for {_resolved(path, where)})")
    name = model.get("name", Path(path).stem)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise OptionError(f"{key}: name {name!r} must be letters, digits, '_', '.' or '-' (it names the output folder)")
    if name in names:
        raise OptionError(f"{key}: name '{name}' is models[{names[name]}]'s too; give each model its own 'name'")
    names[name] = i
    return name


def _entries(
    model: dict[str, object], key: str, name: str, where: Path, socs: list[str] | None, sets: dict[str, dict[str, object]]
) -> list[Entry]:
    own_socs = _socs(model.get("socs"), f"{key}.socs") or socs
    if own_socs is None:
        raise OptionError(f"{key}: no SoCs; give 'socs' at the top of the file or in the model")
    chosen = model.get("option_sets", list(sets))
    if not isinstance(chosen, list) or not chosen or not all(isinstance(s, str) for s in chosen):
        raise OptionError(f"{key}.option_sets must be a non-empty list of set names; defined: {', '.join(sets)}")
    base = _options(model.get("options", {}), f"{key}.options", where)
    path = _resolved(str(model["path"]), where)
    entries = []
    for set_name in chosen:
        if set_name not in sets:
            raise OptionError(f"{key}.option_sets: unknown set '{set_name}'; defined in option_sets: {', '.join(sets)}")
        both = sorted(set(base) & set(sets[set_name]))
        if both:
            raise OptionError(f"{key}: {', '.join(both)} given in its options and in option_sets.{set_name}; give each option once")
        options = {**base, **sets[set_name]}
        for soc_name in own_socs:
            try:
                CompileOptions.from_flags(**options, soc_version=soc_name)
            except OptionError as exc:
                raise OptionError(f"{key} ({name}) with option_sets.{set_name} for {soc_name}: {exc.args[0]}") from None
            entries.append(Entry(name, path, soc_name, set_name, options))
    return entries


def compile_entry(entry: Entry) -> Outcome:
    """The job: compile one entry, time it on the simulator (timing only), and return
    the `.om` bytes; an error becomes the outcome's message so the zoo goes on."""
    import ge
    from ge.om.model import write_to

    started = time.perf_counter()
    try:
        model = ge.compile(entry.path, {**entry.options, "soc_version": entry.soc})
        seconds = time.perf_counter() - started
        latency = ge.Session(ge.RunConfig(timing_only=True)).run(model).latency_us
        buffer = io.BytesIO()
        write_to(model, buffer)
    except GEError as exc:
        return Outcome(time.perf_counter() - started, error=str(exc))
    except Exception as exc:  # noqa: BLE001  (a compiler bug on one model must not stop the zoo: it is that entry's status)
        return Outcome(time.perf_counter() - started, error=f"internal error: {type(exc).__name__}: {exc}")
    kernels = model.build.get("kernels")
    return Outcome(seconds, kernels if isinstance(kernels, int) else None, latency, buffer.getvalue())


@dataclass(frozen=True)
class Compiled:
    """An entry, its outcome, and where its `.om` was written (None when it failed)."""

    entry: Entry
    outcome: Outcome
    written: Path | None


def run(
    entries: list[Entry], output: Path, runner: Backend, on_done: Callable[[Compiled], None] | None = None
) -> list[Compiled]:
    """Compile every entry on `runner`, writing each `.om` under `output` as it comes back."""
    compiled: dict[int, Compiled] = {}

    def done(i: int, outcome: Outcome) -> None:
        written = None
        if outcome.om is not None:
            written = output / entries[i].om
            written.parent.mkdir(parents=True, exist_ok=True)
            with published(written, "wb", what="model") as f:
                f.write(outcome.om)
        compiled[i] = Compiled(entries[i], dataclasses.replace(outcome, om=None), written)
        if on_done is not None:
            on_done(compiled[i])

    runner.map(compile_entry, entries, done)
    return [compiled[i] for i in range(len(entries))]
