"""Subgraph tuning (job_type 1): which fusion passes to close for the fastest model.

The candidates are the closable fusion passes (graph and UB fusion) that matched in
the model's compile; a candidate set of closed passes is judged by compiling the
whole model with that fusion switch file and running it timing only. The search is
greedy: each round closes, one at a time, every pass still open, and keeps the one
that lowers the latency most; it stops when none does or the budget is spent. The
best set is written as a fusion switch file (`fusion_switch.cfg` in the output
folder), and, when it closes any, as the model's graph entry in the tune bank
(`ge.aoe.bank`), which later compiles of the model with the same options use.
"""

from __future__ import annotations

import json
import math
import os
import random
import tempfile
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import TypedDict

from ge import fusion_switch
from ge.aoe import bank as banks
from ge.aoe.search import Budget, Progress
from ge.aoe.tune import PassRow, Report
from ge.core import soc as socs
from ge.core.errors import OptionError
from ge.core.files import published
from ge.core.options import CompileOptions
from ge.distributed import backend as make_backend
from passes.fusion import FUSION_PASSES

SWITCH_FILE = "fusion_switch.cfg"
DEFAULT_BUDGET = Budget(candidates=50)


class Job(TypedDict):
    model: str
    flags: dict[str, object]
    closed: list[str]


def latency(job: Job) -> float:
    """The model's simulated latency (us) compiled with `closed` passes closed; inf if it fails to compile."""
    import ge
    from ge.core.errors import GEError
    from ge.session import Session
    from ge.sim.config import RunConfig

    with tempfile.TemporaryDirectory(prefix="ge_aoe_") as folder:
        path = os.path.join(folder, SWITCH_FILE)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(fusion_switch.closing(job["closed"]), f)
        try:
            compiled = ge.compile(job["model"], {**job["flags"], "fusion_switch_file": path})
        except GEError:
            return math.inf
    return Session(RunConfig(timing_only=True)).run(compiled).latency_us


def matched_passes(model: str, flags: Mapping[str, object]) -> list[str]:
    """The closable fusion passes that match in the model's compile, in name order."""
    from ge.core.options import CompileOptions
    from ge.frontend import load_onnx
    from ge.pipeline import optimize

    options = CompileOptions.from_flags(**flags)
    module, _ = load_onnx(model, input_shape=options.input_shape)
    stats = optimize(module, options).statistics
    return sorted({name for (kind, name), c in stats.counts.items() if c.match_times and name in FUSION_PASSES and FUSION_PASSES[name].closable})


def _progress(
    on_progress: Callable[[Progress], None] | None, base: int, total: int | None, best: float, before: float, started: float, i: int, us: float,
) -> None:
    if on_progress is not None:
        on_progress(Progress(base + i + 1, total, min(best, us), before, time.perf_counter() - started))


def tune_subgraphs(
    model: str | os.PathLike, soc_version: str, backend: str = "local", workers: int | None = None, seed: int = 0,
    budget: Budget = DEFAULT_BUDGET, options: Mapping[str, object] | None = None, output: str | os.PathLike | None = None,
    ray_address: str | None = None, on_progress: Callable[[Progress], None] | None = None, bank_root: str | None = None,
) -> Report:
    """Search the fusion switches of `model` for `soc_version`; the report's `passes`
    say which it closes, and `output` gets the switch file and the report."""
    socs.load(soc_version)
    if options and "fusion_switch_file" in options:
        raise OptionError("subgraph tuning chooses the fusion switches itself; give no fusion_switch_file")
    bank = banks.for_tuning(soc_version, bank_root)
    runner = make_backend(backend, workers, address=ray_address)
    started = time.perf_counter()
    path = os.fspath(model)
    flags: dict[str, object] = {**(options or {}), "soc_version": soc_version}
    before = latency({"model": path, "flags": flags, "closed": []})
    candidates = matched_passes(path, flags)
    random.Random(seed).shuffle(candidates)
    closed: list[str] = []
    best = before
    alone: dict[str, float] = {}
    evaluated = 0
    try:
        while candidates:
            open_ = [c for c in candidates if c not in closed]
            if budget.candidates is not None:
                open_ = open_[: budget.candidates - evaluated]
            if not open_ or (budget.seconds is not None and time.perf_counter() - started >= budget.seconds):
                break
            progress = partial(_progress, on_progress, evaluated, budget.candidates, best, before, started)
            results = runner.map(latency, [{"model": path, "flags": flags, "closed": [*closed, c]} for c in open_], progress)
            evaluated += len(open_)
            for c, us in zip(open_, results):
                alone.setdefault(c, us)
            us, pick = min(zip(results, open_))
            if us >= best * (1 - 1e-9):
                break
            closed.append(pick)
            best = us
        used = runner.workers
    finally:
        runner.close()  # the pool's processes, or the Ray instance this run started
    rows = [PassRow(c, FUSION_PASSES[c].kind.value, alone[c], c in closed) for c in sorted(alone)]
    if closed:
        bank.store(banks.GraphEntry(banks.graph_key(path, CompileOptions.from_flags(**flags)), tuple(closed), before, best))
    report = Report(path, soc_version, 1, backend, used, seed, before, best, evaluated, 0, time.perf_counter() - started, bank.folder, passes=rows)
    if output is not None:
        os.makedirs(output, exist_ok=True)
        with published(os.path.join(output, SWITCH_FILE), what="fusion switch file") as f:
            json.dump(fusion_switch.closing(closed), f, indent=1)
        with published(os.path.join(output, "aoe_report.json"), what="tuning report") as f:
            f.write(report.to_json() + "\n")
    return report

