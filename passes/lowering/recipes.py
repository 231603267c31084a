"""Vector instruction sequences per op (`RECIPES`) and their emission over one tile."""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass

from xdsl.ir import Attribute, Operation, SSAValue

from dialects import ascend_graph as ag
from dialects import formats, shapes
from ge.core import dtypes
from ge.core.errors import ModelError
from passes.lowering.program import (
    REPEAT_BYTES,
    VECTOR_ISSUE,
    VECTOR_REPEAT_CYCLES,
    Ops,
    vec,
)

# =========================================================== vector instructions

Recipe = list[tuple[str, str, str]]
"""(instruction, dtypes template, basis) per vector instruction of an op. The
template uses {d} (compute dtype), {i}/{o} (input/output dtype) and {u} (an unsigned
integer of the element width); the basis says how many elements it covers in a
tile: "out" (the result), "in" (the first operand), "row" (one per row), "param"
(the second operand), "window" (the result times the pooling window or the samples
a result element reads), "updates" (the values a scatter writes)."""

UNARY, BINARY = "{d}_{d}", "{d}_{d}_{d}"
"""The dtype templates of a one-input and a two-input instruction computing in {d}."""
_ERF: Recipe = (
    [("VMINS", BINARY, "out"), ("VMAXS", BINARY, "out"), ("VMUL", BINARY, "out")]
    + [("VMULS", BINARY, "out"), ("VADDS", BINARY, "out")] * 4
    + [("VMUL", BINARY, "out"), ("VMUL", BINARY, "out"), ("VDIV", BINARY, "out")]
)
_EXP_FAMILY: dict[type[Operation], Recipe] = {
    ag.SigmoidOp: [("VMULS", BINARY, "out"), ("VEXP", UNARY, "out"), ("VADDS", BINARY, "out"), ("VREC", UNARY, "out")],
    ag.TanhOp: [
        ("VMULS", BINARY, "out"), ("VEXP", UNARY, "out"), ("VADDS", BINARY, "out"), ("VREC", UNARY, "out"),
        ("VMULS", BINARY, "out"), ("VADDS", BINARY, "out"),
    ],
    ag.SoftplusOp: [
        ("VABS", UNARY, "out"), ("VMULS", BINARY, "out"), ("VEXP", UNARY, "out"), ("VADDS", BINARY, "out"),
        ("VLN", UNARY, "out"), ("VMAXS", BINARY, "out"), ("VADD", BINARY, "out"),
    ],
    ag.EluOp: [
        ("VMINS", BINARY, "out"), ("VEXP", UNARY, "out"), ("VADDS", BINARY, "out"), ("VMULS", BINARY, "out"),
        ("VMAXS", BINARY, "out"), ("VADD", BINARY, "out"),
    ],
}
_EXP_FAMILY[ag.SeluOp] = _EXP_FAMILY[ag.EluOp] + [("VMULS", BINARY, "out")]
_TRIG: Recipe = (
    [("VMULS", BINARY, "out"), ("VCONV", "{d}_INT32", "out"), ("VCONV", "INT32_{d}", "out"), ("VMULS", BINARY, "out")]
    + [("VSUB", BINARY, "out"), ("VMUL", BINARY, "out")]
    + [("VMULS", BINARY, "out"), ("VADDS", BINARY, "out"), ("VMUL", BINARY, "out")] * 3
)
_ROUNDING: Recipe = [("VCONV", "{d}_INT32", "out"), ("VCONV", "INT32_{d}", "out")]

