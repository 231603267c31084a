"""A `.om`'s kernels as the simulator reads them: each kernel's header, its pipe
program decoded straight from the IR text, and its compute region parsed on demand.

Why a decoder of our own for the programs: the xDSL parser reads about 1.4 KB of
IR per 10 ms, so parsing ResNet-50's 250 KB of kernels takes over 2 s, more than
the simulator's whole budget for a run. A program is a list of one-line ops of
fixed assembly formats (`ascend_kernel.copy "MTE2" %3 -> %7, 4096 bytes : ...`,
`ascend_kernel.loop 4 times {`), so a line decoder reads it in milliseconds.
`tests/test_sim_program.py` checks it against the xDSL parse of every kernel of
real models, so a change of the dialect's formats cannot go unnoticed. The compute
regions (the scope's `ascend_graph` ops, which the numerics run) are parsed with
xDSL, without their programs, only when numerics are asked for.

A decoded program is a tuple of instructions (tuples, for speed) with their costs
already looked up in `ge.sim.costs`:

    (RUN, pipe, cycles, gm_bytes, gm_ideal, cube_blocks, vector_cycles, label, ops, vector_ideal, gm_read, arg, scratch)
    (SET, pipe, key)          set_flag on the source pipe; key = (src, dst, event id)
    (WAIT, pipe, key)         wait_flag on the destination pipe
    (BARRIER, pipe)           pipe_barrier
    (SYNC_ALL,)               every block meets here
    (LOOP, trips, body, pipes, keys)   pipes and flag keys the body touches

`gm_bytes` are the bytes a copy moves to or from GM (`gm_read` those it reads from
GM: what the simulator's L2 may serve, `ge.sim.l2`; `arg` the kernel argument it
reads, by its place among the program's block arguments (inputs, outputs, then the
workspace), -1 for none or unknown; `scratch` those it moves to or from the kernel's
workspace, which L2 may keep); `gm_ideal` the cycles they
take at the path's peak rate (no latency): a kernel whose GM traffic at peak fills
its time is memory-bound, one whose copies mostly wait on latency is not.
`cube_blocks` are the m0 x k0 x n0 cube blocks of an mmad (one a cycle at peak).
`ops` count the work for a roofline: 2 x m x k x n for an mmad (a multiply and an add
per MAC), the elements of a vector instruction (one operation each); `vector_ideal`
is the cycles a vector instruction takes at the unit's peak, one 256-byte repeat a cycle.

On a part with split cores (the 910B: cube cores and vector cores apart, two vector
cores per cube core) a cube kernel's vector half (a mixed epilogue, attention's
softmax) runs on a vector core, whose MTE2 is not the cube core's: there a copy
into UB on MTE2 runs on `AIV_MTE2`, a queue of its own, and so do the flags that
pair MTE2 with V, MTE3 or FIX (the workspace FIX wrote). The dialect names one MTE2,
as the program's ops say what moves where, not on which core; the decoder tells the
two apart by the buffer. Each half issues from its own scalar unit (`AIV_S` the
vector core's, in the block's program order: `timing.time_block`), and the vector
cores of a cube core share the vector half (`vector_cores`: each of its copies and
instructions costs what its share does; its GM bytes stay whole).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache

from dialects.ascend_kernel import FLAG_CORES, PIPES
from ge.core import soc as soc_profiles
from ge.core.errors import CalibrationError, ModelError
from ge.sim import costs

RUN, SET, WAIT, BARRIER, SYNC_ALL, LOOP = range(6)
AIV_MTE2 = "AIV_MTE2"
AIV_S = "AIV_S"
SIM_PIPES = (*PIPES, AIV_MTE2, AIV_S)
"""The pipes a block's clocks keep: the dialect's, and on a part with split cores the
vector core's own MTE2, which a cube kernel's vector half loads UB with (`_side`), and
its own scalar unit, which issues the vector half's instructions (`vector_half_apart`)."""
PIPE = {name: i for i, name in enumerate(SIM_PIPES)}
S_PIPE = PIPE["S"]
_AIV_SIDE = {PIPE["V"], PIPE["MTE3"]}
VECTOR_HALF = frozenset({*_AIV_SIDE, PIPE[AIV_MTE2]})
"""The pipes of a cube kernel's vector half, on a vector core of its own where the cores are split."""

