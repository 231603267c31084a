"""How `ge atc` (its compile summary, `--mode=6` and `--mode=1`) shows a model's gears
and, for a fully dynamic or hybrid model (`ge.dynamic`), its shape ranges."""

from __future__ import annotations

import dataclasses

from rich.console import Console
from rich.table import Table

from ge.core.errors import OptionError
from ge.core.gear_options import gear_option
from ge.core.options import CompileOptions
from ge.om import Model, Region
from ge.om.gears import GEAR_INDEX, describe

STATIC = "none (static shapes)"


def strategy(model: Model) -> str:
    """The shape strategy in words: static, fully dynamic, or how many gears by which
    option (with a dynamic fallback: hybrid)."""
    if model.dynamic is not None and not model.gears:
        return "none (fully dynamic shapes: tiled on the host at run time)"
    if not model.gears:
        return STATIC
    if model.dynamic is not None:
        name = _option(model)
        return f"{len(model.gears)}, hybrid: multi-gear (--{name}) with a fully dynamic fallback"
    name = _option(model)
    return f"{len(model.gears)}, multi-gear (--{name})" if isinstance(name, str) else f"{len(model.gears)}, multi-gear"


def gears_json(model: Model) -> dict[str, object]:
    """`--mode=1`'s entry: the strategy and each gear's shapes, tasks and feature map."""
    kind = "hybrid" if model.gears and model.dynamic is not None else "dynamic" if model.dynamic is not None else "multi-gear" if model.gears else "static"
    return {
        "strategy": kind,
        "ranges": model.build.get("dynamic", {}).get("ranges") if model.dynamic is not None else None,  # type: ignore[union-attr]
        "gear_option": _option(model),
        "gears": [
            {"input_shape": describe(g.shapes), "outputs": {t.name: list(t.origin_shape) for t in g.outputs}, "tasks": len(g.tasks), "build": g.build}
            for g in model.gears
        ],
        "shared": model.build.get("gears"),
    }


def _option(model: Model) -> str | None:
    shared = model.build.get("gears")
    name = shared.get("strategy") if isinstance(shared, dict) else None
    return name if isinstance(name, str) else None


def show(model: Model, console: Console) -> None:
    """The strategy, then a table of the gears and what they share."""
    console.print(f"gears: {strategy(model)}", soft_wrap=True)
    if model.dynamic is not None:
        from ge.core.shape_ranges import shown

        console.print(
            f"shape ranges: {shown(model.dynamic.ranges)} (-1: unbounded); every kernel tiled on the host per input shape "
            f"({model.build.get('dynamic', {}).get('host_tiling_us_per_op')} us per op) and each task launched from the host "  # type: ignore[union-attr]
            f"({model.build.get('dynamic', {}).get('host_launch_us_per_task')} us per task): no sink scheduling",  # type: ignore[union-attr]
            soft_wrap=True,
        )
    if not model.gears:
        return
    table = Table(title=f"gears (the host maps the input shapes to a gear, the device's Case switches to it on '{GEAR_INDEX}')", title_justify="left")
    for column in ("gear", "input shape", "output shapes", "tasks", "feature map bytes"):
        table.add_column(column, justify="right" if column in ("gear", "tasks", "feature map bytes") else "left")
    for i, g in enumerate(model.gears):
        outputs = "; ".join(f"{t.name}{list(t.origin_shape)}" for t in g.outputs)
        used = g.build.get("feature_map_bytes")
        table.add_row(str(i), describe(g.shapes), outputs, str(len(g.tasks)), f"{used:,}" if isinstance(used, int) else "?")
    console.print(table)
    fm = model.memory.sizes[Region.FEATURE_MAP]
    shared = model.build.get("gears")
    line = f"one memory layout for every gear: feature map {fm:,} bytes (the largest gear's, not the sum)"
    if isinstance(shared, dict) and isinstance(shared.get("weights"), dict) and isinstance(shared.get("kernels"), dict):
        w, k = shared["weights"], shared["kernels"]
        line += (
            f"; weights stored once: {w.get('stored_bytes', 0):,} bytes for {w.get('per_gear_bytes', 0):,} over the gears; "
            f"kernels: {k.get('stored')} stored for {k.get('per_gear')} over the gears; the ONNX import read and checked once"
        )
    made = shared.get("compile") if isinstance(shared, dict) else None
    if isinstance(made, dict):
        line += f"; compiled once for every gear: {made.get('derived_weights')} derived weights, {made.get('kernels_taken')} kernels taken from an earlier gear"
    console.print(line, soft_wrap=True)


def refuse_gears(options: CompileOptions, command: str) -> None:
    """Refuse a gear option for a command that works on one graph (not `ge atc`)."""
    given = gear_option(dataclasses.asdict(options))
    if given is not None:
        raise OptionError(
            f"--{given[0]} builds one graph per gear, which ge atc and ge.compile do; {command} works on one graph: "
            "give every dim in --input_shape (one gear's sizes)"
        )
