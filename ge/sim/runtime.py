"""The runtime: a `.om` model on a simulated device, run task by task.

Loading makes device memory one byte buffer (numpy uint8) of the memory plan's
size, the weight blob at the weight region's base. A run then:

1. checks the inputs against the model's (names, dtypes, logical shapes) and lays
   each out in its format;
2. executes the task list (an `Execution`, a task at a time, so that several models
   can interleave on one chip). Each stream runs its tasks in list order; of the
   streams that can go on, the one whose next task is ready first goes next (ties:
   the lower stream), so tasks start in time order and the cores, the GM
   bandwidth (a `timing.GmLedger` per run, or per chip) and the L2 cache (`ge.sim.l2`,
   unless the run config's l2_cache is off) go first come, first served:
   - MEMCPY_ASYNC H2D copies a graph input into its buffer. Inputs of at most
     `input_fusion_size` bytes go in one fused copy, the first of their tasks
     moving them all (one latency for them all) and the others costing nothing;
   - KERNEL reads its inputs through its argument addresses when it starts,
     computes (`ge.sim.kernels`), and writes its outputs when its last block ends;
     its blocks run on the cores (`ge.sim.timing`), its GM reads that L2 serves
     through the L2's bandwidth, the rest and its writes through GM's;
   - KERNEL_EX (an AI CPU kernel) computes the same way and runs on one AI CPU core
     (`aicpu_cycles`: the SoC's AI CPU launch, then its arguments' bytes and elements
     at one core's rates), of the `aicpu_parallel` the model allows at once (at most
     the run's AI CPU cores: a slice of the chip, with aicore_num or on a virtual
     instance, has its share of them, as of the vector cores). With mix_compile_mode
     (mixed computing), the host framework runs it instead, one such op at a time
     (`timing.host_op_us`: the stream synchronised, its inputs copied to the host
     and its outputs back over PCIe, the device graph launched again);
   - EVENT_RECORD marks its event; EVENT_WAIT holds its stream until the event is
     recorded, and consumes the record. As on the device, an event id is one flag:
     a wait takes whichever record of its id is pending, so a task list that lets
     a later wait run before an earlier one of the same id pairs them wrongly (and
     `ge.backend.verify`, which pairs them in list order, cannot see it);
   - MEMCPY_ASYNC D2H copies a graph output out of its buffer (an output of
     data-dependent shape: as much of its upper-bound buffer as the shape its AI
     CPU kernel reported holds);
   - MEMCPY_ASYNC_D2D copies one device tensor into another (control flow's results);
   - LABEL_SET marks a place in its stream's list; LABEL_GOTO goes on at a label's
     place, LABEL_SWITCH_BY_INDEX at `labels[i]`, i the integer its index tensor
     holds once the task before it has ended (If, Loop: a loop's body tasks run, and
     are profiled, once per iteration; a multi-gear model's Case: the gear's). Without
     numerics there is no index to read: a switch takes `labels[0]` (an If's else
     branch; a Loop's exit), except the Case's, which takes the gear the host filled in;
   - STREAM_ACTIVE starts the streams it names, which wait until one does (the other
     streams of a Case's gear: a gear not taken leaves its streams asleep);
   - MODEL_END_GRAPH ends the model (its stream runs nothing after it).

A multi-gear model runs as one of its gears (`Model.gear`): the host maps the
inputs' shapes to the gear (`ge.session`), and the runtime fills the gear-index
input (`ge.om.gears.GEAR_INDEX`) with the gear's index; the copy of that input, the
switch and the label tasks are charged like any task.
3. returns the outputs in their logical layout, with every task's times.

The run's timeouts are in simulated time (`Timeouts`): a KERNEL task running longer
than op_execute_timeout, an EVENT_WAIT held longer than op_wait_timeout or
event_sync_timeout, or a model not ended within stream_sync_timeout ends the run with
a `RunTimeout` naming the task and the limit. A wait whose record never comes is
thus op_wait_timeout's error (120 s by default); with every limit off, a deadlock.

With numerics, each kernel task is also watched (`ge.sim.dump`): its tensors dumped
when the run config asks, its outputs checked for inf/NaN, and the kernels that made
them from finite inputs recorded for the run's overflow warning.

With op_debug_config's `oom` (`ge.sim.debug`), in the run config or compiled into the
model (`Model.build["oom"]`), a kernel task whose program writes past one of its
arguments fails as it starts. A kernel that fails (that, or its numerics) has its
arguments, tiling and error dumped when enable_exception_dump is on (2 by default, as
in CANN), and its error says where.

Loading refuses a model whose memory plan needs more than the SoC's device memory
(`SocProfile.device_memory_bytes`), so the device buffer is never larger than the
device; a run refuses a task list that would place more than `RUN_BLOCKS` blocks
on the cores before it places any (the runtime places each block, so its work
grows with the blocks: a block_dim of 1e9 must not become 1e9 steps).

Kernels read memory only through their argument addresses and write only through
them, and a write lands when its kernel ends: a plan that reuses bytes while they are
still to be read yields a wrong answer. With `timing_only`, no memory is allocated
and no value computed: only the times are.

The runtime never compiles: it reads the `.om`'s task list, memory plan, weights and
kernels (STREAM_ACTIVE tasks are not emitted by the build, so a static model's
streams all start active).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from ml_dtypes import bfloat16

from dialects.ascend_kernel import AICPU
from ge.core import soc as socs
from ge.core.errors import InputError, ModelError, OptionError, RunTimeout
from ge.core.files import FileError
from ge.core.kernel_cache import DebugConfig, read_debug_config
from ge.core.limits import check_host_allocation
from ge.om import Model, Region, TensorDesc
from ge.om.gears import GEAR_INDEX
from ge.om.limits import BLOCK_DIM
from ge.om.tasks import (
    AicpuTask,
    Arg,
    DeviceCopyTask,
    Direction,
    EventRecordTask,
    EventWaitTask,
    KernelTask,
    LabelGotoTask,
    LabelSetTask,
    LabelSwitchTask,
    MemcpyTask,
    ModelEndGraphTask,
    StreamActiveTask,
)
from ge.sim import program, timing
from ge.sim.config import RunConfig
from ge.sim.debug import check_oom, dump_exception, exception_dump_dir, largest_writes
from ge.sim.dump import Overflow, Watch
from ge.sim.kernels import Layout, Numerics
from ge.sim.l2 import L2, Reads
from ge.sim.profile import Profile, TaskRecord

RUN_BLOCKS = 1 << 20
"""The blocks (block_dim times the kernel's phases, over all KERNEL tasks) one run may
place: about a second of the runtime's work. A real model's launches add up to a few
thousand blocks (ResNet-50 on Ascend910A: 2,696)."""


@dataclass
class RunOutput:
    """What one run produced: the outputs by name (empty when timing only), its profile,
    and the kernel tasks that turned finite inputs into inf/NaN (in the order they ran)."""

    outputs: dict[str, np.ndarray]
    profile: Profile
    overflows: list[Overflow] = field(default_factory=list)


@dataclass
class _Copy:
    """A host <-> device copy's cost, and which other inputs a fused copy carries."""

    nbytes: int
    ports: tuple[int, ...]


@dataclass
class _State:
    """The device during one run."""

    memory: np.ndarray | None
    watch: Watch | None = None
    """The run's dumps and overflow checks (with numerics only)."""
    writes: list = field(default_factory=list)
    """Pending writes: (time, order, address, bytes), applied in time order."""
    shapes: dict[int, tuple[int, ...]] = field(default_factory=dict)
    """The actual shapes of data-dependent values (AI CPU kernels' outputs), by address:
    a kernel reading one reads that much of its buffer, D2H copies that much out."""
    order: int = 0

    def write_at(self, time: float, addr: int, data: np.ndarray) -> None:
        heapq.heappush(self.writes, (time, self.order, addr, data))
        self.order += 1

    def settle(self, until: float) -> None:
        """Apply every write that lands by `until`."""
        memory = self.memory
        while self.writes and self.writes[0][0] <= until:
            _, _, addr, data = heapq.heappop(self.writes)
            assert memory is not None
            memory[addr : addr + data.size] = data


class Runtime:
    """A model loaded on a simulated device of its SoC."""

    def __init__(self, model: Model, config: RunConfig | None = None, host_us: tuple[float, ...] = (), like: Runtime | None = None):
        """`host_us`: a dynamic-shape run's host time per task before its launch; `like`: a
        runtime of another view of the same model (a multi-gear model and its gears share
        their kernels), whose decoded kernels and block timings this one reuses."""
        self.model = model
        self.config = config if config is not None else RunConfig()
        self.soc = socs.load(model.soc_version)
        self.host_us = host_us
        """A dynamic-shape run's host time before each task's launch (`ge.dynamic`), in list
        order; empty for a task list sunk to the device (static and multi-gear models)."""
        clock, at = self.soc.clock_mhz, 0.0
        self.launched: list[float] = []
        """The cycle at which the host has launched each task (all 0 when sunk)."""
        for us in host_us:
            at += us * clock
            self.launched.append(at)
        if model.memory.total > self.soc.device_memory_bytes:
            raise ModelError(
                f"the model needs {model.memory.total:,} bytes of device memory, more than the "
                f"{self.soc.device_memory_bytes:,} bytes of {self.soc.name}"
            )
        self.cores = self._cores()
        share = max(1, self.soc.aicpu.cores * self.cores["AiCore"] // self.soc.ai_cores)  # a slice's share, as of vector cores
        self.aicpu_parallel = min(_aicpu_parallel(model, self.soc.aicpu.cores), share)
        if like is not None and like.model.kernels is not model.kernels:
            raise ModelError("a runtime shares the kernels of a view of the same model only")
        self.kernels = like.kernels if like is not None else program.split_kernels(model.kernels)
        self.debug = read_debug_config(self.config.op_debug_config) if self.config.op_debug_config else DebugConfig((), None)
        self.compiled_oom = _compiled_oom(model)
        self.gear_input = next((d for d in model.inputs if d.name == GEAR_INDEX), None) if "gear" in model.build else None
        """A multi-gear model's gear-index input, in the view of one gear (`Model.gear`), which the runtime fills."""
        self.gear = _gear(model) if self.gear_input is not None else None
        """The gear that view runs: what the runtime fills the gear-index input with."""
        self._largest_writes: dict[str, dict[str, int]] = {}
        self._timings: dict[tuple[str, bool], timing.BlockTiming] = like._timings if like is not None else {}
        self._layouts_in = [_layout(d) for d in model.inputs]
        self._layouts_out = [_layout(d) for d in model.outputs]
        written = self._check_tasks()
        base = model.memory.bases[Region.WEIGHT]
        weights = (base, base + model.memory.sizes[Region.WEIGHT])
        self.step = 0
        """The iteration the next run is (dump_step counts a runtime's runs)."""
        self.numerics = Numerics(self.kernels, weights if not any(_overlap(w, weights) for w in written) else (0, 0))

    def _cores(self) -> dict[str, int]:
        soc, asked = self.soc, self.config.aicore_num
        if asked is not None and asked > soc.ai_cores:
            raise OptionError(f"aicore_num {asked} is more than {soc.name}'s {soc.ai_cores} AI cores; use 1 to {soc.ai_cores}")
        ai = asked if asked is not None else soc.ai_cores
        vector = soc.vector_cores * ai // soc.ai_cores if soc.vector_cores else 0
        return {"AiCore": ai, "VectorCore": max(vector, 1) if soc.vector_cores else 0}

    def _check_tasks(self) -> list[tuple[int, int]]:
        """Refuse a task list the runtime cannot run, before any run; returns the
        device memory ranges its tasks write."""
        total = self.model.memory.total
        written: list[tuple[int, int]] = []
        for i, task in enumerate(self.model.tasks):
            if isinstance(task, KernelTask):
                if task.kernel not in self.kernels:
                    raise ModelError(f"task {i} ('{task.name}') launches kernel @{task.kernel}, which the model does not hold")
                header = self.kernels[task.kernel].header
                if (header.core_type == AICPU) != isinstance(task, AicpuTask):
                    raise ModelError(
                        f"task {i} ('{task.name}'): a {task.KIND} task launches @{task.kernel}, a {header.core_type} kernel; "
                        f"AI CPU kernels are launched by KERNEL_EX tasks and only they"
                    )
                tiled = header.block_dim
                if not 1 <= task.block_dim <= BLOCK_DIM or task.block_dim != tiled:
                    raise ModelError(
                        f"task {i} ('{task.name}') launches @{task.kernel} on {task.block_dim} blocks; "
                        f"the kernel is tiled for {tiled} (at most {BLOCK_DIM})"
                    )
                args = (*task.inputs, *task.outputs, *task.workspace)
                written += [(a.addr, a.addr + a.size) for a in (*task.outputs, *task.workspace)]
            elif isinstance(task, MemcpyTask):
                descs = self.model.inputs if task.direction is Direction.H2D else self.model.outputs
                if not 0 <= task.port < len(descs):
                    raise ModelError(f"task {i}: MEMCPY_ASYNC {task.direction.value} of port {task.port}, which the model does not have")
                args = (task.arg,)
                if task.direction is Direction.H2D:
                    written.append((task.arg.addr, task.arg.addr + task.arg.size))
            elif isinstance(task, DeviceCopyTask):
                if task.src.size != task.dst.size:
                    raise ModelError(f"task {i}: MEMCPY_ASYNC_D2D of {task.src.size} bytes into {task.dst.size}")
                args = (task.src, task.dst)
                written.append((task.dst.addr, task.dst.addr + task.dst.size))
            elif isinstance(task, LabelSwitchTask):
                args = (task.index,)
            elif isinstance(task, EventRecordTask | EventWaitTask | ModelEndGraphTask | LabelSetTask | LabelGotoTask | StreamActiveTask):
                args = ()
            else:
                raise ModelError(f"task {i}: the simulator cannot run task kind {task.KIND}")
            for arg in args:
                if arg.addr < 0 or arg.size < 0 or arg.addr + arg.size > total:
                    raise ModelError(f"task {i}: argument [{arg.addr}, {arg.addr + arg.size}) lies outside the {total}-byte device memory")
        return written

    def _debugged(self, task: KernelTask) -> bool:
        """True for a kernel task op_debug_config's options apply to: all without op_debug_list,
        else those whose node names (a fused task's, split at '+') or op types it lists."""
        header = self.kernels[task.kernel].header
        return self.debug.ops is None or self.debug.lists(task.name.split("+"), header.op_types)

    # ------------------------------------------------------------------ inputs

    def input_specs(self) -> list[tuple[str, np.dtype, tuple[int, ...]]]:
        """(name, dtype, logical shape) of each graph input, in the model's order."""
        return input_specs(self.model)

    def check_inputs(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """The given inputs in the model's input order, each checked (name, dtype, shape)."""
        if not isinstance(inputs, Mapping):
            raise InputError(f"give the inputs as a dict by input name, not a {type(inputs).__name__}")
        names = [d.name for d in self.model.inputs]
        for key in inputs:
            if key not in names:
                raise InputError(f"'{key}' is not an input of the model; its inputs are {', '.join(names) or 'none'}")
        arrays = []
        for desc, layout in zip(self.model.inputs, self._layouts_in):
            want = f"{layout.dtype}{list(layout.origin_shape)}"
            if desc is self.gear_input:
                if desc.name in inputs:
                    raise InputError(f"input '{GEAR_INDEX}' is the gear index, which the runtime fills from the other inputs' shapes; leave it out")
                arrays.append(np.array([self.gear], layout.dtype))
                continue
            if desc.name not in inputs:
                raise InputError(f"input '{desc.name}' ({want}) is missing")
            array = np.asarray(inputs[desc.name])
            if array.dtype != layout.dtype:
                raise InputError(f"input '{desc.name}' has dtype {array.dtype}, expected {layout.dtype} ({want})")
            if array.shape != layout.origin_shape:
                raise InputError(f"input '{desc.name}' has shape {list(array.shape)}, expected {list(layout.origin_shape)} ({want})")
            arrays.append(array)
        return arrays

    # -------------------------------------------------------------------- runs

    def block_timing(self, kernel: str, trace: bool = False) -> timing.BlockTiming:
        """One block of `kernel`, timed once per runtime (traced when asked)."""
        key = (kernel, trace)
        if key not in self._timings:
            text = self.kernels[kernel]
            try:
                self._timings[key] = timing.time_block(text.program(), trace, program.vector_half_apart(text.header))
            except ModelError as e:
                raise ModelError(f"kernel @{kernel}: {e.args[0]}") from e
        return self._timings[key]

    def run(self, inputs: Mapping[str, np.ndarray] | None = None, synced_us: float = 0.0) -> RunOutput:
        """Run the model once: `inputs` by name (optional when timing only, checked if given);
        `synced_us` of the host's stream synchronisation have gone on earlier iterations."""
        ledger = timing.GmLedger(timing.chip_gm_bytes_per_cycle(self.soc))
        execution = self.start(inputs, ledger, synced_us, L2.of(self.soc) if self.config.l2_cache else None)
        while execution.next_time() is not None:
            execution.step()
        return execution.finish()

    def start(
        self, inputs: Mapping[str, np.ndarray] | None, ledger: timing.GmLedger, synced_us: float = 0.0, l2: L2 | None = None
    ) -> Execution:
        """A run of the model, ready to go task by task, its GM traffic through `ledger`
        and, with `l2`, through the chip's L2 cache (both shared with whatever else runs
        on the chip meanwhile)."""
        numerics = not self.config.timing_only
        self._check_blocks()
        if numerics:
            data = self.check_inputs(inputs if inputs is not None else {})
            check_host_allocation((self.model.memory.total,), 1, "the device memory of a run with numerics (timing_only needs none)")
            memory = np.zeros(self.model.memory.total, np.uint8)
            base = self.model.memory.bases[Region.WEIGHT]
            weights = np.frombuffer(self.model.weight_bytes(), np.uint8)  # inline, or from the external files
            memory[base : base + weights.size] = weights
            watch: Watch | None = Watch(self.config, self.step, (base, base + weights.size))
        else:
            if inputs is not None:
                self.check_inputs(inputs)
            data, memory, watch = [], None, None
        self.step += 1
        return Execution(self, _State(memory, watch), data, ledger, Timeouts.of(self.config, self.soc.clock_mhz, synced_us), l2)

    def _check_blocks(self) -> None:
        """Refuse a run that would place more than `RUN_BLOCKS` blocks, before placing any."""
        blocks = sum(
            task.block_dim * len(self.block_timing(task.kernel).phases)
            for task in self.model.tasks
            if isinstance(task, KernelTask) and not isinstance(task, AicpuTask)
        )
        if blocks > RUN_BLOCKS:
            raise ModelError(f"the task list places {blocks:,} blocks on the cores in one run; the simulator runs at most {RUN_BLOCKS:,}")

    def _fused(self) -> dict[int, _Copy]:
        """The H2D copies by input port: one shared copy for the inputs input_fusion_size fuses."""
        limit = self.config.input_fusion_size
        sizes = [d.size for d in self.model.inputs]
        small = tuple(i for i, s in enumerate(sizes) if limit and s <= limit)
        fused = _Copy(sum(sizes[i] for i in small), small) if len(small) > 1 else None
        return {i: fused if fused is not None and i in small else _Copy(s, (i,)) for i, s in enumerate(sizes)}

    def _kernel(
        self, task: KernelTask, index: int, now: float, stream: int, state: _State, cores: timing.Cores,
        ledger: timing.GmLedger, records: list[TaskRecord], trace: bool, limits: Timeouts, l2: L2 | None,
    ) -> float:
        header = self.kernels[task.kernel].header
        kind = header.core_type if self.cores.get(header.core_type) else "AiCore"
        block = self.block_timing(task.kernel)
        ready = now + timing.KERNEL_LAUNCH_US * self.soc.clock_mhz
        served = Reads(0.0, 0.0)
        if l2 is not None:
            served = l2.task([(a.addr, a.size) for a in task.inputs], [(a.addr, a.size) for a in task.outputs], block, task.block_dim, header.workspace)
        placed = timing.run_kernel(
            cores, kind, ready, task.block_dim, block, ledger, l2.ledger if l2 is not None else None,
            served.hit(block, task.block_dim), served.scratch > 0,
        )
        limits.kernel(index, task.name, placed.end - now)
        self._compute(task, index, header, state, placed.end)
        start = min((b.start for b in placed.blocks), default=ready)  # later than ready while other streams hold the cores
        records.append(
            TaskRecord(
                index, task.KIND, stream, task.name, start, placed.end, op_type="+".join(header.op_types),
                kernel=task.kernel, core_type=kind, block_dim=task.block_dim, blocks=placed.blocks,
                block_timing=self.block_timing(task.kernel, True) if trace else block, stretch=placed.stretch,
                nbytes=sum(a.size for a in (*task.inputs, *task.outputs)), l2_hits=served.hits + served.scratch, l2_resident=served.resident,
                wait=start - now, host_us=self.host_us[index] if self.host_us else 0.0,
            )
        )
        return placed.end

    def _compute(self, task: KernelTask | AicpuTask, index: int, header: program.Header, state: _State, end: float) -> None:
        """Run the kernel's numerics on device memory (with the oom watch, if any); its
        writes land when it ends."""
        writes = self._execute(task, index, state.memory, state.shapes)
        if state.memory is None:
            return
        if state.watch is not None:
            state.watch.kernel(index, task, header, self.numerics, state.memory, writes)
        for addr, data in writes:
            state.write_at(end, addr, data)

    def _aicpu(
        self, task: AicpuTask, index: int, now: float, stream: int, state: _State, cores: timing.Cores,
        records: list[TaskRecord], limits: Timeouts,
    ) -> float:
        """An AI CPU kernel: on the AI CPU core free first, timed by the SoC's AI CPU cost
        model; with mix_compile_mode, on the host instead, its copies out and back charged."""
        header = self.kernels[task.kernel].header
        nbytes = sum(a.size for a in (*task.inputs, *task.outputs))
        if self.config.mix_compile_mode:
            engine = timing.HOST
            in_bytes = sum(a.size for a in task.inputs)
            cycles = timing.host_op_us(in_bytes, nbytes - in_bytes, header.elements) * self.soc.clock_mhz
        else:
            engine, cycles = AICPU, aicpu_cycles(self.soc, nbytes, header.elements)
        (placed,) = cores.place(engine, now, 1, cycles, 0)
        limits.kernel(index, task.name, placed.end - now)
        self._compute(task, index, header, state, placed.end)
        records.append(
            TaskRecord(
                index, task.KIND, stream, task.name, now, placed.end, op_type=task.op_type, kernel=task.kernel,
                core_type=engine, block_dim=1, blocks=(placed,), nbytes=nbytes,
            )
        )
        return placed.end

    def _execute(
        self, task: KernelTask, index: int, memory: np.ndarray | None, shapes: dict[int, tuple[int, ...]] | None = None
    ) -> list[tuple[int, np.ndarray]]:
        """The kernel's oom check when it has one, then its numerics (with a device memory);
        a fault dumps the kernel's data when enable_exception_dump asks, and says where."""
        try:
            if task.kernel in self.compiled_oom or ("oom" in self.debug.options and self._debugged(task)):
                kernel = self.kernels[task.kernel]
                if task.kernel not in self._largest_writes:
                    self._largest_writes[task.kernel] = largest_writes(kernel)
                check_oom(kernel, self._largest_writes[task.kernel], task, index)
            if memory is None:
                return []
            with np.errstate(over="ignore", invalid="ignore"):  # inf/NaN is the watch's to report, once, by op
                return self.numerics.run(task.kernel, task.name, memory, task.inputs, task.outputs, shapes)
        except ModelError as e:
            if not self.config.enable_exception_dump:
                raise
            try:
                path = self._dump_exception(task, index, memory, e.args[0])
            except FileError as failed:
                raise ModelError(f"{e.args[0]} (enable_exception_dump: {failed.args[0]})") from e
            raise ModelError(f"{e.args[0]} (enable_exception_dump={self.config.enable_exception_dump}: the kernel's data and tiling are in {path})") from e

    def _dump_exception(self, task: KernelTask, index: int, memory: np.ndarray | None, error: str) -> str:
        try:
            layouts = self.numerics.layouts(task.kernel)
        except ModelError:  # a kernel the numerics cannot read: its arguments go out as bytes
            layouts = None
        device = self.config.session_device_id or 0
        directory = exception_dump_dir(self.config.enable_exception_dump, device)
        return dump_exception(directory, index, task, self.kernels[task.kernel], memory, layouts, error)

    def _memcpy(
        self, task: MemcpyTask, index: int, now: float, stream: int, state: _State, data: list[np.ndarray],
        outputs: dict[str, np.ndarray], copies: dict[int, _Copy], copied: set[int], records: list[TaskRecord],
    ) -> float:
        clock = self.soc.clock_mhz
        if task.direction is Direction.H2D:
            desc, layout = self.model.inputs[task.port], self._layouts_in[task.port]
            copy = copies[task.port]
            if task.port in copied:  # moved by the fused copy of an earlier task
                records.append(TaskRecord(index, task.KIND, stream, f"H2D '{desc.name}' (fused)", now, now, nbytes=0))
                return now
            end = now + _copy_us(copy.nbytes) * clock
            copied.update(copy.ports)
            fused = f" (fused with {len(copy.ports) - 1} more)" if len(copy.ports) > 1 else ""
            records.append(TaskRecord(index, task.KIND, stream, f"H2D '{desc.name}'{fused}", now, end, nbytes=copy.nbytes))
            if state.memory is not None:
                for port in copy.ports:
                    arg = task.arg if port == task.port else self._input_arg(port)
                    source = self._layouts_in[port]
                    source.check(arg.size, f"the copy of input '{self.model.inputs[port].name}'")
                    state.write_at(end, arg.addr, source.store(data[port]))
            layout.check(task.arg.size, f"the copy of input '{desc.name}'")
            return end
        desc, layout = self.model.outputs[task.port], self._layouts_out[task.port]
        layout.check(task.arg.size, f"the copy of output '{desc.name}'")
        end = now + _copy_us(task.arg.size) * clock
        records.append(TaskRecord(index, task.KIND, stream, f"D2H '{desc.name}'", now, end, nbytes=task.arg.size))
        if state.memory is not None:
            actual = state.shapes.get(task.arg.addr)
            value = layout.load(state.memory, task.arg.addr)
            outputs[desc.name] = np.array(value if actual is None else value.reshape(-1)[: math.prod(actual)].reshape(actual))
        return end

    def _input_arg(self, port: int) -> Arg:
        """Where input `port` goes: its buffer, as its port describes it (the same as its H2D
        task's argument; a Case's task list holds one such task per gear)."""
        desc = self.model.inputs[port]
        return Arg(port, desc.addr, desc.size)

    def _profile(self, records: list[TaskRecord], trace: bool) -> Profile:
        return Profile(
            soc=self.soc,
            cores=dict(self.cores),
            records=records,
            batch=_batch(self.model.inputs),
            pipes=trace,
            l2_cache=self.config.l2_cache,
        )


class Execution:
    """One run of a model's task list, a task at a time, so that the runs of several
    models can interleave on one chip in time order (`ge.sim.chip`).

    Each stream runs its tasks in list order; of the streams that can go on, the one
    whose next task is ready first goes next (ties: the lower stream)."""

    def __init__(
        self, runtime: Runtime, state: _State, data: list[np.ndarray], ledger: timing.GmLedger, limits: Timeouts, l2: L2 | None = None
    ):
        self.runtime = runtime
        self.l2 = l2
        self.limits = limits
        self.state = state
        self.data = data
        self.ledger = ledger
        self.trace = runtime.config.profile_level == "pipe"
        self.outputs: dict[str, np.ndarray] = {}
        self.records: list[TaskRecord] = []
        self.queues: dict[int, deque[int]] = {}
        for i, task in enumerate(runtime.model.tasks):
            self.queues.setdefault(task.stream, deque()).append(i)
        self.order = {s: list(q) for s, q in self.queues.items()}
        """Each stream's tasks in list order: where a jump goes on."""
        self.labels = {t.label: i for i, t in enumerate(runtime.model.tasks) if isinstance(t, LabelSetTask)}
        self.asleep = {other for t in runtime.model.tasks if isinstance(t, StreamActiveTask) for other in t.streams}
        """Streams that run only once a STREAM_ACTIVE starts them."""
        self.ready = {s: 0.0 for s in self.queues}
        self.waiting: dict[int, int] = {}
        self.recorded: dict[int, float] = {}
        self.copies = runtime._fused()
        self.copied: set[int] = set()
        self.cores = timing.Cores({k: n for k, n in runtime.cores.items() if n})
        self.aicpu = timing.Cores({AICPU: runtime.aicpu_parallel, timing.HOST: 1})
        self.ended = False

    def next_time(self) -> float | None:
        """When the next task can start (None: no stream can go on)."""
        return min((self._ready(s) for s, q in self.queues.items() if q and s not in self.waiting and s not in self.asleep), default=None)

    def _ready(self, stream: int) -> float:
        """When the stream's next task can start: its stream free and, in a dynamic-shape
        run, the task launched by the host."""
        launched = self.runtime.launched
        return max(self.ready[stream], launched[self.queues[stream][0]]) if launched else self.ready[stream]

    def step(self) -> None:
        """Run the task that can start first."""
        runtime, state, records = self.runtime, self.state, self.records
        clock = runtime.soc.clock_mhz  # cycles per microsecond
        now, s = min((self._ready(s), s) for s, q in self.queues.items() if q and s not in self.waiting and s not in self.asleep)
        index = self.queues[s][0]
        task = runtime.model.tasks[index]
        self.limits.by(now, self._waits())
        if state.memory is not None:
            state.settle(now)
        if isinstance(task, EventWaitTask):
            if task.event not in self.recorded:
                self.waiting[s] = task.event
                return
            at = self.recorded.pop(task.event)
            self.limits.wait(self._wait(s, index), max(0.0, at - now), "its record came")
            end = max(now, at) + timing.EVENT_WAIT_US * clock  # the stream is held from `now` until the record
            records.append(TaskRecord(index, task.KIND, s, f"wait event {task.event}", now, end))
        elif isinstance(task, EventRecordTask):
            if task.event in self.recorded:
                raise ModelError(f"task {index}: event {task.event} is recorded again before a wait consumed it")
            end = now + timing.EVENT_RECORD_US * clock
            self.recorded[task.event] = end
            for other, event in list(self.waiting.items()):
                if event == task.event:
                    del self.waiting[other]
            records.append(TaskRecord(index, task.KIND, s, f"record event {task.event}", now, end))
        elif isinstance(task, AicpuTask):
            end = runtime._aicpu(task, index, now, s, state, self.aicpu, records, self.limits)
        elif isinstance(task, KernelTask):
            end = runtime._kernel(task, index, now, s, state, self.cores, self.ledger, records, self.trace, self.limits, self.l2)
        elif isinstance(task, MemcpyTask):
            end = runtime._memcpy(task, index, now, s, state, self.data, self.outputs, self.copies, self.copied, records)
        elif isinstance(task, DeviceCopyTask):
            cycles = timing.D2D_LATENCY_US * clock + 2 * task.src.size / timing.chip_gm_bytes_per_cycle(runtime.soc)
            end = now + cycles
            if state.memory is not None:
                state.write_at(end, task.dst.addr, state.memory[task.src.addr : task.src.addr + task.src.size].copy())
            records.append(TaskRecord(index, task.KIND, s, f"copy {task.src.size} bytes", now, end, nbytes=task.src.size))
        elif isinstance(task, LabelSetTask):
            end = now + timing.LABEL_US * clock
            records.append(TaskRecord(index, task.KIND, s, f"label {task.label}", now, end))
        elif isinstance(task, StreamActiveTask):
            end = now + timing.STREAM_ACTIVE_US * clock
            records.append(TaskRecord(index, task.KIND, s, f"start streams {', '.join(map(str, task.streams))}", now, end))
            for other in task.streams:
                self.asleep.discard(other)
                self.ready[other] = max(self.ready.get(other, 0.0), end)
        elif isinstance(task, LabelGotoTask | LabelSwitchTask):
            target = task.label if isinstance(task, LabelGotoTask) else task.labels[self._index(task, index)]
            us = timing.LABEL_US if isinstance(task, LabelGotoTask) else timing.LABEL_SWITCH_US
            end = now + us * clock
            records.append(TaskRecord(index, task.KIND, s, f"go to label {target}", now, end))
            self.limits.by(end, ())
            self._jump(s, target)
            self.ready[s] = end
            return
        else:
            end = now + timing.MODEL_END_US * clock
            records.append(TaskRecord(index, task.KIND, s, "model end", now, end))
            self.ended = True
            self.queues[s].clear()
            self.ready[s] = end
            self.limits.by(end, ())
            return
        self.limits.by(end, ())
        self.queues[s].popleft()
        self.ready[s] = end

    def _index(self, task: LabelSwitchTask, index: int) -> int:
        """The index a switch reads (without numerics, no values to read: the gear the host
        filled in for a switch on the gear-index input, else 0)."""
        memory, gear = self.state.memory, self.runtime.gear_input
        if memory is None:
            value = self.runtime.gear if gear is not None and task.index.addr == gear.addr else 0
        else:
            value = int.from_bytes(memory[task.index.addr : task.index.addr + task.index.size].tobytes(), "little")
        if value >= len(task.labels):
            raise ModelError(f"task {index}: LABEL_SWITCH_BY_INDEX reads index {value}, but has {len(task.labels)} labels")
        return value

    def _jump(self, stream: int, label: int) -> None:
        """Stream `stream` goes on after the LABEL_SET of `label`."""
        if label not in self.labels:
            raise ModelError(f"stream {stream} jumps to label {label}, which no LABEL_SET sets")
        order = self.order[stream]
        self.queues[stream] = deque(order[bisect.bisect_left(order, self.labels[label]) :])

    def _wait(self, stream: int, index: int) -> str:
        return f"task {index} (stream {stream}, wait event {self.runtime.model.tasks[index].event})"  # type: ignore[attr-defined]

    def _waits(self) -> list[tuple[float, str]]:
        """(since when, which) of every stream held by an EVENT_WAIT."""
        return [(self.ready[s], self._wait(s, self.queues[s][0])) for s in self.waiting]

    def finish(self) -> RunOutput:
        """The run's outputs and profile, once no stream can go on; refuses a task list that did not end."""
        if any(q for s, q in self.queues.items() if s not in self.asleep):
            self.limits.by(math.inf, self._waits())
            stuck = ", ".join(f"stream {s} on event {e}" for s, e in sorted(self.waiting.items()))
            raise ModelError(f"the task list deadlocks: {stuck} wait for records that never come")
        if not self.ended:
            raise ModelError("the task list has no MODEL_END_GRAPH")
        if self.recorded:
            raise ModelError(f"events {sorted(self.recorded)} are recorded and never waited for")
        if self.state.memory is not None:
            self.state.settle(math.inf)
        watch = self.state.watch
        if watch is None:
            return RunOutput(self.outputs, self.runtime._profile(self.records, self.trace))
        watch.finish()
        return RunOutput(self.outputs, self.runtime._profile(self.records, self.trace), watch.overflows)


@dataclass(frozen=True)
class Timeouts:
    """A run's timeouts in device cycles (inf: none): a kernel task's run (op_execute_timeout),
    an EVENT_WAIT's wait for its record (the lesser of op_wait_timeout and event_sync_timeout),
    and the host's stream synchronisation (stream_sync_timeout, less what earlier
    iterations of the loop took). Each ends the run with a `RunTimeout` naming the task."""

    clock: float
    execute_limit: float
    wait_limit: float
    wait_option: str
    sync_limit: float
    sync_option: str

    @classmethod
    def of(cls, config: RunConfig, clock: float, synced_us: float) -> Timeouts:
        execute = config.op_execute_timeout * 1e6 * clock if config.op_execute_timeout else math.inf
        waits = [(math.inf, "")]
        if config.op_wait_timeout:
            waits.append((config.op_wait_timeout * 1e6 * clock, f"op_wait_timeout={config.op_wait_timeout} s"))
        if config.event_sync_timeout > 0:
            waits.append((config.event_sync_timeout * 1e3 * clock, f"event_sync_timeout={config.event_sync_timeout} ms"))
        wait, wait_option = min(waits)
        sync = (config.stream_sync_timeout * 1e3 - synced_us) * clock if config.stream_sync_timeout > 0 else math.inf
        return cls(clock, execute, wait, wait_option, sync, f"stream_sync_timeout={config.stream_sync_timeout} ms")

    def kernel(self, index: int, name: str, cycles: float) -> None:
        if cycles > self.execute_limit:
            raise RunTimeout(f"task {index} ('{name}'): the kernel ran {_seconds(cycles / self.clock)}, longer than op_execute_timeout={self.execute_limit / self.clock / 1e6:g} s")

    def wait(self, which: str, cycles: float, what: str) -> None:
        if cycles > self.wait_limit:
            raise RunTimeout(f"{which}: waited longer than {self.wait_option} ({what} after {_seconds(cycles / self.clock)}); look for the EVENT_RECORD it waits for")

    def by(self, now: float, waits: list[tuple[float, str]]) -> None:
        """Fire whichever limit ends first before `now` (inf: the run can go no further):
        a held EVENT_WAIT's, or the host's stream synchronisation."""
        due = [(since + self.wait_limit, which) for since, which in waits if since + self.wait_limit < now]
        if self.sync_limit < now:
            due.append((self.sync_limit, ""))
        if not due:
            return
        _, which = min(due)
        if not which:
            raise RunTimeout(f"the host's stream synchronisation timed out: the model had not ended after {self.sync_option}")
        what = "no record ever came" if now == math.inf else "its record had not come"
        raise RunTimeout(f"{which}: waited longer than {self.wait_option} ({what}); look for the EVENT_RECORD it waits for")


def _seconds(us: float) -> str:
    return f"{us / 1e6:.3g} s" if us >= 1e5 else f"{us / 1e3:.3g} ms"


def input_specs(model: Model) -> list[tuple[str, np.dtype, tuple[int, ...]]]:
    """(name, dtype, logical shape) of each graph input of `model`, in its order."""
    return [(d.name, layout.dtype, tuple(layout.origin_shape)) for d, layout in ((d, _layout(d)) for d in model.inputs)]


def _layout(desc: TensorDesc) -> Layout:
    dtype = np.dtype(bfloat16) if desc.dtype == "bfloat16" else np.dtype(desc.dtype)
    return Layout(dtype, tuple(desc.shape), desc.format, desc.origin_format, tuple(desc.origin_shape))


def aicpu_cycles(soc: socs.SocProfile, nbytes: int, elements: int) -> float:
    """An AI CPU kernel's time in AI core cycles: the engine's launch, then its arguments'
    bytes and elements at one AI CPU core's rates (`SocProfile.aicpu`)."""
    a = soc.aicpu
    return (a.launch_us + nbytes / a.bytes_per_us + elements / a.elements_per_us) * soc.clock_mhz


def _aicpu_parallel(model: Model, cores: int) -> int:
    """The AI CPU tasks the model runs at once: `Model.build["aicpu_parallel"]` (stream_max_parallel_num's
    DNN_VM_AICPU count, checked as read), else every AI CPU core of the SoC."""
    value = model.build.get("aicpu_parallel", cores)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= cores:
        raise ModelError(f"the model's build entry 'aicpu_parallel' is {str(value)[:80]}; it must be an integer from 1 to the SoC's {cores} AI CPU cores")
    return value


def _gear(model: Model) -> int:
    """The gear a multi-gear model's view runs (`Model.build["gear"]`), checked as read."""
    gear = model.build["gear"]
    if isinstance(gear, bool) or not isinstance(gear, int) or gear < 0:
        raise ModelError(f"the model has a gear-index input, but its build entry 'gear' is {str(gear)[:80]}; it must be the index of the gear it runs")
    return gear


def _compiled_oom(model: Model) -> frozenset[str]:
    """The kernels compiled with op_debug_config's oom (`Model.build["oom"]`), checked as read."""
    kernels = model.build.get("oom", [])
    if not isinstance(kernels, list) or not all(isinstance(k, str) for k in kernels):
        raise ModelError(f"the model's build entry 'oom' is {str(kernels)[:80]}; it must be a list of kernel names")
    return frozenset(kernels)


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _copy_us(nbytes: int) -> float:
    return timing.MEMCPY_LATENCY_US + nbytes / timing.PCIE_BYTES_PER_US


def _batch(inputs: tuple[TensorDesc, ...]) -> int:
    """The model's batch: the first input's leading dim (1 for a scalar or no input)."""
    if not inputs or not inputs[0].origin_shape:
        return 1
    return max(1, inputs[0].origin_shape[0])
