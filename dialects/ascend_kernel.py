"""The `ascend_kernel` dialect: tiled device kernels and their launches.

A kernel is what one fused scope compiles to. `ascend_kernel.kernel @k` lives at
module level and carries what the build and the simulator need:

- properties: `op_types` (the CANN op types of its scope), `block_dim`, `core_type`
  (`AiCore`: cube or mixed; `VectorCore`: vector only, on parts with vector cores;
  `AiCpu`: one op on the AI CPU engine, launched by a KERNEL_EX task: one block, no
  tiling, and an empty program, since the AI CPU runs compiled C++ rather than pipes),
  `impl_mode`, `tiling` (a dictionary of integer tiling parameters), `args` (per
  argument: inputs then outputs, with dtype, physical shape and format; an AI CPU
  kernel's value of data-dependent shape has its upper bound there), `soc` (the
  SoC version it was tiled for) and `workspace` (GM scratch bytes for all blocks);
- a `compute` region: the scope's `ascend_graph` ops on block arguments that are the
  kernel's inputs, ending in `ascend_kernel.yield` of its outputs, so that its
  numerics can be computed;
- a `program` region: one block's pipe program. Its block arguments are the GM
  buffers of the arguments (inputs, then outputs) and of the workspace if any; `alloc` places buffers in the
  core's memories; `copy` moves bytes between levels on an MTE pipe (or FIX, or V for
  L0C -> UB where there is no FIX pipe); `mmad` runs on the cube (pipe M); `vec` is
  one vector instruction (pipe V); `scalar` is scalar work (pipe S); `set_flag` /
  `wait_flag` order two pipes by an event id (where a part's cube and vector cores
  are apart, a flag with MTE2 at one end may name whose MTE2 it is, `core "cube"` or
  `core "vector"`: a flag across the cores); `pipe_barrier` orders one pipe;
  `sync_all` waits for every block (between the phases of a kernel); `loop`
  repeats its body a number of times (with no index: a double-buffered body holds
  its ping and its pong iteration, explicitly).

In the graph, `ascend_kernel.launch @k(%args)` stands for the scope it replaces: its
results are the scope's outputs, `names` keeps the ONNX node names of the scope.

The kernel verifier checks what holds on any SoC: the arguments, the compute
region, one GM buffer per argument, and that every `wait_flag` waits for a pending
`set_flag` of the same pipes and id (a loop body leaves the flags as it found them;
none is pending at the end). Whether a kernel fits its SoC is `verify_fits(kernel,
target)`, called by the lowering and the backend with the SoC profile (the dialect
loads no SoC data): every buffer lies inside its memory at the memory's alignment
without overlapping another buffer live at the same time (a buffer lives to the end
of its block; a cube kernel's UB, where the cube core's vector cores are apart and
share each tile, is theirs together), each copy runs on the pipe of its path, every event id is below
the SoC's count, and no flag names a core where the cube and vector share one.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Iterator, Sequence
from typing import ClassVar, Protocol

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    I64,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, ParametrizedAttribute, Region, SSAValue, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    NoTerminator,
    SymbolOpInterface,
    SymbolTable,
    SymbolUserOpInterface,
)
from xdsl.utils.exceptions import VerifyException

from dialects import formats
from dialects.ascend_graph import format_of, verify_layout
from dialects.shapes import DYN

LEVELS = ("GM", "L1", "L0A", "L0B", "L0C", "UB", "BT")
PIPES = ("S", "V", "M", "MTE1", "MTE2", "MTE3", "FIX")
FLAG_CORES = ("cube", "vector")
"""The cores a flag's MTE2 end may name where a part's cube and vector cores are apart."""
CORE_TYPES = ("AiCore", "VectorCore", "AiCpu")
AICPU = "AiCpu"
"""The core type of an AI CPU kernel."""
IMPL_MODES = ("high_performance", "high_precision")
COPY_MODES = ("normal", "nd2nz", "nz2nd", "img2col")
"""How a copy lays data out: as it is, ND -> NZ or NZ -> ND in flight (MTE2 into L1,
FIX out of L0C), or load3d's img2col expansion (L1 -> L0A)."""

BIAS_TABLE_BYTES = 1024
"""The bias table (BT) of parts with a FIX pipe: 1 KB, the range the calibration's
L1_TO_BT transfers cover. The SoC profiles do not list it yet."""

