"""Hostile `.om` files: a seal proves a file whole, not honest, so these tests rewrite a
real model and recompute its seal with `ge.om.model.seal` to reach the reader's checks.
Each is refused fast, with one line naming the file, the field, the value and what is
allowed; a fuzz of mutated files never gets past the project's errors.
"""

from __future__ import annotations

import dataclasses
import json
import re
import struct
import subprocess
import sys
import time
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ge
from ge.core import soc as socs
from ge.core.errors import GEError, ModelError
from ge.models import DEMO_MODELS
from ge.om import OmError, Region, limits
from ge.om import model as om
from ge.sim.config import RunConfig
from ge.sim.runtime import RUN_BLOCKS, Runtime

SOC = "Ascend310"
FAST = 2.0
"""Seconds a refusal may take (the unbounded reader took up to 68)."""
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """tiny_resnet compiled for the SoC with the least device memory."""
    model = ge.compile(DEMO_MODELS[0].path, {"export_compile_stat": 0, "soc_version": SOC})
    return Path(model.save(tmp_path_factory.mktemp("hostile") / "tiny.om"))


def entries(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {name: z.read(name) for name in (om.MANIFEST, *om.ENTRIES)}


def sealed(path: Path, contents: dict[str, bytes], stored: tuple[str, ...] = (om.WEIGHTS,)) -> Path:
    """A `.om` of `contents` (entry name -> bytes, in order), sealed as `ge.om.write` seals."""
    with open(path, "w+b") as f:
        with zipfile.ZipFile(f, "w") as z:
            for name, data in contents.items():
                z.writestr(name, data, zipfile.ZIP_STORED if name in stored else zipfile.ZIP_DEFLATED)
            z.comment = om.SEAL + b"0" * om.DIGEST_CHARS
        om.seal(f)
    return path


def with_description(tiny: Path, path: Path, change: Callable[[dict], None]) -> Path:
    contents = entries(tiny)
    description = json.loads(contents[om.MODEL])
    change(description)
    contents[om.MODEL] = json.dumps(description).encode()
    return sealed(path, contents)


def refused_fast(path: Path, *fragments: str) -> str:
    started = time.perf_counter()
    with pytest.raises(OmError) as info:
        om.read(path)
    assert time.perf_counter() - started < FAST
    message = str(info.value)
    for fragment in (str(path), *fragments):
        assert fragment in message, message
    return message


def ge_run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "ge"), "run", *map(str, args)], capture_output=True, text=True, timeout=60, check=False)


def first_kernel(description: dict) -> dict:
    return next(t for t in description["tasks"] if t["kind"] == "KERNEL")


# ------------------------------------------------------------ the three examples


def test_a_plan_of_1e15_bytes_is_refused_before_anything_is_allocated(tiny, tmp_path):
    def huge(d: dict) -> None:
        d["memory"]["regions"]["feature_map"]["size"] = 10**15

    bad = with_description(tiny, tmp_path / "memory.om", huge)
    device = socs.load(SOC).device_memory_bytes
    refused_fast(bad, "memory.regions.feature_map.size", str(10**15), f"0 to {device}", SOC)
    result = ge_run(bad, "--timing-only")
    assert result.returncode == 1 and result.stderr.startswith("ge: error: ") and len(result.stderr.splitlines()) == 1
    assert "memory.regions.feature_map.size" in result.stderr and "Traceback" not in result.stderr


def test_a_block_dim_of_1e9_is_refused(tiny, tmp_path):
    bad = with_description(tiny, tmp_path / "block_dim.om", lambda d: first_kernel(d).update(block_dim=10**9))
    refused_fast(bad, "block_dim", str(10**9), f"1 to {limits.BLOCK_DIM}")


