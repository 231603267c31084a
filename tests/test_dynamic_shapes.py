"""Fully dynamic shapes and the hybrid build (`ge.dynamic`): compiled once with the
dynamic dims, built and tiled on the host per input shape at run time, every task
launched from the host; the options that ask for it (input_shape's -1 and lo~hi, the
model's own dynamic dims, NPURunConfig's dynamic_input / dynamic_inputs_shape_range /
compile_dynamic_mode, dynamic_fallback), their checks, and hostile dynamic `.om` files.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import ge
from ge.core.errors import InputError, ModelError, OptionError
from ge.models import DEMO_MODELS
from ge.om import OmError
from ge.session import Session
from ge.sim import timing
from ge.sim.config import RunConfig
from ge.sim.profile import CSV_COLUMNS
from ge.testing.gear_models import bert_like, with_dynamic_dims

RESNET = DEMO_MODELS[0].path
TOLERANCE = {"rtol": 2e-2, "atol": 2e-2}
"""float16 compute (force_fp16) against onnxruntime's float32."""
RANGES = "input:1~8,3,32,32"


def onnxruntime(path: str | Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def images(batch: int) -> np.ndarray:
    return np.random.default_rng(batch).standard_normal((batch, 3, 32, 32)).astype(np.float32)


def bert_inputs(seq: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seq)
    mask = np.where(np.arange(seq) < seq - 2, 0.0, -1e4).astype(np.float32)[None]
    return {"input_ids": rng.integers(0, 50, (1, seq)).astype(np.int64), "attention_mask": mask}


@pytest.fixture(scope="module")
def resnet_n(tmp_path_factory) -> Path:
    """The bundled tiny ResNet with its batch dynamic (N), for onnxruntime."""
    return Path(with_dynamic_dims(RESNET, tmp_path_factory.mktemp("dyn") / "resnet_n.onnx", {0: "N"}))


@pytest.fixture(scope="module")
def resnet_dynamic() -> ge.Model:
    return ge.compile(RESNET, {"input_shape": RANGES})


# ---------------------------------------------------------------- compiled once, run at any shape


def test_a_dynamic_build_holds_no_task_list_and_round_trips(resnet_dynamic: ge.Model, tmp_path: Path) -> None:
    model = resnet_dynamic
    assert model.dynamic is not None and not model.tasks and not model.kernels
    assert model.dynamic.ranges == {"input": ((1, 8), (3, 3), (32, 32), (32, 32))}
    assert model.build["dynamic"]["strategy"] == "dynamic"  # type: ignore[index]
    again = ge.load_model(model.save(tmp_path / "dyn.om"))
    assert again.dynamic == model.dynamic and bytes(again.weights) == bytes(model.weights)


@pytest.mark.slow
def test_every_batch_in_the_range_equals_onnxruntime_and_the_static_build(resnet_dynamic: ge.Model, resnet_n: Path) -> None:
    session = Session()
    for batch in (1, 3, 8):
        x = images(batch)
        got = session.run(resnet_dynamic, {"input": x}).outputs["logits"]
        assert got.shape == (batch, 10)
        np.testing.assert_allclose(got, onnxruntime(resnet_n, {"input": x})[0], **TOLERANCE)
        static = ge.compile(RESNET, {"input_shape": f"input:{batch},3,32,32"})
        np.testing.assert_array_equal(got, session.run(static, {"input": x}).outputs["logits"])


def test_dynamic_is_slower_than_static_only_by_the_host_tiling_and_launches(resnet_dynamic: ge.Model) -> None:
    """Same kernels and task list as the static build; each task waits for its launch from the host."""
    session = Session(RunConfig(timing_only=False))
    x = images(4)
    dynamic = session.run(resnet_dynamic, {"input": x})
    static = session.run(ge.compile(RESNET, {"input_shape": "input:4,3,32,32"}), {"input": x})
    kernels = dynamic.profile.kernels()
    assert [(r.name, r.kernel, r.block_dim) for r in kernels] == [(r.name, r.kernel, r.block_dim) for r in static.profile.kernels()]
    assert all(r.host_us == timing.HOST_TILING_US + timing.HOST_LAUNCH_US for r in kernels)
    host = len(dynamic.profile.records) * timing.HOST_LAUNCH_US + len(kernels) * timing.HOST_TILING_US
    assert static.latency_us < dynamic.latency_us <= static.latency_us + host
    rows = [dict(zip(CSV_COLUMNS, row)) for row in dynamic.profile.csv_rows()]
    assert {float(r["host_us"]) for r in rows} == {timing.HOST_TILING_US + timing.HOST_LAUNCH_US}
    assert {float(r["host_us"]) for r in (dict(zip(CSV_COLUMNS, row)) for row in static.profile.csv_rows())} == {0.0}


def test_a_shape_seen_again_reuses_its_build(resnet_dynamic: ge.Model) -> None:
    session = Session()
    first = session.run(resnet_dynamic, {"input": images(2)})
    builds = session._shape_builds(resnet_dynamic, resnet_dynamic)
    runtime, _ = builds.runtime({"input": (2, 3, 32, 32)})
    assert session.run(resnet_dynamic, {"input": images(2)}).latency_us == first.latency_us
    assert builds.runtime({"input": (2, 3, 32, 32)})[0] is runtime


def test_outside_the_ranges_is_refused_listing_them(resnet_dynamic: ge.Model) -> None:
    session = Session()
    for shape in [(9, 3, 32, 32), (2, 3, 32, 33), (2, 3, 32)]:
        with pytest.raises(InputError, match=r"input 'input' has shape \[.*\], outside the model's shape ranges input:1~8,3,32,32"):
            session.run(resnet_dynamic, {"input": np.zeros(shape, np.float32)})
    with pytest.raises(InputError, match="a fully dynamic model needs its inputs"):
        Session(RunConfig(timing_only=True)).run(resnet_dynamic)


def test_the_bert_like_encoder_runs_any_sequence_length_from_its_dynamic_file(tmp_path: Path) -> None:
    """No option: the file's own dynamic dims ([1, seq]) are -1, unbounded."""
    path = bert_like(tmp_path / "bert.onnx", hidden=32, layers=2)
    model = ge.compile(path)
    assert model.build["dynamic"]["ranges"] == "input_ids:1,-1;attention_mask:1,-1"  # type: ignore[index]
    session = Session()
    for seq in (8, 24, 64):
        feeds = bert_inputs(seq)
        got = session.run(model, feeds).outputs
        for name, want in zip(("last_hidden_state",), onnxruntime(path, feeds)):
            assert got[name].shape == want.shape
            np.testing.assert_allclose(got[name], want, **TOLERANCE)


# ---------------------------------------------------------------- options


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"input_shape": "input:8~2,3,32,32"}, r"--input_shape input 'input': dim '8~2' is not allowed; .*1 <= lo <= hi"),
        ({"input_shape": "input:0~4,3,32,32"}, r"dim '0~4' is not allowed"),
        ({"input_shape": "input:a~4,3,32,32"}, r"dim 'a~4' is not allowed; use a size >= 1, -1 \(dynamic\) or a range lo~hi"),
        ({"input_shape": "input:1~1,3,32,32"}, r"the shape ranges input:1,3,32,32 fix every dim; compile it static"),
        ({"input_shape": "input:1~4,3,32"}, r"rank 4, but 3 dims are given"),
        ({"dynamic_fallback": 1}, r"dynamic_fallback=1 adds a fully dynamic graph to a multi-gear build; give a gear option too"),
        ({"dynamic_fallback": 2}, r"dynamic_fallback 2 is not allowed; use one of 0, 1"),
        ({"dynamic_batch_size": "1,4", "dynamic_fallback": 1}, r"dynamic_fallback=1 needs --input_shape with the gear dims marked -1 or lo~hi"),
        ({"input_shape": "input:1~2,3,32,32", "dynamic_batch_size": "1,4", "dynamic_fallback": 1}, r"gear 1 lies outside --input_shape's ranges"),
        ({"shape_range": "getnext:[1~4,3,32,32]"}, r"dynamic_inputs_shape_range 'getnext:\[1~4,3,32,32\]' gives dataset \(getnext\) inputs, and the model has none"),
        ({"shape_range": "data:[1~4,3,32,32],[1]"}, r"gives 2 inputs, the model has 1 \(input\)"),
        ({"shape_range": "data:1~4"}, r"is not a list of \[...\]"),
        ({"shape_range": "data:[4~1,3,32,32]"}, r"dynamic_inputs_shape_range input 'input': dim '4~1' is not allowed"),
    ],
)
def test_option_errors_name_the_option_and_what_is_allowed(flags: dict[str, object], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        ge.compile(RESNET, flags)


def test_npu_run_config_dynamic_input_with_shape_ranges(resnet_n: Path) -> None:
    session = Session(RunConfig(dynamic_input=True, dynamic_graph_execute_mode="dynamic_execute", dynamic_inputs_shape_range="data:[1~4,3,32,32]"))
    model = session.compile(RESNET)
    assert model.build["dynamic"]["ranges"] == "input:1~4,3,32,32"  # type: ignore[index]
    x = images(3)
    np.testing.assert_allclose(session.run(model, {"input": x}).outputs["logits"], onnxruntime(resnet_n, {"input": x})[0], **TOLERANCE)
    with pytest.raises(InputError, match="outside the model's shape ranges input:1~4,3,32,32"):
        session.run(model, {"input": images(5)})


def test_npu_run_config_compile_dynamic_mode_generalises_every_dim(tmp_path: Path) -> None:
    path = bert_like(tmp_path / "bert.onnx", hidden=32, layers=1)
    session = Session(RunConfig(compile_dynamic_mode=True))
    model = session.compile(path)
    assert model.build["dynamic"]["ranges"] == "input_ids:-1,-1;attention_mask:-1,-1"  # type: ignore[index]
    feeds = bert_inputs(12)
    np.testing.assert_allclose(session.run(model, feeds).outputs["last_hidden_state"], onnxruntime(path, feeds)[0], **TOLERANCE)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"dynamic_inputs_shape_range": "data:[1]"}, "dynamic_inputs_shape_range needs dynamic_input=True"),
        ({"dynamic_graph_execute_mode": "dynamic_execute"}, "dynamic_graph_execute_mode needs dynamic_input=True"),
        ({"dynamic_input": True, "dynamic_graph_execute_mode": "lazy_recompile"}, r"dynamic_graph_execute_mode 'lazy_recompile' is not allowed; use one of dynamic_execute"),
        ({"compile_dynamic_mode": True, "dynamic_input": True, "dynamic_inputs_shape_range": "data:[1]"}, "compile_dynamic_mode generalises every input dim to -1"),
    ],
)
def test_npu_run_config_conflicts_are_refused(flags: dict[str, object], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        RunConfig(**flags)


# ---------------------------------------------------------------- hybrid


@pytest.fixture(scope="module")
def hybrid() -> ge.Model:
    return ge.compile(RESNET, {"input_shape": RANGES, "dynamic_batch_size": "1,4", "dynamic_fallback": 1})


def test_hybrid_runs_the_gear_when_it_matches_and_the_dynamic_graph_otherwise(hybrid: ge.Model, resnet_n: Path, tmp_path: Path) -> None:
    assert len(hybrid.gears) == 2 and hybrid.dynamic is not None
    assert hybrid.build["dynamic"]["strategy"] == "hybrid"  # type: ignore[index]
    model = ge.load_model(hybrid.save(tmp_path / "hybrid.om"))
    session = Session()
    for batch in (4, 5):
        x = images(batch)
        result = session.run(model, {"input": x})
        np.testing.assert_allclose(result.outputs["logits"], onnxruntime(resnet_n, {"input": x})[0], **TOLERANCE)
        static = session.run(ge.compile(RESNET, {"input_shape": f"input:{batch},3,32,32"}), {"input": x})
        hosted = {r.host_us for r in result.profile.kernels()}
        if batch == 4:  # the gear: sunk, its latency the static one's and the device's Case
            gear = model.gears[1]
            case = timing.LABEL_SWITCH_US + timing.LABEL_US + (timing.STREAM_ACTIVE_US if gear.streams > 1 else 0.0)
            index = model.gear_index.size / timing.PCIE_BYTES_PER_US  # its copy is fused with the input's
            assert hosted == {0.0} and result.latency_us == pytest.approx(static.latency_us + case + index)
        else:
            assert hosted == {timing.HOST_TILING_US + timing.HOST_LAUNCH_US} and result.latency_us > static.latency_us
    with pytest.raises(InputError, match="outside the model's shape ranges input:1~8,3,32,32"):
        session.run(model, {"input": images(9)})


def test_atc_summary_and_mode_1_show_the_strategy_gears_and_ranges(hybrid: ge.Model, resnet_dynamic: ge.Model, tmp_path: Path, capsys) -> None:
    from ge.cli.main import main

    for name, model, strategy in (("hybrid", hybrid, "hybrid"), ("dyn", resnet_dynamic, "dynamic")):
        path = model.save(tmp_path / f"{name}.om")
        main(["atc", "--mode=1", f"--om={path}", f"--json={tmp_path / name}.json"])
        shapes = json.loads((tmp_path / f"{name}.json").read_text())["shapes"]
        assert shapes["strategy"] == strategy and shapes["ranges"] == "input:1~8,3,32,32"
        assert len(shapes["gears"]) == (2 if strategy == "hybrid" else 0)
    capsys.readouterr()
    main(["atc", f"--model={RESNET}", "--framework=5", "--soc_version=Ascend310P3", f"--output={tmp_path / 'cli'}", f"--input_shape={RANGES}"])
    out = capsys.readouterr().out
    assert "fully dynamic shapes" in out and "shape ranges: input:1~8,3,32,32" in out


def test_ge_run_takes_any_shape_in_the_ranges(resnet_dynamic: ge.Model, tmp_path: Path, capsys) -> None:
    from ge.cli.main import main

    path = resnet_dynamic.save(tmp_path / "dyn.om")
    np.save(tmp_path / "x.npy", images(5))
    main(["run", str(path), "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "out")])
    assert np.load(tmp_path / "out" / "logits.npy").shape == (5, 10)
    assert "the dynamic graph ran for input[5, 3, 32, 32]" in capsys.readouterr().out


# ---------------------------------------------------------------- hostile files




@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["dynamic"]["ranges"]["input"][0].__setitem__(1, 0), r"dynamic\.ranges\.input\[0\] hi is 0; allowed: 1 to .* \(>= lo, or -1\)"),
        (lambda d: d["dynamic"]["ranges"]["input"].__setitem__(0, [0, 4]), r"dynamic\.ranges\.input\[0\] lo is 0"),
        (lambda d: d["dynamic"].__setitem__("ranges", {"x": [[1, 2]]}), r"dynamic\.ranges has inputs \['x'\]"),
        (lambda d: d["dynamic"]["weights"][0].__setitem__(4, 1 << 40), r"dynamic\.weights\[0\] offset is \d+; allowed: 0 to \d+ \(within the weight region\)"),
        (lambda d: d["dynamic"]["weights"][0].__setitem__(3, [1 << 20, 1 << 20]), r"dynamic\.weights\[0\] shape\[0\] is 1048576; allowed: 0 to \d+"),
        (lambda d: d["dynamic"]["weights"][0].__setitem__(2, "complex128"), r"dynamic\.weights\[0\] dtype is 'complex128'"),
        (lambda d: d["dynamic"].__setitem__("graph", 7), r"dynamic\.graph must be the graph's IR text"),
        (lambda d: d["dynamic"].__setitem__("inputs", [["input", "float32", "x"]]), r"dynamic\.inputs\[0\] has 3 items; allowed: at most 2"),
    ],
)
def test_a_tampered_dynamic_section_is_refused_on_read(resnet_dynamic: ge.Model, tmp_path: Path, change, message: str, rewritten) -> None:
    path = Path(resnet_dynamic.save(tmp_path / "dyn.om"))
    with pytest.raises(OmError, match=message):
        ge.load_model(rewritten(path, tmp_path / "bad.om", change))


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (lambda d: d["dynamic"]["weights"][0].__setitem__(1, "0" * 16), OmError, r"dynamic weight '.*' does not match its digest"),
        (lambda d: d["dynamic"].__setitem__("graph", "builtin.module {"), OmError, r"the model's dynamic graph does not parse"),
        (lambda d: d["dynamic"]["inputs"][0].__setitem__(0, "x"), OmError, r"dynamic\.ranges has inputs \['input'\]; the graph's are \['x'\]"),
    ],
)
def test_a_tampered_graph_or_weight_is_refused_before_it_runs(
    resnet_dynamic: ge.Model, tmp_path: Path, change, error: type, message: str, rewritten
) -> None:
    path = Path(resnet_dynamic.save(tmp_path / "dyn.om"))
    with pytest.raises(error, match=message):
        Session().run(rewritten(path, tmp_path / "bad.om", change), {"input": images(1)})


