"""The precision options and their files, read and checked as GE reads them.

Every error names the option, the file and the line, and says what is allowed,
so that a user fixes a file without reading this code. The readings below are
ours where CANN's texts leave room:

- `precision_mode` and `precision_mode_v2` exclude each other. With neither, the
  mode is force_fp16 (ATC's default for inference). The v2 names map onto v1
  policies: fp16 = force_fp16, origin = must_keep_origin_dtype,
  cube_fp16in_fp32out = cube_fp16in_fp32out, mixed_float16 =
  allow_mix_precision_fp16, mixed_bfloat16 = allow_mix_precision_bf16.
- `modify_mixlist` is JSON: `{"black-list"|"white-list"|"gray-list": {"to-add":
  [...], "to-remove": [...]}}` of op types. black `to-remove` and white
  `to-remove` move an op to gray; `to-add` moves it onto that list. gray-list
  has only `to-add` (an op on no list is gray already, so removing from gray
  would mean nothing). One op type in two `to-add` lists is an error.
- `keep_dtype` (ATC `--keep_dtype`, the ONNX counterpart of NPURunConfig's
  keep_dtype_scope) lists one node name per line, or `OpType::TypeName`; `#`
  starts a comment.
- `customize_dtypes`: `Name::InputDtype:d1,d2,...,OutputDtype:d1,...` or
  `OpType::TypeName:InputDtype:...,OutputDtype:...`. The dtypes are positional,
  one per input and one per output of the op (CANN's example gives Relu two
  input dtypes; we refuse a count that does not match the op rather than guess).
  Either part may be left out; a name or type given twice is an error.
- `op_precision_mode` is an ini file with `[ByOpType]` and `[ByNodeName]`
  sections of `key=mode`; lines before any section are by op type (the form
  ATC's Chinese text shows). `;` and `#` start comments.
- `op_select_implmode` is high_precision, high_performance (ATC's default),
  high_precision_for_all or high_performance_for_all; `optypelist_for_implmode`
  (comma-separated op types) needs it set to high_precision or high_performance
  and limits it to those types.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ge.core.errors import OptionError
from ge.core.files import read_text
from ge.core.options import DEFAULT_OP_SELECT_IMPLMODE, DEFAULT_PRECISION_MODE, PRECISION_MODES_V2

MIXED_MODES = ("allow_mix_precision", "allow_mix_precision_fp16", "allow_mix_precision_bf16")
BF16_MODES = ("allow_mix_precision_bf16", "allow_fp32_to_bf16")

INI_MODES = ("high_precision", "high_performance", "super_performance", "keep_fp16", "support_out_of_bound_index")

DTYPE_SPELLINGS: dict[str, str] = {
    "float16": "float16",
    "float": "float32",
    "float32": "float32",
    "bfloat16": "bfloat16",
    "double": "float64",
    "float64": "float64",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "bool": "bool",
}
"""The dtype names a user file may use (CANN's), and our canonical name for each."""

MIX_LISTS = ("black-list", "white-list", "gray-list")
MIX_ACTIONS = ("to-add", "to-remove")


@dataclass(frozen=True)
class Source:
    """Where an entry came from, for errors and for the `_precision_reason` of an op."""

    option: str
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.option} '{self.path}' line {self.line}"


def _fail(option: str, path: str, line: int | None, message: str) -> OptionError:
    where = f"{option} '{path}'" + ("" if line is None else f" line {line}")
    return OptionError(f"{where}: {message}")


def _read(option: str, path: str) -> list[str]:
    return read_text(path, option).splitlines()


def _content(line: str, comments: str = "#") -> str:
    for mark in comments:
        line = line.split(mark, 1)[0]
    return line.strip()


# ------------------------------------------------------------------ modify_mixlist


