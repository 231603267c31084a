"""Quantized cube fusion (QuantCubeFusionPass): integer products onto the int8 cube.

The cube multiplies int8 by int8 into int32 accumulators. Two structures reach it:

- QDQ, what onnxruntime's `quantize_static` writes in QDQ format: a float Conv2D,
  FullyConnection, MatMulV2 or BatchMatMulV2 whose input is AscendDequant(8-bit x, one scale sx, one
  offset zx), whose weight is AscendDequant(int8 constant w, scale sw, zero offset)
  with sw one value or one per output channel, and whose bias, if any, is
  AscendDequant(int32 constant b, sx * sw, zero offset). It becomes
  AscendDequant(cube(x, w, b'), sx * sw): the int8 product accumulates in int32 and
  one dequantization gives the float result. The AscendQuant that made x stays in
  front of it, so a QDQ model runs Quant -> int8 cube -> Dequant. A uint8 x (onnxruntime's
  QUInt8 activations) is moved into int8's range as below.
- Integer, what QLinearConv, ConvInteger and MatMulInteger import as when a zero
  point is not zero or an input is uint8: an int32 product of Cast(x) - zx (or
  Cast(x)) and an int32 constant whose values fit int8, with x int8 or uint8. It
  becomes the int8 product of x (a uint8 x moved by -128 into int8's range, exactly,
  and zx with it) and that constant; the AscendRequant after it stays.

The offset zx: (x - zx) * w = x * w - zx * sum_k(w), so the cube takes x as it is and
the bias takes -zx * sum_k(w) per output channel, exactly, in int32. A padded
convolution must then pad with zx (whose shifted value is 0): the Conv2D's
`offset_x`, as CANN's load3d pads a quantized input. The integer product is exact
either way; the QDQ rewrite replaces a float product of dequantized values by the
exact product scaled once, which differs in rounding, not by a quantization step.

Only the cube ops whose AI Core kernel reads int8 on the pass's `soc_version` (its
op information) are rewritten. The pattern matches at such a cube op whose operands
have these producers; it takes effect when the values are as described (constants,
one activation offset, a zero weight offset, a bias scale of sx * sw to float32's
precision, a weight that fits int8, a bias that fits int32). It runs in the main
band, after GemmToMatmulFusionPass has made a Gemm a MatMulV2 and
ConvToFullyConnectionFusionPass a convolution over its whole input a
FullyConnection (taken here too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import IntegerType, Signedness, i32
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from dialects.ascend_graph import (
    AscendDequantOp,
    BatchMatMulOp,
    CastOp,
    Conv2DOp,
    CubeOp,
    FullyConnectionOp,
    MatMulV2Op,
    SubOp,
    dtype_of,
    int_attr,
    is_float,
    shape_of,
)
from ge.core import opinfo
from ge.core.options import check_fields, option_field
from passes.fusion import FusionCounts, FusionPass, FusionPattern, fusion_pass
from passes.graph_match import constant_value, new_constant, store_around

INT8 = IntegerType(8)
UINT8 = IntegerType(8, Signedness.UNSIGNED)
Product = Conv2DOp | FullyConnectionOp | MatMulV2Op | BatchMatMulOp
PRODUCT_TYPES = ("Conv2D", "FullyConnection", "MatMulV2", "BatchMatMulV2")


class Int8Pattern(FusionPattern):
    """A pattern rewriting the cube ops of `int8`, the op types whose AI Core kernel reads int8."""

    def __init__(self, int8: frozenset[str], counts: FusionCounts | None = None):
        super().__init__(counts)
        self.int8 = int8


def _weight_axes(cube: Product) -> tuple[int, tuple[int, ...]] | None:
    """The weight's output-channel axis and the axes its products sum over; None for
    a matmul whose weight is not one 2-D matrix."""
    rank = len(shape_of(cube.operands[1].type))
    if isinstance(cube, Conv2DOp):
        return 0, (1, 2, 3)
    if isinstance(cube, FullyConnectionOp):
        return (1, (0,)) if cube.props.bool("transpose") else (0, tuple(range(1, rank)))
    if rank != 2:
        return None
    transposed = cube.props.bool("transpose_x2" if isinstance(cube, MatMulV2Op) else "adj_x2")
    return (0, (1,)) if transposed else (1, (0,))


def _channel_axis(cube: Product) -> int:
    """The result's output-channel axis: C of NCHW, a FullyConnection's `axis`, or a matmul's last."""
    if isinstance(cube, Conv2DOp):
        return 1
    if isinstance(cube, FullyConnectionOp):
        return cube.props.int("axis", 1)
    return len(shape_of(cube.results[0].type)) - 1


