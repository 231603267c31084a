"""Pattern strategies: the subgraphs fusion passes match, and their near misses.

Each factory returns a `Pattern` for `graphs(with_pattern=...)`. A drawn instance
is either `exact` (the pass must fuse it) or a named near miss it must leave
alone; `variants=` narrows the choice, and `case.sites_of(name, exact=...)`
tells a test which instances were placed. Exact instances come in the spellings
ONNX exporters produce (Pow or Mul for a square, Div or Mul by a reciprocal,
operands of commutative ops in either order), so a pass is tested against all.
The near misses, by name:

- `second_user`: an intermediate of the pattern has another consumer (an op or a
  graph output), so fusing would have to keep it alive;
- `dynamic_filter`, `dynamic_bias`: a weight the fusion folds is a graph input;
- `row_bias`: the bias added to a MatMul is [M, N], not one value per column;
- `mismatched_axes`: two reductions of the decomposition use different axes;
- `vector_epsilon`, `epsilon_after_sqrt`: LayerNorm's epsilon is not one scalar
  added under the square root;
- `wrong_constant`: a constant of the GELU formula is off;
- `wrong_axis`: attention's softmax runs over the keys' other axis;
- `not_per_channel`: a constant after a Conv2D varies along N, H or W (a [C]
  constant broadcasts along W), or would grow the result;
- `dynamic_scale`, `has_bias`, `padded`, `grouped`, `scaled_product`,
  `dynamic_scaled_c`, `narrowing`, `runtime_operand`: see each factory.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from hypothesis import strategies as st
from xdsl.dialects.builtin import bf16, f16, f32, f64
from xdsl.ir import SSAValue

from dialects import shapes
from dialects.ascend_graph import (
    AddOp,
    BatchMatMulOp,
    CastOp,
    Conv2DOp,
    DivOp,
    ErfOp,
    ExpOp,
    FlattenOp,
    GemmOp,
    MulOp,
    NegOp,
    PowOp,
    ReciprocalOp,
    ReduceMaxOp,
    ReduceMeanOp,
    ReduceSumOp,
    ReluOp,
    ReshapeOp,
    RsqrtOp,
    SoftmaxOp,
    SqrtOp,
    SqueezeOp,
    SubOp,
    TanhOp,
    TransposeOp,
    UnsqueezeOp,
)
from ge.core import dtypes
from ge.testing.strategies import (
    GraphState,
    Pattern,
    emit_batch_matmul,
    emit_batch_norm,
    emit_conv2d,
    emit_matmul,
    emit_reshape,
    reshape_to_rank,
)


def second_user(g: GraphState, value: SSAValue) -> None:
    """Give `value` one more consumer: a graph output, or a Relu feeding later ops."""
    if g.flag():
        g.output(value)
    else:
        g.op(ReluOp, [value])


def _axes(axis: int | Sequence[int]) -> tuple[int, ...]:
    return (axis,) if isinstance(axis, int) else tuple(axis)


def _min_rank(axes: Sequence[int]) -> int:
    """The rank that makes every axis valid and leaves one axis outside them."""
    return max(-a if a < 0 else a + 1 for a in axes) + 1


def _other_axis(g: GraphState, axes: Sequence[int], rank: int) -> int:
    return g.choice([a for a in range(rank) if a not in axes])


def _spelled(g: GraphState, axes: Sequence[int], rank: int) -> list[int]:
    return [a - rank if g.flag() else a for a in axes]


def conv_bn_chain(
    *, variants: Sequence[str] = ("exact", "second_user", "dynamic_filter"), bias: bool | None = None
) -> Pattern:
    """Conv2D -> BatchNorm, which ConvBatchnormFusionPass folds into the conv."""

    def build(g: GraphState) -> None:
        variant = g.choice(variants)
        x = g.pick(rank=4)
        with g.site("conv_bn_chain", variant):
            conv = emit_conv2d(g, x, bias=bias, dynamic_filter=variant == "dynamic_filter")
            emit_batch_norm(g, conv.y)
        if variant == "second_user":
            second_user(g, conv.y)

    return build


def matmul_bias_add(
    *,
    variants: Sequence[str] = ("exact", "second_user", "dynamic_bias", "row_bias"),
    batch: bool = False,
) -> Pattern:
    """MatMulV2 (or BatchMatMulV2 with `batch`) -> Add of a bias per output column,
    which MatMulBiasAddFusionPass moves into the matmul's bias input."""

    def build(g: GraphState) -> None:
        variant = g.choice(variants)
        x = g.pick(min_rank=3, max_rank=4, min_dim=2) if batch else g.pick(rank=2, min_dim=2)
        with g.site("matmul_bias_add", variant):
            mm = (emit_batch_matmul if batch else emit_matmul)(g, x, bias=False)
            out = g.shape_of(mm)
            if variant == "row_bias":
                b = g.random_weight(out[-2:], low=-0.5, high=0.5, dtype=g.dtype_of(x))
            elif variant == "dynamic_bias":
                b = g.input(out[-1:], g.dtype_of(x), low=-0.5, high=0.5)
            else:
                b = g.random_weight(g.choice([out[-1:], (1, out[-1])]), low=-0.5, high=0.5, dtype=g.dtype_of(x))
            g.op(AddOp, [mm, b] if g.flag() else [b, mm], bound=g.bound(mm) + 0.5)
        if variant == "second_user":
            second_user(g, mm.y)

    return build


