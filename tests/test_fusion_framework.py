"""The fusion framework as a CANN user meets it: pass order, fusion_switch_file,
fusion_result.json, graph dumps, `ge.pipeline.optimize` and `ge optimize`; and the
acceptance figures on ResNet-50 and BERT-base (slow)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from dialects.ascend_graph import (
    AddOp,
    BatchNormOp,
    Conv2DOp,
    ExpOp,
    MatMulV2Op,
    MulOp,
    ReluOp,
    SplitOp,
    TanhOp,
)
from ge import fusion_switch
from ge.core import ir
from ge.core.errors import OptionError
from ge.core.options import CompileOptions
from ge.pipeline import PHASES, optimize
from ge.testing import GraphBuilder, clone
from passes.fusion import (
    FUSION_PASSES,
    Band,
    FusionCounts,
    FusionKind,
    FusionPass,
    FusionStatistics,
    builtin_fusion_passes,
    ordered,
)
from dialects.kernel_boundary import is_no_task, kernel_scopes

BIN = Path(sys.executable).parent
TINY_RESNET = Path(__file__).resolve().parents[1] / "ge" / "models" / "tiny_resnet.onnx"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No dump or work-path variables from outside, and a scratch current directory."""
    for var in ("DUMP_GE_GRAPH", "DUMP_GRAPH_LEVEL", "ASCEND_WORK_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def small_graph():
    """conv -> batch_norm -> relu -> (+ x) and exp -> tanh -> split -> relu, relu:
    ConvBatchnormFusionPass, UB fusion and the Split no-task all have work."""
    b = GraphBuilder(0)
    x = b.input([1, 4, 6, 6])
    w = b.random_weight((4, 4, 3, 3))
    c = b.op(Conv2DOp, [x, w], strides=(1, 1, 1, 1), pads=(1, 1, 1, 1), dilations=(1, 1, 1, 1), groups=1)
    ones = [b.random_weight((4,), low=0.5, high=1.5) for _ in range(4)]
    bn = b.op(BatchNormOp, [c, *ones], epsilon=1e-5)
    r = b.op(ReluOp, [b.op(AddOp, [bn, x])])
    t = b.op(TanhOp, [b.op(ExpOp, [b.op(MulOp, [r, b.constant(0.1)])])])
    parts = b.op(SplitOp, [t], split_dim=0, num_split=1)
    b.op(ReluOp, [parts.results[0]])
    mm = b.op(MatMulV2Op, [b.input([4, 8]), b.random_weight((8, 16))], transpose_x1=False, transpose_x2=False)
    b.op(ReluOp, [b.op(AddOp, [mm, b.random_weight((16,))])])
    return b.finish()


# ------------------------------------------------------------------------ order


@pytest.mark.parametrize("kind", list(FusionKind))
def test_ge_order_is_band_then_name(kind: FusionKind) -> None:
    builtin_fusion_passes()
    passes = ordered(kind)
    assert passes, f"no {kind.value} pass registered"
    keys = [(p.band, p.name) for p in passes]
    assert keys == sorted(keys)
    assert all(p.kind is kind for p in passes)


def test_band_beats_name() -> None:
    """TbeConvDoubleIn (top) before TbeCommonRules0 (main) although C-o-m < C-o-n,
    and the automatic UB fusion (down) after every named UB pass."""
    builtin_fusion_passes()
    ub = [p.name for p in ordered(FusionKind.UB)]
    assert ub.index("TbeConvDoubleInFusionPass") < ub.index("TbeCommonRules0FusionPass")
    named = ("TbeCommonRules0FusionPass", "TbeMatmulElemwiseFusionPass", "TbeBatchMatmulElementWiseFusionPass")
    assert all(ub.index(name) < ub.index("AutomaticUbFusion") for name in named)
    assert FUSION_PASSES["AutomaticUbFusion"].band is Band.DOWN


# ------------------------------------------------------------------ switch file


@dataclass(frozen=True)
class _Pinned(FusionPass):
    """A pass GE forbids to close (a stand-in: none of ours is)."""

    name = "PinnedTestFusionPass"
    kind: ClassVar[FusionKind] = FusionKind.GRAPH
    closable: ClassVar[bool] = False

    def fuse(self, module, counts: FusionCounts) -> None:
        return None


@pytest.fixture
def pinned(monkeypatch: pytest.MonkeyPatch) -> str:
    builtin_fusion_passes()
    monkeypatch.setitem(FUSION_PASSES, _Pinned.name, _Pinned)
    return _Pinned.name


def switch(tmp_path: Path, doc: object) -> fusion_switch.FusionSwitches:
    return fusion_switch.load(write(tmp_path / "switch.cfg", json.dumps(doc)))


def test_all_off_closes_every_closable_pass_of_its_kind(tmp_path: Path, pinned: str) -> None:
    s = switch(tmp_path, {"Switch": {"GraphFusion": {"ALL": "off"}}})
    assert not s.enabled("ConvBatchnormFusionPass") and not s.enabled("MatMulBiasAddFusionPass")
    assert s.enabled(pinned), "a pass GE forbids to close stays on"
    assert s.enabled("AutomaticUbFusion") and s.enabled("FusionVirtualOpSetSwitch")


def test_per_pass_entries_override_all_in_both_directions(tmp_path: Path, pinned: str) -> None:
    s = switch(tmp_path, {"Switch": {
        "GraphFusion": {"ConvBatchnormFusionPass": "on", "ALL": "off", pinned: "off"},
        "UBFusion": {"ALL": "on", "AutomaticUbFusion": "off", "FusionVirtualOpSetSwitch": "off"},
    }})
    assert s.enabled("ConvBatchnormFusionPass") and not s.enabled("SoftmaxFusionPass")
    assert s.enabled(pinned)
    assert not s.enabled("AutomaticUbFusion") and not s.enabled("FusionVirtualOpSetSwitch")
    assert s.enabled("TbeMatmulElemwiseFusionPass")


def test_line_format(tmp_path: Path) -> None:
    s = fusion_switch.load(write(tmp_path / "switch.cfg", "# closed for debugging\nConvBatchnormFusionPass:off\n\n  AutomaticUbFusion : off  # trailing\nSoftmaxFusionPass:on\n"))
    assert not s.enabled("ConvBatchnormFusionPass") and not s.enabled("AutomaticUbFusion")
    assert s.enabled("SoftmaxFusionPass") and s.enabled("MatMulBiasAddFusionPass")


@pytest.mark.parametrize(("text", "message"), [
    ('{"Switch": {"GraphFusion": {"ConvBatchnormFusionPass": "off",}}}', r"line 1: malformed JSON"),
    ('{\n"Switch": {\n"GraphFusion": {"NoSuchPass": "off"}}}', r'key "Switch.GraphFusion.NoSuchPass": unknown fusion pass \'NoSuchPass\''),
    ('{"Switch": {"UBFusion": {"ConvBatchnormFusionPass": "off"}}}', r"ConvBatchnormFusionPass is a GraphFusion pass, not UBFusion"),
    ('{"Switch": {"GraphFusion": {"ALL": false}}}', r'key "Switch.GraphFusion.ALL": value False must be "on" or "off"'),
    ('{"Switch": {"Fusion": {}}}', r'key "Switch.Fusion" must be GraphFusion or UBFusion'),
    ('{"GraphFusion": {}}', r'must be an object with a "Switch" object'),
    ("ConvBatchnormFusionPass:off\nAutomaticUbFusion off\n", r"line 2: expected 'PassName:off'"),
    ("ConvBatchnormFusionPass:off\nNoSuchPass:off\n", r"line 2: unknown fusion pass 'NoSuchPass'"),
    ("ConvBatchnormFusionPass:maybe\n", r"line 1: value 'maybe' must be"),
])
def test_malformed_switch_files_name_the_line_or_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "switch.cfg", text)
    with pytest.raises(OptionError, match=message) as info:
        fusion_switch.load(path)
    assert "\n" not in str(info.value) and path in str(info.value)