SCALAR_CYCLES_PER_INSTR = 1.0
"""The scalar unit retires one instruction a cycle (an in-order RISC core); the
tiling counts its instructions (addresses, loop counters, tiling reads)."""

VECTOR_ALIASES = {"VNCHWCONV": "VTRANSPOSE"}
"""Vector instructions the tiling emits that the calibration does not name, priced as
the measured-family instruction doing the same work: VNCHWCONV is the 16 x 16
block transpose of the NCHW <-> NC1HWC0 conversions, costed as VTRANSPOSE (unary)."""

_MMAD_DTYPES = {"f16": "float16", "bf16": "bfloat16", "i8": "int8", "si8": "int8", "i4": "int4", "si4": "int4", "f32": "float32"}
"""The element type spellings of an mmad's dtype property, as the SoC profiles name them."""

_HEADER = re.compile(r"^ascend_kernel\.kernel @(\S+) attributes \{(.*)\} compute \{$")
_OP = re.compile(r"^\s*(?:%\S+ = )?ascend_kernel\.(\w+)\s?(.*)$")
_COPY = re.compile(
    r'^"(\w+)" (%\S+) -> (%\S+), (\d+) bytes(?: mode "(\w+)")?(?: \{.*\})? : '
    r'!ascend_kernel\.buffer<"(\w+)"> -> !ascend_kernel\.buffer<"(\w+)">$'
)
_MMAD = re.compile(r"^%\S+, %\S+ -> %\S+, (\d+) x (\d+) x (\d+), (\w+)(?: \{.*\})? : ")
_VEC = re.compile(r'^"(\w+)" "(\w+)"\(.*\) x (\d+)(?: \{.*\})? : ')
_SCALAR = re.compile(r"^(\d+) instrs(?: \{.*\})?$")
_FLAG = re.compile(r'^"(\w+)" -> "(\w+)", (\d+)(?: core "(\w+)")?(?: \{.*\})?$')
_BARRIER = re.compile(r'^"(\w+)"(?: \{.*\})?$')
_ARG_DIMS = re.compile(r'#ascend_kernel\.arg<"(?:input|output)", [^,]+, array<i64(?:: ([\d, ]*))?>')
"""The shape of one argument in a kernel's header (a scalar's array has no dims)."""
_BLOCK_ARG = re.compile(r"(%[\w.$-]+): !ascend_kernel\.buffer")
"""One block argument of a program (a kernel argument's GM buffer)."""
_LOOP = re.compile(r"^(\d+) times (?:attributes \{.*\} )?\{$")


@dataclass(frozen=True)
class Header:
    """The properties of a kernel the runtime and the timing need."""

    name: str
    op_types: tuple[str, ...]
    block_dim: int
    core_type: str
    impl_mode: str
    soc: str
    workspace: int
    elements: int = 0
    """The elements of its arguments, inputs and outputs (what an AI CPU kernel's time scales
    with); an output of data-dependent shape, unknown until it runs, counts none."""


@dataclass
class KernelText:
    """One kernel of a model's `kernels.mlir`: header line, compute and program lines."""

    header: Header
    header_line: str
    compute_lines: list[str]
    program_args_line: str
    program_lines: list[str]
    _program: tuple | None = field(default=None, repr=False)

    def program(self) -> tuple:
        """The decoded pipe program of one block (decoded once)."""
        if self._program is None:
            lines = iter(self.program_lines)
            names = _BLOCK_ARG.findall(self.program_args_line)
            args = {name: i for i, name in enumerate(names)}
            workspace = names[-1] if names and self.header.workspace > 0 else None
            self._program = _decode(lines, self.header, top=True, args=args, workspace=workspace)
        return self._program

    def compute_text(self) -> str:
        """The kernel with its compute region and an empty program: what xDSL parses for the numerics."""
        return "\n".join([self.header_line, *self.compute_lines, "} program {", self.program_args_line, "}"])


