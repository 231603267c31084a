"""The cube tiling's one cost (`passes.lowering.cube.tile_gemm`): its first loads and
last drain, its L1 panel depth and B's residency, re-reads at L2's rate where L2
holds the working set; and the mixed epilogue whose vector half loads on its own core.

Checked here: over random convolution and matmul shapes, every tiling fits the
core's buffers and covers the work, and compiled models (with a residual Add, the
mixed epilogue on Ascend910B1) simulate to the reference interpreter's values; a
block whose one M tile would wait for its whole weights loads them panel by panel;
a mixed epilogue's MTE2 loads the next panel while the cube computes; the cost
counts the loads that MTE1's full issue queue holds back, and drains a block's last
tile at its own size."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from xdsl.dialects.builtin import Float16Type

import ge
from dialects.ascend_kernel import BIAS_TABLE_BYTES, AllocOp, KernelOp
from ge.aoe.tune import _kernels
from ge.core import soc as socs
from ge.sim.config import RunConfig
from ge.testing.cube_models import assert_simulates_to_reference
from ge.sim.program import AIV_MTE2, PIPE
from passes.lowering import space
from passes.lowering.cube import Epilogue, EpiValue, Gemm, tile_gemm

F = TensorProto.FLOAT
F16 = Float16Type()
SOCS = ("Ascend310", "Ascend310P3", "Ascend910A", "Ascend910B1")


def residual_conv_model(n: int, c: int, h: int, k: int, seed: int) -> tuple[onnx.ModelProto, dict]:
    """Conv (with bias, same channels and size) + Add of its input + Relu: on a part
    with a FIX pipe, a mixed epilogue."""
    rng = np.random.default_rng(seed)
    weight = numpy_helper.from_array((rng.standard_normal((c, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal(c).astype(np.float32) * 0.1, "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[k, k], pads=[k // 2] * 4),
        helper.make_node("Add", ["y", "x"], ["s"]),
        helper.make_node("Relu", ["s"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes, "residual", [helper.make_tensor_value_info("x", F, [n, c, h, h])], [helper.make_tensor_value_info("z", F, None)], [weight, bias]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, {"x": rng.standard_normal((n, c, h, h)).astype(np.float32)}


def simulate(model: onnx.ModelProto, feeds: dict | None, soc: str, config: RunConfig | None = None):
    om = ge.compile(ge.load_onnx(model)[0], {"soc_version": soc})
    with ge.Session(config) as session:
        return session.run(om, feeds)


# ------------------------------------------------------------- tilings fit


def check_tiling(soc: str, gemm: Gemm, cores: int) -> None:
    """The tiling covers the Gemm in one wave and its buffers fit the core's memories."""
    profile = socs.load(soc)
    t = tile_gemm(profile, gemm, cores, lambda m, n: 0, bias_table=profile.fix_pipe)
    assert t.block_dim <= cores
    assert t.batch_dim * t.bb >= gemm.batch and t.m_dim * t.mb >= gemm.m and t.n_dim * t.nb >= gemm.n
    k = -(-gemm.k // t.kc) * t.kc
    assert t.m0 % 16 == 0 and t.n0 % 16 == 0 and t.k0 % t.kc == 0 and t.k1 <= max(t.k0, k)
    assert t.k1 % t.k0 == 0 or t.k1 == k  # whole k0 steps, or the whole K in one panel
    assert 2 * t.m0 * t.k0 * gemm.in_bytes <= profile.l0a_bytes and 2 * t.k0 * t.n0 * gemm.in_bytes <= profile.l0b_bytes
    assert t.l0c_buffers * t.m0 * t.n0 * 4 <= profile.l0c_bytes
    b_k = k if t.b_resident else t.k1
    a_k = k if t.a_resident else t.k1  # A's whole K where it stays in L1 across the N tiles
    l1 = (1 if t.a_single else 2) * gemm.a_l1_bytes(t.m0, a_k, t.kc) + (1 if t.b_single else 2) * b_k * t.n0 * gemm.in_bytes
    assert l1 <= profile.l1_bytes - (BIAS_TABLE_BYTES if profile.fix_pipe else 0)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(
    soc=st.sampled_from(SOCS),
    n=st.integers(1, 8),
    c=st.integers(1, 512),
    h=st.integers(1, 56),
    cout=st.integers(1, 512),
    k=st.sampled_from([1, 3, 5, 7]),
    stride=st.integers(1, 2),
)
def test_random_convolution_tilings_fit_and_cover(soc, n, c, h, cout, k, stride):
    hi = h + 2 * (k // 2)
    ho = (hi - k) // stride + 1
    c1 = -(-c // 16) * 16
    gemm = Gemm(1, n * ho * ho, c1 * k * k, -(-cout // 16) * 16, F16, F16, conv=(hi, hi, ho, stride, k), window=k * k)
    check_tiling(soc, gemm, socs.load(soc).ai_cores)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(
    soc=st.sampled_from(SOCS),
    batch=st.integers(1, 12),
    m=st.integers(1, 2048),
    k=st.integers(1, 4096),
    n=st.integers(1, 2048),
    nd=st.booleans(),
)
def test_random_matmul_tilings_fit_and_cover(soc, batch, m, k, n, nd):
    gemm = Gemm(batch, m, k, n, F16, F16, a_nd=nd, b_nd=nd, out_nd=nd)
    check_tiling(soc, gemm, socs.load(soc).ai_cores)


# ---------------------------------------------------------------- numerics


@pytest.mark.slow
@settings(max_examples=8, deadline=None)
@given(
    soc=st.sampled_from(SOCS),
    n=st.integers(1, 2),
    c=st.integers(1, 64),
    h=st.integers(2, 20),
    k=st.sampled_from([1, 3]),
    seed=st.integers(0, 2**16),
)
def test_random_residual_convolutions_simulate_to_the_reference(soc, n, c, h, k, seed):
    """Conv + Add + Relu: on Ascend910B1 the mixed epilogue with its delayed vector half."""
    model, feeds = residual_conv_model(n, c, h, k, seed)
    want = ge.reference.run(ge.load_onnx(model)[0], feeds)
    result = simulate(model, feeds, soc)
    for name, value in want.items():
        scale = max(float(np.abs(value).max()), 1.0)
        np.testing.assert_allclose(result.outputs[name], value, rtol=2e-2, atol=2e-2 * scale)
    for row in result.profile.rows():
        assert row.record.duration >= row.roofline.cycles * (1 - 1e-9)


# ------------------------------------------------------------ first loads


def test_weights_of_one_m_tile_load_panel_by_panel():
    """ResNet-50's last 3x3 convolution at batch 1 on Ascend910B1: 4.7 MB of weights
    over 49 output rows, one M tile per block. Keeping a block's weights resident
    would load them whole (300 KB) before the first mmad; read panel by panel, the
    cube starts before MTE2 has loaded the block's weights."""
    gemm = Gemm(1, 49, 4608, 512, F16, F16, conv=(9, 9, 7, 1, 3), window=9)
    profile = socs.load("Ascend910B1")
    t = tile_gemm(profile, gemm, profile.ai_cores, lambda m, n: 0, bias_table=True)
    assert not t.b_resident and t.k1 < gemm.k
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((512, 512, 3, 3)).astype(np.float32) * 0.02, "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1] * 4)], "conv",
        [helper.make_tensor_value_info("x", F, [1, 512, 7, 7])], [helper.make_tensor_value_info("y", F, None)], [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    result = simulate(model, None, "Ascend910B1", RunConfig(timing_only=True, profile_level="pipe"))
    (record,) = [r for r in result.profile.records if r.op_type.startswith("Conv2D")]
    spans = record.block_timing.spans
    start = min(s.start for s in spans if s.pipe == PIPE["M"])
    loaded = sum(int(s.label.split()[1]) for s in spans if s.pipe == PIPE["MTE2"] and s.end <= start)
    assert loaded < gemm.k * t.nb * gemm.in_bytes


def test_a_mixed_epilogue_reads_the_workspace_beside_the_next_panel():
    """Conv + Add + Relu of 64 channels at 112 x 112 on Ascend910B1: FIX writes each
    tile to the workspace and the vector core reads it back on its own MTE2
    (`AIV_MTE2`), so the cube core's MTE2 only loads A and B into L1 and loads the
    second tile's panel before the first tile's workspace read is done; the first
    tile's residual loads while the cube computes the tile, before FIX writes it."""
    model, _ = residual_conv_model(1, 64, 112, 1, 3)
    profile = simulate(model, None, "Ascend910B1", RunConfig(timing_only=True, profile_level="pipe")).profile
    (record,) = [r for r in profile.records if r.op_type.startswith("Conv2D")]
    spans = record.block_timing.spans
    cube_loads = sorted((s for s in spans if s.pipe == PIPE["MTE2"] and s.label.startswith("GM_TO_L1")), key=lambda s: s.start)
    reads = sorted((s for s in spans if s.pipe == PIPE[AIV_MTE2]), key=lambda s: s.start)
    assert reads and all(s.label.startswith("GM_TO_UB") for s in reads)
    assert not any(s.pipe == PIPE["MTE2"] and s.label.startswith("GM_TO_UB") for s in spans)
    first_write = min(s.start for s in spans if s.pipe == PIPE["FIX"])
    assert reads[0].end <= first_write  # the residual
    workspace = [s for s in reads if s.start >= first_write]
    panel = max(int(s.label.split()[1]) for s in cube_loads)
    second = [s for s in cube_loads if int(s.label.split()[1]) == panel][1]
    assert second.start < workspace[0].end


def test_re_reads_that_l2_serves_spread_over_every_core():
    """A 1x1 convolution of 256 to 64 channels at 56 x 56 on Ascend910B1 (2 MB: L2
    holds it): every core takes a block, the largest no more than the whole-N share
    of M (196 M fractals over 24 cores: 9 each), and no block loads its share of the
    input as one panel before its first mmad."""
    gemm = Gemm(1, 3136, 256, 64, F16, F16, conv=(56, 56, 56, 1, 1), window=1)
    profile = socs.load("Ascend910B1")
    t = tile_gemm(profile, gemm, profile.ai_cores, lambda m, n: 0, bias_table=True)
    assert t.block_dim == profile.ai_cores
    assert t.mb * t.nb <= -(-3136 // 16 // profile.ai_cores) * 16 * 64
    assert math.ceil(t.mb / t.m0) > 1 or t.k1 < gemm.k


def down_projection(m: int, k: int, n: int) -> tuple[onnx.ModelProto, dict]:
    """A float16 MatMul with a bias, plus a residual (a transformer's down-projection)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float16), "w")
    b = numpy_helper.from_array((rng.standard_normal(n) * 0.1).astype(np.float16), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "b"], ["yb"]), helper.make_node("Add", ["yb", "r"], ["z"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [m, k]), helper.make_tensor_value_info("r", TensorProto.FLOAT16, [m, n])]
    graph = helper.make_graph(nodes, "down", inputs, [helper.make_tensor_value_info("z", TensorProto.FLOAT16, None)], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, {"x": rng.standard_normal((m, k)).astype(np.float16), "r": rng.standard_normal((m, n)).astype(np.float16)}


def test_a_long_k_takes_tiles_of_the_whole_l0c_and_its_two_vector_cores_take_each_whole():
    """BERT-base's down-projection at batch 16 on Ascend910B1 (2048 x 3072 x 768): a
    block's 128 x 256 tile in one accumulator of the whole L0C reads A once per block
    where 128 x 128 tiles in two accumulators read it twice. Its mixed epilogue's
    buffers for the whole tile would overflow one vector core's UB, but the cube core's
    two vector cores each take half of its rows into their own: the epilogue loads
    each tile whole. The kernel fits, beats the two-accumulator tiling, and simulates
    to the reference."""
    model, feeds = down_projection(2048, 3072, 768)
    soc = "Ascend910B1"
    om = ge.compile(ge.load_onnx(model)[0], {"soc_version": soc})
    kernels, keys = _kernels(om, soc)
    (k,) = [k for k in kernels if isinstance(k.space, space.CubeSpace)]
    t = k.seed
    assert t is not None and t.get("l0c_buffers") == 1 and 2 * t["m0"] * t["n0"] * 4 > socs.load(soc).l0c_bytes // 2
    two = {**t, "m0": 128, "n0": 128, "k0": 128, "l0c_buffers": 2}
    two["k1"] = k.space.widest_k1(two)["k1"]
    assert k.space.legal(two)
    with space.using({keys[k.name]: two}.get):
        doubled = ge.compile(ge.load_onnx(model)[0], {"soc_version": soc})
    one, two_acc = cube_kernel_timed(om, "MatMul"), cube_kernel_timed(doubled, "MatMul")
    assert one.duration < 0.9 * two_acc.duration
    reads = [int(s.label.split()[1]) for s in one.block_timing.spans if s.pipe == PIPE[AIV_MTE2]]
    assert reads and max(reads) == t["m0"] * t["n0"] * 2  # the workspace and the residual, a tile at a time
    (kernel,) = [op for op in om.kernel_module().ops if isinstance(op, KernelOp) and op.parameters.get("l0c_buffers") == 1]
    ub = [op.int_prop("bytes") for op in kernel.program.walk() if isinstance(op, AllocOp) and op.level == "UB"]
    assert socs.load(soc).ub_bytes < sum(ub) <= 2 * socs.load(soc).ub_bytes
    want = ge.reference.run(ge.load_onnx(model)[0], feeds)["z"].astype(np.float32)
    with ge.Session() as session:
        got = session.run(om, feeds).outputs["z"].astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * float(np.abs(want).max()))


def mlp_block(m: int, hidden: int, inner: int) -> onnx.ModelProto:
    """A transformer's MLP half over x of [1, m, hidden]: a projection, LayerNorm, the
    up-projection with its bias and Gelu, the down-projection with its bias, plus the
    projection's output (each matmul then takes its input as the fractal tiles the
    kernel before wrote, as in a model)."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32), name)
        for name, shape in (("w0", (hidden, hidden)), ("w1", (hidden, inner)), ("w2", (inner, hidden)))
    ]
    weights += [numpy_helper.from_array((rng.standard_normal(n) * 0.1).astype(np.float32), name) for name, n in (("b1", inner), ("b2", hidden))]
    weights += [numpy_helper.from_array(np.ones(hidden, np.float32), "gamma"), numpy_helper.from_array(np.zeros(hidden, np.float32), "beta")]
    nodes = [
        helper.make_node("MatMul", ["x", "w0"], ["x0"]), helper.make_node("LayerNormalization", ["x0", "gamma", "beta"], ["n"], axis=-1),
        helper.make_node("MatMul", ["n", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]), helper.make_node("Gelu", ["hb"], ["g"]),
        helper.make_node("MatMul", ["g", "w2"], ["y"]), helper.make_node("Add", ["y", "b2"], ["yb"]), helper.make_node("Add", ["yb", "x0"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", F, [1, m, hidden])], [helper.make_tensor_value_info("z", F, None)], weights
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def cube_kernel_timed(compiled: ge.Model, op_type: str):
    """The profile record of the kernel whose op types start with `op_type`, with its pipe trace."""
    with ge.Session(RunConfig(timing_only=True, profile_level="pipe")) as session:
        return next(r for r in session.run(compiled).profile.records if r.op_type.startswith(op_type))


def forced(model: onnx.ModelProto, soc: str, op_types: tuple[str, ...], tiling: dict[str, int]) -> tuple[ge.Model, ge.Model, space.CubeSpace, dict]:
    """The model compiled with the analytic tilings and with `tiling` for the cube kernel
    of `op_types`; that kernel's space and analytic tiling."""
    om = ge.compile(ge.load_onnx(model)[0], {"soc_version": soc})
    kernels, keys = _kernels(om, soc)
    (k,) = [k for k in kernels if k.op_types == op_types]
    assert isinstance(k.space, space.CubeSpace) and k.space.legal(tiling) and k.seed != tiling
    with space.using({keys[k.name]: tiling}.get):
        other = ge.compile(ge.load_onnx(model)[0], {"soc_version": soc})
    return om, other, k.space, k.seed


def test_the_cost_counts_the_loads_that_mte1s_full_queue_holds_back():
    """ViT-B/16's down-projection at batch 1 on Ascend910B1 (197 x 3072 x 768, with a
    bias and the residual). The scalar unit issues in program order, and MTE1's queue
    holds four L0 steps (`QUEUE_DEPTH`): with panels of five steps, as the tiling
    chosen before the cost counted it has, each next panel's load is issued only once
    the fifth step starts, and MTE2 idles between panels. The analytic tiling now
    beats it."""
    before = {"batch_dim": 1, "m_dim": 2, "n_dim": 12, "m0": 112, "n0": 64, "k0": 144, "k1": 720, "b_resident": 0}
    om, held, _, _ = forced(mlp_block(197, 768, 3072), "Ascend910B1", ("BatchMatMulV2", "Add", "TransData", "Cast"), before)
    now, then = cube_kernel_timed(om, "BatchMatMulV2+Add"), cube_kernel_timed(held, "BatchMatMulV2+Add")
    loads = sorted((s for s in then.block_timing.spans if s.pipe == PIPE["MTE2"]), key=lambda s: s.start)
    idle = [b.start - a.end for a, b in itertools.pairwise(loads)]
    assert sum(gap > 100 for gap in idle) >= 3  # cycles MTE2 waits, panel after panel, for the next load's issue
    assert now.duration < 0.97 * then.duration


def test_the_cost_drains_the_blocks_last_tile_at_its_own_size():
    """ViT-B/16's up-projection at batch 1 on Ascend910B1 (197 x 768 x 3072, its Gelu on
    the vector cores): after a block's last mmad only its last tile drains (FIX, the
    vector core's load, Gelu, the store), and a block's last M or N tile holds what is
    left of it. The cost charged a whole tile there, and chose 208 x 64 tiles (no tile
    short); counting the short tile, it takes one whose last tile drains faster."""
    before = {"batch_dim": 1, "m_dim": 1, "n_dim": 24, "m0": 208, "n0": 64, "k0": 64, "k1": 256, "b_resident": 1}
    om, whole, sp, seed = forced(mlp_block(197, 768, 3072), "Ascend910B1", ("BatchMatMulV2", "Gelu"), before)
    t = sp.tiling(seed)
    assert t.mb % t.m0 or t.nb % t.n0  # a short last tile
    now, then = cube_kernel_timed(om, "BatchMatMulV2+Gelu"), cube_kernel_timed(whole, "BatchMatMulV2+Gelu")
    assert now.duration < 0.95 * then.duration


def scaled_projection(m: int, k: int, n: int) -> tuple[onnx.ModelProto, dict]:
    """`down_projection` times a second [m, n] input: an epilogue of two tile-shaped operands."""
    model, feeds = down_projection(m, k, n)
    graph = model.graph
    graph.node[-1].output[0] = "zr"
    graph.node.append(helper.make_node("Mul", ["zr", "s"], ["z"]))
    graph.input.append(helper.make_tensor_value_info("s", TensorProto.FLOAT16, [m, n]))
    return model, {**feeds, "s": np.random.default_rng(1).standard_normal((m, n)).astype(np.float16)}


@pytest.mark.parametrize(
    ("soc", "m", "make"), [("Ascend310", 256, down_projection), ("Ascend310P3", 256, down_projection), ("Ascend910B1", 128, scaled_projection)]
)
def test_a_block_of_one_tile_in_pieces_builds_and_simulates(soc, m, make):
    """One m x 256 tile a block, in one accumulator of the whole L0C: its epilogue's
    pieces take both UB slots though the block has a single tile (the kernel
    verifies: every wait has its set), and the result is the reference's. (On the
    910B, where two vector cores share a tile, an epilogue of one residual takes the
    whole tile: two tile-shaped operands still need pieces.)"""
    model, feeds = make(m, 512, 256)
    one = {"batch_dim": 1, "m_dim": 1, "n_dim": 1, "m0": m, "n0": 256, "l0c_buffers": 1, "b_resident": 0}
    check_forced_tiling(model, feeds, soc, lambda sp, t: sp.widest_k1({**t, **one, "k0": min(t["k0"], 64)}))


def test_the_vector_cores_of_a_cube_core_share_each_tile_of_a_mixed_epilogue():
    """On the 910B a mixed epilogue runs on the cube core's two vector cores, each
    taking half of every tile's rows into its own UB: a 128 x 256 float16 tile with a
    residual (result, residual and output, each double-buffered) runs as one piece,
    which one vector core alone would take in two; with a second tile-shaped
    operand, two pieces even so. A per-column operand is whole in each core's UB."""
    profile = socs.load("Ascend910B1")
    alone = dataclasses.replace(profile, split_cores=False)
    assert profile.vector_per_cube == 2 and alone.vector_per_cube == 1

    def epilogue(*operands: str, column: bool = False) -> Epilogue:
        values = [EpiValue(v, "tile", 2, True) for v in ("y", *operands, "z")] + ([EpiValue("c", "col", 2, False)] if column else [])
        return Epilogue("mixed", "y", (), values, [*operands, *(["c"] if column else [])], ["z"])

    residual = epilogue("r")
    assert residual.rows(profile, 128, 256) == 128 and residual.rows(alone, 128, 256) == 64
    assert residual.ub_bytes(profile, 128, 256) == 3 * 2 * 128 * 256  # each core: half the rows of three doubled tiles
    assert epilogue("r", "s").rows(profile, 128, 256) == 64
    with_column = epilogue("r", column=True)
    assert with_column.ub_bytes(profile, 64, 256) == residual.ub_bytes(profile, 64, 256) + 256 * 2
    assert with_column.ub_alloc(profile, with_column.values[-1], 64, 256) == 2 * 256 * 2  # one copy in each core's UB


def check_forced_tiling(model: onnx.ModelProto, feeds: dict, soc: str, change: Callable[[space.CubeSpace, dict], dict]) -> None:
    """Compiled with its cube kernel's analytic tiling `change`d (`change(space, t)`,
    legal), the model's output "z" is the reference interpreter's."""
    om = ge.compile(ge.load_onnx(model)[0], {"soc_version": soc})
    kernels, keys = _kernels(om, soc)
    (k,) = [k for k in kernels if isinstance(k.space, space.CubeSpace)]
    t = change(k.space, {key: v for key, v in k.seed.items() if key != "a_resident"})
    assert k.space.legal(t), t
    with space.using({keys[k.name]: t}.get):
        forced = ge.compile(ge.load_onnx(model)[0], {"soc_version": soc})
    want = ge.reference.run(ge.load_onnx(model)[0], feeds)["z"].astype(np.float32)
    with ge.Session() as session:
        got = session.run(forced, feeds).outputs["z"].astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * float(np.abs(want).max()))


# ------------------------------------------------------- across batches


def depthwise_model(c: int, h: int) -> onnx.ModelProto:
    """A 3x3 depthwise convolution (with bias) + Relu of 4 images: `c / 16` groups of
    16 channels, the batches of its fractal matmul."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((c, 1, 3, 3)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], pads=[1] * 4, group=c),
        helper.make_node("Relu", ["y"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes, "depthwise", [helper.make_tensor_value_info("x", F, [4, c, h, h])], [helper.make_tensor_value_info("z", F, None)], [weight, bias]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("soc", ["Ascend310P3", "Ascend910A", "Ascend910B1"])
def test_the_next_batch_loads_while_the_last_one_computes(soc):
    """A depthwise convolution whose blocks hold three groups each: the L1 and L0
    slots and the bias table run on from one group to the next, so the second
    group's loads start before the first group's last mmad ends (primed and drained
    per group, they waited for it)."""
    om = ge.compile(ge.load_onnx(depthwise_model(144, 28))[0], {"soc_version": soc})
    (params,) = [op.parameters for op in om.kernel_module().ops if isinstance(op, KernelOp) and "block_batch" in op.parameters]
    assert params["block_batch"] > 1
    with ge.Session(RunConfig(timing_only=True, profile_level="pipe")) as session:
        profile = session.run(om).profile
    (record,) = [r for r in profile.records if r.op_type.startswith("Conv2D")]
    spans = record.block_timing.spans
    mmads = sorted((s for s in spans if s.pipe == PIPE["M"]), key=lambda s: s.start)
    loads = [s for s in spans if s.pipe == PIPE["MTE2"] and s.label.startswith("GM_TO_L1")]
    per_batch = len(mmads) // params["block_batch"]
    first_batch_done = mmads[per_batch - 1].end
    assert sum(s.start < first_batch_done for s in loads) > len(loads) // params["block_batch"]


@pytest.mark.parametrize("soc", ["Ascend310P3", "Ascend910B1"])
def test_a_blocks_groups_load_their_weights_and_biases_in_one_copy_each(soc):
    """The groups of a depthwise convolution's block take their weights (their columns
    side by side in each row of the FRACTAL_Z weight) in one copy and, through the
    910B's bias table, their biases in another, not a pair of copies a group, each of
    a few KB and mostly its latency; the result is the reference's."""
    model = depthwise_model(144, 28)
    om = ge.compile(ge.load_onnx(model)[0], {"soc_version": soc})
    (params,) = [op.parameters for op in om.kernel_module().ops if isinstance(op, KernelOp) and "block_batch" in op.parameters]
    groups = params["block_batch"]
    assert groups > 1 and params["b_resident"] and params["block_n"] == params["n0"] == 16
    loads = [int(s.label.split()[1]) for s in cube_kernel_timed(om, "Conv2D").block_timing.spans if s.label.startswith("GM_TO_L1")]
    weights, bias = 144 * 16 * 2, 16 * 2  # a group's: 9 taps of 16 channels by its 16 outputs; 16 float16
    assert loads.count(groups * weights) == 1 and weights not in loads
    assert (loads.count(groups * bias), bias in loads) == ((1, False) if socs.load(soc).fix_pipe else (0, False))
    rng = np.random.default_rng(0)
    assert_simulates_to_reference(om, model, {"x": rng.standard_normal((4, 144, 28, 28)).astype(np.float32)})


@pytest.mark.parametrize("soc", ["Ascend310P3", "Ascend910B1"])
@pytest.mark.parametrize(("n", "n0", "b_resident"), [(64, 32, 1), (48, 16, 1), (40, 16, 0), (40, 16, 1)])
def test_batches_of_n_tiles_in_any_count_build_and_simulate(soc, n, n0, b_resident):
    """Three batches a block, of two N tiles, of three alike, and of three with a
    short last one (`program.batched`'s three loops): every wait has its set (the
    kernel verifies) and the result is the reference's."""
    rng = np.random.default_rng(1)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])], "bmm",
        [helper.make_tensor_value_info("x", F, [6, 64, 128])], [helper.make_tensor_value_info("z", F, None)],
        [numpy_helper.from_array((rng.standard_normal((6, 128, n)) / 12).astype(np.float32), "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    feeds = {"x": rng.standard_normal((6, 64, 128)).astype(np.float32)}
    three = {"batch_dim": 2, "m_dim": 1, "n_dim": 1, "m0": 64, "n0": n0, "b_resident": b_resident}
    check_forced_tiling(model, feeds, soc, lambda _, t: {**t, **three})
