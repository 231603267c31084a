"""The profile's files: trace.json's slices on one track never overlap, and every
kernel's roofline bound is a true lower bound on its simulated time."""

from __future__ import annotations

import json
from collections import defaultdict
from decimal import Decimal

import pytest

import ge
from ge.models import DEMO_MODELS
from ge.session import Session
from ge.sim.profile import CSV_COLUMNS
from ge.sim.config import RunConfig

SOCS = ("Ascend310P3", "Ascend910B1")


@pytest.fixture(scope="module", params=[(d, s) for d in DEMO_MODELS for s in SOCS], ids=lambda p: f"{p[0].name}-{p[1]}")
def profile(request):
    demo, soc = request.param
    module, _ = ge.load_onnx(demo.path)
    model = ge.compile(module, {"soc_version": soc})
    return Session(RunConfig(timing_only=True, profile_level="pipe")).run(model).profile


def test_slices_on_a_track_never_overlap(profile, tmp_path) -> None:
    """Read back as written (decimals, not floats) and as Perfetto reads it (whole ns)."""
    trace_path = profile.write(tmp_path)[1]
    with open(trace_path) as f:
        events = json.load(f, parse_float=Decimal)["traceEvents"]
    tracks: dict[tuple[int, int], list[tuple[Decimal, Decimal]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            tracks[e["pid"], e["tid"]].append((Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(e["dur"])))
    assert any(e.get("cat") == "pipe" for e in events)
    for track, slices in tracks.items():
        slices.sort()
        for (_, end), (start, _) in zip(slices, slices[1:]):
            assert end <= start, track
            assert round(end * 1000) <= round(start * 1000), track


def assert_bounds_hold(p) -> None:
    """No kernel beats its roofline: the bound is a true lower bound on its time (a
    kernel at its GM bound reaches it within rounding)."""
    rows = p.rows()
    assert rows
    for row in rows:
        r = row.record
        assert row.roofline.cycles > 0, r.name
        assert row.roofline.ratio(r.duration) >= 1.0 - 1e-9, (r.name, row.roofline)
        assert row.roofline.compulsory_bytes <= r.nbytes
    assert p.roofline_ratio() >= 1.0 - 1e-9
    assert all(top[-1] >= 1.0 - 1e-9 for top in p.top_ops(len(rows)))


def test_no_kernel_beats_its_roofline(profile) -> None:
    assert_bounds_hold(profile)
    cube = [row for row in profile.rows() if row.record.block_timing.cube_blocks > 0]
    assert cube and all(row.roofline.flops > 0 for row in cube)


def test_op_summary_has_the_roofline_columns(profile) -> None:
    by_column = [dict(zip(CSV_COLUMNS, row)) for row in profile.csv_rows()]
    for row, kept in zip(by_column, profile.rows()):
        assert row["roofline_unit"] in ("cube", "vector", "memory", "l2")
        assert float(row["x_bound"]) >= 1.0
        assert int(row["compulsory_bytes"]) == int(kept.roofline.compulsory_bytes)


@pytest.mark.slow
@pytest.mark.parametrize("soc", SOCS)
def test_real_models_never_beat_their_roofline(resnet50_onnx, bert_base_onnx, soc) -> None:
    for path in (resnet50_onnx, bert_base_onnx):
        model = ge.compile(path, {"soc_version": soc, "export_compile_stat": 0})
        assert_bounds_hold(Session(RunConfig(timing_only=True)).run(model).profile)