@pytest.fixture(scope="module")
def bomb() -> tuple[bytes, int, int]:
    """A raw deflate stream of 4095 MiB of zeros in about 4 MB: (stream, size, crc32)."""
    mib = bytes(1 << 20)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = deflate.compress(mib) + deflate.flush(zlib.Z_FULL_FLUSH)  # byte-aligned, history reset: repeatable
    count = 4095  # the largest MiB count a zip without zip64 declares
    crc = 0
    for _ in range(count):
        crc = zlib.crc32(mib, crc)
    return chunk * count + deflate.flush(), count << 20, crc


def with_bomb(tiny: Path, path: Path, name: str, bomb: tuple[bytes, int, int]) -> Path:
    """`tiny` with entry `name` replaced by the bomb: stored as its raw stream, then its
    headers patched to say deflated, its real size and CRC (no zip API writes a
    pre-compressed member)."""
    stream, size, crc = bomb
    contents = entries(tiny)
    contents[name] = stream
    data = bytearray(sealed(path, contents, stored=(name,)).read_bytes())
    with zipfile.ZipFile(path) as z:
        local = z.getinfo(name).header_offset
    struct.pack_into("<H", data, local + 8, zipfile.ZIP_DEFLATED)
    struct.pack_into("<III", data, local + 14, crc, len(stream), size)
    central = -1
    while True:  # the entry's central directory record
        central = data.index(b"PK\x01\x02", central + 1)
        length = struct.unpack_from("<H", data, central + 28)[0]
        if data[central + 46 : central + 46 + length] == name.encode():
            break
    struct.pack_into("<H", data, central + 10, zipfile.ZIP_DEFLATED)
    struct.pack_into("<III", data, central + 16, crc, len(stream), size)
    path.write_bytes(bytes(data))
    with open(path, "r+b") as f:
        om.seal(f)
    return path


@pytest.mark.parametrize("name", [om.WEIGHTS, om.MODEL, om.KERNELS])
def test_a_4_gib_member_in_a_4_mb_file_is_refused_before_it_is_inflated(tiny, tmp_path, bomb, name):
    bad = with_bomb(tiny, tmp_path / "bomb.om", name, bomb)
    assert bad.stat().st_size < 5 << 20
    with zipfile.ZipFile(bad) as z:
        info = z.getinfo(name)
        assert (info.compress_type, info.file_size) == (zipfile.ZIP_DEFLATED, bomb[1])
    refused_fast(bad, name, f"declares {bomb[1]} bytes")


# ------------------------------------------------- more fields, each refused clearly


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        (lambda d: d["inputs"][0].update(dtype="float128"), ("inputs[0].dtype", "float128", "float16")),
        (lambda d: d["inputs"][0].update(shape=[1, -3, 32, 32]), ("inputs[0].shape[1]", "-3")),
        (lambda d: d["inputs"][0].update(origin_shape=[10**6] * 4), ("inputs[0].origin_shape", "device memory")),
        (lambda d: d["inputs"][0].update(shape=[1] * 40), ("inputs[0].shape", "40 items", f"at most {limits.RANK}")),
        (lambda d: d["inputs"][0].update(addr=2**40), ("inputs[0]", "outside the plan")),
        (lambda d: d["memory"]["tensors"][0].update(offset=2**40), ("memory.tensors[0]", "outside its")),
        (lambda d: d["memory"]["regions"]["input"].update(base=2**40), ("memory.regions.input.base", str(2**40))),
        (lambda d: d.update(streams=10**9), ("streams", str(10**9), f"1 to {limits.STREAMS}")),
        (lambda d: d.update(events="many"), ("events", "must be an integer", "'many'")),
        (lambda d: d.update(soc_version="Ascend999"), ("soc_version", "Ascend999", "Ascend310P3")),
        (lambda d: first_kernel(d).update(stream=7), ("stream", "is 7", "streams")),
        (lambda d: first_kernel(d).update(kernel="nope"), ("kernel", "'nope'", om.KERNELS)),
        (lambda d: first_kernel(d)["inputs"][0].__setitem__(0, 10**6), ("tensor", str(10**6))),
        (lambda d: first_kernel(d)["inputs"][0].__setitem__(2, 2**50), ("argument 0", "outside the plan")),
        (lambda d: first_kernel(d).update(block_dim=2.5), ("block_dim", "must be an integer", "2.5")),
        (lambda d: d["tasks"][0].update(port=3), ("tasks[0].port", "is 3", "1 inputs")),
        (lambda d: d["tasks"][0].update(kind="PROFILER_TRACE"), ("tasks[0].kind", "PROFILER_TRACE", "KERNEL")),
        (lambda d: d["outputs"].extend(d["outputs"] * limits.PORTS), ("outputs has", f"at most {limits.PORTS}")),
        (lambda d: d.pop("memory"), ("memory is missing",)),
    ],
)
def test_each_field_is_checked(tiny, tmp_path, change, fragments):
    refused_fast(with_description(tiny, tmp_path / "field.om", change), *fragments)


