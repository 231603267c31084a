"""ATC's `--input_shape`: fixed, dynamic (-1) and ranged (`1~16`) input dims.

The text form is `name:d0,d1,...;name:...`, as ATC spells it. A name may itself
hold colons (TensorFlow-style `input:0`), so the dims start after the last colon. A
dim is a positive size, `-1` (dynamic) or a range `lo~hi` (dynamic, `hi` may be -1
for unbounded). The importer has no use for a range beyond knowing the dim is
dynamic, so both become `?` (the ranges are `ge.core.shape_ranges`'). An empty dim list gives a scalar (rank-0) input.

`input_shape_needed` is the other direction: the `--input_shape` a compile needs
for a model whose inputs have dynamic dims (which only the import keeps dynamic).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence

from dialects.shapes import DYN, Shape
from ge.core.errors import OptionError


def _listing(inputs: Mapping[str, Shape | None]) -> str:
    def one(name: str, shape: Shape | None) -> str:
        if shape is None:
            return f"{name} (rank unknown)"
        return f"{name}[" + ",".join("-1" if d == DYN else str(d) for d in shape) + "]"

    return ", ".join(one(n, s) for n, s in inputs.items()) or "none"


def _fail(reason: str, inputs: Mapping[str, Shape | None]) -> OptionError:
    return OptionError(f"--input_shape: {reason}; the model's inputs are: {_listing(inputs)}")


def _dim(text: str, name: str, inputs: Mapping[str, Shape | None]) -> int:
    text = text.strip()
    if "~" in text:
        lo_text, _, hi_text = text.partition("~")
        try:
            lo, hi = int(lo_text), int(hi_text)
        except ValueError:
            raise _fail(f"range '{text}' of input '{name}' is not 'lo~hi' with integers", inputs) from None
        if lo < 1 or (hi != -1 and hi < lo):
            raise _fail(f"range '{text}' of input '{name}' needs 1 <= lo <= hi (or hi = -1)", inputs)
        return DYN
    try:
        value = int(text)
    except ValueError:
        raise _fail(f"dimension '{text}' of input '{name}' is not an integer, -1 or a range lo~hi", inputs) from None
    if value == -1:
        return DYN
    if value < 1:
        raise _fail(f"dimension {value} of input '{name}' must be >= 1, or -1 for a dynamic one", inputs)
    return value


def _parse_text(spec: str, inputs: Mapping[str, Shape | None]) -> dict[str, list[str]]:
    entries: dict[str, list[str]] = {}
    for item in spec.split(";"):
        item = item.strip()
        if not item:
            continue
        name, colon, dims = item.rpartition(":")
        name = name.strip()
        if not colon or not name:
            raise _fail(f"'{item}' is not 'name:d0,d1,...'", inputs)
        if name in entries:
            raise _fail(f"input '{name}' is given twice", inputs)
        entries[name] = dims.split(",") if dims.strip() else []
    if not entries:
        raise _fail(f"'{spec}' names no input", inputs)
    return entries


def parse_input_shape(
    spec: str | Mapping[str, Sequence[int]],
    inputs: Mapping[str, Shape | None],
) -> dict[str, Shape]:
    """The shapes `spec` gives to the model's `inputs` (name -> declared shape).

    Raises `OptionError` listing the model's inputs for an unknown name, a rank that
    differs from the declared one, or a malformed entry.
    """
    if isinstance(spec, str):
        raw: Mapping[str, Sequence[object]] = _parse_text(spec, inputs)
    elif isinstance(spec, Mapping):
        raw = spec
    else:
        raise _fail(f"expected a string or a mapping of input names to shapes, got {type(spec).__name__}", inputs)
    shapes: dict[str, Shape] = {}
    for name, dims in raw.items():
        if name not in inputs:
            raise _fail(f"the model has no input '{name}'", inputs)
        if isinstance(dims, str) or not isinstance(dims, Sequence):
            raise _fail(f"the shape of input '{name}' is {dims!r}, not a sequence of dims", inputs)
        shape = tuple(_dim(str(d), name, inputs) if isinstance(d, str) else _int_dim(d, name, inputs) for d in dims)
        declared = inputs[name]
        if declared is not None and len(declared) != len(shape):
            raise _fail(f"input '{name}' has rank {len(declared)}, but {len(shape)} dims are given", inputs)
        shapes[name] = shape
    return shapes


def _int_dim(value: object, name: str, inputs: Mapping[str, Shape | None]) -> int:
    """A dim given as a number (numpy integers too, but not bools or floats)."""
    if isinstance(value, bool):
        raise _fail(f"dimension {value!r} of input '{name}' is not an integer", inputs)
    try:
        number = operator.index(value)
    except TypeError:
        raise _fail(f"dimension {value!r} of input '{name}' is not an integer", inputs) from None
    return _dim(str(number), name, inputs)


def input_shape_needed(dynamic: Mapping[str, Shape], dim_names: Mapping[str, Sequence[str]] | None = None) -> OptionError:
    """The error for inputs (name -> shape) with dynamic dims.

    A command that works on one static graph (`ge precision-report`) needs every dim
    (`ge atc` and `ge.compile` build dynamic dims fully dynamic or as gears): the one message names
    each dynamic input and gives the `--input_shape` to pass, its static dims filled in
    and each dynamic one a placeholder, named after the ONNX dim (`dim_names`: input
    name -> its dims' `dim_param`, "" for an unnamed dim) when it has a name."""
    names = dim_names or {}

    def dims(name: str, shape: Shape, named: str, unnamed: str) -> list[str]:
        given = [*names.get(name, ()), *[""] * len(shape)]
        return [str(d) if d != DYN else named.format(given[i]) if given[i] else unnamed for i, d in enumerate(shape)]

    listed = ", ".join(f"'{n}' [{', '.join(dims(n, s, '{}', '?'))}]" for n, s in dynamic.items())
    spec = ";".join(f"{n}:{','.join(dims(n, s, '<{}>', '<size>'))}" for n, s in dynamic.items())
    return OptionError(
        f"the model's inputs {listed} have dynamic dims, and this command needs static shapes (ge atc and ge.compile "
        f'build them fully dynamic or as gears); pass --input_shape="{spec}" with a size for each <...>'
    )