@dataclass(frozen=True)
class MixList:
    """Moves between the mixed-precision lists ("white", "black", "gray")."""

    adds: Mapping[str, str]
    """Op type -> the list it is added to."""
    removes: Mapping[str, str]
    """Op type -> the list it is removed from (to gray)."""
    sources: Mapping[str, Source]

    def place(self, op_type: str, default: str) -> str:
        """The list of an op type whose op information puts it on `default`: an
        addition wins; a removal moves it to gray only from the list it names."""
        if op_type in self.adds:
            return self.adds[op_type]
        if self.removes.get(op_type) == default:
            return "gray"
        return default


def read_mixlist(path: str) -> MixList:
    option = "modify_mixlist"
    text = "\n".join(_read(option, path))
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise _fail(option, path, e.lineno, f"not valid JSON ({e.msg}, column {e.colno})") from e
    if not isinstance(doc, dict):
        raise _fail(option, path, None, f"must be a JSON object with keys from {', '.join(MIX_LISTS)}")
    adds: dict[str, str] = {}
    removes: dict[str, str] = {}
    sources: dict[str, Source] = {}
    for key, actions in doc.items():
        line = _line_of(text, f'"{key}"')
        if key not in MIX_LISTS:
            raise _fail(option, path, line, f"unknown key '{key}'; use {', '.join(MIX_LISTS)}")
        if not isinstance(actions, dict):
            raise _fail(option, path, line, f"'{key}' must be an object with 'to-add' and/or 'to-remove'")
        for action, op_types in actions.items():
            if action not in MIX_ACTIONS:
                raise _fail(option, path, line, f"'{key}' has unknown key '{action}'; use 'to-add' or 'to-remove'")
            if key == "gray-list" and action == "to-remove":
                raise _fail(
                    option, path, line,
                    "'gray-list' has no 'to-remove': an op type on no list is gray; "
                    "move it with 'to-add' of 'black-list' or 'white-list'",
                )
            if not isinstance(op_types, list) or not all(isinstance(t, str) and t for t in op_types):
                raise _fail(option, path, line, f"'{key}'.'{action}' must be a list of op type names")
            listed = key.split("-")[0]
            table = adds if action == "to-add" else removes
            for op_type in op_types:
                where = Source(option, path, _line_of(text, f'"{op_type}"'))
                if op_type in table and table[op_type] != listed:
                    raise _fail(
                        option, path, where.line,
                        f"'{op_type}' is in '{action}' of both '{table[op_type]}-list' and '{key}'",
                    )
                table[op_type] = listed
                sources.setdefault(op_type, where)
    return MixList(adds, removes, sources)


def _line_of(text: str, needle: str) -> int:
    """The 1-based line where `needle` first appears (1 if it does not)."""
    at = text.find(needle)
    return 1 if at < 0 else text.count("\n", 0, at) + 1


# ---------------------------------------------------------------------- keep_dtype


@dataclass(frozen=True)
class KeepDtype:
    """Nodes (by name) and op types that keep their original dtype."""

    names: Mapping[str, Source]
    op_types: Mapping[str, Source]


def read_keep_dtype(path: str) -> KeepDtype:
    option = "keep_dtype"
    names: dict[str, Source] = {}
    op_types: dict[str, Source] = {}
    for n, raw in enumerate(_read(option, path), 1):
        line = _content(raw)
        if not line:
            continue
        if line.startswith("OpType::"):
            op_type = line[len("OpType::") :].strip()
            if not op_type or ":" in op_type:
                raise _fail(option, path, n, f"'{line}' is not OpType::TypeName; give one op type after 'OpType::'")
            op_types[op_type] = Source(option, path, n)
        elif "::" in line:
            raise _fail(option, path, n, f"'{line}' is neither a node name nor OpType::TypeName")
        else:
            names[line] = Source(option, path, n)
    return KeepDtype(names, op_types)


# ----------------------------------------------------------------- customize_dtypes


@dataclass(frozen=True)
class DtypeRule:
    """The dtypes one node or op type must use: positional, None where not given."""

    inputs: tuple[str, ...] | None
    outputs: tuple[str, ...] | None
    source: Source


