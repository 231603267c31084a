"""Cube kernels: fractal matmul tiling over L0/L1, the pipe program, and the epilogue
that takes the result out of L0C (see the package docstring)."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from xdsl.ir import Attribute, Operation, SSAValue

from dialects import ascend_graph as ag
from dialects import formats
from dialects.ascend_kernel import (
    BIAS_TABLE_BYTES,
    MmadOp,
    SetFlagOp,
    WaitFlagOp,
)
from ge.core import dtypes
from ge.core.errors import ModelError, OptionError
from ge.core.soc import QUEUE_DEPTH, SocProfile
from passes.lowering.program import (
    ACC_BYTES,
    ACC_FRACTAL_BYTES,
    COPY_LATENCY_NS,
    CORE_LOAD_SHARE,
    CORE_STORE_SHARE,
    FRACTAL,
    FRACTAL_BYTES,
    L0A_FRACTAL_CYCLES,
    L0B_FRACTAL_CYCLES,
    MMAD_OVERHEAD,
    ND2NZ_LATENCY_NS,
    ND2NZ_LOAD_SHARE,
    REPEAT_BYTES,
    VECTOR_REPEAT_CYCLES,
    Ops,
    Program,
    aligned,
    batched,
    body,
    copy,
    double_buffered,
    double_buffered_runs,
    element_bytes,
    iterations,
    numel,
    repeat,
    sequence,
    split,
    sync,
    vec,
)
from passes.lowering.recipes import dtype_name, emit_recipes, recipe

# ----------------------------------------------------------------- cube kernels


@dataclass(frozen=True)
class Gemm:
    """One fractal matmul problem: `batch` x ([m, k] x [k, n]), in elements."""

    batch: int
    m: int
    k: int
    n: int
    in_dtype: Attribute
    out_dtype: Attribute
    a_nd: bool = False
    """A is ND in GM and MTE2 converts it to NZ on the way to L1 (FIX parts)."""
    b_nd: bool = False
    out_nd: bool = False
    """The result is ND in GM: FIX converts NZ to ND on the way out."""
    conv: tuple[int, int, int, int, int] | None = None
    """For a convolution: (input height and width incl. padding, output width, stride
    along H, dilated kernel height); A is then the input's rows, not an NZ matrix."""
    window: int = 1
    """kh * kw of a convolution: its K holds C1 slices of `window` fractal columns."""
    pixel_channels: int = 0
    """For a small-channel convolution, the channels of a pixel in L1 (C04): its K is
    every cell of the window at once, read from whole input rows of that many channels."""

    @cached_property
    def in_bytes(self) -> int:
        """Cached: the tiling search asks it hundreds of thousands of times per model."""
        return max(1, formats.element_bits(self.in_dtype) // 8)

    @cached_property
    def out_bytes(self) -> int:
        return max(1, formats.element_bits(self.out_dtype) // 8)

    @property
    def img2col(self) -> bool:
        return self.conv is not None and (self.window > 1 or self.conv[3] > 1)

    def a_l1_bytes(self, rows: int, k: int, kc: int) -> int:
        """L1 bytes of an A panel of `rows` x `k`: its fractals or, for a convolution
        if fewer, the input rows its output pixels read (at worst they start at the
        end of an output row: ceil((rows - 1) / Wo) + 1 output rows; where those span
        images, each image's own rows, at most Hi of them)."""
        kfrac = -(-k // kc)
        fractals = -(-rows // FRACTAL) * kfrac * FRACTAL_BYTES
        if self.conv is None:
            return fractals
        hi, wi, wo, stride, kh = self.conv
        out_rows = -(-(rows - 1) // wo) + 1
        ho = (hi - kh) // stride + 1
        images = 1 if out_rows <= ho else -(-(out_rows - 1) // ho) + 1
        rows_in = min(images * hi, (out_rows - 1) * stride + images * kh)
        if self.pixel_channels:
            return min(fractals, rows_in * wi * self.pixel_channels * self.in_bytes)
        return min(fractals, -(-kfrac // self.window) * rows_in * wi * kc * self.in_bytes)

    def a_gm_bytes(self, rows: int, k: int, kc: int) -> int:
        """GM bytes an A panel reads: exactly its elements when ND, else what L1 holds."""
        return rows * k * self.in_bytes if self.a_nd else self.a_l1_bytes(rows, k, kc)

    def b_gm_bytes(self, k: int, cols: int, kc: int) -> int:
        """GM bytes of a B panel: exactly its elements when ND, else whole fractals."""
        if self.b_nd:
            return k * cols * self.in_bytes
        return _align(k, kc) * _align(cols, FRACTAL) * self.in_bytes


@dataclass(frozen=True)
class CubeTiling:
    """Blocks and tiles of a Gemm, in elements (m0, n0 multiples of 16; k0, k1 of kc)."""

    batch_dim: int
    m_dim: int
    n_dim: int
    bb: int
    mb: int
    nb: int
    m0: int
    n0: int
    k0: int
    k1: int
    b_resident: bool
    kc: int
    """The cube's k: elements per fractal column (16 for float16, 32 for int8)."""
    m_tail: int = 1
    """Pieces the last M tile of an N tile runs as: its drain after the block's last
    mmad is a piece's, the rest overlapping the next pieces' mmads."""
    l0c_buffers: int = 2
    """Accumulators in L0C: two (a tile's mmads overlap the previous tile's drain) or
    one of twice the size (an m0 x n0 tile up to the whole L0C, each tile's mmads
    waiting for the previous tile to leave L0C)."""
    cols_resident: bool = False
    """The epilogue's per-column operands (a bias added in UB, per-channel factors)
    loaded once per N tile into one buffer, not with every M tile (with `a_resident`,
    once per block, whose one N tile it must then be)."""
    a_resident: bool = False
    """A's whole K for an M tile stays in L1 across the block's N tiles: M tiles
    outer, A read once per block, B's K panels streaming per (M, N) tile (not with
    `b_resident`; with a bias table, the block's whole bias in it, loaded once)."""

    @property
    def block_dim(self) -> int:
        return self.batch_dim * self.m_dim * self.n_dim

    def m_runs(self) -> list[tuple[int, int, int]]:
        """The M tiles of an N tile as runs of `split`s: whole m0 tiles, the last cut into `m_tail` pieces."""
        full, size, tail = split(self.mb, self.m0)
        if self.m_tail <= 1:
            return [(full, size, tail)]
        last = tail or size
        return [(full if tail else full - 1, size, 0), split(last, _align(-(-last // self.m_tail), FRACTAL))]

    @property
    def b_single(self) -> bool:
        """B stays in L1 and a block has one N tile of one batch: one B buffer, nothing to load ahead."""
        return self.b_resident and self.nb <= self.n0 and self.bb == 1

    @property
    def a_single(self) -> bool:
        """A stays in L1 and a block has one M tile: one A buffer, nothing to load ahead."""
        return self.a_resident and sum(iterations(*run) for run in self.m_runs()) == 1

    def params(self, gemm: Gemm, prefix: str = "") -> dict[str, int]:
        values = {
            "batch": gemm.batch, "m": gemm.m, "k": gemm.k, "n": gemm.n, "batch_dim": self.batch_dim,
            "m_dim": self.m_dim, "n_dim": self.n_dim, "block_batch": self.bb, "block_m": self.mb,
            "block_n": self.nb, "m0": self.m0, "n0": self.n0, "k0": self.k0, "k1": self.k1,
            "b_resident": int(self.b_resident),
        }
        if self.m_tail != 1:
            values["m_tail"] = self.m_tail
        if self.l0c_buffers != 2:
            values["l0c_buffers"] = self.l0c_buffers
        if self.cols_resident:
            values["cols_resident"] = 1
        if self.a_resident:
            values["a_resident"] = 1
        return {f"{prefix}{k}": v for k, v in values.items()}


def cube_k(profile: SocProfile, dtype: Attribute) -> int:
    """Elements of the cube's k for the input dtype (16 for float16, 32 for int8)."""
    try:
        return profile.cube_shape(dtypes.name(dtype)).k
    except OptionError as e:
        raise ModelError(f"{e}; choose the cube's dtypes first (precision-selection)") from e


TIE = 1.05
"""Tiling costs within this factor of each other count as equal."""
UB_LOAD_SHARE = 1.4
"""What one core's GM -> UB loads reach, in shares of the chip's GM rate: the fitted
rates are 46 B/cycle on the 910B1 (32 a share) and 24 on the 310P3 (17; tiling cost only)."""
def block_splits(units: Sequence[int], cores: int, exact: bool = False) -> dict[tuple[int, ...], tuple[int, ...]]:
    """The splits of `units` into at most `cores` blocks (one wave), by the share of
    the largest block: for each share the split with the fewest blocks (the simulator
    times every block as the largest, so a block more is traffic more). With `exact`,
    only the splits into exactly `cores` blocks where one exists (a kernel for
    virtual instances)."""
    found: dict[tuple[int, ...], tuple[int, ...]] = {}

    def visit(prefix: tuple[int, ...], whole: bool) -> None:
        used = math.prod(prefix)
        if len(prefix) == len(units):
            per = tuple(-(-u // d) for u, d in zip(units, prefix))
            if (not whole or used == cores) and (per not in found or used < math.prod(found[per])):
                found[per] = prefix
            return
        for d in range(1, min(units[len(prefix)], cores // used) + 1):
            visit(prefix + (d,), whole)

    visit((), exact)
    if not found:
        visit((), False)
    return found


@dataclass(frozen=True)
class _BlockTile:
    """The L0 tile and L1 panel of one block and what it costs (cycles)."""

    cost: float
    m0f: int
    n0f: int
    k0f: int
    k1f: int
    b_resident: bool
    pipes: float
    """The cost but for the chip's traffic: of equal costs, the least of this wins."""
    a_resident: bool = False
    cube_side: float = 0.0
    """The pipes but the vector unit's: of equal costs and pipes (a vector epilogue
    bounding both, for every tile of the block alike), the least of this wins: the
    tile that leaves the cube, MTE1 and MTE2 the most slack."""
    l0c_buffers: int = 2
    """Accumulators: two, or one for a tile larger than half of L0C."""

    def beats(self, other: _BlockTile | None) -> bool:
        """Whether this tile replaces `other` as a block's best (costs within 1e-9 are equal)."""
        if other is None or self.cost < other.cost - 1e-9:
            return True
        if self.cost > other.cost + 1e-9:
            return False
        return self.pipes < other.pipes or (self.pipes == other.pipes and self.cube_side < other.cube_side)


def tile_gemm(
    profile: SocProfile, gemm: Gemm, cores: int, epilogue_ub: Callable[[int, int], int], bias_table: bool = False,
    exact: bool = False, epilogue_gm: float = 0.0, epilogue_vector: float = 0.0, epilogue_scratch: float = 0.0,
) -> CubeTiling:
    """Blocks, L0 tiles and L1 panels of a Gemm, chosen together by one cost: the time
    of the largest block (see `_tile_block`): its pipes (the cube, MTE1, MTE2 loading,
    the store and the vector epilogue), the first loads before its first mmad and
    the last tile's drain after its last, or its share of the kernel's chip traffic.
    Every re-read counts on the block's own MTE2: A is read once per N tile, B once
    per M tile unless its whole K stays in L1 across the M tiles (`b_resident`), or
    A's across the N tiles (`a_resident`: B then read once per tile). A tile up to
    half of L0C has two accumulators (its mmads overlap the previous tile's drain);
    a larger one, up to the whole L0C, one (`l0c_buffers` 1: fewer re-reads, each
    tile's mmads waiting for the previous one's drain). On
    the chip's bandwidth, where the Gemm's inputs and outputs fit the chip's L2
    together, its compulsory bytes go at GM's rate and its re-reads at L2's (they are
    L2 hits, `ge.sim.l2`); otherwise every byte at GM's. So the split over the cores
    and the tile shapes follow from the data reuse: a kernel whose weights outweigh
    its activations splits M across N tiles of resident weights, one whose
    activations dominate splits N, and where L2 serves the re-reads more blocks win.
    Of costs within `TIE` of the least, the split with the most blocks wins (a
    block's time varies more than the cost says; more blocks share it out), then
    the least time of its pipes (where the chip's traffic bounds them all alike).
    `epilogue_ub(m0, n0)` is the UB the epilogue of an m0 x n0 tile needs; with
    `bias_table`, an n0 tile's float32 bias must fit the bias table; `epilogue_gm` is
    the GM bytes the epilogue loads per result element besides the result's store,
    `epilogue_vector` its V cycles per result element, `epilogue_scratch` the bytes
    per result element of a mixed epilogue's round trip through the workspace (FIX's
    write, the vector half's load): at L2's rate, which keeps the ring of tiles
    (`ge.sim.l2`). On a part with split cores the vector half loads on its own core's
    MTE2, so its loads are a pipe of their own rather than more of the cube's.
    A split whose cost exceeds `TIE` times the least so far cannot win: its search
    stops as soon as that is certain (`_tile_block`'s `cutoff`)."""
    kc = cube_k(profile, gemm.in_dtype)
    units = (gemm.batch, -(-gemm.m // FRACTAL), -(-gemm.n // FRACTAL))
    kf = -(-gemm.k // kc)
    out_tile = FRACTAL * FRACTAL * gemm.out_bytes
    if gemm.conv is None:
        a_whole = gemm.a_gm_bytes(gemm.m, gemm.k, kc)
    else:  # one image's input rows per image
        hi, _, wo, stride, kh = gemm.conv
        pixels = ((hi - kh) // stride + 1) * wo
        a_whole = -(-gemm.m // pixels) * gemm.a_gm_bytes(pixels, gemm.k, kc)
    b_whole = gemm.b_gm_bytes(gemm.k, gemm.n, kc)
    working_set = gemm.batch * (a_whole + b_whole + gemm.m * gemm.n * (epilogue_gm + gemm.out_bytes))
    gm = _GmRates.of(profile, cores, working_set if working_set <= profile.l2_bytes else None, gemm.batch * a_whole, gemm.batch * b_whole)
    search = _Search(profile, gemm, gm, epilogue_ub, bias_table, epilogue_gm, epilogue_vector, epilogue_scratch)

    def lower_bound(per: tuple[int, ...], used: int) -> float:
        """No tiling of this block does better: each operand read once, the cube at peak."""
        bb, mbf, nbf = per
        elements = bb * mbf * nbf * FRACTAL * FRACTAL
        a, b = bb * gemm.a_gm_bytes(mbf * FRACTAL, gemm.k, kc), bb * gemm.b_gm_bytes(gemm.k, nbf * FRACTAL, kc)
        return max(bb * mbf * nbf * kf, gm.bound(used, a, b, elements * epilogue_gm, bb * mbf * nbf * out_tile, elements * epilogue_scratch))

    candidates = sorted((lower_bound(per, math.prod(dims)), math.prod(dims), per, dims) for per, dims in block_splits(units, cores, exact).items())
    tiled: list[tuple[float, int, tuple[int, ...], _BlockTile]] = []
    for bound, used, per, dims in candidates:
        cutoff = min(t[0] for t in tiled) * TIE if tiled else math.inf
        if bound > cutoff:
            break
        tile = _tile_block(search, per, used, cutoff)
        if tile is not None:
            tiled.append((tile.cost, used, dims, tile))
    if not tiled:
        raise ModelError(f"no cube tile of a {gemm.m}x{gemm.k}x{gemm.n} matmul fits {profile.name}'s buffers")
    least = min(t[0] for t in tiled)
    _, _, (batch_dim, m_dim, n_dim), tile = min((t for t in tiled if t[0] <= least * TIE), key=lambda t: (-t[1], t[3].pipes, t[0]))
    bb, mbf, nbf = -(-gemm.batch // batch_dim), -(-units[1] // m_dim), -(-units[2] // n_dim)
    mb = min(mbf * FRACTAL, gemm.m)
    return CubeTiling(
        batch_dim, m_dim, n_dim, bb, mb, nbf * FRACTAL, min(tile.m0f * FRACTAL, _align(mb, FRACTAL)), tile.n0f * FRACTAL,
        tile.k0f * kc, tile.k1f * kc, tile.b_resident, kc, l0c_buffers=tile.l0c_buffers, a_resident=tile.a_resident,
    )


def _panels(profile: SocProfile, gemm: Gemm, kc: int, m0f: int, n0f: int, k1f: int, b_k: int, b_single: bool = False) -> int:
    """L1 for two A panels of k1f fractal columns and two B panels of b_k (one where
    a block has a single N tile: nothing to load ahead)."""
    return _l1_panels(aligned(profile, "L1", gemm.a_l1_bytes(m0f * FRACTAL, k1f * kc, kc)), n0f, b_k, b_single)


def _l1_panels(a_panel: int, n0f: int, b_k: int, b_single: bool) -> int:
    """`_panels` of an A panel of `a_panel` L1 bytes."""
    return 2 * a_panel + (1 if b_single else 2) * b_k * n0f * FRACTAL_BYTES


def _resident_a_panels(a_tile: int, n0f: int, k1f: int, a_single: bool) -> int:
    """L1 where A stays: two A tiles of `a_tile` L1 bytes (their whole K; one where a
    block has a single M tile) and two B panels of k1f fractal columns."""
    return (1 if a_single else 2) * a_tile + 2 * k1f * n0f * FRACTAL_BYTES


def _batches_in_one(profile: SocProfile, gemm: Gemm, bb: int, n_tiles: int, b_resident: bool, a_resident: bool, m0f: int, n0f: int, k1f: int, biased: bool) -> bool:
    """Whether a block's batches of a grouped convolution load their B (their groups'
    columns of one FRACTAL_Z weight, side by side in each of its rows: one strided
    copy) and, through the bias table, their biases in one copy each instead of one
    per batch: each copy of a few KB is mostly its latency. Where B stays in L1, a
    batch has one N tile, and the batches' B fit L1 beside two A panels of k1f (their
    biases the bias table). The tiling cost does not see it (it counts a copy per
    batch): counting one moved MobileNetV2's depthwise tilings to slower ones."""
    if gemm.conv is None or bb < 2 or n_tiles != 1 or not b_resident or a_resident:
        return False
    if biased and bb * n0f * FRACTAL * ACC_BYTES > BIAS_TABLE_BYTES:
        return False
    kc = cube_k(profile, gemm.in_dtype)
    a_panel = aligned(profile, "L1", gemm.a_l1_bytes(m0f * FRACTAL, k1f * kc, kc))
    return 2 * a_panel + bb * -(-gemm.k // kc) * n0f * FRACTAL_BYTES <= profile.l1_bytes - (BIAS_TABLE_BYTES if biased else 0)


@dataclass(frozen=True)
class _GmRates:
    """GM rates the tiling cost assumes: the chip's, shared by a kernel's blocks, what
    one core's loads and stores reach alone (`CORE_LOAD_SHARE`), and, where the
    chip's L2 holds the kernel's `working_set`, the L2's for every byte beyond it;
    else L2's for the re-reads of an operand (A's `a_whole` bytes, B's `b_whole`)
    whose reuse distance fits L2, as `ge.sim.l2` serves them."""

    chip: float
    load: float
    store: float
    load_nd: float
    """An nd2nz load's rate (MTE2 converting to NZ on the way)."""
    ub_load: float
    """A GM -> UB load's rate (an epilogue's operands)."""
    latency: float
    nd_latency: float
    """Cycles a GM copy (an nd2nz one) holds its pipe before its first byte."""
    l2: float
    l2_load: float
    """What one core's loads reach from L2 (its share of the chip's L2 rate)."""
    working_set: float | None
    a_whole: float = 0.0
    b_whole: float = 0.0
    capacity: float = 0.0
    """The chip's L2 bytes."""

    @classmethod
    def of(
        cls, profile: SocProfile, cores: int, working_set: float | None = None, a_whole: float = 0.0, b_whole: float = 0.0,
    ) -> _GmRates:
        share = max(profile.gm_bytes_per_cycle, 1.0)
        chip = share * max(cores, 1)
        cycles_per_ns = profile.clock_mhz / 1000
        return cls(
            chip, min(chip, CORE_LOAD_SHARE * share), min(chip, CORE_STORE_SHARE * share), min(chip, ND2NZ_LOAD_SHARE * share),
            min(chip, UB_LOAD_SHARE * share), COPY_LATENCY_NS * cycles_per_ns, ND2NZ_LATENCY_NS * cycles_per_ns,
            max(profile.l2_bytes_per_cycle, share) * max(cores, 1), max(profile.l2_bytes_per_cycle, share), working_set, a_whole, b_whole,
            profile.l2_bytes,
        )

    def load_cycles(self, copies: int, nbytes: float, nd: bool) -> float:
        """MTE2 cycles of `copies` loads of `nbytes` in all."""
        if nd:
            return copies * self.nd_latency + nbytes / self.load_nd
        return copies * self.latency + nbytes / self.load

    def cycles(self, used: int, a: float, b: float, other: float, stores: float, scratch: float = 0.0) -> float:
        """Cycles of one block's GM traffic (`a` and `b` bytes of A and B read, `other`
        loaded besides, `stores` written, `scratch` to and from the workspace, which L2
        keeps) in a kernel of `used` such blocks: the chip's
        share or the block's own loads and stores, whichever is longest. The chip's
        share: with the working set in L2, its bytes through GM and the re-reads beyond
        it through L2; else every byte through GM but the re-reads of an operand whose
        reuse distance fits L2 (`ge.sim.l2.L2Cache.reused`: a weight re-read per M tile
        while the activation streams past, or the activation per N tile while the
        weights do). GM and L2 serve at once, as in the simulator: the longer counts
        (summed, they priced a split over more cores, its activation re-read from L2
        while the weights stream from GM, at twice its time). A block's own loads take
        its share of the re-reads at one core's L2 rate and the rest at its GM rate, one
        after the other: one MTE2 moves both."""
        total = used * (a + b + other + stores)
        if self.working_set is not None:
            through_gm, hot = min(total, self.working_set), max(0.0, total - self.working_set)
        else:
            hot = sum(used * x - whole for whole, x in ((self.a_whole, a), (self.b_whole, b)) if self._reused(whole, used * x, total))
            through_gm = total - hot
        chip = max(through_gm / self.chip, (hot + used * scratch) / self.l2)
        hits = min(hot / max(used, 1), a + b + other)
        core = (a + b + other - hits) / self.load + hits / self.l2_load
        return max(chip, core, stores / self.store)

    def bound(self, used: int, a: float, b: float, other: float, stores: float, scratch: float = 0.0) -> float:
        """At most `cycles`, and never less for more bytes: every re-read of an operand
        L2 could hold may come from L2 (the search's lower bounds rest on it; `cycles`
        itself may fall as re-reads grow, when they bring an operand's reuse distance
        within L2)."""
        if self.working_set is not None:
            return self.cycles(used, a, b, other, stores, scratch)
        total = used * (a + b + other + stores)
        hot = sum(max(0.0, used * x - whole) for whole, x in ((self.a_whole, a), (self.b_whole, b)) if 0 < whole <= self.capacity)
        scratch_bytes = used * scratch
        # `cycles` serves some h <= hot of the re-reads from L2; whatever h, the longer of
        # GM's and L2's shares is at least each of these (the middle: both at their summed rate)
        chip = max((total - hot) / self.chip, (total + scratch_bytes) / (self.chip + self.l2), scratch_bytes / self.l2)
        return max(chip, (a + b + other) / max(self.load, self.l2_load), stores / self.store)

    def _reused(self, whole: float, reads: float, total: float) -> bool:
        """Whether an operand of `whole` bytes read `reads` in a kernel moving `total`
        finds its bytes in L2 on every pass after the first."""
        return 0 < whole < reads and whole + (total - reads) * whole / reads <= self.capacity


_STEPS_QUEUED = QUEUE_DEPTH // 4
"""L0 steps whose MTE1 instructions (a wait, two copies, a set) its queue holds: the
scalar unit, issuing in program order, reaches a panel's load only once the previous
panel's steps beyond these have started, so MTE2 idles that long between panels."""

_CUTOFF_SLACK = 1.0
"""Cycles by which a tile's lower bound must exceed its block's cutoff to be skipped:
far more than the 1e-9 steps by which near-equal costs replace each other, so a
skipped tile never decides a split whose cost is within the cutoff."""


class _Search:
    """The tiling search of one Gemm: the constants of its cost, and what it asks for
    every split, tile and panel depth computed once (by fractals: the L1 and GM bytes
    of A and B panels, a tile's L0 depth), which the Gemm's own methods are too slow
    to answer hundreds of thousands of times."""

    def __init__(
        self, profile: SocProfile, gemm: Gemm, gm: _GmRates, epilogue_ub: Callable[[int, int], int], bias_table: bool,
        epilogue_gm: float, epilogue_vector: float, epilogue_scratch: float = 0.0,
    ) -> None:
        self.profile = profile
        self.gemm = gemm
        self.gm = gm
        self.epilogue_ub = epilogue_ub
        self.epilogue_gm = epilogue_gm
        self.epilogue_scratch = epilogue_scratch
        self.kc = cube_k(profile, gemm.in_dtype)
        self.kf = -(-gemm.k // self.kc)
        self.l1 = profile.l1_bytes - (BIAS_TABLE_BYTES if bias_table else 0)
        self.cap_a = profile.l0a_bytes // FRACTAL_BYTES // 2
        self.cap_b = profile.l0b_bytes // FRACTAL_BYTES // 2
        self.cap_c = profile.l0c_bytes // ACC_FRACTAL_BYTES // 2
        self.cap_n = BIAS_TABLE_BYTES // (FRACTAL * ACC_BYTES) if bias_table else self.cap_b
        self.table_n = self.cap_n if bias_table else math.inf
        """The most N fractals of a block whose bias the bias table holds at once (where A stays)."""
        self.drain = epilogue_vector + (0.0 if profile.fix_pipe else ACC_BYTES / 128)
        """V cycles per result element."""
        self._a_panels: dict[tuple[int, int], int] = {}
        self._a_reads: dict[tuple[int, int], int] = {}
        self._a_firsts: dict[tuple[int, int], int] = {}
        self._b_firsts: dict[tuple[int, int], int] = {}
        self._b_tiles: dict[int, int] = {}
        self._k0s: dict[tuple[int, int], int] = {}

    def a_panel(self, m0f: int, k1f: int) -> int:
        """L1 bytes of one A panel of m0f x k1f fractals."""
        key = (m0f, k1f)
        if key not in self._a_panels:
            self._a_panels[key] = aligned(self.profile, "L1", self.gemm.a_l1_bytes(m0f * FRACTAL, k1f * self.kc, self.kc))
        return self._a_panels[key]

    def panels(self, m0f: int, n0f: int, k1f: int, b_k: int, b_single: bool = False) -> int:
        """`_panels` of this Gemm."""
        return _l1_panels(self.a_panel(m0f, k1f), n0f, b_k, b_single)

    def a_reads(self, m0f: int, k1f: int) -> int:
        """GM bytes of A one M tile's panels of k1f fractal columns read (`_panel_bytes`);
        with k1f the whole K, the least of them: A's K read once."""
        key = (m0f, k1f)
        if key not in self._a_reads:
            self._a_reads[key] = _panel_bytes(self.gemm, m0f * FRACTAL, k1f * self.kc, self.kc)
        return self._a_reads[key]

    def a_first(self, m0f: int, k1f: int) -> int:
        """GM bytes of one A panel of m0f x k1f fractals."""
        key = (m0f, k1f)
        if key not in self._a_firsts:
            self._a_firsts[key] = self.gemm.a_gm_bytes(m0f * FRACTAL, k1f * self.kc, self.kc)
        return self._a_firsts[key]

    def b_first(self, k1f: int, n0f: int) -> int:
        """GM bytes of one B panel of k1f x n0f fractals."""
        key = (k1f, n0f)
        if key not in self._b_firsts:
            self._b_firsts[key] = self.gemm.b_gm_bytes(k1f * self.kc, n0f * FRACTAL, self.kc)
        return self._b_firsts[key]

    def b_tile(self, n0f: int) -> int:
        """GM bytes of B's whole K for an N tile of n0f fractals."""
        if n0f not in self._b_tiles:
            self._b_tiles[n0f] = self.gemm.b_gm_bytes(self.gemm.k, n0f * FRACTAL, self.kc)
        return self._b_tiles[n0f]

    def k0(self, m0f: int, n0f: int) -> int:
        """The L0 depth (fractal columns) of an m0f x n0f tile: what L0A and L0B hold,
        halved while its panels of that depth overflow L1 (a convolution's input rows
        fill L1 fast); 0 where none fits L1 or the epilogue's UB."""
        key = (m0f, n0f)
        if key not in self._k0s:
            k0f = min(self.kf, self.cap_a // m0f, self.cap_b // n0f)
            while k0f > 1 and self.panels(m0f, n0f, k0f, k0f) > self.l1:
                k0f //= 2
            fits = k0f >= 1 and self.panels(m0f, n0f, k0f, k0f) <= self.l1
            self._k0s[key] = k0f if fits and self.epilogue_ub(m0f * FRACTAL, n0f * FRACTAL) <= self.profile.ub_bytes else 0
        return self._k0s[key]


def _tile_block(s: _Search, per: tuple[int, ...], used: int, cutoff: float) -> _BlockTile | None:
    """The cheapest L0 tile and L1 panel of a block of `per` (batches, M and N
    fractals) in a kernel of `used` blocks, or None if none fits the buffers or the
    cheapest costs more than `cutoff`. Three ways to read the operands are costed:
    panels of A and B per tile, B's whole K resident per N tile, or A's whole K
    resident per M tile (read once per block, B's panels then streaming per tile).
    A block's time is the longest of: its first loads (the resident tile, the first
    panels and first L0 step) before the cube starts, the cube or MTE1 busy, and
    the block's last tile's drain after it (a short one where the block's M or N is
    not whole tiles; where A stays, each further M tile waits for the
    previous one's last drain and then its A: the tiles' streams restart per M
    tile; with one accumulator, each tile after the first waits for the previous
    one's drain); MTE2's loads (each panel's issued once the previous panel's steps
    beyond what MTE1's queue holds have started: `_STEPS_QUEUED`), then the last step
    and drain; the stores; the epilogue's
    vector work; its share of the chip's traffic (`_GmRates.cycles`). A GM copy costs the path's latency on its pipe, so small
    tiles and panels pay for their number and large first panels for their wait.
    Of costs within 1e-9 of each other, the least time of the pipes wins, then (a
    vector epilogue bounding both) the least time of the cube's side
    (`_BlockTile.beats`), in the order the tiles are tried. A tile's panel depths
    are skipped where a lower bound of their cost (A read once per M tile and B
    once per N tile, no first loads; then each way's reads) is not `_worth_trying`,
    so the result is the full search's. Each bound is an expression of the cost
    with operands no larger, in the same order, so it is no larger in floating
    point either."""
    gemm, gm, kc, kf, l1, drain = s.gemm, s.gm, s.kc, s.kf, s.l1, s.drain
    bb, mbf, nbf = per
    out_bytes = bb * mbf * nbf * FRACTAL * FRACTAL * gemm.out_bytes
    epilogue = bb * mbf * nbf * FRACTAL * FRACTAL * s.epilogue_gm
    scratch = bb * mbf * nbf * FRACTAL * FRACTAL * s.epilogue_scratch
    ub_loads = -(-s.epilogue_gm // gemm.out_bytes) + (1 if scratch else 0)  # per tile: its operands and the workspace tile
    best: _BlockTile | None = None
    for m0f in range(1, min(mbf, s.cap_a) + 1):
        mt = -(-mbf // m0f)
        a_column = gemm.a_l1_bytes(m0f * FRACTAL, gemm.k, kc) / kf  # L1 bytes per fractal column of an A panel
        for n0f in range(1, min(nbf, 2 * s.cap_c // m0f, s.cap_b, s.cap_n) + 1):
            k0f = s.k0(m0f, n0f)
            if not k0f:
                continue
            nt = -(-nbf // n0f)
            tiles = bb * mt * nt
            b_tile = s.b_tile(n0f)
            a_tile = s.a_reads(m0f, kf)
            a_whole = s.a_panel(m0f, kf)  # L1 bytes of A's whole K for an M tile
            a_fits = nbf <= s.table_n and _resident_a_panels(a_whole, n0f, k0f, mt == 1) <= l1
            a_copies_least = bb * mt if a_fits else tiles
            a_least, b_least = a_copies_least * a_tile, bb * nt * b_tile  # A's K once per M tile where it may stay (else per tile), B's once per N tile
            if not _worth_trying(gm.bound(used, a_least, b_least, epilogue, out_bytes, scratch), cutoff, best):
                continue
            steps = tiles * -(-kf // k0f)
            step = m0f * n0f * k0f + MMAD_OVERHEAD
            cube = steps * step
            step_mte1 = (m0f * L0A_FRACTAL_CYCLES + n0f * L0B_FRACTAL_CYCLES) * k0f
            mte1 = steps * step_mte1
            per_element = gemm.out_bytes / gm.store + drain
            drained = gm.latency + m0f * n0f * FRACTAL * FRACTAL * per_element  # a whole tile's drain
            # the block's last tile's: its last M and N tiles hold what is left of the block
            last = gm.latency + (mbf - (mt - 1) * m0f) * (nbf - (nt - 1) * n0f) * FRACTAL * FRACTAL * per_element
            accumulators = 2 if m0f * n0f <= s.cap_c else 1
            waits = 0.0 if accumulators == 2 else (tiles - 1) * drained  # one accumulator: each tile's mmads wait for the previous one's drain
            stores = tiles * gm.latency + out_bytes / gm.store
            vector = out_bytes / gemm.out_bytes * drain
            epilogue_loads = tiles * ub_loads * gm.latency + (epilogue + scratch / 2) / gm.ub_load
            vector_loads, epilogue_loads = (epilogue_loads, 0.0) if s.profile.split_cores else (0.0, epilogue_loads)
            least_loads = gm.load_cycles(a_copies_least, a_least, gemm.a_nd) + gm.load_cycles(bb * nt, b_least, gemm.b_nd) + epilogue_loads
            # the pipes without the first loads, and with the least reads
            if not _worth_trying(max(step_mte1 + max(cube, mte1) + last + waits, least_loads + step_mte1 + step + last, stores, vector, vector_loads), cutoff, best):
                continue
            single = nt == 1 and bb == 1  # one B tile in the block: nothing to load ahead
            modes = [(True, False)] if s.panels(m0f, n0f, k0f, kf, single) <= l1 else []
            modes.append((False, False))
            if a_fits:
                modes.append((False, True))
            for resident, a_resident in modes:  # a resident B (A) loads whole before the first mmad
                b_loads = bb * nt * b_tile * (1 if resident else mt)
                if not _worth_trying(gm.bound(used, bb * mt * a_tile if a_resident else tiles * a_tile, b_loads, epilogue, out_bytes, scratch), cutoff, best):
                    continue
                restarts = 0.0
                if a_resident:
                    room = l1 - (1 if mt == 1 else 2) * a_whole
                    k1_max = max(k0f, min(kf, int(room / (2 * n0f * FRACTAL_BYTES)) // k0f * k0f))
                    first_held = gm.load_cycles(1, s.a_first(m0f, kf), gemm.a_nd)
                    restarts = (bb * mt - 1) * (drained + first_held)  # each further M tile: the drain, then its A
                else:
                    room = l1 - ((1 if single else 2) * b_tile if resident else 0)
                    k1_max = max(k0f, min(kf, int(room / (2 * a_column + (0 if resident else 2 * n0f * FRACTAL_BYTES)) // k0f * k0f)))
                    first_held = gm.load_cycles(1, b_tile, gemm.b_nd) if resident else 0.0
                for k1f in _k1_choices(k0f, k1_max):
                    if k1f > k0f and (
                        _resident_a_panels(a_whole, n0f, k1f, mt == 1) if a_resident else s.panels(m0f, n0f, k1f, kf if resident else k1f, single and resident)
                    ) > l1:
                        continue
                    panels = tiles * -(-kf // k1f)
                    if a_resident:
                        a_loads, a_copies, b_copies, first_panel = bb * mt * a_tile, bb * mt, panels, 0.0
                    else:
                        a_loads, a_copies, b_copies = tiles * s.a_reads(m0f, k1f), panels, bb * nt if resident else panels
                        first_panel = gm.load_cycles(1, s.a_first(m0f, k1f), gemm.a_nd)
                    loads = gm.load_cycles(a_copies, a_loads, gemm.a_nd) + gm.load_cycles(b_copies, b_loads, gemm.b_nd) + epilogue_loads
                    loads += (panels - 1) * max(0, -(-k1f // k0f) - _STEPS_QUEUED) * max(step, step_mte1)  # issue held by MTE1's queue
                    if not resident:
                        first_panel += gm.load_cycles(1, s.b_first(k1f, n0f), gemm.b_nd)
                    first = first_held + first_panel + step_mte1
                    cube_side = max(first + max(cube, mte1) + last + restarts + waits, loads + step_mte1 + step + last, stores)
                    pipes = max(cube_side, vector, vector_loads)
                    chip = gm.cycles(used, a_loads, b_loads, epilogue, out_bytes, scratch)
                    tile = _BlockTile(max(pipes, chip), m0f, n0f, k0f, k1f, resident, pipes, a_resident, cube_side, accumulators)
                    if tile.beats(best):
                        best = tile
    return None if best is None or best.cost > cutoff else best


def _worth_trying(bound: float, cutoff: float, best: _BlockTile | None) -> bool:
    """Whether tiles that cost at least `bound` may decide a block's search: not if
    they exceed the best so far (none of them could replace it) or the cutoff by
    `_CUTOFF_SLACK` (none of them could be chosen by a search whose result is
    within the cutoff)."""
    return bound <= cutoff + _CUTOFF_SLACK and (best is None or bound <= best.cost + 1e-9)


def _panel_bytes(gemm: Gemm, rows: int, k1: int, kc: int) -> int:
    """GM bytes of A one M tile's panels of `k1` read: a convolution's panel narrower
    than its window reads the same input rows as a whole one."""
    full, rest = divmod(gemm.k, k1)
    return full * gemm.a_gm_bytes(rows, k1, kc) + (gemm.a_gm_bytes(rows, rest, kc) if rest else 0)


def _k1_choices(k0f: int, most: int) -> list[int]:
    """The L1 panel depths tried (fractal columns): k0f times powers of two, and the most that fits."""
    choices = []
    k1f = k0f
    while k1f < most:
        choices.append(k1f)
        k1f *= 2
    return [*choices, most]


def _align(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _rates(profile: SocProfile, gemm: Gemm, cores: int, count: int = 1, a_in_l2: bool = False) -> _GmRates:
    """`tile_gemm`'s GM rates (a matmul's, without epilogue traffic) for `count` Gemms
    of one A: A's bytes once, each B's and each result's. With `a_in_l2`, A's bytes
    are L2's from the first read where the working set fits L2 (an earlier phase of
    the kernel read them)."""
    kc = cube_k(profile, gemm.in_dtype)
    a_whole = gemm.batch * gemm.a_gm_bytes(gemm.m, gemm.k, kc)
    b_whole = count * gemm.batch * gemm.b_gm_bytes(gemm.k, gemm.n, kc)
    working_set = a_whole + b_whole + count * gemm.batch * gemm.m * gemm.n * gemm.out_bytes
    if working_set > profile.l2_bytes:
        return _GmRates.of(profile, cores, None, a_whole, b_whole)
    return _GmRates.of(profile, cores, working_set - (a_whole if a_in_l2 else 0), a_whole, b_whole)


def gemm_cost(
    profile: SocProfile, gemm: Gemm, t: CubeTiling, epilogue_ub: Callable[[int, int], int], bias_table: bool, a_in_l2: bool = False,
) -> float:
    """What the Gemm split as `t` costs (without epilogue traffic, on `t.block_dim`
    cores): its largest block's cheapest tile (`_tile_block`), its pipes or its
    traffic (`_chip`), in cycles; `a_in_l2` as in `_rates`."""
    search = _Search(profile, gemm, _rates(profile, gemm, t.block_dim, a_in_l2=a_in_l2), epilogue_ub, bias_table, 0.0, 0.0)
    units = (gemm.batch, -(-gemm.m // FRACTAL), -(-gemm.n // FRACTAL))
    bb, mbf, nbf = per = tuple(-(-u // d) for u, d in zip(units, (t.batch_dim, t.m_dim, t.n_dim)))
    tile = _tile_block(search, per, t.block_dim, math.inf)
    if tile is None:
        return math.inf
    mt, nt = -(-mbf // tile.m0f), -(-nbf // tile.n0f)
    a = bb * mt * search.a_reads(tile.m0f, search.kf) if tile.a_resident else bb * mt * nt * search.a_reads(tile.m0f, tile.k1f)
    b = bb * nt * search.b_tile(tile.n0f) * (1 if tile.b_resident else mt)
    return max(tile.pipes, _chip(search.gm, t.block_dim, a, b, bb * mbf * nbf * FRACTAL * FRACTAL * gemm.out_bytes))


def _chip(gm: _GmRates, used: int, a: float, b: float, stores: float) -> float:
    """`_GmRates.cycles` with GM's bytes and L2's at once, as the simulator's two
    ledgers serve them (`cycles` adds them, to keep the GM bytes of a tiling down):
    what the projections' estimates compare, three phases re-reading their input
    against one that reads it once."""
    total = used * (a + b + stores)
    if gm.working_set is not None:
        hot = max(0.0, total - gm.working_set)
    else:
        hot = sum(used * x - whole for whole, x in ((gm.a_whole, a), (gm.b_whole, b)) if gm._reused(whole, used * x, total))
    return max((total - hot) / gm.chip, hot / gm.l2, (a + b) / gm.load, stores / gm.store)


def tile_shared_a(
    profile: SocProfile, gemm: Gemm, count: int, cores: int, fits: Callable[[int, int, bool], bool],
) -> tuple[CubeTiling, float] | None:
    """`shared_a_program`'s split (exactly `cores` blocks where one exists) and L0 tile
    for `count` Gemms of one A, and its cost in cycles: the least, of the m0 x n0 tiles
    that `fits` (its L1 and UB, with one A buffer where a block has one M tile), by
    `_shared_cost`. None where no tile fits."""
    kc = cube_k(profile, gemm.in_dtype)
    kf = -(-gemm.k // kc)
    search = _Search(profile, gemm, _rates(profile, gemm, cores, count), lambda m, n: 0, False, 0.0, 0.0)
    units = (gemm.batch, -(-gemm.m // FRACTAL), -(-gemm.n // FRACTAL))
    best: tuple[float, float, tuple[int, ...], int, int] | None = None
    for per, dims in block_splits(units, cores, True).items():
        _, mbf, nbf = per
        for m0f in range(1, min(mbf, search.cap_a) + 1):
            for n0f in range(1, min(nbf, search.cap_c // m0f, search.cap_b) + 1):
                if not fits(m0f * FRACTAL, n0f * FRACTAL, m0f >= mbf):
                    continue
                cost, pipes = _shared_cost(search, count, per, math.prod(dims), m0f, n0f)
                if best is None or cost < best[0] - 1e-9 or (cost <= best[0] + 1e-9 and pipes < best[1]):
                    best = (cost, pipes, dims, m0f, n0f)
    if best is None:
        return None
    cost, _, (batch_dim, m_dim, n_dim), m0f, n0f = best
    bb, mbf, nbf = (-(-u // d) for u, d in zip(units, (batch_dim, m_dim, n_dim)))
    k0f = min(kf, search.cap_a // m0f, search.cap_b // n0f)
    tiling = CubeTiling(batch_dim, m_dim, n_dim, bb, min(mbf * FRACTAL, gemm.m), nbf * FRACTAL, m0f * FRACTAL, n0f * FRACTAL, k0f * kc, kf * kc, True, kc)
    return tiling, cost


def _shared_cost(s: _Search, count: int, per: tuple[int, ...], used: int, m0f: int, n0f: int) -> tuple[float, float]:
    """The cost of a block of `per` in `shared_a_program` with m0f x n0f tiles (and
    the time of its pipes), as `_tile_block` costs one Gemm's: per N tile each B's
    whole K loaded once and kept, per M tile A's whole K loaded once for the `count`
    products; the cube, MTE1, stores and drains `count` times a Gemm's; the chip's
    traffic with A's bytes once (`_chip`). The first loads are paid per N
    tile (A's first tile and every B: an N tile's B's load into the buffers the
    previous one used, after it, and the first tile's products wait for them in turn)."""
    gemm, gm = s.gemm, s.gm
    bb, mbf, nbf = per
    k0f = min(s.kf, s.cap_a // m0f, s.cap_b // n0f)
    nt = -(-nbf // n0f)
    tiles = bb * -(-mbf // m0f) * nt
    step = m0f * n0f * k0f + MMAD_OVERHEAD
    step_mte1 = (m0f * L0A_FRACTAL_CYCLES + n0f * L0B_FRACTAL_CYCLES) * k0f
    steps = count * tiles * -(-s.kf // k0f)
    out_bytes = count * bb * mbf * nbf * FRACTAL * FRACTAL * gemm.out_bytes
    last = s.gm.latency + m0f * n0f * FRACTAL * FRACTAL * (gemm.out_bytes / gm.store + s.drain)
    stores = count * tiles * gm.latency + out_bytes / gm.store
    vector = out_bytes / gemm.out_bytes * s.drain
    a_loads, b_loads = tiles * s.a_reads(m0f, s.kf), count * bb * nt * s.b_tile(n0f)
    loads = gm.load_cycles(tiles, a_loads, gemm.a_nd) + gm.load_cycles(count * bb * nt, b_loads, gemm.b_nd)
    first = gm.load_cycles(1, s.a_first(m0f, s.kf), gemm.a_nd) + gm.load_cycles(count, count * s.b_tile(n0f), gemm.b_nd) + step_mte1
    pipes = max(bb * nt * first + steps * max(step, step_mte1) + last, loads + step_mte1 + step + last, stores, vector)
    return max(pipes, _chip(gm, used, a_loads, b_loads, out_bytes)), pipes


@dataclass(frozen=True)
class EpiValue:
    """A value of a cube kernel's epilogue in UB: a whole tile ("tile"), one row of
    the tile's columns ("col": a bias or per-channel operand) or one element. The
    value is a graph value, or a name for one in the workspace."""

    value: Hashable
    kind: str
    element_bytes: int
    double: bool
    """Two buffers: it is loaded or stored while the other tile computes."""

    def elements(self, m: int, n: int) -> int:
        return {"tile": m * n, "col": n, "one": 1}[self.kind]

    def nbytes(self, m: int, n: int) -> int:
        return self.elements(m, n) * self.element_bytes


@dataclass
class Epilogue:
    """What happens to an m x n result tile after its mmads (see `cube_program`)."""

    kind: str
    """"fix": FIX writes GM; "vector": V drains L0C into UB; "mixed": FIX writes
    the workspace and V reads it back into UB."""
    result: Hashable
    """The cube op's result."""
    tail: Sequence[Operation] = ()
    values: list[EpiValue] = field(default_factory=list)
    loads: list[Hashable] = field(default_factory=list)
    stores: list[Hashable] = field(default_factory=list)
    bias: Hashable | None = None
    """Added in UB (a "col" load) where there is no FIX pipe, else through the bias table."""
    scale: bool = False
    """A GEMM's alpha other than 1: one VMULS per tile."""
    addend: Hashable | None = None
    """A GEMM's c that is no bias: added per tile (after a VMULS by beta if `addend_scaled`)."""
    addend_scaled: bool = False
    nd_store: bool = False
    """The scope ends in a TransData FRACTAL_NZ -> ND that FIX does on its way out."""
    aliases: dict[Hashable, Hashable] = field(default_factory=dict)
    """Values whose tile is another value's buffer (a TransData to ND that MTE3 does as it stores)."""

    @property
    def columns(self) -> list[EpiValue]:
        """The per-column and single operands it loads (a bias added in UB, per-channel factors)."""
        return [v for v in self.values if v.value in self.loads and v.kind != "tile"]

    def ub_bytes(self, profile: SocProfile, m: int, n: int) -> int:
        """UB of an m x n tile's epilogue, run in pieces of `rows` rows."""
        return self._ub(profile, self.rows(profile, m, n), n)

    def rows(self, profile: SocProfile, m: int, n: int) -> int:
        """The rows of the pieces an m x n tile's epilogue runs in: the whole tile where
        its buffers fit the UB, else the fewest equal pieces of whole fractals that do
        (a tile of the whole L0C has more elements than the UB holds buffers for)."""
        pieces = 1
        while True:
            rows = min(m, _align(-(-m // pieces), FRACTAL))
            if rows <= FRACTAL or self._ub(profile, rows, n) <= profile.ub_bytes:
                return rows
            pieces += 1

    def _ub(self, profile: SocProfile, m: int, n: int) -> int:
        """UB of one vector core: where a mixed epilogue's vector cores share each tile
        (`SocProfile.vector_per_cube`), its share of the rows of every tile-shaped
        value, and the whole of every per-column one."""
        if self.kind == "fix":
            return 0
        share = self.sharing(profile)
        return sum(aligned(profile, "UB", -(-v.nbytes(m, n) // share) if v.kind == "tile" else v.nbytes(m, n)) * (2 if v.double else 1) for v in self.values)

    def sharing(self, profile: SocProfile) -> int:
        """The vector cores that run the epilogue's pieces between them, each its share of the rows."""
        return profile.vector_per_cube if self.kind == "mixed" else 1

    def ub_alloc(self, profile: SocProfile, v: EpiValue, m: int, n: int) -> int:
        """The UB bytes a program allocates for `v` in pieces of m x n: in a kernel whose
        vector cores share its tiles, UB is theirs together (`verify_fits`), in which a
        tile-shaped value is whole and a per-column one is every core's copy."""
        return v.nbytes(m, n) * (1 if v.kind == "tile" else self.sharing(profile))

    def gm_bytes_per_element(self) -> float:
        """GM bytes the epilogue loads per result element beyond the result's store: its
        tile-shaped loads (a residual addend)."""
        return sum(v.element_bytes for v in self.values if v.kind == "tile" and v.value in self.loads)

    def scratch_bytes_per_element(self, out_bytes: int) -> float:
        """A mixed epilogue's round trip through the workspace per result element: FIX
        writes the tile, the vector half loads it."""
        return 2 * out_bytes if self.kind == "mixed" else 0

    def vector_cycles_per_element(self, out_bytes: int) -> float:
        """V cycles per result element of the epilogue's instructions (tiling cost only:
        `VECTOR_REPEAT_CYCLES` a 256-byte repeat), beside the drain from L0C."""
        if self.kind == "fix":
            return 0.0
        steps = sum(len(recipe(op)) for op in self.tail) + self.scale + (self.bias is not None) + 2 * (self.addend is not None)
        return steps * VECTOR_REPEAT_CYCLES * out_bytes / REPEAT_BYTES

    def workspace(self, m: int, n: int, out_bytes: int) -> int:
        """GM bytes one block needs (two tiles) when FIX hands the tile to V through GM."""
        return 2 * m * n * out_bytes if self.kind == "mixed" else 0


def cube_program(
    prog: Program, gemm: Gemm, t: CubeTiling, e: Epilogue, gm: dict[Hashable, SSAValue],
    a: SSAValue, b: SSAValue, workspace: SSAValue | None,
) -> Ops:
    """One block's program for a Gemm: `gm` maps graph values to their GM buffers,
    `a` and `b` are the GM buffers of the operands."""
    p, kc, in_b = prog.profile, t.kc, gemm.in_bytes
    l1_a_bytes = gemm.a_l1_bytes(t.m0, gemm.k if t.a_resident else t.k1, kc)
    l1_a = (prog.alloc("L1", l1_a_bytes),) * 2 if t.a_single else prog.pair("L1", l1_a_bytes)
    l1_b_bytes = (_align(gemm.k, kc) if t.b_resident else t.k1) * t.n0 * in_b
    biased = e.bias is not None and p.fix_pipe
    n_tiles = -(-t.nb // t.n0)
    in_one = _batches_in_one(p, gemm, t.bb, n_tiles, t.b_resident, t.a_resident, t.m0 // FRACTAL, t.n0 // FRACTAL, t.k1 // kc, biased)
    if in_one:  # the batches' B side by side in one buffer
        l1_b = (prog.alloc("L1", t.bb * l1_b_bytes),) * 2
    else:
        l1_b = (prog.alloc("L1", l1_b_bytes),) * 2 if t.b_single else prog.pair("L1", l1_b_bytes)
    l0a = prog.pair("L0A", t.m0 * t.k0 * in_b)
    l0b = prog.pair("L0B", t.k0 * t.n0 * in_b)
    l0c = prog.pair("L0C", t.m0 * t.n0 * ACC_BYTES) if t.l0c_buffers == 2 else (prog.alloc("L0C", t.m0 * t.n0 * ACC_BYTES),) * 2
    table = None
    # an N tile's bias in a slot of its own where two fit the bias table (the next N
    # tile's loading while this one's mmads read it); where A stays, the block's whole
    # bias; where the batches load their B in one, all their biases
    tables = 2 if biased and not t.a_resident and not in_one and 2 * t.n0 * ACC_BYTES <= BIAS_TABLE_BYTES else 1
    if biased:
        columns_held = t.nb if t.a_resident else t.n0 * (t.bb if in_one else 1)
        table = [(prog.alloc("L1", columns_held * in_b), prog.alloc("BT", columns_held * ACC_BYTES)) for _ in range(tables)]
    kept = {v.value: v for v in e.columns} if t.cols_resident else {}
    loads = [v for v in e.loads if v not in kept]
    rows = e.rows(p, t.m0, t.n0)
    ub = {
        v.value: prog.pair("UB", e.ub_alloc(p, v, rows, t.n0)) if v.double and v.value not in kept else (prog.alloc("UB", e.ub_alloc(p, v, rows, t.n0)),) * 2
        for v in e.values
    }
    ub.update({alias: ub[of] for alias, of in e.aliases.items()})
    drain = "FIX" if e.kind in ("fix", "mixed") else "V"
    a_mode = "nd2nz" if gemm.a_nd else "normal"
    b_mode = "nd2nz" if gemm.b_nd else "normal"

    def acc(sc: int) -> int:
        """The L0C slot (and its free event) of a tile of parity `sc`."""
        return sc if t.l0c_buffers == 2 else 0

    def k0_steps(sa: int, sb: int, sc: int, m: int, n: int) -> Ops:
        def make(sz: int, k: int) -> Ops:
            ops: Ops = [WaitFlagOp("M", "MTE1", sz)]
            ops.append(copy(p, l1_a[sa], l0a[sz], _align(m, FRACTAL) * k * in_b, "img2col" if gemm.img2col else "normal"))
            ops.append(copy(p, l1_b[sb], l0b[sz], k * n * in_b))
            ops += sync("MTE1", "M", sz)
            ops.append(MmadOp(l0a[sz], l0b[sz], l0c[acc(sc)], _align(m, FRACTAL), _align(k, kc), n, gemm.in_dtype))
            ops.append(SetFlagOp("M", "MTE1", sz))
            return body(ops)

        return make

    # The L1 panels and the L0 steps run as two streams of ping-pong slots through
    # all the inner tiles (M tiles of an N tile, or N tiles of an M tile where A
    # stays in L1), primed and drained around them, so that MTE2 and MTE1 load
    # ahead across tile and panel boundaries. A tile's first panel and step then
    # take the parity of the panels and steps before it: with an odd count per
    # tile that is the tile's own L0C slot, with an even one always slot 0.
    panels = split(gemm.k, t.k1)
    steps = iterations(*split(t.k1, t.k0))
    steps_per_tile = panels[0] * steps + (iterations(*split(panels[2], t.k0)) if panels[2] else 0)

    def k1_panels(sc: int, m: int, n: int, held: int) -> Ops:
        """The K panels of an m x n tile; `held` is the slot of the operand resident in L1."""
        first_panel = sc if iterations(*panels) % 2 else 0
        first_step = sc if steps_per_tile % 2 else 0

        def make(sp: int, k1: int) -> Ops:
            ops: Ops = [WaitFlagOp("MTE1", "MTE2", sp)]
            if not t.a_resident:
                ops.append(copy(p, a, l1_a[sp], gemm.a_gm_bytes(m, k1, kc), a_mode))
            if not t.b_resident:
                ops.append(copy(p, b, l1_b[sp], gemm.b_gm_bytes(k1, n, kc), b_mode))
            ops += sync("MTE2", "MTE1", sp)
            start = (first_step + (sp - first_panel) % 2 * steps) % 2
            sa, sb = held if t.a_resident else sp, held if t.b_resident else sp
            ops += double_buffered(*split(k1, t.k0), k0_steps(sa, sb, sc, m, n), [], start)
            ops.append(SetFlagOp("MTE1", "MTE2", sp))
            return body(ops)

        return double_buffered(*panels, make, [], first_panel)

    # The streams and the tiles' free events (L0C, and UB for an epilogue there) are
    # primed once for the block and run on through all its tiles, across N tiles (M
    # tiles where A stays) and batches, so that the next tile's first panels load
    # while the last one computes. A tile's L0C slot is then its parity in the whole
    # block: each outer iteration starts its tiles at the parity of those before it.
    ub_frees = []
    if e.kind != "fix":
        ub_frees.append(("MTE3", "V"))
        if loads or e.kind == "mixed":
            ub_frees.append(("V", "MTE2"))
    frees = [("MTE1", "MTE2"), ("M", "MTE1"), (drain, "M"), *ub_frees]

    def primed(ops: Ops, resident: bool) -> Ops:
        """`ops` between the priming and the draining of every free event (with the
        resident operand's two L1 slots, events 2 and 3, where it has them)."""
        events = [(c, d, s) for c, d in frees for s in (0, 1)]
        if resident:
            events += [("MTE1", "MTE2", 2 + s) for s in (0, 1)]
        if table is not None and tables == 2:
            events += [(c, d, 4 + s) for c, d in (("MTE1", "MTE2"), ("M", "MTE1")) for s in (0, 1)]
        return [*(SetFlagOp(*key) for key in events), *ops, *(WaitFlagOp(*key) for key in events)]

    def inner_tiles(runs: Sequence[tuple[int, int, int]], shape: Callable[[int], tuple[int, int]], held: int, start: int, before: Ops) -> Ops:
        """The result tiles of one resident operand (`held` its L1 slot): `runs` of
        `split`s of the other dimension, `shape` a tile's m x n from its size there,
        the first in L0C slot `start`; `before` loads what the tiles' epilogues keep."""

        def make(sc: int, size: int) -> Ops:
            m, n = shape(size)
            head = [WaitFlagOp(drain, "M", acc(sc)), *k1_panels(sc, m, n, held), *sync("M", drain, sc)]
            return body(head + _drain(p, gemm, e, gm, l0c[acc(sc)], acc(sc), ub, sc, m, n, rows, workspace, loads))

        return [*before, *double_buffered_runs(runs, make, [], start)]

    def columns(n: int) -> Ops:
        """The resident per-column operands of n columns, once V is done with the previous tile's."""
        if not kept:
            return []
        return [*sync("V", "MTE2", 2), *(copy(p, gm[v], ub[v][0], value.nbytes(t.m0, n)) for v, value in kept.items()), *sync("MTE2", "V", 2)]

    def bias_table(n: int, slot: int = 0) -> Ops:
        """n columns of bias into the bias table (its `slot` where it has two: freed by
        `bias_free`, its events 4 and 5); in the one table, once the cube is done with it."""
        if table is None or e.bias is None:
            return []
        staged, bt = table[slot % tables]
        if tables == 2:
            ops = [WaitFlagOp("MTE1", "MTE2", 4 + slot), copy(p, gm[e.bias], staged, n * in_b), *sync("MTE2", "MTE1", 4 + slot)]
            ops += [WaitFlagOp("M", "MTE1", 4 + slot), copy(p, staged, bt, n * ACC_BYTES), SetFlagOp("MTE1", "MTE2", 4 + slot)]
            return ops + sync("MTE1", "M", 4 + slot)
        ops = [*sync("MTE1", "MTE2", 4), copy(p, gm[e.bias], staged, n * in_b)]
        ops += [*sync("MTE2", "MTE1", 4), *sync("M", "MTE1", 4), copy(p, staged, bt, n * ACC_BYTES)]
        return ops + sync("MTE1", "M", 4)

    def bias_free(slot: int) -> Ops:
        """The cube is done with the bias in `slot` (of two)."""
        return [SetFlagOp("M", "MTE1", 4 + slot)] if table is not None and tables == 2 else []

    m_tiles_per_n = sum(iterations(*run) for run in t.m_runs())

    def n_tile(sb: int, n: int) -> Ops:
        """An N tile: its M tiles, after B's whole K where it stays (in slot `sb`)."""
        start = sb * (m_tiles_per_n % 2)
        if in_one:  # its B and bias loaded with the other batches'
            return body(inner_tiles(t.m_runs(), lambda m: (m, n), sb, start, columns(n)))
        tiles = [*bias_table(n, sb), *inner_tiles(t.m_runs(), lambda m: (m, n), sb, start, columns(n)), *bias_free(sb)]
        if not t.b_resident:
            return body(tiles)
        ops: Ops = [WaitFlagOp("MTE1", "MTE2", 2 + sb), copy(p, b, l1_b[sb], gemm.b_gm_bytes(gemm.k, n, kc), b_mode)]
        return body([*ops, *sync("MTE2", "MTE1", 2 + sb), *tiles, SetFlagOp("MTE1", "MTE2", 2 + sb)])

    def m_tile(sa: int, m: int) -> Ops:
        """A resident: an M tile loading A's whole K into its slot (the next one's
        loading during this one's N tiles), its N tiles inner."""
        runs = [split(t.nb, t.n0)]
        ops: Ops = [WaitFlagOp("MTE1", "MTE2", 2 + sa), copy(p, a, l1_a[sa], gemm.a_gm_bytes(m, gemm.k, kc), a_mode)]
        ops += [*sync("MTE2", "MTE1", 2 + sa), *inner_tiles(runs, lambda n: (m, n), sa, sa * (iterations(*runs[0]) % 2), [])]
        return body(ops + [SetFlagOp("MTE1", "MTE2", 2 + sa)])

    if t.a_resident:
        # the bias table (the block's whole bias) and the resident columns (where the
        # block has one N tile) load once per batch, before its M tiles
        return repeat(t.bb, lambda: primed([*bias_table(t.nb), *columns(t.nb), *double_buffered_runs(t.m_runs(), m_tile, [])], True))
    if in_one:
        b_all = [WaitFlagOp("MTE1", "MTE2", 2), copy(p, b, l1_b[0], t.bb * gemm.b_gm_bytes(gemm.k, t.nb, kc), b_mode), *sync("MTE2", "MTE1", 2)]
        return primed([*b_all, *bias_table(t.bb * t.nb), *batched(t.bb, split(t.nb, t.n0), n_tile), SetFlagOp("MTE1", "MTE2", 2)], True)
    return primed(batched(t.bb, split(t.nb, t.n0), n_tile), t.b_resident)


def shared_a_program(
    prog: Program, gemm: Gemm, t: CubeTiling, epilogues: Sequence[Epilogue], gm: dict[Hashable, SSAValue],
    a: SSAValue, bs: Sequence[SSAValue],
) -> Ops:
    """One block's program for matmuls of one A by several B's (`bs`, one shape, each
    with its epilogue, whose loads are per-column operands): M tiles outer, each
    loading A's whole K once into L1 for every B (N tiles of the B's stay resident
    in L1, each B loaded just before its first use, so that the later ones load while
    the cube works on the first); a tile's products with the B's take the two L0C
    accumulators in turn, each draining while the next computes, and the epilogues'
    per-column operands are loaded once per N tile. On a FIX part a bias goes through
    the bias table: each B's bias loaded into L1 once per N tile with its B (not
    ahead of the first tile's A, where three tiny loads' latencies would hold up the
    first mmad), and before each product into the half of the table its
    accumulator's (the product before last's half: the move does not wait for the
    cube). Where a block has one M tile, A loads in two halves of K, the first B
    between them, so that the first product starts on the first half (its later
    steps wait for the second, on A's unused event 1). Events: A's slots 0 and 1,
    B j (and its bias) MTE2 -> MTE1 2 + j (where the part has too few ids, the last
    B's share the last one and load together before the first of them), the columns
    V <-> MTE2 2, and the table's halves M <-> MTE1 2 and 3 (`shared_a_events`)."""
    p, kc, in_b = prog.profile, t.kc, gemm.in_bytes
    count = len(bs)
    a_bytes = gemm.a_l1_bytes(t.m0, gemm.k, kc)
    l1_a = (prog.alloc("L1", a_bytes),) * 2 if t.mb <= t.m0 else prog.pair("L1", a_bytes)  # one M tile: nothing to load ahead
    l1_b = [prog.alloc("L1", _align(gemm.k, kc) * t.n0 * in_b) for _ in bs]
    l0a = prog.pair("L0A", t.m0 * t.k0 * in_b)
    l0b = prog.pair("L0B", t.k0 * t.n0 * in_b)
    l0c = prog.pair("L0C", t.m0 * t.n0 * ACC_BYTES)
    columns = {v.value: v for e in epilogues for v in e.columns}
    piece_rows = [e.rows(p, t.m0, t.n0) for e in epilogues]
    ub = [
        {v.value: prog.pair("UB", e.ub_alloc(p, v, rows, t.n0)) if v.double and v.value not in columns else (prog.alloc("UB", e.ub_alloc(p, v, rows, t.n0)),) * 2 for v in e.values}
        for e, rows in zip(epilogues, piece_rows)
    ]
    biases = {j: e.bias for j, e in enumerate(epilogues) if e.bias is not None and p.fix_pipe}
    l1_bias = {j: prog.alloc("L1", t.n0 * in_b) for j in biases}
    table = prog.pair("BT", t.n0 * ACC_BYTES) if biases else None
    drain = "FIX" if epilogues[0].kind == "fix" else "V"
    a_mode = "nd2nz" if gemm.a_nd else "normal"
    b_mode = "nd2nz" if gemm.b_nd else "normal"
    steps = iterations(*split(gemm.k, t.k0))
    b_events = [min(2 + j, p.event_ids - 1) for j in range(count)]

    def product(sc: int, j: int, m: int, n: int, second_half: int = 0) -> Ops:
        """Tile `sc`'s product with B j into accumulator (sc + j) % 2, then its drain;
        with `second_half`, its steps from that K on wait for A's second half (its
        MTE2 -> MTE1 event 1 - sc)."""
        cs = (sc + j) % 2

        def make(sz: int, k: int) -> Ops:
            ops: Ops = [WaitFlagOp("M", "MTE1", sz)]
            ops.append(copy(p, l1_a[sc], l0a[sz], _align(m, FRACTAL) * k * in_b, "img2col" if gemm.img2col else "normal"))
            ops.append(copy(p, l1_b[j], l0b[sz], k * n * in_b))
            ops += sync("MTE1", "M", sz)
            ops.append(MmadOp(l0a[sz], l0b[sz], l0c[cs], _align(m, FRACTAL), _align(k, kc), n, gemm.in_dtype))
            ops.append(SetFlagOp("M", "MTE1", sz))
            return body(ops)

        ops: Ops = [WaitFlagOp(drain, "M", cs)]
        if table is not None and j in biases:
            ops += [WaitFlagOp("M", "MTE1", 2 + cs), copy(p, l1_bias[j], table[cs], n * ACC_BYTES), *sync("MTE1", "M", 2 + cs)]
        start = (count * sc + j) * steps % 2  # the L0 steps run on across products
        if second_half:
            ops += double_buffered(*split(second_half, t.k0), make, [], start)
            start = (start + iterations(*split(second_half, t.k0))) % 2
            ops += [WaitFlagOp("MTE2", "MTE1", 1 - sc), *double_buffered(*split(gemm.k - second_half, t.k0), make, [], start)]
        else:
            ops += double_buffered(*split(gemm.k, t.k0), make, [], start)
        if table is not None and j in biases:
            ops.append(SetFlagOp("M", "MTE1", 2 + cs))
        ops += sync("M", drain, cs)
        return ops + _drain(p, gemm, epilogues[j], gm, l0c[cs], cs, ub[j], cs, m, n, piece_rows[j], None, [])

    # Where the block has one M tile (A's event 1 free), A loads in two halves of K,
    # the first B between them, so that the first product starts on the first half.
    halves = t.mb <= t.m0 and steps >= 2
    second_half = steps // 2 * t.k0 if halves else 0

    def tile(n: int, first: bool) -> Callable[[int, int], Ops]:
        def make(sc: int, m: int) -> Ops:
            lead = second_half if first else 0
            ops: Ops = [WaitFlagOp("MTE1", "MTE2", sc), copy(p, a, l1_a[sc], gemm.a_gm_bytes(m, lead or gemm.k, kc), a_mode), *sync("MTE2", "MTE1", sc)]
            for j in range(count):
                if first and (j == 0 or b_events[j] != b_events[j - 1]):  # the B's of one event load together, each with its bias
                    group = [i for i in range(count) if b_events[i] == b_events[j]]
                    for i in group:
                        ops.append(copy(p, bs[i], l1_b[i], gemm.b_gm_bytes(gemm.k, n, kc), b_mode))
                        if i in biases:
                            ops.append(copy(p, gm[biases[i]], l1_bias[i], n * in_b))
                    ops += sync("MTE2", "MTE1", b_events[j])
                if lead and j == 0:
                    ops += [copy(p, a, l1_a[sc], gemm.a_gm_bytes(m, gemm.k - lead, kc), a_mode), SetFlagOp("MTE2", "MTE1", 1 - sc)]
                ops += product(sc, j, m, n, lead if j == 0 else 0)
            return body(ops + [SetFlagOp("MTE1", "MTE2", sc)])

        return make

    def n_tile(n: int) -> Ops:
        ops: Ops = []
        if columns:
            held = {v: pair[0] for u in ub for v, pair in u.items()}
            ops += [*sync("V", "MTE2", 2), *(copy(p, gm[v], held[v], c.nbytes(t.m0, n)) for v, c in columns.items())]
            ops += sync("MTE2", "V", 2)
        streams = [SetFlagOp(c, d, s) for c, d in (("MTE1", "MTE2"), ("M", "MTE1")) for s in (0, 1)]
        streams += [SetFlagOp("M", "MTE1", 2 + s) for s in ((0, 1) if biases else ())]
        frees = [(drain, "M", 0), *([("MTE3", "V", 0)] if drain == "V" else [])]
        full, size, tail = split(t.mb, t.m0)
        ops += [*streams, *(SetFlagOp(c, d, e + s) for s in (0, 1) for c, d, e in frees)]
        ops += tile(n, True)(0, size if full else tail)
        ops += double_buffered(full - 1, size, tail, tile(n, False), [], 1) if full else []
        ops += [*(WaitFlagOp(c, d, e + s) for s in (0, 1) for c, d, e in frees), *(WaitFlagOp(*op.key) for op in streams)]
        return body(ops)

    return repeat(t.bb, lambda: sequence(*split(t.nb, t.n0), n_tile))


def shared_a_events(bias_table: bool) -> int:
    """The fewest event ids `shared_a_program` runs with: A's two slots and one for the
    B's; with the bias table, its halves' M <-> MTE1 2 and 3."""
    return 4 if bias_table else 3


def _drain(
    p: SocProfile, gemm: Gemm, e: Epilogue, gm: dict[Hashable, SSAValue], acc: SSAValue, acc_event: int,
    ub: dict[Hashable, tuple[SSAValue, SSAValue]], slot: int, m: int, n: int, rows: int, workspace: SSAValue | None,
    loads: Sequence[Hashable],
) -> Ops:
    """An m x n result tile out of L0C (`acc`, freed for the cube by `acc_event`),
    through the epilogue's buffers (of `rows` rows: `Epilogue.rows` of the full tile,
    which a shorter last tile must not exceed), into GM, in pieces of them (the first
    in the buffers of `slot`, the next ones in turn, so that they pipeline as tiles do);
    `loads` are the operands it loads (the epilogue's, but those resident over the N tile)."""
    tile_bytes = m * n * gemm.out_bytes
    if e.kind == "fix":
        return [copy(p, acc, gm[e.stores[0]], tile_bytes, "nz2nd" if gemm.out_nd else "normal"), SetFlagOp("FIX", "M", acc_event)]
    ops: Ops = []
    if e.kind == "mixed":
        assert workspace is not None
        ops += [copy(p, acc, workspace, tile_bytes), SetFlagOp("FIX", "M", acc_event), SetFlagOp("FIX", "MTE2", slot)]
    full, size, tail = split(m, rows)
    pieces = [size] * full + ([tail] if tail else [])
    for i, piece in enumerate(pieces):
        ops += _epilogue_piece(p, gemm, e, gm, acc, acc_event if i == len(pieces) - 1 else None, ub, (slot + i) % 2, piece, n, workspace, loads, i == 0)
    return ops


def _epilogue_piece(
    p: SocProfile, gemm: Gemm, e: Epilogue, gm: dict[Hashable, SSAValue], acc: SSAValue, acc_event: int | None,
    ub: dict[Hashable, tuple[SSAValue, SSAValue]], slot: int, m: int, n: int, workspace: SSAValue | None,
    loads: Sequence[Hashable], first: bool,
) -> Ops:
    """`m` rows of a tile through a vector or mixed epilogue: loaded (from the workspace
    or drained from L0C, which the last piece frees by `acc_event`), computed, stored.
    The operands it loads (a residual) go first: in a mixed epilogue the first piece
    waits for FIX's write of the tile only after them, so that they load while the
    cube computes the tile."""
    buffers = {v: pair[slot] for v, pair in ub.items()}
    sizes = {v.value: v.elements(m, n) for v in e.values}
    nbytes = {v.value: v.nbytes(m, n) for v in e.values}
    for alias, of in e.aliases.items():
        sizes[alias], nbytes[alias] = sizes[of], nbytes[of]
    piece_bytes = m * n * gemm.out_bytes
    reads = bool(loads) or e.kind == "mixed"
    ops: Ops = []
    if reads:
        ops.append(WaitFlagOp("V", "MTE2", slot))
    ops += [copy(p, gm[v], buffers[v], nbytes[v]) for v in loads]
    if e.kind == "mixed":
        if first:
            ops.append(WaitFlagOp("FIX", "MTE2", slot))
        ops.append(copy(p, workspace, buffers[e.result], piece_bytes))  # type: ignore[arg-type]
    if reads:
        ops += sync("MTE2", "V", slot)
    ops.append(WaitFlagOp("MTE3", "V", slot))
    if e.kind == "vector":
        ops.append(copy(p, acc, buffers[e.result], piece_bytes))
        if acc_event is not None:
            ops.append(SetFlagOp("V", "M", acc_event))
    out = dtype_name(gemm.out_dtype)
    if e.scale:
        ops += vec("VMULS", f"{out}_{out}_{out}", m * n, [buffers[e.result]], gemm.out_bytes)
    if e.bias is not None and not p.fix_pipe:
        ops += vec("VADD", f"{out}_{out}_{out}", m * n, [buffers[e.result], buffers[e.bias]], gemm.out_bytes)
    if e.addend is not None:
        if e.addend_scaled:
            ops += vec("VMULS", f"{out}_{out}_{out}", sizes[e.addend], [buffers[e.addend]], gemm.out_bytes)
        ops += vec("VADD", f"{out}_{out}_{out}", m * n, [buffers[e.result], buffers[e.addend]], gemm.out_bytes)
    ops += emit_recipes(e.tail, buffers, lambda v: sizes[v], m)  # type: ignore[arg-type]
    if reads:
        ops.append(SetFlagOp("V", "MTE2", slot))
    ops += sync("V", "MTE3", slot)
    ops += [copy(p, buffers[v], gm[v], nbytes[v]) for v in e.stores]
    return ops + [SetFlagOp("MTE3", "V", slot)]


EPILOGUES = ("fix", "vector", "mixed")
"""The `epilogue` tiling parameter indexes these (see `Epilogue.kind`)."""


def _matrix(shape: tuple[int, ...], transposed: bool, vector_rows: bool) -> tuple[int, int]:
    """(rows, cols) of a matmul operand; a 1-D one is a row (A) or a column (B)."""
    if len(shape) == 1:
        return (1, shape[0]) if vector_rows else (shape[0], 1)
    rows, cols = shape[-2:]
    return (cols, rows) if transposed else (rows, cols)


def gemm_of(profile: SocProfile, op: ag.CubeOp) -> tuple[Gemm, int]:
    """The fractal matmul of a cube op, and its result's logical N (channels or columns)."""
    x, w, y = op.operands[0], op.operands[1], op.results[0]
    din, dout = ag.dtype_of(x.type), ag.dtype_of(y.type)
    cube_k(profile, din)  # refuses a dtype the SoC has no cube mode for
    c0 = formats.c0(din)
    out = ag.shape_of(y.type)
    nd = {v: ag.format_of(v.type) is None for v in (x, w, y)}
    if isinstance(op, ag.Conv2DOp) or isinstance(op, ag.FullyConnectionOp) and len(ag.shape_of(x.type)) == 4 == len(ag.shape_of(w.type)):
        if nd[x]:
            raise ModelError(f"{op.OP_TYPE} '{op.label}': its input must be in NC1HWC0 (run format-selection first)")
        n, cin, h, wd = ag.shape_of(x.type)
        cout, cin_g, kh, kw = ag.shape_of(w.type)
        if isinstance(op, ag.FullyConnectionOp):
            return Gemm(1, n, _align(cin, c0) * h * wd, _align(cout, FRACTAL), din, dout), cout
        groups = op.props.int("groups", 1)
        if groups == 1:
            batch, cin_opt, cout_opt = 1, _align(cin, c0), _align(cout, FRACTAL)
        else:
            cout_g = cout // groups
            enlarge = min(math.lcm(cin_g, c0) // cin_g, math.lcm(cout_g, FRACTAL) // cout_g, groups)
            batch, cin_opt, cout_opt = -(-groups // enlarge), _align(cin_g * enlarge, c0), _align(cout_g * enlarge, FRACTAL)
        strides, pads, dil = op.props.ints("strides"), op.props.ints("pads"), op.props.ints("dilations")
        conv = (h + pads[0] + pads[1], wd + pads[2] + pads[3], out[3], strides[2], (kh - 1) * dil[2] + 1)
        if formats.SMALL_CHANNEL_ATTR in op.attributes:  # NC1HWC0_C04: the window's cells share K
            k = _align(formats.C04 * kh * kw, c0)
            return Gemm(batch, n * out[2] * out[3], k, cout_opt, din, dout, conv=conv, window=kh * kw, pixel_channels=formats.C04), cout
        return Gemm(batch, n * out[2] * out[3], cin_opt * kh * kw, cout_opt, din, dout, conv=conv, window=kh * kw), cout
    if isinstance(op, ag.ConvFamilyOp):
        return _conv_family_gemm(op, c0, din, dout, nd[x], nd[y] and profile.fix_pipe)
    if isinstance(op, ag.FullyConnectionOp):
        axis = op.props.int("axis", 1)
        rows, k = math.prod(ag.shape_of(x.type)[:axis]), math.prod(ag.shape_of(x.type)[axis:])
        cols = op.props.int("num_output")
    else:
        ta, tb = {
            ag.MatMulV2Op: ("transpose_x1", "transpose_x2"), ag.BatchMatMulOp: ("adj_x1", "adj_x2"), ag.GemmOp: ("trans_a", "trans_b"),
        }[type(op)]
        rows, k = _matrix(ag.shape_of(x.type), op.props.bool(ta), True)
        _, cols = _matrix(ag.shape_of(w.type), op.props.bool(tb), False)
    batch = max(1, numel(y) // max(1, rows * cols))
    if batch > 1 and _shared_weight(op):
        rows, batch = batch * (rows if nd[x] and nd[y] else _align(rows, FRACTAL)), 1
    gemm = Gemm(batch, rows, k, cols, din, dout, a_nd=nd[x], b_nd=nd[w], out_nd=nd[y] and profile.fix_pipe)
    return gemm, cols


def _shared_weight(op: ag.CubeOp) -> bool:
    """Whether a batched matmul's batches share one 2-D weight: then it is one matmul of
    every batch's rows (a transformer's projection of [batch, sequence, hidden]), so its
    tiling keeps the weight in L1 across the batches instead of reading it once per
    batch. A's rows must follow batch after batch (untransposed); where A or the result
    is NZ, each batch's rows count padded to whole fractals, as the layout pads them."""
    if not isinstance(op, (ag.MatMulV2Op, ag.BatchMatMulOp)) or len(ag.shape_of(op.operands[1].type)) > 2:
        return False
    return not op.props.bool("transpose_x1" if isinstance(op, ag.MatMulV2Op) else "adj_x1")


def _conv_family_gemm(op: ag.ConvFamilyOp, c0: int, din: Attribute, dout: Attribute, nd_input: bool, nd_out: bool) -> tuple[Gemm, int]:
    """A transposed 2-D convolution in NC1HWC0 is the stride-1 convolution of its input
    with strides - 1 zeros inserted between cells and (dilated kernel - 1 - pad) cells
    of padding on each side (output_padding more at the end): the cube runs that
    convolution's img2col product, the inserted zeros included, as CANN's
    Conv2DTranspose does. A 3-D convolution (and a transposed one) in ND is the
    explicit img2col matrix [N * out cells, Cin/groups * kernel cells] times the filter
    per group, converted to NZ on its way into L1."""
    x, w = ag.shape_of(op.x.type), ag.shape_of(op.filter.type)
    out = ag.shape_of(op.y.type)
    groups = op.props.int("groups", 1)
    cin_g, cout_g = (w[0] // groups, w[1]) if op.TRANSPOSED else (w[1], w[0] // groups)
    kernel = w[2:]
    if nd_input or op.SPATIAL != 2:
        gemm = Gemm(groups, x[0] * math.prod(out[2:]), cin_g * math.prod(kernel), cout_g, din, dout, a_nd=True, b_nd=True, out_nd=nd_out)
        return gemm, cout_g * groups
    enlarge = min(math.lcm(cin_g, c0) // cin_g, math.lcm(cout_g, FRACTAL) // cout_g, groups)
    batch, cin_opt, cout_opt = -(-groups // enlarge), _align(cin_g * enlarge, c0), _align(cout_g * enlarge, FRACTAL)
    pads, dil, strides = op.props.ints("pads"), op.props.ints("dilations"), op.props.ints("strides")
    extra = op.props.ints("output_padding", (0,) * len(x))
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dil[2:])]
    padded = [
        (size - 1) * s + 1 + 2 * (span - 1) - pads[2 * i] - pads[2 * i + 1] + e
        for i, (size, s, span, e) in enumerate(zip(x[2:], strides[2:], spans, extra[2:]))
    ]
    conv = (padded[0], padded[1], out[3], 1, spans[0])
    window = math.prod(kernel)
    return Gemm(batch, x[0] * out[2] * out[3], cin_opt * window, cout_opt, din, dout, conv=conv, window=window), cout_g * groups


def _bias_of(op: ag.CubeOp, n_logical: int) -> SSAValue | None:
    """The per-column bias a cube op adds (a GEMM's c when it is one, times 1)."""
    if isinstance(op, ag.GemmOp):
        c = op.operands[2] if len(op.operands) > 2 else None
        if c is None or op.props.float("beta") != 1.0 or numel(c) != n_logical:
            return None
        return c
    return op.operands[2] if len(op.operands) > 2 else None


def _nd_store(tail: Sequence[Operation]) -> ag.TransDataOp | None:
    """The TransData FRACTAL_NZ -> ND that MTE3 (or FIX) does as the tile is stored: the
    scope's last op, or the one before a last Cast (`TransdataCastFusionPass`'s pair),
    which converts each element where it stands and so may run on the NZ tile first."""
    for at in (-1, -2):
        if len(tail) < -at or (at == -2 and not isinstance(tail[-1], ag.CastOp)):
            return None
        op = tail[at]
        if isinstance(op, ag.TransDataOp) and op.props.str("src_format") == "FRACTAL_NZ":
            return op
    return None


def epilogue_of(
    profile: SocProfile, cube: ag.CubeOp, tail: list[Operation], outputs: Sequence[SSAValue], n_logical: int
) -> Epilogue:
    """How the tiles of a cube op leave L0C (see `Epilogue`)."""
    result = cube.results[0]
    bias = _bias_of(cube, n_logical)
    scale = isinstance(cube, ag.GemmOp) and cube.props.float("alpha") != 1.0
    addend = None
    if isinstance(cube, ag.GemmOp) and len(cube.operands) > 2 and bias is None:
        addend = cube.operands[2]
    store = _nd_store(tail)
    to_nd = store is not None
    compute = [op for op in tail if op is not store]
    plain = not compute or (len(compute) == 1 and isinstance(compute[0], ag.ReluOp))
    if profile.fix_pipe and plain and not scale and addend is None and len(outputs) == 1:
        return Epilogue("fix", result, tail, [], [], list(outputs), bias, nd_store=to_nd)
    kind = "mixed" if profile.fix_pipe else "vector"
    inside = {result, *(r for op in tail for r in op.results)}
    stored = set(outputs)
    aliases = {store.results[0]: store.operands[0]} if store is not None else {}
    values = [EpiValue(result, "tile", element_bytes(result), kind == "mixed" or result in stored)]
    values += [EpiValue(r, "tile", element_bytes(r), r in stored) for op in compute for r in op.results]
    if to_nd:  # MTE3 writes the NZ tile's rows in ND: the tile is its input's buffer
        values = [replace(v, double=True) if v.value in aliases.values() else v for v in values]
    loads: list[SSAValue] = []
    extra = [v for op in tail for v in op.operands if v not in inside]
    if bias is not None and not profile.fix_pipe:
        extra.insert(0, bias)
    if addend is not None:
        extra.insert(0, addend)
    for v in extra:
        if v in loads:
            continue
        loads.append(v)
        n = numel(v)
        kind_ = "one" if n == 1 else "col" if n == n_logical else "tile"
        values.append(EpiValue(v, kind_, element_bytes(v), True))
    beta = cube.props.float("beta") if isinstance(cube, ag.GemmOp) else 1.0
    return Epilogue(kind, result, compute, values, loads, list(outputs), bias, scale, addend, beta != 1.0, aliases=aliases)
