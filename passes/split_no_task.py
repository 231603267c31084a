"""FusionVirtualOpSetSwitch: a SplitD/SplitVD whose outputs are slices of its input's memory.

When a split cuts its input along its outermost physical axis, each output is
one contiguous piece of the input: the split needs no kernel and no memory of
its own, its outputs are views. The pass marks such splits with
`_no_task = true`, `_nopadding_continuous_output = true`,
`_output_reuse_input = true` and `_reuse_input_on_dim_index = 0`; memory planning
then aliases the outputs into the input, and task generation emits nothing.

GE switches the pass under UBFusion but runs it just before the build, and leaves
it out of fusion_result.json (`reported = False`): a user sees it work by
comparing `_no_task` in the graph dumps before and after
PreRunAfterOptimizeGraphBeforeBuild.

The split axis `split_dim` is an origin axis. It is normalised (a negative one
plus the origin rank) and, for a 2-D ND -> FRACTAL_NZ tensor, whose outer physical
axis is the origin's columns, axis 0 and 1 swap. Then a split qualifies as
- split_n: the axis is 0;
- split_c_to_n: the axis is 1, the origin rank is >= 2, origin N is 1, and the
  format is the origin format, or ND -> FRACTAL_NZ with origin rank >= 4, or NCHW
  -> NC1HWC0 with C a multiple of C0 (32 bytes of the dtype: 16 for float16, 32 for
  int8, 64 for int4), so that no output starts inside a padded C0 block;
and every general condition holds:
- no dynamic dim on its input or outputs;
- no RT_MEMORY_L1 (65536) or RT_MEMORY_L2 (131072) in its `_input_memory_type` or
  `_output_memory_type` (L1/L2 fusion keeps those buffers elsewhere);
- its input comes neither from a Const, nor from a TransData or Reshape fed by a
  Data, nor from an op that is `_no_task` or has a non-empty `atomic_output_index`;
- no consumer is a NetOutput, an Hcom collective (HcomBroadcast, HcomAllGather,
  HcomAllReduce, HcomReduceScatter, HcomReduce), a SplitD/SplitVD, a non-AI-Core op
  (`imply_type` other than 1: GE's TVM/TBE kind), an op with a non-empty
  `_fusion_virtual_op`, `continuous_input = true`, `_no_task`, or a non-empty
  `atomic_output_index`.
An op without `imply_type` is taken to run on the AI Core: every ascend_graph
compute op does unless an engine assignment says otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue

from dialects import ascend_graph as ag
from dialects.formats import c0
from dialects.shapes import DYN
from passes.fusion import FusionCounts, FusionKind, FusionPass, fusion_pass
from dialects.kernel_boundary import NO_TASK_ATTR, is_no_task, op_type

RT_MEMORY_L1 = 65536
RT_MEMORY_L2 = 131072
SPLIT_TYPES = frozenset({"SplitD", "SplitVD"})
HCOM_TYPES = frozenset({"HcomBroadcast", "HcomAllGather", "HcomAllReduce", "HcomReduceScatter", "HcomReduce"})
TVM_IMPLY_TYPE = 1
MARKS: dict[str, Attribute] = {
    NO_TASK_ATTR: BoolAttr.from_bool(True),
    "_nopadding_continuous_output": BoolAttr.from_bool(True),
    "_output_reuse_input": BoolAttr.from_bool(True),
    "_reuse_input_on_dim_index": IntegerAttr(0, i64),
}


# ---------------------------------------------------------------- attributes


def _ints(attr: Attribute | None) -> list[int]:
    """The integers of a list attribute (array of ints or dense array), else []."""
    if isinstance(attr, DenseArrayBase):
        return [int(v) for v in attr.get_values()]
    if isinstance(attr, ArrayAttr):
        return [a.value.data for a in attr.data if isinstance(a, IntegerAttr)]
    if isinstance(attr, IntegerAttr):
        return [attr.value.data]
    return []


def _true(op: Operation, name: str) -> bool:
    attr = op.attributes.get(name)
    return isinstance(attr, IntegerAttr) and bool(attr.value.data)


def _non_empty(op: Operation, name: str) -> bool:
    attr = op.attributes.get(name)
    if isinstance(attr, StringAttr):
        return bool(attr.data)
    if isinstance(attr, ArrayAttr):
        return len(attr.data) > 0
    if isinstance(attr, DenseArrayBase):
        return len(attr.get_values()) > 0
    return attr is not None


def _atomic(op: Operation) -> bool:
    return _non_empty(op, "atomic_output_index")


# ----------------------------------------------------------------- the rules


def _formats(t: TensorType) -> tuple[str, str, tuple[int, ...]]:
    """(format, origin format, origin shape) of a tensor type."""
    if isinstance(t.encoding, ag.FormatAttr):
        enc = t.encoding
        return enc.format.data, enc.origin_format.data, tuple(enc.origin_shape.get_values())
    shape = tuple(t.get_shape())
    origin = "NCHW" if len(shape) == 4 else "ND"
    return origin, origin, shape


def split_axis(split: ag.SplitBase) -> int:
    """The split axis as GE judges it: normalised, and swapped for 2-D ND -> NZ."""
    fmt, origin_fmt, origin = _formats(split.x.type)  # type: ignore[arg-type]
    axis = split.props.int("split_dim")
    if axis < 0:
        axis += len(origin)
    if fmt == "FRACTAL_NZ" and origin_fmt == "ND" and len(origin) == 2 and axis in (0, 1):
        axis = 1 - axis
    return axis


def _c_to_n(split: ag.SplitBase, axis: int) -> bool:
    t = split.x.type
    assert isinstance(t, TensorType)
    fmt, origin_fmt, origin = _formats(t)
    if axis != 1 or len(origin) < 2 or origin[0] != 1:
        return False
    if fmt == origin_fmt:
        return True
    if origin_fmt == "ND" and fmt == "FRACTAL_NZ":
        return len(origin) >= 4
    if origin_fmt == "NCHW" and fmt == "NC1HWC0":
        return origin[1] % c0(t.element_type) == 0
    return False


def _static(values: Sequence[SSAValue]) -> bool:
    for v in values:
        t = v.type
        assert isinstance(t, TensorType)
        if DYN in t.get_shape() or DYN in _formats(t)[2]:
            return False
    return True


def _memory_ok(split: Operation) -> bool:
    kinds = _ints(split.attributes.get("_input_memory_type")) + _ints(split.attributes.get("_output_memory_type"))
    return RT_MEMORY_L1 not in kinds and RT_MEMORY_L2 not in kinds


def _producer_ok(split: ag.SplitBase) -> bool:
    producer = split.x.owner
    if not isinstance(producer, Operation):
        return True
    if isinstance(producer, ag.ConstOp) or is_no_task(producer) or _atomic(producer):
        return False
    if op_type(producer) in ("TransData", "Reshape"):
        source = producer.operands[0].owner if producer.operands else None
        return not isinstance(source, ag.DataOp)
    return True


def _consumer_ok(user: Operation) -> bool:
    kind = op_type(user)
    if isinstance(user, ag.NetOutputOp) or kind in HCOM_TYPES or kind in SPLIT_TYPES:
        return False
    imply = user.attributes.get("imply_type")
    if imply is not None and _ints(imply) != [TVM_IMPLY_TYPE]:
        return False
    if _non_empty(user, "_fusion_virtual_op") or _true(user, "continuous_input"):
        return False
    return not (is_no_task(user) or _atomic(user))


def qualifies(split: ag.SplitBase) -> bool:
    """Whether the split may become a no-task view of its input (module docstring)."""
    if not _static([split.x, *split.results]) or not _memory_ok(split) or not _producer_ok(split):
        return False
    if not all(_consumer_ok(use.operation) for r in split.results for use in r.uses):
        return False
    axis = split_axis(split)
    return axis == 0 or _c_to_n(split, axis)


@fusion_pass
@dataclass(frozen=True)
class FusionVirtualOpSetSwitch(FusionPass):
    """Mark SplitD/SplitVD ops that cut their input's outer axis `_no_task`: their outputs are views."""

    name = "FusionVirtualOpSetSwitch"
    kind: ClassVar[FusionKind] = FusionKind.UB
    reported: ClassVar[bool] = False

    def fuse(self, module: ModuleOp, counts: FusionCounts) -> None:
        for op in module.walk():
            if not isinstance(op, ag.SplitBase) or is_no_task(op):
                continue
            counts.match(op)
            if not qualifies(op):
                continue
            op.attributes.update(MARKS)
            counts.effect()
