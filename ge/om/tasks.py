"""The task list of an offline model, in GE's runtime task kinds.

    MEMCPY_ASYNC     H2D or D2H: a copy between a graph input/output and the device
    MEMCPY_ASYNC_D2D a copy between two device tensors (a control-flow body's
                     results into the tensors of the op's results)
    KERNEL           kernel, block_dim, argument addresses: inputs, outputs, workspace
    KERNEL_EX        an AI CPU kernel (GE's AI CPU task kind): kernel, the op type the
                     AI CPU kernel library runs, argument addresses: inputs, outputs
    EVENT_RECORD / EVENT_WAIT   event id; a wait consumes its record
    LABEL_SET / LABEL_GOTO      a label of the stream's task list / a jump to one
    LABEL_SWITCH_BY_INDEX       a jump to `labels[i]`, i the unsigned integer in
                     `index` (If: [else, then]; a Loop's test: [exit, body]; a
                     multi-gear model's Case: one label per gear)
    STREAM_ACTIVE    starts `streams`, which wait for it (a Case branch's other streams)
    MODEL_END_GRAPH  last, on stream 0, after every stream has finished

An argument is (tensor, addr, size): `tensor` indexes the memory plan's tensors,
`addr` is the device address the kernel reads or writes, `size` the bytes it covers.
The backend generates the list (`ge.backend.tasks`); the simulator runs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import Enum
from typing import ClassVar

from ge.om import limits
from ge.om.limits import Malformed, field, integer, items, mapping, shown, text


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
    def from_json(cls, data: object, where: str) -> Arg:
        """Three non-negative integers; whether they point into the plan is `ge.om.model`'s check."""
        values = items(data, where, 3)
        if len(values) != 3:
            raise Malformed(f"{where} must be [tensor, addr, size], not {len(values)} values")
        tensor, addr, size = (integer(v, f"{where}[{i}]") for i, v in enumerate(values))
        return cls(tensor, addr, size)


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
    def from_json(data: object, where: str) -> Task:
        """A task of a `.om` description, its fields checked for type and sign (what they
        refer to is `ge.om.model`'s check)."""
        data = mapping(data, where)
        kind = field(data, "kind", where)
        if not isinstance(kind, str) or kind not in TASK_KINDS:
            raise Malformed(f"{where}.kind is {shown(kind)}; allowed: {', '.join(TASK_KINDS)}")
        return TASK_KINDS[kind]._decode(data, where)

    @classmethod
    def _decode(cls, data: Mapping, where: str) -> Task:
        return cls(**{f.name: integer(field(data, f.name, where), f"{where}.{f.name}") for f in fields(cls)})


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
    def _decode(cls, data: Mapping, where: str) -> Task:
        args = {
            k: tuple(Arg.from_json(a, f"{where}.{k}[{i}]") for i, a in enumerate(items(field(data, k, where), f"{where}.{k}", limits.ARGS)))
            for k in ("inputs", "outputs", "workspace")
        }
        return cls(
            integer(field(data, "stream", where), f"{where}.stream"),
            text(field(data, "kernel", where), f"{where}.kernel"),
            text(field(data, "name", where), f"{where}.name"),
            integer(field(data, "block_dim", where), f"{where}.block_dim", 1, limits.BLOCK_DIM, " (CANN's block_dim limit)"),
            **args,
        )


