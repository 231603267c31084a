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
data-dependent results (`ascend_graph.DataDependentOp`'s, or an op's reading one),
which get the bytes of the upper bound their kernel argument declares, and a graph
output of one is described by that bound (the run gives its actual shape).

Control flow (If, and Loop as `lower-to-kernel` leaves it) becomes GE's label
tasks in the same list: a LABEL_SWITCH_BY_INDEX node on the condition, the nodes of
each body after a LABEL_SET, LABEL_GOTO past the branch not taken, and COPY nodes
(MEMCPY_ASYNC_D2D) that move what a body yields into the op's result buffers (a
loop's carried buffers). A body's arguments are its op's operand slices. Such a
schedule runs on one stream (`has_control_flow`); see `_Builder.branch` and
`_Builder.loop` for how list-order planning stays safe across the jumps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Operation, SSAValue

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
    COPY = "MEMCPY_ASYNC_D2D"
    LABEL_SET = "LABEL_SET"
    LABEL_GOTO = "LABEL_GOTO"
    LABEL_SWITCH = "LABEL_SWITCH_BY_INDEX"


CONTROL_KINDS = (NodeKind.LABEL_SET, NodeKind.LABEL_GOTO, NodeKind.LABEL_SWITCH)


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
    labels: list[int] = field(default_factory=list)
    """A label node's label, or a switch's targets (its index is its first input)."""


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

    @property
    def has_control_flow(self) -> bool:
        """Whether the nodes jump (If, Loop): then they all run on one stream."""
        return any(n.kind in CONTROL_KINDS for n in self.nodes)


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
        self.labels = 0

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
        inputs = self.inputs(self.graph.inputs)
        self.block(self.graph.body.block)
        outputs = self.outputs(self.graph.output)
        self.node(NodeKind.END, "MODEL_END_GRAPH")
        return Schedule(self.graph, self.nodes, self.buffers, inputs, outputs)

    def block(self, block: Block) -> None:
        for op in block.ops:
            if isinstance(op, ag.DataOp | ag.NetOutputOp | ag.YieldOp):
                continue
            if isinstance(op, ag.ConstOp):
                self.const(op)
            elif isinstance(op, ag.IfOp):
                self.branch(op)
            elif isinstance(op, ag.LoopOp):
                self.loop(op)
            elif isinstance(op, ag.ControlFlowOp):
                raise ModelError(f"{op.OP_TYPE} '{op.label}' has no tasks; only If and Loop are built")
            elif is_view(op):
                self.view(op)
            elif is_no_task(op):
                self.no_task(op)
            else:
                self.kernel(op)

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

    # ------------------------------------------------------------ control flow
    #
    # The nodes of a body follow the op's own in the one list; labels and switches
    # jump over a branch not taken and back to a loop's head. A body's arguments are
    # the slices of the op's operands; its yield is copied into the op's result
    # buffers. Planned on the list order, a buffer may share bytes with a buffer of
    # the other branch (never both run); a buffer a loop body reads from outside is
    # read again by the loop's last switch, so that it lives through every iteration.

    def label(self) -> int:
        self.labels += 1
        return self.labels - 1

    def set_label(self, label: int, name: str) -> None:
        self.node(NodeKind.LABEL_SET, f"{name}/label{label}").labels.append(label)

    def switch(self, op: Operation, index: SSAValue, labels: list[int], what: str) -> Node:
        node = self.node(NodeKind.LABEL_SWITCH, f"{label(op)}/{what}", op)
        node.labels.extend(labels)
        self.read(node, index)
        return node

    def copy(self, name: str, source: Slice, target: Slice) -> None:
        if source == target:
            return
        if source.nbytes != target.nbytes:
            raise ModelError(f"{name}: a body yields {source.nbytes} bytes for a {target.nbytes}-byte result")
        node = self.node(NodeKind.COPY, name)
        node.inputs.append(source)
        self.buffers[source.buffer].readers.append(node.index)
        node.outputs.append(target)
        buffer = self.buffers[target.buffer]
        if buffer.writer is None:
            buffer.writer = node.index
        else:  # another path's write of the same result: an access for the planner
            buffer.readers.append(node.index)

    def results(self, op: Operation, types: list[Attribute]) -> list[Slice]:
        where = f"{op.name} '{label(op)}'"
        return [self.buffer(f"{label(op)}:{i}", nbytes(t, where), Region.FEATURE_MAP, None) for i, t in enumerate(types)]

    def body(self, block: Block, args: list[Slice]) -> list[Slice]:
        """The body's nodes, its last arguments on `args`; the slices of what it yields."""
        for arg, s in zip(block.args[len(block.args) - len(args):], args):
            self.slices[arg] = s
        self.block(block)
        yielded = block.last_op
        assert isinstance(yielded, ag.YieldOp)
        return [self.slices[v] for v in yielded.values]

    def branch(self, op: ag.IfOp) -> None:
        """LABEL_SWITCH_BY_INDEX cond [else, then]; then: ... GOTO end; else: ...; end."""
        otherwise, then, end = self.label(), self.label(), self.label()
        name = label(op)
        self.switch(op, op.cond, [otherwise, then], "switch")
        results = self.results(op, [r.type for r in op.results])
        args = [self.slices[v] for v in op.inputs]
        for body, at in ((op.then_branch, then), (op.else_branch, otherwise)):
            self.set_label(at, name)
            for i, (source, target) in enumerate(zip(self.body(body.block, args), results)):
                self.copy(f"{name}/result{i}", source, target)
            if at == then:
                self.node(NodeKind.LABEL_GOTO, f"{name}/goto{end}").labels.append(end)
        self.set_label(end, name)
        self.slices.update(zip(op.results, results))

    def loop(self, op: ag.LoopOp) -> None:
        """Carried buffers from the initial values; LABEL_SWITCH_BY_INDEX cond [exit, head];
        head: the body, its next values copied into the carried buffers, the switch
        on the condition it yields; exit: the results are the carried buffers. The loop
        is `lower-to-kernel`'s (`_counted`): the body's condition and iteration-number
        arguments are unused, the trip count is tested by the yielded condition."""
        body = op.body.block
        name = label(op)
        if body.args[0].uses or body.args[1].uses:
            raise ModelError(f"Loop '{name}': its body reads its iteration number or condition; lower-to-kernel counts them first")
        n = op.carried
        carried = self.results(op, [r.type for r in op.results])
        for i, (init, target) in enumerate(zip(op.inputs[:n], carried)):
            self.copy(f"{name}/init{i}", self.slices[init], target)
        leave, head = self.label(), self.label()
        self.switch(op, op.cond, [leave, head], "start")
        self.set_label(head, name)
        captured = [self.slices[v] for v in op.inputs[n:]]
        yielded = self.body(body, [*carried, *captured])
        staged = []
        for i, s in enumerate(yielded[1:]):
            if s in carried and s != carried[i]:  # another carried value: read it before it is overwritten
                stage = self.buffer(f"{name}:stage{i}", s.nbytes, Region.FEATURE_MAP, None)
                self.copy(f"{name}/stage{i}", s, stage)
                s = stage
            staged.append(s)
        for i, (source, target) in enumerate(zip(staged, carried)):
            self.copy(f"{name}/next{i}", source, target)
        back = self.switch(op, body.last_op.values[0], [leave, head], "next")  # type: ignore[union-attr]
        for s in [*carried, *captured]:
            back.inputs.append(s)
            self.buffers[s.buffer].readers.append(back.index)
        self.set_label(leave, name)
        self.slices.update(zip(op.results, carried))

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
    """The upper-bound types of the kernel's outputs whose shapes its run decides (as
    their arguments declare them), by output index."""
    out: dict[int, TensorType] = {}
    for i, (v, arg) in enumerate(zip(kernel.yield_op.values, kernel.outputs)):
        if not is_static(ag.shape_of(v.type)):
            out[i] = ag.tensor(ag.dtype_of(v.type), arg.shape.get_values())
    return out


def schedule_of(module: ModuleOp) -> Schedule:
    """The schedule of the module's graph, with its launches' kernels looked up in the module."""
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, ak.KernelOp)}
    return _Builder(graph_of(module), kernels).build()
