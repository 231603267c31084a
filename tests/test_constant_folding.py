"""Constant folding (`constant-folding`): ops on constants only become constants;
nothing that depends on a graph input is folded."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, f16, f32
from xdsl.ir import Operation, SSAValue

from dialects.ascend_graph import (
    AddOp,
    ConstOp,
    DataOp,
    ExpandOp,
    GatherOp,
    MulOp,
    NetOutputOp,
    TransposeOp,
    WeightRefAttr,
)
from ge.core import ir, reference
from ge.testing import (
    GraphBuilder,
    GraphCase,
    assert_equivalent,
    clone,
    constant_subgraph,
    count_ops,
    graphs,
    run_pass,
)
from passes.constant_folding import ConstantFoldingPass
from passes.registry import get_pass


def runtime(module_ops: list[Operation]) -> set[str]:
    """The names of the ops whose value depends on a graph input."""
    live: set[SSAValue] = set()
    names = set()
    for op in module_ops:
        if isinstance(op, DataOp) or any(v in live for v in op.operands):
            live.update(op.results)
            if not isinstance(op, DataOp | NetOutputOp):
                names.add(op.label)  # type: ignore[attr-defined]
    return names


def graph_ops(case: GraphCase) -> list[Operation]:
    return list(case.graph.body.block.ops)


@given(graphs(dtypes=(f32, f16), max_ops=5, with_pattern=[constant_subgraph(), constant_subgraph()]))
def test_constant_folding_folds_constant_subgraphs_and_nothing_else(case: GraphCase) -> None:
    after = clone(case)
    ConstantFoldingPass().apply(ir.context(), after.module)
    after.module.verify()
    assert_equivalent(case, after)
    assert runtime(graph_ops(after)) == runtime(graph_ops(case))
    for op in graph_ops(after):
        if not isinstance(op, ConstOp | DataOp | NetOutputOp):
            assert not all(isinstance(v.owner, ConstOp) for v in op.operands), op
    for site in after.sites_of("constant_subgraph", exact=True):
        computed = [op for op in site.ops if not isinstance(op, ConstOp)]
        assert not any(op.parent for op in computed[:-1]) and computed[-1].parent
    for site in after.sites_of("constant_subgraph", exact=False):
        assert all(op.parent for op in site.ops)


def test_small_results_stay_inline_and_large_ones_go_to_the_weight_store() -> None:
    b = GraphBuilder(seed=31)
    x = b.input((16, 8))
    small = b.op(MulOp, [b.constant(2.0, (4,)), b.constant(3.0, (4,))])
    large = b.op(TransposeOp, [b.random_weight((8, 16))], perm=[1, 0])
    b.op(AddOp, [x, large])
    b.output(small)
    case = b.finish()
    after = run_pass(case, "constant-folding")
    assert_equivalent(case, after)
    consts = [op for op in after.walk() if isinstance(op, ConstOp)]
    assert count_ops(after, MulOp) == count_ops(after, TransposeOp) == 0
    kinds = {tuple(op.out.type.get_shape()): type(op.value) for op in consts}
    assert kinds == {(4,): DenseIntOrFPElementsAttr, (16, 8): WeightRefAttr}
    (folded,) = [op for op in consts if op.out.type.get_shape() == (4,)]
    np.testing.assert_array_equal(reference.const_value(folded), np.full(4, 6.0, np.float32))


def test_folding_does_not_blow_up_a_constant_past_the_limit() -> None:
    """An Expand of a scalar to more than `max_elements` stays; under it, it folds."""
    b = GraphBuilder(seed=32)
    x = b.input((64, 64))
    b.op(AddOp, [x, b.op(ExpandOp, [b.constant(1.5, (1, 1))], shape=[64, 64])])
    case = b.finish()
    assert count_ops(run_pass(case, "constant-folding{max-elements=1024}"), ExpandOp) == 1
    folded = run_pass(case, "constant-folding")
    assert count_ops(folded, ExpandOp) == 0
    assert_equivalent(case, folded)


def test_an_op_that_fails_on_its_constants_is_left_for_run_time() -> None:
    b = GraphBuilder(seed=33)
    gathered = b.op(GatherOp, [b.random_weight((3,)), b.weight(np.array([0, 5], np.int64))], axis=0)
    b.op(AddOp, [b.input((2,)), gathered])
    case = b.finish()
    after = run_pass(case, "constant-folding")
    assert count_ops(after, GatherOp) == 1


def test_constant_folding_is_registered() -> None:
    assert get_pass("constant-folding") is ConstantFoldingPass
