"""lower-to-kernel: every kernel scope of the graph becomes one launch of one kernel.

A kernel scope is a UB fusion scope (the ops sharing a `_fusion_scope`), or one
compute op outside any scope; shape views (Reshape, Flatten, Squeeze, Unsqueeze,
Identity), `_no_task` ops, data, const and net_output make no kernel and stay in
the graph as they are (`dialects.kernel_boundary.makes_kernel`, which `kernel_scopes`
counts by). Each scope is replaced by `ascend_kernel.launch @k(inputs)`, whose
results are the scope's values used outside it and whose `names` are its ops' ONNX
node names; `@k` is an `ascend_kernel.kernel` at module level holding the scope's
ops (its `compute` region) and the tiled per-block program of `passes.lowering`.

An op on the AI CPU engine (`_engine = "DNN_VM_AICPU"`, see `dialects.kernel_boundary`)
is a kernel scope of its own whatever scope attribute it carries: its kernel has the
core type `AiCpu`, one block, no tiling and an empty program (the simulator times it
with the SoC's AI CPU cost model, not a pipe program), and the backend launches it
with a KERNEL_EX task.

An op with data-dependent result dims (`ascend_graph.DataDependentOp`: NonZero, Unique,
Compress, NonMaxSuppression) runs on the AI CPU only, and so does an op reading such a
result, directly or through another such op (precision selection places them; a
shape view of one is a kernel too, since it has a shape to report). Each data-dependent
value has an upper bound (`ascend_graph.data_dependent_bounds`: the producer's shape
rule on its operands' bounds), which its AI CPU kernels' arguments declare as their
shape: the buffer the build allocates, which the kernel reads at the actual shape the
run reports and writes from its start. A value without a bound (a Reshape to a shape
computed from the data) is refused, as is an AI Core op, or a control-flow op, reading one.

Scopes that are the same computation (the same ops, properties other than node
names, types and wiring) share one kernel, as CANN reuses one kernel binary for
every op of the same shape: the 12 layers of a BERT encoder make 12 launches of each
of their kernels. The kernel's compute region keeps the node names of the first
scope; each launch keeps its own.

With a kernel cache in use (`ge.core.kernel_cache`, set by the compile, never by
`ge-opt`), a scope's kernel is read from the cache when its entry exists (the same
key after the compiler's version) and built and stored otherwise. The entry is the
kernel's IR text; a kernel read from it takes a fresh symbol name and a compute
region cloned from this scope, so that it carries this scope's node names: a model
compiled from the cache is the model compiled without it.

A tuner's tilings (`passes.lowering.space.using`, which `ge.compile` sets from the
tune bank) replace the analytic ones of the scopes they name by `bank_key`; a kernel
built with one is its own entry in the kernel cache.

The launches are placed in a topological order that keeps the graph's order where
it can (a scope's launch goes where its first op was, once its inputs exist), so
the build can plan memory and emit tasks in list order.

Control flow: the bodies of If and Loop are lowered like the graph, their launches
inside them (the build turns the ops into label tasks, `ge.backend.schedule`). First,
a Scan becomes the Loop GE would run (`_as_loop`), a Loop's scan outputs become
carried tensors that each iteration writes one row of (`_accumulated`: a task
writes at fixed addresses), and a Loop gets the control data the device runs it on
(`_counted`: its iteration number a carried counter, the trip-count test part of
the condition its body yields). Scan outputs need a number of rows known before
the loop runs.
"""

from __future__ import annotations

import heapq
import io
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.parser import Parser
from xdsl.passes import ModulePass
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError
from xdsl.utils.lexer import Input, Span

import dialects
import passes.lowering
from dialects import ascend_graph as ag
from dialects.ascend_kernel import (
    AICPU,
    ArgAttr,
    BufferType,
    KernelOp,
    LaunchOp,
    YieldOp,
    verify_fits,
)
from dialects.formats import SMALL_CHANNEL_ATTR
from dialects.kernel_boundary import (
    ENGINE_ATTR,
    is_aicpu,
    makes_kernel,
    scope_of,
    virtual_cores,
)
from dialects.shapes import DYN, ShapeError, fmt, is_static
from ge.core import dtypes, ir, kernel_cache
from ge.core import soc as socs
from ge.core.errors import ModelError
from ge.core.options import check_fields, option_field
from ge.core.weights import WeightStore, store_of
from passes.graph_match import new_constant
from passes.lowering import plan, space

