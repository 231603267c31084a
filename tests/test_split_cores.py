"""A cube kernel's vector half on a part with split cores (Ascend910B1: cube cores
and vector cores apart, two vector cores to a cube core): the vector cores load UB
with an MTE2 of their own (`ge.sim.program.AIV_MTE2`), issue from their own scalar
unit and share the half's work, and the workspace through which FIX hands them the
result tiles stays in L2 (`ge.sim.l2.L2Cache.keeps`). Checked: which queue each
load runs on, on both kinds of part; the two vector cores' shares; the separate
issue; the workspace's traffic in L2 and out of the GM ledger; the keep rule; the
numerics against the reference interpreter."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.session import Session
from ge.sim import costs, program, timing
from ge.sim.config import RunConfig
from ge.sim.l2 import L2Cache
from ge.sim.profile import Profile
from ge.sim.program import AIV_MTE2, PIPE, RUN

F = TensorProto.FLOAT


def residual_matmul(rows: int, k: int, n: int, seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """y = x @ w + r: on the 910B1 a matmul whose Add runs on the vector core (a mixed epilogue)."""
    rng = np.random.default_rng(seed)
    weight = numpy_helper.from_array((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "r"], ["y"])], "residual",
        [helper.make_tensor_value_info("x", F, [rows, k]), helper.make_tensor_value_info("r", F, [rows, n])],
        [helper.make_tensor_value_info("y", F, [rows, n])], [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    feeds = {"x": rng.standard_normal((rows, k)).astype(np.float32), "r": rng.standard_normal((rows, n)).astype(np.float32)}
    return model, feeds


def compiled(soc: str, rows: int = 512, k: int = 256, n: int = 512) -> ge.Model:
    return ge.compile(ge.load_onnx(residual_matmul(rows, k, n)[0])[0], {"soc_version": soc})


def the_kernel(model: ge.Model) -> program.KernelText:
    (text,) = [t for t in program.split_kernels(model.kernels).values() if "Add" in t.header.op_types]
    return text


def copies(instructions: tuple) -> list[tuple[int, str]]:
    """(pipe, label) of every copy of a program, loops unrolled once."""
    out = []
    for ins in instructions:
        if ins[0] == program.LOOP:
            out += copies(ins[2])
        elif ins[0] == RUN and "_TO_" in ins[7]:
            out.append((ins[1], ins[7]))
    return out


def timed(model: ge.Model, l2_cache: bool = True) -> Profile:
    return Session(RunConfig(timing_only=True, l2_cache=l2_cache)).run(model).profile


def test_the_vector_core_loads_ub_with_its_own_mte2() -> None:
    text = the_kernel(compiled("Ascend910B1"))
    assert text.header.core_type == "AiCore"
    loads = copies(text.program())
    into_ub = [pipe for pipe, label in loads if label.startswith("GM_TO_UB")]
    into_l1 = [pipe for pipe, label in loads if label.startswith("GM_TO_L1")]
    assert into_ub and set(into_ub) == {PIPE[AIV_MTE2]}
    assert into_l1 and set(into_l1) == {PIPE["MTE2"]}
    block = timing.time_block(text.program())
    assert block.busy[PIPE[AIV_MTE2]] > 0 and block.busy[PIPE["MTE2"]] > 0


def test_two_vector_cores_share_each_copy_and_instruction_of_the_half() -> None:
    """Each moves or computes half (in the time of half), the bytes through GM all of it."""
    lines = [
        'ascend_kernel.copy "MTE2" %g -> %u, 8192 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">',
        'ascend_kernel.vec "VADD" "FP16_FP16_FP16"(%u, %u, %u) x 4096 : (!ascend_kernel.buffer<"UB">) -> ()',
        'ascend_kernel.copy "MTE2" %g -> %l, 8192 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"L1">',
    ]
    load, add, panel = program.decode(lines, "Ascend910B1")
    assert load[1] == PIPE[AIV_MTE2] and load[2] == costs.transfer_cycles("Ascend910B1", "GM_TO_UB", 4096) and load[3] == 8192
    assert add[2] == costs.vector_cycles("Ascend910B1", "VADD", "FP16_FP16_FP16", 2048) and add[8] == 4096
    assert panel[1] == PIPE["MTE2"] and panel[2] == costs.transfer_cycles("Ascend910B1", "GM_TO_L1", 8192)


def test_where_the_vector_unit_is_beside_the_cube_one_mte2_loads_both() -> None:
    text = the_kernel(compiled("Ascend310P3"))
    assert PIPE[AIV_MTE2] not in {pipe for pipe, _ in copies(text.program())}


def test_a_vector_kernel_on_the_vector_cores_keeps_its_mte2() -> None:
    b = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu", [helper.make_tensor_value_info("x", F, [64, 256])],
        [helper.make_tensor_value_info("y", F, [64, 256])],
    )
    model = ge.compile(ge.load_onnx(helper.make_model(b, opset_imports=[helper.make_opsetid("", 17)], ir_version=8))[0], {"soc_version": "Ascend910B1"})
    vector = [text for text in program.split_kernels(model.kernels).values() if text.header.core_type == "VectorCore"]
    assert vector
    for text in vector:
        loads = {pipe for pipe, label in copies(text.program()) if label.startswith("GM_TO_UB")}
        assert loads == {PIPE["MTE2"]}


def test_the_workspace_ring_stays_in_l2() -> None:
    """FIX writes each tile to the workspace and the vector core reads it back: both in
    L2, none of it in GM; without L2 it all goes through GM."""
    model = compiled("Ascend910B1")
    text = the_kernel(model)
    block = timing.time_block(text.program())
    dim = text.header.block_dim
    assert block.scratch > 0 and block.scratch_read == pytest.approx(block.scratch / 2)
    (on,) = [r for r in timed(model).kernels() if r.kernel == text.header.name]
    (off,) = [r for r in timed(model, l2_cache=False).kernels() if r.kernel == text.header.name]
    assert on.l2_hits >= dim * block.scratch
    assert off.l2_hits == 0
    assert dim * block.gm_bytes - on.l2_hits <= dim * (block.gm_bytes - block.scratch)
    assert on.end - on.start <= off.end - off.start


def test_l2_keeps_scratch_whose_reuse_distance_fits() -> None:
    cache = L2Cache(1000)
    assert cache.keeps(100, 5000, 20000)  # a ring read 50 times while 20,000 bytes pass: 400 apart
    assert not cache.keeps(100, 100, 20000)  # written, then read once after everything else
    assert not cache.keeps(2000, 4000, 0)  # larger than L2
    assert not cache.keeps(0, 0, 10)  # no workspace


@pytest.mark.parametrize("soc", ["Ascend910B1", "Ascend310P3"])
def test_the_mixed_kernel_computes_the_reference(soc: str) -> None:
    model, feeds = residual_matmul(96, 80, 144, seed=3)
    graph = ge.load_onnx(model)[0]
    want = ge.reference.run(graph, feeds)["y"]
    got = Session(RunConfig()).run(ge.compile(graph, {"soc_version": soc}), feeds).outputs["y"]
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-2, atol=2e-2)


def test_a_full_vector_queue_stalls_only_the_vector_cores_issue() -> None:
    """Seventeen vector instructions wait for a long mmad; the load after them in
    program order is the cube core's. With one scalar unit issuing both, the full V
    queue holds the load back until the mmad ends; with the vector core's own, the
    cube core's MTE2 loads at once."""
    vec = 'ascend_kernel.vec "VADD" "FP16_FP16_FP16"(%u, %u, %u) x 2048 : (!ascend_kernel.buffer<"UB">) -> ()'
    lines = [
        'ascend_kernel.mmad %a, %b -> %c, 256 x 256 x 256, f16 : (!ascend_kernel.buffer<"L0A">) -> ()',
        'ascend_kernel.set_flag "M" -> "V", 0',
        'ascend_kernel.wait_flag "M" -> "V", 0',
        *[vec] * 17,
        'ascend_kernel.copy "MTE2" %g -> %l, 4096 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"L1">',
    ]
    decoded = program.decode(lines, "Ascend910B1")

    def load_start(apart: bool) -> float:
        spans = timing.time_block(decoded, trace=True, vector_half_apart=apart).spans
        return next(s.start for s in spans if s.pipe == PIPE["MTE2"])

    mmad_end = timing.time_block(decoded[:1]).cycles
    assert load_start(False) >= mmad_end
    assert load_start(True) < mmad_end / 10


