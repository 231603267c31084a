"""MultiHeadAttentionFusionPass, the MultiHeadAttention op, and the transformer
fusions together on real exports.

`mha_block` draws the attention blocks exporters write: separate or packed
projections, heads cut in BSH or SBH layout, K^T by a transpose or adj_x2, the
scale after the product or split over Q and K, an optional mask, and near misses.
The slow tests run LayerNorm, softmax, GELU and attention fusion, in GE's order,
on BERT-base and ViT-B/16 (ge/testing/real_models.py) and on small exports below opset 17,
where LayerNorm is still decomposed, and compare with onnxruntime.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from xdsl.dialects.builtin import FloatAttr, StringAttr, f16, f32, f64
from xdsl.ir import Attribute, Operation, SSAValue

import ge
from dialects.ascend_graph import (
    AddOp,
    BatchMatMulOp,
    ConstOp,
    DivOp,
    ErfOp,
    GatherOp,
    GeluOp,
    LayerNormOp,
    MulOp,
    MultiHeadAttentionOp,
    ReduceMeanOp,
    ReshapeOp,
    SoftmaxOp,
    SplitOp,
    SqueezeOp,
    StridedSliceOp,
    TanhOp,
    TransposeOp,
    UnsqueezeOp,
    int_attr,
)
from dialects.shapes import ShapeError
from ge.core import dtypes, ir
from ge.core.reference import const_value
from ge.testing import (
    GraphBuilder,
    GraphCase,
    GraphState,
    Pattern,
    alive,
    assert_equivalent,
    attention,
    count_ops,
    fuse,
    graphs,
    second_user,
)
from passes import activation_fusion, attention_fusion, norm_fusion
from passes.fusion import (
    Band,
    FusionKind,
    FusionPass,
    builtin_fusion_passes,
    collect_statistics,
    ordered,
)
from passes.registry import get_pass

NO_ATTENTION_OPS = ("unary", "binary", "branch", "reduce", "reshape", "transpose", "concat", "split", "layer_norm")
"""Random op kinds that make no BatchMatMulV2 (so no attention block of their own)."""

TRANSFORMER_PASSES = (
    norm_fusion.LayerNormONNXFusionPass,
    norm_fusion.SoftmaxFusionPass,
    activation_fusion.GeluONNXFusionPass,
    attention_fusion.MultiHeadAttentionFusionPass,
)




def softmaxes(case: GraphCase, pattern: str, *, exact: bool) -> list[Operation]:
    return [op for site in case.sites_of(pattern, exact=exact) for op in site.ops if isinstance(op, SoftmaxOp)]


# ------------------------------------------------------------------ drawn blocks


def mha_block(*, variants: Sequence[str] = ("exact", "second_user", "wrong_axis", "wrong_merge")) -> Pattern:
    """A multi-head attention block from a new input [B, S, E] (or [S, B, E]) to the
    merged heads; near misses: an intermediate with a second user, softmax over the
    queries, heads merged in the wrong order."""

    def build(g: GraphState) -> None:
        variant = g.choice(variants)
        batch, seq = g.integer(1, 2), g.integer(2, 4)
        low = 2 if variant == "wrong_merge" else 1  # one head, or width 1, merges the same either way
        heads, width = g.integer(low, 3), g.integer(low, 3)
        emb, sbh = heads * width, g.flag()
        x = g.input((seq, batch, emb) if sbh else (batch, seq, emb))
        dt, bias = g.dtype_of(x), g.flag()

        def weight(shape: tuple[int, ...]) -> SSAValue:
            s = 1 / math.sqrt(emb)
            return g.random_weight(shape, low=-s, high=s, dtype=dt)

        def project(columns: int) -> SSAValue:
            w, bound = weight((emb, columns)), g.bound(x) * math.sqrt(emb) + 0.5
            b = g.random_weight((columns,), low=-0.5, high=0.5, dtype=dt) if bias else None
            if b is not None and g.flag():
                return g.op(BatchMatMulOp, [x, w, b], bound=bound, adj_x1=False, adj_x2=False).y
            y = g.op(BatchMatMulOp, [x, w], bound=bound, adj_x1=False, adj_x2=False).y
            return y if b is None else g.op(AddOp, [b, y] if g.flag() else [y, b]).y

        def packed() -> list[SSAValue]:
            qkv, lead = project(3 * emb), g.shape_of(x)[:2]
            how = g.choice(["split", "slice", "torch"])
            if how == "split":
                return list(g.op(SplitOp, [qkv], split_dim=-1, num_split=3).results)
            if how == "slice":
                return [
                    g.op(StridedSliceOp, [qkv], begin=[0, 0, i * emb], end=[*lead, (i + 1) * emb], strides=[1, 1, 1]).y
                    for i in range(3)
                ]
            # torch.nn.MultiheadAttention: unflatten, unsqueeze, transpose(0, -2), squeeze, [i]
            parts = g.op(ReshapeOp, [qkv], shape=[*lead, 3, emb])
            parts = g.op(UnsqueezeOp, [parts], axes=[0])
            parts = g.op(TransposeOp, [parts], perm=[3, 1, 2, 0, 4])
            parts = g.op(SqueezeOp, [parts], axis=[3])
            return [g.op(GatherOp, [parts, g.weight(np.array(i, np.int64))], axis=0).y for i in range(3)]

        def split_heads(t: SSAValue, *, key: bool) -> SSAValue:
            """[B, H, S, D], or K^T [B, H, D, S] when `key` (in one step, if BSH allows)."""
            if sbh:
                t = g.op(ReshapeOp, [t], shape=[seq, batch * heads, width])
                t = g.op(TransposeOp, [t], perm=[1, 0, 2])
                t = g.op(ReshapeOp, [t], shape=[batch, heads, seq, width])
                return g.op(TransposeOp, [t], perm=[0, 1, 3, 2]).y if key else t.y
            t = g.op(ReshapeOp, [t], shape=[batch, seq, heads, width])
            return g.op(TransposeOp, [t], perm=[0, 2, 3, 1] if key else [0, 2, 1, 3]).y

        with g.site("mha_block", variant):
            q, k, v = packed() if g.flag() else [project(emb) for _ in range(3)]
            adj = g.flag()
            qh, kh, vh = split_heads(q, key=False), split_heads(k, key=not adj), split_heads(v, key=False)
            style = g.choice(["mul", "div", "split"])
            if style == "split":
                root = g.constant(width**-0.25, dtype=dt)
                qh, kh = g.op(MulOp, [qh, root]).y, g.op(MulOp, [root, kh]).y
            scores = g.op(BatchMatMulOp, [qh, kh], bound=float(width) * g.bound(q) ** 2, adj_x1=False, adj_x2=adj)
            if style == "mul":
                scores = g.op(MulOp, [scores, g.constant(width**-0.5, dtype=dt)])
            elif style == "div":
                scores = g.op(DivOp, [scores, g.constant(width**0.5, dtype=dt)])
            if g.flag():
                mask_shape = g.choice([(batch, 1, 1, seq), (1, 1, seq, seq), (seq, seq)])
                keep = g.rng.integers(0, 2, size=mask_shape) == 1
                keep[..., 0] = True  # no row of the softmax is masked whole
                scores = g.op(AddOp, [scores, g.weight(np.where(keep, 0.0, -30.0).astype(dtypes.to_numpy(dt)))])
            p = g.op(SoftmaxOp, [scores], axes=[-2 if variant == "wrong_axis" else -1], bound=1.0)
            context = g.op(BatchMatMulOp, [p, vh], bound=g.bound(v), adj_x1=False, adj_x2=False)
            if variant == "wrong_merge":  # heads interleaved with their columns
                merged = g.op(TransposeOp, [context], perm=[0, 2, 3, 1] if not sbh else [2, 0, 3, 1])
            else:
                merged = g.op(TransposeOp, [context], perm=[0, 2, 1, 3] if not sbh else [2, 0, 1, 3])
            lead = [seq * batch] if sbh and g.flag() else ([seq, batch] if sbh else [batch, seq])
            g.op(ReshapeOp, [merged], shape=[*lead, emb])
        if variant == "second_user":
            second_user(g, g.choice([scores.results[0], p.y, qh]))

    return build


@given(graphs(ops=NO_ATTENTION_OPS, max_ops=3, with_pattern=attention()))
def test_attention_fusion_fuses_the_kits_single_head_attention(case: GraphCase) -> None:
    after, counts = fuse(case, attention_fusion.MultiHeadAttentionFusionPass)
    assert_equivalent(case, after)
    exact, sites = case.sites_of("attention", exact=True), case.sites_of("attention")
    assert (counts.match_times, counts.effect_times) == (len(sites), len(exact))
    assert count_ops(after, MultiHeadAttentionOp) == len(exact)
    assert not any(alive(op) for op in softmaxes(after, "attention", exact=True))
    assert all(alive(op) for op in softmaxes(after, "attention", exact=False))


@given(graphs(dtypes=(f32, f16), ops=NO_ATTENTION_OPS, max_ops=3, with_pattern=[mha_block(), mha_block()]))
def test_attention_fusion_fuses_multi_head_blocks(case: GraphCase) -> None:
    after, counts = fuse(case, attention_fusion.MultiHeadAttentionFusionPass)
    assert_equivalent(case, after)
    exact, sites = case.sites_of("mha_block", exact=True), case.sites_of("mha_block")
    assert (counts.match_times, counts.effect_times) == (len(sites), len(exact))
    assert count_ops(after, MultiHeadAttentionOp) == len(exact)
    assert not any(alive(op) for op in softmaxes(after, "mha_block", exact=True))
    assert all(alive(op) for op in softmaxes(after, "mha_block", exact=False))
    assert count_ops(after, BatchMatMulOp) == count_ops(case, BatchMatMulOp) - sum(
        sum(isinstance(op, BatchMatMulOp) for op in site.ops) for site in exact
    )
    fused = [op for op in after.module.walk() if isinstance(op, MultiHeadAttentionOp)]
    assert all(isinstance(w.owner, ConstOp) for op in fused for w in op.operands[3:6])  # a packed weight is cut at compile time


# ---------------------------------------------------------------- targeted blocks


def _block(
    *,
    axis: int = -1,
    mask_before_scale: bool = False,
    interleaved: bool = False,
    probabilities_escape: bool = False,
    query_bias_only: bool = False,
    scores_bias: bool = False,
    scale: float = 0.5,
    dtype: Attribute = f32,
    weights: float = 0.35,
) -> GraphCase:
    """BERT's block on x [2, 5, 8] with 2 heads of 4, a [2, 1, 1, 5] mask and * `scale`."""
    b = GraphBuilder(seed=21, dtype=dtype)
    x = b.input((2, 5, 8))
    mask = b.weight(np.where(np.arange(5) < 4, 0.0, -1e4).astype(dtypes.to_numpy(dtype)).reshape(1, 1, 1, 5).repeat(2, 0))

    def project(bias: bool) -> Operation:
        y = b.op(BatchMatMulOp, [x, b.random_weight((8, 8), low=-weights, high=weights)], adj_x1=False, adj_x2=False)
        return b.op(AddOp, [b.random_weight((8,)), y]) if bias else y

    def heads(t: Operation, *, key: bool) -> Operation:
        """[B, H, S, D] (K^T: [B, H, D, S]); interleaved, column d*H + h is head h's d-th."""
        if interleaved:
            return b.op(TransposeOp, [b.op(ReshapeOp, [t], shape=[2, 5, 4, 2])], perm=[0, 3, 2, 1] if key else [0, 3, 1, 2])
        return b.op(TransposeOp, [b.op(ReshapeOp, [t], shape=[2, 5, 2, 4])], perm=[0, 2, 3, 1] if key else [0, 2, 1, 3])

    q, k, v = project(True), project(not query_bias_only), project(not query_bias_only)
    qh, kt, vh = heads(q, key=False), heads(k, key=True), heads(v, key=False)
    scores_operands = [qh, kt, b.random_weight((5,))] if scores_bias else [qh, kt]
    scores = b.op(BatchMatMulOp, scores_operands, adj_x1=False, adj_x2=False)
    if mask_before_scale:
        scores = b.op(MulOp, [b.op(AddOp, [scores, mask]), b.constant(scale)])
    else:
        scores = b.op(AddOp, [b.op(MulOp, [scores, b.constant(scale)]), mask])
    p = b.op(SoftmaxOp, [scores], axes=[axis])
    context = b.op(BatchMatMulOp, [p, vh], adj_x1=False, adj_x2=False)
    b.op(ReshapeOp, [b.op(TransposeOp, [context], perm=[0, 2, 3, 1] if interleaved else [0, 2, 1, 3])], shape=[2, 5, 8])
    if probabilities_escape:
        b.output(p)
    return b.finish()


