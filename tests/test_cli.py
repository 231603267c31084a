"""The `ge-opt` and `ge` commands, run as a user runs them, and the pass registry.

Every failure must be one line on stderr, a non-zero exit and no traceback (unless
`--log=debug`), and must leave no output file behind.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp, f32
from xdsl.ir import Block, Region
from xdsl.passes import ModulePass

import ge
from dialects.ascend_graph import (
    AddOp,
    ConstOp,
    DataOp,
    GraphOp,
    NetOutputOp,
    ReluOp,
    tensor,
)
from ge.core import ir, weights
from ge.core.errors import OptionError
from ge.models import DEMO_MODELS
from passes import registry

BIN = Path(sys.executable).parent
RESNET = DEMO_MODELS[0]
RENAME_WEIGHTS = Path(__file__).resolve().parent / "plugin_example" / "rename_weights.py"


def run(tool: str, *args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / tool), *map(str, args)], capture_output=True, text=True, cwd=cwd)


def assert_fails_cleanly(result: subprocess.CompletedProcess[str], tool: str, *fragments: str) -> None:
    """Exit code 1, exactly one `tool: error:` line, the fragments in it, no traceback."""
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{tool}: error: "), lines[0]
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def ops_named(module: ModuleOp, name: str) -> int:
    return sum(op.name == name for op in module.walk())


# --------------------------------------------------------------------- a .mlir input


@pytest.fixture
def small_mlir(tmp_path: Path) -> Path:
    """y = relu(x + w) * ... : two identical unnamed relus (for cse) and a dead add (for dce)."""
    store = weights.WeightStore(str(tmp_path / "small.npz"))
    t = tensor(f32, [2, 3])
    block = Block()
    x = DataOp(0, t, "x")
    w = ConstOp(store.add("w", np.arange(6, dtype=np.float32).reshape(2, 3)), t, "w")
    add = AddOp([x, w], name="add")
    relu1, relu2 = ReluOp([add]), ReluOp([add])
    dead = AddOp([x, x])
    out = AddOp([relu1, relu2], name="out")
    block.add_ops([x, w, add, relu1, relu2, dead, out, NetOutputOp([out], ["y"])])
    module = ModuleOp([GraphOp("main", Region(block))])
    weights.attach(module, store)
    store.save(store.key)
    path = tmp_path / "small.mlir"
    path.write_text(ir.to_text(module))
    return path


def test_mlir_input_runs_xdsl_passes_on_our_ir(small_mlir: Path):
    result = run("ge-opt", small_mlir, "-p", "cse,dce")
    assert result.returncode == 0, result.stderr
    module = ir.parse(result.stdout)
    assert ops_named(module, "ascend_graph.relu") == 1
    assert ops_named(module, "ascend_graph.add") == 2
    x = np.ones((2, 3), np.float32)
    expected = 2 * np.maximum(x + np.arange(6, dtype=np.float32).reshape(2, 3), 0)
    np.testing.assert_array_equal(ge.reference.run(module, {"x": x})["y"], expected)


def test_mlir_round_trip_is_identical(small_mlir: Path):
    result = run("ge-opt", small_mlir)
    assert result.returncode == 0, result.stderr
    assert result.stdout == small_mlir.read_text()


# ---------------------------------------------------------------------- .onnx input


@pytest.mark.parametrize("model", DEMO_MODELS, ids=lambda m: m.name)
def test_onnx_input_prints_ir_that_parses_back_identically(model, tmp_path: Path):
    out = tmp_path / "model.mlir"
    result = run("ge-opt", model.path, "-o", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    text = out.read_text()
    assert ir.to_text(ir.parse(text)) == text
    again = run("ge-opt", out)
    assert again.returncode == 0, again.stderr
    assert again.stdout == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.mlir"]


@pytest.mark.parametrize("model", DEMO_MODELS, ids=lambda m: m.name)
def test_pipeline_keeps_meaning_and_weights_reload(model):
    """The printed IR names the .onnx its weights reload from, in another process too."""
    result = run("ge-opt", model.path, "-p", "canonicalize,cse,dce")
    assert result.returncode == 0, result.stderr
    module = ir.parse(result.stdout)
    assert str(model.path) in result.stdout
    inputs = model.sample_inputs(seed=3)
    original, store = ge.load_onnx(model.path)
    expected = ge.reference.run(original, inputs, store)
    got = ge.reference.run(module, inputs)
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6)


def test_input_shape_in_atc_syntax(tmp_path: Path):
    result = run("ge-opt", RESNET.path, "--input_shape=input:1,3,32,32")
    assert result.returncode == 0, result.stderr
    assert "tensor<1x3x32x32xf32>" in result.stdout


# ------------------------------------------------------------------------- failures


def _truncated(tmp_path: Path) -> Path:
    path = tmp_path / "truncated.onnx"
    path.write_bytes(RESNET.path.read_bytes()[:3000])
    return path


def _random_bytes(tmp_path: Path) -> Path:
    path = tmp_path / "random.onnx"
    path.write_bytes(np.random.default_rng(0).bytes(4096))
    return path


def _malformed_mlir(tmp_path: Path) -> Path:
    path = tmp_path / "malformed.mlir"
    path.write_text('builtin.module {\n  ascend_graph.graph @main {\n    %0 = ascend_graph.relu %9 : tensor<2xf32>\n')
    return path


def _unverifiable_mlir(tmp_path: Path) -> Path:
    """Parses, but the add's declared result shape contradicts its operands."""
    path = tmp_path / "unverifiable.mlir"
    path.write_text(
        textwrap.dedent(
            """\
            builtin.module {
              ascend_graph.graph @main {
                %0 = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2x3xf32>
                %1 = ascend_graph.add %0, %0 {name = "bad_add"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
                ascend_graph.net_output %1 {names = ["y"]} : tensor<3x3xf32>
              }
            }
            """
        )
    )
    return path