@dataclass(frozen=True)
class CustomizeDtypes:
    names: Mapping[str, DtypeRule]
    op_types: Mapping[str, DtypeRule]


_DTYPE_SPEC = re.compile(r"^(?:InputDtype:(?P<inputs>[^:]*?))?,?(?:OutputDtype:(?P<outputs>[^:]*))?$")


def read_customize_dtypes(path: str) -> CustomizeDtypes:
    option = "customize_dtypes"
    names: dict[str, DtypeRule] = {}
    op_types: dict[str, DtypeRule] = {}
    form = "Name::InputDtype:d1,...,OutputDtype:d1,... or OpType::TypeName:InputDtype:...,OutputDtype:..."
    for n, raw in enumerate(_read(option, path), 1):
        line = _content(raw).replace(" ", "")
        if not line:
            continue
        if "::" not in line:
            raise _fail(option, path, n, f"'{line}' has no '::'; write {form}")
        key, spec = line.split("::", 1)
        table = names
        if key == "OpType":
            if ":" not in spec:
                raise _fail(option, path, n, f"'{line}' names no dtypes; write {form}")
            key, spec = spec.split(":", 1)
            table = op_types
        if not key:
            raise _fail(option, path, n, f"'{line}' names no node or op type; write {form}")
        match = _DTYPE_SPEC.match(spec)
        if not spec or match is None:
            raise _fail(option, path, n, f"'{spec}' is not InputDtype:d1,...,OutputDtype:d1,...; write {form}")
        source = Source(option, path, n)
        rule = DtypeRule(_dtypes(match["inputs"], source), _dtypes(match["outputs"], source), source)
        if key in table:
            raise _fail(option, path, n, f"'{key}' is configured again (first on line {table[key].source.line})")
        table[key] = rule
    return CustomizeDtypes(names, op_types)


def _dtypes(spec: str | None, source: Source) -> tuple[str, ...] | None:
    if spec is None:
        return None
    out = []
    for name in spec.rstrip(",").split(","):
        if name not in DTYPE_SPELLINGS:
            raise OptionError(f"{source}: unknown dtype '{name}'; use {', '.join(DTYPE_SPELLINGS)}")
        out.append(DTYPE_SPELLINGS[name])
    return tuple(out)


# ---------------------------------------------------------------- op_precision_mode


@dataclass(frozen=True)
class ModeRule:
    mode: str
    source: Source


@dataclass(frozen=True)
class OpPrecisionModes:
    """Implementation modes from an op_precision_mode ini: by op type and by node name."""

    op_types: Mapping[str, ModeRule]
    names: Mapping[str, ModeRule]


INI_SECTIONS = ("ByOpType", "ByNodeName")


def read_op_precision_mode(path: str) -> OpPrecisionModes:
    option = "op_precision_mode"
    tables: dict[str, dict[str, ModeRule]] = {s: {} for s in INI_SECTIONS}
    section = "ByOpType"
    for n, raw in enumerate(_read(option, path), 1):
        line = _content(raw, "#;")
        if not line:
            continue
        if line.startswith("["):
            if not line.endswith("]") or line[1:-1].strip() not in INI_SECTIONS:
                raise _fail(option, path, n, f"unknown section '{line}'; use [ByOpType] or [ByNodeName]")
            section = line[1:-1].strip()
            continue
        if "=" not in line:
            raise _fail(option, path, n, f"'{line}' is not key=mode")
        key, mode = (part.strip() for part in line.split("=", 1))
        if not key:
            raise _fail(option, path, n, f"'{line}' has no op type or node name before '='")
        if mode not in INI_MODES:
            raise _fail(option, path, n, f"'{mode}' is not an implementation mode; use {', '.join(INI_MODES)}")
        table = tables[section]
        if key in table:
            raise _fail(option, path, n, f"'{key}' is set again in [{section}] (first on line {table[key].source.line})")
        table[key] = ModeRule(mode, Source(option, path, n))
    return OpPrecisionModes(tables["ByOpType"], tables["ByNodeName"])


