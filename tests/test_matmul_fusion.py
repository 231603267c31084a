"""Matmul graph fusions: GemmToMatmulFusionPass and MatMulBiasAddFusionPass."""

from __future__ import annotations

import pytest
from hypothesis import given
from xdsl.dialects.builtin import bf16, f16, f32

from dialects.ascend_graph import AddOp, BatchMatMulOp, GemmOp, MatMulV2Op
from ge.testing import (
    GraphBuilder,
    GraphCase,
    alive,
    assert_equivalent,
    count_ops,
    fuse,
    gemm_chain,
    graphs,
    matmul_bias_add,
    site_ops,
)
from passes.fusion import FusionCounts
from passes.matmul_fusion import GemmToMatmulFusionPass, MatMulBiasAddFusionPass
from passes.registry import get_pass

NO_MATMUL_OPS = ("unary", "binary", "branch", "reduce", "softmax", "reshape", "transpose", "concat", "split")
"""Random op kinds without MatMulV2, BatchMatMulV2 or Gemm."""





def assert_counted(counts: FusionCounts, case: GraphCase, pattern: str, *, unmatched: tuple[str, ...] = ()) -> None:
    """One match per placed site but the `unmatched` near misses, one effect per exact site."""
    exact = len(case.sites_of(pattern, exact=True))
    near = sum(s.variant not in unmatched for s in case.sites_of(pattern, exact=False))
    assert (counts.match_times, counts.effect_times) == (exact + near, exact)


# ------------------------------------------------------------------------ Gemm


@given(graphs(dtypes=(f32, f16, bf16), ops=NO_MATMUL_OPS, max_ops=4, with_pattern=[gemm_chain(), gemm_chain()]))
def test_gemm_to_matmul_takes_unscaled_products(case: GraphCase) -> None:
    after, counts = fuse(case, GemmToMatmulFusionPass)
    assert_equivalent(case, after)
    assert not any(alive(op) for op in site_ops(after, "gemm_chain", GemmOp, exact=True))
    assert all(alive(op) for op in site_ops(after, "gemm_chain", GemmOp, exact=False))
    assert_counted(counts, case, "gemm_chain")
    assert count_ops(after, GemmOp) == len(case.sites_of("gemm_chain", exact=False))


def _gemm(c_shape: tuple[int, ...] | None, *, alpha: float = 1.0, beta: float = 1.0, dynamic_c: bool = False) -> GraphCase:
    """Gemm of x [3, 4] by w^T ([5, 4], trans_b) with c of `c_shape`."""
    b = GraphBuilder(seed=11)
    operands = [b.input((3, 4)), b.random_weight((5, 4))]
    if c_shape is not None:
        operands.append(b.input(c_shape) if dynamic_c else b.random_weight(c_shape))
    b.op(GemmOp, operands, alpha=alpha, beta=beta, trans_a=False, trans_b=True)
    return b.finish()


@pytest.mark.parametrize(
    ("c_shape", "beta", "adds"),
    [(None, 1.0, 0), ((5,), 1.0, 0), ((1, 5), 1.0, 0), ((1, 5), 0.5, 0), ((3, 5), 1.0, 1), ((3, 1), 0.25, 1), ((3, 5), 0.0, 0)],
)
def test_gemm_to_matmul_makes_c_a_bias_or_an_add(c_shape: tuple[int, ...] | None, beta: float, adds: int) -> None:
    case = _gemm(c_shape, beta=beta)
    after, counts = fuse(case, GemmToMatmulFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 1)
    (matmul,) = [op for op in after.module.walk() if isinstance(op, MatMulV2Op)]
    assert matmul.props.bool("transpose_x2") and not matmul.props.bool("transpose_x1")
    assert (matmul.bias is not None) == (c_shape is not None and beta != 0.0 and not adds)
    assert count_ops(after, AddOp) == adds and count_ops(after, GemmOp) == 0
    assert_equivalent(case, after)


@pytest.mark.parametrize(("alpha", "beta", "dynamic_c"), [(2.0, 1.0, False), (1.0, 0.5, True)])
def test_gemm_to_matmul_leaves_what_it_cannot_express(alpha: float, beta: float, dynamic_c: bool) -> None:
    case = _gemm((3, 5), alpha=alpha, beta=beta, dynamic_c=dynamic_c)
    after, counts = fuse(case, GemmToMatmulFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 0)
    assert count_ops(after, GemmOp) == 1 and count_ops(after, MatMulV2Op) == 0


# --------------------------------------------------------------------- MatMulBiasAdd


@given(
    graphs(
        dtypes=(f32, f16), ops=NO_MATMUL_OPS, max_ops=4,
        with_pattern=[matmul_bias_add(), matmul_bias_add(batch=True)],
    )
)
def test_matmul_bias_add_moves_column_biases_into_the_matmul(case: GraphCase) -> None:
    after, counts = fuse(case, MatMulBiasAddFusionPass)
    assert_equivalent(case, after)
    assert not any(alive(op) for op in site_ops(after, "matmul_bias_add", AddOp, exact=True))
    assert all(alive(op) for op in site_ops(after, "matmul_bias_add", AddOp, exact=False))
    assert_counted(counts, case, "matmul_bias_add", unmatched=("dynamic_bias",))


def _matmul_add(bias_shape: tuple[int, ...], *, batch: bool = False) -> GraphCase:
    """x [2, 3, 4] @ w [4, 5] (BatchMatMulV2) or x [3, 4] @ w (MatMulV2), + a bias."""
    b = GraphBuilder(seed=12)
    x = b.input((2, 3, 4) if batch else (3, 4))
    w = b.random_weight((4, 5))
    if batch:
        mm = b.op(BatchMatMulOp, [x, w], adj_x1=False, adj_x2=False)
    else:
        mm = b.op(MatMulV2Op, [x, w], transpose_x1=False, transpose_x2=False)
    b.op(AddOp, [b.random_weight(bias_shape), mm])
    return b.finish()


@pytest.mark.parametrize(("bias_shape", "batch"), [((5,), False), ((1, 5), False), ((1, 1, 5), True), ((5,), True)])
def test_matmul_bias_add_fuses_biases_of_one_value_per_column(bias_shape: tuple[int, ...], batch: bool) -> None:
    case = _matmul_add(bias_shape, batch=batch)
    after, counts = fuse(case, MatMulBiasAddFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 1)
    assert count_ops(after, AddOp) == 0
    (matmul,) = [op for op in after.module.walk() if isinstance(op, MatMulV2Op | BatchMatMulOp)]
    assert matmul.bias is not None and matmul.bias.type.get_shape() == (5,)
    assert_equivalent(case, after)


@pytest.mark.parametrize(
    ("bias_shape", "batch"),
    [((3, 1), False), ((3, 5), False), ((2, 1, 5), True), ((1, 1, 1, 5), True), ((1,), False)],
    ids=["column", "full", "per_batch", "grows_rank", "scalar"],
)
def test_matmul_bias_add_leaves_adds_that_broadcast_along_other_dims(bias_shape: tuple[int, ...], batch: bool) -> None:
    case = _matmul_add(bias_shape, batch=batch)
    after, counts = fuse(case, MatMulBiasAddFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 0)
    assert count_ops(after, AddOp) == 1


def test_matmul_fusions_are_registered_under_their_ge_names() -> None:
    for cls in (GemmToMatmulFusionPass, MatMulBiasAddFusionPass):
        assert get_pass(cls.name) is cls
