"""`ascend_graph`'s folding hooks and canonicalization patterns, as `-p canonicalize` runs
them: the identities go, nothing else changes, and every graph computes what it did."""

from __future__ import annotations

from hypothesis import given
from xdsl.dialects.builtin import f16, f32
from xdsl.transforms.canonicalize import CanonicalizePass

from dialects.ascend_graph import AddOp, CastOp, ConstOp, DivOp, IdentityOp, MulOp, NegOp, ReshapeOp, SubOp, TransposeOp
from ge.core import ir
from ge.testing import GraphBuilder, GraphState, Pattern, alive, assert_equivalent, clone, graphs, run_pass

IDENTITIES = ("mul_one", "one_mul", "add_zero", "zero_add", "sub_zero", "div_one", "identity", "same_cast",
              "same_reshape", "identity_transpose", "neg_neg", "reshape_reshape")
NEAR_MISSES = ("mul_two", "sub_from_zero", "broadcasting_one", "widening_cast", "one_div")
PAIRS = {"neg_neg": NegOp, "reshape_reshape": ReshapeOp}


def identity_chain(*, variants=IDENTITIES + NEAR_MISSES) -> Pattern:
    """One op (or pair) that returns its operand unchanged, or a near miss that does not."""

    def build(g: GraphState) -> None:
        x = g.pick()
        # a pair after an op of its own kind may pair with that op instead (Neg Neg Neg keeps one Neg)
        variant = g.choice([v for v in variants if not isinstance(x.owner, PAIRS.get(v, ()))])
        shape, dt = g.shape_of(x), g.dtype_of(x)
        c = lambda value, shape=(1,): g.constant(value, shape, dt)  # noqa: E731
        with g.site("identity_chain", variant, exact=variant in IDENTITIES):
            if variant in ("mul_one", "mul_two"):
                g.op(MulOp, [x, c(1.0 if variant == "mul_one" else 2.0)])
            elif variant == "one_mul":
                g.op(MulOp, [c(1.0), x])
            elif variant == "broadcasting_one":
                g.op(MulOp, [x, c(1.0, (2, *shape))])
            elif variant in ("add_zero", "zero_add"):
                g.op(AddOp, [x, c(0.0)] if variant == "add_zero" else [c(0.0), x])
            elif variant in ("sub_zero", "sub_from_zero"):
                g.op(SubOp, [x, c(0.0)] if variant == "sub_zero" else [c(0.0), x])
            elif variant in ("div_one", "one_div"):
                g.op(DivOp, [x, c(1.0)] if variant == "div_one" else [c(1.0), x], bound=1e3)
            elif variant == "identity":
                g.op(IdentityOp, [x])
            elif variant in ("same_cast", "widening_cast"):
                g.op(CastOp, [x], dst_type=dt if variant == "same_cast" else f32 if dt != f32 else f16)
            elif variant == "same_reshape":
                g.op(ReshapeOp, [x], shape=list(shape))
            elif variant == "identity_transpose":
                g.op(TransposeOp, [x], perm=list(range(len(shape))))
            elif variant == "neg_neg":
                g.op(NegOp, [g.op(NegOp, [x])])
            else:
                g.op(ReshapeOp, [g.op(ReshapeOp, [x], shape=[-1])], shape=list(shape))

    return build


@given(graphs(dtypes=(f32, f16), with_pattern=[identity_chain(), identity_chain()]))
def test_canonicalize_removes_the_identities_and_keeps_the_values(case) -> None:
    after = clone(case)
    CanonicalizePass().apply(ir.context(), after.module)
    after.module.verify()
    assert_equivalent(case, after)
    for site in after.sites_of("identity_chain"):
        ops = [op for op in site.ops if not isinstance(op, ConstOp)]
        if site.exact:
            assert not any(alive(op) for op in ops), site.variant
        else:
            assert all(alive(op) for op in ops), site.variant


def test_each_identity_folds_to_its_operand() -> None:
    for variant in IDENTITIES:
        b = GraphBuilder()
        x = b.input((2, 3))
        g = b  # the builder has the same op/constant interface as a GraphState
        one, zero = g.constant(1.0, (1,)), g.constant(0.0, (1,))
        ops = {
            "mul_one": lambda: g.op(MulOp, [x, one]), "one_mul": lambda: g.op(MulOp, [one, x]),
            "add_zero": lambda: g.op(AddOp, [x, zero]), "zero_add": lambda: g.op(AddOp, [zero, x]),
            "sub_zero": lambda: g.op(SubOp, [x, zero]), "div_one": lambda: g.op(DivOp, [x, one]),
            "identity": lambda: g.op(IdentityOp, [x]), "same_cast": lambda: g.op(CastOp, [x], dst_type=f32),
            "same_reshape": lambda: g.op(ReshapeOp, [x], shape=[2, 3]),
            "identity_transpose": lambda: g.op(TransposeOp, [x], perm=[0, 1]),
            "neg_neg": lambda: g.op(NegOp, [g.op(NegOp, [x])]),
            "reshape_reshape": lambda: g.op(ReshapeOp, [g.op(ReshapeOp, [x], shape=[6])], shape=[3, 2]),
        }
        b.output(ops[variant]())
        after = run_pass(b.finish(), "canonicalize")
        kinds = {op.name for op in after.walk()} - {"builtin.module", "ascend_graph.graph", "ascend_graph.data",
                                                    "ascend_graph.net_output"}
        assert kinds <= ({"ascend_graph.reshape"} if variant == "reshape_reshape" else set()), (variant, kinds)
