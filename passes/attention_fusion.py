"""Multi-head attention graph fusion: a transformer's attention block into one op.

The block, as BERT-style and torch.nn.MultiheadAttention exports spell it: Q, K, V
projections (MatMul, bias Add); each cut into heads by Reshape and Transpose (or,
for one packed in-projection, Reshape, Unsqueeze, Transpose, Squeeze and Gather
per third, then Reshape and Transpose); Q @ K^T scaled by a constant (Mul or Div,
after the product or on Q and K before it); an optional additive mask; SoftmaxV2
over the keys; @ V; the heads merged back by Transpose and Reshape. GE's
MultiHeadAttentionFusionPass makes it one MultiHeadAttention, which keeps the
[B, H, S, S] scores and probabilities out of memory.

The many ways to cut heads are not enumerated: every Reshape, Transpose, Squeeze,
Gather, slice or split between a projection and a head matmul is replayed on an
array of element indices, which tells exactly which projection column (and row)
each head element is. The block is fused only when those are head h's columns
h*D .. h*D+D-1 of one slice of the projection, rows in BSH or SBH order, and the
merged output is the heads side by side: then the fused op computes the same
values. A packed in-projection becomes three slices of its weight and bias
(StridedSliceD ops), which is how both the BERT and the torchvision ViT blocks
fuse whole. Projections must be BatchMatMulV2 on a 3-D input and a 2-D weight,
biases 1-D (added or in the matmul's bias input); anything else is left alone.

Over dynamic dims (a fully dynamic build, `ge.dynamic`) the same tracing runs at two
probes (`PROBES`): each projection's `?` batch and sequence dims take the probe's
sizes (its feature dims must be static), every view takes its shape from its own
shape rule at those sizes, and a DynamicReshape (a head split computed from a Shape ->
Gather -> Concat chain) takes the target its chain computes from the shapes the trace
has passed (the projection's input among them). The two probes give batch and
sequence different sizes, and each other different sizes, so a split that only looks
like heads when dims coincide (batch read as sequence, a sequence cut into the head
dim) traces differently; the block fuses only when both probes find the same heads,
head size, columns, layout, scale and ops. The fused op keeps the `?` dims in its
types and its shape rule sizes it per run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from xdsl.dialects.builtin import FloatAttr, StringAttr, f32, f64
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.traits import Pure

from dialects import shapes
from dialects.ascend_graph import (
    AddOp,
    AscendOp,
    BatchMatMulOp,
    CastOp,
    ConfusionTransposeOp,
    ConstOp,
    DynamicReshapeOp,
    FlattenOp,
    GatherOp,
    IdentityOp,
    MultiHeadAttentionOp,
    ReshapeOp,
    ShapeOp,
    SoftmaxOp,
    SplitOp,
    SplitVOp,
    SqueezeOp,
    StridedSliceOp,
    TransposeOp,
    UnsqueezeOp,
    dtype_of,
    int_attr,
    ints,
    shape_of,
    tensor,
)
from ge.core.errors import GEError
from ge.core.reference import evaluate_op
from ge.core.weights import WeightStore
from passes.fusion import Band, FusionCounts, FusionPass, FusionPattern, fusion_pass
from passes.graph_match import (
    constant_value,
    erase_dead,
    new_constant,
    node_name,
    scaling,
    sole_user,
    store_around,
    user,
)

Rearrange = Callable[[np.ndarray], np.ndarray]

_RESHAPES = (ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp, IdentityOp)


Probe = tuple[int, int]
"""Sizes standing in for a projection's dynamic [d0, d1] (batch and sequence) while
its head views are traced on index arrays."""

PROBES: tuple[Probe, ...] = ((3, 5), (7, 11))
"""Two probes, each with distinct d0 and d1 (so BSH and SBH rows differ), the two apart
in every dim: a block over dynamic dims fuses only when both trace the same heads."""


def _concrete(shape: tuple[int, ...], probe: Probe | None) -> tuple[int, ...] | None:
    """`shape` with its dynamic leading dims the probe's sizes; None where a dynamic dim
    has no probe size (the feature dims must be static)."""
    if shapes.is_static(shape):
        return shape
    if probe is None or len(shape) != 3 or shape[2] == shapes.DYN:
        return None
    return tuple(p if d == shapes.DYN else d for d, p in zip(shape, (*probe, 0)))


def _ruled(op: Operation, index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Result `index` of view `op` for a first operand of `shape`, by the op's own shape
    rule (the others keep their types): a view's dims follow from its input's, so the
    trace of a dynamic graph takes the same view a run of that shape would."""
    assert isinstance(op, AscendOp)
    types = [tensor(dtype_of(op.operands[0].type), shape), *(v.type for v in op.operands[1:])]
    out = shape_of(type(op).infer_result_types(types, op.props)[index])
    if not shapes.is_static(out):
        raise shapes.ShapeError(f"{op.name} sized by values")
    return out


