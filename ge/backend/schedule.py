"""The build's view of a graph: the tasks it will run, in order, and the buffers they touch.

A `Schedule` is what memory planning, stream assignment and task generation share.
It walks one `ascend_graph.graph` in block order (a topological order) and makes:

- a node per group of tasks: one H2D node first (a copy per graph input), a node
  per kernel (an `ascend_kernel.launch`, or, in a graph not yet lowered, every
  compute op), one D2H node (a copy per graph output), and MODEL_END_GRAPH last.
  The copies are grouped so that stream assignment sees the inputs arrive
  together, as the runtime delivers them, rather than as separate producers;
- a buffer per value that owns memory, in one region: graph inputs (written by
  their H2D copy), outputs (every buffer a graph output aliases: never reused,
  read back by D2H), weights (consts, written when the model loads), and the
  feature map (everything else, the only region whose memory is reused);
- a slice per SSA value: (buffer, byte offset, byte size). Views
  (`dialects.kernel_boundary.is_view`: reshape, flatten, squeeze, unsqueeze, identity,
  bitcast, and a TransData that moves no byte) are their input's slice; the outputs of a
  `_no_task` SplitD/SplitVD are consecutive slices of their input (GE's
  `_output_reuse_input` on dim 0). Neither makes a node or owns memory.

A tensor's byte size is the product of its type's shape (the physical shape once
formats are chosen) times the element size; dynamic dims cannot be planned and
are refused with the value's op named, except those of an AI CPU kernel's
data-dependent results (`ascend_graph.DataDependentOp`), which get their upper
bound's bytes, and a graph output of one is described by that bound (the run gives
its actual shape).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from dialects import ascend_graph as ag
from dialects import ascend_kernel as ak
from dialects import formats
from dialects.shapes import fmt, is_static, numel
from ge.core.errors import ModelError
from ge.core.ir import graph_of
from ge.om.memory import Region
from dialects.kernel_boundary import is_no_task, is_view


class NodeKind(str, Enum):
    H2D = "H2D"
    KERNEL = "KERNEL"
    D2H = "D2H"
    END = "MODEL_END_GRAPH"


@dataclass(frozen=True)
class Slice:
    """Bytes [offset, offset + nbytes) of one buffer."""

    buffer: int
    offset: int
    nbytes: int


@dataclass(eq=False)
class Buffer:
    """Memory one value (with its views) owns; `writer` is None for weights."""

    index: int
    name: str
    nbytes: int
    region: Region
    writer: int | None = None
    readers: list[int] = field(default_factory=list)
    const: ag.ConstOp | None = None

    @property
    def accesses(self) -> list[int]:
        """The nodes that touch the buffer, writer first."""
        return ([] if self.writer is None else [self.writer]) + self.readers


@dataclass(eq=False)
class Node:
    """One task-to-be: what it reads and writes, and for kernels which kernel."""

    index: int
    kind: NodeKind
    name: str
    op: Operation | None = None
    inputs: list[Slice] = field(default_factory=list)
    outputs: list[Slice] = field(default_factory=list)
    workspace: list[Slice] = field(default_factory=list)
    kernel: str | None = None
    block_dim: int = 1
    op_type: str | None = None
    """For an AI CPU kernel (core type AiCpu), the op type its KERNEL_EX task runs; else None."""


@dataclass(frozen=True)
class Port:
    """A graph input or output as the model's user sees it."""

    name: str
    type: TensorType
    slice: Slice


@dataclass(eq=False)
class Schedule:
    graph: ag.GraphOp
    nodes: list[Node]
    buffers: list[Buffer]
    inputs: list[Port]
    outputs: list[Port]

    def preds(self, node: Node) -> list[int]:
        """The nodes whose writes `node` reads (its data dependencies), without repeats."""
        seen: dict[int, None] = {}
        for s in node.inputs:
            writer = self.buffers[s.buffer].writer
            if writer is not None and writer != node.index:
                seen[writer] = None
        return list(seen)

    def of_region(self, region: Region) -> list[Buffer]:
        return [b for b in self.buffers if b.region is region]


def nbytes(t: Attribute, where: str) -> int:
    """prod(shape) * element size of a static tensor type."""
    if not isinstance(t, TensorType):
        raise ModelError(f"{where}: {t} is not a tensor and has no memory size")
    shape = tuple(t.get_shape())
    if not is_static(shape):
        raise ModelError(f"{where}: shape {fmt(shape)} is dynamic; the build plans static shapes only")
    return formats.nbytes(t.element_type, numel(shape))


def label(op: Operation) -> str:
    """The op's node name(s): a launch names its scope's ops."""
    return op.label if isinstance(op, ag.AscendOp | ak.LaunchOp) else op.name


