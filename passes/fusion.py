"""GE's fusion framework: named fusion passes, their switches and their statistics.

A fusion pass is a `ModulePass` named exactly as GE names it (so that a
`fusion_switch.cfg` and `fusion_result.json` speak GE's language), with a kind
(GraphFusion or UBFusion), a priority band (top, main, down; then name order, as in
GE) and whether a switch file may close it. Its patterns are `FusionPattern`s that
report to the pass's `FusionCounts`: `match_times` counts the distinct anchor ops a
pattern recognised structurally, `effect_times` the rewrites it really made (a
match can be declined by a semantic check), and for UB fusion
`repository_hit_times` the scopes taken from a fusion repository — we keep none, so
it stays 0, as it does in GE without a repository.

Statistics go to the `FusionStatistics` installed with `collect_statistics()`, so
that passes stay plain `ModulePass`es usable from `ge-opt -p`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import ClassVar, TypeVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriteWalker,
    RewritePattern,
)

from ge.core.files import published
from passes.registry import project_passes, register_pass


class FusionKind(str, Enum):
    GRAPH = "GraphFusion"
    UB = "UBFusion"


class Band(IntEnum):
    """GE runs built-in passes in these bands, and by name within a band."""

    TOP = 0
    MAIN = 1
    DOWN = 2


@dataclass
class FusionCounts:
    """How often one pass matched and took effect during one graph's compile.

    Anchors are kept by identity *and* referenced, so that an anchor erased by a
    rewrite cannot free its `id` for a new op that would then go uncounted.
    """

    matched: dict[int, Operation] = field(default_factory=dict)
    effect_times: int = 0
    repository_hit_times: int = 0

    @property
    def match_times(self) -> int:
        return len(self.matched)

    def match(self, anchor: Operation) -> None:
        """The pass's structure is present at `anchor` (counted once per op)."""
        self.matched.setdefault(id(anchor), anchor)

    def effect(self) -> None:
        """The fusion was made."""
        self.effect_times += 1

    def merge(self, other: FusionCounts) -> None:
        self.matched.update(other.matched)
        self.effect_times += other.effect_times
        self.repository_hit_times += other.repository_hit_times


class FusionPattern(RewritePattern):
    """A rewrite pattern that reports its matches and effects to its pass."""

    def __init__(self, counts: FusionCounts | None = None):
        self.counts = counts if counts is not None else FusionCounts()

    def matched(self, anchor: Operation) -> None:
        """The pattern's structure is present at `anchor` (counted once per op)."""
        self.counts.match(anchor)

    def effected(self) -> None:
        """The rewrite was made."""
        self.counts.effect()


@dataclass
class FusionStatistics:
    """Per-pass counts of one compile, in the shape of GE's fusion_result.json."""

    session_id: int = 0
    graph_id: int = 0
    counts: dict[tuple[FusionKind, str], FusionCounts] = field(default_factory=dict)

    def record(self, kind: FusionKind, name: str, counts: FusionCounts) -> None:
        self.counts.setdefault((kind, name), FusionCounts()).merge(counts)

    def get(self, name: str) -> FusionCounts:
        for (_, n), c in self.counts.items():
            if n == name:
                return c
        return FusionCounts()

    @property
    def key(self) -> str:
        return f"session_and_graph_id_{self.session_id}_{self.graph_id}"

    def to_json(self) -> dict[str, object]:
        """GE's document for this graph: passes that matched at least once, by kind.

        GE records a pass when it matches, so a pass that ran without matching,
        like one the switch file closed, is absent; so is a kind with no entry,
        and a graph with none is `{}`. Keys are sorted, as GE's JSON writer does.
        """
        graph: dict[str, dict[str, dict[str, str]]] = {}
        for (kind, name), c in sorted(self.counts.items(), key=lambda kv: kv[0][1]):
            if c.match_times == 0:
                continue
            entry = {"match_times": str(c.match_times), "effect_times": str(c.effect_times)}
            if kind is FusionKind.UB:
                entry["repository_hit_times"] = str(c.repository_hit_times)
            section = "graph_fusion" if kind is FusionKind.GRAPH else "ub_fusion"
            graph.setdefault(section, {})[name] = entry
        return {self.key: graph} if graph else {}

    def write(self, directory: str | None = None) -> str | None:
        """Write fusion_result.json where GE does; None when no pass matched (GE writes nothing).

        The file is `$ASCEND_WORK_PATH/FE/<pid>/fusion_result.json`, or
        `./fusion_result.json` without ASCEND_WORK_PATH (or in `directory`, if
        given). The options reference spells the first `FE/${Process ID}fusion_result.json`;
        GE's writer puts the file in a folder named after the process id, and so
        do we. As in GE, every graph compiled by this process joins the file it
        wrote before under its own session_and_graph_id key; a file left by
        another process is replaced. Writing is atomic.
        """
        return write_result(self.to_json(), directory)


