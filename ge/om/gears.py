"""The gear table of a multi-gear model: one static build per gear, in one `.om`.

A model compiled with `--dynamic_batch_size`, `--dynamic_image_size` or
`--dynamic_dims` (`ge.gears`) holds a `Gear` per gear: the input shapes it takes,
its inputs and outputs, its memory placements, streams, events and task list. All
gears share the model's one memory layout (the regions' bases and sizes: the
feature map as large as the largest gear's, never the sum, since gears never run
at once; inputs and outputs as large as the largest gear's), its weight region
(each distinct weight stored once) and its kernels (a kernel identical in two
gears is stored once). The model's own inputs, outputs, placements and tasks are
those of its largest gear, so a reader that knows nothing of gears sees a valid
static model of that gear.

At run time the host maps the inputs' shapes to the gear whose input shapes equal
them (`pick`; an input matching no gear is refused with the list of gears) and
fills the model's gear-index input with that gear's index, as GE's runtime fills
its multi-batch input. The device then runs GE's Case (`case`): a LABEL_SWITCH_BY_INDEX
on the gear index jumps to the gear's LABEL_SET, after which the gear's own task list
runs (a STREAM_ACTIVE first starting its other streams, which GE's branch streams wait
for) and ends the model with its MODEL_END_GRAPH. So a gear costs its static task
list plus the copy of the index (fused with the other small inputs) and the switch
and label tasks, as the simulator charges them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ge.core.errors import InputError
from ge.om import limits
from ge.om.limits import Malformed, integer, items, mapping, text
from ge.om.memory import MemoryPlan, Placement, Region, align
from ge.om.tasks import (
    Arg,
    Direction,
    LabelSetTask,
    LabelSwitchTask,
    MemcpyTask,
    StreamActiveTask,
    Task,
)

if TYPE_CHECKING:
    from ge.om.model import TensorDesc

STRATEGIES = ("dynamic_batch_size", "dynamic_image_size", "dynamic_dims")
GEAR_INDEX = "ascend_gear_index"
"""The gear-index input: one int32, the index of the gear to run (the host fills it)."""
GEAR_INDEX_DTYPE = "int32"


@dataclass(frozen=True)
class Gear:
    """One gear's static build, in the model's shared memory layout."""

    shapes: dict[str, tuple[int, ...]]
    """Each graph input's (logical) shape in this gear."""
    inputs: tuple[TensorDesc, ...]
    outputs: tuple[TensorDesc, ...]
    memory: MemoryPlan
    streams: int
    events: int
    tasks: tuple[Task, ...]
    build: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "shapes": {name: list(shape) for name, shape in self.shapes.items()},
            "inputs": [t.to_json() for t in self.inputs],
            "outputs": [t.to_json() for t in self.outputs],
            "memory": self.memory.to_json(),
            "streams": self.streams,
            "events": self.events,
            "tasks": [t.to_json() for t in self.tasks],
            "build": self.build,
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> Gear:
        """A gear of a `.om` description, its fields checked for type, sign and count
        (what they point to is `ge.om.model`'s check, as for the model's own)."""
        from ge.om.model import TensorDesc

        data = mapping(data, where)
        shapes = mapping(limits.field(data, "shapes", where), f"{where}.shapes")
        if len(shapes) > limits.PORTS:
            raise Malformed(f"{where}.shapes has {len(shapes)} inputs; allowed: at most {limits.PORTS}")

        def shape(value: object, at: str) -> tuple[int, ...]:
            return tuple(integer(d, f"{at}[{i}]") for i, d in enumerate(items(value, at, limits.RANK)))

        def descs(key: str) -> tuple[TensorDesc, ...]:
            listed = items(limits.field(data, key, where), f"{where}.{key}", limits.PORTS)
            return tuple(TensorDesc.from_json(t, f"{where}.{key}[{i}]") for i, t in enumerate(listed))

        tasks = items(limits.field(data, "tasks", where), f"{where}.tasks", limits.TASKS)
        return cls(
            {text(k, f"{where}.shapes"): shape(v, f"{where}.shapes.{k}") for k, v in shapes.items()},
            descs("inputs"),
            descs("outputs"),
            MemoryPlan.from_json(limits.field(data, "memory", where), f"{where}.memory"),
            integer(limits.field(data, "streams", where), f"{where}.streams", 1, limits.STREAMS),
            integer(limits.field(data, "events", where), f"{where}.events", 0, limits.EVENTS),
            tuple(Task.from_json(t, f"{where}.tasks[{i}]") for i, t in enumerate(tasks)),
            dict(mapping(limits.field(data, "build", where), f"{where}.build")),
        )


def describe(shapes: Mapping[str, tuple[int, ...]]) -> str:
    """A gear's shapes as `--input_shape` spells them."""
    return ";".join(f"{name}:{','.join(map(str, shape))}" for name, shape in shapes.items())


def pick(gears: tuple[Gear, ...], given: Mapping[str, tuple[int, ...]]) -> int:
    """The index of the gear whose input shapes are `given` (name -> shape); refused,
    listing the gears, when none is."""
    for i, gear in enumerate(gears):
        if all(tuple(given.get(name, ())) == shape for name, shape in gear.shapes.items()):
            return i
    shown = "; ".join(f"{name}{list(shape)}" for name, shape in given.items())
    listed = " | ".join(describe(g.shapes) for g in gears)
    raise InputError(f"the inputs' shapes ({shown}) match no gear of the model; its {len(gears)} gears are: {listed}")


def case(gears: tuple[Gear, ...], index: Arg) -> tuple[tuple[Task, ...], int]:
    """GE's Case over the gears, as one task list on stream 0, and its stream count: the
    gear index copied in (input port `len(inputs)`, after the gear's own inputs), a
    LABEL_SWITCH_BY_INDEX on it with label i for gear i, then each gear after its
    LABEL_SET: a STREAM_ACTIVE of its other streams (numbered after the earlier
    gears'), then its tasks as built, ending with its MODEL_END_GRAPH. Event ids are
    shared: only one gear runs."""
    ports = len(gears[0].inputs)
    tasks: list[Task] = [MemcpyTask(0, Direction.H2D, ports, index), LabelSwitchTask(0, index, tuple(range(len(gears))))]
    streams = 1
    for label, gear in enumerate(gears):
        moved = {s: (0 if s == 0 else streams + s - 1) for s in range(gear.streams)}
        tasks.append(LabelSetTask(0, label))
        if gear.streams > 1:
            tasks.append(StreamActiveTask(0, tuple(moved[s] for s in range(1, gear.streams))))
        tasks += [dataclasses.replace(t, stream=moved[t.stream]) for t in gear.tasks]
        streams += gear.streams - 1
    return tuple(tasks), streams


def index_placement(gears: tuple[Gear, ...], index: Arg) -> Placement:
    """The gear index's placement in the input region (after every gear's inputs)."""
    base = gears[0].memory.bases[Region.INPUT]
    return Placement(GEAR_INDEX, Region.INPUT, index.addr - base, align(index.size))
