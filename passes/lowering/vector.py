"""Vector kernels: tiles of whole rows in the Unified Buffer (see the package docstring)."""

from __future__ import annotations

import math
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from dialects import ascend_graph as ag
from dialects import shapes
from dialects.ascend_kernel import (
    ScalarOp,
    SetFlagOp,
    WaitFlagOp,
)
from ge.core.errors import ModelError
from ge.core.soc import SocProfile
from passes.lowering.program import (
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
    padding,
    repeat,
    split,
    sync,
)
from passes.lowering.recipes import (
    PROPORTIONAL,
    Step,
    emit_recipes,
    emit_steps,
    recipe,
    recipe_steps,
)

# --------------------------------------------------------------- vector kernels


@dataclass(frozen=True)
class Space:
    """The iteration space of a vector scope: `rows` of `row` elements."""

    rows: int
    row: int
    total: int


@dataclass(frozen=True)
class UbValue:
    """A value of a vector scope with its UB buffer: elements per row of the space,
    at most `cap` (a broadcast operand is read whole, once per tile), as laid out
    (`padding`: physical over logical elements), and whether GM reads or writes it.
    A `broadcast` input that a tile holds whole is `held`: loaded once per block,
    before the tiles, into one buffer."""

    value: SSAValue
    per_row: float
    cap: int
    element_bytes: int
    crosses_gm: bool
    padding: float
    broadcast: bool = False

    def held(self, rows: float) -> bool:
        return self.broadcast and self.per_row * rows >= self.cap

    def elements(self, rows: float) -> int:
        return max(1, math.ceil(min(self.cap, self.per_row * rows) * self.padding))

    def nbytes(self, rows: float) -> int:
        return self.elements(rows) * self.element_bytes


def ub_bytes(profile: SocProfile, values: Iterable[UbValue], rows: float) -> int:
    """UB for a tile of `rows`: every value its buffer, two for those GM reads or writes
    tile by tile."""
    return sum(aligned(profile, "UB", v.nbytes(rows)) * (2 if v.crosses_gm and not v.held(rows) else 1) for v in values)


def row_length(op: Operation) -> int:
    """Elements one row of the op needs whole (1 for elementwise work)."""
    x = ag.shape_of(op.operands[0].type) if op.operands else ()
    if isinstance(op, ag.ReduceOp):
        axes = shapes.norm_axes(op.props.ints("axes"), len(x)) or tuple(range(len(x)))
        return shapes.numel([x[a] for a in axes])
    if isinstance(op, ag.SoftmaxOp | ag.LogSoftmaxOp):
        return shapes.numel([x[a] for a in shapes.norm_axes(op.props.ints("axes"), len(x))])
    if isinstance(op, ag.LayerNormOp):
        return shapes.numel(x[shapes.norm_axis(op.props.int("begin_norm_axis"), len(x)) :])
    if isinstance(op, ag.InstanceNormOp | ag.GlobalPoolOp):
        return shapes.numel(x[2:])
    if isinstance(op, ag.ArgOp):
        return x[shapes.norm_axis(op.props.int("axis"), len(x))]
    if isinstance(op, ag.DFTOp | ag.STFTOp):  # whole signals, in and out
        start = op.props.int("axis") if isinstance(op, ag.DFTOp) else 1
        return max(shapes.numel(x[start:]), shapes.numel(ag.shape_of(op.results[0].type)[start:]))
    if isinstance(op, ag.NLLLossOp | ag.SoftmaxCrossEntropyLossOp):  # a loss reduced to a scalar needs all of it
        return shapes.numel(x) if op.props.str("reduction") != "none" else x[1]
    if isinstance(op, ag.RmsNormOp):
        return shapes.numel(x[shapes.norm_axis(op.props.int("begin_norm_axis"), len(x)) :])
    if isinstance(op, ag.GroupNormOp):
        return shapes.numel(x[1:]) // op.props.int("num_groups")
    if isinstance(op, ag.MVNV2Op):
        return shapes.numel([x[a] for a in shapes.norm_axes(op.props.ints("axes"), len(x))])
    if isinstance(op, ag.LRNOp):  # its window runs across the channels
        return shapes.numel(x[1:])
    if isinstance(op, ag.TopKV2Op):
        return x[shapes.norm_axis(op.props.int("dim"), len(x))]
    if isinstance(op, ag.RotaryPositionEmbeddingOp):  # a head's features: the rotated pairs span it
        return x[-1] if op.props.str("layout") == "BNSD" else x[-1] // op.props.int("num_heads")
    if isinstance(op, ag.HardmaxOp):
        return shapes.numel([x[a] for a in shapes.norm_axes(op.props.ints("axes"), len(x))])
    if isinstance(op, ag.CumulativeOp):  # a scan runs along its axis through everything inside it
        if not op.props.has("axis"):  # known when it runs: rows that hold a scan along any axis
            return shapes.numel(x)
        return shapes.numel(x[shapes.norm_axis(op.props.int("axis"), len(x)) :])
    if isinstance(op, ag.MatrixDeterminantOp):
        return shapes.numel(x[-2:])
    return 1


