"""Multi-gear models (`ge.gears`): the gear options and GE's checks of them, one static
build per gear merged into one `.om`, and runs that pick the gear from the inputs."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import ge
from ge.core.errors import InputError, OptionError
from ge.core.options import CompileOptions
from ge.models import DEMO_MODELS
from ge.om import ALIGNMENT, KernelTask, Region
from ge.om.model import OmError
from ge.session import Session
from ge.sim import timing
from ge.testing.gear_models import bert_like, bert_like_inputs, with_dynamic_dims

RESNET = DEMO_MODELS[0].path
BATCHES = (1, 2, 4)
SEQS = (8, 16, 32)
TOLERANCE = {"rtol": 2e-2, "atol": 2e-2}
"""float16 compute (force_fp16) against onnxruntime's float32."""


def onnxruntime(path: str | Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def kernel_tasks(model: ge.Model) -> list[tuple[str, int]]:
    return [(t.name, t.block_dim) for t in model.tasks if isinstance(t, KernelTask)]


def kernel_bodies(model: ge.Model, names: list[str]) -> list[str]:
    """The kernels the tasks launch, in task order, their symbol names left out."""
    text = model.kernels
    starts = {m.group(1): m.start() for m in re.finditer(r"^ascend_kernel\.kernel @(\S+) attributes \{", text, re.MULTILINE)}
    ends = sorted(starts.values()) + [len(text)]
    body = {n: text[s : ends[ends.index(s) + 1]].replace(f"@{n} ", "@ ", 1) for n, s in starts.items()}
    return [body[n] for n in names]


# ---------------------------------------------------------------- compiled once


@pytest.fixture(scope="module")
def resnet_gears() -> ge.Model:
    return ge.compile(RESNET, {"input_shape": "input:-1,3,32,32", "dynamic_batch_size": ",".join(map(str, BATCHES))})


@pytest.fixture(scope="module")
def resnet_static() -> dict[int, ge.Model]:
    return {b: ge.compile(RESNET, {"input_shape": f"input:{b},3,32,32"}) for b in BATCHES}


@pytest.fixture(scope="module")
def bert_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bert_like(tmp_path_factory.mktemp("gears") / "bert_like.onnx")


@pytest.fixture(scope="module")
def bert_gears(bert_path: Path) -> ge.Model:
    spec = ";".join(f"{s},{s}" for s in SEQS)
    return ge.compile(bert_path, {"input_shape": "input_ids:1,-1;attention_mask:1,-1", "dynamic_dims": spec, "input_format": "ND"})


# ---------------------------------------------------------------- outputs per gear


@pytest.mark.slow
def test_resnet_batch_gears_equal_onnxruntime(resnet_gears: ge.Model, tmp_path: Path) -> None:
    path = with_dynamic_dims(RESNET, tmp_path / "resnet_n.onnx", {0: "N"})
    session = Session()
    rng = np.random.default_rng(1)
    for b in BATCHES:
        x = rng.standard_normal((b, 3, 32, 32)).astype(np.float32)
        result = session.run(resnet_gears, {"input": x})
        assert result.outputs["logits"].shape == (b, 10)
        np.testing.assert_allclose(result.outputs["logits"], onnxruntime(path, {"input": x})[0], **TOLERANCE)


def test_bert_dims_gears_equal_onnxruntime(bert_gears: ge.Model, bert_path: Path) -> None:
    session = Session()
    for seq in SEQS:
        feeds = bert_like_inputs(seq)
        result = session.run(bert_gears, feeds)
        (expected,) = onnxruntime(bert_path, feeds)
        assert result.outputs["last_hidden_state"].shape == (1, seq, 32)
        np.testing.assert_allclose(result.outputs["last_hidden_state"], expected, **TOLERANCE)


def test_model_dynamic_dims_count_as_minus_one(tmp_path: Path) -> None:
    """A model whose file declares the batch dynamic needs no --input_shape."""
    path = with_dynamic_dims(RESNET, tmp_path / "resnet_n.onnx", {0: "N"})
    model = ge.compile(path, {"dynamic_batch_size": "1,3"})
    assert [g.shapes for g in model.gears] == [{"input": (1, 3, 32, 32)}, {"input": (3, 3, 32, 32)}]
    x = np.random.default_rng(2).standard_normal((3, 3, 32, 32)).astype(np.float32)
    result = Session().run(model, {"input": x})
    np.testing.assert_allclose(result.outputs["logits"], onnxruntime(path, {"input": x})[0], **TOLERANCE)


def test_image_size_gears(tmp_path: Path) -> None:
    model = ge.compile(RESNET, {"input_shape": "input:1,3,-1,-1", "dynamic_image_size": "32,32;48,64"})
    assert [g.shapes["input"] for g in model.gears] == [(1, 3, 32, 32), (1, 3, 48, 64)]
    x = np.random.default_rng(3).standard_normal((1, 3, 48, 64)).astype(np.float32)
    result = Session().run(model, {"input": x})
    np.testing.assert_allclose(result.outputs["logits"], onnxruntime(with_dynamic_dims(RESNET, tmp_path / "resnet_hw.onnx", {2: "H", 3: "W"}), {"input": x})[0], **TOLERANCE)


# ---------------------------------------------------------------- static and fused like a static compile


@pytest.mark.slow
def test_each_gear_is_the_static_build(resnet_gears: ge.Model, resnet_static: dict[int, ge.Model]) -> None:
    for index, b in enumerate(BATCHES):
        static = resnet_static[b]
        gear = dataclasses.replace(resnet_gears.gear(index), tasks=resnet_gears.gears[index].tasks)  # its own tasks, without the Case
        assert gear.inputs[0].origin_shape == (b, 3, 32, 32)
        assert kernel_tasks(gear) == kernel_tasks(static)
        assert any("+" in name for name, _ in kernel_tasks(gear))  # fused, as the static build
        launched = [t.kernel for t in gear.tasks if isinstance(t, KernelTask)]
        assert kernel_bodies(gear, launched) == kernel_bodies(static, [t.kernel for t in static.tasks if isinstance(t, KernelTask)])


@pytest.mark.slow
def test_each_bert_gear_is_the_static_build(bert_gears: ge.Model, bert_path: Path) -> None:
    fm = []
    for index, seq in enumerate(SEQS):
        static = ge.compile(bert_path, {"input_shape": f"input_ids:1,{seq};attention_mask:1,{seq}"})
        gear = dataclasses.replace(bert_gears.gear(index), tasks=bert_gears.gears[index].tasks)  # its own tasks, without the Case
        assert kernel_tasks(gear) == kernel_tasks(static)
        assert any(name.count("+") >= 2 for name, _ in kernel_tasks(gear))
        launched = [t.kernel for t in gear.tasks if isinstance(t, KernelTask)]
        assert kernel_bodies(gear, launched) == kernel_bodies(static, [t.kernel for t in static.tasks if isinstance(t, KernelTask)])
        fm.append(static.memory.sizes[Region.FEATURE_MAP])
    assert bert_gears.memory.sizes[Region.FEATURE_MAP] == max(fm) < sum(fm)


@pytest.mark.slow
def test_memory_is_the_largest_gear_not_the_sum(resnet_gears: ge.Model, resnet_static: dict[int, ge.Model]) -> None:
    fm = [resnet_static[b].memory.sizes[Region.FEATURE_MAP] for b in BATCHES]
    plan = resnet_gears.memory
    assert plan.sizes[Region.FEATURE_MAP] == max(fm) < sum(fm)
    index_bytes = ALIGNMENT  # the gear-index input, after the largest gear's inputs
    assert plan.sizes[Region.INPUT] == max(resnet_static[b].memory.sizes[Region.INPUT] for b in BATCHES) + index_bytes
    assert plan.sizes[Region.WEIGHT] == resnet_static[1].memory.sizes[Region.WEIGHT]  # stored once for three gears
    largest = resnet_static[max(BATCHES)].memory
    assert plan.total == largest.total + index_bytes
    shared = resnet_gears.build["gears"]
    assert shared["weights"]["per_gear_bytes"] == 3 * plan.sizes[Region.WEIGHT]
    assert shared["feature_map"] == {"planned_bytes": max(fm), "sum_of_gears_bytes": sum(fm)}


@pytest.mark.slow
def test_gear_latency_is_the_static_latency(resnet_gears: ge.Model, resnet_static: dict[int, ge.Model]) -> None:
    session = Session()
    for b in BATCHES:
        x = np.zeros((b, 3, 32, 32), np.float32)
        geared = session.run(resnet_gears, {"input": x}).latency_us
        static = session.run(resnet_static[b], {"input": x}).latency_us
        gear = resnet_gears.gears[BATCHES.index(b)]
        case = timing.LABEL_SWITCH_US + timing.LABEL_US + (timing.STREAM_ACTIVE_US if gear.streams > 1 else 0.0)
        index = resnet_gears.gear_index.size / timing.PCIE_BYTES_PER_US  # its copy is fused with the input's
        assert geared == pytest.approx(static + case + index)


# ---------------------------------------------------------------- run time


@pytest.mark.slow
def test_input_of_no_gear_is_refused(resnet_gears: ge.Model, bert_gears: ge.Model) -> None:
    with pytest.raises(InputError, match=r"match no gear.*3 gears are: input:1,3,32,32 \| input:2,3,32,32 \| input:4,3,32,32"):
        Session().run(resnet_gears, {"input": np.zeros((3, 3, 32, 32), np.float32)})
    feeds = bert_like_inputs(8) | {"attention_mask": np.zeros((1, 16), np.float32)}
    with pytest.raises(InputError, match="input_ids:1,8;attention_mask:1,8"):
        Session().run(bert_gears, feeds)


@pytest.mark.slow
def test_om_round_trip_keeps_the_gears(resnet_gears: ge.Model, tmp_path: Path) -> None:
    path = resnet_gears.save(tmp_path / "gears.om")
    again = ge.load_model(path)
    assert again.gears == resnet_gears.gears
    assert again.description() == resnet_gears.description()
    x = np.ones((2, 3, 32, 32), np.float32)
    a, b = Session().run(path, {"input": x}), Session().run(resnet_gears, {"input": x})
    np.testing.assert_array_equal(a.outputs["logits"], b.outputs["logits"])




@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.__setitem__("gears", d["gears"] * 40), r"gears has 120 items; allowed: at most 100"),
        (lambda d: d.__setitem__("gears", d["gears"][:1]), r"gears has 1 gears; a multi-gear model has 2 to 100"),
        (lambda d: d["gears"][1]["memory"]["regions"]["feature_map"].__setitem__("size", 1 << 20), r"gears\[1\]\.memory's regions differ"),
        (lambda d: d["gears"][0]["tasks"][0].__setitem__("stream", 99), r"gears\[0\]\.tasks\[0\]\.stream is 99; allowed: 0 to"),
        (lambda d: d["gears"][2].__setitem__("shapes", {"x": [1]}), r"gears\[2\] has inputs \['x'\]"),
        (lambda d: d["gears"][0]["shapes"].__setitem__("input", [-1, 3]), r"gears\[0\]\.shapes\.input\[0\] is -1"),
    ],
)
def test_hostile_gear_table_is_refused(resnet_gears: ge.Model, tmp_path: Path, change, message: str, rewritten) -> None:
    path = resnet_gears.save(tmp_path / "gears.om")
    with pytest.raises(OmError, match=message):
        ge.load_model(rewritten(Path(path), tmp_path / "bad.om", change))


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"dynamic_batch_size": "4"}, r"--dynamic_batch_size='4' gives 1 gears; allowed: 2 to 100"),
        ({"dynamic_batch_size": ",".join(map(str, range(1, 102)))}, r"gives 101 gears; allowed: 2 to 100"),
        ({"dynamic_batch_size": "1,8,1"}, r"gear '1' is given twice"),
        ({"dynamic_batch_size": "1,-8"}, r"-8 is not allowed; every value is a size >= 1 \(no negatives"),
        ({"dynamic_batch_size": "1,0"}, r"0 is not allowed"),
        ({"dynamic_batch_size": "1,x"}, r"'x' is not an integer"),
        ({"dynamic_batch_size": "1,,2"}, r"has an empty gear"),
        ({"dynamic_image_size": "224,224;448"}, r"gear '448' has 1 values, every gear needs 2"),
        ({"dynamic_image_size": "224,224,3;448,448,3"}, r"has 3 values, every gear needs 2"),
        ({"dynamic_dims": "1,64;1"}, r"gear '1' has 1 values, every gear needs 2"),
        ({"dynamic_dims": "1,64;1,64"}, r"gear '1,64' is given twice"),
        ({"dynamic_batch_size": "1,2", "dynamic_dims": "1;2"}, r"--dynamic_batch_size and --dynamic_dims cannot be used together"),
        ({"dynamic_image_size": "1,1;2,2", "dynamic_dims": "1;2"}, r"--dynamic_image_size and --dynamic_dims cannot be used together"),
        ({"dynamic_dims": "1;2", "input_format": "NCHW"}, r"--dynamic_dims needs --input_format=ND, not NCHW"),
        ({"dynamic_image_size": "1,1;2,2", "input_format": "ND"}, r"needs --input_format NCHW or NHWC"),
        ({"input_format": "NC1HWC0"}, r"input_format 'NC1HWC0' is not allowed; use one of NCHW, NHWC, ND, NCDHW, NDHWC"),
    ],
)
def test_option_errors(flags: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        CompileOptions.from_flags(**flags)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"dynamic_batch_size": "1,2"}, r"--dynamic_batch_size needs dims marked -1 in --input_shape \(or dynamic in the model\), and there are none"),
        ({"input_shape": "input:1,3,32,32", "dynamic_batch_size": "1,2"}, r"there are none; the inputs are input:1,3,32,32"),
        ({"input_shape": "input:-1,3,-1,32", "dynamic_batch_size": "1,2"}, r"sets dim 0 \(the batch\) only, but -1 marks 'input' dim 0, 'input' dim 2"),
        ({"input_shape": "input:-1,3,32,32", "dynamic_image_size": "32,32;64,64"}, r"sets H and W \(dims 2 and 3 of a 4-D NCHW input\) only, but -1 marks 'input' dim 0"),
        ({"input_shape": "input:1,3,-1,-1", "dynamic_image_size": "32,32;64,64", "input_format": "NHWC"}, r"dims 1 and 2 of a 4-D NHWC input"),
        ({"input_shape": "input:1,3,-1,-1", "dynamic_dims": "32;64"}, r"--dynamic_dims gives 1 values per gear, but there are 2 dims marked -1 \('input' dim 2, 'input' dim 3\)"),
        ({"input_shape": "input:1~4,3,32,32", "dynamic_batch_size": "1,2"}, r"a range lo~hi bounds a fully dynamic graph; with --dynamic_batch_size mark the gear dims -1"),
        ({"input_shape": "image:-1,3,32,32", "dynamic_batch_size": "1,2"}, r"the model has no input 'image'"),
    ],
)
def test_model_option_errors(flags: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        ge.compile(RESNET, flags)


def test_gears_need_the_onnx_file() -> None:
    module, _ = ge.load_onnx(RESNET)
    with pytest.raises(OptionError, match="imports each gear from the ONNX model; give its path"):
        ge.compile(module, {"dynamic_batch_size": "1,2"})


def test_atc_flags_and_help_name_the_gear_options() -> None:
    from ge.core.options import OPTION, help_lines

    assert OPTION["dynamic_dims"].parse("1,64;1,128") == "1,64;1,128"
    lines = "\n".join(help_lines("atc"))
    for name in ("dynamic_batch_size", "dynamic_image_size", "dynamic_dims", "input_format"):
        assert f"--{name}: " in lines
    options = CompileOptions.from_flags(dynamic_batch_size="1,8", input_shape="x:-1,3")
    assert options.given()["dynamic_batch_size"] == "1,8"
    assert dataclasses.replace(options, dynamic_batch_size=None).given().get("dynamic_batch_size") is None


def test_atc_shows_the_gears(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from ge.cli.main import app

    runner = CliRunner()
    out = tmp_path / "g"
    compiled = runner.invoke(app, ["atc", f"--model={RESNET}", "--framework=5", f"--output={out}", "--soc_version=Ascend310P3",
                                   "--input_shape=input:-1,3,32,32", "--dynamic_batch_size=1,2"])
    assert compiled.exit_code == 0, compiled.output
    assert "gears: 2, multi-gear (--dynamic_batch_size)" in compiled.output
    assert "input:2,3,32,32" in compiled.output and "weights stored once" in compiled.output
    shown = runner.invoke(app, ["atc", "--mode=6", f"--om={out}.om"])
    assert shown.exit_code == 0, shown.output
    assert "gears: 2, multi-gear (--dynamic_batch_size)" in shown.output and "input:1,3,32,32" in shown.output
    described = runner.invoke(app, ["atc", "--mode=1", f"--om={out}.om", f"--json={tmp_path / 'g.json'}"])
    assert described.exit_code == 0, described.output
    shapes = json.loads((tmp_path / "g.json").read_text())["shapes"]
    assert shapes["strategy"] == "multi-gear" and shapes["gear_option"] == "dynamic_batch_size"
    assert [g["input_shape"] for g in shapes["gears"]] == ["input:1,3,32,32", "input:2,3,32,32"]
    assert shapes["gears"][1]["outputs"] == {"logits": [2, 10]}


def test_dynamic_model_without_gears_compiles_fully_dynamic(tmp_path: Path) -> None:
    """Without a gear option the model's dynamic batch makes a fully dynamic build (`ge.dynamic`)."""
    path = with_dynamic_dims(RESNET, tmp_path / "resnet_n.onnx", {0: "N"})
    model = ge.compile(path)
    assert not model.gears and model.dynamic is not None and model.build["dynamic"]["ranges"] == "input:-1,3,32,32"


@pytest.mark.slow
def test_external_weights_cover_every_gear(resnet_gears: ge.Model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ge.sim.config import RunConfig

    monkeypatch.setenv("ASCEND_WORK_PATH", str(tmp_path))
    x = np.random.default_rng(4).standard_normal((1, 3, 32, 32)).astype(np.float32)
    with Session(RunConfig(external_weight=True, graph_run_mode=0)) as session:
        model = session.compile(RESNET, {"input_shape": "input:-1,3,32,32", "dynamic_batch_size": ",".join(map(str, BATCHES))})
        assert not model.weights and model.gears
        external = session.run(model, {"input": x}).outputs["logits"]
    np.testing.assert_array_equal(external, Session().run(resnet_gears, {"input": x}).outputs["logits"])


@pytest.mark.parametrize("command", ["optimize", "precision-report"])
def test_one_graph_commands_refuse_gears(command: str) -> None:
    from typer.testing import CliRunner

    from ge.cli.main import app

    result = CliRunner().invoke(app, [command, str(RESNET), "--input_shape=input:-1,3,32,32", "--dynamic_batch_size=1,2"])
    assert isinstance(result.exception, OptionError)
    assert f"--dynamic_batch_size builds one graph per gear, which ge atc and ge.compile do; ge {command} works on one graph" in str(result.exception)


@pytest.mark.slow
def test_ge_run_takes_any_gear(resnet_gears: ge.Model, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from ge.cli.main import app

    path = resnet_gears.save(tmp_path / "gears.om")
    x = np.random.default_rng(5).standard_normal((2, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    result = CliRunner().invoke(app, ["run", str(path), f"--input=input={tmp_path / 'x.npy'}", f"--output={tmp_path / 'out'}"])
    assert result.exit_code == 0, result.output
    assert "gear 1 of 3 ran: input:2,3,32,32" in result.output
    logits = np.load(next((tmp_path / "out").glob("logits*.npy")))
    np.testing.assert_array_equal(logits, Session().run(resnet_gears, {"input": x}).outputs["logits"])
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.zeros((5, 3, 32, 32), np.float32))
    refused = CliRunner().invoke(app, ["run", str(path), f"--input=input={wrong}"])
    assert isinstance(refused.exception, InputError) and "match no gear" in str(refused.exception)


def test_a_gear_that_does_not_build_is_named() -> None:
    """The bundled tiny BERT holds batch 1 in its Reshapes: its gear of batch 2 fails, named."""
    with pytest.raises(ge.ModelError, match=r"gear 1 \(input_ids:2,16;attention_mask:2,16\) of --dynamic_dims: node 'attention\.query\.split_heads' \(Reshape\)"):
        ge.compile(DEMO_MODELS[1].path, {"input_shape": "input_ids:-1,16;attention_mask:-1,16", "dynamic_dims": "1,1;2,2"})