LOWERING_SOURCES = (
    __file__,
    os.path.dirname(passes.lowering.__file__),
    os.path.dirname(dialects.__file__),
    dtypes.__file__,
    os.path.dirname(socs.__file__),
)
"""What a kernel is made from besides its scope: a change here makes new cache keys."""


@dataclass(frozen=True)
class Scope:
    """The ops of one kernel (program order) and the values crossing its boundary."""

    ops: tuple[Operation, ...]
    inputs: tuple[SSAValue, ...]
    outputs: tuple[SSAValue, ...]

    @classmethod
    def of(cls, ops: Sequence[Operation]) -> Scope:
        members = set(ops)
        inputs: dict[SSAValue, None] = {}
        for op in ops:
            for v in op.operands:
                if v.owner not in members:
                    inputs.setdefault(v)
        outputs = [r for op in ops for r in op.results if any(u.operation not in members for u in r.uses)]
        return cls(tuple(ops), tuple(inputs), tuple(outputs))

    def key(self, soc: str) -> str:
        """What makes two scopes the same kernel: all but the node names."""
        index = {r: f"%{i}.{j}" for i, op in enumerate(self.ops) for j, r in enumerate(op.results)}
        index.update({v: f"in{i}" for i, v in enumerate(self.inputs)})
        parts = [soc, ",".join(str(v.type) for v in self.inputs), f"virtual cores {virtual_cores(self.ops)}"]
        for op in self.ops:
            props = sorted((k, str(v)) for k, v in op.properties.items() if k != "name")
            mode = op.attributes.get("impl_mode")
            engine = op.attributes.get(ENGINE_ATTR)
            small = op.attributes.get(SMALL_CHANNEL_ATTR)
            operands = ",".join(index[v] for v in op.operands)
            results = ",".join(str(r.type) for r in op.results)
            parts.append(f"{op.name}({operands}){props}{mode}{engine}{small}->{results}")
        parts.append(",".join(index[v] for v in self.outputs))
        return "\n".join(parts)


def bank_key(scope: Scope, soc: str) -> str:
    """What a tuned tiling is stored under (`ge.aoe.bank`): the compiler's version and
    the scope's key (SoC, ops, properties, types, formats, impl mode, virtual cores)."""
    return f"{kernel_cache.compiler_version(LOWERING_SOURCES)}\n{scope.key(soc)}"


def scope_of_kernel(kernel: KernelOp) -> Scope:
    """The scope a kernel was built from: its compute region's ops, arguments and yield."""
    block = kernel.compute.block
    ops = list(block.ops)
    last = ops[-1]
    assert isinstance(last, YieldOp)
    return Scope(tuple(ops[:-1]), tuple(block.args), tuple(last.operands))


def build_kernel(soc: str, scope: Scope, tiling: dict[str, int] | None = None) -> KernelOp:
    """One scope's kernel outside any module (a tuner timing a tiling)."""
    return _Lowering(ModuleOp([]), soc).build(scope, tiling)


def kernel_text(kernel: KernelOp) -> str:
    """The kernel's IR text, as a kernel cache entry holds it."""
    return _text(kernel)


def parse_kernel(text: str) -> KernelOp:
    """A kernel from its IR text (one `ascend_kernel.kernel` op), a private copy."""
    return _prototype(text).clone()


def kernel_scopes_of(block: Block) -> list[list[Operation]]:
    """The ops of the block's kernel scopes, in the order of their first ops (an AI CPU
    op alone, whatever its scope attribute says)."""
    groups: dict[object, list[Operation]] = {}
    for op in block.ops:
        if not makes_kernel(op):
            continue
        scope = scope_of(op)
        alone = scope is None or is_aicpu(op)
        groups.setdefault(("op", id(op)) if alone else ("scope", scope), []).append(op)
    return list(groups.values())