@dataclass(frozen=True)
class AicpuTask(KernelTask):
    """A launch of an AI CPU kernel (GE's KERNEL_EX). It is a kernel launch (so what reads
    any launch's arguments reads it too), of one block and no workspace, plus the op type
    the AI CPU kernel library runs (CANN's kernel name in libcpu_kernels.so)."""

    KIND: ClassVar[str] = "KERNEL_EX"
    op_type: str = ""

    @classmethod
    def of(cls, stream: int, kernel: str, name: str, op_type: str, inputs: tuple[Arg, ...], outputs: tuple[Arg, ...]) -> AicpuTask:
        return cls(stream, kernel, name, 1, inputs, outputs, (), op_type)

    def to_json(self) -> dict[str, object]:
        return {"kind": self.KIND, "stream": self.stream, "kernel": self.kernel, "name": self.name, "op_type": self.op_type,
                "inputs": [a.to_json() for a in self.inputs], "outputs": [a.to_json() for a in self.outputs]}

    @classmethod
    def _decode(cls, data: Mapping, where: str) -> Task:
        args = {
            k: tuple(Arg.from_json(a, f"{where}.{k}[{i}]") for i, a in enumerate(items(field(data, k, where), f"{where}.{k}", limits.ARGS)))
            for k in ("inputs", "outputs")
        }
        op_type = text(field(data, "op_type", where), f"{where}.op_type")
        if not op_type:
            raise Malformed(f"{where}.op_type is empty; it names the op the AI CPU kernel runs")
        return cls.of(
            integer(field(data, "stream", where), f"{where}.stream"),
            text(field(data, "kernel", where), f"{where}.kernel"),
            text(field(data, "name", where), f"{where}.name"),
            op_type,
            args["inputs"],
            args["outputs"],
        )


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
    def _decode(cls, data: Mapping, where: str) -> Task:
        direction = field(data, "direction", where)
        if not isinstance(direction, str) or direction not in {d.value for d in Direction}:
            raise Malformed(f"{where}.direction is {shown(direction)}; allowed: {', '.join(d.value for d in Direction)}")
        return cls(
            integer(field(data, "stream", where), f"{where}.stream"),
            Direction(direction),
            integer(field(data, "port", where), f"{where}.port"),
            Arg.from_json(field(data, "arg", where), f"{where}.arg"),
        )


@dataclass(frozen=True)
class ModelEndGraphTask(Task):
    KIND: ClassVar[str] = "MODEL_END_GRAPH"


@dataclass(frozen=True)
class DeviceCopyTask(Task):
    """A copy of `src` to `dst`, both device tensors of the same size."""

    KIND: ClassVar[str] = "MEMCPY_ASYNC_D2D"
    src: Arg
    dst: Arg

    def to_json(self) -> dict[str, object]:
        return {"kind": self.KIND, "stream": self.stream, "src": self.src.to_json(), "dst": self.dst.to_json()}

    @classmethod
    def _decode(cls, data: Mapping, where: str) -> Task:
        return cls(
            integer(field(data, "stream", where), f"{where}.stream"),
            Arg.from_json(field(data, "src", where), f"{where}.src"),
            Arg.from_json(field(data, "dst", where), f"{where}.dst"),
        )


@dataclass(frozen=True)
class LabelSetTask(Task):
    KIND: ClassVar[str] = "LABEL_SET"
    label: int


@dataclass(frozen=True)
class LabelGotoTask(Task):
    KIND: ClassVar[str] = "LABEL_GOTO"
    label: int


@dataclass(frozen=True)
class LabelSwitchTask(Task):
    """GE's LabelSwitchByIndex: go on at `labels[i]`, i the unsigned little-endian
    integer the device tensor `index` holds (a bool is one byte)."""

    KIND: ClassVar[str] = "LABEL_SWITCH_BY_INDEX"
    index: Arg
    labels: tuple[int, ...]

    def to_json(self) -> dict[str, object]:
        return {"kind": self.KIND, "stream": self.stream, "index": self.index.to_json(), "labels": list(self.labels)}

    @classmethod
    def _decode(cls, data: Mapping, where: str) -> Task:
        labels = items(field(data, "labels", where), f"{where}.labels", limits.ARGS)
        return cls(
            integer(field(data, "stream", where), f"{where}.stream"),
            Arg.from_json(field(data, "index", where), f"{where}.index"),
            tuple(integer(v, f"{where}.labels[{i}]") for i, v in enumerate(labels)),
        )


@dataclass(frozen=True)
class StreamActiveTask(Task):
    """GE's StreamActive: `streams`, inactive until it runs, go on from its end (a stream
    that a STREAM_ACTIVE of the list names runs only once one has run)."""

    KIND: ClassVar[str] = "STREAM_ACTIVE"
    streams: tuple[int, ...]

    def to_json(self) -> dict[str, object]:
        return {"kind": self.KIND, "stream": self.stream, "streams": list(self.streams)}

    @classmethod
    def _decode(cls, data: Mapping, where: str) -> Task:
        streams = items(field(data, "streams", where), f"{where}.streams", limits.STREAMS)
        return cls(
            integer(field(data, "stream", where), f"{where}.stream"),
            tuple(integer(v, f"{where}.streams[{i}]") for i, v in enumerate(streams)),
        )


TASK_KINDS: dict[str, type[Task]] = {
    cls.KIND: cls
    for cls in (
        KernelTask, AicpuTask, EventRecordTask, EventWaitTask, MemcpyTask, ModelEndGraphTask,
        DeviceCopyTask, LabelSetTask, LabelGotoTask, LabelSwitchTask, StreamActiveTask,
    )
}