def test_a_ge_pass_we_do_not_have_is_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    s = fusion_switch.load(write(tmp_path / "switch.cfg", "PoolingFusionPass:off\n"))
    assert s.overrides == {}
    assert "PoolingFusionPass is a GE pass not implemented here" in caplog.text


def test_missing_switch_file_is_an_option_error(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match="does not exist"):
        CompileOptions(fusion_switch_file=str(tmp_path / "nope.cfg"))


# ------------------------------------------------------------ fusion_result.json


def _stats() -> FusionStatistics:
    stats = FusionStatistics(session_id=3, graph_id=7)
    graph, ub, unmatched = FusionCounts(), FusionCounts(), FusionCounts()
    ops = [ExpOp([GraphBuilder(0).input([2])]) for _ in range(3)]
    for op in ops:
        graph.match(op)
    graph.match(ops[0])
    graph.effect()
    graph.effect()
    ub.match(ops[0])
    ub.effect()
    stats.record(FusionKind.GRAPH, "ConvBatchnormFusionPass", graph)
    stats.record(FusionKind.UB, "AutomaticUbFusion", ub)
    stats.record(FusionKind.GRAPH, "SoftmaxFusionPass", unmatched)
    return stats


def test_result_has_ge_structure() -> None:
    path = _stats().write()
    assert path == os.path.abspath("fusion_result.json")
    text = Path(path).read_text()
    assert json.loads(text) == {"session_and_graph_id_3_7": {
        "graph_fusion": {"ConvBatchnormFusionPass": {"effect_times": "2", "match_times": "3"}},
        "ub_fusion": {"AutomaticUbFusion": {"effect_times": "1", "match_times": "1", "repository_hit_times": "0"}},
    }}
    assert text.startswith('{\n    "session_and_graph_id_3_7": {\n        "graph_fusion": {\n            "ConvBatchnormFusionPass"')


