"""Recurrent layers (DynamicRNN, DynamicGRUV2, RNN): one kernel whose program is the time loop.

Blocks split the hidden units (16 at a time, each with its columns of every gate),
so a block computes its share of every step's gates and of h_t, and the next step
needs every block's h_t: each step ends in `sync_all`. The program:

1. prologue: the initial state (init_h, init_c, or zeros) into UB, h copied to the
   workspace, where every step's product reads h_{t-1}; the peepholes and the
   hidden bias into UB, once;
2. the input projection x @ W (+ the input bias) of all T steps at once, a cube
   matmul [T * B, I] x [I, G * hb] into the workspace (it does not depend on h);
3. T steps, each: the cube product h_{t-1} @ R [B, H] x [H, G * hb] into the
   workspace; then per tile of batch entries (as many as fit the UB beside the
   states): MTE2 reads the tile's products and its rows of x @ W into UB, the
   vector unit adds them and runs the gate activations (each a recipe of
   `passes.lowering.recipes`, in float32 for 16-bit dtypes), MTE3 writes h_t to y
   and to the workspace; `sync_all`. A GRU without reset_after makes two products
   per step: h_{t-1} @ [Rz, Rr], then (r h_{t-1}) @ Rh once every block has
   written its r h. R's block stays in L1 through the steps when it fits beside
   h_{t-1} (loaded once before the loop, each step then loads only h_{t-1} and
   runs its L0 tiles without double buffering); otherwise every step's product is
   a cube phase that loads R again, which makes large layers memory-bound.
4. epilogue: output_h (and output_c) from UB.

So the steps cost T times one step, which the profile shows. The operands stay ND
(format selection leaves recurrent ops in their origin format): on parts with a
FIX pipe MTE2 converts them to NZ on the way into L1, as for a matmul; elsewhere
they are priced as the fractal layout GE's kernels read there.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from xdsl.ir import SSAValue

from dialects import ascend_graph as ag
from dialects.ascend_kernel import LoopOp, MmadOp, ScalarOp, SyncAllOp
from ge.core.errors import ModelError
from ge.core.soc import SocProfile
from passes.lowering.cube import Epilogue, EpiValue, Gemm, cube_program, tile_gemm
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
    element_bytes,
    sequence,
    split,
    sync,
    vec,
)
from passes.lowering.recipes import BINARY, RECIPES, UNARY, dtype_name

_ACTIVATIONS: dict[str, list[tuple[str, str]]] = {
    "Relu": [(i, t) for i, t, _ in RECIPES[ag.ReluOp]],
    "Tanh": [(i, t) for i, t, _ in RECIPES[ag.TanhOp]],
    "Sigmoid": [(i, t) for i, t, _ in RECIPES[ag.SigmoidOp]],
    "Softsign": [(i, t) for i, t, _ in RECIPES[ag.SoftsignOp]],
    "Softplus": [(i, t) for i, t, _ in RECIPES[ag.SoftplusOp]],
    "Affine": [("VMULS", BINARY), ("VADDS", BINARY)],
    "LeakyRelu": [(i, t) for i, t, _ in RECIPES[ag.LeakyReluOp]],
    "ThresholdedRelu": [("VCMPVS", BINARY), ("VSEL", BINARY)],
    "ScaledTanh": [("VMULS", BINARY), *((i, t) for i, t, _ in RECIPES[ag.TanhOp]), ("VMULS", BINARY)],
    "HardSigmoid": [(i, t) for i, t, _ in RECIPES[ag.HardSigmoidOp]],
    "Elu": [(i, t) for i, t, _ in RECIPES[ag.EluOp]],
}
"""The vector instructions of each gate activation (the op's recipe where it has one)."""


def _align(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _hidden(op: ag.RecurrentOp) -> int:
    return ag.shape_of(op.results[1].type)[2]


def recurrent_plan(
    profile: SocProfile, ops: Sequence[ag.AscendOp], inputs: Sequence[SSAValue], outputs: Sequence[SSAValue], cores: int
) -> Plan:
    """The plan of a recurrent op's kernel (see the module docstring)."""
    op = ops[0]
    assert isinstance(op, ag.RecurrentOp)
    if len(ops) > 1:
        raise ModelError(f"{op.OP_TYPE} '{op.label}': a recurrent kernel holds its op alone, not {len(ops)} ops")
    x = op.operands[0]
    steps, batch, _ = ag.shape_of(x.type)
    hidden, gates = _hidden(op), op.GATES
    din = ag.dtype_of(x.type)
    in_b = element_bytes(x)
    out_b = element_bytes(op.results[0])  # the inputs' dtype, or float32 (the cube's float16 in, float32 out)
    wide = max(in_b, 4)  # the vector unit computes 16-bit dtypes in float32
    units = -(-hidden // FRACTAL)
    block_dim = min(cores, units)
    hb = min(hidden, -(-units // block_dim) * FRACTAL)  # a block's hidden units
    fix = profile.fix_pipe
    two_products = isinstance(op, ag.DynamicGRUV2Op) and not op.props.bool("reset_after")
    w_in = op.operands[1]
    w_hidden = op.operands[2] if isinstance(op, ag.DynamicGRUV2Op) else w_in
    bias_in = op.bias_input if isinstance(op, ag.DynamicGRUV2Op) else op.b
    inputs_k = ag.shape_of(x.type)[2]

    def gemm(m: int, k: int, n: int) -> Gemm:
        return Gemm(1, m, k, n, din, din, a_nd=fix, b_nd=fix, out_nd=fix)

    gemms = {"xw": gemm(steps * batch, inputs_k, gates * hb), "hr": gemm(batch, hidden, (2 if two_products else gates) * hb)}
    if two_products:
        gemms["hn"] = gemm(batch, hidden, hb)

    def epilogue(stored: Hashable, bias: SSAValue | None) -> Epilogue:
        if fix:
            return Epilogue("fix", stored, (), [], [], [stored], bias)
        values = [EpiValue(stored, "tile", in_b, True)]
        if bias is not None:
            values.append(EpiValue(bias, "col", element_bytes(bias), True))
        return Epilogue("vector", stored, (), values, [bias] if bias is not None else [], [stored], bias)

    epilogues = {name: epilogue(name, bias_in if name == "xw" else None) for name in gemms}
    state = batch * hb
    params = [v for v in (getattr(op, k, None) for k in ("wci", "wcf", "wco", "bias_hidden")) if v is not None]
    kept: dict[str, int] = {
        "h": state * wide, "c": state * wide if isinstance(op, ag.DynamicRNNOp) else 0,
        **{f"param{i}": gates * hb * wide for i in range(len(params))},
    }

    def chunk(rows: int) -> dict[str, int]:
        """The UB a tile of `rows` batch entries needs."""
        per = rows * gates * hb * wide
        return {"xw": per, "hr": per, "gates": per, "out": rows * hb * max(in_b, out_b)}

    def ub_of(rows: int) -> int:
        return sum(aligned(profile, "UB", n) for n in (*kept.values(), *chunk(rows).values()) if n)

    room = profile.ub_bytes if fix else profile.ub_bytes // 2  # half for the cube's epilogue where V drains L0C
    if ub_of(1) > room:
        raise ModelError(
            f"{op.OP_TYPE} '{op.label}': the states of {batch} x {hb} hidden units and one row of gates need "
            f"{ub_of(1)} bytes of UB, more than {profile.name}'s {room} for them"
        )
    rows = max(r for r in range(1, batch + 1) if ub_of(r) <= room)
    vector_ub = ub_of(rows)
    tilings = {
        name: tile_gemm(profile, g, 1, lambda m, n, e=epilogues[name]: vector_ub + e.ub_bytes(profile, m, n), epilogues[name].bias is not None and fix)
        for name, g in gemms.items()
    }
    workspace = (steps * batch * gates * hidden + batch * gates * hidden + 2 * batch * hidden) * in_b
    tiling = {
        "steps": steps, "batch": batch, "hidden": hidden, "gates": gates, "block_hidden": hb, "tile_rows": rows, "vector_ub": vector_ub,
    }
    for name, g in gemms.items():
        tiling.update(tilings[name].params(g, f"{name}_"))
    compute = "FP32" if in_b <= 4 else dtype_name(din)
    d = dtype_name(din)
    cols = (2 if two_products else gates) * hb
    products = [name for name in gemms if name != "xw"]
    kc = tilings["hr"].kc
    r_bytes = _align(hidden, kc) * _align(gates * hb, FRACTAL) * in_b
    a_bytes = max(gemms[n].a_l1_bytes(_align(gemms[n].m, FRACTAL), gemms[n].k, kc) for n in products)
    resident = aligned(profile, "L1", r_bytes) + aligned(profile, "L1", a_bytes) <= profile.l1_bytes
    tiling["r_resident"] = int(resident)
    mode = "nd2nz" if fix else "normal"

    def program(gm: dict[SSAValue, SSAValue], ws: SSAValue | None) -> Ops:
        assert ws is not None
        where: dict[Hashable, SSAValue] = {**gm, "xw": ws, "hr": ws, "hn": ws}
        prog = Program(profile)
        ub = {key: prog.alloc("UB", n) for key, n in (*kept.items(), *chunk(rows).items()) if n}
        drain = "FIX" if fix else "MTE3"

        def matmul(name: str, a: SSAValue, b: SSAValue) -> Ops:
            """A cube phase with its own L1/L0 buffers, its UB after the steps' buffers."""
            inner = Program(profile)
            inner.top = dict(prog.top)
            ops_ = cube_program(inner, gemms[name], tilings[name], epilogues[name], where, a, b, None)
            return [LoopOp(1, [*inner.allocs, *ops_]), *sync(drain, "MTE2", 3)]

        def vector(instrs: Sequence[tuple[str, str, int]]) -> Ops:
            out: Ops = []
            for instr, template, elements in instrs:
                out += vec(instr, template.format(d=compute), elements, [ub["gates"], ub["h"]], wide)
            return out

        def activation(k: int, elements: int) -> list[tuple[str, str, int]]:
            """Activation k, after a clip of its input (every gate's; not LSTM's c_t before h)."""
            clipped = op.props.has("cell_clip") and not (isinstance(op, ag.DynamicRNNOp) and k == 2)
            clip = [("VMAXS", BINARY, elements), ("VMINS", BINARY, elements)] if clipped else []
            return clip + [(i, t, elements) for i, t in _ACTIVATIONS[op.activations.data[k].data]]

        def widen(elements: int) -> Ops:
            return vec("VCONV", f"{d}_FP32", elements, [ub["gates"]], 4) if compute == "FP32" and in_b < 4 else []

        def narrow(elements: int) -> Ops:
            return vec("VCONV", f"FP32_{d}", elements, [ub["out"], ub["h"]], 4) if compute == "FP32" and in_b < 4 else []

        def store(n: int, to_y: bool) -> Ops:
            """n values of h (or r h) to the workspace, and to y; the tile's buffers free after."""
            ops_ = [*narrow(n), *sync("V", "MTE3", 3), copy(profile, ub["out"], ws, n * in_b)]
            if to_y and op.results[0] in gm:
                ops_.append(copy(profile, ub["out"], gm[op.results[0]], n * out_b))
            return ops_ + sync("MTE3", "MTE2", 3)

        prologue: Ops = [ScalarOp(SETUP_INSTRS)]
        loads = [copy(profile, gm[v], ub["h" if v is op.init_h else "c"], state * in_b) for v in (op.init_h, getattr(op, "init_c", None)) if v is not None]
        loads += [copy(profile, gm[v], ub[f"param{i}"], ag.shape_of(v.type)[0] * in_b * hb // hidden) for i, v in enumerate(params)]
        prologue += loads + sync("MTE2", "V", 3) if loads else []
        prologue += vec("VECTORDUP", UNARY.format(d=compute), state, [ub["h"]], wide) if op.init_h is None else widen(state)
        prologue += [*narrow(state), *sync("V", "MTE3", 3), copy(profile, ub["h"], ws, state * in_b), SyncAllOp()]
        prologue += matmul("xw", gm[x], gm[w_in])

        res = Program(profile)  # the buffers of the time loop: R's block in L1, the step products' tiles
        res.top = dict(prog.top)
        load_r: Ops = []
        if resident:
            l1_r, l1_a = res.alloc("L1", r_bytes), res.alloc("L1", a_bytes)
            l0a = res.alloc("L0A", max(tilings[n].m0 * tilings[n].k0 * in_b for n in products))
            l0b = res.alloc("L0B", max(tilings[n].k0 * tilings[n].n0 * in_b for n in products))
            l0c = res.alloc("L0C", max(tilings[n].m0 * tilings[n].n0 * ACC_BYTES for n in products))
            staging = None if fix else res.alloc("UB", max(tilings[n].m0 * tilings[n].n0 * in_b for n in products))
            load_r += [copy(profile, gm[w_hidden], l1_r, gemms["hr"].b_gm_bytes(hidden, gates * hb, kc), mode), *sync("MTE2", "MTE1", 3)]

        def product(name: str) -> Ops:
            """The step's product of h_{t-1} (or r h_{t-1}) and R into the workspace: with R
            resident in L1, A in, then per L0 tile its K steps and its drain; else a
            cube phase loading R too."""
            if not resident:
                return matmul(name, ws, gm[w_hidden])
            g, t = gemms[name], tilings[name]

            def m_tile(n: int, m: int) -> Ops:
                def k_step(k: int) -> Ops:
                    ops_ = [copy(profile, l1_a, l0a, _align(m, FRACTAL) * k * in_b), copy(profile, l1_r, l0b, k * n * in_b)]
                    ops_ += [*sync("MTE1", "M", 3), MmadOp(l0a, l0b, l0c, _align(m, FRACTAL), _align(k, kc), n, din)]
                    return body(ops_ + sync("M", "MTE1", 3))

                ops_ = [*sequence(*split(g.k, t.k0), k_step), *sync("M", "FIX" if fix else "V", 3)]
                if fix:
                    return body(ops_ + [copy(profile, l0c, ws, m * n * in_b, "nz2nd"), *sync("FIX", "M", 3)])
                assert staging is not None
                ops_ += [copy(profile, l0c, staging, m * n * in_b), *sync("V", "MTE3", 3), copy(profile, staging, ws, m * n * in_b)]
                return body(ops_ + sync("MTE3", "M", 3))

            ops_ = [copy(profile, ws, l1_a, g.a_gm_bytes(g.m, g.k, kc), mode), *sync("MTE2", "MTE1", 3)]
            ops_ += sequence(*split(g.n, t.n0), lambda n: sequence(*split(g.m, t.m0), lambda m: m_tile(n, m)))
            return ops_ + sync(drain, "MTE2", 3)

        def gates_tile(r: int) -> Ops:
            """One tile of batch entries: the products in, the gates, h (or r h) out."""
            ops_ = [copy(profile, ws, ub["xw"], r * gates * hb * in_b), copy(profile, ws, ub["hr"], r * cols * in_b)]
            ops_ += [*sync("MTE2", "V", 3), *widen(r * gates * hb), *widen(r * cols)]
            ops_ += vector(_gates(op, r * hb, activation))
            return body(ops_ + store(r * hb, not two_products))

        def candidate_tile(r: int) -> Ops:
            """GRU without reset_after, after (r h_{t-1}) @ Rh: the hidden gate and h_t."""
            ops_ = [copy(profile, ws, ub["xw"], r * gates * hb * in_b), copy(profile, ws, ub["hr"], r * 2 * hb * in_b)]
            ops_ += [copy(profile, ws, ub["gates"], r * hb * in_b), *sync("MTE2", "V", 3), *widen(r * (gates + 3) * hb)]
            ops_ += vector([("VADD", BINARY, r * hb), *activation(1, r * hb), *_update(r * hb)])
            return body(ops_ + store(r * hb, True))

        def step() -> Ops:
            ops_: Ops = [*product("hr"), *sequence(*split(batch, rows), gates_tile)]
            if two_products:  # r h_{t-1} from every block, then its product with Rh
                ops_ += [SyncAllOp(), *product("hn"), *sequence(*split(batch, rows), candidate_tile)]
            return body([*ops_, SyncAllOp()])

        epilogue_: Ops = []
        finals = [(r, ub["h"] if r is op.results[1] else ub["c"]) for r in op.results[1:] if r in gm]
        if finals:
            epilogue_ += [*sync("V", "MTE3", 3), *(copy(profile, buf, gm[r], state * out_b) for r, buf in finals)]
        loop = LoopOp(steps, step())
        time_loop = [LoopOp(1, [*res.allocs, *load_r, loop])] if resident else [loop]
        return [*prog.allocs, *prologue, *time_loop, *epilogue_]

    return Plan(block_dim, "AiCore", tiling, workspace, program)


def _update(state: int) -> list[tuple[str, str, int]]:
    """h_t = (1 - z) n + z h_{t-1} = n + z (h_{t-1} - n)."""
    return [("VSUB", BINARY, state), ("VMUL", BINARY, state), ("VADD", BINARY, state)]


def _gates(op: ag.RecurrentOp, state: int, activation: Callable[[int, int], list[tuple[str, str, int]]]) -> list[tuple[str, str, int]]:
    """The vector instructions of one step's gates, from the summed products to h_t
    (for a GRU without reset_after: up to r h_{t-1}, the rest after the second product)."""
    if isinstance(op, ag.RNNOp):
        return [("VADD", BINARY, state), *activation(0, state)]
    if isinstance(op, ag.DynamicGRUV2Op):
        both = 2 * state
        out = [("VADD", BINARY, both)]
        if op.bias_hidden is not None:
            out.append(("VADD", BINARY, 3 * state))
        out += activation(0, both)
        if not op.props.bool("reset_after"):
            return out + [("VMUL", BINARY, state)]
        return out + [("VMUL", BINARY, state), ("VADD", BINARY, state), *activation(1, state), *_update(state)]
    assert isinstance(op, ag.DynamicRNNOp)
    peep = [("VMUL", BINARY, state), ("VADD", BINARY, state)] if op.wci is not None else []
    out = [("VADD", BINARY, 4 * state), *peep, *activation(0, state)]
    out += [("VMULS", BINARY, state), ("VADDS", BINARY, state)] if op.props.bool("input_forget") else [*peep, *activation(0, state)]
    out += [*activation(1, state), ("VMUL", BINARY, state), ("VMUL", BINARY, state), ("VADD", BINARY, state)]
    return out + [*peep, *activation(0, state), *activation(2, state), ("VMUL", BINARY, state)]