FAILURES = {
    "truncated onnx": (_truncated, [], "[E16005]"),
    "random bytes": (_random_bytes, [], "[E16005]"),
    "unknown pass": (lambda p: RESNET.path, ["-p", "canonicalize,no-such-pass"], "unknown pass 'no-such-pass'"),
    "malformed pipeline": (lambda p: RESNET.path, ["-p", "cse,{"], "is not a pass pipeline"),
    "unknown pass option": (lambda p: RESNET.path, ["-p", "cse{depth=2}"], "[E10001]"),
    "malformed mlir": (_malformed_mlir, [], "malformed.mlir:3:"),
    "verify failure": (_unverifiable_mlir, [], "bad_add"),
    "bad input shape": (lambda p: RESNET.path, ["--input_shape=image:1,3,32,32"], "no input 'image'"),
    "input shape on mlir": (_unverifiable_mlir, ["--input-shape=x:2,3"], "ONNX input only"),
    "missing input": (lambda p: p / "missing.onnx", [], "missing.onnx"),
    "missing plug-in": (lambda p: RESNET.path, ["--load-pass-plugin=nowhere.py"], "nowhere.py"),
}


@pytest.mark.parametrize("case", FAILURES, ids=list(FAILURES))
def test_failure_is_one_line_and_leaves_no_output(case: str, tmp_path: Path):
    make_input, args, fragment = FAILURES[case]
    source = make_input(tmp_path)
    before = set(tmp_path.iterdir())
    out = tmp_path / "out.mlir"
    result = run("ge-opt", source, *args, "-o", out)
    assert_fails_cleanly(result, "ge-opt", fragment)
    assert set(tmp_path.iterdir()) == before
    assert result.stdout == ""


def test_failure_keeps_an_existing_output_file(tmp_path: Path):
    out = tmp_path / "out.mlir"
    out.write_text("previous result\n")
    result = run("ge-opt", _random_bytes(tmp_path), "-o", out)
    assert_fails_cleanly(result, "ge-opt")
    assert out.read_text() == "previous result\n"


def test_log_debug_shows_the_traceback(tmp_path: Path):
    result = run("ge-opt", _random_bytes(tmp_path), "--log=debug")
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("ge-opt: error: [E16005]")


def test_output_folder_must_exist(tmp_path: Path):
    result = run("ge-opt", RESNET.path, "-o", tmp_path / "no" / "such" / "out.mlir")
    assert_fails_cleanly(result, "ge-opt", "does not exist")


# ---------------------------------------------------------------------------- --help


def test_help_lists_every_pass_with_its_description():
    result = run("ge-opt", "--help")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    for name in registry.available_passes():
        assert any(line.split() == [name, *registry.describe(name).split()] for line in lines), name


# ------------------------------------------------------------------- pass plug-ins


@pytest.fixture
def plugin() -> Path:
    """A plug-in pass that stores every weight again under a new name."""
    return RENAME_WEIGHTS


def test_plugin_pass_is_listed_in_help(plugin: Path):
    result = run("ge-opt", f"--load-pass-plugin={plugin}", "--help")
    assert result.returncode == 0, result.stderr
    assert "rename-weights" in result.stdout
    assert "Store every weight again under a name ending in '.copy'." in result.stdout


def test_new_weights_are_saved_beside_the_output(plugin: Path, tmp_path: Path):
    out = tmp_path / "out.mlir"
    result = run("ge-opt", RESNET.path, f"--load-pass-plugin={plugin}", "-p", "rename-weights", "-o", out)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    (npz,) = tmp_path.glob("out.mlir.*.npz")  # named by the weights' content
    assert re.fullmatch(r"out\.mlir\.[0-9a-f]{16}\.npz", npz.name)
    assert f'ascend_graph.weights = "{npz}"' in text
    assert '.copy"' in text

    # A fresh process reloads every weight from the .npz, digests checked.
    again = run("ge-opt", out)
    assert again.returncode == 0, again.stderr
    module = ir.parse(again.stdout)
    inputs = RESNET.sample_inputs()
    original, store = ge.load_onnx(RESNET.path)
    expected = ge.reference.run(original, inputs, store)
    np.testing.assert_array_equal(ge.reference.run(module, inputs)["logits"], expected["logits"])