def _gathered(ops: Sequence[Operation]) -> dict[SSAValue, SSAValue]:
    """The tables gathers index (read row by row), with what each gathers from them."""
    return {op.operands[0]: op.results[0] for op in ops if isinstance(op, ag.GatherOp | ag.GatherElementsOp | ag.GatherNdOp)}


def vector_space(ops: Sequence[Operation]) -> Space:
    """The scope's rows. A reduction over an empty axis has rows of no element: it
    reads nothing and writes its identity, tiled as rows of one element."""
    tables = _gathered(ops)
    total = max(numel(v) for op in ops for v in (*op.operands, *op.results) if v not in tables)
    row = max(1, *(row_length(op) for op in ops))
    return Space(max(1, total // row), row, total)


def vector_values(
    ops: Sequence[Operation], crossing: set[SSAValue], space: Space, rows: int, inputs: Container[SSAValue] = (),
) -> list[UbValue]:
    """Every value of the scope, with its share of a tile of `space`'s rows (pieces
    of the scope's `rows` when a whole row does not fit); those of `inputs` read
    whole by every tile are broadcast inputs."""
    partitioned = {v for op in ops if isinstance(op, PROPORTIONAL) for v in (*op.operands, *op.results)}
    tables = _gathered(ops)
    found: dict[SSAValue, UbValue] = {}
    for v in (v for op in ops for v in (*op.operands, *op.results)):
        if v in found:
            continue
        n = numel(tables.get(v, v))
        broadcast = False
        if v in tables or n == space.total or v in partitioned:
            per = n / space.rows  # streamed with the rows
        elif n == rows and space.total > rows:
            per = n / space.rows  # one per row: a reduction's result
        else:
            per = float(space.row)  # broadcast along the rows: whole, up to a tile's worth
            broadcast = v in inputs
        found[v] = UbValue(v, per, n, element_bytes(v), v in crossing, padding(v), broadcast)
    return list(found.values())


def vector_plan(
    profile: SocProfile, ops: Sequence[Operation], inputs: Sequence[SSAValue], outputs: Sequence[SSAValue],
    cores: int, core_type: str, exact: bool = False, tiling: Mapping[str, int] | None = None,
) -> Plan:
    """Blocks and UB tiles of a vector scope, and its program. A row too long for
    the UB is cut into pieces that are: a reduction accumulates piece by piece, a
    normalisation (softmax, layer or instance norm) reads its pieces twice, once
    for the row's statistics and once to normalise. A `tiling` (block_dim and
    tile_rows, a tuned one: `passes.lowering.space`) replaces the analytic blocks
    and tile; one that does not fit is refused."""
    space = vector_space(ops)
    crossing = set(inputs) | set(outputs)
    values = vector_values(ops, crossing, space, space.rows, inputs)
    narrowest = min(v.element_bytes for v in values)
    unit = 32 // narrowest if space.row == 1 else 1  # rows of a 32-byte block of the narrowest value
    units = -(-space.rows // unit)
    block_dim = cores if exact else min(cores, units)  # exact: idle blocks where the work is short
    if tiling is not None:
        block_dim = tiling["block_dim"]
        if not 1 <= block_dim <= cores:
            raise ModelError(f"{scope_label(ops)}: the tiling {dict(tiling)} does not fit: 1 to {cores} blocks")
    block_rows = min(space.rows, -(-units // block_dim) * unit)
    if ub_bytes(profile, values, min(unit, block_rows)) > profile.ub_bytes:
        if tiling is not None:
            raise ModelError(f"{scope_label(ops)}: its rows are cut into pieces; it takes no tuned tiling")
        if space.row == 1:
            raise ModelError(f"{scope_label(ops)}: one 32-byte block of each value does not fit {profile.name}'s UB")
        return _row_pieces(profile, ops, inputs, outputs, space, block_dim, block_rows, core_type)
    lo, hi = 1, max(1, -(-block_rows // unit))
    while lo < hi:  # the largest tile, in units, that fits
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ub_bytes(profile, values, mid * unit) <= profile.ub_bytes else (lo, mid - 1)
    tile = pipelined_tile(profile, ops, inputs, outputs, values, block_rows, unit, lo * unit, block_dim) if tiling is None else tiling["tile_rows"]
    if tiling is not None and not (0 < tile <= block_rows and (tile % unit == 0 or tile == block_rows) and tile <= lo * unit):
        raise ModelError(f"{scope_label(ops)}: the tiling {dict(tiling)} does not fit: at most {cores} blocks and {min(lo * unit, block_rows)} rows a tile, in multiples of {unit}")
    computes = any(recipe(op) for op in ops)
    tiling = {
        "rows": space.rows, "row": space.row, "elements": space.total, "block_rows": block_rows,
        "tile_rows": tile, "tiles": -(-block_rows // tile), "ub_bytes": ub_bytes(profile, values, tile),
    }

    def program(gm: dict[SSAValue, SSAValue], workspace: SSAValue | None) -> Ops:
        prog = Program(profile)
        ub = {
            v.value: prog.pair("UB", v.nbytes(tile)) if v.crosses_gm and not v.held(tile) else (prog.alloc("UB", v.nbytes(tile)),) * 2
            for v in values
        }
        share = {v.value: v for v in values}
        held = [v for v in inputs if share[v].held(tile)]
        streamed = [v for v in inputs if v not in held]

        def tile_of(slot: int, rows: int) -> tuple[dict[SSAValue, SSAValue], dict[SSAValue, int], Ops, Ops]:
            """A tile's buffers (of `slot`), elements per value, streamed loads and stores."""
            buffers = {v: pair[slot] for v, pair in ub.items()}
            size = {v: share[v].elements(rows) for v in share}
            loads = [copy(profile, gm[v], buffers[v], size[v] * share[v].element_bytes) for v in streamed]
            stores = [copy(profile, buffers[v], gm[v], size[v] * share[v].element_bytes) for v in outputs]
            return buffers, size, loads, stores

        def make(slot: int, rows: int) -> Ops:
            buffers, size, loads, stores = tile_of(slot, rows)
            if not computes:
                return body([WaitFlagOp("MTE3", "MTE2", slot), *loads, *sync("MTE2", "MTE3", slot), *stores, SetFlagOp("MTE3", "MTE2", slot)])
            ops_: Ops = [WaitFlagOp("V", "MTE2", slot), *loads, *sync("MTE2", "V", slot), WaitFlagOp("MTE3", "V", slot)]
            ops_ += emit_recipes(ops, buffers, size.__getitem__, rows)
            ops_ += [SetFlagOp("V", "MTE2", slot), *sync("V", "MTE3", slot), *stores, SetFlagOp("MTE3", "V", slot)]
            return body(ops_)

        def alone(rows: int) -> Ops:
            """A block's one tile: the held operands load after its streamed ones, and
            V waits for them (event 2) only at the first instruction that reads one,
            so it starts on the streamed rows while they load (a LayerNorm's gamma
            and beta, read at its end)."""
            buffers, size, loads, stores = tile_of(0, rows)
            steps = recipe_steps(ops, size.__getitem__, rows, buffers)
            first = first_reading(steps, held)
            ops_: Ops = [WaitFlagOp("V", "MTE2", 0), *loads, SetFlagOp("MTE2", "V", 0), *once, SetFlagOp("MTE2", "V", 2)]
            ops_ += [WaitFlagOp("MTE2", "V", 0), WaitFlagOp("MTE3", "V", 0), *emit_steps(steps[:first], buffers)]
            ops_ += [WaitFlagOp("MTE2", "V", 2), *emit_steps(steps[first:], buffers)]
            ops_ += [SetFlagOp("V", "MTE2", 0), *sync("V", "MTE3", 0), *stores, SetFlagOp("MTE3", "V", 0)]
            return body(ops_)

        frees = [("V", "MTE2", 0), ("MTE3", "V", 0)] if computes else [("MTE3", "MTE2", 0)]
        setup = [ScalarOp(SETUP_INSTRS + 2 * len(held) + 4 * lookups(ops, block_rows / space.rows))]
        once = [copy(profile, gm[v], ub[v][0], share[v].nbytes(tile)) for v in held]
        if held and computes and block_rows <= tile:
            return [*prog.allocs, *setup, *double_buffered(1, block_rows, 0, lambda _, rows: alone(rows), frees)]
        ops_ = double_buffered(*split(block_rows, tile), make, frees)  # the held loads ahead of the first tile's on MTE2
        return [*prog.allocs, *setup, *once, *ops_]

    return Plan(block_dim, core_type, tiling, 0, program)


VECTOR_LOAD_SHARE = 1.4
VECTOR_STORE_SHARE = 2.0
"""What one core's GM -> UB loads and UB -> GM stores reach, in multiples of its even
share of the chip's GM rate: the fitted single-core rates of the 310P3 and 910B1
(24 and 45 B/cycle loading 64 KB, 34 and 64 storing; tiling cost only)."""
VECTOR_LOAD_LATENCY = 190
VECTOR_STORE_LATENCY = 115
"""Cycles a GM -> UB load and a UB -> GM store hold their pipe before the first byte:
about the mean of the 310P3's and 910B1's fits (140 and 240 loading, 85 and 145
storing; tiling cost only)."""


def pipelined_tile(
    profile: SocProfile, ops: Sequence[Operation], inputs: Sequence[SSAValue], outputs: Sequence[SSAValue],
    values: Sequence[UbValue], block_rows: int, unit: int, largest: int, used: int,
) -> int:
    """The tile (rows, a multiple of `unit`, at most `largest`) of the least estimated
    block time. Double buffering overlaps one tile's loads, another's vector work and
    a third's stores, but not the first tile's loads nor the last one's stores: one
    tile per block runs its pipes one after the other, and more tiles shorten that
    fill and drain while each pays its copies' latency and its instructions' issue.
    The estimate is the first tile's loads, vector work and stores (a single tile's
    held loads beside its vector work up to their first use), then each further
    tile at its busiest pipe (MTE2, V, MTE3, or the scalar unit issuing them), or the
    block's share of the chip's GM bandwidth if that is longer; between tiles that
    share of GM bounds alike, the shorter pipeline (L2 may serve the reads faster)."""
    share = max(profile.gm_bytes_per_cycle, 1.0)
    chip = share * max(used, 1)
    load_rate, store_rate = min(chip, VECTOR_LOAD_SHARE * share), min(chip, VECTOR_STORE_SHARE * share)
    by_value = {v.value: v for v in values}
    with_buffer = set(by_value)

    def cycles(tile: int) -> tuple[float, float]:
        tiles = -(-block_rows // tile)
        steps = recipe_steps(ops, lambda v: by_value[v].elements(tile), tile, with_buffer)
        held = [v for v in inputs if by_value[v].held(tile)]
        once = sum(VECTOR_LOAD_LATENCY + by_value[v].nbytes(tile) / load_rate for v in held)
        load = sum(VECTOR_LOAD_LATENCY + by_value[v].nbytes(tile) / load_rate for v in inputs if v not in held)
        store = sum(VECTOR_STORE_LATENCY + by_value[v].nbytes(tile) / store_rate for v in outputs)
        vector = sum(s.cycles for s in steps)
        scalar = 4 + 2 * (len(inputs) + len(outputs)) + len(steps)
        moved = tiles * sum(by_value[v].nbytes(tile) for v in (*inputs, *outputs) if v not in held)
        gm = used * (moved + sum(by_value[v].nbytes(tile) for v in held)) / chip
        if tiles == 1 and held and steps:  # `vector_plan`'s `alone`: the held loads beside V up to their first use
            before = sum(s.cycles for s in steps[:first_reading(steps, held)])
            pipes = load + max(once, before) + vector - before + store
        else:
            pipes = once + load + vector + store + (tiles - 1) * max(load, vector, store, scalar)
        return max(pipes, gm), pipes

    units = -(-min(largest, block_rows) // unit)
    candidates = {min(-(-units // n) * unit, block_rows) for n in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32) if n <= units}
    return min(sorted(candidates, reverse=True), key=cycles)


def first_reading(steps: Sequence[Step], values: Container[SSAValue]) -> int:
    """The index of the first of `steps` that reads one of `values` (their count if none does)."""
    return next((i for i, step in enumerate(steps) if any(v in values for v in step.values)), len(steps))


def lookups(ops: Sequence[Operation], share: float) -> int:
    """The table slices the gathers of `ops` look up in a block doing `share` of the
    scope: each costs its source address (a slice is what one index selects, the
    table's elements after the gathered axis)."""
    count = 0
    for op in ops:
        if isinstance(op, ag.GatherOp):
            x = ag.shape_of(op.x.type)
            inner = shapes.numel(x[shapes.norm_axis(op.props.int("axis"), len(x)) + 1 :])
            count += math.ceil(numel(op.y) / max(inner, 1) * share)
    return count


NORMALISING = (
    ag.SoftmaxOp, ag.LogSoftmaxOp, ag.LayerNormOp, ag.InstanceNormOp,
    ag.SoftmaxCrossEntropyLossOp, ag.RmsNormOp, ag.GroupNormOp, ag.MVNV2Op,
)


def _row_pieces(
    profile: SocProfile, ops: Sequence[Operation], inputs: Sequence[SSAValue], outputs: Sequence[SSAValue],
    space: Space, block_dim: int, block_rows: int, core_type: str,
) -> Plan:
    """A vector scope whose rows are cut into the largest pieces that fit the UB."""
    crossing = set(inputs) | set(outputs)
    pieces = 2
    while True:
        part = Space(space.rows * pieces, -(-space.row // pieces), space.total)
        values = vector_values(ops, crossing, part, space.rows)
        if ub_bytes(profile, values, 1) <= profile.ub_bytes:
            break
        if part.row == 1:
            raise ModelError(f"{scope_label(ops)}: not even one element of each value fits {profile.name}'s UB")
        pieces *= 2
    piece = part.row
    passes = 2 if any(isinstance(op, NORMALISING) for op in ops) else 1
    tiling = {
        "rows": space.rows, "row": space.row, "elements": space.total, "block_rows": block_rows,
        "row_pieces": -(-space.row // piece), "piece": piece, "passes": passes, "ub_bytes": ub_bytes(profile, values, 1),
    }

    def program(gm: dict[SSAValue, SSAValue], workspace: SSAValue | None) -> Ops:
        prog = Program(profile)
        ub = {v.value: prog.pair("UB", v.nbytes(1)) if v.crosses_gm else (prog.alloc("UB", v.nbytes(1)),) * 2 for v in values}
        share = {v.value: v for v in values}

        def make(slot: int, elements: int) -> Ops:
            buffers = {v: pair[slot] for v, pair in ub.items()}
            size = {v: share[v].elements(elements / piece) for v in share}
            loads = [copy(profile, gm[v], buffers[v], size[v] * share[v].element_bytes) for _ in range(passes) for v in inputs]
            stores = [copy(profile, buffers[v], gm[v], size[v] * share[v].element_bytes) for v in outputs]
            ops_: Ops = [WaitFlagOp("V", "MTE2", slot), *loads, *sync("MTE2", "V", slot), WaitFlagOp("MTE3", "V", slot)]
            ops_ += emit_recipes(ops, buffers, size.__getitem__, 1)
            ops_ += [SetFlagOp("V", "MTE2", slot), *sync("V", "MTE3", slot), *stores, SetFlagOp("MTE3", "V", slot)]
            return body(ops_)

        row = lambda: body(double_buffered(*split(space.row, piece), make, [("V", "MTE2", 0), ("MTE3", "V", 0)]))
        return [*prog.allocs, ScalarOp(SETUP_INSTRS), *repeat(block_rows, row)]

    return Plan(block_dim, core_type, tiling, 0, program)


def scope_label(ops: Sequence[Operation]) -> str:
    op = ops[0]
    return f"{op.OP_TYPE} '{op.label}'" if isinstance(op, ag.AscendOp) else op.name
