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
    _, trace_path = profile.write(tmp_path)
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
