"""An independent proof that a task list and its memory plan are safe to run.

It reads only the task list and the plan's tensor table, not the schedule or the
planner's reasoning, and checks:

- events: on each id, records and waits alternate (record first); each wait is
  ordered after its record; a record, and the start of a wait, after the previous
  wait on its id (an id is one flag: two records pending at once lose one, two
  waits pending at once may take each other's); nothing is left recorded;
- order: "happens before" is stream order plus record -> wait, transitively;
  MODEL_END_GRAPH is last and everything happens before it;
- accesses: every argument lies inside its tensor; a tensor is written by one
  task (weights by none: the model load writes them), or by device copies only
  (control flow joins the results of its branches and iterations so), the first
  before any task reads it;
- memory: the regions are disjoint, every tensor lies in its region, and any two
  tensors whose bytes overlap are never live at once: every task touching one
  happens before the task that writes the other.

Jumps: a forward jump only skips tasks, so list order stays a safe order. A jump
back from task j to the label of task i < j repeats tasks i..j: a tensor touched
both inside and outside that range counts as touched by every task in it (it
lives through every iteration).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from ge.om.memory import REGION_ORDER, MemoryPlan, Region
from ge.om.tasks import (
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


class UnsafeModel(AssertionError):
    """The build produced a task list or memory plan that could compute wrong results."""


@dataclass
class _Tensor:
    start: int
    end: int
    region: Region
    writers: list[int] = field(default_factory=list)
    touched: int = 0
    """Bitset of the tasks that read or write the tensor."""


def verify(tasks: Sequence[Task], plan: MemoryPlan) -> None:
    """Raise `UnsafeModel` naming the first violation found."""
    before = _happens_before(tasks)
    tensors = _tensors(plan)
    for t, task in enumerate(tasks):
        for arg, writes in _accesses(task):
            _access(tensors, t, arg, writes, task)
    for start, end in _loops(tasks):
        span = (1 << (end + 1)) - (1 << start)
        for tensor in tensors:
            if tensor.touched & span and tensor.touched & ~span:
                tensor.touched |= span
    for i, tensor in enumerate(tensors):
        _check_writes(i, tensor, before, plan, tasks)
    _check_overlaps(tensors, before, plan)


def _loops(tasks: Sequence[Task]) -> list[tuple[int, int]]:
    """(label task, jump task) of every jump back."""
    at = {task.label: t for t, task in enumerate(tasks) if isinstance(task, LabelSetTask)}
    loops = []
    for t, task in enumerate(tasks):
        targets = (task.label,) if isinstance(task, LabelGotoTask) else task.labels if isinstance(task, LabelSwitchTask) else ()
        for label in targets:
            if label not in at:
                raise UnsafeModel(f"task {t} jumps to label {label}, which no task sets")
            if at[label] < t:
                loops.append((at[label], t))
    return loops


def _happens_before(tasks: Sequence[Task]) -> list[int]:
    before = [0] * len(tasks)
    last_on: dict[int, int] = {}
    recorded: dict[int, int] = {}  # event id -> its pending record
    last_wait: dict[int, int] = {}
    for t, task in enumerate(tasks):
        prev = last_on.get(task.stream)
        have = 0 if prev is None else before[prev] | 1 << prev
        if isinstance(task, EventRecordTask):
            if task.event in recorded:
                raise UnsafeModel(f"task {t}: event {task.event} is recorded again before it was waited for")
            w = last_wait.get(task.event)
            if w is not None and not (have >> w & 1):
                raise UnsafeModel(f"task {t}: event {task.event} is recorded before its previous wait (task {w}) is done")
            recorded[task.event] = t
        if isinstance(task, EventWaitTask):
            w = last_wait.get(task.event)
            if w is not None and not (have >> w & 1):
                raise UnsafeModel(f"task {t}: waits for event {task.event} while its previous wait (task {w}) may be pending")
            r = recorded.pop(task.event, None)
            if r is None:
                raise UnsafeModel(f"task {t}: waits for event {task.event}, which nothing has recorded")
            have |= before[r] | 1 << r
            last_wait[task.event] = t
        before[t] = have
        last_on[task.stream] = t
    if recorded:
        raise UnsafeModel(f"events {sorted(recorded)} are recorded but never waited for")
    if not tasks or not isinstance(tasks[-1], ModelEndGraphTask):
        raise UnsafeModel("the task list does not end with MODEL_END_GRAPH")
    everything = (1 << (len(tasks) - 1)) - 1
    if before[-1] != everything:
        missing = [t for t in range(len(tasks) - 1) if not before[-1] >> t & 1]
        raise UnsafeModel(f"tasks {missing[:5]} may still run when MODEL_END_GRAPH ends the model")
    return before


def _tensors(plan: MemoryPlan) -> list[_Tensor]:
    cursor = 0
    for region in REGION_ORDER:
        if plan.bases[region] < cursor:
            raise UnsafeModel(f"region {region.value} starts at {plan.bases[region]}, inside the region before it")
        cursor = plan.bases[region] + plan.sizes[region]
    tensors = []
    for p in plan.placements:
        if p.offset < 0 or p.offset + p.size > plan.sizes[p.region]:
            raise UnsafeModel(f"tensor '{p.name}' [{p.offset}, {p.offset + p.size}) is outside its {p.region.value} region")
        start = plan.bases[p.region] + p.offset
        tensors.append(_Tensor(start, start + p.size, p.region))
    return tensors


def _accesses(task: Task) -> list[tuple[Arg, bool]]:
    """(argument, whether the task writes it)."""
    if isinstance(task, KernelTask):
        return (
            [(a, False) for a in task.inputs]
            + [(a, True) for a in task.outputs]
            + [(a, True) for a in task.workspace]
        )
    if isinstance(task, MemcpyTask):
        return [(task.arg, task.direction is Direction.H2D)]
    if isinstance(task, DeviceCopyTask):
        return [(task.src, False), (task.dst, True)]
    if isinstance(task, LabelSwitchTask):
        return [(task.index, False)]
    return []


def _access(tensors: list[_Tensor], t: int, arg: Arg, writes: bool, task: Task) -> None:
    if not 0 <= arg.tensor < len(tensors):
        raise UnsafeModel(f"task {t} ({task.KIND}) names tensor {arg.tensor}, which the plan does not have")
    tensor = tensors[arg.tensor]
    if arg.addr < tensor.start or arg.addr + arg.size > tensor.end:
        raise UnsafeModel(
            f"task {t} ({task.KIND}) accesses [{arg.addr}, {arg.addr + arg.size}) outside tensor {arg.tensor} "
            f"[{tensor.start}, {tensor.end})"
        )
    if writes and t not in tensor.writers:
        tensor.writers.append(t)
    tensor.touched |= 1 << t


def _check_writes(i: int, tensor: _Tensor, before: list[int], plan: MemoryPlan, tasks: Sequence[Task]) -> None:
    name = plan.placements[i].name
    if tensor.region is Region.WEIGHT:
        if tensor.writers:
            raise UnsafeModel(f"weight '{name}' is written by task {tensor.writers[0]}")
        return
    if not tensor.touched:
        return
    copies = all(isinstance(tasks[w], DeviceCopyTask) for w in tensor.writers)
    if not tensor.writers or (len(tensor.writers) > 1 and not copies):
        raise UnsafeModel(f"tensor '{name}' is written by {len(tensor.writers)} tasks {tensor.writers[:5]}")
    w = tensor.writers[0]
    readers = tensor.touched & ~(1 << w)
    while readers:  # the readers, lowest first
        low = readers & -readers
        t = low.bit_length() - 1
        if not before[t] >> w & 1:
            raise UnsafeModel(f"tensor '{name}': task {t} may read it before task {w} has written it")
        readers ^= low


def _check_overlaps(tensors: list[_Tensor], before: list[int], plan: MemoryPlan) -> None:
    """Tensors sharing a byte must be ordered: each dead before the next one's writer.

    "Dead before" is transitive (a writer touches its tensor, and happens-before is
    transitive), and it can only hold in writer order, so a sweep over addresses that
    keeps the tensors covering the current byte sorted by writer need only check
    neighbours as they become neighbours: n log n, not every overlapping pair.
    """
    events = []
    for i, t in enumerate(tensors):
        if t.touched and t.end > t.start:
            key = (t.writers[0] if t.writers else -1, i)
            events.append((t.start, 1, key))
            events.append((t.end, 0, key))
    events.sort()  # at one address, tensors end before others start there
    active: list[tuple[int, int]] = []
    for _, starts, key in events:
        k = bisect_left(active, key)
        if starts:
            if k > 0:
                _check_pair(tensors, before, plan, active[k - 1][1], key[1])
            if k < len(active):
                _check_pair(tensors, before, plan, key[1], active[k][1])
            active.insert(k, key)
        else:
            del active[k]
            if 0 < k < len(active):
                _check_pair(tensors, before, plan, active[k - 1][1], active[k][1])


def _check_pair(tensors: list[_Tensor], before: list[int], plan: MemoryPlan, i: int, j: int) -> None:
    a, b = tensors[i], tensors[j]
    if not (_dead_before(a, b, before) or _dead_before(b, a, before)):
        raise UnsafeModel(
            f"tensors '{plan.placements[i].name}' and '{plan.placements[j].name}' share bytes "
            f"[{max(a.start, b.start)}, {min(a.end, b.end)}) and may be live at the same time"
        )


def _dead_before(a: _Tensor, b: _Tensor, before: list[int]) -> bool:
    """Every task touching `a` happens before the task that writes `b`."""
    return bool(b.writers) and a.touched & ~before[b.writers[0]] == 0