def test_attention_fusion_makes_one_op_of_a_bert_block() -> None:
    case = _block()
    after, counts = fuse(case, attention_fusion.MultiHeadAttentionFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 1)
    ops = [op.name for op in after.graph.body.block.ops if op.name != "ascend_graph.const"]
    assert ops == ["ascend_graph.data", "ascend_graph.multi_head_attention", "ascend_graph.net_output"]
    (mha,) = [op for op in after.module.walk() if isinstance(op, MultiHeadAttentionOp)]
    assert mha.props.int("head_num") == 2 and mha.props.float("scale") == 1.0  # the 0.5 is in the query weights
    assert mha.props.str("input_layout") == "BSH" and mha.atten_mask is not None and mha.query_bias is not None
    assert_equivalent(case, after)
    text = ir.to_text(after.module)
    assert ir.to_text(ir.parse(text)) == text


@pytest.mark.parametrize(
    ("scale", "dtype", "folded"),
    [(0.5, f16, True), (1 / math.sqrt(3), f32, True), (1 / math.sqrt(3), f16, False)],
    ids=["power_of_two", "float32", "float16_rounding"],
)
def test_attention_fusion_folds_the_scale_into_the_query_weights(scale: float, dtype: Attribute, folded: bool) -> None:
    """The scale goes into the constant query weight and bias where that is exact (a
    power of two) or float32; a float16 weight times another scale would round."""
    case = _block(scale=scale, dtype=dtype)
    after, _ = fuse(case, attention_fusion.MultiHeadAttentionFusionPass)
    (mha,) = [op for op in after.module.walk() if isinstance(op, MultiHeadAttentionOp)]
    assert mha.props.float("scale") == pytest.approx(1.0 if folded else scale, rel=1e-3)  # a float16 constant holds the scale
    source = next(op for op in case.module.walk() if isinstance(op, BatchMatMulOp))  # the query projection
    weight, folded_weight = const_value(source.x2.owner), const_value(mha.query_weight.owner)
    np.testing.assert_array_equal(folded_weight, (weight * scale).astype(weight.dtype) if folded else weight)
    assert_equivalent(case, after)


