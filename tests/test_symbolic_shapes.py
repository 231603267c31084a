"""Symbolic dims at import (`ge.frontend.symbolic`): the expression arithmetic, the
Shape -> Gather -> Concat -> Reshape chains of transformer exports on hand-built graphs
at two opsets, equal symbols, what cannot be proven (a `?`, never a wrong size), the
binding of input shapes, and the refusals that remain."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
from dialects import ascend_graph as ag
from dialects.shapes import DYN
from ge.core.errors import ModelError
from ge.frontend.symbolic import Expr, FloorDiv, shapes_of

OPSETS = (11, 17)
"""Unsqueeze takes its axes as an attribute at 11 and as an input from 13 on."""

B, S = Expr.symbol("batch"), Expr.symbol("seq")


def const(name: str, value: object) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], name=name, value=numpy_helper.from_array(np.array(value, np.int64)))


def unsqueeze(x: str, out: str, opset: int) -> list[onnx.NodeProto]:
    """`x` (a scalar) as a 1-element vector, as each opset spells Unsqueeze."""
    if opset < 13:
        return [helper.make_node("Unsqueeze", [x], [out], name=out, axes=[0])]
    return [const(out + "_axes", [0]), helper.make_node("Unsqueeze", [x, out + "_axes"], [out], name=out)]


def model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[str], opset: int) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_empty_tensor_value_info(o) for o in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def heads_model(opset: int) -> onnx.ModelProto:
    """x [batch, seq, 768] -> [batch, seq, 12, 64] with the target from Shape -> Gather
    (scalars) -> Unsqueeze -> Concat, then transposed and merged back with Mul ->
    Concat([batch*seq, -1]), as the TorchScript exporter writes BERT's attention."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        const("i0", 0), const("i1", 1), const("heads", [12, 64]), const("minus1", [-1]),
        helper.make_node("Gather", ["s", "i0"], ["b"], name="batch", axis=0),
        helper.make_node("Gather", ["s", "i1"], ["q"], name="seq", axis=0),
        *unsqueeze("b", "b1", opset), *unsqueeze("q", "q1", opset),
        helper.make_node("Concat", ["b1", "q1", "heads"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["split"], name="split_heads"),
        helper.make_node("Transpose", ["split"], ["t"], name="transpose", perm=[0, 2, 1, 3]),
        helper.make_node("Mul", ["b", "q"], ["bq"], name="tokens"),
        *unsqueeze("bq", "bq1", opset),
        helper.make_node("Concat", ["bq1", "minus1"], ["flat"], name="flat", axis=0),
        helper.make_node("Reshape", ["t", "flat"], ["y"], name="merge"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 768])
    return model(nodes, [x], ["y"], opset)


def op(module, label: str) -> ag.AscendOp:
    return next(o for o in module.walk() if isinstance(o, ag.AscendOp) and o.label == label)


def dims(value) -> tuple[int, ...]:
    return tuple(value.type.get_shape())


# ------------------------------------------------------------------ expressions


def test_expressions_are_normalised_so_that_equal_ones_compare_equal() -> None:
    assert (B + S) * Expr.const(2) == S * Expr.const(2) + B + B
    assert B * S - S * B == Expr.const(0)
    assert (B * S * Expr.const(768)).floordiv(B * Expr.const(12)) == S * Expr.const(64)
    assert (S * Expr.const(12)).floordiv(Expr.const(4)) == S * Expr.const(3)
    assert str(B * S + Expr.const(-1)) in ("-1 + batch*seq", "batch*seq - 1")
    assert (B + S).evaluate({"batch": 2, "seq": 7}) == 9


def test_a_floordiv_that_does_not_divide_is_an_atom_and_evaluates_as_floor() -> None:
    half = (S + Expr.const(1)).floordiv(Expr.const(2))
    assert half is not None and half.constant is None
    assert any(isinstance(atom, FloorDiv) for monomial, _ in half.terms for atom in monomial)
    assert [half.evaluate({"seq": s}) for s in (1, 2, 5)] == [1, 1, 3]


def test_what_cannot_be_told_is_none() -> None:
    assert (B + S).floordiv(S) is None  # not a monomial's multiple
    assert B.floordiv(B + S) is None
    assert S.floordiv(Expr.const(0)) is None


def test_sizes_are_at_least_one() -> None:
    assert (B * S).positive and not (B - S).positive
    assert Expr.const(0).constant == 0 and B.constant is None


# ------------------------------------------------------------------ import


