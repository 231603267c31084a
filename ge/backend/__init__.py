"""The backend: a lowered graph becomes an offline model (`ge.om`).

    schedule  -> the tasks-to-be and the buffers they touch (views and no-task
                 splits alias their input)
    streams   -> a stream per independent branch, events where they meet
    memory    -> every buffer's address; the feature map reused by lifetime
    tasks     -> the runtime task list
    verify    -> an independent proof that no two live tensors share bytes and
                 that every read follows its write

`build(module, ...)` runs them in that order and returns the `Model` (`ge.om`),
whose `build` entry counts its kernels (`aicpu_kernels` of them on the AI CPU) and
tasks and says how many AI CPU tasks may run at once (`aicpu_parallel`). It never
imports passes or the simulator: the model is data the simulator reads.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from io import StringIO

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from dialects import ascend_kernel as ak
from dialects.ascend_graph import FormatAttr, WeightRefAttr
from dialects.shapes import numel
from ge.core import dtypes
from ge.backend import memory, streams, tasks
from ge.backend.schedule import Port, Schedule, schedule_of
from ge.backend.verify import verify
from ge.om import MemoryPlan, Model, Region, TensorDesc
from ge.core import soc as socs
from ge.core.errors import ModelError
from ge.core.options import AICPU_ENGINE
from ge.core.weights import store_of

log = logging.getLogger("ge")


@dataclass(frozen=True)
class BuildOptions:
    """What the build needs of the compile options."""

    soc_version: str
    max_streams: int
    reuse_memory: bool = True
    options: Mapping[str, object] = field(default_factory=dict)
    """The compile options as given, recorded in the model."""
    aicpu_parallel: int | None = None
    """AI CPU tasks that may run at once (stream_max_parallel_num's DNN_VM_AICPU count);
    None: as many as the SoC has AI CPU cores, which is also the most it may be."""


def build(module: ModuleOp, settings: BuildOptions, timings: dict[str, float] | None = None) -> Model:
    """The offline model of a lowered module; each step's seconds go to `timings`."""
    timings = timings if timings is not None else {}

    def timed(name: str, started: float) -> float:
        now = time.perf_counter()
        timings[name] = timings.get(name, 0.0) + now - started
        return now

    t = time.perf_counter()
    sched = schedule_of(module)
    # a task list that jumps runs on one stream: a jump moves one stream's place in the list
    max_streams = 1 if sched.has_control_flow else settings.max_streams
    assigned = streams.assign(sched, max_streams, streams.MAX_EVENT_IDS)
    t = timed("streams", t)
    plan = memory.plan(sched, assigned, reuse=settings.reuse_memory)
    device = socs.load(settings.soc_version)
    if plan.total > device.device_memory_bytes:  # before the weight blob is allocated
        regions = ", ".join(f"{r.value} {n:,}" for r, n in plan.sizes.items())
        raise ModelError(
            f"the model needs {plan.total:,} bytes of device memory ({regions}), more than the "
            f"{device.device_memory_bytes:,} bytes of {device.name}; use a smaller input shape or batch, or a larger SoC"
        )
    t = timed("memory", t)
    task_list = tasks.generate(sched, assigned, plan)
    t = timed("tasks", t)
    verify(task_list, plan)
    t = timed("verify", t)
    blob = weight_blob(sched, plan)
    t = timed("weights", t)
    check_kernels(module)
    text = kernels_text(module)
    timed("kernels", t)
    kernel_count = sum(1 for n in sched.nodes if n.kernel is not None)
    aicpu_count = sum(1 for n in sched.nodes if n.op_type is not None)
    aicpu_parallel = device.aicpu.cores
    if settings.aicpu_parallel is not None:
        if settings.aicpu_parallel > device.aicpu.cores:
            log.warning(
                "stream_max_parallel_num: %s:%d is more than %s's %d AI CPU cores; %d AI CPU tasks run at once",
                AICPU_ENGINE, settings.aicpu_parallel, device.name, device.aicpu.cores, device.aicpu.cores,
            )
        aicpu_parallel = min(settings.aicpu_parallel, device.aicpu.cores)
    return Model(
        soc_version=settings.soc_version,
        options=dict(settings.options),
        inputs=tuple(_desc(p, plan) for p in sched.inputs),
        outputs=tuple(_desc(p, plan) for p in sched.outputs),
        memory=plan,
        streams=assigned.count,
        events=assigned.event_ids,
        kernels=text,
        tasks=tuple(task_list),
        weights=blob,
        build={"kernels": kernel_count, "aicpu_kernels": aicpu_count, "aicpu_parallel": aicpu_parallel, "tasks": len(task_list)},
    )


def check_kernels(module: ModuleOp) -> None:
    """Every kernel fits the SoC it was tiled for (the dialect's verifier cannot load SoC data)."""
    for op in module.ops:
        if isinstance(op, ak.KernelOp):
            try:
                ak.verify_fits(op, socs.load(op.soc.data))
            except VerifyException as e:
                raise ModelError(f"the kernel does not fit its SoC: {e}") from e


def weight_blob(sched: Schedule, plan: MemoryPlan) -> memoryview:
    """The weight region's bytes: every const's physical value at its offset, zeros between.

    A weight in a device format is stored in the weight store as laid out on the
    device, so its bytes are copied as they are (never through its logical value).
    """
    from ge.core.reference import const_value

    blob = bytearray(plan.sizes[Region.WEIGHT])
    store = store_of(sched.graph.get_toplevel_object())  # type: ignore[arg-type]
    for b in sched.of_region(Region.WEIGHT):
        op = b.const
        assert op is not None
        value = store.get(op.value) if isinstance(op.value, WeightRefAttr) else const_value(op)
        t = op.out.type
        assert isinstance(t, TensorType)
        if value.dtype != dtypes.to_numpy(t.element_type) or value.size != numel(t.get_shape()):
            raise ModelError(f"Const '{op.label}': its value is {value.dtype}{list(value.shape)}, but the IR declares {t}")
        offset = plan.placements[b.index].offset
        data = np.ascontiguousarray(value).reshape(-1).view(np.uint8)
        blob[offset : offset + data.size] = memoryview(data)
    return memoryview(blob).toreadonly()


def kernels_text(module: ModuleOp) -> str:
    """The module's kernels as IR text that `ge.core.ir.parse` reads back."""
    out = StringIO()
    printer = Printer(stream=out)
    for op in module.ops:
        if isinstance(op, ak.KernelOp):
            printer.print_op(op)
            out.write("\n")
    return out.getvalue()


def _desc(port: Port, plan: MemoryPlan) -> TensorDesc:
    t = port.type
    assert isinstance(t, TensorType)
    shape = tuple(t.get_shape())
    if isinstance(t.encoding, FormatAttr):
        fmt, origin, origin_shape = t.encoding.format.data, t.encoding.origin_format.data, tuple(t.encoding.origin_shape.get_values())
    else:
        fmt = origin = "NCHW" if len(shape) == 4 else "ND"
        origin_shape = shape
    return TensorDesc(port.name, dtypes.name(t.element_type), shape, fmt, origin, origin_shape, port.slice.nbytes, plan.addr(port.slice.buffer, port.slice.offset))