RECIPES: dict[type[Operation], Recipe] = {
    ag.AddOp: [("VADD", BINARY, "out")],
    ag.SubOp: [("VSUB", BINARY, "out")],
    ag.MulOp: [("VMUL", BINARY, "out")],
    ag.DivOp: [("VDIV", BINARY, "out")],
    ag.MaximumOp: [("VMAX", BINARY, "out")],
    ag.MinimumOp: [("VMIN", BINARY, "out")],
    ag.PowOp: [("VLN", UNARY, "out"), ("VMUL", BINARY, "out"), ("VEXP", UNARY, "out")],
    ag.PReluOp: [("VMINS", BINARY, "out"), ("VMUL", BINARY, "out"), ("VMAXS", BINARY, "out"), ("VADD", BINARY, "out")],
    **{cls: [("VCMPV", BINARY, "out")] for cls in (ag.EqualOp, ag.LessOp, ag.LessEqualOp, ag.GreaterOp, ag.GreaterEqualOp)},
    ag.LogicalAndOp: [("VAND", BINARY, "out")],
    ag.LogicalOrOp: [("VOR", BINARY, "out")],
    ag.LogicalXorOp: [("VOR", BINARY, "out"), ("VAND", BINARY, "out"), ("VNOT", UNARY, "out"), ("VAND", BINARY, "out")],
    ag.LogicalNotOp: [("VNOT", UNARY, "out")],
    ag.NegOp: [("VMULS", BINARY, "out")],
    ag.AbsOp: [("VABS", UNARY, "out")],
    ag.SignOp: [("VCMPVS", BINARY, "out"), ("VSEL", BINARY, "out"), ("VCMPVS", BINARY, "out"), ("VSEL", BINARY, "out")],
    ag.ReluOp: [("VRELU", UNARY, "out")],
    ag.SqrtOp: [("VSQRT", UNARY, "out")],
    ag.RsqrtOp: [("VRSQRT", UNARY, "out")],
    ag.ExpOp: [("VEXP", UNARY, "out")],
    ag.LogOp: [("VLN", UNARY, "out")],
    ag.ErfOp: _ERF,
    **_EXP_FAMILY,
    ag.SinOp: _TRIG,
    ag.CosOp: _TRIG,
    ag.FloorOp: _ROUNDING,
    ag.CeilOp: _ROUNDING,
    ag.RoundOp: _ROUNDING,
    ag.SoftsignOp: [("VABS", UNARY, "out"), ("VADDS", BINARY, "out"), ("VDIV", BINARY, "out")],
    ag.HardSwishOp: [("VADDS", BINARY, "out"), ("VMAXS", BINARY, "out"), ("VMINS", BINARY, "out"), ("VMUL", BINARY, "out"), ("VMULS", BINARY, "out")],
    ag.LeakyReluOp: [("VLRELU", BINARY, "out")],
    ag.HardSigmoidOp: [("VMULS", BINARY, "out"), ("VADDS", BINARY, "out"), ("VMAXS", BINARY, "out"), ("VMINS", BINARY, "out")],
    ag.CastOp: [("VCONV", "{i}_{o}", "out")],
    ag.SelectOp: [("VSEL", BINARY, "out")],
    ag.ExpandOp: [("VCOPY", "{u}_{u}", "out")],
    ag.TileOp: [("VCOPY", "{u}_{u}", "out")],
    ag.PadOp: [("VECTORDUP", UNARY, "out")],
    ag.SoftmaxOp: [
        ("VCMAX", UNARY, "in"), ("VSUB", BINARY, "in"), ("VEXP", UNARY, "in"), ("VCADD", UNARY, "in"), ("VREC", UNARY, "row"),
        ("VMUL", BINARY, "in"),
    ],
    ag.LogSoftmaxOp: [
        ("VCMAX", UNARY, "in"), ("VSUB", BINARY, "in"), ("VEXP", UNARY, "in"), ("VCADD", UNARY, "in"), ("VLN", UNARY, "row"),
        ("VSUB", BINARY, "in"),
    ],
    ag.LayerNormOp: [
        ("VCADD", UNARY, "in"), ("VMULS", BINARY, "row"), ("VSUB", BINARY, "in"), ("VMUL", BINARY, "in"), ("VCADD", UNARY, "in"),
        ("VMULS", BINARY, "row"), ("VADDS", BINARY, "row"), ("VRSQRT", UNARY, "row"), ("VMUL", BINARY, "in"), ("VMUL", BINARY, "in"),
        ("VADD", BINARY, "in"),
    ],
    ag.BatchNormOp: [
        ("VADDS", BINARY, "param"), ("VRSQRT", UNARY, "param"), ("VMUL", BINARY, "param"), ("VMUL", BINARY, "param"),
        ("VSUB", BINARY, "param"), ("VMUL", BINARY, "out"), ("VADD", BINARY, "out"),
    ],
    ag.MaxPoolOp: [("VMAX", BINARY, "window")],
    ag.AvgPoolOp: [("VADD", BINARY, "window"), ("VMULS", BINARY, "out")],
    ag.GlobalAveragePoolOp: [("VADD", BINARY, "in"), ("VMULS", BINARY, "out")],
    ag.GlobalMaxPoolOp: [("VMAX", BINARY, "in")],
    ag.ArgMaxOp: [("VCMAX", UNARY, "in")],
    ag.ArgMinOp: [("VCMIN", UNARY, "in")],
    ag.GatherElementsOp: [("VGATHER", "{u}_{u}", "out")],
    ag.GatherNdOp: [("VGATHER", "{u}_{u}", "out")],
    ag.ReverseSequenceOp: [("VGATHER", "{u}_{u}", "out")],
    ag.TensorScatterOp: [("VCOPY", "{u}_{u}", "out"), ("VSCATTER", "{u}_{u}", "updates")],
}
_GATHERED_TAP: Recipe = [("VGATHER", "{u}_{u}", "out"), ("VMUL", BINARY, "out"), ("VADD", BINARY, "out")]
"""One interpolation tap: gather the cell, weigh it, accumulate."""
_SAMPLE_COORDINATES: Recipe = [
    ("VMULS", BINARY, "param"), ("VADDS", BINARY, "param"), ("VCONV", "{d}_INT32", "param"), ("VCONV", "INT32_{d}", "param"),
    ("VSUB", BINARY, "param"),
]
"""Unnormalise sampling coordinates and split them into cell and fraction."""
RECIPES.update({
    ag.MaxPool3DOp: [("VMAX", BINARY, "window")],
    ag.MaxPoolWithArgmaxOp: [("VMAX", BINARY, "window"), ("VCMPV", BINARY, "window"), ("VSEL", BINARY, "window")],
    ag.AvgPool3DOp: [("VADD", BINARY, "window"), ("VMULS", BINARY, "out")],
    ag.LpPoolOp: [
        ("VABS", UNARY, "in"), ("VMUL", BINARY, "window"), ("VADD", BINARY, "window"), ("VLN", UNARY, "out"),
        ("VMULS", BINARY, "out"), ("VEXP", UNARY, "out"),
    ],
    ag.MaxUnpoolOp: [("VECTORDUP", UNARY, "out"), ("VSCATTER", "{u}_{u}", "in")],
    ag.AffineGridOp: [("VMUL", BINARY, "out"), ("VADD", BINARY, "out")] * 3,
    ag.Col2imOp: [("VADD", BINARY, "in")],
    ag.DeformableOffsetsOp: _SAMPLE_COORDINATES + _GATHERED_TAP * 4 + [("VMUL", BINARY, "out")],
    ag.ROIAlignOp: [("VGATHER", "{u}_{u}", "window"), ("VMUL", BINARY, "window"), ("VADD", BINARY, "window")],
})
RECIPES[ag.InstanceNormOp] = RECIPES[ag.LayerNormOp]
RECIPES[ag.RotaryPositionEmbeddingOp] = [
    ("VCOPY", "{u}_{u}", "out"), ("VMULS", BINARY, "out"), ("VMUL", BINARY, "out"), ("VMUL", BINARY, "out"),
    ("VADD", BINARY, "out"),
]
"""The rotated copy of x (its halves swapped, one of them negated), x * cos and
that copy * sin, summed; interleaved pairs take a gather for the copy instead."""
RECIPES[ag.TopKV2Op] = [("VBITSORT", BINARY, "in"), ("VMRGSORT", BINARY, "in"), ("VGATHER", "{u}_{u}", "out")]
"""Sort each row's 32-element blocks, merge them, and gather the k first values."""
RECIPES[ag.ClipByValueOp] = [("VMAXS", BINARY, "out"), ("VMINS", BINARY, "out")]
# ------------------------------------------------------------ losses and normalisations
RECIPES[ag.GroupNormOp] = RECIPES[ag.LayerNormOp]
RECIPES[ag.DivNoNanOp] = [("VDIV", BINARY, "out"), ("VCMPVS", BINARY, "out"), ("VSEL", BINARY, "out")]
RECIPES[ag.RmsNormOp] = [
    ("VMUL", BINARY, "in"), ("VCADD", UNARY, "in"), ("VMULS", BINARY, "row"), ("VADDS", BINARY, "row"),
    ("VRSQRT", UNARY, "row"), ("VMUL", BINARY, "in"), ("VMUL", BINARY, "in"),
]
RECIPES[ag.MVNV2Op] = [
    ("VCADD", UNARY, "in"), ("VMULS", BINARY, "row"), ("VMUL", BINARY, "in"), ("VCADD", UNARY, "in"),
    ("VMULS", BINARY, "row"), ("VMUL", BINARY, "row"), ("VSUB", BINARY, "row"), ("VSQRT", UNARY, "row"),
    ("VADDS", BINARY, "row"), ("VSUB", BINARY, "in"), ("VDIV", BINARY, "in"),
]

