"""The one option table: every CANN option this engine accepts, defined once.

An `Option` holds what ATC's and NPURunConfig's documentation say of an option:
its name (spelled as CANN spells it), type, allowed values, default and a one-line
doc, plus which commands take it (`atc` for compile options, `run` for run options)
and, for an option accepted only so that CANN command lines keep working, why it
does nothing here. From the table derive:

- `CompileOptions` (the ATC flags of a compile) and the pass options of the same
  names (`option_field`): a pass's `soc_version` or `precision_mode` has the
  table's type, default and doc, and is checked by the table (`check_fields`);
- `RunConfig` in `ge.sim.config` (the run options);
- the help of `ge atc`, `ge optimize`, `ge precision-report` and `ge run`
  (`help_lines`), and the parsing of `--name=value` flags (`Option.parse`).

Checks that involve more than one value (precision_mode against
precision_mode_v2, optypelist_for_implmode against op_select_implmode) and files
that must be read live beside the options they concern (`ge.core.precision_files`,
`ge.core.soc`). The module imports neither numpy nor xDSL, so that command-line
help and flag parsing stay fast.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from typing import Any

from typing import TYPE_CHECKING

from ge.core import gear_options, soc
from ge.core.errors import OptionError
from ge.core.gear_options import INPUT_FORMATS

if TYPE_CHECKING:
    from ge.core.precision_files import PrecisionSettings

log = logging.getLogger("ge")

ATC = "atc"
RUN = "run"
TRUE_WORDS = ("true", "1")
FALSE_WORDS = ("false", "0")


@dataclass(frozen=True)
class Option:
    """One option as CANN documents it."""

    name: str
    type: type
    default: object
    doc: str
    choices: tuple[object, ...] = ()
    tools: tuple[str, ...] = (ATC,)
    no_effect: str | None = None
    """Why the option does nothing in this engine; None when it does what CANN says."""
    minimum: int | None = None
    maximum: int | None = None
    deprecated: tuple[str, ...] = ()
    """The commands whose documentation marks the option as going away."""

    @property
    def allowed(self) -> str:
        """What the option accepts, in words."""
        if self.choices:
            return "one of " + ", ".join(str(c) for c in self.choices)
        if self.type is bool:
            return "true or false"
        if self.type is object:
            return "any object"
        if self.type is int:
            low = "" if self.minimum is None else f" >= {self.minimum}"
            high = "" if self.maximum is None else f" and <= {self.maximum}"
            return f"an integer{low}{high}"
        return "a string"

    def parse(self, text: str) -> object:
        """The value of `--name=text` on a command line, checked."""
        if self.type is int:
            try:
                value: object = int(text)
            except ValueError:
                raise OptionError(f"--{self.name}={text}: not an integer; use {self.allowed}") from None
        elif self.type is bool:
            if text.lower() not in TRUE_WORDS + FALSE_WORDS:
                raise OptionError(f"--{self.name}={text}: use true or false")
            value = text.lower() in TRUE_WORDS
        else:
            value = text
        self.check(value)
        return value

    def check(self, value: object) -> None:
        """Refuse a value of the wrong type or outside the allowed ones, naming both."""
        if value is None and self.default is None:
            return
        wrong_type = not isinstance(value, self.type) or (self.type is int and isinstance(value, bool))
        out_of_range = not wrong_type and self.type is int and (
            (self.minimum is not None and value < self.minimum) or (self.maximum is not None and value > self.maximum)  # type: ignore[operator]
        )
        if wrong_type or out_of_range or (self.choices and value not in self.choices):
            raise OptionError(f"{self.name} {value!r} is not allowed; use {self.allowed}")


PRECISION_MODES = (
    "force_fp16",
    "allow_fp32_to_fp16",
    "cube_fp16in_fp32out",
    "force_fp32",
    "must_keep_origin_dtype",
    "allow_mix_precision",
    "allow_mix_precision_fp16",
    "allow_mix_precision_bf16",
    "allow_fp32_to_bf16",
    "force_lowerprecision",
)
PRECISION_MODES_V2: dict[str, str] = {
    "fp16": "force_fp16",
    "origin": "must_keep_origin_dtype",
    "cube_fp16in_fp32out": "cube_fp16in_fp32out",
    "mixed_float16": "allow_mix_precision_fp16",
    "mixed_bfloat16": "allow_mix_precision_bf16",
}
"""Each precision_mode_v2 value and the precision_mode policy it selects."""
DEFAULT_PRECISION_MODE = "force_fp16"
TRAINING_PRECISION_MODE = "allow_fp32_to_fp16"
"""NPURunConfig's precision default for training (graph_run_mode=1): force_fp16 is for
online inference only."""
OP_SELECT_IMPLMODES = ("high_precision", "high_performance", "high_precision_for_all", "high_performance_for_all")
DEFAULT_OP_SELECT_IMPLMODE = "high_performance"

BUFFER_OPTIMIZE = ("l2_optimize", "l1_optimize", "off_optimize")
CACHE_MODES = ("enable", "force", "disable")
NOT_RECORDED = ("op_compiler_cache_mode", "op_compiler_cache_dir", "debug_dir")
"""Options that change how a compile runs, not what it makes: a model does not record
them, so a model compiled with and without the kernel cache is the same file."""

DUMP_MODES = ("input", "output", "all")
DUMP_DEBUG_MODES = ("aicore_overflow", "atomic_overflow", "all")
DEVICES = 8
"""Simulated devices per host (session_device_id 0-7), each a whole chip, as the eight
NPUs of an Atlas 800 server."""
DUMP_STEP_RANGES = 100
"""CANN's limit on the '|'-separated iterations and ranges of dump_step."""

