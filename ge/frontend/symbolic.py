"""Symbolic dims at import: the shape arithmetic of transformer exports, done on symbols.

A model's dynamic input dims are symbols (an ONNX `dim_param` such as `sequence`, or
`<input>.<i>` for an unnamed or -1 dim); a symbol stands for a size >= 1, and two dims
with the same `dim_param` are the same symbol. While the graph is imported, every value
gets its dims as integer expressions of the symbols (`Expr`: constants, symbols, +, *,
floordiv by a constant), and every small integer value the graph computes from them
(Shape -> Gather -> Concat, Unsqueeze, Add/Sub/Mul/Div, Cast, the Equal/Where tricks
of the torch exporters) its elements as expressions too (`Shapes.value`). A Reshape to
such a value then has as many static dims as can be proven; a dim no rule proves is a
fresh symbol of its own (`?` in the IR), never a wrong static size.

The table is kept for the module the import returns (`shapes_of`): its symbols, the
input dim each comes from, and each value's dims, so that binding the inputs' shapes
(`Shapes.bind`, then `Shapes.resolve`) gives every value's concrete shape. With the
dims pinned (`--input_shape` or a gear) the graph has no symbol and all of this folds
to the constants the static pipeline needs.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from dialects.shapes import DYN, Shape
from ge.core.errors import ModelError

Monomial = tuple["Atom", ...]


@dataclass(frozen=True)
class FloorDiv:
    """`numerator // divisor` that does not divide exactly: an atom of its own."""

    numerator: Expr
    divisor: int

    def __str__(self) -> str:
        return f"({self.numerator})//{self.divisor}"


Atom = str | FloorDiv


def _key(atom: Atom) -> tuple[int, str]:
    return (0, atom) if isinstance(atom, str) else (1, str(atom))


@dataclass(frozen=True)
class Expr:
    """An integer polynomial of symbols (and floordiv atoms), kept normalised: equal
    expressions compare equal. `terms` maps a sorted tuple of atoms to its coefficient."""

    terms: tuple[tuple[Monomial, int], ...]

    @staticmethod
    def of(terms: Mapping[Monomial, int]) -> Expr:
        return Expr(tuple(sorted(((m, c) for m, c in terms.items() if c), key=lambda t: [_key(a) for a in t[0]])))

    @staticmethod
    def const(value: int) -> Expr:
        return Expr.of({(): int(value)})

    @staticmethod
    def symbol(name: str) -> Expr:
        return Expr.of({(name,): 1})

    @property
    def constant(self) -> int | None:
        """The value of an expression without symbols, else None."""
        if not self.terms:
            return 0
        if len(self.terms) == 1 and self.terms[0][0] == ():
            return self.terms[0][1]
        return None

    @property
    def symbols(self) -> frozenset[str]:
        found: set[str] = set()
        for monomial, _ in self.terms:
            for atom in monomial:
                found |= {atom} if isinstance(atom, str) else atom.numerator.symbols
        return frozenset(found)

    @property
    def positive(self) -> bool:
        """Provably >= 1: every coefficient positive (each symbol is a size >= 1)."""
        return bool(self.terms) and all(c > 0 for _, c in self.terms)

    def __add__(self, other: Expr) -> Expr:
        terms = dict(self.terms)
        for m, c in other.terms:
            terms[m] = terms.get(m, 0) + c
        return Expr.of(terms)

    def __neg__(self) -> Expr:
        return Expr.of({m: -c for m, c in self.terms})

    def __sub__(self, other: Expr) -> Expr:
        return self + -other

    def __mul__(self, other: Expr) -> Expr:
        terms: dict[Monomial, int] = {}
        for (m1, c1), (m2, c2) in itertools.product(self.terms, other.terms):
            m = tuple(sorted(m1 + m2, key=_key))
            terms[m] = terms.get(m, 0) + c1 * c2
        return Expr.of(terms)

    def floordiv(self, other: Expr) -> Expr | None:
        """`self // other` (sizes, so >= 0), or None when it cannot be told: exact
        when every term divides, a floordiv atom by a positive constant otherwise."""
        if self == other and other.terms:
            return Expr.const(1)
        divisor = other.constant
        if divisor is not None:
            if divisor <= 0:
                return None
            if all(c % divisor == 0 for _, c in self.terms):
                return Expr.of({m: c // divisor for m, c in self.terms})
            value = self.constant
            if value is not None:
                return Expr.const(value // divisor)
            return Expr.of({(FloorDiv(self, divisor),): 1})
        if len(other.terms) != 1:
            return None
        (monomial, coefficient), = other.terms
        quotient: dict[Monomial, int] = {}
        for m, c in self.terms:
            rest = list(m)
            for atom in monomial:
                if atom not in rest:
                    return None
                rest.remove(atom)
            if c % coefficient:
                return None
            quotient[tuple(rest)] = c // coefficient
        return Expr.of(quotient)

    def evaluate(self, env: Mapping[str, int]) -> int:
        """The value with each symbol bound in `env` (a `KeyError` for an unbound one)."""
        total = 0
        for monomial, coefficient in self.terms:
            product = coefficient
            for atom in monomial:
                product *= env[atom] if isinstance(atom, str) else atom.numerator.evaluate(env) // atom.divisor
            total += product
        return total

    def __str__(self) -> str:
        if not self.terms:
            return "0"
        parts = []
        for monomial, coefficient in self.terms:
            factors = [str(a) for a in monomial]
            if coefficient != 1 or not factors:
                factors.insert(0, str(coefficient))
            parts.append("*".join(factors))
        return " + ".join(parts).replace("+ -", "- ")


def product(exprs: Iterable[Expr]) -> Expr:
    out = Expr.const(1)
    for e in exprs:
        out = out * e
    return out


def fmt(dims: Sequence[Expr]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


@dataclass(frozen=True)
class Origin:
    """Where a symbol's size comes from: dim `dim` of graph input `input`, or, for a
    dim no rule could tell, the value `value` (known only once it is computed)."""

    input: str | None
    dim: int
    value: str | None = None


@dataclass
class Shapes:
    """The symbolic dims of one imported graph (see the module docstring).

    `symbols` maps each symbol to its origin; `dims` each ONNX value name to its dims;
    `values` each small integer value (rank 0 or 1) the graph computes from the dims
    to its elements; `ssa` the imported SSA value of each ONNX name. A symbol made for
    a dim no rule could tell (`unknown`) is bound only by running the graph."""

    symbols: dict[str, Origin] = field(default_factory=dict)
    dims: dict[str, tuple[Expr, ...]] = field(default_factory=dict)
    values: dict[str, tuple[Expr, ...]] = field(default_factory=dict)
    ssa: dict[str, SSAValue] = field(default_factory=dict)
    _fresh: itertools.count = field(default_factory=lambda: itertools.count(1))

    @property
    def inputs(self) -> dict[str, Origin]:
        """The symbols that graph inputs' dims give (those `bind` binds)."""
        return {s: o for s, o in self.symbols.items() if o.input is not None}

    def input_symbol(self, input: str, dim: int, dim_param: str) -> Expr:
        """The symbol of a graph input's dynamic dim: its `dim_param` when it has one
        (the same name, the same symbol), else `<input>.<dim>`."""
        name = dim_param or f"{input}.{dim}"
        self.symbols.setdefault(name, Origin(input, dim))
        return Expr.symbol(name)

    def unknown(self, value: str, dim: int) -> Expr:
        name = f"?{next(self._fresh)}"
        self.symbols[name] = Origin(None, dim, value)
        return Expr.symbol(name)

    def bind(self, input_shapes: Mapping[str, Sequence[int]]) -> dict[str, int]:
        """Each input symbol's size in `input_shapes` (input name -> concrete shape).

        Raises `ModelError` for a missing input, or for an input dim other than its
        expression gives (two dims of one `dim_param` given different sizes)."""
        env: dict[str, int] = {}
        for symbol, origin in self.inputs.items():
            if origin.input not in input_shapes:
                raise ModelError(f"the shape of input '{origin.input}' is needed: its dim {origin.dim} is '{symbol}'")
            env[symbol] = int(input_shapes[origin.input][origin.dim])
        for name, shape in input_shapes.items():
            for i, d in enumerate(self.dims.get(name, ())):
                if d.symbols <= env.keys() and d.evaluate(env) != shape[i]:
                    raise ModelError(
                        f"input '{name}' has dim {i} of {shape[i]}, but the model needs {d} = {d.evaluate(env)} there"
                    )
        return env

    def resolve(self, input_shapes: Mapping[str, Sequence[int]]) -> dict[str, Shape]:
        """The concrete shape of every value whose dims the inputs' shapes decide
        (values with an `unknown` dim are left out: only running the graph tells)."""
        env = self.bind(input_shapes)
        return {
            name: tuple(d.evaluate(env) for d in dims)
            for name, dims in self.dims.items()
            if all(d.symbols <= env.keys() for d in dims)
        }

    def of_value(self, value: SSAValue) -> tuple[Expr, ...] | None:
        """The symbolic dims of an imported SSA value, by the ONNX name it was bound to."""
        for name, ssa in self.ssa.items():
            if ssa is value:
                return self.dims.get(name)
        return None