class _Builder:
    def __init__(self, graph: ag.GraphOp, kernels: dict[str, ak.KernelOp]):
        self.graph = graph
        self.kernels = kernels
        self.nodes: list[Node] = []
        self.buffers: list[Buffer] = []
        self.slices: dict[SSAValue, Slice] = {}
        self.weights: dict[Attribute, Slice] = {}
        self.bounded: dict[SSAValue, TensorType] = {}
        """Data-dependent results, by the upper-bound type the build allocates."""

    def node(self, kind: NodeKind, name: str, op: Operation | None = None) -> Node:
        node = Node(len(self.nodes), kind, name, op)
        self.nodes.append(node)
        return node

    def buffer(self, name: str, size: int, region: Region, writer: int | None) -> Slice:
        self.buffers.append(Buffer(len(self.buffers), name, size, region, writer))
        return Slice(len(self.buffers) - 1, 0, size)

    def read(self, node: Node, value: SSAValue) -> None:
        s = self.slices[value]
        node.inputs.append(s)
        self.buffers[s.buffer].readers.append(node.index)

    def build(self) -> Schedule:
        block = self.graph.body.block
        inputs = self.inputs(self.graph.inputs)
        for op in block.ops:
            if isinstance(op, ag.DataOp | ag.NetOutputOp):
                continue
            if isinstance(op, ag.ConstOp):
                self.const(op)
            elif is_view(op):
                self.view(op)
            elif is_no_task(op):
                self.no_task(op)
            else:
                self.kernel(op)
        outputs = self.outputs(self.graph.output)
        self.node(NodeKind.END, "MODEL_END_GRAPH")
        return Schedule(self.graph, self.nodes, self.buffers, inputs, outputs)

    def inputs(self, data_ops: list[ag.DataOp]) -> list[Port]:
        if not data_ops:
            return []
        copy_in = self.node(NodeKind.H2D, "inputs")
        ports: list[Port] = []
        for data in data_ops:
            s = self.buffer(data.label, nbytes(data.out.type, f"Data '{data.label}'"), Region.INPUT, copy_in.index)
            copy_in.outputs.append(s)
            self.slices[data.out] = s
            ports.append(Port(data.label, data.out.type, s))  # type: ignore[arg-type]
        return ports

    def const(self, op: ag.ConstOp) -> None:
        if isinstance(op.value, ag.WeightRefAttr) and op.value in self.weights:
            self.slices[op.out] = self.weights[op.value]  # one weight, one copy in the blob
            return
        s = self.buffer(op.label, nbytes(op.out.type, f"Const '{op.label}'"), Region.WEIGHT, None)
        self.buffers[s.buffer].const = op
        self.slices[op.out] = s
        if isinstance(op.value, ag.WeightRefAttr):
            self.weights[op.value] = s

    def view(self, op: Operation) -> None:
        source = self.slices[op.operands[0]]
        size = nbytes(op.results[0].type, f"{op.name} '{label(op)}'")
        if size != source.nbytes:
            raise ModelError(
                f"{op.name} '{label(op)}' makes {size} bytes of a {source.nbytes}-byte tensor; "
                "a shape view must keep the physical size"
            )
        self.slices[op.results[0]] = source

    def no_task(self, op: Operation) -> None:
        """Outputs laid end to end in the input: the split dim must be outermost in memory."""
        where = f"{op.name} '{label(op)}' (_no_task)"
        source = self.slices[op.operands[0]]
        src_shape = tuple(op.operands[0].type.get_shape())  # type: ignore[union-attr]
        offset = 0
        for result in op.results:
            shape = tuple(result.type.get_shape())  # type: ignore[union-attr]
            differ = [i for i, (a, b) in enumerate(zip(src_shape, shape)) if a != b]
            if len(shape) != len(src_shape) or len(differ) > 1 or numel(src_shape[: differ[0] if differ else 0]) != 1:
                raise ModelError(
                    f"{where}: output {fmt(shape)} of input {fmt(src_shape)} is not a contiguous part of it; "
                    "a no-task split must split the outermost non-unit physical dim"
                )
            size = nbytes(result.type, where)
            self.slices[result] = Slice(source.buffer, source.offset + offset, size)
            offset += size
        if offset != source.nbytes:
            raise ModelError(f"{where}: outputs cover {offset} of the input's {source.nbytes} bytes")

    def kernel(self, op: Operation) -> None:
        node = self.node(NodeKind.KERNEL, label(op), op)
        workspace = 0
        kernel = None
        if isinstance(op, ak.LaunchOp):
            kernel = self.kernels.get(op.kernel.root_reference.data)
            if kernel is None:
                raise ModelError(f"launch '{op.label}' calls {op.kernel}, which the module does not define")
            node.kernel, node.block_dim = kernel.sym_name.data, kernel.int_prop("block_dim")
            workspace = kernel.int_prop("workspace")
            if kernel.core_type.data == ak.AICPU:
                node.op_type = kernel.op_types.data[0].data
        for value in op.operands:
            self.read(node, value)
        bounds = _bounds(kernel) if isinstance(op, ak.LaunchOp) and kernel is not None else {}
        for i, result in enumerate(op.results):
            name = f"{node.name}:{i}" if len(op.results) > 1 else node.name
            if i in bounds:
                self.bounded[result] = bounds[i]
            s = self.buffer(name, nbytes(self.bounded.get(result, result.type), f"{op.name} '{node.name}'"), Region.FEATURE_MAP, node.index)
            node.outputs.append(s)
            self.slices[result] = s
        if workspace:
            node.workspace.append(self.buffer(f"{node.name}:workspace", workspace, Region.FEATURE_MAP, node.index))

    def outputs(self, net: ag.NetOutputOp) -> list[Port]:
        ports: list[Port] = []
        copy_out = self.node(NodeKind.D2H, "outputs", net)
        for name, value in zip(net.names, net.outputs):
            s = self.slices[value]
            buffer = self.buffers[s.buffer]
            if buffer.region is Region.FEATURE_MAP:
                buffer.region = Region.OUTPUT
            self.read(copy_out, value)
            ports.append(Port(name.data, self.bounded.get(value, value.type), s))  # type: ignore[arg-type]
        return ports


def _bounds(kernel: ak.KernelOp) -> dict[int, TensorType]:
    """The upper-bound types of the kernel's outputs whose shapes its run decides, by output index."""
    out: dict[int, TensorType] = {}
    for i, v in enumerate(kernel.yield_op.values):
        if ag.data_dependent(v):
            out[i] = ag.tensor(ag.dtype_of(v.type), ag.upper_bound(v))
    return out


def schedule_of(module: ModuleOp) -> Schedule:
    """The schedule of the module's graph, with its launches' kernels looked up in the module."""
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, ak.KernelOp)}
    return _Builder(graph_of(module), kernels).build()