Known = dict[SSAValue, tuple[int, ...]]
"""The shapes of the values a trace has passed, at the probe's sizes."""

HOST_VALUE_LIMIT = 64
"""The most elements of a value a reshape target is computed from (a Shape -> Gather ->
Concat chain's vectors)."""


def _host_value(value: SSAValue, known: Known) -> np.ndarray:
    """The value of a small shape computation at the probe's sizes: a Shape reads a value
    the trace has passed (else ValueError), constants and small ops are evaluated once each."""
    values: dict[SSAValue, np.ndarray] = {}

    def evaluate(value: SSAValue) -> np.ndarray:
        if value in values:
            return values[value]
        op = value.owner
        out = shape_of(value.type)
        if isinstance(op, ShapeOp):
            if op.x not in known:
                raise ValueError("the shape of a value outside the trace")
            found = np.array(known[op.x], np.int64)
        elif not isinstance(op, Operation) or not shapes.is_static(out) or shapes.numel(out) > HOST_VALUE_LIMIT:
            raise ValueError("not a small computed value")
        elif not isinstance(op, ConstOp) and not op.has_trait(Pure):
            raise ValueError("not a pure op")
        else:
            try:
                found = evaluate_op(op, [evaluate(v) for v in op.operands])[value.index]
            except GEError as e:
                raise ValueError(str(e)) from None
        values[value] = found
        return found

    return evaluate(value)


def _reshaped(op: DynamicReshapeOp, shape: tuple[int, ...], known: Known) -> tuple[int, ...]:
    """A DynamicReshape's result for an input of `shape`, its target computed at the
    probe's sizes (ONNX's 0 copies the input's dim unless allowzero), checked against
    the dims the importer proved."""
    target = [int(d) for d in _host_value(op.shape, known).reshape(-1)]
    if not op.props.bool("allowzero"):
        target = [shape[i] if d == 0 and i < len(shape) else d for i, d in enumerate(target)]
    out = shapes.reshape(shape, target)
    if not shapes.compatible(shape_of(op.y.type), out):
        raise shapes.ShapeError(f"{list(out)} is not {shapes.fmt(shape_of(op.y.type))}")
    return out