def test_new_weights_without_output_file_are_reported(plugin: Path):
    result = run("ge-opt", RESNET.path, f"--load-pass-plugin={plugin}", "-p", "rename-weights")
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("ge-opt: warning: ")
    assert "not saved" in result.stderr


def test_broken_plugin_is_one_line(tmp_path: Path):
    path = tmp_path / "broken.py"
    path.write_text("raise RuntimeError('plug-in exploded')\n")
    result = run("ge-opt", RESNET.path, f"--load-pass-plugin={path}")
    assert_fails_cleanly(result, "ge-opt", "plug-in exploded")


# -------------------------------------------------------------- the registry in-process


@pytest.fixture
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_REGISTERED", {})


def _pass_class(name: str | None, doc: str | None) -> type[ModulePass]:
    namespace: dict[str, object] = {"__doc__": doc, "apply": lambda self, ctx, op: None}
    if name is not None:
        namespace["name"] = name
    return dataclass(frozen=True)(type("SomePass", (ModulePass,), namespace))


def test_register_pass_makes_a_pass_available(clean_registry):
    cls = registry.register_pass(_pass_class("my-fusion", "Fuse the things.\n\nDetails."))
    assert registry.available_passes()["my-fusion"]() is cls
    assert registry.get_pass("my-fusion") is cls
    assert registry.describe("my-fusion") == "Fuse the things."
    assert registry.register_pass(cls) is cls  # registering the same class again is harmless


@pytest.mark.parametrize(
    "name, doc, error",
    [
        (None, "Doc.", "needs a class attribute `name`"),
        ("bad name", "Doc.", "needs a class attribute `name`"),
        ("my-pass", None, "needs a docstring"),
        ("cse", "Doc.", "already registered by xdsl"),
    ],
)
def test_register_pass_refuses(clean_registry, name, doc, error):
    with pytest.raises(ValueError, match=error):
        registry.register_pass(_pass_class(name, doc))


def test_register_pass_needs_a_module_pass(clean_registry):
    with pytest.raises(TypeError):
        registry.register_pass(int)  # type: ignore[type-var]


def test_unknown_pass_names_the_registered_ones():
    with pytest.raises(OptionError, match="unknown pass 'nope'.*canonicalize, .*cse, dce"):
        registry.get_pass("nope")


def test_xdsl_passes_are_merged():
    passes = registry.available_passes()
    assert {"canonicalize", "cse", "dce"} <= set(passes)
    assert all(isinstance(registry.describe(n), str) and registry.describe(n) for n in passes)


# ------------------------------------------------------------------------------- ge


def test_ge_demo_compiles_simulates_and_profiles_every_bundled_model(tmp_path: Path):
    result = run("ge", "demo", "--output", tmp_path / "demo", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())  # rich wraps long lines
    for model in DEMO_MODELS:
        assert (tmp_path / "demo" / f"{model.name}.om").is_file()
        for name in ("op_summary.csv", "trace.json"):
            assert (tmp_path / "demo" / f"{model.name}_profile" / name).is_file()
            assert f"wrote {Path('demo')}" in out or f"wrote {tmp_path / 'demo'}" in out
    assert out.count("ATC run success") == len(DEMO_MODELS)
    assert out.count("feature map") == len(DEMO_MODELS) and out.count("theoretical minimum") == len(DEMO_MODELS)
    assert out.count("samples/s at batch 1") == len(DEMO_MODELS) and "utilisation: cube" in out
    errors = [float(e) for e in re.findall(r"max abs error ([0-9.e+-]+) against the float32 reference interpreter", out)]
    assert len(errors) == len(DEMO_MODELS) and all(e < 0.05 for e in errors), errors


def test_ge_inspect_shows_ops_inputs_and_weights():
    result = run("ge", "inspect", RESNET.path, "--input_shape=input:1,3,32,32")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "[1, 3, 32, 32]" in out
    assert "logits" in out
    assert "ops by type" in out
    assert "fc.weight" in out


@pytest.mark.parametrize("where", ["before", "after"])
def test_ge_errors_are_one_line_and_debug_shows_traceback(tmp_path: Path, where: str):
    bad = _random_bytes(tmp_path)
    assert_fails_cleanly(run("ge", "inspect", bad), "ge", "[E16005]")
    args = ["--log=debug", "inspect", bad] if where == "before" else ["inspect", bad, "--log=debug"]
    debug = run("ge", *args)
    assert debug.returncode == 1
    assert "Traceback (most recent call last)" in debug.stderr


def test_ge_inspect_bad_input_shape_is_an_option_error():
    result = run("ge", "inspect", RESNET.path, "--input_shape=input:1,3")
    assert_fails_cleanly(result, "ge", "[E10001]")
