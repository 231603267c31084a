"""Attention's scores on chip (flash attention), on parts whose vector unit sits beside
the cube in one AI core (no FIX pipe, cores not split: L0C -> UB by V, UB -> L1 by
MTE3): the scores, softmax and context of every head computed unit by unit, the
scores and probabilities never leaving the core. Where the cube and vector cores
are apart (the 910B) the same units run through the workspace instead, with no
barrier between them (`apart_phase`).

A unit is one (batch x head, query tile). For each, Q's tile and the head's K and V
are in L1 (K and V loaded once per head per block, in ping-pong buffers so that the
next head's load overlaps this head's tiles), S = Q K^T goes into L0C, V moves it
to UB (converting to the input dtype) and computes the softmax there (the pre-steps,
scale and mask, then `softmax_phase`'s recipe with its two row reductions done as
`recipes` does them: the row's repeats combined first), MTE3 moves P into L1, and
P V goes into L0C, out through UB to GM. The key length is cut into L0 chunks that
fit L0A/L0B (one chunk where it fits); the whole key row must fit UB.

The pipes overlap across units: a unit's body is its scores and softmax, then the
previous unit's context (one unit late), so the cube computes P V of one unit and the scores of the next while V
runs the softmax; every buffer between pipes is a ping-pong pair with a ready and a
free event, and a unit's mask rows load during the unit before it (the mask add would
otherwise wait for a load issued in its own unit). A block takes `block_heads` heads of `block_tiles` query tiles each
(all of a head's tiles where one block takes the whole head, its last the tail)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, cached_property, partial

from xdsl.ir import Attribute, SSAValue

from dialects import formats
from dialects.ascend_kernel import MmadOp, SetFlagOp, WaitFlagOp
from ge.core.soc import SocProfile
from passes.lowering.cube import block_splits
from passes.lowering.program import (
    ACC_BYTES,
    COPY_LATENCY_NS,
    CORE_LOAD_SHARE,
    CORE_STORE_SHARE,
    FRACTAL,
    FRACTAL_BYTES,
    L0A_FRACTAL_CYCLES,
    L0B_FRACTAL_CYCLES,
    MMAD_OVERHEAD,
    REPEAT_BYTES,
    VECTOR_REPEAT_CYCLES,
    Ops,
    Program,
    aligned,
    body,
    copy,
    double_buffered,
    split,
    sync,
    vec,
)
from passes.lowering.recipes import Step, dtype_name, softmax_steps


def _pad(n: int) -> int:
    return -(-n // FRACTAL) * FRACTAL


@dataclass(frozen=True)
class Flash:
    """What the flash phase computes: `heads` (batch x heads) units of `sq` queries
    against `sk` keys, head sizes `d` (Q, K) and `dv` (V). `q`, `k`, `v` and `out`
    name their GM buffers; `pre` are the vector steps on the scores before the
    softmax (scale, softcap, mask); the mask (if any) adds rows of `mask_row`
    elements of `mask_bytes`, one per query row where `mask_per_query`, else one
    per unit; `scores` is a graph result the scores are also stored to; `nd` are
    the inputs in ND, which MTE2 converts to NZ on their way into L1; `out_nd` the
    context in ND, which FIX converts to on its way out (where the cores are apart)."""

    heads: int
    sq: int
    sk: int
    d: int
    dv: int
    dtype: Attribute
    out_dtype: Attribute
    q: Hashable
    k: Hashable
    v: Hashable
    out: Hashable
    pre: Sequence[tuple[str, str]]
    mask: SSAValue | None = None
    mask_row: int = 0
    mask_per_query: bool = False
    mask_bytes: int = 0
    scores: SSAValue | None = None
    nd: tuple[Hashable, ...] = ()
    out_nd: bool = False

    def mode(self, value: Hashable) -> str:
        """The copy mode of an input's loads into L1."""
        return "nd2nz" if value in self.nd else "normal"

    @cached_property
    def in_bytes(self) -> int:
        return max(1, formats.element_bits(self.dtype) // 8)

    @cached_property
    def out_bytes(self) -> int:
        return max(1, formats.element_bits(self.out_dtype) // 8)

    def mask_elements(self, rows: int) -> int:
        """The mask elements a unit of `rows` query rows reads."""
        return (rows if self.mask_per_query else 1) * self.mask_row if self.mask is not None else 0

    def buffers(self, rows: int, chunk: int, apart: bool = False) -> dict[str, tuple[str, int]]:
        """Each ping-pong pair of buffers of the phase: its level and the bytes of one.
        With the cores `apart`, the context leaves L0C by FIX (no UB slot) and P is
        computed beside the scores (the scores' slot frees for the next load at once)."""
        sk, d, dv, rp = _pad(self.sk), _pad(self.d), _pad(self.dv), _pad(rows)
        in_b = self.in_bytes
        sizes = {
            "k": ("L1", sk * d * in_b), "v": ("L1", sk * dv * in_b), "q": ("L1", rp * d * in_b), "p": ("L1", rp * sk * in_b),
            "l0a": ("L0A", rp * max(d, chunk) * in_b), "l0b": ("L0B", chunk * max(d, dv) * in_b),
            "acc_s": ("L0C", rp * sk * ACC_BYTES), "acc_o": ("L0C", rp * dv * ACC_BYTES),
            "ub_s": ("UB", rp * sk * in_b), "stats": ("UB", rp * ACC_BYTES),
        }
        if not apart:
            sizes["ub_o"] = ("UB", rp * dv * self.out_bytes)
        if self.scores is not None or apart:  # the scores stay in UB (for their store) while P is computed beside them
            sizes["ub_p"] = ("UB", rp * sk * in_b)
        if self.mask is not None:
            sizes["ub_m"] = ("UB", self.mask_elements(rows) * self.mask_bytes)
        return sizes

    def fits(self, profile: SocProfile, rows: int, chunk: int, apart: bool = False) -> bool:
        """Whether the buffers, ping and pong each, fit the core's memories."""
        capacity = {"L1": profile.l1_bytes, "L0A": profile.l0a_bytes, "L0B": profile.l0b_bytes, "L0C": profile.l0c_bytes, "UB": profile.ub_bytes}
        used = dict.fromkeys(capacity, 0)
        for level, nbytes in self.buffers(rows, chunk, apart).values():
            used[level] += 2 * aligned(profile, level, nbytes)
        return all(used[level] <= capacity[level] for level in capacity)

    def vector_steps(self, rows: int, s: tuple[SSAValue, ...] = (), stats: tuple[SSAValue, ...] = (),
                     mask: tuple[SSAValue, ...] = ()) -> list[Step]:
        """The V instructions on a unit's scores (in UB `s`, row statistics in `stats`):
        the pre-steps, then the softmax's recipe, its row reductions as `recipes` does them."""
        d, n, size = dtype_name(self.dtype), rows * _pad(self.sk), self.in_bytes
        steps = [Step(i, t.format(d=d), n, size, s + (mask if i in ("VADD", "VSEL") else ())) for i, t in self.pre]
        return steps + softmax_steps(d, rows, _pad(self.sk), size, s + stats)


@dataclass(frozen=True)
class FlashTiling:
    """Query tiles of `rows`, the key length in L0 chunks of `chunk`, and the blocks:
    `head_dim` x `tile_dim`, each taking `block_heads` heads of `block_tiles` tiles."""

    rows: int
    chunk: int
    head_dim: int
    tile_dim: int
    block_heads: int
    block_tiles: int

    def tiles(self, sq: int) -> list[int]:
        """The rows of a block's query tiles of one head: all of sq's tiles, the last
        its tail, where one block takes the whole head; else whole tiles (the largest share)."""
        if self.tile_dim > 1:
            return [self.rows] * self.block_tiles
        full, rows, tail = split(sq, self.rows)
        return [rows] * full + ([tail] if tail else [])

    def params(self) -> dict[str, int]:
        return {
            "flash_rows": self.rows, "flash_chunk": self.chunk, "flash_head_dim": self.head_dim,
            "flash_tile_dim": self.tile_dim, "flash_block_heads": self.block_heads, "flash_block_tiles": self.block_tiles,
        }


def flash_tiling(profile: SocProfile, spec: Flash, cores: int) -> FlashTiling | None:
    """The query-tile rows and the split over the cores of least estimated block time,
    or None where no tile of 16 rows fits the core's buffers (a row of S must fit UB
    whole) or the part has a FIX pipe but its cores together (no way from L0C to UB);
    where the cores are apart, `apart_tiling`'s. For each candidate rows
    (multiples of 16 that fit, with the widest key chunk that fits L0A/L0B), each
    split of (heads, tiles) over the cores: a unit costs the busiest of its V, cube
    and MTE1 work, the first one all three (the pipeline fills), and the block its
    units, or its share of the chip's GM traffic (K and V read once per block taking
    the head) where that is more; of equal costs, the least time of the pipes wins,
    then the least traffic."""
    if profile.split_cores:
        return apart_tiling(profile, spec, cores)
    if profile.fix_pipe:
        return None
    chip = profile.gm_bytes_per_cycle * profile.ai_cores
    unit_cycles = cache(partial(_unit_cycles, spec))  # the candidates share a few (rows, chunk) units

    def cost(t: FlashTiling) -> tuple[float, float, float]:
        units = [unit_cycles(r, t.chunk) for r in t.tiles(spec.sq)]
        pipes = t.block_heads * sum(max(u) for u in units) + sum(units[0])
        traffic = (
            spec.heads * spec.sq * (spec.d * spec.in_bytes + spec.dv * spec.out_bytes)
            + t.tile_dim * spec.heads * spec.sk * (spec.d + spec.dv) * spec.in_bytes
        )
        return max(pipes, traffic / chip), pipes, traffic

    return min(flash_candidates(profile, spec, cores), key=cost, default=None)


def flash_candidates(profile: SocProfile, spec: Flash, cores: int) -> Iterator[FlashTiling]:
    """Every tiling the searches weigh, in order: for each query-tile rows (multiples
    of 16 whose buffers fit, with the widest key chunk that fits L0A/L0B; more rows
    fit no better once some do not), each split of (heads, tiles) over the cores."""
    for rows in range(FRACTAL, _pad(spec.sq) + 1, FRACTAL):
        chunk = next((c for c in range(_pad(spec.sk), 0, -FRACTAL) if spec.fits(profile, rows, c, profile.split_cores)), None)
        if chunk is None:
            return
        for (heads, tiles), (head_dim, tile_dim) in block_splits((spec.heads, -(-spec.sq // rows)), cores).items():
            yield FlashTiling(rows, chunk, head_dim, tile_dim, heads, tiles)


def _unit_cycles(spec: Flash, rows: int, chunk: int) -> tuple[float, float, float]:
    """(V, cube, MTE1) cycles of one unit (tiling cost only): the softmax's steps, and
    the two drains from L0C at `VECTOR_REPEAT_CYCLES` a repeat; the fractal MACs of
    the scores and the context, plus each mmad's overhead; the fractals moved into
    L0A (Q and P, per chunk) and L0B (K and V)."""
    steps = spec.vector_steps(rows)
    drains = rows * (_pad(spec.sk) * spec.in_bytes + _pad(spec.dv) * spec.out_bytes) / REPEAT_BYTES
    vector = sum(s.cycles for s in steps) + drains * VECTOR_REPEAT_CYCLES
    m, k, d, dv = _pad(rows) // FRACTAL, _pad(spec.sk) // FRACTAL, _pad(spec.d) // FRACTAL, _pad(spec.dv) // FRACTAL
    chunks = -(-_pad(spec.sk) // chunk)
    fractal = FRACTAL_BYTES / (FRACTAL * FRACTAL * spec.in_bytes)  # fractals per 16 x 16 block of elements
    mte1 = fractal * (m * (d * chunks + k) * L0A_FRACTAL_CYCLES + k * (d + dv) * L0B_FRACTAL_CYCLES)
    return vector, m * k * (d + dv) + 2 * chunks * MMAD_OVERHEAD, mte1


FREES = (
    *((c, p, e) for c, p in (("MTE1", "MTE2"), ("M", "MTE1"), ("V", "M"), ("MTE3", "V"), ("MTE1", "MTE3")) for e in (0, 1)),
    *((c, p, e) for c, p in (("MTE1", "MTE2"), ("V", "M"), ("MTE3", "V")) for e in (2, 3)),
)
"""The buffer-free events (consumer, producer, id): ids 0 and 1 are a unit's slots
(Q and P in L1, S in L0C and UB, the L0 steps), 2 and 3 the heads' K/V slots in L1
(MTE1 -> MTE2) and the context's L0C and UB slots."""


def flash_workspace(profile: SocProfile, spec: Flash, t: FlashTiling, blocks: int) -> int:
    """The workspace bytes of the phase: none on one core; where the cores are apart,
    each block's two slots of scores and two of probabilities."""
    return blocks * 4 * _pad(t.rows) * _pad(spec.sk) * spec.in_bytes if profile.split_cores else 0


def flash_phase(prog: Program, gm: Mapping[Hashable, SSAValue], spec: Flash, t: FlashTiling, ws: SSAValue | None = None) -> Ops:
    """One block's scores, softmax and context, unit by unit (see the module docstring);
    where the cores are apart, through the workspace `ws` (`apart_phase`)."""
    if prog.profile.split_cores:
        assert ws is not None
        return apart_phase(prog, gm, spec, t, ws)
    p, in_b, out_b = prog.profile, spec.in_bytes, spec.out_bytes
    sk, d, dv = _pad(spec.sk), _pad(spec.d), _pad(spec.dv)
    buf = {name: prog.pair(level, nbytes) for name, (level, nbytes) in spec.buffers(t.rows, t.chunk).items()}
    ub_p = buf.get("ub_p", buf["ub_s"])
    chunks = [t.chunk] * split(sk, t.chunk)[0] + ([sk % t.chunk] if sk % t.chunk else [])
    mask = "ub_m" in buf
    tiles = t.tiles(spec.sq)

    def mask_load(s: int, rows: int) -> Ops:
        return _mask_load(prog, gm, spec, buf, s, rows, s)

    def scores(s: int, rows: int, h: int, ahead: int, first: bool) -> Ops:
        """Unit's Q tile in, S = Q K^T, the softmax in UB, P into L1 (slot `s`, K/V slot
        `h`); the next unit's mask (of `ahead` rows, 0 for none) loads while this one runs."""
        rp = _pad(rows)
        ops: Ops = [WaitFlagOp("MTE1", "MTE2", s), copy(p, gm[spec.q], buf["q"][s], rows * d * in_b, spec.mode(spec.q)), SetFlagOp("MTE2", "MTE1", s)]
        ops += mask_load(1 - s, ahead)
        ops += [WaitFlagOp("MTE2", "MTE1", s), WaitFlagOp("V", "M", s)]
        for c, n in enumerate(chunks):
            z = c % 2
            ops += [WaitFlagOp("M", "MTE1", z), copy(p, buf["q"][s], buf["l0a"][z], rp * d * in_b), copy(p, buf["k"][h], buf["l0b"][z], d * n * in_b)]
            if c == len(chunks) - 1:
                ops.append(SetFlagOp("MTE1", "MTE2", s))
            ops += [*sync("MTE1", "M", z), MmadOp(buf["l0a"][z], buf["l0b"][z], buf["acc_s"][s], rp, d, n, spec.dtype), SetFlagOp("M", "MTE1", z)]
        ops += [SetFlagOp("M", "V", s), WaitFlagOp("M", "V", s), WaitFlagOp("MTE3", "V", s)]
        ops += [copy(p, buf["acc_s"][s], buf["ub_s"][s], rows * sk * in_b), SetFlagOp("V", "M", s)]
        if mask:
            ops.append(WaitFlagOp("MTE2", "V", s))
        steps = spec.vector_steps(rows, (buf["ub_s"][s],), (buf["stats"][s],), (buf["ub_m"][s],) if mask else ())
        into = [ub_p[s]] if ub_p is not buf["ub_s"] else []  # P beside the scores kept for their store
        for i, step in enumerate(steps):
            values = [*into, *step.values] if i >= len(spec.pre) else list(step.values)
            ops += vec(step.instr, step.dtypes, step.elements, values, step.element_bytes)
        if mask:
            ops.append(SetFlagOp("V", "MTE2", s))
        ops += sync("V", "MTE3", s)
        if spec.scores is not None:
            ops.append(copy(p, buf["ub_s"][s], gm[spec.scores], rows * spec.sk * in_b))
        ops += [WaitFlagOp("MTE1", "MTE3", s), copy(p, ub_p[s], buf["p"][s], rows * sk * in_b)]
        return ops + [SetFlagOp("MTE3", "V", s), SetFlagOp("MTE3", "MTE1", s)]

    def context(s: int, rows: int, h: int, last_of_head: bool) -> Ops:
        """A unit's P V (slot `s`, K/V slot `h`) into L0C, out through UB to GM; after a
        head's last unit its K/V slot is free."""
        rp = _pad(rows)
        ops: Ops = [WaitFlagOp("MTE3", "MTE1", s), WaitFlagOp("V", "M", 2 + s)]
        for c, n in enumerate(chunks):
            z = (len(chunks) + c) % 2
            ops += [WaitFlagOp("M", "MTE1", z), copy(p, buf["p"][s], buf["l0a"][z], rp * n * in_b), copy(p, buf["v"][h], buf["l0b"][z], n * dv * in_b)]
            if c == len(chunks) - 1:
                ops += [SetFlagOp("MTE1", "MTE3", s)] + ([SetFlagOp("MTE1", "MTE2", 2 + h)] if last_of_head else [])
            ops += [*sync("MTE1", "M", z), MmadOp(buf["l0a"][z], buf["l0b"][z], buf["acc_o"][s], rp, n, dv, spec.dtype), SetFlagOp("M", "MTE1", z)]
        ops += [*sync("M", "V", 2 + s), WaitFlagOp("MTE3", "V", 2 + s), copy(p, buf["acc_o"][s], buf["ub_o"][s], rows * dv * out_b)]
        ops += [SetFlagOp("V", "M", 2 + s), *sync("V", "MTE3", 2 + s), copy(p, buf["ub_o"][s], gm[spec.out], rows * spec.dv * out_b)]
        return ops + [SetFlagOp("MTE3", "V", 2 + s)]

    def load_head(h: int) -> Ops:
        """A head's K and V into K/V slot `h`."""
        ops = body([WaitFlagOp("MTE1", "MTE2", 2 + h), copy(p, gm[spec.k], buf["k"][h], spec.sk * d * in_b, spec.mode(spec.k))])
        return ops + body([copy(p, gm[spec.v], buf["v"][h], spec.sk * dv * in_b, spec.mode(spec.v)), *sync("MTE2", "MTE1", 2 + h)])

    frees = [*FREES, *(("V", "MTE2", e) for e in (0, 1) if mask)]
    return [SetFlagOp(*f) for f in frees] + mask_load(0, tiles[0]) + _units(t, tiles, load_head, scores, context) + [WaitFlagOp(*f) for f in frees]


def _mask_load(
    prog: Program, gm: Mapping[Hashable, SSAValue], spec: Flash, buf: Mapping[str, tuple[SSAValue, SSAValue]], s: int, rows: int, event: int,
) -> Ops:
    """The mask rows of a unit of `rows` into UB slot `s` (nothing without a mask or
    rows), after V -> MTE2 `event` (the slot free) and before MTE2 -> V `event`."""
    if "ub_m" not in buf or not rows:
        return []
    load = copy(prog.profile, gm[spec.mask], buf["ub_m"][s], spec.mask_elements(rows) * spec.mask_bytes)
    return [WaitFlagOp("V", "MTE2", event), load, SetFlagOp("MTE2", "V", event)]


def _units(t: FlashTiling, tiles: Sequence[int], load_head: Callable[[int], Ops], scores: Callable[..., Ops], context: Callable[..., Ops]) -> Ops:
    """A block's units in order, each body holding a unit's scores and the previous
    unit's context (one unit late; the previous head's last, for a head's first tile),
    the last unit's context after them: `load_head(h)` loads a head into K/V slot `h`,
    `scores(s, rows, h, ahead, first)` and `context(s, rows, h, last_of_head)` build
    a unit in slot `s` (`ahead` the next unit's rows, 0 for none; `first` the head's first)."""

    def head(h: int, first: bool, last: bool) -> Ops:
        """One head's load and its tiles; the block's last head's last unit has no next unit."""
        s0 = h * len(tiles) % 2
        ahead = [*tiles[1:], 0 if last else tiles[0]]
        ops = load_head(h)
        ops += body(scores(s0, tiles[0], h, ahead[0], True) + ([] if first else context(1 - s0, tiles[-1], 1 - h, True)))
        middle = len(tiles) - 2  # the last middle tile's next unit is the tail
        if middle > 1:
            ops += double_buffered(
                middle - 1, tiles[1], 0, lambda s, r: body(scores(s, r, h, r, False) + context(1 - s, r, h, False)), [], 1 - s0
            )
        if middle > 0:
            s = (s0 + middle) % 2
            ops += body(scores(s, tiles[-2], h, ahead[-2], False) + context(1 - s, tiles[-2], h, False))
        if len(tiles) > 1:
            s = (s0 + len(tiles) - 1) % 2
            ops += body(scores(s, tiles[-1], h, ahead[-1], False) + context(1 - s, tiles[-2], h, False))
        return ops

    ops = head(0, True, t.block_heads == 1)
    if t.block_heads > 1:
        ops += double_buffered(t.block_heads - 2, 1, 0, lambda h, _: head(h, False, False), [], 1)
        ops += head((t.block_heads - 1) % 2, False, True)
    last = t.block_heads * len(tiles) - 1
    return ops + body(context(last % 2, tiles[-1], (t.block_heads - 1) % 2, True))


def _units_two_late(
    t: FlashTiling, tiles: Sequence[int], load_head: Callable[[int], Ops], scores: Callable[[int, int, int, bool], Ops],
    context: Callable[[int, int, int, bool], Ops], softmax: Callable[[int, int, int], Ops],
) -> Ops:
    """`_units` for the cores apart, each body holding a unit's scores, the context of
    the unit two before (of the same slot; a head's first two tiles the previous
    head's last two), then the unit's softmax, so that the cube core computes two
    units' scores ahead of a context while the vector cores run the softmax; the
    last two contexts after them. `scores(s, rows, h, first)` and `softmax(s, rows,
    ahead)` are a unit's two halves. Heads of at least two tiles (a head's K/V slot
    frees in the second body of the next head, before the head after loads into it)."""
    n = len(tiles)
    assert n >= 2

    def head(h: int, first: bool, last: bool) -> Ops:
        s0 = h * n % 2
        ahead = [*tiles[1:], 0 if last else tiles[0]]

        def unit(i: int, mid: bool = False) -> Ops:
            """Tile i's scores, the context two units before it, tile i's softmax."""
            s, rows = (s0 + i) % 2, tiles[1] if mid else tiles[i]
            if i >= 2:
                before = context(s, tiles[1] if mid else tiles[i - 2], h, False)
            else:
                before = [] if first else context(s, tiles[n - 2 + i], 1 - h, i == 1)
            return body(scores(s, rows, h, i == 0) + before + softmax(s, rows, tiles[1] if mid else ahead[i]))

        ops = load_head(h) + unit(0) + unit(1)
        if n - 4 > 0:  # the middle tiles whose next tile is whole
            ops += double_buffered(n - 4, tiles[1], 0, lambda sl, _: unit(2 + (sl - s0) % 2, mid=True), [], (s0 + 2) % 2)
        return ops + [op for i in range(max(2, n - 2), n) for op in unit(i)]

    ops = head(0, True, t.block_heads == 1)
    if t.block_heads > 1:
        ops += double_buffered(t.block_heads - 2, 1, 0, lambda h, _: head(h, False, False), [], 1)
        ops += head((t.block_heads - 1) % 2, False, True)
    h, s0 = (t.block_heads - 1) % 2, (t.block_heads * n) % 2
    return ops + body(context(s0, tiles[-2], h, False)) + body(context(1 - s0, tiles[-1], h, True))


# ------------------------------------------------------------ cores apart (the 910B)

APART_EVENTS = 8
"""The event ids the phase uses between MTE2 and MTE1: Q's slots, K/V's, P's and the heads' V ready."""
APART_FREES = (
    *((c, p, e) for c, p in (("MTE1", "MTE2"), ("M", "MTE1"), ("FIX", "M"), ("V", "MTE2"), ("MTE3", "V")) for e in (0, 1)),
    *(("MTE1", "MTE2", e) for e in (2, 3, 4, 5)),
    *(("FIX", "M", e) for e in (2, 3)),
)
"""The buffer-free events within a core (consumer, producer, id): ids 0 and 1 a unit's
slots (Q in L1, S in L0C, S and P in UB, the L0 steps), 2 and 3 the K/V slots in L1
and the context's L0C slots, 4 and 5 P's slots in L1."""
APART_CROSS = (("MTE2", "FIX", "vector"), ("MTE2", "MTE3", "cube"))
"""The workspace slots' free events across the cores (consumer, producer, the core of
MTE2), ids 0 and 1: S's (the vector core loaded it), P's (the cube core loaded it)."""


def apart_tiling(profile: SocProfile, spec: Flash, cores: int) -> FlashTiling | None:
    """The flash tiling where the cube and vector cores are apart (the 910B): rows and
    split of least estimated block time (`_apart_cycles`); None on other parts, where
    no tile of 16 rows fits (a row of S must fit UB whole), where the scores are also
    a result, or where the part has too few event ids."""
    if not profile.split_cores or spec.scores is not None or profile.event_ids < APART_EVENTS:
        return None
    unit_cycles = cache(partial(_unit_cycles, spec))  # the candidates share a few (rows, chunk) units
    return min(flash_candidates(profile, spec, cores), key=lambda t: _apart_cycles(profile, spec, t, unit_cycles), default=None)


def _apart_cycles(profile: SocProfile, spec: Flash, t: FlashTiling, unit_cycles: Callable[[int, int], tuple[float, float, float]]) -> float:
    """A block's estimated cycles (tiling cost only): each head's K and V loads, the
    first unit's whole chain (Q in, scores out through the workspace, the softmax on
    the vector cores, P back into L1, the context out), then each further unit at the
    pace of the busier core; or the block's share of the chip's GM traffic where
    that is more. A GM copy costs `COPY_LATENCY_NS` plus its bytes at a core's share."""
    share = max(profile.gm_bytes_per_cycle, 1.0)
    latency = COPY_LATENCY_NS * profile.clock_mhz / 1000
    vector_cores = profile.vector_per_cube

    def load(nbytes: float, cores: int = 1) -> float:
        return latency + nbytes / cores / (CORE_LOAD_SHARE * share)

    def store(nbytes: float, cores: int = 1) -> float:
        return latency + nbytes / cores / (CORE_STORE_SHARE * share)

    sk, d, dv, in_b = _pad(spec.sk), _pad(spec.d), _pad(spec.dv), spec.in_bytes

    def chain(r: int) -> tuple[float, float]:
        """A unit of `r` rows: its whole chain, and its pace behind another unit."""
        s_bytes = r * sk * in_b
        vector, cube, mte1 = unit_cycles(r, t.chunk)
        scores = load(r * d * in_b) + mte1 / 2 + cube * d / (d + dv) + store(s_bytes)
        softmax = load(s_bytes, vector_cores) + vector / vector_cores + store(s_bytes, vector_cores)
        context = load(s_bytes) + mte1 / 2 + cube * dv / (d + dv) + store(_pad(r) * dv * spec.out_bytes)
        return scores + softmax + context, max(load(r * d * in_b) + load(s_bytes), cube, softmax)

    units = [chain(r) for r in t.tiles(spec.sq)]
    heads = t.block_heads * (load(sk * d * in_b) + load(sk * dv * in_b))
    pipes = heads + units[0][0] + t.block_heads * sum(pace for _, pace in units) - units[0][1]
    traffic = spec.heads * spec.sq * (spec.d * in_b + spec.dv * spec.out_bytes) + t.tile_dim * spec.heads * spec.sk * (spec.d + spec.dv) * in_b
    return max(pipes, traffic / (share * profile.ai_cores))


def apart_phase(prog: Program, gm: Mapping[Hashable, SSAValue], spec: Flash, t: FlashTiling, ws: SSAValue) -> Ops:
    """One block's scores, softmax and context, unit by unit, where the cube and vector
    cores are apart: the cube core's FIX writes a unit's scores to a workspace slot,
    a vector core loads them, computes the softmax and stores P to another, and the
    cube core loads P into L1 for the context, which FIX writes out; each side waits
    for the other by a flag across the cores. Where a block takes two or more query
    tiles of a head, each context runs two units late (`_units_two_late`): the cube
    core computes the next two units' scores while the vector cores run a softmax;
    else one unit late, as on one core."""
    p, in_b, out_b = prog.profile, spec.in_bytes, spec.out_bytes
    sk, d, dv = _pad(spec.sk), _pad(spec.d), _pad(spec.dv)
    buf = {name: prog.pair(level, nbytes) for name, (level, nbytes) in spec.buffers(t.rows, t.chunk, apart=True).items()}
    chunks = [t.chunk] * split(sk, t.chunk)[0] + ([sk % t.chunk] if sk % t.chunk else [])
    mask = "ub_m" in buf
    tiles = t.tiles(spec.sq)
    out_mode = "nz2nd" if spec.out_nd else "normal"

    def mask_load(s: int, rows: int) -> Ops:  # by the vector core, beside its scores' events 0 and 1
        return _mask_load(prog, gm, spec, buf, s, rows, 2 + s)

    def scores(s: int, rows: int, h: int, first: bool) -> Ops:
        """The cube core: Q's tile in (then the head's V, on its first unit), S = Q K^T,
        out by FIX to the workspace slot `s`."""
        rp = _pad(rows)
        ops: Ops = [WaitFlagOp("MTE1", "MTE2", s), copy(p, gm[spec.q], buf["q"][s], rows * d * in_b, spec.mode(spec.q)), SetFlagOp("MTE2", "MTE1", s)]
        if first:
            ops += [copy(p, gm[spec.v], buf["v"][h], spec.sk * dv * in_b, spec.mode(spec.v)), SetFlagOp("MTE2", "MTE1", 6 + h)]
        ops.append(WaitFlagOp("FIX", "M", s))
        for c, n in enumerate(chunks):
            z = c % 2
            ops += [WaitFlagOp("M", "MTE1", z), *([WaitFlagOp("MTE2", "MTE1", 2 + h)] if first and c == 0 else [])]
            ops.append(copy(p, buf["k"][h], buf["l0b"][z], d * n * in_b))
            ops += [*([WaitFlagOp("MTE2", "MTE1", s)] if c == 0 else []), copy(p, buf["q"][s], buf["l0a"][z], rp * d * in_b)]
            if c == len(chunks) - 1:
                ops.append(SetFlagOp("MTE1", "MTE2", s))
            ops += [*sync("MTE1", "M", z), MmadOp(buf["l0a"][z], buf["l0b"][z], buf["acc_s"][s], rp, d, n, spec.dtype), SetFlagOp("M", "MTE1", z)]
        if first:  # MTE1 goes on once the head's V is in L1 (the contexts move it on without a wait)
            ops.append(WaitFlagOp("MTE2", "MTE1", 6 + h))
        ops += [*sync("M", "FIX", s), WaitFlagOp("MTE2", "FIX", s, "vector"), copy(p, buf["acc_s"][s], ws, rows * sk * in_b)]
        return ops + [SetFlagOp("FIX", "M", s), SetFlagOp("FIX", "MTE2", s, "vector")]

    def softmax(s: int, rows: int, ahead: int) -> Ops:
        """The vector core: the scores of slot `s` in, the next unit's mask (`ahead` rows)
        behind them, the softmax beside them in UB, P out to the workspace slot `s`."""
        ops: Ops = [WaitFlagOp("FIX", "MTE2", s, "vector"), WaitFlagOp("V", "MTE2", s), copy(p, ws, buf["ub_s"][s], rows * sk * in_b)]
        ops += [SetFlagOp("MTE2", "FIX", s, "vector"), SetFlagOp("MTE2", "V", s), *mask_load(1 - s, ahead)]
        ops += [WaitFlagOp("MTE2", "V", s), *([WaitFlagOp("MTE2", "V", 2 + s)] if mask else []), WaitFlagOp("MTE3", "V", s)]
        steps = spec.vector_steps(rows, (buf["ub_s"][s],), (buf["stats"][s],), (buf["ub_m"][s],) if mask else ())
        for i, step in enumerate(steps):
            ops += vec(step.instr, step.dtypes, step.elements, [buf["ub_p"][s], *step.values] if i >= len(spec.pre) else list(step.values), step.element_bytes)
        ops += [*([SetFlagOp("V", "MTE2", 2 + s)] if mask else []), SetFlagOp("V", "MTE2", s), *sync("V", "MTE3", s)]
        ops += [WaitFlagOp("MTE2", "MTE3", s, "cube"), copy(p, buf["ub_p"][s], ws, rows * sk * in_b)]
        return ops + [SetFlagOp("MTE3", "V", s), SetFlagOp("MTE3", "MTE2", s, "cube")]

    def context(s: int, rows: int, h: int, last_of_head: bool) -> Ops:
        """The cube core: P of slot `s` into L1, P V into L0C, out by FIX; after a head's
        last unit its K/V slot is free."""
        rp = _pad(rows)
        ops: Ops = [WaitFlagOp("MTE3", "MTE2", s, "cube"), WaitFlagOp("MTE1", "MTE2", 4 + s), copy(p, ws, buf["p"][s], rows * sk * in_b)]
        ops += [SetFlagOp("MTE2", "MTE3", s, "cube"), SetFlagOp("MTE2", "MTE1", 4 + s), WaitFlagOp("FIX", "M", 2 + s)]
        for c, n in enumerate(chunks):
            z = (len(chunks) + c) % 2
            ops += [WaitFlagOp("M", "MTE1", z), copy(p, buf["v"][h], buf["l0b"][z], n * dv * in_b)]
            ops += [*([WaitFlagOp("MTE2", "MTE1", 4 + s)] if c == 0 else []), copy(p, buf["p"][s], buf["l0a"][z], rp * n * in_b)]
            if c == len(chunks) - 1:
                ops += [SetFlagOp("MTE1", "MTE2", 4 + s)] + ([SetFlagOp("MTE1", "MTE2", 2 + h)] if last_of_head else [])
            ops += [*sync("MTE1", "M", z), MmadOp(buf["l0a"][z], buf["l0b"][z], buf["acc_o"][s], rp, n, dv, spec.dtype), SetFlagOp("M", "MTE1", z)]
        ops += [*sync("M", "FIX", 2 + s), copy(p, buf["acc_o"][s], gm[spec.out], rows * spec.dv * out_b, out_mode)]
        return ops + [SetFlagOp("FIX", "M", 2 + s)]

    def load_head(h: int) -> Ops:
        """A head's K into K/V slot `h` (its V follows its first unit's Q)."""
        load = copy(p, gm[spec.k], buf["k"][h], spec.sk * d * in_b, spec.mode(spec.k))
        return body([WaitFlagOp("MTE1", "MTE2", 2 + h), load, SetFlagOp("MTE2", "MTE1", 2 + h)])

    frees = [*APART_FREES, *(("V", "MTE2", e) for e in (2, 3) if mask)]
    cross = [(c, q, e, core) for c, q, core in APART_CROSS for e in (0, 1)]
    ops: Ops = [SetFlagOp(*f) for f in frees] + [SetFlagOp(*f) for f in cross] + mask_load(0, tiles[0])
    if len(tiles) >= 2:
        ops += _units_two_late(t, tiles, load_head, scores, context, softmax)
    else:
        ops += _units(t, tiles, load_head, lambda s, rows, h, ahead, first: scores(s, rows, h, first) + softmax(s, rows, ahead), context)
    return ops + [WaitFlagOp(*f) for f in frees] + [WaitFlagOp(*f) for f in cross]
