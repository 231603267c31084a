"""What a multi-gear compile shares between its gears, and the gear selection on the device.

Sharing (`ge.gears`): derived weights computed once (`ge.core.weights.derived_once`),
kernels of equal scopes lowered once (`passes.lower_to_kernel.shared_kernels`); each
gear's kernels and task list stay those of a static compile of its shape. Selection:
the Case's tasks (`ge.om.gears.case`) that the simulator runs and charges."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

import ge
from ge import distributed, gears
from ge.core.errors import InputError
from ge.core.options import CompileOptions
from ge.core.weights import derived_once
from ge.models import DEMO_MODELS
from ge.om import (
    LabelSetTask,
    LabelSwitchTask,
    MemcpyTask,
    ModelEndGraphTask,
    StreamActiveTask,
)
from ge.om.gears import GEAR_INDEX
from ge.om.model import OmError
from ge.session import Session
from ge.sim import timing
from ge.sim.config import RunConfig
from ge.testing.gear_models import bert_like, bert_like_inputs
from passes.lower_to_kernel import shared_kernels

RESNET = DEMO_MODELS[0].path
BATCHES = (1, 2, 4)
SEQS = (8, 16)
ARG_FIELDS = ("inputs", "outputs", "workspace")


def kernel_texts(model: ge.Model) -> dict[str, str]:
    """Each kernel's IR text by name, its symbol name left out."""
    text = model.kernels
    starts = [(m.group(1), m.start()) for m in re.finditer(r"^ascend_kernel\.kernel @(\S+) attributes \{", text, re.MULTILINE)]
    ends = [s for _, s in starts[1:]] + [len(text)]
    return {name: text[s:e].replace(f"@{name} ", "@ ", 1) for (name, s), e in zip(starts, ends)}


def placed(model: ge.Model, tasks: tuple, memory) -> list[dict[str, object]]:
    """The tasks with every argument as (its tensor's name, region and size, the offset
    in it, the bytes) and every kernel as its text: what a task list says, wherever
    the layout put its regions and weights."""
    bodies = kernel_texts(model)

    def arg(a: list[int]) -> tuple[object, ...]:
        p = memory.placements[a[0]]
        return (p.name, p.region.value, p.size, a[1] - memory.addr(a[0]), a[2])

    out = []
    for t in tasks:
        d = t.to_json()
        for key in ARG_FIELDS:
            if key in d:
                d[key] = [arg(a) for a in d[key]]
        for key in ("arg", "index", "src", "dst"):
            if key in d:
                d[key] = arg(d[key])
        if "kernel" in d:
            d["kernel"] = bodies[d["kernel"]]
        out.append(d)
    return out


def own_tasks(model: ge.Model, index: int) -> list[dict[str, object]]:
    """Gear `index`'s own task list, placed."""
    gear = model.gears[index]
    return placed(model, gear.tasks, gear.memory)


@pytest.fixture(scope="module")
def resnet_gears() -> ge.Model:
    return ge.compile(RESNET, {"input_shape": "input:-1,3,32,32", "dynamic_batch_size": ",".join(map(str, BATCHES))})


@pytest.fixture(scope="module")
def resnet_static() -> dict[int, ge.Model]:
    return {b: ge.compile(RESNET, {"input_shape": f"input:{b},3,32,32"}) for b in BATCHES}


@pytest.fixture(scope="module")
def bert_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(bert_like(tmp_path_factory.mktemp("share") / "bert_like.onnx"))


# ---------------------------------------------------------------- sharing keeps every gear a static compile


@pytest.mark.slow
def test_gear_kernels_and_tasks_are_the_static_compiles(resnet_gears: ge.Model, resnet_static: dict[int, ge.Model]) -> None:
    for i, b in enumerate(BATCHES):
        static = resnet_static[b]
        assert own_tasks(resnet_gears, i) == placed(static, static.tasks, static.memory)
    assert resnet_gears.build["gears"]["compile"]["derived_weights"] > 0


@pytest.mark.slow
def test_bert_gears_are_the_static_compiles(bert_path: Path) -> None:
    model = ge.compile(bert_path, {"input_shape": "input_ids:1,-1;attention_mask:1,-1", "dynamic_dims": ";".join(f"{s},{s}" for s in SEQS)})
    for i, seq in enumerate(SEQS):
        static = ge.compile(bert_path, {"input_shape": f"input_ids:1,{seq};attention_mask:1,{seq}"})
        assert own_tasks(model, i) == placed(static, static.tasks, static.memory)


