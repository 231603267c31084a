"""Self-attention's Q, K and V projections as one phase in the analytic plan
(`attention.Phases.projections`): where the estimate says it is cheaper, the three
matmuls of one input run as `cube.shared_a_program` (each tile of the input loaded
once for the three weights; on a FIX part the biases through the bias table), beside
a flash phase or phases alike. The kernel says so in its tiling
(`qkv_shared`), the tuner's space describes it, and the model simulates to the
reference; cross-attention, and a shape whose estimate favours three phases, keep them."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import ge
from dialects import ascend_kernel as ak
from ge.aoe import Budget, measure, tune
from ge.aoe.search import seed_of
from ge.aoe.tune import _kernels
from ge.core import soc as socs
from ge.sim.config import RunConfig
from ge.sim.program import PIPE, SYNC_ALL
from ge.testing.cube_models import assert_simulates_to_reference
from passes.lower_to_kernel import bank_key, parse_kernel, scope_of_kernel
from passes.lowering import space
from passes.lowering.attention import attention_phases, forced_projections
from passes.lowering.cube import TIE, tile_shared_a

F = TensorProto.FLOAT
SOCS = ("Ascend310P3", "Ascend910B1")
ALL_SOCS = ("Ascend310", "Ascend310P3", "Ascend910A", "Ascend910B1")
"""The 310 and 910A have 4 event ids: the last two B's of the shared phase share one."""
LONG = 1100
"""Tokens whose rows of scores do not fit the 910B1's core: the attention keeps its (tunable) phases."""


