"""Layout graph fusions: RedundantReshapeTransposeFusionPass,
TransposeReshapeFusionPass and CastCastFusionPass."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from xdsl.dialects.builtin import bf16, f16, f32
from xdsl.ir import Operation

from dialects.ascend_graph import (
    CastOp,
    ConfusionTransposeOp,
    ConstOp,
    FlattenOp,
    ReluOp,
    ReshapeOp,
    SqueezeOp,
    TransposeOp,
    UnsqueezeOp,
    bool_attr,
    ints,
)
from ge.core import dtypes, ir, reference
from ge.testing import (
    GraphBuilder,
    GraphCase,
    alive,
    assert_equivalent,
    cast_chain,
    count_ops,
    fuse,
    graphs,
    reshape_transpose_chain,
    transpose_reshape_pair,
)
from passes.layout_fusion import (
    CastCastFusionPass,
    RedundantReshapeTransposeFusionPass,
    TransposeReshapeFusionPass,
)
from passes.registry import get_pass

NO_LAYOUT_OPS = ("unary", "binary", "branch", "reduce", "softmax", "concat", "split")
"""Random op kinds that neither reshape, transpose nor cast."""

LAYOUT = (ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp, TransposeOp)



def site_groups(case: GraphCase, pattern: str, *, exact: bool) -> list[list[Operation]]:
    return [[op for op in site.ops if not isinstance(op, ConstOp)] for site in case.sites_of(pattern, exact=exact)]



def redundant(op: Operation) -> bool:
    """`op` is a reshape or transpose that changes nothing, or the second of a chain
    whose middle value has no other user."""
    if not isinstance(op, LAYOUT):
        return False
    if isinstance(op, TransposeOp) and op.props.ints("perm") == tuple(range(len(op.props.ints("perm")))):
        return True
    if not isinstance(op, TransposeOp) and op.x.type == op.y.type:
        return True
    inner = op.x.owner
    chain = LAYOUT[:-1] if isinstance(op, ReshapeOp) else (TransposeOp,) if isinstance(op, TransposeOp) else ()
    return isinstance(inner, chain) and op.x.has_one_use()


# ------------------------------------------------------------- redundant chains


@given(graphs(ops=NO_LAYOUT_OPS, max_ops=4, with_pattern=[reshape_transpose_chain(), reshape_transpose_chain()]))
def test_redundant_reshape_transpose_chains_collapse(case: GraphCase) -> None:
    after, counts = fuse(case, RedundantReshapeTransposeFusionPass)
    assert_equivalent(case, after)
    for ops in site_groups(after, "reshape_transpose_chain", exact=True):
        assert sum(alive(op) for op in ops) <= 1
    assert not [op for op in after.module.walk() if redundant(op)]
    for ops in site_groups(after, "reshape_transpose_chain", exact=False):
        assert all(alive(op) for op in ops)
    near = len(case.sites_of("reshape_transpose_chain", exact=False))
    assert counts.effect_times >= len(case.sites_of("reshape_transpose_chain", exact=True))
    assert counts.match_times - counts.effect_times == near
    assert count_ops(after, ReshapeOp) + count_ops(after, TransposeOp) <= count_ops(case, ReshapeOp) + count_ops(case, TransposeOp)


def test_reshape_chain_whose_middle_has_another_user_stays() -> None:
    b = GraphBuilder(seed=21)
    mid = b.op(ReshapeOp, [b.input((2, 3, 4))], shape=[6, 4])
    b.op(ReshapeOp, [mid], shape=[24])
    b.op(ReluOp, [mid])
    case = b.finish()
    after, counts = fuse(case, RedundantReshapeTransposeFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 0)
    assert count_ops(after, ReshapeOp) == 2


def test_transposes_that_cancel_leave_nothing_and_others_compose() -> None:
    b = GraphBuilder(seed=22)
    x = b.input((2, 3, 4))
    b.op(TransposeOp, [b.op(TransposeOp, [x], perm=[1, 2, 0])], perm=[2, 0, 1])  # cancels
    b.op(TransposeOp, [b.op(TransposeOp, [x], perm=[1, 0, 2])], perm=[0, 2, 1])  # composes to [1, 2, 0]
    case = b.finish()
    after, counts = fuse(case, RedundantReshapeTransposeFusionPass)
    assert (counts.match_times, counts.effect_times) == (2, 2)
    (left,) = [op for op in after.module.walk() if isinstance(op, TransposeOp)]
    assert left.props.ints("perm") == (1, 2, 0)
    assert_equivalent(case, after)


@pytest.mark.parametrize("target", [[2, 3, 4], [-1, 3, 4], [2, -1, 4]])
def test_reshape_to_the_same_shape_goes(target: list[int]) -> None:
    b = GraphBuilder(seed=23)
    b.output(b.op(ReshapeOp, [b.input((2, 3, 4))], shape=target))
    case = b.finish()
    after, counts = fuse(case, RedundantReshapeTransposeFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 1)
    assert count_ops(after, ReshapeOp) == 0
    assert_equivalent(case, after)


# -------------------------------------------------------------- ConfusionTranspose


@given(graphs(ops=NO_LAYOUT_OPS, max_ops=4, with_pattern=[transpose_reshape_pair(), transpose_reshape_pair()]))
def test_transpose_reshape_pairs_become_confusion_transposes(case: GraphCase) -> None:
    after, counts = fuse(case, TransposeReshapeFusionPass)
    assert_equivalent(case, after)
    for ops in site_groups(after, "transpose_reshape_pair", exact=True):
        assert not any(alive(op) for op in ops)
    for ops in site_groups(after, "transpose_reshape_pair", exact=False):
        assert all(alive(op) for op in ops)
    exact = len(case.sites_of("transpose_reshape_pair", exact=True))
    near = len(case.sites_of("transpose_reshape_pair", exact=False))
    assert (counts.match_times, counts.effect_times) == (exact + near, exact)
    assert count_ops(after, ConfusionTransposeOp) == exact


@pytest.mark.parametrize("transpose_first", [True, False])
def test_confusion_transpose_computes_both_orders(transpose_first: bool) -> None:
    b = GraphBuilder(seed=24)
    x = b.input((2, 3, 4))
    target = [6, -1] if transpose_first else [3, 2, 4]
    props = {"perm": ints([1, 0, 2]), "shape": ints(target), "transpose_first": bool_attr(transpose_first)}
    op = ConfusionTransposeOp([x], props, "ct")
    b.block.add_op(op)
    b.output(op)
    case = b.finish()
    text = ir.to_text(case.module)
    assert ir.to_text(ir.parse(text)) == text
    feeds = case.inputs()

    (got,) = reference.run(case.module, feeds, case.store).values()
    value = feeds["input_0"]
    want = value.transpose(1, 0, 2).reshape(6, 4) if transpose_first else value.reshape(3, 2, 4).transpose(1, 0, 2)
    assert got.shape == op.y.type.get_shape()
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------- CastCast


@given(graphs(dtypes=(f32, f16, bf16), ops=NO_LAYOUT_OPS, max_ops=4, with_pattern=[cast_chain(), cast_chain()]))
def test_cast_chains_through_wider_types_shorten(case: GraphCase) -> None:
    after, counts = fuse(case, CastCastFusionPass)
    assert_equivalent(case, after, rtol=0.0, atol=0.0)
    for ops in site_groups(after, "cast_chain", exact=True):
        assert not alive(ops[-1])
    for ops in site_groups(after, "cast_chain", exact=False):
        assert all(alive(op) for op in ops)
    exact, near = len(case.sites_of("cast_chain", exact=True)), len(case.sites_of("cast_chain", exact=False))
    assert (counts.match_times, counts.effect_times) == (exact + near, exact)


def _casts(src: str, *chain: str) -> GraphCase:
    """An input of numpy dtype `src` cast through each dtype of `chain` in turn."""
    b = GraphBuilder(seed=25)
    low, high = (-100, 100) if src in ("int8", "int16", "int32", "int64") else (0, 200) if src.startswith("uint") else (-3, 3)
    v = b.input((4, 5), src, low=low, high=high)
    for dt in chain:
        v = b.op(CastOp, [v], dst_type=dtypes.from_numpy(np.dtype(dt))).y
    return b.finish()


@pytest.mark.parametrize(
    ("chain", "casts_left"),
    [
        (("int8", "int32", "float32"), 1),
        (("int16", "float32", "int16"), 0),
        (("uint8", "int16", "uint8"), 0),
        (("int8", "float16", "int64"), 1),
        (("bool", "float16", "bool"), 0),
        (("float16", "float64", "int32"), 1),
        (("float32", "float64", "float32"), 0),
    ],
)
def test_cast_chains_through_types_that_hold_the_source_shorten(chain: tuple[str, ...], casts_left: int) -> None:
    case = _casts(*chain)
    after, counts = fuse(case, CastCastFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 1)
    assert count_ops(after, CastOp) == casts_left
    assert_equivalent(case, after, rtol=0.0, atol=0.0)


@pytest.mark.parametrize(
    "chain",
    [
        ("float32", "float16", "float32"),
        ("float16", "bfloat16", "float32"),
        ("bfloat16", "float16", "bfloat16"),
        ("int32", "float32", "int32"),
        ("int16", "float16", "int16"),
        ("int8", "uint8", "int32"),
        ("uint16", "int16", "int32"),
        ("int64", "float64", "int64"),
        ("float32", "int32", "float32"),
    ],
)
def test_cast_chains_through_narrower_types_stay(chain: tuple[str, ...]) -> None:
    case = _casts(*chain)
    after, counts = fuse(case, CastCastFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 0)
    assert count_ops(after, CastOp) == 2


def test_layout_fusions_are_registered_under_their_names() -> None:
    for cls in (RedundantReshapeTransposeFusionPass, TransposeReshapeFusionPass, CastCastFusionPass):
        assert get_pass(cls.name) is cls
