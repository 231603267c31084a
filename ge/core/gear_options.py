"""ATC's multi-gear options, as text: `--dynamic_batch_size`, `--dynamic_image_size`
and `--dynamic_dims`, checked as GE checks them before it sees the model.

    --dynamic_batch_size="1,8,16"             three gears of one value (the batch)
    --dynamic_image_size="224,224;448,448"    two gears of two values (H, W)
    --dynamic_dims="1,64;1,128;1,256"         three gears, one value per -1 of input_shape

A gear option gives 2 to 100 gears (GE's `kMaxDynamicDimNum` is 100), none twice,
each value a positive integer and every gear of the same arity; only one of the
three options at a time. What needs the model (which dims are -1, how many) is
`ge.gears`'s check. The module imports neither numpy nor xDSL (see `ge.core.options`).
"""

from __future__ import annotations

from collections.abc import Mapping

from ge.core.errors import OptionError

GEAR_OPTIONS = ("dynamic_batch_size", "dynamic_image_size", "dynamic_dims")
MIN_GEARS = 2
MAX_GEARS = 100
INPUT_FORMATS = ("NCHW", "NHWC", "ND", "NCDHW", "NDHWC")
"""The layouts `--input_format` names for an ONNX model's inputs."""

Gear = tuple[int, ...]


def gear_option(options: Mapping[str, object]) -> tuple[str, str] | None:
    """The one gear option given (name, text), None without any; two or three refused."""
    given = [name for name in GEAR_OPTIONS if options.get(name) is not None]
    if len(given) > 1:
        raise OptionError(
            f"--{given[0]} and --{given[1]} cannot be used together; give one of "
            + ", ".join(f"--{n}" for n in GEAR_OPTIONS)
        )
    if not given:
        return None
    return given[0], str(options[given[0]])


def parse_gears(name: str, text: str) -> list[Gear]:
    """The gears of option `name`'s `text`, checked for count, duplicates, signs and arity."""
    separator = "," if name == "dynamic_batch_size" else ";"
    items = [item.strip() for item in text.split(separator)]
    if any(not item for item in items):
        raise OptionError(f"--{name}='{text}' has an empty gear; {_usage(name)}")
    if name == "dynamic_batch_size":
        gears = [(_value(name, text, item),) for item in items]
    else:
        gears = [tuple(_value(name, text, v.strip()) for v in item.split(",")) for item in items]
    if not MIN_GEARS <= len(gears) <= MAX_GEARS:
        raise OptionError(f"--{name}='{text}' gives {len(gears)} gears; allowed: {MIN_GEARS} to {MAX_GEARS}")
    arity = 2 if name == "dynamic_image_size" else len(gears[0])
    for gear in gears:
        if len(gear) != arity:
            raise OptionError(
                f"--{name}='{text}': gear '{','.join(map(str, gear))}' has {len(gear)} values, "
                f"every gear needs {arity}; {_usage(name)}"
            )
    seen: set[Gear] = set()
    for gear in gears:
        if gear in seen:
            raise OptionError(f"--{name}='{text}': gear '{','.join(map(str, gear))}' is given twice; each gear once")
        seen.add(gear)
    return gears


def _value(name: str, text: str, item: str) -> int:
    try:
        value = int(item)
    except ValueError:
        raise OptionError(f"--{name}='{text}': '{item}' is not an integer; {_usage(name)}") from None
    if value < 1:
        raise OptionError(f"--{name}='{text}': {value} is not allowed; every value is a size >= 1 (no negatives, no 0)")
    return value


def _usage(name: str) -> str:
    return {
        "dynamic_batch_size": "use batch sizes separated by ',', e.g. '1,8,16'",
        "dynamic_image_size": "use 'H,W' pairs separated by ';', e.g. '224,224;448,448'",
        "dynamic_dims": "use gears separated by ';', each one value per -1 of input_shape separated by ',', e.g. '1,64;1,128'",
    }[name]


def check(options: Mapping[str, object]) -> None:
    """The gear options' own checks (the model's are `ge.gears`'s): one at most, well formed,
    and --dynamic_dims only with an ND input_format."""
    given = gear_option(options)
    if given is None:
        return
    name, text = given
    parse_gears(name, text)
    fmt = options.get("input_format")
    if name == "dynamic_dims" and fmt not in (None, "ND"):
        raise OptionError(f"--dynamic_dims needs --input_format=ND, not {fmt}")
    if name == "dynamic_image_size" and fmt not in (None, "NCHW", "NHWC"):
        raise OptionError(f"--dynamic_image_size needs --input_format NCHW or NHWC (the layouts with H and W), not {fmt}")