_PATH_PIPES: dict[tuple[str, str], str] = {
    ("GM", "L1"): "MTE2",
    ("GM", "UB"): "MTE2",
    ("GM", "L0A"): "MTE2",
    ("GM", "L0B"): "MTE2",
    ("L1", "L0A"): "MTE1",
    ("L1", "L0B"): "MTE1",
    ("L1", "UB"): "MTE1",
    ("L1", "BT"): "MTE1",
    ("UB", "GM"): "MTE3",
    ("UB", "L1"): "MTE3",
}
"""The pipe of each path, on every part."""
_FIX_PATHS: dict[tuple[str, str], str] = {("L0C", "GM"): "FIX", ("L0C", "L1"): "FIX"}
"""Paths out of L0C on parts with a FIX pipe (the 910B generation)."""
_VECTOR_PATHS: dict[tuple[str, str], str] = {("L0C", "UB"): "V"}
"""Where there is no FIX pipe, the vector unit drains L0C into UB."""


def copy_pipe(src: str, dst: str, fix_pipe: bool) -> str | None:
    """The pipe that moves data from `src` to `dst` (None: no such path on the part)."""
    table = {**_PATH_PIPES, **(_FIX_PATHS if fix_pipe else _VECTOR_PATHS)}
    return table.get((src, dst))


# --------------------------------------------------------------------------- attributes


@irdl_attr_definition
class BufferType(ParametrizedAttribute, TypeAttribute):
    """A buffer in one memory level of a core (GM for the kernel's arguments)."""

    name = "ascend_kernel.buffer"

    level: StringAttr

    def __init__(self, level: str):
        super().__init__(StringAttr(level))

    def verify(self) -> None:
        if self.level.data not in LEVELS:
            raise VerifyException(f"unknown memory level {self.level.data!r}; known: {', '.join(LEVELS)}")


@irdl_attr_definition
class ArgAttr(ParametrizedAttribute):
    """One kernel argument: input or output, dtype, physical shape and format."""

    name = "ascend_kernel.arg"

    kind: StringAttr
    dtype: Attribute
    shape: DenseArrayBase
    format: StringAttr

    def __init__(self, kind: str, dtype: Attribute, shape: Sequence[int], format: str):
        super().__init__(StringAttr(kind), dtype, DenseArrayBase.from_list(i64, list(shape)), StringAttr(format))

    @staticmethod
    def of(kind: str, t: TensorType) -> ArgAttr:
        """The argument a value of tensor type `t` is passed as."""
        shape = tuple(t.get_shape())
        origin = "NCHW" if len(shape) == 4 else "ND"
        return ArgAttr(kind, t.element_type, shape, format_of(t) or origin)

    @property
    def nbytes(self) -> int:
        """The bytes the argument occupies in GM (static shapes only)."""
        return formats.nbytes(self.dtype, math.prod(self.shape.get_values()))

    def verify(self) -> None:
        if self.kind.data not in ("input", "output"):
            raise VerifyException(f"argument kind {self.kind.data!r} is not input or output")
        if self.format.data not in formats.ORIGIN_FORMATS + formats.DEVICE_FORMATS:
            raise VerifyException(f"argument format {self.format.data!r} is unknown")


Int = IntegerAttr[I64]


def _int(value: int) -> IntegerAttr:
    return IntegerAttr(int(value), i64)


class _Props:
    """Typed reads of the integer and string properties of program ops."""

    def int_prop(self: IRDLOperation, key: str) -> int:  # type: ignore[misc]
        attr = self.properties[key]
        assert isinstance(attr, IntegerAttr)
        return attr.value.data

    def str_prop(self: IRDLOperation, key: str) -> str:  # type: ignore[misc]
        attr = self.properties[key]
        assert isinstance(attr, StringAttr)
        return attr.data


def _level(value: SSAValue) -> str:
    t = value.type
    assert isinstance(t, BufferType)
    return t.level.data


# ------------------------------------------------------------------ program ops


class ProgramOp(IRDLOperation, _Props):
    """An op of a kernel's pipe program."""

    irdl_options = (ParsePropInAttrDict(),)

    PIPE: ClassVar[str | None] = None
    """The pipe the op runs on, when the op kind fixes it."""

    @property
    def pipe(self) -> str:
        assert self.PIPE is not None
        return self.PIPE


