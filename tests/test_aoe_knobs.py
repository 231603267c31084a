"""Operator tuning's wider space (`passes.lowering.space`): the cube program's knobs
beside the tiling (`CUBE_KNOBS`: the last M tile in pieces, one L0C accumulator,
per-column epilogue operands resident per N tile) and attention kernels' phases
(`AttentionSpace`).

Checked here: a tiling without the knobs, or with them at the analytic values, builds
the analytic kernel; the knobs are refused where they do not fit; the timing responds
to them as they intend (the drain after the last mmad shrinks with the last tile's
pieces); random convolutions, matmuls and attention layers compiled with random legal
tilings (knobs and attention phases included) simulate to the reference
interpreter's values; the bank keeps knobs and attention tilings and refuses entries
of the old format."""

from __future__ import annotations

import json
import os

import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto

import ge
from ge.aoe import bank as banks
from ge.aoe import measure
from ge.aoe.search import Kernel
from ge.aoe.tune import _kernels
from ge.core.errors import ModelError
from ge.sim import program, timing
from ge.sim.program import PIPE
from ge.testing.cube_models import (
    assert_simulates_to_reference,
    attention,
    conv_relu,
    gemm_tail,
)
from ge.testing.gear_models import bert_like, bert_like_inputs
from passes.lower_to_kernel import build_kernel, kernel_text, parse_kernel
from passes.lowering import space

F = TensorProto.FLOAT
SOCS = ("Ascend310P3", "Ascend910B1")
"""A SoC whose epilogues run on the vector unit, and one with a FIX pipe (mixed epilogues)."""
ALL_SOCS = ("Ascend310", "Ascend310P3", "Ascend910A", "Ascend910B1")
"""The numerics tests' SoCs: with the two of 4 event ids besides."""


def tunable(compiled: ge.Model, soc: str) -> tuple[list[Kernel], dict[str, str]]:
    """The compiled model's cube and attention kernels the tuner tiles, and every kernel's bank key."""
    kernels, keys = _kernels(compiled, soc)
    return [k for k in kernels if not isinstance(k.space, space.VectorSpace) and k.seed is not None], keys


def draw_tiling(data: st.DataObject, sp: space.CubeSpace | space.AttentionSpace, seed: space.Tiling) -> space.Tiling:
    """A legal tiling a few neighbour steps from `seed`, then the knobs (and the softmax's
    tile rows) set to drawn values wherever they fit."""
    t = dict(seed)
    for _ in range(data.draw(st.integers(0, 3), label="steps")):
        near = sp.neighbours(t)
        if not near:
            break
        t = data.draw(st.sampled_from(near), label="neighbour")
    if isinstance(sp, space.AttentionSpace):
        shared = [n for n in sp.neighbours(t) if n.get(space.SHARED)]
        if shared and data.draw(st.booleans(), label="projections shared"):
            t = shared[0]
    parts = [("", sp)] if isinstance(sp, space.CubeSpace) else list(zip(sp.prefixes, sp.spaces))
    for prefix, _ in parts:
        for knob, values in (("m_tail", range(1, 5)), ("l0c_buffers", (1, 2)), ("cols_resident", (0, 1))):
            trial = {**t, prefix + knob: data.draw(st.sampled_from(list(values)), label=prefix + knob)}
            if sp.legal(trial):
                t = trial
    if isinstance(sp, space.AttentionSpace) and sp.tile_rows():
        trial = {**t, space.SOFTMAX: data.draw(st.sampled_from(sp.tile_rows()), label="softmax rows")}
        t = trial if sp.legal(trial) else t
    return t


