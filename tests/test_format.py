"""Device formats: the physical-shape mapping, TransData, format selection and
TransdataTransdataPass.

Values stay logical everywhere in the reference interpreter, so every graph must
compute bitwise what it computed before format selection; the checks here are
about where the formats go and how many TransData it takes.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import BFloat16Type, IntegerType, StringAttr, TensorType, f16, f32, i8
from xdsl.utils.exceptions import VerifyException

from dialects import ascend_graph as ag
from dialects import formats
from dialects.shapes import ShapeError
from ge.core import reference
from ge.core.ir import parse, to_text
from ge.testing import GraphBuilder, assert_equivalent, count_ops, graphs, run_pass
from ge.core.weights import store_of
from passes.fusion import FUSION_PASSES, FusionKind, collect_statistics

NUMPY = {f16: np.float16, f32: np.float32, i8: np.int8}


def conv(b: GraphBuilder, x, cout: int, k: int = 1) -> ag.Conv2DOp:
    cin = ag.shape_of(x.type)[1]
    w = b.random_weight([cout, cin, k, k])
    return b.op(ag.Conv2DOp, [x, w], strides=[1, 1, 1, 1], pads=[k // 2] * 4, dilations=[1, 1, 1, 1], groups=1)


def formats_of(module, cls) -> list[str | None]:
    return [ag.format_of(op.results[0].type) for op in module.walk() if isinstance(op, cls)]


# ---------------------------------------------------------------- the mapping


@pytest.mark.parametrize(
    ("fmt", "origin", "shape", "dtype", "physical"),
    [
        ("NC1HWC0", "NCHW", (2, 19, 3, 5), f16, (2, 2, 3, 5, 16)),
        ("NC1HWC0", "NCHW", (1, 40, 2, 2), i8, (1, 2, 2, 2, 32)),
        ("NC1HWC0", "NCHW", (1, 20, 2, 2), f32, (1, 3, 2, 2, 8)),
        ("FRACTAL_Z", "NCHW", (20, 19, 3, 3), f16, (18, 2, 16, 16)),
        ("FRACTAL_NZ", "ND", (3, 17, 40), f32, (3, 5, 2, 16, 8)),
        ("FRACTAL_NZ", "ND", (40,), f16, (3, 1, 16, 16)),
        ("ND", "ND", (3, 4), f16, (3, 4)),
    ],
)
def test_physical_shapes(fmt, origin, shape, dtype, physical) -> None:
    assert formats.physical_shape(fmt, origin, shape, dtype) == physical


def test_c0_is_32_bytes_of_the_dtype() -> None:
    assert [formats.c0(t) for t in (f16, BFloat16Type(), f32, i8, IntegerType(4))] == [16, 16, 8, 32, 64]


@pytest.mark.parametrize(
    ("fmt", "origin", "shape"), [("NC1HWC0", "ND", (1, 2, 3, 4)), ("FRACTAL_Z", "NCHW", (2, 3)), ("ND", "NCHW", (1,))]
)
def test_impossible_mappings_are_shape_errors(fmt, origin, shape) -> None:
    with pytest.raises(ShapeError):
        formats.physical_shape(fmt, origin, shape, f16)


def test_element_positions() -> None:
    """NZ puts (r, c) at [c // C0, r // 16, r % 16, c % C0]; FRACTAL_Z puts filter
    (co, ci, h, w) at [(ci // C0) * kh * kw + h * kw + w, co // 16, co % 16, ci % C0];
    NC1HWC0 puts (n, c, h, w) at [n, c // C0, h, w, c % C0]; padding is zero."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((40, 50)).astype(np.float16)
    nz = formats.to_physical(a, "FRACTAL_NZ", "ND")
    assert nz[3 // 16, 33 // 16, 33 % 16, 3 % 16] == a[33, 3]
    w = rng.standard_normal((20, 19, 3, 3)).astype(np.float16)
    fz = formats.to_physical(w, "FRACTAL_Z", "NCHW")
    assert fz[(18 // 16) * 9 + 2 * 3 + 1, 17 // 16, 17 % 16, 18 % 16] == w[17, 18, 2, 1]
    x = rng.standard_normal((2, 19, 3, 5)).astype(np.float32)
    hd = formats.to_physical(x, "NC1HWC0", "NCHW")
    assert hd[1, 18 // 8, 2, 4, 18 % 8] == x[1, 18, 2, 4]
    assert not hd[:, 2, :, :, 3:].any()


layouts = st.sampled_from([("NC1HWC0", "NCHW", 4), ("FRACTAL_Z", "NCHW", 4), ("FRACTAL_NZ", "ND", None)])


@settings(max_examples=60)
@given(layout=layouts, dtype=st.sampled_from([f16, f32, i8]), data=st.data())
def test_to_physical_and_back(layout, dtype, data) -> None:
    fmt, origin, rank = layout
    rank = rank or data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.lists(st.integers(1, 40), min_size=rank, max_size=rank)))
    array = (np.arange(np.prod(shape)) % 101).reshape(shape).astype(NUMPY[dtype])
    physical = formats.to_physical(array, fmt, origin)
    assert physical.shape == formats.physical_shape(fmt, origin, shape, dtype)
    assert np.array_equal(formats.to_logical(physical, fmt, origin, shape), array)


# ------------------------------------------------------------------ TransData


def test_trans_data_types_and_identity() -> None:
    b = GraphBuilder(dtype=f16)
    x = b.input([1, 19, 4, 4])
    to_5hd = b.op(ag.TransDataOp, [x], src_format="NCHW", dst_format="NC1HWC0")
    back = b.op(ag.TransDataOp, [to_5hd.y], src_format="NC1HWC0", dst_format="NCHW")
    case = b.finish()
    assert to_5hd.y.type == ag.device_tensor(f16, "NC1HWC0", "NCHW", (1, 19, 4, 4))
    assert tuple(to_5hd.y.type.get_shape()) == (1, 2, 4, 4, 16)
    assert back.y.type == TensorType(f16, [1, 19, 4, 4])
    feed = case.inputs()
    out = reference.run(case.module, feed)
    assert all(np.array_equal(v, feed["input_0"]) for v in out.values())
    text = to_text(case.module)
    assert to_text(parse(text)) == text


def test_trans_data_needs_its_source_format() -> None:
    b = GraphBuilder(dtype=f16)
    x = b.input([1, 19, 4, 4])
    with pytest.raises(ShapeError, match="not in src_format"):
        ag.TransDataOp([x], {"src_format": StringAttr("NC1HWC0"), "dst_format": StringAttr("NCHW")})
    with pytest.raises(ShapeError, match="maps from NCHW"):
        ag.TransDataOp([x], {"src_format": StringAttr("ND"), "dst_format": StringAttr("NC1HWC0")})


def test_verifier_rejects_a_physical_shape_off_its_format() -> None:
    layout = '#ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 19, 4, 4>>'
    text = f"""
    ascend_graph.graph @main {{
      %0 = ascend_graph.data {{index = 0 : i64, name = "x"}} : tensor<1x#C1#x4x4x16xf16, {layout}>
      ascend_graph.net_output %0 {{names = ["y"]}} : tensor<1x#C1#x4x4x16xf16, {layout}>
    }}"""
    parse(text.replace("#C1#", "2"))
    with pytest.raises(VerifyException, match="has the physical shape"):
        parse(text.replace("#C1#", "1"))


def test_reference_reads_a_device_format_weight_as_laid_out() -> None:
    b = GraphBuilder(dtype=f16)
    x = b.input([1, 3, 5, 5])
    conv(b, x, 4, 3)
    case = b.finish()
    after = run_pass(case, "format-selection{soc_version=Ascend910A}")
    (weight,) = [op for op in after.walk() if isinstance(op, ag.ConstOp) and ag.format_of(op.out.type) == "FRACTAL_Z"]
    assert store_of(after).get(weight.value).shape == tuple(weight.out.type.get_shape()) == (9, 1, 16, 16)
    assert reference.const_value(weight).shape == (4, 3, 3, 3)
    assert_equivalent(case, after, rtol=0, atol=0)


# ------------------------------------------------------------- format selection


def resnet_block(dtype=f16) -> GraphBuilder:
    """conv -> relu -> conv -> add(residual) -> relu -> conv, with a per-channel scale."""
    b = GraphBuilder(dtype=dtype)
    x = b.input([1, 8, 6, 6])
    a = b.op(ag.ReluOp, [conv(b, x, 16).y])
    c = conv(b, a.y, 16, 3)
    scaled = b.op(ag.MulOp, [c.y, b.random_weight([1, 16, 1, 1])])
    s = b.op(ag.AddOp, [scaled.y, a.y])
    r = b.op(ag.ReluOp, [s.y])
    conv(b, r.y, 8)
    return b


@pytest.mark.parametrize("soc", ["Ascend910A", "Ascend910B1"])
def test_a_residual_block_stays_in_nc1hwc0(soc) -> None:
    case = resnet_block().finish()
    after = run_pass(case, f"format-selection{{soc_version={soc}}}")
    assert count_ops(after, ag.TransDataOp) == 2  # the graph input in, the result out
    assert set(formats_of(after, ag.Conv2DOp)) == {"NC1HWC0"}
    assert set(formats_of(after, ag.ReluOp) + formats_of(after, ag.AddOp) + formats_of(after, ag.MulOp)) == {"NC1HWC0"}
    consts = [ag.format_of(op.out.type) for op in after.walk() if isinstance(op, ag.ConstOp)]
    assert sorted(consts) == ["FRACTAL_Z"] * 3 + ["NC1HWC0"]  # filters, and the per-channel scale
    graph = after.body.block.first_op
    assert ag.format_of(graph.inputs[0].out.type) is None and ag.format_of(graph.output.outputs[0].type) is None
    assert_equivalent(case, after, rtol=0, atol=0)


def test_a_cast_that_changes_c0_computes_in_nd() -> None:
    b = GraphBuilder(dtype=f16)
    x = b.input([1, 8, 4, 4])
    b.op(ag.CastOp, [conv(b, x, 16).y], dst_type=f32)
    case = b.finish()
    after = run_pass(case, "format-selection{soc_version=Ascend910A}")
    assert formats_of(after, ag.CastOp) == [None]
    assert_equivalent(case, after, rtol=0, atol=0)


def test_a_broadcast_along_channels_keeps_nd() -> None:
    b = GraphBuilder(dtype=f16)
    x = b.input([1, 8, 4, 4])
    y = conv(b, x, 16)
    b.op(ag.AddOp, [y.y, b.random_weight([1, 1, 4, 4])])  # varies over H, W: not per channel
    case = b.finish()
    after = run_pass(case, "format-selection{soc_version=Ascend910A}")
    assert formats_of(after, ag.AddOp) == [None]
    assert_equivalent(case, after, rtol=0, atol=0)


def bert_like(dtype=f16) -> GraphBuilder:
    """matmul -> bias add -> gelu -> matmul -> add(residual) -> layer norm, then softmax."""
    b = GraphBuilder(dtype=dtype)
    x = b.input([32, 16])
    h = b.op(ag.MatMulV2Op, [x, b.random_weight([16, 48])], transpose_x1=False, transpose_x2=False)
    h = b.op(ag.AddOp, [h.y, b.random_weight([48])])
    h = b.op(ag.GeluOp, [h.y], approximate="tanh")
    h = b.op(ag.MatMulV2Op, [h.y, b.random_weight([48, 16])], transpose_x1=False, transpose_x2=False)
    r = b.op(ag.AddOp, [h.y, b.op(ag.MatMulV2Op, [x, b.random_weight([16, 16])], transpose_x1=False, transpose_x2=False).y])
    n = b.op(ag.LayerNormOp, [r.y, b.random_weight([16]), b.random_weight([16])], begin_norm_axis=-1, epsilon=1e-5)
    b.op(ag.SoftmaxOp, [n.y], axes=[-1])
    return b


def test_matmuls_and_their_elementwise_tails_stay_in_fractal_nz() -> None:
    case = bert_like().finish()
    after = run_pass(case, "format-selection{soc_version=Ascend910A}")
    assert set(formats_of(after, ag.MatMulV2Op)) == {"FRACTAL_NZ"}
    assert set(formats_of(after, ag.AddOp) + formats_of(after, ag.LayerNormOp) + formats_of(after, ag.SoftmaxOp)) == {"FRACTAL_NZ"}
    assert count_ops(after, ag.TransDataOp) == 2
    assert_equivalent(case, after, rtol=0, atol=0)


def test_parts_with_a_fix_pipe_take_activations_as_they_come() -> None:
    """On the 910B1 the graph input goes into its two matmuls in ND (MTE2 converts it
    in flight), the matmuls make FRACTAL_NZ, which the tails keep and the next matmul
    takes as it is: one TransData, the output's (two on the 910A, the input's too)."""
    case = bert_like().finish()
    after = run_pass(case, "format-selection{soc_version=Ascend910B1}")
    assert set(formats_of(after, ag.MatMulV2Op)) == {"FRACTAL_NZ"}
    assert set(formats_of(after, ag.AddOp) + formats_of(after, ag.LayerNormOp) + formats_of(after, ag.SoftmaxOp)) == {"FRACTAL_NZ"}
    firsts = {ag.format_of(op.operands[0].type) for op in after.walk() if isinstance(op, ag.MatMulV2Op)}
    assert firsts == {None, "FRACTAL_NZ"}  # the graph input's two, the gelu's one
    assert count_ops(after, ag.TransDataOp) == 1
    assert_equivalent(case, after, rtol=0, atol=0)


@pytest.mark.parametrize("transposed", [False, True])
def test_parts_with_a_fix_pipe_lay_constant_weights_out_in_nz(transposed: bool) -> None:
    """The weight is laid out in NZ in the weight store; the activations go in as they
    come (the graph's input ND, the first matmul's result NZ, which a matmul uses),
    the last matmul's result, the graph's output, stays ND: no TransData is made."""
    b = GraphBuilder(dtype=f16)
    x = b.input([20, 40])
    w = b.constant(np.linspace(-1, 1, 40 * 24), [24, 40] if transposed else [40, 24])
    m = b.op(ag.MatMulV2Op, [x, w], transpose_x1=False, transpose_x2=transposed)
    b.op(ag.BatchMatMulOp, [m.y, b.input([24, 8])], adj_x1=False, adj_x2=False)
    case = b.finish()
    after = run_pass(case, "format-selection{soc_version=Ascend910B1}")
    (first,) = [op for op in after.walk() if isinstance(op, ag.MatMulV2Op)]
    assert [ag.format_of(v.type) for v in first.operands] == [None, "FRACTAL_NZ"]
    assert isinstance(first.operands[1].owner, ag.ConstOp)
    assert formats_of(after, ag.MatMulV2Op) == ["FRACTAL_NZ"] and formats_of(after, ag.BatchMatMulOp) == [None]
    (second,) = [op for op in after.walk() if isinstance(op, ag.BatchMatMulOp)]
    assert [ag.format_of(v.type) for v in second.operands] == ["FRACTAL_NZ", None]
    assert count_ops(after, ag.TransDataOp) == 0
    assert_equivalent(case, after, rtol=0, atol=0)


def test_nz_to_nc1hwc0_goes_through_the_origin_format() -> None:
    b = GraphBuilder(dtype=f16)
    x = b.input([1, 2, 4, 4])
    m = b.op(ag.BatchMatMulOp, [x, x], adj_x1=False, adj_x2=False)
    b.op(ag.GlobalAveragePoolOp, [m.y])
    case = b.finish()
    after = run_pass(case, "format-selection{soc_version=Ascend910A}")
    chain = [(op.props.str("src_format"), op.props.str("dst_format")) for op in after.walk() if isinstance(op, ag.TransDataOp)]
    assert ("FRACTAL_NZ", "ND") in chain and ("NCHW", "NC1HWC0") in chain
    assert_equivalent(case, after, rtol=0, atol=0)


@settings(max_examples=80)
@given(case=graphs(dtypes=(f32, f16), max_ops=8), soc=st.sampled_from(["Ascend910A", "Ascend910B1"]))
def test_format_selection_changes_no_value(case, soc) -> None:
    after = run_pass(case, f"format-selection{{soc_version={soc}}}")
    assert_equivalent(case, after, rtol=0, atol=0)
    text = to_text(after)
    assert to_text(parse(text)) == text


# ----------------------------------------------------------- TransData elimination


def test_transdata_pairs_cancel_and_chains_shorten() -> None:
    b = GraphBuilder(dtype=f16)
    x = b.input([1, 19, 4, 4])
    there = b.op(ag.TransDataOp, [x], src_format="NCHW", dst_format="NC1HWC0")
    back = b.op(ag.TransDataOp, [there.y], src_format="NC1HWC0", dst_format="NCHW")
    b.op(ag.ReluOp, [back.y])
    w = b.random_weight([4, 19, 1, 1])
    fz = b.op(ag.TransDataOp, [w], src_format="NCHW", dst_format="FRACTAL_Z")
    b.op(ag.TransDataOp, [fz.y], src_format="FRACTAL_Z", dst_format="NC1HWC0")
    case = b.finish()
    with collect_statistics() as stats:
        after = run_pass(case, "TransdataTransdataPass")
    kept = [(op.props.str("src_format"), op.props.str("dst_format")) for op in after.walk() if isinstance(op, ag.TransDataOp)]
    assert kept == [("NCHW", "NC1HWC0")]  # the pair is gone, the chain is one; the rest is dead
    assert stats.get("TransdataTransdataPass").effect_times == 2
    assert FUSION_PASSES["TransdataTransdataPass"].kind is FusionKind.GRAPH
    assert_equivalent(case, after, rtol=0, atol=0)


def test_pipeline_selects_formats_after_precision() -> None:
    from ge import pipeline
    from ge.core.options import CompileOptions

    case = resnet_block(f32).finish()
    module = case.module.clone()
    result = pipeline.optimize(module, CompileOptions(soc_version="Ascend910A", export_compile_stat=0))
    assert "AfterFormat" in pipeline.PHASES
    assert list(result.timings).index("format selection") == list(result.timings).index("precision selection") + 1
    assert set(formats_of(module, ag.Conv2DOp)) == {"NC1HWC0"}
    assert_equivalent(case, module, rtol=2e-2)


def test_bfloat16_and_int8_weights_convert_exactly() -> None:
    for dtype in (np.dtype(ml_dtypes.bfloat16), np.dtype(np.int8)):
        w = (np.arange(2 * 20 * 3 * 3) % 7 - 3).reshape(2, 20, 3, 3).astype(dtype)
        back = formats.to_logical(formats.to_physical(w, "FRACTAL_Z", "NCHW"), "FRACTAL_Z", "NCHW", w.shape)
        assert back.dtype == dtype and np.array_equal(back, w)