@pytest.mark.slow
def test_kernels_equal_across_gears_are_lowered_once(tmp_path: Path) -> None:
    """Image-size gears of the tiny ResNet: what follows its global pooling (the
    classifier) is the same scope in both gears, so the second gear takes the first's
    kernel, and is still its static compile."""
    model = ge.compile(RESNET, {"input_shape": "input:1,3,-1,-1", "dynamic_image_size": "32,32;64,64"})
    shared = model.build["gears"]["compile"]
    assert shared["kernels_taken"] > 0
    assert shared["kernels_lowered"] + shared["kernels_taken"] == model.build["gears"]["kernels"]["per_gear"]
    for i, hw in enumerate((32, 64)):
        static = ge.compile(RESNET, {"input_shape": f"input:1,3,{hw},{hw}"})
        assert own_tasks(model, i) == placed(static, static.tasks, static.memory)


@pytest.mark.slow
def test_sharing_contexts_leave_a_compile_as_it_was() -> None:
    """A static compile run twice inside the sharing contexts: the second takes every
    kernel and derived weight from the first, and both are the plain compile."""
    flags = {"input_shape": "input:2,3,32,32"}
    plain = ge.compile(RESNET, flags)
    with derived_once() as memo, shared_kernels() as kernels:
        first = ge.compile(RESNET, flags)
        derived = len(memo)
        second = ge.compile(RESNET, flags)
    assert derived > 0 and len(memo) == derived  # the second derived nothing new
    assert kernels.hits == len(kernels.kernels) == len(kernel_texts(plain))
    for model in (first, second):
        assert model.kernels == plain.kernels
        assert model.tasks == plain.tasks
        assert bytes(model.weights) == bytes(plain.weights)


@pytest.mark.slow
def test_gears_built_in_parallel_are_the_serial_build(resnet_gears: ge.Model) -> None:
    options = CompileOptions.from_flags(input_shape="input:-1,3,32,32", dynamic_batch_size=",".join(map(str, BATCHES)))
    parallel = gears.compile(RESNET, options, distributed.backend("local", 2))
    assert parallel.build["gears"]["compile"]["workers"] == 2
    assert parallel.kernels == resnet_gears.kernels
    assert [dataclasses.replace(g, build={}) for g in parallel.gears] == [dataclasses.replace(g, build={}) for g in resnet_gears.gears]  # build: timings
    assert parallel.gear_index == resnet_gears.gear_index
    assert bytes(parallel.weights) == bytes(resnet_gears.weights)


# ---------------------------------------------------------------- the Case on the device


@pytest.mark.slow
def test_case_tasks_switch_to_each_gear(resnet_gears: ge.Model) -> None:
    gears = resnet_gears.gears
    for i in range(len(gears)):
        view = resnet_gears.gear(i)
        copy, switch, *rest = view.tasks
        assert isinstance(copy, MemcpyTask) and copy.port == len(view.inputs) - 1
        assert view.inputs[-1].name == GEAR_INDEX and (copy.arg.addr, copy.arg.size) == (view.inputs[-1].addr, 4)
        assert isinstance(switch, LabelSwitchTask) and switch.labels == tuple(range(len(gears))) and switch.index == copy.arg
        labels = [j for j, t in enumerate(rest) if isinstance(t, LabelSetTask)]
        assert [rest[j].label for j in labels] == list(range(len(gears)))
        for g, (start, end) in enumerate(zip(labels, [*labels[1:], len(rest)])):
            section = rest[start + 1 : end]
            if gears[g].streams > 1:
                active, *section = section
                assert isinstance(active, StreamActiveTask) and len(active.streams) == gears[g].streams - 1
            assert isinstance(section[-1], ModelEndGraphTask)
            assert [t.KIND for t in section] == [t.KIND for t in gears[g].tasks]


