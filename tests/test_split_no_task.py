"""FusionVirtualOpSetSwitch: each condition of the reference text, met and broken.

The graphs are `data -> producer -> split -> consumers`; a test changes one thing
and checks whether the split became `_no_task` (with GE's three companion marks).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest
from hypothesis import event, given, settings
from xdsl.dialects.builtin import f16, f32
from xdsl.irdl import irdl_op_definition

from dialects.ascend_graph import ReluOp, ReshapeOp, SplitBase, SplitOp, SplitVOp, TanhOp, UnaryOp
from ge.core import reference
from ge.core.ir import parse, to_text
from ge.testing import GraphBuilder, GraphState, graphs, run_pass
from passes.fusion import FusionKind, collect_statistics
from passes.split_no_task import MARKS, FusionVirtualOpSetSwitch, qualifies, split_axis
from dialects.kernel_boundary import is_no_task, kernel_scopes

PASS = "FusionVirtualOpSetSwitch"


@irdl_op_definition
class HcomAllReduceOp(UnaryOp):
    """A stand-in collective: only its CANN op type matters here."""

    name = "test.hcom_all_reduce"
    OP_TYPE: ClassVar[str] = "HcomAllReduce"


def marked(module) -> list[bool]:
    return [is_no_task(op) for op in module.walk() if isinstance(op, SplitBase)]


def text_graph(x: str, outs: tuple[str, str], split: str = "split_d", props: str = "split_dim = 1 : i64, num_split = 2 : i64",
               split_attrs: str = "", consumer_attrs: str = "", producer: str = "relu") -> str:
    """data -> producer -> split -> relu, relu; types spelled out (formats included)."""
    first = f"%1 = ascend_graph.relu %0 : ({x}) -> {x}" if producer == "relu" else producer
    return f"""
