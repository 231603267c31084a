"""Implementation modes in the reference interpreter: the approximations keep their
documented bounds, differ from the refined versions in float16, and change nothing
in float32."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from xdsl.dialects.builtin import StringAttr, f16, f32

from dialects.ascend_graph import (
    AvgPoolOp,
    ConstOp,
    Conv2DOp,
    DivOp,
    ExpOp,
    GeluOp,
    LayerNormOp,
    MatMulV2Op,
    Props,
    ReciprocalOp,
    ReduceMeanOp,
    RsqrtOp,
    SigmoidOp,
    SoftmaxOp,
    int_attr,
    ints,
    tensor,
)
from dialects.shapes import ShapeError
from ge.core import reference
from ge.core.reference import _exp, _fast_gelu, _rec_estimate, _refined, _rsqrt, _rsqrt_estimate, erfc
from ge.testing import GraphBuilder

RNG = np.random.default_rng(7)
POSITIVE = RNG.uniform(1e-3, 1e3, 200_000).astype(np.float32)


def test_reciprocal_estimate_and_its_refinement_keep_their_bounds() -> None:
    exact = 1 / POSITIVE.astype(np.float64)
    estimate = _rec_estimate(POSITIVE)
    assert np.max(np.abs(estimate * POSITIVE.astype(np.float64) - 1)) <= 2**-9
    assert np.max(np.abs(estimate / exact - 1)) > 2**-10  # an estimate, not the reciprocal
    assert np.max(np.abs(_refined(POSITIVE, estimate) / exact - 1)) <= 4 * 2**-24
    specials = np.array([0.0, -0.0, np.inf, -np.inf, -4.0], np.float32)
    np.testing.assert_array_equal(_rec_estimate(specials)[:4], [np.inf, -np.inf, 0.0, -0.0])
    assert _rec_estimate(specials)[4] < 0


def test_rsqrt_estimate_and_newton_steps() -> None:
    exact = 1 / np.sqrt(POSITIVE.astype(np.float64))
    assert np.max(np.abs(_rsqrt_estimate(POSITIVE) / exact - 1)) <= 2**-9
    assert np.max(np.abs(_rsqrt("high_precision", POSITIVE) / exact - 1)) <= 4 * 2**-24


def test_exp_by_range_reduction() -> None:
    x = RNG.uniform(-80, 80, 200_000).astype(np.float32)
    exact = np.exp(x.astype(np.float64))
    fast = np.abs(_exp("high_performance", x) / exact - 1)
    assert 2e-4 < np.max(fast) <= 8e-4
    assert np.max(np.abs(_exp("high_precision", x) / exact - 1)) <= 1.2e-7
    np.testing.assert_array_equal(_exp("high_performance", np.array([np.inf, -np.inf, 0], np.float32)), [np.inf, 0, 1])
    assert np.isnan(_exp("high_performance", np.array([np.nan], np.float32))[0])


def test_fast_gelu_forms_stay_within_their_bounds() -> None:
    x = np.linspace(-8, 8, 100_001).astype(np.float32)
    exact = 0.5 * x.astype(np.float64) * erfc(-x.astype(np.float64) / math.sqrt(2))
    assert np.max(np.abs(_fast_gelu(x, "high_performance") - exact)) <= 4.8e-4
    assert 1e-2 < np.max(np.abs(_fast_gelu(x, "super_performance") - exact)) <= 2.1e-2


# ------------------------------------------------------------- ops in the interpreter


def _run(cls, mode: str | None, dtype, shapes, props=None, low=0.5, high=4.0):
    g = GraphBuilder(seed=3, dtype=dtype)
    inputs = [g.input(s, low=low, high=high, name=f"x{i}") for i, s in enumerate(shapes)]
    op = g.op(cls, inputs, name="op", **(props or {}))
    if mode is not None:
        op.attributes["impl_mode"] = StringAttr(mode)
    g.output(op, "y")
    case = g.finish()
    return reference.run(case.module, case.inputs(1))["y"].astype(np.float64)


POOL = {"ksize": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1], "ceil_mode": False, "exclusive": True}
CASES = [
    (ReciprocalOp, [(64, 64)], {}, ("high_performance", "high_precision")),
    (DivOp, [(64, 64), (64, 64)], {}, ("high_performance", "high_precision")),
    (RsqrtOp, [(64, 64)], {}, ("high_performance", "high_precision")),
    (ExpOp, [(64, 64)], {}, ("high_performance", "high_precision")),
    (SigmoidOp, [(64, 64)], {}, ("high_performance", "high_precision")),
    (GeluOp, [(64, 64)], {}, ("high_performance", "super_performance")),
    (SoftmaxOp, [(64, 64)], {"axes": [-1]}, ("high_performance", "high_precision", "keep_fp16")),
    (ReduceMeanOp, [(64, 63)], {"axes": [-1], "keep_dims": True}, ("high_performance", "high_precision")),
    (AvgPoolOp, [(1, 4, 16, 16)], POOL, ("high_performance", "high_precision")),
    (LayerNormOp, [(64, 64), (64,)], {"begin_norm_axis": -1, "epsilon": 1e-5}, ("high_performance", "keep_fp16")),
]


@pytest.mark.parametrize(("cls", "shapes", "props", "modes"), CASES, ids=[c[0].__name__ for c in CASES])
def test_modes_change_float16_results_within_a_few_ulps_and_never_float32(cls, shapes, props, modes) -> None:
    """A fast mode moves float16 results by a few ulps (super_performance's formula
    further); high_precision by at most one; float32 results not at all."""
    low, high = (-3.0, 3.0) if cls in (ExpOp, SigmoidOp, GeluOp, SoftmaxOp, LayerNormOp) else (0.5, 4.0)
    plain = _run(cls, None, f16, shapes, props, low, high)
    scale = np.max(np.abs(plain))
    for mode in modes:
        got = _run(cls, mode, f16, shapes, props, low, high)
        if mode == "high_precision":
            assert np.max(np.abs(got - plain)) <= 2**-10 * scale, mode
        else:
            assert not np.array_equal(got, plain), mode
        tolerance = 2.5e-2 if mode == "super_performance" else 8 * 2**-11
        assert np.max(np.abs(got - plain)) <= tolerance * scale, mode
        assert np.array_equal(_run(cls, mode, f32, shapes, props, low, high), _run(cls, None, f32, shapes, props, low, high)), mode


@pytest.mark.parametrize("cls", [ReciprocalOp, DivOp, ExpOp, SigmoidOp])
def test_high_precision_is_within_an_ulp_of_the_plain_kernel_and_high_performance_is_not(cls) -> None:
    shapes = [(128, 128)] * (2 if cls is DivOp else 1)
    low, high = (-3.0, 3.0) if cls in (ExpOp, SigmoidOp) else (0.5, 4.0)
    plain = _run(cls, None, f16, shapes, {}, low, high)
    ulp = np.spacing(np.abs(plain).astype(np.float16)).astype(np.float64)
    precise = np.abs(_run(cls, "high_precision", f16, shapes, {}, low, high) - plain) / ulp
    fast = np.abs(_run(cls, "high_performance", f16, shapes, {}, low, high) - plain) / ulp
    assert np.max(precise) <= 1 and np.mean(precise > 0) < 0.01
    assert np.max(fast) >= 1 and np.mean(fast > 0) > 0.05


def test_bfloat16_follows_the_mode_too() -> None:
    plain = _run(ReciprocalOp, None, ml_dtypes.bfloat16, [(64, 64)])
    fast = _run(ReciprocalOp, "high_performance", ml_dtypes.bfloat16, [(64, 64)])
    error = np.abs(fast / plain - 1)
    assert 0 < np.max(error) <= 2**-9 + 2**-7  # the estimate's error and one bfloat16 rounding


# ------------------------------------------------------------- float16 in, float32 out


def test_a_cube_op_with_a_dtype_writes_its_float32_accumulator() -> None:
    """MatMulV2 {dtype = f32} on float16 operands: the products of float16 values,
    summed in float32 with a float32 bias, and not rounded to float16."""
    g = GraphBuilder(seed=4, dtype=f16)
    a = g.input((8, 64), name="a")
    w = g.random_weight((64, 5))
    b = g.random_weight((5,), dtype="float32")
    g.output(g.op(MatMulV2Op, [a, w, b], name="mm", transpose_x1=False, transpose_x2=False, dtype=f32), "y")
    case = g.finish()
    feeds = case.inputs(0)
    got = reference.run(case.module, feeds)["y"]
    weights = [reference.const_value(op, case.store) for op in case.module.walk() if isinstance(op, ConstOp)]
    want = feeds["a"].astype(np.float32) @ weights[0].astype(np.float32) + weights[1]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert not np.array_equal(got, got.astype(np.float16).astype(np.float32))


def test_a_cube_bias_has_the_inputs_or_the_results_dtype() -> None:
    g = GraphBuilder(seed=5, dtype=f16)
    a = g.input((2, 4), name="a")
    w = g.random_weight((4, 3))
    with pytest.raises(ShapeError, match="bias element type bf16 is neither the inputs' f16 nor the result's f32"):
        g.op(MatMulV2Op, [a, w, g.random_weight((3,), dtype="bfloat16")], transpose_x1=False, transpose_x2=False, dtype=f32)
    conv = Conv2DOp.infer_result_types(
        [tensor(f16, (1, 2, 4, 4)), tensor(f16, (3, 2, 1, 1)), tensor(f32, (3,))],
        Props({"strides": ints([1] * 4), "pads": ints([0] * 4), "dilations": ints([1] * 4), "groups": int_attr(1), "dtype": f32}),
    )
    assert conv == [tensor(f32, (1, 3, 4, 4))]
