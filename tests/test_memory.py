"""Memory planning (ge/backend/memory.py) and the safety proof of task lists (ge/backend/verify.py).

The proof walks a compiled model's task list: no two tensors sharing bytes are
live at once, every read follows its write, events pair up. It runs on ResNet-50,
BERT-base and drawn graphs, and must catch the bugs it exists for (a plan that
overlaps live tensors, a missing event, a read before a write).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ge
from dialects.ascend_graph import AddOp, ExpOp, ReluOp, ReshapeOp, SplitOp, TanhOp, bool_attr
from ge.backend import memory, streams
from ge.backend.memory import ALIGNMENT, BEST_FIT, BEST_FIT_LIFETIME, NO_REUSE, SIZE_CLASS
from ge.backend.schedule import schedule_of
from ge.om import Region
from ge.om.tasks import EventRecordTask, EventWaitTask, KernelTask, ModelEndGraphTask
from ge.backend.verify import UnsafeModel, verify
from ge.models import DEMO_MODELS
from ge.testing import GraphBuilder, graphs

QUIET = {"export_compile_stat": 0}


def plan_of(module, max_streams: int = 4, reuse: bool = True):
    sched = schedule_of(module)
    assigned = streams.assign(sched, max_streams, streams.MAX_EVENT_IDS)
    return sched, memory.plan(sched, assigned, reuse=reuse)


def chain(length: int, shape=(64, 64)):
    g = GraphBuilder()
    x = g.input(list(shape))
    for i in range(length):
        x = g.op(ExpOp if i % 2 else ReluOp, [x])
    g.output(x)
    return g.finish().module


# ------------------------------------------------------------------- the plan itself


def test_a_chain_needs_two_buffers():
    """Each op reads one buffer and writes the other: ping-pong, at the minimum."""
    sched, plan = plan_of(chain(8))
    size = 64 * 64 * 4
    assert plan.feature_map_minimum == 2 * size
    assert plan.sizes[Region.FEATURE_MAP] == 2 * size
    assert plan.feature_map_no_reuse == 7 * size  # the last op writes the output region
    assert plan.sizes[Region.OUTPUT] == size and plan.sizes[Region.INPUT] == size


def test_no_reuse_gives_every_buffer_its_own_memory():
    sched, plan = plan_of(chain(8), reuse=False)
    assert plan.strategy == NO_REUSE
    assert plan.sizes[Region.FEATURE_MAP] == plan.feature_map_no_reuse
    spans = sorted((p.offset, p.offset + p.size) for p in plan.placements if p.region is Region.FEATURE_MAP)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def test_every_assigner_runs_and_the_smallest_is_kept():
    _, plan = plan_of(chain(8))
    assert set(plan.candidates) == {SIZE_CLASS, BEST_FIT, BEST_FIT_LIFETIME}
    assert plan.sizes[Region.FEATURE_MAP] == min(plan.candidates.values())
    assert plan.candidates[plan.strategy] == min(plan.candidates.values())


def test_offsets_and_sizes_are_aligned_and_regions_disjoint():
    _, plan = plan_of(chain(5, shape=(3, 7)))
    for p in plan.placements:
        assert p.offset % ALIGNMENT == 0 and p.size % ALIGNMENT == 0 and p.size > 0
    ends = [plan.bases[r] + plan.sizes[r] for r in memory.REGION_ORDER]
    starts = [plan.bases[r] for r in memory.REGION_ORDER]
    assert all(e <= s for e, s in zip(ends, starts[1:]))
    assert all(b % ALIGNMENT == 0 for b in starts)


def test_views_alias_their_input():
    g = GraphBuilder()
    x = g.op(ReluOp, [g.input([4, 6])])
    r = g.op(ReshapeOp, [x], shape=[24])
    g.output(g.op(ExpOp, [r]))
    sched = schedule_of(g.finish().module)
    relu, exp = (n for n in sched.nodes if n.name in ("Relu_0", "Exp_0"))
    assert exp.inputs == relu.outputs  # the reshape made no buffer and no node
    assert [n.name for n in sched.nodes] == ["inputs", "Relu_0", "Exp_0", "outputs", "MODEL_END_GRAPH"]


def test_no_task_split_outputs_are_slices_of_the_input():
    g = GraphBuilder()
    x = g.op(ReluOp, [g.input([6, 8])])
    split = g.op(SplitOp, [x], split_dim=0, num_split=3)
    split.attributes["_no_task"] = bool_attr(True)
    for part in split.results:
        g.output(g.op(TanhOp, [part]))
    sched = schedule_of(g.finish().module)
    relu = next(n for n in sched.nodes if n.name == "Relu_0")
    tanhs = [n for n in sched.nodes if n.name.startswith("Tanh")]
    source = relu.outputs[0]
    assert [t.inputs[0].offset for t in tanhs] == [0, 64, 128]
    assert all(t.inputs[0].buffer == source.buffer and t.inputs[0].nbytes == 64 for t in tanhs)
    assert not any(n.name.startswith("Split") for n in sched.nodes)


def test_an_output_keeps_the_buffer_it_views_out_of_reuse():
    g = GraphBuilder()
    x = g.op(ReluOp, [g.input([4, 6])])
    g.output(g.op(ReshapeOp, [x], shape=[24]))
    g.output(g.op(ExpOp, [x]))
    sched, plan = plan_of(g.finish().module)
    relu = next(n for n in sched.nodes if n.name == "Relu_0")
    assert sched.buffers[relu.outputs[0].buffer].region is Region.OUTPUT


def test_shared_weights_are_stored_once():
    g = GraphBuilder()
    x = g.input([4, 8])
    w = np.arange(8, dtype=np.float32)
    g.output(g.op(AddOp, [x, g.weight(w, name="w")]))
    g.output(g.op(AddOp, [x, g.weight(w, name="w")]))
    sched, plan = plan_of(g.finish().module)
    assert len(sched.of_region(Region.WEIGHT)) == 1
    assert plan.sizes[Region.WEIGHT] == ALIGNMENT


@settings(max_examples=60)
@given(graphs(max_ops=8), st.sampled_from([1, 2, 4]))
def test_drawn_plans_lie_between_the_bounds(case, max_streams):
    _, plan = plan_of(case.module, max_streams)
    fm = plan.sizes[Region.FEATURE_MAP]
    assert plan.feature_map_minimum <= fm <= plan.feature_map_no_reuse


@settings(max_examples=60)
@given(graphs(max_ops=10), st.sampled_from([1, 2, 4]))
def test_conflicts_are_the_pairs_not_dead_before_each_other(case, max_streams):
    """The planner finds conflicts without asking every pair: it must find exactly these."""
    sched = schedule_of(case.module)
    assigned = streams.assign(sched, max_streams, streams.MAX_EVENT_IDS)
    fm = sched.of_region(Region.FEATURE_MAP)

    def dead_before(a, b) -> bool:
        return all(assigned.happens_before(t, b.writer) for t in a.accesses)

    found = memory._conflicts(fm, assigned)
    for i, a in enumerate(fm):
        want = {j for j, b in enumerate(fm) if j != i and not (dead_before(a, b) or dead_before(b, a))}
        assert found[i] == want, a.name


def test_the_minimum_is_a_lower_bound_on_a_wide_graph():
    """Three live branches at once: the peak counts all of them."""
    g = GraphBuilder()
    x = g.input([32, 32])
    a, b, c = (g.op(op, [x]) for op in (ReluOp, ExpOp, TanhOp))
    g.output(g.op(AddOp, [g.op(AddOp, [a, b]), c]))
    _, plan = plan_of(g.finish().module, max_streams=1)
    assert plan.feature_map_minimum == 4 * 32 * 32 * 4  # a, b, c and a + b
    assert plan.sizes[Region.FEATURE_MAP] == plan.feature_map_minimum


# ------------------------------------------------------- the proof on compiled models


@pytest.fixture(scope="module")
def tiny() -> ge.Model:
    return ge.compile(DEMO_MODELS[0].path, QUIET)


def relocated(model: ge.Model, tensor: int, offset: int) -> tuple[list, memory.MemoryPlan]:
    """The task list and plan with `tensor` moved to `offset` in its region, every argument with it."""
    plan = model.memory
    old = plan.placements[tensor]
    shift = offset - old.offset
    placements = list(plan.placements)
    placements[tensor] = dataclasses.replace(old, offset=offset)

    def move(arg):
        return dataclasses.replace(arg, addr=arg.addr + shift) if arg.tensor == tensor else arg

    tasks = []
    for t in model.tasks:
        if isinstance(t, KernelTask):
            t = dataclasses.replace(
                t, inputs=tuple(map(move, t.inputs)), outputs=tuple(map(move, t.outputs)), workspace=tuple(map(move, t.workspace))
            )
        tasks.append(t)
    return tasks, dataclasses.replace(plan, placements=tuple(placements))


def test_the_proof_accepts_a_compiled_model(tiny):
    verify(tiny.tasks, tiny.memory)


def test_the_proof_catches_live_tensors_sharing_bytes(tiny):
    """A kernel's output moved onto its input: both are live while it runs."""
    kernel = next(t for t in tiny.tasks if isinstance(t, KernelTask)
                  and tiny.memory.placements[t.inputs[0].tensor].region is Region.FEATURE_MAP
                  and tiny.memory.placements[t.outputs[0].tensor].region is Region.FEATURE_MAP)
    source = tiny.memory.placements[kernel.inputs[0].tensor]
    tasks, plan = relocated(tiny, kernel.outputs[0].tensor, source.offset)
    with pytest.raises(UnsafeModel, match="may be live at the same time"):
        verify(tasks, plan)


