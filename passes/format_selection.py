"""Format selection: the device format of every tensor, and TransData where formats meet.

GE runs it in "optimize original graph", after precision selection (dump
`AfterFormat`). Each op, in program order, says in which format it wants each
operand and makes its results; a value in another format than a consumer wants
gets one `TransData` per format it is needed in, placed right after its producer.
A constant is converted in the weight store instead: it gets a new constant holding
the physical array, typed in the device format (TransData folded into the weight).
Graph inputs and outputs keep the user's format (ND, or NCHW for 4-D); so do the
operands, arguments, yields and results of If, Loop and Scan, whose bodies are
selected as graphs of their own (a TransData of an argument goes first in its body).

What each op wants (C0 = 32 bytes of the dtype, see `dialects/formats.py`):

- Conv2D: the feature map in NC1HWC0, the filter in FRACTAL_Z, the bias as it is
  (ND); the result in NC1HWC0. FullyConnection of a 4-D input with a 4-D weight is
  a convolution with the input's whole H x W as its window: the same, and so is
  Conv2DTranspose (its filter [Cin, Cout/groups, kh, kw] in FRACTAL_Z as it stands).
  The 3-D convolutions (Conv3D, Conv3DTranspose) stay in ND: there is no
  NDC1HWC0 here.
- MatMulV2, BatchMatMulV2 (both operands of rank >= 2), GEMM and a 2-D
  FullyConnection: both operands and the result in FRACTAL_NZ, the bias ND;
  MultiHeadAttention: query, key, value, their weights and the result in
  FRACTAL_NZ, the biases and the mask ND. Parts
  with a FIX pipe (the 910B generation) convert ND <-> NZ in flight (MTE2's ND2NZ
  load, FIX's NZ2ND store: the calibration's *_TRANS paths), so there a cube op
  takes its activations as they come, ND or NZ, with no TransData, and its
  constant weights in FRACTAL_NZ, converted once in the weight store; its result
  is FRACTAL_NZ, which FIX writes at no cost, so that the activations from one
  matmul to the next (through the elementwise and row ops, which keep NZ) load
  without the ND2NZ conversion, whose fixed cost is four times a plain load's
  (deployments on A2 cast weights to NZ for that reason). CANN keeps A2's
  activations in ND; with the calibrated ND2NZ cost that made BERT-base 3 to 4%
  and ViT-B/16 up to 2.5% slower here (`benchmarks/kernels.py`).
- Pooling (MaxPoolV3, AvgPoolV2, GlobalAveragePool, GlobalMaxPool): NC1HWC0 in and
  out; their kernels exist in that format only.
- Elementwise ops (unary and binary ops, Cast, and BatchNorm in NC1HWC0; LayerNorm
  and SoftmaxV2 / LogSoftmaxV2 over the last axis only, in FRACTAL_NZ) take the
  device format of an operand that has the result's shape, when every other operand
  allows it: it is in that format with that shape, or has the result's shape (it is
  converted), or has one element, or is a bias it can broadcast as it is (BatchNorm
  and LayerNorm parameters; in FRACTAL_NZ a row vector, broadcast over the rows), or
  is a per-channel constant of an NC1HWC0 op ([C, 1, 1] or [1, C, 1, 1] against
  NCHW; converted to NC1HWC0 of [1, C, 1, 1]). The result's element type must have
  the operand's C0 (a Cast float16 -> float32 changes C0 from 16 to 8, so it cannot
  map element to element). Otherwise the op computes in ND. So chains such as
  conv -> relu -> add(residual) -> relu -> conv stay in NC1HWC0 from end to end.
- Everything else (reshapes, transposes, reductions, concat, gather, ...) works on
  the origin format.

TransData pairs that cancel are not made here (a value is always converted from
its producer's format); `TransdataTransdataPass` removes those other passes leave.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import Rewriter

from dialects import ascend_graph as ag
from dialects import formats, shapes
from ge.core import soc as socs
from ge.core.options import check_fields, option_field
from ge.core.reference import const_value
from ge.core.weights import WeightStore, derived, store_of
from passes.fusion import Band, FusionCounts, FusionPass, FusionPattern, fusion_pass


NC1HWC0 = "NC1HWC0"
FRACTAL_Z = "FRACTAL_Z"
FRACTAL_NZ = "FRACTAL_NZ"
AS_PRODUCED = "as produced"
"""An operand a cube op takes in whichever of ND and FRACTAL_NZ it comes (`_Selector.matmul`)."""

POOLS = (ag.MaxPoolOp, ag.AvgPoolOp, ag.GlobalAveragePoolOp, ag.GlobalMaxPoolOp)
ELEMENTWISE = (ag.UnaryOp, ag.BinaryOp, ag.CastOp)
ROW_OPS = (ag.LayerNormOp, ag.SoftmaxOp, ag.LogSoftmaxOp)
"""Ops normalising the last axis, which FRACTAL_NZ keeps inside each row of fractals."""

Want = tuple[list[str | None], str | None]
"""The format each operand is wanted in and the results' format (None: origin format)."""