def split_kernels(text: str) -> dict[str, KernelText]:
    """The kernels of a `kernels.mlir` text, by symbol name."""
    kernels: dict[str, KernelText] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        match = _HEADER.match(line)
        if match is None:
            raise ModelError(f"the model's kernels: line {i + 1} does not start an ascend_kernel.kernel: {line[:80]!r}")
        header = _header(match.group(1), match.group(2))
        compute_start = i + 1
        while i < len(lines) and lines[i] != "} program {":
            i += 1
        if i + 1 >= len(lines):
            raise ModelError(f"kernel @{header.name}: its program region is missing")
        compute = lines[compute_start:i]
        args_line = lines[i + 1]
        program_start = i + 2
        i = program_start
        while i < len(lines) and lines[i] != "}":
            i += 1
        if i >= len(lines):
            raise ModelError(f"kernel @{header.name}: its program region is not closed")
        kernels[header.name] = KernelText(header, line, compute, args_line, lines[program_start:i])
        i += 1
    return kernels


def _header(name: str, attrs: str) -> Header:
    """The kernel's properties from its attribute dictionary (the tiling dict set aside)."""
    outer = re.sub(r"tiling = \{[^{}]*\}", "tiling = {}", attrs)

    def find(pattern: str) -> str:
        match = re.search(r"(?:^|, )" + pattern, outer)
        if match is None:
            raise ModelError(f"kernel @{name}: its header lacks {pattern.split(' ')[0]}")
        return match.group(1)

    op_types = tuple(re.findall(r'"([^"]*)"', find(r"op_types = \[([^\]]*)\]")))
    elements = sum(math.prod(_dim(name, d) for d in dims.split(",") if d.strip()) for dims in _ARG_DIMS.findall(outer))
    return Header(
        name,
        op_types,
        int(find(r"block_dim = (\d+) : i64")),
        find(r'core_type = "(\w+)"'),
        find(r'impl_mode = "(\w+)"'),
        find(r'soc = "(\w+)"'),
        int(find(r"workspace = (\d+) : i64")),
        elements,
    )


def _dim(kernel: str, text: str) -> int:
    """A dim of an argument's shape; a `.om` is read, not trusted: at most 19 digits."""
    text = text.strip()
    if len(text) > 19:
        raise ModelError(f"kernel @{kernel}: an argument's dim has {len(text)} digits; a dim has at most 19")
    return int(text)


def decode(lines: Sequence[str], soc: str, name: str = "program") -> tuple:
    """The instructions of a program's lines (as printed in a kernel's program region,
    after its block arguments), priced for `soc`."""
    return _decode(iter(lines), Header(name, (), 1, "AiCore", "high_performance", soc, 0), top=True)


def _decode(lines: Iterator[str], header: Header, top: bool, args: dict[str, int] | None = None, workspace: str | None = None) -> tuple:
    """Instructions up to the end of `lines` (top) or to the `}` closing a loop body."""
    out: list[tuple] = []
    for line in lines:
        if line.strip() == "}":
            if top:
                raise ModelError(f"kernel @{header.name}: an unmatched '}}' in its program")
            return tuple(out)
        match = _OP.match(line)
        if match is None:
            raise ModelError(f"kernel @{header.name}: cannot read program line {line.strip()[:80]!r}")
        kind, rest = match.groups()
        if kind == "alloc":
            continue
        if kind == "loop":
            loop = _LOOP.match(rest)
            _check(loop, header, line)
            body = _decode(lines, header, top=False, args=args, workspace=workspace)
            pipes, keys = touched(body)
            out.append((LOOP, int(loop.group(1)), body, pipes, keys))  # type: ignore[union-attr]
            continue
        out.append(_instruction(kind, rest, header, line, args or {}, workspace))
    if not top:
        raise ModelError(f"kernel @{header.name}: a loop body in its program is not closed")
    return tuple(out)


