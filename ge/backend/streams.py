"""Stream assignment and events: independent branches run on separate streams.

Nodes are placed in schedule order (a topological order). A kernel continues the
stream of an input's producer when that producer is still the stream's last node
(a chain stays on one stream); otherwise it takes a stream whose last node already
happens before it, else opens a new stream while fewer than `max_streams` exist,
else joins the stream whose last node is oldest. The H2D, D2H and MODEL_END_GRAPH
nodes stay on stream 0; MODEL_END_GRAPH waits for every stream's last node.

Where a node reads what a node on another stream wrote, and nothing already
orders the two (stream order and earlier events, transitively), an event is
recorded after the producer and waited for before the consumer. Producers are
visited latest first, so that a wait made for one producer covers the others it
orders. An event id is reused once the previous wait on it happens before both the
new record and the new wait: on the device a wait consumes whichever record of its
id is pending, so a record may not be issued again before the wait that clears it,
and the new wait must not be able to run before the old one. If more than
`max_event_ids` ids would be live at once, the assignment starts again with one
stream fewer (one stream needs no events), so the id limit is never exceeded.

The result carries the happens-before relation (`before[n]`: the nodes certainly
finished when `n` starts), which memory planning uses to decide when a buffer's
memory may be given to another.
"""

from __future__ import annotations

from dataclasses import dataclass

from ge.backend.schedule import Node, NodeKind, Schedule

MAX_EVENT_IDS = 1024
"""Stream events one model may hold at once: our budget, applied because the SoC
profiles do not give one (their `event_ids` are the set_flag/wait_flag ids between
pipes inside a core, a different resource). Reuse keeps real models far below it."""

PINNED = (NodeKind.H2D, NodeKind.D2H, NodeKind.END)
"""Nodes that stay on stream 0: the copies in and out, and the end of the model."""


@dataclass(frozen=True)
class Event:
    """Recorded after `producer` on its stream, waited for before `consumer` on its."""

    id: int
    producer: int
    consumer: int


@dataclass(eq=False)
class Streams:
    stream: list[int]
    """The stream of each node."""
    count: int
    events: list[Event]
    event_ids: int
    """Distinct event ids used (ids are 0 .. event_ids - 1)."""
    before: list[int]
    """Per node, a bitset of the nodes that happen before it."""

    def happens_before(self, a: int, b: int) -> bool:
        return bool(self.before[b] >> a & 1)

    def clocks(self) -> list[list[int]]:
        """Per node, per stream, the latest node of that stream that happens before it
        (-1 if none): `before` as vector clocks. What happens before a node is, on each
        stream, everything up to one node, so m happens before n exactly when
        `m <= clocks[n][stream[m]]`: O(1) a question, O(streams) a node to keep."""
        waits: dict[int, list[int]] = {}
        for e in self.events:
            waits.setdefault(e.consumer, []).append(e.producer)
        clocks: list[list[int]] = []
        tail = [-1] * self.count
        for n, s in enumerate(self.stream):
            clock = list(clocks[tail[s]]) if tail[s] >= 0 else [-1] * self.count
            clock[s] = max(clock[s], tail[s])
            for p in waits.get(n, ()):
                clock = [max(a, b) for a, b in zip(clock, clocks[p])]
                clock[self.stream[p]] = max(clock[self.stream[p]], p)
            clocks.append(clock)
            tail[s] = n
        return clocks


class _OutOfEventIds(Exception):
    """More event ids would be live at once than allowed: retry with fewer streams."""


def assign(schedule: Schedule, max_streams: int, max_event_ids: int) -> Streams:
    """Streams and events for the schedule, with at most `max_streams` streams and
    `max_event_ids` event ids live at once."""
    if max_streams < 1:
        raise ValueError(f"max_streams must be at least 1, got {max_streams}")
    for limit in range(max_streams, 0, -1):
        try:
            return _Assigner(schedule, limit, max_event_ids).run()
        except _OutOfEventIds:
            continue
    raise AssertionError("one stream needs no events")


class _Assigner:
    def __init__(self, schedule: Schedule, max_streams: int, max_event_ids: int):
        self.schedule = schedule
        self.max_streams = max_streams
        self.max_event_ids = max_event_ids
        n = len(schedule.nodes)
        self.stream = [0] * n
        self.before = [0] * n
        self.tails: list[int | None] = [None]
        self.events: list[Event] = []
        self.id_last_consumer: list[int] = []
        """Per event id, the consumer of its latest event: its wait sits just before it."""

    def run(self) -> Streams:
        for node in self.schedule.nodes:
            preds = self.preds(node)
            s = self.choose(node, preds)
            tail = self.tails[s]
            have = 0 if tail is None else self.before[tail] | 1 << tail
            for p in sorted(preds, reverse=True):
                if have >> p & 1:
                    continue
                self.events.append(Event(self.event_id(p, node.index, have), p, node.index))
                have |= self.before[p] | 1 << p
            self.stream[node.index] = s
            self.before[node.index] = have
            self.tails[s] = node.index
        return Streams(self.stream, len(self.tails), self.events, len(self.id_last_consumer), self.before)

    def preds(self, node: Node) -> list[int]:
        if node.kind is NodeKind.END:
            return [t for t in self.tails if t is not None]
        return self.schedule.preds(node)

    def choose(self, node: Node, preds: list[int]) -> int:
        if node.kind in PINNED:
            return 0
        for p in preds:
            if self.tails[self.stream[p]] == p:
                return self.stream[p]
        ancestors = 0
        for p in preds:
            ancestors |= self.before[p] | 1 << p
        for s, tail in enumerate(self.tails):
            if tail is None or ancestors >> tail & 1:
                return s
        if len(self.tails) < self.max_streams:
            self.tails.append(None)
            return len(self.tails) - 1
        return min(range(len(self.tails)), key=lambda s: self.tails[s])  # type: ignore[arg-type,return-value]

    def event_id(self, producer: int, consumer: int, have: int) -> int:
        """An id whose last wait happens before both the new record (placed right after
        `producer`) and the new wait (placed where `have` is known finished): otherwise
        the new wait could consume the old record before the old wait does."""
        for i, last in enumerate(self.id_last_consumer):
            record_after = last == producer or self.before[producer] >> last & 1
            if record_after and have >> last & 1:
                self.id_last_consumer[i] = consumer
                return i
        if len(self.id_last_consumer) >= self.max_event_ids:
            raise _OutOfEventIds
        self.id_last_consumer.append(consumer)
        return len(self.id_last_consumer) - 1
