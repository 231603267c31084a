"""MultiHeadAttention and FusedInferAttentionScore: one kernel of phases (matmuls and
a softmax) joined by `sync_all`, with the intermediates in the workspace."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from xdsl.ir import Attribute, SSAValue

from dialects import ascend_graph as ag
from dialects import formats
from dialects.ascend_kernel import (
    BIAS_TABLE_BYTES,
    LoopOp,
    ScalarOp,
    SetFlagOp,
    SyncAllOp,
    WaitFlagOp,
)
from ge.core.errors import ModelError
from ge.core.soc import SocProfile
from passes.lowering.cube import (
    TIE,
    CubeTiling,
    Epilogue,
    EpiValue,
    Gemm,
    cube_k,
    cube_program,
    gemm_cost,
    shared_a_events,
    shared_a_program,
    tile_gemm,
    tile_shared_a,
)
from passes.lowering.flash import (
    Flash,
    FlashTiling,
    flash_phase,
    flash_tiling,
    flash_workspace,
)
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
from passes.lowering.recipes import BINARY, RECIPES, dtype_name, softmax_steps

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


def softmax_ub(profile: SocProfile, row: int, dtype: Attribute, tile_rows: int, mask_elements: int, mask_bytes: int = 0) -> int:
    """UB bytes of the softmax's buffers for tiles of `tile_rows` rows of scores:
    scores and probabilities twice each, the row statistics, and the mask's share
    (as in `Softmax`)."""
    in_b = max(1, formats.element_bits(dtype) // 8)
    row_bytes = aligned(profile, "UB", tile_rows * row * in_b)
    stats = aligned(profile, "UB", tile_rows * ACC_BYTES) * 2
    masked = aligned(profile, "UB", min(mask_elements, tile_rows * row) * (mask_bytes or in_b)) if mask_elements else 0
    return 4 * row_bytes + stats + masked


def softmax_tile_rows(profile: SocProfile, op: ag.AscendOp, row: int, dtype: Attribute, block_rows: int,
                      mask_elements: int, mask_bytes: int = 0) -> int:
    """The most rows of scores whose buffers fit the UB (`softmax_ub`)."""
    if softmax_ub(profile, row, dtype, 1, mask_elements, mask_bytes) > profile.ub_bytes:
        raise ModelError(f"{op.OP_TYPE} '{op.label}': a row of {row} scores does not fit {profile.name}'s UB")
    return max(r for r in range(1, block_rows + 1) if softmax_ub(profile, row, dtype, r, mask_elements, mask_bytes) <= profile.ub_bytes)


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
        for step in softmax_steps(d, r, sk, in_b, (p_ub[slot], s_ub[slot], stats[0])):
            ops += vec(step.instr, step.dtypes, step.elements, list(step.values), step.element_bytes)
        ops += [SetFlagOp("V", "MTE2", slot), *sync("V", "MTE3", slot), copy(profile, p_ub[slot], gm["p"], r * sk * in_b)]
        if spec.scores is not None:
            ops.append(copy(profile, s_ub[slot], gm[spec.scores], r * sk * in_b))
        return body(ops + [SetFlagOp("MTE3", "V", slot)])

    return double_buffered(*split(spec.block_rows, tile_rows), make, [("V", "MTE2", 0), ("MTE3", "V", 0)])


# ------------------------------------------------------------ the phases' tiling

_forced: ContextVar[bool | None] = ContextVar("qkv_shared_forced", default=None)


@contextmanager
def forced_projections(shared: bool) -> Iterator[None]:
    """Plan self-attention's projections as one phase (where its tiles fit) or as three,
    whatever `Phases.projections`' estimate says: to measure what sharing gains and how
    close the estimate comes (`benchmarks/qkv_shared.py`)."""
    token = _forced.set(shared)
    try:
        yield
    finally:
        _forced.reset(token)


_projections_only: ContextVar[bool] = ContextVar("attention_projections_only", default=False)


@contextmanager
def projections_only() -> Iterator[None]:
    """Build a MultiHeadAttention in one flash phase as its projections alone (its
    program ends at their `sync_all`): a tuner timing projection tilings, which leave
    the flash phase as it is, times that phase once (`ge.aoe.measure`)."""
    token = _projections_only.set(True)
    try:
        yield
    finally:
        _projections_only.reset(token)


MHA_PHASES = ("q_", "k_", "v_", "score_", "context_")
FIA_PHASES = ("score_", "context_")
"""The prefixes of the matmul phases' tiling parameters, in program order."""