def test_result_goes_under_ascend_work_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ASCEND_WORK_PATH", str(tmp_path / "work"))
    path = _stats().write()
    assert path == str(tmp_path / "work" / "FE" / str(os.getpid()) / "fusion_result.json")
    assert "session_and_graph_id_3_7" in json.loads(Path(path).read_text())


def test_graphs_of_one_process_share_the_file(tmp_path: Path) -> None:
    Path("fusion_result.json").write_text('{"session_and_graph_id_9_9": {}}')  # another run's file
    first = _stats()
    first.write(str(tmp_path / "out"))
    second = _stats()
    second.graph_id = 8
    path = second.write(str(tmp_path / "out"))
    assert set(json.loads(Path(path).read_text())) == {"session_and_graph_id_3_7", "session_and_graph_id_3_8"}
    _stats().write()
    assert set(json.loads(Path("fusion_result.json").read_text())) == {"session_and_graph_id_3_7"}


def test_nothing_matched_writes_nothing() -> None:
    assert FusionStatistics().write() is None and not Path("fusion_result.json").exists()


@pytest.mark.parametrize(("stat", "after_optimize", "after_finish"), [(0, False, False), (1, False, True), (2, True, True)])
def test_export_compile_stat(stat: int, after_optimize: bool, after_finish: bool) -> None:
    compilation = optimize(clone(small_graph().module), CompileOptions(export_compile_stat=stat))
    assert Path("fusion_result.json").exists() is after_optimize
    compilation.finish()
    assert Path("fusion_result.json").exists() is after_finish


