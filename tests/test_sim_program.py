"""The simulator's program decoder against xDSL's parse of the same kernels.

`ge.sim.program` reads kernel programs line by line rather than with the xDSL
parser (ten times faster); these tests hold it to the parser: for every kernel of
compiled models, the decoded instructions are, one for one, the parsed program's
ops, with the costs `ge.sim.costs` gives the parsed ops' own fields.
"""

from __future__ import annotations

import pytest
from xdsl.ir import Operation

import ge
from dialects import ascend_kernel as ak
from ge.core import dtypes
from ge.core.errors import ModelError
from ge.models import DEMO_MODELS
from ge.sim import costs, program
from ge.sim.program import BARRIER, LOOP, PIPE, RUN, SET, SYNC_ALL, WAIT

SOCS = ("Ascend310P3", "Ascend910B1")


@pytest.fixture(scope="module", params=[(m.name, soc) for m in DEMO_MODELS for soc in SOCS], ids=lambda p: f"{p[0]}-{p[1]}")
def compiled(request) -> ge.Model:
    name, soc = request.param
    model = next(m for m in DEMO_MODELS if m.name == name)
    return ge.compile(model.path, {"soc_version": soc})


def expected(ops: list[Operation], soc: str, mixed: bool = False) -> list[tuple]:
    """(kind, pipe, cycles or key or trips, body) per op of a parsed program, costed from its fields.
    `mixed`: a cube kernel on a part with split cores, whose loads into UB are the vector
    core's MTE2 (`program.AIV_MTE2`), as are the flags between MTE2 and V, MTE3 or FIX,
    and whose vector half two vector cores share (each copy and instruction at half its size)."""

    out: list[tuple] = []
    for op in ops:
        if isinstance(op, ak.AllocOp):
            continue
        if isinstance(op, ak.CopyOp):
            into_ub = mixed and op.pipe == "MTE2" and op.path.split("_TO_")[1].startswith("UB")
            shared = mixed and (into_ub or op.pipe == "MTE3")  # two vector cores take half each
            nbytes = -(-op.int_prop("bytes") // 2) if shared else op.int_prop("bytes")
            out.append((RUN, PIPE[program.AIV_MTE2 if into_ub else op.pipe], costs.transfer_cycles(soc, op.path, nbytes)))
        elif isinstance(op, ak.MmadOp):
            m, k, n = (op.int_prop(x) for x in "mkn")
            out.append((RUN, PIPE["M"], costs.mmad_cycles(soc, m, k, n, dtypes.name(op.dtype))))
        elif isinstance(op, ak.VecOp):
            instr = program.VECTOR_ALIASES.get(op.str_prop("instr"), op.str_prop("instr"))
            elements = -(-op.int_prop("elements") // 2) if mixed else op.int_prop("elements")
            out.append((RUN, PIPE["V"], costs.vector_cycles(soc, instr, op.str_prop("dtypes"), elements)))
        elif isinstance(op, ak.ScalarOp):
            out.append((RUN, PIPE["S"], op.int_prop("instrs") * program.SCALAR_CYCLES_PER_INSTR))
        elif isinstance(op, ak.SetFlagOp | ak.WaitFlagOp):
            src, dst, event = op.key
            kind = SET if isinstance(op, ak.SetFlagOp) else WAIT
            core = op.core  # a flag across the cores names whose MTE2 it pairs with
            loads_ub = mixed and src == "MTE2" and (core == "vector" or (core is None and dst in ("V", "MTE3")))
            waits_for_ub = mixed and dst == "MTE2" and (core == "vector" or (core is None and src in ("V", "MTE3", "FIX")))
            key = (PIPE[program.AIV_MTE2 if loads_ub else src], PIPE[program.AIV_MTE2 if waits_for_ub else dst], event)
            out.append((kind, key[0] if kind == SET else key[1], key))
        elif isinstance(op, ak.PipeBarrierOp):
            out.append((BARRIER, PIPE[op.pipe]))
        elif isinstance(op, ak.SyncAllOp):
            out.append((SYNC_ALL,))
        elif isinstance(op, ak.LoopOp):
            out.append((LOOP, op.int_prop("trips"), expected(list(op.body.block.ops), soc, mixed)))
        else:
            raise AssertionError(f"a program op the test does not know: {op.name}")
    return out


def comparable(instructions: tuple) -> list[tuple]:
    """The decoded instructions in `expected`'s shape."""
    out: list[tuple] = []
    for ins in instructions:
        if ins[0] == RUN:
            out.append((RUN, ins[1], ins[2]))
        elif ins[0] in (SET, WAIT):
            out.append((ins[0], ins[1], ins[2]))
        elif ins[0] == LOOP:
            out.append((LOOP, ins[1], comparable(ins[2])))
        else:
            out.append(ins)
    return out


def test_decoder_reads_every_program_as_xdsl_parses_it(compiled: ge.Model) -> None:
    decoded = program.split_kernels(compiled.kernels)
    parsed = {op.sym_name.data: op for op in compiled.kernel_module().ops if isinstance(op, ak.KernelOp)}
    assert decoded.keys() == parsed.keys()
    for name, kernel in parsed.items():
        text = decoded[name]
        assert text.header.block_dim == kernel.int_prop("block_dim")
        assert text.header.core_type == kernel.str_prop("core_type")
        assert text.header.op_types == tuple(t.data for t in kernel.op_types)
        assert text.header.workspace == kernel.int_prop("workspace")
        mixed = text.header.core_type == "AiCore" and compiled.soc_version == "Ascend910B1"
        assert comparable(text.program()) == expected(list(kernel.program.block.ops), compiled.soc_version, mixed), name


def test_compute_text_parses_to_the_kernels_compute_region(compiled: ge.Model) -> None:
    from ge.sim.kernels import Numerics

    numerics = Numerics(program.split_kernels(compiled.kernels))
    for op in compiled.kernel_module().ops:
        if not isinstance(op, ak.KernelOp):
            continue
        mine = numerics.kernel(op.sym_name.data)
        assert [o.name for o in mine.compute.block.ops] == [o.name for o in op.compute.block.ops]
        assert [a.type for a in mine.compute.block.args] == [a.type for a in op.compute.block.args]


def test_loop_bodies_record_the_pipes_and_flags_they_touch() -> None:
    lines = [
        "ascend_kernel.loop 3 times {",
        '  ascend_kernel.wait_flag "MTE1" -> "MTE2", 0',
        '  ascend_kernel.set_flag "MTE1" -> "MTE2", 0',
        '  ascend_kernel.pipe_barrier "V"',
        "}",
    ]
    (loop,) = program.decode(lines, "Ascend910B1")
    assert loop[0] == LOOP and loop[1] == 3
    assert loop[3] == tuple(sorted({PIPE["S"], PIPE["MTE2"], PIPE["MTE1"], PIPE["V"], PIPE[program.AIV_S]}))  # V's issuer too
    assert loop[4] == ((PIPE["MTE1"], PIPE["MTE2"], 0),)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["ascend_kernel.frobnicate 3"], "does not know program op ascend_kernel.frobnicate"),
        (['ascend_kernel.copy "MTE2" %1 -> %2 : !x'], "cannot read program line"),
        (["ascend_kernel.loop 2 times {", "ascend_kernel.scalar 1 instrs"], "not closed"),
        (["}"], "unmatched"),
        (['ascend_kernel.vec "VNOPE" "FP16_FP16"(%1) x 16 : !ascend_kernel.buffer<"UB">'], "VNOPE"),
    ],
)
def test_malformed_programs_are_refused_by_line(lines: list[str], message: str) -> None:
    with pytest.raises(ModelError, match=message):
        program.decode(lines, "Ascend910B1")


def test_a_kernels_text_without_its_program_is_refused() -> None:
    header = 'ascend_kernel.kernel @k attributes {op_types = ["Relu"], block_dim = 1 : i64, core_type = "AiCore", impl_mode = "high_performance", tiling = {}, args = [], soc = "Ascend910B1", workspace = 0 : i64} compute {'
    with pytest.raises(ModelError, match="program region is missing"):
        program.split_kernels(header + "\n^bb0:\n")


def imports_of(path) -> set[str]:
    import ast

    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_simulator_imports_neither_passes_nor_the_frontend_and_the_build_not_it() -> None:
    from pathlib import Path

    root = Path(ge.__file__).resolve().parent
    for path in (root / "sim").rglob("*.py"):
        bad = {n for n in imports_of(path) if n == "passes" or n.startswith(("passes.", "ge.frontend"))}
        assert not bad, f"{path} imports {bad}"
    for path in (root / "build").rglob("*.py"):
        assert not {n for n in imports_of(path) if n.startswith("ge.sim")}, path
