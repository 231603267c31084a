"""The tune bank (`ge.aoe.bank`): where it lives, whole entries only, bad entries ignored."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os

import pytest

from ge.aoe import bank as banks
from ge.core.errors import OptionError

CUBE = {"batch_dim": 1, "m_dim": 4, "n_dim": 2, "m0": 64, "n0": 32, "k0": 64, "k1": 128, "b_resident": 1}


def entry(key: str = "version\nAscend310P3\nConv2D", tiling: dict[str, int] | None = None) -> banks.Entry:
    return banks.Entry(key, "cube", ("Conv2D", "Relu"), tiling or CUBE, 1000.0, 800.0)


def test_root_follows_cann_precedence(tmp_path):
    home = os.path.expanduser("~")
    assert banks.default_root({"TUNE_BANK_PATH": "/x", "ASCEND_CACHE_PATH": "/y"}) == "/x"
    assert banks.default_root({"ASCEND_CACHE_PATH": "/y"}) == os.path.join("/y", "aoe_data")
    assert banks.default_root({}) == os.path.join(home, "Ascend", "latest", "data", "aoe", "custom")


def test_entries_are_per_soc_and_kind(tmp_path):
    bank = banks.Bank(str(tmp_path), "Ascend310P3")
    path = bank.store(entry())
    assert os.path.dirname(path) == str(tmp_path / "Ascend310P3" / "cube")
    assert banks.Bank(str(tmp_path), "Ascend310P3").lookup(entry().key) == CUBE
    assert banks.Bank(str(tmp_path), "Ascend910B1").lookup(entry().key) is None
    assert banks.for_compile("Ascend310P3", {"TUNE_BANK_PATH": str(tmp_path)}) is not None
    assert banks.for_compile("Ascend910B1", {"TUNE_BANK_PATH": str(tmp_path)}) is None


def test_lookups_are_counted_for_the_summary(tmp_path):
    banks.Bank(str(tmp_path), "Ascend310P3").store(entry())
    bank = banks.Bank(str(tmp_path), "Ascend310P3")
    bank.lookup(entry().key)
    bank.lookup("another kernel")
    assert bank.report() == {"path": str(tmp_path / "Ascend310P3"), "kernels": 2, "tuned": 1}


@pytest.mark.parametrize(
    "spoil",
    [
        lambda text: text[: len(text) // 2],  # truncated
        lambda text: text.replace('"m0": 64', '"m0": 48'),  # edited: the digest no longer checks
        lambda text: "not json at all",
        lambda text: json.dumps({**json.loads(text), "format": 99}),
    ],
    ids=["truncated", "edited", "not-json", "other-format"],
)
def test_a_bad_entry_is_ignored_with_an_info_line(tmp_path, caplog, spoil):
    bank = banks.Bank(str(tmp_path), "Ascend310P3")
    path = bank.store(entry())
    with open(path, encoding="utf-8") as f:
        text = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(spoil(text))
    with caplog.at_level(logging.INFO, logger="ge"):
        assert banks.Bank(str(tmp_path), "Ascend310P3").lookup(entry().key) is None
    assert any("tune bank: ignoring" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)
    assert os.path.exists(path)  # left for its owner


def test_an_entry_of_another_key_is_not_loaded(tmp_path, caplog):
    bank = banks.Bank(str(tmp_path), "Ascend310P3")
    other = entry("another compiler version")
    path = bank.store(other)
    os.replace(path, bank.path(entry().key, "cube"))  # as a hash collision would place it
    with caplog.at_level(logging.INFO, logger="ge"):
        assert banks.Bank(str(tmp_path), "Ascend310P3").lookup(entry().key) is None
    assert any("another key" in r.getMessage() for r in caplog.records)


def test_a_tiling_of_the_wrong_shape_is_not_loaded(tmp_path):
    bank = banks.Bank(str(tmp_path), "Ascend310P3")
    bank.store(banks.Entry("k", "cube", ("MatMulV2",), {"block_dim": 2, "tile_rows": 8}, 1.0, 1.0))
    assert banks.Bank(str(tmp_path), "Ascend310P3").lookup("k") is None


def test_tuning_needs_an_existing_writable_tune_bank_path(tmp_path):
    with pytest.raises(OptionError, match="TUNE_BANK_PATH .* is not a directory"):
        banks.for_tuning("Ascend310P3", environ={"TUNE_BANK_PATH": str(tmp_path / "missing")})
    assert banks.for_tuning("Ascend310P3", environ={"TUNE_BANK_PATH": str(tmp_path)}).folder == str(tmp_path / "Ascend310P3")


def _write_many(root: str, writer: int) -> None:
    bank = banks.Bank(root, "Ascend310P3")
    for i in range(40):
        bank.store(entry("shared key", {**CUBE, "m0": 16 * (1 + (writer + i) % 4)}))  # every writer, one entry
        bank.store(entry(f"key {writer} {i % 5}"))


def test_concurrent_writers_leave_only_whole_entries(tmp_path):
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_write_many, args=(str(tmp_path), w)) for w in range(4)]
    for p in writers:
        p.start()
    for p in writers:
        p.join()
    assert all(p.exitcode == 0 for p in writers)
    folder = tmp_path / "Ascend310P3" / "cube"
    assert not [n for n in os.listdir(folder) if n.endswith(".tmp")]
    bank = banks.Bank(str(tmp_path), "Ascend310P3")
    shared = bank.entry("shared key")
    assert shared is not None and shared.tiling["m0"] in (16, 32, 48, 64)
    assert all(bank.entry(f"key {w} {i}") is not None for w in range(4) for i in range(5))
    assert len(bank) == 1 + 4 * 5
