"""Compile options, spelled and valued as ATC and NPURunConfig spell them.

Each option is validated when the options are made: an unknown name, a value out
of its set, or a file that cannot be read fails at once with an `OptionError` that
names the option, the value and what is allowed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any

from ge.core import soc
from ge.core import precision_files
from ge.core.errors import OptionError
from ge.core.precision_files import PrecisionSettings

EXPORT_COMPILE_STAT = (0, 1, 2)
AICORE_ENGINE = "AIcoreEngine"
AICPU_ENGINE = "DNN_VM_AICPU"
DEFAULT_AICORE_STREAMS = 4
"""AI Core streams when stream_max_parallel_num does not say: GE spreads independent
branches over streams by default; four covers the branches of ResNet and BERT."""


def parse_stream_max_parallel_num(value: str) -> dict[str, int]:
    """`AIcoreEngine:4,DNN_VM_AICPU:10` -> {engine: parallel streams}; we have no AI CPU
    engine, so its count is accepted (and warned about by the build) but has no effect."""
    engines: dict[str, int] = {}
    for item in value.split(","):
        engine, _, count = item.strip().partition(":")
        if engine not in (AICORE_ENGINE, AICPU_ENGINE) or not count.strip().isdigit() or int(count) < 1:
            raise OptionError(
                f"stream_max_parallel_num '{value}' is not allowed; use engine:count pairs joined by ',' "
                f"with engines {AICORE_ENGINE} and {AICPU_ENGINE} and counts >= 1, e.g. '{AICORE_ENGINE}:4'"
            )
        engines[engine] = int(count)
    return engines


@dataclass(frozen=True)
class CompileOptions:
    """The ATC flags the graph optimisation understands (more join with the build)."""

    input_shape: str | None = None
    """`name:1,3,224,224;name2:...` overrides of input shapes (-1 or lo~hi: dynamic)."""
    fusion_switch_file: str | None = None
    """A GE fusion switch file (JSON or `Pass:off` lines) closing or opening fusion passes."""
    export_compile_stat: int = 1
    """fusion_result.json: 0 never, 1 when the compile ends normally, 2 right after the graph is built."""
    soc_version: str = "Ascend310P3"
    """The SoC compiled for (a profile in `ge/core/soc/`); UB fusion sizes its scopes to its UB."""
    disable_reuse_memory: int = 0
    """1 gives every feature-map tensor its own memory (to rule out a reuse bug); 0 reuses memory by lifetime."""
    enable_single_stream: bool = False
    """True runs every task on one stream; False runs independent branches on parallel streams."""
    stream_max_parallel_num: str | None = None
    """`AIcoreEngine:N`: at most N parallel AI Core streams (unset: `DEFAULT_AICORE_STREAMS`)."""
    precision_mode: str | None = None
    """force_fp16 (the default for inference), allow_fp32_to_fp16, cube_fp16in_fp32out, force_fp32,
    must_keep_origin_dtype, allow_mix_precision(_fp16|_bf16), allow_fp32_to_bf16, force_lowerprecision."""
    precision_mode_v2: str | None = None
    """fp16, origin, cube_fp16in_fp32out, mixed_float16 or mixed_bfloat16; excludes precision_mode."""
    modify_mixlist: str | None = None
    """JSON moving op types between the mixed-precision black, white and gray lists."""
    keep_dtype: str | None = None
    """A file of node names and `OpType::Type` lines that keep their original dtype."""
    customize_dtypes: str | None = None
    """A file of `Name::InputDtype:...,OutputDtype:...` (or `OpType::Type:...`) dtype choices."""
    op_precision_mode: str | None = None
    """An ini of implementation modes by op type ([ByOpType]) and node name ([ByNodeName])."""
    op_select_implmode: str | None = None
    """high_precision, high_performance (the default), or either *_for_all."""
    optypelist_for_implmode: str | None = None
    """Op types (comma-separated) that op_select_implmode applies to."""
    session_id: int = 0
    graph_id: int = 0

    def __post_init__(self) -> None:
        soc.load(self.soc_version)
        if self.export_compile_stat not in EXPORT_COMPILE_STAT:
            raise OptionError(
                f"export_compile_stat {self.export_compile_stat!r} is not allowed; use 0, 1 or 2"
            )
        if self.fusion_switch_file is not None and not os.path.isfile(self.fusion_switch_file):
            raise OptionError(f"fusion_switch_file '{self.fusion_switch_file}' does not exist or is not a file")
        if self.disable_reuse_memory not in (0, 1):
            raise OptionError(f"disable_reuse_memory {self.disable_reuse_memory!r} is not allowed; use 0 (reuse) or 1 (no reuse)")
        if not isinstance(self.enable_single_stream, bool):
            raise OptionError(f"enable_single_stream {self.enable_single_stream!r} is not allowed; use true or false")
        if self.stream_max_parallel_num is not None:
            parse_stream_max_parallel_num(self.stream_max_parallel_num)
        self.precision_settings()

    def precision_settings(self) -> PrecisionSettings:
        """The precision options checked and their files read (`ge/core/precision_files.py`)."""
        return precision_files.resolve(
            self.precision_mode, self.precision_mode_v2, self.modify_mixlist, self.keep_dtype,
            self.customize_dtypes, self.op_precision_mode, self.op_select_implmode, self.optypelist_for_implmode,
        )

    @property
    def aicore_streams(self) -> int:
        """The most AI Core streams the build may use."""
        if self.enable_single_stream:
            return 1
        if self.stream_max_parallel_num is None:
            return DEFAULT_AICORE_STREAMS
        return parse_stream_max_parallel_num(self.stream_max_parallel_num).get(AICORE_ENGINE, DEFAULT_AICORE_STREAMS)

    @classmethod
    def from_flags(cls, **flags: Any) -> CompileOptions:
        """Options from ATC-named flags; an unknown name lists the known ones."""
        known = {f.name for f in fields(cls)}
        for name in flags:
            if name not in known:
                raise OptionError(f"unknown option '{name}'; known options: {', '.join(sorted(known))}")
        return cls(**flags)


INPUT_FUSION_SIZE_MAX = 33554432
"""input_fusion_size's upper bound (32 MB), as NPURunConfig documents it."""
PROFILE_LEVELS = ("task", "pipe")


