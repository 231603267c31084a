"""Writing the files users name: nothing partial, nothing clobbered, no temporary
left behind, and runs that write one output at once leave one consistent result."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

import ge
from ge.core import ir
from ge.core.files import FileError, check_output, published, read_text
from ge.models import DEMO_MODELS

BIN = Path(sys.executable).parent
RESNET, BERT = DEMO_MODELS
RENAME_WEIGHTS = Path(__file__).resolve().parent / "plugin_example" / "rename_weights.py"


def run(tool: str, *args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / tool), *map(str, args)], capture_output=True, text=True, cwd=cwd)


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@contextmanager
def fifo_reader(path: Path) -> Iterator[list[bytes]]:
    """A FIFO at `path` with a thread reading it whole into the yielded list."""
    os.mkfifo(path)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(path.read_bytes()))
    reader.start()
    try:
        yield got
    finally:
        reader.join(timeout=5)
        if reader.is_alive():  # the writer failed before opening the FIFO: release the reader
            try:  # without blocking: a reader that has just gone leaves no one to open for (ENXIO)
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
            reader.join(timeout=30)


# ------------------------------------------------------------------ published


def test_a_new_file_gets_the_umask_mode(tmp_path: Path):
    old = os.umask(0o022)
    try:
        with published(tmp_path / "new.txt") as f:
            f.write("hello\n")
    finally:
        os.umask(old)
    assert (tmp_path / "new.txt").read_text() == "hello\n"
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o644


def test_a_replaced_file_keeps_its_mode(tmp_path: Path):
    path = tmp_path / "kept.txt"
    path.write_text("old")
    path.chmod(0o640)
    with published(path) as f:
        f.write("new")
    assert path.read_text() == "new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path):
    path = tmp_path / "kept.txt"
    path.write_text("old")
    with pytest.raises(RuntimeError), published(path) as f:
        f.write("half")
        raise RuntimeError("the writer failed")
    assert path.read_text() == "old"
    assert files_in(tmp_path) == ["kept.txt"]


def test_a_symlink_is_followed_not_replaced(tmp_path: Path):
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    with published(link) as f:
        f.write("new")
    assert link.is_symlink()
    assert target.read_text() == "new"


def test_a_device_is_written_through_not_replaced():
    with published("/dev/null", "wb") as f:
        f.write(b"\0" * 1000)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_fifo_receives_the_whole_content(tmp_path: Path):
    path = tmp_path / "pipe"
    with fifo_reader(path) as got, published(path) as f:
        f.write("all of it\n")
    assert got == [b"all of it\n"]
    assert stat.S_ISFIFO(path.stat().st_mode)
    assert files_in(tmp_path) == ["pipe"]


def test_dash_is_standard_output(capfd):
    with published("-") as f:
        f.write("to stdout\n")
    assert capfd.readouterr().out == "to stdout\n"


@pytest.mark.parametrize(
    ("make", "name", "message"),
    [
        (lambda p: None, "missing/out.om", "directory 'TMP/missing' does not exist"),
        (lambda p: (p / "out.om").mkdir(), "out.om", "'TMP/out.om' is a directory"),
    ],
)
def test_an_output_that_cannot_be_written_is_refused_before_work(tmp_path: Path, make, name: str, message: str):
    make(tmp_path)
    with pytest.raises(FileError) as info:
        check_output(tmp_path / name, "--output")
    assert message.replace("TMP", str(tmp_path)) in str(info.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_unwritable_directory_is_refused(tmp_path: Path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    with pytest.raises(FileError, match="is not writable"):
        check_output(folder / "out.om")


def test_sigterm_during_a_write_leaves_no_temporary(tmp_path: Path):
    script = textwrap.dedent(
        f"""
        import os, signal, time
        from ge.cli.errors import reporting
        from ge.core.files import published
        with reporting("ge", "warning"):
            with published({str(tmp_path / "big.bin")!r}, "wb") as f:
                f.write(b"x" * (1 << 20))
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(30)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 143, result.stderr
    assert result.stderr.strip() == "ge: terminated"
    assert files_in(tmp_path) == []


# ----------------------------------------------------------------- read_text


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"\xff\xfe binary", r"is not UTF-8 text \(byte 0 is 0xff\)"), (None, "does not exist")],
)
def test_reading_a_bad_text_file_says_why(tmp_path: Path, content: bytes | None, message: str):
    path = tmp_path / "switch.cfg"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(FileError, match=message):
        read_text(path, "fusion switch file")


# --------------------------------------------------------- the commands' outputs


