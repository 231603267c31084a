"""Helpers for testing fusion passes: run one on a copy with its counts, and find the
ops of the pattern sites a case placed.

    @given(graphs(with_pattern=conv_bn_chain()))
    def test_conv_bn(case):
        after, counts = fuse(case, ConvBatchnormFusionPass)
        assert not any(alive(op) for op in site_ops(after, "conv_bn_chain", BatchNormOp, exact=True))
"""

from __future__ import annotations

from xdsl.ir import Operation

from ge.core import ir
from ge.testing.builder import GraphCase
from ge.testing.equivalence import clone
from passes.fusion import FusionCounts, FusionPass, collect_statistics


def fuse(case: GraphCase, pass_: type[FusionPass] | FusionPass) -> tuple[GraphCase, FusionCounts]:
    """The case after the pass (its sites point at the copy's ops), and the pass's counts."""
    after = clone(case)
    assert isinstance(after, GraphCase)
    instance = pass_() if isinstance(pass_, type) else pass_
    with collect_statistics() as stats:
        instance.apply(ir.context(), after.module)
    after.module.verify()
    return after, stats.get(instance.name)


def alive(op: Operation) -> bool:
    """Whether the op is still in the IR (a pass erased it otherwise)."""
    return op.parent is not None


def site_ops(case: GraphCase, pattern: str, cls: type[Operation] = Operation, *, exact: bool) -> list[Operation]:
    """The ops of type `cls` in every site of `pattern` (the exact sites, or the near misses)."""
    return [op for site in case.sites_of(pattern, exact=exact) for op in site.ops if isinstance(op, cls)]
