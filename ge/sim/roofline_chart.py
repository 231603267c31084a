"""The roofline chart of a run, `roofline.png`: what a performance engineer looks at first.

Every AI Core kernel task with work and bytes is a point: its arithmetic intensity
(operations over its compulsory bytes, `Roofline`) against the throughput it
achieved (operations over its time). Above them the chip's roofs: the cube's peak
(fp16), the vector unit's (fp16 elements), and the GM and L2 bandwidth lines
(intensity times bandwidth) that meet them. A point's colour is the unit of its
bound; the kernels that lose the most time against their bound are labelled.

matplotlib is an optional extra (`pip install 'ascend-ge[plot]'`): without it,
`write_chart` writes nothing (the profile says so). It is imported only here and
only when a chart is written, and draws on its own Agg canvas (no pyplot state).
"""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING

from ge.sim import timing
from ge.sim.l2 import chip_l2_bytes_per_cycle

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ge.sim.profile import OpRow, Profile

LABELLED = 6
"""The kernels labelled on the chart: those losing the most time against their bound."""
LABEL_SIZE = 7
LABEL_GAP = 10.0
"""Points between the centres of two labels, one above the other (a line of LABEL_SIZE text and a little space)."""
COLOURS = {"cube": "tab:red", "vector": "tab:blue", "memory": "tab:green", "l2": "tab:purple"}


def available() -> bool:
    """Whether matplotlib can be imported."""
    return importlib.util.find_spec("matplotlib") is not None


def roofs(profile: Profile) -> dict[str, float]:
    """The chip's peaks: `cube` and `vector` in operations per second, `gm` and `l2` in bytes per second."""
    soc, hz = profile.soc, profile.clock_mhz * 1e6
    vector_units = soc.vector_cores if soc.split_cores else soc.ai_cores
    return {
        "cube": 2 * soc.cube_shape("float16").macs * soc.ai_cores * hz,
        "vector": soc.vector_bytes_per_cycle / 2 * vector_units * hz,
        "gm": timing.chip_gm_bytes_per_cycle(soc) * hz,
        "l2": chip_l2_bytes_per_cycle(soc) * hz,
    }


def points(profile: Profile) -> list[tuple[OpRow, float, float]]:
    """(row, intensity in operations per byte, achieved operations per second) of each
    AI Core kernel task that has both operations and compulsory bytes."""
    hz = profile.clock_mhz * 1e6
    out = []
    for row in profile.rows():
        r, line = row.record, row.roofline
        if r.kind != "KERNEL" or line.flops <= 0 or line.compulsory_bytes <= 0 or r.duration <= 0:
            continue
        out.append((row, line.flops / line.compulsory_bytes, line.flops / (r.duration / hz)))
    return out


def write_chart(profile: Profile, path: str | os.PathLike) -> bool:
    """Write the chart to `path` (PNG); False, writing nothing, without matplotlib."""
    if not available():
        return False
    figure(profile).savefig(path)
    return True


def figure(profile: Profile) -> Figure:
    """The chart as a matplotlib Figure on its own Agg canvas (matplotlib must be importable)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    peaks = roofs(profile)
    dots = points(profile)
    low = min([i for _, i, _ in dots] + [0.1]) / 2
    high = max([i for _, i, _ in dots] + [peaks["cube"] / peaks["gm"]]) * 4
    fig = Figure(figsize=(10, 6.5), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    xs = [low, high]
    for level, style in (("gm", "-"), ("l2", "--")):
        ax.plot(xs, [x * peaks[level] for x in xs], style, color="grey", lw=1, label=f"{level.upper()} {peaks[level] / 1e9:,.0f} GB/s")
    for unit, style in (("cube", "-"), ("vector", ":")):
        ax.axhline(peaks[unit], ls=style, color="black", lw=1, label=f"{unit} peak {peaks[unit] / 1e12:,.1f} T ops/s")
    for unit, colour in COLOURS.items():
        mine = [(i, y) for row, i, y in dots if row.roofline.unit == unit]
        if mine:
            ax.scatter([i for i, _ in mine], [y for _, y in mine], s=18, color=colour, label=f"bound: {unit}", zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(top=peaks["cube"] * 3)
    ax.set_xlabel("arithmetic intensity (operations per compulsory byte)")
    ax.set_ylabel("achieved operations per second")
    cache = "L2 on" if profile.l2_cache else "L2 off"
    ax.set_title(f"roofline of {len(dots)} kernel tasks on {profile.soc.name} ({cache}); labelled: the most time over their bound")
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    _label_worst(ax, dots)
    return fig


def _label_worst(ax: Axes, dots: list[tuple[OpRow, float, float]]) -> None:
    """Label the kernels losing the most time against their bound, each to the right of
    its point and, from the highest down, at least `LABEL_GAP` points below the label
    above it: labels of kernels at one place (a kernel launched several times, or
    neighbours) stack instead of printing over each other."""
    to_points = 72 / ax.figure.dpi
    lost = sorted(dots, key=lambda d: d[0].roofline.cycles - d[0].record.duration)[:LABELLED]
    above = float("inf")
    for row, i, y in sorted(lost, key=lambda d: -d[2]):
        at = ax.transData.transform((i, y))[1] * to_points  # the point's height on the page, in points
        height = min(at, above - LABEL_GAP)
        above = height
        ax.annotate(
            _label(row), (i, y), fontsize=LABEL_SIZE, xytext=(12, height - at), textcoords="offset points", va="center",
            arrowprops={"arrowstyle": "-", "lw": 0.5, "relpos": (0, 0.5)},  # the leader line ends at the label's left
        )


def _label(row: OpRow) -> str:
    """The kernel's first node, its path's end kept (where names differ), and its time over its bound."""
    name = row.record.name.split("+")[0]
    short = name if len(name) <= 32 else "..." + name[-29:]
    return f"{short} ({row.roofline.ratio(row.record.duration):.1f}x)"