# ------------ elementwise, bitwise, triangular, cumulative, one-hot and determinant ops
_REMAINDER: Recipe = [
    ("VDIV", BINARY, "out"), ("VCONV", "{d}_INT32", "out"), ("VCONV", "INT32_{d}", "out"), ("VMUL", BINARY, "out"),
    ("VSUB", BINARY, "out"),
]
_ARC: Recipe = (  # asin/acos: the odd polynomial on [0, 0.5], sqrt((1 - |x|) / 2) reduction beyond
    [("VABS", UNARY, "out"), ("VMULS", BINARY, "out"), ("VADDS", BINARY, "out"), ("VSQRT", UNARY, "out"), ("VMUL", BINARY, "out")]
    + [("VMULS", BINARY, "out"), ("VADDS", BINARY, "out"), ("VMUL", BINARY, "out")] * 4
    + [("VCMPVS", BINARY, "out"), ("VSEL", BINARY, "out")]
)
_LOG_OF: Recipe = [("VSQRT", UNARY, "out"), ("VADD", BINARY, "out"), ("VLN", UNARY, "out")]
RECIPES.update({
    ag.FloorModOp: _REMAINDER,
    ag.ModOp: _REMAINDER,
    ag.LeftShiftOp: [("VSHL", BINARY, "out")],
    ag.RightShiftOp: [("VSHR", BINARY, "out")],
    ag.BitwiseAndOp: [("VAND", BINARY, "out")],
    ag.BitwiseOrOp: [("VOR", BINARY, "out")],
    ag.BitwiseXorOp: RECIPES[ag.LogicalXorOp],
    ag.InvertOp: [("VNOT", UNARY, "out")],
    ag.IsNanOp: [("VCMPV", BINARY, "out")],
    ag.IsInfOp: [("VABS", UNARY, "out"), ("VCMPVS", BINARY, "out"), ("VCMPVS", BINARY, "out"), ("VSEL", BINARY, "out")],
    ag.TanOp: _TRIG + [("VDIV", BINARY, "out")],
    ag.AsinOp: _ARC,
    ag.AcosOp: _ARC + [("VMULS", BINARY, "out"), ("VADDS", BINARY, "out")],
    ag.AtanOp: [("VABS", UNARY, "out"), ("VREC", UNARY, "out"), ("VMIN", BINARY, "out")]
    + [("VMULS", BINARY, "out"), ("VADDS", BINARY, "out"), ("VMUL", BINARY, "out")] * 4
    + [("VCMPVS", BINARY, "out"), ("VSEL", BINARY, "out")],
    ag.SinhOp: [("VEXP", UNARY, "out"), ("VREC", UNARY, "out"), ("VSUB", BINARY, "out"), ("VMULS", BINARY, "out")],
    ag.CoshOp: [("VEXP", UNARY, "out"), ("VREC", UNARY, "out"), ("VADD", BINARY, "out"), ("VMULS", BINARY, "out")],
    ag.AsinhOp: [("VMUL", BINARY, "out"), ("VADDS", BINARY, "out"), *_LOG_OF],
    ag.AcoshOp: [("VMUL", BINARY, "out"), ("VADDS", BINARY, "out"), *_LOG_OF],
    ag.AtanhOp: [("VADDS", BINARY, "out"), ("VMULS", BINARY, "out"), ("VADDS", BINARY, "out"), ("VDIV", BINARY, "out"), ("VLN", UNARY, "out"), ("VMULS", BINARY, "out")],
    ag.ThresholdedReluOp: [("VCMPVS", BINARY, "out"), ("VSEL", BINARY, "out")],
    ag.ShrinkOp: [("VADDS", BINARY, "out"), ("VCMPVS", BINARY, "out"), ("VSEL", BINARY, "out")] * 2,
    ag.SwishOp: [("VMULS", BINARY, "out"), *_EXP_FAMILY[ag.SigmoidOp], ("VMUL", BINARY, "out")],
    ag.HardmaxOp: [("VCMAX", UNARY, "in"), ("VECTORDUP", UNARY, "in"), ("VCMPV", BINARY, "in"), ("VSEL", BINARY, "in")],
    ag.TrilOp: [("VSEL", BINARY, "out")],
    ag.TriuOp: [("VSEL", BINARY, "out")],
    ag.CumsumOp: [("VADD", BINARY, "out")],
    ag.CumprodOp: [("VMUL", BINARY, "out")],
    ag.OneHotOp: [("VECTORDUP", "{o}_{o}", "out"), ("VCMPV", BINARY, "out"), ("VSEL", "{o}_{o}_{o}", "out")],
})

