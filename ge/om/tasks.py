"""The task list of an offline model, in GE's runtime task kinds.

    MEMCPY_ASYNC     H2D or D2H: a copy between a graph input/output and the device
    KERNEL           kernel, block_dim, argument addresses: inputs, outputs, workspace
    EVENT_RECORD / EVENT_WAIT   event id; a wait consumes its record
    MODEL_END_GRAPH  last, on stream 0, after every stream has finished

An argument is (tensor, addr, size): `tensor` indexes the memory plan's tensors,
`addr` is the device address the kernel reads or writes, `size` the bytes it covers.
The backend generates the list (`ge.backend.tasks`); the simulator runs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from enum import Enum
from typing import ClassVar


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