def _view(value: SSAValue, known: Known) -> tuple[Rearrange, SSAValue] | None:
    """When `value` only rearranges the elements of one operand: how (a function on
    arrays of the operand's shape, which raises ShapeError or ValueError where that
    shape does not fit; a DynamicReshape's target read from the shapes `known` when it
    runs) and which operand."""
    if not isinstance(value, OpResult) or not value.op.operands:
        return None
    op, source, index = value.op, value.op.operands[0], value.index
    if isinstance(op, DynamicReshapeOp):
        return (lambda a: a.reshape(_reshaped(op, a.shape, known))), source
    if isinstance(op, _RESHAPES):
        return (lambda a: a.reshape(_ruled(op, index, a.shape))), source
    if isinstance(op, TransposeOp):
        perm = op.props.ints("perm")
        return (lambda a: a.transpose(perm)), source
    if isinstance(op, ConfusionTransposeOp):
        perm, target = op.props.ints("perm"), op.props.ints("shape")
        if op.props.bool("transpose_first"):
            return (lambda a: a.transpose(perm).reshape(_ruled(op, index, a.shape))), source
        return (lambda a: a.reshape(shapes.reshape(a.shape, target)).transpose(perm)), source
    if isinstance(op, GatherOp):
        return _gather(op)
    if isinstance(op, StridedSliceOp):
        bounds = list(zip(op.props.ints("begin"), op.props.ints("end"), op.props.ints("strides")))
        if any(b < 0 or e < 0 or s < 1 for b, e, s in bounds):
            return None
        return (lambda a: a[tuple(slice(b, e, s) for b, e, s in bounds)]), source
    if isinstance(op, SplitOp | SplitVOp):
        axis = shapes.norm_axis(op.props.int("split_dim"), len(shape_of(source.type)))
        sizes = [shape_of(r.type)[axis] for r in op.results]
        if shapes.DYN in sizes:
            return None
        cuts = np.cumsum(sizes)[:-1]
        return (lambda a: np.split(a, cuts, axis=axis)[index]), source
    return None


def _gather(op: GatherOp) -> tuple[Rearrange, SSAValue] | None:
    """GatherV2 at constant indices, all in range."""
    indices = constant_value(op.indices)
    if indices is None:
        return None
    axis = shapes.norm_axis(op.props.int("axis"), len(shape_of(op.x.type)))
    indices = indices.astype(np.int64)

    def take(a: np.ndarray) -> np.ndarray:
        size = a.shape[axis]
        if ((indices < -size) | (indices >= size)).any():
            raise ValueError("a gather index is out of range")
        return np.take(a, np.where(indices < 0, indices + size, indices), axis=axis)

    return take, op.x


@dataclass
class _Trace:
    """A value followed back through views (and scalings): the first value that is
    not one, its shape (a dynamic one at the probe's sizes), which of its elements
    (flat indices) the traced value holds, the ops passed (first the traced value's
    owner), and the product of the scalings."""

    root: SSAValue
    shape: tuple[int, ...]
    index: np.ndarray
    ops: list[Operation]
    scale: float


def _trace(value: SSAValue, probe: Probe | None, known: Known, *, scaled: bool) -> _Trace | None:
    """`value` followed back to its root, and forward again from the root's shape at
    `probe`'s sizes; the shapes passed go into `known` (the root's projection input
    has the root's leading dims)."""
    rearranges: list[tuple[Rearrange, SSAValue]] = []
    ops: list[Operation] = []
    scale = 1.0
    while True:
        scaled_by = scaling(value.owner) if scaled else None
        if scaled_by is not None:
            ops.append(scaled_by.op)
            scale *= scaled_by.factor
            value = scaled_by.base
            continue
        view = _view(value, known)
        if view is None:
            break
        rearrange, source = view
        assert isinstance(value, OpResult)
        rearranges.append((rearrange, value))
        ops.append(value.op)
        value = source
    shape = _concrete(shape_of(value.type), probe)
    if shape is None:
        return None
    projection = _projection(value)
    if projection is not None:
        source = projection.input
        known[source] = (*shape[:2], shape_of(source.type)[2])
        while isinstance(source.owner, CastOp):  # as the precision pass puts one before a projection
            source = source.owner.x
            known[source] = known[projection.input]
    known[value] = shape
    index = np.arange(shapes.numel(shape)).reshape(shape)
    try:
        for rearrange, result in reversed(rearranges):
            index = rearrange(index)
            known[result] = index.shape
    except (shapes.ShapeError, ValueError):
        return None
    return _Trace(value, shape, index, ops, scale)


@dataclass
class _Projection:
    """input @ weight (+ bias): weight [K, N], or [N, K] when `transposed`."""

    input: SSAValue
    weight: SSAValue
    transposed: bool
    bias: SSAValue | None
    ops: list[Operation]


