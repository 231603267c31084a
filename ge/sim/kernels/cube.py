"""Convolution as the cube computes it, on the layouts in device memory.

An NC1HWC0 feature map and a FRACTAL_Z filter are already the two matrices of the
cube's img2col product, with K ordered (C1, kh, kw, C0) in both:

- A [N * Ho * Wo, C1 * kh * kw * C0]: for each output pixel, the C0-wide channel
  blocks under each kernel offset (what load3d's img2col builds in L0A);
- B [C1 * kh * kw * C0, N1 * 16]: the FRACTAL_Z filter with each fractal's C0 and
  output rows swapped, zero in the padded channels and outputs.

So the product multiplies float16 (or bfloat16) values and accumulates in float32,
or int8 values in int32 (exact, and wrapping as the cube's int32 accumulators do),
adds the bias there, and rounds once to the result dtype (the padding holds
`offset_x`, an int8 input's offset, as load3d pads it), as the reference
interpreter's convolution does, without converting the input and the filter back
to NCHW first: on ResNet-50 it takes a third of the time. The sums run in a
different order, so a float result may differ from the reference interpreter's in
the last float32 bit, and by one unit in the last place once rounded to float16; an
int8 one is the same.
Grouped convolutions and other dtypes run on the reference interpreter's kernel.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from dialects import ascend_graph as ag
from dialects import shapes
from ge.core import dtypes

LOW_PRECISION = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
"""Input dtypes the cube multiplies exactly into a float32 accumulator."""
INT8 = np.dtype(np.int8)
"""The input dtype the cube multiplies into an int32 accumulator."""


def accumulator(dtype: np.dtype) -> np.dtype:
    """The cube's accumulator for an input dtype: int32 for int8, else float32."""
    return np.dtype(np.int32) if dtype == INT8 else np.dtype(np.float32)


def fits(op: ag.Conv2DOp, x_format: str | None, w_format: str | None, dtype: np.dtype) -> bool:
    """Whether `conv2d` computes this convolution: one group, float16/bfloat16 or int8, device layouts."""
    return (
        op.props.int("groups", 1) == 1 and x_format == "NC1HWC0" and w_format == "FRACTAL_Z"
        and (dtype in LOW_PRECISION or dtype == INT8)
    )


def filter_matrix(w: np.ndarray) -> np.ndarray:
    """B [C1 * kh * kw * C0, N1 * 16] in the accumulator's dtype from a FRACTAL_Z filter [C1 * kh * kw, N1, 16, C0]."""
    k1, n1, n0, c0 = w.shape
    return np.ascontiguousarray(w.astype(accumulator(w.dtype)).transpose(0, 3, 1, 2).reshape(k1 * c0, n1 * n0))


def conv2d(op: ag.Conv2DOp, x: np.ndarray, b: np.ndarray, kernel: tuple[int, int], bias: np.ndarray | None) -> np.ndarray:
    """The logical result [N, Cout, Ho, Wo] of `op` on its NC1HWC0 input `x` and filter matrix `b`."""
    n, c1, h, w, c0 = x.shape
    kh, kw = kernel
    _, _, sh, sw = op.props.ints("strides")
    _, _, dh, dw = op.props.ints("dilations")
    top, bottom, left, right = op.props.ints("pads")
    oh = shapes.window_out(h, kh, sh, top, bottom, dh)
    ow = shapes.window_out(w, kw, sw, left, right, dw)
    acc = accumulator(x.dtype)
    x32 = x.astype(acc)
    if top or bottom or left or right:
        pad = ((0, 0), (0, 0), (top, bottom), (left, right), (0, 0))
        x32 = np.pad(x32, pad, constant_values=op.props.int("offset_x"))
    columns = np.empty((n, oh, ow, c1, kh, kw, c0), acc)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + (oh - 1) * sh + 1, sh)
            cols = slice(j * dw, j * dw + (ow - 1) * sw + 1, sw)
            columns[:, :, :, :, i, j, :] = x32[:, :, rows, cols, :].transpose(0, 2, 3, 1, 4)
    y = columns.reshape(n * oh * ow, c1 * kh * kw * c0) @ b
    cout = ag.shape_of(op.y.type)[1]
    if bias is not None:
        y[:, :cout] += bias.astype(acc)
    out = dtypes.to_numpy(ag.dtype_of(op.y.type))
    return y[:, :cout].reshape(n, oh, ow, cout).transpose(0, 3, 1, 2).astype(out)