def check_tuned(model: onnx.ModelProto | str, feeds: dict, soc: str, data: st.DataObject, options: dict | None = None) -> None:
    """Compile with a drawn tiling for every cube and attention kernel; the kernels carry
    it, the simulation matches the reference interpreter, and it times."""
    flags = {"soc_version": soc, **(options or {})}

    def compiled() -> ge.Model:
        return ge.compile(model if isinstance(model, str) else ge.load_onnx(model)[0], flags)

    kernels, keys = tunable(compiled(), soc)
    chosen = {keys[k.name]: draw_tiling(data, k.space, k.seed) for k in kernels}
    with space.using(chosen.get):
        om = compiled()
    attributes = [
        {k: v.value.data for k, v in parse_kernel(text.compute_text()).tiling.data.items()}  # type: ignore[attr-defined]
        for text in program.split_kernels(om.kernels).values()
    ]
    for t in chosen.values():  # each knob drawn off its analytic value is in some kernel's tiling attribute
        knobs = space.knobs_of(t)
        assert any(knobs.items() <= a.items() and t.get(space.SOFTMAX, a.get(space.SOFTMAX)) == a.get(space.SOFTMAX) for a in attributes)
    assert_simulates_to_reference(om, model, feeds)


# ------------------------------------------------------------ the knobs in one kernel


@pytest.fixture(scope="module")
def conv_kernels() -> dict[str, Kernel]:
    """The conv kernel of a 3x3 convolution with bias and ReLU, per SoC."""
    model, _ = conv_relu(64, 28, 64, 3, 1, 0)
    found = {}
    for soc in SOCS:
        kernels, _ = tunable(ge.compile(ge.load_onnx(model)[0], {"soc_version": soc}), soc)
        found[soc] = next(k for k in kernels if isinstance(k.space, space.CubeSpace))
    return found


def text_of(soc: str, k: Kernel, tiling: dict[str, int] | None) -> str:
    return kernel_text(build_kernel(soc, measure._scope(k.text), tiling))


@pytest.mark.parametrize("soc", SOCS)
def test_knobs_at_their_analytic_values_build_the_analytic_kernel(conv_kernels, soc):
    k = conv_kernels[soc]
    analytic = text_of(soc, k, None)
    assert text_of(soc, k, k.seed) == analytic
    assert text_of(soc, k, {**space.CUBE_KNOBS, **k.seed}) == analytic  # the seed holds the knobs the analytic tiling sets (a_resident)
    assert text_of(soc, k, {**k.seed, "m_tail": 2}) != analytic  # a knob not at its value changes the program


def drain_cycles(soc: str, k: Kernel, tiling: dict[str, int]) -> float:
    """Cycles of the block after its last mmad."""
    text = next(iter(program.split_kernels(text_of(soc, k, tiling)).values()))
    block = timing.time_block(text.program(), trace=True)
    assert block.spans is not None
    return block.cycles - max(s.end for s in block.spans if s.pipe == PIPE["M"])


def test_the_last_tile_in_pieces_shortens_the_drain(conv_kernels):
    """Where the epilogue runs on the vector unit (a FIX pipe's copy out is short already)."""
    soc = "Ascend310P3"
    k = conv_kernels[soc]
    base = {**k.seed, "b_resident": 1, "a_resident": 0}  # pieces re-read no B panel
    pieces = [n for n in (2, 3, 4) if k.space.legal({**base, "m_tail": n})]
    assert pieces
    whole = drain_cycles(soc, k, base)
    assert all(drain_cycles(soc, k, {**base, "m_tail": n}) < whole for n in pieces)


