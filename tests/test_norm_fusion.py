"""Norm graph fusions: LayerNormONNXFusionPass and SoftmaxFusionPass.

Property tests place the exported decompositions (and near misses) among random
ops and check meaning, which sites fused and the fusion statistics; targeted tests
pin what must not match. Real exports are in test_attention_fusion.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given

from dialects.ascend_graph import (
    AddOp,
    DivOp,
    ExpOp,
    LayerNormOp,
    MulOp,
    PowOp,
    ReciprocalOp,
    ReduceMaxOp,
    ReduceMeanOp,
    ReduceSumOp,
    RsqrtOp,
    SoftmaxOp,
    SqrtOp,
    SubOp,
)
from ge.core import ir, reference
from ge.testing import (
    GraphBuilder,
    GraphCase,
    alive,
    assert_equivalent,
    count_ops,
    fuse,
    graphs,
    layer_norm_decomposition,
    site_ops,
    softmax_decomposition,
)
from passes.fusion import Band
from passes.norm_fusion import LayerNormONNXFusionPass, SoftmaxFusionPass
from passes.registry import get_pass

# ------------------------------------------------------------------------ LayerNorm


LN_MATCHED = ("exact", "second_user", "mismatched_axes", "vector_epsilon")
"""The variants whose structure is a LayerNorm decomposition (epsilon_after_sqrt is not)."""


@given(graphs(max_ops=4, with_pattern=[layer_norm_decomposition(), layer_norm_decomposition((-2, -1))]))
def test_layer_norm_fusion_fuses_exact_decompositions_only(case: GraphCase) -> None:
    after, counts = fuse(case, LayerNormONNXFusionPass)
    # A LayerNorm of a row of nearly equal values (one LayerNorm's output through Abs into
    # another) divides float32 rounding (an ulp of 1, 1.2e-7) by sqrt(epsilon) (3.2e-3):
    # the fused and the decomposed orders of the same sums then differ by up to 4e-5.
    assert_equivalent(case, after, atol=1e-4)
    exact = len(case.sites_of("layer_norm_decomposition", exact=True))
    matched = sum(s.variant in LN_MATCHED for s in case.sites_of("layer_norm_decomposition"))
    assert (counts.match_times, counts.effect_times) == (matched, exact)
    assert count_ops(after, LayerNormOp) == count_ops(case, LayerNormOp) + exact
    assert not any(alive(op) for op in site_ops(after, "layer_norm_decomposition", SqrtOp, exact=True))
    assert all(alive(op) for op in site_ops(after, "layer_norm_decomposition", ReduceMeanOp, exact=False))


@given(graphs(max_ops=3, with_pattern=layer_norm_decomposition(0, variants=["exact"])))
def test_layer_norm_fusion_leaves_leading_axes(case: GraphCase) -> None:
    """LayerNorm normalises trailing axes: a decomposition over axis 0 of a rank >= 2 tensor stays."""
    after, counts = fuse(case, LayerNormONNXFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 0)
    assert count_ops(after, LayerNormOp) == count_ops(case, LayerNormOp)


def _layer_norm(
    *,
    axes: tuple[int, ...] = (-1,),
    variance_axes: tuple[int, ...] | None = None,
    exponent: float = 2.0,
    epsilon: float | np.ndarray = 1e-5,
    rsqrt: bool = False,
    gamma: tuple[int, ...] | None = (4,),
    beta: tuple[int, ...] | None = (4,),
    keep_dims: bool = True,
) -> GraphCase:
    """A LayerNorm decomposition of x [2, 3, 4], as torch exports it by default."""
    b = GraphBuilder(seed=3)
    x = b.input((2, 3, 4))
    mean = b.op(ReduceMeanOp, [x], axes=axes, keep_dims=keep_dims)
    d = b.op(SubOp, [x, mean])
    square = b.op(PowOp, [d, b.constant(exponent)])
    variance = b.op(ReduceMeanOp, [square], axes=variance_axes or axes, keep_dims=keep_dims)
    e = b.weight(epsilon.astype(np.float32)) if isinstance(epsilon, np.ndarray) else b.constant(epsilon)
    shifted = b.op(AddOp, [variance, e])
    if rsqrt:
        y = b.op(MulOp, [b.op(RsqrtOp, [shifted]), d])
    else:
        y = b.op(DivOp, [d, b.op(SqrtOp, [shifted])])
    if gamma is not None:
        y = b.op(MulOp, [y, b.random_weight(gamma, low=0.5, high=1.5)])
    if beta is not None:
        y = b.op(AddOp, [b.random_weight(beta), y])
    return b.finish()


@pytest.mark.parametrize(
    ("kwargs", "begin", "remaining"),
    [
        ({}, 2, 0),
        ({"rsqrt": True}, 2, 0),
        ({"gamma": None}, 2, 0),
        ({"beta": None}, 2, 0),
        ({"gamma": None, "beta": None}, 2, 0),
        ({"axes": (1, 2), "gamma": (3, 4), "beta": (4,)}, 1, 0),
        ({"gamma": (3, 1)}, 2, 2),  # gamma varies along axis 1, outside the normalised axes
    ],
    ids=["div", "rsqrt", "beta_only", "gamma_only", "plain", "two_axes", "gamma_off_axis"],
)
def test_layer_norm_fusion_spellings(kwargs: dict, begin: int, remaining: int) -> None:
    """Every spelling becomes one LayerNorm (with gamma 1 when only beta is there);
    an affine Mul that is not per normalised element stays after it, with what follows."""
    case = _layer_norm(**kwargs)
    after, counts = fuse(case, LayerNormONNXFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 1)
    (norm,) = [op for op in after.module.walk() if isinstance(op, LayerNormOp)]
    assert norm.props.int("begin_norm_axis") == begin
    assert math.isclose(norm.props.float("epsilon"), 1e-5, rel_tol=1e-6)
    assert count_ops(after, MulOp) + count_ops(after, AddOp) == remaining
    assert_equivalent(case, after)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"axes": (1,)},
        {"axes": (-1,), "variance_axes": (-2,)},
        {"exponent": 3.0},
        {"epsilon": np.full((2, 3, 1), 1e-5)},
        {"epsilon": np.full((1, 1, 1, 1), 1e-5)},
    ],
    ids=["wrong_axis", "mismatched_axes", "pow_3", "vector_epsilon", "epsilon_broadcasts_rank"],
)
def test_layer_norm_fusion_leaves_near_misses(kwargs: dict) -> None:
    case = _layer_norm(**kwargs)
    after, counts = fuse(case, LayerNormONNXFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 0)
    assert ir.to_text(after.module) == ir.to_text(case.module)


def test_layer_norm_fusion_leaves_a_centred_value_with_a_second_user() -> None:
    b = GraphBuilder(seed=4)
    x = b.input((3, 8))
    mean = b.op(ReduceMeanOp, [x], axes=[-1], keep_dims=True)
    d = b.op(SubOp, [x, mean])
    variance = b.op(ReduceMeanOp, [b.op(MulOp, [d, d])], axes=[-1], keep_dims=True)
    b.op(DivOp, [d, b.op(SqrtOp, [b.op(AddOp, [variance, b.constant(1e-6)])])])
    b.output(d)
    case = b.finish()
    after, counts = fuse(case, LayerNormONNXFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 0)
    assert count_ops(after, LayerNormOp) == 0


# -------------------------------------------------------------------------- Softmax


@given(graphs(max_ops=4, with_pattern=[softmax_decomposition(), softmax_decomposition(0)]))
def test_softmax_fusion_fuses_exp_over_its_sum(case: GraphCase) -> None:
    """A max shift over other axes than the sum's is kept as the softmax's input:
    softmax(x - m) over the summed axes is what the rest computes."""
    after, counts = fuse(case, SoftmaxFusionPass)
    assert_equivalent(case, after)
    fused = [s for s in case.sites_of("softmax_decomposition") if s.variant != "second_user"]
    assert (counts.match_times, counts.effect_times) == (len(case.sites_of("softmax_decomposition")), len(fused))
    assert count_ops(after, SoftmaxOp) == count_ops(case, SoftmaxOp) + len(fused)
    absorbed = site_ops(case, "softmax_decomposition", ReduceMaxOp, exact=True)
    assert count_ops(after, ReduceMaxOp) == count_ops(case, ReduceMaxOp) - len(absorbed)


def _softmax(*, shift: bool = True, keep_dims: bool = True, reciprocal: bool = False, second_user: bool = False) -> GraphCase:
    """exp(x - max(x)) / sum(exp(..)) over the last axis of x [3, 3], or without the
    shift; without keep_dims the [3] sum still broadcasts, against the wrong axis."""
    b = GraphBuilder(seed=5)
    x = b.input((3, 3))
    source = b.op(SubOp, [x, b.op(ReduceMaxOp, [x], axes=[1], keep_dims=True)]) if shift else x
    e = b.op(ExpOp, [source])
    total = b.op(ReduceSumOp, [e], axes=[-1], keep_dims=keep_dims)
    if reciprocal:
        b.op(MulOp, [b.op(ReciprocalOp, [total]), e])
    else:
        b.op(DivOp, [e, total])
    if second_user:
        b.output(e)
    return b.finish()


@pytest.mark.parametrize("kwargs", [{}, {"shift": False}, {"reciprocal": True}], ids=["shifted", "unshifted", "reciprocal"])
def test_softmax_fusion_spellings(kwargs: dict) -> None:
    case = _softmax(**kwargs)
    after, counts = fuse(case, SoftmaxFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 1)
    (softmax,) = [op for op in after.module.walk() if isinstance(op, SoftmaxOp)]
    assert softmax.props.ints("axes") == (1,)
    assert count_ops(after, "ascend_graph.const") == 0
    assert {op.name for op in after.graph.body.block.ops} == {"ascend_graph.data", "ascend_graph.softmax_v2", "ascend_graph.net_output"}
    assert_equivalent(case, after)


@pytest.mark.parametrize("kwargs", [{"second_user": True}, {"keep_dims": False}], ids=["second_user", "sum_without_keep_dims"])
def test_softmax_fusion_leaves_near_misses(kwargs: dict) -> None:
    case = _softmax(**kwargs)
    after, _ = fuse(case, SoftmaxFusionPass)
    assert ir.to_text(after.module) == ir.to_text(case.module)


def test_softmax_fusion_without_shift_removes_overflow() -> None:
    """exp(x) / sum(exp(x)) overflows to inf / inf = NaN from x > 88 in float32;
    the fused SoftmaxV2 shifts by the max and stays the true softmax."""
    case = _softmax(shift=False)
    after, _ = fuse(case, SoftmaxFusionPass)
    x = np.array([[100.0, 101.0, 99.0]] * 3, np.float32)
    (before_out,) = reference.run(case.module, [x], case.store).values()
    (after_out,) = reference.run(after.module, [x], after.store).values()
    assert np.isnan(before_out).all()
    e = np.exp(x.astype(np.float64) - 101.0)
    np.testing.assert_allclose(after_out, e / e.sum(axis=1, keepdims=True), rtol=1e-6)


# ----------------------------------------------------------------------- registration


def test_norm_fusions_are_registered_in_the_top_band() -> None:
    for cls in (LayerNormONNXFusionPass, SoftmaxFusionPass):
        assert get_pass(cls.name) is cls
        assert cls.band is Band.TOP

