"""GeluONNXFusionPass: the erf and tanh GELU formulas into Gelu.

The erf form comes from the test kit's pattern; the tanh form, as torch and
Hugging Face write it, from `gelu_tanh_formula` below. Real exports are in
test_attention_fusion.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given
from xdsl.dialects.builtin import bf16, f16, f32, f64
from xdsl.ir import Attribute, Operation, SSAValue

from dialects.ascend_graph import AddOp, DivOp, ErfOp, GeluOp, MulOp, PowOp, TanhOp
from ge.core import ir
from ge.testing import (
    GraphBuilder,
    GraphCase,
    GraphState,
    Pattern,
    assert_equivalent,
    count_ops,
    fuse,
    gelu_erf_decomposition,
    graphs,
    second_user,
)
from passes.activation_fusion import GeluONNXFusionPass
from passes.fusion import Band
from passes.registry import get_pass

NO_ERF_TANH_OPS = ("binary", "branch", "reduce", "reshape", "transpose", "concat", "split", "softmax")
"""Random op kinds that make no Erf or Tanh of their own."""



def gelu_tanh_formula(*, variants: Sequence[str] = ("exact", "second_user", "wrong_constant")) -> Pattern:
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) in the spellings of
    torch (x * (x * x), products x * p then * 0.5) and of Hugging Face's gelu_new
    (Pow(x, 3), (x * 0.5) * p), each commutative op either way round; a near miss has
    one constant off or the tanh a second user."""

    def build(g: GraphState) -> None:
        variant = g.choice(variants)
        x = g.pick(where=lambda v: g.bound(v) <= 4) or g.input(g.shape())
        dt = g.dtype_of(x)
        wrong = g.choice(["coefficient", "root", "one", "half"]) if variant == "wrong_constant" else None

        def c(value: float) -> SSAValue:
            return g.constant(value, g.choice([(), (1,)]), dt)

        def mul(a: SSAValue | Operation, b: SSAValue | Operation, **kw: float) -> Operation:
            return g.op(MulOp, [a, b] if g.flag() else [b, a], **kw)

        b = g.bound(x)
        with g.site("gelu_tanh_formula", variant):
            if g.flag():
                cube = g.op(PowOp, [x, c(3.0)], bound=b**3)
            else:
                cube = mul(x, mul(x, x, bound=b * b), bound=b**3)
            inner = g.op(AddOp, [x, mul(cube, c(0.05 if wrong == "coefficient" else 0.044715))], bound=2 * b**3)
            root = 0.85 if wrong == "root" else math.sqrt(2 / math.pi)
            scaled = mul(inner, c(root)) if g.flag() else g.op(DivOp, [inner, c(1 / root)])
            t = g.op(TanhOp, [scaled], bound=1.0)
            one = c(1.1 if wrong == "one" else 1.0)
            p = g.op(AddOp, [t, one] if g.flag() else [one, t], bound=2.2)
            half = 0.6 if wrong == "half" else 0.5
            order = g.choice(["x*p*half", "half*x*p", "x*(p*half)", "x*p/2"])
            if order == "x*p*half":
                mul(mul(x, p), c(half), bound=1.2 * b)
            elif order == "half*x*p":
                mul(mul(x, c(half)), p, bound=1.2 * b)
            elif order == "x*(p*half)":
                mul(x, mul(p, c(half)), bound=1.2 * b)
            else:
                g.op(DivOp, [mul(x, p), c(1 / half)], bound=1.2 * b)
        if variant == "second_user":
            second_user(g, t.y)

    return build


@given(
    graphs(
        dtypes=(f32, f16), ops=NO_ERF_TANH_OPS, max_ops=4,
        with_pattern=[gelu_erf_decomposition(), gelu_tanh_formula(), gelu_tanh_formula()],
    )
)
def test_gelu_fusion_fuses_exact_formulas_only(case: GraphCase) -> None:
    after, counts = fuse(case, GeluONNXFusionPass)
    assert_equivalent(case, after)
    sites = case.sites_of("gelu_erf_decomposition") + case.sites_of("gelu_tanh_formula")
    exact = [s for s in sites if s.exact]
    assert (counts.match_times, counts.effect_times) == (len(sites), len(exact))
    assert count_ops(after, GeluOp) == count_ops(case, GeluOp) + len(exact)
    assert count_ops(after, ErfOp) + count_ops(after, TanhOp) == count_ops(case, ErfOp) + count_ops(case, TanhOp) - len(exact)


