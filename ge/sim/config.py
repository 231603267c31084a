"""`RunConfig`: how a compiled model runs on the simulator.

Its fields are the run options of the one option table (`ge.core.options`, tool
`run`): NPURunConfig's names where NPURunConfig has the option, the simulator's
own otherwise. Each is checked when the config is made. The ATC options among them
(precision_mode, fusion_switch_file, ...) are for `Session.compile`; the runtime
reads the others.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ge.core.errors import OptionError
from ge.core.files import check_output_directory
from ge.core.options import (
    DEFAULT_PRECISION_MODE, DUMP_STEP_RANGES, RUN, TRAINING_PRECISION_MODE, CompileOptions, check_fields, log, option_field,
    options_of, warn_no_effect,
)


COMPILE = frozenset(f.name for f in dataclasses.fields(CompileOptions)) - {"session_id", "graph_id"}
"""The run options that are ATC options too: Session.compile applies them."""


@dataclass(frozen=True)
class RunConfig:
    """NPURunConfig: every option checked alone and against the others when made; an
    option without effect here, or deprecated, is warned about once."""

    input_fusion_size: int = option_field("input_fusion_size")
    aicore_num: int | None = option_field("aicore_num")
    timing_only: bool = option_field("timing_only")
    profile_level: str = option_field("profile_level")
    l2_cache: bool = option_field("l2_cache")
    enable_dump: bool = option_field("enable_dump")
    dump_path: str | None = option_field("dump_path")
    dump_step: str | None = option_field("dump_step")
    dump_mode: str = option_field("dump_mode")
    dump_layer: str | None = option_field("dump_layer")
    enable_dump_debug: bool = option_field("enable_dump_debug")
    dump_debug_path: str | None = option_field("dump_debug_path")
    dump_debug_mode: str = option_field("dump_debug_mode")
    fusion_switch_file: str | None = option_field("fusion_switch_file")
    export_compile_stat: int = option_field("export_compile_stat")
    stream_max_parallel_num: str | None = option_field("stream_max_parallel_num")
    precision_mode: str | None = option_field("precision_mode")
    precision_mode_v2: str | None = option_field("precision_mode_v2")
    modify_mixlist: str | None = option_field("modify_mixlist")
    customize_dtypes: str | None = option_field("customize_dtypes")
    op_precision_mode: str | None = option_field("op_precision_mode")
    op_select_implmode: str | None = option_field("op_select_implmode")
    optypelist_for_implmode: str | None = option_field("optypelist_for_implmode")
    buffer_optimize: str = option_field("buffer_optimize")
    op_compiler_cache_mode: str = option_field("op_compiler_cache_mode")
    op_compiler_cache_dir: str | None = option_field("op_compiler_cache_dir")
    debug_dir: str | None = option_field("debug_dir")
    op_debug_level: int | None = option_field("op_debug_level")
    op_debug_config: str | None = option_field("op_debug_config")
    graph_run_mode: int = option_field("graph_run_mode")
    session_device_id: int | None = option_field("session_device_id")
    deterministic: int = option_field("deterministic")
    iterations_per_loop: int = option_field("iterations_per_loop")
    op_execute_timeout: int | None = option_field("op_execute_timeout")
    op_wait_timeout: int = option_field("op_wait_timeout")
    stream_sync_timeout: int = option_field("stream_sync_timeout")
    event_sync_timeout: int = option_field("event_sync_timeout")
    distribute: object = option_field("distribute")
    memory_config: object = option_field("memory_config")
    external_weight: bool = option_field("external_weight")
    ac_parallel_enable: str = option_field("ac_parallel_enable")
    compile_dynamic_mode: bool = option_field("compile_dynamic_mode")
    mix_compile_mode: bool = option_field("mix_compile_mode")
    enable_exception_dump: int = option_field("enable_exception_dump")
    enable_reduce_precision: bool | None = option_field("enable_reduce_precision")
    dump_config: object = option_field("dump_config")
    quant_dumpable: str = option_field("quant_dumpable")
    hcom_parallel: bool | None = option_field("hcom_parallel")
    enable_scope_fusion_passes: str | None = option_field("enable_scope_fusion_passes")
    is_tailing_optimization: bool = option_field("is_tailing_optimization")
    enable_small_channel: int | None = option_field("enable_small_channel")
    variable_placement: str = option_field("variable_placement")
    graph_max_parallel_model_num: int = option_field("graph_max_parallel_model_num")
    profiling_config: object = option_field("profiling_config")
    aoe_mode: str | None = option_field("aoe_mode")
    work_path: str | None = option_field("work_path")
    aoe_config_file: str | None = option_field("aoe_config_file")
    local_rank_id: int | None = option_field("local_rank_id")
    local_device_list: str | None = option_field("local_device_list")
    hccl_timeout: int = option_field("hccl_timeout")
    experimental_config: object = option_field("experimental_config")
    jit_compile: str = option_field("jit_compile")
    enable_data_pre_proc: bool = option_field("enable_data_pre_proc")
    variable_format_optimize: bool | None = option_field("variable_format_optimize")
    dynamic_input: bool = option_field("dynamic_input")
    dynamic_graph_execute_mode: str | None = option_field("dynamic_graph_execute_mode")
    dynamic_inputs_shape_range: str | None = option_field("dynamic_inputs_shape_range")
    graph_memory_max_size: str | None = option_field("graph_memory_max_size")
    variable_memory_max_size: str | None = option_field("variable_memory_max_size")

    def __post_init__(self) -> None:
        check_fields(self)
        self._check_dump()
        self._check_together()
        given = self.given()
        warn_no_effect(given, RUN)
        if any(name in COMPILE for name in given):  # the ATC options checked now, not at the first compile
            CompileOptions(**self.compile_flags())

    def given(self) -> dict[str, object]:
        """The options that differ from their defaults."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) != f.default}

    def _check_together(self) -> None:
        """NPURunConfig's rules between options (its documentation's "must", "cannot" and "needs")."""
        if self.iterations_per_loop > 1 and self.mix_compile_mode:
            raise OptionError(f"iterations_per_loop {self.iterations_per_loop} needs mix_compile_mode off; in mixed computing it must be 1")
        if self.variable_placement == "Host" and not self.mix_compile_mode:
            raise OptionError("variable_placement 'Host' needs mix_compile_mode=True; use 'Device' otherwise")
        if self.local_device_list is not None and self.local_rank_id is None:
            raise OptionError("local_device_list needs local_rank_id, the rank of the main process")
        if self.graph_run_mode == 0 and self.enable_small_channel == 0:
            raise OptionError("enable_small_channel 0 is not allowed with graph_run_mode=0: online inference fixes it at 1")
        if self.precision_mode == "force_fp16" and self.graph_run_mode == 1:
            raise OptionError("precision_mode 'force_fp16' applies only to online inference; set graph_run_mode=0 or use another precision_mode")
        for name in ("dynamic_graph_execute_mode", "dynamic_inputs_shape_range"):
            if getattr(self, name) is not None and not self.dynamic_input:
                raise OptionError(f"{name} needs dynamic_input=True")
        if self.compile_dynamic_mode and self.dynamic_inputs_shape_range is not None:
            raise OptionError("compile_dynamic_mode generalises every input dim to -1 (unbounded); it cannot be used with dynamic_inputs_shape_range, which bounds them: keep one")
        for name in ("stream_sync_timeout", "event_sync_timeout"):
            if getattr(self, name) == 0:
                raise OptionError(f"{name} 0 is not allowed; use -1 (no limit) or a number of milliseconds >= 1")

    def compile_flags(self) -> dict[str, object]:
        """The ATC options this config gives Session.compile, with graph_run_mode's defaults
        (CANN: force_fp16 only for online inference, allow_fp32_to_fp16 for training;
        enable_small_channel fixed at 1 for online inference)."""
        flags = {name: value for name, value in self.given().items() if name in COMPILE}
        if self.graph_run_mode == 0:
            flags["enable_small_channel"] = 1  # online inference fixes it at 1
        if self.precision_mode is None and self.precision_mode_v2 is None:
            flags["precision_mode"] = DEFAULT_PRECISION_MODE if self.graph_run_mode == 0 else TRAINING_PRECISION_MODE
        if self.dynamic_input and self.dynamic_inputs_shape_range is not None:
            flags["shape_range"] = self.dynamic_inputs_shape_range
        if self.compile_dynamic_mode:
            flags["generalise_inputs"] = True
        return flags

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
        return cls(**flags)


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
