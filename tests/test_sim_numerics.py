"""The simulator's numerics: tensors laid out in device memory, and the cube's
convolution on those layouts against the reference interpreter's."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
from dialects import ascend_graph as ag
from dialects import ascend_kernel as ak
from dialects import formats
from ge.core import reference
from ge.core.errors import ModelError
from ge.sim.kernels import Layout, cube


@pytest.mark.parametrize(
    ("dtype", "fmt", "origin", "shape"),
    [
        (np.float16, "NC1HWC0", "NCHW", (2, 19, 5, 3)),
        (np.float32, "NC1HWC0", "NCHW", (1, 9, 2, 2)),
        (ml_dtypes.bfloat16, "FRACTAL_Z", "NCHW", (20, 17, 3, 3)),
        (np.float16, "FRACTAL_NZ", "ND", (3, 33, 18)),
        (np.int8, "FRACTAL_NZ", "ND", (40, 70)),
        (np.float16, "ND", "ND", ()),
    ],
)
def test_a_tensor_stored_in_device_memory_loads_back(dtype, fmt: str, origin: str, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    value = rng.standard_normal(shape).astype(dtype) if np.dtype(dtype).kind == "f" or dtype is ml_dtypes.bfloat16 else rng.integers(-100, 100, shape).astype(dtype)
    physical = formats.to_physical(value, fmt, origin) if fmt in formats.DEVICE_FORMATS else value
    layout = Layout(np.dtype(dtype), physical.shape, fmt, origin, shape)
    data = layout.store(value)
    assert data.dtype == np.uint8 and data.size == layout.nbytes
    memory = np.zeros(layout.nbytes + 1024, np.uint8)
    memory[512 : 512 + data.size] = data
    np.testing.assert_array_equal(layout.load(memory, 512), value)
    np.testing.assert_array_equal(layout.physical(memory, 512), physical)
    padded = layout.physical(memory, 512).astype(np.float64)
    assert np.count_nonzero(padded) <= value.size  # the padding is zero


def test_a_tensor_outside_device_memory_is_refused() -> None:
    layout = Layout(np.dtype(np.float16), (4, 4), "ND", "ND", (4, 4))
    with pytest.raises(ModelError, match="outside the 16-byte device memory"):
        layout.load(np.zeros(16, np.uint8), 0)
    with pytest.raises(ModelError, match="covers 16 bytes, but its float16\\[4, 4\\] ND tensor needs 32"):
        layout.check(16, "input 0")


def conv_model(tmp_path, cin: int, cout: int, k: int, stride: int, pad: int, dilation: int, bias: bool) -> str:
    rng = np.random.default_rng(cin * 100 + cout)
    weights = [numpy_helper.from_array(rng.standard_normal((cout, cin, k, k)).astype(np.float32) / k, "w")]
    names = ["x", "w"]
    if bias:
        weights.append(numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32), "b"))
        names.append("b")
    node = helper.make_node(
        "Conv", names, ["y"], name="conv", strides=[stride] * 2, pads=[pad] * 4, dilations=[dilation] * 2, kernel_shape=[k, k]
    )
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, 15, 13])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=weights,
    )
    path = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


@pytest.mark.parametrize(
    ("cin", "cout", "k", "stride", "pad", "dilation", "bias"),
    [(3, 20, 3, 1, 1, 1, True), (17, 33, 3, 2, 0, 1, False), (32, 16, 1, 1, 0, 1, True), (8, 24, 5, 1, 2, 2, True), (16, 48, 2, 3, 1, 1, False)],
)
def test_the_cube_convolution_is_the_reference_ones_up_to_summation_order(tmp_path, cin, cout, k, stride, pad, dilation, bias) -> None:
    model = ge.compile(conv_model(tmp_path, cin, cout, k, stride, pad, dilation, bias), {"soc_version": "Ascend310P3"})
    kernel = next(op for op in model.kernel_module().ops if isinstance(op, ak.KernelOp) and "Conv2D" in [t.data for t in op.op_types])
    conv = next(op for op in kernel.compute.block.ops if isinstance(op, ag.Conv2DOp))
    x_layout, w_layout = Layout.of_type(conv.x.type), Layout.of_type(conv.filter.type)
    assert cube.fits(conv, x_layout.format, w_layout.format, x_layout.dtype)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(x_layout.origin_shape).astype(np.float16)
    w = rng.standard_normal(w_layout.origin_shape).astype(np.float16)
    args = [x, w] + ([rng.standard_normal(cout).astype(np.float16)] if conv.bias is not None else [])
    (want,) = reference.evaluate_op(conv, args)
    got = cube.conv2d(
        conv,
        formats.to_physical(x, "NC1HWC0", "NCHW"),
        cube.filter_matrix(formats.to_physical(w, "FRACTAL_Z", "NCHW")),
        w_layout.origin_shape[2:],
        args[2] if len(args) > 2 else None,
    )
    assert got.dtype == want.dtype and got.shape == want.shape
    # one float16 unit in the last place, or float32 rounding of the terms where the sum cancels to near 0
    ulp = np.maximum(np.spacing(np.abs(want).astype(np.float16)).astype(np.float32), 1e-5)
    assert np.all(np.abs(got.astype(np.float32) - want.astype(np.float32)) <= ulp)
    assert np.mean(got == want) > 0.99
