"""Building small `ascend_graph` modules by hand: the layer under the strategies.

`GraphBuilder` appends ops to one graph, keeps weights in a fresh `WeightStore`,
remembers which values later ops may consume (the *pool*) and a rough bound on
each value's magnitude, and `finish()` turns every value nobody consumes into a
graph output, so a built graph has no dead ops. It needs no hypothesis: targeted
tests use it directly, and `ge.testing.strategies.GraphState` adds the drawing.

Ops built inside `with builder.site(pattern, variant):` form one pattern instance:
they are recorded in the case's `sites`, and only the last op's results enter the
pool, so that random ops built later cannot give the pattern's intermediates an
unplanned second user (which would turn an exact match into a near miss).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp, StringAttr, f32
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from dialects.ascend_graph import (
    AscendOp,
    ConstOp,
    DataOp,
    GraphOp,
    NetOutputOp,
    bool_attr,
    dtype_of,
    float_attr,
    int_attr,
    ints,
    shape_of,
    tensor,
)
from ge.core import dtypes, ir
from ge.core.weights import WeightStore, attach

_store_keys = itertools.count()

DType = Attribute | np.dtype | type | str
"""An element type, or a numpy dtype (or its name) that has one."""


@dataclass(frozen=True)
class InputSpec:
    """One graph input: its name, dtype, static shape, and the range to draw it from."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    low: float = -2.0
    high: float = 2.0

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        return random_array(rng, self.dtype, self.shape, self.low, self.high)


def default_range(dtype: np.dtype) -> tuple[float, float]:
    """Input values that keep every generated op finite and well-conditioned."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return (0, 1)
    if np.issubdtype(dtype, np.unsignedinteger):
        return (0, 16)
    if np.issubdtype(dtype, np.integer):
        return (-8, 8)
    return (-2.0, 2.0)


def random_array(
    rng: np.random.Generator, dtype: np.dtype, shape: Sequence[int], low: float, high: float
) -> np.ndarray:
    """Uniform values in [low, high] (integers inclusive), in `dtype`."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(int(low), int(high) + 1, size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