def test_deep_json_is_refused(tiny, tmp_path):
    contents = entries(tiny)
    contents[om.MODEL] = b"[" * 100_000 + b"]" * 100_000
    refused_fast(sealed(tmp_path / "deep.om", contents, stored=(om.MODEL, om.WEIGHTS)), om.MODEL, f"deeper than {limits.JSON_DEPTH}")


def test_a_weight_blob_longer_than_the_plan_is_refused_unread(tiny, tmp_path):
    contents = entries(tiny)
    contents[om.WEIGHTS] += bytes(1 << 20)
    refused_fast(sealed(tmp_path / "weights.om", contents), om.WEIGHTS, f"at most {len(entries(tiny)[om.WEIGHTS])}")


def test_a_run_that_would_place_too_many_blocks_is_refused(tiny, tmp_path):
    """Every kernel at CANN's largest block_dim, in its header and its launches, and the
    first launched again and again: a valid file, but a run too large for the simulator,
    which places each block."""
    contents = entries(tiny)
    contents[om.KERNELS] = re.sub(rb"block_dim = \d+ : i64", b"block_dim = %d : i64" % limits.BLOCK_DIM, contents[om.KERNELS])
    description = json.loads(contents[om.MODEL])
    for task in description["tasks"]:
        if task["kind"] == "KERNEL":
            task["block_dim"] = limits.BLOCK_DIM
    kernel = first_kernel(description)
    at = description["tasks"].index(kernel)
    description["tasks"][at:at] = [kernel] * (RUN_BLOCKS // limits.BLOCK_DIM)
    contents[om.MODEL] = json.dumps(description).encode()
    runtime = Runtime(om.read(sealed(tmp_path / "blocks.om", contents)), RunConfig(timing_only=True))
    started = time.perf_counter()
    with pytest.raises(ModelError, match=f"at most {RUN_BLOCKS:,}"):
        runtime.run()
    assert time.perf_counter() - started < FAST


def test_a_model_too_big_for_the_device_is_refused_at_compile_time():
    started = time.perf_counter()
    with pytest.raises(ModelError) as info:
        ge.compile(DEMO_MODELS[0].path, {"export_compile_stat": 0, "soc_version": SOC, "input_shape": "input:64,3,2048,2048"})
    assert time.perf_counter() - started < 30
    device = socs.load(SOC).device_memory_bytes
    assert "device memory" in str(info.value) and f"{device:,}" in str(info.value) and SOC in str(info.value)


def test_the_runtime_refuses_a_plan_beyond_the_device(tiny):
    """A Model made in memory (not read from a file) is held to the device too."""
    model = om.read(tiny)
    sizes = {**model.memory.sizes, Region.FEATURE_MAP: socs.load(SOC).device_memory_bytes + 1}
    with pytest.raises(ModelError, match="device memory"):
        Runtime(dataclasses.replace(model, memory=dataclasses.replace(model.memory, sizes=sizes)))


# --------------------------------------------------------------------------- fuzz

HUGE = st.sampled_from([-1, -(2**63), 0, 2**31, 2**63, 10**15, 10**30, 1.5, "7", None, True, [], {}, [1] * 50])


def _paths(node: object, path: tuple = ()) -> list[tuple]:
    """Every path to a leaf or container of a JSON document, the root first."""
    found = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _paths(value, (*path, i))
    return found


def _set(doc: object, path: tuple, value: object) -> object:
    if not path:
        return value
    node = doc
    for key in path[:-1]:
        node = node[key]  # type: ignore[index]
    node[path[-1]] = value  # type: ignore[index]
    return doc


NUMBER = re.compile(rb"\d+")


@st.composite
def mutated(draw, contents: dict[str, bytes]) -> dict[str, bytes]:
    """`contents` with one to three mutations: a field of the description set to a hostile
    value, a number in the kernels (sizes, trip counts, block_dim) made hostile, or an
    entry's bytes flipped, inserted or cut."""
    contents = dict(contents)
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["field", "field", "field", "kernel number", "kernel number", "bytes"]))
        if how == "field":
            try:
                description = json.loads(contents[om.MODEL])
                path = draw(st.sampled_from(_paths(description)[1:]))
                contents[om.MODEL] = json.dumps(_set(description, path, draw(HUGE))).encode()
            except ValueError:
                pass  # an earlier mutation broke the JSON
        elif how == "kernel number":
            text = contents[om.KERNELS]
            numbers = [m.span() for m in NUMBER.finditer(text)]
            if numbers:
                start, end = draw(st.sampled_from(numbers))
                value = draw(st.sampled_from([0, 1, 3, 65535, 2**31, 2**40, 10**15, 10**30]))
                contents[om.KERNELS] = text[:start] + str(value).encode() + text[end:]
        else:
            name = draw(st.sampled_from([om.MODEL, om.MODEL, om.KERNELS, om.KERNELS, om.WEIGHTS, om.MANIFEST]))
            data = bytearray(contents[name])
            at = draw(st.integers(0, max(len(data) - 1, 0)))
            change = draw(st.sampled_from(["flip", "insert", "cut"]))
            if change == "flip" and data:
                data[at] ^= draw(st.integers(1, 255))
            elif change == "insert":
                data[at:at] = draw(st.binary(min_size=1, max_size=16))
            else:
                del data[at : at + draw(st.integers(1, 64))]
            contents[name] = bytes(data)
    return contents


