"""The kernel boundary: which graph ops the build turns into kernels, and which into none.

This is IR knowledge shared by the passes that mark scopes and no-task ops, the
lowering that makes kernels of them, and the backend that schedules them:

- `_fusion_scope = <id> : i64` (GE's UB fusion scope): every op of a scope becomes
  one kernel;
- `_no_task = true` (GE's attribute): the op launches nothing (a Split whose outputs
  are slices of its input);
- `_engine = "DNN_VM_AICPU"` (GE's engine name, set by precision selection where
  AI Core has no kernel for the op's dtypes): the op runs on the AI CPU engine, as a
  kernel of its own (never in a UB scope: the AI CPU has no Unified Buffer, and its
  task is another kind, KERNEL_EX);
- `_virtual_cores = <n> : i64` (set for `--virtual_type=1`): the op's kernel is tiled
  for n cores, its block_dim a multiple of n, so that it runs balanced on any
  virtual-instance slice whose size divides n (n = 1: it runs on one core);
- views: the shape ops GE deletes before the build (Reshape, Flatten, Squeeze,
  Unsqueeze: their output is their input's memory with another shape; Identity: a
  copy the consumer can read in place; Bitcast: the same bytes read as another
  dtype of the same width), and a TransData that moves no byte (a view of a
  data-dependent shape excepted: its kernel reports the shape);
- structural ops (module, graph, data, const, net_output) make no kernel, nor do
  control-flow ops (if, loop, scan and their yields): their bodies' ops do.
"""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Operation

from dialects import ascend_graph as ag
from dialects.formats import c0
from dialects.shapes import is_static

SCOPE_ATTR = "_fusion_scope"
NO_TASK_ATTR = "_no_task"
VIRTUAL_CORES_ATTR = "_virtual_cores"
ENGINE_ATTR = "_engine"
AICPU_ENGINE = "DNN_VM_AICPU"
"""GE's name of the AI CPU engine: the value of `_engine` on an op that runs there."""

VIEW_OPS: tuple[type[Operation], ...] = (
    ag.ReshapeOp, ag.FlattenOp, ag.SqueezeOp, ag.UnsqueezeOp, ag.IdentityOp, ag.BitcastOp,
)
"""Pure views of their input's bytes: GE removes them before the build."""
STRUCTURAL_OPS: tuple[type[Operation], ...] = (ModuleOp, ag.GraphOp, ag.DataOp, ag.ConstOp, ag.NetOutputOp)
CONTROL_FLOW_OPS: tuple[type[Operation], ...] = (ag.ControlFlowOp, ag.YieldOp)
"""Run by label tasks and copies; the ops of their bodies make the kernels."""


def op_type(op: Operation) -> str:
    return getattr(op, "OP_TYPE", op.name)


def is_no_task(op: Operation) -> bool:
    attr = op.attributes.get(NO_TASK_ATTR)
    return isinstance(attr, IntegerAttr) and bool(attr.value.data)


def is_aicpu(op: Operation) -> bool:
    """Whether the op runs on the AI CPU engine (its own kernel, a KERNEL_EX task)."""
    attr = op.attributes.get(ENGINE_ATTR)
    return isinstance(attr, StringAttr) and attr.data == AICPU_ENGINE


def scope_of(op: Operation) -> int | None:
    attr = op.attributes.get(SCOPE_ATTR)
    return attr.value.data if isinstance(attr, IntegerAttr) else None


def virtual_cores(ops: Iterable[Operation]) -> int | None:
    """The cores a kernel of `ops` is tiled for on virtual instances (the fewest any of
    its ops asks for), or None when built for the whole chip."""
    asked = [a.value.data for op in ops if isinstance(a := op.attributes.get(VIRTUAL_CORES_ATTR), IntegerAttr)]
    return min(asked, default=None)


def is_view(op: Operation) -> bool:
    """A shape view GE removes before the build, or a TransData that moves no byte.

    NC1HWC0 <-> NCHW at H = W = 1 with C a multiple of C0 puts every element at the
    same address ([N, C1, 1, 1, C0] and [N, C, 1, 1] are both n-major, then c), so
    the build aliases it like a reshape instead of launching a copy kernel.

    A view of or to a data-dependent value (a dynamic shape in a graph to build) is no
    view: the shapes are known only when it runs, so it runs, as an AI CPU kernel that
    reads its input at its actual shape and reports its own.
    """
    if isinstance(op, VIEW_OPS):
        return all(is_static(ag.shape_of(v.type)) for v in (*op.operands, *op.results))
    if not isinstance(op, ag.TransDataOp):
        return False
    formats_ = {op.src_format.data, op.dst_format.data}
    logical = ag.shape_of(op.x.type)
    if formats_ != {"NC1HWC0", "NCHW"} or len(logical) != 4 or not is_static(logical):
        return False
    _, c, h, w = logical
    return h == w == 1 and c % c0(ag.dtype_of(op.x.type)) == 0


def makes_kernel(op: Operation) -> bool:
    """Whether the build makes a kernel for the op (alone or in its scope)."""
    return not (isinstance(op, STRUCTURAL_OPS + CONTROL_FLOW_OPS) or is_view(op) or is_no_task(op))


def kernel_scopes(module: ModuleOp) -> int:
    """The number of kernels the build makes of `module` (one per scope, one per other op that makes a kernel)."""
    scopes: set[int] = set()
    others = 0
    for op in module.walk():
        if not makes_kernel(op):
            continue
        scope = scope_of(op)
        if scope is None:
            others += 1
        else:
            scopes.add(scope)
    return others + len(scopes)
