"""Hypothesis strategies: random `ascend_graph` graphs, and the patterns passes match.

`graphs()` draws a `GraphCase`: a verified module of a few small ops (elementwise
with broadcasting, conv2d, matmuls, reductions, softmax, normalisations, pooling,
shape ops, casts), with branches, residual adds and several outputs. Every value
stays finite and of bounded magnitude (each value carries a bound, and an op that
would exceed `limit` is not chosen), and no op is discontinuous in its float
inputs (no floor, sign, comparisons or float-to-int casts), so a pass that
reorders arithmetic changes outputs by rounding only.

A pattern is a function of a `GraphState` that appends ops to the graph; pass it
to `graphs(with_pattern=...)` and it is placed among the random ops, fed by their
values and feeding later ones. Built inside `g.site(...)`, it is recorded in
`case.sites` and its intermediates are kept from other consumers. A pattern for a
hypothetical ReluAddFusionPass, with a near miss, takes a few lines:

    def add_relu(*, variants=("exact", "second_user")) -> Pattern:
        def build(g: GraphState) -> None:
            variant = g.choice(variants)
            x = g.pick(min_rank=2)
            with g.site("add_relu", variant):
                s = g.op(AddOp, [x, g.random_weight(g.shape_of(x)[-1:], dtype=g.dtype_of(x))])
                g.op(ReluOp, [s])
            if variant == "second_user":
                second_user(g, s)
        return build

    @given(graphs(with_pattern=add_relu()))
    def test_add_relu_fusion(case): ...
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from hypothesis import strategies as st
from hypothesis.strategies import DrawFn, SearchStrategy
from xdsl.dialects.builtin import TensorType, bf16, f16, f32, f64
from xdsl.ir import Attribute, Operation, SSAValue

from dialects import shapes
from dialects.ascend_graph import (
    AbsOp,
    AddOp,
    AvgPoolOp,
    BatchMatMulOp,
    BatchNormOp,
    CastOp,
    ClipByValueOp,
    ConcatOp,
    Conv2DOp,
    CosOp,
    DataOp,
    DivOp,
    EluOp,
    ErfOp,
    ExpandOp,
    ExpOp,
    FlattenOp,
    GatherOp,
    GeluOp,
    GemmOp,
    GlobalAveragePoolOp,
    GlobalMaxPoolOp,
    HardSigmoidOp,
    HardSwishOp,
    IdentityOp,
    LayerNormOp,
    LeakyReluOp,
    LogOp,
    LogSoftmaxOp,
    MatMulV2Op,
    MaximumOp,
    MaxPoolOp,
    MinimumOp,
    MulOp,
    NegOp,
    PadOp,
    PowOp,
    PReluOp,
    ReciprocalOp,
    ReduceMaxOp,
    ReduceMeanOp,
    ReduceMinOp,
    ReduceSumOp,
    ReluOp,
    ReshapeOp,
    RsqrtOp,
    SeluOp,
    SigmoidOp,
    SinOp,
    SoftmaxOp,
    SoftplusOp,
    SoftsignOp,
    SplitOp,
    SplitVOp,
    SqrtOp,
    SqueezeOp,
    StridedSliceOp,
    SubOp,
    TanhOp,
    TileOp,
    TransposeOp,
    UnsqueezeOp,
    dtype_of,
    shape_of,
)
from ge.testing.builder import GraphBuilder, GraphCase, element_type

Pattern = Callable[["GraphState"], object]
"""Appends one pattern instance (exact or a near miss) to a graph being drawn."""

OpKind = Callable[["GraphState"], bool]
"""Appends random ops of one kind; False when the graph offers no place for them."""

FLOAT_TYPES: tuple[Attribute, ...] = (f32, f16, bf16)


class GraphState(GraphBuilder):
    """A `GraphBuilder` that draws its choices from hypothesis, within size limits."""

    def __init__(
        self,
        draw: DrawFn,
        seed: int = 0,
        *,
        dtype: Attribute = f32,
        dtypes: Sequence[Attribute] = (f32,),
        max_inputs: int = 3,
        max_rank: int = 4,
        max_dim: int = 6,
        max_elements: int = 256,
        limit: float = 1e3,
    ):
        super().__init__(seed, dtype=dtype)
        self._draw = draw
        self.dtypes = tuple(dtypes)
        self.max_inputs = max_inputs
        self.max_rank = max_rank
        self.max_dim = max_dim
        self.max_elements = max_elements
        self.limit = limit

    # ------------------------------------------------------------------- drawing

    def draw(self, strategy: SearchStrategy):
        return self._draw(strategy)

    def integer(self, low: int, high: int) -> int:
        return self._draw(st.integers(low, high))

    def choice(self, options: Sequence):
        """One of `options`; hypothesis shrinks towards the first."""
        return self._draw(st.sampled_from(list(options)))

    def flag(self) -> bool:
        return self._draw(st.booleans())

    # -------------------------------------------------------------------- shapes

    @staticmethod
    def shape_of(value: SSAValue | Operation) -> tuple[int, ...]:
        return shape_of(SSAValue.get(value).type)

    @staticmethod
    def dtype_of(value: SSAValue | Operation) -> Attribute:
        return dtype_of(SSAValue.get(value).type)

    def fits(self, shape: Sequence[int]) -> bool:
        return shapes.numel(shape) <= self.max_elements

    def shape(self, rank: int | None = None, *, min_dim: int = 1) -> tuple[int, ...]:
        """A random shape of at most `max_elements` elements."""
        if rank is None:
            rank = self.integer(1, self.max_rank)
        dims: list[int] = []
        budget = self.max_elements
        for i in range(rank):
            rest = min_dim ** (rank - i - 1)
            top = max(min_dim, min(self.max_dim, budget // rest))
            dims.append(self.integer(min_dim, top))
            budget //= dims[-1]
        return tuple(dims)

    # -------------------------------------------------------------------- values

    @property
    def can_add_input(self) -> bool:
        return len(self.specs) < self.max_inputs

    def pick(
        self,
        *,
        rank: int | None = None,
        min_rank: int = 1,
        max_rank: int | None = None,
        min_dim: int = 1,
        dtype: Attribute | None = None,
        where: Callable[[SSAValue], bool] | None = None,
        create: bool = True,
    ) -> SSAValue | None:
        """A value for the next op: a recent one by preference, else a new input.

        Candidates are float values of the pool matching the constraints; with
        `create`, a new input of a matching shape is made when none matches (and
        sometimes anyway, while there is room for inputs). A `where` test limits
        the choice to the pool: no input is made for it. None if nothing fits.
        An explicit rank may exceed `max_rank`: patterns take the ranks they need.
        """
        low = rank if rank is not None else min_rank
        high = rank if rank is not None else max(low, max_rank or self.max_rank)

        def fits(v: SSAValue) -> bool:
            t = v.type
            if not isinstance(t, TensorType) or t.element_type not in FLOAT_TYPES:
                return False
            s = shape_of(t)
            return (
                low <= len(s) <= high
                and min(s, default=min_dim) >= min_dim
                and (dtype is None or t.element_type == dtype)
                and (where is None or where(v))
            )

        candidates = [v for v in reversed(self.pool) if fits(v)]
        fresh = create and where is None and (not candidates or (self.can_add_input and self.integer(0, 3) == 3))
        if fresh:
            return self.input(self.shape(self.integer(low, high), min_dim=min_dim), dtype or self.dtype)
        return candidates[self.integer(0, len(candidates) - 1)] if candidates else None


# ---------------------------------------------------------------- emitting one op


def _spell_axis(g: GraphState, axis: int, rank: int) -> int:
    """An axis as ONNX may write it: positive or negative."""
    return axis - rank if g.flag() else axis


def _broadcastable_shape(g: GraphState, shape: Sequence[int]) -> tuple[int, ...]:
    """A trailing part of `shape` with some dims set to 1: broadcasts onto `shape`."""
    k = g.integer(0, len(shape))
    return tuple(1 if g.flag() else d for d in shape[len(shape) - k :])


def _positive(g: GraphState, x: SSAValue) -> tuple[SSAValue, float]:
    """|x| + c with c >= 0.5: a safe operand for sqrt, log, reciprocal and division."""
    c = g.choice([1.0, 0.5])
    a = g.op(AbsOp, [x])
    return g.op(AddOp, [a, g.constant(c, dtype=g.dtype_of(x))], bound=g.bound(x) + c).y, c


_UNARY: tuple[tuple[type, Callable[[float], float]], ...] = (
    (ReluOp, lambda b: b),
    (TanhOp, lambda b: 1.0),
    (SigmoidOp, lambda b: 1.0),
    (AbsOp, lambda b: b),
    (NegOp, lambda b: b),
    (ErfOp, lambda b: 1.0),
    (GeluOp, lambda b: b),
    (LeakyReluOp, lambda b: b),
    (EluOp, lambda b: max(b, 1.0)),
    (SeluOp, lambda b: 1.76 * max(b, 1.0)),
    (SoftplusOp, lambda b: b + 1.0),
    (SoftsignOp, lambda b: 1.0),
    (HardSwishOp, lambda b: b),
    (HardSigmoidOp, lambda b: 1.0),
    (ClipByValueOp, lambda b: b),
    (SinOp, lambda b: 1.0),
    (CosOp, lambda b: 1.0),
    (IdentityOp, lambda b: b),
    (ExpOp, lambda b: math.exp(min(b, 50.0))),
)
_POSITIVE_UNARY = (SqrtOp, RsqrtOp, LogOp, ReciprocalOp)


def _unary_props(g: GraphState, cls: type) -> dict[str, object]:
    if cls is GeluOp:
        mode = g.choice([None, "none", "tanh"])
        return {} if mode is None else {"approximate": mode}
    if cls is LeakyReluOp:
        return {"negative_slope": g.choice([0.01, 0.2])}
    if cls is EluOp:
        return {"alpha": g.choice([1.0, 0.5])}
    if cls is SeluOp:
        return {"alpha": 1.6732632423543772, "gamma": 1.0507009873554805}
    if cls is HardSigmoidOp:
        return {"alpha": g.choice([0.2, 1 / 6]), "beta": 0.5}
    if cls is ClipByValueOp:
        return g.choice([{"min": -1.0, "max": 1.0}, {"min": 0.0, "max": 6.0}, {"max": 0.5}, {"min": -0.5}])
    return {}


def emit_unary(g: GraphState, x: SSAValue) -> SSAValue:
    """A random elementwise float function of x whose result stays within `limit`."""
    b = g.bound(x)
    options = [(cls, f) for cls, f in _UNARY if f(b) <= g.limit]
    if g.integer(0, 4) == 4:
        cls = g.choice(_POSITIVE_UNARY)
        p, c = _positive(g, x)
        bound = {SqrtOp: math.sqrt(b + c), LogOp: max(math.log(b + c), -math.log(c))}.get(cls, 1 / c)
        return g.op(cls, [p], bound=bound).results[0]
    cls, f = g.choice(options)
    return g.op(cls, [x], bound=f(b), **_unary_props(g, cls)).results[0]


def emit_binary(g: GraphState, x: SSAValue) -> SSAValue:
    """x op y, y another value, a weight or a scalar, broadcast either way."""
    dt, b = g.dtype_of(x), g.bound(x)
    cls = g.choice([AddOp, MulOp, SubOp, MaximumOp, MinimumOp, DivOp, PowOp, PReluOp])
    if cls is DivOp:
        if g.flag():
            y = g.random_weight(_broadcastable_shape(g, g.shape_of(x)), low=-1.5, high=1.5, away_from_zero=0.5, dtype=dt)
            return g.op(DivOp, [x, y], bound=2 * b).y
        other = g.pick(dtype=dt, where=lambda v: _broadcasts(g, x, v))
        p, c = _positive(g, x if other is None else other)
        return g.op(DivOp, [x, p], bound=b / c).y
    if cls is PowOp:
        e = g.choice([2.0, 3.0])
        if b**e > g.limit:
            return g.op(TanhOp, [x], bound=1.0).y
        return g.op(PowOp, [x, g.constant(e, g.choice([(), (1,)]), dt)], bound=b**e).y
    if cls is PReluOp:
        slope = g.random_weight(_broadcastable_shape(g, g.shape_of(x)), low=0.0, high=0.5, dtype=dt)
        return g.op(PReluOp, [x, slope], bound=b).y
    source = g.choice(["weight", "value", "scalar"])
    y = None
    if source == "value":
        y = g.pick(dtype=dt, where=lambda v: _broadcasts(g, x, v))
    if y is None and source == "scalar":
        y = g.constant(g.choice([0.5, -1.0, 2.0]), g.choice([(), (1,)]), dt)
    if y is None:
        y = g.random_weight(_broadcastable_shape(g, g.shape_of(x)), dtype=dt)
    by = g.bound(y)
    bound = {AddOp: b + by, SubOp: b + by, MulOp: b * by}.get(cls, max(b, by))
    if bound > g.limit:
        return g.op(TanhOp, [x], bound=1.0).y
    operands = [y, x] if g.flag() else [x, y]
    return g.op(cls, operands, bound=bound).y


def _broadcasts(g: GraphState, x: SSAValue, v: SSAValue) -> bool:
    try:
        return g.fits(shapes.broadcast(g.shape_of(x), g.shape_of(v)))
    except shapes.ShapeError:
        return False


def _window(g: GraphState, size: int, *, dilate: bool, pad_with_dilation: bool) -> tuple[int, int, int, int, int]:
    """(kernel, stride, dilation, pad_before, pad_after) that fit an axis of `size`.

    Pads stay below the kernel (as ONNX pooling requires), so no window lies wholly
    in the padding; pooling asks for no padding with dilation for the same reason.
    """
    k = g.integer(1, 3)
    d = g.integer(1, 2) if dilate and k > 1 else 1
    s = g.integer(1, 2)
    before, after = g.integer(0, k - 1), g.integer(0, k - 1)
    if d > 1 and not pad_with_dilation:
        before = after = 0
    if d * (k - 1) + 1 > size + before + after:
        d, before, after = 1, k - 1, k - 1
    return k, s, d, before, after


def emit_conv2d(
    g: GraphState,
    x: SSAValue,
    *,
    bias: bool | None = None,
    same: bool = False,
    dynamic_filter: bool = False,
) -> Conv2DOp:
    """Conv2D on NCHW x: random groups, kernel, stride, padding and dilation.

    `same` keeps the shape (3x3 or 1x1, stride 1, Cout = C) for residual blocks;
    `dynamic_filter` takes the filter from a new graph input instead of a weight.
    """
    n, c, h, w = g.shape_of(x)
    dt = g.dtype_of(x)
    if same:
        groups, cout = 1, c
        k = g.choice([1, 3])
        kh = kw = k
        strides, dilations, pads = (1, 1), (1, 1), [k // 2] * 4
    else:
        groups = g.choice([d for d in range(1, c + 1) if c % d == 0])
        kh, sh, dh, pt, pb = _window(g, h, dilate=True, pad_with_dilation=True)
        kw, sw, dw, pl, pr = _window(g, w, dilate=True, pad_with_dilation=True)
        strides, dilations, pads = (sh, sw), (dh, dw), [pt, pb, pl, pr]
        ho = shapes.window_out(h, kh, sh, pt, pb, dh)
        wo = shapes.window_out(w, kw, sw, pl, pr, dw)
        room = g.max_elements // (n * ho * wo)
        if room < groups:  # too large: fall back to a 1x1 convolution
            groups, kh, kw, strides, dilations, pads = 1, 1, 1, (1, 1), (1, 1), [0] * 4
            room = g.max_elements // (n * h * w)
        cout = groups * g.integer(1, max(1, min(room, 8) // groups))
    fan_in = c // groups * kh * kw
    scale = 1 / math.sqrt(fan_in)
    fshape = (cout, c // groups, kh, kw)
    if dynamic_filter:
        filt = g.input(fshape, dt, low=-scale, high=scale)
    else:
        filt = g.random_weight(fshape, low=-scale, high=scale, dtype=dt)
    operands = [x, filt]
    bound = g.bound(x) * math.sqrt(fan_in)
    if bias if bias is not None else g.flag():
        operands.append(g.random_weight((cout,), low=-0.5, high=0.5, dtype=dt))
        bound += 0.5
    return g.op(
        Conv2DOp, operands, bound=bound,
        strides=(1, 1, *strides), pads=pads, dilations=(1, 1, *dilations), groups=groups,
    )


def emit_batch_norm(g: GraphState, x: SSAValue, *, epsilon: float | None = None) -> BatchNormOp:
    """Inference BatchNorm over axis 1 with variance in [0.5, 2] and scales away from 0."""
    c, dt = g.shape_of(x)[1], g.dtype_of(x)
    operands = [
        x,
        g.random_weight((c,), low=-1.5, high=1.5, away_from_zero=0.5, dtype=dt),
        g.random_weight((c,), low=-0.5, high=0.5, dtype=dt),
        g.random_weight((c,), low=-0.5, high=0.5, dtype=dt),
        g.random_weight((c,), low=0.5, high=2.0, dtype=dt),
    ]
    eps = epsilon if epsilon is not None else g.choice([1e-5, 1e-3])
    return g.op(BatchNormOp, operands, bound=(g.bound(x) + 0.5) * 1.5 / math.sqrt(0.5) + 0.5, epsilon=eps)


def emit_layer_norm(g: GraphState, x: SSAValue, *, epsilon: float | None = None) -> LayerNormOp:
    """LayerNorm from a random axis on, gamma over a trailing part, beta optional."""
    s, dt = g.shape_of(x), g.dtype_of(x)
    axis = g.integer(0, len(s) - 1)
    normalised = s[axis:]
    gshape = normalised[g.integer(0, len(normalised) - 1) :]
    operands = [x, g.random_weight(gshape, low=-1.5, high=1.5, away_from_zero=0.5, dtype=dt)]
    if g.flag():
        operands.append(g.random_weight(gshape, low=-0.5, high=0.5, dtype=dt))
    eps = epsilon if epsilon is not None else g.choice([1e-5, 1e-3])
    bound = 1.5 * math.sqrt(shapes.numel(normalised)) + 0.5
    return g.op(
        LayerNormOp, operands, bound=bound, begin_norm_axis=_spell_axis(g, axis, len(s)), epsilon=eps
    )


def emit_matmul(g: GraphState, x: SSAValue, *, bias: bool | None = None) -> MatMulV2Op:
    """MatMulV2 of a 2-D x by a weight, with random transposes and optional bias."""
    (a, b), dt = g.shape_of(x), g.dtype_of(x)
    t1, t2 = g.flag(), g.flag()
    m, k = (b, a) if t1 else (a, b)
    n = g.integer(1, max(1, min(g.max_dim, g.max_elements // m)))
    scale = 1 / math.sqrt(k)
    w = g.random_weight((n, k) if t2 else (k, n), low=-scale, high=scale, dtype=dt)
    operands = [x, w]
    bound = g.bound(x) * math.sqrt(k)
    if bias if bias is not None else g.flag():
        operands.append(g.random_weight((n,), low=-0.5, high=0.5, dtype=dt))
        bound += 0.5
    return g.op(MatMulV2Op, operands, bound=bound, transpose_x1=t1, transpose_x2=t2)


def emit_batch_matmul(g: GraphState, x: SSAValue, *, bias: bool | None = None) -> BatchMatMulOp:
    """BatchMatMulV2 of x (rank >= 2) by another value when one fits, else by a
    weight with or without batch dims."""
    s, dt = g.shape_of(x), g.dtype_of(x)
    adj1 = g.flag()
    k, m = (s[-2], s[-1]) if adj1 else (s[-1], s[-2])
    batch = s[:-2]
    adj2 = g.flag()

    def fits(v: SSAValue) -> bool:
        t = g.shape_of(v)
        if len(t) < 2 or t[-1 if adj2 else -2] != k:
            return False
        try:
            out = shapes.broadcast(batch, t[:-2]) + (m, t[-2 if adj2 else -1])
        except shapes.ShapeError:
            return False
        return g.fits(out)

    y = g.pick(min_rank=2, dtype=dt, where=fits) if g.flag() else None
    if y is not None and g.bound(x) * g.bound(y) * k + 0.5 <= g.limit:
        bound = g.bound(x) * g.bound(y) * k
    else:
        n = g.integer(1, max(1, min(g.max_dim, g.max_elements // max(1, shapes.numel(batch) * m))))
        wbatch = tuple(1 if g.flag() else d for d in batch) if g.flag() else ()
        scale = 1 / math.sqrt(k)
        y = g.random_weight(wbatch + ((n, k) if adj2 else (k, n)), low=-scale, high=scale, dtype=dt)
        bound = g.bound(x) * math.sqrt(k)
    n = g.shape_of(y)[-2 if adj2 else -1]
    operands = [x, y]
    if bias if bias is not None else g.integer(0, 3) == 3:
        operands.append(g.random_weight((n,), low=-0.5, high=0.5, dtype=dt))
        bound += 0.5
    return g.op(BatchMatMulOp, operands, bound=bound, adj_x1=adj1, adj_x2=adj2)


def emit_gemm(g: GraphState, x: SSAValue) -> GemmOp:
    """Gemm: alpha * op(x) @ op(w) + beta * c, c optional and broadcast."""
    (a, b), dt = g.shape_of(x), g.dtype_of(x)
    ta, tb = g.flag(), g.flag()
    m, k = (b, a) if ta else (a, b)
    n = g.integer(1, max(1, min(g.max_dim, g.max_elements // m)))
    scale = 1 / math.sqrt(k)
    operands = [x, g.random_weight((n, k) if tb else (k, n), low=-scale, high=scale, dtype=dt)]
    if g.flag():
        operands.append(g.random_weight(g.choice([(n,), (m, n), (1, n), (m, 1)]), low=-0.5, high=0.5, dtype=dt))
    alpha, beta = g.choice([1.0, 0.5, 2.0]), g.choice([1.0, 0.5])
    bound = alpha * g.bound(x) * math.sqrt(k) + beta * 0.5
    return g.op(GemmOp, operands, bound=bound, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb)


def emit_reduce(g: GraphState, x: SSAValue) -> SSAValue:
    s = g.shape_of(x)
    axes = g.draw(st.lists(st.integers(0, len(s) - 1), min_size=1, max_size=len(s), unique=True))
    keep = g.flag() or len(axes) == len(s)
    cls = g.choice([ReduceMeanOp, ReduceSumOp, ReduceMaxOp, ReduceMinOp])
    count = shapes.numel([s[a] for a in axes])
    bound = g.bound(x) * (count if cls is ReduceSumOp else 1)
    if bound > g.limit:
        cls, bound = ReduceMeanOp, g.bound(x)
    return g.op(cls, [x], bound=bound, axes=[_spell_axis(g, a, len(s)) for a in axes], keep_dims=keep).y


def emit_softmax(g: GraphState, x: SSAValue) -> SSAValue:
    s = g.shape_of(x)
    axis = g.integer(0, len(s) - 1)
    cls = g.choice([SoftmaxOp, LogSoftmaxOp])
    bound = 1.0 if cls is SoftmaxOp else 2 * g.bound(x) + math.log(s[axis])
    return g.op(cls, [x], bound=bound, axes=[_spell_axis(g, axis, len(s))]).y


def emit_pool(g: GraphState, x: SSAValue) -> SSAValue | None:
    """MaxPoolV3 (with dilation) or AvgPoolV2 (exclusive or not), ceil mode or not."""
    n, c, h, w = g.shape_of(x)
    cls = g.choice([MaxPoolOp, AvgPoolOp])
    dilate = cls is MaxPoolOp
    kh, sh, dh, pt, pb = _window(g, h, dilate=dilate, pad_with_dilation=False)
    kw, sw, dw, pl, pr = _window(g, w, dilate=dilate, pad_with_dilation=False)
    ceil_mode = g.flag()
    ho = shapes.window_out(h, kh, sh, pt, pb, dh, ceil_mode)
    wo = shapes.window_out(w, kw, sw, pl, pr, dw, ceil_mode)
    if not g.fits((n, c, ho, wo)):
        return None
    props: dict[str, object] = {"ksize": (kh, kw), "strides": (sh, sw), "pads": (pt, pb, pl, pr), "ceil_mode": ceil_mode}
    if cls is MaxPoolOp and (dh, dw) != (1, 1):
        props["dilations"] = (dh, dw)
    if cls is AvgPoolOp:
        props["exclusive"] = g.flag()
    return g.op(cls, [x], **props).y


def _factorise(n: int) -> list[int]:
    primes, p = [], 2
    while p * p <= n:
        while n % p == 0:
            primes.append(p)
            n //= p
        p += 1
    return primes + ([n] if n > 1 else [])


def reshape_to_rank(g: GraphState, x: SSAValue, rank: int) -> SSAValue:
    """x reshaped to a random shape of `rank` dims."""
    return g.op(ReshapeOp, [x], shape=_random_dims(g, shapes.numel(g.shape_of(x)), rank)).y


def _random_dims(g: GraphState, numel: int, rank: int) -> list[int]:
    """`rank` dims whose product is `numel`."""
    dims = [1] * rank
    for p in _factorise(numel):
        dims[g.integer(0, rank - 1)] *= p
    return dims


def emit_reshape(g: GraphState, x: SSAValue) -> SSAValue:
    """Reshape (maybe with -1), Flatten, Squeeze or Unsqueeze."""
    s = g.shape_of(x)
    kind = g.choice(["reshape", "flatten", "unsqueeze", "squeeze"])
    if kind == "flatten":
        return g.op(FlattenOp, [x], axis=g.integer(-len(s), len(s))).y
    if kind == "unsqueeze" and len(s) < g.max_rank:
        return g.op(UnsqueezeOp, [x], axes=[g.integer(-len(s) - 1, len(s))]).y
    ones = [i for i, d in enumerate(s) if d == 1]
    if kind == "squeeze" and ones and len(ones) < len(s):
        axes = g.draw(st.lists(st.sampled_from(ones), max_size=len(ones), unique=True))
        return g.op(SqueezeOp, [x], axis=axes).y
    dims = _random_dims(g, shapes.numel(s), g.integer(1, g.max_rank))
    if g.flag():
        dims[g.integer(0, len(dims) - 1)] = -1
    return g.op(ReshapeOp, [x], shape=dims).y


def emit_concat(g: GraphState, x: SSAValue) -> SSAValue | None:
    s, dt = g.shape_of(x), g.dtype_of(x)
    axis = g.integer(0, len(s) - 1)

    def matches(v: SSAValue) -> bool:
        t = g.shape_of(v)
        return len(t) == len(s) and t[:axis] + t[axis + 1 :] == s[:axis] + s[axis + 1 :]

    parts = [x]
    for _ in range(g.integer(1, 2)):
        source = g.choice(["value", "weight", "same"])
        other = g.pick(dtype=dt, where=matches) if source == "value" else None
        if other is None and source == "weight":
            other = g.random_weight(s[:axis] + (g.integer(1, 3),) + s[axis + 1 :], dtype=dt)
        parts.append(other if other is not None else x)
    total = sum(g.shape_of(p)[axis] for p in parts)
    if not g.fits(s[:axis] + (total,) + s[axis + 1 :]):
        return None
    return g.op(ConcatOp, parts, bound=max(g.bound(p) for p in parts), concat_dim=_spell_axis(g, axis, len(s))).y


def emit_split(g: GraphState, x: SSAValue) -> Operation | None:
    """SplitD into equal parts, or SplitVD into random positive sizes."""
    s = g.shape_of(x)
    axes = [i for i, d in enumerate(s) if d >= 2]
    if not axes:
        return None
    axis = g.choice(axes)
    dim = s[axis]
    spelled = _spell_axis(g, axis, len(s))
    equal = [n for n in (2, 3, 4) if dim % n == 0]
    if equal and g.flag():
        return g.op(SplitOp, [x], split_dim=spelled, num_split=g.choice(equal))
    cuts = sorted(g.draw(st.sets(st.integers(1, dim - 1), min_size=1, max_size=min(2, dim - 1))))
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, dim])]
    return g.op(SplitVOp, [x], split_dim=spelled, num_split=len(sizes), size_splits=sizes)


def emit_slice(g: GraphState, x: SSAValue) -> SSAValue:
    """StridedSliceD with normalised bounds, some strides 2 or -1."""
    begin, end, strides = [], [], []
    for d in g.shape_of(x):
        step = g.choice([1, 2, -1])
        b = g.integer(0, d - 1)
        e = g.integer(b + 1, d) if step > 0 else g.integer(-1, b - 1)
        begin.append(b)
        end.append(e)
        strides.append(step)
    return g.op(StridedSliceOp, [x], begin=begin, end=end, strides=strides).y


def emit_pad(g: GraphState, x: SSAValue) -> SSAValue | None:
    s = g.shape_of(x)
    mode = g.choice(["constant", "edge", "reflect"])
    paddings = []
    for d in s:
        top = min(2, d - 1) if mode == "reflect" else 2
        paddings += [g.integer(0, top), g.integer(0, top)] if g.flag() else [0, 0]
    out = tuple(d + paddings[2 * i] + paddings[2 * i + 1] for i, d in enumerate(s))
    if not g.fits(out):
        return None
    value = g.choice([0.0, 0.5, -1.0])
    return g.op(PadOp, [x], bound=max(g.bound(x), abs(value)), paddings=paddings, mode=mode, constant_value=value).y


def emit_cast(g: GraphState, x: SSAValue) -> SSAValue:
    """Cast to another float type the graph may use, else to a wider one and back.

    The round trip is exact: a narrowing one (float32 -> float16 -> float32) would
    let a rounding-sized change upstream flip a rounding, and fail a pass's test
    by a float16 ulp on a float32 output.
    """
    src = g.dtype_of(x)
    others = [t for t in g.dtypes if t != src]
    if others:
        return g.op(CastOp, [x], dst_type=g.choice(others)).y
    wide = g.op(CastOp, [x], publish=False, dst_type=f64 if src == f32 else f32).y
    return g.op(CastOp, [wide], dst_type=src).y


def emit_gather(g: GraphState, x: SSAValue) -> SSAValue | None:
    """GatherV2 along a random axis at constant int64 indices."""
    s = g.shape_of(x)
    axis = g.integer(0, len(s) - 1)
    ishape = g.choice([(g.integer(1, 4),), (2, g.integer(1, 2))])
    out = s[:axis] + ishape + s[axis + 1 :]
    if not g.fits(out):
        return None
    indices = g.rng.integers(0, s[axis], size=ishape).astype(np.int64)
    return g.op(GatherOp, [x, g.weight(indices)], bound=g.bound(x), axis=_spell_axis(g, axis, len(s))).y


def emit_tile(g: GraphState, x: SSAValue) -> SSAValue | None:
    """TileD by small multiples, or ExpandD of the size-1 dims (and a new leading one)."""
    s = g.shape_of(x)
    if g.flag():
        multiples = [g.choice([1, 2]) for _ in s]
        if not g.fits([d * m for d, m in zip(s, multiples)]):
            return None
        return g.op(TileOp, [x], multiples=multiples).y
    target = [g.integer(1, 3) if d == 1 else d for d in s]
    if len(s) < g.max_rank and g.flag():
        target.insert(0, g.integer(1, 2))
    if not g.fits(target):
        return None
    return g.op(ExpandOp, [x], shape=target).y


# ------------------------------------------------------------------------ op kinds


def _with(emit: Callable[[GraphState, SSAValue], object], *, rank: int | None = None, min_rank: int = 1) -> OpKind:
    """An op kind applying `emit` to a picked value of a fitting rank: one of the
    pool, a new input while there is room, else another value reshaped."""

    def kind(g: GraphState) -> bool:
        if (rank or min_rank) > g.max_rank:
            return False
        x = g.pick(rank=rank, min_rank=min_rank, create=g.can_add_input)
        if x is None:
            some = g.pick(create=False)
            x = reshape_to_rank(g, g.pool[0] if some is None else some, rank or g.integer(min_rank, g.max_rank))
        return emit(g, x) is not None

    return kind


def _branch(g: GraphState) -> bool:
    """Two consumers of one value."""
    x = g.pick(create=g.can_add_input)
    if x is None:
        return False
    emit_unary(g, x)
    g.choice([emit_unary, emit_binary, emit_softmax, emit_reduce])(g, x)
    return True


def _residual(g: GraphState) -> bool:
    """x + f(x), f shape-preserving: the skip connection of residual blocks."""
    x = g.pick(create=g.can_add_input)
    if x is None:
        return False
    y = x
    for _ in range(g.integer(1, 2)):
        options = [emit_unary, emit_softmax, lambda g, v: emit_layer_norm(g, v).y]
        if len(g.shape_of(y)) == 4:
            options.append(lambda g, v: emit_conv2d(g, v, same=True).y)
        if len(g.shape_of(y)) >= 2:
            options.append(lambda g, v: emit_batch_norm(g, v).y)
        y = g.choice(options)(g, y)
    bound = g.bound(x) + g.bound(y)
    if bound > g.limit:
        y = g.op(TanhOp, [y], bound=1.0).y
        bound = g.bound(x) + 1.0
    g.op(AddOp, [x, y] if g.flag() else [y, x], bound=bound)
    return True


OP_KINDS: dict[str, OpKind] = {
    "unary": _with(emit_unary),
    "binary": _with(emit_binary),
    "conv2d": _with(emit_conv2d, rank=4),
    "matmul": _with(emit_matmul, rank=2),
    "batch_matmul": _with(emit_batch_matmul, min_rank=2),
    "gemm": _with(emit_gemm, rank=2),
    "reduce": _with(emit_reduce),
    "softmax": _with(emit_softmax),
    "layer_norm": _with(emit_layer_norm),
    "batch_norm": _with(emit_batch_norm, min_rank=2),
    "pool": _with(emit_pool, rank=4),
    "global_pool": _with(lambda g, x: g.op(g.choice([GlobalAveragePoolOp, GlobalMaxPoolOp]), [x]), min_rank=3),
    "reshape": _with(emit_reshape),
    "transpose": _with(lambda g, x: g.op(TransposeOp, [x], perm=g.draw(st.permutations(range(len(g.shape_of(x)))))), min_rank=2),
    "concat": _with(emit_concat),
    "split": _with(emit_split),
    "slice": _with(emit_slice),
    "pad": _with(emit_pad),
    "cast": _with(emit_cast),
    "gather": _with(emit_gather),
    "tile": _with(emit_tile),
    "branch": _branch,
    "residual": _residual,
}
"""Every op kind `graphs(ops=...)` knows, by name."""

DEFAULT_OPS: tuple[str, ...] = ("unary", "binary", *OP_KINDS)
"""All kinds, elementwise ones twice as likely."""

ELEMENTWISE_OPS: tuple[str, ...] = ("unary", "binary", "branch", "residual")


# ------------------------------------------------------------------------- graphs


@st.composite
def graphs(
    draw: DrawFn,
    *,
    dtypes: Sequence[Attribute | str] = (f32,),
    ops: Sequence[str | OpKind] = DEFAULT_OPS,
    min_ops: int = 1,
    max_ops: int = 6,
    max_inputs: int = 3,
    max_rank: int = 4,
    max_dim: int = 6,
    max_elements: int = 256,
    with_pattern: Pattern | Sequence[Pattern] = (),
) -> GraphCase:
    """A random verified graph of `min_ops`..`max_ops` op kinds (each one or a few
    ops), with the patterns of `with_pattern` placed among them.

    `dtypes` are the float types values may have: the graph's type is one of them
    and casts move between them (so with several, a float32 output may carry
    float16 roundings: give such tests the narrowest type's rtol). Tensors have at most `max_rank` dims of at most
    `max_dim` and `max_elements` elements, so that a case runs in milliseconds.
    Every op result nobody consumes is an output; sometimes an intermediate is too.
    """
    patterns = [with_pattern] if callable(with_pattern) else list(with_pattern)
    if max_ops < max(min_ops, 0 if patterns else 1):
        raise ValueError(f"max_ops {max_ops} leaves no room for min_ops {min_ops} (or for any op)")
    types = [element_type(t) for t in dtypes]
    kinds = [OP_KINDS[k] if isinstance(k, str) else k for k in ops]
    g = GraphState(
        draw, draw(st.integers(0, 2**32 - 1)), dtype=draw(st.sampled_from(types)), dtypes=types,
        max_inputs=max_inputs, max_rank=max_rank, max_dim=max_dim, max_elements=max_elements,
    )
    n = draw(st.integers(min_ops, max_ops))
    slots = sorted(draw(st.integers(0, n)) for _ in patterns)
    g.input(g.shape())
    for step in range(n + 1):
        while slots and slots[0] == step:
            slots.pop(0)
            patterns.pop(0)(g)
        if step < n and not g.choice(kinds)(g):
            OP_KINDS["unary"](g)
    used = [v for v in g.pool if v.uses and not isinstance(v.owner, DataOp)]
    if used and g.integer(0, 3) == 3:
        g.output(g.choice(used))
    return g.finish()