def test_attention_fusion_keeps_a_scale_that_would_overflow_the_query_weights() -> None:
    """A power of two, but 2^15 times float16 weights of up to 4 is past float16's
    range: the scale stays on the scores."""
    after, _ = fuse(_block(scale=2.0**15, dtype=f16, weights=4.0), attention_fusion.MultiHeadAttentionFusionPass)
    (mha,) = [op for op in after.module.walk() if isinstance(op, MultiHeadAttentionOp)]
    assert mha.props.float("scale") == 2.0**15


@pytest.mark.parametrize(
    "kwargs",
    [
        {"axis": -2},
        {"axis": 2},
        {"probabilities_escape": True},
        {"interleaved": True},
        {"query_bias_only": True},
        {"scores_bias": True},
    ],
    ids=[
        "softmax_over_queries", "softmax_axis_2", "probabilities_second_user", "heads_interleaved", "mixed_biases",
        "scores_with_bias",
    ],
)
def test_attention_fusion_leaves_near_misses(kwargs: dict) -> None:
    case = _block(**kwargs)
    after, counts = fuse(case, attention_fusion.MultiHeadAttentionFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 0)
    assert ir.to_text(after.module) == ir.to_text(case.module)


def test_attention_fusion_leaves_a_mask_added_before_the_scale() -> None:
    """(QK^T + M) * c is not c * QK^T + M: not even the structure of a block."""
    case = _block(mask_before_scale=True)
    after, counts = fuse(case, attention_fusion.MultiHeadAttentionFusionPass)
    assert (counts.match_times, counts.effect_times) == (0, 0)
    assert count_ops(after, MultiHeadAttentionOp) == 0


