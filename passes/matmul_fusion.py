"""Matrix-product graph fusions.

- GemmToMatmulFusionPass: ONNX's Gemm (alpha * op(a) @ op(b) + beta * c) becomes
  MatMulV2, the op the cube kernels implement, when alpha is 1.
- MatMulBiasAddFusionPass: MatMulV2 or BatchMatMulV2 without bias -> Add of a
  constant per output column becomes the matmul with that bias.

A bias joins the cube's accumulator, so a fused bias is rounded once with the
product, as Gemm's c is; an Add after a matmul rounds the product first. Both
passes therefore keep or improve the rounding of what they replace, except where
GemmToMatmulFusionPass has to split a Gemm into MatMulV2 + Add (see there).

Counting: every Gemm is a match of GemmToMatmulFusionPass; an Add of a bias-free
matmul result and a constant is a match of MatMulBiasAddFusionPass (an Add of two
values, an attention mask say, is not). Each takes effect when the rewrite is exact.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from dialects.ascend_graph import (
    AddOp,
    BatchMatMulOp,
    ConstOp,
    GemmOp,
    MatMulV2Op,
    ReshapeOp,
    bool_attr,
    dtype_of,
    ints,
    is_float,
    shape_of,
)
from dialects.shapes import DYN
from passes.graph_match import constant_value, new_constant, store_around
from passes.fusion import FusionCounts, FusionPass, FusionPattern, fusion_pass


def _row_bias(c: SSAValue, n: int, rewriter: PatternRewriter, gemm: GemmOp) -> SSAValue | None:
    """c as a [n] bias when it is [n] or [1, n]; None when it is not one value per column."""
    shape = shape_of(c.type)
    if n == DYN or shape not in ((n,), (1, n)):
        return None
    if shape == (n,):
        return c
    array = constant_value(c)
    if array is None:
        flat: Operation = ReshapeOp([c], {"shape": ints([n])}, f"{gemm.label}.bias")
    else:
        flat = new_constant(array.reshape(n), dtype_of(c.type), f"{gemm.label}.bias", store_around(gemm))
    rewriter.insert(flat)
    return flat.results[0]


class GemmAsMatMul(FusionPattern):
    """Gemm with alpha 1 -> MatMulV2 (transposes carried over) with:

    - no c, or beta 0 (c is then ignored): no bias;
    - beta 1 and c of shape [N] or [1, N]: c as the bias;
    - beta 1 and any other c (a full [M, N] matrix, a column, a scalar): an Add of c
      after the MatMulV2. For float16/bfloat16 that rounds the product once more
      than Gemm does, within the dtype's rounding; for float32/64 and integers
      (which wrap the same either way) it is the same.
    - another beta with a constant float c: c * beta folded (in float64, rounded
      once), then as for beta 1.

    Anything else (alpha != 1, a non-constant c with beta not in {0, 1}) is left alone.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, gemm: GemmOp, rewriter: PatternRewriter) -> None:
        self.matched(gemm)
        alpha, beta = gemm.props.float("alpha", 1.0), gemm.props.float("beta", 1.0)
        if alpha != 1.0:
            return
        c = gemm.c if beta != 0.0 else None
        if c is not None and beta != 1.0:
            array = constant_value(c)
            if array is None or not is_float(dtype_of(c.type)):
                return
            scaled_c = np.asarray(array, np.float64) * beta
            scaled = new_constant(scaled_c, dtype_of(c.type), f"{gemm.label}.c", store_around(gemm))
            rewriter.insert(scaled)
            c = scaled.out
        props = {
            "transpose_x1": bool_attr(gemm.props.bool("trans_a")),
            "transpose_x2": bool_attr(gemm.props.bool("trans_b")),
        }
        bias = _row_bias(c, shape_of(gemm.y.type)[1], rewriter, gemm) if c is not None else None
        if c is None or bias is not None:
            rewriter.replace(gemm, MatMulV2Op([gemm.a, gemm.b, *([] if bias is None else [bias])], props, gemm.label))
        else:
            product = MatMulV2Op([gemm.a, gemm.b], props, gemm.label)
            rewriter.replace(gemm, [product, AddOp([product.y, c], {}, f"{gemm.label}.add")])
        self.effected()


def _column_bias(value: SSAValue, out: Sequence[int]) -> np.ndarray | None:
    """The constant `value` as a [N] bias of a matmul result `out` (N = out[-1])
    when its shape is [N] or [1, ..., 1, N] of rank at most out's; else None."""
    array = constant_value(value)
    n = out[-1]
    if array is None or n == DYN or not 1 <= array.ndim <= len(out):
        return None
    if array.shape[-1] != n or any(d != 1 for d in array.shape[:-1]):
        return None
    return array.reshape(n)


def _matmul_and_constant(add: AddOp) -> tuple[SSAValue, SSAValue] | None:
    """The bias-free matmul result `add` takes, and its other operand, a constant."""
    for value, other in ((add.x1, add.x2), (add.x2, add.x1)):
        matmul = value.owner
        if isinstance(matmul, MatMulV2Op | BatchMatMulOp) and matmul.bias is None and isinstance(other.owner, ConstOp):
            return value, other
    return None


class BiasAddIntoMatMul(FusionPattern):
    """MatMulV2 / BatchMatMulV2 without bias -> Add(bias per column): the op with that bias."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, add: AddOp, rewriter: PatternRewriter) -> None:
        found = _matmul_and_constant(add)
        if found is None:
            return
        source, other = found
        matmul = source.owner
        assert isinstance(matmul, MatMulV2Op | BatchMatMulOp)
        self.matched(add)
        if not source.has_one_use() or min(len(shape_of(matmul.x1.type)), len(shape_of(matmul.x2.type))) < 2:
            return
        column = _column_bias(other, shape_of(source.type))
        if column is None:
            return
        if shape_of(other.type) != column.shape:
            flat = new_constant(column, dtype_of(other.type), f"{matmul.label}.bias", store_around(matmul))
            rewriter.insert(flat)
            other = flat.out
        rewriter.replace(add, type(matmul)([matmul.x1, matmul.x2, other], dict(matmul.properties)))
        rewriter.erase(matmul)
        self.effected()


@fusion_pass
class GemmToMatmulFusionPass(FusionPass):
    """Turn Gemm with alpha 1 into MatMulV2, its c into a bias or an Add."""

    name = "GemmToMatmulFusionPass"

    def patterns(self, counts: FusionCounts) -> Sequence[RewritePattern]:
        return [GemmAsMatMul(counts)]


@fusion_pass
class MatMulBiasAddFusionPass(FusionPass):
    """Move a constant per-column Add after a bias-free MatMulV2/BatchMatMulV2 into its bias."""

    name = "MatMulBiasAddFusionPass"

    def patterns(self, counts: FusionCounts) -> Sequence[RewritePattern]:
        return [BiasAddIntoMatMul(counts)]
