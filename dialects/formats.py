"""Device formats: the physical shape of a tensor in NC1HWC0, FRACTAL_Z or FRACTAL_NZ,
and the conversion of its values between the origin layout and the physical one.

The cube works on fractals: 16 rows of C0 elements, C0 being 32 bytes of the element
type (16 for float16 and bfloat16, 8 for float32, 32 for int8, 64 for int4), as in
CANN. A device format pads and splits the origin dims into such fractals:

| format     | origin                   | physical                                      |
|------------|--------------------------|-----------------------------------------------|
| NC1HWC0    | NCHW [N, C, H, W]        | [N, C1, H, W, C0], C1 = ceil(C / C0)          |
| FRACTAL_Z  | NCHW [Co, Ci, kh, kw]    | [C1 * kh * kw, N1, 16, C0], N1 = ceil(Co / 16) |
| FRACTAL_NZ | ND [..., H, W] (W = [1, W]) | [..., ceil(W / C0), ceil(H / 16), 16, C0]  |

Everything here is a function of format names, shapes and element types, with no
dialect import, so that the `ascend_graph` verifier, the passes, the reference
interpreter and the simulator all use this one mapping. Padding is zero-filled.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, Float64Type, IntegerType
from xdsl.ir import Attribute

from dialects.shapes import DYN, Shape, ShapeError

ORIGIN_FORMATS = ("ND", "NCHW", "NHWC")
"""Formats in which the physical shape is the logical one."""
DEVICE_FORMATS = ("NC1HWC0", "FRACTAL_Z", "FRACTAL_NZ")
FRACTAL_ROWS = 16
"""M0 and N0: the rows of a cube fractal."""
C0_BYTES = 32

C04 = 4
"""Channels per pixel of CANN's small-channel layout (NC1HWC0_C04)."""
SMALL_CHANNEL_ATTR = "_small_channel"
"""`_small_channel = true`, set by format selection with enable_small_channel=1 on a
convolution of at most `C04` input channels: its img2col reads each pixel's C04
channels, so the cube's K is kh * kw * C04 rounded up to C0, not kh * kw * C0."""

_ORIGIN_OF = {"NC1HWC0": "NCHW", "FRACTAL_Z": "NCHW", "FRACTAL_NZ": "ND"}
"""The origin format each device format maps from."""


def element_bits(dtype: Attribute) -> int:
    """Bits per stored element: bools take a byte, as on the device."""
    if isinstance(dtype, IntegerType):
        return 8 if dtype.width.data == 1 else dtype.width.data
    if isinstance(dtype, Float16Type | BFloat16Type):
        return 16
    if isinstance(dtype, Float32Type):
        return 32
    if isinstance(dtype, Float64Type):
        return 64
    raise ShapeError(f"element type {dtype} has no device layout")


