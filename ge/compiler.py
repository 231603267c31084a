"""`ge.compile`: an ONNX model (or an imported module) to an offline `Model`.

    model = ge.compile("resnet50.onnx", CompileOptions(soc_version="Ascend310P3"))
    model.save("resnet50.om")
    again = ge.load_model("resnet50.om")          # == model

The phases, timed one by one (`Model.build["timings"]`): import, GE's graph
optimisation (`ge.pipeline.optimize`: fusion, precision and format selection, UB
fusion, Split no-task), lowering every kernel scope to a tiled `ascend_kernel`
kernel (`lower-to-kernel`), then the build: streams, memory, tasks, weights and
kernels (see `ge.backend`).

The lowering takes a kernel's tiling from the tune bank (`ge.aoe.bank`) where the
bank's folder for the SoC has an entry for it, as ATC uses AOE's custom bank; how
many did is in `Model.build["tune_bank"]` (path, kernels looked up, tilings taken).
Without a fusion_switch_file, the fusion switches of the model's graph entry there
(subgraph tuning's result for this ONNX file and these options) apply, recorded as
`closed_passes`.

The lowering reads and fills the kernel compile cache (`ge.core.kernel_cache`) as
op_compiler_cache_mode and op_compiler_cache_dir say (disable by default here, unlike
CANN); its folder is checked before anything is compiled, and what the cache did
is in `Model.build["kernel_cache"]` (mode, folder, hits, misses; or why it was off).
With the cache on, a compile of an ONNX file whose whole build is in the model cache
(`ge.model_cache`: same model bytes, options and compiler) returns that build without
compiling: `Model.build["kernel_cache"]["model_cache"]` is then "hit", every kernel
counts as a hit, and the only timing is the lookup's.

With a gear option (dynamic_batch_size, dynamic_image_size, dynamic_dims) the
compile is `ge.gears.compile`: each gear is compiled here as a static graph, and
the builds are merged into one multi-gear model (with dynamic_fallback=1, plus a
dynamic graph: `ge.dynamic.hybrid`). Without one, a graph input with a dynamic dim
(-1 or lo~hi in input_shape, or the model's own) makes a fully dynamic model
(`ge.dynamic.compile`).

op_debug_level 1, 2 and 4, and op_debug_config's dump_cce and dump_loc, write the
kernels' programs to kernel_meta (`ge.sim.debug`) once the build is done; its `oom`
is recorded in `Model.build["oom"]` (the kernels the runtime then bounds-checks).

A module passed in is compiled in place. fusion_result.json is written at the
end of a successful compile when `export_compile_stat` is 1 (2 writes it right
after the optimisation), as `ge atc` does.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import logging
import math
import os
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from xdsl.dialects.builtin import ModuleOp

from ge import fusion_switch, model_cache
from ge.aoe import bank as tune_bank
from ge.core import kernel_cache, soc
from ge.core.errors import OptionError
from ge.core.gear_options import gear_option
from ge.core.options import CompileOptions
from ge.om import Model, OmError, TensorDesc, read
from passes.lowering import space

__all__ = ["Model", "OmError", "TensorDesc", "compile", "load_model"]

log = logging.getLogger("ge")


def compile(
    model: str | os.PathLike | ModuleOp, options: CompileOptions | Mapping[str, object] | None = None
) -> Model:
    """Compile an ONNX file or an imported `ascend_graph` module into an offline model."""
    with collecting_less():
        return _compile(model, options)


GC_THRESHOLD = 100_000
"""Allocations between the collector's young-generation runs during a compile (Python's
default is 700). A compile makes millions of small IR objects that live until it
ends; at the default, the collector walks them again and again: about a sixth of the CPU
time of a 20,000-node compile (benchmarks/scaling.py), for no garbage."""


@contextmanager
def collecting_less() -> Iterator[None]:
    """Run the garbage collector rarely while compiling, as it was before afterwards."""
    before = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, before[1], max(before[2], 100))
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _compile(model: str | os.PathLike | ModuleOp, options: CompileOptions | Mapping[str, object] | None) -> Model:
    options = _options(options)
    if space.current() is not None:  # a tuner chose the tilings
        return _compile_tiled(model, options, tuned=True)
    bank = tune_bank.for_compile(options.soc_version)
    if bank is None:
        return _compile_tiled(model, options, tuned=False)
    graph = bank.graph(tune_bank.graph_key(model, options)) if options.fusion_switch_file is None and not isinstance(model, ModuleOp) else None
    with space.using(bank.lookup), tempfile.TemporaryDirectory(prefix="ge_switches_") as folder:
        if graph is not None:  # subgraph tuning's fusion switches, as a switch file would give them
            switch_file = os.path.join(folder, "fusion_switch.cfg")
            with open(switch_file, "w", encoding="utf-8") as f:
                json.dump(fusion_switch.closing(graph.closed), f)
            options = dataclasses.replace(options, fusion_switch_file=switch_file)
        compiled = _compile_tiled(model, options, tuned=True)
    record = {**bank.report(), **({"closed_passes": list(graph.closed)} if graph is not None else {})}
    return dataclasses.replace(compiled, build={**compiled.build, "tune_bank": record})


def _compile_tiled(model: str | os.PathLike | ModuleOp, options: CompileOptions, tuned: bool) -> Model:
    """The compile, its tilings from the tune bank or a tuner when `tuned` (no whole
    build is then taken from or put in the model cache, which does not key on them)."""
    if gear_option(dataclasses.asdict(options)) is not None:
        if isinstance(model, ModuleOp):
            raise OptionError("a multi-gear compile (dynamic_batch_size, dynamic_image_size, dynamic_dims) imports each gear from the ONNX model; give its path, not a module")
        from ge import gears

        if options.dynamic_fallback:
            from ge import dynamic

            return dynamic.hybrid(model, options)
        return gears.compile(model, options)
    from ge import dynamic

    if dynamic.requested(options) and not isinstance(model, ModuleOp):
        return dynamic.compile(model, options)
    cache, off = kernel_cache.for_compile(
        options.op_compiler_cache_mode, options.op_compiler_cache_dir, options.op_debug_level, options.op_debug_config
    )
    started = time.perf_counter()
    models, unused = model_cache.for_compile(cache, model, options) if not tuned else (None, "the tilings come from the tune bank")
    hit = models.load() if models is not None else None
    if hit is not None:
        return _from_cache(hit, models, options, time.perf_counter() - started)  # type: ignore[arg-type]
    from ge import (  # after the lookup: a hit needs neither (their imports are 0.4 s of a warm ge atc)
        backend,
        pipeline,
    )

    timings: dict[str, float] = {}
    if isinstance(model, ModuleOp):
        module = model
    else:
        from ge.frontend import load_onnx

        module, _ = load_onnx(os.fspath(model), input_shape=options.input_shape)
    if dynamic.requested(options) or not _static_inputs(module):  # the model's own dynamic dims: -1
        return dynamic.compile(module, options, time.perf_counter() - started)
    timings["import"] = time.perf_counter() - started
    compilation = pipeline.optimize(module, options)
    if not isinstance(model, ModuleOp) and log.isEnabledFor(logging.INFO):
        shape = f" --input_shape='{options.input_shape}'" if options.input_shape else ""
        log.info("the same compile in ge-opt: ge-opt %s%s -p '%s'", os.fspath(model), shape, compilation.pipeline)
    with kernel_cache.using(cache):
        compilation.lower()
    timings.update(compilation.timings)
    settings = backend.BuildOptions(
        soc_version=options.soc_version,
        max_streams=options.aicore_streams,
        reuse_memory=not options.disable_reuse_memory,
        options=options.given(),
        aicpu_parallel=options.aicpu_parallel,
    )
    result = backend.build(module, settings, timings)
    compilation.finish()
    report: dict[str, object] = {"mode": options.op_compiler_cache_mode, "off": off}
    if cache is not None:
        cache.finish()
        report = cache.report()
    if cache is not None and models is None:
        log.info("model cache: not used: %s", unused)
    build = {**result.build, **_virtual_instance(options), **_debug(result, options), "timings": timings, "kernel_cache": report}
    compiled = dataclasses.replace(result, build=build)
    if models is not None:
        models.store(compiled, compilation.statistics.to_json())
        models.finish()
    return compiled


def _from_cache(hit: model_cache.Hit, models: model_cache.ModelCache, options: CompileOptions, seconds: float) -> Model:
    """The model of a build taken whole from the model cache, with what this compile did:
    the lookup's time, the cache's report, and fusion_result.json written as the compile would."""
    from passes.fusion import write_result

    if options.export_compile_stat in (1, 2):
        write_result(hit.fusion_result)
    models.cache.finish()
    models.finish()
    looked_up = hit.model.build.get("kernel_cache", {})
    kernels = int(looked_up.get("hits", 0)) + int(looked_up.get("misses", 0))  # type: ignore[union-attr]
    report = {**models.cache.report(), "hits": kernels, "model_cache": "hit"}
    build = {**hit.model.build, "timings": {"model cache": seconds}, "kernel_cache": report}
    return dataclasses.replace(hit.model, build=build)


def _static_inputs(module: ModuleOp) -> bool:
    from dialects.ascend_graph import shape_of
    from dialects.shapes import is_static
    from ge.core.ir import graph_of

    return all(is_static(shape_of(d.out.type)) for d in graph_of(module).inputs)


def require_static(module: ModuleOp, model: str | os.PathLike | None = None) -> None:
    """Refuse a graph with dynamic input dims: one error naming each and the
    `--input_shape` to give, its placeholders named after the ONNX model's dims (`model`)."""
    from dialects.ascend_graph import shape_of
    from dialects.shapes import is_static
    from ge.core.ir import graph_of
    from ge.frontend.input_shape import input_shape_needed
    from ge.frontend.onnx_importer import dim_names

    inputs = {d.label: shape_of(d.out.type) for d in graph_of(module).inputs}
    dynamic = {name: shape for name, shape in inputs.items() if not is_static(shape)}
    if dynamic:
        raise input_shape_needed(dynamic, dim_names(model) if model is not None else None)


