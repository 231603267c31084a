"""The legal tiling space of a kernel, and tuned tilings in place of the analytic ones.

A tuner (`ge.aoe`) searches this space with the simulator as its cost model; the
lowering then builds a kernel from a tiling it is given (`plan`'s `tiling`, looked up
through `using`) instead of the one `cube.tile_gemm` or `vector.vector_plan` derive.
A tiling is a flat dict of ints, what the kernel's `tiling` attribute records:

- cube (Conv2D, MatMulV2, ... with their tails; not recurrent layers):
  batch_dim, m_dim, n_dim (the blocks per dimension), m0, n0 (L0 tile, multiples of
  16), k0, k1 (the K step in L0 and the K panel in L1, multiples of the cube's k; a
  panel of all of K may end in a shorter step), b_resident (B's whole K kept in L1
  across the M tiles); and the knobs of the program's structure (`CUBE_KNOBS`, each
  absent where it has its default there, so that a tiling without them builds
  the program the knobs' defaults make): m_tail (the pieces a block's last M
  tile runs as, so that the drain after its last mmad is a piece's), l0c_buffers
  (two accumulators, or one of the whole L0C for tiles twice the size whose mmads
  wait for the previous tile's drain), cols_resident (an epilogue's per-column
  operands loaded once per N tile instead of with every M tile), a_resident (A's
  whole K kept in L1 across the N tiles, M tiles outer; not with b_resident, with
  cols_resident only where a block has one N tile, with a bias table only where
  it holds the block's whole bias);
- attention (MultiHeadAttention, FusedInferAttentionScore): each matmul phase's cube
  tiling, its keys prefixed by the phase (q_, k_, v_, score_, context_), on exactly
  the kernel's blocks, softmax_tile_rows, and for self-attention qkv_shared (the
  three projections as one phase that loads each tile of their input once);
- vector (a scope whose whole rows fit the UB): block_dim and tile_rows.

Legal is what the analytic choice checks: at most the kernel's cores in one wave, a
split no finer than the work's units, L0A/L0B holding two k0 steps, L0C two m0 x n0
accumulators (or one), the bias table an n0 tile of float32 bias, L1 two A panels
and B's panels (its whole K once when resident), the UB the epilogue's tiles (the
softmax's tiles with their statistics and mask); vector tiles in whole 32-byte
blocks that fit the UB with their ping-pong buffers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from functools import cached_property

from xdsl.ir import Operation, SSAValue

from dialects import ascend_graph as ag
from dialects.ascend_kernel import BIAS_TABLE_BYTES
from dialects.kernel_boundary import virtual_cores
from ge.core.errors import ModelError
from ge.core.soc import SocProfile
from passes.lowering.attention import (
    FIA_PHASES,
    MHA_PHASES,
    Chosen,
    Phases,
    attention_flash,
    attention_phases,
    fused_attention_flash,
    fused_attention_phases,
)
from passes.lowering.cube import (
    CubeTiling,
    Epilogue,
    Gemm,
    _panels,
    _resident_a_panels,
    block_splits,
    cube_k,
    epilogue_of,
    gemm_of,
)
from passes.lowering.program import (
    ACC_BYTES,
    ACC_FRACTAL_BYTES,
    FRACTAL,
    FRACTAL_BYTES,
    aligned,
    iterations,
)
from passes.lowering.vector import ub_bytes, vector_space, vector_values

Tiling = dict[str, int]
Lookup = Callable[[str], Mapping[str, int] | None]
"""A tuned tiling by kernel key (`bank_key`), or None where the analytic one stays."""

CUBE_KEYS = ("batch_dim", "m_dim", "n_dim", "m0", "n0", "k0", "k1", "b_resident")
CUBE_KNOBS = {"m_tail": 1, "l0c_buffers": 2, "cols_resident": 0, "a_resident": 0}
"""The program's structure beside the tiling, each with the value a tiling without
the key builds: the one the analytic lowering fixes, or for a_resident, which the
analytic tiling chooses, off (its params name it only where it is on)."""
M_TAIL_MOST = 8
"""The most pieces a block's last M tile is cut into."""
VECTOR_KEYS = ("block_dim", "tile_rows")
VECTOR_TILE_COUNTS = 64
"""A vector block's tiles range from one to this many (even shares of its rows)."""
SOFTMAX = "softmax_tile_rows"
"""An attention tiling's softmax tile rows (its other keys are its matmul phases')."""
SHARED = "qkv_shared"
"""An attention tiling's knob: its Q, K and V projections run as one phase on their
shared input (`cube.shared_a_program`: each A tile loaded once for the three), with
the q_ tiling (k_ and v_ equal to it)."""