def random_inputs(specs: Sequence[InputSpec], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {spec.name: spec.sample(rng) for spec in specs}


def input_specs(module: ModuleOp) -> tuple[InputSpec, ...]:
    """The inputs of a module's graph in index order; dynamic dims become 2."""
    graph = ir.graph_of(module)
    specs = []
    for data in graph.inputs:
        dtype = dtypes.to_numpy(dtype_of(data.out.type))
        shape = tuple(2 if d < 0 else d for d in shape_of(data.out.type))
        specs.append(InputSpec(data.label, dtype, shape, *default_range(dtype)))
    return tuple(specs)


EXACT = "exact"
"""The variant name that fires by default; `site(..., exact=True)` marks any other."""


@dataclass(frozen=True)
class PatternSite:
    """One instance of a pattern in a generated graph: exact (the pass must fire), or a
    named near miss (it must not)."""

    pattern: str
    variant: str
    ops: tuple[Operation, ...]
    exact: bool = False


@dataclass(eq=False)
class GraphCase:
    """A generated graph: its module, weights, inputs, and the patterns placed in it."""

    module: ModuleOp
    store: WeightStore
    specs: tuple[InputSpec, ...]
    seed: int = 0
    sites: tuple[PatternSite, ...] = ()

    @property
    def graph(self) -> GraphOp:
        return ir.graph_of(self.module)

    def inputs(self, seed: int = 0) -> dict[str, np.ndarray]:
        """Random inputs by name, the same for the same seed."""
        return random_inputs(self.specs, seed)

    def sites_of(self, pattern: str, *, exact: bool | None = None) -> list[PatternSite]:
        """The sites of `pattern`; only exact ones, or only near misses, if asked."""
        return [
            s for s in self.sites if s.pattern == pattern and (exact is None or s.exact == exact)
        ]

    def __repr__(self) -> str:
        sites = ", ".join(f"{s.pattern}:{s.variant}" for s in self.sites) or "none"
        return f"GraphCase(seed={self.seed}, sites=[{sites}])\n{ir.to_text(self.module)}"

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        """Hypothesis reports a failing case through this: show the IR, not the objects."""
        printer.text(repr(self))


def _prop(value: object) -> Attribute:
    """A property attribute from a plain Python value, as `ascend_graph` spells it."""
    if isinstance(value, Attribute):
        return value
    if isinstance(value, bool):
        return bool_attr(value)
    if isinstance(value, int):
        return int_attr(value)
    if isinstance(value, float):
        return float_attr(value)
    if isinstance(value, str):
        return StringAttr(value)
    if isinstance(value, Sequence):
        return ints(value)  # type: ignore[arg-type]
    raise TypeError(f"cannot make a property of {value!r}")


class GraphBuilder:
    """Appends ops to one graph; `finish()` returns it as a `GraphCase`."""

    def __init__(self, seed: int = 0, *, dtype: DType = f32):
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.dtype = element_type(dtype)
        self.store = WeightStore(f"ge.testing:{next(_store_keys)}")
        self.block = Block()
        self.specs: list[InputSpec] = []
        self.pool: list[SSAValue] = []
        self.bounds: dict[SSAValue, float] = {}
        self.sites: list[PatternSite] = []
        self._outputs: list[tuple[str, SSAValue]] = []
        self._counts: dict[str, int] = {}
        self._site_ops: list[Operation] | None = None

    # --------------------------------------------------------------------- naming

    def fresh_name(self, stem: str) -> str:
        n = self._counts.get(stem, 0)
        self._counts[stem] = n + 1
        return f"{stem}_{n}"

    # ----------------------------------------------------------------- leaf values

    def input(
        self,
        shape: Sequence[int],
        dtype: DType | None = None,
        *,
        low: float | None = None,
        high: float | None = None,
        name: str | None = None,
    ) -> SSAValue:
        """A new graph input, drawn uniformly from [low, high] by `GraphCase.inputs`."""
        dtype = self.dtype if dtype is None else element_type(dtype)
        np_dtype = dtypes.to_numpy(dtype)
        lo, hi = default_range(np_dtype)
        spec = InputSpec(
            name or self.fresh_name("input"), np_dtype, tuple(shape),
            lo if low is None else low, hi if high is None else high,
        )
        data = DataOp(len(self.specs), tensor(dtype, spec.shape), spec.name)
        self.block.add_op(data)
        self.specs.append(spec)
        self.bounds[data.out] = max(abs(spec.low), abs(spec.high))
        self.pool.append(data.out)
        return data.out

    def weight(self, array: np.ndarray, *, name: str | None = None) -> SSAValue:
        """A constant held in the weight store (its bytes never enter the IR)."""
        array = np.asarray(array)
        ref = self.store.add(name or self.fresh_name("weight"), array)
        const = ConstOp(ref, tensor(dtypes.from_numpy(array.dtype), array.shape), ref.weight.data)
        return self._add_const(const, array)

    def random_weight(
        self,
        shape: Sequence[int],
        *,
        low: float = -1.0,
        high: float = 1.0,
        dtype: DType | None = None,
        away_from_zero: float = 0.0,
        name: str | None = None,
    ) -> SSAValue:
        """A weight uniform in [low, high]; `away_from_zero` flips values out of
        (-away_from_zero, away_from_zero), for divisors and scales."""
        values = self.rng.uniform(low, high, size=tuple(shape))
        if away_from_zero:
            magnitude = np.maximum(np.abs(values), away_from_zero)
            values = np.where(values < 0, -magnitude, magnitude)
        return self.weight(values.astype(as_numpy_dtype(self.dtype if dtype is None else dtype)), name=name)

    def constant(
        self, value: float | Sequence[float], shape: Sequence[int] = (), dtype: DType | None = None
    ) -> SSAValue:
        """A small constant kept inline in the IR (scalars, epsilons, exponents): one value
        broadcast to `shape`, or exactly its number of values in row-major order."""
        dtype = self.dtype if dtype is None else element_type(dtype)
        array, shape = np.asarray(value, np.float64), tuple(shape)
        if array.size == int(np.prod(shape)):
            array = array.reshape(shape)
        elif array.size != 1:
            raise ValueError(f"constant: {array.size} values do not fill shape {list(shape)} ({int(np.prod(shape))} values)")
        values = [float(v) for v in np.broadcast_to(array, shape).ravel()]
        attr = DenseIntOrFPElementsAttr.from_list(tensor(dtype, shape), values)
        const = ConstOp(attr, tensor(dtype, shape), self.fresh_name("const"))
        return self._add_const(const, np.asarray(values))

    def _add_const(self, const: ConstOp, array: np.ndarray) -> SSAValue:
        self.block.add_op(const)
        if self._site_ops is not None:
            self._site_ops.append(const)
        self.bounds[const.out] = float(np.max(np.abs(array.astype(np.float64)), initial=0.0))
        return const.out

    # ------------------------------------------------------------------------- ops

    def op(
        self,
        cls: type[AscendOp],
        operands: Sequence[SSAValue | Operation],
        *,
        name: str | None = None,
        bound: float | None = None,
        publish: bool = True,
        **props: object,
    ) -> AscendOp:
        """Append `cls(operands, props)`; its results infer their types.

        Plain Python property values are converted: bool, int, float, str, and a
        sequence of ints become the attributes `ascend_graph` expects. `bound` is
        a bound on the results' magnitude (default: the largest operand bound).
        Without `publish`, later ops do not pick the results from the pool.
        """
        values = [SSAValue.get(o) for o in operands]
        op = cls(values, {k: _prop(v) for k, v in props.items()}, name or self.fresh_name(cls.OP_TYPE))
        op.verify()  # a missing or ill-typed property fails here, naming the op, not deep in a pass
        self.block.add_op(op)
        if bound is None:
            bound = max((self.bound(v) for v in values), default=1.0)
        if self._site_ops is not None:
            self._site_ops.append(op)
        for r in op.results:
            self.bounds[r] = bound
            if publish and self._site_ops is None:
                self.pool.append(r)
        return op

    def output(self, value: SSAValue | Operation, name: str | None = None) -> None:
        """Make `value` a graph output now (it may keep other users)."""
        self._outputs.append((name or self.fresh_name("out"), SSAValue.get(value)))

    def bound(self, value: SSAValue | Operation) -> float:
        """A bound on |value| known when it was built (1.0 if none was given)."""
        return self.bounds.get(SSAValue.get(value), 1.0)

    @contextmanager
    def site(self, pattern: str, variant: str = EXACT, *, exact: bool | None = None) -> Iterator[list[Operation]]:
        """Record the ops built inside as one instance of `pattern`: an exact one (the
        pass must fire) when `exact` says so, else when the variant is named "exact"."""
        if self._site_ops is not None:
            raise RuntimeError("pattern sites do not nest")
        self._site_ops = ops = []
        try:
            yield ops
        finally:
            self._site_ops = None
        self.sites.append(PatternSite(pattern, variant, tuple(ops), variant == EXACT if exact is None else exact))
        last = next((op for op in reversed(ops) if not isinstance(op, ConstOp)), None)
        if last is not None:
            for r in last.results:
                self.pool.append(r)

    # ----------------------------------------------------------------------- finish

    def finish(self, name: str = "main") -> GraphCase:
        """Close the graph: explicit outputs, then every op result nobody uses."""
        outputs = list(self._outputs)
        taken = {v for _, v in outputs}
        for op in self.block.ops:
            if isinstance(op, DataOp | ConstOp):
                continue
            for r in op.results:
                if not r.uses and r not in taken:
                    outputs.append((self.fresh_name("out"), r))
        if not outputs:
            raise ValueError("the graph has no outputs: build at least one op")
        self.block.add_op(NetOutputOp([v for _, v in outputs], [n for n, _ in outputs]))
        module = ModuleOp([GraphOp(name, Region(self.block))])
        attach(module, self.store)
        module.verify()
        return GraphCase(module, self.store, tuple(self.specs), self.seed, tuple(self.sites))


def as_numpy_dtype(dtype: DType) -> np.dtype:
    """A numpy dtype from an element type, a numpy dtype, or a name like "bfloat16"."""
    if isinstance(dtype, Attribute):
        return dtypes.to_numpy(dtype)
    if dtype == "bfloat16":
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def element_type(dtype: DType) -> Attribute:
    """An element type from an element type, a numpy dtype, or a name like "float16"."""
    if isinstance(dtype, Attribute):
        return dtype
    return dtypes.from_numpy(as_numpy_dtype(dtype))

