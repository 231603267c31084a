"""A cube tile's A stays in L1 across its N tiles (`CubeTiling.a_resident`): M tiles
outer, A's whole K loaded once per M tile, B's K panels streaming per (M, N) tile.

Checked here: random convolutions and matmuls compiled with tilings that keep A
resident (drawn from the tuning space, knobs included) simulate to the reference
interpreter's values on a SoC whose epilogue runs on the vector unit and on one with
a FIX pipe, and so do attention kernels whose phases keep A resident; the ViT-B/16 feed-forward down-projection chooses the mode and its
program reads A from GM exactly once per block; where the mode is not chosen the
kernel's parameters and program are what they were without it."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto
from xdsl.dialects.builtin import f16
from xdsl.ir import Block, Operation, SSAValue

import ge
from dialects.ascend_kernel import BufferType
from ge.aoe import measure
from ge.aoe.tune import _kernels
from ge.core import soc as socs
from ge.sim import program
from ge.testing.cube_models import (
    assert_simulates_to_reference,
    attention,
    conv_relu,
    gemm_tail,
    gm_reads,
)
from passes.lower_to_kernel import build_kernel, kernel_text, parse_kernel
from passes.lowering import space
from passes.lowering.cube import (
    CubeTiling,
    Epilogue,
    EpiValue,
    Gemm,
    cube_program,
)
from passes.lowering.program import Program

F = TensorProto.FLOAT
SOCS = ("Ascend310P3", "Ascend910B1")


def a_resident_tiling(data: st.DataObject, sp: space.CubeSpace) -> space.Tiling | None:
    """A legal tiling of `sp` that keeps A resident, its knobs drawn where they fit."""
    found = [t for t in sp.candidates() if t.get("a_resident")]
    if not found:
        return None
    t = data.draw(st.sampled_from(found), label="tiling")
    for knob, values in (("m_tail", range(1, 4)), ("l0c_buffers", (1, 2)), ("cols_resident", (0, 1))):
        trial = space.plain({**t, knob: data.draw(st.sampled_from(list(values)), label=knob)})
        if sp.legal(trial):
            t = trial
    return t


def check_a_resident(model: onnx.ModelProto, feeds: dict, soc: str, data: st.DataObject) -> None:
    """Every cube kernel compiled with an A-resident tiling carries it and simulates to the reference."""
    flags = {"soc_version": soc}
    om = ge.compile(ge.load_onnx(model)[0], flags)
    kernels, keys = _kernels(om, soc)
    chosen = {}
    for k in kernels:
        if isinstance(k.space, space.CubeSpace) and k.seed is not None:
            t = a_resident_tiling(data, k.space)
            if t is not None:
                chosen[keys[k.name]] = t
    if not chosen:
        return
    with space.using(chosen.get):
        om = ge.compile(ge.load_onnx(model)[0], flags)
    attributes = [
        {k: v.value.data for k, v in parse_kernel(text.compute_text()).tiling.data.items()}  # type: ignore[attr-defined]
        for text in program.split_kernels(om.kernels).values()
    ]
    assert sum(a.get("a_resident", 0) for a in attributes) == len(chosen)
    assert_simulates_to_reference(om, model, feeds)


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    soc=st.sampled_from(SOCS), m=st.integers(1, 300), k=st.integers(1, 400), n=st.integers(1, 300),
    tail=st.sampled_from(("Relu", "Sigmoid")), seed=st.integers(0, 2**16), data=st.data(),
)
def test_matmuls_with_a_resident_simulate_to_the_reference(soc, m, k, n, tail, seed, data):
    model, feeds = gemm_tail(m, k, n, seed, tail)
    check_a_resident(model, feeds, soc, data)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    soc=st.sampled_from(SOCS), c=st.integers(1, 48), h=st.integers(3, 20), cout=st.integers(1, 80),
    k=st.sampled_from((1, 3)), stride=st.integers(1, 2), seed=st.integers(0, 2**16), data=st.data(),
)
def test_convolutions_with_a_resident_simulate_to_the_reference(soc, c, h, cout, k, stride, seed, data):
    model, feeds = conv_relu(c, h, cout, k, stride, seed)
    check_a_resident(model, feeds, soc, data)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(heads=st.integers(1, 4), sq=st.integers(1, 96), sk=st.integers(1, 96), d=st.sampled_from([16, 32, 64]), seed=st.integers(0, 2**16))
def test_attention_phases_with_a_resident_simulate_to_the_reference(heads, sq, sk, d, seed):
    """On the 910B1 an attention whose scores are a result runs as phases of
    `cube_program`: each phase whose tiling can keep A resident does, and the kernel
    simulates to the reference."""
    soc = "Ascend910B1"
    model, feeds = attention(heads, sq, sk, d, seed, scores=True)
    om = ge.compile(ge.load_onnx(model)[0], {"soc_version": soc})
    kernels, keys = _kernels(om, soc)
    (k,) = [k for k in kernels if isinstance(k.space, space.AttentionSpace) and k.seed is not None]
    t = dict(k.seed)
    for i, sp in enumerate(k.space.spaces):
        part = space.plain(k.space.part(t, i))
        held = sp.widest_k1({**part, "b_resident": 0, "a_resident": 1, "k1": part["k0"]})
        if sp.legal(held):
            t = k.space.joined(t, i, held)
    assert k.space.legal(t) and any(key.endswith("a_resident") for key in t)
    with space.using({keys[k.name]: t}.get):
        om = ge.compile(ge.load_onnx(model)[0], {"soc_version": soc})
    want = ge.reference.run(ge.load_onnx(model)[0], feeds)["o"]
    with ge.Session() as session:
        got = session.run(om, feeds).outputs["o"]
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * max(float(np.abs(want).max()), 1.0))


# ------------------------------------------------------------ the choice and its reads


def vector_program(soc: str, gemm: Gemm, t: CubeTiling) -> tuple[list[Operation], SSAValue]:
    """One block's program of `gemm` with a plain vector epilogue, and A's GM buffer."""
    prog = Program(socs.load(soc))
    a, b, y = Block(arg_types=[BufferType("GM")] * 3).args
    e = Epilogue("vector", "y", values=[EpiValue("y", "tile", gemm.out_bytes, True)], stores=["y"])
    return cube_program(prog, gemm, t, e, {"y": y}, a, b, None), a


VIT_DOWN = Gemm(1, 13312, 3072, 768, f16, f16)
"""ViT-B/16's feed-forward down-projection at batch 64 (NZ operands)."""


