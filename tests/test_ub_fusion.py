"""UB fusion: which ops share a `_fusion_scope`, and what a scope may hold.

Every pass here only marks ops, so the reference interpreter must give bitwise
the same outputs after it; every scope must be convex (the kernels stay acyclic)
and fit the Unified Buffer of the SoC the pass was given.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, settings
from xdsl.dialects.builtin import BoolAttr, IntegerAttr, StringAttr, f16, f32, i64
from xdsl.ir import SSAValue

import ge
from dialects.ascend_graph import (
    AddOp,
    BatchMatMulOp,
    Conv2DOp,
    DivOp,
    ErfOp,
    ExpOp,
    FlattenOp,
    IdentityOp,
    MatMulV2Op,
    MulOp,
    ReduceMaxOp,
    ReduceSumOp,
    ReluOp,
    ReshapeOp,
    SigmoidOp,
    SoftmaxOp,
    SplitOp,
    TanhOp,
)
from ge.core import reference, soc
from ge.core.ir import parse, to_text
from ge.testing import GraphBuilder, clone, graphs, run_pass
from passes.fusion import FusionKind, collect_statistics, ordered
from passes.registry import get_pass
from dialects.kernel_boundary import SCOPE_ATTR, kernel_scopes, scope_of
from passes.ub_fusion.automatic import AutomaticUbFusion
from passes.ub_fusion.scopes import scope_violations, working_set

UB_PASSES = (
    "TbeConvDoubleInFusionPass",
    "TbeBatchMatmulElementWiseFusionPass",
    "TbeCommonRules0FusionPass",
    "TbeMatmulElemwiseFusionPass",
    "AutomaticUbFusion",
    "MatmulTransdataFusionPass",
)


def conv(b: GraphBuilder, x, cout: int = 4) -> Conv2DOp:
    cin = SSAValue.get(x).type.get_shape()[1]
    w = b.random_weight((cout, cin, 3, 3))
    return b.op(Conv2DOp, [x, w], strides=(1, 1, 1, 1), pads=(1, 1, 1, 1), dilations=(1, 1, 1, 1), groups=1)


def scopes(module) -> dict[int, list[str]]:
    """Scope id -> the op types in it, in program order."""
    found: dict[int, list[str]] = {}
    for op in module.walk():
        if (s := scope_of(op)) is not None:
            found.setdefault(s, []).append(op.OP_TYPE)
    return found


def run_counted(case, name: str):
    with collect_statistics() as stats:
        after = run_pass(case, name)
    return after, stats.get(name)


# ------------------------------------------------------------------ conv passes


def test_conv_add_relu_is_one_double_in_scope() -> None:
    b = GraphBuilder(0)
    x = b.input([1, 4, 6, 6])
    c = conv(b, x)
    b.op(ReluOp, [b.op(AddOp, [c, x])])
    after, counts = run_counted(b.finish(), "TbeConvDoubleInFusionPass")
    assert list(scopes(after).values()) == [["Conv2D", "Add", "Relu"]]
    assert (counts.match_times, counts.effect_times) == (1, 1)


def test_double_in_needs_both_elementwise_ops() -> None:
    b = GraphBuilder(0)
    x = b.input([1, 4, 6, 6])
    b.op(AddOp, [conv(b, x), x])
    after, counts = run_counted(b.finish(), "TbeConvDoubleInFusionPass")
    assert scopes(after) == {} and counts.match_times == 0


def test_double_in_rejects_an_add_of_the_conv_with_itself() -> None:
    b = GraphBuilder(0)
    c = conv(b, b.input([1, 4, 6, 6]))
    b.op(ReluOp, [b.op(AddOp, [c, c])])
    after, counts = run_counted(b.finish(), "TbeConvDoubleInFusionPass")
    assert scopes(after) == {} and (counts.match_times, counts.effect_times) == (1, 0)


def test_common_rules0_takes_a_chain_of_up_to_five() -> None:
    b = GraphBuilder(0)
    v = conv(b, b.input([1, 4, 6, 6]))
    for cls in (ReluOp, SigmoidOp, TanhOp, ReluOp, SigmoidOp, TanhOp, ReluOp):
        v = b.op(cls, [v])
    after, counts = run_counted(b.finish(), "TbeCommonRules0FusionPass")
    assert list(scopes(after).values()) == [["Conv2D", "Relu", "Sigmoid", "Tanh", "Relu", "Sigmoid"]]
    assert (counts.match_times, counts.effect_times) == (1, 1)


def test_common_rules0_stops_where_a_value_has_two_users() -> None:
    b = GraphBuilder(0)
    r = b.op(ReluOp, [conv(b, b.input([1, 4, 6, 6]))])
    b.op(TanhOp, [r])
    b.op(SigmoidOp, [r])
    after = run_pass(b.finish(), "TbeCommonRules0FusionPass")
    assert list(scopes(after).values()) == [["Conv2D", "Relu"]]


def test_a_conv_with_two_users_is_not_fused() -> None:
    b = GraphBuilder(0)
    c = conv(b, b.input([1, 4, 6, 6]))
    b.op(ReluOp, [c])
    b.output(c)
    after = run_pass(b.finish(), "TbeCommonRules0FusionPass,TbeConvDoubleInFusionPass")
    assert scopes(after) == {}


# ---------------------------------------------------------------- matmul passes


def test_matmul_takes_bias_and_gelu_decomposition() -> None:
    """x*0.5*(1+erf(x/sqrt 2)): x has two users inside the tail."""
    b = GraphBuilder(0)
    mm = b.op(MatMulV2Op, [b.input([4, 8]), b.random_weight((8, 16))], transpose_x1=False, transpose_x2=False)
    h = b.op(AddOp, [mm, b.random_weight((16,))])
    e = b.op(ErfOp, [b.op(DivOp, [h, b.constant(1.4142135)])])
    g = b.op(MulOp, [h, b.op(AddOp, [e, b.constant(1.0)])])
    b.op(MulOp, [g, b.constant(0.5)])
    case = b.finish()
    after, counts = run_counted(case, "TbeMatmulElemwiseFusionPass")
    assert list(scopes(after).values()) == [["MatMulV2", "Add", "Div", "Erf", "Add", "Mul", "Mul"]]
    assert (counts.match_times, counts.effect_times) == (1, 1)
    assert kernel_scopes(case.module) == 7 and kernel_scopes(after) == 1


def test_matmul_tail_keeps_one_output() -> None:
    """The bias Add also feeds a softmax whose result joins it again: adding the
    second Add would make the scope feed itself, so the scope ends at the bias."""
    b = GraphBuilder(0)
    mm = b.op(MatMulV2Op, [b.input([4, 8]), b.random_weight((8, 16))], transpose_x1=False, transpose_x2=False)
    h = b.op(AddOp, [mm, b.random_weight((16,))])
    s = b.op(SoftmaxOp, [h], axes=(1,))
    b.op(AddOp, [h, s])
    after = run_pass(b.finish(), "TbeMatmulElemwiseFusionPass")
    assert list(scopes(after).values()) == [["MatMulV2", "Add"]]
    assert scope_violations(after) == []


def test_matmul_scope_holds_at_most_ten_ops() -> None:
    b = GraphBuilder(0)
    v = b.op(MatMulV2Op, [b.input([4, 8]), b.random_weight((8, 16))], transpose_x1=False, transpose_x2=False)
    for _ in range(12):
        v = b.op(TanhOp, [v])
    after = run_pass(b.finish(), "TbeMatmulElemwiseFusionPass")
    assert [len(ops) for ops in scopes(after).values()] == [10]


def test_batch_matmul_tail() -> None:
    b = GraphBuilder(0)
    x = b.input([2, 4, 8])
    mm = b.op(BatchMatMulOp, [x, b.input([2, 8, 4])], adj_x1=False, adj_x2=False)
    b.op(ReluOp, [b.op(AddOp, [mm, b.input([2, 4, 4])])])
    case = b.finish()
    after, counts = run_counted(case, "TbeBatchMatmulElementWiseFusionPass")
    assert list(scopes(after).values()) == [["BatchMatMulV2", "Add", "Relu"]]
    assert counts.effect_times == 1
    matmul_only = run_pass(case, "TbeMatmulElemwiseFusionPass")
    assert scopes(matmul_only) == {}


# ------------------------------------------------------------ automatic fusion


def test_automatic_fusion_merges_an_elementwise_chain() -> None:
    b = GraphBuilder(0)
    x = b.input([2, 8])
    v = b.op(ExpOp, [b.op(TanhOp, [x])])
    b.op(AddOp, [b.op(MulOp, [v, x]), b.constant(1.0)])
    after, counts = run_counted(b.finish(), "AutomaticUbFusion")
    assert list(scopes(after).values()) == [["Tanh", "Exp", "Mul", "Add"]]
    assert counts.effect_times == 1 and counts.match_times >= 1


@pytest.mark.slow
def test_a_long_elementwise_chain_compiles_in_scopes_the_lowering_accepts() -> None:
    """3,000 Adds: more values than one block-tiled kernel can hold at once (each its
    own UB buffer), so the chain splits into scopes that fit; it once became one
    scope that lower-to-kernel refused. Also the scale the merges must stay fast at."""
    b = GraphBuilder(0)
    x = b.input([1, 16])
    for _ in range(3000):
        x = b.op(AddOp, [x, b.random_weight((1, 16))])
    b.output(x)
    model = ge.compile(b.finish().module, {"soc_version": "Ascend310P3", "export_compile_stat": 0})
    assert model.build["kernels"] >= 2


def test_automatic_fusion_keeps_the_graph_of_kernels_acyclic() -> None:
    """a -> softmax -> b and a -> b: a and b in one kernel would wait for itself."""
    b = GraphBuilder(0)
    a = b.op(ExpOp, [b.input([2, 8])])
    s = b.op(SoftmaxOp, [a], axes=(1,))
    b.op(AddOp, [a, s])
    after = run_pass(b.finish(), "AutomaticUbFusion")
    assert scopes(after) == {}


def test_automatic_fusion_does_not_take_ops_of_cube_scopes() -> None:
    b = GraphBuilder(0)
    mm = b.op(MatMulV2Op, [b.input([4, 8]), b.random_weight((8, 16))], transpose_x1=False, transpose_x2=False)
    r = b.op(ReluOp, [mm])
    b.op(TanhOp, [b.op(ExpOp, [r])])
    after = run_pass(b.finish(), "TbeMatmulElemwiseFusionPass,AutomaticUbFusion")
    assert sorted(scopes(after).values()) == [["MatMulV2", "Relu", "Exp", "Tanh"]]


def test_a_cycle_through_another_scope_is_refused() -> None:
    """e1 -> [m -> r] -> e2 and e1 -> e2, with [m -> r] a matmul scope: e1 and e2
    in one kernel would need the matmul kernel both before and after them."""
    b = GraphBuilder(0)
    e1 = b.op(ExpOp, [b.input([4, 8])])
    mm = b.op(MatMulV2Op, [e1, b.random_weight((8, 8))], transpose_x1=False, transpose_x2=False)
    r = b.op(ReluOp, [mm])
    b.op(AddOp, [e1, r])
    b.output(r)  # two outputs: the matmul tail ends at the Relu
    after = run_pass(b.finish(), "TbeMatmulElemwiseFusionPass,AutomaticUbFusion")
    assert list(scopes(after).values()) == [["MatMulV2", "Relu"]]
    assert scope_violations(after) == []


def test_reduction_and_its_elementwise_neighbours_are_one_scope() -> None:
    """softmax spelled out: exp(x) / sum(exp(x)) over the rows."""
    b = GraphBuilder(0)
    e = b.op(ExpOp, [b.input([4, 16])])
    b.op(DivOp, [e, b.op(ReduceSumOp, [e], axes=(1,), keep_dims=True)])
    after = run_pass(b.finish(), "AutomaticUbFusion")
    assert list(scopes(after).values()) == [["Exp", "ReduceSumD", "Div"]]


def test_reductions_over_other_axes_or_dropping_them_stay_apart() -> None:
    b = GraphBuilder(0)
    e = b.op(ExpOp, [b.input([4, 16])])
    s = b.op(ReduceSumOp, [e], axes=(1,), keep_dims=True)
    b.op(ReduceMaxOp, [b.op(MulOp, [e, s])], axes=(0,), keep_dims=True)
    b.op(ReduceSumOp, [b.op(TanhOp, [e])], axes=(1,), keep_dims=False)
    after = run_pass(b.finish(), "AutomaticUbFusion")
    groups = sorted(scopes(after).values())
    assert ["Exp", "ReduceSumD", "Mul", "Tanh"] in groups
    assert all("ReduceMaxD" not in g for g in groups)
    assert sum(g.count("ReduceSumD") for g in groups) == 1


def _row_softmax(n: int):
    b = GraphBuilder(0, dtype=f16)
    e = b.op(ExpOp, [b.input([1, n])])
    b.op(DivOp, [e, b.op(ReduceSumOp, [e], axes=(1,), keep_dims=True)])
    return b.finish()


def test_working_set_of_a_row_scope() -> None:
    """x (2 buffers) and exp live at step 0; exp, the sum and the output (2 buffers)
    at the Div: 3 float16 rows of 2n bytes, plus the 32-byte sum."""
    case = _row_softmax(4000)
    ops = [op for op in case.graph.body.block.ops if op.OP_TYPE in ("Exp", "ReduceSumD", "Div")]
    assert working_set(ops, soc.load("Ascend310P3")) == 3 * 2 * 4000 * 2 // 2 + 32
    assert working_set(ops[:1], soc.load("Ascend310P3")) == 2 * 32 + 2 * 32  # no reduction: one block each


@pytest.mark.parametrize(("part", "fused"), [("Ascend310P3", True), ("Ascend910B1", False)])
def test_scope_must_fit_the_socs_unified_buffer(part: str, fused: bool) -> None:
    """240 KB: inside the 256 KB UB of a 310P3, beyond the 192 KB of a 910B1."""
    after = run_pass(_row_softmax(40000), f"AutomaticUbFusion{{soc_version={part}}}")
    assert bool(scopes(after)) is fused
    assert scope_violations(after, part) == []


def test_an_unknown_soc_option_is_an_option_error() -> None:
    from ge.core.errors import OptionError

    with pytest.raises(OptionError, match="soc_version .Ascend1. is not allowed"):
        run_pass(_row_softmax(16), AutomaticUbFusion(soc_version="Ascend1"))


# --------------------------------------------------------------- kernel count


def test_kernel_scopes_counts_scopes_once_and_skips_views_and_no_task() -> None:
    b = GraphBuilder(0)
    x = b.input([2, 8])
    t = b.op(TanhOp, [b.op(IdentityOp, [x])])
    r = b.op(ReshapeOp, [t], shape=(16,))
    f = b.op(FlattenOp, [b.op(ExpOp, [b.op(ReshapeOp, [r], shape=(2, 8))])], axis=1)
    parts = b.op(SplitOp, [f], split_dim=0, num_split=2)
    tail = [b.op(ReluOp, [parts.results[0]]), b.op(SigmoidOp, [parts.results[1]])]
    module = b.finish().module
    assert kernel_scopes(module) == 5  # tanh, exp, split, relu, sigmoid
    parts.attributes["_no_task"] = BoolAttr.from_bool(True)
    assert kernel_scopes(module) == 4
    for op in tail:
        op.attributes[SCOPE_ATTR] = IntegerAttr(7, i64)
    assert kernel_scopes(module) == 3


def test_scope_ids_are_unique_in_the_module() -> None:
    b = GraphBuilder(0)
    x = b.input([1, 4, 6, 6])
    v = b.op(ReluOp, [conv(b, x)])
    v = b.op(ReluOp, [b.op(AddOp, [conv(b, v), x])])
    b.op(TanhOp, [b.op(ExpOp, [b.op(SoftmaxOp, [v], axes=(1,))])])
    after = run_pass(b.finish(), ",".join(UB_PASSES))
    assert sorted(scopes(after)) == [0, 1, 2]
    again = run_pass(after, "AutomaticUbFusion")
    assert scopes(again) == scopes(after)


def test_scopes_print_and_parse_back() -> None:
    b = GraphBuilder(0)
    b.op(TanhOp, [b.op(ExpOp, [b.input([2, 8])])])
    after = run_pass(b.finish(), "AutomaticUbFusion")
    text = to_text(after)
    assert "_fusion_scope = 0 : i64" in text
    assert scopes(parse(text)) == scopes(after)


def test_ub_passes_run_in_ge_order() -> None:
    names = [cls.name for cls in ordered(FusionKind.UB) if cls.name in UB_PASSES]
    assert names[0] == "TbeConvDoubleInFusionPass" and names[-2:] == ["AutomaticUbFusion", "MatmulTransdataFusionPass"]
    assert get_pass("AutomaticUbFusion") is AutomaticUbFusion


def _matmul_to_nd(*, tail: bool = True, extra_user: bool = False):
    """x -> TransData ND->NZ -> matmul (-> relu) -> TransData NZ->ND, as format selection leaves it."""
    last = "%3" if tail else "%2"
    relu = f"%3 = ascend_graph.relu %2 : ({NZ}) -> {NZ}" if tail else ""
    more = (f", {last}", ', "z"', f", {NZ}") if extra_user else ("", "", "")
    return parse(f"""
