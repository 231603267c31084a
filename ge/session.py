"""`ge.Session`: run compiled models on the simulated device, as GE's session runs graphs.

    from ge import RunConfig, Session
    session = Session(RunConfig(input_fusion_size=0))
    result = session.run("resnet50.om", {"input": images})
    result.outputs["output"], result.latency_us, result.profile.write("prof/")

With NPURunConfig's options (see README, "NPURunConfig: the run options"):

    session = Session(RunConfig(graph_run_mode=0, iterations_per_loop=100, session_device_id=3))
    model = session.compile("resnet50.onnx", {"soc_version": "Ascend310P3"})  # precision default: force_fp16
    result = session.run(model, feeds)
    result.latency_us, result.total_us                  # per iteration, and the loop's

A run whose outputs hold inf or NaN warns once with `ge.sim.dump.NonFiniteWarning`,
naming the first op (in run order) that turned finite inputs into them and the
precision options that keep it in float32 (`ge run` prints it as a warning line).

A multi-gear model (`ge.gears`) takes any gear's inputs: the host maps their shapes to
the gear whose input shapes they are (refusing, with the list of gears, inputs of none),
the runtime fills the gear-index input with it, and the device runs GE's Case, which
switches to that gear's tasks (`Model.gear`, `ge.om.gears.case`); its outputs have
that gear's shapes. A timing-only run without inputs runs the largest gear.

A session keeps each model it has run loaded (its device memory layout, decoded
kernels and block timings), so running a model again costs only the run.

Several models side by side on disjoint slices of one chip (virtual instances,
`ge.sim.chip`), each on its AI cores, all sharing the chip's GM bandwidth:

    chip = session.run_instances([("resnet.om", 4), ("bert.om", 4)], inputs=[resnet_feeds, bert_feeds])
    for t in chip.tenants:
        t.name, t.aicore_num, t.latency_alone_us, t.latency_us, t.throughput, t.slowdown, t.outputs
    chip.write("prof/")                    # op_summary.csv with a tenant column, trace.json

Graphs run on the session's thread pool of graph_max_parallel_model_num threads
(GE's threads running graphs in parallel): `submit` returns a future, `run_all`
runs a list of (model, inputs) at once and returns their results in order. Each
result is the one `run` gives; runs of one loaded model take turns (it has one
device memory image), different models run side by side, at most
graph_max_parallel_model_num at a time:

    session = Session(RunConfig(graph_max_parallel_model_num=4))
    results = session.run_all([("resnet.om", feeds), ("bert.om", bert_feeds)])
    future = session.submit("resnet.om", feeds); future.result().outputs

With external_weight=True, `compile` writes each Const's weight once, to
`$ASCEND_WORK_PATH/tmp_weight_<pid>_<sessionid>/weight_<sha256>` (the current
directory without ASCEND_WORK_PATH), and the model refers to them by hash, so models
of the session with the same weights share their files. `close()` (or leaving a
`with Session(...)` block, or the interpreter's exit) removes the directory:

    with Session(RunConfig(external_weight=True)) as session:
        a, b = session.compile("a.onnx"), session.compile("b.onnx")
        session.run(a, feeds)
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import os
import shutil
import threading
import warnings
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Self

import numpy as np

from ge.core.errors import InputError, OptionError
from ge.core.files import check_output_directory, published
from ge.core.options import DEVICES
from ge.om import Model, read
from ge.om.gears import pick
from ge.om.memory import Region
from ge.om.model import ExternalWeight
from ge.sim import timing
from ge.sim.chip import ChipRun, run_tenants
from ge.sim.config import RunConfig
from ge.sim.dump import NonFiniteWarning, Overflow
from ge.sim.profile import Profile
from ge.sim.runtime import Runtime, Timeouts

if TYPE_CHECKING:
    from ge.dynamic import ShapeBuilds

Inputs = Mapping[str, np.ndarray] | Sequence[np.ndarray]
"""A model's inputs: by input name, or a list in the model's input order."""


@dataclass(frozen=True)
class Result:
    """One `Session.run`: the outputs by name (empty when timing only), the latency per
    iteration and in total, and the profile (of the last iteration)."""

    outputs: dict[str, np.ndarray]
    latency_us: float
    """Per iteration: the total over iterations_per_loop (1: one run's latency)."""
    profile: Profile
    overflows: tuple[Overflow, ...]
    """The kernel tasks that turned finite inputs into inf/NaN, in the order they ran."""
    iterations: int
    total_us: float
    """The host's launch, every iteration on the device, and the host's synchronisation."""

    @property
    def throughput(self) -> float:
        """Samples per second at the model's batch."""
        return self.profile.throughput


class Session:
    """Runs `.om` models (or loaded `Model`s) with one `RunConfig`, on one of the host's
    `DEVICES` simulated devices (session_device_id, else $ASCEND_DEVICE_ID, else 0).

    Each device is a whole chip of the model's SoC. A session loads its models on its
    device itself: two sessions share nothing (no loaded model, memory or GM bandwidth),
    whichever devices they are on."""

    _ids = itertools.count()

    def __init__(self, config: RunConfig | None = None):
        self.config = config if config is not None else RunConfig()
        self.device_id = _device_id(self.config)
        self.session_id = next(Session._ids)
        """GE's session id: unique in the process, names the external weight directory."""
        self._loaded: dict[object, tuple[object, Runtime, threading.Lock]] = {}
        self._loading = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self.weight_dir = os.path.join(os.path.abspath(os.environ.get("ASCEND_WORK_PATH") or "."), f"tmp_weight_{os.getpid()}_{self.session_id}")
        self.weight_writes = 0
        """Weight files this session has written (each `weight_<hash>` once)."""
        self._removal = weakref.finalize(self, shutil.rmtree, self.weight_dir, True)  # also at exit, if never closed

    def close(self) -> None:
        """Wait for the graphs submitted, unload the models and remove the session's external weight directory."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._loaded.clear()
        self._removal()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def compile(self, model: str | os.PathLike | object, options: Mapping[str, object] | None = None) -> Model:
        """Compile an ONNX file or module as GE compiles a session's graph: `options` (ATC
        flags such as soc_version, input_shape) over the run config's compile options,
        whose precision default follows graph_run_mode."""
        from ge.compiler import compile as compile_model

        given = dict(options or {})
        flags = self.config.compile_flags()
        if "precision_mode" in given or "precision_mode_v2" in given:
            flags = {k: v for k, v in flags.items() if k not in ("precision_mode", "precision_mode_v2")}
        if self.config.external_weight:
            self._check_weight_dir()
        compiled = compile_model(model, {**flags, "session_id": self.session_id, **given})  # type: ignore[arg-type]
        if self.config.external_weight and compiled.dynamic is not None:
            raise OptionError("external_weight keeps the weights of a static build's plan outside the model; a dynamic model's graph keeps its own: turn external_weight off")
        return self._externalized(compiled) if self.config.external_weight else compiled

    def _check_weight_dir(self) -> None:
        """Refuse, before the compile, external weights that could not be written."""
        if not self._removal.alive:
            raise OptionError(f"session {self.session_id} is closed; its external weights are gone")
        check_output_directory(self.weight_dir, "external weight directory (ASCEND_WORK_PATH)")

    def _externalized(self, model: Model) -> Model:
        """`model` with each const's bytes in the session's weight directory (written
        there once, by hash) instead of in the model."""
        os.makedirs(self.weight_dir, exist_ok=True)  # the umask's mode
        base = bytes(model.weights)
        plans = [model.memory, *(g.memory for g in model.gears)]
        spans = sorted({(p.offset, p.size) for plan in plans for p in plan.placements if p.region is Region.WEIGHT and p.size})
        external = []
        for offset, size in spans:
            data = base[offset : offset + size]
            weight = ExternalWeight(offset, size, hashlib.sha256(data).hexdigest())
            path = os.path.join(self.weight_dir, weight.file)
            if not os.path.exists(path):
                with published(path, "wb", what="external weight") as f:
                    f.write(data)
                self.weight_writes += 1
            external.append(weight)
        return dataclasses.replace(model, weights=b"", external=tuple(external), weight_dir=self.weight_dir)

    def runtime(self, model: Model | str | os.PathLike) -> Runtime:
        """The model loaded on the device (loaded once per session)."""
        return self._load(model)[1]

    def _load(self, model: Model | str | os.PathLike) -> tuple[object, Runtime, threading.Lock]:
        """The loaded model, its runtime, and the lock its runs take turns on."""
        key = _key(model)
        with self._loading:
            if key not in self._loaded:
                loaded = model if isinstance(model, Model) else read(model)
                self._loaded[key] = (loaded, Runtime(loaded, self.config), threading.Lock())  # the model is kept: its id stays its own
            return self._loaded[key]

    def submit(self, model: Model | str | os.PathLike, inputs: Inputs | None = None) -> Future[Result]:
        """Run `model` on the session's pool of graph_max_parallel_model_num threads; the
        future's result is what `run` returns (or raises)."""
        if not self._removal.alive:
            raise OptionError(f"session {self.session_id} is closed; it runs no more graphs")
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.config.graph_max_parallel_model_num, thread_name_prefix=f"ge-session-{self.session_id}")
        return self._pool.submit(self.run, model, inputs)

    def run_all(self, graphs: Sequence[tuple[Model | str | os.PathLike, Inputs | None]]) -> list[Result]:
        """Run every (model, inputs) on the pool at once; their results in the same order."""
        futures = [self.submit(model, inputs) for model, inputs in graphs]
        return [f.result() for f in futures]

    def run(self, model: Model | str | os.PathLike, inputs: Inputs | None = None) -> Result:
        """Run `model` iterations_per_loop times on `inputs` (by input name, or a list in the
        model's input order), back to back on the device: the host launches the loop and
        synchronises once (`timing.MODEL_LAUNCH_US`, `timing.HOST_SYNC_US`).

        The model keeps no state between iterations, so each computes the same values in
        the same time: the simulator runs every iteration only when a dump asks for
        their steps (dump_step counts iterations), else it runs the first and counts
        the others (a loop of 1,000 costs one run)."""
        _, runtime, turn = self._load(model)
        feeds = _by_name(runtime.model, inputs)
        runtime, turn = self._gear_runtime(model, runtime, turn, feeds)
        with turn:
            return self._run(runtime, feeds)

    def _run(self, runtime: Runtime, feeds: Mapping[str, np.ndarray] | None) -> Result:
        n = self.config.iterations_per_loop
        simulated = n if self.config.enable_dump or self.config.enable_dump_debug else 1
        device_us, overflows = 0.0, []
        for _ in range(simulated):
            out = runtime.run(feeds, device_us)
            device_us += out.profile.device_us
            overflows += out.overflows
        device_us *= n / simulated
        Timeouts.of(self.config, runtime.soc.clock_mhz, 0.0).by(device_us * runtime.soc.clock_mhz, [])  # the loop's stream sync
        _warn_nonfinite(out.outputs, overflows)
        total = timing.MODEL_LAUNCH_US + device_us + timing.HOST_SYNC_US
        return Result(out.outputs, total / n, out.profile, tuple(overflows), n, total)

    def _gear_runtime(
        self, model: Model | str | os.PathLike, runtime: Runtime, turn: threading.Lock, feeds: Mapping[str, np.ndarray] | None
    ) -> tuple[Runtime, threading.Lock]:
        """The runtime of the gear `feeds` match (loaded once per session, with the lock
        its runs take turns on); a static model's own runtime. Without inputs (timing
        only) the largest gear runs. A dynamic model's inputs that match no gear run the
        build of their shapes (`ge.dynamic`)."""
        gears, dynamic = runtime.model.gears, runtime.model.dynamic
        if not gears and dynamic is None:
            return runtime, turn
        if feeds is None:
            if not gears:
                raise InputError("a fully dynamic model needs its inputs: their shapes choose the build that runs (timing_only too)")
            index = max(range(len(gears)), key=lambda i: (sum(t.size for t in gears[i].inputs), i))
        else:
            shapes = {name: tuple(np.shape(value)) for name, value in feeds.items()}
            try:
                index = pick(gears, shapes) if gears else -1
            except InputError:
                if dynamic is None:
                    raise
                index = -1
            if index < 0:
                return self._shape_builds(model, runtime.model).runtime(shapes)
        key = (_key(model), "gear", index)
        with self._loading:
            if key not in self._loaded:
                self._loaded[key] = (runtime.model, Runtime(runtime.model.gear(index), self.config, like=runtime), threading.Lock())
            _, gear, gear_turn = self._loaded[key]
        return gear, gear_turn

    def _shape_builds(self, model: Model | str | os.PathLike, loaded: Model) -> ShapeBuilds:
        """The per-shape builds of a dynamic model (made once per session)."""
        from ge.dynamic import ShapeBuilds

        key = (_key(model), "shapes")
        with self._loading:
            if key not in self._loaded:
                self._loaded[key] = (loaded, ShapeBuilds(loaded, self.config), threading.Lock())  # type: ignore[arg-type]
            return self._loaded[key][1]  # type: ignore[return-value]

    def run_instances(
        self, instances: Sequence[tuple[Model | str | os.PathLike, int]], inputs: Sequence[Inputs | None] | None = None
    ) -> ChipRun:
        """Run each (model, AI cores) of `instances` on its own slice of one chip, all at
        once, and each alone on its slice; `inputs` has an entry per instance (by
        name, a list, or None), and may be left out when the config is timing only.
        The slices must be virtual-instance sizes of the models' one SoC and fit the
        chip together (see `ge.sim.chip`)."""
        if self.config.enable_dump or self.config.enable_dump_debug:
            raise OptionError("enable_dump and enable_dump_debug dump one model's tasks; run the models one at a time to dump them")
        if self.config.iterations_per_loop > 1:
            raise OptionError(f"iterations_per_loop {self.config.iterations_per_loop} loops one model; run_instances runs each instance once (use 1)")
        if inputs is not None and len(inputs) != len(instances):
            raise InputError(f"{len(instances)} instances and {len(inputs)} inputs; give an entry per instance (None for none)")
        models = [m if isinstance(m, Model) else read(m) for m, _ in instances]
        names = [f"model {i}" if isinstance(m, Model) else os.path.basename(os.fspath(m)) for i, (m, _) in enumerate(instances)]
        feeds = [_by_name(m, x) for m, x in zip(models, inputs)] if inputs is not None else [None] * len(models)
        for name, m in zip(names, models):
            if m.dynamic is not None:
                raise OptionError(f"{name} is a dynamic-shape model, built per input shape from the host; run_instances runs static and multi-gear models")
        models = [m.gear(pick(m.gears, {k: tuple(np.shape(v)) for k, v in f.items()})) if m.gears and f else m for m, f in zip(models, feeds)]
        return run_tenants(models, [n for _, n in instances], feeds, self.config, names)


