"""The test kit for pass authors: generated graphs are valid, patterns are where
the cases say, and `assert_equivalent` passes copies and catches changes."""

from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType, bf16, f16, f32, i1, i32
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import VerifyException

from dialects import shapes
from dialects.ascend_graph import (
    AddOp,
    BatchMatMulOp,
    BatchNormOp,
    ConstOp,
    Conv2DOp,
    DataOp,
    ErfOp,
    ExpOp,
    IdentityOp,
    LogicalNotOp,
    MatMulV2Op,
    MulOp,
    NetOutputOp,
    ReduceMeanOp,
    ReduceSumOp,
    ReluOp,
    SoftmaxOp,
    SubOp,
    TanhOp,
    UnaryOp,
)
from ge.core import ir, reference
from ge.core.errors import OptionError
from ge.testing import (
    ELEMENTWISE_OPS,
    GraphBuilder,
    GraphCase,
    GraphState,
    PatternSite,
    assert_equivalent,
    attention,
    clone,
    conv_bn_chain,
    count_ops,
    gelu_erf_decomposition,
    graphs,
    layer_norm_decomposition,
    matmul_bias_add,
    run_pass,
    softmax_decomposition,
)

FLOATS = (f32, f16, bf16)


def final_add(g: GraphState) -> None:
    """A pattern: x + w with |w| >= 0.5, made an output, so changing it shows."""
    x = g.pick()
    with g.site("final_add"):
        w = g.random_weight(g.shape_of(x), low=-1.0, high=1.0, away_from_zero=0.5, dtype=g.dtype_of(x))
        y = g.op(AddOp, [x, w], bound=g.bound(x) + 1.0)
    g.output(y, "final")


def _site_op(case: GraphCase, cls: type) -> object:
    (site,) = case.sites_of("final_add")
    return next(op for op in site.ops if isinstance(op, cls))


# ------------------------------------------------------------------ generated graphs


@settings(max_examples=75)
@given(graphs(dtypes=FLOATS, max_ops=8))
def test_generated_graphs_verify_round_trip_and_run_finite(case: GraphCase) -> None:
    case.module.verify()
    text = ir.to_text(case.module)
    assert ir.to_text(ir.parse(text)) == text
    outputs = reference.run(case.module, case.inputs(seed=1), case.store)
    assert list(outputs) == [n.data for n in case.graph.output.names]
    for name, value in outputs.items():
        assert np.isfinite(value.astype(np.float64)).all(), f"output {name} is not finite"


@given(graphs(dtypes=[f16], max_elements=64, max_rank=3, with_pattern=[attention(), layer_norm_decomposition()]))
def test_graphs_respect_their_limits(case: GraphCase) -> None:
    for op in case.module.walk():
        if isinstance(op, ConstOp | NetOutputOp | ModuleOp) or not op.results:
            continue
        for r in op.results:
            assert isinstance(r.type, TensorType)
            assert shapes.numel(r.type.get_shape()) <= 64, op
    for data in case.graph.inputs:
        assert data.out.type.element_type == f16
    for value in case.graph.output.outputs:
        assert value.type.element_type == f16


@given(graphs(ops=["unary"]))
def test_the_op_mix_is_what_was_asked(case: GraphCase) -> None:
    for op in case.graph.body.block.ops:
        assert isinstance(op, UnaryOp | DataOp | ConstOp | NetOutputOp | AddOp), op.name


def _ancestors(value: SSAValue) -> set[SSAValue]:
    seen, todo = set(), [value]
    while todo:
        v = todo.pop()
        if v not in seen:
            seen.add(v)
            if isinstance(v.owner, Operation):
                todo.extend(v.owner.operands)
    return seen


@given(graphs(ops=["residual"], min_ops=1, max_ops=1))
def test_residuals_join_a_value_and_a_path_from_it(case: GraphCase) -> None:
    adds = [op for op in case.graph.body.block.ops if isinstance(op, AddOp)]
    assert any(a.x1 in _ancestors(a.x2) or a.x2 in _ancestors(a.x1) for a in adds)


@given(graphs(max_ops=8))
def test_every_unused_result_is_an_output(case: GraphCase) -> None:
    for op in case.graph.body.block.ops:
        if isinstance(op, DataOp | ConstOp | NetOutputOp):
            continue
        assert all(r.uses for r in op.results), f"{op.name} has an unused result"


