"""An outside pass, as a pass author writes one with the README and the kit: a plug-in
file with `from __future__ import annotations` and a pass option, importing a module
beside it, joins `ge-opt`, `ge atc` (switch file and fusion_result.json included) and
`ge optimize`, and loads twice without complaint."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from passes import registry
from passes.fusion import FUSION_PASSES

BIN = Path(sys.executable).parent
EXAMPLE = Path(__file__).resolve().parent / "plugin_example"
PASS = "MulByOneFusionPass"


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    """The example plug-in and its helper module, copied where no import path reaches them."""
    folder = tmp_path / "my_passes"
    shutil.copytree(EXAMPLE, folder)
    return folder / "mul_by_one.py"


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """y = relu(x * 1) + relu(x * [1, 2, 1, 1]): one Mul the plug-in removes, one it must keep."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    scale = helper.make_tensor("scale", TensorProto.FLOAT, [4], [1.0, 2.0, 1.0, 1.0])
    nodes = [
        helper.make_node("Mul", ["x", "one"], ["a"], name="times_one"),
        helper.make_node("Relu", ["a"], ["b"], name="relu_a"),
        helper.make_node("Mul", ["x", "scale"], ["c"], name="times_scale"),
        helper.make_node("Relu", ["c"], ["d"], name="relu_c"),
        helper.make_node("Add", ["b", "d"], ["y"], name="add"),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=[one, scale])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd)


def test_the_plugin_loads_twice_and_registers_its_fusion_pass(plugin: Path) -> None:
    registry.load_plugin(str(plugin))
    registry.load_plugin(str(plugin))
    cls = registry.get_pass(PASS)
    assert FUSION_PASSES[PASS] is cls
    assert cls(tolerance=0.5).tolerance == 0.5  # the option's annotation resolves through its module
    assert str(cls(tolerance=0.5)) == f"{PASS}{{tolerance=0.5}}"


def test_ge_opt_runs_the_plugin_pass_with_its_option(plugin: Path, model: Path, tmp_path: Path) -> None:
    result = run(BIN / "ge-opt", f"--load-pass-plugin={plugin}", model, "-p", f"{PASS}{{tolerance=0.0}}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("ascend_graph.mul") == 1  # times_scale stays: its constant is not all ones
    listing = run(BIN / "ge-opt", f"--load-pass-plugin={plugin}", "--help", cwd=tmp_path)
    assert PASS in listing.stdout and "tolerance" in listing.stdout


def test_ge_atc_takes_the_plugin_into_the_compile_and_fusion_result(plugin: Path, model: Path, tmp_path: Path) -> None:
    result = run(
        BIN / "ge", "atc", f"--load-pass-plugin={plugin}", f"--model={model}", "--framework=5", "--output=m",
        "--soc_version=Ascend310P3", cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads((tmp_path / "fusion_result.json").read_text())
    (graph,) = doc.values()
    assert graph["graph_fusion"][PASS] == {"match_times": "2", "effect_times": "1"}

    import ge

    x = np.array([[1.0, -2.0, 3.0, 4.0]], np.float32)
    got = ge.Session().run(tmp_path / "m.om", {"x": x}).outputs["y"]
    np.testing.assert_allclose(got, np.maximum(x, 0) + np.maximum(x * [1, 2, 1, 1], 0), rtol=1e-3)


def test_a_switch_file_may_close_the_plugin_pass(plugin: Path, model: Path, tmp_path: Path) -> None:
    (tmp_path / "switch.cfg").write_text(f"{PASS}:off\n")
    result = run(
        BIN / "ge", "optimize", model, f"--load-pass-plugin={plugin}", "--fusion_switch_file=switch.cfg", cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert PASS in result.stdout and "off" in result.stdout
    without = run(BIN / "ge", "optimize", model, "--fusion_switch_file=switch.cfg", cwd=tmp_path)
    assert without.returncode == 1 and PASS in without.stderr  # unknown without the plug-in


def test_ge_opt_names_the_pass_that_broke_the_ir(model: Path, tmp_path: Path) -> None:
    (tmp_path / "breaker.py").write_text(
        "from dataclasses import dataclass\n"
        "from xdsl.dialects.builtin import TensorType, f16\n"
        "from xdsl.passes import ModulePass\n"
        "from dialects.ascend_graph import ReluOp\n"
        "from passes.registry import register_pass\n\n"
        "@register_pass\n"
        "@dataclass(frozen=True)\n"
        "class BreakRelu(ModulePass):\n"
        '    """Give every Relu a result type its operand does not have."""\n'
        '    name = "break-relu"\n\n'
        "    def apply(self, ctx, op):\n"
        "        for relu in [o for o in op.walk() if isinstance(o, ReluOp)]:\n"
        "            relu.results[0]._type = TensorType(f16, [9])\n"
    )
    result = run(BIN / "ge-opt", "--load-pass-plugin=breaker.py", model, "-p", "cse,break-relu,dce", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("ge-opt: error: IR does not verify: after pass 'break-relu': Relu 'relu_a'"), result.stderr
