"""GE's phase order: the passes a compile runs, the graphs it dumps, the statistics it keeps.

| phase                   | passes                                           | dump after it |
|-------------------------|--------------------------------------------------|---------------|
| prepare                 | import (with shape inference), constant folding  | PreRunBegin, AfterInferShape |
| optimize original graph | graph fusion passes by band and name             | OptimizeOriginalGraph |
|                         | precision selection (dtypes, engines, impl modes) | AfterPrecision |
|                         | format selection, then TransdataTransdataPass     | AfterFormat |
| optimize subgraph       | UB fusion passes (named, then automatic)         | AfterUBFusion |
| before build            | FusionVirtualOpSetSwitch (Split no-task)         | PreRunAfterOptimizeGraphBeforeBuild |

Fusion passes run only when the fusion switch file leaves them on; their counts go
to a `FusionStatistics` that becomes fusion_result.json per `export_compile_stat`:
2 writes it as soon as the graph is optimised, 1 when the caller ends the compile
normally (`Compilation.finish()`), 0 never. UB fusion passes are configured with
`--soc_version`, whose Unified Buffer their scopes must fit.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from ge import fusion_switch

from ge.core import ir
from ge.core.errors import OptionError
from ge.options import CompileOptions
from passes.fusion import FusionKind, FusionPass, FusionStatistics, builtin_fusion_passes, collect_statistics, ordered
from passes.format import AFTER_FORMAT_SELECTION, FormatSelection
from passes.precision import PrecisionSelection
from passes.registry import get_pass

log = logging.getLogger("ge")

DUMP_MODES = ("1", "2", "3")
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
        with open(path, "w") as f:
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


@dataclass
class Compilation:
    """What the graph optimisation produced and what it observed."""

    module: ModuleOp
    options: CompileOptions
    statistics: FusionStatistics
    timings: dict[str, float] = field(default_factory=dict)
    dumps: list[str] = field(default_factory=list)
    result_file: str | None = None
    """The fusion_result.json written, if any."""

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


def optimize(module: ModuleOp, options: CompileOptions, ctx: Context | None = None) -> Compilation:
    """Run GE's optimisation phases on an imported module, in place."""
    ctx = ctx or ir.context()
    builtin_fusion_passes()
    switches = fusion_switch.load(options.fusion_switch_file) if options.fusion_switch_file else fusion_switch.FusionSwitches()
    dumper = GraphDumper.from_env(options.graph_id)
    stats = FusionStatistics(options.session_id, options.graph_id)
    result = Compilation(module, options, stats)

    def phase(name: str, dump_as: tuple[str, ...], run: Callable[[], None]) -> None:
        started = time.perf_counter()
        run()
        result.timings[name] = time.perf_counter() - started
        for dump in dump_as:
            dumper.dump(module, dump)

    def fusion(kind: FusionKind, before_build: bool, after_format: bool = False) -> Callable[[], None]:
        def run() -> None:
            for cls in ordered(kind):
                if (cls.name == SPLIT_NO_TASK) != before_build or (cls.name in AFTER_FORMAT_SELECTION) != after_format:
                    continue
                if switches.enabled(cls.name):
                    _instance(cls, options).apply(ctx, module)
                else:
                    log.info("fusion pass %s is switched off", cls.name)

        return run

    def select_formats() -> None:
        FormatSelection(soc=options.soc_version).apply(ctx, module)
        fusion(FusionKind.GRAPH, False, after_format=True)()

    dumper.dump(module, "PreRunBegin")
    with collect_statistics(stats):
        phase("prepare", ("AfterInferShape",), lambda: get_pass("constant-folding")().apply(ctx, module))
        phase("optimize original graph", ("OptimizeOriginalGraph",), fusion(FusionKind.GRAPH, False))
        phase("precision selection", ("AfterPrecision",), lambda: PrecisionSelection.from_options(options).apply(ctx, module))
        phase("format selection", ("AfterFormat",), select_formats)
        phase("optimize subgraph", ("AfterUBFusion",), fusion(FusionKind.UB, False))
        phase("before build", ("PreRunAfterOptimizeGraphBeforeBuild",), fusion(FusionKind.UB, True))
    module.verify()
    if options.export_compile_stat == 2:
        result.result_file = stats.write()
    dumper.finish(module)
    result.dumps = dumper.written
    return result


def _instance(cls: type[FusionPass], options: CompileOptions) -> FusionPass:
    """The pass configured from the options: UB fusion passes take the SoC."""
    if "soc" in {f.name for f in fields(cls)}:
        return cls(soc=options.soc_version)  # type: ignore[call-arg]
    return cls()
