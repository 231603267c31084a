"""GE's phase order: the passes a compile runs, the graphs it dumps, the statistics it keeps.

| phase                   | passes                                           | dump after it |
|-------------------------|--------------------------------------------------|---------------|
| prepare                 | import (with shape inference), constant folding  | PreRunBegin, AfterInferShape |
| optimize original graph | graph fusion passes by band and name             | OptimizeOriginalGraph |
|                         | precision selection (dtypes, engines, impl modes) | AfterPrecision |
|                         | format selection, then TransdataTransdataPass and TransdataCastFusionPass | AfterFormat |
| optimize subgraph       | UB fusion passes (named, then automatic)         | AfterUBFusion |
| before build            | FusionVirtualOpSetSwitch (Split no-task)         | PreRunAfterOptimizeGraphBeforeBuild |
| lowering                | lower-to-kernel (run by `Compilation.lower`): the engine partition too, an AI CPU op (`_engine`) a kernel of its own | |

Every pass is configured one way (`configured`): its fields named after compile
options take those options' values. The phases are therefore one `ge-opt -p`
pipeline (`pipeline_spec`, logged at info level): `ge-opt MODEL.onnx -p '...'`
with it gives the IR the compile lowers.

Fusion passes run only when the fusion switch file leaves them on, and a non-general
one (`FusionPass.general`) only when enable_scope_fusion_passes names it; their counts go
to a `FusionStatistics` that becomes fusion_result.json per `export_compile_stat`:
2 writes it as soon as the graph is optimised, 1 when the caller ends the compile
normally (`Compilation.finish()`), 0 never.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ge import fusion_switch

from ge.core import ir
from ge.core.errors import OptionError
from ge.core.files import published
from ge.core.options import CompileOptions
from passes.format_selection import AFTER_FORMAT_SELECTION, FormatSelection
from passes.fusion import FusionKind, FusionPass, FusionStatistics, builtin_fusion_passes, collect_statistics, ordered
from passes.lower_to_kernel import LowerToKernel
from passes.precision_selection import PrecisionSelection
from passes.registry import get_pass

log = logging.getLogger("ge")

DUMP_MODES = ("1", "2", "3")
LOWERING = "lowering"
SPLIT_NO_TASK = "FusionVirtualOpSetSwitch"
"""Switched under UBFusion, but GE runs it just before the build, after UB fusion."""
PHASES = (
    "PreRunBegin",
    "AfterInferShape",
    "OptimizeOriginalGraph",
    "AfterPrecision",
    "AfterFormat",
    "AfterUBFusion",
    "PreRunAfterOptimizeGraphBeforeBuild",
)


@dataclass
class GraphDumper:
    """`DUMP_GE_GRAPH` and `DUMP_GRAPH_LEVEL`, as GE reads them.

    DUMP_GE_GRAPH: 1 writes the IR and, beside it, the weights as `.npz`; 2 the IR
    alone (weights stay handles); 3 a compact listing, one line per op.
    DUMP_GRAPH_LEVEL: 1 or 2 (the default) every phase's graph, 3 only the last,
    4 only the first, or phase names joined by `|`.
    """

    mode: str | None = None
    level: str = "2"
    directory: str = "."
    graph_id: int = 0
    written: list[str] = field(default_factory=list)
    _sequence: int = 0
    _last: tuple[str, int] | None = None

    @classmethod
    def from_env(cls, graph_id: int = 0) -> GraphDumper:
        mode = os.environ.get("DUMP_GE_GRAPH") or None
        level = os.environ.get("DUMP_GRAPH_LEVEL") or "2"
        if mode is not None and mode not in DUMP_MODES:
            raise OptionError(f"DUMP_GE_GRAPH={mode!r} is not allowed; use 1 (with weights), 2 (IR) or 3 (op list)")
        if level not in ("1", "2", "3", "4") and not set(level.split("|")) <= set(PHASES):
            raise OptionError(
                f"DUMP_GRAPH_LEVEL={level!r} is not allowed; use 1, 2, 3, 4 or phase names joined by '|' from: "
                + ", ".join(PHASES)
            )
        return cls(mode, level, os.environ.get("ASCEND_WORK_PATH") or ".", graph_id)

    def dump(self, module: ModuleOp, phase: str) -> None:
        if self.mode is None:
            return
        self._sequence += 1
        wanted = self.level in ("1", "2") or phase in self.level.split("|") or (self.level == "4" and self._sequence == 1)
        if self.level == "3":
            self._last = (phase, self._sequence)
        elif wanted:
            self._write(module, phase, self._sequence)

    def finish(self, module: ModuleOp) -> None:
        """Write the last graph (DUMP_GRAPH_LEVEL=3) once the compile is over; the
        module is then as the last phase left it, so it is printed only now."""
        if self._last is not None:
            self._write(module, *self._last)
            self._last = None

    def _text(self, module: ModuleOp) -> str:
        if self.mode == "3":
            return "\n".join(_op_line(op) for op in module.walk() if op is not module and op.name != "ascend_graph.graph") + "\n"
        return ir.to_text(module)

    def _write(self, module: ModuleOp, phase: str, sequence: int) -> None:
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, f"ge_onnx_{sequence:08d}_graph_{self.graph_id}_{phase}.mlir")
        with published(path, what="graph dump") as f:
            f.write(self._text(module))
        if self.mode == "1":
            from ge.core.weights import store_of

            store_of(module).save(path + ".npz")
        self.written.append(path)


def _op_line(op) -> str:
    name = op.properties.get("name")
    label = name.data if name is not None else ""
    marks = " ".join(f"{k}={v}" for k, v in op.attributes.items() if k.startswith("_"))
    return f"{op.name} {label} {marks}".rstrip()


@dataclass(frozen=True)
class Phase:
    """One phase of the compile: its passes, in order, and the dumps after it."""

    name: str
    dumps: tuple[str, ...]
    passes: tuple[ModulePass, ...]


@dataclass
class Compilation:
    """What the graph optimisation produced and what it observed."""

    module: ModuleOp
    options: CompileOptions
    statistics: FusionStatistics
    timings: dict[str, float] = field(default_factory=dict)
    pass_timings: dict[str, float] = field(default_factory=dict)
    """Seconds of each optimisation pass, by name (`benchmarks/scaling.py` shows them)."""
    dumps: list[str] = field(default_factory=list)
    result_file: str | None = None
    """The fusion_result.json written, if any."""
    phases: tuple[Phase, ...] = ()
    """Every phase with its configured passes; the last, lowering, runs in `lower`."""

    @property
    def pipeline(self) -> str:
        """The whole compile as a `ge-opt -p` pipeline."""
        return pipeline_spec(self.phases)

    def lower(self, ctx: Context | None = None) -> None:
        """Replace every kernel scope by a launch of a kernel tiled for the SoC."""
        started = time.perf_counter()
        for p in self.phases[-1].passes:
            p.apply(ctx or ir.context(), self.module)
        self.module.verify()
        self.timings[LOWERING] = time.perf_counter() - started

    def finish(self) -> str | None:
        """End the compile normally: with export_compile_stat=1, write fusion_result.json now.

        GE writes it when the process exits normally; `ge` commands call this at
        their normal end, and a Python caller calls it when its compile is done
        (nothing is written at interpreter exit, so tests and notebooks that
        optimise graphs leave no files behind unless they ask).
        """
        if self.options.export_compile_stat == 1:
            self.result_file = self.statistics.write()
        return self.result_file


def phases(options: CompileOptions, switches: fusion_switch.FusionSwitches | None = None) -> tuple[Phase, ...]:
    """GE's phases with their passes configured from the options (closed fusion passes left
    out), ending with the lowering to kernels, which runs after `optimize`."""
    passes = builtin_fusion_passes()
    switches = switches or fusion_switch.FusionSwitches()
    named = scope_fusion_passes(options.enable_scope_fusion_passes, passes)

    def fusion(kind: FusionKind, before_build: bool, after_format: bool = False) -> tuple[ModulePass, ...]:
        chosen = []
        for cls in ordered(kind):
            if (cls.name == SPLIT_NO_TASK) != before_build or (cls.name in AFTER_FORMAT_SELECTION) != after_format:
                continue
            if not cls.general and cls.name not in named:
                log.info("fusion pass %s is not general and enable_scope_fusion_passes does not name it", cls.name)
            elif switches.enabled(cls.name):
                chosen.append(configured(cls, options))
            else:
                log.info("fusion pass %s is switched off", cls.name)
        return tuple(chosen)

    virtual = (configured(get_pass("virtual-instance"), options),) if options.virtual_type == 1 else ()
    return (
        Phase("prepare", ("AfterInferShape",), (configured(get_pass("constant-folding"), options),)),
        Phase("optimize original graph", ("OptimizeOriginalGraph",), fusion(FusionKind.GRAPH, False)),
        Phase("precision selection", ("AfterPrecision",), (configured(PrecisionSelection, options),)),
        Phase("format selection", ("AfterFormat",), (configured(FormatSelection, options), *fusion(FusionKind.GRAPH, False, True))),
        Phase("optimize subgraph", ("AfterUBFusion",), fusion(FusionKind.UB, False)),
        Phase("before build", ("PreRunAfterOptimizeGraphBeforeBuild",), (*fusion(FusionKind.UB, True), *virtual)),
        Phase(LOWERING, (), (configured(LowerToKernel, options),)),
    )


def scope_fusion_passes(text: str | None, passes: Mapping[str, type[FusionPass]]) -> frozenset[str]:
    """The non-general fusion passes enable_scope_fusion_passes names (',' between names);
    a name that is no such pass is warned about, as it enables nothing."""
    names = frozenset(n.strip() for n in (text or "").split(",") if n.strip())
    other = sorted(n for n in names if n not in passes or passes[n].general)
    if other:
        choices = ", ".join(sorted(n for n, cls in passes.items() if not cls.general)) or "none is registered"
        log.warning(
            "enable_scope_fusion_passes: %s %s no non-general fusion pass (general passes always run); the non-general ones: %s",
            ", ".join(other), "is" if len(other) == 1 else "are", choices,
        )
    return names


def configured(cls: type[ModulePass], options: CompileOptions) -> ModulePass:
    """The one way a pass is configured: its fields named after compile options take
    their values (`soc_version`, `precision_mode`, ...); the others keep their defaults."""
    given = {f.name for f in fields(options)}
    return cls(**{f.name: getattr(options, f.name) for f in fields(cls) if f.init and f.name in given})  # type: ignore[call-arg]


def pipeline_spec(stages: Sequence[Phase]) -> str:
    """The passes as a `ge-opt -p` pipeline that gives the same IR."""
    return ",".join(str(p) for phase in stages for p in phase.passes)


def optimize(module: ModuleOp, options: CompileOptions, ctx: Context | None = None) -> Compilation:
    """Run GE's optimisation phases (all but the lowering) on an imported module, in place."""
    ctx = ctx or ir.context()
    switches = fusion_switch.load(options.fusion_switch_file) if options.fusion_switch_file else fusion_switch.FusionSwitches()
    stages = phases(options, switches)
    dumper = GraphDumper.from_env(options.graph_id)
    stats = FusionStatistics(options.session_id, options.graph_id)
    result = Compilation(module, options, stats, phases=stages)
    dumper.dump(module, "PreRunBegin")
    with collect_statistics(stats):
        for stage in stages[:-1]:
            started = time.perf_counter()
            for p in stage.passes:
                began = time.perf_counter()
                p.apply(ctx, module)
                result.pass_timings[str(p.name)] = time.perf_counter() - began
            result.timings[stage.name] = time.perf_counter() - started
            for dump in stage.dumps:
                dumper.dump(module, dump)
    module.verify()
    if options.export_compile_stat == 2:
        result.result_file = stats.write()
    dumper.finish(module)
    result.dumps = dumper.written
    return result