def test_result_omits_closed_passes_and_split_no_task(tmp_path: Path) -> None:
    on = optimize(clone(small_graph().module), CompileOptions(export_compile_stat=0))
    assert on.statistics.get("ConvBatchnormFusionPass").effect_times == 1
    assert any(is_no_task(op) for op in on.module.walk())
    doc = on.statistics.to_json()["session_and_graph_id_0_0"]
    assert "ConvBatchnormFusionPass" in doc["graph_fusion"] and "AutomaticUbFusion" in doc["ub_fusion"]
    assert "FusionVirtualOpSetSwitch" not in json.dumps(doc)

    closed = write(tmp_path / "switch.cfg", "ConvBatchnormFusionPass:off\nAutomaticUbFusion:off\n")
    off = optimize(clone(small_graph().module), CompileOptions(fusion_switch_file=closed, export_compile_stat=2))
    doc = json.loads(Path(off.result_file).read_text())["session_and_graph_id_0_0"]
    assert "ConvBatchnormFusionPass" not in doc.get("graph_fusion", {})
    assert "AutomaticUbFusion" not in doc.get("ub_fusion", {})
    assert sum(isinstance(op, BatchNormOp) for op in off.module.walk()) == 1


# ------------------------------------------------------------------ the pipeline


def test_optimize_keeps_values_and_reduces_kernels() -> None:
    from ge.testing import assert_equivalent

    case = small_graph()
    module = clone(case.module)
    compilation = optimize(module, CompileOptions(export_compile_stat=0, precision_mode="must_keep_origin_dtype"))
    assert compilation.module is module
    fusion_phases = ["prepare", "optimize original graph", "optimize subgraph", "before build"]
    assert [p for p in compilation.timings if p in fusion_phases] == fusion_phases
    assert kernel_scopes(module) < kernel_scopes(case.module)
    assert_equivalent(case, module)


@pytest.mark.parametrize(("part", "fused"), [("Ascend310P3", True), ("Ascend910B1", False)])
def test_ub_fusion_follows_the_soc_version(part: str, fused: bool) -> None:
    """tanh(x) * sum(tanh(x)) over rows of 40000 float16: a 240 KB working set, inside
    the 256 KB UB of a 310P3, beyond the 192 KB of a 910B1."""
    from dialects.ascend_graph import ReduceSumOp
    from dialects.kernel_boundary import scope_of

    b = GraphBuilder(0, dtype="float16")
    t = b.op(TanhOp, [b.input([1, 40000])])
    b.op(MulOp, [t, b.op(ReduceSumOp, [t], axes=(1,), keep_dims=True)])
    options = CompileOptions(export_compile_stat=0, soc_version=part, precision_mode="must_keep_origin_dtype")
    module = optimize(clone(b.finish().module), options).module
    ids = {scope_of(op) for op in module.walk() if getattr(op, "OP_TYPE", "") in ("Tanh", "ReduceSumD", "Mul")}
    assert (len(ids) == 1 and None not in ids) is fused


def _dumps(tmp_path: Path) -> dict[str, str]:
    found = {}
    for path in sorted(tmp_path.glob("*.mlir")):
        m = re.fullmatch(r"ge_onnx_(\d{8})_graph_(\d+)_(\w+)\.mlir", path.name)
        assert m, path.name
        found[m.group(3)] = path.read_text()
    return found


def test_dumps_show_no_task_appear_before_the_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DUMP_GE_GRAPH", "2")
    monkeypatch.setenv("DUMP_GRAPH_LEVEL", "2")
    monkeypatch.setenv("ASCEND_WORK_PATH", str(tmp_path))
    compilation = optimize(clone(small_graph().module), CompileOptions(export_compile_stat=0, graph_id=5))
    dumps = _dumps(tmp_path)
    assert list(dumps) == list(PHASES) or set(dumps) == set(PHASES)
    assert len(compilation.dumps) == len(PHASES) and all("_graph_5_" in p for p in compilation.dumps)
    assert "_no_task" not in dumps["AfterUBFusion"]
    assert "_no_task = true" in dumps["PreRunAfterOptimizeGraphBeforeBuild"]
    assert "ascend_graph.batch_norm" in dumps["AfterInferShape"] and "ascend_graph.batch_norm" not in dumps["OptimizeOriginalGraph"]
    assert "_fusion_scope" in dumps["AfterUBFusion"] and "_fusion_scope" not in dumps["OptimizeOriginalGraph"]
    ir.parse(dumps["PreRunAfterOptimizeGraphBeforeBuild"])


