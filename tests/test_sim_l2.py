"""The simulator's L2 cache (`ge.sim.l2`): a consumer re-reads from L2 what its
producer wrote when it fits and from GM when it does not; the LRU keeps and evicts
as it should; with l2_cache off the run is the GM-only run; the numerics never
change; the roofline per level holds; the roofline chart is written."""

from __future__ import annotations

import csv
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ge
from ge.core import soc as socs
from ge.session import Session
from ge.sim import roofline_chart, timing
from ge.sim.config import RunConfig
from ge.sim.l2 import L2Cache
from ge.sim.profile import CSV_COLUMNS, Profile
from ge.sim.runtime import Runtime


def chain(tmp_path, m: int, k: int, n: int, p: int, name: str) -> str:
    """y = a @ b ('produce'), z = y @ c ('consume'): two cube kernels, y between them."""
    f16 = TensorProto.FLOAT16
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"], name="produce"), helper.make_node("MatMul", ["y", "c"], ["z"], name="consume")],
        name,
        [helper.make_tensor_value_info(x, f16, s) for x, s in (("a", [m, k]), ("b", [k, n]), ("c", [n, p]))],
        [helper.make_tensor_value_info("z", f16, [m, p])],
    )
    path = tmp_path / f"{name}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


def records(profile: Profile) -> dict[str, object]:
    """The kernel tasks by their first node's name (a fused kernel's name joins its nodes' with '+')."""
    return {r.name.split("+")[0]: r for r in profile.kernels()}


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> ge.Model:
    """y is 256 x 512 float16 (256 KB): it fits the 310P3's 16 MB L2."""
    return ge.compile(chain(tmp_path_factory.mktemp("l2"), 256, 128, 512, 64, "small"), {"soc_version": "Ascend310P3"})


@pytest.fixture(scope="module")
def large(tmp_path_factory) -> ge.Model:
    """y is 4096 x 2048 float16 (16 MB): twice the Ascend310's 8 MB L2."""
    return ge.compile(chain(tmp_path_factory.mktemp("l2"), 4096, 64, 2048, 16, "large"), {"soc_version": "Ascend310"})


def timed(model: ge.Model, l2_cache: bool = True) -> Profile:
    return Session(RunConfig(timing_only=True, l2_cache=l2_cache)).run(model).profile


# ------------------------------------------------------------ producer, consumer


def test_a_tensor_that_fits_is_reread_from_l2(small: ge.Model) -> None:
    y = 256 * 512 * 2
    profile = timed(small)
    consume = records(profile)["consume"]
    assert consume.l2_resident >= y  # all of y was in L2 when the consumer started
    assert consume.l2_hits >= y  # so each of its reads of y was a hit
    first = profile.kernels()[0]
    assert first.l2_resident == first.l2_hits == 0  # a run starts with an empty L2; host copies do not fill it


def test_a_tensor_larger_than_l2_is_reread_from_gm(large: ge.Model) -> None:
    y = 4096 * 2048 * 2
    assert y > socs.load("Ascend310").l2_bytes
    consume = records(timed(large))["consume"]
    inputs = consume.nbytes - 4096 * 16 * 2
    assert consume.l2_resident <= inputs - y  # none of y: it streamed through L2
    gm_read = consume.block_dim * consume.block_timing.gm_read
    assert consume.l2_hits < gm_read - y  # at least y's first read came from GM


def test_l2_hits_leave_the_gm_ledger(small: ge.Model) -> None:
    on, off = timed(small), timed(small, l2_cache=False)
    gm_on, l2_on = on.traffic()
    gm_off, l2_off = off.traffic()
    assert l2_off == 0 and l2_on > 0
    assert gm_on + l2_on == pytest.approx(gm_off)  # the same bytes, split by level
    assert on.device_cycles <= off.device_cycles


# ------------------------------------------------------------- switched off


def test_l2_off_is_the_gm_only_run(small: ge.Model) -> None:
    """l2_cache=False runs exactly as a run started without an L2 (the simulator before it)."""
    off = timed(small, l2_cache=False)
    runtime = Runtime(small, RunConfig(timing_only=True))
    execution = runtime.start(None, timing.GmLedger(timing.chip_gm_bytes_per_cycle(runtime.soc)))
    while execution.next_time() is not None:
        execution.step()
    plain = execution.finish().profile
    assert [(r.name, r.start, r.end) for r in off.records] == [(r.name, r.start, r.end) for r in plain.records]
    assert all(r.l2_hits == 0 and r.l2_resident == 0 for r in off.kernels())
    assert not off.l2_cache


def test_the_numerics_do_not_depend_on_l2(small: ge.Model) -> None:
    rng = np.random.default_rng(0)
    feeds = {x: rng.standard_normal(s).astype(np.float16) for x, s in (("a", (256, 128)), ("b", (128, 512)), ("c", (512, 64)))}
    on = Session(RunConfig(l2_cache=True)).run(small, feeds).outputs["z"]
    off = Session(RunConfig(l2_cache=False)).run(small, feeds).outputs["z"]
    assert np.array_equal(on, off)


# --------------------------------------------------------------- the cache


def test_the_least_recently_used_range_leaves_first() -> None:
    cache = L2Cache(1000)
    cache.kernel([(0, 400)], [(400, 400)], 400)  # reads [0, 400), writes [400, 800)
    cache.kernel([(0, 400)], [], 400)  # [0, 400) used again: [400, 800) is now the oldest
    cache.touch(2000, 2400)
    assert cache.resident(0, 400) == 400
    assert cache.resident(400, 800) == 0
    assert cache.held == 800


