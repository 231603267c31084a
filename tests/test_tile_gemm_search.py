"""The cube tiling search (`passes.lowering.cube.tile_gemm`) prunes and caches, and
chooses exactly the tilings of the plain search it replaced: that search is kept
here, as it was, as the oracle (`oracle_tile_gemm`), and over random convolution and
matmul Gemms (several dtypes, Ascend310P3 and Ascend910B1, with and without a bias
table, epilogue UB, GM bytes and vector work, whole chips and virtual instances)
both return the same `CubeTiling`. The oracle shares the cost's GM rates
(`cube._GmRates`: its `cycles`, and the `bound` that sorts and cuts the splits):
what it checks is the pruning, not the rates."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import IntegerType, bf16, f16, f32
from xdsl.ir import Attribute

from dialects import formats
from dialects.ascend_kernel import BIAS_TABLE_BYTES
from ge.core import soc as socs
from ge.core.errors import ModelError
from ge.core.soc import QUEUE_DEPTH, SocProfile
from passes.lowering.cube import (
    TIE,
    CubeTiling,
    Gemm,
    _align,
    _BlockTile,
    _GmRates,
    block_splits,
    cube_k,
    tile_gemm,
)
from passes.lowering.program import (
    ACC_BYTES,
    ACC_FRACTAL_BYTES,
    FRACTAL,
    FRACTAL_BYTES,
    L0A_FRACTAL_CYCLES,
    L0B_FRACTAL_CYCLES,
    MMAD_OVERHEAD,
    aligned,
)

SOCS = ("Ascend310P3", "Ascend910B1")
I8, I32 = IntegerType(8), IntegerType(32)
DTYPES = ((f16, f16), (f16, f32), (I8, I32), (bf16, f32), (f32, f32))
"""(input, output) dtypes of the cube; bfloat16 and float32 inputs only on Ascend910B1."""


# ------------------------------------------------------------- the oracle: the search as it was


def oracle_tile_gemm(
    profile: SocProfile, gemm: Gemm, cores: int, epilogue_ub: Callable[[int, int], int], bias_table: bool = False,
    exact: bool = False, epilogue_gm: float = 0.0, epilogue_vector: float = 0.0, epilogue_scratch: float = 0.0,
) -> CubeTiling:
    """`tile_gemm` as it was (commit 240e4db): every split up to the lower bound, every tile, every panel depth
    (its cost since: a mixed epilogue's workspace at L2's rate, and its loads on their own MTE2 where the cores are split;
    A's whole K resident per M tile as a third way to read the operands, and of equal costs and pipes the least time
    of the cube's side; tiles up to the whole L0C in one accumulator, each tile's mmads waiting for the previous drain;
    each panel's load held until MTE1's queue has room; the block's last tile drained at its own size)."""
    kc = cube_k(profile, gemm.in_dtype)
    units = (gemm.batch, -(-gemm.m // FRACTAL), -(-gemm.n // FRACTAL))
    kf = -(-gemm.k // kc)
    l1 = profile.l1_bytes - (BIAS_TABLE_BYTES if bias_table else 0)
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

    def lower_bound(per: tuple[int, ...], used: int) -> float:
        bb, mbf, nbf = per
        elements = bb * mbf * nbf * FRACTAL * FRACTAL
        a, b = bb * gemm.a_gm_bytes(mbf * FRACTAL, gemm.k, kc), bb * gemm.b_gm_bytes(gemm.k, nbf * FRACTAL, kc)
        return max(bb * mbf * nbf * kf, gm.bound(used, a, b, elements * epilogue_gm, bb * mbf * nbf * out_tile, elements * epilogue_scratch))

    candidates = sorted((lower_bound(per, math.prod(dims)), math.prod(dims), per, dims) for per, dims in block_splits(units, cores, exact).items())
    tiled: list[tuple[float, int, tuple[int, ...], _BlockTile]] = []
    for bound, used, per, dims in candidates:
        if tiled and bound > min(t[0] for t in tiled) * TIE:
            break
        tile = _oracle_block(profile, gemm, per, used, kc, kf, l1, gm, epilogue_ub, bias_table, epilogue_gm, epilogue_vector, epilogue_scratch)
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


def _oracle_panels(profile: SocProfile, gemm: Gemm, kc: int, m0f: int, n0f: int, k1f: int, b_k: int, b_single: bool = False) -> int:
    a = aligned(profile, "L1", gemm.a_l1_bytes(m0f * FRACTAL, k1f * kc, kc))
    return 2 * a + (1 if b_single else 2) * b_k * n0f * FRACTAL_BYTES



def _oracle_block(
    profile: SocProfile, gemm: Gemm, per: tuple[int, ...], used: int, kc: int, kf: int, l1: int, gm: _GmRates,
    epilogue_ub: Callable[[int, int], int], bias_table: bool, epilogue_gm: float, epilogue_vector: float, epilogue_scratch: float,
) -> _BlockTile | None:
    bb, mbf, nbf = per
    cap_a = profile.l0a_bytes // FRACTAL_BYTES // 2
    cap_b = profile.l0b_bytes // FRACTAL_BYTES // 2
    cap_c = profile.l0c_bytes // ACC_FRACTAL_BYTES // 2
    cap_n = BIAS_TABLE_BYTES // (FRACTAL * ACC_BYTES) if bias_table else cap_b
    out_bytes = bb * mbf * nbf * FRACTAL * FRACTAL * gemm.out_bytes
    epilogue = bb * mbf * nbf * FRACTAL * FRACTAL * epilogue_gm
    scratch = bb * mbf * nbf * FRACTAL * FRACTAL * epilogue_scratch
    drain = epilogue_vector + (0.0 if profile.fix_pipe else ACC_BYTES / 128)  # V cycles per result element
    best: _BlockTile | None = None
    for m0f in range(1, min(mbf, cap_a) + 1):
        mt = -(-mbf // m0f)
        a_column = gemm.a_l1_bytes(m0f * FRACTAL, gemm.k, kc) / kf  # L1 bytes per fractal column of an A panel
        for n0f in range(1, min(nbf, 2 * cap_c // m0f, cap_b, cap_n) + 1):
            k0f = min(kf, cap_a // m0f, cap_b // n0f)
            while k0f > 1 and _oracle_panels(profile, gemm, kc, m0f, n0f, k0f, k0f) > l1:  # a convolution's input rows fill L1 fast
                k0f //= 2
            if k0f < 1 or _oracle_panels(profile, gemm, kc, m0f, n0f, k0f, k0f) > l1 or epilogue_ub(m0f * FRACTAL, n0f * FRACTAL) > profile.ub_bytes:
                continue
            nt = -(-nbf // n0f)
            single = nt == 1 and bb == 1
            b_tile = gemm.b_gm_bytes(gemm.k, n0f * FRACTAL, kc)
            tiles = bb * mt * nt
            steps = tiles * -(-kf // k0f)
            step = m0f * n0f * k0f + MMAD_OVERHEAD
            cube = steps * step
            step_mte1 = (m0f * L0A_FRACTAL_CYCLES + n0f * L0B_FRACTAL_CYCLES) * k0f
            mte1 = steps * step_mte1
            per_element = gemm.out_bytes / gm.store + drain
            drained = gm.latency + m0f * n0f * FRACTAL * FRACTAL * per_element
            last = gm.latency + (mbf - (mt - 1) * m0f) * (nbf - (nt - 1) * n0f) * FRACTAL * FRACTAL * per_element
            accumulators = 2 if m0f * n0f <= cap_c else 1
            waits = 0.0 if accumulators == 2 else (tiles - 1) * drained
            stores = tiles * gm.latency + out_bytes / gm.store
            vector = out_bytes / gemm.out_bytes * drain
            epilogue_loads = tiles * (-(-epilogue_gm // gemm.out_bytes) + (1 if scratch else 0)) * gm.latency + (epilogue + scratch / 2) / gm.ub_load
            vector_loads, epilogue_loads = (epilogue_loads, 0.0) if profile.split_cores else (0.0, epilogue_loads)
            fits = _oracle_panels(profile, gemm, kc, m0f, n0f, k0f, kf, single) <= l1
            a_whole = aligned(profile, "L1", gemm.a_l1_bytes(m0f * FRACTAL, kf * kc, kc))  # A's whole K for an M tile in L1
            a_copies_held = 1 if mt == 1 else 2
            modes = [(True, False)] if fits else []
            modes.append((False, False))
            if (not bias_table or nbf <= cap_n) and a_copies_held * a_whole + 2 * k0f * n0f * FRACTAL_BYTES <= l1:
                modes.append((False, True))
            for resident, a_resident in modes:  # a resident B (A) loads whole before the first mmad
                restarts = 0.0
                if a_resident:
                    room = l1 - a_copies_held * a_whole
                    k1_max = max(k0f, min(kf, int(room / (2 * n0f * FRACTAL_BYTES)) // k0f * k0f))
                    first_held = gm.load_cycles(1, gemm.a_gm_bytes(m0f * FRACTAL, kf * kc, kc), gemm.a_nd)
                    restarts = (bb * mt - 1) * (drained + first_held)
                else:
                    room = l1 - ((1 if single else 2) * b_tile if resident else 0)
                    k1_max = max(k0f, min(kf, int(room / (2 * a_column + (0 if resident else 2 * n0f * FRACTAL_BYTES)) // k0f * k0f)))
                    first_held = gm.load_cycles(1, b_tile, gemm.b_nd) if resident else 0.0
                b_loads = bb * nt * b_tile * (1 if resident else mt)
                for k1f in _oracle_k1_choices(k0f, k1_max):
                    if a_resident:
                        if k1f > k0f and a_copies_held * a_whole + 2 * k1f * n0f * FRACTAL_BYTES > l1:
                            continue
                    elif k1f > k0f and _oracle_panels(profile, gemm, kc, m0f, n0f, k1f, kf if resident else k1f, single and resident) > l1:
                        continue
                    panels = tiles * -(-kf // k1f)
                    if a_resident:
                        a_copies, b_copies, first_panel = bb * mt, panels, 0.0
                        a_loads = bb * mt * _oracle_panel_bytes(gemm, m0f * FRACTAL, kf * kc, kc)
                    else:
                        a_copies, b_copies = panels, bb * nt if resident else panels
                        a_loads = tiles * _oracle_panel_bytes(gemm, m0f * FRACTAL, k1f * kc, kc)
                        first_panel = gm.load_cycles(1, gemm.a_gm_bytes(m0f * FRACTAL, k1f * kc, kc), gemm.a_nd)
                    loads = gm.load_cycles(a_copies, a_loads, gemm.a_nd) + gm.load_cycles(b_copies, b_loads, gemm.b_nd) + epilogue_loads
                    loads += (panels - 1) * max(0, -(-k1f // k0f) - QUEUE_DEPTH // 4) * max(step, step_mte1)
                    if not resident:
                        first_panel += gm.load_cycles(1, gemm.b_gm_bytes(k1f * kc, n0f * FRACTAL, kc), gemm.b_nd)
                    first = first_held + first_panel + step_mte1
                    cube_side = max(first + max(cube, mte1) + last + restarts + waits, loads + step_mte1 + step + last, stores)
                    pipes = max(cube_side, vector, vector_loads)
                    chip = gm.cycles(used, a_loads, b_loads, epilogue, out_bytes, scratch)
                    tile = _BlockTile(max(pipes, chip), m0f, n0f, k0f, k1f, resident, pipes, a_resident, cube_side, accumulators)
                    if best is None or tile.cost < best.cost - 1e-9 or (
                        tile.cost <= best.cost + 1e-9 and (tile.pipes < best.pipes or tile.pipes == best.pipes and tile.cube_side < best.cube_side)
                    ):
                        best = tile
    return best


def _oracle_panel_bytes(gemm: Gemm, rows: int, k1: int, kc: int) -> int:
    full, rest = divmod(gemm.k, k1)
    return full * gemm.a_gm_bytes(rows, k1, kc) + (gemm.a_gm_bytes(rows, rest, kc) if rest else 0)


def _oracle_k1_choices(k0f: int, most: int) -> list[int]:
    choices = []
    k1f = k0f
    while k1f < most:
        choices.append(k1f)
        k1f *= 2
    return [*choices, most]


# ------------------------------------------------------------- the search chooses as the oracle


@dataclass(frozen=True)
class Search:
    """One call of the search: a Gemm on a SoC's `cores` and its epilogue's costs."""

    soc: str
    gemm: Gemm
    cores: int
    ub_tiles: int
    """The epilogue's UB: this many result tiles (and a float32 row each, for a bias)."""
    bias_table: bool
    exact: bool
    epilogue_gm: float
    epilogue_vector: float
    epilogue_scratch: float = 0.0

    def epilogue_ub(self, m: int, n: int) -> int:
        return self.ub_tiles * (m * n * self.gemm.out_bytes + n * 4)

    def run(self, search: Callable[..., CubeTiling]) -> CubeTiling | str:
        """The tiling, or the error where nothing fits."""
        try:
            return search(
                socs.load(self.soc), self.gemm, self.cores, self.epilogue_ub, self.bias_table, self.exact,
                self.epilogue_gm, self.epilogue_vector, self.epilogue_scratch,
            )
        except ModelError as e:
            return str(e)


def dtypes_of(soc: str) -> list[tuple[Attribute, Attribute]]:
    """The dtype pairs the SoC's cube takes."""
    profile = socs.load(soc)
    supported = []
    for din, dout in DTYPES:
        try:
            cube_k(profile, din)
        except ModelError:
            continue
        supported.append((din, dout))
    return supported


@st.composite
def matmuls(draw: st.DrawFn, din: Attribute, dout: Attribute) -> Gemm:
    return Gemm(
        draw(st.integers(1, 4)), draw(st.integers(1, 1200)), draw(st.integers(1, 3000)), draw(st.integers(1, 1200)), din, dout,
        a_nd=draw(st.booleans()), b_nd=draw(st.booleans()), out_nd=draw(st.booleans()),
    )


@st.composite
def convolutions(draw: st.DrawFn, din: Attribute, dout: Attribute) -> Gemm:
    """A convolution's img2col Gemm as `gemm_of` makes it: square images padded to `hi`,
    a square kernel, C0-aligned input channels (or C04 pixels) and 16-aligned output ones."""
    kh = draw(st.sampled_from((1, 3, 5, 7)))
    stride = draw(st.integers(1, 2))
    hi = draw(st.integers(kh, 40))
    wo = (hi - kh) // stride + 1
    images, groups = draw(st.integers(1, 4)), draw(st.sampled_from((1, 2, 3, 9, 36, 60)))
    c0 = formats.c0(din)
    window = kh * kh
    pixel_channels = draw(st.sampled_from((0, 4))) if kh > 1 else 0
    k = _align(pixel_channels * window, c0) if pixel_channels else c0 * draw(st.integers(1, 24)) * window
    n = FRACTAL * draw(st.integers(1, 40))
    return Gemm(groups, images * wo * wo, k, n, din, dout, conv=(hi, hi, wo, stride, kh), window=window, pixel_channels=pixel_channels)


@st.composite
def searches(draw: st.DrawFn) -> Search:
    soc = draw(st.sampled_from(SOCS))
    profile = socs.load(soc)
    din, dout = draw(st.sampled_from(dtypes_of(soc)))
    gemm = draw(st.one_of(matmuls(din, dout), convolutions(din, dout)))
    return Search(
        soc, gemm, draw(st.sampled_from((profile.ai_cores, *profile.virtual_aicore_nums, 1, 3))), draw(st.integers(0, 8)),
        draw(st.booleans()), draw(st.booleans()), draw(st.sampled_from((0.0, 2.0, 4.0))), draw(st.sampled_from((0.0, 0.25, 1.5))),
        draw(st.sampled_from((0.0, 4.0))),
    )


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(searches())
def test_the_search_chooses_the_oracles_tiling(search):
    assert search.run(tile_gemm) == search.run(oracle_tile_gemm)


REAL_GEMMS = [
    pytest.param(Gemm(1, 12544, 784, 64, f16, f16, conv=(230, 230, 112, 2, 7), window=49), False, id="resnet50 conv1 b1"),
    pytest.param(Gemm(1, 200704, 576, 64, f16, f16, conv=(58, 58, 56, 1, 3), window=9), False, id="resnet50 3x3 b64"),
    pytest.param(Gemm(1, 49, 4608, 512, f16, f16, conv=(9, 9, 7, 1, 3), window=9), False, id="resnet50 last 3x3 b1"),
    pytest.param(Gemm(1, 12544, 512, 1024, f16, f16, conv=(28, 28, 14, 2, 1)), False, id="resnet50 strided 1x1 b64"),
    pytest.param(Gemm(60, 196, 144, 16, f16, f16, conv=(9, 9, 7, 1, 3), window=9), False, id="mobilenet_v2 depthwise b4"),
    pytest.param(Gemm(1, 196, 4096, 768, f16, f16, conv=(224, 224, 14, 16, 16), window=256), False, id="vit_b_16 patches"),
    pytest.param(Gemm(1, 128, 768, 3072, f16, f16, a_nd=True, b_nd=True, out_nd=True), False, id="bert_base ffn nd"),
    pytest.param(Gemm(12, 128, 64, 128, f16, f16), True, id="bert_base attention scores"),
]
"""Gemms of the real models (`ge.testing.real_models`) as their compiles ask for them
(attention's on exactly the cores it is given): shapes beyond the random ones (a
7x7 stride-2 window, 16x16 patches, 200k rows, 60 groups)."""


@pytest.mark.parametrize("soc", SOCS)
@pytest.mark.parametrize(("gemm", "exact"), REAL_GEMMS)
def test_real_model_gemms_choose_the_oracles_tiling(soc, gemm, exact):
    profile = socs.load(soc)
    scratch = 4.0 if profile.fix_pipe and not exact else 0.0  # a mixed epilogue's workspace where FIX hands tiles to V
    search = Search(soc, gemm, profile.ai_cores, 3, profile.fix_pipe and not exact, exact, 0.0 if exact else 2.0, 0.03125, scratch)
    assert search.run(tile_gemm) == search.run(oracle_tile_gemm)
