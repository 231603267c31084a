"""Data dumps, overflow detection and `ge compare` (`ge.sim.dump`, `ge.cli.compare`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
from dialects import ascend_graph as ag
from ge.cli.compare import RTOL, match
from ge.cli.main import main
from ge.core import reference
from ge.core.errors import OptionError
from ge.core.ir import graph_of
from ge.sim.config import RunConfig, dump_steps
from ge.sim.dump import NonFiniteWarning

ROOT = Path(__file__).resolve().parent.parent
TINY_RESNET = ROOT / "ge" / "models" / "tiny_resnet.onnx"


@pytest.fixture(scope="module")
def resnet() -> ge.Model:
    return ge.compile(TINY_RESNET)


@pytest.fixture(scope="module")
def image() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)


def manifest(folder: Path) -> list[dict]:
    return json.loads((folder / "manifest.json").read_text())["tensors"]


def kernel_outputs(model: ge.Model) -> int:
    from ge.om.tasks import KernelTask

    return sum(len(t.outputs) for t in model.tasks if isinstance(t, KernelTask))


def reference_values(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every op's first result on the reference interpreter, by ONNX node name."""
    module, weights = ge.load_onnx(path)
    values: dict = {}
    by_name = {}
    with np.errstate(all="ignore"):
        for op in graph_of(module).body.block.ops:
            if isinstance(op, ag.DataOp):
                values[op.results[0]] = feeds[op.label]
                continue
            if isinstance(op, ag.NetOutputOp):
                break
            results = reference.evaluate_op(op, [values[v] for v in op.operands], weights)
            values.update(zip(op.results, results))
            if isinstance(op, ag.AscendOp):
                by_name[op.label] = results[0]
    return by_name


# ---------------------------------------------------------------------------- dumps


def test_a_dump_has_a_file_per_kernel_output_matching_the_reference(resnet, image, tmp_path: Path) -> None:
    ge.Session(RunConfig(enable_dump=True, dump_path=str(tmp_path))).run(resnet, {"input": image})
    entries = manifest(tmp_path / "0")
    assert len(entries) == kernel_outputs(resnet)
    assert sorted(p.name for p in (tmp_path / "0").glob("*.npy")) == sorted(e["file"] for e in entries)
    assert {e["tensor"] for e in entries} == {"output"}
    values = reference_values(TINY_RESNET, {"input": image})
    matched = match(entries, onnx.load(str(TINY_RESNET)))
    assert len(matched) >= 9  # every conv, pool and the fc (TransData and Cast name no node)
    for entry, node, _ in matched:
        dumped = np.load(tmp_path / "0" / entry["file"])
        assert str(dumped.dtype) == entry["dtype"] and list(dumped.shape) == entry["shape"]  # float16, or float32 after a fused output Cast
        want = values[node].astype(np.float64).reshape(dumped.shape)
        tolerance = RTOL["float16"] * max(1.0, float(np.abs(want).max()))
        assert np.abs(dumped.astype(np.float64) - want).max() <= tolerance, node


def test_a_dump_entry_names_its_task_kernel_ops_and_tensor(resnet, image, tmp_path: Path) -> None:
    ge.Session(RunConfig(enable_dump=True, dump_path=str(tmp_path))).run(resnet, {"input": image})
    entry = next(e for e in manifest(tmp_path / "0") if "stem.relu" in e["ops"])
    assert entry["ops"] == ["stem.conv", "stem.relu"] and entry["op_types"] == ["Conv2D", "Relu"]
    assert (entry["tensor"], entry["index"], entry["dtype"], entry["shape"]) == ("output", 0, "float16", [1, 16, 32, 32])
    assert entry["file"] == f"{entry['task']}.{entry['kernel']}.output.0.npy"


@pytest.mark.parametrize(("mode", "kinds"), [("input", {"input"}), ("output", {"output"}), ("all", {"input", "output"})])
def test_dump_mode_picks_inputs_outputs_or_both(resnet, image, tmp_path: Path, mode: str, kinds: set[str]) -> None:
    ge.Session(RunConfig(enable_dump=True, dump_path=str(tmp_path), dump_mode=mode)).run(resnet, {"input": image})
    entries = manifest(tmp_path / "0")
    assert {e["tensor"] for e in entries} == kinds
    if mode == "all":  # a kernel's input is the output of the kernel before it, as the device held it
        by = {(e["task"], e["tensor"], e["index"]): np.load(tmp_path / "0" / e["file"]) for e in entries}
        pool = next(e for e in entries if e["ops"] == ["stem.pool"])["task"]
        conv = next(e for e in entries if "stem.relu" in e["ops"])["task"]
        np.testing.assert_array_equal(by[(pool, "input", 0)], by[(conv, "output", 0)])