@dataclass(frozen=True)
class Phases:
    """What an attention kernel's plan fixes before it tiles: its blocks, its matmul
    phases (a Gemm and its epilogue each, named by the prefix of its tiling
    parameters) and its softmax's rows (`rows` in all, of `row` scores). Their
    tiling, the matmuls' `CubeTiling`s and the softmax's tile rows, is the analytic
    one (`analytic`) or a tuned one (`passes.lowering.space.AttentionSpace`)."""

    profile: SocProfile
    op: ag.AscendOp
    heads: int
    block_dim: int
    prefixes: tuple[str, ...]
    gemms: tuple[Gemm, ...]
    epilogues: tuple[Epilogue, ...]
    row: int
    dtype: Attribute
    rows: int
    mask_elements: int
    mask_bytes: int = 0
    shared_input: bool = False
    """The first three matmuls multiply one input (the Q, K and V projections of
    self-attention, of one shape): `shared_a_program` may run them as one."""

    @property
    def block_rows(self) -> int:
        """The softmax rows of a block."""
        return -(-self.rows // min(self.block_dim, self.rows))

    def epilogue_ub(self, i: int) -> Callable[[int, int], int]:
        """The UB matmul `i`'s epilogue needs for an m x n tile."""
        return lambda m, n: self.epilogues[i].ub_bytes(self.profile, m, n)

    def bias_table(self, i: int) -> bool:
        return self.epilogues[i].bias is not None and self.profile.fix_pipe

    def softmax_fits(self, tile_rows: int) -> bool:
        """True when tiles of `tile_rows` rows fit the UB and a block's rows."""
        ub = softmax_ub(self.profile, self.row, self.dtype, tile_rows, self.mask_elements, self.mask_bytes)
        return 1 <= tile_rows <= self.block_rows and ub <= self.profile.ub_bytes

    def tiling(self, i: int) -> CubeTiling:
        """Matmul `i`'s analytic tiling (`tile_gemm`, exactly `block_dim` blocks)."""
        return tile_gemm(self.profile, self.gemms[i], self.block_dim, self.epilogue_ub(i), self.bias_table(i), exact=True)

    def shared_fits(self, m0: int, n0: int, one_m_tile: bool) -> bool:
        """True when `shared_a_program` can run the projections with m0 x n0 tiles: the
        event ids it needs, epilogues loading per-column operands only, each bias
        table half an n0 tile of float32 bias, and in L1 (beside the bias table) two A
        tiles of the whole K (one where a block has `one_m_tile`), the three B tiles
        and their biases, in UB the three epilogues."""
        p, g = self.profile, self.gemms[0]
        biased = any(self.bias_table(i) for i in range(3))
        if not self.shared_input or p.event_ids < shared_a_events(biased) or (biased and 2 * n0 * ACC_BYTES > BIAS_TABLE_BYTES):
            return False
        if any(len(e.columns) != len(e.loads) for e in self.epilogues[:3]):
            return False
        kc = cube_k(p, g.in_dtype)
        b = aligned(p, "L1", -(-g.k // kc) * kc * n0 * g.in_bytes) + (aligned(p, "L1", n0 * g.in_bytes) if biased else 0)
        l1 = (1 if one_m_tile else 2) * aligned(p, "L1", g.a_l1_bytes(m0, g.k, kc)) + 3 * b
        ub = sum(e.ub_bytes(p, m0, n0) for e in self.epilogues[:3])
        return l1 <= p.l1_bytes - (BIAS_TABLE_BYTES if biased else 0) and ub <= p.ub_bytes

    def projections(self) -> tuple[tuple[CubeTiling, ...], bool]:
        """The projections' analytic tilings and whether they share one phase: for
        self-attention, the shared phase's tiling of least cost (`cube.tile_shared_a`)
        where that is at most the three phases' `tile_gemm` costs summed (the second
        and third finding the input in L2 where it fits, as the first left it), or
        within `TIE` of it: a bound both hit alike (a block's stores) hides what one
        phase saves (two first loads, two reads of the input); else those three."""
        separate = tuple(self.tiling(i) for i in range(3))
        forced = _forced.get()
        if not self.shared_input or forced is False:
            return separate, False
        shared = tile_shared_a(self.profile, self.gemms[0], 3, self.block_dim, self.shared_fits)
        if shared is None:
            return separate, False
        if forced or shared[1] <= self.separate_cost(separate) * TIE:
            return (shared[0],) * 3, True
        return separate, False

    def separate_cost(self, tilings: Sequence[CubeTiling]) -> float:
        """The estimate (cycles) `projections` weighs the three projection phases by."""
        return sum(gemm_cost(self.profile, self.gemms[i], t, self.epilogue_ub(i), self.bias_table(i), i > 0) for i, t in enumerate(tilings))

    def analytic(self) -> Chosen:
        """The matmuls' tilings of `tile_gemm` (one per phase, exactly `block_dim` blocks;
        the projections shared where `projections` says), the most softmax rows that fit."""
        projections, shared = self.projections() if self.prefixes == MHA_PHASES else ((), False)
        tilings = projections + tuple(self.tiling(i) for i in range(len(projections), len(self.gemms)))
        tile_rows = softmax_tile_rows(self.profile, self.op, self.row, self.dtype, self.block_rows, self.mask_elements, self.mask_bytes)
        return tilings, tile_rows, shared

    def params(self, chosen: Chosen) -> dict[str, int]:
        """The kernel's `tiling` attribute."""
        tilings, tile_rows, shared = chosen
        tiling: dict[str, int] = {"heads": self.heads, "softmax_rows": self.rows, "softmax_row": self.row, "softmax_tile_rows": tile_rows}
        for prefix, g, t in zip(self.prefixes, self.gemms, tilings):
            tiling.update(t.params(g, prefix))
        if shared:
            tiling["qkv_shared"] = 1
        return tiling


Chosen = tuple[tuple[CubeTiling, ...], int, bool]
"""An attention kernel's tiling: a CubeTiling per matmul phase, the softmax's tile
rows, and whether the projections run as one phase on their shared input (with the
first phase's tiling)."""


def _phase(profile: SocProfile) -> Callable[[Callable[[Program], Ops]], LoopOp]:
    def phase(make: Callable[[Program], Ops]) -> LoopOp:
        """A phase holds its own buffers: a loop of one trip, so they end with it."""
        prog = Program(profile)
        ops = make(prog)
        return LoopOp(1, [*prog.allocs, *ops])

    return phase


# -------------------------------------------------------- multi-head attention


def attention_phases(profile: SocProfile, op: ag.MultiHeadAttentionOp, cores: int) -> Phases:
    """MultiHeadAttention's phases: the Q/K/V projections (bias added as by a matmul),
    the scores of every head, their softmax, and the probabilities times V."""
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
    gemms = (
        Gemm(1, b * sq, kq, e, din, din, a_nd=nd, b_nd=ag.format_of(op.operands[3].type) is None),
        Gemm(1, b * sk, kk, e, din, din, a_nd=nd, b_nd=ag.format_of(op.operands[4].type) is None),
        Gemm(1, b * sk, kv, ev, din, din, a_nd=nd, b_nd=ag.format_of(op.operands[5].type) is None),
        Gemm(b * heads, sq, e // heads, sk, din, din),
        Gemm(b * heads, sq, sk, ev // heads, din, dout, out_nd=ag.format_of(op.results[0].type) is None and profile.fix_pipe),
    )
    names = ["q", "k", "v", "s", op.results[0]]
    units = max(max(g.batch * -(-g.m // FRACTAL) * -(-g.n // FRACTAL) for g in gemms), b * heads * sq)

    def epilogue(stored: Hashable, bias: SSAValue | None, out_b: int) -> Epilogue:
        if profile.fix_pipe:
            return Epilogue("fix", stored, (), [], [], [stored], bias)
        values = [EpiValue(stored, "tile", out_b, True)]
        if bias is not None:
            values.append(EpiValue(bias, "col", element_bytes(bias), True))
        return Epilogue("vector", stored, (), values, [bias] if bias is not None else [], [stored], bias)

    epilogues = tuple(epilogue(name, bias, g.out_bytes) for name, bias, g in zip(names, [*biases, None, None], gemms))
    return Phases(
        profile, op, heads, min(cores, units), MHA_PHASES, gemms, epilogues, sk, din, b * heads * sq,
        numel(mask) if mask is not None else 0, shared_input=query is key is value and gemms[0] == gemms[1] == gemms[2],
    )


def attention_flash(profile: SocProfile, op: ag.MultiHeadAttentionOp, ph: Phases) -> tuple[Flash, FlashTiling | None]:
    """MultiHeadAttention's scores, softmax and context (its phases' last two matmuls
    and softmax) as one flash phase (`flash`), and its tiling: None where a row of
    scores does not fit the core (or the part has a FIX pipe and its cores together)."""
    scores, context = ph.gemms[3], ph.gemms[4]
    mask = op.operands[-1] if len(op.operands) in (7, 10) else None
    pre = _scaling(op) + ([("VADD", BINARY)] if mask is not None else [])
    mask_shape = ag.shape_of(mask.type) if mask is not None else (0,)
    spec = Flash(
        scores.batch, scores.m, scores.n, scores.k, context.n, ph.dtype, context.out_dtype, "q", "k", "v", op.results[0], pre,
        mask, mask_shape[-1], len(mask_shape) > 1 and mask_shape[-2] > 1, element_bytes(mask) if mask is not None else 0,
        out_nd=context.out_nd,
    )
    return spec, flash_tiling(profile, spec, ph.block_dim)


def attention_plan(
    profile: SocProfile, op: ag.MultiHeadAttentionOp, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue], cores: int,
    chosen: Chosen | None = None,
) -> Plan:
    """MultiHeadAttention as four phases of one kernel, joined by `sync_all`: the
    Q/K/V projections (bias added as by a matmul), the scores of every head, their
    softmax (times `scale`, plus the mask), and the probabilities times V. q, k, v
    and the scores and probabilities live in the workspace (in the input dtype).
    Where a row of scores fits the core, the last three are one flash phase (`flash`:
    on one core the scores never leave it; where the cores are apart they meet
    through workspace slots without barriers), whose tiling follows from the shape:
    a tuned tiling then sets the projections' alone (`passes.lowering.space.AttentionSpace.flash`).
    `chosen`: a tuned tiling, else the analytic one."""
    ph = attention_phases(profile, op, cores)
    spec, flash = attention_flash(profile, op, ph)
    query, key, value = op.operands[:3]
    shape = ag.shape_of(query.type)
    b, sq = (shape[0], shape[1]) if op.props.str("input_layout") == "BSH" else (shape[1], shape[0])
    sk, e, ev = ph.row, ag.shape_of(op.operands[3].type)[1], ag.shape_of(op.operands[5].type)[1]
    mask = op.operands[-1] if len(op.operands) in (7, 10) else None
    in_b = max(1, formats.element_bits(ph.dtype) // 8)
    if chosen is None and flash is not None:  # only the projections are matmul phases
        projections, shared = ph.projections()
        chosen = projections, 0, shared
    tilings, tile_rows, shared = chosen or ph.analytic()
    workspace = (b * sq * e + b * sk * (e + ev) + (0 if flash is not None else 2 * ph.rows * sk)) * in_b
    if flash is not None:
        workspace += flash_workspace(profile, spec, flash, ph.block_dim)

    def softmax(prog: Program, gm: dict[Hashable, SSAValue]) -> Ops:
        return softmax_phase(prog, gm, Softmax(sk, ph.dtype, ph.block_rows, tile_rows, mask, ph.mask_elements, spec.pre))

    def program(gm: dict[SSAValue, SSAValue], ws: SSAValue | None) -> Ops:
        assert ws is not None
        where: dict[Hashable, SSAValue] = {**gm, "q": ws, "k": ws, "v": ws, "s": ws, "p": ws}
        operands = [(gm[query], gm[op.operands[3]]), (gm[key], gm[op.operands[4]]), (gm[value], gm[op.operands[5]]), (ws, ws), (ws, ws)]
        phase = _phase(profile)

        def matmul(i: int) -> LoopOp:
            return phase(lambda prog: cube_program(prog, ph.gemms[i], tilings[i], ph.epilogues[i], where, *operands[i], None))

        if shared:
            weights = [gm[w] for w in op.operands[3:6]]
            projections = [phase(lambda prog: shared_a_program(prog, ph.gemms[0], tilings[0], ph.epilogues[:3], where, gm[query], weights))]
        else:
            projections = [matmul(0), matmul(1), matmul(2)]
        if flash is not None:
            last = [] if _projections_only.get() else [phase(lambda prog: flash_phase(prog, where, spec, flash, ws))]
            return [ScalarOp(SETUP_INSTRS), *projections, SyncAllOp(), *last]
        return [
            ScalarOp(SETUP_INSTRS), *projections, SyncAllOp(), matmul(3), SyncAllOp(),
            phase(lambda prog: softmax(prog, where)), SyncAllOp(), matmul(4),
        ]

    params = ph.params((tilings, tile_rows, shared))
    if flash is not None:  # the projections' tilings (shared or not), then the flash phase's
        params = {k: v for k, v in params.items() if k.startswith((*MHA_PHASES[:3], "qkv_shared"))} | {"heads": ph.heads, **flash.params()}
    return Plan(ph.block_dim, "AiCore", params, workspace, program)


# ---------------------------------------------------------- fused infer attention score


def fused_attention_phases(profile: SocProfile, op: ag.FusedInferAttentionScoreOp, cores: int) -> Phases:
    """FusedInferAttentionScore's phases: the scores of every query head, their softmax, and the probabilities times V."""
    query, key, value = op.query, op.key, op.value
    b, heads, sq, d = ag.shape_of(query.type)
    sk, dv = ag.shape_of(key.type)[2], ag.shape_of(value.type)[3]
    din, dout = ag.dtype_of(query.type), ag.dtype_of(op.results[0].type)
    gemms = (
        Gemm(b * heads, sq, d, sk, din, din, a_nd=ag.format_of(query.type) is None, b_nd=ag.format_of(key.type) is None),
        Gemm(
            b * heads, sq, sk, dv, din, dout, b_nd=ag.format_of(value.type) is None,
            out_nd=ag.format_of(op.results[0].type) is None and profile.fix_pipe,
        ),
    )
    names: list[Hashable] = ["s", op.results[0]]
    units = max(max(g.batch * -(-g.m // FRACTAL) * -(-g.n // FRACTAL) for g in gemms), b * heads * sq)

    def epilogue(stored: Hashable, out_b: int) -> Epilogue:
        if profile.fix_pipe:
            return Epilogue("fix", stored, (), [], [], [stored], None)
        return Epilogue("vector", stored, (), [EpiValue(stored, "tile", out_b, True)], [], [stored], None)

    mask = op.atten_mask
    return Phases(
        profile, op, heads, min(cores, units), FIA_PHASES, gemms, tuple(epilogue(n, g.out_bytes) for n, g in zip(names, gemms)),
        sk, din, b * heads * sq, numel(mask) if mask is not None else 0, element_bytes(mask) if mask is not None else 0,
    )


def fused_attention_flash(profile: SocProfile, op: ag.FusedInferAttentionScoreOp, block_dim: int) -> tuple[Flash, FlashTiling | None]:
    """FusedInferAttentionScore as one flash phase (`flash`), and its tiling: None where
    a row of scores does not fit the core (`flash.flash_tiling`)."""
    query, key, value, mask = op.query, op.key, op.value, op.atten_mask
    b, heads, sq, d = ag.shape_of(query.type)
    sk, dv = ag.shape_of(key.type)[2], ag.shape_of(value.type)[3]
    mask_shape = ag.shape_of(mask.type) if mask is not None else (0,)
    spec = Flash(
        b * heads, sq, sk, d, dv, ag.dtype_of(query.type), ag.dtype_of(op.results[0].type), query, key, value, op.results[0],
        _fused_pre(op), mask, mask_shape[-1], len(mask_shape) > 1 and mask_shape[-2] > 1,
        element_bytes(mask) if mask is not None else 0, op.qk_out, tuple(v for v in (query, key, value) if ag.format_of(v.type) is None),
        ag.format_of(op.results[0].type) is None and profile.fix_pipe,
    )
    return spec, flash_tiling(profile, spec, block_dim)


def _scaling(op: ag.MultiHeadAttentionOp | ag.FusedInferAttentionScoreOp) -> list[tuple[str, str]]:
    """The scores' scaling, none where the scale is 1 (as where the fusion folded it into
    the query projection's weights)."""
    return [("VMULS", BINARY)] if op.props.float("scale") != 1.0 else []


def _fused_pre(op: ag.FusedInferAttentionScoreOp) -> list[tuple[str, str]]:
    """The vector steps on FusedInferAttentionScore's scores before the softmax: the
    scale, the softcap, the mask, the causal band and the key lengths."""
    mask = op.atten_mask
    pre = _scaling(op)
    if op.props.float("softcap") > 0:
        pre += [("VMULS", BINARY), *((i, t) for i, t, _ in RECIPES[ag.TanhOp]), ("VMULS", BINARY)]
    if mask is not None:
        pre.append(("VADD", BINARY) if ag.is_float(ag.dtype_of(mask.type)) else ("VSEL", BINARY))
    return pre + [("VSEL", BINARY)] * (op.props.has("next_tokens") + (op.actual_seq_lengths_kv is not None))


def fused_attention_plan(
    profile: SocProfile, op: ag.FusedInferAttentionScoreOp, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue],
    cores: int, chosen: Chosen | None = None,
) -> Plan:
    """FusedInferAttentionScore as three phases of one kernel, joined by `sync_all`:
    the scores of every query head (a grouped key/value head is read once per query
    head it serves), their softmax (scale, softcap, mask, causal band and key lengths
    first; a requested scores output is one more store per tile), and the
    probabilities times V. Scores and probabilities live in the workspace. Where a
    row of scores fits the core (and, where the cores are apart, the scores are no
    result), the three are one flash phase (`flash`; on one core with no workspace),
    and the kernel takes no tuned tiling (`passes.lowering.space.attention_space`).
    `chosen`: a tuned tiling, else the analytic one."""
    ph = fused_attention_phases(profile, op, cores)
    flash_spec, flash = fused_attention_flash(profile, op, ph.block_dim)
    if flash is not None:
        chosen_flash = flash

        def flash_program(gm: dict[SSAValue, SSAValue], ws: SSAValue | None) -> Ops:
            prog = Program(profile)
            ops = flash_phase(prog, gm, flash_spec, chosen_flash, ws)
            return [*prog.allocs, ScalarOp(SETUP_INSTRS), *ops]

        workspace = flash_workspace(profile, flash_spec, flash, ph.block_dim)
        return Plan(ph.block_dim, "AiCore", {"heads": ph.heads, **flash.params()}, workspace, flash_program)
    query, key, value = op.query, op.key, op.value
    mask = op.atten_mask
    pre = _fused_pre(op)
    tilings, tile_rows, _ = chosen or ph.analytic()
    spec = Softmax(ph.row, ph.dtype, ph.block_rows, tile_rows, mask, ph.mask_elements, pre, ph.mask_bytes, op.qk_out)
    in_b = max(1, formats.element_bits(ph.dtype) // 8)

    def program(gm: dict[SSAValue, SSAValue], ws: SSAValue | None) -> Ops:
        assert ws is not None
        where: dict[Hashable, SSAValue] = {**gm, "s": ws, "p": ws}
        operands = [(gm[query], gm[key]), (ws, gm[value])]
        phase = _phase(profile)

        def matmul(i: int) -> LoopOp:
            return phase(lambda prog: cube_program(prog, ph.gemms[i], tilings[i], ph.epilogues[i], where, *operands[i], None))

        return [
            ScalarOp(SETUP_INSTRS), matmul(0), SyncAllOp(), phase(lambda prog: softmax_phase(prog, where, spec)), SyncAllOp(),
            matmul(1),
        ]

    return Plan(ph.block_dim, "AiCore", ph.params((tilings, tile_rows, False)), 2 * ph.rows * ph.row * in_b, program)