def _snake(op_type: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", op_type).lower()


@dataclass
class SharedKernels:
    """The kernels built within `shared_kernels`, by scope key (the ops in their modules,
    which a scope taking one clones), and how many scopes took one."""

    kernels: dict[str, KernelOp] = field(default_factory=dict)
    hits: int = 0


_shared: ContextVar[SharedKernels | None] = ContextVar("shared_kernels", default=None)


@contextmanager
def shared_kernels(shared: SharedKernels | None = None) -> Iterator[SharedKernels]:
    """Within it, a scope whose key (`Scope.key`, as the kernel cache keys it) an earlier
    lowering in the context built takes a copy of that kernel, renamed and given its own
    compute region, as a kernel cache hit does: the kernel a lowering of it would build.
    A multi-gear compile lowers its gears in one such context, in memory and whatever
    op_compiler_cache_mode says. Yields `shared` when given: what an earlier such context lowered."""
    token = _shared.set(shared if shared is not None else SharedKernels())
    try:
        yield _shared.get()  # type: ignore[misc]
    finally:
        _shared.reset(token)


class _Lowering:
    """Lowers the scopes of one module, sharing kernels between equal scopes."""

    def __init__(self, module: ModuleOp, soc: str):
        self.module = module
        self.soc = soc
        self.profile = socs.load(soc)
        self.kernels: dict[str, KernelOp] = {}
        self.names = {op.sym_name.data for op in module.ops if isinstance(op, KernelOp)}
        self.bounds: dict[SSAValue, tuple[int, ...]] = {}
        """The upper bound of each data-dependent value, a launch's result taking its op's."""

    def lower(self, block: Block) -> None:
        """Lower the block's scopes, and those of the bodies of its control-flow ops."""
        self.bounds.update(_data_dependent_bounds(block))
        for op in list(block.ops):
            if isinstance(op, ag.ControlFlowOp):
                for body in op.regions:
                    self.lower(body.block)
        for ops in kernel_scopes_of(block):
            scope = Scope.of(ops)  # after the launches before it replaced their scopes' values
            kernel = self.kernel(scope)
            names = [op.label if isinstance(op, ag.AscendOp) else op.name for op in scope.ops]
            launch = LaunchOp(kernel.sym_name.data, scope.inputs, [v.type for v in scope.outputs], names)
            block.insert_op_before(launch, scope.ops[0])
            for old, new in zip(scope.outputs, launch.outputs):
                old.replace_all_uses_with(new)
                if old in self.bounds:
                    self.bounds[new] = self.bounds.pop(old)
            for op in reversed(scope.ops):
                block.erase_op(op)
        _topological(block)

    def kernel(self, scope: Scope) -> KernelOp:
        bounds = ",".join(fmt(self.bounds[v]) if v in self.bounds else "-" for v in (*scope.inputs, *scope.outputs))
        key = f"{scope.key(self.soc)}\nbounds {bounds}"
        if key in self.kernels:
            return self.kernels[key]
        lookup = space.current()
        bounded = any(v in self.bounds for v in (*scope.inputs, *scope.outputs))
        tuned = None if lookup is None or bounded or is_aicpu(scope.ops[0]) else lookup(bank_key(scope, self.soc))
        tiling = dict(tuned) if tuned is not None else None
        if tiling is not None:
            key += f"\ntuned {sorted(tiling.items())}"
        shared = _shared.get()
        first = shared.kernels.get(key) if shared is not None else None
        cache = kernel_cache.current()
        if first is not None:
            kernel = self.adopted(first.clone(), scope)
            shared.hits += 1  # type: ignore[union-attr]
        elif cache is None:
            kernel = self.build(scope, tiling)
        else:
            kernel = self.cached(cache, scope, f"{kernel_cache.compiler_version(LOWERING_SOURCES)}\n{key}", tiling)
        if shared is not None and first is None:
            shared.kernels[key] = kernel  # cloned when a later scope takes it
        self.module.body.block.add_op(kernel)
        self.kernels[key] = kernel
        return kernel

    def cached(self, cache: kernel_cache.KernelCache, scope: Scope, key: str, tiling: dict[str, int] | None) -> KernelOp:
        """The scope's kernel from the cache, or built and stored there."""
        names = [op.label if isinstance(op, ag.AscendOp) else op.name for op in scope.ops]
        listed = cache.listed(names, _op_types(scope.ops))
        if cache.mode == "enable" and not listed:
            text = cache.load(key)
            kernel = None if text is None else self.parse(cache, key, text, scope)
            if kernel is not None:
                cache.hits += 1
                return kernel
        cache.misses += 1
        kernel = self.build(scope, tiling)
        if not listed:  # an op_debug_list op is built for debugging: it stays out of the cache
            text = _text(kernel)
            cache.store(key, text)
            _remember(text, kernel.clone())
        return kernel

    def parse(self, cache: kernel_cache.KernelCache, key: str, text: str, scope: Scope) -> KernelOp | None:
        """The kernel of an entry, renamed and given this scope's compute region; None
        (the entry discarded) when its text is not one kernel."""
        try:
            kernel = _prototype(text).clone()
        except ParseError as e:
            cache.discard(cache.path(key), f"not a kernel: {str(e).strip().splitlines()[-1]}")
            return None
        return self.adopted(kernel, scope)

    def adopted(self, kernel: KernelOp, scope: Scope) -> KernelOp:
        """A copy of another scope's kernel made this scope's: a fresh name, this scope's compute region."""
        prefix = "aicpu_" if kernel.core_type.data == AICPU else "te_"
        kernel.properties["sym_name"] = StringAttr(self.fresh_name([t.data for t in kernel.op_types], prefix))
        old = kernel.compute.block
        kernel.compute.add_block(_compute(scope))
        kernel.compute.detach_block(old)
        old.erase()
        return kernel

    def build(self, scope: Scope, tiling: dict[str, int] | None = None) -> KernelOp:
        """The scope's kernel, with `tiling` (a tuned one) in place of the analytic choice."""
        if is_aicpu(scope.ops[0]):
            return self.build_aicpu(scope)
        planned = plan(self.profile, scope.ops, scope.inputs, scope.outputs, tiling)
        gm_types = [BufferType("GM")] * (len(scope.inputs) + len(scope.outputs) + (planned.workspace > 0))
        program = Block(arg_types=gm_types)
        values = [*scope.inputs, *scope.outputs]
        gm = dict(zip(values, program.args))
        workspace = program.args[len(values)] if planned.workspace else None
        program.add_ops(planned.program(gm, workspace))
        op_types = _op_types(scope.ops)
        args = [ArgAttr.of("input", _tensor(v)) for v in scope.inputs] + [ArgAttr.of("output", _tensor(v)) for v in scope.outputs]
        kernel = KernelOp(
            self.fresh_name(op_types),
            op_types=op_types,
            block_dim=planned.block_dim,
            core_type=planned.core_type,
            impl_mode=_impl_mode(scope.ops),
            tiling=planned.tiling,
            args=args,
            soc=self.soc,
            workspace=planned.workspace,
            compute=Region(_compute(scope)),
            program=Region(program),
        )
        verify_fits(kernel, self.profile)
        return kernel

    def build_aicpu(self, scope: Scope) -> KernelOp:
        """The AI CPU kernel of one op: its compute region, GM arguments and no program."""
        op_types = _op_types(scope.ops)
        args = [ArgAttr.of("input", self.bounded(v)) for v in scope.inputs] + [ArgAttr.of("output", self.bounded(v)) for v in scope.outputs]
        return KernelOp(
            self.fresh_name(op_types, "aicpu_"),
            op_types=op_types,
            block_dim=1,
            core_type=AICPU,
            impl_mode=_impl_mode(scope.ops),
            tiling={},
            args=args,
            soc=self.soc,
            workspace=0,
            compute=Region(_compute(scope)),
            program=Region(Block(arg_types=[BufferType("GM")] * len(args))),
        )

    def bounded(self, value: SSAValue) -> TensorType:
        """The value's type, a data-dependent one's at its upper bound: the buffer its kernel gets."""
        t = _tensor(value)
        return ag.tensor(t.element_type, self.bounds[value]) if value in self.bounds else t

    def fresh_name(self, op_types: Sequence[str], prefix: str = "te_") -> str:
        """A new kernel symbol: `te_` (a TBE kernel) or `aicpu_`, then its op types."""
        stem = prefix + "_".join(_snake(t) for t in op_types[:3])
        n = 0
        while f"{stem}_{n}" in self.names:
            n += 1
        self.names.add(f"{stem}_{n}")
        return f"{stem}_{n}"


def _data_dependent_bounds(block: Block) -> dict[SSAValue, tuple[int, ...]]:
    """The upper bounds of the block's data-dependent values; refused: one without a
    bound, and an op that reads one or makes one not on the AI CPU."""
    try:
        bounds = ag.data_dependent_bounds(block.ops)
    except ShapeError as e:
        raise ModelError(str(e)) from e
    for op in block.ops:
        read = next((v for v in op.operands if v in bounds), None)
        if isinstance(op, ag.NetOutputOp) or is_aicpu(op) or (read is None and not isinstance(op, ag.DataDependentOp)):
            continue
        if read is None:
            assert isinstance(op, ag.DataDependentOp)
            raise ModelError(f"{op.OP_TYPE} '{op.label}' has data-dependent result shapes and runs on the AI CPU only; run precision-selection, which places it there")
        producer = read.owner
        assert isinstance(producer, ag.AscendOp)
        what = f"{getattr(op, 'OP_TYPE', op.name)} '{op.label if isinstance(op, ag.AscendOp) else op.name}' reads the result of {producer.OP_TYPE} '{producer.label}', whose shape is known only when it runs"
        if isinstance(op, ag.ControlFlowOp) or not isinstance(op, ag.AscendOp):
            raise ModelError(f"{what}: a control-flow op takes static shapes only")
        raise ModelError(f"{what}, and runs on the AI CPU only, where the run gives it that shape; run precision-selection, which places it there")
    return bounds


def _op_types(ops: Sequence[Operation]) -> list[str]:
    return list(dict.fromkeys(getattr(op, "OP_TYPE", op.name) for op in ops))


def _compute(scope: Scope) -> Block:
    """The scope's ops cloned into a block of their own, ending in a yield of its outputs."""
    compute = Block(arg_types=[v.type for v in scope.inputs])
    mapping: dict[SSAValue, SSAValue] = dict(zip(scope.inputs, compute.args))
    for op in scope.ops:
        compute.add_op(op.clone(value_mapper=mapping))
    compute.add_op(YieldOp([mapping[v] for v in scope.outputs]))
    return compute


_PARSED: dict[str, KernelOp] = {}
"""Entry texts and their kernels, oldest first: parsing costs more than building
(xDSL's lexer), so a process that compiles again clones a kernel it stored or parsed."""
PARSED_MAX = 1024


def _remember(text: str, kernel: KernelOp) -> None:
    if len(_PARSED) >= PARSED_MAX:
        del _PARSED[next(iter(_PARSED))]
    _PARSED[text] = kernel


def _prototype(text: str) -> KernelOp:
    """The kernel an entry's text holds. It is not verified here: the entry's digest says
    it is the text a built kernel printed, and the module is verified after the lowering."""
    if text in _PARSED:
        return _PARSED[text]
    kernel = Parser(ir.context(), text).parse_op()
    if not isinstance(kernel, KernelOp):
        raise ParseError(Span(0, len(kernel.name), Input(text, "entry")), f"{kernel.name} is not an ascend_kernel.kernel")
    _remember(text, kernel)
    return kernel


def _text(kernel: KernelOp) -> str:
    out = io.StringIO()
    Printer(stream=out).print_op(kernel)
    return out.getvalue()


def _tensor(value: SSAValue) -> TensorType:
    assert isinstance(value.type, TensorType)
    return value.type


def _impl_mode(ops: Sequence[Operation]) -> str:
    """high_precision when any op of the scope asks for it (precision selection sets
    `impl_mode`), else high_performance, CANN's default for inference."""
    modes = {getattr(op.attributes.get("impl_mode"), "data", None) for op in ops}
    return "high_precision" if "high_precision" in modes else "high_performance"


def _topological(block: Block) -> None:
    """Reorder the block so every op follows its operands' producers, keeping the
    current order wherever it already does (net_output stays last)."""
    ops = list(block.ops)
    position = {op: i for i, op in enumerate(ops)}
    waiting = {op: {v.owner for v in op.operands if v.owner in position and v.owner is not op} for op in ops}
    users: dict[Operation, list[Operation]] = {op: [] for op in ops}
    for op, producers in waiting.items():
        for p in producers:
            users[p].append(op)  # type: ignore[index]
    ready = [(position[op], op) for op in ops if not waiting[op]]
    heapq.heapify(ready)
    order: list[Operation] = []
    while ready:
        _, op = heapq.heappop(ready)
        order.append(op)
        for user in users[op]:
            waiting[user].discard(op)
            if not waiting[user]:
                heapq.heappush(ready, (position[user], user))
    if len(order) != len(ops):
        raise ModelError("the kernel scopes form a cycle: a scope both feeds and reads another op's result")
    if order == ops:
        return
    for op in ops:
        block.detach_op(op)
    block.add_ops(order)


@dataclass(frozen=True)
class LowerToKernel(ModulePass):
    """Replace every kernel scope by a launch of a tiled ascend_kernel.kernel."""

    name = "lower-to-kernel"

    soc_version: str = option_field("soc_version")
    """The SoC the kernels are tiled for."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_fields(self)
        store = store_of(op)
        # innermost first: a Scan's body is cloned into its loop with the loops in it done
        for flow in reversed([o for o in op.walk() if isinstance(o, ag.LoopOp | ag.ScanOp)]):
            loop, reverse = _as_loop(flow, store) if isinstance(flow, ag.ScanOp) else (flow, ())
            _counted(_accumulated(loop, store, reverse), store)
        lowering = _Lowering(op, self.soc_version)
        for graph in [g for g in op.ops if isinstance(g, ag.GraphOp)]:
            lowering.lower(graph.body.block)


# ------------------------------------------------------------------- control flow


def _as_loop(scan: ag.ScanOp, store: WeightStore) -> tuple[ag.LoopOp, tuple[bool, ...]]:
    """The Scan as a Loop of its sequence length (GE has no Scan): each iteration
    gathers its slices at the iteration number (counted from the end in a reverse
    direction), and its scan outputs stack on a first axis, transposed after the
    loop to their output axes. Returns the loop and which outputs go in reverse."""
    block = scan.parent_block()
    assert block is not None
    name = scan.label
    n, m = scan.states, scan.num_scan_inputs.value.data
    inputs = list(scan.inputs)
    scanned = inputs[n : n + m]
    in_axes, in_dirs = scan.scan_input_axes.get_values(), scan.scan_input_directions.get_values()
    length = ag.ScanOp.length([x.type for x in scanned], in_axes)
    if length == DYN:
        raise ModelError(f"Scan '{name}': its sequence length is dynamic; the build runs a Scan of a static length")
    trips = new_constant(np.array(length), ag.i64, f"{name}/length", store)
    running = new_constant(np.array(True), ag.i1, f"{name}/running", store)
    block.insert_ops_before([trips, running], scan)

    old = scan.body.block
    state_args, slice_args, captured_args = old.args[:n], old.args[n : n + m], old.args[n + m :]
    body = Block(arg_types=[ag.tensor(ag.i64, ()), ag.tensor(ag.i1, ()), *(a.type for a in state_args), *(x.type for x in scanned), *(a.type for a in captured_args)])
    iteration = body.args[0]
    mapping: dict[SSAValue, SSAValue] = dict(zip([*state_args, *captured_args], [*body.args[2 : 2 + n], *body.args[2 + n + m :]]))
    at: SSAValue = iteration
    if any(in_dirs):
        last = new_constant(np.array(length - 1), ag.i64, f"{name}/last", store)
        backwards = ag.SubOp([last.out, iteration], name=f"{name}/backwards")
        body.add_ops([last, backwards])
        at = backwards.y
    for j, (arg, x, axis, reverse) in enumerate(zip(slice_args, body.args[2 + n : 2 + n + m], in_axes, in_dirs)):
        gather = ag.GatherOp([x, at if reverse else iteration], {"axis": ag.int_attr(axis)}, f"{name}/slice{j}")
        body.add_op(gather)
        mapping[arg] = gather.y
    for inner in old.ops:
        if isinstance(inner, ag.YieldOp):
            true = new_constant(np.array(True), ag.i1, f"{name}/true", store)
            body.add_ops([true, ag.YieldOp([true.out, *(mapping[v] for v in inner.values)])])
        else:
            body.add_op(inner.clone(value_mapper=mapping))

    outs = scan.results[n:]
    out_axes, out_dirs = scan.scan_output_axes.get_values(), scan.scan_output_directions.get_values()
    stacked = []
    for r, axis in zip(outs, out_axes):
        shape = ag.shape_of(r.type)
        stacked.append(ag.tensor(ag.dtype_of(r.type), (length, *shape[:axis], *shape[axis + 1 :])))
    types = [*(r.type for r in scan.results[:n]), *stacked]
    operands = [trips.out, running.out, *inputs[:n], *scanned, *inputs[n + m :]]
    loop = ag.LoopOp(operands, [Region(body)], types, {"captures": ag.int_attr(len(inputs) - n)}, name)
    block.insert_op_before(loop, scan)
    for old_result, new in zip(scan.results[:n], loop.results[:n]):
        old_result.replace_all_uses_with(new)
    for j, (old_result, new, axis) in enumerate(zip(outs, loop.results[n:], out_axes)):
        if axis:
            rank = len(ag.shape_of(old_result.type))
            perm = [*range(1, axis + 1), 0, *range(axis + 1, rank)]
            moved = ag.TransposeOp([new], {"perm": ag.ints(perm)}, f"{name}/output{j}")
            block.insert_op_after(moved, loop)
            new = moved.y
        old_result.replace_all_uses_with(new)
    block.erase_op(scan)
    return loop, tuple(bool(d) for d in out_dirs)


def _accumulated(loop: ag.LoopOp, store: WeightStore, reverse: Sequence[bool] = ()) -> ag.LoopOp:
    """The Loop with its scan outputs as carried tensors of all their rows, from zeros:
    each iteration writes its row (ScatterNdUpdate at the iteration number, or
    counted from the end where `reverse` says), so every task has fixed addresses.
    The rows must be known before the loop runs (a static first dim)."""
    n = loop.carried
    scans = list(loop.results[n:])
    if not scans:
        return loop
    name = loop.label
    for r in scans:
        if not is_static(ag.shape_of(r.type)):
            raise ModelError(
                f"Loop '{name}': a scan output of {fmt(ag.shape_of(r.type))} has a row per iteration, and the "
                "iterations are not known before it runs (a computed trip count or condition); it cannot be built"
            )
    block = loop.parent_block()
    assert block is not None
    rows = [ag.shape_of(r.type)[0] for r in scans]
    zeros = [
        new_constant(np.zeros(ag.shape_of(r.type)), ag.dtype_of(r.type), f"{name}/rows{i}", store) for i, r in enumerate(scans)
    ]
    block.insert_ops_before(zeros, loop)
    body = loop.body.block
    yielded = body.last_op
    assert isinstance(yielded, ag.YieldOp)
    accumulators = [body.insert_arg(r.type, 2 + n + i) for i, r in enumerate(scans)]
    written = []
    for i, (acc, row, count, back) in enumerate(zip(accumulators, yielded.values[1 + n :], rows, [*reverse, *[False] * len(scans)])):
        at: SSAValue = body.args[0]
        ops: list[Operation] = []
        if back:
            last = new_constant(np.array(count - 1), ag.i64, f"{name}/last{i}", store)
            backwards = ag.SubOp([last.out, at], name=f"{name}/backwards{i}")
            ops += [last, backwards]
            at = backwards.y
        index = ag.ReshapeOp([at], {"shape": ag.ints([1, 1])}, f"{name}/index{i}")
        update = ag.UnsqueezeOp([row], {"axes": ag.ints([0])}, f"{name}/row{i}")
        write = ag.ScatterNdUpdateOp([acc, index.y, update.y], {"reduction": StringAttr("none")}, f"{name}/write{i}")
        body.insert_ops_before([*ops, index, update, write], yielded)
        written.append(write.y)
    yielded.operands = [*yielded.values[: 1 + n], *written]
    captured = list(loop.inputs[n:])
    operands = [loop.trip_count, loop.cond, *loop.inputs[:n], *(z.out for z in zeros), *captured]
    region = Region()
    region.add_block(loop.body.detach_block(body))
    carried = ag.LoopOp(operands, [region], [r.type for r in loop.results], {"captures": loop.captures}, name)
    block.insert_op_before(carried, loop)
    for old, new in zip(loop.results, carried.results):
        old.replace_all_uses_with(new)
    block.erase_op(loop)
    return carried


def _counted(loop: ag.LoopOp, store: WeightStore) -> None:
    """Give a Loop the control data the device runs it on (GE's While: a condition
    computed by the body, tested by LABEL_SWITCH_BY_INDEX). The same loop in meaning:

    - the iteration number becomes a loop-carried counter from 0 (a device tensor
      the body's kernels read), and the body computes `counter + 1`;
    - the trip-count test joins the condition: the body yields
      `cond and counter + 1 < trip_count`, and the loop starts on
      `cond and 0 < trip_count`, computed before it;
    - the body's condition argument is true wherever the body runs.

    The reference interpreter gives the rewritten loop the results of the original."""
    block = loop.parent_block()
    assert block is not None
    name, trips = loop.label, loop.trip_count
    n = loop.carried
    zero = new_constant(np.array(0), ag.i64, f"{name}/zero", store)
    first = ag.LessOp([zero.out, trips], name=f"{name}/first")
    start = ag.LogicalAndOp([loop.cond, first.y], name=f"{name}/start")
    block.insert_ops_before([zero, first, start], loop)

    body = loop.body.block
    iteration, running = body.args[0], body.args[1]
    counter = body.insert_arg(ag.tensor(ag.i64, ()), 2)
    bound = body.insert_arg(trips.type, len(body.args))
    true = new_constant(np.array(True), ag.i1, f"{name}/running", store)
    body.insert_op_before(true, body.first_op)  # type: ignore[arg-type]
    running.replace_all_uses_with(true.out)
    iteration.replace_all_uses_with(counter)
    yielded = body.last_op
    assert isinstance(yielded, ag.YieldOp)
    one = new_constant(np.array(1), ag.i64, f"{name}/one", store)
    after = ag.AddOp([counter, one.out], name=f"{name}/next")
    more = ag.LessOp([after.y, bound], name=f"{name}/more")
    go = ag.LogicalAndOp([yielded.values[0], more.y], name=f"{name}/go")
    body.insert_ops_before([one, after, more, go], yielded)
    yielded.operands = [go.y, after.y, *yielded.values[1:]]

    operands = [trips, start.y, zero.out, *loop.inputs[:n], *loop.inputs[n:], trips]
    region = Region()
    region.add_block(loop.body.detach_block(body))
    types = [ag.tensor(ag.i64, ()), *(r.type for r in loop.results)]
    counted = ag.LoopOp(operands, [region], types, {"captures": ag.int_attr(loop.captures.value.data + 1)}, name)
    block.insert_op_before(counted, loop)
    for old, new in zip(loop.results, counted.results[1:]):
        old.replace_all_uses_with(new)
    block.erase_op(loop)
