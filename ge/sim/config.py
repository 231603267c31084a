"""`RunConfig`: how a compiled model runs on the simulator.

Its fields are the run options of the one option table (`ge.core.options`, tool
`run`): NPURunConfig's names where NPURunConfig has the option, the simulator's
own otherwise. Each is checked when the config is made.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ge.core.errors import OptionError
from ge.core.files import check_output_directory
from ge.core.options import DUMP_STEP_RANGES, RUN, check_fields, log, option_field, options_of, warn_no_effect


@dataclass(frozen=True)
class RunConfig:
    input_fusion_size: int = option_field("input_fusion_size")
    aicore_num: int | None = option_field("aicore_num")
    timing_only: bool = option_field("timing_only")
    profile_level: str = option_field("profile_level")
    enable_dump: bool = option_field("enable_dump")
    dump_path: str | None = option_field("dump_path")
    dump_step: str | None = option_field("dump_step")
    dump_mode: str = option_field("dump_mode")
    dump_layer: str | None = option_field("dump_layer")
    enable_dump_debug: bool = option_field("enable_dump_debug")
    dump_debug_path: str | None = option_field("dump_debug_path")
    dump_debug_mode: str = option_field("dump_debug_mode")

    def __post_init__(self) -> None:
        check_fields(self)
        self._check_dump()

    def _check_dump(self) -> None:
        """The dump options together: a path for each dump asked for, numerics to dump,
        and no dump option that nothing would use."""
        if self.enable_dump and self.dump_path is None:
            raise OptionError("enable_dump needs dump_path, the directory the dumps go to")
        if self.enable_dump_debug and self.dump_path is None and self.dump_debug_path is None:
            raise OptionError("enable_dump_debug needs dump_debug_path (or dump_path), the directory the overflow dumps go to")
        if self.timing_only and (self.enable_dump or self.enable_dump_debug):
            raise OptionError("enable_dump and enable_dump_debug need the values a run computes; timing_only computes none")
        dump = {"dump_step": self.dump_step, "dump_layer": self.dump_layer, "dump_mode": None if self.dump_mode == "output" else self.dump_mode}
        debug = {"dump_debug_path": self.dump_debug_path, "dump_debug_mode": None if self.dump_debug_mode == "all" else self.dump_debug_mode}
        for switch, on, options in (("enable_dump", self.enable_dump, dump), ("enable_dump_debug", self.enable_dump_debug, debug)):
            given = [name for name, value in options.items() if value is not None]
            if given and not on:
                flag = "--dump_path" if switch == "enable_dump" else "--enable_dump_debug"
                raise OptionError(f"{switch} is off, so {', '.join(given)} would do nothing; set {switch}=true (ge run: {flag})")
        if self.dump_path is not None and not self.enable_dump and not self.enable_dump_debug:
            raise OptionError("dump_path is given but neither enable_dump nor enable_dump_debug is on; set one of them to true")
        if self.dump_step is not None:
            dump_steps(self.dump_step)
        if self.dump_layer is not None and not self.dump_layer.split():
            raise OptionError("dump_layer '' names no op; give node names separated by spaces, or leave it out to dump all")
        if self.enable_dump_debug and self.dump_debug_mode == "atomic_overflow":
            log.warning("dump_debug_mode atomic_overflow detects nothing here: the simulator has no atomic accumulations; aicore_overflow or all watch the kernels")
        for path, name in ((self.dump_path, "dump_path"), (self.dump_debug_path, "dump_debug_path")):
            if path is not None:
                check_output_directory(path, name)

    def steps(self) -> tuple[tuple[int, int], ...] | None:
        """The (first, last) iteration ranges dump_step selects; None: every iteration."""
        return None if self.dump_step is None else dump_steps(self.dump_step)

    @classmethod
    def from_flags(cls, **flags: Any) -> RunConfig:
        """A RunConfig from NPURunConfig-named flags; an unknown name lists the known ones."""
        known = {f.name for f in dataclasses.fields(cls)}
        for name in flags:
            if name not in known:
                names = sorted(o.name for o in options_of(RUN))
                raise OptionError(f"unknown run option '{name}'; known options: {', '.join(names)}")
        return cls(**warn_no_effect(flags))


def dump_steps(text: str) -> tuple[tuple[int, int], ...]:
    """'0|5|10-20' -> ((0, 0), (5, 5), (10, 20)): iterations and ranges joined by '|'."""
    ranges = []
    for item in text.split("|"):
        first, dash, last = item.strip().partition("-")
        if not first.isdigit() or (dash and not last.isdigit()) or (dash and int(last) < int(first)):
            raise OptionError(
                f"dump_step '{text}' is not allowed: '{item.strip()}' is not an iteration N or a range N-M with N <= M; join them with '|', e.g. '0|5|10-20'"
            )
        ranges.append((int(first), int(last) if dash else int(first)))
    if len(ranges) > DUMP_STEP_RANGES:
        raise OptionError(f"dump_step '{text[:40]}...' has {len(ranges)} iterations and ranges; at most {DUMP_STEP_RANGES} are allowed")
    return tuple(ranges)
