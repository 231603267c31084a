"""ONNX tensors and element types -> numpy arrays and xDSL types.

Shared by the importer (initializers, graph inputs) and the op converters
(`Constant`, `Cast`, `ConstantOfShape`).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper
from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr, TensorType
from xdsl.ir import Attribute

from dialects.shapes import DYN, Shape
from ge.core import dtypes
from ge.core.errors import ModelError
from ge.core.limits import check_folded

SUPPORTED = "FLOAT, FLOAT16, BFLOAT16, DOUBLE, INT8/16/32/64, UINT8/16/32/64, BOOL"


def element_type(onnx_type: int, what: str) -> Attribute:
    """The xDSL element type of an ONNX element type, or a ModelError naming `what`."""
    try:
        return dtypes.from_numpy(helper.tensor_dtype_to_np_dtype(onnx_type))
    except (KeyError, ValueError, TypeError):
        try:
            label = onnx.TensorProto.DataType.Name(onnx_type)
        except ValueError:
            label = str(onnx_type)
        raise ModelError(f"{what} has element type {label}, which is unsupported; supported: {SUPPORTED}") from None


def tensor_array(tensor: onnx.TensorProto, what: str) -> np.ndarray:
    """The value of a tensor proto, in the numpy dtype of its xDSL element type."""
    dtype = element_type(tensor.data_type, what)
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as e:  # a short raw_data or a wrong count of typed values
        raise ModelError(f"{what}: its data cannot be read ({e})") from e
    return array.astype(dtypes.to_numpy(dtype), copy=False)


def sparse_array(sparse: onnx.SparseTensorProto, what: str) -> np.ndarray:
    """The dense value of a sparse (COO) tensor with linear or per-dim indices."""
    values = tensor_array(sparse.values, what)
    indices = tensor_array(sparse.indices, what).astype(np.int64)
    if any(d < 0 for d in sparse.dims):
        raise ModelError(f"{what} has a negative dim in {list(sparse.dims)}")
    check_folded(sparse.dims, values.dtype.itemsize, what)
    dense = np.zeros(tuple(sparse.dims), values.dtype)
    try:
        if indices.ndim == 1:
            dense.reshape(-1)[indices] = values
        else:
            dense[tuple(indices.T)] = values
    except (IndexError, ValueError) as e:
        raise ModelError(f"{what}: its indices do not fit its shape {list(sparse.dims)} ({e})") from e
    return dense


def value_info_type(info: onnx.ValueInfoProto) -> tuple[Attribute | None, Shape | None]:
    """A value's element type and shape as ONNX declares them (None where unknown)."""
    if not info.type.HasField("tensor_type"):
        return None, None
    tt = info.type.tensor_type
    try:
        dtype = element_type(tt.elem_type, info.name) if tt.elem_type else None
    except ModelError:
        dtype = None
    if not tt.HasField("shape"):
        return dtype, None
    return dtype, tuple(d.dim_value if d.HasField("dim_value") else DYN for d in tt.shape.dim)


def dense(array: np.ndarray, dtype: Attribute) -> DenseIntOrFPElementsAttr:
    """An inline dense attribute holding `array` (xDSL packs little-endian)."""
    data = np.ascontiguousarray(array, dtype=dtypes.to_numpy(dtype).newbyteorder("<")).tobytes()
    return DenseIntOrFPElementsAttr(TensorType(dtype, array.shape), BytesAttr(data))