@pytest.mark.parametrize(("level", "phases"), [
    ("3", ["PreRunAfterOptimizeGraphBeforeBuild"]),
    ("4", ["PreRunBegin"]),
    ("AfterUBFusion|OptimizeOriginalGraph", ["OptimizeOriginalGraph", "AfterUBFusion"]),
])
def test_dump_graph_level(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, level: str, phases: list[str]) -> None:
    monkeypatch.setenv("DUMP_GE_GRAPH", "2")
    monkeypatch.setenv("DUMP_GRAPH_LEVEL", level)
    optimize(clone(small_graph().module), CompileOptions(export_compile_stat=0))
    assert sorted(_dumps(tmp_path)) == sorted(phases)


def test_dump_ge_graph_3_is_an_op_list(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DUMP_GE_GRAPH", "3")
    monkeypatch.setenv("DUMP_GRAPH_LEVEL", "PreRunAfterOptimizeGraphBeforeBuild")
    optimize(clone(small_graph().module), CompileOptions(export_compile_stat=0))
    (text,) = _dumps(tmp_path).values()
    assert any(line.startswith("ascend_graph.split_d") and "_no_task=true" in line for line in text.splitlines())


@pytest.mark.parametrize(("var", "value"), [("DUMP_GE_GRAPH", "7"), ("DUMP_GRAPH_LEVEL", "AfterLunch")])
def test_bad_dump_variables(monkeypatch: pytest.MonkeyPatch, var: str, value: str) -> None:
    monkeypatch.setenv("DUMP_GE_GRAPH", "2")
    monkeypatch.setenv(var, value)
    with pytest.raises(OptionError, match=var):
        optimize(clone(small_graph().module), CompileOptions(export_compile_stat=0))


# -------------------------------------------------------------------- ge optimize


def ge(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DUMP_GE_GRAPH", "DUMP_GRAPH_LEVEL", "ASCEND_WORK_PATH")}
    return subprocess.run([str(BIN / "ge"), *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env)


def test_ge_optimize_reports_and_writes(tmp_path: Path) -> None:
    result = ge("optimize", TINY_RESNET, "--output=out.mlir", "--soc_version=Ascend910B1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for phase in ("import", "prepare", "optimize original graph", "optimize subgraph", "before build"):
        assert re.search(rf"{phase}\s+│\s+[\d.]+ ms", out), phase
    before, after = map(int, re.search(r"kernels: (\d+) before, (\d+) after", out).groups())
    assert after < before
    assert re.search(r"ConvBatchnormFusionPass\s+│ GraphFusion\s+│\s+\d+ │\s+\d+", out)
    result_file = json.loads((tmp_path / "fusion_result.json").read_text())
    assert "ConvBatchnormFusionPass" in result_file["session_and_graph_id_0_0"]["graph_fusion"]
    module = ir.parse((tmp_path / "out.mlir").read_text())
    assert kernel_scopes(module) == after
    assert len(list(tmp_path.glob("out.mlir.*.npz"))) == 1  # the folded filters


def test_ge_optimize_export_compile_stat_0_and_switch_file(tmp_path: Path) -> None:
    write(tmp_path / "switch.cfg", '{"Switch": {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "off"}}}')
    result = ge("optimize", TINY_RESNET, "--fusion_switch_file=switch.cfg", "--export_compile_stat=0", "-o", "out.mlir", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "fusion_result.json").exists()
    assert re.search(r"ConvBatchnormFusionPass\s+│ GraphFusion\s+│\s+off", result.stdout)
    text = (tmp_path / "out.mlir").read_text()
    assert "ascend_graph.batch_norm" in text and "_fusion_scope" not in text


@pytest.mark.parametrize(("args", "fragment"), [
    (("--fusion_switch_file=bad.cfg",), "bad.cfg': line 1: unknown fusion pass 'Nope'"),
    (("--export_compile_stat=3",), "export_compile_stat 3 is not allowed"),
    (("--soc_version=Ascend999",), "soc_version 'Ascend999' is not allowed"),
    (("--output=missing/out.mlir",), "directory 'missing' does not exist"),
])
def test_ge_optimize_errors_are_one_line(tmp_path: Path, args: tuple[str, ...], fragment: str) -> None:
    write(tmp_path / "bad.cfg", "Nope:off\n")
    result = ge("optimize", TINY_RESNET, *args, "--output=out.mlir" if "--output" not in args[0] else args[0], cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ge: error: ") and fragment in lines[0], result.stderr
    assert not list(tmp_path.glob("out.mlir*")) and not (tmp_path / "fusion_result.json").exists()


# ------------------------------------------------------------------ real models


def _optimised(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, switch_file: str | None = None, **options):
    import ge as engine
    from ge.testing.real_models import model_path

    monkeypatch.setenv("ASCEND_WORK_PATH", str(tmp_path))
    monkeypatch.setenv("DUMP_GE_GRAPH", "2")
    monkeypatch.setenv("DUMP_GRAPH_LEVEL", "OptimizeOriginalGraph")
    module, _ = engine.load_onnx(str(model_path(name)))
    compilation = optimize(module, CompileOptions(fusion_switch_file=switch_file, export_compile_stat=2, **options))
    return compilation, json.loads(Path(compilation.result_file).read_text())["session_and_graph_id_0_0"]


def _close_to_onnxruntime(name: str, module) -> None:
    from ge.testing.real_models import model_inputs, model_path, onnxruntime_outputs

    from ge.core import reference

    feeds = model_inputs(model_path(name))
    want = onnxruntime_outputs(model_path(name), feeds)
    got = reference.run(module, feeds)
    for out, expected in want.items():
        error = float(np.max(np.abs(got[out].astype(np.float64) - expected))) / float(np.max(np.abs(expected)))
        assert error <= 1e-4, f"{name}:{out}: max|ours - ort| / max|ort| = {error:.3g}"


@pytest.mark.slow
def test_resnet50_fusion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept in float32 (must_keep_origin_dtype), so that the comparison measures the fusions,
    on Ascend910B1, whose cube reads float32 (elsewhere float32 convolutions are AI CPU
    kernels, which UB fusion never joins)."""
    compilation, result = _optimised(
        "resnet50", tmp_path, monkeypatch, precision_mode="must_keep_origin_dtype", soc_version="Ascend910B1"
    )
    assert kernel_scopes(compilation.module) <= 58
    assert result["graph_fusion"]["ConvBatchnormFusionPass"] == {"effect_times": "53", "match_times": "53"}
    _close_to_onnxruntime("resnet50", compilation.module)


@pytest.mark.slow
def test_resnet50_with_conv_batchnorm_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    closed = write(tmp_path / "switch.cfg", json.dumps({"Switch": {"GraphFusion": {"ConvBatchnormFusionPass": "off"}}}))
    compilation, result = _optimised("resnet50", tmp_path, monkeypatch, closed)
    assert "ConvBatchnormFusionPass" not in result.get("graph_fusion", {})
    (dump,) = [p for p in compilation.dumps if p.endswith("_OptimizeOriginalGraph.mlir")]
    assert Path(dump).read_text().count("ascend_graph.batch_norm ") == 53


@pytest.mark.slow
def test_bert_base_fusion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compilation, _ = _optimised("bert_base", tmp_path, monkeypatch)
    ops = [op.name.removeprefix("ascend_graph.") for op in compilation.module.walk()]
    assert ops.count("layer_norm") == 25 and "reduce_mean_d" not in ops and "sqrt" not in ops
    assert ops.count("gelu") == 12 and "erf" not in ops
    assert ops.count("multi_head_attention") == 12 and "softmax_v2" not in ops
    assert kernel_scopes(compilation.module) <= 200