def _rank(value: SSAValue) -> int:
    return len(ag.shape_of(value.type))


def _numel(value: SSAValue) -> int:
    shape = ag.shape_of(value.type)
    return shapes.numel(shape) if shapes.is_static(shape) else -1


def _per_channel(value: SSAValue, out: tuple[int, ...]) -> bool:
    """A constant [C, 1, 1] or [1, C, 1, 1] against an NCHW result of C channels: as
    an NC1HWC0 [1, C, 1, 1] it broadcasts the same way."""
    shape = ag.shape_of(value.type)
    if not isinstance(value.owner, ag.ConstOp) or len(out) != 4 or not 3 <= len(shape) <= 4:
        return False
    return (1,) * (4 - len(shape)) + shape == (1, out[1], 1, 1)


def _row_vector(value: SSAValue, out: tuple[int, ...]) -> bool:
    """A value that only varies along the last axis of `out` (a bias row)."""
    shape = ag.shape_of(value.type)
    return len(shape) <= len(out) and all(d == 1 for d in shape[:-1]) and shape[-1:] in ((out[-1],), (1,))


def _same_c0(op: Operation, value: SSAValue) -> bool:
    c0 = formats.c0(ag.dtype_of(value.type))
    return all(formats.c0(ag.dtype_of(r.type)) == c0 for r in op.results)