def _projection(root: SSAValue) -> _Projection | None:
    """`root` as a projection of a 3-D input by a 2-D weight with an optional 1-D bias."""
    op, added, ops = root.owner, None, []
    if isinstance(op, AddOp):
        for product, bias in ((op.x1, op.x2), (op.x2, op.x1)):
            if isinstance(product.owner, BatchMatMulOp) and op.y.type == product.type:
                ops, added, op = [op], bias, product.owner
                break
    if not isinstance(op, BatchMatMulOp) or op.props.bool("adj_x1"):
        return None
    if len(shape_of(op.x1.type)) != 3 or len(shape_of(op.x2.type)) != 2:
        return None
    if added is not None and op.bias is not None:
        return None
    bias = added if added is not None else op.bias
    if bias is not None and shape_of(bias.type) != shape_of(op.y.type)[-1:]:
        return None
    return _Projection(op.x1, op.x2, op.props.bool("adj_x2"), bias, [op, *ops])


def _as_heads(index: np.ndarray, transposed: bool) -> np.ndarray | None:
    """A head matmul operand's index as [B, H, S, D] (a 3-D one is one head)."""
    if transposed:
        index = np.swapaxes(index, -1, -2)
    if index.ndim == 3:
        return index[:, None]
    return index if index.ndim == 4 else None


def _head_columns(index: np.ndarray, root: tuple[int, ...]) -> tuple[int, set[str]] | None:
    """Where a head view [B, H, S, D] starts in its projection [d0, d1, N], and the
    layouts under which element [b, h, s, d] is column start + h*D + d of row (b, s)
    (BSH: d0 = B) or (s, b) (SBH: d0 = S)."""
    batch, heads, seq, width = index.shape
    d0, d1, columns = root
    rows, cols = np.divmod(index, columns)
    start = int(cols.flat[0])
    within = (np.arange(heads)[:, None] * width + np.arange(width))[None, :, None, :]
    if start + heads * width > columns or not np.array_equal(cols, start + np.broadcast_to(within, index.shape)):
        return None
    b, s = np.arange(batch)[:, None], np.arange(seq)[None, :]
    layouts = set()
    if (d0, d1) == (batch, seq) and np.array_equal(rows, np.broadcast_to((b * seq + s)[:, None, :, None], index.shape)):
        layouts.add("BSH")
    if (d0, d1) == (seq, batch) and np.array_equal(rows, np.broadcast_to((s * batch + b)[:, None, :, None], index.shape)):
        layouts.add("SBH")
    return start, layouts


@dataclass
class _Side:
    """One of Q, K, V: its trace, projection, heads view and place in the projection."""

    trace: _Trace
    projection: _Projection
    heads: np.ndarray
    start: int
    layouts: set[str]

    @property
    def width(self) -> int:
        """The projection columns the side uses: H * D."""
        return self.heads.shape[1] * self.heads.shape[3]


def _side(value: SSAValue, transposed: bool, probe: Probe | None, known: Known, *, scaled: bool) -> _Side | None:
    trace = _trace(value, probe, known, scaled=scaled)
    projection = _projection(trace.root) if trace is not None else None
    heads = _as_heads(trace.index, transposed) if trace is not None else None
    if trace is None or projection is None or heads is None:
        return None
    found = _head_columns(heads, trace.shape)
    if found is None:
        return None
    return _Side(trace, projection, heads, *found)


def _scaled_scores(value: SSAValue) -> tuple[BatchMatMulOp, list[Operation], float] | None:
    """The Q @ K^T matmul `value` scales by constants, the scaling ops and the factor."""
    ops: list[Operation] = []
    factor = 1.0
    while (scaled_by := scaling(value.owner)) is not None:
        ops.append(scaled_by.op)
        factor *= scaled_by.factor
        value = scaled_by.base
    return (value.owner, ops, factor) if isinstance(value.owner, BatchMatMulOp) else None