@pytest.mark.slow
@pytest.mark.parametrize("timing_only", [False, True])
def test_the_run_takes_the_gear_of_its_inputs(resnet_gears: ge.Model, resnet_static: dict[int, ge.Model], timing_only: bool) -> None:
    session = Session(RunConfig(timing_only=timing_only))
    for i, b in enumerate(BATCHES):
        x = np.random.default_rng(b).standard_normal((b, 3, 32, 32)).astype(np.float32)
        geared, static = session.run(resnet_gears, {"input": x}), session.run(resnet_static[b], {"input": x})
        records = geared.profile.records
        switch = next(r for r in records if r.kind == "LABEL_SWITCH_BY_INDEX")
        assert switch.name == f"go to label {i}"
        assert [r.name for r in records if r.kind == "KERNEL"] == [r.name for r in static.profile.records if r.kind == "KERNEL"]
        case = sum(r.end - r.start for r in records if r.kind in ("LABEL_SWITCH_BY_INDEX", "LABEL_SET", "STREAM_ACTIVE")) / geared.profile.soc.clock_mhz
        assert case == pytest.approx(timing.LABEL_SWITCH_US + timing.LABEL_US + timing.STREAM_ACTIVE_US)
        index = resnet_gears.gear_index.size / timing.PCIE_BYTES_PER_US  # its copy is fused with the input's
        assert geared.latency_us == pytest.approx(static.latency_us + case + index)
        assert geared.latency_us <= 1.05 * static.latency_us  # a 60 us model; the benchmark's real models stay within 2 %
        if not timing_only:
            np.testing.assert_array_equal(geared.outputs["logits"], static.outputs["logits"])


@pytest.mark.slow
def test_bert_gear_outputs_and_selection(bert_path: Path) -> None:
    model = ge.compile(bert_path, {"input_shape": "input_ids:1,-1;attention_mask:1,-1", "dynamic_dims": ";".join(f"{s},{s}" for s in SEQS)})
    session = Session()
    for i, seq in enumerate(SEQS):
        static = ge.compile(bert_path, {"input_shape": f"input_ids:1,{seq};attention_mask:1,{seq}"})
        feeds = bert_like_inputs(seq)
        geared, alone = session.run(model, feeds), session.run(static, feeds)
        assert next(r for r in geared.profile.records if r.kind == "LABEL_SWITCH_BY_INDEX").name == f"go to label {i}"
        for name, value in alone.outputs.items():
            np.testing.assert_array_equal(geared.outputs[name], value)


@pytest.mark.slow
def test_unknown_shape_and_a_given_gear_index_are_refused(resnet_gears: ge.Model) -> None:
    with pytest.raises(InputError, match=r"match no gear.*3 gears are: input:1,3,32,32 \| input:2,3,32,32 \| input:4,3,32,32"):
        Session().run(resnet_gears, {"input": np.zeros((8, 3, 32, 32), np.float32)})
    with pytest.raises(InputError, match=f"'{GEAR_INDEX}' is the gear index, which the runtime fills"):
        Session().run(resnet_gears, {"input": np.zeros((1, 3, 32, 32), np.float32), GEAR_INDEX: np.array([2], np.int32)})


# ---------------------------------------------------------------- the .om's gear-index input




@pytest.mark.slow
def test_gear_index_round_trips(resnet_gears: ge.Model, tmp_path: Path) -> None:
    again = ge.load_model(resnet_gears.save(tmp_path / "gears.om"))
    assert again.gear_index == resnet_gears.gear_index
    assert again.gear(1).tasks == resnet_gears.gear(1).tasks


@pytest.mark.slow
@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("gear_index"), r"has gears but no gear_index \(a multi-gear model written by an older ge\); compile it again"),
        (lambda d: d["gear_index"].__setitem__("dtype", "float32"), r"gear_index is 'ascend_gear_index' float32\[1\]"),
        (lambda d: d["gear_index"].__setitem__("addr", d["gears"][0]["inputs"][0]["addr"]), r"after every gear's inputs"),
        (lambda d: d["gear_index"].__setitem__("addr", 1 << 40), r"lies outside the plan"),
        (lambda d: d.pop("gears"), r"gear_index is given, but the model has no gears"),
        (lambda d: d["tasks"].insert(0, {"kind": "STREAM_ACTIVE", "stream": 0, "streams": [99]}), r"tasks\[0\]\.streams\[0\] is 99"),
    ],
)
def test_hostile_gear_index_is_refused(resnet_gears: ge.Model, tmp_path: Path, change, message: str, rewritten) -> None:
    path = Path(resnet_gears.save(tmp_path / "gears.om"))
    with pytest.raises(OmError, match=message):
        ge.load_model(rewritten(path, tmp_path / "bad.om", change))