@irdl_op_definition
class AllocOp(ProgramOp):
    """A buffer of `bytes` at `offset` in a core memory (the level is its type's)."""

    name = "ascend_kernel.alloc"
    offset = prop_def(Int)
    size = prop_def(Int, prop_name="bytes")
    buffer = result_def(BufferType)
    assembly_format = "$bytes `bytes` `at` $offset attr-dict `:` type($buffer)"

    def __init__(self, level: str, offset: int, nbytes: int):
        super().__init__(properties={"offset": _int(offset), "bytes": _int(nbytes)}, result_types=[BufferType(level)])

    @property
    def level(self) -> str:
        return _level(self.buffer)

    def verify_(self) -> None:
        if self.level == "GM":
            raise VerifyException("alloc places buffers in core memories; GM buffers are the kernel's arguments")
        if self.int_prop("offset") < 0 or self.int_prop("bytes") < 1:
            raise VerifyException(f"alloc in {self.level}: offset must be >= 0 and bytes >= 1")


@irdl_op_definition
class CopyOp(ProgramOp):
    """Move `bytes` (as laid out in the destination) from one level to another."""

    name = "ascend_kernel.copy"
    src = operand_def(BufferType)
    dst = operand_def(BufferType)
    pipe_ = prop_def(StringAttr, prop_name="pipe")
    size = prop_def(Int, prop_name="bytes")
    mode_ = opt_prop_def(StringAttr, prop_name="mode")
    assembly_format = (
        "$pipe $src `->` $dst `,` $bytes `bytes` (`mode` $mode^)? attr-dict `:` type($src) `->` type($dst)"
    )

    def __init__(self, src: SSAValue, dst: SSAValue, pipe: str, nbytes: int, mode: str = "normal"):
        props: dict[str, Attribute] = {"pipe": StringAttr(pipe), "bytes": _int(nbytes)}
        if mode != "normal":
            props["mode"] = StringAttr(mode)
        super().__init__(operands=[src, dst], properties=props)

    @property
    def pipe(self) -> str:
        return self.str_prop("pipe")

    @property
    def mode(self) -> str:
        return self.mode_.data if self.mode_ is not None else "normal"

    @property
    def path(self) -> str:
        """The path as the calibration tables name it (GM_TO_L1, L0C_TO_GM_TRANS, ...)."""
        trans = "_TRANS" if self.mode in ("nd2nz", "nz2nd") else ""
        return f"{_level(self.src)}_TO_{_level(self.dst)}{trans}"

    def verify_(self) -> None:
        if self.mode_ is not None and self.mode not in COPY_MODES[1:]:
            raise VerifyException(f"copy mode {self.mode!r} is not one of {', '.join(COPY_MODES[1:])} (normal is the default)")
        if self.int_prop("bytes") < 1:
            raise VerifyException(f"copy {self.path} moves {self.int_prop('bytes')} bytes")
        if self.pipe not in PIPES:
            raise VerifyException(f"copy {self.path}: unknown pipe {self.pipe!r}")
        dst = self.dst.owner
        if isinstance(dst, AllocOp) and self.int_prop("bytes") > dst.size.value.data:
            raise VerifyException(f"copy {self.path} writes {self.int_prop('bytes')} bytes into a buffer of {dst.size.value.data}")


@irdl_op_definition
class MmadOp(ProgramOp):
    """One cube instruction: L0C (+)= L0A [m, k] x L0B [k, n], in `dtype`, accumulating in L0C."""

    name = "ascend_kernel.mmad"
    PIPE: ClassVar[str | None] = "M"
    a = operand_def(BufferType)
    b = operand_def(BufferType)
    c = operand_def(BufferType)
    m = prop_def(Int)
    k = prop_def(Int)
    n = prop_def(Int)
    dtype = prop_def(TypeAttribute)
    assembly_format = (
        "$a `,` $b `->` $c `,` $m `x` $k `x` $n `,` $dtype attr-dict `:` type($a) `,` type($b) `->` type($c)"
    )

    def __init__(self, a: SSAValue, b: SSAValue, c: SSAValue, m: int, k: int, n: int, dtype: Attribute):
        super().__init__(
            operands=[a, b, c], properties={"m": _int(m), "k": _int(k), "n": _int(n), "dtype": dtype}
        )

    def verify_(self) -> None:
        for value, want in ((self.a, "L0A"), (self.b, "L0B"), (self.c, "L0C")):
            if _level(value) != want:
                raise VerifyException(f"mmad reads and writes L0A, L0B, L0C; got {_level(value)} for {want}")
        if min(self.int_prop("m"), self.int_prop("k"), self.int_prop("n")) < 1:
            raise VerifyException("mmad needs m, k, n >= 1")