# ---------------------------------------------------------------- real models


@pytest.mark.slow
def test_resnet50_dynamic_batch_equals_onnxruntime(tmp_path: Path) -> None:
    from ge.testing.real_models import model_path

    path = with_dynamic_dims(model_path("resnet50"), tmp_path / "resnet50_n.onnx", {0: "N"})
    model = ge.compile(path, {"input_shape": "input:1~4,3,224,224"})
    session = Session()
    for batch in (1, 2):
        x = np.random.default_rng(batch).standard_normal((batch, 3, 224, 224)).astype(np.float32)
        got = session.run(model, {"input": x}).outputs
        (name, want), = zip(got, onnxruntime(path, {"input": x}))
        assert got[name].shape == want.shape == (batch, 1000)
        for ours, theirs in zip(got[name].astype(np.float64), want.astype(np.float64)):  # float16 compute: as tests/test_sim_models.py measures it
            assert ours @ theirs / (np.linalg.norm(ours) * np.linalg.norm(theirs)) > 0.999
        np.testing.assert_array_equal(got[name].argmax(-1), want.argmax(-1))
    with pytest.raises(InputError, match="outside the model's shape ranges input:1~4,3,224,224"):
        session.run(model, {"input": np.zeros((5, 3, 224, 224), np.float32)})


def test_a_module_takes_ranges_only_on_its_dynamic_dims() -> None:
    module, _ = ge.load_onnx(RESNET, input_shape="input:-1,3,32,32")
    with pytest.raises(OptionError, match="only its '\\?' dims take ranges"):
        ge.compile(module, {"input_shape": "input:1~4,3,1~32,32"})
    assert ge.compile(module, {"input_shape": RANGES}).dynamic is not None


def test_a_model_error_names_the_op_when_a_shape_is_out_of_its_rule(tmp_path: Path) -> None:
    """A shape the ranges allow but an op's shape rule refuses fails at the host's InferShape, naming the op."""
    model = ge.compile(RESNET, {"input_shape": "input:1~2,3,-1,-1"})
    with pytest.raises(ModelError, match=r"MaxPoolV3 'stem.pool': its shape for inputs \{'input': \(1, 3, 1, 1\)\} cannot be inferred: window of 2"):
        Session().run(model, {"input": np.zeros((1, 3, 1, 1), np.float32)})
    assert Session().run(model, {"input": images(2)[:, :, :16, :24].copy()}).outputs["logits"].shape == (2, 10)