MOVES: tuple[type[Operation], ...] = (
    ag.ConcatOp, ag.SplitOp, ag.SplitVOp, ag.StridedSliceOp, ag.DepthToSpaceOp, ag.SpaceToDepthOp, ag.GatherOp,
)
"""Ops that only move data: DMA between GM and UB, no vector instruction."""
PROPORTIONAL: tuple[type[Operation], ...] = (
    ag.ConcatOp, ag.SplitOp, ag.SplitVOp, ag.StridedSliceOp, ag.PadOp, ag.TileOp, ag.DepthToSpaceOp,
    ag.SpaceToDepthOp, ag.ResizeOp, ag.TransposeOp, ag.ConfusionTransposeOp, ag.TransDataOp, ag.GatherOp,
    ag.MaxPoolOp, ag.AvgPoolOp, ag.GatherNdOp, ag.ScatterNdUpdateOp, ag.ScatterElementsOp, ag.TensorScatterOp,
    ag.MaxPool3DOp, ag.AvgPool3DOp, ag.LpPoolOp, ag.MaxPoolWithArgmaxOp, ag.Col2imOp, ag.MaxUnpoolOp,
    ag.RotaryPositionEmbeddingOp, ag.TopKV2Op,
)
"""Ops whose operands and results are cut into tiles in proportion to their sizes."""