def test_the_proof_catches_a_missing_event(tiny):
    assert tiny.streams > 1, "the demo ResNet's downsample branch should run on its own stream"
    wait = max(i for i, t in enumerate(tiny.tasks) if isinstance(t, EventWaitTask))
    tasks = [t for i, t in enumerate(tiny.tasks) if i != wait]
    with pytest.raises(UnsafeModel, match="never waited for"):
        verify(tasks, tiny.memory)
    first = min(i for i, t in enumerate(tiny.tasks) if isinstance(t, EventWaitTask))
    record = max(i for i, t in enumerate(tiny.tasks[:first]) if t.KIND == "EVENT_RECORD")
    tasks = [t for i, t in enumerate(tiny.tasks) if i not in (first, record)]
    with pytest.raises(UnsafeModel, match="before task"):
        verify(tasks, tiny.memory)


def test_the_proof_catches_a_read_before_its_write(tiny):
    """A consumer swapped ahead of its producer on their stream."""
    tasks = list(tiny.tasks)
    i = next(
        i for i, (a, b) in enumerate(zip(tasks, tasks[1:]))
        if isinstance(a, KernelTask) and isinstance(b, KernelTask) and a.stream == b.stream
        and {x.tensor for x in a.outputs} & {x.tensor for x in b.inputs}
    )
    tasks[i], tasks[i + 1] = tasks[i + 1], tasks[i]
    with pytest.raises(UnsafeModel, match="may read it before"):
        verify(tasks, tiny.memory)


