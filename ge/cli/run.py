"""`ge run`: run a `.om` model on the simulator, as msame runs one on a board.

    ge run resnet50.om --input input=images.npy --output out/ --profile prof/
    ge run bert.om --input input_ids=ids.npy --input attention_mask=mask.npy ... --output out/
    ge run resnet50.om --timing-only --aicore_num 4 --profile prof/ --profile-level pipe
    ge run --instances "resnet50.om:4,bert.om:4" --timing-only --profile prof/

Inputs are `.npy` files, `--input name=FILE` per graph input (a model with one input
also takes `--input FILE`), each in the dtype and logical shape the model declares.
`--output DIR` writes `<output name>.npy` per output ('/' and ':' in a name become
'_'). The command prints the latency, the throughput at the model's batch, the
chip's cube, vector and GM bandwidth use and the ops taking the most time;
`--profile DIR` writes op_summary.csv and trace.json (see `ge.sim.profile`), and the
roofline chart roofline.png when matplotlib is installed (`ge.sim.roofline_chart`).
A multi-gear model runs the gear whose input shapes the inputs have (without
`--input`, its largest gear), and says which ran.

`--timing-only` skips the numerics (no inputs needed, no outputs written).
`--no-l2-cache` runs without the simulated L2 cache (`ge.sim.l2`): every kernel read
from GM, as a comparison with the default. Without
`--input`, the model runs on generated inputs (zeros, or seeded random values with
`--seed`), as Ascend's inference benchmark tool does, and says so.

`--dump_path DIR` dumps every kernel task's outputs (`--dump_mode input|output|all`,
`--dump_layer "op op2"`, `--dump_step 0|5|10-20`) as `.npy` in their logical layout
to `DIR/0/` with a `manifest.json` (`ge.sim.dump`); `ge compare DIR/0 model.onnx`
lines them up with onnxruntime's. `--enable_dump_debug --dump_debug_path DIR` dumps
the kernels that turned finite inputs into inf/NaN. Either way, a run whose values
hold inf or NaN warns, naming the first op that made them and the precision options
that avoid it.

`--iterations_per_loop N` runs the model N times back to back on the device, the
host's launch and synchronisation paid once, and prints the latency per iteration
and the total. `--deterministic`, `--op_execute_timeout`, `--op_wait_timeout`,
`--stream_sync_timeout` and `--event_sync_timeout` are NPURunConfig's; a run past a
timeout fails naming the task and the limit. `--op_debug_config FILE` adds its `oom`
bounds checks to the kernels it lists (the model's own, from `ge atc`, stay checked). The other NPURunConfig options are
Python-only (`ge.RunConfig(name=value)`): the help lists them all, from the table.

`--instances "A.om:4,B.om:4"` runs several models at once on disjoint slices of one
chip (virtual instances, `ge.sim.chip`), on generated inputs, and prints per model
its slice, its latency alone on the slice and shared, its throughput shared and the
slowdown; with numerics, each model's outputs must be those it computes alone.

The numerics are many small matrix products, for which OpenBLAS's threads cost
more than they save (ResNet-50 at batch 1 ran three times slower with two threads
than with one on our 2-core machine shared with other jobs): the command runs BLAS
on one thread unless OPENBLAS_NUM_THREADS says otherwise.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from ge.core.errors import InputError, ModelError, OptionError
from ge.core.files import check_output_directory, published
from ge.core.options import OPTION

if TYPE_CHECKING:
    import numpy as np

    from ge.session import Result
    from ge.sim.config import RunConfig

log = logging.getLogger("ge")
console = Console(soft_wrap=True)  # long lines stay whole in logs and pipes

TOP_OPS = 10
TOP_OPS_WIDTH = 140
"""Columns the top-ops table is printed in at least: a name and eight figures."""


def _run_option(name: str, *spellings: str):
    """A typer option whose help is the option table's doc."""
    return typer.Option(*spellings, help=OPTION[name].doc)


