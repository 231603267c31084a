"""Task generation: the runtime's task list, in GE's task kinds.

One list in issue order; each task names its stream, and a stream runs its tasks
in list order. For each schedule node: the EVENT_WAITs of the events it consumes,
its own tasks, then the EVENT_RECORDs of the events it produces. So:

    MEMCPY_ASYNC  H2D, one per graph input, into the input region (stream 0)
    KERNEL        kernel, block_dim, argument addresses: inputs, outputs, workspace
    KERNEL_EX     an AI CPU kernel: kernel, op type, argument addresses: inputs, outputs
    EVENT_RECORD / EVENT_WAIT   event id; a wait consumes its record
    MEMCPY_ASYNC  D2H, one per graph output, out of its buffer (stream 0)
    MODEL_END_GRAPH             last, on stream 0, after every stream has finished

An argument is (tensor, addr, size): `tensor` indexes the memory plan's tensors,
`addr` is the device address the kernel reads or writes (a view or a no-task
split's slice points inside its buffer), `size` the bytes it covers. Shape views
and `_no_task` ops emit nothing. If and Loop emit LABEL_SET, LABEL_GOTO,
LABEL_SWITCH_BY_INDEX and MEMCPY_ASYNC_D2D (`ge.backend.schedule`), all on stream 0.
STREAM_ACTIVE is never emitted: every stream of a static model is active from the start.
"""

from __future__ import annotations

from ge.backend.schedule import Node, NodeKind, Schedule, Slice
from ge.backend.streams import Streams
from ge.core.errors import ModelError
from ge.om.memory import MemoryPlan
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
    Task,
)


def generate(schedule: Schedule, streams: Streams, plan: MemoryPlan) -> list[Task]:
    """The task list of a planned, stream-assigned schedule."""
    waits: dict[int, list[int]] = {}
    records: dict[int, list[int]] = {}
    for e in streams.events:
        waits.setdefault(e.consumer, []).append(e.id)
        records.setdefault(e.producer, []).append(e.id)
    tasks: list[Task] = []
    for node in schedule.nodes:
        s = streams.stream[node.index]
        tasks += [EventWaitTask(s, i) for i in waits.get(node.index, ())]
        tasks += _node_tasks(node, s, plan)
        tasks += [EventRecordTask(s, i) for i in records.get(node.index, ())]
    return tasks


def _arg(s: Slice, plan: MemoryPlan) -> Arg:
    return Arg(s.buffer, plan.addr(s.buffer, s.offset), s.nbytes)


def _node_tasks(node: Node, stream: int, plan: MemoryPlan) -> list[Task]:
    if node.kind is NodeKind.H2D:
        return [MemcpyTask(stream, Direction.H2D, i, _arg(s, plan)) for i, s in enumerate(node.outputs)]
    if node.kind is NodeKind.D2H:
        return [MemcpyTask(stream, Direction.D2H, i, _arg(s, plan)) for i, s in enumerate(node.inputs)]
    if node.kind is NodeKind.END:
        return [ModelEndGraphTask(stream)]
    if node.kind is NodeKind.COPY:
        return [DeviceCopyTask(stream, _arg(node.inputs[0], plan), _arg(node.outputs[0], plan))]
    if node.kind is NodeKind.LABEL_SET:
        return [LabelSetTask(stream, node.labels[0])]
    if node.kind is NodeKind.LABEL_GOTO:
        return [LabelGotoTask(stream, node.labels[0])]
    if node.kind is NodeKind.LABEL_SWITCH:  # its other inputs only keep a loop's buffers alive
        return [LabelSwitchTask(stream, _arg(node.inputs[0], plan), tuple(node.labels))]
    if node.kernel is None:
        op = node.op.name if node.op is not None else "op"
        raise ModelError(f"{op} '{node.name}' is not lowered to a kernel; run lower-to-kernel before task generation")
    if node.op_type is not None:
        inputs, outputs = tuple(_arg(s, plan) for s in node.inputs), tuple(_arg(s, plan) for s in node.outputs)
        return [AicpuTask.of(stream, node.kernel, node.name, node.op_type, inputs, outputs)]
    return [
        KernelTask(
            stream,
            node.kernel,
            node.name,
            node.block_dim,
            tuple(_arg(s, plan) for s in node.inputs),
            tuple(_arg(s, plan) for s in node.outputs),
            tuple(_arg(s, plan) for s in node.workspace),
        )
    ]
