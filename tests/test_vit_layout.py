"""AttentionLayoutFusionPass: ViT's sequence-first attention run batch-first.

`sequence_first_attention` draws the fused form MultiHeadAttentionFusionPass leaves
of torch.nn.MultiheadAttention(batch_first=True): x [N, L, E], Transpose(1,0,2), the
attention in SBH, and (or not) the out-projection's row-wise ops up to a
Transpose(1,0,2) or ConfusionTransposeD back to [N, L, C]; near misses: the first
Transpose read by another op, an op in the chain that is not row-wise, a Reshape
mixing the last dim, a chain value with another user. `unit_axes_transpose` draws
transposes that move only size-1 axes, and ones that move data. The slow tests run
every graph fusion on the real ViT-B/16 at batch 1 and 2 and compare with onnxruntime.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdsl.dialects.builtin import FloatAttr, f16, f32, f64
from xdsl.ir import Operation, SSAValue

import ge
from dialects.ascend_graph import (
    AddOp,
    BatchMatMulOp,
    ConfusionTransposeOp,
    MatMulV2Op,
    MultiHeadAttentionOp,
    ReshapeOp,
    TransposeOp,
)
from ge.core import ir
from ge.testing import (
    GraphBuilder,
    GraphCase,
    GraphState,
    Pattern,
    alive,
    assert_equivalent,
    count_ops,
    fuse,
    graphs,
    second_user,
    site_ops,
)
from passes.attention_layout import SWAP, AttentionLayoutFusionPass
from passes.fusion import (
    Band,
    FusionKind,
    builtin_fusion_passes,
    collect_statistics,
    ordered,
)
from passes.registry import get_pass

SURROUNDING_OPS = ("unary", "binary", "reshape", "layer_norm")
"""Random ops around the sites (no Transpose: a random swap could end a near miss's chain)."""

NEAR_MISSES = ("second_user", "not_row_wise", "mixing_reshape", "chain_second_user")


# ------------------------------------------------------------------ drawn blocks


def sequence_first_attention(*, variants: tuple[str, ...] = ("chain", "bare", *NEAR_MISSES)) -> Pattern:
    """x [N, L, E] -> Transpose(1,0,2) -> MultiHeadAttention SBH -> (out-projection rows
    -> a swap back to [N, L, C]). The chain: Reshape to [L*N, E], MatMulV2, Reshape
    to [L, N, C] (or all three as one BatchMatMulV2 on [L, N, E]), a bias Add, and a
    Transpose(1,0,2), or a ConfusionTransposeD in place of the last Reshape and it."""

    def build(g: GraphState) -> None:
        variant = g.choice(variants)
        low = 2 if variant in ("not_row_wise", "mixing_reshape") else 1  # at batch 1 they are row-wise
        batch, seq, heads, width = g.integer(low, 3), g.integer(1, 4), g.integer(1, 2), g.integer(1, 3)
        emb, columns = heads * width, g.integer(1, 4)
        with g.site("sequence_first_attention", variant):
            x = g.input((batch, seq, emb))
            dt = g.dtype_of(x)
            s = 1 / math.sqrt(emb)
            swap = g.op(TransposeOp, [x], perm=list(SWAP))
            operands = [swap.y] * 3 + [g.random_weight((emb, emb), low=-s, high=s, dtype=dt) for _ in range(3)]
            if g.flag():
                operands += [g.random_weight((emb,), low=-0.5, high=0.5, dtype=dt) for _ in range(3)]
            if g.flag():
                mask_shape = g.choice([(batch, 1, 1, seq), (seq, seq)])
                operands.append(g.random_weight(mask_shape, low=-2.0, high=0.0, dtype=dt))
            props = {"head_num": heads, "scale": FloatAttr(width**-0.5, f64), "input_layout": "SBH"}
            value = g.op(MultiHeadAttentionOp, operands, **props).y
            if variant == "second_user":
                second_user(g, swap.y)
            if variant != "bare":
                _out_projection(g, value, variant, (seq, batch, emb, columns))

    return build


def _out_projection(g: GraphState, value: SSAValue, variant: str, dims: tuple[int, int, int, int]) -> None:
    """The rows of `value` [L, N, E] projected to C columns and swapped back to [N, L, C]."""
    seq, batch, emb, columns = dims
    dt = g.dtype_of(value)
    weight_shape = g.choice([(emb, columns), (columns, emb)])
    weight = g.random_weight(weight_shape, low=-1.0, high=1.0, dtype=dt)
    transposed = weight_shape != (emb, columns) or (emb == columns and g.flag())
    bias = [g.random_weight(g.choice([(columns,), (1,)]), dtype=dt)] if g.flag() else []
    merged = g.flag()
    if merged:
        rows = g.op(ReshapeOp, [value], shape=[seq * batch, emb])
        value = g.op(MatMulV2Op, [rows, weight, *bias], transpose_x1=False, transpose_x2=transposed).y
    else:
        value = g.op(BatchMatMulOp, [value, weight, *bias], adj_x1=False, adj_x2=transposed).y
    if variant == "chain_second_user":
        second_user(g, value)
    if g.flag():
        added = g.random_weight(g.choice([(columns,), (1, columns)]), dtype=dt)
        value = g.op(AddOp, [value, added] if g.flag() else [added, value]).y
    if variant == "not_row_wise":  # a different addend per row: the rows' order matters
        value = g.op(AddOp, [value, g.random_weight(g.shape_of(value), dtype=dt)]).y
    if variant == "mixing_reshape" and merged:
        value = g.op(ReshapeOp, [value], shape=[seq, batch * columns]).y
    if merged and g.flag():
        g.op(ConfusionTransposeOp, [value], perm=list(SWAP), shape=[seq, batch, columns], transpose_first=False)
        return
    if merged:
        value = g.op(ReshapeOp, [value], shape=[seq, batch, columns]).y
    if variant == "mixing_reshape" and not merged:
        value = g.op(ReshapeOp, [g.op(ReshapeOp, [value], shape=[seq, batch * columns])], shape=[seq, batch, columns]).y
    g.op(TransposeOp, [value], perm=list(SWAP))


def _site_ops(case: GraphCase, variant: str, cls: type[Operation]) -> list[Operation]:
    return [
        op for site in case.sites_of("sequence_first_attention") if site.variant == variant
        for op in site.ops if isinstance(op, cls)
    ]  # fmt: skip


def _layouts(case: GraphCase) -> list[str]:
    return sorted(op.props.str("input_layout") for op in case.module.walk() if isinstance(op, MultiHeadAttentionOp))


@given(graphs(dtypes=(f32, f16), ops=SURROUNDING_OPS, max_ops=3, with_pattern=[sequence_first_attention()] * 2))
def test_sequence_first_attention_runs_batch_first_and_its_swaps_leave(case: GraphCase) -> None:
    after, _ = fuse(case, AttentionLayoutFusionPass)
    assert_equivalent(case, after)
    kept = len(_site_ops(after, "second_user", MultiHeadAttentionOp))
    assert _layouts(after) == ["BSH"] * (len(case.sites_of("sequence_first_attention")) - kept) + ["SBH"] * kept
    assert all(alive(op) for op in _site_ops(after, "second_user", MultiHeadAttentionOp))
    chain = (ReshapeOp, MatMulV2Op, BatchMatMulOp, AddOp, TransposeOp, ConfusionTransposeOp)
    assert not any(alive(op) for op in _site_ops(after, "chain", Operation) if isinstance(op, chain))
    for variant in ("not_row_wise", "mixing_reshape", "chain_second_user"):
        assert all(alive(op) for op in _site_ops(after, variant, MatMulV2Op | BatchMatMulOp))
    transposes = count_ops(after, TransposeOp) + count_ops(after, ConfusionTransposeOp)
    assert transposes <= count_ops(case, TransposeOp) + count_ops(case, ConfusionTransposeOp)


def unit_axes_transpose(*, variants: tuple[str, ...] = ("exact", "moves_data")) -> Pattern:
    """A Transpose, or a ConfusionTransposeD (transposing first, or reshaping a flat x
    first), of a shape with size-1 dims that keeps the order of the others; near
    miss: a reversal of the dims, two or more of them not 1."""

    def build(g: GraphState) -> None:
        variant = g.choice(variants)
        rank = g.integer(2, 4)
        dims = [g.choice([1, 1, 2, 3]) for _ in range(rank)]
        if variant == "moves_data":
            dims[0], dims[-1] = g.integer(2, 3), g.integer(2, 3)
            perm = list(reversed(range(rank)))
        else:
            ones = g.draw(st.permutations([i for i, d in enumerate(dims) if d == 1]))
            others = iter(i for i, d in enumerate(dims) if d != 1)
            perm = [ones.pop(0) if d == 1 else next(others) for d in dims]
        with g.site("unit_axes_transpose", variant):
            how = g.choice(["transpose", "transpose_first", "reshape_first"])
            if how == "transpose":
                g.op(TransposeOp, [g.input(tuple(dims))], perm=perm)
            elif how == "transpose_first":
                moved = [dims[p] for p in perm]
                g.op(ConfusionTransposeOp, [g.input(tuple(dims))], perm=perm, shape=[-1, moved[-1]], transpose_first=True)
            else:
                flat = g.input((int(np.prod(dims)),))
                g.op(ConfusionTransposeOp, [flat], perm=perm, shape=dims, transpose_first=False)

    return build


@given(graphs(dtypes=(f32, f16), ops=(*SURROUNDING_OPS, "transpose"), max_ops=4, with_pattern=[unit_axes_transpose()] * 2))
def test_a_transpose_of_size_one_axes_is_a_reshape(case: GraphCase) -> None:
    after, counts = fuse(case, AttentionLayoutFusionPass)
    assert_equivalent(case, after)
    transposes = TransposeOp | ConfusionTransposeOp
    assert not any(alive(op) for op in site_ops(after, "unit_axes_transpose", transposes, exact=True))
    assert all(alive(op) for op in site_ops(after, "unit_axes_transpose", transposes, exact=False))
    assert counts.effect_times >= len(case.sites_of("unit_axes_transpose", exact=True))


# ---------------------------------------------------------------- targeted blocks


def _vit_block(batch: int, *, chain: bool = True, swap_escapes: bool = False) -> GraphCase:
    """ViT's attention as the fusions leave it, on x [batch, 5, 8] with 2 heads: the
    swap, MultiHeadAttention SBH, Reshape [5*batch, 8], the out-projection Gemm as
    MatMulV2 (weight transposed, bias), ConfusionTransposeD back, the residual Add.
    With `swap_escapes` the swapped hidden states are a graph output too."""
    b = GraphBuilder(seed=3)
    x = b.input((batch, 5, 8))
    swap = b.op(TransposeOp, [x], perm=list(SWAP))
    if swap_escapes:
        b.output(swap)
    weights = [b.random_weight((8, 8), low=-0.35, high=0.35) for _ in range(3)] + [b.random_weight((8,)) for _ in range(3)]
    props = {"head_num": 2, "scale": FloatAttr(0.5, f64), "input_layout": "SBH"}
    value = b.op(MultiHeadAttentionOp, [swap, swap, swap, *weights], **props)
    if chain:
        rows = b.op(ReshapeOp, [value], shape=[5 * batch, 8])
        out = b.op(MatMulV2Op, [rows, b.random_weight((8, 8)), b.random_weight((8,))], transpose_x1=False, transpose_x2=True)
        back = b.op(ConfusionTransposeOp, [out], perm=list(SWAP), shape=[5, batch, 8], transpose_first=False)
        b.op(AddOp, [back, x])
    return b.finish()


def _op_names(case: GraphCase) -> list[str]:
    return [op.name.removeprefix("ascend_graph.") for op in case.graph.body.block.ops if op.name != "ascend_graph.const"]


@pytest.mark.parametrize("batch", [1, 2])
def test_vits_attention_runs_on_the_untransposed_hidden_states(batch: int) -> None:
    case = _vit_block(batch)
    after, counts = fuse(case, AttentionLayoutFusionPass)
    assert (counts.match_times, counts.effect_times) == (2, 2)
    assert _op_names(after) == ["data", "multi_head_attention", "batch_matmul", "add", "net_output"]
    (mha,) = [op for op in after.module.walk() if isinstance(op, MultiHeadAttentionOp)]
    assert mha.props.str("input_layout") == "BSH" and mha.query is mha.key is mha.value
    assert mha.query.owner.name == "ascend_graph.data" and mha.props.int("head_num") == 2
    (projection,) = [op for op in after.module.walk() if isinstance(op, BatchMatMulOp)]
    assert projection.x1 is mha.y and projection.props.bool("adj_x2") and projection.bias is not None
    assert_equivalent(case, after)


@pytest.mark.parametrize(("batch", "left"), [(1, "reshape"), (2, "transpose_d")])
def test_without_the_chain_the_swap_moves_after_the_attention(batch: int, left: str) -> None:
    """At batch 1 the swap after the attention moves only a size-1 axis: a Reshape."""
    case = _vit_block(batch, chain=False)
    after, _ = fuse(case, AttentionLayoutFusionPass)
    assert _op_names(after) == ["data", "multi_head_attention", left, "net_output"]
    assert _layouts(after) == ["BSH"]
    assert_equivalent(case, after)


def test_a_swap_read_by_another_op_is_left_alone() -> None:
    case = _vit_block(2, swap_escapes=True)
    after, counts = fuse(case, AttentionLayoutFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 0)
    assert ir.to_text(after.module) == ir.to_text(case.module)


def test_the_pass_runs_after_the_attention_fusion_and_the_confusion_transpose() -> None:
    assert get_pass("AttentionLayoutFusionPass") is AttentionLayoutFusionPass
    builtin_fusion_passes()
    names = [p.name for p in ordered(FusionKind.GRAPH)]
    later = names.index("AttentionLayoutFusionPass")
    assert later > names.index("MultiHeadAttentionFusionPass") and later > names.index("TransposeReshapeFusionPass")
    assert AttentionLayoutFusionPass.band is Band.DOWN


@pytest.mark.parametrize("batch", [1, 2])
def test_the_compiled_block_launches_no_transpose_and_computes_the_same(batch: int) -> None:
    """Compiled (float16 by default) and simulated: the block runs as the attention and
    one BatchMatMulV2+Add kernel (the input's and output's casts and TransData aside),
    and its output is the reference's of the graph before the pass."""
    case = _vit_block(batch)
    model = ge.compile(case.module, {"soc_version": "Ascend310P3"})
    feeds = case.inputs()
    with ge.Session() as session:
        result = session.run(model, feeds)
    types = [row.record.op_type.split("+") for row in result.profile.rows()]
    assert ["MultiHeadAttention"] in types and any(kernel[:2] == ["BatchMatMulV2", "Add"] for kernel in types)
    assert len(types) == 3  # the input's Cast+TransData, the attention, the projection (+ output's TransData+Cast)
    assert not any(t in ("TransposeD", "ConfusionTransposeD") for kernel in types for t in kernel)
    want = ge.reference.run(case.module, feeds, case.store)
    for name, expected in want.items():
        np.testing.assert_allclose(result.outputs[name], expected, rtol=2e-2, atol=2e-2 * float(np.max(np.abs(expected))))


# -------------------------------------------------------------------- real exports


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 2])
def test_vit_b_16_loses_its_layout_transposes_and_matches_onnxruntime(batch: int) -> None:
    """Constant folding, then every graph fusion in GE's order (as `ge.pipeline` runs
    them) on torchvision's ViT-B/16: each of the 12
    attentions runs BSH, no TransposeD or ConfusionTransposeD is left in the encoder
    (the patch embedding's [N, E, 196] -> [N, 196, E] stays), and the output is
    onnxruntime's."""
    from ge.testing.real_models import (
        batched_path,
        model_inputs,
        model_path,
        onnxruntime_outputs,
    )

    path = model_path("vit_b_16") if batch == 1 else batched_path("vit_b_16", batch)
    module, _ = ge.load_onnx(str(path))
    get_pass("constant-folding")().apply(ir.context(), module)
    builtin_fusion_passes()
    with collect_statistics() as stats:
        for cls in ordered(FusionKind.GRAPH):
            cls().apply(ir.context(), module)
    module.verify()
    assert stats.get("AttentionLayoutFusionPass").effect_times == 24
    layouts = {op.props.str("input_layout") for op in module.walk() if isinstance(op, MultiHeadAttentionOp)}
    assert layouts == {"BSH"} and count_ops(module, MultiHeadAttentionOp) == 12
    assert count_ops(module, TransposeOp) == 0 and count_ops(module, ConfusionTransposeOp) == 1
    feeds = model_inputs(path)
    want, got = onnxruntime_outputs(path, feeds), ge.reference.run(module, feeds)
    for name, expected in want.items():
        error = float(np.max(np.abs(got[name].astype(np.float64) - expected))) / float(np.max(np.abs(expected)))
        assert error <= 1e-4, f"{name}: max|ours - ort| / max|ort| = {error:.3g}"