def test_a_flag_naming_the_cube_core_holds_the_cube_cores_load() -> None:
    """The vector core stores a tile and the cube core loads it into L1: a flag from
    MTE3 to MTE2 naming the cube core holds the L1 load until the store is done (a
    flag naming no core is the vector core's own, as a UB slot's reuse after its
    store, and leaves the cube core's MTE2 free); one naming the vector core holds
    its UB load."""
    store = 'ascend_kernel.copy "MTE3" %u -> %g, 65536 bytes : !ascend_kernel.buffer<"UB"> -> !ascend_kernel.buffer<"GM">'
    into_l1 = 'ascend_kernel.copy "MTE2" %g -> %l, 4096 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"L1">'
    into_ub = 'ascend_kernel.copy "MTE2" %g -> %v, 4096 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">'

    def load_start(core: str, load: str) -> tuple[float, float]:
        flag = f'"MTE3" -> "MTE2", 0{core}'
        lines = [store, f"ascend_kernel.set_flag {flag}", f"ascend_kernel.wait_flag {flag}", load]
        spans = timing.time_block(program.decode(lines, "Ascend910B1"), trace=True, vector_half_apart=True).spans
        stored = next(s.end for s in spans if s.pipe == PIPE["MTE3"])
        return next(s.start for s in spans if s.label.startswith("GM_TO_")), stored

    start, stored = load_start(' core "cube"', into_l1)
    assert start >= stored
    start, stored = load_start("", into_l1)
    assert start < stored
    start, stored = load_start(' core "vector"', into_ub)
    assert start >= stored
    with pytest.raises(ge.ModelError, match="flag core 'aiv'"):
        program.decode(['ascend_kernel.set_flag "MTE3" -> "MTE2", 0 core "aiv"'], "Ascend910B1")
