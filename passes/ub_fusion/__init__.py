"""UB fusion: marking the ops that the build compiles into one kernel.

The package holds the scope graph and the UB working-set model (`scopes`), and
the passes: the cube-tail family (`cube_tails`), `AutomaticUbFusion` (`automatic`)
and `MatmulTransdataFusionPass` (`matmul_transdata`).

UB (Unified Buffer) fusion changes no op and no value: it gives every op of a
*scope* the discardable attribute `_fusion_scope = <id> : i64` (ids unique per
module), and the build makes one kernel of each scope, whose intermediate values
stay in the AI core's Unified Buffer instead of going through global memory.

Passes, in the order the pipeline runs them (band, then name):

| pass (GE name)                        | band | scope |
|---------------------------------------|------|-------|
| TbeConvDoubleInFusionPass             | top  | Conv2D + Elemwise1 taking a second tensor (a residual Add) + a one-input Elemwise2 fed only by Elemwise1 |
| TbeBatchMatmulElementWiseFusionPass   | main | BatchMatMulV2 + an elementwise tail |
| TbeCommonRules0FusionPass             | main | Conv2D + a chain of 1..5 elementwise ops, each taking one input from the chain |
| TbeMatmulElemwiseFusionPass           | main | MatMulV2 / GEMM / FullyConnection + an elementwise tail |
| AutomaticUbFusion                     | down | elementwise and broadcast ops (and keep-dims reductions) joined producer to consumer |
| MatmulTransdataFusionPass             | down | a matmul scope and the TransData FRACTAL_NZ -> ND after it (and its paired Cast) |

`TbeConvDoubleInFusionPass` is GE's pass for Conv2D + Elemwise + Elemwise (origin
formats NCHW/NHWC/HWCN only). It runs in the top band so that the generic
`TbeCommonRules0FusionPass` (GE's catch-all "conv + eltwise*N" rule, which GE also
registers after its specific conv passes) does not take its residual blocks first.
GE's `TbeConv2DReluv2Pass` was not used: it fuses ReluV2, the two-output ReLU of
training graphs, which an inference graph does not have.

A cube pass's *tail* grows from the cube op through elementwise users in program
order; each op joins when one of its operands is in the scope and its other
operands cannot be reached from the scope (else the scope would feed itself). The
scope is cut back to the longest prefix with exactly one value used outside it (a
fused cube kernel writes one output), and a scope holds at most
`MAX_SCOPE_OPS` ops, GE's limit for one buffer-fusion pattern. The GELU
decomposition `x * 0.5 * (1 + erf(x / sqrt(2)))`, whose `x` has two users, is such
a tail.

`AutomaticUbFusion` visits ops in program order and merges each eligible op's
group with the groups of its eligible producers (all of them at once, else one
by one: a value passed between them then stays inside, so the union can fit the
UB where a pair cannot), when the merged scope
- is convex: no path leaves it and comes back, even through other scopes, so the
  graph of kernels stays acyclic (GE's cycle detection);
- reduces, if at all, one set of axes of one shape, and every other tensor of it
  broadcasts into that shape (a tile then holds whole rows; a reduction feeding
  elementwise ops, or fed by them, needs nothing else, as TBE's reduce schedules);
- fits the Unified Buffer of the pass's `soc_version` (see `working_set`).
A scope may have several outputs (GE's multi-output UB fusion).

`MatmulTransdataFusionPass` lets a matmul write its result in ND itself (MTE3
stores the fractals row by row): a TransData FRACTAL_NZ -> ND that alone uses the
matmul scope's one output joins the scope. It runs after the elementwise tails are
in that scope; a TransData that `TransdataCastFusionPass` paired with the Cast after
it joins with that Cast (the epilogue casts the NZ tile, then stores it in ND).
GE's pass of that name also takes the TransData ND -> FRACTAL_NZ
feeding the matmul; here a kernel starts with its cube op (`passes.lowering`), so
that side stays a kernel of its own until the cube program loads ND operands.

The working set of a scope is the peak, over its ops in program order, of the
bytes one tile keeps live in the UB. A tile is the smallest block the scope's
schedule can compute alone:
- with a reduction: whole rows, i.e. the reduction input's axes from the first
  reduced axis on (every tensor takes its own dims on those axes);
- with a cube op: one fractal of its result, 16 x 16 elements of the two innermost
  axes (the cube hands its result to the vector unit fractal by fractal);
- otherwise: one 32-byte block of every tensor (elementwise work splits freely).
Tiles are cut from logical (origin) shapes, the shapes reduction axes and
broadcasting refer to; the padding of a device format is not counted. Each
tensor's tile is rounded up to the UB's alignment (32 bytes). A value from
outside the scope is live from its first to its last use in the scope, one made
inside from its producer to its last use, or to the end of the tile if it leaves
the scope; values loaded from or written to global memory count twice (double
buffering). A cube op's own operands go through L1/L0A/L0B, not the UB.
A scope tiled in blocks must also hold all its values at once, as its kernel
(`passes.lowering.vector`) does: every value its own UB buffer, none reused, of
32 bytes of the narrowest value's elements (a wider value proportionally more),
and such a tile cannot be cut smaller (`blocks_at_once`). Without that rule a
chain of a few thousand elementwise ops, whose working set is a few blocks,
became one scope that the lowering then refused. Row and fractal tiles are cut
further by their lowerings, so only their working set counts.

Which ops make a kernel at all (views, `_no_task` ops and structural ops do not)
is the IR's kernel-boundary vocabulary, `dialects.kernel_boundary`.
"""