def nbytes(dtype: Attribute, count: int) -> int:
    """Bytes of `count` elements (int4 packs two to a byte)."""
    return -(-count * element_bits(dtype) // 8)


def c0(dtype: Attribute) -> int:
    """Elements in 32 bytes: the innermost fractal dimension."""
    return C0_BYTES * 8 // element_bits(dtype)


def ceil_div(a: int, b: int) -> int:
    return DYN if a == DYN else -(-a // b)


def origin_format_of(format: str) -> str:
    """The origin format a device format maps from."""
    return _ORIGIN_OF[format]


def physical_shape(format: str, origin_format: str, origin_shape: Sequence[int], dtype: Attribute) -> Shape:
    """The shape a tensor of `origin_shape` (in `origin_format`) has in `format`."""
    return _physical(format, origin_format, tuple(origin_shape), c0(dtype))


def _physical(format: str, origin_format: str, shape: Shape, k: int) -> Shape:
    if format in ORIGIN_FORMATS:
        if format != origin_format:
            raise ShapeError(f"{origin_format} -> {format} changes the logical layout: a transpose, not a format")
        return shape
    if format not in DEVICE_FORMATS:
        raise ShapeError(f"unknown format {format!r}; known: {', '.join(ORIGIN_FORMATS + DEVICE_FORMATS)}")
    if origin_format != _ORIGIN_OF[format]:
        raise ShapeError(f"{format} maps from {_ORIGIN_OF[format]}, not from {origin_format}")
    if format == "FRACTAL_NZ":
        if not shape:
            raise ShapeError("FRACTAL_NZ needs a rank >= 1 origin shape")
        rows, cols = (1, shape[0]) if len(shape) == 1 else shape[-2:]
        return shape[:-2] + (ceil_div(cols, k), ceil_div(rows, FRACTAL_ROWS), FRACTAL_ROWS, k)
    if len(shape) != 4:
        raise ShapeError(f"{format} needs a 4-D NCHW origin shape, got rank {len(shape)}")
    n, c, h, w = shape
    if format == "NC1HWC0":
        return (n, ceil_div(c, k), h, w, k)
    spatial = DYN if DYN in (c, h, w) else ceil_div(c, k) * h * w
    return (spatial, ceil_div(n, FRACTAL_ROWS), FRACTAL_ROWS, k)


def _padded(array: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    """`array` zero-padded at the end of each dim to `dims`."""
    pad = [(0, d - s) for s, d in zip(array.shape, dims)]
    return np.pad(array, pad) if any(p for _, p in pad) else array


def _c0_of(array: np.ndarray) -> int:
    """C0 of a numpy array's element width (numpy has no int4)."""
    return C0_BYTES // array.dtype.itemsize


def to_physical(array: np.ndarray, format: str, origin_format: str) -> np.ndarray:
    """The values of a logical array laid out in `format` (a new C-contiguous array)."""
    k = _c0_of(array)
    _physical(format, origin_format, array.shape, k)
    if format in ORIGIN_FORMATS:
        return np.ascontiguousarray(array)
    if format == "FRACTAL_NZ":
        x = array.reshape(1, -1) if array.ndim == 1 else array
        rows, cols = x.shape[-2:]
        r1, w1 = ceil_div(rows, FRACTAL_ROWS), ceil_div(cols, k)
        x = _padded(x, x.shape[:-2] + (r1 * FRACTAL_ROWS, w1 * k))
        x = x.reshape(x.shape[:-2] + (r1, FRACTAL_ROWS, w1, k))
        lead = tuple(range(x.ndim - 4))
        return np.ascontiguousarray(x.transpose(lead + (x.ndim - 2, x.ndim - 4, x.ndim - 3, x.ndim - 1)))
    n, c, h, w = array.shape
    c1 = ceil_div(c, k)
    if format == "NC1HWC0":
        x = _padded(array, (n, c1 * k, h, w)).reshape(n, c1, k, h, w)
        return np.ascontiguousarray(x.transpose(0, 1, 3, 4, 2))
    n1 = ceil_div(n, FRACTAL_ROWS)
    x = _padded(array, (n1 * FRACTAL_ROWS, c1 * k, h, w)).reshape(n1, FRACTAL_ROWS, c1, k, h, w)
    return np.ascontiguousarray(x.transpose(2, 4, 5, 0, 1, 3).reshape(c1 * h * w, n1, FRACTAL_ROWS, k))


def to_logical(array: np.ndarray, format: str, origin_format: str, origin_shape: Sequence[int]) -> np.ndarray:
    """The logical values of an array laid out in `format` (padding dropped), as a
    C-contiguous array: numpy's BLAS sums in an order that depends on the layout."""
    shape = tuple(origin_shape)
    expected = _physical(format, origin_format, shape, _c0_of(array))
    if array.shape != expected:
        raise ShapeError(f"a {format} array of origin shape {list(shape)} has shape {list(expected)}, not {list(array.shape)}")
    if format in ORIGIN_FORMATS:
        return array
    if format == "FRACTAL_NZ":
        rows, cols = (1, shape[0]) if len(shape) == 1 else shape[-2:]
        w1, r1, r0, k = array.shape[-4:]
        lead = tuple(range(array.ndim - 4))
        x = array.transpose(lead + (array.ndim - 3, array.ndim - 2, array.ndim - 4, array.ndim - 1))
        x = x.reshape(array.shape[:-4] + (r1 * r0, w1 * k))[..., :rows, :cols]
        return np.ascontiguousarray(x.reshape(shape))
    n, c, h, w = shape
    if format == "NC1HWC0":
        _, c1, _, _, k = array.shape
        return np.ascontiguousarray(array.transpose(0, 1, 4, 2, 3).reshape(n, c1 * k, h, w)[:, :c])
    _, n1, n0, k = array.shape
    c1 = array.shape[0] // (h * w)
    x = array.reshape(c1, h, w, n1, n0, k).transpose(3, 4, 0, 5, 1, 2)
    return np.ascontiguousarray(x.reshape(n1 * n0, c1 * k, h, w)[:n, :c])

