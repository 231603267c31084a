"""Shape arithmetic shared by the dialects' verifiers and result-type inference.

Shapes are tuples of ints; `DYN` marks a dimension unknown at compile time. Every
function here raises `ShapeError` with a sentence naming the rule that failed, so
that both the verifier and the ONNX importer can report it as it is.
"""

from collections.abc import Sequence
from math import ceil, floor

from xdsl.dialects.builtin import DYNAMIC_INDEX

DYN = DYNAMIC_INDEX
Shape = tuple[int, ...]


class ShapeError(ValueError):
    """A shape rule of an op is violated."""


def fmt(shape: Sequence[int]) -> str:
    return "[" + ", ".join("?" if d == DYN else str(d) for d in shape) + "]"


def is_static(shape: Sequence[int]) -> bool:
    return DYN not in shape


def numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def broadcast(*shapes: Sequence[int]) -> Shape:
    """Numpy (multidirectional) broadcasting, dynamic dims allowed."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[int] = []
    for i in range(rank):
        dims = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0}
        fixed = {d for d in dims if d not in (1, DYN)}
        if len(fixed) > 1:
            raise ShapeError(
                f"shapes {', '.join(fmt(s) for s in shapes)} cannot be broadcast "
                f"(output dimension {i} would be each of {sorted(fixed)})"
            )
        if fixed:
            out.append(fixed.pop())
        elif DYN in dims:
            out.append(DYN)
        else:
            out.append(1)
    return tuple(out)


def norm_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1):
        raise ShapeError(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def norm_axes(axes: Sequence[int], rank: int, what: str = "axes") -> tuple[int, ...]:
    out = tuple(norm_axis(a, rank, what) for a in axes)
    if len(set(out)) != len(out):
        raise ShapeError(f"{what} {list(axes)} repeat an axis")
    return out


def reduce(shape: Shape, axes: Sequence[int], keep_dims: bool) -> Shape:
    axes = norm_axes(axes, len(shape)) if axes else tuple(range(len(shape)))
    if keep_dims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def window_out(
    size: int, kernel: int, stride: int, pad_before: int, pad_after: int, dilation: int,
    ceil_mode: bool = False,
) -> int:
    """Output length of a sliding window (convolution or pooling) along one axis."""
    if size == DYN:
        return DYN
    span = dilation * (kernel - 1) + 1
    padded = size + pad_before + pad_after
    if padded < span:
        raise ShapeError(
            f"window of {span} (kernel {kernel}, dilation {dilation}) does not fit an "
            f"input of {size} padded by {pad_before}+{pad_after}"
        )
    rounding = ceil if ceil_mode else floor
    out = int(rounding((padded - span) / stride)) + 1
    if ceil_mode and (out - 1) * stride >= size + pad_before:
        out -= 1  # the last window must start inside the input or the leading pad
    return out


def reshape(shape: Shape, target: Sequence[int]) -> Shape:
    """Resolve a target shape that may hold one -1 (inferred) dimension; a 0 is a
    dimension of size 0 (an empty tensor), not ONNX's copy of the input's dim."""
    if target.count(-1) > 1:
        raise ShapeError(f"target shape {fmt(target)} has more than one -1")
    if any(d < -1 for d in target):
        raise ShapeError(f"target shape {fmt(target)} has a dimension below -1")
    if 0 in target and -1 in target:
        raise ShapeError(f"target shape {fmt(target)} has both a 0 and a -1 (the -1 cannot be inferred)")
    if not is_static(shape):
        return tuple(DYN if d == -1 else d for d in target)
    total = numel(shape)
    known = numel([d for d in target if d != -1])
    if -1 in target:
        if known == 0 or total % known:
            raise ShapeError(f"cannot reshape {fmt(shape)} to {fmt(target)}")
        return tuple(total // known if d == -1 else d for d in target)
    if known != total:
        raise ShapeError(
            f"cannot reshape {fmt(shape)} ({total} elements) to {fmt(target)} "
            f"({known} elements)"
        )
    return tuple(target)


def compatible(declared: Sequence[int], inferred: Sequence[int]) -> bool:
    """A declared shape may refine a dynamic inferred dim, never contradict one."""
    return len(declared) == len(inferred) and all(
        i == DYN or d == DYN or d == i for d, i in zip(declared, inferred)
    )