@irdl_op_definition
class VecOp(ProgramOp):
    """One vector instruction over `elements` elements in UB (`dtypes` as the
    calibration names them: FP16_FP16_FP16 for a binary op, FP32_FP16 for a conversion)."""

    name = "ascend_kernel.vec"
    PIPE: ClassVar[str | None] = "V"
    operands_ = var_operand_def(BufferType)
    instr = prop_def(StringAttr)
    dtypes = prop_def(StringAttr)
    elements = prop_def(Int)
    assembly_format = "$instr $dtypes `(` $operands_ `)` `x` $elements attr-dict `:` type($operands_)"

    def __init__(self, instr: str, buffers: Sequence[SSAValue], dtypes: str, elements: int):
        super().__init__(
            operands=[list(buffers)],
            properties={"instr": StringAttr(instr), "dtypes": StringAttr(dtypes), "elements": _int(elements)},
        )

    def repeat(self, element_bytes: int) -> int:
        """The 256-byte repeats the instruction takes for elements of `element_bytes`."""
        return -(-self.int_prop("elements") * element_bytes // 256)

    def verify_(self) -> None:
        if not self.operands_:
            raise VerifyException(f"vec {self.str_prop('instr')} needs at least its destination buffer")
        for value in self.operands_:
            if _level(value) != "UB":
                raise VerifyException(f"vec {self.str_prop('instr')} works in UB, not {_level(value)}")
        if self.int_prop("elements") < 1:
            raise VerifyException(f"vec {self.str_prop('instr')} over {self.int_prop('elements')} elements")


@irdl_op_definition
class ScalarOp(ProgramOp):
    """Scalar-unit work of `instrs` instructions (address and loop arithmetic, tiling reads)."""

    name = "ascend_kernel.scalar"
    PIPE: ClassVar[str | None] = "S"
    instrs = prop_def(Int)
    assembly_format = "$instrs `instrs` attr-dict"

    def __init__(self, instrs: int):
        super().__init__(properties={"instrs": _int(instrs)})


class FlagOp(ProgramOp):
    """An event between a source and a destination pipe."""

    src = prop_def(StringAttr)
    dst = prop_def(StringAttr)
    event = prop_def(Int)
    core_ = opt_prop_def(StringAttr, prop_name="core")
    assembly_format = "$src `->` $dst `,` $event (`core` $core^)? attr-dict"

    def __init__(self, src: str, dst: str, event: int, core: str | None = None):
        properties: dict[str, Attribute] = {"src": StringAttr(src), "dst": StringAttr(dst), "event": _int(event)}
        if core is not None:
            properties["core"] = StringAttr(core)
        super().__init__(properties=properties)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.str_prop("src"), self.str_prop("dst"), self.int_prop("event"))

    @property
    def core(self) -> str | None:
        """Whose MTE2 the flag pairs with, where a part's cube and vector cores are apart
        ("cube" or "vector": a flag across the two cores, CANN's CrossCoreSetFlag);
        without it the vector core's where the other end is V, MTE3 or FIX."""
        return self.core_.data if self.core_ is not None else None

    def verify_(self) -> None:
        src, dst, event = self.key
        if src not in PIPES or dst not in PIPES or src == dst:
            raise VerifyException(f"{self.name} {src} -> {dst}: needs two different pipes of {', '.join(PIPES)}")
        if event < 0:
            raise VerifyException(f"{self.name} {src} -> {dst}: event id {event} is negative")
        if self.core is not None and (self.core not in FLAG_CORES or "MTE2" not in (src, dst)):
            raise VerifyException(f"{self.name} {src} -> {dst} core {self.core!r}: a core ({', '.join(FLAG_CORES)}) names whose MTE2 a flag pairs with")


@irdl_op_definition
class SetFlagOp(FlagOp):
    """The source pipe signals the event once its earlier instructions are done."""

    name = "ascend_kernel.set_flag"

    @property
    def pipe(self) -> str:
        return self.str_prop("src")