def attention_model(b: int, sq: int, heads: int, d: int, *, bias: bool, sk: int = 0, seed: int = 0) -> tuple[onnx.ModelProto, dict]:
    """A multi-head attention block over x of [b, sq, heads * d] (MultiHeadAttentionFusionPass
    makes it one op): self-attention, or with `sk` cross-attention whose keys and
    values project a memory m of [b, sk, heads * d]; the model and random feeds."""
    rng = np.random.default_rng(seed)
    hidden = heads * d
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value, name))
        return name

    def heads_of(n: str, source: str, rows: int, key: bool) -> str:
        w = const("w" + n, (rng.standard_normal((hidden, hidden)) * hidden**-0.5).astype(np.float32))
        nodes.append(helper.make_node("MatMul", [source, w], [n + "0"]))
        out = n + "0"
        if bias:
            nodes.append(helper.make_node("Add", [out, const("b" + n, (rng.standard_normal(hidden) * 0.1).astype(np.float32))], [n + "1"]))
            out = n + "1"
        nodes.append(helper.make_node("Reshape", [out, const("split" + n, np.array([b, rows, heads, d], np.int64))], [n + "r"]))
        nodes.append(helper.make_node("Transpose", [n + "r"], [n + "h"], perm=[0, 2, 3, 1] if key else [0, 2, 1, 3]))
        return n + "h"

    memory, rows = ("m", sk) if sk else ("x", sq)
    q, k, v = heads_of("q", "x", sq, False), heads_of("k", memory, rows, True), heads_of("v", memory, rows, False)
    nodes += [
        helper.make_node("MatMul", [q, k], ["scores"]),
        helper.make_node("Mul", ["scores", const("scale", np.array(d**-0.5, np.float32))], ["scaled"]),
        helper.make_node("Softmax", ["scaled"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", v], ["context"]),
        helper.make_node("Transpose", ["context"], ["merged"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["merged", const("merge", np.array([b, sq, hidden], np.int64))], ["y"]),
    ]
    feeds = {"x": rng.standard_normal((b, sq, hidden)).astype(np.float32)}
    if sk:
        feeds["m"] = rng.standard_normal((b, sk, hidden)).astype(np.float32)
    inputs = [helper.make_tensor_value_info(n, F, a.shape) for n, a in feeds.items()]
    graph = helper.make_graph(nodes, "attention", inputs, [helper.make_tensor_value_info("y", F, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), feeds


def attention_kernel(om: ge.Model) -> ak.KernelOp:
    (kernel,) = [op for op in om.kernel_module().ops if isinstance(op, ak.KernelOp) and "MultiHeadAttention" in [t.data for t in op.op_types]]
    return kernel


def simulate(model: onnx.ModelProto, feeds: dict, soc: str) -> ak.KernelOp:
    """Compile and run `model` on `soc`: its outputs equal the reference interpreter's
    within float16's precision, no kernel beats its roofline; the attention kernel."""
    graph = ge.load_onnx(model)[0]
    want = ge.reference.run(graph, feeds)
    om = ge.compile(graph, {"soc_version": soc})
    with ge.Session(RunConfig()) as session:
        result = session.run(om, feeds)
    for name, value in want.items():
        scale = max(float(np.abs(value).max()), 1.0)
        np.testing.assert_allclose(result.outputs[name], value, rtol=2e-2, atol=2e-2 * scale)
    for row in result.profile.rows():
        assert row.record.duration >= row.roofline.cycles * (1 - 1e-9), row.record.name
    return attention_kernel(om)


def shared(kernel: ak.KernelOp) -> bool:
    return kernel.parameters.get("qkv_shared") == 1


# ---------------------------------------------------------------- the plan


@pytest.mark.parametrize("soc", SOCS)
def test_self_attention_shares_its_projections_and_simulates_to_the_reference(soc):
    """ViT's attention in small (197 tokens, 4 heads of 32, biases): one projection
    phase beside the flash phase, on the 910B1 with the biases through the bias table."""
    model, feeds = attention_model(1, 197, 4, 32, bias=True)
    kernel = simulate(model, feeds, soc)
    assert shared(kernel)
    t = kernel.parameters
    assert all(t[p + "m0"] == t["q_m0"] and t[p + "n0"] == t["q_n0"] for p in ("k_", "v_"))
    assert t["q_b_resident"] == 1 and t["q_k1"] == 128  # B resident, A's whole K in one panel
    assert "flash_rows" in t


def test_the_shared_phase_is_faster_and_reads_its_input_once():
    """On the 910B1 the shared phase pays its first loads once and its blocks read x
    once: its projection phase is faster and moves fewer bytes than the three phases
    (each of whose blocks reads its rows of x) before it."""
    model, _ = attention_model(1, 197, 4, 32, bias=True)

    def projections(om: ge.Model) -> tuple[float, float]:
        with ge.Session(RunConfig(timing_only=True)) as session:
            (row,) = [r for r in session.run(om).profile.rows() if r.record.op_type == "MultiHeadAttention"]
        timing = row.record.block_timing
        return timing.phases[0], row.record.block_dim * timing.phase_gm_bytes[0]

    with forced_projections(False):
        before = ge.compile(ge.load_onnx(model)[0], {"soc_version": "Ascend910B1"})
    after = ge.compile(ge.load_onnx(model)[0], {"soc_version": "Ascend910B1"})
    assert not shared(attention_kernel(before)) and shared(attention_kernel(after))
    (t0, gm0), (t1, gm1) = projections(before), projections(after)
    x = 197 * 128 * 2
    assert t1 < 0.9 * t0 and gm0 - gm1 >= 2 * x  # the blocks read x once, not three times


def test_a_block_of_one_m_tile_keeps_one_copy_of_its_input():
    """ViT-B/16's attention at batch 1 on the 910B1 (197 tokens, 12 heads of 64): the
    shared phase's blocks take one M tile each, so one buffer holds their rows of x
    (its whole K), and the three weights' 64-column tiles fit L1 beside it where two
    copies of x would not; the model simulates to the reference."""
    model, feeds = attention_model(1, 197, 12, 64, bias=True)
    kernel = simulate(model, feeds, "Ascend910B1")
    t = kernel.parameters
    assert shared(kernel) and t["q_block_m"] <= t["q_m0"]
    l1 = socs.load("Ascend910B1").l1_bytes
    x_rows, weights = t["q_m0"] * 768 * 2, 3 * 768 * t["q_n0"] * 2
    assert x_rows + weights <= l1 < 2 * x_rows + weights


def test_a_block_of_one_m_tile_starts_on_the_first_half_of_its_input():
    """The same attention: a block's rows of x load in two halves of K, the first
    weight between them, so the first mmad starts before the second half has loaded
    (x whole first, it waited for all of it) and the model simulates to the reference."""
    model, feeds = attention_model(1, 197, 12, 64, bias=True)
    kernel = simulate(model, feeds, "Ascend910B1")
    assert shared(kernel)
    om = ge.compile(ge.load_onnx(model)[0], {"soc_version": "Ascend910B1"})
    with ge.Session(RunConfig(timing_only=True, profile_level="pipe")) as session:
        (record,) = [r for r in session.run(om).profile.records if r.op_type.startswith("MultiHeadAttention")]
    spans = sorted(record.block_timing.spans, key=lambda s: s.start)
    loads = [(s, int(s.label.split()[1])) for s in spans if s.pipe == PIPE["MTE2"] and s.label.startswith("GM_TO_L1")]
    rows = kernel.parameters["q_m0"] * 768 * 2  # a block's rows of x, whole K
    (_, lo), *rest = loads
    second = next(s for s, nbytes in rest if lo + nbytes == rows)
    assert lo < rows and any(s.start < second.start for s, nbytes in rest[:2])  # a weight between the halves
    assert min(s.start for s in spans if s.pipe == PIPE["M"]) < second.end


@pytest.mark.parametrize("soc", SOCS)
def test_cross_attention_keeps_three_phases(soc):
    """Keys and values from another input than the queries: no input to share."""
    model, feeds = attention_model(2, 24, 2, 32, bias=True, sk=40)
    kernel = simulate(model, feeds, soc)
    assert not shared(kernel) and "qkv_shared" not in kernel.parameters


def test_a_shape_whose_estimate_favours_three_phases_keeps_them():
    """ViT-B/16's attention at batch 8 on the 910B1: the three projections, each split
    over the 24 cores as `tile_gemm` chooses, cost less than the shared phase, whose
    three weights' tiles and A's whole K must share L1 (smaller tiles, more re-reads)."""
    model, _ = attention_model(8, 197, 12, 64, bias=True)
    om = ge.compile(ge.load_onnx(model)[0], {"soc_version": "Ascend910B1"})
    kernel = attention_kernel(om)
    assert not shared(kernel)
    profile = socs.load("Ascend910B1")
    ph = attention_phases(profile, scope_of_kernel(kernel).ops[0], profile.ai_cores)
    found = tile_shared_a(profile, ph.gemms[0], 3, ph.block_dim, ph.shared_fits)
    assert found is not None
    assert found[1] > ph.separate_cost([ph.tiling(i) for i in range(3)]) * TIE
    with forced_projections(True):  # the one phase, where the estimate would not take it, still builds and runs
        forced = attention_kernel(ge.compile(ge.load_onnx(model)[0], {"soc_version": "Ascend910B1"}))
    assert shared(forced) and forced.parameters["q_m0"] == found[0].m0 and forced.parameters["q_n0"] == found[0].n0


def test_the_tuning_space_describes_the_shared_plan():
    """A phased kernel on the 910B1 (1,100 keys: 16 rows of scores overflow L0C, so no
    flash phase): its analytic tiling, qkv_shared included, is its seed in the tuning
    space, legal, and builds the analytic kernel; the three projections apart are one
    move away."""
    model, _ = attention_model(1, LONG, 2, 32, bias=True)
    om = ge.compile(ge.load_onnx(model)[0], {"soc_version": "Ascend910B1"})
    kernel = attention_kernel(om)
    scope = scope_of_kernel(kernel)
    profile = socs.load("Ascend910B1")
    sp = space.space_of(profile, scope.ops, scope.inputs, scope.outputs)
    assert isinstance(sp, space.AttentionSpace)
    tiling = {k: v.value.data for k, v in kernel.tiling.data.items()}  # type: ignore[attr-defined]
    seed = seed_of(sp, tiling, kernel.block_dim.value.data)
    assert seed == sp.analytic() and seed[space.SHARED] == 1 and sp.legal(seed)
    assert sp.chosen(seed) == sp.phases.analytic()
    assert {k: v for k, v in seed.items() if k != space.SHARED} in sp.neighbours(seed)
    drawn = [t for _, t in zip(range(60), sp.candidates())]
    assert all(sp.legal(t) for t in drawn)
    assert any(sp.part(t, 0) != sp.part(t, 1) for t in drawn)  # a projection's own tilings are drawn too, the three apart


def test_ge_aoe_tunes_a_kernel_whose_analytic_plan_shares(tmp_path):
    """Operator tuning takes the shared plan of a phased kernel as its seed and ends no slower than it."""
    model, _ = attention_model(1, LONG, 2, 32, bias=True)
    path = tmp_path / "attention.onnx"
    onnx.save(model, path)
    (tmp_path / "bank").mkdir()
    report = tune(path, "Ascend910B1", backend="inprocess", budget=Budget(candidates=30), bank_root=str(tmp_path / "bank"))
    (row,) = [r for r in report.kernels if r.kind == "attention"]
    assert row.analytic_tiling is not None and row.analytic_tiling[space.SHARED] == 1
    assert row.tuned_cycles <= row.analytic_cycles and report.after_us <= report.before_us * (1 + 1e-9)


def test_ge_aoe_tunes_the_projections_of_a_flash_kernel(tmp_path):
    """On the 910B1 a 128-token self-attention runs its scores, softmax and context as
    one flash phase: operator tuning still searches its projections (shared or
    apart), seeds from the analytic ones, and ends no slower."""
    model, _ = attention_model(1, 128, 2, 32, bias=True)
    path = tmp_path / "attention.onnx"
    onnx.save(model, path)
    (tmp_path / "bank").mkdir()
    report = tune(path, "Ascend910B1", backend="inprocess", budget=Budget(candidates=30), bank_root=str(tmp_path / "bank"))
    (row,) = [r for r in report.kernels if r.kind == "attention"]
    assert row.analytic_tiling is not None and space.SOFTMAX not in row.analytic_tiling
    assert {k[:2] for k in row.analytic_tiling if k != space.SHARED} == {"q_", "k_", "v_"}
    assert row.tuned_cycles <= row.analytic_cycles and report.after_us <= report.before_us * (1 + 1e-9)


@pytest.mark.parametrize("soc", SOCS)
def test_cross_attention_in_one_flash_phase_tunes_each_projection_apart(soc):
    """A cross-attention (24 queries over 40 keys of another input) runs one flash phase:
    its space is its three projections, which cannot share (no `qkv_shared` move), and a
    tiling moving only the key projection builds a kernel that still simulates to the
    reference."""
    model, feeds = attention_model(1, 24, 2, 32, bias=True, sk=40)
    flags = {"soc_version": soc}
    om = ge.compile(ge.load_onnx(model)[0], flags)
    kernel = attention_kernel(om)
    scope = scope_of_kernel(kernel)
    sp = space.space_of(socs.load(soc), scope.ops, scope.inputs, scope.outputs)
    assert isinstance(sp, space.AttentionSpace) and sp.flash and "flash_rows" in kernel.parameters
    seed = seed_of(sp, {k: v.value.data for k, v in kernel.tiling.data.items()}, kernel.block_dim.value.data)  # type: ignore[attr-defined]
    assert seed == sp.analytic() and space.SHARED not in seed and space.SOFTMAX not in seed
    near = sp.neighbours(seed)
    assert near and not any(t.get(space.SHARED) for t in near)
    moved = next(t for t in near if sp.part(t, 1) != sp.part(seed, 1) and sp.part(t, 0) == sp.part(seed, 0))
    key = bank_key(scope, soc)
    with space.using(lambda k: moved if k == key else None):
        tuned = ge.compile(ge.load_onnx(model)[0], flags)
    parameters = attention_kernel(tuned).parameters
    assert all(parameters[f"k_{name}"] == value for name, value in sp.part(moved, 1).items())
    assert_simulates_to_reference(tuned, model, feeds)


@pytest.mark.parametrize(("soc", "sk"), [("Ascend310P3", 0), ("Ascend910B1", 0), ("Ascend910B1", 40)])
def test_the_tuner_times_a_flash_kernels_candidates_as_their_whole_builds(soc, sk):
    """The tuner builds a candidate for the projections of a flash phase without the
    phase, which the projections' tiling leaves as it is, and times the analytic
    build's phase after them (`ge.aoe.measure.built`): the program it times is the
    whole build's, instruction for instruction, shared projections or apart."""
    model, _ = attention_model(1, 24, 2, 32, bias=True, sk=sk)
    om = ge.compile(ge.load_onnx(model)[0], {"soc_version": soc})
    kernels, _ = _kernels(om, soc)
    (k,) = [k for k in kernels if isinstance(k.space, space.AttentionSpace)]
    assert k.space.flash
    candidates = [k.seed, *k.space.neighbours(k.seed)[:4]]
    assert any(t.get(space.SHARED) for t in candidates) == (sk == 0)
    for t in candidates:
        job = k.job(soc, [t])
        header, spliced = measure.built(job, t)
        assert len(spliced) > 2 and spliced[-2][0] == SYNC_ALL
        assert (header, spliced) == measure.built_whole(soc, scope_of_kernel(parse_kernel(k.text)), t)


def test_flash_kernels_record_the_shared_projections():
    """On the 310P3 the flash kernel's tiling names the projections' one phase beside
    the flash phase's parameters."""
    model, _ = attention_model(2, 40, 2, 32, bias=False)
    om = ge.compile(ge.load_onnx(model)[0], {"soc_version": "Ascend310P3"})
    t = attention_kernel(om).parameters
    assert t["qkv_shared"] == 1 and "flash_rows" in t and "softmax_tile_rows" not in t


# ---------------------------------------------------------------- random shapes


@pytest.mark.slow
@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    soc=st.sampled_from(ALL_SOCS),
    b=st.integers(1, 3),
    s=st.sampled_from([1, 7, 16, 40, 77, 128]),
    heads=st.integers(1, 4),
    d=st.sampled_from([8, 24, 32, 64]),
    bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_random_self_attention_with_shared_projections_simulates_to_the_reference(soc, b, s, heads, d, bias, seed):
    """Random self-attention shapes (whose small inputs the estimate always shares)
    run the shared phase and simulate to the reference."""
    model, feeds = attention_model(b, s, heads, d, bias=bias, seed=seed)
    assert shared(simulate(model, feeds, soc))