class _Selector:
    """Walks one graph in program order, deciding formats and inserting conversions."""

    def __init__(self, block: Block, store: WeightStore, nd_matmul: bool):
        self.block = block
        self.store = store
        self.nd_matmul = nd_matmul
        self.converted: dict[tuple[SSAValue, str | None], SSAValue] = {}
        self.folded: list[ag.ConstOp] = []

    def run(self) -> None:
        for op in list(self.block.ops):
            if isinstance(op, ag.DataOp | ag.ConstOp | ag.TransDataOp):
                continue
            wanted, result = self.want(op)
            for i, fmt in enumerate(wanted):
                self.use(op, i, fmt)
            if isinstance(op, ag.ControlFlowOp):  # its operands stay in their origin format, as its bodies' arguments
                for body in op.regions:
                    _Selector(body.block, self.store, self.nd_matmul).run()
            if result is not None:
                for r in op.results:
                    shape = ag.shape_of(r.type)
                    typed = ag.device_tensor(ag.dtype_of(r.type), result, formats.origin_format_of(result), shape)
                    Rewriter.replace_value_with_new_type(r, typed)
        for const in self.folded:
            if not const.out.uses:  # every user now reads a converted copy
                self.block.erase_op(const)

    # ----------------------------------------------------------------- decisions

    def want(self, op: Operation) -> Want:
        origin: Want = ([None] * len(op.operands), None)
        if isinstance(op, ag.Conv2DOp | ag.Conv2DTransposeOp):
            return [NC1HWC0, FRACTAL_Z] + [None] * (len(op.operands) - 2), NC1HWC0
        if isinstance(op, ag.FullyConnectionOp):
            ranks = (_rank(op.x), _rank(op.w))
            if ranks == (4, 4):
                return [NC1HWC0, FRACTAL_Z] + [None] * (len(op.operands) - 2), NC1HWC0
            return self.matmul(op, 2) if ranks == (2, 2) else origin
        if isinstance(op, ag.MatMulV2Op | ag.BatchMatMulOp | ag.GemmOp):
            return self.matmul(op, 2) if min(_rank(op.operands[0]), _rank(op.operands[1])) >= 2 else origin
        if isinstance(op, ag.MultiHeadAttentionOp):
            return self.matmul(op, 6)
        if isinstance(op, POOLS):
            return ([NC1HWC0], NC1HWC0) if _rank(op.operands[0]) == 4 else origin
        if isinstance(op, ELEMENTWISE + ROW_OPS + (ag.BatchNormOp,)):
            return self.elementwise(op) or origin
        return origin

    def matmul(self, op: Operation, matrices: int) -> Want:
        """A cube op's first `matrices` operands (activations and weights) in FRACTAL_NZ,
        and its result. Where MTE2 converts ND to NZ in flight (`nd_matmul`), the
        activations are taken as they come (`AS_PRODUCED`: no TransData) and only the
        constant weights are converted, once, in the weight store; the result is NZ
        where a user computes in NZ (FIX writes either at no cost; `_keeps_nz`), so
        that a chain of matmuls and the elementwise ops between them stays NZ and the
        next matmul loads its activations without MTE2's ND2NZ conversion, whose
        fixed cost is four times a plain load's."""
        rest: list[str | None] = [None] * (len(op.operands) - matrices)
        if not self.nd_matmul:
            return [FRACTAL_NZ] * matrices + rest, FRACTAL_NZ
        weights = range(1, 2) if matrices == 2 else range(3, 6)
        wanted = [FRACTAL_NZ if i in weights and isinstance(v.owner, ag.ConstOp) else AS_PRODUCED for i, v in enumerate(op.operands[:matrices])]
        return wanted + rest, FRACTAL_NZ if any(_keeps_nz(use.operation) for r in op.results for use in r.uses) else None

    def elementwise(self, op: ag.AscendOp) -> Want | None:
        """The device format an elementwise op keeps, if its operands allow one."""
        out = ag.shape_of(op.results[0].type)
        params = 1 if isinstance(op, ag.BatchNormOp | ag.LayerNormOp) else len(op.operands)
        main = next(
            (v for v in op.operands[:params] if ag.format_of(v.type) and ag.shape_of(v.type) == out), None
        )
        if main is None or not _same_c0(op, main):
            return None
        fmt = ag.format_of(main.type)
        if not self.keeps(op, fmt, len(out)):
            return None
        wanted: list[str | None] = []
        for i, v in enumerate(op.operands):
            if i >= params or _numel(v) == 1:
                wanted.append(None)
            elif ag.shape_of(v.type) == out and ag.dtype_of(v.type) == ag.dtype_of(main.type):
                wanted.append(fmt)
            elif fmt == NC1HWC0 and _per_channel(v, out):
                wanted.append(fmt)
            elif fmt == FRACTAL_NZ and _row_vector(v, out) and ag.format_of(v.type) is None:
                wanted.append(None)
            else:
                return None
        return wanted, fmt

    @staticmethod
    def keeps(op: ag.AscendOp, fmt: str, rank: int) -> bool:
        """Whether the op can compute in `fmt` at all."""
        if isinstance(op, ag.BatchNormOp):
            return fmt == NC1HWC0
        if isinstance(op, ag.LayerNormOp):
            return fmt == FRACTAL_NZ and shapes.norm_axis(op.props.int("begin_norm_axis"), rank) == rank - 1
        if isinstance(op, ag.SoftmaxOp | ag.LogSoftmaxOp):
            return fmt == FRACTAL_NZ and shapes.norm_axes(op.props.ints("axes"), rank) == (rank - 1,)
        return True

    # --------------------------------------------------------------- conversions

    def use(self, op: Operation, index: int, fmt: str | None) -> None:
        value = op.operands[index]
        if fmt == AS_PRODUCED or ag.format_of(value.type) == fmt:
            return
        op.operands[index] = self.convert(value, fmt)

    def convert(self, value: SSAValue, fmt: str | None) -> SSAValue:
        key = (value, fmt)
        if key not in self.converted:
            current = ag.format_of(value.type)
            owner = value.owner
            if current is not None and fmt is not None and formats.origin_format_of(current) != formats.origin_format_of(fmt):
                self.converted[key] = self.convert(self.convert(value, None), fmt)  # through the origin format
            elif isinstance(owner, ag.ConstOp) and fmt is not None and current is None:
                self.converted[key] = self.fold(owner, fmt)
            else:
                self.converted[key] = self.trans_data(value, fmt)
        return self.converted[key]

    def trans_data(self, value: SSAValue, fmt: str | None) -> SSAValue:
        t = value.type
        assert isinstance(t, TensorType)
        enc = t.encoding
        src = ag.format_of(t) or formats.origin_format_of(fmt)  # type: ignore[arg-type]
        dst = fmt if fmt is not None else enc.origin_format.data  # type: ignore[union-attr]
        name = f"{_owner_label(value)}/TransData_{dst}"
        op = ag.TransDataOp([value], {"src_format": StringAttr(src), "dst_format": StringAttr(dst)}, name)
        owner = value.owner
        if isinstance(owner, Operation):
            self.block.insert_op_after(op, owner)
        else:  # an argument of a control-flow body, whose block ends with its yield
            self.block.insert_op_before(op, self.block.first_op)  # type: ignore[arg-type]
        return op.y

    def fold(self, const: ag.ConstOp, fmt: str) -> SSAValue:
        """A new constant holding the value laid out in `fmt` (in the weight store)."""
        origin = formats.origin_format_of(fmt)

        def laid_out() -> tuple[ag.WeightRefAttr, tuple[int, ...]]:
            array = np.asarray(const_value(const, self.store))
            if fmt == NC1HWC0 and array.ndim == 3:  # a per-channel [C, 1, 1], as [1, C, 1, 1]
                array = array.reshape((1,) + array.shape)
            return self.store.add(f"{const.label}.{fmt}", formats.to_physical(array, fmt, origin)), array.shape

        ref, shape = derived(("layout", self.store.key, const.value, const.out.type, const.label, fmt), laid_out)
        typed = ag.device_tensor(ag.dtype_of(const.out.type), fmt, origin, shape)
        new = ag.ConstOp(ref, typed, const.label)
        new.attributes.update(const.attributes)  # what earlier passes noted of the value (precision's saturation)
        self.block.insert_op_after(new, const)
        self.folded.append(const)
        return new.out


