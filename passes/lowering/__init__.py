"""Kernel lowering (the code generator `lower-to-kernel` runs): how a kernel's work splits over the cores and through a core's memories,
and the per-block pipe program that follows from it. One module per concern:
`program` (building a pipe program), `recipes` (vector instructions per op), `cube`,
`vector` and `attention` (the three kinds of kernel); `plan` here picks the kind.

Blocks. The work is cut into `block_dim` blocks that run the same program, each on
its share (the program is that of the largest share; shares differ by at most one
unit per split dimension). When the work has at least as many units as the kernel's
cores (AI cores, or vector cores for a vector kernel on a part with split cores),
block_dim is the core count where that gives no block more work than a smaller
split would: a cube kernel splits its batch, M and N fractals (16 rows each) in one
wave over the cores, the split and the tiles chosen together by the least time of
the largest block (its busiest pipe after its first loads and before its last
drain, or its share of the chip's traffic with every re-read counted, at L2's rate
where the chip's L2 holds the kernel's working set; see `cube.tile_gemm`), so that
a kernel whose weights outweigh its activations splits M and one whose activations
dominate splits N, on fewer blocks than cores where more would only duplicate
reads; a vector kernel
splits its rows evenly (a row is what a reduction or normalisation needs whole;
for elementwise work, 32 bytes).

Cube kernels (Conv2D, Conv2DTranspose, Conv3D, Conv3DTranspose, MatMulV2,
BatchMatMulV2, GEMM, FullyConnection, with an elementwise tail) are fractal
matmuls: a convolution in img2col form has M = N * Ho * Wo, K = C1 * kh * kw * C0,
N = Cout rounded up to 16 (a transposed one is the convolution of its input with
zeros inserted between the cells; a 3-D one, in ND, an explicit img2col matrix per
group, see `cube._conv_family_gemm`); a grouped convolution packs
`enlarge` groups into one (CANN's rule: enlarge = min(lcm(Cin/g, C0) / (Cin/g),
lcm(Cout/g, 16) / (Cout/g), g)), so a depthwise one runs ceil(C / 16) fractal
matmuls. Every L0A/L0B fractal is 512 bytes (16 rows of 32 bytes), an L0C one 1 KB
(float32 or int32 accumulators). A block's M x N is cut into L0 tiles m0 x n0 and K
into k0 steps that fit L0A, L0B and L0C twice (ping and pong), chosen by a cost of
cube cycles, MTE1 traffic, GM loads and stores (A read once per N tile, B once per
M tile unless resident; each copy paying a latency), the epilogue's vector work,
the first loads before the first mmad and the last tile's drain; K is loaded into
L1 in panels of k1 (a multiple of k0, or the whole K), A and B panels twice, and
where B's whole K fits beside A the cost decides whether it stays in L1 across the
M loop (the weights read once per block, but loaded whole before the first mmad),
in one buffer where the block has one N tile, or whether A's whole K stays across the
N loop instead (`a_resident`: the activations read once per block, B's K1 panels
streaming per tile; the loop nest then has M tiles outer, each M tile's A loading
while the previous one's N tiles compute, in one buffer where the block has one M
tile). The loop nest is batch > N tiles > M tiles (L0C ping-pong) > K1
panels (L1 ping-pong) > K0 steps (L0A/L0B ping-pong): MTE2 loads GM -> L1 (a
convolution loads the input rows its output rows need, img2col happens on the
L1 -> L0A move), MTE1 moves L1 -> L0A/L0B, M runs mmad. The result leaves L0C:
- on parts with a FIX pipe, FIX writes L0C -> GM (NZ -> ND in flight for an ND
  result; a ReLU tail is FIX's own), the bias goes L1 -> BT before the mmads; a
  longer tail makes a mixed kernel: FIX writes a workspace, the vector unit reads
  it into UB, computes the tail and MTE3 writes the result (on the 910B the vector
  core does, loading UB with its own MTE2 while the cube core's loads the next
  panel: `ge.sim.program.AIV_MTE2`);
- elsewhere the vector unit moves L0C -> UB (converting to the result dtype),
  adds the bias, computes the tail and MTE3 writes UB -> GM.
An operand left in ND (a matmul on a FIX part, or one format selection did not
reach) is converted to NZ on its way into L1 (an MTE2 copy in nd2nz mode).

Vector kernels tile the Unified Buffer: a tile is a number of whole rows; every
value of the scope gets a UB buffer of its tile (inputs and outputs twice, for
ping-pong; a broadcast input that a tile holds whole once, loaded once per block
before the tiles, or, in a block of one tile, after its rows, V waiting for it only
at the first instruction that reads it: a norm's scale and bias). Per tile: MTE2 loads the inputs, V runs each op's instruction
sequence (`RECIPES`; a reduction within rows first combines each row's repeats
with the elementwise instruction, then reduces within one repeat per row), MTE3
stores the outputs. The tile is not simply the largest that fits: one tile per
block runs MTE2, V and MTE3 one after the other, so the block's rows are cut into
the tiles of least estimated time (`vector.pipelined_tile`: the first tile's
pipes in series, then each further one at its busiest pipe, each copy paying its
latency). A vector instruction covers at most 255 repeats of 256 bytes; longer
work is a loop of such instructions.

A recurrent layer (DynamicRNN, DynamicGRUV2, RNN) is one kernel whose program is
the time loop: the input projection of every step, then per step the product of
h_{t-1} on the cube and the gate activations on the vector unit, the blocks
meeting at `sync_all` (`recurrent`).

MultiHeadAttention is one kernel: the Q/K/V projections (for self-attention, where
the tiling's estimate says so, one phase that loads each tile of the input once for
the three weights: `attention.Phases.projections`), then, where a row of scores
fits the core, one flash phase (`flash`: per (head, query tile), scores, softmax
and context, the context one unit late; in L0C, UB and L1 where the vector unit
sits beside the cube, through workspace slots and flags across the cores where
they are apart); elsewhere the scores per head, softmax and the probabilities
times V, with the intermediates in the workspace and `sync_all` between phases.
FusedInferAttentionScore is the same kernel without the projections.

Double buffering is explicit: a loop over tiles holds its ping and its pong
iteration, each with its own buffers and event ids; the consumer primes the
buffer-free events before the loop and the producer drains them after. In a cube
kernel the L1 panels, the L0 steps, the L0C accumulators and the epilogue's UB run
as streams of slots through all the tiles of a block, across its N tiles and
batches (the bias table in two halves where an N tile's bias fits one), so that
MTE2 and MTE1 load the next tile's first panel, of the next N tile or batch too,
while the cube finishes the last one. Scalar
work: `SETUP_INSTRS` per block (reading the tiling, base addresses) and per loop
body 4 instructions plus 2 per copy and 1 per vector instruction (addresses,
counters).
"""


