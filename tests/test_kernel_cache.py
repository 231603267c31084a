"""The kernel compile cache: hits, force, disable, concurrency, damaged entries,
ageing, op_cache.ini and the environment, the op_debug interactions, a bad folder."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

import ge
from ge import model_cache
from ge.core import kernel_cache
from ge.core.errors import OptionError
from ge.core.kernel_cache import IDLE_SECONDS, KernelCache, Limits, age, read_limits
from ge.models import DEMO_MODELS

TINY = DEMO_MODELS[0].path
BIN = Path(sys.executable).parent


def atc_command(*flags: str) -> list[str]:
    return [str(BIN / "ge"), "atc", f"--model={TINY}", "--framework=5", "--soc_version=Ascend310P3", "--export_compile_stat=0", "--op_compiler_cache_mode=enable", *flags]


def compile_tiny(cache: Path, **flags: object) -> ge.Model:
    """A compile that reads the kernel entries: the model cache (tests/test_options_rest.py)
    would otherwise take the whole build from its entry first."""
    shutil.rmtree(cache / model_cache.FOLDER, ignore_errors=True)
    return ge.compile(TINY, {"op_compiler_cache_dir": str(cache), "export_compile_stat": 0, "op_compiler_cache_mode": "enable", **flags})


def entries(cache: Path) -> list[Path]:
    return sorted((cache / "kernel_cache").glob("*.kernel"))


def distinct(model: ge.Model) -> int:
    """The model's kernels: one per distinct scope, however often it is launched."""
    return model.kernels.count("ascend_kernel.kernel @")


def om_content(model: ge.Model, path: Path) -> dict[str, bytes]:
    """The .om's members, its build statistics of how the compile ran (timings, cache) left out."""
    model.save(path)
    with zipfile.ZipFile(path) as z:
        members = {name: z.read(name) for name in z.namelist()}
    description = json.loads(members["model.json"])
    del description["build"]["timings"], description["build"]["kernel_cache"]
    members["model.json"] = json.dumps(description, sort_keys=True).encode()
    return members


def test_a_second_compile_hits_every_kernel_and_makes_the_same_model(tmp_path: Path) -> None:
    cold = compile_tiny(tmp_path)
    warm = compile_tiny(tmp_path)
    kernels = distinct(cold)
    assert cold.build["kernel_cache"] == {"mode": "enable", "dir": str(tmp_path / "kernel_cache"), "hits": 0, "misses": kernels}
    assert warm.build["kernel_cache"]["hits"] == kernels and warm.build["kernel_cache"]["misses"] == 0
    assert len(entries(tmp_path)) == kernels
    without = compile_tiny(tmp_path, op_compiler_cache_mode="disable")
    reference = om_content(without, tmp_path / "without.om")
    assert om_content(cold, tmp_path / "cold.om") == reference
    assert om_content(warm, tmp_path / "warm.om") == reference
    assert "op_compiler_cache_dir" not in warm.options


def test_force_rebuilds_and_rewrites_every_entry(tmp_path: Path) -> None:
    compile_tiny(tmp_path)
    past = time.time() - 3600
    for entry in entries(tmp_path):
        os.utime(entry, (past, past))
    forced = compile_tiny(tmp_path, op_compiler_cache_mode="force")
    assert forced.build["kernel_cache"]["hits"] == 0
    assert forced.build["kernel_cache"]["misses"] == distinct(forced)
    assert all(entry.stat().st_mtime > past + 60 for entry in entries(tmp_path))


def test_disable_touches_no_directory(tmp_path: Path) -> None:
    model = compile_tiny(tmp_path / "cache", op_compiler_cache_mode="disable")
    assert not (tmp_path / "cache").exists()
    assert model.build["kernel_cache"] == {"mode": "disable", "off": "op_compiler_cache_mode=disable"}


def test_the_default_directory_is_ascend_cache_path_else_home(tmp_path: Path, monkeypatch) -> None:
    assert kernel_cache.default_dir({"ASCEND_CACHE_PATH": "/x/cache"}) == "/x/cache"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert kernel_cache.default_dir({}) == str(tmp_path / "atc_data")
    monkeypatch.setenv("ASCEND_CACHE_PATH", str(tmp_path / "env"))
    model = ge.compile(TINY, {"export_compile_stat": 0, "op_compiler_cache_mode": "enable"})
    assert model.build["kernel_cache"]["dir"] == str(tmp_path / "env" / "kernel_cache")