# ------------------------------------------------------------------ cube


@dataclass(frozen=True)
class CubeSpace:
    """The tilings of one Gemm on `cores` cores."""

    profile: SocProfile
    gemm: Gemm
    cores: int
    epilogue_ub: Callable[[int, int], int]
    bias_table: bool
    exact: bool
    columns: bool = False
    """The epilogue loads per-column operands (what `cols_resident` keeps)."""

    @classmethod
    def of(cls, profile: SocProfile, gemm: Gemm, e: Epilogue, cores: int, exact: bool) -> CubeSpace:
        """The space of a Gemm whose tiles leave L0C through `e`."""
        return cls(profile, gemm, cores, lambda m, n: e.ub_bytes(profile, m, n), e.bias is not None and profile.fix_pipe, exact, bool(e.columns))

    @property
    def kc(self) -> int:
        return cube_k(self.profile, self.gemm.in_dtype)

    @property
    def units(self) -> tuple[int, int, int]:
        return (self.gemm.batch, -(-self.gemm.m // FRACTAL), -(-self.gemm.n // FRACTAL))

    @property
    def kf(self) -> int:
        return -(-self.gemm.k // self.kc)

    @property
    def l1(self) -> int:
        return self.profile.l1_bytes - (BIAS_TABLE_BYTES if self.bias_table else 0)

    def caps(self) -> tuple[int, int, int, int]:
        """Fractals of L0A, L0B and L0C (halves: ping and pong) and of an n0 tile the bias table holds."""
        p = self.profile
        cap_b = p.l0b_bytes // FRACTAL_BYTES // 2
        cap_n = BIAS_TABLE_BYTES // (FRACTAL * ACC_BYTES) if self.bias_table else cap_b
        return p.l0a_bytes // FRACTAL_BYTES // 2, cap_b, p.l0c_bytes // ACC_FRACTAL_BYTES // 2, cap_n

    def blocks(self, t: Mapping[str, int]) -> tuple[int, int, int]:
        """The batches, M and N fractals of the largest block."""
        dims = (t["batch_dim"], t["m_dim"], t["n_dim"])
        return tuple(-(-u // d) for u, d in zip(self.units, dims))  # type: ignore[return-value]

    def pieces(self, t: Mapping[str, int]) -> int:
        """The pieces `t`'s m_tail cuts the largest block's last M tile into (fewer where it is short)."""
        return iterations(*self._tiling(t).m_runs()[-1])

    def legal(self, t: Mapping[str, int]) -> bool:
        """True when `t` (all of CUBE_KEYS, any of CUBE_KNOBS) fits the cores and the buffers."""
        if any(k not in t for k in CUBE_KEYS) or any(k not in CUBE_KEYS and k not in CUBE_KNOBS for k in t):
            return False
        accumulators = t.get("l0c_buffers", 2)
        if accumulators not in (1, 2) or not 1 <= t.get("m_tail", 1) <= M_TAIL_MOST or t.get("cols_resident", 0) not in (0, int(self.columns)):
            return False
        a_resident = t.get("a_resident", 0)
        if a_resident not in (0, 1) or a_resident and t["b_resident"]:
            return False
        kc, kf = self.kc, self.kf
        dims = (t["batch_dim"], t["m_dim"], t["n_dim"])
        if min(dims) < 1 or any(d > u for d, u in zip(dims, self.units)) or math.prod(dims) > self.cores:
            return False
        if self.exact and math.prod(dims) != self.cores and any(math.prod(d) == self.cores for d in block_splits(self.units, self.cores, True).values()):
            return False
        if any(t[k] < 1 for k in ("m0", "n0", "k0", "k1")) or t["m0"] % FRACTAL or t["n0"] % FRACTAL or t["k0"] % kc:
            return False
        if t["k1"] % t["k0"] and t["k1"] < kf * kc:  # a K panel is whole k0 steps, or all of K in one
            return False
        _, mbf, nbf = self.blocks(t)
        m0f, n0f, k0f, k1f = t["m0"] // FRACTAL, t["n0"] // FRACTAL, t["k0"] // kc, t["k1"] // kc
        cap_a, cap_b, cap_c, cap_n = self.caps()
        if m0f > mbf or n0f > nbf or m0f > cap_a or n0f > min(cap_b, cap_n) or m0f * n0f > cap_c * (2 // accumulators):
            return False
        if t.get("m_tail", 1) > 1 and self.pieces(t) != t["m_tail"]:
            return False
        if k0f > kf or k1f > max(kf, k0f) or m0f * k0f > cap_a or n0f * k0f > cap_b:
            return False
        if self.epilogue_ub(t["m0"], t["n0"]) > self.profile.ub_bytes:
            return False
        if a_resident:
            if t.get("cols_resident", 0) and nbf > n0f:  # the columns stay for the block's one N tile
                return False
            if self.bias_table and nbf > cap_n:  # the bias table holds the block's whole bias
                return False
            a_tile = aligned(self.profile, "L1", self.gemm.a_l1_bytes(t["m0"], kf * kc, kc))
            return _resident_a_panels(a_tile, n0f, k1f, self._tiling(t).a_single) <= self.l1
        single = self._tiling(t).b_single
        return _panels(self.profile, self.gemm, kc, m0f, n0f, k1f, kf if t["b_resident"] else k1f, single) <= self.l1

    def tiling(self, t: Mapping[str, int]) -> CubeTiling:
        """The CubeTiling of a legal `t`; an illegal one is refused."""
        if not self.legal(t):
            raise ModelError(f"the cube tiling {dict(t)} of a {self.gemm.m}x{self.gemm.k}x{self.gemm.n} matmul does not fit {self.profile.name}'s cores or buffers")
        return self._tiling(t)

    def _tiling(self, t: Mapping[str, int]) -> CubeTiling:
        bb, mbf, nbf = self.blocks(t)
        mb = min(mbf * FRACTAL, self.gemm.m)
        return CubeTiling(
            t["batch_dim"], t["m_dim"], t["n_dim"], bb, mb, nbf * FRACTAL, min(t["m0"], -(-mb // FRACTAL) * FRACTAL), t["n0"],
            t["k0"], t["k1"], bool(t["b_resident"]), self.kc, t.get("m_tail", 1), t.get("l0c_buffers", 2), bool(t.get("cols_resident", 0)),
            bool(t.get("a_resident", 0)),
        )

    def widest_k1(self, t: Mapping[str, int]) -> Tiling:
        """`t` with the largest K panel that fits L1: all of K in one, else the most k0
        steps (k0 if none larger does)."""
        whole = {**t, "k1": self.kf * self.kc}
        if self.legal(whole):
            return whole
        k0 = t["k0"]
        lo, hi = 1, max(1, -(-self.kf * self.kc // k0))
        while lo < hi:  # L1 use grows with k1: the largest multiple of k0 that fits
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.legal({**t, "k1": mid * k0}) else (lo, mid - 1)
        return {**t, "k1": lo * k0}

    def candidates(self) -> Iterator[Tiling]:
        """Every legal tiling: each one-wave split, L0 tile (one that only one L0C
        accumulator holds with `l0c_buffers` 1), k0 (its largest, a half and a quarter
        of it), B resident, neither, or A resident, with the widest K panel that fits;
        the other knobs as the analytic lowering fixes them."""
        cap_a, cap_b, cap_c, cap_n = self.caps()
        for per, dims in sorted(block_splits(self.units, self.cores, self.exact).items()):
            _, mbf, nbf = per
            for m0f in range(1, min(mbf, cap_a) + 1):
                for n0f in range(1, min(nbf, 2 * cap_c // m0f, cap_b, cap_n) + 1):
                    most = min(self.kf, cap_a // m0f, cap_b // n0f)
                    knobs = {"l0c_buffers": 1} if m0f * n0f > cap_c else {}
                    for k0f in sorted({most, max(1, most // 2), max(1, most // 4)}, reverse=True):
                        for resident, held in ((1, {}), (0, {}), (0, {"a_resident": 1})):
                            t = dict(zip(CUBE_KEYS, (*dims, m0f * FRACTAL, n0f * FRACTAL, k0f * self.kc, k0f * self.kc, resident)))
                            if self.legal({**t, **knobs, **held}):
                                yield self.widest_k1({**t, **knobs, **held})

    def neighbours(self, t: Mapping[str, int]) -> list[Tiling]:
        """The legal tilings one step from `t`: a split dimension, m0, n0 or k0 one unit
        or a factor 2 away, two of them trading a factor 2 (M and N of the split; m0 and
        n0, whose L0C use stays; m0 or n0 and k0, whose L0A or L0B use stays), B's
        or A's residency flipped (the other's off), the K panel narrowed or widened;
        the last M tile's pieces one or a factor 2 away, the L0C accumulators one or
        two (m0 or n0 doubled with one, halved with two), the per-column operands
        resident or not;
        each with its K panel kept (k0 where it no longer is a multiple) and widened,
        knobs at the analytic value left out."""
        steps = {"batch_dim": 1, "m_dim": 1, "n_dim": 1, "m0": FRACTAL, "n0": FRACTAL, "k0": self.kc, "k1": t["k0"], "m_tail": 1}
        full = {**CUBE_KNOBS, **t}
        moved: list[Tiling] = [
            {**full, "b_resident": 1 - t["b_resident"], "a_resident": 0}, {**full, "a_resident": 1 - full["a_resident"], "b_resident": 0},
            {**full, "cols_resident": 1 - full["cols_resident"]},
        ]
        for key, step in steps.items():
            v = full[key]
            moved += [{**full, key: x} for x in (v - step, v + step, v * 2, v // 2 // step * step) if x > 0 and x != v]
        for m, n in (("m_dim", "n_dim"), ("m0", "n0"), ("m0", "k0"), ("n0", "k0")):
            moved += [{**full, m: full[m] * 2, n: full[n] // 2}, {**full, m: full[m] // 2, n: full[n] * 2}]
        one = full["l0c_buffers"] == 2
        moved += [{**full, "l0c_buffers": 1 if one else 2, key: full[key] * 2 if one else full[key] // 2 // FRACTAL * FRACTAL} for key in ("m0", "n0")]
        moved.append({**full, "l0c_buffers": 1 if one else 2})
        found: dict[tuple[tuple[str, int], ...], Tiling] = {}
        for m in moved:
            kept = {**m, "k1": m["k1"] if m["k0"] > 0 and m["k1"] % m["k0"] == 0 else m["k0"]}
            for c in (kept, self.widest_k1(kept) if kept["k0"] > 0 else kept):
                c = plain(c)
                if c != plain(t) and self.legal(c):
                    found.setdefault(tuple(sorted(c.items())), c)
        return list(found.values())


def knobs_of(t: Mapping[str, int]) -> Tiling:
    """The knobs `t` sets off their analytic values (an attention tiling's with their phase's prefix)."""
    knobs = {**CUBE_KNOBS, SHARED: 0}
    return {k: v for k, v in t.items() if any((k == knob or k.endswith("_" + knob)) and v != default for knob, default in knobs.items())}


def plain(t: Mapping[str, int]) -> Tiling:
    """`t` without the knobs at the value the analytic lowering fixes: one key set per kernel."""
    return {k: v for k, v in t.items() if CUBE_KNOBS.get(k) != v}


# ------------------------------------------------------------------ attention


@dataclass(frozen=True)
class AttentionSpace:
    """The tilings of an attention kernel (`attention.Phases`): each matmul phase's cube
    tiling, its keys prefixed by the phase's name (q_m0, score_k1, ...), on exactly the
    kernel's blocks as the analytic plan splits them, `softmax_tile_rows`: the
    softmax's tile rows, from one to a block's rows, whose buffers fit the UB, and
    `qkv_shared` (see `SHARED`). With `flash`, the scores, softmax and context are one
    flash phase (`passes.lowering.flash`), whose tiling follows from the shape: only
    the Q, K and V projections are tuned, and there is no softmax key."""

    phases: Phases
    flash: bool = False

    @property
    def prefixes(self) -> tuple[str, ...]:
        """The names of the phases tuned here, in program order."""
        return self.phases.prefixes[:3] if self.flash else self.phases.prefixes

    @cached_property
    def spaces(self) -> tuple[CubeSpace, ...]:
        """Each tuned matmul phase's space, on exactly the kernel's blocks."""
        ph, n = self.phases, len(self.prefixes)
        return tuple(CubeSpace.of(ph.profile, g, e, ph.block_dim, True) for g, e in zip(ph.gemms[:n], ph.epilogues[:n]))

    def part(self, t: Mapping[str, int], i: int) -> Tiling:
        """Phase `i`'s cube tiling in `t`."""
        prefix = self.prefixes[i]
        return {k: t[prefix + k] for k in (*CUBE_KEYS, *CUBE_KNOBS) if prefix + k in t}

    def joined(self, t: Mapping[str, int], i: int, part: Mapping[str, int]) -> Tiling:
        """`t` with phase `i`'s cube tiling `part`."""
        prefix = self.prefixes[i]
        return {**{k: v for k, v in t.items() if not _in_phase(k, prefix)}, **{prefix + k: v for k, v in plain(part).items()}}

    def legal(self, t: Mapping[str, int]) -> bool:
        """True when `t` holds every phase's cube tiling (each legal) and softmax tiles
        that fit (no softmax key with `flash`); with `qkv_shared`, the one projection
        phase's buffers fit too."""
        if (SOFTMAX in t) == self.flash or not _keys_fit(set(t) - {SOFTMAX, SHARED}, self.prefixes) or t.get(SHARED, 0) not in (0, 1):
            return False
        if not self.flash and not self.phases.softmax_fits(t[SOFTMAX]):
            return False
        if not all(s.legal(self.part(t, i)) for i, s in enumerate(self.spaces)):
            return False
        return not t.get(SHARED, 0) or self.shareable(t)

    def shareable(self, t: Mapping[str, int]) -> bool:
        """True when the projections of `t` may run as one phase (`cube.shared_a_program`):
        one input, the same tiling (B resident, one K panel, knobs at their analytic
        values) whose tiles fit the shared phase's buffers (`Phases.shared_fits`)."""
        ph = self.phases
        q = self.part(t, 0)
        if not ph.shared_input or any(self.part(t, i) != q for i in (1, 2)) or not q["b_resident"] or knobs_of(q):
            return False
        sp = self.spaces[0]
        if q["k1"] != sp.kf * sp.kc:
            return False
        ct = sp.tiling(q)
        return ph.shared_fits(ct.m0, ct.n0, ct.mb <= ct.m0)

    def chosen(self, t: Mapping[str, int]) -> Chosen:
        """The phases' CubeTilings and the softmax's tile rows (0 with `flash`) of a legal `t`; an illegal one is refused."""
        op = self.phases.op
        if self.flash and SOFTMAX in t:
            raise ModelError(
                f"{op.OP_TYPE} '{op.label}': its scores, softmax and context run as one flash phase on {self.phases.profile.name}, "
                f"whose tiling follows from the shape; only the projections ({', '.join(self.prefixes)}, {SHARED}) take a tuned tiling, "
                f"not {SOFTMAX}"
            )
        if not self.legal(t):
            raise ModelError(f"{op.OP_TYPE} '{op.label}': the tiling {dict(t)} does not fit {self.phases.profile.name}'s cores or buffers")
        return tuple(s.tiling(self.part(t, i)) for i, s in enumerate(self.spaces)), t.get(SOFTMAX, 0), bool(t.get(SHARED, 0))

    def analytic(self) -> Tiling:
        """The analytic plan's tiling in this space's terms."""
        if self.flash:
            tilings, shared = self.phases.projections()
            t: Tiling = {SHARED: 1} if shared else {}
        else:
            tilings, tile_rows, shared = self.phases.analytic()
            t = {SOFTMAX: tile_rows, **({SHARED: 1} if shared else {})}
        for prefix, g, ct in zip(self.prefixes, self.phases.gemms, tilings):
            params = ct.params(g)
            t.update({prefix + k: params[k] for k in (*CUBE_KEYS, *CUBE_KNOBS) if k in params})
        return t

    def projections(self, t: Mapping[str, int], part: Mapping[str, int]) -> Tiling:
        """`t` with `part` the tiling of all three projections."""
        for i in range(3):
            t = self.joined(t, i, part)
        return dict(t)

    def tile_rows(self) -> list[int]:
        """The softmax's tile sizes: a block's rows in 1 to VECTOR_TILE_COUNTS even tiles, those that fit, largest first (none with `flash`)."""
        if self.flash:
            return []
        rows = self.phases.block_rows
        return sorted((r for r in {-(-rows // n) for n in range(1, VECTOR_TILE_COUNTS + 1)} if self.phases.softmax_fits(r)), reverse=True)

    def candidates(self) -> Iterator[Tiling]:
        """The analytic tiling with one part changed: each phase's candidates (a
        projection's with the projections apart) and each softmax tile size, taken in
        turn across the phases."""
        base = self.analytic()
        apart = {k: v for k, v in base.items() if k != SHARED}

        def phase(i: int) -> Iterator[Tiling]:  # a function: each stream keeps its own i
            onto = apart if self.prefixes[i] in MHA_PHASES[:3] else base
            return (self.joined(onto, i, c) for c in self.spaces[i].candidates())

        streams: list[Iterator[Tiling]] = [phase(i) for i in range(len(self.spaces))]
        streams.append({**base, SOFTMAX: r} for r in self.tile_rows())
        while streams:
            for stream in list(streams):
                t = next(stream, None)
                if t is None:
                    streams.remove(stream)
                elif self.legal(t):
                    yield t

    def neighbours(self, t: Mapping[str, int]) -> list[Tiling]:
        """One phase's neighbours (`CubeSpace.neighbours`; with `qkv_shared`, the q_
        phase's, taken by all three projections), the softmax's next larger or
        smaller tile size, or the projections shared (k_ and v_ taking q_'s tiling, B
        resident) or not."""
        shared = bool(t.get(SHARED, 0))
        found = [self.joined(t, i, c) for i, s in enumerate(self.spaces) for c in s.neighbours(self.part(t, i)) if not (shared and i in (1, 2))]
        if shared:
            found = [self.projections(c, self.part(c, 0)) for c in found]
            found.append({k: v for k, v in t.items() if k != SHARED})
        elif self.phases.shared_input:
            whole = self.spaces[0].kf * self.spaces[0].kc
            found.append({**self.projections(t, {**plain(self.part(t, 0)), "b_resident": 1, "k1": whole}), SHARED: 1})
        sizes = self.tile_rows()
        if t.get(SOFTMAX) in sizes:
            at = sizes.index(t[SOFTMAX])
            found += [{**t, SOFTMAX: sizes[j]} for j in (at - 1, at + 1) if 0 <= j < len(sizes)]
        return [c for c in found if self.legal(c)]


def _in_phase(key: str, prefix: str) -> bool:
    """True when `key` is a parameter or knob of the phase named `prefix`."""
    return key.startswith(prefix) and key[len(prefix):] in (*CUBE_KEYS, *CUBE_KNOBS)


def well_formed(kind: str, t: Mapping[str, object]) -> bool:
    """True when `t`'s keys make a tiling of `kind` (cube, vector or attention): every
    key of its parameters, any of its knobs, nothing else."""
    keys = set(t)
    if kind == "vector":
        return keys == set(VECTOR_KEYS)
    if kind == "cube":
        return _keys_fit(keys, ("",))
    if kind != "attention":
        return False
    if SOFTMAX not in keys:  # a flash kernel's projections
        return _keys_fit(keys - {SHARED}, MHA_PHASES[:3])
    return _keys_fit(keys - {SOFTMAX, SHARED}, MHA_PHASES) or _keys_fit(keys - {SOFTMAX}, FIA_PHASES)


def _keys_fit(keys: set[str], prefixes: tuple[str, ...]) -> bool:
    """True when `keys` are the cube tilings' of phases named by `prefixes`: all their keys, any of their knobs."""
    required = {p + k for p in prefixes for k in CUBE_KEYS}
    return required <= keys <= required | {p + k for p in prefixes for k in CUBE_KNOBS}


# ------------------------------------------------------------------ vector


@dataclass(frozen=True)
class VectorSpace:
    """The tilings of a vector scope whose whole rows fit the UB."""

    profile: SocProfile
    ops: tuple[Operation, ...]
    inputs: tuple[SSAValue, ...]
    outputs: tuple[SSAValue, ...]
    cores: int
    exact: bool

    @cached_property
    def shape(self) -> tuple[int, int, int, list]:
        """Rows, the unit of a tile (rows of a 32-byte block when rows are single elements), units, values."""
        space = vector_space(self.ops)
        values = vector_values(self.ops, set(self.inputs) | set(self.outputs), space, space.rows)
        unit = 32 // min(v.element_bytes for v in values) if space.row == 1 else 1
        return space.rows, unit, -(-space.rows // unit), values

    def fits_whole_rows(self) -> bool:
        rows, unit, _, values = self.shape
        return ub_bytes(self.profile, values, min(unit, rows)) <= self.profile.ub_bytes

    def legal(self, t: Mapping[str, int]) -> bool:
        if any(k not in t for k in VECTOR_KEYS):
            return False
        rows, unit, units, values = self.shape
        block_dim, tile = t["block_dim"], t["tile_rows"]
        if not 1 <= block_dim <= (self.cores if self.exact else min(self.cores, units)) or (self.exact and block_dim != self.cores):
            return False
        block_rows = min(rows, -(-units // block_dim) * unit)
        return 0 < tile <= block_rows and (tile % unit == 0 or tile == block_rows) and ub_bytes(self.profile, values, tile) <= self.profile.ub_bytes

    def _tiles(self, block_dim: int) -> list[int]:
        """The tile sizes of a block: its rows in 1 to VECTOR_TILE_COUNTS even tiles, whole units each."""
        rows, unit, units, _ = self.shape
        block_rows = min(rows, -(-units // block_dim) * unit)
        shares = {-(-block_rows // n) for n in range(1, VECTOR_TILE_COUNTS + 1)}
        sizes = {min(block_rows, -(-share // unit) * unit) for share in shares}
        return sorted((s for s in sizes if self.legal({"block_dim": block_dim, "tile_rows": s})), reverse=True)

    def candidates(self) -> Iterator[Tiling]:
        _, _, units, _ = self.shape
        dims = [self.cores] if self.exact else range(1, min(self.cores, units) + 1)
        for block_dim in dims:
            for tile in self._tiles(block_dim):
                yield {"block_dim": block_dim, "tile_rows": tile}

    def neighbours(self, t: Mapping[str, int]) -> list[Tiling]:
        """Block counts one or a factor 2 away (each with its largest tile), and the
        block's next larger and smaller tile sizes."""
        found: list[Tiling] = []
        b = t["block_dim"]
        for d in sorted({b - 1, b + 1, b * 2, b // 2} - {b, 0}):
            tiles = self._tiles(d) if d > 0 else []
            if tiles:
                found.append({"block_dim": d, "tile_rows": tiles[0]})
        tiles = self._tiles(b)
        if t["tile_rows"] in tiles:
            i = tiles.index(t["tile_rows"])
            found += [{"block_dim": b, "tile_rows": tiles[j]} for j in (i - 1, i + 1) if 0 <= j < len(tiles)]
        return [c for c in found if self.legal(c)]


# ------------------------------------------------------------------ which space


Space = CubeSpace | VectorSpace | AttentionSpace


def space_of(profile: SocProfile, ops: tuple[Operation, ...], inputs: tuple[SSAValue, ...], outputs: tuple[SSAValue, ...]) -> Space | None:
    """The tiling space of a kernel scope, as `plan` lowers it; None for a kernel
    the tuner leaves alone (recurrent layers, rows cut into pieces, a
    FusedInferAttentionScore in one flash phase)."""
    virtual = virtual_cores(ops)
    cubes = [op for op in ops if isinstance(op, ag.CubeOp)]
    if not cubes:
        if profile.split_cores:
            cores = profile.vector_cores if virtual is None else virtual * profile.vector_cores // profile.ai_cores
        else:
            cores = virtual or profile.ai_cores
        vector = VectorSpace(profile, ops, inputs, outputs, cores, virtual is not None)
        return vector if vector.fits_whole_rows() else None
    cube = cubes[0]
    if len(cubes) > 1 or ops[0] is not cube or isinstance(cube, ag.RecurrentOp):
        return None
    if isinstance(cube, (ag.MultiHeadAttentionOp, ag.FusedInferAttentionScoreOp)):
        return attention_space(profile, cube, virtual or profile.ai_cores)
    return cube_space(profile, cube, list(ops[1:]), outputs, virtual)


def attention_space(profile: SocProfile, op: ag.MultiHeadAttentionOp | ag.FusedInferAttentionScoreOp, cores: int) -> AttentionSpace | None:
    """The space of an attention kernel's phases. Where its scores, softmax and context
    are one flash phase (`passes.lowering.flash`), whose tiling follows from the shape,
    a MultiHeadAttention's space is its projections' (`AttentionSpace.flash`), and a
    FusedInferAttentionScore, which has none, has no space (None)."""
    if isinstance(op, ag.MultiHeadAttentionOp):
        phases = attention_phases(profile, op, cores)
        return AttentionSpace(phases, flash=attention_flash(profile, op, phases)[1] is not None)
    phases = fused_attention_phases(profile, op, cores)
    return None if fused_attention_flash(profile, op, phases.block_dim)[1] is not None else AttentionSpace(phases)


def cube_space(profile: SocProfile, cube: ag.CubeOp, tail: list[Operation], outputs: tuple[SSAValue, ...] | list[SSAValue], virtual: int | None) -> CubeSpace:
    """The space of a cube op with its tail, as `plan` sets up its Gemm and epilogue."""
    gemm, n_logical = gemm_of(profile, cube)
    e = epilogue_of(profile, cube, tail, outputs, n_logical)
    if e.nd_store:
        gemm = replace(gemm, out_nd=True)
    return CubeSpace.of(profile, gemm, e, virtual or profile.ai_cores, virtual is not None)


# ------------------------------------------------------------------ tuned tilings in a compile

_lookup: ContextVar[Lookup | None] = ContextVar("tuned_tilings", default=None)


def analytic(key: str) -> None:
    """The lookup of a compile that takes every tiling from the analytic choice."""
    return


def current() -> Lookup | None:
    """The lookup the lowering consults now; None when the compile has not chosen one."""
    return _lookup.get()


@contextmanager
def using(lookup: Lookup) -> Iterator[None]:
    """Lower with tuned tilings from `lookup` (the compile sets it from the tune bank)."""
    token = _lookup.set(lookup)
    try:
        yield
    finally:
        _lookup.reset(token)