# ------------------------------------------------------------------------ the op


def _mha_operands(b: GraphBuilder, *, biases: bool, mask: tuple[int, ...] | None) -> list[SSAValue]:
    x = b.input((2, 3, 4))
    operands = [x, x, x] + [b.random_weight((4, 6)) for _ in range(3)]
    if biases:
        operands += [b.random_weight((6,)) for _ in range(3)]
    if mask is not None:
        operands.append(b.random_weight(mask))
    return operands


@pytest.mark.parametrize(("biases", "mask"), [(False, None), (False, (2, 2)), (True, None), (True, (3, 1, 1, 2))])
def test_multi_head_attention_op_tells_its_operands_by_count(biases: bool, mask: tuple[int, ...] | None) -> None:
    b = GraphBuilder()
    operands = _mha_operands(b, biases=biases, mask=mask)
    props = {"head_num": int_attr(3), "scale": FloatAttr(0.5, f64), "input_layout": StringAttr("SBH")}
    op = MultiHeadAttentionOp(operands, props, "mha")
    assert (op.query_bias is not None, op.atten_mask is not None) == (biases, mask is not None)
    assert op.y.type.get_shape() == (2, 3, 6)  # SBH: [Sq, B, Ev] = [2, 3, 6]
    op.verify()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"head_num": int_attr(4)}, "do not split into 4 heads"),
        ({"input_layout": StringAttr("BNSD")}, "is not BSH or SBH"),
        ({"mask": (2, 2, 3, 3)}, "does not broadcast"),
        ({"count": 8}, "takes 6, 7, 9 or 10 operands"),
    ],
)
def test_multi_head_attention_op_rejects_wrong_operands(change: dict, message: str) -> None:
    b = GraphBuilder()
    operands = _mha_operands(b, biases=True, mask=change.get("mask"))
    props = {"head_num": int_attr(3), "scale": FloatAttr(0.5, f64), "input_layout": StringAttr("BSH")}
    props.update({k: v for k, v in change.items() if k in props})
    with pytest.raises(ShapeError, match=message):
        MultiHeadAttentionOp(operands[: change.get("count", len(operands))], props)