def layer_norm_decomposition(
    axis: int | Sequence[int] = -1,
    *,
    variants: Sequence[str] = ("exact", "second_user", "mismatched_axes", "vector_epsilon", "epsilon_after_sqrt"),
    epsilon: float | None = None,
) -> Pattern:
    """LayerNorm as ONNX exports it before opset 17: ReduceMean, Sub, Pow/Mul,
    ReduceMean, Add epsilon, Sqrt, Div (or Rsqrt, Mul), then optional Mul gamma and
    Add beta; normalised over `axis` (an axis or several), which LayerNorm fusion
    can express only when they are the trailing axes.

    epsilon defaults to 1e-5 or 1e-6: with a tinier one, a row constant up to
    rounding is normalised to rounding noise divided by sqrt(epsilon), which makes
    float32 equivalence fail for an exact fusion."""
    wanted = _axes(axis)

    def build(g: GraphState) -> None:
        variant = g.choice(variants)
        x = g.pick(min_rank=_min_rank(wanted), min_dim=2)
        s, dt = g.shape_of(x), g.dtype_of(x)
        axes = [shapes.norm_axis(a, len(s)) for a in wanted]
        eps = epsilon if epsilon is not None else g.choice([1e-5, 1e-6])
        if variant == "mismatched_axes":
            eps = max(eps, 1e-3)  # the other axis's variance may be near 0
        with g.site("layer_norm_decomposition", variant):
            mean = g.op(ReduceMeanOp, [x], axes=_spelled(g, axes, len(s)), keep_dims=True)
            d = g.op(SubOp, [x, mean], bound=2 * g.bound(x))
            sq = g.op(PowOp, [d, g.constant(2.0, dtype=dt)]) if g.flag() else g.op(MulOp, [d, d])
            var_axes = [_other_axis(g, axes, len(s))] if variant == "mismatched_axes" else axes
            var = g.op(ReduceMeanOp, [sq], axes=_spelled(g, var_axes, len(s)), keep_dims=True)
            if variant == "vector_epsilon":
                e = g.random_weight(g.shape_of(var), low=eps, high=10 * eps + 1e-3, dtype=dt)
            else:
                e = g.constant(eps, g.choice([(), (1,)]), dt)
            if variant == "epsilon_after_sqrt":
                n = g.op(DivOp, [d, g.op(AddOp, [g.op(SqrtOp, [var]), e])])
            elif g.flag():
                n = g.op(DivOp, [d, g.op(SqrtOp, [g.op(AddOp, [var, e])])])
            else:
                n = g.op(MulOp, [d, g.op(RsqrtOp, [g.op(AddOp, [var, e])])])
            norm = tuple(s[a] if a in axes else 1 for a in range(len(s)))
            affine = norm[min(axes) :]
            bound = math.sqrt(shapes.numel(norm)) if variant != "mismatched_axes" else 2 * g.bound(x) / math.sqrt(eps)
            if g.flag():
                n = g.op(MulOp, [n, g.random_weight(affine, low=-1.5, high=1.5, away_from_zero=0.5, dtype=dt)])
                bound *= 1.5
            if g.flag():
                n = g.op(AddOp, [n, g.random_weight(affine, low=-0.5, high=0.5, dtype=dt)])
                bound += 0.5
            g.bounds[n.results[0]] = bound
        if variant == "second_user":
            second_user(g, d.y)

    return build


