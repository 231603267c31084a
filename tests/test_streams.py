"""Stream assignment and events (ge/backend/streams.py), on graphs built by hand and drawn.

The schedule of an unlowered graph makes every compute op a kernel node, so the
assignment is tested here without the lowering.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from dialects.ascend_graph import AddOp, ExpOp, MulOp, ReluOp, ReshapeOp, SigmoidOp, TanhOp
from ge.backend import streams
from ge.backend.schedule import NodeKind, Schedule, schedule_of
from ge.testing import GraphBuilder, graphs


def diamond() -> Schedule:
    """x -> relu -> exp -> tanh and x -> sigmoid, joined by an add."""
    g = GraphBuilder()
    x = g.input([4, 8])
    a = g.op(TanhOp, [g.op(ExpOp, [g.op(ReluOp, [x])])])
    b = g.op(SigmoidOp, [x])
    g.output(g.op(AddOp, [a, b]))
    return schedule_of(g.finish().module)


def fan_out(branches: int) -> Schedule:
    """`branches` independent chains from one input, each its own output."""
    g = GraphBuilder()
    x = g.input([4, 8])
    for _ in range(branches):
        g.output(g.op(ExpOp, [g.op(ReluOp, [x])]))
    return schedule_of(g.finish().module)


def kernel_streams(sched: Schedule, assigned: streams.Streams) -> dict[str, int]:
    return {n.name: assigned.stream[n.index] for n in sched.nodes if n.kind is NodeKind.KERNEL}


def assert_ordered(sched: Schedule, assigned: streams.Streams) -> None:
    """Every read happens after its write; everything before MODEL_END_GRAPH."""
    for node in sched.nodes:
        for p in sched.preds(node):
            assert assigned.happens_before(p, node.index), (sched.nodes[p].name, node.name)
    end = sched.nodes[-1]
    assert end.kind is NodeKind.END
    assert all(assigned.happens_before(n.index, end.index) for n in sched.nodes[:-1])


def test_a_chain_stays_on_one_stream():
    g = GraphBuilder()
    y = g.op(ReluOp, [g.op(ExpOp, [g.input([2, 3])])])
    g.output(g.op(ReshapeOp, [y], shape=[6]))
    sched = schedule_of(g.finish().module)
    assigned = streams.assign(sched, 4, 16)
    assert assigned.count == 1 and assigned.events == []


def test_a_branch_runs_on_its_own_stream_and_joins_with_an_event():
    sched = diamond()
    assigned = streams.assign(sched, 4, 16)
    on = kernel_streams(sched, assigned)
    assert assigned.count == 2
    assert on["Sigmoid_0"] != on["Relu_0"] == on["Exp_0"] == on["Tanh_0"] == on["Add_0"]
    # the sigmoid waits for the input copy, the add for the sigmoid; MODEL_END_GRAPH
    # needs no event of its own, as the add already joined the two streams
    pairs = [(sched.nodes[e.producer].name, sched.nodes[e.consumer].name) for e in assigned.events]
    assert pairs == [("inputs", "Sigmoid_0"), ("Sigmoid_0", "Add_0")]
    assert_ordered(sched, assigned)


def test_one_stream_when_the_limit_is_one():
    sched = diamond()
    assigned = streams.assign(sched, 1, 16)
    assert assigned.count == 1 and assigned.events == [] and set(assigned.stream) == {0}
    assert_ordered(sched, assigned)


@pytest.mark.parametrize("limit", [1, 2, 3, 8])
def test_the_stream_limit_holds(limit):
    sched = fan_out(6)
    assigned = streams.assign(sched, limit, 64)
    assert assigned.count == min(limit, 6)
    assert_ordered(sched, assigned)


def diamonds(count: int) -> Schedule:
    """`count` diamonds in series: each fork and join needs an event."""
    g = GraphBuilder()
    x = g.input([4, 8])
    for _ in range(count):
        x = g.op(AddOp, [g.op(TanhOp, [g.op(ExpOp, [x])]), g.op(SigmoidOp, [x])])
    g.output(x)
    return schedule_of(g.finish().module)


def assert_reuse_is_safe(sched: Schedule, assigned: streams.Streams) -> None:
    """A reused id's previous wait happens before the new record and the new wait.

    A wait consumes whichever record of its id is pending, so otherwise the new wait
    could take the old record (or the new record could be issued before the old one
    is consumed)."""
    on_stream: dict[int, list[int]] = {}
    for node in sched.nodes:
        on_stream.setdefault(assigned.stream[node.index], []).append(node.index)
    last_wait: dict[int, int] = {}
    for event in assigned.events:
        consumer = event.consumer
        if event.id in last_wait:
            old = last_wait[event.id]
            lane = on_stream[assigned.stream[consumer]]
            previous = lane[lane.index(consumer) - 1] if lane.index(consumer) else None
            earlier = [e.producer for e in assigned.events if e.consumer == consumer and e is not event]
            waits_after = [n for n in [previous, *earlier] if n is not None]
            assert old == event.producer or assigned.happens_before(old, event.producer), event
            assert any(old == n or assigned.happens_before(old, n) for n in waits_after), event
        last_wait[event.id] = consumer


def test_event_ids_are_reused_when_safe():
    sched = diamonds(6)
    assigned = streams.assign(sched, 2, 64)
    assert len(assigned.events) > assigned.event_ids
    assert_ordered(sched, assigned)
    assert_reuse_is_safe(sched, assigned)


@pytest.mark.parametrize("branches", [2, 4, 6])
def test_event_reuse_never_lets_a_wait_take_an_older_record(branches):
    sched = fan_out(branches)
    assigned = streams.assign(sched, branches, 64)
    assert_ordered(sched, assigned)
    assert_reuse_is_safe(sched, assigned)


def test_too_few_event_ids_fall_back_to_fewer_streams():
    sched = fan_out(6)
    for ids in (0, 1, 2):
        assigned = streams.assign(sched, 6, ids)
        assert assigned.event_ids <= ids
        assert_ordered(sched, assigned)
    assert streams.assign(sched, 6, 0).count == 1


def test_copies_and_the_end_stay_on_stream_zero():
    sched = diamond()
    assigned = streams.assign(sched, 4, 16)
    for node in sched.nodes:
        if node.kind is not NodeKind.KERNEL:
            assert assigned.stream[node.index] == 0, node.kind


def assert_clocks_match_the_bitsets(assigned: streams.Streams) -> None:
    """Memory planning asks the vector clocks, not the bitsets: they must agree on every pair."""
    clocks = assigned.clocks()
    for n in range(len(clocks)):
        for m in range(len(clocks)):
            assert (m <= clocks[n][assigned.stream[m]]) == assigned.happens_before(m, n), (m, n)


@pytest.mark.parametrize("limit", [1, 2, 4])
def test_vector_clocks_match_the_bitsets(limit):
    for sched in (diamond(), fan_out(5), diamonds(4)):
        assert_clocks_match_the_bitsets(streams.assign(sched, limit, 16))


@settings(max_examples=40)
@given(graphs())
def test_drawn_graphs_are_ordered_within_the_limits(case):
    sched = schedule_of(case.module)
    for limit, ids in ((1, 0), (3, 2), (8, 1024)):
        assigned = streams.assign(sched, limit, ids)
        assert assigned.count <= limit and assigned.event_ids <= ids
        assert_ordered(sched, assigned)
        assert_clocks_match_the_bitsets(assigned)


def test_a_mul_of_one_value_is_one_dependency():
    g = GraphBuilder()
    x = g.op(ReluOp, [g.input([3])])
    g.output(g.op(MulOp, [x, x]))
    sched = schedule_of(g.finish().module)
    mul = next(n for n in sched.nodes if n.name == "Mul_0")
    assert len(sched.preds(mul)) == 1

