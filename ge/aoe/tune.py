"""`ge.aoe.tune`: operator tuning (job_type 2) of a model's kernels, with the simulator
as the cost model, into the tune bank that later compiles take their tilings from.

1. The model is compiled with the analytic tilings and run timing only (the "before").
2. Every cube, attention and vector kernel whose tiling the tuner can choose (`passes.lowering.space`)
   is searched on the backend's workers (`ge.aoe.search`), each candidate timed alone.
3. The kernels that got faster alone are compiled into the model and it is run again:
   the model run is the judge. A tuned kernel slower in the model than with its
   analytic tiling (all its launches together) gets its analytic tiling back, and the
   model is run again, until none is slower; if a kernel left analytic is then slower
   (sharing the chip with another stream's tuned kernel) or the model is, the tuned
   tilings are tried one at a time instead (`_verify`). No kernel, and not the model,
   ends slower than with the analytic tilings.
4. The tilings kept go to the bank (`ge.aoe.bank`); the tuned model is the model a
   compile with that bank builds.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field

from ge.aoe import bank as banks
from ge.aoe.search import Budget, Kernel, Progress, search, seed_of
from ge.core import soc as socs
from ge.core.errors import OptionError
from ge.core.files import published
from ge.distributed import backend as make_backend
from ge.om import Model
from ge.om.tasks import AicpuTask, KernelTask
from ge.sim import program
from passes.lower_to_kernel import bank_key, parse_kernel, scope_of_kernel
from passes.lowering import space

JOB_TYPES = {1: "subgraph tuning", 2: "operator tuning"}
DEFAULT_BUDGET = Budget(candidates=200)
VERIFY_ROUNDS = 4
"""Model runs that may each hand analytic tilings back to kernels slower in the model."""


@dataclass
class KernelRow:
    """One kernel's before and after: alone (cycles) and in the model (us, all its launches)."""

    name: str
    op_types: str
    kind: str
    launches: int
    analytic_cycles: float
    tuned_cycles: float
    model_before_us: float
    model_after_us: float
    tiling: dict[str, int] | None
    """The tuned tiling kept (in the bank), or None: the analytic one stays."""
    analytic_tiling: dict[str, int] | None = None
    """The analytic tiling in the space's terms (None where the space cannot say it)."""


@dataclass(frozen=True)
class PassRow:
    """Subgraph tuning: one fusion pass, the model's latency with it closed alone, and whether the result closes it."""

    name: str
    kind: str
    closed_alone_us: float
    closed: bool


@dataclass
class Report:
    """A tuning run: the model's latency before and after, and every kernel's row."""

    model: str
    soc_version: str
    job_type: int
    backend: str
    workers: int
    seed: int
    before_us: float
    after_us: float
    evaluated: int
    pruned: int
    seconds: float
    bank: str
    kernels: list[KernelRow] = field(default_factory=list)
    passes: list[PassRow] = field(default_factory=list)
    """Subgraph tuning's fusion passes."""

    @property
    def gain(self) -> float:
        """The latency saved, as a fraction of the latency before."""
        return 1 - self.after_us / self.before_us if self.before_us else 0.0

    @property
    def tuned(self) -> list[KernelRow]:
        return [k for k in self.kernels if k.tiling is not None]

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "gain": self.gain}, indent=1)


