"""`ge zoo`: the zoo file's schema (every mistake named), a two-model x two-SoC zoo on
the local backend, and a failing entry that is a row of the table, not the end of the run."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pytest

import ge
from ge.cli import zoo as zoo_cli
from ge.cli.main import main
from ge.core import soc
from ge.core.errors import OptionError
from ge.models import MODELS_DIR
from ge.zoo import PATH_OPTIONS, read

SOCS = ("Ascend310P3", "Ascend910B1")


@pytest.fixture
def zoo_dir(tmp_path: Path) -> Path:
    """A folder with the two bundled models and a broken one beside the zoo files."""
    for name in ("tiny_resnet", "tiny_bert"):
        shutil.copy(MODELS_DIR / f"{name}.onnx", tmp_path / f"{name}.onnx")
    (tmp_path / "broken.onnx").write_bytes(b"not an onnx model")
    (tmp_path / "switch.cfg").write_text("ConvBatchnormFusionPass:off\n")
    return tmp_path


def write(folder: Path, text: str) -> Path:
    path = folder / "models.toml"
    path.write_text(textwrap.dedent(text))
    return path


def ge_main(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    """`ge ARGS` in this process: its exit code and what it printed."""
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    out = capsys.readouterr()
    return code, out.out + out.err


MODEL = '[[models]]\npath = "tiny_resnet.onnx"\n'

SCHEMA_ERRORS = {
    "unknown top-level key": ('socs = ["Ascend310P3"]\nsoc = "x"\n' + MODEL, "unknown top-level key 'soc'; allowed: socs, option_sets, models"),
    "unknown model key": ('socs = ["Ascend310P3"]\n' + MODEL + 'gear = 1\n', r"models\[0\]: unknown model key 'gear'; allowed: path, name"),
    "no models": ('socs = ["Ascend310P3"]\n', "'models' must be a non-empty array of tables"),
    "no path": ('socs = ["Ascend310P3"]\n[[models]]\nname = "x"\n', r"models\[0\]: 'path' .* is required"),
    "missing model": ('socs = ["Ascend310P3"]\n[[models]]\npath = "nowhere.onnx"\n', "path 'nowhere.onnx' is not a file"),
    "unknown SoC": ('socs = ["Ascend999"]\n' + MODEL, "unknown SoC 'Ascend999'; allowed: " + ", ".join(soc.names())),
    "no SoCs": (MODEL, r"models\[0\]: no SoCs; give 'socs'"),
    "unknown set": ('socs = ["Ascend310P3"]\n' + MODEL + 'option_sets = ["fast"]\n', "unknown set 'fast'; defined in option_sets: default"),
    "unknown option": ('socs = ["Ascend310P3"]\n[option_sets]\nfast = { speed = 1 }\n' + MODEL, "option_sets.fast for Ascend310P3: unknown option 'speed'"),
    "bad value": ('socs = ["Ascend310P3"]\n[option_sets]\nmix = { precision_mode = "fast" }\n' + MODEL, "option_sets.mix for Ascend310P3: .*precision_mode"),
    "soc_version in a set": ('socs = ["Ascend310P3"]\n[option_sets]\ns = { soc_version = "Ascend310" }\n' + MODEL, "'soc_version' is not allowed in a zoo; give the SoCs in 'socs'"),
    "option twice": (
        'socs = ["Ascend310P3"]\n[option_sets]\nmix = { precision_mode = "force_fp32" }\n' + MODEL + 'options = { precision_mode = "force_fp16" }\n',
        "precision_mode given in its options and in option_sets.mix; give each option once",
    ),
    "same name twice": ('socs = ["Ascend310P3"]\n' + MODEL + MODEL, r"models\[1\]: name 'tiny_resnet' is models\[0\]'s too"),
    "not TOML": ("socs = [\n", "not valid TOML"),
}


@pytest.mark.parametrize("case", SCHEMA_ERRORS)
def test_schema_errors_name_the_key_and_what_is_allowed(case: str, zoo_dir: Path) -> None:
    text, message = SCHEMA_ERRORS[case]
    with pytest.raises(OptionError, match=message):
        read(write(zoo_dir, text))


def test_paths_are_relative_to_the_zoo_file(zoo_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    path = write(zoo_dir, f'socs = {list(SOCS)!r}\n[option_sets]\ndefault = {{}}\nno_bn = {{ fusion_switch_file = "switch.cfg" }}\n{MODEL}'.replace("'", '"'))
    entries = read(path)
    assert [(e.soc, e.option_set) for e in entries] == [(s, o) for o in ("default", "no_bn") for s in SOCS]
    assert {e.path for e in entries} == {str(zoo_dir / "tiny_resnet.onnx")}
    assert entries[-1].options == {"fusion_switch_file": str(zoo_dir / "switch.cfg")}
    assert all(name in ge.core.options.OPTION for name in PATH_OPTIONS)


def test_a_schema_error_is_one_line(zoo_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, printed = ge_main(capsys, "zoo", write(zoo_dir, 'socs = ["Ascend310P3"]\n' + MODEL + "gear = 1\n"), "--output", zoo_dir / "out")
    assert code == 1
    assert printed.strip().count("\n") == 0 and "unknown model key 'gear'" in printed


@pytest.mark.slow
def test_two_models_on_two_socs_with_the_local_backend(zoo_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = f'socs = {list(SOCS)!r}\n[[models]]\npath = "tiny_resnet.onnx"\n[[models]]\npath = "tiny_bert.onnx"\nname = "bert"\n'
    out = zoo_dir / "out"
    code, printed = ge_main(capsys, "zoo", write(zoo_dir, text.replace("'", '"')), "--output", out, "--backend=local", "--workers=2")
    assert code == 0, printed
    assert "4 of 4 compiles written" in printed
    for name in ("tiny_resnet", "bert"):
        for soc_name in SOCS:
            model = ge.load_model(out / name / soc_name / "default.om")
            assert model.soc_version == soc_name
            latency = ge.Session(ge.RunConfig(timing_only=True)).run(model).latency_us
            assert f"{latency:,.1f}" in printed
            assert f"{model.build['kernels']}" in printed


@pytest.mark.slow
def test_a_failing_entry_is_reported_and_the_others_finish(
    zoo_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(zoo_cli.console, "width", 300)  # the message on one line of the table
    text = 'socs = ["Ascend310P3"]\n[[models]]\npath = "broken.onnx"\n[[models]]\npath = "tiny_resnet.onnx"\n'
    out = zoo_dir / "out"
    code, printed = ge_main(capsys, "zoo", write(zoo_dir, text), "--output", out, "--workers=2")
    assert code == 1
    assert "failed" in printed and "1 of 2 compiles written" in printed
    assert re.search(r"ge: error: .*1 of 2 compiles failed \(broken/Ascend310P3/default\)", printed)
    assert re.search(r"broken.*Ascend310P3.*failed.*\[E\d+\]", printed), printed
    assert (out / "tiny_resnet" / "Ascend310P3" / "default.om").is_file()
    assert not (out / "broken").exists()