def test_attention_fusion_is_registered_in_the_main_band_after_the_norm_fusions() -> None:
    assert get_pass(attention_fusion.MultiHeadAttentionFusionPass.name) is attention_fusion.MultiHeadAttentionFusionPass
    names = [p.name for p in ordered(FusionKind.GRAPH) if p in TRANSFORMER_PASSES]
    assert names == ["GeluONNXFusionPass", "LayerNormONNXFusionPass", "SoftmaxFusionPass", "MultiHeadAttentionFusionPass"]
    assert attention_fusion.MultiHeadAttentionFusionPass.band is Band.MAIN


def test_ge_opt_runs_the_transformer_fusions_on_the_demo_bert(tmp_path: Path) -> None:
    """The bundled tiny BERT: its decomposed LayerNorm, GELU and attention each become one op."""
    from ge.models import DEMO_MODELS

    demo = next(m for m in DEMO_MODELS if m.name == "tiny_bert")
    out = tmp_path / "fused.mlir"
    pipeline = ",".join(p.name for p in ordered(FusionKind.GRAPH) if p in TRANSFORMER_PASSES)
    result = subprocess.run(
        [str(Path(sys.executable).parent / "ge-opt"), str(demo.path), "-p", pipeline, "-o", str(out)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    fused = ir.parse(out.read_text())
    assert count_ops(fused, MultiHeadAttentionOp) == 1 and count_ops(fused, GeluOp) == 1
    assert count_ops(fused, LayerNormOp) == 3 and count_ops(fused, ReduceMeanOp) == 0
    module, _ = ge.load_onnx(str(demo.path))
    assert_equivalent(module, fused, inputs=demo.sample_inputs())


# -------------------------------------------------------------------- real exports


def run_transformer_fusions(module, passes: Sequence[type[FusionPass]] = TRANSFORMER_PASSES):
    """Apply the passes in GE's order; the statistics they reported."""
    with collect_statistics() as stats:
        for cls in ordered(FusionKind.GRAPH):
            if cls in passes:
                cls().apply(ir.context(), module)
    module.verify()
    return stats


def assert_matches_onnxruntime(module, path: Path, feeds: dict[str, np.ndarray]) -> None:
    """Every output within 1e-4 of onnxruntime's largest magnitude, and the hidden
    states (the first output) at cosine similarity > 0.99999."""
    from ge.testing.real_models import onnxruntime_outputs

    want, got = onnxruntime_outputs(path, feeds), ge.reference.run(module, feeds)
    for name, expected in want.items():
        error = float(np.max(np.abs(got[name].astype(np.float64) - expected))) / float(np.max(np.abs(expected)))
        assert error <= 1e-4, f"{name}: max|ours - ort| / max|ort| = {error:.3g}"
    first = next(iter(want))
    a, b = got[first].astype(np.float64).ravel(), want[first].astype(np.float64).ravel()
    assert a @ b / (np.linalg.norm(a) * np.linalg.norm(b)) > 0.99999


def assert_counts(stats, expected: dict[str, int]) -> None:
    for name, n in expected.items():
        counts = stats.get(name)
        assert (counts.match_times, counts.effect_times) == (n, n), name


@pytest.mark.slow
@pytest.mark.parametrize(("name", "matmuls_left"), [("bert_base", 36), ("vit_b_16", 24)])
def test_transformer_fusions_on_real_models(name: str, matmuls_left: int) -> None:
    """Opset 17 keeps LayerNormalization and Softmax whole; each of the 12 layers'
    GELU and attention block fuses (leaving the feed-forward matmuls, and BERT's
    attention output projection), and the outputs stay onnxruntime's."""
    from ge.testing.real_models import model_inputs, model_path

    path = model_path(name)
    module, _ = ge.load_onnx(str(path))
    stats = run_transformer_fusions(module)
    assert_counts(stats, {"MultiHeadAttentionFusionPass": 12, "GeluONNXFusionPass": 12})
    assert_counts(stats, {"LayerNormONNXFusionPass": 0, "SoftmaxFusionPass": 0})
    assert count_ops(module, MultiHeadAttentionOp) == count_ops(module, GeluOp) == 12
    assert count_ops(module, SoftmaxOp) == count_ops(module, ErfOp) == 0
    assert count_ops(module, BatchMatMulOp) == matmuls_left
    assert count_ops(module, LayerNormOp) == 25
    assert_matches_onnxruntime(module, path, model_inputs(path))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert_base", "vit_b_16"])
def test_transformer_fusions_compose_with_every_graph_fusion(name: str) -> None:
    """With every graph fusion of the project in GE's order (MatMulBiasAdd moves the
    projection biases into the matmuls first), every block still fuses."""
    from ge.testing.real_models import model_inputs, model_path

    every = tuple(cls for cls in builtin_fusion_passes().values() if cls.kind is FusionKind.GRAPH)
    path = model_path(name)
    module, _ = ge.load_onnx(str(path))
    stats = run_transformer_fusions(module, every)
    assert_counts(stats, {"MultiHeadAttentionFusionPass": 12, "GeluONNXFusionPass": 12})
    assert_matches_onnxruntime(module, path, model_inputs(path))


@pytest.fixture(scope="module")
def opset_16_exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A 2-layer BERT with the tanh GELU (gelu_new) and a 2-layer ViT, batch 2,
    exported at opset 16: LayerNorm decomposed, ViT's attention sequence-first."""
    import warnings

    import torch
    from ge.testing.real_models import _randomise, _torchvision

    torchvision = _torchvision()
    from transformers import BertConfig, BertModel

    folder = tmp_path_factory.mktemp("opset16")
    torch.manual_seed(0)
    config = BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=32, vocab_size=100, hidden_act="gelu_new", attn_implementation="eager",
    )
    bert = BertModel(config)
    vit = torchvision.models.vision_transformer.VisionTransformer(
        image_size=32, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128, num_classes=10
    )
    for model in (bert, vit):
        _randomise(model, torch.Generator().manual_seed(0))
        model.eval()

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    mask = torch.ones(2, 16, dtype=torch.int64)
    mask[:, -3:] = 0
    exports = {
        "bert": (Encoder().eval(), (torch.randint(0, 100, (2, 16)), mask), ["input_ids", "attention_mask"]),
        "vit": (vit, (torch.randn(2, 3, 32, 32),), ["input"]),
    }
    paths = {}
    for name, (model, args, inputs) in exports.items():
        paths[name] = folder / f"{name}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                model, args, str(paths[name]), dynamo=False, do_constant_folding=False, opset_version=16,
                input_names=inputs, output_names=["output"],
            )
    return paths


