"""What rewrite patterns ask of the graph and make in it: constants, users, operand order.

A pattern proves its rewrite exact from these facts: which constant a value is
(read from the IR or the weight store by the one constant reader,
`ge.core.reference.const_value`, never guessed), which users an intermediate has (a
fused-away value must have none outside the pattern), and which operand of a
commutative op is which; and it makes new constants the way the importer does
(inline up to `INLINE_LIMIT` elements, else in the weight store). Shared by every
fusion pass and by constant folding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr, ModuleOp, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from dialects import shapes
from dialects.ascend_graph import AscendOp, ConstOp, DivOp, MulOp, is_float, shape_of, tensor
from ge.core import dtypes
from ge.core.reference import const_value
from ge.core.weights import INLINE_LIMIT, WeightStore, store_of

OpT = TypeVar("OpT", bound=Operation)


def constant_value(value: SSAValue) -> np.ndarray | None:
    """The (read-only, logical) value of `value` when a const op defines it, inline or
    in the module's weight store (read by `ge.core.reference.const_value`), else None."""
    owner = value.owner
    return const_value(owner) if isinstance(owner, ConstOp) else None


def store_around(op: Operation) -> WeightStore:
    """The weight store of the module holding `op`."""
    module = op.get_toplevel_object()
    assert isinstance(module, ModuleOp), f"{op.name} is not inside a module"
    return store_of(module)


def new_constant(array: np.ndarray, dtype: Attribute, name: str, store: WeightStore) -> ConstOp:
    """A const op holding `array` converted to `dtype`: inline when small, else a
    handle to a new weight named `name` in `store`."""
    array = np.asarray(array).astype(dtypes.to_numpy(dtype))
    type = tensor(dtype, array.shape)
    if array.size > INLINE_LIMIT:
        return ConstOp(store.add(name, array), type, name)
    data = np.ascontiguousarray(array, dtype=dtypes.to_numpy(dtype).newbyteorder("<")).tobytes()
    return ConstOp(DenseIntOrFPElementsAttr(type, BytesAttr(data)), type, name)


def scalar(value: SSAValue) -> float | None:
    """The value of a one-element floating-point constant, else None."""
    if not isinstance(value.type, TensorType) or not is_float(value.type.element_type):
        return None
    if shapes.numel(shape_of(value.type)) != 1:
        return None
    array = constant_value(value)
    return None if array is None else float(array.reshape(-1)[0])


def close_to(value: float, want: float, dtype: Attribute) -> bool:
    """`value` is `want` rounded to `dtype`: within one machine epsilon of it, relatively."""
    return abs(value - want) <= float(ml_dtypes.finfo(dtypes.to_numpy(dtype)).eps) * abs(want)


def scalar_near(value: SSAValue, want: float) -> bool:
    """`value` is a one-element constant holding `want` in its dtype's precision."""
    c = scalar(value)
    return c is not None and close_to(c, want, value.type.element_type)  # type: ignore[attr-defined]


def user(value: SSAValue, cls: type[OpT], where: Callable[[OpT], bool] = lambda op: True) -> OpT | None:
    """The first user of `value` that is a `cls` and satisfies `where`."""
    for use in value.uses:
        op = use.operation
        if isinstance(op, cls) and where(op):
            return op
    return None


def sole_user(value: SSAValue) -> Operation | None:
    """The op using `value`, if it has exactly one use."""
    return value.get_user_of_unique_use()


def other_operand(op: Operation, value: SSAValue) -> SSAValue | None:
    """The operand of a binary `op` besides `value` (None unless `value` is exactly one of them)."""
    a, b = op.operands
    if a is value and b is not value:
        return b
    if b is value and a is not value:
        return a
    return None


def split_scalar(op: Operation) -> tuple[SSAValue, SSAValue] | None:
    """(the other operand, the constant) when one operand of a binary `op` is a
    one-element constant that does not broadcast the result beyond the other."""
    a, b = op.operands
    for value, constant in ((a, b), (b, a)):
        if scalar(constant) is not None and op.results[0].type == value.type:
            return value, constant
    return None


@dataclass(frozen=True)
class Scaling:
    """base * c, c * base or base / c, with c a one-element nonzero constant."""

    op: MulOp | DivOp
    base: SSAValue
    constant: SSAValue

    @property
    def factor(self) -> float:
        """What the op multiplies base by."""
        c = scalar(self.constant)
        assert c is not None
        return c if isinstance(self.op, MulOp) else 1 / c

    def expects(self, factor: float) -> tuple[SSAValue, float]:
        """The constant, and what it must hold for the op to multiply by `factor`."""
        return self.constant, factor if isinstance(self.op, MulOp) else 1 / factor


def scaling(op: object, base: SSAValue | None = None) -> Scaling | None:
    """`op` as a scaling (of `base`, if given), or None."""
    if isinstance(op, MulOp) and (split := split_scalar(op)) is not None:
        found = Scaling(op, *split)
    elif isinstance(op, DivOp) and scalar(op.x2) not in (None, 0.0) and op.y.type == op.x1.type:
        found = Scaling(op, op.x1, op.x2)
    else:
        return None
    return found if base is None or found.base is base else None


def node_name(op: Operation) -> str | None:
    """The ONNX node name of `op`: a fused op taking over its result keeps it."""
    return op.node_name.data if isinstance(op, AscendOp) and op.node_name is not None else None


def erase_dead(rewriter: PatternRewriter, ops: Iterable[Operation]) -> None:
    """Erase `ops` (each listed after the ops using it), then the constants they
    used that nothing else does."""
    constants: list[Operation] = []
    for op in ops:
        constants += [v.owner for v in op.operands if isinstance(v.owner, ConstOp) and v.owner not in constants]
        rewriter.erase(op)
    for const in constants:
        if not const.results[0].uses:
            rewriter.erase(const)