def gelu_erf_decomposition(
    *, variants: Sequence[str] = ("exact", "second_user", "wrong_constant")
) -> Pattern:
    """GELU's erf form as exported: 0.5 * x * (1 + erf(x / sqrt(2))), in the
    three orders exporters use, which GELU fusion turns into one Gelu."""

    def build(g: GraphState) -> None:
        variant = g.choice(variants)
        x = g.pick()
        dt = g.dtype_of(x)
        wrong = g.choice(["scale", "one", "half"]) if variant == "wrong_constant" else None
        root2 = 1.5 if wrong == "scale" else math.sqrt(2)
        one = 1.1 if wrong == "one" else 1.0
        half = 0.6 if wrong == "half" else 0.5

        def c(value: float) -> SSAValue:
            return g.constant(value, g.choice([(), (1,)]), dt)

        with g.site("gelu_erf_decomposition", variant):
            scaled = g.op(DivOp, [x, c(root2)]) if g.flag() else g.op(MulOp, [x, c(1 / root2)])
            e = g.op(ErfOp, [scaled], bound=1.0)
            p = g.op(AddOp, [e, c(one)] if g.flag() else [c(one), e], bound=2.2)
            bound = 1.2 * g.bound(x)
            order = g.choice(["x*p*half", "half*x*p", "x*(p*half)"])
            if order == "x*p*half":
                g.op(MulOp, [g.op(MulOp, [x, p]), c(half)], bound=bound)
            elif order == "half*x*p":
                g.op(MulOp, [g.op(MulOp, [x, c(half)]), p], bound=bound)
            else:
                g.op(MulOp, [x, g.op(MulOp, [p, c(half)])], bound=bound)
        if variant == "second_user":
            second_user(g, e.y)

    return build


def softmax_decomposition(
    axis: int = -1, *, variants: Sequence[str] = ("exact", "second_user", "mismatched_axes")
) -> Pattern:
    """Softmax as exported: ReduceMax, Sub, Exp, ReduceSum, Div (or Mul by a
    Reciprocal); without the max subtraction when x is small enough for exp."""

    def build(g: GraphState) -> None:
        variant = g.choice(variants)
        x = g.pick(min_rank=_min_rank([axis]), min_dim=2)
        s = g.shape_of(x)
        a = shapes.norm_axis(axis, len(s))
        sum_axis = _other_axis(g, [a], len(s)) if variant == "mismatched_axes" else a
        stable = variant == "mismatched_axes" or g.bound(x) > 3 or g.flag()
        with g.site("softmax_decomposition", variant):
            if stable:
                m = g.op(ReduceMaxOp, [x], axes=_spelled(g, [a], len(s)), keep_dims=True)
                e = g.op(ExpOp, [g.op(SubOp, [x, m])], bound=1.0)
            else:
                e = g.op(ExpOp, [x], bound=math.exp(g.bound(x)))
            z = g.op(ReduceSumOp, [e], axes=_spelled(g, [sum_axis], len(s)), keep_dims=True)
            if g.flag():
                g.op(DivOp, [e, z], bound=1.0)
            else:
                g.op(MulOp, [e, g.op(ReciprocalOp, [z])], bound=1.0)
        if variant == "second_user":
            second_user(g, e.y)

    return build