@pytest.fixture(scope="module")
def tiny_contents(tiny) -> dict[str, bytes]:
    return entries(tiny)


@settings(deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_files_fail_only_with_the_projects_errors(tiny_contents, tmp_path, data):
    path = sealed(tmp_path / "fuzz.om", data.draw(mutated(tiny_contents)))
    try:
        model = om.read(path)
        Runtime(model, RunConfig(timing_only=True)).run()
    except GEError:
        pass


# ---------------------------------------------------------------- host memory


def test_a_run_the_host_cannot_hold_is_refused_before_allocating(tiny: Path, monkeypatch):
    """A plan within the device's memory may still exceed the host's: the numerics run
    and the generated inputs are refused with the numbers, before numpy allocates."""
    from ge.core import inputs, limits as core_limits

    monkeypatch.setattr(core_limits, "_HOST_CHECK_FLOOR", 0)
    monkeypatch.setattr(core_limits, "host_available_bytes", lambda: 1024)
    runtime = Runtime(om.read(tiny))
    with pytest.raises(core_limits.LimitError, match=r"generated input 'input' of shape \[1, 3, 32, 32\] needs .*more than this host has available"):
        inputs.generated(runtime.input_specs(), seed=0)
    with pytest.raises(core_limits.LimitError, match=r"the device memory of a run with numerics \(timing_only needs none\)"):
        runtime.run(DEMO_MODELS[0].sample_inputs())
    assert Runtime(om.read(tiny), RunConfig(timing_only=True)).run().profile is not None