@irdl_op_definition
class WaitFlagOp(FlagOp):
    """The destination pipe waits for the event before its later instructions."""

    name = "ascend_kernel.wait_flag"

    @property
    def pipe(self) -> str:
        return self.str_prop("dst")


@irdl_op_definition
class PipeBarrierOp(ProgramOp):
    """The pipe finishes all its earlier instructions before starting later ones."""

    name = "ascend_kernel.pipe_barrier"
    pipe_ = prop_def(StringAttr, prop_name="pipe")
    assembly_format = "$pipe attr-dict"

    def __init__(self, pipe: str):
        super().__init__(properties={"pipe": StringAttr(pipe)})

    @property
    def pipe(self) -> str:
        return self.str_prop("pipe")

    def verify_(self) -> None:
        if self.pipe not in PIPES:
            raise VerifyException(f"pipe_barrier: unknown pipe {self.pipe!r}")


@irdl_op_definition
class SyncAllOp(ProgramOp):
    """Every block of the kernel reaches this point before any goes on (Ascend C's
    SyncAll): a kernel of several phases, each reading what all blocks wrote."""

    name = "ascend_kernel.sync_all"
    assembly_format = "attr-dict"

    def __init__(self) -> None:
        super().__init__()

    @property
    def pipe(self) -> str:
        return "S"


@irdl_op_definition
class LoopOp(ProgramOp):
    """Run the body `trips` times; the body is the same every time."""

    name = "ascend_kernel.loop"
    trips = prop_def(Int)
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    assembly_format = "$trips `times` attr-dict-with-keyword $body"

    def __init__(self, trips: int, ops: Sequence[Operation]):
        super().__init__(properties={"trips": _int(trips)}, regions=[Region(Block(ops))])

    def verify_(self) -> None:
        if self.int_prop("trips") < 1:
            raise VerifyException(f"loop of {self.int_prop('trips')} trips: emit the body or nothing instead")


# --------------------------------------------------------------- kernel and launch


@irdl_op_definition
class YieldOp(IRDLOperation):
    """The outputs of a kernel's compute region."""

    name = "ascend_kernel.yield"
    values = var_operand_def(TensorType)
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(KernelOp)))
    assembly_format = "$values attr-dict `:` type($values)"

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[list(values)])


def walk_program(ops: Sequence[Operation] | Iterator[Operation]) -> Iterator[Operation]:
    """Every op of a program in order, loop bodies included (once each)."""
    for op in ops:
        yield op
        if isinstance(op, LoopOp):
            yield from walk_program(op.body.block.ops)