def test_ge_atc_output_keeps_the_mode_of_the_om_it_replaces(tmp_path: Path):
    om = tmp_path / "m.om"
    om.write_bytes(b"old")
    om.chmod(0o644)
    result = run("ge", "atc", f"--model={RESNET.path}", "--framework=5", f"--output={tmp_path / 'm'}", "--soc_version=Ascend310P3")
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(om.stat().st_mode) == 0o644
    ge.load_model(om)
    assert files_in(tmp_path) == ["m.om"]


def test_ge_atc_writes_through_a_fifo_and_follows_a_symlink(tmp_path: Path):
    with fifo_reader(tmp_path / "m.om") as got:
        result = run("ge", "atc", f"--model={RESNET.path}", "--framework=5", f"--output={tmp_path / 'm'}", "--soc_version=Ascend310P3")
    assert result.returncode == 0, result.stderr
    assert got[0].startswith(b"PK")

    (tmp_path / "real.om").write_bytes(b"old")
    (tmp_path / "link.om").symlink_to(tmp_path / "real.om")
    result = run("ge", "atc", f"--model={RESNET.path}", "--framework=5", f"--output={tmp_path / 'link'}", "--soc_version=Ascend310P3")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "link.om").is_symlink()
    ge.load_model(tmp_path / "real.om")


def test_ge_opt_output_to_dev_null_keeps_the_device():
    result = run("ge-opt", RESNET.path, "-o", "/dev/null")
    assert result.returncode == 0, result.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_ge_precision_report_csv_follows_a_symlink(tmp_path: Path):
    (tmp_path / "real.csv").write_text("old")
    (tmp_path / "rows.csv").symlink_to(tmp_path / "real.csv")
    result = run("ge", "precision-report", RESNET.path, "--csv", tmp_path / "rows.csv", "--soc_version=Ascend310P3")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "rows.csv").is_symlink()
    assert (tmp_path / "real.csv").read_text().startswith("index,")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("ge", "atc", f"--model={RESNET.path}", "--framework=5", "--output=missing/m", "--soc_version=Ascend310P3"),
         "ge: error: [E10001] --output 'missing/m.om': directory 'missing' does not exist"),
        (("ge", "optimize", RESNET.path, "--output=."), "ge: error: [E10001] --output '.' is a directory; name a file"),
        (("ge", "precision-report", RESNET.path, "--csv", "missing/x.csv"),
         "ge: error: [E10001] --csv 'missing/x.csv': directory 'missing' does not exist"),
    ],
)
def test_a_bad_output_is_refused_before_the_compile(tmp_path: Path, args: tuple[str, ...], message: str):
    result = run(*args, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == message
    assert files_in(tmp_path) in ([], ["missing"])


def test_ge_run_refuses_an_output_directory_that_is_a_file_before_running(tmp_path: Path):
    om = tmp_path / "m.om"
    assert run("ge", "atc", f"--model={RESNET.path}", "--framework=5", f"--output={tmp_path / 'm'}", "--soc_version=Ascend310P3").returncode == 0
    (tmp_path / "taken").write_text("a file")
    result = run("ge", "run", om, "--profile", tmp_path / "taken" / "prof")
    assert result.returncode == 1
    assert result.stderr.strip() == f"ge: error: [E10001] --profile '{tmp_path}/taken/prof': '{tmp_path}/taken' is not a directory"


# ----------------------------------------------------------------- concurrency


def test_four_ge_opt_runs_to_one_output_leave_one_consistent_result(tmp_path: Path):
    out = tmp_path / "out.mlir"
    models = (RESNET, BERT, RESNET, BERT)
    procs = [
        subprocess.Popen(
            [str(BIN / "ge-opt"), model.path, f"--load-pass-plugin={RENAME_WEIGHTS}", "-p", "rename-weights", "-o", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for model in models
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert not [name for name in files_in(tmp_path) if name.endswith(".tmp")]

    again = run("ge-opt", out)  # a fresh process: every weight reloads from the sidecar the IR names
    assert again.returncode == 0, again.stderr
    module = ir.parse(again.stdout)
    winner = BERT if "input_ids" in again.stdout else RESNET
    inputs = winner.sample_inputs()
    original, store = ge.load_onnx(winner.path)
    expected = ge.reference.run(original, inputs, store)
    got = ge.reference.run(module, inputs)
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value)


def test_four_ge_atc_runs_to_one_output_leave_one_valid_model(tmp_path: Path):
    procs = [
        subprocess.Popen(
            [str(BIN / "ge"), "atc", f"--model={RESNET.path}", "--framework=5", f"--output={tmp_path / 'm'}", "--soc_version=Ascend310P3"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for _ in range(4)
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert files_in(tmp_path) == ["m.om"]
    ge.load_model(tmp_path / "m.om")