def recipe(op: Operation) -> Recipe:
    """The vector instructions one tile of the op takes."""
    impl = op.attributes.get("impl_mode")
    precise = getattr(impl, "data", "high_performance") == "high_precision"
    if isinstance(op, ag.GeluOp):
        return _gelu(op)
    if isinstance(op, ag.ReciprocalOp):
        return [("VECTORDUP", UNARY, "out"), ("VDIV", BINARY, "out")] if precise else [("VREC", UNARY, "out")]
    if isinstance(op, ag.ClipByValueOp):
        return [r for r, key in zip(RECIPES[ag.ClipByValueOp], ("min", "max")) if op.props.has(key)]
    if isinstance(op, ag.NLLLossOp | ag.SoftmaxCrossEntropyLossOp):
        return _loss(op)
    if isinstance(op, ag.LRNOp):
        window = [("VMUL", BINARY, "out")] + [("VADD", BINARY, "out")] * (op.props.int("size") - 1)
        power = [("VLN", UNARY, "out"), ("VMULS", BINARY, "out"), ("VEXP", UNARY, "out")]
        return window + [("VMULS", BINARY, "out"), ("VADDS", BINARY, "out"), *power, ("VDIV", BINARY, "out")]
    if isinstance(op, ag.ReduceOp):
        return _reduction(op)
    if isinstance(op, ag.ScatterNdUpdateOp | ag.ScatterElementsOp):
        return _scatter(op)
    if isinstance(op, ag.DFTOp | ag.STFTOp):
        return _fourier(op)
    if isinstance(op, ag.MatrixDeterminantOp):
        n = ag.shape_of(op.x.type)[-1]  # LU: n pivots per matrix, ~n^3/3 multiply-subtracts
        return [("VDIV", BINARY, "row")] * n + [("VMUL", BINARY, "in"), ("VSUB", BINARY, "in")] * max(1, -(-n // 3))
    if isinstance(op, ag.AscendQuantOp | ag.AscendDequantOp | ag.AscendRequantOp):
        return _quantization(op)
    if isinstance(op, ag.TransDataOp):
        fmts = {op.props.str("src_format"), op.props.str("dst_format")}
        return [] if "FRACTAL_NZ" in fmts else [("VNCHWCONV", "{u}_{u}", "out")]
    if isinstance(op, ag.TransposeOp | ag.ConfusionTransposeOp):
        perm = op.props.ints("perm")
        return [] if perm and perm[-1] == len(perm) - 1 else [("VNCHWCONV", "{u}_{u}", "out")]
    if isinstance(op, ag.GridSamplerOp):
        taps = {"nearest": 1, "bilinear": 2, "bicubic": 4}[op.props.str("interpolation_mode")] ** op.SPATIAL
        return _SAMPLE_COORDINATES + _GATHERED_TAP * taps
    if isinstance(op, ag.ResizeOp):
        steps = {"nearest": 0, "linear": 2, "cubic": 4}[op.props.str("mode")]
        return [("VMUL", BINARY, "out"), ("VADD", BINARY, "out")] * steps
    if isinstance(op, ag.RotaryPositionEmbeddingOp) and op.props.bool("interleaved"):
        return [("VGATHER", "{u}_{u}", "out"), *RECIPES[ag.RotaryPositionEmbeddingOp][1:]]
    if isinstance(op, MOVES):
        return []
    if type(op) in RECIPES:
        return RECIPES[type(op)]
    raise ModelError(f"{getattr(op, 'OP_TYPE', op.name)}: no vector kernel for {op.name}")


_GELU_TANH: Recipe = [
    ("VMUL", BINARY, "out"), ("VMUL", BINARY, "out"), ("VMULS", BINARY, "out"), ("VADD", BINARY, "out"),
    ("VMULS", BINARY, "out"), ("VEXP", UNARY, "out"), ("VADDS", BINARY, "out"), ("VDIV", BINARY, "out"),
]
"""x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3))): GELU's tanh form as a sigmoid."""
_GELU_SIGMOID: Recipe = [("VMULS", BINARY, "out"), ("VEXP", UNARY, "out"), ("VADDS", BINARY, "out"), ("VDIV", BINARY, "out")]
"""x / (1 + exp(-1.702 x)), super_performance's GELU."""
_FAST_MODES = ("high_performance", "super_performance")
_HALF = ("float16", "bfloat16")


def _gelu(op: ag.GeluOp) -> Recipe:
    """The form the reference computes (`ge.core.reference`): on float16/bfloat16 input
    a fast implementation mode computes the tanh form (high_performance) or x
    sigmoid(1.702x) (super_performance) whatever `approximate` says, as CANN's
    kernel does; else `approximate` chooses the erf or the tanh form."""
    mode = getattr(op.attributes.get("impl_mode"), "data", None)
    if mode in _FAST_MODES and dtypes.name(ag.dtype_of(op.operands[0].type)) in _HALF:
        return _GELU_SIGMOID if mode == "super_performance" else _GELU_TANH
    if op.props.str("approximate", "none") == "tanh":
        return _GELU_TANH
    return _ERF + [("VMULS", BINARY, "out"), ("VADDS", BINARY, "out"), ("VMUL", BINARY, "out")]


def _reduction(op: ag.ReduceOp) -> Recipe:
    shape = ag.shape_of(op.x.type)
    axes = shapes.norm_axes(op.props.ints("axes"), len(shape)) or tuple(range(len(shape)))
    across = len(shape) - 1 in axes  # the last axis: within a repeat (VC*), else across rows
    instr = {
        ag.ReduceSumOp: ("VCADD", "VADD"), ag.ReduceMeanOp: ("VCADD", "VADD"),
        ag.ReduceMaxOp: ("VCMAX", "VMAX"), ag.ReduceMinOp: ("VCMIN", "VMIN"), ag.ReduceProdOp: ("VMUL", "VMUL"),
        ag.LpNormOp: ("VCADD", "VADD"),
    }[type(op)][0 if across else 1]
    steps: Recipe = [(instr, UNARY if instr.startswith("VC") else BINARY, "in")]
    if isinstance(op, ag.LpNormOp):
        if op.props.int("p") == 2:
            return [("VMUL", BINARY, "in"), *steps, ("VSQRT", UNARY, "out")]
        return [("VABS", UNARY, "in"), *steps]
    return steps + ([("VMULS", BINARY, "out")] if isinstance(op, ag.ReduceMeanOp) else [])


_SCATTER_COMBINE = {"add": "VADD", "mul": "VMUL", "max": "VMAX", "min": "VMIN"}


def _scatter(op: ag.ScatterNdUpdateOp | ag.ScatterElementsOp) -> Recipe:
    """Copy the data, then write the updates at their indices; a reduction first
    gathers the values there and combines them with the updates."""
    combine = _SCATTER_COMBINE.get(op.props.str("reduction", "none"))
    steps: Recipe = [("VCOPY", "{u}_{u}", "out")]
    if combine is not None:
        steps += [("VGATHER", "{u}_{u}", "updates"), (combine, BINARY, "updates")]
    return steps + [("VSCATTER", "{u}_{u}", "updates")]


def _fourier(op: ag.DFTOp | ag.STFTOp) -> Recipe:
    """A radix-2 FFT, O(n log n): a bit-reversal gather (an STFT's frames gathered and
    windowed with it), then log2(n) stages (a length that is not a power of
    two is counted as the next power's) of complex butterflies over the result: the
    twiddle product (four multiplies, an add and a subtract per pair, two per element
    of the (re, im) result), an add and a subtract."""
    n = op.props.int("length") if isinstance(op, ag.DFTOp) else op.props.int("frame_length")
    steps: Recipe = [("VGATHER", "{u}_{u}", "out")]
    if isinstance(op, ag.STFTOp) and len(op.operands) > 1:
        steps.append(("VMUL", BINARY, "out"))
    butterfly: Recipe = [("VMUL", BINARY, "out"), ("VMUL", BINARY, "out"), ("VADD", BINARY, "out"), ("VSUB", BINARY, "out")]
    return steps + butterfly * (n - 1).bit_length()


def _loss(op: ag.NLLLossOp | ag.SoftmaxCrossEntropyLossOp) -> Recipe:
    """Per target: gather its class's log-probability, weigh and negate it; then the sum
    (and the sum of the weights, for "mean"). SoftmaxCrossEntropyLoss first takes the
    log-softmax over the classes."""
    steps: Recipe = list(RECIPES[ag.LogSoftmaxOp]) if isinstance(op, ag.SoftmaxCrossEntropyLossOp) else []
    steps += [("VGATHER", "{u}_{u}", "param"), ("VMUL", BINARY, "param"), ("VMULS", BINARY, "param")]
    reduction = op.props.str("reduction")
    if reduction != "none":
        steps.append(("VCADD", UNARY, "param"))
    if reduction == "mean":
        steps += [("VCADD", UNARY, "param"), ("VDIV", BINARY, "out")]
    return steps


def _quantization(op: ag.AscendQuantOp | ag.AscendDequantOp | ag.AscendRequantOp) -> Recipe:
    """AscendQuant divides by the scale, adds the offset and converts with rounding;
    AscendDequant subtracts the offset and converts while scaling (VCONVDEQ), and
    AscendRequant scales and converts int32 to int8 in one (VCONVVDEQ), then adds the offset."""
    offset = op.offset is not None
    if isinstance(op, ag.AscendQuantOp):
        return [("VDIV", BINARY, "out"), *([("VADD", BINARY, "out")] if offset else []), ("VCONV", "{i}_{o}", "out")]
    if isinstance(op, ag.AscendDequantOp):
        return [*([("VSUB", BINARY, "out")] if offset else []), ("VCONVDEQ", "{i}_{o}", "out")]
    return [("VCONVVDEQ", "{i}_{o}", "out"), *([("VADD", "{o}_{o}_{o}", "out")] if offset else [])]


_DTYPE_NAMES = {"float16": "FP16", "bfloat16": "BF16", "float32": "FP32", "float64": "FP64", "bool": "UINT8"}


def dtype_name(dtype: Attribute) -> str:
    """The calibration tables' spelling: FP16, BF16, FP32, INT8, UINT8, INT32, ..."""
    name = dtypes.name(dtype)
    return _DTYPE_NAMES.get(name, name.upper())


@dataclass(frozen=True)
class Step:
    """One vector instruction of a tile before it is placed: over `elements` of
    `element_bytes` each, reading and writing `values` (its result first)."""

    instr: str
    dtypes: str
    elements: int
    element_bytes: int
    values: tuple[SSAValue, ...]

    @property
    def repeats(self) -> int:
        """Its 256-byte repeats."""
        return -(-max(self.elements, 1) * self.element_bytes // REPEAT_BYTES)

    @property
    def cycles(self) -> float:
        """Its estimated cycles (tiling cost only)."""
        issue, per_repeat = _CYCLES.get(self.instr, (VECTOR_ISSUE, VECTOR_REPEAT_CYCLES))
        return issue + self.repeats * per_repeat


_CYCLES = {"VCADD": (0.0, 7.0), "VCMAX": (0.0, 7.0), "VCMIN": (0.0, 7.0), "VCPADD": (3.0, 1.0)}
"""An instruction's cycles beyond its repeats and per repeat, where the fitted tables
(fp16) are far from `VECTOR_ISSUE` and `VECTOR_REPEAT_CYCLES`: an in-repeat reduction
takes 7 cycles a repeat and nothing more, a pairwise sum 1 a repeat after 3 (tiling
cost only)."""


def recipe_steps(ops: Sequence[Operation], elements_of: Callable[[SSAValue], int], rows: int, values: Container[SSAValue]) -> list[Step]:
    """The vector instructions of `ops` over one tile: `elements_of` gives each value's
    elements in the tile, `rows` the tile's rows; `values` are those with a buffer."""
    out: list[Step] = []
    for op in ops:
        steps = recipe(op)
        if not steps:
            continue
        first, result = op.operands[1 if isinstance(op, ag.SelectOp) else 0], op.results[0]  # a select's values, not its mask
        din, dout = ag.dtype_of(first.type), ag.dtype_of(result.type)
        widen = dtype_name(din) == "BF16" and not isinstance(op, ag.CastOp)  # no bfloat16 arithmetic
        compute = "FP32" if widen else dtype_name(din)
        width = formats.element_bits(din)
        size = 4 if widen else max(1, width // 8, formats.element_bits(dout) // 8)
        basis = {
            "out": elements_of(result),
            "in": elements_of(first),
            "row": max(rows, 1),
            "param": elements_of(op.operands[1]) if len(op.operands) > 1 else 1,
            "window": elements_of(result) * _window(op),
            "updates": elements_of(op.operands[_UPDATES.get(type(op), 0)]),
        }
        everything = (result, *(v for v in op.operands if v in values))
        early = tuple(v for v in (result, first) if v in everything)
        late = len(steps) - _LATE_OPERANDS.get(type(op), len(steps))  # the steps before it read the first operand only
        if widen:
            out.append(Step("VCONV", "BF16_FP32", basis["in"], 4, early if late else everything))
        for j, (instr, template, base) in enumerate(steps):
            used = everything if j >= late else early
            names = template.format(d=compute, i=dtype_name(din), o=dtype_name(dout), u=f"UINT{max(width, 16)}")
            if instr in REDUCTION_TREES and base == "in" and not isinstance(op, ag.ArgOp):
                out += row_reduction(instr, compute, basis["in"], max(rows, 1), size, used)
            else:
                out.append(Step(instr, names, basis[base], size, used))
        if widen and dtype_name(dout) == "BF16":
            out.append(Step("VCONV", "FP32_BF16", basis["out"], 4, used[:1]))
    return out


_LATE_OPERANDS: dict[type[Operation], int] = {ag.LayerNormOp: 2, ag.InstanceNormOp: 2, ag.GroupNormOp: 2}
"""Ops whose operands beyond the first only their last steps read (a normalisation's
scale and bias): a block of one tile can load them while the first steps run."""

REDUCTION_TREES = {"VCADD": "VADD", "VCMAX": "VMAX", "VCMIN": "VMIN"}
"""The in-repeat reductions, with the elementwise instruction that combines two repeats."""


def row_reduction(instr: str, compute: str, elements: int, rows: int, size: int, used: tuple[SSAValue, ...]) -> list[Step]:
    """Each of `rows` rows of `elements` in all reduced to one value: while a row spans
    more than one repeat, its upper repeats are combined onto its lower ones by the
    elementwise instruction (one instruction for every row, by its repeat strides),
    then the in-repeat reduction runs once per row. A row of n repeats thus costs
    n - 1 elementwise repeats and one reduction repeat, not n reduction repeats (each
    several times an elementwise one's cost). A sum's last repeat is halved by VCPADD
    (adjacent pairs) down to one value where those halvings cost less than VCADD."""
    per_row = -(-elements // rows)
    reps = -(-per_row * size // REPEAT_BYTES)
    steps: list[Step] = []
    while reps > 1:
        half = reps // 2
        steps.append(Step(REDUCTION_TREES[instr], BINARY.format(d=compute), rows * half * REPEAT_BYTES // size, size, used))
        reps -= half
    width = min(per_row, REPEAT_BYTES // size)
    pairwise = _pairwise_sum(compute, width, rows, size, used) if instr == "VCADD" else None
    return steps + (pairwise or [Step(instr, UNARY.format(d=compute), rows * width, size, used)])


def _pairwise_sum(compute: str, width: int, rows: int, size: int, used: tuple[SSAValue, ...]) -> list[Step] | None:
    """The VCPADD halvings of rows of `width` (within one repeat) to one value each, or
    None where they do not cost under half a VCADD's estimate (few rows: each halving
    pays its start, and a vector tile of a few rows is timed less surely than one VCADD;
    in fp32 a VCADD repeat's 3 cycles, not fp16's 7, leave the halvings no gain)."""
    if compute != "FP16":
        return None
    halving = 1 << (width - 1).bit_length()  # rows at a power-of-two stride: no pair straddles two
    steps: list[Step] = []
    while halving > 1:
        steps.append(Step("VCPADD", UNARY.format(d=compute), rows * halving, size, used))
        halving //= 2
    whole = Step("VCADD", UNARY.format(d=compute), rows * width, size, used)
    return steps if 2 * sum(s.cycles for s in steps) < whole.cycles else None  # where it clearly pays


def softmax_steps(d: str, rows: int, row: int, size: int, used: tuple[SSAValue, ...]) -> list[Step]:
    """The softmax's recipe on `rows` rows of `row` scores, its row reductions as
    `recipes` does them (each row's repeats combined first, then one in-repeat
    reduction per row): a softmax of attention, in its own phase or the flash one."""
    steps: list[Step] = []
    for instr, template, basis in RECIPES[ag.SoftmaxOp]:
        if instr in REDUCTION_TREES:
            steps += row_reduction(instr, d, rows * row, rows, size, used)
        else:
            steps.append(Step(instr, template.format(d=d), rows if basis == "row" else rows * row, size, used))
    return steps


def emit_recipes(
    ops: Sequence[Operation], buffers: dict[SSAValue, SSAValue], elements_of: Callable[[SSAValue], int], rows: int
) -> Ops:
    """The vector instructions of `ops` over one tile: `buffers` holds each value's UB
    buffer, `elements_of` its elements in the tile, `rows` the tile's rows."""
    return emit_steps(recipe_steps(ops, elements_of, rows, buffers), buffers)


def emit_steps(steps: Sequence[Step], buffers: dict[SSAValue, SSAValue]) -> Ops:
    """The vector instructions of `steps`, each value in its UB buffer of `buffers`."""
    out: Ops = []
    for step in steps:
        out += vec(step.instr, step.dtypes, step.elements, [buffers[v] for v in step.values], step.element_bytes)
    return out


_UPDATES: dict[type[Operation], int] = {ag.ScatterNdUpdateOp: 2, ag.ScatterElementsOp: 2, ag.TensorScatterOp: 1}
"""The operand holding the values a scatter writes."""


def _window(op: Operation) -> int:
    """Elements a result element reads: a pooling window's, or a region's bilinear
    samples (4 corners each; sample_num 0 adapts to the region: counted as 2 x 2)."""
    if isinstance(op, ag.ROIAlignOp):
        return 4 * (op.props.int("sample_num") or 2) ** 2
    return shapes.numel(op.props.ints("ksize")) if isinstance(op, ag.PoolOp | ag.WindowPoolOp | ag.MaxPoolWithArgmaxOp) else 1