@irdl_op_definition
class KernelOp(IRDLOperation, _Props):
    """One device kernel: its scope's computation and one block's pipe program."""

    name = "ascend_kernel.kernel"
    irdl_options = (ParsePropInAttrDict(),)
    sym_name = prop_def(SymbolNameConstraint())
    op_types = prop_def(ArrayAttr[StringAttr])
    block_dim = prop_def(IntegerAttr)
    core_type = prop_def(StringAttr)
    impl_mode = prop_def(StringAttr)
    tiling = prop_def(DictionaryAttr)
    args = prop_def(ArrayAttr[ArgAttr])
    soc = prop_def(StringAttr)
    workspace = prop_def(IntegerAttr)
    compute = region_def("single_block")
    program = region_def("single_block")
    traits = traits_def(SymbolOpInterface(), IsolatedFromAbove(), NoTerminator(), HasParent(ModuleOp))
    assembly_format = "$sym_name attr-dict-with-keyword `compute` $compute `program` $program"

    def __init__(
        self,
        sym_name: str,
        *,
        op_types: Sequence[str],
        block_dim: int,
        core_type: str,
        impl_mode: str,
        tiling: dict[str, int],
        args: Sequence[ArgAttr],
        soc: str,
        workspace: int,
        compute: Region,
        program: Region,
    ):
        super().__init__(
            properties={
                "sym_name": StringAttr(sym_name),
                "op_types": ArrayAttr([StringAttr(t) for t in op_types]),
                "block_dim": _int(block_dim),
                "core_type": StringAttr(core_type),
                "impl_mode": StringAttr(impl_mode),
                "tiling": DictionaryAttr({k: _int(v) for k, v in tiling.items()}),
                "args": ArrayAttr(list(args)),
                "soc": StringAttr(soc),
                "workspace": _int(workspace),
            },
            regions=[compute, program],
        )

    @property
    def inputs(self) -> list[ArgAttr]:
        return [a for a in self.args if a.kind.data == "input"]

    @property
    def outputs(self) -> list[ArgAttr]:
        return [a for a in self.args if a.kind.data == "output"]

    @property
    def parameters(self) -> dict[str, int]:
        """The tiling parameters as plain ints."""
        return {k: v.value.data for k, v in self.tiling.data.items()}  # type: ignore[union-attr]

    @property
    def yield_op(self) -> YieldOp:
        last = self.compute.block.last_op
        assert isinstance(last, YieldOp)
        return last

    def verify_(self) -> None:
        where = f"kernel @{self.sym_name.data}"
        kinds = [a.kind.data for a in self.args]
        if kinds != sorted(kinds):  # "input" < "output"
            raise VerifyException(f"{where}: arguments must list the inputs before the outputs")
        if self.int_prop("block_dim") < 1 or self.int_prop("workspace") < 0:
            raise VerifyException(f"{where}: block_dim must be >= 1 and workspace >= 0")
        if self.str_prop("core_type") not in CORE_TYPES:
            raise VerifyException(f"{where}: core_type {self.str_prop('core_type')!r} is not one of {', '.join(CORE_TYPES)}")
        if self.str_prop("impl_mode") not in IMPL_MODES:
            raise VerifyException(f"{where}: impl_mode {self.str_prop('impl_mode')!r} is not one of {', '.join(IMPL_MODES)}")
        for key, value in self.tiling.data.items():
            if not isinstance(value, IntegerAttr):
                raise VerifyException(f"{where}: tiling parameter {key} is {value}, not an integer")
        self._verify_compute(where)
        self._verify_program(where)
        if self.str_prop("core_type") == AICPU:
            self._verify_aicpu(where)

    def _verify_aicpu(self, where: str) -> None:
        """An AI CPU kernel is one op, one block, no workspace, no tiling and no pipe program."""
        ops = [op for op in self.compute.block.ops if not isinstance(op, YieldOp)]
        if len(ops) != 1:
            raise VerifyException(f"{where}: an AiCpu kernel computes one op, not {len(ops)}")
        if self.int_prop("block_dim") != 1 or self.int_prop("workspace") or self.tiling.data:
            raise VerifyException(f"{where}: an AiCpu kernel has block_dim 1, no workspace and no tiling")
        if not self.program.block.is_empty:
            raise VerifyException(f"{where}: an AiCpu kernel has no pipe program (its program block must be empty)")

    def _verify_compute(self, where: str) -> None:
        block = self.compute.block
        last = block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException(f"{where}: the compute region must end with ascend_kernel.yield")
        ins, outs = self.inputs, self.outputs
        if len(block.args) != len(ins) or len(last.values) != len(outs):
            raise VerifyException(
                f"{where}: {len(ins)} inputs and {len(outs)} outputs, but compute takes {len(block.args)} "
                f"and yields {len(last.values)}"
            )
        for arg, value in [*zip(ins, block.args), *zip(outs, last.values)]:
            verify_layout(value.type, f"{where}: compute value {value.name_hint or ''}")
            assert isinstance(value.type, TensorType)
            declared = ArgAttr.of(arg.kind.data, value.type)
            if declared == arg or (self.str_prop("core_type") == AICPU and _bounds(declared, arg)):
                continue
            raise VerifyException(f"{where}: argument {arg} does not describe the compute value of type {value.type}")
        for op in block.ops:
            for i, r in enumerate(op.results):
                verify_layout(r.type, f"{where}: {op.name} result {i}")

    def _verify_program(self, where: str) -> None:
        block = self.program.block
        buffers = len(self.args) + (self.int_prop("workspace") > 0)
        if len(block.args) != buffers or any(_level(a) != "GM" for a in block.args):
            raise VerifyException(
                f"{where}: the program takes one GM buffer per argument ({len(self.args)}), then one for the "
                f"workspace if it has one; it takes {len(block.args)}"
            )
        pending = _flags_after(block.ops, frozenset(), where)
        if pending:
            left = ", ".join(f"{s} -> {d} #{e}" for s, d, e in sorted(pending))
            raise VerifyException(f"{where}: the program ends with flags set and never waited for: {left}")