@pytest.mark.parametrize("opset", OPSETS)
def test_a_reshape_to_a_shape_chain_keeps_the_proven_dims(opset: int) -> None:
    module, _ = ge.load_onnx(heads_model(opset))
    split = op(module, "split_heads")
    assert isinstance(split, ag.DynamicReshapeOp)  # two dims are known at run time only
    assert dims(split.results[0]) == (DYN, DYN, 12, 64)
    merge = op(module, "merge")
    assert isinstance(merge, ag.ReshapeOp)  # one unknown dim: a static Reshape with a -1
    assert dims(merge.results[0]) == (DYN, 768)
    table = shapes_of(module)
    assert table is not None
    assert table.dims["split"] == (B, S, Expr.const(12), Expr.const(64))
    assert table.dims["y"] == (B * S, Expr.const(768))


@pytest.mark.parametrize("opset", OPSETS)
def test_the_reference_runs_the_symbolic_import_at_any_shape(opset: int) -> None:
    module, _ = ge.load_onnx(heads_model(opset))
    for shape in ((1, 3, 768), (2, 5, 768)):
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        want = x.reshape(shape[0], shape[1], 12, 64).transpose(0, 2, 1, 3).reshape(-1, 768)
        np.testing.assert_array_equal(ge.reference.run(module, {"x": x})["y"], want)


@pytest.mark.parametrize("opset", OPSETS)
def test_pinned_dims_fold_every_chain_to_constants(opset: int) -> None:
    module, _ = ge.load_onnx(heads_model(opset), input_shape="x:2,5,768")
    ops = [o for o in module.walk() if isinstance(o, ag.AscendOp)]
    assert not any(isinstance(o, (ag.ShapeOp, ag.DynamicReshapeOp, ag.ConcatOp, ag.GatherOp)) for o in ops)
    assert dims(op(module, "split_heads").results[0]) == (2, 5, 12, 64)
    assert dims(op(module, "merge").results[0]) == (10, 768)


def test_binding_the_inputs_resolves_every_shape() -> None:
    module, _ = ge.load_onnx(heads_model(17))
    table = shapes_of(module)
    assert table is not None
    assert {s: (o.input, o.dim) for s, o in table.inputs.items()} == {"batch": ("x", 0), "seq": ("x", 1)}
    shapes = table.resolve({"x": (3, 4, 768)})
    assert shapes["split"] == (3, 4, 12, 64) and shapes["t"] == (3, 12, 4, 64) and shapes["y"] == (12, 768)
    assert table.of_value(op(module, "split_heads").results[0]) == table.dims["split"]
    with pytest.raises(ModelError, match=r"the shape of input 'x' is needed: its dim 0 is 'batch'"):
        table.resolve({})
    with pytest.raises(ModelError, match=r"input 'x' has dim 2 of 512, but the model needs 768 = 768 there"):
        table.resolve({"x": (1, 2, 512)})


def test_unnamed_and_minus_one_dims_get_symbols_of_their_own() -> None:
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"), helper.make_node("Reshape", ["x", "s"], ["y"], name="same")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4, None])
    module, _ = ge.load_onnx(model(nodes, [x], ["y"], 17))
    table = shapes_of(module)
    assert table is not None and set(table.inputs) == {"x.0", "x.2"}
    assert dims(op(module, "same").results[0]) == (DYN, 4, DYN)
    module, _ = ge.load_onnx(model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 6])], ["y"], 17), input_shape="x:-1,4,6")
    table = shapes_of(module)
    assert table is not None and set(table.inputs) == {"x.0"}
    assert table.resolve({"x": (5, 4, 6)})["y"] == (5, 4, 6)


def test_dims_of_the_same_dim_param_are_one_symbol() -> None:
    """A reshape of `a` to the Shape of `b` with the same dim_params is proven the same
    shape, and binding the two inputs to different sizes is refused."""
    nodes = [
        helper.make_node("Shape", ["b"], ["s"], name="shape_b"),
        helper.make_node("Reshape", ["a", "s"], ["r"], name="as_b"),
        helper.make_node("Add", ["r", "b"], ["y"], name="sum"),
    ]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", "seq", 8]) for n in "ab"]
    module, _ = ge.load_onnx(model(nodes, inputs, ["y"], 17))
    table = shapes_of(module)
    assert table is not None
    assert table.dims["r"] == table.dims["a"] == table.dims["y"] == (B, S, Expr.const(8))
    assert dims(op(module, "as_b").results[0]) == (DYN, DYN, 8)
    with pytest.raises(ModelError, match=r"input 'b' has dim 1 of 4, but the model needs seq = 3 there"):
        table.resolve({"a": (2, 3, 8), "b": (2, 4, 8)})