_TABLES: weakref.WeakKeyDictionary[ModuleOp, Shapes] = weakref.WeakKeyDictionary()


def keep(module: ModuleOp, shapes: Shapes) -> None:
    _TABLES[module] = shapes


def shapes_of(module: ModuleOp) -> Shapes | None:
    """The symbolic dims the import of `module` found (None for a module not imported
    from ONNX in this process, e.g. parsed from text)."""
    return _TABLES.get(module)


def known(dims: Sequence[Expr | None]) -> list[int]:
    """The dims as an op's `dims` property writes them: a proven size, or -1 for a dim
    known at run time only (a symbolic one, or one no rule could tell)."""
    return [-1 if d is None or d.constant is None else d.constant for d in dims]


# ------------------------------------------------------------------ the rules per ONNX op

_SAME_SHAPE = frozenset({
    "Identity", "Cast", "CastLike", "Relu", "LeakyRelu", "Elu", "Selu", "Celu", "Gelu", "Erf", "Tanh", "Sigmoid",
    "HardSigmoid", "HardSwish", "Softplus", "Softsign", "Mish", "Sqrt", "Reciprocal", "Exp", "Log", "Neg", "Abs",
    "Sign", "Floor", "Ceil", "Round", "Sin", "Cos", "Not", "IsNaN", "IsInf", "Softmax", "LogSoftmax", "Hardmax",
    "Clip", "Dropout", "LayerNormalization", "BatchNormalization", "InstanceNormalization", "LRN",
    "RMSNormalization", "SimplifiedLayerNormalization", "MeanVarianceNormalization", "CumSum", "Trilu",
})
"""Ops whose first output has the dims of their first input."""

