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
from ge.core.options import RUN, check_fields, option_field, options_of, warn_no_effect


@dataclass(frozen=True)
class RunConfig:
    input_fusion_size: int = option_field("input_fusion_size")
    aicore_num: int | None = option_field("aicore_num")
    timing_only: bool = option_field("timing_only")
    profile_level: str = option_field("profile_level")

    def __post_init__(self) -> None:
        check_fields(self)

    @classmethod
    def from_flags(cls, **flags: Any) -> RunConfig:
        """A RunConfig from NPURunConfig-named flags; an unknown name lists the known ones."""
        known = {f.name for f in dataclasses.fields(cls)}
        for name in flags:
            if name not in known:
                names = sorted(o.name for o in options_of(RUN))
                raise OptionError(f"unknown run option '{name}'; known options: {', '.join(names)}")
        return cls(**warn_no_effect(flags))