def _check(match: re.Match | None, header: Header, line: str) -> None:
    if match is None:
        raise ModelError(f"kernel @{header.name}: cannot read program line {line.strip()[:80]!r}")


def _instruction(kind: str, rest: str, header: Header, line: str, args: dict[str, int], workspace: str | None) -> tuple:
    soc = header.soc
    try:
        if kind == "copy":
            m = _COPY.match(rest)
            _check(m, header, line)
            pipe, source, dest, nbytes, mode, src, dst = m.groups()  # type: ignore[union-attr]
            arg = args.get(source, -1) if src == "GM" else -1
            scratch = workspace is not None and workspace == (source if src == "GM" else dest if dst == "GM" else None)
            index = PIPE[AIV_MTE2] if dst == "UB" and pipe == "MTE2" and vector_half_apart(header) else _pipe(pipe, header)
            cores = vector_cores(header) if index in VECTOR_HALF else 1
            return _copy(soc, index, int(nbytes), mode or "normal", src, dst, arg, scratch, cores)
        if kind == "mmad":
            m = _MMAD.match(rest)
            _check(m, header, line)
            mm, k, n, dtype = m.groups()  # type: ignore[union-attr]
            return _mmad(soc, int(mm), int(k), int(n), _mmad_dtype(dtype, header))
        if kind == "vec":
            m = _VEC.match(rest)
            _check(m, header, line)
            instr, dtypes, elements = m.groups()  # type: ignore[union-attr]
            return _vec(soc, instr, dtypes, int(elements), vector_cores(header))
        if kind == "scalar":
            m = _SCALAR.match(rest)
            _check(m, header, line)
            cycles = int(m.group(1)) * SCALAR_CYCLES_PER_INSTR  # type: ignore[union-attr]
            return (RUN, S_PIPE, cycles, 0, 0.0, 0.0, 0.0, "scalar", 0.0, 0.0, 0, -1, 0)
        if kind in ("set_flag", "wait_flag"):
            m = _FLAG.match(rest)
            _check(m, header, line)
            src, dst, event, core = m.groups()  # type: ignore[union-attr]
            if core not in (None, *FLAG_CORES):
                raise ModelError(f"kernel @{header.name}: flag core {core!r}, not one of {', '.join(FLAG_CORES)}")
            key = _side(_pipe(src, header), _pipe(dst, header), int(event), vector_half_apart(header), core)
            return (SET, key[0], key) if kind == "set_flag" else (WAIT, key[1], key)
        if kind == "pipe_barrier":
            m = _BARRIER.match(rest)
            _check(m, header, line)
            return (BARRIER, _pipe(m.group(1), header))  # type: ignore[union-attr]
        if kind == "sync_all":
            return (SYNC_ALL,)
    except CalibrationError as e:
        raise ModelError(f"kernel @{header.name}: {e}") from e
    raise ModelError(f"kernel @{header.name}: the simulator does not know program op ascend_kernel.{kind}")


def vector_half_apart(header: Header) -> bool:
    """Whether a cube kernel's vector half runs on vector cores of its own: on a part
    with split cores (the 910B's AIC and AIV), UB is the vector core's, loaded by
    that core's MTE2, a queue apart from the cube core's loads into L1."""
    return header.core_type == "AiCore" and soc_profiles.load(header.soc).split_cores


def vector_cores(header: Header) -> int:
    """The vector cores that share a block's vector half: where they are apart, a cube
    core's (two on the 910B, 48 to 24: each takes half of every copy and instruction
    of the half, as a 1:2 mixed kernel's sub-blocks do), else the one core."""
    if not vector_half_apart(header):
        return 1
    return soc_profiles.load(header.soc).vector_per_cube