def _dequant_constants(op: Operation | None) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(scale, offset, axis) of an unblocked AscendDequant with constant scale and
    offset (zeros without one)."""
    if not isinstance(op, AscendDequantOp) or op.props.int("block_size") != 0:
        return None
    scale = constant_value(op.scale)
    offset = np.zeros(1, np.int64) if op.offset is None else constant_value(op.offset)
    if scale is None or offset is None:
        return None
    return np.asarray(scale, np.float32), np.asarray(offset, np.int64), op.props.int("axis", 1)


def _per_channel(scale: np.ndarray, axis: int, rank: int, want_axis: int, channels: int) -> np.ndarray | None:
    """The scale as one value per output channel, when it is one value or one per
    index along the weight's output axis."""
    if scale.size == 1:
        return np.broadcast_to(scale.reshape(()), (channels,))
    if scale.ndim == 1 and scale.size == channels and axis % rank == want_axis:
        return scale
    return None


def _fits_int8(w: np.ndarray) -> bool:
    return w.min(initial=0) >= -128 and w.max(initial=0) <= 127


def _corrected_bias(cube: Product, zx: int, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray | None:
    """bias - zx * sum_k(w) per output channel, the int32 bias of the int8 product of x
    and w; None when w does not fit int8 or that bias int32."""
    axes = _weight_axes(cube)
    if axes is None or not _fits_int8(w):
        return None
    out_axis, summed = axes
    corrected = np.zeros(w.shape[out_axis], np.int64) if bias is None else bias.astype(np.int64).reshape(-1)
    corrected = corrected - zx * w.astype(np.int64).sum(axis=summed)
    if corrected.min() < -(2**31) or corrected.max() >= 2**31:
        return None
    return corrected


def _int8_product(
    cube: Product, x: SSAValue, zx: int, w: np.ndarray, bias: np.ndarray, rewriter: PatternRewriter
) -> Operation:
    """The int8 cube op computing cube's product of int8 (x - zx) and w plus the
    corrected bias (`_corrected_bias`) into int32, inserted before `cube`."""
    store = store_around(cube)
    filt = new_constant(w.astype(np.int8), INT8, f"{cube.label}.weight_int8", store)
    b = new_constant(bias.astype(np.int32), i32, f"{cube.label}.bias_int32", store)
    props: dict[str, Attribute] = {**cube.properties, "dtype": i32}
    if isinstance(cube, Conv2DOp) and zx:
        props["offset_x"] = int_attr(zx)
    product = type(cube)([x, filt.out, b.out], props, cube.label)
    rewriter.insert([filt, b, product])
    return product


class DequantCubeToInt8(Int8Pattern):
    """Cube(Dequant(8-bit x), Dequant(int8 w)[, Dequant(int32 b)]) -> Dequant(int8 cube(x, w, b'))."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, cube: CubeOp, rewriter: PatternRewriter) -> None:
        if (
            not isinstance(cube, Product)
            or cube.OP_TYPE not in self.int8
            or not is_float(dtype_of(cube.results[0].type))
        ):
            return
        x_deq, w_deq = cube.operands[0].owner, cube.operands[1].owner
        if not isinstance(x_deq, AscendDequantOp) or not isinstance(w_deq, AscendDequantOp):
            return
        self.matched(cube)
        bias_deq = cube.operands[2].owner if len(cube.operands) > 2 else None
        found = self._values(cube, x_deq, w_deq, bias_deq)
        if found is None:
            return
        zx, w, scale, bias = found
        unsigned = dtype_of(x_deq.x.type) == UINT8
        zx8 = zx - 128 if unsigned else zx
        corrected = _corrected_bias(cube, zx8, w, bias)
        if corrected is None:
            return
        x = x_deq.x
        if unsigned:
            wide = CastOp([x], {"dst_type": i32}, f"{cube.label}/int32")
            rewriter.insert(wide)
            x = _moved_into_int8(wide.y, cube, rewriter)
        product = _int8_product(cube, x, zx8, w, corrected, rewriter)
        deq_scale = new_constant(scale, dtype_of(cube.results[0].type), f"{cube.label}.deq_scale", store_around(cube))
        props = {"axis": int_attr(_channel_axis(cube)), "block_size": int_attr(0)}
        rewriter.insert(deq_scale)
        rewriter.replace(cube, AscendDequantOp([product.results[0], deq_scale.out], props, f"{cube.label}/dequant"))
        self.effected()

    @staticmethod
    def _values(
        cube: Product, x_deq: AscendDequantOp, w_deq: AscendDequantOp, bias_deq: Operation | None
    ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray | None] | None:
        """(zx, int8 weight, deq scale per channel, int32 bias) when the values allow the rewrite."""
        x_params, w_params = _dequant_constants(x_deq), _dequant_constants(w_deq)
        w = constant_value(w_deq.x)
        axes = _weight_axes(cube)
        if x_params is None or w_params is None or w is None or axes is None:
            return None
        (sx, zx, _), (sw, zw, w_axis) = x_params, w_params
        if dtype_of(x_deq.x.type) not in (INT8, UINT8) or dtype_of(w_deq.x.type) != INT8:
            return None
        if sx.size != 1 or zx.size != 1 or zw.any():
            return None
        channels = w.shape[axes[0]]
        per_channel = _per_channel(sw, w_axis, w.ndim, axes[0], channels)
        if per_channel is None:
            return None
        scale = (sx.reshape(()) * per_channel).astype(np.float32)
        bias = None if bias_deq is None else _int32_bias(bias_deq, scale)
        if bias_deq is not None and bias is None:
            return None
        return int(zx.reshape(-1)[0]), np.asarray(w), scale, bias


def _int32_bias(op: Operation, scale: np.ndarray) -> np.ndarray | None:
    """The values b of AscendDequant(int32 constant b, scale, zero offset), one per
    channel, with its scale `scale` to float32's precision; None when it is not that."""
    params = _dequant_constants(op)
    if params is None:
        return None
    assert isinstance(op, AscendDequantOp)
    b, (sb, zb, _) = constant_value(op.x), params
    if b is None or dtype_of(op.x.type) != i32 or zb.any() or b.size != scale.size or sb.size not in (1, scale.size):
        return None
    if not np.allclose(np.broadcast_to(sb.reshape(-1), scale.shape), scale, rtol=2.0**-22, atol=0.0):
        return None
    return np.asarray(b)


def _shifted(value: SSAValue) -> tuple[SSAValue, int] | None:
    """(x, zx) when `value` is Cast(x) - zx or Cast(x), with x int8 (then x itself) or
    uint8 (then the Cast, in int32) and zx a one-value constant."""
    zx = 0
    op = value.owner
    if isinstance(op, SubOp):
        offset = constant_value(op.x2)
        if offset is None or shape_of(op.x2.type) not in ((), (1,)):
            return None
        zx, op = int(offset.reshape(-1)[0]), op.x1.owner
    if not isinstance(op, CastOp) or dtype_of(op.x.type) not in (INT8, UINT8):
        return None
    return (op.x if dtype_of(op.x.type) == INT8 else op.y), zx


def _moved_into_int8(x: SSAValue, cube: Product, rewriter: PatternRewriter) -> SSAValue:
    """A uint8 input widened to int32 (`x`) moved by -128 into int8's range, exactly
    (its offset moves with it)."""
    shift = new_constant(np.array(128, np.int32), i32, f"{cube.label}.shift", store_around(cube))
    moved = SubOp([x, shift.out], {}, f"{cube.label}/shift")
    narrow = CastOp([moved.y], {"dst_type": INT8}, f"{cube.label}/int8")
    rewriter.insert([shift, moved, narrow])
    return narrow.y


class IntegerCubeToInt8(Int8Pattern):
    """Int32 cube(Cast(8-bit x) - zx, int32 constant w[, int32 constant b]) -> int8 cube(x, w, b');
    a uint8 x is moved into int8's range first (x - 128, with zx - 128)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, cube: CubeOp, rewriter: PatternRewriter) -> None:
        if (
            not isinstance(cube, Product)
            or cube.OP_TYPE not in self.int8
            or dtype_of(cube.operands[0].type) != i32
            or dtype_of(cube.operands[1].type) != i32
        ):
            return
        shifted = _shifted(cube.operands[0])
        w = constant_value(cube.operands[1])
        if shifted is None or w is None:
            return
        self.matched(cube)
        bias = constant_value(cube.operands[2]) if len(cube.operands) > 2 else None
        if len(cube.operands) > 2 and bias is None:
            return
        x, zx = shifted
        unsigned = dtype_of(x.type) == i32
        zx8 = zx - 128 if unsigned else zx
        corrected = _corrected_bias(cube, zx8, np.asarray(w), bias)
        if corrected is None:
            return
        if unsigned:
            x = _moved_into_int8(x, cube, rewriter)
        product = _int8_product(cube, x, zx8, np.asarray(w), corrected, rewriter)
        rewriter.replace(cube, [], [product.results[0]])
        self.effected()


@fusion_pass
@dataclass(frozen=True)
class QuantCubeFusionPass(FusionPass):
    """Run dequantized (QDQ) and int32 integer Conv2D/MatMul products as int8 cube products."""

    name = "QuantCubeFusionPass"

    soc_version: str = option_field("soc_version")
    """The cube ops whose AI Core kernel reads int8 on this SoC (its op information) are the ones rewritten."""

    def patterns(self, counts: FusionCounts) -> Sequence[RewritePattern]:
        check_fields(self)
        library = opinfo.load(self.soc_version)
        int8 = frozenset(
            op_type
            for op_type in PRODUCT_TYPES
            if (kernel := library.op(op_type).aicore) is not None and "int8" in kernel.dtypes_of(kernel.params[0])
        )
        return [DequantCubeToInt8(int8, counts), IntegerCubeToInt8(int8, counts)]