OPTIONS: tuple[Option, ...] = (
    # ---- compile (ATC)
    Option("soc_version", str, "Ascend310P3", "The SoC to compile for (a profile in ge/core/soc/).", choices=soc.names()),
    Option("input_shape", str, None, "Input shapes 'name:1,3,224,224;name2:...' (-1 or lo~hi: a dynamic dim); without a gear option, a dynamic dim makes a fully dynamic build (tiled on the host at run time, shapes checked against the ranges)."),
    Option("dynamic_batch_size", str, None, "Multi-gear batch sizes '1,8,16' (2 to 100): one static build per batch, dim 0 the only -1 of input_shape (or of the model's inputs); excludes dynamic_image_size and dynamic_dims."),
    Option("dynamic_image_size", str, None, "Multi-gear image sizes 'H,W;H,W' (2 to 100): one static build per size, H and W the only -1 dims of input_shape (or of the model's inputs); excludes dynamic_batch_size and dynamic_dims."),
    Option("dynamic_dims", str, None, "Multi-gear ND dims 'd,d;d,d' (2 to 100 gears, one value per -1 of input_shape in its order, else of the model's dynamic dims); needs input_format ND; excludes dynamic_batch_size and dynamic_image_size."),
    Option("dynamic_fallback", int, 0, "Hybrid build (not a CANN option): 1 with a gear option also compiles a fully dynamic graph, run when the inputs match no gear, its ranges those of input_shape (-1 or lo~hi on the gear dims).", choices=(0, 1)),
    Option("input_format", str, None, "The layout of the model's inputs (default NCHW for 4-D inputs, else ND): where dynamic_image_size finds H and W.", choices=INPUT_FORMATS),
    Option("fusion_switch_file", str, None, "A GE fusion switch file (JSON or 'Pass:off' lines) closing or opening fusion passes.", tools=(ATC, RUN)),
    Option("export_compile_stat", int, 1, "fusion_result.json: 0 never, 1 at the normal end of the compile, 2 right after the graph is optimised.", choices=(0, 1, 2), tools=(ATC, RUN)),
    Option("disable_reuse_memory", int, 0, "1 gives every feature-map tensor its own memory (to rule out a reuse bug); 0 reuses memory by lifetime.", choices=(0, 1)),
    Option("enable_single_stream", bool, False, "true runs every task on one stream; false runs independent branches on parallel streams."),
    Option("stream_max_parallel_num", str, None, "'AIcoreEngine:N,DNN_VM_AICPU:M': at most N parallel AI Core streams (default 4), at most M AI CPU tasks at once (default and most: the SoC's AI CPU cores).", tools=(ATC, RUN)),
    Option("precision_mode", str, None, "The precision policy (default force_fp16); excludes precision_mode_v2.", choices=PRECISION_MODES, tools=(ATC, RUN)),
    Option("precision_mode_v2", str, None, "The precision policy, v2 names; excludes precision_mode.", choices=tuple(PRECISION_MODES_V2), tools=(ATC, RUN)),
    Option("modify_mixlist", str, None, "A JSON file moving op types between the mixed-precision black, white and gray lists.", tools=(ATC, RUN)),
    Option("keep_dtype", str, None, "A file of node names and 'OpType::Type' lines that keep their original dtype."),
    Option("customize_dtypes", str, None, "A file of 'Name::InputDtype:...,OutputDtype:...' (or 'OpType::Type:...') dtype choices.", tools=(ATC, RUN)),
    Option("op_precision_mode", str, None, "An ini of implementation modes by op type ([ByOpType]) and node name ([ByNodeName]).", tools=(ATC, RUN)),
    Option("op_select_implmode", str, None, "The operators' implementation mode (default high_performance).", choices=OP_SELECT_IMPLMODES, tools=(ATC, RUN), deprecated=(RUN,)),
    Option("optypelist_for_implmode", str, None, "Op types (comma-separated) that op_select_implmode applies to.", tools=(ATC, RUN), deprecated=(RUN,)),
    Option("virtual_type", int, 0, "1 builds for virtual instances (vNPU slices of the chip): every kernel's block_dim a multiple of the least common multiple of the SoC's slice sizes, soft-sync ops on one core, no vector-core attachment; 0 builds for the whole chip.", choices=(0, 1)),
    Option("buffer_optimize", str, "l2_optimize", "Buffer optimisation: l2_optimize, l1_optimize (L1 fusion) or off_optimize; l1_optimize excludes virtual_type=1.", choices=BUFFER_OPTIMIZE, no_effect="l2_optimize and off_optimize differ in how GE lays a graph's data out for L2, and this compile lays out nothing for it (whatever L2 the simulator has, it uses alike); l1_optimize's L1 fusion (a chain of cube ops' intermediate tiles kept in L1) is not built: UB fusion scopes are the only kernel fusion", tools=(ATC, RUN)),
    Option("host_env_os", str, None, "The host's operating system.", no_effect="the model runs on the simulator, whatever the host's operating system"),
    Option("host_env_cpu", str, None, "The host's CPU architecture.", no_effect="the model runs on the simulator, whatever the host's CPU architecture"),
    Option("op_compiler_cache_mode", str, "disable", "The compile cache (kernels, and whole builds of an ONNX file): enable reads and fills it, force rebuilds everything and rewrites its entries, disable (the default here, unlike CANN: a whole build's entry is a copy of its .om, hundreds of MB for a large model) neither reads nor writes.", choices=CACHE_MODES, tools=(ATC, RUN)),
    Option("op_compiler_cache_dir", str, None, "The kernel compile cache's directory (entries in its kernel_cache/; default $ASCEND_CACHE_PATH, else $HOME/atc_data).", tools=(ATC, RUN)),
    Option("debug_dir", str, None, "Where kernel_meta goes (op_debug_level 1, 2, 4; dump_cce, dump_loc): debug_dir, else $ASCEND_WORK_PATH, else the current directory.", tools=(ATC, RUN)),
    Option("op_debug_level", int, None, "Operator debug (0-4): 1, 2 and 4 write every kernel's program (IR and per-pipe listing) to kernel_meta; 2's -O0 -g and 3's kept .o/.json have no binaries to act on; non-zero turns the kernel compile cache off.", choices=(0, 1, 2, 3, 4), tools=(ATC, RUN), deprecated=(RUN,)),
    Option("op_debug_config", str, None, "A file of 'op_debug_config=oom,dump_cce,...' and 'op_debug_list=Name,OpType::Type' lines: oom makes the simulator refuse a listed kernel writing GM past its arguments, dump_cce and dump_loc write the listed kernels' programs to kernel_meta, ccec_O0, ccec_g and check_flag are accepted without effect (no C compiler); the compile cache is off without op_debug_list, else the listed ops' kernels are rebuilt.", tools=(ATC, RUN)),
    Option("status_check", int, None, "Overflow checks in the operators.", no_effect="there is no operator binary to instrument with overflow checks"),
    # ---- run (NPURunConfig, and the simulator's own)
    Option("input_fusion_size", int, 131072, "Graph inputs of at most this many bytes go to the device in one fused copy (0: none).", tools=(RUN,), minimum=0, maximum=33554432),
    Option("aicore_num", int, None, "AI cores to run on (default: all of the SoC's).", tools=(RUN,), minimum=1),
    Option("timing_only", bool, False, "Time the model without computing its values (the outputs stay empty).", tools=(RUN,)),
    Option("profile_level", str, "task", "What the trace shows: task (streams and cores) or pipe (also every core's pipes).", choices=("task", "pipe"), tools=(RUN,)),
    Option("l2_cache", bool, True, "Simulate the chip's L2 cache: kernels' reads of what an earlier kernel wrote or read, and their re-reads of tiles, come from L2 while it holds them (false: every read from GM, for comparison).", tools=(RUN,)),
    # ---- dump and overflow
    Option("enable_dump", bool, False, "Dump kernel tasks' tensors as .npy to dump_path/<step>/ with a manifest.json (needs dump_path and numerics).", tools=(RUN,)),
    Option("dump_path", str, None, "Where dumps go (a directory, made if missing); required by enable_dump, and by enable_dump_debug without dump_debug_path.", tools=(RUN,)),
    Option("dump_step", str, None, "The iterations to dump, e.g. '0|5|10-20' (a session's runs of a model count 0, 1, ...; default all).", tools=(RUN,)),
    Option("dump_mode", str, "output", "Which tensors of a kernel task are dumped.", choices=DUMP_MODES, tools=(RUN,)),
    Option("dump_layer", str, None, "The ops to dump, node names separated by spaces (default all); a fused kernel is dumped when one of its ops is named.", tools=(RUN,)),
    Option("enable_dump_debug", bool, False, "Overflow detection: kernel tasks whose finite inputs gave inf or NaN outputs are dumped to dump_debug_path with a manifest.json.", tools=(RUN,)),
    Option("dump_debug_path", str, None, "Where overflow dumps go (default dump_path).", tools=(RUN,)),
    Option("dump_debug_mode", str, "all", "Which overflows are detected: aicore_overflow (AI Core kernels), atomic_overflow (atomic accumulations, which the simulator has none of) or all.", choices=DUMP_DEBUG_MODES, tools=(RUN,)),
    # ---- NPURunConfig
    Option("graph_run_mode", int, 1, "0 online inference, 1 training: Session.compile's precision default is force_fp16 for 0, allow_fp32_to_fp16 for 1.", choices=(0, 1), tools=(RUN,)),
    Option("session_device_id", int, None, f"The simulated device the session runs on, one of {DEVICES} per host, each a whole chip (default $ASCEND_DEVICE_ID, else 0).", tools=(RUN,), minimum=0, maximum=DEVICES - 1),
    Option("deterministic", int, 0, "1 asks for bitwise-repeatable results; the simulator's are always so (no kernel accumulates in arrival order), so 1 costs nothing.", choices=(0, 1), tools=(RUN,)),
    Option("iterations_per_loop", int, 1, "Iterations per Session.run, back to back on the device, the host's launch and synchronisation paid once.", tools=(RUN,), minimum=1),
    Option("op_execute_timeout", int, None, "Seconds (simulated) a kernel task may run before the run fails with a timeout.", tools=(RUN,), minimum=1),
    Option("op_wait_timeout", int, 120, "Seconds (simulated) an EVENT_WAIT task may wait for its record before the run fails (0: forever).", tools=(RUN,), minimum=0),
    Option("stream_sync_timeout", int, -1, "Milliseconds (simulated) the host waits for the model's end before the run fails (-1: forever).", tools=(RUN,), minimum=-1),
    Option("event_sync_timeout", int, -1, "Milliseconds (simulated) an event may be waited for before the run fails (-1: forever); the host syncs only on the stream, so it bounds the device's event waits.", tools=(RUN,), minimum=-1),
    Option("distribute", object, None, "A ParameterServerStrategy.", tools=(RUN,), no_effect="one simulated device, no parameter servers"),
    Option("memory_config", object, None, "A MemoryConfig.", tools=(RUN,), no_effect="device memory is the model's plan, laid out at load"),
    Option("external_weight", bool, False, "Session.compile writes each Const's weight once to $ASCEND_WORK_PATH (else .)/tmp_weight_<pid>_<sessionid>/weight_<hash>, shared by the session's models and removed when it closes.", tools=(RUN,)),
    Option("ac_parallel_enable", str, "0", "AI CPU and AI Core ops in parallel in dynamic-shape graphs.", choices=("0", "1"), tools=(RUN,), no_effect="a dynamic-shape run takes the streams of the build of its shapes, on which AI CPU and AI Core tasks on different streams already run in parallel (as with 1)"),
    Option("compile_dynamic_mode", bool, False, "Generalise every input dim to -1: a fully dynamic build, unbounded ranges.", tools=(RUN,)),
    Option("mix_compile_mode", bool, False, "Mixed computing: ops the AI Core cannot run (the AI CPU engine's) run in the host framework instead, timed with the stream sync, PCIe copies out and back and the graph's relaunch.", tools=(RUN,)),
    Option("enable_exception_dump", int, 2, "Dump a failing kernel's arguments (.npy) and tiling (JSON): 1 to the current directory, 2 to extra-info/data-dump/<device id> under $ASCEND_WORK_PATH or the current directory, $NPU_COLLECT_PATH over both; 0 off.", choices=(0, 1, 2), tools=(RUN,)),
    Option("enable_reduce_precision", bool, None, "Not supported by CANN either.", tools=(RUN,), no_effect="CANN documents it as not supported"),
    Option("dump_config", object, None, "A DumpConfig.", tools=(RUN,), no_effect="the dump options are RunConfig's own (enable_dump, dump_path, ...)"),
    Option("quant_dumpable", str, "0", "Dump before AMCT quantisation.", choices=("0", "1"), tools=(RUN,), no_effect="no AMCT-quantised graphs are imported"),
    Option("hcom_parallel", bool, None, "AllReduce in parallel with the backward pass.", tools=(RUN,), no_effect="one device, no collective communication"),
    Option("enable_scope_fusion_passes", str, None, "Non-general fusion passes to run, names joined by ',': a pass written for specific networks (a plug-in's, general = False) runs only when named; general passes (every built-in one) always run.", tools=(ATC, RUN)),
    Option("is_tailing_optimization", bool, False, "Overlap the last AllReduce with computation.", tools=(RUN,), no_effect="one device, no AllReduce"),
    Option("enable_small_channel", int, None, "Small-channel convolution (C <= 4 input channels, e.g. the RGB first layer): 1 packs kh*kw cells of 4 channels into the cube's K (NC1HWC0_C04) instead of padding each to C0. Default 0; in a session, 1 and fixed for graph_run_mode=0.", choices=(0, 1), tools=(ATC, RUN)),
    Option("variable_placement", str, "Device", "Where variables live (Host needs mix_compile_mode).", choices=("Device", "Host"), tools=(RUN,), no_effect="the models hold no variables; weights stay in device memory"),
    Option("graph_max_parallel_model_num", int, 1, "Threads running graphs in parallel: the size of a session's pool (Session.submit, Session.run_all); runs of one model take turns.", tools=(RUN,), minimum=1, maximum=2147483647),
    Option("profiling_config", object, None, "A ProfilingConfig.", tools=(RUN,), no_effect="every run has its profile (Result.profile)"),
    Option("aoe_mode", str, None, "AOE tuning mode.", choices=("1", "2", "4"), tools=(RUN,), no_effect="there is no AOE tuning"),
    Option("work_path", str, None, "AOE's working directory.", tools=(RUN,), no_effect="there is no AOE tuning"),
    Option("aoe_config_file", str, None, "The ops AOE tunes.", tools=(RUN,), no_effect="there is no AOE tuning"),
    Option("local_rank_id", int, None, "This process's rank for data preprocessing.", tools=(RUN,), minimum=0, no_effect="one process on one device; no data is distributed"),
    Option("local_device_list", str, None, "Devices the main process feeds (needs local_rank_id).", tools=(RUN,), no_effect="one process on one device; no data is distributed"),
    Option("hccl_timeout", int, 1836, "Collective communication timeout, seconds.", tools=(RUN,), minimum=1, maximum=17340, no_effect="one device, no collective communication"),
    Option("experimental_config", object, None, "An ExperimentalConfig.", tools=(RUN,), no_effect="no experimental options are modelled"),
    Option("jit_compile", str, "auto", "Compile ops online or use prebuilt binaries.", choices=("auto", "true", "false"), tools=(RUN,), no_effect="every kernel is built for the graph's static shapes, as true (and auto, for static shapes) does in CANN; false selects the operator package's prebuilt shape-generalised binaries, and there are none here (reusing built kernels is op_compiler_cache_mode's)"),
    Option("enable_data_pre_proc", bool, True, "GetNext offload.", tools=(RUN,), deprecated=(RUN,), no_effect="there is no dataset pipeline; inputs are given to Session.run"),
    Option("variable_format_optimize", bool, None, "Variable format optimisation.", tools=(RUN,), deprecated=(RUN,), no_effect="the models hold no variables"),
    Option("dynamic_input", bool, False, "Dynamic inputs: a fully dynamic build, its ranges dynamic_inputs_shape_range's (else the model's dynamic dims, unbounded).", tools=(RUN,), deprecated=(RUN,)),
    Option("dynamic_graph_execute_mode", str, None, "How dynamic inputs run (needs dynamic_input): dynamic_execute, a graph compiled for the shape ranges.", choices=("dynamic_execute",), tools=(RUN,), deprecated=(RUN,)),
    Option("dynamic_inputs_shape_range", str, None, "Shape ranges of the graph inputs in order, 'data:[1~8,128],[1~8]' (needs dynamic_input).", tools=(RUN,), deprecated=(RUN,)),
    Option("graph_memory_max_size", str, None, "Static and dynamic memory sizes.", tools=(RUN,), deprecated=(RUN,), no_effect="CANN ignores it too: memory follows the network's needs"),
    Option("variable_memory_max_size", str, None, "Variable memory size.", tools=(RUN,), deprecated=(RUN,), no_effect="CANN ignores it too: memory follows the network's needs"),
)

