"""The simulator's timing against hand-derived numbers.

Pipes run in parallel and meet only at flags; a full queue stalls the scalar unit;
loops timed in closed form take exactly the cycles of their iterations run one by
one; a cube-bound matmul takes its cube blocks, a large elementwise add its bytes
at the chip's GM bandwidth; doubling the cores halves a compute-bound kernel and
not a latency-bound one; runs are deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ge
from dialects import ascend_kernel as ak
from ge.core import soc as socs
from ge.models import DEMO_MODELS
from ge.sim.config import RunConfig
from ge.session import Session
from ge.sim import costs, program, timing
from ge.sim.program import LOOP, PIPE

B1 = "Ascend910B1"


# ----------------------------------------------------------- writing programs


def copy(pipe: str, src: str, dst: str, nbytes: int) -> str:
    return f'ascend_kernel.copy "{pipe}" %a -> %b, {nbytes} bytes : !ascend_kernel.buffer<"{src}"> -> !ascend_kernel.buffer<"{dst}">'


def mmad(m: int, k: int, n: int) -> str:
    return f'ascend_kernel.mmad %a, %b -> %c, {m} x {k} x {n}, f16 : !ascend_kernel.buffer<"L0A">, !ascend_kernel.buffer<"L0B"> -> !ascend_kernel.buffer<"L0C">'


def vec(instr: str, elements: int) -> str:
    return f'ascend_kernel.vec "{instr}" "FP16_FP16_FP16"(%u, %v) x {elements} : !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">'


def flag(kind: str, src: str, dst: str, event: int) -> str:
    return f'ascend_kernel.{kind} "{src}" -> "{dst}", {event}'


def sync(src: str, dst: str, event: int) -> list[str]:
    return [flag("set_flag", src, dst, event), flag("wait_flag", src, dst, event)]


def loop(trips: int, body: list[str]) -> list[str]:
    return [f"ascend_kernel.loop {trips} times {{", *body, "}"]


def timed(lines: list[str], soc: str = B1, trace: bool = False) -> timing.BlockTiming:
    return timing.time_block(program.decode(lines, soc), trace)


def unrolled(instructions: tuple) -> tuple:
    """The program with every loop written out iteration by iteration."""
    out: list[tuple] = []
    for ins in instructions:
        out += list(unrolled(ins[2])) * ins[1] if ins[0] == LOOP else [ins]
    return tuple(out)


GM_L1 = costs.transfer_cycles(B1, "GM_TO_L1", 65536)
MMAD = costs.mmad_cycles(B1, 128, 128, 128)


# ------------------------------------------------------------------- one block


def test_pipes_without_flags_run_in_parallel() -> None:
    t = timed([copy("MTE2", "GM", "L1", 65536), mmad(128, 128, 128)])
    assert t.cycles == pytest.approx(max(GM_L1, MMAD))
    assert t.busy[PIPE["MTE2"]] == pytest.approx(GM_L1) and t.busy[PIPE["M"]] == pytest.approx(MMAD)


def test_a_flag_orders_two_pipes() -> None:
    t = timed([copy("MTE2", "GM", "L1", 65536), *sync("MTE2", "M", 0), mmad(128, 128, 128)])
    assert t.cycles == pytest.approx(GM_L1 + timing.FLAG_CYCLES + MMAD)


def test_a_pipe_runs_its_queue_in_order() -> None:
    t = timed([copy("MTE2", "GM", "L1", 65536)] * 3)
    assert t.cycles == pytest.approx(3 * GM_L1)


def test_a_full_queue_stalls_the_issue_of_everything_after_it() -> None:
    copies = timing.QUEUE_DEPTH + 4
    t = timed([copy("MTE2", "GM", "L1", 65536)] * copies + [vec("VADD", 128)], trace=True)
    assert t.spans is not None
    (v,) = [s for s in t.spans if s.pipe == PIPE["V"]]
    assert v.start == pytest.approx((copies - timing.QUEUE_DEPTH - 1) * GM_L1)  # issued when copy 4 starts
    assert t.cycles == pytest.approx(copies * GM_L1)


def test_sync_all_waits_for_every_pipe_and_ends_a_phase() -> None:
    t = timed([copy("MTE2", "GM", "L1", 65536), "ascend_kernel.sync_all", mmad(128, 128, 128)])
    assert t.phases == pytest.approx((GM_L1 + timing.SYNC_ALL_CYCLES, MMAD))
    assert t.phase_gm_bytes == (65536, 0)


def double_buffered_body(slot: int) -> list[str]:
    """Load a panel, let the cube use it, free it: a ping-pong iteration."""
    return [
        "ascend_kernel.scalar 6 instrs",
        flag("wait_flag", "M", "MTE2", slot),
        copy("MTE2", "GM", "L1", 65536),
        *sync("MTE2", "M", slot),
        mmad(128, 128, 128),
        mmad(128, 128, 128),
        flag("set_flag", "M", "MTE2", slot),
    ]


def double_buffered(trips: int) -> list[str]:
    primes = [flag("set_flag", "M", "MTE2", 0), flag("set_flag", "M", "MTE2", 1)]
    drains = [flag("wait_flag", "M", "MTE2", 0), flag("wait_flag", "M", "MTE2", 1)]
    return primes + loop(trips, double_buffered_body(0) + double_buffered_body(1)) + drains


def test_double_buffering_overlaps_loads_with_the_cube() -> None:
    t = timed(double_buffered(500))
    per_iteration = 2 * max(GM_L1, 2 * MMAD)
    assert t.cycles == pytest.approx(500 * per_iteration, rel=0.01)
    assert t.cube_blocks == 1000 * 2 * 8 * 8 * 8


@pytest.mark.parametrize("trips", [1, 2, 3, 7, 64, 1000])
def test_closed_form_loops_take_the_cycles_of_their_iterations(trips: int) -> None:
    decoded = program.decode(double_buffered(trips) + loop(5, [vec("VEXP", 4096), copy("MTE3", "UB", "GM", 8192)]), B1)
    fast, slow = timing.time_block(decoded), timing.time_block(unrolled(decoded))
    assert fast.cycles == pytest.approx(slow.cycles, rel=1e-9)
    assert fast.busy == pytest.approx(slow.busy, rel=1e-9)
    assert fast.instructions == slow.instructions
    assert fast.gm_bytes == slow.gm_bytes


@pytest.mark.parametrize("soc", ["Ascend310P3", B1])
def test_closed_form_loops_match_unrolled_programs_of_compiled_kernels(soc: str) -> None:
    for demo in DEMO_MODELS:
        model = ge.compile(demo.path, {"soc_version": soc})
        for name, kernel in program.split_kernels(model.kernels).items():
            decoded = kernel.program()
            fast, slow = timing.time_block(decoded), timing.time_block(unrolled(decoded))
            assert fast.cycles == pytest.approx(slow.cycles, rel=1e-9), name
            assert fast.busy == pytest.approx(slow.busy, rel=1e-9), name


def test_a_cube_bound_matmul_takes_its_cube_blocks() -> None:
    """4096 x 4096 x 4096 in float16 on one 910B1 core, tiled by hand: 128 x 128 L0C
    tiles, K in L1 panels of 512 (double-buffered), L0 steps of 128 (double-buffered).
    Each panel's loads (2 x 128 KB: ~1,960 cycles) hide under its four mmads (~2,060)."""
    n, tile, panel, step = 4096, 128, 512, 128

    def l0(slot: int) -> list[str]:
        return [
            flag("wait_flag", "M", "MTE1", slot),
            copy("MTE1", "L1", "L0A", tile * step * 2),
            copy("MTE1", "L1", "L0B", step * tile * 2),
            *sync("MTE1", "M", slot),
            mmad(tile, step, tile),
            flag("set_flag", "M", "MTE1", slot),
        ]

    def l1(slot: int) -> list[str]:
        return [
            "ascend_kernel.scalar 20 instrs",
            flag("wait_flag", "MTE1", "MTE2", slot),
            copy("MTE2", "GM", "L1", tile * panel * 2),
            copy("MTE2", "GM", "L1", panel * tile * 2),
            *sync("MTE2", "MTE1", slot),
            *loop(panel // step // 2, l0(0) + l0(1)),
            flag("set_flag", "MTE1", "MTE2", slot),
        ]

    tile_body = [
        flag("wait_flag", "FIX", "M", 0),
        *loop(n // panel // 2, l1(0) + l1(1)),
        *sync("M", "FIX", 0),
        copy("FIX", "L0C", "GM", tile * tile * 2),
        flag("set_flag", "FIX", "M", 0),
    ]
    primes = [flag("set_flag", a, b, e) for a, b in (("MTE1", "MTE2"), ("M", "MTE1")) for e in (0, 1)] + [flag("set_flag", "FIX", "M", 0)]
    drains = [flag("wait_flag", a, b, e) for a, b in (("MTE1", "MTE2"), ("M", "MTE1")) for e in (0, 1)] + [flag("wait_flag", "FIX", "M", 0)]
    t = timed(["ascend_kernel.scalar 32 instrs", *primes, *loop((n // tile) ** 2, tile_body), *drains])
    cube_bound = n**3 / (16 * 16 * 16)
    assert t.cube_blocks == cube_bound
    assert cube_bound <= t.cycles <= 1.1 * cube_bound


# ------------------------------------------------------------- whole kernels


def onnx_model(tmp_path, op: str, shapes: list[list[int]], out: list[int], name: str) -> str:
    inputs = [helper.make_tensor_value_info(x, TensorProto.FLOAT16, s) for x, s in zip("ab", shapes)]
    graph = helper.make_graph(
        [helper.make_node(op, ["a", "b"], ["y"], name=name)], name, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT16, out)]
    )
    path = tmp_path / f"{name}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


@pytest.fixture(scope="module")
def matmul_4096(tmp_path_factory) -> ge.Model:
    path = onnx_model(tmp_path_factory.mktemp("mm"), "MatMul", [[4096, 4096], [4096, 4096]], [4096, 4096], "mm")
    return ge.compile(path, {"soc_version": B1})


def kernel_row(model: ge.Model, cores: int | None, name: str):
    result = Session(RunConfig(timing_only=True, aicore_num=cores)).run(model)
    (row,) = [r for r in result.profile.rows() if r.record.name == name]
    return row


def test_a_compiled_4096_matmul_on_one_core_runs_at_its_busiest_pipe(matmul_4096: ge.Model) -> None:
    """A block's cube work is the hand count of its share (block_m x block_n x 4096 /
    16^3 blocks; every block runs the largest share); on one core the kernel takes
    the work of its busiest pipe (the cube, or MTE2 where the tiling's panels cost
    more to load than to multiply), the other pipes hidden under it but for the
    drains: with one accumulator of the whole L0C (`l0c_buffers` 1) each tile's
    mmads wait for the previous tile to leave it."""
    row = kernel_row(matmul_4096, 1, "mm")
    assert row.record.stretch == 1.0
    t = row.record.block_timing
    (kernel,) = [op for op in matmul_4096.kernel_module().ops if isinstance(op, ak.KernelOp)]
    tiling = kernel.parameters
    assert tiling["m_dim"] * tiling["n_dim"] == row.record.block_dim
    assert t.cube_blocks == tiling["block_m"] * tiling["block_n"] * 4096 / (16 * 16 * 16)
    cube_bound = 4096**3 / (16 * 16 * 16)
    busiest = max(t.busy) * row.record.block_dim
    cycles = row.record.end - row.record.blocks[0].start
    assert cycles >= cube_bound
    assert busiest <= cycles <= (1.1 if tiling.get("l0c_buffers", 2) == 2 else 1.15) * busiest


def test_doubling_the_cores_halves_a_compute_bound_kernel(matmul_4096: ge.Model) -> None:
    """Up to 4 of the 24 cores the matmul's time is its cores' own work; beyond about 8,
    the chip's GM bandwidth binds instead (its tiles re-read A and B)."""
    for cores in (1, 2, 4):
        one, two = kernel_row(matmul_4096, cores, "mm"), kernel_row(matmul_4096, 2 * cores, "mm")
        assert one.record.duration / two.record.duration == pytest.approx(2, rel=0.1)


def test_doubling_the_cores_barely_changes_a_tiny_kernel(tmp_path) -> None:
    """A 1,024-element add waits longer for its launch than its blocks run: twice the
    cores halve its blocks' waves, not its time in the model."""
    model = ge.compile(onnx_model(tmp_path, "Add", [[1024], [1024]], [1024], "small_add"), {"soc_version": B1})
    one, two = kernel_row(model, 12, "small_add").record, kernel_row(model, 24, "small_add").record
    assert two.wait == pytest.approx(timing.KERNEL_LAUNCH_US * socs.load(B1).clock_mhz)
    assert two.wait > two.duration
    assert (one.wait + one.duration) / (two.wait + two.duration) < 1.3


def test_a_large_elementwise_add_runs_at_the_chips_gm_bandwidth(tmp_path) -> None:
    n = 1 << 26
    model = ge.compile(onnx_model(tmp_path, "Add", [[n], [n]], [n], "add"), {"soc_version": B1})
    row = kernel_row(model, None, "add")
    profile = socs.load(B1)
    bound = 3 * 2 * n / (profile.ai_cores * profile.gm_bytes_per_cycle)  # two reads and a write of float16
    blocks = row.record.end - min(b.start for b in row.record.blocks)
    assert bound <= blocks <= 1.1 * bound
    assert row.bound == "memory"


# -------------------------------------------------------------------- runs


def test_blocks_beyond_the_cores_run_in_waves() -> None:
    t = timed([copy("MTE2", "GM", "L1", 65536)])
    cores = timing.Cores({"AiCore": 4})
    run = timing.run_kernel(cores, "AiCore", 0.0, 10, t, timing.GmLedger(1e9))
    assert run.end == pytest.approx(math.ceil(10 / 4) * t.cycles)
    assert sorted(b.core for b in run.blocks[:4]) == [0, 1, 2, 3]


def test_kernels_on_different_streams_overlap() -> None:
    """A second stream's kernel is launched while the first stream's runs; where that
    one holds every core it waits for them, and the wait is not in its duration
    (msprof's Task Wait Time, not its Task Duration): no two kernels' blocks share a core."""
    model = ge.compile(DEMO_MODELS[0].path, {"soc_version": "Ascend310P3"})
    profile = Session(RunConfig(timing_only=True)).run(model).profile
    kernels = profile.kernels()
    assert {r.stream for r in kernels} != {0}
    launched = [(a, b) for a in kernels for b in kernels if a.stream < b.stream and a.start - a.wait < b.end and b.start - b.wait < a.end]
    assert launched
    assert any(b.wait > a.wait for a, b in launched)
    blocks = sorted((p.core, p.start, p.end) for r in kernels for p in r.blocks)
    assert all(c1 != c2 or e1 <= s2 + 1e-6 for (c1, _, e1), (c2, s2, _) in zip(blocks, blocks[1:]))


def test_two_runs_are_identical() -> None:
    model = ge.compile(DEMO_MODELS[1].path, {"soc_version": B1})
    session = Session()
    feeds = DEMO_MODELS[1].sample_inputs(0)
    first, second = session.run(model, feeds), Session().run(model, feeds)
    assert first.profile.records == second.profile.records
    assert first.latency_us == second.latency_us
    for name, value in first.outputs.items():
        np.testing.assert_array_equal(value, second.outputs[name])


def test_a_loop_without_a_steady_state_in_time_is_extrapolated_closely(monkeypatch, caplog) -> None:
    """Past `MAX_EXPLICIT_TRIPS` iterations each clock goes on at its last advance;
    cut to 3, it extrapolates once the queues are full, and stays within a few percent."""
    body = ["ascend_kernel.scalar 2 instrs", copy("MTE2", "GM", "L1", 4096), vec("VEXP", 8192), copy("MTE3", "UB", "GM", 2048)]
    decoded = program.decode(loop(2000, body), B1)
    exact = timing.time_block(unrolled(decoded))
    monkeypatch.setattr(timing, "MAX_EXPLICIT_TRIPS", 3)
    with caplog.at_level("DEBUG", logger="ge.sim"):
        estimate = timing.time_block(decoded)
    assert "shows no steady state" in caplog.text
    assert estimate.cycles == pytest.approx(exact.cycles, rel=0.05)
    assert estimate.busy == pytest.approx(exact.busy, rel=1e-9)