def tune(
    model: str | os.PathLike, soc_version: str, job_type: int = 2, backend: str = "local", workers: int | None = None,
    seed: int = 0, budget: Budget = DEFAULT_BUDGET, options: Mapping[str, object] | None = None,
    bank_root: str | None = None, output: str | os.PathLike | None = None, ray_address: str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> Report:
    """Tune `model` (an ONNX file) for `soc_version`; the tilings kept go to the bank
    (`bank_root`, else TUNE_BANK_PATH or the default), the report and the tuned model
    to `output` when given."""
    if job_type == 1:
        from ge.aoe.subgraph import tune_subgraphs

        return tune_subgraphs(model, soc_version, backend, workers, seed, budget, options, output, ray_address, on_progress, bank_root)
    if job_type != 2:
        raise OptionError(f"job_type {job_type} is not allowed; use 1 ({JOB_TYPES[1]}) or 2 ({JOB_TYPES[2]})")
    socs.load(soc_version)
    bank = banks.for_tuning(soc_version, bank_root)
    runner = make_backend(backend, workers, address=ray_address)
    started = time.perf_counter()
    flags = {**(options or {}), "soc_version": soc_version}
    before_model, before = _run(model, flags, {})
    kernels, keys = _kernels(before_model, soc_version)
    try:
        evaluated = search(kernels, soc_version, runner, budget, seed, on_progress)
        used = runner.workers
    finally:
        runner.close()  # the pool's processes, or the Ray instance this run started
    tuned = {keys[k.name]: k.best for k in kernels if k.best is not None and k.best_cycles < k.analytic * (1 - 1e-9)}
    names = {t.name: t.kernel for t in before_model.tasks if isinstance(t, KernelTask)}
    gains = {keys[k.name]: k.analytic - k.best_cycles for k in kernels}
    after_model, after = _verify(model, flags, tuned, keys, before, names, gains)
    for k in kernels:
        if keys[k.name] in tuned:
            bank.store(banks.Entry(keys[k.name], _kind(k), k.op_types, tuned[keys[k.name]], k.analytic, k.best_cycles))
    report = Report(
        os.fspath(model), soc_version, job_type, backend, used, seed, before.latency_us, after.latency_us,
        evaluated, sum(k.pruned for k in kernels), time.perf_counter() - started, bank.folder,
    )
    for k in kernels:
        key = keys[k.name]
        report.kernels.append(KernelRow(
            k.name, "+".join(k.op_types), _kind(k), k.launches, k.analytic,
            k.best_cycles if key in tuned else k.analytic, before.by_key(keys).get(key, 0.0), after.by_key(keys).get(key, 0.0),
            tuned.get(key), k.seed,
        ))
    if output is not None:
        os.makedirs(output, exist_ok=True)
        after_model.save(os.path.join(output, os.path.splitext(os.path.basename(model))[0] + ".om"))
        with published(os.path.join(output, "aoe_report.json"), what="tuning report") as f:
            f.write(report.to_json() + "\n")
    return report


@dataclass(frozen=True)
class Timed:
    """A model's simulated latency and each kernel's time in it (us, all its launches)."""

    latency_us: float
    kernel_us: dict[str, float]
    """By kernel symbol of the analytic model (tasks matched by name)."""

    def by_key(self, keys: Mapping[str, str]) -> dict[str, float]:
        return {keys[name]: us for name, us in self.kernel_us.items() if name in keys}


def _run(model: str | os.PathLike, flags: Mapping[str, object], tuned: Mapping[str, dict[str, int]], names: Mapping[str, str] | None = None) -> tuple[Model, Timed]:
    """Compile with `tuned` tilings (by bank key; none: the analytic ones) and run timing only.
    `names` maps task names to the analytic model's kernels (its own when None)."""
    import ge
    from ge.session import Session
    from ge.sim.config import RunConfig

    with space.using(tuned.get if tuned else space.analytic):
        compiled = ge.compile(model, dict(flags))
    result = Session(RunConfig(timing_only=True)).run(compiled)
    clock = socs.load(compiled.soc_version).clock_mhz
    per: dict[str, float] = defaultdict(float)
    for r in result.profile.kernels():
        kernel = r.kernel if names is None else names.get(r.name, r.kernel)
        per[kernel] += (r.end - r.start) / clock
    return compiled, Timed(result.latency_us, dict(per))


def _kernels(compiled: Model, soc: str) -> tuple[list[Kernel], dict[str, str]]:
    """The kernels the tuner can tile, and every kernel's bank key, by symbol."""
    profile = socs.load(soc)
    launches = _launches(compiled)
    kernels: list[Kernel] = []
    keys: dict[str, str] = {}
    for name, text in program.split_kernels(compiled.kernels).items():
        if name not in launches:
            continue
        source = text.compute_text()
        kernel = parse_kernel(source)
        scope = scope_of_kernel(kernel)
        keys[name] = bank_key(scope, soc)
        found = space.space_of(profile, scope.ops, scope.inputs, scope.outputs)
        if found is None:
            continue
        tiling = {k: v.value.data for k, v in kernel.tiling.data.items()}  # type: ignore[attr-defined]
        seed = seed_of(found, tiling, kernel.block_dim.value.data)
        task, shares = launches[name][0][0], [s for _, s in launches[name]]
        resident = [(shares.count(s), list(s)) for s in dict.fromkeys(shares)]
        kernels.append(Kernel(
            name, source, found, seed, len(shares), [a.size for a in task.inputs], [a.size for a in task.outputs], resident,
            tuple(t.data for t in kernel.op_types.data),
        ))
    return kernels, keys


def _launches(compiled: Model) -> dict[str, list[tuple[KernelTask, tuple[float, ...]]]]:
    """Each AI Core kernel's tasks, with the share of each input the L2 holds as the
    task starts: the task list replayed through the L2 model in list order, as a run
    fills it (`ge.sim.l2`; what it holds depends on the ranges tasks touch only)."""
    from ge.session import Session
    from ge.sim.config import RunConfig
    from ge.sim.l2 import L2

    runtime = Session(RunConfig(timing_only=True)).runtime(compiled)
    l2 = L2.of(socs.load(compiled.soc_version))
    found: dict[str, list[tuple[KernelTask, tuple[float, ...]]]] = defaultdict(list)
    for task in compiled.tasks:
        if not isinstance(task, KernelTask) or isinstance(task, AicpuTask):
            continue
        shares = tuple(l2.cache.resident(a.addr, a.addr + a.size) / a.size if a.size else 0.0 for a in task.inputs)
        found[task.kernel].append((task, shares))
        block = runtime.block_timing(task.kernel)
        workspace = runtime.kernels[task.kernel].header.workspace
        l2.task([(a.addr, a.size) for a in task.inputs], [(a.addr, a.size) for a in task.outputs], block, task.block_dim, workspace)
    return found


def _kind(k: Kernel) -> str:
    if isinstance(k.space, space.AttentionSpace):
        return "attention"
    return "cube" if isinstance(k.space, space.CubeSpace) else "vector"


def _verify(
    model: str | os.PathLike, flags: Mapping[str, object], tuned: dict[str, dict[str, int]], keys: Mapping[str, str], before: Timed,
    names: Mapping[str, str], gains: Mapping[str, float],
) -> tuple[Model, Timed]:
    """The model with `tuned` tilings (the dict trimmed in place) where no kernel is
    slower in the model than with the analytic tilings, and the model not slower.
    First a tuned kernel slower in the model gets its analytic tiling back, round by
    round; if then a kernel not tuned is slower (another stream's tuned kernel shares
    the chip with it), the tilings are taken one at a time, the largest `gains` first,
    each kept only if the model stays so. `names`: the analytic model's kernel of each
    task name."""
    for _ in range(VERIFY_ROUNDS):
        compiled, after = _run(model, flags, tuned, names)
        slower = _slower(before, after, keys)
        if not slower and after.latency_us <= before.latency_us:
            return compiled, after
        if not set(slower) & set(tuned):
            break
        for key in set(slower) & set(tuned):
            del tuned[key]
    kept: dict[str, dict[str, int]] = {}
    best = _run(model, flags, {}, names)
    for key in sorted(tuned, key=lambda k: -gains[k]):
        trial = _run(model, flags, {**kept, key: tuned[key]}, names)
        if not _slower(before, trial[1], keys) and trial[1].latency_us <= best[1].latency_us:
            kept[key] = tuned[key]
            best = trial
    tuned.clear()
    tuned.update(kept)
    return best


def _slower(before: Timed, after: Timed, keys: Mapping[str, str]) -> list[str]:
    """The kernels (bank keys) slower in `after` than in `before`."""
    was, now = before.by_key(keys), after.by_key(keys)
    return [key for key in now if now[key] > was.get(key, 0.0) * (1 + 1e-9)]