def test_knobs_that_do_not_fit_are_refused(conv_kernels):
    k = conv_kernels["Ascend310P3"]
    sp = k.space
    assert isinstance(sp, space.CubeSpace)
    assert not sp.legal({**k.seed, "m_tail": space.M_TAIL_MOST + 1})
    assert not sp.legal({**k.seed, "m_tail": 0})
    assert not sp.legal({**k.seed, "l0c_buffers": 3})
    assert not sp.legal({**k.seed, "unknown": 1})
    whole = sp.pieces({**k.seed, "m_tail": space.M_TAIL_MOST})
    assert not sp.legal({**k.seed, "m_tail": whole + 1})  # more pieces than the last tile has fractals
    cap_c = sp.caps()[2]
    big = {**k.seed, "m0": 16 * cap_c // (k.seed["n0"] // 16) * 2}
    assert not sp.legal({**big, "l0c_buffers": 2})
    assert sp.columns and sp.legal({**k.seed, "cols_resident": 1})
    on_910 = conv_kernels["Ascend910B1"].space  # the FIX pipe adds the bias: no column loads
    assert not on_910.columns and not on_910.legal({**conv_kernels["Ascend910B1"].seed, "cols_resident": 1})
    with pytest.raises(ModelError, match="does not fit"):
        build_kernel("Ascend310P3", measure._scope(k.text), {**k.seed, "l0c_buffers": 3})


def test_neighbours_move_the_knobs_and_stay_legal(conv_kernels):
    for soc, k in conv_kernels.items():
        near = k.space.neighbours(k.seed)
        assert all(k.space.legal(t) for t in near)
        moved = {key for t in near for key in t if key in space.CUBE_KNOBS}
        assert {"m_tail", "l0c_buffers"} <= moved, soc
        assert all(space.plain(t) == t for t in near)  # knobs at their analytic value are left out


# ------------------------------------------------------------ attention


@pytest.fixture(scope="module")
def attention_kernel(tmp_path_factory) -> Kernel:
    """A self-attention of 2,048 keys: a row of its scores does not fit the 310P3's UB,
    so it runs as phases (a shorter one is one flash phase, whose projections alone are tuned)."""
    path = bert_like(tmp_path_factory.mktemp("knobs") / "bert.onnx", hidden=64)
    om = ge.compile(path, {"soc_version": "Ascend310P3", "input_shape": "input_ids:1,2048;attention_mask:1,2048"})
    kernels, _ = tunable(om, "Ascend310P3")
    return next(k for k in kernels if isinstance(k.space, space.AttentionSpace))


@pytest.mark.parametrize("soc", SOCS)
def test_attention_in_one_flash_phase_tunes_its_projections_alone(tmp_path, soc):
    """A 48-key attention keeps its scores out of GM in one flash phase
    (`passes.lowering.flash`), whose tiling follows from the shape: the tuner's space is
    its projections' (no softmax key), the analytic tiling is its seed and builds the
    analytic kernel, a neighbour builds another one that simulates, and a softmax
    tiling for it is refused by name."""
    path = bert_like(tmp_path / "bert.onnx", hidden=64)
    om = ge.compile(path, {"soc_version": soc, "input_shape": "input_ids:1,48;attention_mask:1,48"})
    kernels, _ = tunable(om, soc)
    (k,) = [k for k in kernels if "MultiHeadAttention" in k.op_types]
    sp = k.space
    assert isinstance(sp, space.AttentionSpace) and sp.flash and sp.prefixes == ("q_", "k_", "v_")
    assert space.SOFTMAX not in k.seed and sp.legal(k.seed) and sp.analytic() == k.seed and space.well_formed("attention", k.seed)
    assert sp.tile_rows() == [] and not sp.legal({**k.seed, space.SOFTMAX: 16})
    analytic = text_of(soc, k, None)
    assert "flash_rows" in analytic and text_of(soc, k, k.seed) == analytic
    near = sp.neighbours(k.seed)
    assert near and all(sp.legal(t) and space.SOFTMAX not in t for t in near)
    moved = text_of(soc, k, near[0])
    assert moved != analytic and "flash_rows" in moved
    assert measure.cycles(k.job(soc, [near[0]]))[0] < float("inf")
    with pytest.raises(ModelError, match=f"one flash phase on {soc}, whose tiling follows from the shape; only the projections"):
        build_kernel(soc, measure._scope(k.text), {**k.seed, space.SOFTMAX: 16})


def test_fused_attention_in_one_flash_phase_has_no_space():
    """A FusedInferAttentionScore has no projections: in one flash phase nothing of it is
    tuned, and a tuned tiling for it is refused."""
    model, _ = attention(2, 16, 40, 32, 0, False)
    om = ge.compile(ge.load_onnx(model)[0], {"soc_version": "Ascend910B1"})
    kernels, _ = _kernels(om, "Ascend910B1")
    assert not [k for k in kernels if "FusedInferAttentionScore" in k.op_types]
    (text,) = [t.compute_text() for t in program.split_kernels(om.kernels).values() if "flash_rows" in t.compute_text()]
    with pytest.raises(ModelError, match="one flash phase on Ascend910B1, which takes no tuned tiling"):
        build_kernel("Ascend910B1", measure._scope(text), {"softmax_tile_rows": 16})


def test_attention_s_analytic_tiling_is_its_seed_and_builds_its_kernel(attention_kernel):
    k = attention_kernel
    sp = k.space
    assert isinstance(sp, space.AttentionSpace)
    assert sp.analytic() == k.seed and sp.legal(k.seed)
    assert text_of("Ascend310P3", k, k.seed) == text_of("Ascend310P3", k, None)
    near = sp.neighbours(k.seed)
    assert near and all(sp.legal(t) for t in near)
    assert {t[space.SOFTMAX] for t in near} - {k.seed[space.SOFTMAX]}  # the softmax's tiles move too
    assert k.seed.get(space.SHARED) == 1  # self-attention: the analytic plan runs the projections as one phase
    assert all(sp.part(t, i) == sp.part(t, 0) for t in near if t.get(space.SHARED) for i in (1, 2))
    separate = {key: v for key, v in k.seed.items() if key != space.SHARED}
    assert separate in near and text_of("Ascend310P3", k, separate) != text_of("Ascend310P3", k, k.seed)
    assert any(t.get("q_m_tail", 1) > 1 for t in sp.neighbours(separate))
    assert [t for t in sp.neighbours(separate) if t.get(space.SHARED)]
    first = list(zip(range(40), sp.candidates()))
    assert first and all(sp.legal(t) for _, t in first)


def test_an_attention_tiling_that_does_not_fit_is_refused(attention_kernel):
    k = attention_kernel
    scope = measure._scope(k.text)
    for bad in ({**k.seed, space.SOFTMAX: 10**6}, {**k.seed, "score_m0": 4096}, {**k.seed, "q_unknown": 1}):
        assert not k.space.legal(bad)
        with pytest.raises(ModelError, match="does not fit"):
            build_kernel("Ascend310P3", scope, bad)


def test_shared_projections_load_the_input_once(attention_kernel):
    """The projections as one phase read their input once instead of three times."""
    k = attention_kernel
    shared = next(t for t in k.space.neighbours(k.seed) if t.get(space.SHARED))
    separate = {key: v for key, v in shared.items() if key != space.SHARED}

    def projection_bytes(tiling: dict[str, int]) -> float:
        text = next(iter(program.split_kernels(text_of("Ascend310P3", k, tiling)).values()))
        return timing.time_block(text.program()).phase_gm_bytes[0]

    g, ct = k.space.phases.gemms[0], k.space.spaces[0].tiling(k.space.part(shared, 0))
    assert projection_bytes(separate) - projection_bytes(shared) >= 2 * ct.bb * g.a_gm_bytes(ct.mb, g.k, ct.kc)  # a block's A, twice
    assert not k.space.legal({**shared, "k_m0": shared["q_m0"] + 16})  # the three take one tiling


def test_attention_s_softmax_tiles_change_its_time(attention_kernel):
    k = attention_kernel
    sizes = k.space.tile_rows()
    times = measure.cycles(k.job("Ascend310P3", [{**k.seed, space.SOFTMAX: r} for r in sizes[:4]]))
    assert len(set(times)) > 1 and all(t < float("inf") for t in times)


# ------------------------------------------------------------ numerics over the wider space


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    soc=st.sampled_from(ALL_SOCS),
    c=st.integers(1, 64),
    h=st.integers(4, 20),
    cout=st.integers(1, 96),
    k=st.sampled_from([1, 3]),
    stride=st.integers(1, 2),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_random_convolutions_with_random_tilings_simulate_to_the_reference(soc, c, h, cout, k, stride, seed, data):
    model, feeds = conv_relu(c, h, cout, k, stride, seed)
    check_tuned(model, feeds, soc, data)


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    soc=st.sampled_from(ALL_SOCS),
    m=st.integers(1, 300),
    k=st.integers(1, 500),
    n=st.integers(1, 300),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_random_matmuls_with_random_tilings_simulate_to_the_reference(soc, m, k, n, seed, data):
    model, feeds = gemm_tail(m, k, n, seed)
    check_tuned(model, feeds, soc, data)


@pytest.fixture(scope="module")
def bert_models(tmp_path_factory) -> dict[int, str]:
    folder = tmp_path_factory.mktemp("bert_like")
    return {hidden: bert_like(folder / f"bert_{hidden}.onnx", hidden=hidden) for hidden in (32, 64, 96)}


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(soc=st.sampled_from(ALL_SOCS), hidden=st.sampled_from([32, 64, 96]), seq=st.integers(8, 80), data=st.data())
def test_random_attention_layers_with_random_tilings_simulate_to_the_reference(bert_models, soc, hidden, seq, data):
    check_tuned(bert_models[hidden], bert_like_inputs(seq), soc, data, {"input_shape": f"input_ids:1,{seq};attention_mask:1,{seq}"})


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    soc=st.sampled_from(ALL_SOCS), heads=st.integers(1, 4), sq=st.integers(1, 64), sk=st.integers(1, 96),
    d=st.sampled_from([16, 32, 64]), seed=st.integers(0, 2**16), scores=st.booleans(), data=st.data(),
)
def test_random_fused_attention_with_random_tilings_simulate_to_the_reference(soc, heads, sq, sk, d, seed, scores, data):
    """With its scores a result, the attention keeps its tunable phases on the 910B1 too."""
    model, feeds = attention(heads, sq, sk, d, seed, scores)
    check_tuned(model, feeds, soc, data)


