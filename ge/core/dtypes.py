"""Element types: xDSL types <-> numpy dtypes (bfloat16 from ml-dtypes)."""

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
    bf16,
    f16,
    f32,
    f64,
    i1,
)
from xdsl.ir import Attribute

_TO_NUMPY: dict[Attribute, np.dtype] = {
    f16: np.dtype(np.float16),
    bf16: np.dtype(ml_dtypes.bfloat16),
    f32: np.dtype(np.float32),
    f64: np.dtype(np.float64),
    i1: np.dtype(np.bool_),
}
for _bits in (8, 16, 32, 64):
    _TO_NUMPY[IntegerType(_bits)] = np.dtype(f"int{_bits}")
    _TO_NUMPY[IntegerType(_bits, Signedness.SIGNED)] = np.dtype(f"int{_bits}")
    _TO_NUMPY[IntegerType(_bits, Signedness.UNSIGNED)] = np.dtype(f"uint{_bits}")

_FROM_NUMPY: dict[np.dtype, Attribute] = {
    np.dtype(np.float16): f16,
    np.dtype(ml_dtypes.bfloat16): bf16,
    np.dtype(np.float32): f32,
    np.dtype(np.float64): f64,
    np.dtype(np.bool_): i1,
}
for _bits in (8, 16, 32, 64):
    _FROM_NUMPY[np.dtype(f"int{_bits}")] = IntegerType(_bits)
    _FROM_NUMPY[np.dtype(f"uint{_bits}")] = IntegerType(_bits, Signedness.UNSIGNED)

FLOATS = (Float16Type, BFloat16Type, Float32Type, Float64Type)


def to_numpy(dtype: Attribute) -> np.dtype:
    """The numpy dtype of an element type; signless integers are signed."""
    if dtype not in _TO_NUMPY:
        raise ValueError(f"element type {dtype} has no numpy equivalent")
    return _TO_NUMPY[dtype]


def from_numpy(dtype: np.dtype) -> Attribute:
    """The element type of a numpy dtype (signed integers become signless)."""
    dtype = np.dtype(dtype)
    if dtype not in _FROM_NUMPY:
        raise ValueError(f"numpy dtype {dtype} has no element type here")
    return _FROM_NUMPY[dtype]


def name(dtype: Attribute) -> str:
    """A short, CANN-like name: float16, bfloat16, int8, uint8, bool, ..."""
    return "bool" if dtype == i1 else str(to_numpy(dtype)) if dtype != bf16 else "bfloat16"