def test_dump_layer_dumps_only_the_kernels_of_the_named_ops(resnet, image, tmp_path: Path) -> None:
    config = RunConfig(enable_dump=True, dump_path=str(tmp_path), dump_layer="stem.relu avgpool")
    ge.Session(config).run(resnet, {"input": image})
    assert sorted(e["ops"][-1] for e in manifest(tmp_path / "0")) == ["avgpool", "stem.relu"]


def test_dump_step_selects_a_sessions_iterations(resnet, image, tmp_path: Path) -> None:
    session = ge.Session(RunConfig(enable_dump=True, dump_path=str(tmp_path), dump_step="0|2-3"))
    for _ in range(5):
        session.run(resnet, {"input": image})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0", "2", "3"]
    assert dump_steps("0|5|10-20") == ((0, 0), (5, 5), (10, 20))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"enable_dump": True}, "enable_dump needs dump_path"),
        ({"enable_dump_debug": True}, "enable_dump_debug needs dump_debug_path"),
        ({"enable_dump": True, "dump_path": ".", "dump_mode": "both"}, "dump_mode 'both' is not allowed; use one of input, output, all"),
        ({"enable_dump": True, "dump_path": ".", "dump_step": "5-2"}, "'5-2' is not an iteration N or a range N-M"),
        ({"enable_dump": True, "dump_path": ".", "dump_step": "1|x"}, "'x' is not an iteration"),
        ({"enable_dump": True, "dump_path": ".", "dump_step": "|".join(map(str, range(101)))}, "at most 100"),
        ({"dump_mode": "all"}, "enable_dump is off, so dump_mode would do nothing"),
        ({"dump_path": "."}, "neither enable_dump nor enable_dump_debug is on"),
        ({"dump_debug_mode": "aicore_overflow"}, "enable_dump_debug is off"),
        ({"enable_dump": True, "dump_path": ".", "timing_only": True}, "timing_only computes none"),
        ({"enable_dump": True, "dump_path": f"{__file__}/dump"}, "is not a directory"),
        ({"enable_dump": True, "dump_path": ".", "dump_layer": " "}, "names no op"),
    ],
)
def test_bad_dump_options_are_refused(flags: dict, message: str) -> None:
    with pytest.raises(OptionError, match=message.replace("|", r"\|").replace("(", r"\(")):
        RunConfig.from_flags(**flags)


def ge_main(capsys, *args: str | Path) -> tuple[int, str]:
    """`ge ARGS` in this process: its exit code and what it printed."""
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    out = capsys.readouterr()
    return code, out.out + out.err


def test_ge_run_dumps_with_dump_path(tmp_path: Path, resnet, image, capsys) -> None:
    resnet.save(tmp_path / "m.om")
    np.save(tmp_path / "x.npy", image)
    args = ["run", str(tmp_path / "m.om"), "--input", str(tmp_path / "x.npy"), "--dump_path", str(tmp_path / "d"), "--dump_mode", "all"]
    code, output = ge_main(capsys, *args)
    assert code == 0, output
    assert f"wrote the dump to {tmp_path / 'd' / '0'}" in output
    assert {e["tensor"] for e in manifest(tmp_path / "d" / "0")} == {"input", "output"}
    code, output = ge_main(capsys, "run", tmp_path / "m.om", "--dump_step", "0")
    assert code != 0 and "enable_dump is off" in output


# ------------------------------------------------------------------------- overflow


