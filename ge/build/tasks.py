"""Task generation: the runtime's task list, in GE's task kinds.

One list in issue order; each task names its stream, and a stream runs its tasks
in list order. For each schedule node: the EVENT_WAITs of the events it consumes,
its own tasks, then the EVENT_RECORDs of the events it produces. So:

    MEMCPY_ASYNC  H2D, one per graph input, into the input region (stream 0)
    KERNEL        kernel, block_dim, argument addresses: inputs, outputs, workspace
    EVENT_RECORD / EVENT_WAIT   event id; a wait consumes its record
    MEMCPY_ASYNC  D2H, one per graph output, out of its buffer (stream 0)
    MODEL_END_GRAPH             last, on stream 0, after every stream has finished

An argument is (tensor, addr, size): `tensor` indexes the memory plan's tensors,
`addr` is the device address the kernel reads or writes (a view or a no-task
split's slice points inside its buffer), `size` the bytes it covers. Shape views
and `_no_task` ops emit nothing. LABEL_* and STREAM_ACTIVE are never emitted: a
graph without control flow needs no labels, and every stream of a static model is
active from the start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from enum import Enum
from typing import ClassVar

from ge.build.memory import MemoryPlan
from ge.build.schedule import Node, NodeKind, Schedule, Slice
from ge.build.streams import Streams
from ge.errors import ModelError


class Direction(str, Enum):
    H2D = "H2D"
    D2H = "D2H"


@dataclass(frozen=True)
class Arg:
    tensor: int
    addr: int
    size: int

    def to_json(self) -> list[int]:
        return [self.tensor, self.addr, self.size]

    @classmethod
    def from_json(cls, data: Sequence[int]) -> Arg:
        tensor, addr, size = data
        return cls(int(tensor), int(addr), int(size))


@dataclass(frozen=True)
class Task:
    """A runtime task on one stream; subclasses add their fields."""

    KIND: ClassVar[str]
    stream: int

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"kind": self.KIND}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, tuple):
                value = [a.to_json() for a in value]
            elif isinstance(value, Enum):
                value = value.value
            out[f.name] = value
        return out

    @staticmethod
    def from_json(data: dict) -> Task:
        kind = data.get("kind")
        if kind not in TASK_KINDS:
            raise ValueError(f"unknown task kind {kind!r}")
        return TASK_KINDS[kind]._decode(data)

    @classmethod
    def _decode(cls, data: dict) -> Task:
        return cls(**{f.name: data[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class KernelTask(Task):
    KIND: ClassVar[str] = "KERNEL"
    kernel: str
    name: str
    block_dim: int
    inputs: tuple[Arg, ...]
    outputs: tuple[Arg, ...]
    workspace: tuple[Arg, ...]

    @classmethod
    def _decode(cls, data: dict) -> Task:
        args = {k: tuple(Arg.from_json(a) for a in data[k]) for k in ("inputs", "outputs", "workspace")}
        return cls(data["stream"], data["kernel"], data["name"], data["block_dim"], **args)


@dataclass(frozen=True)
class EventRecordTask(Task):
    KIND: ClassVar[str] = "EVENT_RECORD"
    event: int


@dataclass(frozen=True)
class EventWaitTask(Task):
    KIND: ClassVar[str] = "EVENT_WAIT"
    event: int


@dataclass(frozen=True)
class MemcpyTask(Task):
    """A copy between the host's buffer of graph input/output `port` and `arg` on the device."""

    KIND: ClassVar[str] = "MEMCPY_ASYNC"
    direction: Direction
    port: int
    arg: Arg

    def to_json(self) -> dict[str, object]:
        return {"kind": self.KIND, "stream": self.stream, "direction": self.direction.value,
                "port": self.port, "arg": self.arg.to_json()}

    @classmethod
    def _decode(cls, data: dict) -> Task:
        return cls(data["stream"], Direction(data["direction"]), data["port"], Arg.from_json(data["arg"]))


@dataclass(frozen=True)
class ModelEndGraphTask(Task):
    KIND: ClassVar[str] = "MODEL_END_GRAPH"


TASK_KINDS: dict[str, type[Task]] = {
    cls.KIND: cls for cls in (KernelTask, EventRecordTask, EventWaitTask, MemcpyTask, ModelEndGraphTask)
}


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
    return Arg(s.buffer, plan.addr(s), s.nbytes)


def _node_tasks(node: Node, stream: int, plan: MemoryPlan) -> list[Task]:
    if node.kind is NodeKind.H2D:
        return [MemcpyTask(stream, Direction.H2D, i, _arg(s, plan)) for i, s in enumerate(node.outputs)]
    if node.kind is NodeKind.D2H:
        return [MemcpyTask(stream, Direction.D2H, i, _arg(s, plan)) for i, s in enumerate(node.inputs)]
    if node.kind is NodeKind.END:
        return [ModelEndGraphTask(stream)]
    if node.kernel is None:
        op = node.op.name if node.op is not None else "op"
        raise ModelError(f"{op} '{node.name}' is not lowered to a kernel; run lower-to-kernel before task generation")
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
