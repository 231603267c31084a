"""external_weight: a session's models keep their consts' weights in
`tmp_weight_<pid>_<sessionid>/weight_<sha256>`, written once, loaded from there, and
removed when the session closes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import ge
from ge.core.files import FileError
from ge.models import DEMO_MODELS, IMAGE_SHAPE
from ge.om import model as om
from ge.om.model import OmError
from ge.session import Session
from ge.sim.config import RunConfig

RESNET = DEMO_MODELS[0]
OPTIONS = {"soc_version": "Ascend310P3"}


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ASCEND_WORK_PATH", str(tmp_path))
    return tmp_path


def test_models_sharing_weights_write_each_file_once(work: Path) -> None:
    with Session(RunConfig(external_weight=True)) as session:
        one = session.compile(RESNET.path, OPTIONS)
        files = sorted(Path(session.weight_dir).iterdir())
        times = {f.name: f.stat().st_mtime_ns for f in files}
        batch2 = ",".join(map(str, (2, *IMAGE_SHAPE[1:])))
        two = session.compile(RESNET.path, {**OPTIONS, "input_shape": f"input:{batch2}"})
        assert two.inputs[0].shape != one.inputs[0].shape  # another model, the same weights
        assert session.weight_writes == len(files) == len({w.digest for w in one.external})
        assert {f.name: f.stat().st_mtime_ns for f in Path(session.weight_dir).iterdir()} == times
        assert {w.digest for w in two.external} == {w.digest for w in one.external}
        assert one.weights == b"" and two.weights == b""


def test_the_directory_is_named_by_pid_and_session_and_honours_ascend_work_path(work: Path) -> None:
    with Session(RunConfig(external_weight=True)) as a, Session(RunConfig(external_weight=True)) as b:
        assert a.session_id != b.session_id
        assert a.weight_dir == str(work / f"tmp_weight_{os.getpid()}_{a.session_id}")
        a.compile(RESNET.path, OPTIONS)
        assert os.path.isdir(a.weight_dir) and not os.path.exists(b.weight_dir)
        assert os.stat(a.weight_dir).st_mode & 0o777 == 0o777 & ~_umask()


def test_without_ascend_work_path_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASCEND_WORK_PATH", raising=False)
    monkeypatch.chdir(tmp_path)
    with Session(RunConfig(external_weight=True)) as session:
        assert os.path.dirname(session.weight_dir) == str(tmp_path)


def test_loaded_from_the_files_the_outputs_equal_the_inline_build(work: Path) -> None:
    inline = Session(RunConfig()).compile(RESNET.path, OPTIONS)
    feeds = RESNET.sample_inputs(1)
    with Session(RunConfig(external_weight=True)) as session:
        external = session.compile(RESNET.path, OPTIONS)
        assert bytes(external.weight_bytes()) == bytes(inline.weights)
        got = session.run(external, feeds).outputs
    want = Session(RunConfig()).run(inline, feeds).outputs
    assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)


def test_close_removes_everything(work: Path) -> None:
    session = Session(RunConfig(external_weight=True))
    model = session.compile(RESNET.path, OPTIONS)
    session.close()
    assert _weight_dirs(work) == []  # (FE/ is fusion_result.json, not ours)
    with pytest.raises(OmError, match="cannot be read"):
        model.weight_bytes()
    with pytest.raises(ge.core.errors.OptionError, match="is closed"):
        session.compile(RESNET.path, OPTIONS)


def test_a_session_never_closed_is_cleaned_at_exit(work: Path) -> None:
    code = (
        "from ge.session import Session; from ge.sim.config import RunConfig; from ge.models import DEMO_MODELS; "
        "s = Session(RunConfig(external_weight=True)); s.compile(DEMO_MODELS[0].path, {'soc_version': 'Ascend310P3'}); "
        "import os; assert os.listdir(s.weight_dir)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert _weight_dirs(work) == []


def test_the_om_refers_to_the_files_and_read_checks_them(work: Path) -> None:
    with Session(RunConfig(external_weight=True)) as session:
        model = session.compile(RESNET.path, OPTIONS)
        path = model.save(work / "resnet.om")
        with zipfile.ZipFile(path) as z:
            assert z.getinfo("weights.bin").file_size == 0
        again = ge.om.read(path)
        assert again.external == model.external and bytes(again.weight_bytes()) == bytes(model.weight_bytes())
        victim = Path(session.weight_dir) / model.external[0].file
        data = victim.read_bytes()
        victim.write_bytes(bytes([data[0] ^ 1]) + data[1:])
        with pytest.raises(OmError, match=r"resnet.om': external weight file '.*weight_[0-9a-f]{64}' does not match its hash"):
            ge.om.read(path)
        victim.unlink()
        with pytest.raises(OmError, match="external weight file .* cannot be read"):
            ge.om.read(path)


@pytest.mark.parametrize(
    ("piece", "fragment"),
    [
        ([0, 1 << 40, "0" * 64], "size is 1099511627776; allowed: 0 to"),
        ([-1, 512, "0" * 64], "offset is -1"),
        ([0, 512, "../../etc/passwd"], "hash must be 64 hex digits"),
        ([0, 512], "must be [offset, size, hash]"),
    ],
)
def test_a_forged_external_weight_entry_is_refused(work: Path, piece: list, fragment: str) -> None:
    with Session(RunConfig(external_weight=True)) as session:
        path = session.compile(RESNET.path, OPTIONS).save(work / "resnet.om")
    with zipfile.ZipFile(path) as z:
        contents = {name: z.read(name) for name in (om.MANIFEST, *om.ENTRIES)}
    description = json.loads(contents[om.MODEL])
    description["external_weights"]["files"][0] = piece
    contents[om.MODEL] = json.dumps(description).encode()
    with open(path, "w+b") as f:
        with zipfile.ZipFile(f, "w") as z:
            for name, data in contents.items():
                z.writestr(name, data)
            z.comment = om.SEAL + b"0" * om.DIGEST_CHARS
        om.seal(f)
    with pytest.raises(OmError) as refused:
        ge.om.read(path)
    assert fragment in str(refused.value) and "\n" not in str(refused.value)


def test_an_inline_om_holds_its_weights(work: Path) -> None:
    model = Session(RunConfig()).compile(RESNET.path, OPTIONS)
    again = ge.om.read(model.save(work / "inline.om"))
    assert again.external == () and bytes(again.weights) == bytes(model.weights)


def test_an_unwritable_ascend_work_path_is_one_clear_error(work: Path) -> None:
    work.chmod(0o555)
    try:
        if os.access(work, os.W_OK):
            pytest.skip("running as root: every directory is writable")
        with Session(RunConfig(external_weight=True)) as session, pytest.raises(FileError, match="ASCEND_WORK_PATH.*is not writable"):
            session.compile(RESNET.path, OPTIONS)
    finally:
        work.chmod(0o755)


def test_an_ascend_work_path_that_is_a_file_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("ASCEND_WORK_PATH", str(tmp_path / "file"))
    with Session(RunConfig(external_weight=True)) as session, pytest.raises(FileError, match="ASCEND_WORK_PATH.*is not a directory"):
        session.compile(RESNET.path, OPTIONS)


def _weight_dirs(work: Path) -> list[Path]:
    return [p for p in work.iterdir() if p.name.startswith("tmp_weight_")]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
