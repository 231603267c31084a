"""Checking a pass: run it on a copy, compare the graphs in the reference interpreter.

`assert_equivalent` runs both graphs on the same seeded random inputs and
compares every output: integers and bools exactly, floats within the tolerance of
their dtype. A float element passes when |after - before| <= atol + rtol * |before|;
rtol defaults to the dtype's `RTOL` and atol to the same times the output's largest
magnitude (at least 1), because the rounding a reordered sum leaves behind scales
with its terms, which an element cancelled to near 0 no longer shows.

`RTOL` is about 3 ulps for float16 and bfloat16 (3e-3, 2e-2), not 1: changing the
inputs of generated graphs by one ulp moved their outputs beyond 1e-3 (float16)
in 17% of 300 graphs and beyond 1e-2 (bfloat16) in 5%, and beyond RTOL in none,
so a pass that only reorders rounding passes. float32's 1e-5 (84 ulps) held for
600 graphs with every pattern in them. Decompositions computed step by step in
float16/bfloat16 (LayerNorm's above all) are worse conditioned; test them in
float32, or give rtol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import ml_dtypes
import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import parse_pipeline

from ge.core import ir, reference
from ge.testing.builder import GraphCase, InputSpec, PatternSite, input_specs, random_inputs
from ge.core.weights import WeightStore

RTOL: dict[np.dtype, float] = {
    np.dtype(np.float64): 1e-9,
    np.dtype(np.float32): 1e-5,
    np.dtype(np.float16): 3e-3,
    np.dtype(ml_dtypes.bfloat16): 2e-2,
}

Graph = GraphCase | ModuleOp


def _parts(graph: Graph) -> tuple[ModuleOp, WeightStore | None, tuple[InputSpec, ...]]:
    """The module, its store (None: the module's own) and its inputs' specs."""
    if isinstance(graph, GraphCase):
        return graph.module, graph.store, graph.specs
    return graph, None, input_specs(graph)


def _signature(specs: Sequence[InputSpec]) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(s.name, str(s.dtype), s.shape) for s in specs]


def assert_equivalent(
    before: Graph,
    after: Graph,
    *,
    inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    trials: int = 3,
    seed: int = 0,
) -> None:
    """Both graphs compute the same outputs on `inputs`, or on `trials` random
    inputs (seeds seed, seed+1, ...) drawn as `before`'s input specs say."""
    module_b, store_b, specs = _parts(before)
    module_a, store_a, specs_a = _parts(after)
    if _signature(specs) != _signature(specs_a):
        raise AssertionError(
            f"the graphs take different inputs: before {_signature(specs)}, after {_signature(specs_a)}"
        )
    feeds = [(None, inputs)] if inputs is not None else [(seed + t, random_inputs(specs, seed + t)) for t in range(trials)]
    for input_seed, feed in feeds:
        want = reference.run(module_b, feed, store_b)
        got = reference.run(module_a, feed, store_a)
        where = "on the given inputs" if input_seed is None else f"on random inputs (seed {input_seed})"
        if list(want) != list(got):
            raise AssertionError(f"the graphs have different outputs {where}: before {list(want)}, after {list(got)}")
        for name in want:
            _compare(name, want[name], got[name], rtol, atol, where)


def _compare(name: str, want: np.ndarray, got: np.ndarray, rtol: float | None, atol: float | None, where: str) -> None:
    head = f"output '{name}' {where}"
    if want.dtype != got.dtype or want.shape != got.shape:
        raise AssertionError(f"{head}: before is {want.dtype}{list(want.shape)}, after is {got.dtype}{list(got.shape)}")
    if want.dtype not in RTOL:
        bad = want != got
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            raise AssertionError(
                f"{head}: {int(bad.sum())} of {want.size} elements differ ({want.dtype}, compared exactly); "
                f"first at {list(at)}: before {want[at]!r}, after {got[at]!r}"
            )
        return
    w, a = want.astype(np.float64), got.astype(np.float64)
    rel_tol = RTOL[want.dtype] if rtol is None else rtol
    finite = np.abs(w[np.isfinite(w)])
    abs_tol = rel_tol * max(1.0, float(finite.max(initial=0.0))) if atol is None else atol
    same = (w == a) | (np.isnan(w) & np.isnan(a))  # equal infinities and NaNs agree
    with np.errstate(invalid="ignore"):
        err = np.where(same, 0.0, np.abs(a - w))
    err = np.where(np.isnan(err), np.inf, err)
    bad = err > abs_tol + rel_tol * np.abs(w)
    if not bad.any():
        return
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(same, 0.0, err / np.abs(w))
    i_abs = np.unravel_index(int(np.argmax(err)), err.shape)
    i_rel = np.unravel_index(int(np.argmax(np.where(np.isnan(rel), np.inf, rel))), rel.shape)
    raise AssertionError(
        f"{head}: {int(bad.sum())} of {want.size} elements ({want.dtype}) differ beyond "
        f"rtol={rel_tol:g}, atol={abs_tol:g}; "
        f"max abs error {err[i_abs]:.3g} at {list(map(int, i_abs))} (before {w[i_abs]:.6g}, after {a[i_abs]:.6g}); "
        f"max rel error {rel[i_rel]:.3g} at {list(map(int, i_rel))} (before {w[i_rel]:.6g}, after {a[i_rel]:.6g})"
    )


def count_ops(graph: Graph | Operation, what: type[Operation] | str) -> int:
    """How many ops are instances of a class, or have a CANN op type ("BatchNorm")
    or an op name ("ascend_graph.batch_norm")."""
    root = graph.module if isinstance(graph, GraphCase) else graph
    if isinstance(what, type):
        return sum(isinstance(op, what) for op in root.walk())
    if "." in what:
        return sum(op.name == what for op in root.walk())
    return sum(getattr(op, "OP_TYPE", None) == what for op in root.walk())


def clone(graph: Graph) -> Graph:
    """A deep copy to mutate; a case's copy shares the (append-only) weight store
    and keeps its pattern sites, pointing at the copied ops."""
    if isinstance(graph, ModuleOp):
        return graph.clone()
    module = graph.module.clone()
    copies = dict(zip(graph.module.walk(), module.walk(), strict=True))
    sites = tuple(PatternSite(s.pattern, s.variant, tuple(copies[op] for op in s.ops), s.exact) for s in graph.sites)
    return GraphCase(module, graph.store, graph.specs, graph.seed, sites)


def run_pass(graph: Graph, pass_: str | ModulePass) -> ModuleOp:
    """Apply a pass to a copy of the graph with a fresh context; verify and return it.

    `pass_` is a `ModulePass`, or a pipeline of registered passes as `ge-opt -p`
    takes it ("ConvBatchnormFusionPass", "cse,dce", "name{option=value}").
    """
    module = (graph.module if isinstance(graph, GraphCase) else graph).clone()
    ctx: Context = ir.context()
    for p in _passes(pass_):
        p.apply(ctx, module)
    module.verify()
    return module


def _passes(pass_: str | ModulePass) -> list[ModulePass]:
    if isinstance(pass_, ModulePass):
        return [pass_]
    from passes.registry import get_pass

    return [get_pass(spec.name).from_pass_spec(spec) for spec in parse_pipeline(pass_)]