def test_inputs_are_seeded_and_in_range() -> None:
    g = GraphBuilder(seed=3)
    x = g.input((4, 5), f16, low=0.5, high=1.0)
    n = g.input((3,), i32)
    b = g.input((2,), i1)
    g.op(ReluOp, [x])
    g.op(AddOp, [n, n])
    g.op(LogicalNotOp, [b])
    case = g.finish()
    first, again, other = case.inputs(7), case.inputs(7), case.inputs(8)
    assert all(np.array_equal(first[k], again[k]) for k in first)
    assert not np.array_equal(first["input_0"], other["input_0"])
    assert first["input_0"].dtype == np.float16 and first["input_0"].min() >= 0.5
    assert first["input_1"].dtype == np.int32 and np.abs(first["input_1"]).max() <= 8
    assert first["input_2"].dtype == np.bool_


# ----------------------------------------------------------------------- patterns

PATTERNS: list[tuple[str, Callable[..., object], set[type]]] = [
    ("conv_bn_chain", conv_bn_chain, {Conv2DOp, BatchNormOp}),
    ("matmul_bias_add", matmul_bias_add, {MatMulV2Op, AddOp}),
    ("layer_norm_decomposition", layer_norm_decomposition, {ReduceMeanOp, SubOp, AddOp}),
    ("gelu_erf_decomposition", gelu_erf_decomposition, {ErfOp, AddOp, MulOp}),
    ("softmax_decomposition", softmax_decomposition, {ExpOp, ReduceSumOp}),
    ("attention", attention, {BatchMatMulOp, SoftmaxOp, MulOp}),
]


def _intermediates_escape(case: GraphCase, site: PatternSite) -> bool:
    """Whether a value made inside the site, but not its result, is read outside it."""
    inside = set(site.ops)
    *middle, _ = [op for op in site.ops if not isinstance(op, ConstOp)]
    return any(use.operation not in inside for op in middle for r in op.results for use in r.uses)


@pytest.mark.parametrize("name, factory, classes", PATTERNS, ids=[p[0] for p in PATTERNS])
def test_patterns_contain_their_ops_and_keep_exact_sites_private(name, factory, classes) -> None:
    @given(graphs(dtypes=FLOATS, with_pattern=factory()))
    def check(case: GraphCase) -> None:
        (site,) = case.sites_of(name)
        for cls in classes:
            assert any(isinstance(op, cls) for op in site.ops), f"{site.variant} {name} has no {cls.name}"
            assert count_ops(case, cls) >= sum(isinstance(op, cls) for op in site.ops)
        assert _intermediates_escape(case, site) == (site.variant == "second_user")
        outputs = reference.run(case.module, case.inputs(), case.store)
        assert all(np.isfinite(v.astype(np.float64)).all() for v in outputs.values())

    check()


@given(graphs(with_pattern=conv_bn_chain(variants=["dynamic_filter"])))
def test_conv_bn_dynamic_filter_reads_an_input(case: GraphCase) -> None:
    (site,) = case.sites_of("conv_bn_chain", exact=False)
    conv = next(op for op in site.ops if isinstance(op, Conv2DOp))
    assert isinstance(conv.filter.owner, DataOp)


@given(graphs(with_pattern=[layer_norm_decomposition(variants=["exact", "mismatched_axes"])]))
def test_layer_norm_mismatched_axes_differ_only_in_the_near_miss(case: GraphCase) -> None:
    (site,) = case.sites_of("layer_norm_decomposition")
    means = [op for op in site.ops if isinstance(op, ReduceMeanOp)]
    rank = len(means[0].x.type.get_shape())
    first, second = ({shapes.norm_axis(a, rank) for a in m.props.ints("axes")} for m in means)
    assert (first != second) == (site.variant == "mismatched_axes")


@given(graphs(with_pattern=[matmul_bias_add(batch=True, variants=["exact"])]))
def test_batched_matmul_bias_add(case: GraphCase) -> None:
    (site,) = case.sites_of("matmul_bias_add", exact=True)
    assert any(isinstance(op, BatchMatMulOp) for op in site.ops)