def scale_model(path: Path, factor: float) -> Path:
    """x -> Relu 'relu' -> Mul by `factor` 'scale' -> Add to itself 'twice' (float32)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])
    k = numpy_helper.from_array(np.full((1,), factor, np.float32), "k")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Mul", ["r", "k"], ["m"], name="scale"),
        helper.make_node("Add", ["m", "m"], ["y"], name="twice"),
    ]
    graph = helper.make_graph(nodes, "scale", [x], [y], [k])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_float16_overflow_is_reported_naming_the_op(tmp_path: Path) -> None:
    model = ge.compile(scale_model(tmp_path / "m.onnx", 300.0), {"precision_mode": "force_fp16"})
    config = RunConfig(enable_dump_debug=True, dump_debug_path=str(tmp_path / "debug"))
    with pytest.warns(NonFiniteWarning) as caught:
        result = ge.Session(config).run(model, {"x": np.full((2, 8), 300.0, np.float32)})
    assert np.isinf(result.outputs["y"]).all()
    first = result.overflows[0]
    assert (first.op, first.op_type, first.dtype, first.weight) == ("scale", "Mul", "float16", False)
    warning = str(caught[-1].message)
    assert "output 'y' contains inf or NaN" in warning and "op 'scale' (Mul" in warning
    assert '--precision_mode=allow_mix_precision and --modify_mixlist=FILE holding {"black-list": {"to-add": ["Mul"]}}' in warning
    assert "--keep_dtype=FILE naming scale (or OpType::Mul)" in warning
    entries = manifest(tmp_path / "debug" / "0")
    assert {(e["task"], e["tensor"]) for e in entries} == {(first.task, "input"), (first.task, "output")}
    assert np.isfinite(np.load(tmp_path / "debug" / "0" / next(e["file"] for e in entries if e["tensor"] == "input"))).all()


def test_the_advice_works_and_a_finite_run_is_quiet(tmp_path: Path) -> None:
    path = scale_model(tmp_path / "m.onnx", 300.0)
    (tmp_path / "keep.cfg").write_text("scale\ntwice\n")
    model = ge.compile(path, {"keep_dtype": str(tmp_path / "keep.cfg")})
    with warnings.catch_warnings():
        warnings.simplefilter("error", NonFiniteWarning)
        result = ge.Session().run(model, {"x": np.full((2, 8), 300.0, np.float32)})
    np.testing.assert_array_equal(result.outputs["y"], np.full((2, 8), 180000.0, np.float32))
    assert result.overflows == ()


def test_an_infinite_weight_is_named_without_enable_dump_debug(tmp_path: Path) -> None:
    model = ge.compile(scale_model(tmp_path / "m.onnx", np.inf))
    with pytest.warns(NonFiniteWarning) as caught:
        result = ge.Session().run(model, {"x": np.ones((2, 8), np.float32)})
    assert (result.overflows[0].op, result.overflows[0].weight) == ("scale", True)
    assert "op 'scale' (Mul" in str(caught[-1].message) and "reads a weight holding inf/NaN" in str(caught[-1].message)


def test_a_weight_beyond_float16_saturates_and_the_overflow_is_the_next_ops(tmp_path: Path) -> None:
    model = ge.compile(scale_model(tmp_path / "m.onnx", 1e5))  # 1e5 is 65504 in float16, and 2 x 65504 is inf
    with pytest.warns(NonFiniteWarning) as caught:
        result = ge.Session().run(model, {"x": np.ones((2, 8), np.float32)})
    assert (result.overflows[0].op, result.overflows[0].weight) == ("twice", False)
    assert "op 'twice' (Add" in str(caught[-1].message)


def test_inf_from_the_inputs_is_not_blamed_on_an_op(tmp_path: Path) -> None:
    model = ge.compile(scale_model(tmp_path / "m.onnx", 2.0))
    with pytest.warns(NonFiniteWarning) as caught:
        result = ge.Session().run(model, {"x": np.full((2, 8), np.inf, np.float32)})
    assert result.overflows == ()
    assert "came from the model's inputs" in str(caught[-1].message)


def test_ge_run_prints_the_overflow_warning(tmp_path: Path) -> None:
    ge.compile(scale_model(tmp_path / "m.onnx", 300.0)).save(tmp_path / "m.om")
    np.save(tmp_path / "x.npy", np.full((2, 8), 300.0, np.float32))
    args = ["run", str(tmp_path / "m.om"), "--input", str(tmp_path / "x.npy"), "--enable_dump_debug", "--dump_debug_path", str(tmp_path / "dbg")]
    result = subprocess.run([sys.executable, "-m", "ge.cli.main", *args], check=False, capture_output=True, text=True, env=_env())
    assert result.returncode == 0, result.stderr
    assert "warning: output 'y' contains inf or NaN; the first to make them: op 'scale' (Mul" in result.stderr
    assert "overflow detection: 1 kernel tasks turned finite inputs into inf/NaN" in result.stdout


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


# -------------------------------------------------------------------------- compare

BROKEN_PASS = '''
from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from dialects.ascend_graph import MulOp
from passes.fusion import FusionPass, FusionPattern, fusion_pass
from passes.graph_match import constant_value


class DropAnyMul(FusionPattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: MulOp, rewriter: PatternRewriter) -> None:
        if constant_value(op.x2) is None or op.x1.type != op.y.type:
            return
        self.matched(op)
        rewriter.replace(op, [], [op.x1])
        self.effected()


@fusion_pass
@dataclass(frozen=True)
class BrokenMulFusionPass(FusionPass):
    """Drops x * c whatever c is: a fusion bug for ge compare to find."""

    name = "BrokenMulFusionPass"

    def patterns(self, counts):
        return [DropAnyMul(counts)]
'''


def chain_model(path: Path) -> Path:
    """x -> Conv 'conv' -> Relu 'relu' -> Mul by 1.5 'scale' -> Conv 'conv2' -> Sigmoid 'act'."""
    rng = np.random.default_rng(1)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32) * 0.3, "w1"),
        numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32) * 0.3, "w2"),
        numpy_helper.from_array(np.full((1,), 1.5, np.float32), "k"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r"], name="relu"),
        helper.make_node("Mul", ["r", "k"], ["m"], name="scale"),
        helper.make_node("Conv", ["m", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c2"], ["y"], name="act"),
    ]
    graph = helper.make_graph(nodes, "chain", [x], [y], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def ge_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ge.cli.main", *map(str, args)], check=False, capture_output=True, text=True, env=_env())


def test_ge_compare_finds_the_op_a_broken_fusion_changed(tmp_path: Path, capsys) -> None:
    onnx_path = chain_model(tmp_path / "chain.onnx")
    (tmp_path / "broken.py").write_text(BROKEN_PASS)
    np.save(tmp_path / "x.npy", np.random.default_rng(2).standard_normal((1, 4, 8, 8)).astype(np.float32))
    for name, plugin in (("good", ()), ("broken", (f"--load-pass-plugin={tmp_path / 'broken.py'}",))):
        atc = ge_cli("atc", *plugin, f"--model={onnx_path}", "--framework=5", f"--output={tmp_path / name}", "--soc_version=Ascend310P3")
        assert atc.returncode == 0, atc.stderr
        run = ge_cli("run", tmp_path / f"{name}.om", "--input", tmp_path / "x.npy", "--dump_path", tmp_path / f"dump_{name}")
        assert run.returncode == 0, run.stderr
    code, good = ge_main(capsys, "compare", tmp_path / "dump_good" / "0", onnx_path, "--input", f"x={tmp_path / 'x.npy'}")
    assert code == 0, good
    assert "all 2 ops match within their dtype's tolerance" in good
    code, broken = ge_main(capsys, "compare", tmp_path / "dump_broken", onnx_path, "--input", tmp_path / "x.npy")
    assert code == 0, broken
    assert "first diverging op: act (Conv2D+Sigmoid" in broken


def test_ge_compare_refuses_a_folder_without_a_manifest(tmp_path: Path, capsys) -> None:
    code, output = ge_main(capsys, "compare", tmp_path, TINY_RESNET)
    assert code != 0 and "holds no manifest.json" in output


def test_ge_compare_says_how_to_install_onnxruntime(tmp_path: Path, monkeypatch, resnet, image, capsys) -> None:
    ge.Session(RunConfig(enable_dump=True, dump_path=str(tmp_path))).run(resnet, {"input": image})
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now fails
    code, output = ge_main(capsys, "compare", tmp_path, TINY_RESNET)
    assert code != 0 and "pip install onnxruntime" in output


def test_virtual_instances_refuse_dumps(resnet) -> None:
    session = ge.Session(RunConfig(enable_dump=True, dump_path="."))
    with pytest.raises(OptionError, match="run the models one at a time to dump them"):
        session.run_instances([(resnet, 4), (resnet, 4)])
