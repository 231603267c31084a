"""`ge atc --mode=1|3|5|6`, run as a user runs them: the JSON they write, the pre-check's
report and exit code, the information display, and every way their command lines fail
(one `ge: error:` line, exit code 1, nothing written)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from google.protobuf import json_format
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.core.errors import GEError, ModelError
from ge.frontend.precheck import precheck
from ge.models import DEMO_MODELS
from ge.om.tasks import KernelTask

BIN = Path(sys.executable).parent
RESNET, BERT = DEMO_MODELS[0].path, DEMO_MODELS[1].path


def atc(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "ge"), "atc", *map(str, args)], check=False, capture_output=True, text=True, cwd=cwd, env={**os.environ, **(env or {})}
    )


def assert_fails_cleanly(result: subprocess.CompletedProcess[str], cwd: Path, *fragments: str) -> None:
    """Exit code 1, one `ge: error:` line with the fragments, no traceback, no file written."""
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ge: error: "), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert os.listdir(cwd) == [], os.listdir(cwd)


@pytest.fixture(scope="module")
def om(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("om") / "tiny_resnet.om"
    ge.compile(RESNET, {"soc_version": "Ascend310P3", "export_compile_stat": 0}).save(path)
    return path


def unsupported_model() -> onnx.ModelProto:
    """Three ops the importer lacks (RandomNormalLike twice, GlobalLpPool), an attribute
    Sigmoid does not have and a Softmax axis out of range; IsNaN and the second
    RandomNormalLike sit behind failed nodes, and a dead Multinomial branch is not
    imported at all."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = [
        numpy_helper.from_array(np.ones((4, 4, 3, 3), np.float32), "w"),
        numpy_helper.from_array(np.zeros((2, 1), np.int64), "idx"),
        numpy_helper.from_array(np.ones((1, 32, 8), np.float32), "lstm_w"),
        numpy_helper.from_array(np.ones((1, 32, 8), np.float32), "lstm_r"),
    ]
    nodes = [
        helper.make_node("RandomNormalLike", ["x"], ["lrn"], name="noise"),
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("GlobalLpPool", ["r"], ["ct"], name="lppool"),
        helper.make_node("Sigmoid", ["r"], ["sig"], name="sigmoid", alpha=1.0),
        helper.make_node("Softmax", ["r"], ["sm"], name="softmax", axis=7),
        helper.make_node("IsNaN", ["sm"], ["nan"], name="isnan"),
        helper.make_node("Where", ["nan", "ct", "lrn"], ["wh"], name="where"),
        helper.make_node("Add", ["wh", "sig"], ["s"], name="add"),
        helper.make_node("RandomNormalLike", ["s"], ["y"], name="noise2"),
        helper.make_node("Reshape", ["x"], ["dead_in"], name="dead_reshape"),
        helper.make_node("Multinomial", ["dead_in"], ["dead"], name="dead_multinomial"),
    ]
    graph = helper.make_graph(nodes, "unsupported", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def bad_onnx(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bad") / "unsupported.onnx"
    onnx.save(unsupported_model(), path)
    return path


# --------------------------------------------------------------------- --mode=1


def test_mode1_writes_an_om_as_json(om, tmp_path):
    result = atc("--mode=1", f"--om={om}", "--json=model.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    doc = json.loads((tmp_path / "model.json").read_text())
    model = ge.load_model(om)
    description = model.description()
    assert doc["tasks"] == description["tasks"]
    assert doc["memory"] == description["memory"] and doc["memory"]["tensors"]
    assert doc["inputs"] == description["inputs"] and doc["outputs"] == description["outputs"]
    assert doc["options"] == model.options and doc["build"] == model.build
    assert doc["soc_version"] == "Ascend310P3"
    launches = [t for t in model.tasks if isinstance(t, KernelTask)]
    json_launches = [t for t in doc["tasks"] if t["kind"] == "KERNEL"]
    assert [t["block_dim"] for t in json_launches] == [t.block_dim for t in launches]
    kernels = {k["name"]: k for k in doc["kernels"]}
    for task in launches:
        assert kernels[task.kernel]["block_dim"] == task.block_dim
        assert {"op_types", "core_type", "tiling", "workspace", "args"} <= set(kernels[task.kernel])
    assert [n["kernel"] for n in doc["graph"]] == [t.kernel for t in launches]
    names = {p.name for p in model.memory.placements}
    for node in doc["graph"]:
        assert node["ops"] and set(node["inputs"]) | set(node["outputs"]) <= names
    conv = next(n for n in doc["graph"] if any(op["type"] == "Conv2D" for op in n["ops"]))
    assert {op["name"] for op in conv["ops"]} >= {"stem.conv"}


def test_mode1_writes_an_onnx_model_as_json_without_its_weights(tmp_path):
    result = atc("--mode=1", f"--om={BERT}", "--framework=5", "--json=bert.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "bert.json").read_text()
    assert len(text) < BERT.stat().st_size
    proto = json_format.Parse(text, onnx.ModelProto())  # ONNX's own JSON mapping: it reads back
    source = onnx.load(BERT)
    assert [n.op_type for n in proto.graph.node] == [n.op_type for n in source.graph.node]
    for tensor in proto.graph.initializer:
        large = np.prod(tensor.dims) > 16
        assert (not tensor.raw_data and "data of" in tensor.doc_string and "sha256" in tensor.doc_string) == large
    assert any(t.raw_data or t.int64_data for t in proto.graph.initializer)  # small ones (shapes) are kept


def test_mode1_writes_json_alone_to_standard_output(om, tmp_path):
    result = atc("--mode=1", f"--om={om}", "--json=-", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["soc_version"] == "Ascend310P3"
    assert os.listdir(tmp_path) == []


def test_mode1_names_an_onnx_model_given_without_framework(tmp_path):
    result = atc("--mode=1", f"--om={RESNET}", "--json=x.json", cwd=tmp_path)
    assert_fails_cleanly(result, tmp_path, "is an ONNX model", "--framework=5")


# --------------------------------------------------------------------- --mode=3


def test_mode3_lists_every_problem_at_once(bad_onnx, tmp_path):
    result = atc("--mode=3", f"--model={bad_onnx}", "--framework=5", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert os.listdir(tmp_path) == ["check_result.json"]
    report = json.loads((tmp_path / "check_result.json").read_text())
    found = {(p["node"], p["op_type"], p["category"]) for p in report["details"]}
    assert found == {
        ("noise", "RandomNormalLike", "unsupported op"),
        ("lppool", "GlobalLpPool", "unsupported op"),
        ("sigmoid", "Sigmoid", "bad attribute"),
        ("softmax", "Softmax", "bad attribute"),
        ("noise2", "RandomNormalLike", "unsupported op"),
    }
    assert report["result"] == "failed" and report["problems"] == 5
    assert report["categories"] == {"unsupported op": 3, "bad attribute": 2}
    assert report["nodes_checked"] == 9 and report["nodes_checked_for_support_only"] == ["isnan", "where", "add", "noise2"]
    assert all(p["message"] for p in report["details"])
    summary = result.stdout.strip().splitlines()[-1]
    assert summary.startswith(f"pre-check of {bad_onnx}: failed, 5 problems") and "check_result.json" in summary


def test_mode3_passes_a_good_model_with_its_input_shape(tmp_path):
    result = atc("--mode=3", f"--model={BERT}", "--framework=5", "--input_shape=input_ids:1,16;attention_mask:1,16", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "check_result.json").read_text())
    assert report["result"] == "success" and report["details"] == [] and report["nodes_checked"] > 0
    assert result.stdout.strip() == f"pre-check of {BERT}: passed, {report['nodes_checked']} nodes; report: check_result.json"


def test_mode3_lists_every_shape_problem_of_a_new_input_shape(tmp_path):
    """tiny_bert reshapes to a fixed batch of 1: a batch of 2 breaks each head split."""
    result = atc("--mode=3", f"--model={BERT}", "--framework=5", "--input_shape=input_ids:2,16;attention_mask:2,16", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    report = json.loads((tmp_path / "check_result.json").read_text())
    assert [(p["node"], p["category"]) for p in report["details"]] == [
        (f"attention.{head}.split_heads", "shape") for head in ("query", "key", "value")
    ]
    assert all("cannot reshape [2, 16, 32]" in p["message"] for p in report["details"])


def test_mode3_writes_where_atc_does(tmp_path):
    """--check_report, else $ASCEND_WORK_PATH, else the current directory; --output does not move it."""
    (tmp_path / "work").mkdir()
    (tmp_path / "here").mkdir()
    chosen = atc("--mode=3", f"--model={RESNET}", "--framework=5", f"--check_report={tmp_path / 'mine.json'}", cwd=tmp_path / "here")
    assert chosen.returncode == 0 and (tmp_path / "mine.json").is_file()
    work = atc("--mode=3", f"--model={RESNET}", "--framework=5", "--output=out/m", "--soc_version=Ascend310P3",
               cwd=tmp_path / "here", env={"ASCEND_WORK_PATH": str(tmp_path / "work")})
    assert work.returncode == 0 and os.listdir(tmp_path / "work") == ["check_result.json"]
    assert os.listdir(tmp_path / "here") == []
    assert "ge: warning: --mode=3 checks the import only: --output, --soc_version have no effect" in work.stderr


def test_mode3_reports_a_model_level_problem_without_a_node(tmp_path):
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x07not a model at all")
    result = atc("--mode=3", "--model=junk.onnx", "--framework=5", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    report = json.loads((tmp_path / "check_result.json").read_text())
    assert [(p["node"], p["category"]) for p in report["details"]] == [(None, "model")]


def test_precheck_first_problem_is_the_import_error(bad_onnx):
    """The pre-check speaks the import's words: its first problem is load_onnx's error."""
    with pytest.raises(ModelError) as error:
        ge.load_onnx(bad_onnx)
    assert error.value.args[0].endswith(str(precheck(bad_onnx).problems[0]))


@pytest.mark.parametrize(
    "node, category",
    [
        (helper.make_node("Concat", ["x", "x"], ["y"], name="n"), "bad attribute"),  # required axis missing
        (helper.make_node("Relu", ["x"], ["y"], name="n", domain="com.example"), "unsupported op"),
        (helper.make_node("Relu", ["x", "x"], ["y"], name="n"), "inputs/outputs"),
        (helper.make_node("Reshape", ["x", "x"], ["y"], name="n"), "dtype"),
        (helper.make_node("Flatten", ["x"], ["y"], name="n", axis=9), "bad attribute"),
    ],
)
def test_precheck_categories(node, category):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    result = precheck(model)
    assert [(p.node, p.category) for p in result.problems] == [("n", category)], result.problems


def test_precheck_agrees_with_the_import_on_every_onnx_node_test():
    """On each of onnx's backend node models (about 1,800; two thirds refused today), the
    pre-check passes exactly when the import does, and its first problem is the import's error."""
    models = sorted((Path(onnx.__file__).parent / "backend" / "test" / "data" / "node").glob("*/model.onnx"))
    assert len(models) > 1000
    for model in [RESNET, BERT, *models]:
        try:
            ge.load_onnx(model)
            error = None
        except GEError as e:
            error = e.args[0]
        result = precheck(model)
        assert result.passed == (error is None), (model, error, result.problems)
        assert error is None or error.endswith(str(result.problems[0])), (model, error, result.problems[0])


# --------------------------------------------------------------------- --mode=5


def test_mode5_writes_a_graph_dump_as_json(tmp_path):
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    subprocess.run([str(BIN / "ge"), "optimize", str(RESNET)], cwd=dumps, capture_output=True, check=True,
                   env={**os.environ, "DUMP_GE_GRAPH": "2", "DUMP_GRAPH_LEVEL": "AfterUBFusion"})
    (dump,) = dumps.glob("ge_onnx_*_AfterUBFusion.mlir")
    result = atc("--mode=5", f"--om={dump}", f"--json={tmp_path / 'graph.json'}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    doc = json.loads((tmp_path / "graph.json").read_text())
    (graph,) = doc["graphs"]
    text = dump.read_text()
    assert len(graph["ops"]) == text.count(" = ascend_graph.") + text.count("ascend_graph.net_output")
    names = {op["name"] for op in graph["ops"]}
    for op in graph["ops"]:
        assert all(i.rpartition(":")[0] in names for i in op["inputs"]), op
    conv = next(op for op in graph["ops"] if op["type"] == "Conv2D")
    assert conv["outputs"][0]["format"] == "NC1HWC0" and "_fusion_scope" in conv["attrs"]


def test_mode5_refuses_an_op_listing(tmp_path):
    (tmp_path / "listing.mlir").write_text("ascend_graph.data input\nascend_graph.relu r\n")
    result = atc("--mode=5", "--om=listing.mlir", "--json=out.json", cwd=tmp_path)
    assert result.returncode == 1 and "is not an IR graph dump" in result.stderr and "DUMP_GE_GRAPH=1 or 2" in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["listing.mlir"]


# --------------------------------------------------------------------- --mode=6


def test_mode6_shows_the_key_information(om, tmp_path):
    result = atc("-mode=6", f"-om={om}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    model = ge.load_model(om)
    out = result.stdout
    for fragment in ("Ascend310P3", "--soc_version", "input", "float32", "[1, 3, 32, 32]", "NCHW", "logits",
                     "feature map", "weights", "total", f"tasks: {len(model.tasks)}", f"streams: {model.streams}",
                     "built for the whole chip", "gears: none (static shapes)"):
        assert fragment in out, fragment
    assert os.listdir(tmp_path) == []


def test_mode6_says_a_model_was_built_for_virtual_instances(tmp_path):
    om = tmp_path / "vi.om"
    ge.compile(RESNET, {"soc_version": "Ascend310P3", "virtual_type": 1, "export_compile_stat": 0}).save(om)
    result = atc("--mode=6", f"--om={om}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "built for virtual instances: slices of 1, 2, 4, 8 AI cores, every block_dim a multiple of 8" in result.stdout
    assert "--virtual_type" in result.stdout


# --------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--mode=2"], ["--mode=2 is not an ATC mode here; allowed: 0 (compile); 1 ", "3 (pre-check); 5 ", "6 "]),
        (["--mode=1", "--om=m.om"], ["--mode=1 needs --json"]),
        (["--mode=1", "--json=m.json"], ["--mode=1 needs --om"]),
        (["--mode=6"], ["--mode=6 needs --om"]),
        (["--mode=5", "--om=d.mlir"], ["--mode=5 needs --json"]),
        (["--mode=3", "--framework=5"], ["--mode=3 needs --model"]),
        (["--mode=3", "--model=m.onnx"], ["--mode=3 needs --framework"]),
        (["--mode=6", "--om=m.om", "--json=x.json"], ["--json does not apply to --mode=6", "ge atc --mode=6 --om=X.om"]),
        (["--mode=1", "--om=m.om", "--json=x.json", "--soc_version=Ascend310P3"], ["--soc_version does not apply to --mode=1"]),
        (["--mode=3", "--model=m.onnx", "--framework=5", "--json=x.json"], ["--json does not apply to --mode=3"]),
        (["--mode=3", "--model=m.onnx", "--framework=5", "--precision_mode=bogus"], ["precision_mode 'bogus' is not allowed"]),
        (["--mode=3", "--model=m.onnx", "--framework=3"], ["--framework=3: TensorFlow is not supported here"]),
        (["--mode=1", "--om=m.onnx", "--framework=0", "--json=x.json"], ["--framework=0: Caffe is not supported here"]),
        (["--mode=6", "--om=missing.om"], ["--om=missing.om: no such file"]),
        (["--mode=3", "--model=missing.onnx", "--framework=5"], ["--model=missing.onnx: no such file"]),
        (["--model=m.onnx", "--json=x.json"], ["--json is not an option of --mode=0 (compile); it belongs to --mode=1, --mode=5"]),
        (["--mode=1", "--om=m.om", "--json=nowhere/x.json"], ["--json 'nowhere/x.json': directory 'nowhere' does not exist"]),
        (["--mode=3", "--model=m.onnx", "--framework=5", "--check_report=nowhere/c.json"], ["--check_report 'nowhere/c.json'"]),
        (["--mode=1", "--mode=6", "--om=m.om"], ["--mode is given twice"]),
        (["--mode=0", "--model=m.onnx"], ["--framework is required"]),
    ],
)
def test_mode_command_lines_are_checked(args, fragments, tmp_path):
    for name in ("m.om", "m.onnx", "d.mlir"):
        (tmp_path / name).write_text("")
    result = atc(*args, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ge: error: [E10001] "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert sorted(os.listdir(tmp_path)) == ["d.mlir", "m.om", "m.onnx"]


def test_atc_help_lists_the_modes(tmp_path):
    result = atc("--help", cwd=tmp_path)
    assert result.returncode == 0
    for fragment in ("--mode=1 --om=X.om --json=X.json", "--mode=3", "check_result.json", "--mode=5", "--mode=6 --om=X.om"):
        assert fragment in result.stdout, fragment