def write_result(doc: dict[str, object], directory: str | None = None) -> str | None:
    """Write one graph's fusion_result.json document (`FusionStatistics.to_json`) as
    `FusionStatistics.write` says: also how a build taken whole from the model cache
    writes the document its compile recorded."""
    if not doc:
        return None
    path = result_path(directory)
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    merged: dict[str, object] = {}
    if path in _written and os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            merged = json.load(f)
    merged.update(doc)
    with published(path, what="fusion result") as f:
        json.dump(merged, f, indent=4, sort_keys=True)
        f.write("\n")
    _written.add(path)
    return path


RESULT_FILE = "fusion_result.json"
_written: set[str] = set()
"""fusion_result.json files this process wrote (later graphs join them)."""


def result_path(directory: str | None = None) -> str:
    """Where fusion_result.json goes: `directory`, else $ASCEND_WORK_PATH/FE/<pid>/, else ./"""
    if directory is not None:
        return os.path.abspath(os.path.join(directory, RESULT_FILE))
    work = os.environ.get("ASCEND_WORK_PATH")
    if work:
        return os.path.abspath(os.path.join(work, "FE", str(os.getpid()), RESULT_FILE))
    return os.path.abspath(RESULT_FILE)


_statistics: ContextVar[FusionStatistics | None] = ContextVar("fusion_statistics", default=None)


@contextmanager
def collect_statistics(stats: FusionStatistics | None = None) -> Iterator[FusionStatistics]:
    """Make fusion passes run inside the block report to `stats`."""
    stats = stats if stats is not None else FusionStatistics()
    token = _statistics.set(stats)
    try:
        yield stats
    finally:
        _statistics.reset(token)


class FusionPass(ModulePass):
    """Base of GE-named fusion passes: apply the patterns greedily, report counts."""

    name: ClassVar[str]
    kind: ClassVar[FusionKind] = FusionKind.GRAPH
    band: ClassVar[Band] = Band.MAIN
    closable: ClassVar[bool] = True
    reported: ClassVar[bool] = True
    """False for passes GE leaves out of fusion_result.json (FusionVirtualOpSetSwitch)."""
    general: ClassVar[bool] = True
    """False for a pass written for specific networks: as GE's non-general scope fusion
    patterns, it runs only when enable_scope_fusion_passes names it (every built-in
    pass is general)."""

    def patterns(self, counts: FusionCounts) -> Sequence[RewritePattern]:
        """The pass's patterns, reporting to `counts` (what the default `fuse` applies)."""
        raise NotImplementedError(f"{type(self).__name__} defines neither patterns() nor fuse()")

    def fuse(self, module: ModuleOp, counts: FusionCounts) -> None:
        """Do the pass's work on `module`, reporting to `counts`. By default, apply
        `patterns()` greedily; a pass that decides over the whole graph at once
        (UB fusion's scopes) overrides this instead."""
        walker = PatternRewriteWalker(GreedyRewritePatternApplier(list(self.patterns(counts))))
        walker.rewrite_module(module)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        counts = FusionCounts()
        self.fuse(op, counts)
        stats = _statistics.get()
        if stats is not None and self.reported:
            stats.record(self.kind, self.name, counts)


F = TypeVar("F", bound=type[FusionPass])

FUSION_PASSES: dict[str, type[FusionPass]] = {}
"""Every fusion pass by its GE name, built-in or registered from outside."""


def fusion_pass(cls: F) -> F:
    """Class decorator: register a fusion pass under its GE name, for the GE
    pipeline (switch file, order, fusion_result.json) and for `ge-opt -p`."""
    if cls.name in FUSION_PASSES and FUSION_PASSES[cls.name] is not cls:
        raise ValueError(f"a fusion pass named {cls.name} is already registered")
    register_pass(cls)
    FUSION_PASSES[cls.name] = cls
    return cls


def builtin_fusion_passes() -> dict[str, type[FusionPass]]:
    """Import the project's fusion passes (the registry knows their modules)."""
    for factory in project_passes().values():
        factory()
    return FUSION_PASSES


def ordered(kind: FusionKind) -> list[type[FusionPass]]:
    """The passes of one kind in GE's order: by band, then by name."""
    return sorted((p for p in FUSION_PASSES.values() if p.kind is kind), key=lambda p: (p.band, p.name))
