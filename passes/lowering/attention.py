"""MultiHeadAttention and FusedInferAttentionScore: one kernel of phases (matmuls and
a softmax) joined by `sync_all`, with the intermediates in the workspace."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from xdsl.ir import Attribute, SSAValue

from dialects import ascend_graph as ag
from dialects import formats
from dialects.ascend_kernel import (
    LoopOp,
    ScalarOp,
    SetFlagOp,
    SyncAllOp,
    WaitFlagOp,
)
from ge.core.errors import ModelError
from ge.core.soc import SocProfile
from passes.lowering.cube import Epilogue, EpiValue, Gemm, cube_program, tile_gemm
from passes.lowering.flash import Flash, flash_phase, flash_tiling
from passes.lowering.program import (
    ACC_BYTES,
    FRACTAL,
    SETUP_INSTRS,
    Ops,
    Plan,
    Program,
    aligned,
    body,
    copy,
    double_buffered,
    element_bytes,
    numel,
    split,
    sync,
    vec,
)
from passes.lowering.recipes import BINARY, RECIPES, UNARY, dtype_name

# ------------------------------------------------------------ the softmax phase


@dataclass(frozen=True)
class Softmax:
    """The softmax phase of an attention kernel: `block_rows` rows of `row` scores per
    block in tiles of `tile_rows`, read from the workspace ("s") and written back as
    probabilities ("p"). `pre` are the vector instructions on the scores before the
    softmax (scale, softcap, mask); a mask is read beside them (`mask_elements` of
    `mask_bytes`, 0 meaning the scores' width; whole when it is smaller than a
    tile); `scores` is a graph result the scores are also stored to."""

    row: int
    dtype: Attribute
    block_rows: int
    tile_rows: int
    mask: SSAValue | None
    mask_elements: int
    pre: Sequence[tuple[str, str]]
    mask_bytes: int = 0
    scores: SSAValue | None = None


def softmax_tile_rows(profile: SocProfile, op: ag.AscendOp, row: int, dtype: Attribute, block_rows: int,
                      mask_elements: int, mask_bytes: int = 0) -> int:
    """The most rows of scores whose buffers fit the UB: scores and probabilities
    twice each, the row statistics, and the mask's share (as in `Softmax`)."""
    in_b = max(1, formats.element_bits(dtype) // 8)

    def ub(r: int) -> int:
        row_bytes = aligned(profile, "UB", r * row * in_b)
        stats = aligned(profile, "UB", r * ACC_BYTES) * 2
        masked = aligned(profile, "UB", min(mask_elements, r * row) * (mask_bytes or in_b)) if mask_elements else 0
        return 4 * row_bytes + stats + masked

    if ub(1) > profile.ub_bytes:
        raise ModelError(f"{op.OP_TYPE} '{op.label}': a row of {row} scores does not fit {profile.name}'s UB")
    return max(r for r in range(1, block_rows + 1) if ub(r) <= profile.ub_bytes)


def softmax_phase(prog: Program, gm: dict[Hashable, SSAValue], spec: Softmax) -> Ops:
    """One block's softmax over its rows, double-buffered by tiles."""
    profile, sk, tile_rows = prog.profile, spec.row, spec.tile_rows
    in_b = max(1, formats.element_bits(spec.dtype) // 8)
    mask_b = spec.mask_bytes or in_b
    s_ub, p_ub = prog.pair("UB", tile_rows * sk * in_b), prog.pair("UB", tile_rows * sk * in_b)
    stats = prog.alloc("UB", tile_rows * ACC_BYTES), prog.alloc("UB", tile_rows * ACC_BYTES)
    m_ub = prog.alloc("UB", min(spec.mask_elements, tile_rows * sk) * mask_b) if spec.mask is not None else None
    d = dtype_name(spec.dtype)

    def make(slot: int, r: int) -> Ops:
        ops: Ops = [WaitFlagOp("V", "MTE2", slot), copy(profile, gm["s"], s_ub[slot], r * sk * in_b)]
        if m_ub is not None and spec.mask is not None:
            ops.append(copy(profile, gm[spec.mask], m_ub, min(spec.mask_elements, r * sk) * mask_b))
        ops += [*sync("MTE2", "V", slot), WaitFlagOp("MTE3", "V", slot)]
        for instr, template in spec.pre:
            ops += vec(instr, template.format(d=d), r * sk, [s_ub[slot]] + ([m_ub] if m_ub is not None and instr in ("VADD", "VSEL") else []), in_b)
        for instr, template in (("VCMAX", UNARY), ("VSUB", BINARY), ("VEXP", UNARY), ("VCADD", UNARY), ("VDIV", BINARY)):
            ops += vec(instr, template.format(d=d), r * sk, [p_ub[slot], s_ub[slot], stats[0]], in_b)
        ops += [SetFlagOp("V", "MTE2", slot), *sync("V", "MTE3", slot), copy(profile, p_ub[slot], gm["p"], r * sk * in_b)]
        if spec.scores is not None:
            ops.append(copy(profile, s_ub[slot], gm[spec.scores], r * sk * in_b))
        return body(ops + [SetFlagOp("MTE3", "V", slot)])

    return double_buffered(*split(spec.block_rows, tile_rows), make, [("V", "MTE2", 0), ("MTE3", "V", 0)])


# -------------------------------------------------------- multi-head attention


def attention_plan(
    profile: SocProfile, op: ag.MultiHeadAttentionOp, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue], cores: int
) -> Plan:
    """MultiHeadAttention as four phases of one kernel, joined by `sync_all`: the
    Q/K/V projections (bias added as by a matmul), the scores of every head, their
    softmax (times `scale`, plus the mask), and the probabilities times V. q, k, v
    and the scores and probabilities live in the workspace (in the input dtype).
    Where the vector unit sits beside the cube and a row of scores fits UB, the last
    three are one flash phase (`flash`): the scores never leave the core."""
    query, key, value = op.operands[:3]
    bsh = op.props.str("input_layout") == "BSH"
    (b, sq, kq), (_, sk, kk), (_, _, kv) = (
        (s[0], s[1], s[2]) if bsh else (s[1], s[0], s[2]) for s in (ag.shape_of(v.type) for v in (query, key, value))
    )
    heads = op.props.int("head_num")
    e, ev = ag.shape_of(op.operands[3].type)[1], ag.shape_of(op.operands[5].type)[1]
    din, dout = ag.dtype_of(query.type), ag.dtype_of(op.results[0].type)
    nd = ag.format_of(query.type) is None
    biases = op.operands[6:9] if len(op.operands) >= 9 else [None, None, None]
    mask = op.operands[-1] if len(op.operands) in (7, 10) else None
    gemms = [
        Gemm(1, b * sq, kq, e, din, din, a_nd=nd, b_nd=ag.format_of(op.operands[3].type) is None),
        Gemm(1, b * sk, kk, e, din, din, a_nd=nd, b_nd=ag.format_of(op.operands[4].type) is None),
        Gemm(1, b * sk, kv, ev, din, din, a_nd=nd, b_nd=ag.format_of(op.operands[5].type) is None),
        Gemm(b * heads, sq, e // heads, sk, din, din),
        Gemm(b * heads, sq, sk, ev // heads, din, dout, out_nd=ag.format_of(op.results[0].type) is None and profile.fix_pipe),
    ]
    names = ["q", "k", "v", "s", op.results[0]]
    units = max(max(g.batch * -(-g.m // FRACTAL) * -(-g.n // FRACTAL) for g in gemms), b * heads * sq)
    block_dim = min(cores, units)
    in_b = max(1, formats.element_bits(din) // 8)

    def epilogue(stored: Hashable, bias: SSAValue | None, n: int, out_b: int) -> Epilogue:
        if profile.fix_pipe:
            return Epilogue("fix", stored, (), [], [], [stored], bias)
        values = [EpiValue(stored, "tile", out_b, True)]
        if bias is not None:
            values.append(EpiValue(bias, "col", element_bytes(bias), True))
        return Epilogue("vector", stored, (), values, [bias] if bias is not None else [], [stored], bias)

    pre = [("VMULS", BINARY)] + ([("VADD", BINARY)] if mask is not None else [])
    mask_shape = ag.shape_of(mask.type) if mask is not None else (0,)
    flash_spec = Flash(
        b * heads, sq, sk, e // heads, ev // heads, din, dout, "q", "k", "v", op.results[0], pre, mask, mask_shape[-1],
        len(mask_shape) > 1 and mask_shape[-2] > 1, element_bytes(mask) if mask is not None else 0,
    )
    flash = flash_tiling(profile, flash_spec, block_dim)
    epilogues = [epilogue(name, bias, g.n, g.out_bytes) for name, bias, g in zip(names, [*biases, None, None], gemms)]
    tilings = [
        tile_gemm(profile, g, block_dim, lambda m, n, e=ep: e.ub_bytes(profile, m, n), ep.bias is not None and profile.fix_pipe, exact=True)
        for g, ep in zip(gemms[: 3 if flash is not None else 5], epilogues)
    ]
    rows = b * heads * sq
    soft_dim = min(block_dim, rows)
    block_rows = -(-rows // soft_dim)
    mask_elements = numel(mask) if mask is not None else 0

    if flash is not None:
        workspace = (b * sq * e + b * sk * (e + ev)) * in_b
        tiling: dict[str, int] = {"heads": heads, **flash.params()}
    else:
        tile_rows = softmax_tile_rows(profile, op, sk, din, block_rows, mask_elements)
        workspace = (b * sq * e + b * sk * (e + ev) + 2 * rows * sk) * in_b
        tiling = {"heads": heads, "softmax_rows": rows, "softmax_row": sk, "softmax_tile_rows": tile_rows}
    for prefix, g, t in zip(("q_", "k_", "v_", "score_", "context_"), gemms, tilings):
        tiling.update(t.params(g, prefix))

    def softmax(prog: Program, gm: dict[Hashable, SSAValue]) -> Ops:
        return softmax_phase(prog, gm, Softmax(sk, din, block_rows, tile_rows, mask, mask_elements, pre))

    def program(gm: dict[SSAValue, SSAValue], ws: SSAValue | None) -> Ops:
        assert ws is not None
        where: dict[Hashable, SSAValue] = {**gm, "q": ws, "k": ws, "v": ws, "s": ws, "p": ws}
        operands = [(gm[query], gm[op.operands[3]]), (gm[key], gm[op.operands[4]]), (gm[value], gm[op.operands[5]]), (ws, ws), (ws, ws)]

        def phase(make: Callable[[Program], Ops]) -> LoopOp:
            """A phase holds its own buffers: a loop of one trip, so they end with it."""
            prog = Program(profile)
            ops = make(prog)
            return LoopOp(1, [*prog.allocs, *ops])

        def matmul(i: int) -> LoopOp:
            return phase(lambda prog: cube_program(prog, gemms[i], tilings[i], epilogues[i], where, *operands[i], None))

        projections = [ScalarOp(SETUP_INSTRS), matmul(0), matmul(1), matmul(2), SyncAllOp()]
        if flash is not None:
            return [*projections, phase(lambda prog: flash_phase(prog, where, flash_spec, flash))]
        return [*projections, matmul(3), SyncAllOp(), phase(lambda prog: softmax(prog, where)), SyncAllOp(), matmul(4)]

    return Plan(block_dim, "AiCore", tiling, workspace, program)


# ---------------------------------------------------------- fused infer attention score


def fused_attention_plan(
    profile: SocProfile, op: ag.FusedInferAttentionScoreOp, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue],
    cores: int,
) -> Plan:
    """FusedInferAttentionScore as three phases of one kernel, joined by `sync_all`:
    the scores of every query head (a grouped key/value head is read once per query
    head it serves), their softmax (scale, softcap, mask, causal band and key lengths
    first; a requested scores output is one more store per tile), and the
    probabilities times V. Scores and probabilities live in the workspace. Where the
    vector unit sits beside the cube and a row of scores fits UB, the three are one
    flash phase (`flash`) and the kernel has no workspace."""
    query, key, value = op.query, op.key, op.value
    b, heads, sq, d = ag.shape_of(query.type)
    sk, dv = ag.shape_of(key.type)[2], ag.shape_of(value.type)[3]
    din, dout = ag.dtype_of(query.type), ag.dtype_of(op.results[0].type)
    gemms = [
        Gemm(b * heads, sq, d, sk, din, din, a_nd=ag.format_of(query.type) is None, b_nd=ag.format_of(key.type) is None),
        Gemm(
            b * heads, sq, sk, dv, din, dout, b_nd=ag.format_of(value.type) is None,
            out_nd=ag.format_of(op.results[0].type) is None and profile.fix_pipe,
        ),
    ]
    names: list[Hashable] = ["s", op.results[0]]
    units = max(max(g.batch * -(-g.m // FRACTAL) * -(-g.n // FRACTAL) for g in gemms), b * heads * sq)
    block_dim = min(cores, units)

    def epilogue(stored: Hashable, out_b: int) -> Epilogue:
        if profile.fix_pipe:
            return Epilogue("fix", stored, (), [], [], [stored], None)
        return Epilogue("vector", stored, (), [EpiValue(stored, "tile", out_b, True)], [], [stored], None)

    rows = b * heads * sq
    block_rows = -(-rows // min(block_dim, rows))
    mask = op.atten_mask
    mask_elements = numel(mask) if mask is not None else 0
    mask_bytes = element_bytes(mask) if mask is not None else 0
    pre: list[tuple[str, str]] = [("VMULS", BINARY)]
    if op.props.float("softcap") > 0:
        pre += [("VMULS", BINARY), *((i, t) for i, t, _ in RECIPES[ag.TanhOp]), ("VMULS", BINARY)]
    if mask is not None:
        pre.append(("VADD", BINARY) if ag.is_float(ag.dtype_of(mask.type)) else ("VSEL", BINARY))
    pre += [("VSEL", BINARY)] * (op.props.has("next_tokens") + (op.actual_seq_lengths_kv is not None))
    mask_shape = ag.shape_of(mask.type) if mask is not None else (0,)
    flash_spec = Flash(
        b * heads, sq, sk, d, dv, din, dout, query, key, value, op.results[0], pre, mask, mask_shape[-1],
        len(mask_shape) > 1 and mask_shape[-2] > 1, mask_bytes, op.qk_out,
        tuple(v for v in (query, key, value) if ag.format_of(v.type) is None),
    )
    flash = flash_tiling(profile, flash_spec, block_dim)
    if flash is not None:
        chosen = flash

        def flash_program(gm: dict[SSAValue, SSAValue], ws: SSAValue | None) -> Ops:
            prog = Program(profile)
            ops = flash_phase(prog, gm, flash_spec, chosen)
            return [*prog.allocs, ScalarOp(SETUP_INSTRS), *ops]

        return Plan(block_dim, "AiCore", {"heads": heads, **flash.params()}, 0, flash_program)
    epilogues = [epilogue(name, g.out_bytes) for name, g in zip(names, gemms)]
    tilings = [tile_gemm(profile, g, block_dim, lambda m, n, e=ep: e.ub_bytes(profile, m, n), False, exact=True) for g, ep in zip(gemms, epilogues)]
    tile_rows = softmax_tile_rows(profile, op, sk, din, block_rows, mask_elements, mask_bytes)
    spec = Softmax(sk, din, block_rows, tile_rows, mask, mask_elements, pre, mask_bytes, op.qk_out)
    in_b = max(1, formats.element_bits(din) // 8)
    tiling: dict[str, int] = {"heads": heads, "softmax_rows": rows, "softmax_row": sk, "softmax_tile_rows": tile_rows}
    for prefix, g, t in zip(("score_", "context_"), gemms, tilings):
        tiling.update(t.params(g, prefix))

    def program(gm: dict[SSAValue, SSAValue], ws: SSAValue | None) -> Ops:
        assert ws is not None
        where: dict[Hashable, SSAValue] = {**gm, "s": ws, "p": ws}
        operands = [(gm[query], gm[key]), (ws, gm[value])]

        def phase(make: Callable[[Program], Ops]) -> LoopOp:
            prog = Program(profile)
            ops = make(prog)
            return LoopOp(1, [*prog.allocs, *ops])

        def matmul(i: int) -> LoopOp:
            return phase(lambda prog: cube_program(prog, gemms[i], tilings[i], epilogues[i], where, *operands[i], None))

        return [
            ScalarOp(SETUP_INSTRS), matmul(0), SyncAllOp(), phase(lambda prog: softmax_phase(prog, where, spec)), SyncAllOp(),
            matmul(1),
        ]

    return Plan(block_dim, "AiCore", tiling, 2 * rows * sk * in_b, program)