def _bounds(declared: ArgAttr, arg: ArgAttr) -> bool:
    """Whether `arg` declares an upper bound of a value of dynamic shape described as
    `declared` (an AI CPU kernel's data-dependent value: its buffer): the same kind,
    dtype and format, and a static shape of its rank, equal where its dims are known."""
    shape, bound = declared.shape.get_values(), arg.shape.get_values()
    return (
        DYN in shape
        and (declared.kind, declared.dtype, declared.format) == (arg.kind, arg.dtype, arg.format)
        and len(shape) == len(bound)
        and all(b >= 0 and d in (DYN, b) for d, b in zip(shape, bound))
    )


def _pipes_of(op: ProgramOp) -> tuple[str, ...]:
    """The pipes an op names: both ends of a flag, else the one it runs on."""
    if isinstance(op, FlagOp):
        return op.key[:2]
    return (op.pipe,) if not isinstance(op, AllocOp | LoopOp) else ()


def _flags_after(ops: Iterator[Operation] | Sequence[Operation], pending: frozenset, where: str) -> frozenset:
    """The flags set and not yet waited for after `ops`, starting from `pending`."""
    for op in ops:
        if isinstance(op, SetFlagOp):
            if op.key in pending:
                raise VerifyException(f"{where}: set_flag {op.key[0]} -> {op.key[1]} #{op.key[2]} while it is already set")
            pending = pending | {op.key}
        elif isinstance(op, WaitFlagOp):
            if op.key not in pending:
                raise VerifyException(f"{where}: wait_flag {op.key[0]} -> {op.key[1]} #{op.key[2]} has no set_flag before it")
            pending = pending - {op.key}
        elif isinstance(op, LoopOp):
            after = _flags_after(op.body.block.ops, pending, where)
            if after != pending:
                changed = ", ".join(f"{s} -> {d} #{e}" for s, d, e in sorted(after ^ pending))
                raise VerifyException(f"{where}: a loop body must leave the flags as it found them; it changes {changed}")
    return pending


class KernelTarget(Protocol):
    """What `verify_fits` needs of a SoC (`ge.core.soc.SocProfile` is one)."""

    name: str
    l1_bytes: int
    l0a_bytes: int
    l0b_bytes: int
    l0c_bytes: int
    ub_bytes: int
    fix_pipe: bool
    split_cores: bool
    vector_per_cube: int
    event_ids: int
    alignment: tuple[tuple[str, int], ...]


def verify_fits(kernel: KernelOp, target: KernelTarget) -> None:
    """Raise a `VerifyException` unless the kernel's program fits `target`: buffers
    inside their memories, aligned and not overlapping, copies on their path's pipe,
    event ids below the SoC's count, no FIX pipe on a part without one, and no flag
    across the cores on a part whose cube and vector units share a core."""
    where = f"kernel @{kernel.sym_name.data}"
    # a cube kernel's vector half on a part with split cores runs on the cube core's
    # vector cores, each with its UB: its buffers are in theirs together
    ub = target.ub_bytes * (target.vector_per_cube if kernel.str_prop("core_type") == "AiCore" else 1)
    capacity = {
        "L1": target.l1_bytes, "L0A": target.l0a_bytes, "L0B": target.l0b_bytes,
        "L0C": target.l0c_bytes, "UB": ub,
    }
    if target.fix_pipe:
        capacity["BT"] = BIAS_TABLE_BYTES
    alignment = {level.upper(): unit for level, unit in target.alignment}
    ops = kernel.program.block.ops
    _place_all(where, ops, capacity, alignment, {})
    for op in walk_program(ops):
        if isinstance(op, CopyOp):
            want = copy_pipe(_level(op.src), _level(op.dst), target.fix_pipe)
            if want is None:
                raise VerifyException(f"{where}: {target.name} has no path {op.path}")
            if op.pipe != want:
                raise VerifyException(f"{where}: copy {op.path} runs on {want}, not {op.pipe}")
        elif isinstance(op, FlagOp) and op.int_prop("event") >= target.event_ids:
            raise VerifyException(
                f"{where}: event id {op.int_prop('event')} is beyond {target.name}'s {target.event_ids} ids"
            )
        if isinstance(op, FlagOp) and op.core is not None and not target.split_cores:
            raise VerifyException(f"{where}: {target.name}'s cube and vector units share a core: no flag names one ({op.core!r})")
        if not target.fix_pipe and isinstance(op, ProgramOp) and "FIX" in _pipes_of(op):
            raise VerifyException(f"{where}: {target.name} has no FIX pipe")