# ------------------------------------------------------------ the bank


def test_the_bank_keeps_knobs_and_attention_tilings(tmp_path, attention_kernel):
    bank = banks.Bank(str(tmp_path), "Ascend310P3")
    cube = {"batch_dim": 1, "m_dim": 4, "n_dim": 2, "m0": 64, "n0": 32, "k0": 64, "k1": 128, "b_resident": 1, "m_tail": 2, "l0c_buffers": 1}
    bank.store(banks.Entry("cube key", "cube", ("Conv2D",), cube, 10.0, 8.0))
    tuned = {**attention_kernel.seed, "q_m_tail": 2, space.SOFTMAX: 8}
    path = bank.store(banks.Entry("attention key", "attention", ("MultiHeadAttention",), tuned, 10.0, 8.0))
    assert os.path.basename(os.path.dirname(path)) == "attention"
    again = banks.Bank(str(tmp_path), "Ascend310P3")
    assert again.lookup("cube key") == cube and again.lookup("attention key") == tuned


@pytest.mark.parametrize(
    "change",
    [
        lambda d: {**d, "format": 1},  # written before the knobs existed
        lambda d: {**d, "tiling": {**d["tiling"], "n_tail": 2}},  # a key no space has
        lambda d: {**d, "tiling": {k: v for k, v in d["tiling"].items() if k != "k1"}},
    ],
    ids=["format-1", "unknown-key", "missing-key"],
)
def test_entries_of_the_old_format_or_another_key_set_are_refused(tmp_path, change):
    bank = banks.Bank(str(tmp_path), "Ascend310P3")
    tiling = {"batch_dim": 1, "m_dim": 4, "n_dim": 2, "m0": 64, "n0": 32, "k0": 64, "k1": 128, "b_resident": 1}
    path = bank.store(banks.Entry("key", "cube", ("Conv2D",), tiling, 10.0, 8.0))
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    data = change({k: v for k, v in data.items() if k != "sha256"})
    with open(path, "w", encoding="utf-8") as f:
        json.dump({**data, "sha256": banks._digest(data)}, f)
    assert banks.Bank(str(tmp_path), "Ascend310P3").lookup("key") is None


def test_the_roofline_of_an_attention_kernel_bounds_its_time(attention_kernel):
    k = attention_kernel
    job = k.job("Ascend310P3", [None])
    assert 0 < measure.roofline({**job, "tilings": []}) <= measure.cycles(job)[0]
