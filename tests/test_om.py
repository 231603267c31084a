"""The offline model file (ge/om/model.py): round trip, atomic writes, and refusal of
truncated, altered, foreign and newer files."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ge
from ge.om import model as om
from ge.om import OmError
from ge.om import Region
from ge.om.tasks import KernelTask, MemcpyTask, ModelEndGraphTask
from ge.core.files import FileError
from ge.models import DEMO_MODELS

QUIET = {"export_compile_stat": 0}


@pytest.fixture(scope="module")
def model() -> ge.Model:
    return ge.compile(DEMO_MODELS[0].path, QUIET)


@pytest.fixture(scope="module")
def saved(model, tmp_path_factory) -> Path:
    return Path(model.save(tmp_path_factory.mktemp("om") / "tiny.om"))


def test_round_trip_keeps_everything(model, saved):
    loaded = ge.load_model(saved)
    assert loaded == model
    for field in ("soc_version", "options", "inputs", "outputs", "memory", "streams", "events", "kernels", "tasks", "build"):
        assert getattr(loaded, field) == getattr(model, field), field
    assert bytes(loaded.weights) == bytes(model.weights)


def test_the_model_describes_itself(model):
    assert model.soc_version == "Ascend310P3"
    assert [t.name for t in model.inputs] == ["input"] and model.inputs[0].shape == (1, 3, 32, 32)
    assert len(model.weights) == model.memory.sizes[Region.WEIGHT] > 0
    kinds = [t.KIND for t in model.tasks]
    assert kinds[0] == "MEMCPY_ASYNC" and kinds[-1] == "MODEL_END_GRAPH"
    assert sum(isinstance(t, KernelTask) for t in model.tasks) == model.build["kernels"] > 0
    assert [t.direction.value for t in model.tasks if isinstance(t, MemcpyTask)] == ["H2D", "D2H"]
    assert isinstance(model.tasks[-1], ModelEndGraphTask)


def test_kernels_parse_back_and_every_launch_has_one(model, saved):
    from dialects.ascend_kernel import KernelOp

    kernels = {op.sym_name.data: op for op in ge.load_model(saved).kernel_module().ops if isinstance(op, KernelOp)}
    launched = {t.kernel for t in model.tasks if isinstance(t, KernelTask)}
    assert launched == set(kernels)
    for task in model.tasks:
        if isinstance(task, KernelTask):
            assert task.block_dim == kernels[task.kernel].int_prop("block_dim")


def test_the_file_is_a_sealed_zip_of_four_entries(saved):
    with zipfile.ZipFile(saved) as z:
        assert z.namelist() == [om.MANIFEST, om.MODEL, om.KERNELS, om.WEIGHTS]
        manifest = json.loads(z.read(om.MANIFEST))
        description = json.loads(z.read(om.MODEL))
        assert z.comment.startswith(om.SEAL)
    assert manifest == {"magic": om.MAGIC, "format_version": om.FORMAT_VERSION, "entries": list(om.ENTRIES)}
    assert description["format_version"] == om.FORMAT_VERSION
    assert {"soc_version", "options", "inputs", "outputs", "memory", "tasks"} <= set(description)


def test_a_failed_write_leaves_nothing_and_keeps_the_old_file(model, saved, tmp_path, monkeypatch):
    target = tmp_path / "m.om"
    target.write_bytes(saved.read_bytes())

    def broken(self, name, data, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(zipfile.ZipFile, "writestr", broken)
    with pytest.raises(FileError, match=r"cannot write model '.*m\.om': No space left on device"):
        model.save(target)
    assert sorted(os.listdir(tmp_path)) == ["m.om"]
    assert target.read_bytes() == saved.read_bytes()


# ------------------------------------------------------------------ refused files


def refused(path: Path, *fragments: str) -> None:
    with pytest.raises(OmError) as info:
        ge.load_model(path)
    for fragment in fragments:
        assert fragment in str(info.value)


@pytest.mark.parametrize("keep", [0.0, 0.1, 0.5, 0.9, 0.999])
def test_truncated_files_are_refused(saved, tmp_path, keep):
    data = saved.read_bytes()
    cut = tmp_path / "cut.om"
    cut.write_bytes(data[: max(1, int(len(data) * keep))])
    refused(cut, str(cut))


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(position=st.floats(0, 1, exclude_max=True), flip=st.integers(1, 255))
def test_any_altered_byte_is_refused(saved, tmp_path, position, flip):
    data = bytearray(saved.read_bytes())
    i = int(position * len(data))
    data[i] ^= flip
    bad = tmp_path / "altered.om"
    bad.write_bytes(bytes(data))
    refused(bad)


def test_the_seal_names_alteration(saved, tmp_path):
    data = bytearray(saved.read_bytes())
    with zipfile.ZipFile(saved) as z:
        info = z.getinfo(om.WEIGHTS)
    data[info.header_offset + 30 + len(info.filename) + 8] ^= 1  # a byte of the stored weights
    bad = tmp_path / "weights.om"
    bad.write_bytes(bytes(data))
    refused(bad, "altered or damaged")


def test_random_bytes_are_not_a_model(tmp_path):
    junk = tmp_path / "junk.om"
    junk.write_bytes(os.urandom(4096))
    refused(junk, "not a .om model file")
    empty = tmp_path / "empty.om"
    empty.write_bytes(b"")
    refused(empty, "not a .om model file")


def test_a_foreign_zip_is_refused(tmp_path):
    other = tmp_path / "other.om"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("README.txt", "not a model")
    refused(other, "not a .om model", om.MANIFEST)
    lookalike = tmp_path / "lookalike.om"
    with zipfile.ZipFile(lookalike, "w") as z:
        z.writestr(om.MANIFEST, json.dumps({"magic": "something-else", "format_version": 1}))
    refused(lookalike, "magic")


def test_a_newer_version_is_refused(model, tmp_path, monkeypatch):
    newer = tmp_path / "newer.om"
    monkeypatch.setattr(om, "FORMAT_VERSION", om.FORMAT_VERSION + 1)
    model.save(newer)
    monkeypatch.undo()
    refused(newer, f"version {om.FORMAT_VERSION + 1}", "newer")