def test_a_chain_that_cannot_be_proven_is_dynamic_not_a_wrong_size() -> None:
    """Max(batch, seq) has no rule: its reshape keeps that dim and the -1 unknown, and
    the reference still computes the right result."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        const("i0", [0]), const("i1", [1]), const("minus1", [-1]),
        helper.make_node("Gather", ["s", "i0"], ["b"], name="b", axis=0),
        helper.make_node("Gather", ["s", "i1"], ["q"], name="q", axis=0),
        helper.make_node("Max", ["b", "q"], ["m"], name="max"),
        helper.make_node("Concat", ["m", "minus1"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"], name="unknown"),
    ]
    module, _ = ge.load_onnx(model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 6])], ["y"], 17))
    reshape = op(module, "unknown")
    assert isinstance(reshape, ag.DynamicReshapeOp) and dims(reshape.results[0]) == (DYN, DYN)
    table = shapes_of(module)
    assert table is not None and all(d.constant is None for d in table.dims["y"])
    assert "y" not in table.resolve({"x": (2, 3, 6)})  # only running the graph tells
    x = np.arange(36, dtype=np.float32).reshape(2, 3, 6)
    assert ge.reference.run(module, {"x": x})["y"].shape == (3, 12)


def where_trick(expanded: onnx.ValueInfoProto, prepare: list[onnx.NodeProto], x: str) -> onnx.ModelProto:
    """torch's exporter spells `expand(batch, 1, seq, seq)` as Where(Equal(shape, -1), 1,
    shape), the sizes read from the mask [batch, seq]."""
    nodes = [
        helper.make_node("Shape", ["mask"], ["s"], name="shape"),
        const("i0", [0]), const("i1", [1]), const("one", [1]), const("minus1", [-1, -1, -1, -1]), const("ones", [1, 1, 1, 1]),
        helper.make_node("Gather", ["s", "i0"], ["b"], name="b", axis=0),
        helper.make_node("Gather", ["s", "i1"], ["q"], name="q", axis=0),
        helper.make_node("Concat", ["b", "one", "q", "q"], ["target"], name="target", axis=0),
        helper.make_node("Equal", ["target", "minus1"], ["is_minus1"], name="equal"),
        helper.make_node("Where", ["is_minus1", "ones", "target"], ["sizes"], name="where"),
        *prepare,
        helper.make_node("Expand", [x, "sizes"], ["y"], name="expand"),
    ]
    mask = helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "seq"])
    return model(nodes, [mask, expanded], ["y"], 17)


def test_the_torch_equal_where_trick_is_resolved_for_expand() -> None:
    """Every Equal is decided (a size is never -1), and the Expand of a tensor that has
    the target's dims already keeps them."""
    scores = helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 1, "seq", "seq"])
    module, _ = ge.load_onnx(where_trick(scores, [], "scores"))
    table = shapes_of(module)
    assert table is not None and table.values["sizes"] == (B, Expr.const(1), S, S)
    expand = op(module, "expand")
    assert isinstance(expand, ag.ExpandOp) and dims(expand.results[0]) == (DYN, 1, DYN, DYN)
    scores_in = np.random.default_rng(1).standard_normal((2, 1, 3, 3)).astype(np.float32)
    got = ge.reference.run(module, {"mask": np.ones((2, 3), np.float32), "scores": scores_in})["y"]
    np.testing.assert_array_equal(got, scores_in)


def test_an_expand_that_grows_a_dim_to_a_symbol_reads_the_sizes_at_run_time() -> None:
    """The mask [batch, 1, 1, seq] expanded to [batch, 1, seq, seq] (torch's attention
    mask): a BroadcastTo whose type keeps what the symbols prove."""
    axes = const("axes", [1, 2])
    grow = helper.make_node("Unsqueeze", ["mask", "axes"], ["m4"], name="m4")
    unused = helper.make_tensor_value_info("unused", TensorProto.FLOAT, [1])
    module, _ = ge.load_onnx(where_trick(unused, [axes, grow], "m4"))
    expand = op(module, "expand")
    assert isinstance(expand, ag.BroadcastToOp) and dims(expand.results[0]) == (DYN, 1, DYN, DYN)
    table = shapes_of(module)
    assert table is not None and table.dims["y"] == (B, Expr.const(1), S, S)
    mask = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    got = ge.reference.run(module, {"mask": mask, "unused": np.zeros(1, np.float32)})["y"]
    np.testing.assert_array_equal(got, np.broadcast_to(mask[:, None, None, :], (2, 1, 3, 3)))