@dataclass
class _Scores:
    """softmax's input: scale * (Q @ K^T) (+ mask)."""

    matmul: BatchMatMulOp
    ops: list[Operation]
    scale: float
    mask: SSAValue | None


def _scores(value: SSAValue) -> _Scores | None:
    add = value.owner
    if isinstance(add, AddOp):
        for scores, mask in ((add.x1, add.x2), (add.x2, add.x1)):
            found = _scaled_scores(scores)
            if found is not None and add.y.type == scores.type:
                return _Scores(found[0], [add, *found[1]], found[2], mask)
    found = _scaled_scores(value)
    return _Scores(*found, None) if found is not None else None


def _merged(
    context: SSAValue, shape: tuple[int, ...], layout: str, fused: tuple[int, ...], known: Known
) -> tuple[SSAValue, list[Operation]] | None:
    """The value holding the heads of `context` (of `shape`) side by side in `layout`,
    found along the Reshapes and Transposes context alone flows through, and those ops
    up to it: the first of the fused result's shape, else the last found."""
    heads = np.arange(shapes.numel(shape)).reshape(shape if len(shape) == 4 else (shape[0], 1, *shape[1:]))
    target = heads.transpose((0, 2, 1, 3) if layout == "BSH" else (2, 0, 1, 3)).reshape(-1)
    index, value, ops = np.arange(shapes.numel(shape)).reshape(shape), context, []
    found: list[tuple[SSAValue, list[Operation]]] = []
    while True:
        if np.array_equal(index.reshape(-1), target):
            if index.shape == fused:
                return value, ops
            found.append((value, list(ops)))
        following = sole_user(value)
        if not isinstance(following, (*_RESHAPES, DynamicReshapeOp, TransposeOp, ConfusionTransposeOp)):
            break
        view = _view(following.results[0], known)
        if view is None:
            break
        try:
            index = view[0](index)
        except (shapes.ShapeError, ValueError):
            break
        value = following.results[0]
        known[value] = index.shape
        ops.append(following)
    return found[-1] if found else None


@dataclass
class _Match:
    """An attention block as one probe traced it."""

    q: _Side
    k: _Side
    v: _Side
    layout: str
    output: SSAValue
    merge_ops: list[Operation]

    @property
    def structure(self) -> tuple[object, ...]:
        """What must not depend on the probe: heads, head sizes, columns, layout,
        scale and the ops of the block."""
        sides = (self.q, self.k, self.v)
        return (
            self.layout, self.output, tuple(self.merge_ops),
            tuple((s.heads.shape[1], s.heads.shape[3], s.start, s.trace.root, s.trace.scale, tuple(s.trace.ops)) for s in sides),
        )  # fmt: skip