def _keeps_nz(op: Operation) -> bool:
    """Whether `op` can take an operand in FRACTAL_NZ as it is: a cube op, or an
    elementwise or row op (which keep the format of an operand of the result's shape)."""
    return isinstance(op, ELEMENTWISE + ROW_OPS + (ag.MatMulV2Op, ag.BatchMatMulOp, ag.GemmOp, ag.FullyConnectionOp, ag.MultiHeadAttentionOp))


def _owner_label(value: SSAValue) -> str:
    owner = value.owner
    return owner.label if isinstance(owner, ag.AscendOp) else "value"


@dataclass(frozen=True)
class FormatSelection(ModulePass):
    """Choose each tensor's device format and insert TransData where formats meet."""

    name = "format-selection"

    soc_version: str = option_field("soc_version")
    """Parts with a FIX pipe take a cube op's activations in ND or NZ as they come."""
    enable_small_channel: int | None = option_field("enable_small_channel")
    """1: convolutions of C <= 4 input channels take the small-channel path (`small_channel`)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_fields(self)
        nd_matmul = socs.load(self.soc_version).fix_pipe
        for graph in [g for g in op.walk() if isinstance(g, ag.GraphOp)]:
            _Selector(graph.body.block, store_of(op), nd_matmul).run()
            if self.enable_small_channel == 1:
                small_channel(graph)


def small_channel(graph: ag.GraphOp) -> None:
    """Mark every ungrouped Conv2D of at most C04 input channels whose C0 is larger
    (`formats.SMALL_CHANNEL_ATTR`): GE's small-channel path (NC1HWC0_C04) packs the
    kh * kw cells of a pixel's few channels into the cube's K instead of padding
    each cell to C0, which is what a network's first convolution (RGB) spends most
    of its cube time on. The tensor formats stay NC1HWC0; the cube's work changes."""
    for op in graph.body.block.ops:
        if not isinstance(op, ag.Conv2DOp) or op.props.int("groups", 1) != 1:
            continue
        channels = ag.shape_of(op.operands[0].type)[1]
        if channels <= formats.C04 < formats.c0(ag.dtype_of(op.operands[0].type)):
            op.attributes[formats.SMALL_CHANNEL_ATTR] = IntegerAttr(1, 1)


# --------------------------------------------------------- TransData elimination


class CancelTransData(FusionPattern):
    """TransData A -> B -> C becomes A -> C, and nothing when C is A."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, outer: ag.TransDataOp, rewriter: PatternRewriter) -> None:
        inner = outer.x.owner
        if not isinstance(inner, ag.TransDataOp):
            return
        self.matched(outer)
        source = inner.x
        if source.type == outer.y.type:
            rewriter.replace(outer, [], [source])
        else:
            props = {"src_format": inner.src_format, "dst_format": outer.dst_format}
            try:
                direct = ag.TransDataOp([source], props, outer.label)
            except shapes.ShapeError:
                return  # A -> C is no format change (e.g. NCHW to ND): keep both
            rewriter.replace(outer, direct)
        self.effected()


@fusion_pass
@dataclass(frozen=True)
class TransdataTransdataPass(FusionPass):
    """TransdataTransdataPass: two TransData in a row become one, or none when they cancel."""

    name = "TransdataTransdataPass"
    band = Band.MAIN

    def patterns(self, counts: FusionCounts) -> Sequence[RewritePattern]:
        return [CancelTransData(counts)]


AFTER_FORMAT_SELECTION = (TransdataTransdataPass.name, "TransdataCastFusionPass")
"""The fusion passes GE runs right after format selection (TransData/Cast elimination)."""