_BROADCAST = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "PRelu", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
    "And", "Or", "Xor", "Where", "Max", "Min", "Sum", "Mean", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
})
"""Ops whose output has the numpy broadcast of their inputs' dims."""

_BATCH_FIRST = frozenset({
    "Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool", "Resize",
})
"""Ops whose output keeps the batch (dim 0) of their first input."""

_ARITHMETIC = frozenset({"Add", "Sub", "Mul", "Div", "Max", "Min"})
_LARGE = 2**62
"""An end at or above this is "to the end" (exporters write INT64_MAX)."""


def broadcast(*shapes: Sequence[Expr]) -> tuple[Expr | None, ...]:
    """Numpy broadcasting of symbolic dims: a constant other than 1 wins, a 1 gives way,
    and symbols must agree; None where that cannot be told (two different symbols)."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Expr | None] = []
    one = Expr.const(1)
    for i in range(rank):
        dims = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0} - {one}
        fixed = {d for d in dims if d.constant is not None}
        out.append(fixed.pop() if len(fixed) == 1 else one if not dims else dims.pop() if len(dims) == 1 else None)
    return tuple(out)


class Tracer:
    """Applies the rules of one graph's nodes to a `Shapes` table, reading constants
    (`array(name)`), our inferred static dims (`static(name)`, None for a value that is
    not a tensor the import built) and whether a value is of an integer type
    (`integer(name)`: a float Div of sizes is exact or unknown, never floored)."""

    def __init__(
        self, shapes: Shapes, array: Callable[[str], np.ndarray | None], static: Callable[[str], Shape | None],
        integer: Callable[[str], bool],
    ):
        self.shapes = shapes
        self.array = array
        self.static = static
        self.integer = integer

    # -------------------------------------------------------------- reading values

    def dims(self, name: str) -> tuple[Expr, ...] | None:
        """The symbolic dims of a value (constants and values of unknown dims included)."""
        if name in self.shapes.dims:
            return self.shapes.dims[name]
        static = self.static(name)
        if static is None:
            return None
        if DYN in static:
            dims = tuple(self.shapes.unknown(name, i) if d == DYN else Expr.const(d) for i, d in enumerate(static))
        else:
            dims = tuple(Expr.const(d) for d in static)
        self.shapes.dims[name] = dims
        return dims

    def value(self, name: str) -> tuple[Expr, ...] | None:
        """The elements of a small integer value of rank 0 or 1, constant or symbolic."""
        if name in self.shapes.values:
            return self.shapes.values[name]
        array = self.array(name)
        if array is None or array.ndim > 1 or array.size > 64 or array.dtype.kind not in "iufb":
            return None
        if array.dtype.kind == "f" and not all(float(v).is_integer() for v in array.reshape(-1)):
            return None
        return tuple(Expr.const(int(v)) for v in array.reshape(-1))

    def ints(self, name: str) -> list[int] | None:
        array = self.array(name) if name else None
        return None if array is None or array.dtype.kind not in "iu" else [int(v) for v in array.reshape(-1)]

    # ------------------------------------------------------------------ the rules

    def node(self, node: onnx.NodeProto, since: int) -> None:
        """Record the dims (and small integer values) of the outputs of `node` once it
        is imported; a dim our type has static stays that constant."""
        if not node.output or not node.output[0]:
            return
        out = node.output[0]
        values = None if self.array(out) is not None else self._value(node, since)
        if values is not None:
            self.shapes.values[out] = values
        rules = self._split(node) if node.op_type == "Split" else [self._dims(node, since)]
        for i, name in enumerate(node.output):
            static = self.static(name) if name else None
            if static is None:
                continue
            derived = rules[i] if i < len(rules) else None
            rule = derived if derived is not None and len(derived) == len(static) else (None,) * len(static)
            self.shapes.dims[name] = tuple(
                Expr.const(s) if s != DYN else r if r is not None else self.shapes.unknown(name, j)
                for j, (s, r) in enumerate(zip(static, rule))
            )

    def _attr(self, node: onnx.NodeProto, key: str, default: object = None) -> Any:
        return next((helper.get_attribute_value(a) for a in node.attribute if a.name == key), default)

    def _axes(self, node: onnx.NodeProto, since: int, input_since: int) -> list[int] | None:
        if since >= input_since:
            return self.ints(node.input[1]) if len(node.input) > 1 and node.input[1] else None
        return self._attr(node, "axes")

    def _dims(self, node: onnx.NodeProto, since: int) -> tuple[Expr | None, ...] | None:
        op = node.op_type
        inputs = [self.dims(x) if x else None for x in node.input]
        first = inputs[0] if inputs else None
        if op in _SAME_SHAPE:
            return first
        if op in _BROADCAST:
            return broadcast(*(d for d in inputs if d is not None))
        if first is None:
            return None
        if op in _BATCH_FIRST:
            return (first[0], *[None] * (len(first) - 1)) if first else None
        if op == "MatMul" and len(inputs) == 2 and inputs[1] is not None:
            a, b = first, inputs[1]
            if len(a) < 2 or len(b) < 2:
                return None
            return (*broadcast(a[:-2], b[:-2]), a[-2], b[-1])
        if op == "Gemm" and len(inputs) > 1 and inputs[1] is not None:
            a, b = first, inputs[1]
            return (a[1] if self._attr(node, "transA", 0) else a[0], b[0] if self._attr(node, "transB", 0) else b[1])
        if op == "Transpose":
            perm = self._attr(node, "perm", list(reversed(range(len(first)))))
            return tuple(first[p] for p in perm)
        if op == "Reshape":
            target = self.value(node.input[1])
            if target is None:
                return None
            return reshape(first, target, bool(since >= 14 and self._attr(node, "allowzero", 0)))
        if op == "Flatten":
            axis = self._attr(node, "axis", 1) % (len(first) + 1) if first else 0
            return (product(first[:axis]), product(first[axis:]))
        if op == "Unsqueeze":
            axes = self._axes(node, since, 13)
            if axes is None:
                return None
            rank = len(first) + len(axes)
            at = sorted(a % rank for a in axes)
            rest = iter(first)
            return tuple(Expr.const(1) if i in at else next(rest) for i in range(rank))
        if op == "Squeeze":
            axes = self._axes(node, since, 13)
            if axes is None:
                return tuple(d for d in first if d != Expr.const(1))
            drop = {a % len(first) for a in axes}
            return tuple(d for i, d in enumerate(first) if i not in drop)
        if op == "Concat":
            if any(d is None for d in inputs):
                return None
            axis = self._attr(node, "axis") % len(first)
            out = list(first)
            out[axis] = sum((d[axis] for d in inputs[1:]), first[axis])  # type: ignore[index]
            return tuple(out)
        if op == "Gather":
            indices = inputs[1] if len(inputs) > 1 else None
            if indices is None:
                return None
            axis = self._attr(node, "axis", 0) % len(first)
            return (*first[:axis], *indices, *first[axis + 1 :])
        if op == "GatherND" and len(inputs) > 1 and inputs[1] and inputs[1][-1].constant is not None:
            depth = inputs[1][-1].constant + self._attr(node, "batch_dims", 0)
            return (*inputs[1][:-1], *first[depth:])
        if op == "Expand":
            target = self.value(node.input[1])
            return None if target is None else broadcast(first, target)
        if op == "Slice":
            return self.slice_dims(node, first)
        if op == "Shape":
            return (Expr.const(len(range(len(first))[self._attr(node, "start", 0) : self._attr(node, "end", len(first))])),)
        if op == "ConstantOfShape":
            return self.value(node.input[0])
        if op == "Range":
            start, limit, delta = (self.value(x) for x in node.input[:3])
            if start and limit and delta and delta[0].constant == 1:
                return (limit[0] - start[0],)
            return None
        if op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceSumSquare"):
            axes = self._axes(node, since, 18 if op != "ReduceSum" else 13)
            if axes is None:
                return None
            picked = {a % len(first) for a in axes}
            keep = self._attr(node, "keepdims", 1)
            return tuple(Expr.const(1) if i in picked else d for i, d in enumerate(first) if keep or i not in picked)
        return None

    def _split(self, node: onnx.NodeProto) -> list[tuple[Expr | None, ...] | None]:
        """Each part of a Split keeps the input's dims but along the axis (which our
        type has, static, when the sizes are)."""
        first = self.dims(node.input[0])
        if not first:
            return [None]
        axis = self._attr(node, "axis", 0) % len(first)
        part = tuple(None if i == axis else d for i, d in enumerate(first))
        return [part] * len(node.output)

    def slice_dims(self, node: onnx.NodeProto, first: tuple[Expr, ...]) -> tuple[Expr | None, ...] | None:
        """A slice by constant steps 1 from a constant start: to the end (`dim - start`),
        or to a computed end inside a constant dim (`end - start`); else unknown."""
        starts, ends = (self.value(x) for x in node.input[1:3])
        axes = self.ints(node.input[3]) if len(node.input) > 3 and node.input[3] else None
        steps = self.ints(node.input[4]) if len(node.input) > 4 and node.input[4] else None
        if starts is None or ends is None:
            return None
        axes = list(range(len(starts))) if axes is None else axes
        out: list[Expr | None] = list(first)
        for i, axis in enumerate(axes):
            axis %= len(first)
            start, end, dim = starts[i].constant, ends[i], first[axis]
            step = 1 if steps is None else steps[i]
            if step != 1 or start is None or start < 0:
                out[axis] = None
            elif end.constant is not None and end.constant >= _LARGE:
                out[axis] = dim - Expr.const(start)
            elif end.constant is None and dim.constant is not None and end.positive:
                out[axis] = end - Expr.const(start)  # the export's position table is longer than any input
            else:
                out[axis] = None
        return tuple(out)

    def _value(self, node: onnx.NodeProto, since: int) -> tuple[Expr, ...] | None:
        op = node.op_type
        if op == "Shape":
            dims = self.dims(node.input[0])
            if dims is None:
                return None
            return dims[self._attr(node, "start", 0) : self._attr(node, "end", len(dims))]
        if op == "Size":
            dims = self.dims(node.input[0])
            return None if dims is None else (product(dims),)
        args = [self.value(x) if x else None for x in node.input]
        if not args or args[0] is None:
            return None
        first = args[0]
        if op in ("Identity", "Cast", "Floor", "Ceil", "Unsqueeze", "Squeeze", "Reshape", "Flatten"):
            return first
        if op == "Gather":
            indices = self.ints(node.input[1])
            if indices is None or not all(-len(first) <= i < len(first) for i in indices):
                return None
            return tuple(first[i] for i in indices)
        if op == "Concat":
            if any(a is None for a in args):
                return None
            return tuple(itertools.chain.from_iterable(args))  # type: ignore[arg-type]
        if op == "Slice":
            starts, ends = self.ints(node.input[1]), self.ints(node.input[2])
            steps = self.ints(node.input[4]) if len(node.input) > 4 and node.input[4] else [1]
            if not starts or not ends or len(starts) != 1:
                return None
            return first[slice(starts[0], ends[0], steps[0])]
        if op == "Neg":
            return tuple(-a for a in first)
        if op in _ARITHMETIC or op in ("Equal", "Where"):
            values = self._elementwise(op, args)
            inexact = op == "Div" and values is not None and not self.integer(node.output[0])
            return None if inexact and any(isinstance(a, FloorDiv) for v in values for m, _ in v.terms for a in m) else values
        return None

    def _elementwise(self, op: str, args: list[tuple[Expr, ...] | None]) -> tuple[Expr, ...] | None:
        if any(a is None for a in args):
            return None
        length = max(len(a) for a in args)  # type: ignore[arg-type]
        if any(len(a) not in (1, length) for a in args):  # type: ignore[arg-type]
            return None
        rows = zip(*(a * length if len(a) == 1 else a for a in args))  # type: ignore[operator]
        out = []
        for row in rows:
            result = _apply(op, row)
            if result is None:
                return None
            out.append(result)
        return tuple(out)


def _apply(op: str, row: Sequence[Expr]) -> Expr | None:
    if op == "Add":
        return row[0] + row[1]
    if op == "Sub":
        return row[0] - row[1]
    if op == "Mul":
        return row[0] * row[1]
    if op == "Div":
        return row[0].floordiv(row[1])
    if op in ("Max", "Min"):
        a, b = row[0].constant, row[1].constant
        if row[0] == row[1]:
            return row[0]
        if a is not None and b is not None:
            return Expr.const(max(a, b) if op == "Max" else min(a, b))
        return None
    if op == "Equal":
        same = _equal(row[0], row[1])
        return None if same is None else Expr.const(int(same))
    if op == "Where":
        chosen = row[0].constant
        return None if chosen is None else row[1] if chosen else row[2]
    return None


def _equal(a: Expr, b: Expr) -> bool | None:
    """Whether two sizes are equal, when that can be told: the same expression, or a
    difference that is provably non-zero (every symbol is at least 1)."""
    if a == b:
        return True
    difference = a - b
    if difference.positive or (-difference).positive:
        return False
    return None


def reshape(src: Sequence[Expr], target: Sequence[Expr], allow_zero: bool) -> tuple[Expr | None, ...]:
    """ONNX Reshape's output dims: a 0 copies the input's dim (without `allowzero`), one
    -1 takes what the others leave when that divides exactly; None where it cannot be told."""
    out: list[Expr | None] = []
    for i, d in enumerate(target):
        if d.constant == 0 and not allow_zero and i < len(src):
            out.append(src[i])
        else:
            out.append(d if d.constant != -1 else None)
    if [d.constant for d in target].count(-1) == 1:
        known = product(d for d in out if d is not None)
        out[out.index(None)] = product(src).floordiv(known)
    return tuple(out)