def test_the_proof_catches_events_recorded_twice(tiny):
    tasks = [EventRecordTask(0, 7), EventRecordTask(1, 7), EventWaitTask(0, 7), EventWaitTask(1, 7), ModelEndGraphTask(0)]
    empty = dataclasses.replace(tiny.memory, placements=())
    with pytest.raises(UnsafeModel, match="recorded again"):
        verify(tasks, empty)
    tasks = [EventRecordTask(0, 7), EventWaitTask(1, 7), EventRecordTask(0, 7), EventWaitTask(1, 7), ModelEndGraphTask(0)]
    with pytest.raises(UnsafeModel, match="before its previous wait"):
        verify(tasks, empty)


def test_the_proof_catches_work_left_at_the_end(tiny):
    empty = dataclasses.replace(tiny.memory, placements=())
    kernel = KernelTask(1, "k", "n", 1, (), (), ())
    with pytest.raises(UnsafeModel, match="may still run when MODEL_END_GRAPH"):
        verify([kernel, ModelEndGraphTask(0)], empty)  # stream 1 never joins stream 0
    with pytest.raises(UnsafeModel, match="does not end with MODEL_END_GRAPH"):
        verify([ModelEndGraphTask(0), kernel], empty)


def test_no_reuse_compiles_to_the_no_reuse_size(tiny):
    plain = ge.compile(DEMO_MODELS[0].path, {**QUIET, "disable_reuse_memory": 1})
    verify(plain.tasks, plain.memory)
    assert plain.memory.sizes[Region.FEATURE_MAP] == plain.memory.feature_map_no_reuse == tiny.memory.feature_map_no_reuse
    assert tiny.memory.sizes[Region.FEATURE_MAP] < plain.memory.sizes[Region.FEATURE_MAP]


@settings(max_examples=40)
@given(graphs(max_ops=8), st.sampled_from([{}, {"enable_single_stream": True}, {"stream_max_parallel_num": "AIcoreEngine:2"}]))
def test_the_proof_holds_on_drawn_graphs(case, streams_option):
    model = ge.compile(case.module, {**QUIET, **streams_option})
    verify(model.tasks, model.memory)
    fm = model.memory.sizes[Region.FEATURE_MAP]
    assert model.memory.feature_map_minimum <= fm <= model.memory.feature_map_no_reuse


@pytest.mark.slow
def test_resnet50_plan_is_proven_and_near_the_minimum(resnet50_onnx):
    model = ge.compile(resnet50_onnx, QUIET)
    verify(model.tasks, model.memory)
    plan = model.memory
    assert plan.sizes[Region.FEATURE_MAP] <= 1.25 * plan.feature_map_minimum
    assert plan.feature_map_no_reuse > 5 * plan.sizes[Region.FEATURE_MAP]


@pytest.mark.slow
def test_bert_plan_is_proven(bert_base_onnx):
    model = ge.compile(bert_base_onnx, QUIET)
    verify(model.tasks, model.memory)
    plan = model.memory
    assert plan.feature_map_minimum <= plan.sizes[Region.FEATURE_MAP] <= 1.25 * plan.feature_map_minimum


def test_the_proof_catches_two_waits_pending_on_one_id(tiny):
    """Stream 2 may start waiting on id 3 while stream 1 still waits for its first
    record: that record could release stream 2 instead."""
    empty = dataclasses.replace(tiny.memory, placements=())
    tasks = [
        EventRecordTask(0, 3), EventWaitTask(1, 3), EventRecordTask(1, 3), EventWaitTask(2, 3),
        EventRecordTask(1, 4), EventRecordTask(2, 5), EventWaitTask(0, 4), EventWaitTask(0, 5), ModelEndGraphTask(0),
    ]
    with pytest.raises(UnsafeModel, match="previous wait .* may be pending"):
        verify(tasks, empty)
    ordered = [*tasks[:3], EventRecordTask(1, 6), EventWaitTask(2, 6), *tasks[3:]]  # stream 2 now starts after stream 1's wait
    verify(ordered, empty)