def _virtual_instance(options: CompileOptions) -> dict[str, object]:
    """What a model built for virtual instances records: the slice sizes it runs
    balanced on, and the multiple every kernel's block_dim is (soft-sync kernels aside)."""
    if options.virtual_type != 1:
        return {}
    sizes = soc.load(options.soc_version).virtual_aicore_nums
    return {"virtual_instance": {"slice_sizes": list(sizes), "block_dim_multiple": math.lcm(*sizes)}}


def load_model(path: str | os.PathLike) -> Model:
    """Read a `.om` file written by `Model.save` (or `ge atc`)."""
    return read(path)


def _options(options: CompileOptions | Mapping[str, object] | None) -> CompileOptions:
    if options is None:
        options = CompileOptions()
    elif not isinstance(options, CompileOptions):
        options = CompileOptions.from_flags(**options)
    if options.op_debug_level == 2:
        log.warning("op_debug_level=2: there is no C compiler here to build with -O0 -g; it writes kernel_meta as 1 does")
    if options.op_debug_level == 3:
        log.warning("op_debug_level=3 keeps operators' .o and .json files, and there are none here; it only turns the compile cache off")
    if options.op_debug_config is not None:
        inert = [o for o in kernel_cache.read_debug_config(options.op_debug_config).options if o in ("ccec_O0", "ccec_g", "check_flag")]
        if inert:
            log.warning("op_debug_config: %s have no effect here: there is no C compiler or operator binary", ", ".join(inert))
    return options