def test_rereads_hit_when_the_working_set_or_the_reuse_distance_fits() -> None:
    cache = L2Cache(1000)
    fits = cache.kernel([(0, 300)], [(300, 100)], 900)  # read three times: twice from L2
    assert fits.hits == pytest.approx(600) and fits.resident == 0
    cache = L2Cache(1000)
    thrashes = cache.kernel([(0, 900)], [(900, 600)], 2700)  # 200 bytes written between passes: 1,100 apart
    assert thrashes.hits == 0
    cache = L2Cache(1000)
    hot = cache.kernel([(0, 200), (200, 1500)], [(1700, 500)], 10 * 200 + 1500, input_reads=[2000, 1500])
    assert hot.hits == pytest.approx(1800)  # a weight read per tile while 2,000 bytes stream past in ten passes


def test_each_input_is_charged_its_own_reads() -> None:
    """A weight read four times and an activation once: only the weight's re-reads hit."""
    cache = L2Cache(1000)
    served = cache.kernel([(0, 100), (100, 200)], [(300, 100)], 4 * 100 + 200, input_reads=[400, 200])
    assert served.hits == pytest.approx(300)


def test_the_program_says_which_argument_each_read_is_from(small: ge.Model) -> None:
    profile = timed(small)
    for r in profile.kernels():
        t, task = r.block_timing, small.tasks[r.index]
        assert sum(t.arg_reads) == pytest.approx(t.gm_read)
        assert 0 < len(t.arg_reads) <= len(task.inputs) + len(task.outputs) + len(task.workspace)
    produce = records(profile)["produce"].block_timing
    assert produce.arg_reads[0] > 0 and produce.arg_reads[1] > 0  # it reads both its operands


def test_a_range_larger_than_l2_flushes_it() -> None:
    cache = L2Cache(1000)
    cache.touch(0, 500)
    cache.touch(1000, 2500)
    assert cache.held == 0 and cache.resident(0, 2500) == 0


def test_a_partly_overwritten_range_keeps_the_rest() -> None:
    cache = L2Cache(1000)
    cache.touch(0, 600)
    cache.touch(200, 300)
    assert cache.resident(0, 600) == 600 and cache.held == 600


# ------------------------------------------------------------- the roofline


def test_the_roofline_counts_each_level_and_holds(small: ge.Model) -> None:
    profile = timed(small)
    rows = [dict(zip(CSV_COLUMNS, row)) for row in profile.csv_rows()]
    by_name = {row["op_name"].split("+")[0]: row for row in rows}
    consume = records(profile)["consume"]
    assert int(by_name["consume"]["l2_bytes"]) == int(consume.l2_hits) > 0
    assert 0 < int(by_name["consume"]["compulsory_l2_bytes"]) <= int(by_name["consume"]["compulsory_bytes"])
    assert all(float(row["x_bound"]) >= 1.0 for row in rows)
    for row in profile.rows():
        assert row.roofline.ratio(row.record.duration) >= 1.0


# ----------------------------------------------------------------- the chart


def test_the_profile_writes_the_roofline_chart(small: ge.Model, tmp_path) -> None:
    pytest.importorskip("matplotlib")
    written = timed(small).write(tmp_path)
    chart = tmp_path / "roofline.png"
    assert str(chart) in written
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_labels_of_kernels_at_one_place_do_not_print_over_each_other(tmp_path) -> None:
    """Four launches of one matmul shape sit at about one point: their labels stack
    below each other, none over another."""
    pytest.importorskip("matplotlib")
    f16, n = TensorProto.FLOAT16, 256
    weights = [helper.make_tensor(f"w{i}", f16, [n, n], np.full(n * n, 0.01, np.float16).view(np.uint16).tolist(), raw=False) for i in range(4)]
    nodes = [helper.make_node("MatMul", [f"x{i}", f"w{i}"], [f"x{i + 1}"], name=f"step{i}") for i in range(4)]
    graph = helper.make_graph(nodes, "steps", [helper.make_tensor_value_info("x0", f16, [n, n])], [helper.make_tensor_value_info("x4", f16, [n, n])], weights)
    path = tmp_path / "steps.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    fig = roofline_chart.figure(timed(ge.compile(str(path), {"soc_version": "Ascend310P3"})))
    fig.canvas.draw()
    from matplotlib.text import Text

    boxes = [Text.get_window_extent(label) for label in fig.axes[0].texts]  # the text alone, not its leader line
    assert len(boxes) == 4
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_without_matplotlib_the_chart_is_skipped_and_said_so(small: ge.Model, tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.setattr(roofline_chart, "available", lambda: False)
    with caplog.at_level(logging.WARNING, logger="ge"):
        written = timed(small).write(tmp_path)
    assert not (tmp_path / "roofline.png").exists()
    assert [p.rsplit("/", 1)[-1] for p in written] == ["op_summary.csv", "trace.json"]
    assert "roofline.png skipped: matplotlib is not installed" in caplog.text


# -------------------------------------------------------------- the command


@pytest.mark.slow
def test_ge_run_turns_the_l2_off_and_shows_both_levels(small: ge.Model, tmp_path) -> None:
    """`ge run --no-l2-cache`: no L2 bytes anywhere; by default the summary and op_summary.csv show them."""
    om = tmp_path / "small.om"
    small.save(om)
    ge_bin = str(Path(sys.executable).parent / "ge")
    for flag, cache in ((), True), (("--no-l2-cache",), False):
        prof = tmp_path / f"prof_{cache}"
        done = subprocess.run([ge_bin, "run", str(om), "--timing-only", *flag, "--profile", str(prof)], check=False, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert ("L2 hits" in done.stdout) == cache and ("L2 cache off" in done.stdout) != cache
        with open(prof / "op_summary.csv") as f:
            l2 = [int(row["l2_bytes"]) for row in csv.DictReader(f)]
        assert (sum(l2) > 0) == cache