# ---------------------------------------------------------------------- the options


@dataclass(frozen=True)
class PrecisionSettings:
    """The precision options of one compile, resolved and with their files read."""

    policy: str = DEFAULT_PRECISION_MODE
    """The precision_mode policy in force (v2 values mapped to it)."""
    spelled: str = f"precision_mode={DEFAULT_PRECISION_MODE} (default)"
    """How the user asked for it, for `_precision_reason`."""
    mixlist: MixList | None = None
    keep_dtype: KeepDtype | None = None
    customize_dtypes: CustomizeDtypes | None = None
    op_precision_mode: OpPrecisionModes | None = None
    op_select_implmode: str = DEFAULT_OP_SELECT_IMPLMODE
    op_select_implmode_given: bool = False
    optypelist_for_implmode: tuple[str, ...] = ()

    @property
    def mixed(self) -> bool:
        return self.policy in MIXED_MODES


PRECISION_OPTIONS = (
    "precision_mode", "precision_mode_v2", "modify_mixlist", "keep_dtype", "customize_dtypes",
    "op_precision_mode", "op_select_implmode", "optypelist_for_implmode",
)
"""The options `resolve` takes, by their names in the option table."""


def settings_of(options: object) -> PrecisionSettings:
    """`resolve` of the precision options that `options` (compile options, a pass) holds."""
    return resolve(**{name: getattr(options, name) for name in PRECISION_OPTIONS})


def resolve(
    precision_mode: str | None = None,
    precision_mode_v2: str | None = None,
    modify_mixlist: str | None = None,
    keep_dtype: str | None = None,
    customize_dtypes: str | None = None,
    op_precision_mode: str | None = None,
    op_select_implmode: str | None = None,
    optypelist_for_implmode: str | None = None,
) -> PrecisionSettings:
    """Check the precision options together and read their files (each value alone is
    checked against its allowed set by the option table, `ge.core.options`)."""
    if precision_mode is not None and precision_mode_v2 is not None:
        raise OptionError(
            f"precision_mode ({precision_mode}) and precision_mode_v2 ({precision_mode_v2}) cannot both be set; "
            "give one of them (precision_mode_v2 is recommended)"
        )
    types = _optypelist(optypelist_for_implmode, op_select_implmode)
    if precision_mode_v2 is not None:
        policy, spelled = PRECISION_MODES_V2[precision_mode_v2], f"precision_mode_v2={precision_mode_v2}"
    elif precision_mode is not None:
        policy, spelled = precision_mode, f"precision_mode={precision_mode}"
    else:
        policy, spelled = DEFAULT_PRECISION_MODE, f"precision_mode={DEFAULT_PRECISION_MODE} (default)"
    return PrecisionSettings(
        policy=policy,
        spelled=spelled,
        mixlist=read_mixlist(modify_mixlist) if modify_mixlist is not None else None,
        keep_dtype=read_keep_dtype(keep_dtype) if keep_dtype is not None else None,
        customize_dtypes=read_customize_dtypes(customize_dtypes) if customize_dtypes is not None else None,
        op_precision_mode=read_op_precision_mode(op_precision_mode) if op_precision_mode is not None else None,
        op_select_implmode=op_select_implmode or DEFAULT_OP_SELECT_IMPLMODE,
        op_select_implmode_given=op_select_implmode is not None,
        optypelist_for_implmode=types,
    )


def _optypelist(spec: str | None, mode: str | None) -> tuple[str, ...]:
    if spec is None:
        return ()
    if mode not in ("high_precision", "high_performance"):
        raise OptionError(
            f"optypelist_for_implmode '{spec}' needs op_select_implmode high_precision or high_performance, "
            f"not {mode or 'unset'}"
        )
    types = tuple(t.strip() for t in spec.split(","))
    if not all(types):
        raise OptionError(f"optypelist_for_implmode '{spec}' has an empty op type; separate op types by single commas")
    return types
