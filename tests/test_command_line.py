"""Bad input files and command-line habits: each is one `tool: error:` line, exit 1,
no traceback; ATC's single-dash spelling works."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ge.core.errors import ModelError
from ge.core.weights import WeightError, WeightStore
from ge.models import DEMO_MODELS

BIN = Path(sys.executable).parent
RESNET = DEMO_MODELS[0]
RENAME_WEIGHTS = Path(__file__).resolve().parent / "plugin_example" / "rename_weights.py"
ATC = (f"--model={RESNET.path}", "--framework=5", "--soc_version=Ascend310P3")


def run(tool: str, *args: str | Path, cwd: Path | None = None, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(BIN / tool), *map(str, args)], capture_output=True, cwd=cwd, input=stdin)
    return subprocess.CompletedProcess(result.args, result.returncode, result.stdout.decode(), result.stderr.decode())


def fails_with(result: subprocess.CompletedProcess[str], tool: str, message: str) -> None:
    """Exit 1 and exactly the one line `tool: error: ...message...`."""
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{tool}: error: [E"), lines[0]
    assert message in lines[0], lines[0]


# ------------------------------------------------------------------ input files


def test_binary_mlir_is_refused(tmp_path: Path):
    (tmp_path / "bad.mlir").write_bytes(b"\xff\xfe\x00 binary")
    fails_with(run("ge-opt", tmp_path / "bad.mlir"), "ge-opt", "is not UTF-8 text (byte 0 is 0xff)")
    fails_with(run("ge-opt", stdin=b"\x80abc"), "ge-opt", "input '<stdin>' is not UTF-8 text (byte 0 is 0x80)")


def test_unknown_input_extension_names_the_known_ones(tmp_path: Path):
    (tmp_path / "model.txt").write_text("x")
    fails_with(run("ge-opt", tmp_path / "model.txt"), "ge-opt", "unknown format '.txt'; ge-opt reads .mlir, .onnx")


def test_deeply_nested_modules_are_refused(tmp_path: Path):
    (tmp_path / "deep.mlir").write_text("builtin.module {" * 5000 + "}" * 5000)
    fails_with(run("ge-opt", tmp_path / "deep.mlir"), "ge-opt", "nests regions, attributes or lists 5000 levels deep, more than the limit of 100")


def test_a_huge_splat_constant_is_refused_before_parsing(tmp_path: Path):
    text = 'builtin.module { "test.op"() {value = dense<1.0> : tensor<100000x100000xf32>} : () -> () }'
    (tmp_path / "splat.mlir").write_text(text)
    fails_with(run("ge-opt", tmp_path / "splat.mlir"), "ge-opt", "a dense attribute of shape [100000, 100000] needs 40000000000 bytes")


def test_binary_switch_file_is_refused(tmp_path: Path):
    (tmp_path / "switch.cfg").write_bytes(b"\xff\xfe")
    result = run("ge", "atc", *ATC, "--output=m", "--fusion_switch_file=switch.cfg", cwd=tmp_path)
    fails_with(result, "ge", "fusion_switch_file 'switch.cfg' is not UTF-8 text")
    assert not (tmp_path / "m.om").exists()


def test_bad_weight_sidecars_are_refused_naming_the_file(tmp_path: Path):
    arrays = tmp_path / "arrays.npz"
    arrays.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(WeightError, match="arrays.npz' is not a valid .npz of arrays"):
        WeightStore.load(str(arrays))
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, w=np.array([{"a": 1}], dtype=object))
    with pytest.raises(WeightError, match="pickled.npz' is not a valid .npz of arrays: .*allow_pickle"):
        WeightStore.load(str(pickled))
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\xff" * 64)
    with pytest.raises(WeightError, match="garbage.onnx' is not an ONNX model"):
        WeightStore.load(str(garbage))


def test_weights_through_external_data_outside_the_folder_are_refused_by_our_check(tmp_path: Path):
    tensor = helper.make_tensor("w", TensorProto.FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
    tensor.data_location = TensorProto.EXTERNAL
    del tensor.float_data[:]
    tensor.external_data.add(key="location", value="../../etc/passwd")
    graph = helper.make_graph([], "g", [], [helper.make_tensor_value_info("w", TensorProto.FLOAT, [4])], [tensor])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), path)
    with pytest.raises(ModelError, match="location '../../etc/passwd' is outside the model's directory"):
        WeightStore.load(str(path))


def test_a_corrupt_sidecar_named_by_the_ir_is_one_line(tmp_path: Path):
    made = run("ge-opt", RESNET.path, f"--load-pass-plugin={RENAME_WEIGHTS}", "-p", "rename-weights", "-o", "out.mlir", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    (sidecar,) = tmp_path.glob("out.mlir.*.npz")
    sidecar.write_bytes(sidecar.read_bytes()[:100])
    result = run("ge-opt", "out.mlir", "-p", "ConvBatchnormFusionPass", cwd=tmp_path)
    fails_with(result, "ge-opt", f"weight file '{sidecar}' is not a valid .npz of arrays")


# ---------------------------------------------------------------- command lines


def test_atc_single_dash_spelling_compiles(tmp_path: Path):
    (tmp_path / "h").mkdir()  # a value with an 'h' in it is not -h
    single = [arg[1:] for arg in ATC]
    result = run("ge", "atc", *single, "-output=h/hh", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "h" / "hh.om").is_file()


def test_dash_h_is_help():
    result = run("ge", "atc", "-h")
    assert result.returncode == 0
    assert "Usage: ge atc" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("optimize",), "Missing argument 'model'; see 'ge optimize --help'"),
        (("run", "m.om", "--seed=abc"), "Invalid value for '--seed'"),
        (("run", "--bogus", "m.om"), "No such option: --bogus; see 'ge run --help'"),
        (("--log=loud", "run", "m.om"), "Invalid value for '--log'"),
        (("nosuch",), "No such command 'nosuch'; see 'ge --help'"),
        (("atc", "-bogus=1", *ATC, "--output=m"), "unknown option --bogus"),
    ],
)
def test_typer_errors_read_like_ours(args: tuple[str, ...], message: str):
    fails_with(run("ge", *args), "ge", message)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--bogus",), "unrecognized arguments: --bogus; see 'ge-opt --help'"),
        (("--log=loud",), "argument --log: invalid choice: 'loud'"),
        (("-p",), "argument -p/--passes: expected one argument"),
        ((str(RESNET.path), "-t", "input:1,3"), "'input:1,3' is not a pass or target specification: Unknown token"),
    ],
)
def test_argparse_errors_read_like_ours(args: tuple[str, ...], message: str):
    fails_with(run("ge-opt", *args), "ge-opt", message)