def run(
    model: Annotated[Path | None, typer.Argument(help="A .om model (from ge atc); none with --instances.", show_default=False)] = None,
    inputs: Annotated[
        list[str] | None,
        typer.Option("--input", help="name=FILE.npy for each graph input (FILE.npy alone for a single-input model)."),
    ] = None,
    output: Annotated[Path | None, typer.Option("--output", help="Directory for <output name>.npy per output.")] = None,
    profile: Annotated[Path | None, typer.Option("--profile", help="Directory for op_summary.csv and trace.json.")] = None,
    profile_level: Annotated[str, _run_option("profile_level", "--profile-level", "--profile_level")] = OPTION["profile_level"].default,  # type: ignore[assignment]
    timing_only: Annotated[bool, _run_option("timing_only", "--timing-only", "--timing_only")] = OPTION["timing_only"].default,  # type: ignore[assignment]
    l2_cache: Annotated[bool, _run_option("l2_cache", "--l2-cache/--no-l2-cache", "--l2_cache/--no_l2_cache")] = OPTION["l2_cache"].default,  # type: ignore[assignment]
    aicore_num: Annotated[int | None, _run_option("aicore_num", "--aicore_num", "--aicore-num")] = OPTION["aicore_num"].default,  # type: ignore[assignment]
    input_fusion_size: Annotated[int, _run_option("input_fusion_size", "--input_fusion_size", "--input-fusion-size")] = OPTION["input_fusion_size"].default,  # type: ignore[assignment]
    seed: Annotated[
        int | None,
        typer.Option("--seed", help="Without --input: run on seeded random inputs instead of zeros.", show_default=False),
    ] = None,
    enable_dump: Annotated[bool, _run_option("enable_dump", "--enable_dump", "--enable-dump")] = OPTION["enable_dump"].default,  # type: ignore[assignment]
    dump_path: Annotated[Path | None, _run_option("dump_path", "--dump_path", "--dump-path")] = None,
    dump_step: Annotated[str | None, _run_option("dump_step", "--dump_step", "--dump-step")] = None,
    dump_mode: Annotated[str, _run_option("dump_mode", "--dump_mode", "--dump-mode")] = OPTION["dump_mode"].default,  # type: ignore[assignment]
    dump_layer: Annotated[str | None, _run_option("dump_layer", "--dump_layer", "--dump-layer")] = None,
    enable_dump_debug: Annotated[bool, _run_option("enable_dump_debug", "--enable_dump_debug", "--enable-dump-debug")] = OPTION["enable_dump_debug"].default,  # type: ignore[assignment]
    dump_debug_path: Annotated[Path | None, _run_option("dump_debug_path", "--dump_debug_path", "--dump-debug-path")] = None,
    dump_debug_mode: Annotated[str, _run_option("dump_debug_mode", "--dump_debug_mode", "--dump-debug-mode")] = OPTION["dump_debug_mode"].default,  # type: ignore[assignment]
    iterations_per_loop: Annotated[int, _run_option("iterations_per_loop", "--iterations_per_loop", "--iterations-per-loop")] = OPTION["iterations_per_loop"].default,  # type: ignore[assignment]
    deterministic: Annotated[int, _run_option("deterministic", "--deterministic")] = OPTION["deterministic"].default,  # type: ignore[assignment]
    op_execute_timeout: Annotated[int | None, _run_option("op_execute_timeout", "--op_execute_timeout", "--op-execute-timeout")] = OPTION["op_execute_timeout"].default,  # type: ignore[assignment]
    op_wait_timeout: Annotated[int, _run_option("op_wait_timeout", "--op_wait_timeout", "--op-wait-timeout")] = OPTION["op_wait_timeout"].default,  # type: ignore[assignment]
    stream_sync_timeout: Annotated[int, _run_option("stream_sync_timeout", "--stream_sync_timeout", "--stream-sync-timeout")] = OPTION["stream_sync_timeout"].default,  # type: ignore[assignment]
    event_sync_timeout: Annotated[int, _run_option("event_sync_timeout", "--event_sync_timeout", "--event-sync-timeout")] = OPTION["event_sync_timeout"].default,  # type: ignore[assignment]
    op_debug_config: Annotated[Path | None, _run_option("op_debug_config", "--op_debug_config", "--op-debug-config")] = None,
    instances: Annotated[
        str | None,
        typer.Option(
            "--instances",
            help="MODEL.om:AICORES pairs joined by ',': run the models at once, each on its own slice of one chip (virtual instances).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run a .om model on the simulated device: outputs, latency, utilisation, profile.

    Without --input the model runs on generated inputs, as Ascend's inference
    benchmark tool does: zeros, or seeded random values with --seed.
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads (see the module docstring)
    from ge.session import Session
    from ge.sim.config import RunConfig

    config = RunConfig(
        input_fusion_size=input_fusion_size, aicore_num=aicore_num, timing_only=timing_only, profile_level=profile_level, l2_cache=l2_cache,
        enable_dump=enable_dump or (dump_path is not None and not enable_dump_debug), dump_path=_text(dump_path),
        dump_step=dump_step, dump_mode=dump_mode, dump_layer=dump_layer, enable_dump_debug=enable_dump_debug,
        dump_debug_path=_text(dump_debug_path), dump_debug_mode=dump_debug_mode, iterations_per_loop=iterations_per_loop,
        deterministic=deterministic, op_execute_timeout=op_execute_timeout, op_wait_timeout=op_wait_timeout,
        stream_sync_timeout=stream_sync_timeout, event_sync_timeout=event_sync_timeout, op_debug_config=_text(op_debug_config),
    )  # fmt: skip
    if instances is not None:
        if model is not None or inputs or output is not None or aicore_num is not None:
            raise OptionError("--instances names its models and their AI cores and runs on generated inputs: give no model, --input, --output or --aicore_num with it")
        if timing_only and seed is not None:
            raise OptionError("--seed makes inputs, which --timing-only does not use (no values are computed)")
        if config.enable_dump or config.enable_dump_debug:
            raise OptionError("--dump_path and --enable_dump_debug dump one model's tasks; run the models one at a time to dump them")
        if iterations_per_loop > 1:
            raise OptionError("--iterations_per_loop loops one model; --instances runs each instance once")
        if profile is not None:
            check_output_directory(profile, "--profile")
        run_instances(parse_instances(instances), config, seed, profile)
        return
    if model is None:
        raise OptionError("give a .om model to run, or --instances; see 'ge run --help'")
    if not model.is_file():
        raise OptionError(f"'{model}': no such model file")
    if timing_only and output is not None:
        raise OptionError("--output has nothing to write with --timing-only (no values are computed)")
    if timing_only and seed is not None:
        raise OptionError("--seed makes inputs, which --timing-only does not use (no values are computed)")
    for directory, flag in ((output, "--output"), (profile, "--profile")):
        if directory is not None:
            check_output_directory(directory, flag)
    session = Session(config)
    runtime = session.runtime(model)
    dynamic = runtime.model.dynamic
    names = [p.name for p in dynamic.inputs] if dynamic is not None else [d.name for d in runtime.model.inputs]
    if dynamic is not None and not runtime.model.gears and not inputs:
        from ge.core.shape_ranges import shown

        raise OptionError(f"'{model}' is a fully dynamic model: give its inputs with --input name=FILE.npy, shapes within {shown(dynamic.ranges)}")
    if inputs:
        if seed is not None:
            raise OptionError("--seed makes inputs for a run without --input; give one or the other")
        feeds = read_inputs(inputs, names)
    elif timing_only:
        feeds = None
    else:
        from ge.core.inputs import describe, generated

        feeds = generated(runtime.input_specs(), seed)
        console.print(f"no --input: running on generated inputs, {describe(seed)}")
    started = time.perf_counter()
    with printing_nonfinite():
        result = session.run(model, feeds)
    wall = time.perf_counter() - started
    written = write_outputs(result.outputs, output) if output is not None else []
    files = result.profile.write(profile) if profile is not None else []
    report(model, result, wall, written, files, timing_only)
    shapes = {d.name: tuple(d.origin_shape) for d in runtime.model.inputs} if feeds is None else {k: tuple(v.shape) for k, v in feeds.items()}
    if runtime.model.gears and not (dynamic is not None and not any(g.shapes == shapes for g in runtime.model.gears)):
        from ge.om.gears import describe, pick

        index = pick(runtime.model.gears, shapes)
        console.print(
            f"gear {index} of {len(runtime.model.gears)} ran: {describe(runtime.model.gears[index].shapes)} "
            "(the device's Case switched to it on the gear-index input)",
            soft_wrap=True,
        )
    elif dynamic is not None:
        kernels = result.profile.kernels() + result.profile.aicpu_kernels()
        console.print(
            f"the dynamic graph ran for {'; '.join(f'{k}{list(v)}' for k, v in shapes.items())}: built and tiled on the host for these shapes; "
            f"{len(kernels)} kernel ops tiled and launched from the host, {sum(r.host_us for r in kernels):.1f} us "
            f"(per op: op_summary.csv's host_us), every other task launched from the host too",
            soft_wrap=True,
        )
    report_dumps(config, result)


@contextmanager
def printing_nonfinite() -> Iterator[None]:
    """The session's `NonFiniteWarning` as a `ge: warning:` line (others as Python shows them)."""
    from ge.sim.dump import NonFiniteWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        if issubclass(w.category, NonFiniteWarning):
            log.warning("%s", w.message)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def options_help() -> str:
    """Every run option, from the table: those without a flag above are Python-only."""
    from ge.core.options import RUN, help_lines

    note = "Run options (RunConfig; those not among the flags above are set from Python, ge.RunConfig(name=value)):"
    return "\n\n".join([note, *help_lines(RUN)])


def _text(path: Path | None) -> str | None:
    return None if path is None else str(path)


def report_dumps(config: RunConfig, result: Result) -> None:
    """Where the run's dumps went (the overflow warning itself comes from the session)."""
    if config.enable_dump:
        console.print(f"wrote the dump to {Path(config.dump_path) / '0'} (manifest.json lists its tensors; compare with 'ge compare')")  # type: ignore[arg-type]
    if config.enable_dump_debug:
        folder = Path(config.dump_debug_path or config.dump_path) / "0"  # type: ignore[arg-type]
        found = f"{len(result.overflows)} kernel tasks turned finite inputs into inf/NaN" if result.overflows else "no overflow"
        console.print(f"overflow detection: {found}; wrote {folder / 'manifest.json'}")


def parse_instances(text: str) -> list[tuple[Path, int]]:
    """[(model file, AI cores)] from `A.om:4,B.om:4`."""
    pairs = []
    for item in text.split(","):
        path, colon, cores = item.strip().rpartition(":")
        if not colon or not path or not cores.strip().isdigit():
            raise OptionError(f"--instances '{text}' is not allowed: '{item.strip()}' is not MODEL.om:AICORES; use pairs joined by ','")
        if not Path(path).is_file():
            raise OptionError(f"--instances: '{path}': no such model file")
        pairs.append((Path(path), int(cores)))
    return pairs


def run_instances(pairs: list[tuple[Path, int]], config: RunConfig, seed: int | None, profile: Path | None) -> None:
    """Run the models side by side on their slices, print the table, write the profile."""
    from ge.core.inputs import describe, generated
    from ge.om import read
    from ge.sim.chip import run_tenants
    from ge.sim.runtime import input_specs

    models = [read(path) for path, _ in pairs]
    feeds = [None] * len(models)
    if not config.timing_only:
        feeds = [generated(input_specs(m), seed) for m in models]
        console.print(f"running on generated inputs, {describe(seed)}")
    started = time.perf_counter()
    chip = run_tenants(models, [n for _, n in pairs], feeds, config, [str(path) for path, _ in pairs])
    wall = time.perf_counter() - started
    mode = "timing only" if config.timing_only else "with numerics"
    console.print(f"{len(pairs)} virtual instances on {chip.soc}, sharing its GM bandwidth, {mode}, simulated in {wall:.2f} s")
    table = Table(title="latency alone on the slice and shared; throughput shared, at the model's batch", title_justify="left")
    columns = ("#", "model", "AI cores", "alone us", "shared us", "slowdown", "samples/s", "batch")
    if not config.timing_only:
        columns += ("outputs as alone",)
    for column in columns:
        table.add_column(column, justify="left" if column in ("model", "outputs as alone") else "right", no_wrap=True)
    for i, t in enumerate(chip.tenants):
        cells = [str(i), t.name, _slice(t.shared.cores), f"{t.latency_alone_us:,.1f}", f"{t.latency_us:,.1f}",
                 f"{t.slowdown:.2f}x", f"{t.throughput:,.1f}", str(t.shared.batch)]  # fmt: skip
        if not config.timing_only:
            cells.append("yes" if t.outputs_match else "NO")
        table.add_row(*cells)
    wide = 110 + max(len(t.name) for t in chip.tenants)
    Console(width=max(console.width, wide)).print(table)  # cut to a pipe's 80 columns, its figures would be lost
    for path in chip.write(profile) if profile is not None else []:
        console.print(f"wrote {path}")
    for t in chip.tenants:
        if not t.outputs_match:
            raise ModelError(f"{t.name} computed other outputs beside the other instances than alone; the numerics must not depend on the cores")


def _slice(cores: dict[str, int]) -> str:
    """`4` or `4 (+3 vector)`."""
    vector = cores.get("VectorCore", 0)
    return f"{cores['AiCore']} (+{vector} vector)" if vector else str(cores["AiCore"])


def read_inputs(items: list[str], names: list[str]) -> dict[str, np.ndarray]:
    """{input name: array} from `name=FILE.npy` arguments."""
    import numpy as np

    feeds: dict[str, np.ndarray] = {}
    for item in items:
        name, eq, path = item.partition("=")
        if not eq:
            if len(names) != 1:
                raise InputError(f"--input {item}: the model has {len(names)} inputs ({', '.join(names)}); use --input name=FILE.npy")
            name, path = names[0], item
        if name in feeds:
            raise InputError(f"--input {name} is given twice")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            raise InputError(f"--input {name}: no such file '{path}'") from None
        except (ValueError, OSError) as e:
            raise InputError(f"--input {name}: '{path}' is not a .npy array ({e})") from None
    return feeds


def write_outputs(outputs: dict[str, np.ndarray], directory: Path) -> list[str]:
    """`<name>.npy` per output in `directory` (made if missing)."""
    import numpy as np

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, value in outputs.items():
        path = directory / (name.replace("/", "_").replace(os.sep, "_").replace(":", "_") + ".npy")
        with published(path, "wb", what="output array") as f:
            np.save(f, value)
        written.append(str(path))
    return written


def report(model: Path, result: Result, wall: float, written: list[str], files: list[str], timing_only: bool) -> None:
    p = result.profile
    use = p.utilisation()
    cores = ", ".join(f"{n} {'AI' if kind == 'AiCore' else 'vector'} cores" for kind, n in p.cores.items() if n)
    host = result.latency_us - p.device_us
    mode = "timing only" if timing_only else "with numerics"
    console.print(f"[bold]{model}[/] on {p.soc.name} ({cores}), {mode}, simulated in {wall:.2f} s")
    if result.iterations > 1:
        console.print(
            f"{result.iterations} iterations in {result.total_us:,.1f} us, the host's launch and synchronisation once: "
            f"per iteration latency [bold]{result.latency_us:,.1f} us[/], throughput [bold]{p.batch / (result.latency_us * 1e-6):,.1f}[/] samples/s at batch {p.batch}"
        )
    else:
        console.print(
            f"latency [bold]{result.latency_us:,.1f} us[/] (device {p.device_us:,.1f} us + host {host:.1f} us), "
            f"throughput [bold]{p.throughput:,.1f}[/] samples/s at batch {p.batch}"
        )
    console.print(
        f"utilisation: cube {use['cube']:.1%}, vector {use['vector']:.1%}, GM bandwidth {use['memory']:.1%}; "
        f"cube {p.cube_tflops():.2f} TFLOPS ({p.cube_peak_fraction():.1%} of the chip's peak over the latency)"
    )
    gm, l2 = p.traffic()
    cache = f"L2 hits {l2 / 1e6:,.1f} MB ({use['l2']:.1%} of the L2 bandwidth)" if p.l2_cache else "L2 cache off"
    console.print(f"kernel traffic: GM {gm / 1e6:,.1f} MB, {cache}; compulsory {p.compulsory_bytes() / 1e6:,.1f} MB")
    waited = sum(r.wait for r in p.launches()) / p.clock_mhz
    console.print(
        f"kernels take {p.roofline_ratio():.1f} x their roofline bound (cube, vector, GM or L2 bandwidth at the chip's peak); "
        f"their launches wait {waited:,.1f} us besides"
    )
    aicpu = len(p.aicpu_kernels())
    table = Table(title=f"top ops by time ({len(p.kernels()) + aicpu} kernel tasks, {aicpu} on AI CPU)", title_justify="left")
    numbers = ("launches", "time us", "share", "GM MB", "L2 MB", "x bound")
    for column in ("op", "type", "launches", "time us", "share", "GM MB", "L2 MB", "bound", "x bound"):
        table.add_column(column, justify="right" if column in numbers else "left")
    for op in p.top_ops(TOP_OPS):
        table.add_row(
            _short(op.name), op.op_type, str(op.launches), f"{op.us:,.1f}", f"{op.us / p.device_us:.1%}",
            f"{op.gm_bytes / 1e6:,.2f}", f"{op.l2_bytes / 1e6:,.2f}", op.bound, f"{op.over:.1f}",
        )
    Console(width=max(console.width, TOP_OPS_WIDTH)).print(table)  # cut to a pipe's 80 columns, its figures would be lost
    for path in written:
        console.print(f"wrote {path}")
    for path in files:
        console.print(f"wrote {path}")


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."
