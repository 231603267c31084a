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
Compress, NonMaxSuppression) runs on the AI CPU only; its results may go to the graph's
outputs, where the run gives their actual shapes, but an op reading one is refused:
it would need the shape before the run (dynamic shapes are not built yet).

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

The launches are placed in a topological order that keeps the graph's order where
it can (a scope's launch goes where its first op was, once its inputs exist), so
the build can plan memory and emit tasks in list order.
"""

from __future__ import annotations

import heapq
import io
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

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
from dialects.formats import SMALL_CHANNEL_ATTR
from dialects.ascend_kernel import AICPU, ArgAttr, BufferType, KernelOp, LaunchOp, YieldOp, verify_fits
from ge.core import dtypes, ir, kernel_cache
from ge.core import soc as socs
from ge.core.options import check_fields, option_field
from ge.core.errors import ModelError
from passes.lowering import plan
from dialects.kernel_boundary import ENGINE_ATTR, is_aicpu, makes_kernel, scope_of, virtual_cores

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


class _Lowering:
    """Lowers the scopes of one module, sharing kernels between equal scopes."""

    def __init__(self, module: ModuleOp, soc: str):
        self.module = module
        self.soc = soc
        self.profile = socs.load(soc)
        self.kernels: dict[str, KernelOp] = {}
        self.names = {op.sym_name.data for op in module.ops if isinstance(op, KernelOp)}

    def lower(self, graph: ag.GraphOp) -> None:
        block = graph.body.block
        _refuse_dynamic_reads(block)
        for ops in kernel_scopes_of(block):
            scope = Scope.of(ops)  # after the launches before it replaced their scopes' values
            kernel = self.kernel(scope)
            names = [op.label if isinstance(op, ag.AscendOp) else op.name for op in scope.ops]
            launch = LaunchOp(kernel.sym_name.data, scope.inputs, [v.type for v in scope.outputs], names)
            block.insert_op_before(launch, scope.ops[0])
            for old, new in zip(scope.outputs, launch.outputs):
                old.replace_all_uses_with(new)
            for op in reversed(scope.ops):
                block.erase_op(op)
        _topological(block)

    def kernel(self, scope: Scope) -> KernelOp:
        key = scope.key(self.soc)
        if key in self.kernels:
            return self.kernels[key]
        cache = kernel_cache.current()
        if cache is None:
            kernel = self.build(scope)
        else:
            kernel = self.cached(cache, scope, f"{kernel_cache.compiler_version(LOWERING_SOURCES)}\n{key}")
        self.module.body.block.add_op(kernel)
        self.kernels[key] = kernel
        return kernel

    def cached(self, cache: kernel_cache.KernelCache, scope: Scope, key: str) -> KernelOp:
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
        kernel = self.build(scope)
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
        prefix = "aicpu_" if kernel.core_type.data == AICPU else "te_"
        kernel.properties["sym_name"] = StringAttr(self.fresh_name([t.data for t in kernel.op_types], prefix))
        old = kernel.compute.block
        kernel.compute.add_block(_compute(scope))
        kernel.compute.detach_block(old)
        old.erase()
        return kernel

    def build(self, scope: Scope) -> KernelOp:
        if is_aicpu(scope.ops[0]):
            return self.build_aicpu(scope)
        planned = plan(self.profile, scope.ops, scope.inputs, scope.outputs)
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
        args = [ArgAttr.of("input", _tensor(v)) for v in scope.inputs] + [ArgAttr.of("output", _tensor(v)) for v in scope.outputs]
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

    def fresh_name(self, op_types: Sequence[str], prefix: str = "te_") -> str:
        """A new kernel symbol: `te_` (a TBE kernel) or `aicpu_`, then its op types."""
        stem = prefix + "_".join(_snake(t) for t in op_types[:3])
        n = 0
        while f"{stem}_{n}" in self.names:
            n += 1
        self.names.add(f"{stem}_{n}")
        return f"{stem}_{n}"


def _refuse_dynamic_reads(block: Block) -> None:
    """Data-dependent ops on the AI CPU, their dynamic results read only by the graph's outputs."""
    for op in block.ops:
        if isinstance(op, ag.DataDependentOp) and not is_aicpu(op):
            raise ModelError(f"{op.OP_TYPE} '{op.label}' has data-dependent result shapes and runs on the AI CPU only; run precision-selection, which places it there")
        if isinstance(op, ag.NetOutputOp):
            continue
        for v in op.operands:
            if ag.data_dependent(v):
                producer = v.owner
                assert isinstance(producer, ag.DataDependentOp)
                name = op.label if isinstance(op, ag.AscendOp) else op.name
                raise ModelError(
                    f"{getattr(op, 'OP_TYPE', op.name)} '{name}' reads the result of {producer.OP_TYPE} '{producer.label}', "
                    "whose shape is known only when it runs, and needs a static shape: dynamic shapes are not built yet "
                    "(only the graph's outputs may take such a result)"
                )


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
        lowering = _Lowering(op, self.soc_version)
        for graph in [g for g in op.ops if isinstance(g, ag.GraphOp)]:
            lowering.lower(graph)
