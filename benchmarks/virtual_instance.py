"""Virtual instances: what `--virtual_type=1` costs and buys, slice by slice.

For each model and SoC, the model is compiled twice, for the whole chip
(`--virtual_type=0`) and for virtual instances (`--virtual_type=1`), and each build
runs (timing only) on every slice size the SoC allows (`SocProfile.virtual_aicore_nums`,
e.g. 1, 2, 4 and 8 of an Ascend310P3's AI cores). The table gives the throughput at
the model's batch on each slice, the speed-up of the virtual build over the
whole-chip build on that slice, and the cost of the virtual build on the full chip,
which the reference warns of (soft-sync ops on one core, idle blocks in kernels with
little work). Each run compiles the models afresh, so the figures are this checkout's.

    .venv/bin/python benchmarks/virtual_instance.py [--only resnet50] [--socs Ascend310P3 Ascend910B1]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

import ge
from ge.core import soc
from ge.session import Session
from ge.sim.config import RunConfig
from ge.testing.real_models import model_path

MODELS = ("resnet50", "bert_base")
GOAL = 0.05
"""The most virtual_type=1 may cost ResNet-50 on the full chip."""

console = Console(width=150)


def compiled(name: str, soc_version: str, virtual_type: int, folder: Path) -> Path:
    """The model's .om for the SoC and build, compiled by this checkout (never a stale copy)."""
    path = folder / f"{name}_{soc_version}_vt{virtual_type}.om"
    started = time.perf_counter()
    model = ge.compile(model_path(name), {"soc_version": soc_version, "virtual_type": virtual_type, "export_compile_stat": 0})
    model.save(path)
    console.print(f"[dim]compiled {path.name} in {time.perf_counter() - started:.1f} s[/]")
    return path


def latency_us(path: Path, cores: int) -> tuple[float, int]:
    """Simulated latency on a slice of `cores` AI cores, and the model's batch."""
    result = Session(RunConfig(aicore_num=cores, timing_only=True)).run(path)
    batch = ge.load_model(path).inputs[0].shape[0]
    return result.latency_us, batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(MODELS), choices=MODELS)
    parser.add_argument("--socs", nargs="*", default=["Ascend310P3"], choices=[s for s in soc.names() if soc.load(s).virtual_aicore_nums])
    args = parser.parse_args()
    for soc_version in args.socs:
        sizes = soc.load(soc_version).virtual_aicore_nums
        table = Table(title=f"{soc_version}: throughput (samples/s) on slices of the AI cores, timing only", title_justify="left")
        table.add_column("model")
        table.add_column("build")
        for size in sizes:
            table.add_column(f"{size} core{'s' * (size > 1)}", justify="right")
        table.add_column("cost on the full chip", justify="right")
        for name in args.only:
            with tempfile.TemporaryDirectory() as folder:
                paths = {vt: compiled(name, soc_version, vt, Path(folder)) for vt in (0, 1)}
                runs = {vt: [latency_us(paths[vt], size) for size in sizes] for vt in (0, 1)}
            for vt in (0, 1):
                cells = []
                for (latency, batch), (whole, _) in zip(runs[vt], runs[0]):
                    gain = "" if vt == 0 else f" ({whole / latency:.2f}x)"
                    cells.append(f"{batch * 1e6 / latency:,.0f}{gain}")
                cost = runs[1][-1][0] / runs[0][-1][0] - 1
                verdict = "" if vt == 0 else f"{cost:+.1%}" + (f" (goal < {GOAL:.0%})" if name == "resnet50" else "")
                table.add_row(name if vt == 0 else "", f"virtual_type={vt}", *cells, verdict)
        console.print(table)


if __name__ == "__main__":
    main()