@pytest.mark.slow
@pytest.mark.parametrize(("name", "approximate"), [("bert", "tanh"), ("vit", "none")])
def test_transformer_fusions_on_exports_before_opset_17(opset_16_exports: dict[str, Path], name: str, approximate: str) -> None:
    """Two layers: 5 decomposed LayerNorms (4 in the layers, 1 at the embeddings or
    the end), 2 GELUs in the export's form, 2 attention blocks (ViT's in SBH)."""
    from ge.testing.real_models import model_inputs

    path = opset_16_exports[name]
    module, _ = ge.load_onnx(str(path))
    stats = run_transformer_fusions(module)
    assert_counts(stats, {"LayerNormONNXFusionPass": 5, "GeluONNXFusionPass": 2, "MultiHeadAttentionFusionPass": 2})
    assert count_ops(module, ReduceMeanOp) == count_ops(module, TanhOp) == count_ops(module, ErfOp) == 0
    assert {op.props.str("approximate") for op in module.walk() if isinstance(op, GeluOp)} == {approximate}
    layouts = {op.props.str("input_layout") for op in module.walk() if isinstance(op, MultiHeadAttentionOp)}
    assert layouts == {"BSH" if name == "bert" else "SBH"}
    assert_matches_onnxruntime(module, path, model_inputs(path))