def test_an_expand_to_the_inputs_own_dims_imports_dynamic() -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        const("four", [4]),
        helper.make_node("Concat", ["four", "s"], ["target"], name="target", axis=0),
        helper.make_node("Expand", ["x", "target"], ["y"], name="expand"),
    ]
    module, _ = ge.load_onnx(model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])], ["y"], 17))
    expand = op(module, "expand")
    assert isinstance(expand, ag.ExpandOp) and dims(expand.results[0]) == (4, DYN, 3)
    x = np.ones((2, 3), np.float32)
    assert ge.reference.run(module, {"x": x})["y"].shape == (4, 2, 3)


def positions_model(extra: list[onnx.NodeProto], output: str) -> onnx.ModelProto:
    """Position ids sliced from a [1, 512] table to the sequence length, as both of torch's
    exporters write BERT's embeddings, then `extra`."""
    table = numpy_helper.from_array(np.arange(512, dtype=np.int64).reshape(1, 512) * 3, "positions")
    nodes = [
        helper.make_node("Shape", ["ids"], ["s"], name="shape", start=1, end=2),
        const("zero", [0]), const("axis", [1]),
        helper.make_node("Slice", ["positions", "zero", "s", "axis"], ["p"], name="positions_slice"),
        *extra,
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, "sequence"])],
                              [helper.make_empty_tensor_value_info(output)], [table])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_slice_to_a_dynamic_dim_reads_its_ends_at_run_time() -> None:
    module, _ = ge.load_onnx(positions_model([], "p"))
    sliced = op(module, "positions_slice")
    assert isinstance(sliced, ag.StridedSliceV2Op) and dims(sliced.results[0]) == (1, DYN)
    got = ge.reference.run(module, {"ids": np.zeros((1, 7), np.int64)})["p"]
    np.testing.assert_array_equal(got, np.arange(7).reshape(1, 7) * 3)
    pinned, _ = ge.load_onnx(positions_model([], "p"), input_shape="ids:1,7")
    assert isinstance(op(pinned, "positions_slice"), ag.ConstOp)  # folded: a static slice of a constant
    assert dims(op(pinned, "positions_slice").results[0]) == (1, 7)


def test_a_range_to_a_dynamic_dim_reads_its_limit_at_run_time() -> None:
    range_ = [
        const("zero_", 0), const("step", 1),
        helper.make_node("Squeeze", ["s"], ["limit"], name="limit"),
        helper.make_node("Range", ["zero_", "limit", "step"], ["r"], name="arange"),
    ]
    module, _ = ge.load_onnx(positions_model(range_, "r"))
    assert isinstance(op(module, "arange"), ag.RangeOp)
    table = shapes_of(module)
    assert table is not None and table.dims["r"] == (Expr.symbol("sequence"),)
    np.testing.assert_array_equal(ge.reference.run(module, {"ids": np.zeros((1, 5), np.int64)})["r"], np.arange(5))


def test_a_constant_of_a_dynamic_shape_is_refused_naming_the_dims_and_the_options() -> None:
    """ConstantOfShape of the input's own dims has no op here: the refusal names the
    dims the symbols give and how to pin them."""
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["z"], name="zeros")]
    with pytest.raises(ModelError, match=r"node 'zeros' \(ConstantOfShape\): input 0 \(shape, 's'\) is \[sequence\], computed from the model's dynamic dims, and must be a constant here; pin those dims with --input_shape"):
        ge.load_onnx(positions_model(nodes, "z"))
    module, _ = ge.load_onnx(positions_model(nodes, "z"), input_shape="ids:1,4")
    assert dims(op(module, "zeros").results[0]) == (4,)


@pytest.mark.parametrize("opset", (15, 18))
def test_the_parts_of_a_split_keep_the_other_dims(opset: int) -> None:
    """GPT-2's fused QKV projection [batch, seq, 3*128] split in three, each part then
    split into heads: every part keeps batch and seq, so the heads' reshape is proven."""
    sizes = const("sizes", [128, 128, 128])
    split = helper.make_node("Split", ["x", "sizes"], ["q", "k", "v"], name="qkv", axis=2)
    if opset >= 18:
        split = helper.make_node("Split", ["x"], ["q", "k", "v"], name="qkv", axis=2, num_outputs=3)
    nodes = [
        sizes, split,
        helper.make_node("Shape", ["v"], ["s"], name="shape", start=0, end=2),
        const("heads", [4, 32]),
        helper.make_node("Concat", ["s", "heads"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["v", "target"], ["y"], name="v_heads"),
    ]
    module, _ = ge.load_onnx(model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 384])], ["y"], opset))
    table = shapes_of(module)
    assert table is not None and table.dims["q"] == table.dims["v"] == (B, S, Expr.const(128))
    assert dims(op(module, "v_heads").results[0]) == (DYN, DYN, 4, 32)
    assert set(table.symbols) == {"batch", "seq"}