@dataclass(frozen=True)
class RunConfig:
    """How a compiled model runs on the simulator: NPURunConfig's options that mean
    something for one run, with NPURunConfig's names, and the simulator's own."""

    input_fusion_size: int = 131072
    """Bytes: the graph inputs of at most this size go to the device in one fused copy, the
    others one copy each; 0 fuses none. 0 to 33554432 (32 MB), default 131072 (128 KB)."""
    aicore_num: int | None = None
    """AI cores to run on (None: all of the SoC's); more than the SoC has is an error. On
    parts with separate vector cores, their count scales in proportion."""
    timing_only: bool = False
    """Time the model without computing its values (the outputs stay empty)."""
    profile_level: str = "task"
    """What the profile's trace shows: "task" (streams and cores) or "pipe" (also every
    core's pipes, instruction by instruction)."""

    def __post_init__(self) -> None:
        size = self.input_fusion_size
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= INPUT_FUSION_SIZE_MAX:
            raise OptionError(
                f"input_fusion_size {size!r} is not allowed; use an integer number of bytes from 0 (no fusion) "
                f"to {INPUT_FUSION_SIZE_MAX} (32 MB)"
            )
        cores = self.aicore_num
        if cores is not None and (isinstance(cores, bool) or not isinstance(cores, int) or cores < 1):
            raise OptionError(f"aicore_num {cores!r} is not allowed; use a positive number of AI cores")
        if not isinstance(self.timing_only, bool):
            raise OptionError(f"timing_only {self.timing_only!r} is not allowed; use true or false")
        if self.profile_level not in PROFILE_LEVELS:
            raise OptionError(f"profile_level {self.profile_level!r} is not allowed; use {' or '.join(PROFILE_LEVELS)}")

    @classmethod
    def from_flags(cls, **flags: Any) -> RunConfig:
        """A RunConfig from NPURunConfig-named flags; an unknown name lists the known ones."""
        known = {f.name for f in fields(cls)}
        for name in flags:
            if name not in known:
                raise OptionError(f"unknown run option '{name}'; known options: {', '.join(sorted(known))}")
        return cls(**flags)