def _place_all(where: str, ops, capacity: dict[str, int], alignment: dict[str, int], outer: dict) -> None:
    """A buffer lives from its alloc to the end of its block: the buffers of one
    block, and of the blocks around it, must not overlap."""
    placed = {level: list(spans) for level, spans in outer.items()}
    for op in ops:
        if isinstance(op, AllocOp):
            _place(where, op, capacity, alignment, placed)
        elif isinstance(op, LoopOp):
            _place_all(where, op.body.block.ops, capacity, alignment, placed)


def _place(where: str, op: AllocOp, capacity: dict[str, int], alignment: dict[str, int], placed: dict) -> None:
    level, offset, size = op.level, op.int_prop("offset"), op.int_prop("bytes")
    if level not in capacity:
        raise VerifyException(f"{where}: the SoC has no {level} memory")
    unit = alignment.get(level, 32)
    if offset % unit or size % unit:
        raise VerifyException(f"{where}: {level} buffer at {offset} of {size} bytes is not {unit}-byte aligned")
    if offset + size > capacity[level]:
        raise VerifyException(
            f"{where}: {level} buffer at {offset} of {size} bytes overflows {level}'s {capacity[level]} bytes"
        )
    # The placed spans do not overlap, so sorted by start their ends rise too: the
    # last span starting before this one ends is the one that may reach into it
    # (a bisection, not a scan of every buffer placed: kernels can hold thousands).
    spans = placed.setdefault(level, [])
    k = bisect_left(spans, (offset + size,))
    if k and spans[k - 1][1] > offset:
        start, end = spans[k - 1]
        raise VerifyException(f"{where}: {level} buffers [{start}, {end}) and [{offset}, {offset + size}) overlap")
    insort(spans, (offset, offset + size))


class LaunchSymbolUser(SymbolUserOpInterface):
    """A launch names a kernel of its module whose arguments its operands and results match
    (an AI CPU kernel's argument may declare the upper bound of a dynamic one)."""

    def verify(self, op: Operation) -> None:
        assert isinstance(op, LaunchOp)
        kernel = SymbolTable.lookup_symbol(op, op.kernel)
        if not isinstance(kernel, KernelOp):
            raise VerifyException(f"launch of '{op.kernel.string_value()}': no such ascend_kernel.kernel")
        want = [*(("input", v.type) for v in op.inputs), *(("output", r.type) for r in op.outputs)]
        got = list(kernel.args)
        aicpu = kernel.str_prop("core_type") == AICPU
        if len(want) != len(got) or any(
            ArgAttr.of(kind, t) != a and not (aicpu and _bounds(ArgAttr.of(kind, t), a))  # type: ignore[arg-type]
            for (kind, t), a in zip(want, got)
        ):
            raise VerifyException(f"launch of @{kernel.sym_name.data}: its operand and result types do not match the kernel's arguments")


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """Run a kernel on the graph's values: one KERNEL task, for the ops named in `names`."""

    name = "ascend_kernel.launch"
    irdl_options = (ParsePropInAttrDict(),)
    kernel = prop_def(SymbolRefAttr)
    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    names = prop_def(ArrayAttr[StringAttr])
    traits = traits_def(LaunchSymbolUser())
    assembly_format = "$kernel `(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs)"

    def __init__(self, kernel: str, inputs: Sequence[SSAValue], result_types: Sequence[Attribute], names: Sequence[str]):
        super().__init__(
            operands=[list(inputs)],
            result_types=[list(result_types)],
            properties={"kernel": SymbolRefAttr(kernel), "names": ArrayAttr([StringAttr(n) for n in names])},
        )

    @property
    def label(self) -> str:
        """The ONNX node names of the scope, as one label."""
        return "+".join(n.data for n in self.names)


AscendKernel = Dialect(
    "ascend_kernel",
    [
        KernelOp, LaunchOp, YieldOp,
        AllocOp, CopyOp, MmadOp, VecOp, ScalarOp, SetFlagOp, WaitFlagOp, PipeBarrierOp, SyncAllOp, LoopOp,
    ],
    [BufferType, ArgAttr],
)
