"""The incremental UB working set of AutomaticUbFusion (`passes.ub_fusion.footprint`)
against the from-scratch one (`scopes.working_set`), and its segment tree against a list."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import f16, f32

from ge.core import soc
from ge.testing import graphs
from passes.ub_fusion.footprint import Footprint, RangeMax
from passes.ub_fusion.scopes import ScopeGraph, is_elementwise, is_row_reduction, blocks_at_once, tile_of, working_set

VECTOR_HEAVY = ("unary", "binary", "residual", "branch", "reduce", "matmul")


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(-50, 50)), max_size=60), st.integers(1, 50))
def test_range_max_is_the_max_of_the_list(adds, length) -> None:
    tree, values = RangeMax(), []
    for k in range(length):
        tree.append(k * 7 % 13)
        values.append(k * 7 % 13)
    for lo, hi, delta in adds:
        lo, hi = sorted((lo % length, hi % length))
        tree.add(lo, hi, delta)
        values[lo : hi + 1] = [v + delta for v in values[lo : hi + 1]]
        assert tree.max() == max(values)
    while len(values) > 1:
        tree.pop()
        values.pop()
        assert tree.max() == max(values)


@settings(max_examples=150)
@given(graphs(dtypes=(f32, f16), ops=VECTOR_HEAVY, min_ops=3, max_ops=14), st.randoms(use_true_random=False))
def test_footprint_is_the_working_set(case, rnd: random.Random) -> None:
    """Ops joining one by one (each tried, undone, then joined) give the working set
    of the scope they make, whenever that scope's tile is the footprint's."""
    profile = soc.load("Ascend310P3")
    for graph in ScopeGraph.of(case.module):
        ops = [op for op in graph.ops if (is_elementwise(op) or is_row_reduction(op)) and rnd.random() < 0.8]
        tile = tile_of(ops)
        if not ops or tile is None:
            continue
        footprint = Footprint(tile, profile)
        for k, op in enumerate(ops):
            footprint.checkpoint()
            footprint.append(op)
            footprint.rollback()
            footprint.append(op)
            if tile_of(ops[: k + 1]) == tile:
                assert footprint.peak() == working_set(ops[: k + 1], profile)
                assert footprint.held() == blocks_at_once(ops[: k + 1], profile)