def _erf_gelu(
    order: str = "x*p*half", *, dtype: Attribute = f32, root: float = math.sqrt(2), divide: bool = True
) -> GraphCase:
    """GELU's erf form on x [4, 6] with the 0.5 in `order`, x / root (or x * 1/root)."""
    b = GraphBuilder(seed=7, dtype=dtype)
    x = b.input((4, 6))
    scaled = b.op(DivOp, [x, b.constant(root)]) if divide else b.op(MulOp, [b.constant(1 / root), x])
    p = b.op(AddOp, [b.op(ErfOp, [scaled]), b.constant(1.0)])
    if order == "x*p*half":
        b.op(MulOp, [b.op(MulOp, [x, p]), b.constant(0.5)])
    elif order == "half*x*p":
        b.op(MulOp, [p, b.op(MulOp, [b.constant(0.5), x])])
    elif order == "x*(p*half)":
        b.op(MulOp, [b.op(MulOp, [b.constant(0.5), p]), x])
    else:
        b.op(DivOp, [b.op(MulOp, [p, x]), b.constant(2.0)])
    return b.finish()


@pytest.mark.parametrize("order", ["x*p*half", "half*x*p", "x*(p*half)", "x*p/2"])
@pytest.mark.parametrize("divide", [True, False], ids=["div_root2", "mul_inv_root2"])
def test_gelu_fusion_erf_spellings(order: str, divide: bool) -> None:
    case = _erf_gelu(order, divide=divide)
    after, counts = fuse(case, GeluONNXFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 1)
    (gelu,) = [op for op in after.module.walk() if isinstance(op, GeluOp)]
    assert gelu.props.str("approximate") == "none"
    assert [op.name for op in after.graph.body.block.ops] == ["ascend_graph.data", "ascend_graph.gelu", "ascend_graph.net_output"]
    assert_equivalent(case, after)


@pytest.mark.parametrize(
    ("dtype", "root", "fused"),
    [
        (f32, 1.41421354, True),  # sqrt(2) as float32 holds it
        (f16, 1.4140625, True),  # sqrt(2) rounded to float16
        (bf16, 1.4140625, True),
        (f64, 1.41421354, False),  # float32's sqrt(2) is 2e-8 off: wrong in float64
        (f32, 1.4142, False),  # 4e-6 off: more than float32 rounds
        (f16, 1.5, False),
    ],
)
def test_gelu_fusion_checks_constants_to_their_dtype(dtype: Attribute, root: float, fused: bool) -> None:
    case = _erf_gelu(dtype=dtype, root=root)
    after, counts = fuse(case, GeluONNXFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, int(fused))
    assert count_ops(after, GeluOp) == int(fused)
    assert_equivalent(case, after)


def test_gelu_fusion_leaves_an_erf_with_a_second_user() -> None:
    b = GraphBuilder(seed=8)
    x = b.input((4, 6))
    e = b.op(ErfOp, [b.op(DivOp, [x, b.constant(math.sqrt(2))])])
    b.op(MulOp, [b.op(MulOp, [x, b.op(AddOp, [e, b.constant(1.0)])]), b.constant(0.5)])
    b.output(e)
    case = b.finish()
    after, counts = fuse(case, GeluONNXFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 0)
    assert ir.to_text(after.module) == ir.to_text(case.module)


def _tanh_gelu(exponent: float = 3.0) -> GraphCase:
    """Hugging Face's gelu_new on x [4, 6]: (x * 0.5) * (1 + tanh(..(x + 0.044715 * x^e)..))."""
    b = GraphBuilder(seed=9)
    x = b.input((4, 6))
    half = b.op(MulOp, [x, b.constant(0.5)])
    cube = b.op(PowOp, [x, b.constant(exponent)])
    inner = b.op(AddOp, [x, b.op(MulOp, [cube, b.constant(0.044715)])])
    t = b.op(TanhOp, [b.op(MulOp, [inner, b.constant(math.sqrt(2 / math.pi))])])
    b.op(MulOp, [half, b.op(AddOp, [t, b.constant(1.0)])])
    return b.finish()


def test_gelu_fusion_tanh_form() -> None:
    case = _tanh_gelu()
    after, counts = fuse(case, GeluONNXFusionPass)
    assert (counts.match_times, counts.effect_times) == (1, 1)
    (gelu,) = [op for op in after.module.walk() if isinstance(op, GeluOp)]
    assert gelu.props.str("approximate") == "tanh"
    assert count_ops(after, "ascend_graph.const") == 0
    assert_equivalent(case, after)


def test_gelu_fusion_leaves_a_square_for_a_cube() -> None:
    case = _tanh_gelu(exponent=2.0)
    after, counts = fuse(case, GeluONNXFusionPass)
    assert counts.effect_times == 0
    assert ir.to_text(after.module) == ir.to_text(case.module)


def test_gelu_fusion_is_registered_in_the_top_band() -> None:
    assert get_pass(GeluONNXFusionPass.name) is GeluONNXFusionPass
    assert GeluONNXFusionPass.band is Band.TOP