builtin.module {{
  ascend_graph.graph @main {{
    %0 = ascend_graph.data {{index = 0 : i64, name = "x"}} : tensor<32x32xf16>
    %1 = ascend_graph.trans_data %0 {{src_format = "ND", dst_format = "FRACTAL_NZ"}} : (tensor<32x32xf16>) -> {NZ}
    %2 = ascend_graph.matmul_v2 %1, %1 {{transpose_x1 = false, transpose_x2 = false}} : ({NZ}, {NZ}) -> {NZ}
    {relu}
    %4 = ascend_graph.trans_data {last} {{src_format = "FRACTAL_NZ", dst_format = "ND"}} : ({NZ}) -> tensor<32x32xf16>
    ascend_graph.net_output %4{more[0]} {{names = ["y"{more[1]}]}} : tensor<32x32xf16>{more[2]}
  }}
}}
""")


NZ = 'tensor<2x2x16x16xf16, #ascend_graph.format<"FRACTAL_NZ", "ND", array<i64: 32, 32>>>'


def test_matmul_scope_writes_nd_itself() -> None:
    after = run_pass(_matmul_to_nd(), "TbeMatmulElemwiseFusionPass,MatmulTransdataFusionPass")
    assert list(scopes(after).values()) == [["MatMulV2", "Relu", "TransData"]]
    assert kernel_scopes(after) == 2  # the ND -> NZ TransData stays its own kernel
    bare = run_pass(_matmul_to_nd(tail=False), "MatmulTransdataFusionPass")
    assert list(scopes(bare).values()) == [["MatMulV2", "TransData"]]


def test_matmul_scope_with_two_outputs_keeps_its_trans_data_apart() -> None:
    after = run_pass(_matmul_to_nd(extra_user=True), "TbeMatmulElemwiseFusionPass,MatmulTransdataFusionPass")
    assert list(scopes(after).values()) == [["MatMulV2", "Relu"]]


# ------------------------------------------------------------------ properties


CUBE_HEAVY = ("conv2d", "matmul", "batch_matmul", "gemm", "unary", "binary", "residual", "branch", "reduce")


@settings(max_examples=60)
@given(graphs(dtypes=(f32, f16), max_ops=8))
def test_ub_fusion_only_marks(case) -> None:
    """Outputs bitwise equal, scopes convex and within UB, never more kernels."""
    check_only_marks(case)


@settings(max_examples=60)
@given(graphs(dtypes=(f32, f16), ops=CUBE_HEAVY, max_ops=8))
def test_ub_fusion_only_marks_cube_tails(case) -> None:
    check_only_marks(case)


def check_only_marks(case) -> None:
    after = run_pass(case, ",".join(UB_PASSES))
    for kinds in scopes(after).values():
        event("cube scope" if {"Conv2D", "MatMulV2", "BatchMatMulV2", "GEMM"} & set(kinds) else "vector scope")
    assert scope_violations(after) == []
    assert kernel_scopes(after) <= kernel_scopes(case.module)
    assert all(len(ops) > 1 for ops in scopes(after).values())
    stripped = clone(after)
    for op in stripped.walk():
        op.attributes.pop(SCOPE_ATTR, None)
    assert to_text(stripped) == to_text(case.module)
    inputs = case.inputs(0)
    want = reference.run(case.module, inputs, case.store)
    got = reference.run(after, inputs, case.store)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


@pytest.mark.parametrize("shape, view", [((1, 32, 1, 1), True), ((1, 24, 1, 1), False), ((1, 32, 2, 2), False)])
def test_trans_data_that_moves_no_byte_is_a_view(shape, view):
    """NC1HWC0 -> NCHW at H = W = 1 with C a multiple of C0 keeps every address."""
    from xdsl.ir import Block

    from dialects import ascend_graph as ag
    from dialects.kernel_boundary import is_view, makes_kernel

    block = Block(arg_types=[ag.device_tensor(f16, "NC1HWC0", "NCHW", shape)])
    op = ag.TransDataOp([block.args[0]], {"src_format": StringAttr("NC1HWC0"), "dst_format": StringAttr("NCHW")}, "td")
    assert is_view(op) is view
    assert makes_kernel(op) is not view
