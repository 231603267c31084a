"""Shape ranges of a fully dynamic build, as text: `--input_shape`'s `-1` and `lo~hi`
dims, and NPURunConfig's `dynamic_inputs_shape_range`.

    --input_shape="x:1~16,3,224,224"           dim 0 from 1 to 16, the rest fixed
    --input_shape="ids:-1,-1"                  both dims dynamic, unbounded
    dynamic_inputs_shape_range="data:[1~8,128],[1~8]"   the graph inputs in order

A range is (lo, hi), `hi` = `UNBOUNDED` (-1) when no upper bound is given; a static
dim d is (d, d). An unbounded dim is allowed, as in GE: nothing compiled depends on
the upper bound here (every kernel is tiled on the host for the actual shape, and
the memory of a run is planned for its shapes), so the only limit on a shape at run
time is the device memory its plan needs. The module imports neither numpy nor xDSL
(see `ge.core.options`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ge.core.errors import InputError, OptionError

UNBOUNDED = -1
DimRange = tuple[int, int]
Ranges = dict[str, tuple[DimRange, ...]]
"""Per graph input, in the model's input order, the (lo, hi) of every dim."""


def dim_range(text: str, where: str) -> DimRange:
    """`d`, `-1` or `lo~hi` (hi may be -1) as a range; anything else refused naming `where`."""
    text = text.strip()
    lo_text, tilde, hi_text = text.partition("~")
    try:
        lo, hi = (int(lo_text), int(hi_text)) if tilde else (int(text), int(text))
    except ValueError:
        raise OptionError(f"{where}: dim '{text}' is not allowed; use a size >= 1, -1 (dynamic) or a range lo~hi (1 <= lo <= hi, hi = -1 unbounded)") from None
    if not tilde and lo == UNBOUNDED:
        return (1, UNBOUNDED)
    if lo < 1 or (hi != UNBOUNDED and hi < lo):
        raise OptionError(f"{where}: dim '{text}' is not allowed; a size is >= 1 and a range lo~hi needs 1 <= lo <= hi (or hi = -1)")
    return (lo, hi)


def is_dynamic(ranges: Mapping[str, Sequence[DimRange]]) -> bool:
    return any(lo != hi for dims in ranges.values() for lo, hi in dims)


def from_input_shape(text: str, order: Sequence[str]) -> dict[str, tuple[DimRange, ...]]:
    """The ranges `--input_shape` gives, by input name (names checked against `order`)."""
    found: dict[str, tuple[DimRange, ...]] = {}
    for item in (i.strip() for i in text.split(";")):
        if not item:
            continue
        name, _, dims = item.rpartition(":")
        name = name.strip()
        if name not in order:
            raise OptionError(f"--input_shape: the model has no input '{name}'; its inputs are {', '.join(order)}")
        found[name] = tuple(dim_range(d, f"--input_shape input '{name}'") for d in dims.split(",")) if dims.strip() else ()
    return found


_ENTRY = re.compile(r"\[([^\[\]]*)\]")


def from_shape_range(text: str, order: Sequence[str]) -> dict[str, tuple[DimRange, ...]]:
    """NPURunConfig's `dynamic_inputs_shape_range`: `data:[..],[..]`, one bracket per graph
    input in the model's order (`getnext:`, the dataset inputs, has none here)."""
    kind, colon, rest = text.partition(":")
    usage = "use 'data:[d,...],[d,...]', one [...] per graph input in order, each dim a size, -1 or lo~hi"
    if not colon or kind.strip() != "data":
        what = "dataset (getnext) inputs, and the model has none" if kind.strip() == "getnext" else f"'{kind.strip()}' inputs"
        raise OptionError(f"dynamic_inputs_shape_range '{text}' gives {what if colon else 'no input kind'}; {usage}")
    entries = _ENTRY.findall(rest)
    if not entries or _ENTRY.sub("", rest).replace(",", "").strip():
        raise OptionError(f"dynamic_inputs_shape_range '{text}' is not a list of [...]; {usage}")
    if len(entries) != len(order):
        raise OptionError(f"dynamic_inputs_shape_range '{text}' gives {len(entries)} inputs, the model has {len(order)} ({', '.join(order)}); {usage}")
    return {
        name: tuple(dim_range(d, f"dynamic_inputs_shape_range input '{name}'") for d in entry.split(",")) if entry.strip() else ()
        for name, entry in zip(order, entries)
    }


def shown(ranges: Mapping[str, Sequence[DimRange]]) -> str:
    """Ranges as `--input_shape` spells them: `x:1~16,3,224,224`."""

    def dim(r: DimRange) -> str:
        lo, hi = r
        return str(lo) if lo == hi else "-1" if (lo, hi) == (1, UNBOUNDED) else f"{lo}~{hi}"

    return ";".join(f"{name}:{','.join(dim(r) for r in dims)}" for name, dims in ranges.items())


def check(ranges: Mapping[str, Sequence[DimRange]], given: Mapping[str, tuple[int, ...]]) -> None:
    """Refuse input shapes outside the ranges, listing the ranges."""
    for name, dims in ranges.items():
        shape = given.get(name)
        inside = shape is not None and len(shape) == len(dims) and all(
            lo <= d and (hi == UNBOUNDED or d <= hi) for d, (lo, hi) in zip(shape, dims)
        )
        if not inside:
            got = "missing" if shape is None else list(shape)
            raise InputError(f"input '{name}' has shape {got}, outside the model's shape ranges {shown(ranges)} (-1: unbounded)")