def test_the_vit_down_projection_reads_a_once_per_block():
    """With A resident (64-row tiles: two of A's whole K fit L1), each block reads its
    rows of A once; the same tiles with A in panels read them once per N tile."""
    profile = socs.load("Ascend310P3")
    e = Epilogue("vector", "y", values=[EpiValue("y", "tile", VIT_DOWN.out_bytes, True)], stores=["y"])
    resident = {"batch_dim": 1, "m_dim": 8, "n_dim": 1, "m0": 64, "n0": 256, "k0": 64, "k1": 128, "b_resident": 0, "a_resident": 1}
    t = space.CubeSpace.of(profile, VIT_DOWN, e, 8, False).tiling(resident)
    ops, a = vector_program("Ascend310P3", VIT_DOWN, t)
    assert gm_reads(ops, a) == t.mb * VIT_DOWN.k * VIT_DOWN.in_bytes
    panels = CubeTiling(**{**t.__dict__, "a_resident": False})  # the same tiles, A read per tile
    ops, a = vector_program("Ascend310P3", VIT_DOWN, panels)
    assert gm_reads(ops, a) == -(-t.nb // t.n0) * t.mb * VIT_DOWN.k * VIT_DOWN.in_bytes


@pytest.mark.parametrize("soc", SOCS)
def test_where_a_resident_is_not_chosen_the_kernel_is_unchanged(soc):
    """A 3x3 convolution of 128 channels on a 28x28 image (ResNet's second stage: 295
    KB of weights, 200 KB of activations): the kernel's parameters have no a_resident,
    and its program is the one the same tiling builds with the knob at its analytic
    value (off)."""
    model, _ = conv_relu(128, 28, 128, 3, 1, 0)
    om = ge.compile(ge.load_onnx(model)[0], {"soc_version": soc})
    kernels, _ = _kernels(om, soc)
    (k,) = [k for k in kernels if isinstance(k.space, space.CubeSpace)]
    assert k.seed is not None and "a_resident" not in k.seed
    analytic = kernel_text(build_kernel(soc, measure._scope(k.text), None))
    assert kernel_text(build_kernel(soc, measure._scope(k.text), {**k.seed, "a_resident": 0})) == analytic
    held = k.space.widest_k1({**k.seed, "b_resident": 0, "a_resident": 1, "k1": k.seed["k0"]})
    assert k.space.legal(held)
    flipped = kernel_text(build_kernel(soc, measure._scope(k.text), held))
    assert flipped != analytic and "a_resident = 1" in flipped
