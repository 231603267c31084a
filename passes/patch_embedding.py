"""A vision transformer's patch embedding as a matmul over its patches.

ViT, DeiT and their kin cut the image into patches with a Conv2D whose stride is
its kernel (no padding, no dilation, one group) and flatten the result into tokens:
Conv2D -> Reshape [B, O, Hp*Wp] -> Transpose [0, 2, 1]. As a Conv2D the input goes
to NC1HWC0, whose C0 of 16 pads the image's 3 channels to 16: the format change
writes 5.3 times the image and the cube does 5.3 times the work (GE answers with
its small-channel C04 format). The patches do not overlap, so the same values are
the image's patches side by side times the filter:

  x [B, C, H, W] -> Reshape [B, C, Hp, kh, Wp, kw] -> Transpose [0, 2, 4, 1, 3, 5]
  -> Reshape [B, Hp*Wp, C*kh*kw] -> BatchMatMulV2 with the filter as [C*kh*kw, O]
  (a constant, transposed at compile time; the conv's bias its bias),

which gives the tokens [B, Hp*Wp, O] the Transpose gave. Where the channels fill
C0 (16 or more) the conv wastes nothing and is left alone, as is any conv whose
result is not flattened into tokens this way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from dialects import shapes
from dialects.ascend_graph import (
    BatchMatMulOp,
    Conv2DOp,
    ReshapeOp,
    TransposeOp,
    bool_attr,
    dtype_of,
    ints,
    is_float,
    shape_of,
)
from passes.fusion import Band, FusionCounts, FusionPass, FusionPattern, fusion_pass
from passes.graph_match import (
    constant_value,
    new_constant,
    node_name,
    sole_user,
    store_around,
)

C0 = 16
"""The channels NC1HWC0 holds per block in 16-bit types: fewer are padded to it."""


class PatchesAsMatmul(FusionPattern):
    """Anchored on a patch-cutting Conv2D whose tokens are its flattened, transposed result."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, conv: Conv2DOp, rewriter: PatternRewriter) -> None:
        x, w = shape_of(conv.x.type), shape_of(conv.filter.type)
        if not shapes.is_static(x[1:]) or not shapes.is_static(w) or x[1] >= C0:
            return
        (_, c, h, wd), (o, _, kh, kw) = x, w
        if conv.props.ints("strides")[2:] != (kh, kw) or h % kh or wd % kw or kh * kw == 1:
            return
        self.matched(conv)
        if any(conv.props.ints("pads")) or set(conv.props.ints("dilations")) != {1} or conv.props.int("groups", 1) != 1:
            return
        if conv.props.int("offset_x") or not is_float(dtype_of(conv.y.type)):
            return
        filt = constant_value(conv.filter)
        flatten = sole_user(conv.y)
        tokens = sole_user(flatten.y) if isinstance(flatten, ReshapeOp) else None
        hp, wp = h // kh, wd // kw
        if filt is None or not isinstance(tokens, TransposeOp) or tokens.props.ints("perm") != (0, 2, 1):
            return
        if shape_of(flatten.y.type)[1:] != (o, hp * wp):
            return
        batch = -1 if x[0] == shapes.DYN else x[0]
        name = node_name(conv)
        cut = ReshapeOp([conv.x], {"shape": ints([batch, c, hp, kh, wp, kw])}, f"{name}/patches")
        side_by_side = TransposeOp([cut], {"perm": ints([0, 2, 4, 1, 3, 5])}, f"{name}/patches_transposed")
        rows = ReshapeOp([side_by_side], {"shape": ints([batch, hp * wp, c * kh * kw])}, f"{name}/patch_rows")
        weight = new_constant(filt.reshape(o, c * kh * kw).T, dtype_of(conv.filter.type), f"{name}.patch_filter", store_around(conv))
        operands = [rows, weight] + ([conv.bias] if conv.bias is not None else [])
        matmul = BatchMatMulOp(operands, {"adj_x1": bool_attr(False), "adj_x2": bool_attr(False)}, name)
        rewriter.replace(tokens, [cut, side_by_side, rows, weight, matmul])
        rewriter.erase(flatten)
        rewriter.erase(conv)
        self.effected()


@fusion_pass
@dataclass(frozen=True)
class PatchEmbeddingFusionPass(FusionPass):
    """Turn a vision transformer's patch-cutting Conv2D and its flattening into a matmul over the patches."""

    name = "PatchEmbeddingFusionPass"
    band: ClassVar[Band] = Band.TOP

    def patterns(self, counts: FusionCounts) -> Sequence[RewritePattern]:
        return [PatchesAsMatmul(counts)]