class AttentionBlock(FusionPattern):
    """Anchored on the SoftmaxV2 between a scaled Q @ K^T (+ mask) and a @ V.

    Fused only when: softmax runs over the last axis; neither head matmul has a
    bias of its own; Q, K, V are head views of projections (checked element by
    element, see the module); their heads and layouts agree; the projection biases
    are all three or none; the scale is constant; and no op of the block has a user
    outside it (the merged output aside). Over dynamic batch and sequence dims
    (the projections' features static), the views are traced at each of `PROBES`'
    sizes, every view sized by its own shape rule, and the block fuses only when
    both find the same block: then it holds at every size."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, softmax: SoftmaxOp, rewriter: PatternRewriter) -> None:
        scores = _scores(softmax.x)
        context = user(softmax.y, BatchMatMulOp, lambda op: op.x1 is softmax.y)
        if scores is None or context is None:
            return
        self.matched(softmax)

        rank = len(shape_of(softmax.x.type))
        qk = scores.matmul
        if shapes.norm_axes(softmax.props.ints("axes"), rank) != (rank - 1,) or context.props.bool("adj_x1"):
            return
        if qk.bias is not None or context.bias is not None:  # e.g. a mask MatMulBiasAdd moved into Q @ K^T
            return
        probes = (None,) if shapes.is_static(shape_of(softmax.x.type)) else PROBES
        matches = [self._match(qk, context, probe) for probe in probes]
        if any(m is None for m in matches) or len({m.structure for m in matches}) != 1:
            return
        found = matches[0]
        assert found is not None
        q, k, v, output = found.q, found.k, found.v, found.output

        block = {softmax, qk, context, *scores.ops, *found.merge_ops}
        for side in (q, k, v):
            block |= {*side.trace.ops, *side.projection.ops}
        if not self._closed(block, output):
            return
        sides = (q, k, v)
        inputs = [s.projection.input for s in sides] + [s.projection.weight for s in sides]
        inputs += [s.projection.bias for s in sides if s.projection.bias is not None]
        if any(value.owner in block for value in [*inputs, *([scores.mask] if scores.mask else [])]):
            return

        scale = q.trace.scale * k.trace.scale * scores.scale
        folded = _foldable(q, scale)
        new_ops, operands = self._operands(q, k, v, scores.mask, rank, store_around(softmax), scale if folded else 1.0)
        props = {
            "head_num": int_attr(q.heads.shape[1]),
            "scale": FloatAttr(1.0 if folded else scale, f64),
            "input_layout": StringAttr(found.layout),
        }
        assert isinstance(output, OpResult)
        replaced, ops_in_order = output.op, output.op.parent_block()
        assert ops_in_order is not None
        fused = MultiHeadAttentionOp(operands, props, node_name(replaced))
        new_ops.append(fused)
        wanted = shape_of(output.type)
        if shape_of(fused.y.type) != wanted:
            if wanted.count(shapes.DYN) > 1:
                return
            new_ops.append(ReshapeOp([fused], {"shape": ints([-1 if d == shapes.DYN else d for d in wanted])}))
        position = {op: i for i, op in enumerate(ops_in_order.ops)}
        rewriter.replace(replaced, new_ops)
        erase_dead(rewriter, sorted(block - {replaced}, key=position.__getitem__, reverse=True))
        self.effected()

    @staticmethod
    def _match(qk: BatchMatMulOp, context: BatchMatMulOp, probe: Probe | None) -> _Match | None:
        """The block's sides, layout and merged output, traced at `probe`'s sizes."""
        known: Known = {}
        q = _side(qk.x1, qk.props.bool("adj_x1"), probe, known, scaled=True)
        k = _side(qk.x2, not qk.props.bool("adj_x2"), probe, known, scaled=True)
        v = _side(context.x2, context.props.bool("adj_x2"), probe, known, scaled=False)
        if q is None or k is None or v is None:
            return None
        (batch, heads, seq, width), (kb, kh, kseq, kwidth), (vb, vh, vseq, vwidth) = (s.heads.shape for s in (q, k, v))
        if (kb, kh, kwidth) != (batch, heads, width) or (vb, vh, vseq) != (batch, heads, kseq):
            return None
        layouts = q.layouts & k.layouts & v.layouts
        if not layouts or len({s.projection.bias is None for s in (q, k, v)}) != 1:
            return None
        layout = "BSH" if "BSH" in layouts else "SBH"
        fused_shape = (batch, seq, v.width) if layout == "BSH" else (seq, batch, v.width)
        context_shape = (batch, heads, seq, vwidth) if len(shape_of(context.y.type)) == 4 else (batch, seq, vwidth)
        known[context.y] = context_shape
        merged = _merged(context.y, context_shape, layout, fused_shape, known)
        return _Match(q, k, v, layout, *merged) if merged is not None else None

    @staticmethod
    def _closed(block: set[Operation], output: SSAValue) -> bool:
        """No result of the block but `output` is used outside it."""
        return all(
            r is output or all(use.operation in block for use in r.uses) for op in block for r in op.results
        )

    @staticmethod
    def _operands(
        q: _Side, k: _Side, v: _Side, mask: SSAValue | None, rank: int, store: WeightStore, query_scale: float
    ) -> tuple[list[Operation], list[SSAValue]]:
        """The fused op's operands, and the slices (and mask unsqueeze) they need. A
        packed projection's weight or bias that is a constant is cut at compile time
        into constants of their own (as GE's fusion passes write new weights): sliced
        by kernels, every run would re-read and re-format the whole packed weight.
        The query's constant weight and bias are multiplied by `query_scale`."""
        new_ops: list[Operation] = []

        def add(op: Operation, hint: str) -> SSAValue:
            new_ops.append(op)
            op.results[0].name_hint = hint
            return op.results[0]

        def constant(array: np.ndarray, like: SSAValue, hint: str) -> SSAValue:
            return add(new_constant(array, dtype_of(like.type), hint, store), hint)

        def cut(value: SSAValue, axis: int, side: _Side, hint: str, factor: float = 1.0) -> SSAValue:
            shape = shape_of(value.type)
            if (side.start, side.width) == (0, shape[axis]) and factor == 1.0:
                return value
            array = constant_value(value)
            if array is not None:
                return constant(np.take(array, range(side.start, side.start + side.width), axis=axis) * factor, value, hint)
            begin = [side.start if i == axis else 0 for i in range(len(shape))]
            end = [side.start + side.width if i == axis else d for i, d in enumerate(shape)]
            props = {"begin": ints(begin), "end": ints(end), "strides": ints([1] * len(shape))}
            return add(StridedSliceOp([value], props), hint)

        def weight(side: _Side, role: str, factor: float) -> SSAValue:
            w, hint = side.projection.weight, f"{role}_weight"
            if not side.projection.transposed:
                return cut(w, 1, side, hint, factor)
            array = constant_value(w)
            if array is not None:
                return constant(np.take(array, range(side.start, side.start + side.width), axis=0).T * factor, w, hint)
            return add(TransposeOp([cut(w, 0, side, hint)], {"perm": ints([1, 0])}), hint)

        sides = {"query": q, "key": k, "value": v}
        factors = {"query": query_scale, "key": 1.0, "value": 1.0}
        operands = [s.projection.input for s in sides.values()] + [weight(s, role, factors[role]) for role, s in sides.items()]
        for role, s in sides.items():
            if s.projection.bias is not None:
                operands.append(cut(s.projection.bias, 0, s, f"{role}_bias", factors[role]))
        if mask is not None:
            if rank == 3 and len(shape_of(mask.type)) == 3:  # one head: the scores gain a head axis
                mask = add(UnsqueezeOp([mask], {"axes": ints([1])}), "atten_mask")
            operands.append(mask)
        return new_ops, operands


def _foldable(q: _Side, scale: float) -> bool:
    """Whether the scores' scale goes into the query projection's weight and bias at
    compile time (so that no kernel scales every score): both constant, the scale a
    power of two (exact in any dtype) or the weight float32 (one rounding at 2^-24),
    and every scaled value finite in its dtype."""
    projection = q.projection
    values = [constant_value(v) for v in (projection.weight, projection.bias) if v is not None]
    if scale == 1.0 or any(v is None for v in values):
        return False
    if float(np.frexp(scale)[0]) != 0.5 and dtype_of(projection.weight.type) != f32:
        return False
    with np.errstate(over="ignore"):
        return all(np.isfinite((v * scale).astype(v.dtype)).all() for v in values)


@fusion_pass
@dataclass(frozen=True)
class MultiHeadAttentionFusionPass(FusionPass):
    """Fuse attention blocks (Q/K/V projections through the merged heads) into MultiHeadAttention."""

    name = "MultiHeadAttentionFusionPass"
    band: ClassVar[Band] = Band.MAIN

    def patterns(self, counts: FusionCounts) -> list[RewritePattern]:
        return [AttentionBlock(counts)]