# --------------------------------------------------------------------- equivalence


@given(graphs(dtypes=FLOATS, with_pattern=final_add))
def test_a_clone_is_equivalent_and_independent(case: GraphCase) -> None:
    copy = clone(case)
    assert isinstance(copy, GraphCase) and copy.module is not case.module
    assert ir.to_text(copy.module) == ir.to_text(case.module)
    assert_equivalent(case, copy)
    add = _site_op(copy, AddOp)
    assert add.parent_block() is copy.graph.body.block  # the site points into the copy
    Rewriter.replace_op(add, SubOp(list(add.operands), dict(add.properties)))
    assert count_ops(case, SubOp) == count_ops(copy, SubOp) - 1


@given(graphs(dtypes=FLOATS, with_pattern=final_add))
def test_add_replaced_by_sub_is_caught(case: GraphCase) -> None:
    copy = clone(case)
    add = _site_op(copy, AddOp)
    Rewriter.replace_op(add, SubOp(list(add.operands), dict(add.properties)))
    with pytest.raises(AssertionError, match=r"output 'final' on random inputs \(seed 0\).*max abs error"):
        assert_equivalent(case, copy)


def _perturb(case: GraphCase, change: Callable[[np.ndarray], np.ndarray]) -> GraphCase:
    copy = clone(case)
    const = _site_op(copy, ConstOp)
    array = change(case.store.get(const.value).astype(np.float64)).astype(case.store.get(const.value).dtype)
    const.properties["value"] = case.store.add(const.value.weight.data, array)
    return copy


@given(graphs(dtypes=FLOATS, with_pattern=final_add))
def test_a_perturbed_weight_is_caught(case: GraphCase) -> None:
    with pytest.raises(AssertionError, match="output 'final'"):
        assert_equivalent(case, _perturb(case, lambda w: w + 0.25))


@given(graphs(ops=ELEMENTWISE_OPS, with_pattern=final_add))
def test_rounding_sized_changes_pass_in_float32(case: GraphCase) -> None:
    assert_equivalent(case, _perturb(case, lambda w: np.nextafter(w.astype(np.float32), np.float32(np.inf))))


def _scaled(dtype, factor: float) -> tuple[ModuleOp, ModuleOp]:
    """x * c, and the same with c scaled by `factor`."""
    modules = []
    for c in (1.5, 1.5 * factor):
        g = GraphBuilder()
        x = g.input((8,), dtype, low=1.0, high=2.0)
        g.op(MulOp, [x, g.weight(np.full((8,), c, dtype))], name="scale")
        modules.append(g.finish().module)
    return modules[0], modules[1]


@pytest.mark.parametrize(
    "dtype, within, beyond",
    [(np.float32, 1 + 4e-6, 1 + 5e-5), (np.float16, 1 + 2e-3, 1 + 2e-2), (ml_dtypes.bfloat16, 1 + 1e-2, 1 + 1e-1)],
)
def test_float_tolerance_follows_the_dtype(dtype, within, beyond) -> None:
    assert_equivalent(*_scaled(dtype, within))
    with pytest.raises(AssertionError, match=r"output 'out_0'.*max rel error .* at \[\d\]"):
        assert_equivalent(*_scaled(dtype, beyond))
    assert_equivalent(*_scaled(dtype, beyond), rtol=0.2)


def test_integers_and_bools_compare_exactly() -> None:
    def graph(offset: int, negate: bool) -> ModuleOp:
        g = GraphBuilder()
        n = g.input((6,), i32)
        g.op(AddOp, [n, g.weight(np.array([1, 2, 3, 4, 5, 6 + offset], np.int32))], name="add")
        g.op(LogicalNotOp if negate else IdentityOp, [g.input((5,), i1)], name="flag")
        return g.finish().module

    base = graph(0, True)
    assert_equivalent(base, graph(0, True), rtol=1.0, atol=10.0)
    with pytest.raises(AssertionError, match=r"output 'out_0'.*1 of 6 elements differ \(int32, compared exactly\); first at \[5\]"):
        assert_equivalent(base, graph(1, True), rtol=1.0, atol=10.0)
    with pytest.raises(AssertionError, match=r"output 'out_1'.*\(bool, compared exactly\)"):
        assert_equivalent(base, graph(0, False))