def _side(src: int, dst: int, event: int, mixed: bool, core: str | None = None) -> tuple[int, int, int]:
    """A flag's key with MTE2 taken as the vector core's where the flag names that
    core, or names none and its other end is the vector pipe, MTE3 (UB's store) or
    FIX (the cube's result in the workspace); a flag naming the cube core keeps the
    cube's MTE2 (the vector core's store of the workspace that the cube loads)."""
    mte2, aiv = PIPE["MTE2"], core == "vector" or core is None
    if mixed and aiv and dst == mte2 and (core or src in (*_AIV_SIDE, PIPE["FIX"])):
        dst = PIPE[AIV_MTE2]
    if mixed and aiv and src == mte2 and (core or dst in _AIV_SIDE):
        src = PIPE[AIV_MTE2]
    return src, dst, event


def _pipe(name: str, header: Header) -> int:
    if name not in PIPE:
        raise ModelError(f"kernel @{header.name}: unknown pipe {name!r}")
    return PIPE[name]


def _mmad_dtype(spelling: str, header: Header) -> str:
    if spelling not in _MMAD_DTYPES:
        raise ModelError(f"kernel @{header.name}: mmad in {spelling}, which the cube has no mode for")
    return _MMAD_DTYPES[spelling]


@cache
def _copy(soc_name: str, pipe: int, nbytes: int, mode: str, src: str, dst: str, arg: int, scratch: bool, cores: int = 1) -> tuple:
    """A copy; `cores` vector cores share it, each moving its part at once."""
    soc = costs.for_soc(soc_name)
    path = f"{src}_TO_{dst}" + ("_TRANS" if mode in ("nd2nz", "nz2nd") else "")
    cycles = soc.transfer_cycles(path, -(-nbytes // cores))
    gm = nbytes if "GM" in (src, dst) else 0
    ideal = gm / soc.transfer(path).peak_bytes_per_cycle if gm else 0.0
    read = nbytes if src == "GM" else 0
    return (RUN, pipe, cycles, gm, ideal, 0.0, 0.0, f"{path} {nbytes} B", 0.0, 0.0, read, arg, gm if scratch else 0)


@cache
def _mmad(soc_name: str, m: int, k: int, n: int, dtype: str) -> tuple:
    soc = costs.for_soc(soc_name)
    cycles = soc.mmad_cycles(m, k, n, dtype)
    m0, k0, n0 = soc.cube[dtype]
    blocks = m * k * n / (m0 * k0 * n0)
    return (RUN, PIPE["M"], cycles, 0, 0.0, blocks, 0.0, f"mmad {m}x{k}x{n} {dtype}", 2.0 * m * k * n, 0.0, 0, -1, 0)


@cache
def _vec(soc_name: str, instr: str, dtypes: str, elements: int, cores: int = 1) -> tuple:
    """A vector instruction; `cores` vector cores share it, each computing its part at once."""
    priced = VECTOR_ALIASES.get(instr, instr)
    cycles = costs.vector_cycles(soc_name, priced, dtypes, -(-elements // cores))
    ideal = float(costs.default_repeat(dtypes, elements))
    return (RUN, PIPE["V"], cycles, 0, 0.0, 0.0, cycles, f"{instr} {dtypes} x{elements}", float(elements), ideal, 0, -1, 0)


def touched(body: tuple) -> tuple[tuple[int, ...], tuple[tuple[int, int, int], ...]]:
    """The pipes (the scalar units always: they issue everything) and the flag keys a body uses."""
    pipes: set[int] = {S_PIPE}
    keys: set[tuple[int, int, int]] = set()
    for ins in body:
        op = ins[0]
        if op in (RUN, BARRIER):
            pipes.add(ins[1])
        elif op in (SET, WAIT):
            pipes.add(ins[1])
            keys.add(ins[2])
        elif op == SYNC_ALL:
            pipes.update(range(len(SIM_PIPES)))
        else:
            inner_pipes, inner_keys = ins[3], ins[4]
            pipes.update(inner_pipes)
            keys.update(inner_keys)
    if pipes & VECTOR_HALF:
        pipes.add(PIPE[AIV_S])  # which issues them where the vector half is apart
    return tuple(sorted(pipes)), tuple(sorted(keys))