def _debug(model: Model, options: CompileOptions) -> dict[str, object]:
    """op_debug_level 1, 2 and 4 write every kernel's program to kernel_meta; an
    op_debug_config with dump_cce or dump_loc, the kernels of op_debug_list's ops
    (all without a list). Returns the build entry of `oom`: the kernels the runtime
    bounds-checks, as a device kernel compiled with it checks itself."""
    from ge.om.tasks import KernelTask
    from ge.sim import debug, program

    if not options.op_debug_level and options.op_debug_config is None:
        return {}
    kernels = program.split_kernels(model.kernels)
    config = kernel_cache.read_debug_config(options.op_debug_config) if options.op_debug_config else None
    listed = sorted({
        t.kernel for t in model.tasks
        if isinstance(t, KernelTask) and (config is None or config.ops is None or config.lists(t.name.split("+"), kernels[t.kernel].header.op_types))
    })
    if options.op_debug_level in (1, 2, 4):
        debug.write_kernel_meta(kernels, debug.kernel_meta_dir(options.debug_dir))
    elif config is not None and {"dump_cce", "dump_loc"} & set(config.options):
        debug.write_kernel_meta({k: kernels[k] for k in listed}, debug.kernel_meta_dir(options.debug_dir))
    return {"oom": listed} if config is not None and "oom" in config.options else {}
