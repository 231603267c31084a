"""SoC profiles: every part loads, its numbers are the documented ones, and each has a source."""

from __future__ import annotations

import dataclasses
import json
from math import lcm
from pathlib import Path

import pytest

from ge.core import soc
from ge.core.errors import OptionError
from ge.core.options import CompileOptions

PARTS = ("Ascend310", "Ascend310P3", "Ascend910A", "Ascend910B1")
KB = 1024


def test_names_lists_every_profile() -> None:
    assert soc.names() == tuple(sorted(PARTS))


@pytest.mark.parametrize("name", PARTS)
def test_profile_is_consistent(name: str) -> None:
    p = soc.load(name)
    assert p.name == name
    assert p.ai_cores > 0 and p.clock_mhz > 0 and p.gm_bytes_per_cycle > 0
    assert p.l0a_bytes == p.l0b_bytes == 64 * KB
    assert p.ub_bytes < p.l1_bytes < p.l2_bytes
    assert dict(p.alignment) == {"ub": 32, "l1": 32, "l0a": 512, "l0b": 512, "l0c": 64}
    assert (p.cube_shape("float16").m, p.cube_shape("float16").k, p.cube_shape("float16").n) == (16, 16, 16)
    assert p.cube_shape("int8").k == 32 and p.cube_shape("int4").k == 64
    assert p.vector_bytes_per_cycle == 256
    assert all(0 < n <= p.ai_cores for n in p.virtual_aicore_nums)
    assert list(p.virtual_aicore_nums) == sorted(set(p.virtual_aicore_nums))


@pytest.mark.parametrize("name", PARTS)
def test_every_number_says_where_it_comes_from(name: str) -> None:
    doc = json.loads((Path(soc.__file__).parent / f"{name}.json").read_text())
    numbers = set(doc) - {"name", "source", "split_cores", "vector_cores"}
    assert numbers <= set(doc["source"]), f"no source for {sorted(numbers - set(doc['source']))}"
    assert all(isinstance(text, str) and len(text) > 10 for text in doc["source"].values())


def test_documented_numbers() -> None:
    p310, p310p, p910a, p910b = (soc.load(n) for n in PARTS)
    assert (p310.ai_cores, p310.ub_bytes, p310.l2_bytes) == (2, 248 * KB, 8 * KB * KB)
    assert (p310p.ai_cores, p310p.vector_cores, p310p.clock_mhz, p310p.gm_bytes_per_cycle) == (8, 7, 1060, 17)
    assert (p910a.ai_cores, p910a.event_ids, p910a.l2_bytes) == (32, 4, 32 * KB * KB)
    assert (p910b.ai_cores, p910b.vector_cores, p910b.split_cores) == (24, 48, True)
    assert (p910b.l0c_bytes, p910b.l1_bytes, p910b.ub_bytes, p910b.clock_mhz) == (128 * KB, 512 * KB, 192 * KB, 1850)
    assert [p.event_ids for p in (p310p, p910b)] == [8, 8]
    assert [p.fix_pipe for p in (p310, p310p, p910a, p910b)] == [False, False, False, True]
    assert p310p.virtual_aicore_nums == (1, 2, 4, 8) and lcm(*p310p.virtual_aicore_nums) == 8
    assert p310.virtual_aicore_nums == ()


def test_alignment_rounds_up_per_buffer() -> None:
    p = soc.load("Ascend310P3")
    assert [p.align("ub", n) for n in (0, 1, 32, 33)] == [0, 32, 32, 64]
    assert p.align("l0a", 1) == 512 and p.align("l0c", 65) == 128


def test_profile_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        soc.load("Ascend910A").ub_bytes = 1  # type: ignore[misc]


def test_unknown_part_lists_the_known_ones() -> None:
    with pytest.raises(OptionError, match="unknown soc_version 'Ascend999'.*Ascend310, Ascend310P3, Ascend910A, Ascend910B1"):
        soc.load("Ascend999")
    with pytest.raises(OptionError, match="Ascend910B1"):
        soc.load("../soc/Ascend910B1")


def test_cube_mode_missing_for_dtype() -> None:
    assert soc.load("Ascend910B1").cube_shape("bfloat16").macs == 4096
    with pytest.raises(OptionError, match="no cube mode for bfloat16"):
        soc.load("Ascend310P3").cube_shape("bfloat16")


def test_compile_options_check_soc_version() -> None:
    assert CompileOptions(soc_version="Ascend910B1").soc_version == "Ascend910B1"
    with pytest.raises(OptionError, match="soc_version 'Ascend910' is not allowed; use one of Ascend310, "):
        CompileOptions(soc_version="Ascend910")


def test_device_memory_is_the_usual_cards() -> None:
    """One chip's DDR/HBM as its usual card ships it (sources in each profile)."""
    gib = KB**3
    assert [soc.load(n).device_memory_bytes for n in PARTS] == [8 * gib, 24 * gib, 32 * gib, 64 * gib]