OPTION: dict[str, Option] = {o.name: o for o in OPTIONS}
DEFAULT_SOC_VERSION: str = OPTION["soc_version"].default  # type: ignore[assignment]


def option_field(name: str) -> Any:
    """A dataclass field for option `name`: the table's default, its doc as metadata."""
    option = OPTION[name]
    return dataclasses.field(default=option.default, metadata={"option": option})


def check_fields(obj: object) -> None:
    """Check every field of a dataclass (options, a pass) that is an option of the table."""
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        if f.name in OPTION:
            OPTION[f.name].check(getattr(obj, f.name))


def options_of(tool: str) -> tuple[Option, ...]:
    return tuple(o for o in OPTIONS if tool in o.tools)


def help_lines(tool: str) -> list[str]:
    """One line per option of a command, from the table: name, doc, and no-effect notes."""
    lines = []
    for o in options_of(tool):
        default = "" if o.default is None else f" [default: {str(o.default).lower() if o.type is bool else o.default}]"
        note = f" (accepted, no effect here: {o.no_effect})" if o.no_effect else ""
        gone = " (deprecated in CANN)" if tool in o.deprecated else ""
        lines.append(f"--{o.name}: {o.doc}{default}{note}{gone}")
    return lines


def warn_no_effect(flags: dict[str, object], tool: str = ATC) -> dict[str, object]:
    """The flags without those that do nothing here, each of which is warned about once;
    a flag `tool` marks as going away is warned about too."""
    kept = {}
    for name, value in flags.items():
        option = OPTION.get(name)
        if option is not None and tool in option.deprecated:
            log.warning("--%s is deprecated in CANN and will be removed", name)
        if option is not None and option.no_effect:
            log.warning("--%s has no effect: %s", name, option.no_effect)
        else:
            kept[name] = value
    return kept