def test_explicit_inputs_and_mismatched_signatures() -> None:
    def graph(shape: tuple[int, ...]) -> ModuleOp:
        g = GraphBuilder()
        g.op(TanhOp, [g.input(shape)])
        return g.finish().module

    a = graph((2, 3))
    assert_equivalent(a, clone(a), inputs=[np.ones((2, 3), np.float32)])
    with pytest.raises(AssertionError, match="different inputs"):
        assert_equivalent(a, graph((3, 2)))


# ----------------------------------------------------------------- count and passes


def _duplicated_relu() -> GraphCase:
    """Two identical Relus (CSE merges ops only when their node names agree too)."""
    g = GraphBuilder()
    x = g.input((2, 3))
    g.op(AddOp, [g.op(ReluOp, [x], name="relu"), g.op(ReluOp, [x], name="relu")])
    return g.finish()


def test_count_ops_by_class_op_type_and_name() -> None:
    case = _duplicated_relu()
    assert count_ops(case, ReluOp) == count_ops(case, "Relu") == count_ops(case.module, "ascend_graph.relu") == 2
    assert count_ops(case, AddOp) == 1 and count_ops(case, "BatchNorm") == 0


def test_run_pass_by_name_works_on_a_copy() -> None:
    case = _duplicated_relu()
    after = run_pass(case, "cse,dce")
    assert count_ops(after, ReluOp) == 1
    assert count_ops(case, ReluOp) == 2
    assert_equivalent(case, after)


def test_run_pass_with_an_instance_and_an_unknown_name() -> None:
    class AddToSub(ModulePass):
        name = "test-add-to-sub"

        def apply(self, ctx: Context, op: ModuleOp) -> None:
            for add in [o for o in op.walk() if isinstance(o, AddOp)]:
                Rewriter.replace_op(add, SubOp(list(add.operands), dict(add.properties)))

    case = _duplicated_relu()
    after = run_pass(case.module, AddToSub())
    assert count_ops(after, SubOp) == 1 and count_ops(case, SubOp) == 0
    with pytest.raises(AssertionError):
        assert_equivalent(case, after)
    with pytest.raises(OptionError, match="unknown pass 'NoSuchFusionPass'"):
        run_pass(case, "NoSuchFusionPass")


def test_pattern_sites_do_not_nest() -> None:
    g = GraphBuilder()
    x = g.input((2,))
    with g.site("outer"):
        with pytest.raises(RuntimeError, match="do not nest"):
            with g.site("inner"):
                pass
        g.op(ReluOp, [x])
    assert [s.pattern for s in g.finish().sites] == ["outer"]


def test_a_constant_takes_a_flat_list_for_its_shape_or_one_value_to_broadcast() -> None:
    b = GraphBuilder()
    flat = b.constant([1, 2, 3, 4, 5, 6], (2, 3))
    np.testing.assert_array_equal(reference.const_value(flat.owner), [[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(reference.const_value(b.constant(2.0, (2, 2)).owner), np.full((2, 2), 2.0))
    with pytest.raises(ValueError, match=r"4 values do not fill shape \[2, 3\] \(6 values\)"):
        b.constant([1, 2, 3, 4], (2, 3))


def test_an_op_without_its_required_properties_is_refused_when_built() -> None:
    b = GraphBuilder()
    x = b.input((2, 3))
    with pytest.raises(VerifyException, match="property 'axes' expected in operation 'ascend_graph.softmax_v2'"):
        b.op(SoftmaxOp, [x])


def test_any_variant_may_be_the_exact_one() -> None:
    b = GraphBuilder()
    x = b.input((2, 3))
    with b.site("relu_pair", "plain", exact=True):
        b.op(ReluOp, [b.op(ReluOp, [x])])
    with b.site("relu_pair", "exact", exact=False):
        b.op(ReluOp, [x])
    with b.site("relu_pair", "exact"):
        b.op(ReluOp, [x])
    case = b.finish()
    assert [s.variant for s in case.sites_of("relu_pair", exact=True)] == ["plain", "exact"]
    assert [s.variant for s in case.sites_of("relu_pair", exact=False)] == ["exact"]