def _warn_nonfinite(outputs: dict[str, np.ndarray], overflows: list[Overflow]) -> None:
    """One `NonFiniteWarning` when the run made inf or NaN: which outputs hold them, and
    the first op, in run order, that turned finite inputs into them (where precision was lost)."""
    bad = [name for name, value in outputs.items() if value.dtype.kind == "f" and not np.isfinite(value).all()]
    if not bad and not overflows:
        return
    held = f"output {', '.join(repr(n) for n in bad)} contains inf or NaN" if bad else "no output holds inf or NaN, but"
    if not overflows:
        message = f"{held}; no kernel turned finite inputs into them: they came from the model's inputs"
    else:
        message = f"{held}; the first to make them: {overflows[0].advice()}"
    warnings.warn(message, NonFiniteWarning, stacklevel=4)


def _device_id(config: RunConfig) -> int:
    """session_device_id, else $ASCEND_DEVICE_ID (checked as the option is), else 0."""
    if config.session_device_id is not None:
        return config.session_device_id
    text = os.environ.get("ASCEND_DEVICE_ID")
    if text is None:
        return 0
    if not text.strip().isdigit() or int(text) >= DEVICES:
        raise OptionError(f"ASCEND_DEVICE_ID '{text}' is not allowed; use 0 to {DEVICES - 1} (or set session_device_id)")
    return int(text)


def _key(model: Model | str | os.PathLike) -> object:
    if isinstance(model, Model):
        return id(model)
    path = os.path.abspath(os.fspath(model))
    return (path, os.stat(path).st_mtime_ns)


def _by_name(model: Model, inputs: Inputs | None) -> Mapping[str, np.ndarray] | None:
    """`inputs` by input name (a list is taken in the model's input order)."""
    if inputs is None or isinstance(inputs, Mapping):
        return inputs
    names = [d.name for d in model.inputs]
    if isinstance(inputs, np.ndarray) or len(inputs) != len(names):
        raise InputError(f"the model takes {len(names)} inputs ({', '.join(names)}); give them by name or as a list of {len(names)}")
    return dict(zip(names, inputs))