def attention(*, variants: Sequence[str] = ("exact", "second_user", "wrong_axis"), mask: bool | None = None) -> Pattern:
    """Scaled dot-product attention on [B, S, E]: Q, K, V projections, Q @ K^T,
    scale by 1/sqrt(D), optional additive mask, softmax over keys, @ V."""

    def build(g: GraphState) -> None:
        variant = g.choice(variants)
        x = g.pick(rank=3, min_dim=2, where=lambda v: g.fits(g.shape_of(v)[:2] + g.shape_of(v)[1:2]))
        if x is None:  # the [B, S, S] scores must fit too
            seq = g.integer(2, max(2, min(g.max_dim, math.isqrt(g.max_elements))))
            emb = g.integer(2, max(2, min(g.max_dim, g.max_elements // seq)))
            x = g.input((g.integer(1, max(1, min(2, g.max_elements // (seq * max(seq, emb))))), seq, emb))
        (batch, seq, emb), dt = g.shape_of(x), g.dtype_of(x)
        head = g.integer(1, max(1, min(4, g.max_elements // (batch * seq))))  # the [B, S, head] projections fit
        scale = 1 / math.sqrt(emb)
        with g.site("attention", variant):
            q, k, v = (
                g.op(BatchMatMulOp, [x, g.random_weight((emb, head), low=-scale, high=scale, dtype=dt)],
                     bound=g.bound(x) * math.sqrt(emb), adj_x1=False, adj_x2=False)
                for _ in range(3)
            )
            scores = g.op(BatchMatMulOp, [q, k], adj_x1=False, adj_x2=True)
            scores = g.op(MulOp, [scores, g.constant(1 / math.sqrt(head), dtype=dt)])
            if mask if mask is not None else g.flag():
                # every query keeps at least one key, so no softmax row is all masked
                keep = (g.rng.integers(0, 2, size=(seq, seq)) == 1) | (g.rng.integers(0, seq, size=(seq, 1)) == np.arange(seq))
                scores = g.op(AddOp, [scores, g.weight(np.where(keep, 0.0, -30.0).astype(dtypes.to_numpy(dt)))])
            p = g.op(SoftmaxOp, [scores], axes=[-2 if variant == "wrong_axis" else -1], bound=1.0)
            g.op(BatchMatMulOp, [p, v], bound=g.bound(v) * seq, adj_x1=False, adj_x2=False)
        if variant == "second_user":
            second_user(g, scores.results[0])

    return build


# ------------------------------------------------- conv, gemm, layout and constants


def _channel_shape(g: GraphState, out: Sequence[int]) -> tuple[int, ...]:
    """A constant shape that varies per channel of an NCHW result (or not at all)."""
    return g.choice([(out[1], 1, 1), (1, out[1], 1, 1), (), (1,)])


def _off_channel_shape(g: GraphState, out: Sequence[int]) -> tuple[int, ...]:
    """A constant shape that varies along N, H or W of an NCHW result, or would grow
    it (rank 5) when those are all 1."""
    options = [shape for shape, dim in (((out[3],), out[3]), ((out[2], 1), out[2]), ((out[0], 1, 1, 1), out[0])) if dim > 1]
    return g.choice(options) if options else (1, 1, 1, 1, 1)


def conv_scale_chain(
    *,
    variants: Sequence[str] = ("exact", "second_user", "not_per_channel", "dynamic_scale"),
    add: bool | None = None,
) -> Pattern:
    """Conv2D -> Mul by a per-channel constant ([C, 1, 1], [1, C, 1, 1] or a scalar),
    then (with `add`, or at random) Add of one: Caffe's Scale as exported, which
    ConvScaleFusionPass folds into the conv. `dynamic_scale`: the Mul's [C, 1, 1]
    operand is a graph input."""

    def build(g: GraphState) -> None:
        variant = g.choice(variants)
        x = g.pick(rank=4)
        with g.site("conv_scale_chain", variant):
            conv = emit_conv2d(g, x)
            out, dt = g.shape_of(conv), g.dtype_of(conv)
            if variant == "dynamic_scale":
                s = g.input((out[1], 1, 1), dt, low=0.5, high=1.5)
            else:
                shape = _off_channel_shape(g, out) if variant == "not_per_channel" else _channel_shape(g, out)
                s = g.random_weight(shape, low=-1.5, high=1.5, away_from_zero=0.5, dtype=dt)
            y = g.op(MulOp, [conv, s] if g.flag() else [s, conv], bound=1.5 * g.bound(conv))
            if add if add is not None else g.flag():
                t = g.random_weight(_channel_shape(g, out), low=-0.5, high=0.5, dtype=dt)
                g.op(AddOp, [y, t] if g.flag() else [t, y], bound=g.bound(y) + 0.5)
        if variant == "second_user":
            second_user(g, conv.y)

    return build


def conv_bias_add(*, variants: Sequence[str] = ("exact", "second_user", "has_bias", "not_per_channel")) -> Pattern:
    """Conv2D without bias -> Add of a per-channel constant, which
    AABiasaddConvFusion makes the conv's bias. `has_bias`: the conv has one already."""

    def build(g: GraphState) -> None:
        variant = g.choice(variants)
        x = g.pick(rank=4)
        with g.site("conv_bias_add", variant):
            conv = emit_conv2d(g, x, bias=variant == "has_bias")
            out, dt = g.shape_of(conv), g.dtype_of(conv)
            shape = _off_channel_shape(g, out) if variant == "not_per_channel" else _channel_shape(g, out)
            b = g.random_weight(shape, low=-0.5, high=0.5, dtype=dt)
            g.op(AddOp, [conv, b] if g.flag() else [b, conv], bound=g.bound(conv) + 0.5)
        if variant == "second_user":
            second_user(g, conv.y)

    return build


def conv_covering_input(*, variants: Sequence[str] = ("exact", "padded", "grouped")) -> Pattern:
    """A Conv2D whose kernel is its input's whole H x W (a fully connected layer as
    exported), random strides, dilation where the kernel is 1: what
    ConvToFullyConnectionFusionPass turns into a FullyConnection. `padded` (one pad
    of 1) and `grouped` (depthwise; `padded` when C is 1) are not one."""

    def build(g: GraphState) -> None:
        variant = g.choice(variants)
        x = g.pick(rank=4)
        (_, c, h, w), dt = g.shape_of(x), g.dtype_of(x)
        if variant == "grouped" and c == 1:
            variant = "padded"
        groups = c if variant == "grouped" else 1
        pads = [0, 0, 0, 0]
        if variant == "padded":
            pads[g.integer(0, 3)] = 1
        dilations = [g.integer(1, 2) if k == 1 else 1 for k in (h, w)]
        cout = groups * g.integer(1, 3)
        fan_in = c // groups * h * w
        scale = 1 / math.sqrt(fan_in)
        with g.site("conv_covering_input", variant):
            operands = [x, g.random_weight((cout, c // groups, h, w), low=-scale, high=scale, dtype=dt)]
            if g.flag():
                operands.append(g.random_weight((cout,), low=-0.5, high=0.5, dtype=dt))
            g.op(
                Conv2DOp, operands, bound=g.bound(x) * math.sqrt(fan_in) + 0.5,
                strides=(1, 1, g.integer(1, 2), g.integer(1, 2)), pads=pads, dilations=(1, 1, *dilations), groups=groups,
            )

    return build


def gemm_chain(*, variants: Sequence[str] = ("exact", "scaled_product", "dynamic_scaled_c")) -> Pattern:
    """ONNX Gemm as GemmToMatmulFusionPass takes it: alpha 1, transposes at random,
    no c, or c of shape [N], [1, N], [M, N], [M, 1] or a scalar with beta 1, 0 or
    0.5. `scaled_product`: alpha is not 1; `dynamic_scaled_c`: beta 0.5 on a c that
    is a graph input."""

    def build(g: GraphState) -> None:
        variant = g.choice(variants)
        x = g.pick(rank=2)
        (a, b), dt = g.shape_of(x), g.dtype_of(x)
        ta, tb = g.flag(), g.flag()
        m, k = (b, a) if ta else (a, b)
        n = g.integer(1, max(1, min(g.max_dim, g.max_elements // m)))
        scale = 1 / math.sqrt(k)
        alpha = g.choice([0.5, 2.0]) if variant == "scaled_product" else 1.0
        beta = 1.0
        with g.site("gemm_chain", variant):
            operands = [x, g.random_weight((n, k) if tb else (k, n), low=-scale, high=scale, dtype=dt)]
            if variant == "dynamic_scaled_c":
                operands.append(g.input(g.choice([(n,), (m, n)]), dt, low=-0.5, high=0.5))
                beta = 0.5
            elif g.integer(0, 4):
                shape = g.choice([(n,), (1, n), (m, n), (m, 1), (), (1,)])
                operands.append(g.random_weight(shape, low=-0.5, high=0.5, dtype=dt))
                beta = g.choice([1.0, 0.0, 0.5])
            bound = alpha * g.bound(x) * math.sqrt(k) + 0.5
            g.op(GemmOp, operands, bound=bound, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb)

    return build


def _permutation(g: GraphState, rank: int, *, moving: bool = False) -> list[int]:
    """A permutation of range(rank); with `moving`, not the identity (rank >= 2)."""
    perm = list(g.draw(st.permutations(range(rank))))
    if moving and perm == sorted(perm):
        perm = perm[1:] + perm[:1]
    return perm


def _unmoved(g: GraphState, *, made_by: tuple[type, ...], min_rank: int = 1) -> SSAValue:
    """A value for a chain that must not extend another: one not made by `made_by`
    ops (a new input if the graph has none)."""
    x = g.pick(min_rank=min_rank, where=lambda v: not isinstance(v.owner, made_by))
    return x if x is not None else g.input(g.shape(g.integer(min_rank, g.max_rank)))


_LAYOUT_OPS = (ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp, TransposeOp)


def transpose_reshape_pair(*, variants: Sequence[str] = ("exact", "second_user")) -> Pattern:
    """Transpose -> Reshape or Reshape -> Transpose (attention's head split and
    merge), which TransposeReshapeFusionPass makes one ConfusionTransposeD."""

    def build(g: GraphState) -> None:
        variant = g.choice(variants)
        x = _unmoved(g, made_by=_LAYOUT_OPS, min_rank=2)
        with g.site("transpose_reshape_pair", variant):
            if g.flag():
                first = g.op(TransposeOp, [x], perm=_permutation(g, len(g.shape_of(x)))).y
                reshape_to_rank(g, first, g.integer(1, g.max_rank))
            else:
                first = reshape_to_rank(g, x, g.integer(1, g.max_rank))
                g.op(TransposeOp, [first], perm=_permutation(g, len(g.shape_of(first))))
        if variant == "second_user":
            second_user(g, first)

    return build


def reshape_transpose_chain(*, variants: Sequence[str] = ("exact", "second_user")) -> Pattern:
    """What RedundantReshapeTransposeFusionPass removes: a Reshape (Flatten,
    Squeeze, Unsqueeze) then a Reshape, a Transpose then a Transpose (composing or
    cancelling), a Reshape to the same shape (with a -1 or not), a Transpose by
    the identity. `second_user`: the middle of a two-op chain (whose ops each
    change their input) has another consumer."""

    def build(g: GraphState) -> None:
        variant = g.choice(variants)
        kinds = ["reshape_reshape", "transpose_transpose"]
        kind = g.choice(kinds if variant == "second_user" else [*kinds, "same_shape", "identity_perm"])
        x = _unmoved(g, made_by=_LAYOUT_OPS, min_rank=2)
        s = g.shape_of(x)
        rank = len(s)
        with g.site("reshape_transpose_chain", variant):
            if kind == "reshape_reshape":
                first = emit_reshape(g, x) if variant == "exact" else g.op(ReshapeOp, [x], shape=[-1]).y
                if variant == "exact" and g.flag():
                    reshape_to_rank(g, first, g.integer(1, g.max_rank))
                else:
                    g.op(ReshapeOp, [first], shape=list(s) if variant == "exact" or g.flag() else [-1, 1])
            elif kind == "transpose_transpose":
                p1 = _permutation(g, rank, moving=variant != "exact")
                first = g.op(TransposeOp, [x], perm=p1).y
                undo = [p1.index(i) for i in range(rank)]
                p2 = undo if variant == "exact" and g.flag() else _permutation(g, rank, moving=variant != "exact")
                g.op(TransposeOp, [first], perm=p2)
            elif kind == "same_shape":
                g.op(ReshapeOp, [x], shape=[-1 if i == 0 and g.flag() else d for i, d in enumerate(s)])
            else:
                g.op(TransposeOp, [x], perm=list(range(rank)))
        if variant == "second_user":
            second_user(g, first)

    return build


def cast_chain(*, variants: Sequence[str] = ("exact", "narrowing")) -> Pattern:
    """Cast A -> B -> C through a B that holds every value of A (float16 and
    bfloat16 through float32 or float64, float32 through float64), which
    CastCastFusionPass shortens to A -> C, or removes when C is A. `narrowing`:
    B loses range or precision (float32 to float16 or bfloat16, float16 <-> bfloat16)."""
    wider = {f16: (f32, f64), bf16: (f32, f64), f32: (f64,)}
    narrower = {f32: (f16, bf16), f16: (bf16,), bf16: (f16,)}

    def build(g: GraphState) -> None:
        variant = g.choice(variants)
        x = _unmoved(g, made_by=(CastOp,))
        src = g.dtype_of(x)
        mid = g.choice((wider if variant == "exact" else narrower)[src])
        with g.site("cast_chain", variant):
            y = g.op(CastOp, [x], dst_type=mid)
            g.op(CastOp, [y], dst_type=g.choice([src, f32, f16, bf16]))

    return build


def constant_subgraph(*, variants: Sequence[str] = ("exact", "runtime_operand")) -> Pattern:
    """One to three ops on weights only (Neg, Tanh, Mul by a scalar, Add of a
    weight, a Cast round trip, a Transpose and its inverse), added to a runtime
    value: constant folding evaluates the chain at compile time. `runtime_operand`:
    the same chain on a graph input, which it must not fold."""

    def build(g: GraphState) -> None:
        variant = g.choice(variants)
        x = g.pick()
        s, dt = g.shape_of(x), g.dtype_of(x)
        shape = s[len(s) - g.integer(0, len(s)) :]
        with g.site("constant_subgraph", variant):
            if variant == "exact":
                v = g.random_weight(shape, dtype=dt)
            else:
                v = g.input(shape, dt, low=-1.0, high=1.0)
            for _ in range(g.integer(1, 3)):
                step = g.choice(["neg", "tanh", "mul", "add", "cast", "transpose"])
                if step == "neg":
                    v = g.op(NegOp, [v]).y
                elif step == "tanh":
                    v = g.op(TanhOp, [v], bound=1.0).y
                elif step == "mul":
                    v = g.op(MulOp, [v, g.constant(g.choice([0.5, -2.0]), dtype=dt)], bound=2 * g.bound(v)).y
                elif step == "add":
                    v = g.op(AddOp, [v, g.random_weight(shape, dtype=dt)], bound=g.bound(v) + 1.0).y
                elif step == "cast":
                    v = g.op(CastOp, [g.op(CastOp, [v], dst_type=f64).y], dst_type=dt).y
                elif len(shape) >= 2:
                    perm = _permutation(g, len(shape))
                    moved = g.op(TransposeOp, [v], perm=perm).y
                    v = g.op(TransposeOp, [moved], perm=[perm.index(i) for i in range(len(shape))]).y
            g.op(AddOp, [x, v] if g.flag() else [v, x], bound=g.bound(x) + g.bound(v))

    return build