from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from xdsl.ir import Operation, SSAValue

from dialects import ascend_graph as ag
from dialects.ascend_kernel import ScalarOp
from dialects.kernel_boundary import virtual_cores
from ge.core.errors import ModelError
from ge.core.soc import SocProfile
from passes.lowering.attention import attention_plan, fused_attention_plan
from passes.lowering.cube import (
    EPILOGUES,
    cube_program,
    epilogue_of,
    gemm_of,
    tile_gemm,
)
from passes.lowering.program import SETUP_INSTRS, Ops, Plan, Program
from passes.lowering.recurrent import recurrent_plan
from passes.lowering.space import CubeSpace, attention_space
from passes.lowering.vector import scope_label, vector_plan

# ----------------------------------------------------------- planning a scope


def plan(
    profile: SocProfile, ops: Sequence[Operation], inputs: Sequence[SSAValue], outputs: Sequence[SSAValue],
    tiling: Mapping[str, int] | None = None,
) -> Plan:
    """The plan of one kernel scope: `ops` in program order, read `inputs` and
    written `outputs` (the values crossing the scope's boundary). A `tiling` (a tuned
    one, see `space`) replaces the analytic choice of a cube or vector kernel."""
    virtual = virtual_cores(ops)
    cubes = [op for op in ops if isinstance(op, ag.CubeOp)]
    if not cubes:
        if profile.split_cores:
            vector = profile.vector_cores if virtual is None else virtual * profile.vector_cores // profile.ai_cores
            return vector_plan(profile, ops, inputs, outputs, vector, "VectorCore", exact=virtual is not None, tiling=tiling)
        return vector_plan(profile, ops, inputs, outputs, virtual or profile.ai_cores, "AiCore", exact=virtual is not None, tiling=tiling)
    cube = cubes[0]
    if len(cubes) > 1 or ops[0] is not cube:
        raise ModelError(f"{scope_label(ops)}: a kernel holds one cube op, its first; this scope has {len(cubes)}, after {ops[0].name}")
    if tiling is not None and isinstance(cube, ag.RecurrentOp):
        raise ModelError(f"{scope_label(ops)}: a {cube.name} kernel takes no tuned tiling")
    if isinstance(cube, (ag.MultiHeadAttentionOp, ag.FusedInferAttentionScoreOp)):
        cores = virtual or profile.ai_cores
        chosen = None
        if tiling is not None:
            attention = attention_space(profile, cube, cores)
            if attention is None:
                raise ModelError(f"{scope_label(ops)}: its attention runs as one flash phase on {profile.name}, which takes no tuned tiling")
            chosen = attention.chosen(tiling)
        make = attention_plan if isinstance(cube, ag.MultiHeadAttentionOp) else fused_attention_plan
        return make(profile, cube, inputs, outputs, cores, chosen)
    if isinstance(cube, ag.RecurrentOp):
        return recurrent_plan(profile, ops, inputs, outputs, virtual or profile.ai_cores)
    gemm, n_logical = gemm_of(profile, cube)
    e = epilogue_of(profile, cube, list(ops[1:]), outputs, n_logical)
    if e.nd_store:
        gemm = replace(gemm, out_nd=True)
    cores = virtual or profile.ai_cores
    bias_table = e.bias is not None and profile.fix_pipe
    if tiling is not None:
        t = CubeSpace.of(profile, gemm, e, cores, virtual is not None).tiling(tiling)
    else:
        t = tile_gemm(
            profile, gemm, cores, lambda m, n: e.ub_bytes(profile, m, n), bias_table=bias_table,
            exact=virtual is not None, epilogue_gm=e.gm_bytes_per_element(),
            epilogue_vector=e.vector_cycles_per_element(gemm.out_bytes), epilogue_scratch=e.scratch_bytes_per_element(gemm.out_bytes),
        )
    block_dim = t.block_dim if virtual is None else -(-t.block_dim // cores) * cores  # idle blocks where the work is short
    workspace = block_dim * e.workspace(t.m0, t.n0, gemm.out_bytes)

    def program(gm: dict[SSAValue, SSAValue], ws: SSAValue | None) -> Ops:
        prog = Program(profile)
        ops_ = cube_program(prog, gemm, t, e, gm, gm[cube.operands[0]], gm[cube.operands[1]], ws)
        return [*prog.allocs, ScalarOp(SETUP_INSTRS), *ops_]

    return Plan(block_dim, "AiCore", {**t.params(gemm), "epilogue": EPILOGUES.index(e.kind)}, workspace, program)