builtin.module {{
  ascend_graph.graph @main {{
    %0 = ascend_graph.data {{index = 0 : i64, name = "x"}} : {x}
    {first}
    %2, %3 = ascend_graph.{split} %1 {{{props}, name = "s"{split_attrs}}} : ({x}) -> ({outs[0]}, {outs[1]})
    %4 = ascend_graph.relu %2 {{name = "r0"{consumer_attrs}}} : ({outs[0]}) -> {outs[0]}
    %5 = ascend_graph.relu %3 {{name = "r1"}} : ({outs[1]}) -> {outs[1]}
    ascend_graph.net_output %4, %5 {{names = ["y0", "y1"]}} : {outs[0]}, {outs[1]}
  }}
}}
"""


def applies(text: str) -> bool:
    after = run_pass(parse(text), PASS)
    (result,) = marked(after)
    return result


ND = ("tensor<1x64xf16>", ("tensor<1x32xf16>", "tensor<1x32xf16>"))


def nc1hwc0(c: int, parts: tuple[int, int], dtype: str = "f16", c0: int = 16) -> tuple[str, tuple[str, str]]:
    def t(ch: int) -> str:
        return f'tensor<1x{-(-ch // c0)}x4x4x{c0}x{dtype}, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, {ch}, 4, 4>>>'

    return t(c), (t(parts[0]), t(parts[1]))


def nz(origin: list[int], axis: int) -> tuple[str, tuple[str, str]]:
    def t(shape: list[int]) -> str:
        *batch, h, w = shape
        phys = "x".join(map(str, [*batch, -(-w // 16), -(-h // 16), 16, 16]))
        return f'tensor<{phys}xf16, #ascend_graph.format<"FRACTAL_NZ", "ND", array<i64: {", ".join(map(str, shape))}>>>'

    half = list(origin)
    half[axis] //= 2
    return t(origin), (t(half), t(half))


# ------------------------------------------------------------------ the marks


def test_split_n_gets_every_mark() -> None:
    b = GraphBuilder(0, dtype=f16)
    s = b.op(SplitOp, [b.op(ReluOp, [b.input([4, 6])])], split_dim=0, num_split=2)
    b.op(ReluOp, [s.results[0]])
    b.op(ReluOp, [s.results[1]])
    case = b.finish()
    with collect_statistics() as stats:
        after = run_pass(case, PASS)
    (split,) = [op for op in after.walk() if isinstance(op, SplitBase)]
    assert {k: split.attributes[k] for k in MARKS} == MARKS
    assert "_no_task = true" in to_text(after) and "_reuse_input_on_dim_index = 0 : i64" in to_text(after)
    assert stats.counts == {}, "FusionVirtualOpSetSwitch never reaches fusion_result.json"
    assert kernel_scopes(after) == kernel_scopes(case.module) - 1


def test_switched_under_ub_fusion_and_not_reported() -> None:
    assert FusionVirtualOpSetSwitch.kind is FusionKind.UB and not FusionVirtualOpSetSwitch.reported


def test_split_v_on_a_negative_axis() -> None:
    b = GraphBuilder(0)
    s = b.op(SplitVOp, [b.op(ReluOp, [b.input([6, 4])])], split_dim=-2, num_split=2, size_splits=(2, 4))
    b.op(ReluOp, [s.results[0]])
    b.op(ReluOp, [s.results[1]])
    after = run_pass(b.finish(), PASS)
    assert marked(after) == [True]
    assert split_axis(next(op for op in after.walk() if isinstance(op, SplitBase))) == 0


def test_inner_axis_of_a_batch_is_not_split_n() -> None:
    assert not applies(text_graph("tensor<2x64xf16>", ("tensor<2x32xf16>", "tensor<2x32xf16>")))


# -------------------------------------------------------------- split_c_to_n


def test_c_to_n_same_format_with_n_of_one() -> None:
    assert applies(text_graph(*ND))
    assert applies(text_graph("tensor<1x32x4x4xf16>", ("tensor<1x16x4x4xf16>", "tensor<1x16x4x4xf16>")))


def test_a_1d_split_is_split_n_and_an_axis_past_c_is_neither() -> None:
    one_d = text_graph("tensor<64xf16>", ("tensor<32xf16>", "tensor<32xf16>"), props="split_dim = 0 : i64, num_split = 2 : i64")
    assert applies(one_d)
    inner = ("tensor<1x4x64xf16>", ("tensor<1x4x32xf16>", "tensor<1x4x32xf16>"))
    assert not applies(text_graph(*inner, props="split_dim = 2 : i64, num_split = 2 : i64"))


def test_c_to_n_nc1hwc0_with_aligned_c() -> None:
    assert applies(text_graph(*nc1hwc0(64, (32, 32))))


def test_c_to_n_nc1hwc0_with_unaligned_c_is_a_near_miss() -> None:
    """C = 24 in float16: the second output would start inside a padded C0 block."""
    assert not applies(text_graph(*nc1hwc0(24, (12, 12)), props="split_dim = 1 : i64, num_split = 2 : i64"))


@pytest.mark.parametrize(("dtype", "c0", "c", "ok"), [("i8", 32, 64, True), ("i8", 32, 48, False), ("i4", 64, 128, True), ("i4", 64, 96, False)])
def test_c0_alignment_depends_on_the_dtype(dtype: str, c0: int, c: int, ok: bool) -> None:
    x, outs = nc1hwc0(c, (c // 2, c // 2), dtype, c0)
    text = text_graph(x, outs).replace("ascend_graph.relu %0", "ascend_graph.abs %0").replace(
        '%4 = ascend_graph.relu', '%4 = ascend_graph.abs').replace('%5 = ascend_graph.relu', '%5 = ascend_graph.abs')
    assert applies(text) is ok


def test_c_to_n_nc1hwc0_needs_n_of_one() -> None:
    x, outs = nc1hwc0(64, (32, 32))
    x2, outs2 = (t.replace("tensor<1x", "tensor<2x").replace("array<i64: 1,", "array<i64: 2,") for t in (x, outs[0]))
    assert not applies(text_graph(x2, (outs2, outs2)))


def test_c_to_n_nz_needs_origin_rank_four() -> None:
    assert applies(text_graph(*nz([1, 4, 32, 32], 1)))
    assert not applies(text_graph(*nz([1, 64, 32], 1)))


def test_two_d_nz_swaps_the_axes() -> None:
    """[32, 64] in NZ is stored [4, 2, 16, 16]: columns outermost, so axis 1 is split_n."""
    cols, rows = nz([32, 64], 1), nz([32, 64], 0)
    assert applies(text_graph(*cols))
    assert not applies(text_graph(*rows, props="split_dim = 0 : i64, num_split = 2 : i64"))


# ---------------------------------------------------------- general conditions


def test_dynamic_shapes_are_excluded() -> None:
    assert not applies(text_graph("tensor<?x64xf16>", ("tensor<?x32xf16>", "tensor<?x32xf16>")))


@pytest.mark.parametrize(("attr", "ok"), [
    ("_input_memory_type = array<i64: 65536>", False),
    ("_output_memory_type = [0 : i64, 131072 : i64]", False),
    ("_output_memory_type = array<i64: 0, 0>", True),
])
def test_l1_and_l2_memory_types_are_excluded(attr: str, ok: bool) -> None:
    assert applies(text_graph(*ND, split_attrs=f", {attr}")) is ok


def test_producer_const_is_excluded() -> None:
    b = GraphBuilder(0)
    s = b.op(SplitOp, [b.random_weight((4, 6))], split_dim=0, num_split=2)
    b.op(ReluOp, [s.results[0]])
    b.op(ReluOp, [s.results[1]])
    assert marked(run_pass(b.finish(), PASS)) == [False]


def _reshaped(feed_from_data: bool) -> list[bool]:
    b = GraphBuilder(0)
    x = b.input([4, 6])
    src = x if feed_from_data else b.op(ReluOp, [x])
    s = b.op(SplitOp, [b.op(ReshapeOp, [src], shape=(6, 4))], split_dim=0, num_split=2)
    b.op(ReluOp, [s.results[0]])
    b.op(ReluOp, [s.results[1]])
    return marked(run_pass(b.finish(), PASS))


def test_reshape_after_data_is_excluded_but_after_an_op_is_not() -> None:
    assert _reshaped(feed_from_data=True) == [False]
    assert _reshaped(feed_from_data=False) == [True]


def test_trans_data_after_data_is_excluded() -> None:
    x, outs = nc1hwc0(64, (32, 32))
    producer = f'%1 = ascend_graph.trans_data %0 {{src_format = "NCHW", dst_format = "NC1HWC0"}} : (tensor<1x64x4x4xf16>) -> {x}'
    text = text_graph(x, outs, producer=producer).replace(f": {x}\n", ": tensor<1x64x4x4xf16>\n", 1)
    assert not applies(text)


@pytest.mark.parametrize(("attr", "ok"), [
    ("_no_task = true", False),
    ("atomic_output_index = [0 : i64]", False),
    ("atomic_output_index = []", True),
])
def test_producer_marks(attr: str, ok: bool) -> None:
    producer = f"%1 = ascend_graph.relu %0 {{{attr}}} : (tensor<1x64xf16>) -> tensor<1x64xf16>"
    assert applies(text_graph(*ND, producer=producer)) is ok


@pytest.mark.parametrize(("attr", "ok"), [
    ("", True),
    (", _no_task = true", False),
    (", imply_type = 1 : i64", True),
    (", imply_type = 2 : i64", False),
    (', _fusion_virtual_op = "concat"', False),
    (', _fusion_virtual_op = ""', True),
    (", continuous_input = true", False),
    (", continuous_input = false", True),
    (", atomic_output_index = array<i64: 0>", False),
])
def test_consumer_marks(attr: str, ok: bool) -> None:
    assert applies(text_graph(*ND, consumer_attrs=attr)) is ok


def test_net_output_consumer_is_excluded() -> None:
    b = GraphBuilder(0)
    s = b.op(SplitOp, [b.op(ReluOp, [b.input([4, 6])])], split_dim=0, num_split=2)
    b.op(ReluOp, [s.results[0]])
    assert marked(run_pass(b.finish(), PASS)) == [False]  # result 1 goes straight to net_output


def test_hcom_consumer_is_excluded() -> None:
    b = GraphBuilder(0)
    s = b.op(SplitOp, [b.op(ReluOp, [b.input([4, 6])])], split_dim=0, num_split=2)
    b.op(HcomAllReduceOp, [s.results[0]])
    b.op(ReluOp, [s.results[1]])
    assert marked(run_pass(b.finish(), PASS)) == [False]


def test_split_feeding_a_split() -> None:
    """The outer split has a Split consumer; the inner one then qualifies."""
    b = GraphBuilder(0)
    outer = b.op(SplitOp, [b.op(ReluOp, [b.input([8, 6])])], split_dim=0, num_split=2)
    inner = b.op(SplitOp, [outer.results[0]], split_dim=0, num_split=2)
    for v in (*inner.results, outer.results[1]):
        b.op(ReluOp, [v])
    assert marked(run_pass(b.finish(), PASS)) == [False, True]


# ------------------------------------------------------------------ property


def split_site(g: GraphState) -> None:
    """A split of a picked value (or of its Relu) along an even axis, each part
    consumed by a Tanh or left as a graph output."""
    x = g.pick(where=lambda v: any(d % 2 == 0 for d in g.shape_of(v))) or g.input([4, 3])
    src = g.op(ReluOp, [x]).y if g.flag() else x
    rank = len(g.shape_of(src))
    axis = g.choice([a for a, d in enumerate(g.shape_of(src)) if d % 2 == 0])
    parts = g.op(SplitOp, [src], split_dim=axis - rank if g.flag() else axis, num_split=2)
    for r in parts.results:
        if g.integer(0, 3):
            g.op(TanhOp, [r])


@settings(max_examples=80)
@given(graphs(dtypes=(f32, f16), ops=("split", "unary", "binary", "reshape"), max_ops=5, with_pattern=[split_site, split_site]))
def test_marks_only_qualifying_splits_and_keeps_values(case) -> None:
    after = run_pass(case, PASS)
    event(f"no-task splits: {sum(marked(after))}")
    for op in after.walk():
        if isinstance(op, SplitBase):
            assert is_no_task(op) == qualifies(op)
            if is_no_task(op):
                assert all(op.attributes[k] == v for k, v in MARKS.items())
                assert not any(isinstance(u.operation, SplitBase) for r in op.results for u in r.uses)
    inputs = case.inputs(0)
    want = reference.run(case.module, inputs, case.store)
    got = reference.run(after, inputs, case.store)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