def test_two_processes_compiling_into_one_cache_both_succeed(tmp_path: Path) -> None:
    runs = [
        subprocess.Popen(
            atc_command(f"--output=m{i}", f"--op_compiler_cache_dir={tmp_path / 'cache'}"),
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(2)
    ]
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
        assert "kernel cache: " in out
    assert not [p for p in (tmp_path / "cache" / "kernel_cache").iterdir() if p.name.endswith(".tmp")]
    again = compile_tiny(tmp_path / "cache")
    assert again.build["kernel_cache"]["misses"] == 0, "an entry written concurrently was not whole"


def test_damaged_entries_are_discarded_and_rebuilt(tmp_path: Path, caplog) -> None:
    reference = om_content(compile_tiny(tmp_path), tmp_path / "first.om")
    truncated, tampered, foreign = entries(tmp_path)[:3]
    truncated.write_bytes(truncated.read_bytes()[:200])
    data = tampered.read_bytes()
    tampered.write_bytes(data[:-20] + b"x" * 20)
    header, _, body = foreign.read_bytes().partition(b"\n")
    fields = json.loads(header)
    fields["key"] = "another kernel"
    foreign.write_bytes(json.dumps(fields).encode() + b"\n" + body)
    with caplog.at_level(logging.INFO, logger="ge"):
        model = compile_tiny(tmp_path)
    assert model.build["kernel_cache"]["misses"] == 3
    messages = "\n".join(r.getMessage() for r in caplog.records)
    assert "does not match its digest" in messages and "another key" in messages
    assert om_content(model, tmp_path / "second.om") == reference
    assert compile_tiny(tmp_path).build["kernel_cache"]["misses"] == 0


def test_an_entry_whose_text_is_not_a_kernel_is_rebuilt(tmp_path: Path) -> None:
    compile_tiny(tmp_path)
    entry = entries(tmp_path)[0]
    fields = json.loads(entry.read_bytes().partition(b"\n")[0])
    cache = KernelCache(str(tmp_path), "enable")
    cache.store(fields["key"], "ascend_kernel.kernel @broken")
    assert compile_tiny(tmp_path).build["kernel_cache"]["misses"] == 1


def make_entries(folder: Path, ages_minutes: list[int], size: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, minutes in enumerate(ages_minutes):
        path = folder / f"{i:02d}.kernel"
        path.write_bytes(b"x" * size)
        stamp = time.time() - minutes * 60
        os.utime(path, (stamp, stamp))
        paths.append(path)
    return paths


def test_ageing_removes_idle_entries_oldest_first_down_to_the_ratio(tmp_path: Path) -> None:
    mb = 2**20
    paths = make_entries(tmp_path, [90, 60, 120, 45, 5, 1], mb // 2)  # 3 MB over a 2 MB limit
    removed = age(str(tmp_path), Limits(max_mb=2, ratio=50))
    assert removed == [str(paths[i]) for i in (2, 0, 1, 3)]  # down to 1 MB: the two recent ones stay
    assert sorted(p.name for p in tmp_path.iterdir()) == ["04.kernel", "05.kernel"]


def test_ageing_spares_entries_used_within_half_an_hour_and_a_cache_under_its_limit(tmp_path: Path) -> None:
    mb = 2**20
    make_entries(tmp_path / "recent", [1, 2, 3, 4], mb)
    assert age(str(tmp_path / "recent"), Limits(max_mb=1, ratio=10)) == []
    make_entries(tmp_path / "small", [600, 600], mb // 4)
    assert age(str(tmp_path / "small"), Limits(max_mb=1, ratio=10)) == []
    assert IDLE_SECONDS == 1800


def test_ageing_removes_temporaries_a_killed_writer_left(tmp_path: Path) -> None:
    stale, fresh = tmp_path / ".a.tmp", tmp_path / ".b.tmp"
    for path, minutes in ((stale, 40), (fresh, 1)):
        path.write_bytes(b"partial")
        os.utime(path, (time.time() - minutes * 60,) * 2)
    assert age(str(tmp_path), Limits()) == []
    assert not stale.exists() and fresh.exists()


def test_a_compile_ages_its_cache_and_minus_one_turns_ageing_and_touching_off(tmp_path: Path) -> None:
    compile_tiny(tmp_path)
    (tmp_path / "op_cache.ini").write_text("[op_compiler_cache]\nmax_op_cache_size=-1\nremain_cache_size_ratio=50\n")
    old = time.time() - 2 * IDLE_SECONDS
    stale = make_entries(tmp_path / "kernel_cache", [120] * 3, 2**20)  # over 1 MB, idle
    for entry in entries(tmp_path):
        os.utime(entry, (old, old))
    compile_tiny(tmp_path)
    assert all(p.exists() for p in stale)
    assert all(entry.stat().st_mtime == old for entry in entries(tmp_path)), "a hit touched an entry with -1"
    (tmp_path / "op_cache.ini").write_text("[op_compiler_cache]\nmax_op_cache_size=1\nremain_cache_size_ratio=50\n")
    model = compile_tiny(tmp_path)
    assert not any(p.exists() for p in stale)
    assert len(entries(tmp_path)) == distinct(model), "the kernels used just now were aged"


@pytest.mark.parametrize(
    ("ini", "env", "expected"),
    [
        (None, {}, Limits(500, 50)),
        ("max_op_cache_size=100\nremain_cache_size_ratio=80", {"ASCEND_MAX_OP_CACHE_SIZE": "7"}, Limits(100, 80)),
        ("max_op_cache_size=100", {"ASCEND_REMAIN_CACHE_SIZE_RATIO": "30"}, Limits(100, 30)),
        ("max_op_cache_size=-1\nremain_cache_size_ratio=20", {}, Limits(-1, 20)),
        ("max_op_cache_size=abc\nremain_cache_size_ratio=80", {"ASCEND_MAX_OP_CACHE_SIZE": "64"}, Limits(64, 50)),
        ("max_op_cache_size=100\nremain_cache_size_ratio=0", {}, Limits(500, 50)),
        ("max_op_cache_size=100\nremain_cache_size_ratio=101", {}, Limits(500, 50)),
        ("max_op_cache_size=-2\nremain_cache_size_ratio=80", {}, Limits(500, 50)),
        (None, {"ASCEND_MAX_OP_CACHE_SIZE": "-1", "ASCEND_REMAIN_CACHE_SIZE_RATIO": "70"}, Limits(-1, 70)),
        (None, {"ASCEND_MAX_OP_CACHE_SIZE": "1.5", "ASCEND_REMAIN_CACHE_SIZE_RATIO": "70"}, Limits(500, 50)),
        ("not an ini", {"ASCEND_MAX_OP_CACHE_SIZE": "9"}, Limits(9, 50)),
    ],
)
def test_limits_come_from_op_cache_ini_else_the_environment_else_the_defaults(tmp_path, ini, env, expected) -> None:
    if ini is not None:
        section = "" if ini == "not an ini" else "[op_compiler_cache]\n"
        (tmp_path / "op_cache.ini").write_text(section + ini + "\n")
    assert read_limits(str(tmp_path), env) == expected


def test_op_cache_ini_is_written_with_the_limits_in_effect_and_never_replaced(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ASCEND_MAX_OP_CACHE_SIZE", "64")
    compile_tiny(tmp_path)
    written = (tmp_path / "op_cache.ini").read_text()
    assert written == "[op_compiler_cache]\nmax_op_cache_size=64\nremain_cache_size_ratio=50\n"
    (tmp_path / "op_cache.ini").write_text("[op_compiler_cache]\nmax_op_cache_size=10\n")
    compile_tiny(tmp_path)
    assert (tmp_path / "op_cache.ini").read_text() == "[op_compiler_cache]\nmax_op_cache_size=10\n"


def test_a_non_zero_op_debug_level_turns_the_cache_off(tmp_path: Path) -> None:
    model = compile_tiny(tmp_path / "cache", op_debug_level=1, debug_dir=str(tmp_path))
    assert model.build["kernel_cache"]["off"] == "op_debug_level=1"
    assert not (tmp_path / "cache").exists()
    assert compile_tiny(tmp_path / "cache", op_debug_level=0).build["kernel_cache"]["misses"] > 0


def test_op_debug_config_without_a_list_turns_the_cache_off(tmp_path: Path) -> None:
    config = tmp_path / "debug.cfg"
    config.write_text("op_debug_config = ccec_g,oom\n")
    model = compile_tiny(tmp_path / "cache", op_debug_config=str(config))
    assert model.build["kernel_cache"]["off"] == "op_debug_config without op_debug_list"
    assert not (tmp_path / "cache").exists()


def test_op_debug_list_rebuilds_the_listed_ops_and_caches_the_others(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = compile_tiny(cache)
    convs = first.kernels.count('"Conv2D"')
    assert 0 < convs < distinct(first)
    config = tmp_path / "debug.cfg"
    config.write_text("op_debug_config=ccec_g\nop_debug_list=OpType::Conv2D,fc\n")
    listed = compile_tiny(cache, op_debug_config=str(config)).build["kernel_cache"]
    assert listed["misses"] == convs + 1 and listed["hits"] == distinct(first) - convs - 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("op_debug_config=ccec_O3\n", "'ccec_O3' is not allowed; use oom, dump_cce, dump_loc, ccec_O0, ccec_g, check_flag"),
        ("debug_list=Conv\n", "line 1: 'debug_list=Conv' is not allowed; use op_debug_config=... or op_debug_list=..."),
    ],
)
def test_a_bad_op_debug_config_is_refused_naming_what_is_allowed(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "debug.cfg"
    config.write_text(text)
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace(".", r"\.")):
        ge.compile(TINY, {"op_debug_config": str(config)})
    with pytest.raises(OptionError, match="does not exist"):
        ge.compile(TINY, {"op_debug_config": str(tmp_path / "none.cfg")})


def test_a_cache_directory_that_cannot_be_made_is_refused_before_the_compile(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = subprocess.run(
        atc_command("--output=m", f"--op_compiler_cache_dir={blocker / 'cache'}"),
        check=False, cwd=tmp_path, capture_output=True, text=True,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        (
            f"ge: error: [E10001] op_compiler_cache_dir '{blocker / 'cache'}': cannot create "
            f"'{blocker / 'cache' / 'kernel_cache'}' (Not a directory); give a writable directory "
            "or --op_compiler_cache_mode=disable"
        )
    ]
    assert not (tmp_path / "m.om").exists()


def test_the_atc_summary_reports_hits_and_misses(tmp_path: Path) -> None:
    def run() -> str:
        result = subprocess.run(
            atc_command("--output=m", f"--op_compiler_cache_dir={tmp_path}"),
            check=False, cwd=tmp_path, capture_output=True, text=True,
        )
        assert result.returncode == 0, result.stderr
        return next(line for line in result.stdout.splitlines() if line.startswith("kernel cache:"))

    first, second = run(), run()
    kernels = distinct(ge.load_model(tmp_path / "m.om"))
    assert first.startswith(f"kernel cache: 0 hits, {kernels} misses (enable, ")
    assert second.startswith(f"kernel cache: {kernels} hits, 0 misses (enable, ")


def test_the_key_names_the_compiler_version(tmp_path: Path) -> None:
    source = tmp_path / "lowering.py"
    source.write_text("a = 1\n")
    before = kernel_cache.compiler_version((str(source),))
    source.write_text("a = 2\n")
    kernel_cache.compiler_version.cache_clear()
    after = kernel_cache.compiler_version((str(source),))
    assert before != after and before.startswith("ascend-ge ")


@pytest.mark.slow
def test_resnet50_compiled_again_hits_every_kernel(tmp_path: Path, resnet50_onnx: Path) -> None:
    flags = {"op_compiler_cache_dir": str(tmp_path), "export_compile_stat": 0, "op_compiler_cache_mode": "enable"}
    cold = ge.compile(resnet50_onnx, flags)
    whole = ge.compile(resnet50_onnx, flags)  # the whole build from the model cache
    shutil.rmtree(tmp_path / model_cache.FOLDER)
    warm = ge.compile(resnet50_onnx, flags)  # every kernel from the kernel cache
    built = cold.build["kernel_cache"]["misses"]  # one per distinct kernel: equal scopes share one
    assert whole.build["kernel_cache"] == {**cold.build["kernel_cache"], "hits": built, "misses": 0, "model_cache": "hit"}
    assert warm.build["kernel_cache"] == {**cold.build["kernel_cache"], "hits": built, "misses": 0}
    assert om_content(warm, tmp_path / "warm.om") == om_content(cold, tmp_path / "cold.om")
    assert om_content(whole, tmp_path / "whole.om") == om_content(cold, tmp_path / "cold.om")


def test_an_invalid_limit_is_logged_with_its_name(tmp_path: Path, caplog) -> None:
    (tmp_path / "op_cache.ini").write_text("[op_compiler_cache]\nremain_cache_size_ratio=0\n")
    with caplog.at_level(logging.INFO, logger="ge"):
        assert read_limits(str(tmp_path), {"ASCEND_MAX_OP_CACHE_SIZE": "x"}) == Limits()
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        f"kernel cache: {tmp_path / 'op_cache.ini'} ignored: remain_cache_size_ratio=0 is not valid (sizes: -1 or >= 1 MB, ratio: 1-100)",
        "kernel cache: the environment ignored: ASCEND_MAX_OP_CACHE_SIZE=x is not valid (sizes: -1 or >= 1 MB, ratio: 1-100)",
    ]