# ------------------------------------------------------------------ compile options

AICORE_ENGINE = "AIcoreEngine"
AICPU_ENGINE = "DNN_VM_AICPU"
"""GE's engine names: stream_max_parallel_num keys, and `_engine` on an op (the same
string as `dialects.kernel_boundary.AICPU_ENGINE`: this module imports no xDSL)."""
DEFAULT_AICORE_STREAMS = 4
"""AI Core streams when stream_max_parallel_num does not say: GE spreads independent
branches over streams by default; four covers the branches of ResNet and BERT."""


def parse_stream_max_parallel_num(value: str) -> dict[str, int]:
    """`AIcoreEngine:4,DNN_VM_AICPU:10` -> {engine: count}: the AI Core's parallel streams,
    the AI CPU tasks that may run at once."""
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
    """The ATC flags of one compile (see `OPTIONS` for each one's meaning)."""

    input_shape: str | None = option_field("input_shape")
    dynamic_batch_size: str | None = option_field("dynamic_batch_size")
    dynamic_image_size: str | None = option_field("dynamic_image_size")
    dynamic_dims: str | None = option_field("dynamic_dims")
    input_format: str | None = option_field("input_format")
    dynamic_fallback: int = option_field("dynamic_fallback")
    shape_range: str | None = None
    """NPURunConfig's dynamic_inputs_shape_range (not an ATC flag): the ranges of a fully dynamic build."""
    generalise_inputs: bool = False
    """NPURunConfig's compile_dynamic_mode (not an ATC flag): every input dim -1, a fully dynamic build."""
    fusion_switch_file: str | None = option_field("fusion_switch_file")
    enable_scope_fusion_passes: str | None = option_field("enable_scope_fusion_passes")
    export_compile_stat: int = option_field("export_compile_stat")
    soc_version: str = option_field("soc_version")
    disable_reuse_memory: int = option_field("disable_reuse_memory")
    enable_single_stream: bool = option_field("enable_single_stream")
    stream_max_parallel_num: str | None = option_field("stream_max_parallel_num")
    precision_mode: str | None = option_field("precision_mode")
    precision_mode_v2: str | None = option_field("precision_mode_v2")
    modify_mixlist: str | None = option_field("modify_mixlist")
    keep_dtype: str | None = option_field("keep_dtype")
    customize_dtypes: str | None = option_field("customize_dtypes")
    op_precision_mode: str | None = option_field("op_precision_mode")
    op_select_implmode: str | None = option_field("op_select_implmode")
    optypelist_for_implmode: str | None = option_field("optypelist_for_implmode")
    virtual_type: int = option_field("virtual_type")
    enable_small_channel: int | None = option_field("enable_small_channel")
    op_compiler_cache_mode: str = option_field("op_compiler_cache_mode")
    op_compiler_cache_dir: str | None = option_field("op_compiler_cache_dir")
    op_debug_level: int | None = option_field("op_debug_level")
    op_debug_config: str | None = option_field("op_debug_config")
    debug_dir: str | None = option_field("debug_dir")
    session_id: int = 0
    """GE's session id (not an ATC flag): names fusion_result.json's session."""
    graph_id: int = 0
    """GE's graph id (not an ATC flag): names dumps and fusion_result.json's graph."""

    def __post_init__(self) -> None:
        check_fields(self)
        gear_options.check(dataclasses.asdict(self))
        if self.dynamic_fallback and gear_options.gear_option(dataclasses.asdict(self)) is None:
            raise OptionError(
                "dynamic_fallback=1 adds a fully dynamic graph to a multi-gear build; give a gear option too "
                "(" + ", ".join(f"--{n}" for n in gear_options.GEAR_OPTIONS) + "), or leave it 0"
            )
        if self.fusion_switch_file is not None and not os.path.isfile(self.fusion_switch_file):
            raise OptionError(f"fusion_switch_file '{self.fusion_switch_file}' does not exist or is not a file")
        if self.stream_max_parallel_num is not None:
            parse_stream_max_parallel_num(self.stream_max_parallel_num)
        if self.virtual_type == 1 and not soc.load(self.soc_version).virtual_aicore_nums:
            supported = [name for name in soc.names() if soc.load(name).virtual_aicore_nums]
            raise OptionError(
                f"virtual_type=1: {self.soc_version} has no virtual instances; they exist on {', '.join(supported)}"
            )
        if self.op_debug_config is not None:
            from ge.core.kernel_cache import read_debug_config

            debug = read_debug_config(self.op_debug_config).options
            if "oom" in debug and "ccec_O0" in debug:
                raise OptionError(f"op_debug_config '{self.op_debug_config}': ccec_O0 and oom cannot be enabled at the same time; keep one")
            if "oom" in debug and self.op_debug_level == 2:
                raise OptionError(f"op_debug_level=2 (the CCE compiler's -O0 -g) cannot be used with oom in op_debug_config '{self.op_debug_config}'; use op_debug_level 1, 3 or 4")
        self.precision_settings()

    def precision_settings(self) -> PrecisionSettings:
        """The precision options checked together and their files read."""
        from ge.core import precision_files

        return precision_files.settings_of(self)

    @property
    def aicore_streams(self) -> int:
        """The most AI Core streams the build may use."""
        if self.enable_single_stream:
            return 1
        if self.stream_max_parallel_num is None:
            return DEFAULT_AICORE_STREAMS
        return parse_stream_max_parallel_num(self.stream_max_parallel_num).get(AICORE_ENGINE, DEFAULT_AICORE_STREAMS)

    @property
    def aicpu_parallel(self) -> int | None:
        """The AI CPU tasks that may run at once, if stream_max_parallel_num says (the
        build caps it at the SoC's AI CPU cores)."""
        if self.stream_max_parallel_num is None:
            return None
        return parse_stream_max_parallel_num(self.stream_max_parallel_num).get(AICPU_ENGINE)

    @classmethod
    def from_flags(cls, **flags: Any) -> CompileOptions:
        """Options from ATC-named flags: an unknown name lists the known ones, an option
        without effect here is warned about and dropped."""
        known = {f.name for f in dataclasses.fields(cls)}
        for name in flags:
            if name not in known and not (name in OPTION and OPTION[name].no_effect and ATC in OPTION[name].tools):
                names = sorted(o.name for o in options_of(ATC))
                raise OptionError(f"unknown option '{name}'; known options: {', '.join(names)}")
        if flags.get("buffer_optimize") == "l1_optimize" and flags.get("virtual_type") == 1:
            raise OptionError(
                "buffer_optimize=l1_optimize cannot be used with virtual_type=1: L1 fusion is not performed "
                "in virtualization scenarios; use l2_optimize or off_optimize"
            )
        return cls(**warn_no_effect(flags))

    def given(self) -> dict[str, object]:
        """The options that differ from their defaults, and the SoC, as a model records them."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if (getattr(self, f.name) != f.default or f.name == "soc_version") and f.name not in NOT_RECORDED
        }
