"""Spatial ops (ConvTranspose, 3-D Conv and pooling, AveragePool dilations, LpPool,
MaxPool's Indices, MaxUnpool, GridSample, AffineGrid, Resize antialias, Pad wrap, Col2Im, CenterCropPad,
DeformConv, RoiAlign, Reshape allowzero): imported and run by the reference
interpreter and compiled and simulated, each beside onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
from dialects import ascend_graph as ag
from ge.core.ir import graph_of
from ge.testing.refusals import refused

F = TensorProto.FLOAT
RNG = np.random.default_rng(7)


def rand(*shape: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return RNG.uniform(low, high, shape).astype(np.float32)


def model(
    node: onnx.NodeProto, inputs: dict[str, np.ndarray], opset: int, weights: dict[str, np.ndarray] | None = None
) -> onnx.ModelProto:
    """One node over graph inputs (typed from their values) and initializers."""
    infos = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in inputs.items()]
    inits = [numpy_helper.from_array(v, k) for k, v in (weights or {}).items()]
    outputs = [helper.make_tensor_value_info(o, F, None) for o in node.output]
    graph = helper.make_graph([node], "g", infos, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def onnxruntime(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, feeds)


def check(m: onnx.ModelProto, feeds: dict[str, np.ndarray], rtol: float = 1e-4, atol: float = 1e-5) -> list[str]:
    """Reference interpreter and compile + simulate, both beside onnxruntime; returns
    the op types of the imported graph."""
    want = onnxruntime(m, feeds)
    module = ge.load_onnx(m)[0]
    imported = op_types(module)
    names = [o.name for o in m.graph.output]
    got = ge.reference.run(module, feeds)
    for name, w in zip(names, want):
        np.testing.assert_allclose(got[name], w, rtol=rtol, atol=atol)
    om = ge.compile(module, {"precision_mode": "must_keep_origin_dtype", "soc_version": "Ascend910B1"})
    with ge.Session() as session:
        outputs = dict(session.run(om, feeds).outputs)
    for name, w in zip(names, want):
        assert outputs[name].shape == w.shape
        np.testing.assert_allclose(outputs[name], w, rtol=rtol, atol=atol)
    return imported


def op_types(module) -> list[str]:
    """The op types of the graph's computing ops (no Data, Const or NetOutput)."""
    structural = (ag.DataOp, ag.ConstOp, ag.NetOutputOp)
    return [op.OP_TYPE for op in graph_of(module).body.block.ops if isinstance(op, ag.AscendOp) and not isinstance(op, structural)]



# ------------------------------------------------------------------ ConvTranspose

CONV_TRANSPOSE = [
    ((1, 2, 5, 4), (2, 3, 3, 3), {}),
    ((2, 4, 4, 5), (4, 3, 3, 2), {"strides": [2, 2], "output_padding": [1, 1], "group": 2}),
    ((1, 3, 5, 5), (3, 2, 3, 3), {"strides": [2, 3], "pads": [1, 0, 2, 1], "dilations": [2, 1]}),
    ((1, 2, 3, 4), (2, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 3, 4), (2, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 1, 3, 3), (1, 2, 3, 3), {"strides": [3, 2], "output_shape": [10, 8]}),
    ((1, 2, 7), (2, 3, 3), {"strides": [2], "pads": [1, 0]}),
    ((1, 2, 3, 4, 3), (2, 2, 2, 3, 2), {"strides": [2, 1, 2], "pads": [0, 1, 1, 1, 0, 0]}),
]


@pytest.mark.slow
@pytest.mark.parametrize("opset", [11, 21])
@pytest.mark.parametrize(("x_shape", "w_shape", "attrs"), CONV_TRANSPOSE)
def test_conv_transpose(opset, x_shape, w_shape, attrs):
    x, w, b = rand(*x_shape), rand(*w_shape), rand(w_shape[1] * attrs.get("group", 1))
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], name="ct", **attrs)
    types = check(model(node, {"x": x}, opset, {"w": w, "b": b}), {"x": x})
    assert ("Conv3DTranspose" if len(x_shape) == 5 else "Conv2DTranspose") in types


@pytest.mark.slow
def test_conv_transpose_in_float16_runs_on_nc1hwc0():
    """Under the default precision a float32 model's ConvTranspose reads float16 in
    NC1HWC0 and FRACTAL_Z, and matches onnxruntime within float16's precision."""
    x, w = rand(1, 20, 6, 6), rand(20, 8, 3, 3)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])
    m = model(node, {"x": x}, 17, {"w": w})
    om = ge.compile(ge.load_onnx(m)[0], {"soc_version": "Ascend310P3"})
    transpose = [op for op in om.kernel_module().walk() if isinstance(op, ag.Conv2DTransposeOp)]
    assert [ag.format_of(op.x.type) for op in transpose] == ["NC1HWC0"]
    with ge.Session() as session:
        (got,) = session.run(om, {"x": x}).outputs.values()
    np.testing.assert_allclose(got, onnxruntime(m, {"x": x})[0], rtol=1e-2, atol=1e-2)


@pytest.mark.slow
def test_torch_conv_transpose2d_matches_onnxruntime(tmp_path):
    torch = pytest.importorskip("torch")
    layer = torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2).eval()
    path = tmp_path / "deconv.onnx"
    torch.onnx.export(layer, torch.randn(2, 4, 5, 7), str(path), dynamo=False, opset_version=17, input_names=["x"], output_names=["y"])
    x = rand(2, 4, 5, 7)
    want = onnxruntime(onnx.load(path), {"x": x})[0]
    om = ge.compile(str(path), {"precision_mode": "must_keep_origin_dtype", "soc_version": "Ascend910B1"})
    with ge.Session() as session:
        got = session.run(om, {"x": x}).outputs["y"]
    assert got.shape == (2, 6, 10, 14)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_conv_transpose_refusals():
    x = rand(1, 1, 2, 2, 2, 2)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="ct4")
    refused(model(node, {"x": x}, 17, {"w": rand(1, 1, 2, 2, 2, 2)}), "node 'ct4' (ConvTranspose)", "only 1-D, 2-D and 3-D")
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="big", output_shape=[20, 20])
    refused(model(node, {"x": rand(1, 1, 3, 3)}, 17, {"w": rand(1, 1, 3, 3)}), "node 'big'", "output_shape [20, 20] is larger")


# ---------------------------------------------------------- 3-D convolution and pooling


@pytest.mark.slow
@pytest.mark.parametrize("attrs", [{}, {"strides": [1, 2, 2], "pads": [1, 0, 1, 1, 0, 1], "group": 2}, {"dilations": [2, 1, 1]}])
def test_conv3d(attrs):
    x, w, b = rand(1, 4, 5, 6, 5), rand(4, 4 // attrs.get("group", 1), 2, 3, 2), rand(4)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
    assert "Conv3D" in (check(model(node, {"x": x}, 11, {"w": w, "b": b}), {"x": x}))


POOL3D = [
    {"kernel_shape": [2, 2, 2]},
    {"kernel_shape": [3, 2, 3], "strides": [2, 1, 2], "pads": [1, 0, 1, 1, 0, 1], "ceil_mode": 1},
    {"kernel_shape": [2, 2, 2], "dilations": [2, 1, 2], "strides": [1, 2, 1]},
]


@pytest.mark.slow
@pytest.mark.parametrize("attrs", POOL3D)
@pytest.mark.parametrize(("op", "extra"), [("MaxPool", {}), ("AveragePool", {}), ("AveragePool", {"count_include_pad": 1})])
def test_pool3d(op, extra, attrs):
    x = rand(1, 2, 6, 5, 7)
    node = helper.make_node(op, ["x"], ["y"], **attrs, **extra)
    types = check(model(node, {"x": x}, 19), {"x": x})
    assert ("MaxPool3D" if op == "MaxPool" else "AvgPool3D") in types


@pytest.mark.slow
@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("ceil_mode", [0, 1])
def test_average_pool_with_dilations(count_include_pad, ceil_mode):
    x = rand(1, 2, 9, 8)
    node = helper.make_node(
        "AveragePool", ["x"], ["y"], kernel_shape=[3, 2], dilations=[2, 3], strides=[2, 1], pads=[1, 1, 1, 0],
        count_include_pad=count_include_pad, ceil_mode=ceil_mode,
    )
    check(model(node, {"x": x}, 19), {"x": x})


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shape", "attrs", "opset"),
    [
        ((1, 2, 9), {"kernel_shape": [3], "p": 1}, 11),
        ((1, 3, 6, 7), {"kernel_shape": [2, 3], "strides": [2, 1], "pads": [1, 0, 0, 1]}, 11),
        ((1, 3, 6, 7), {"kernel_shape": [2, 2], "p": 3, "auto_pad": "SAME_UPPER"}, 18),
        ((1, 2, 7, 7), {"kernel_shape": [2, 2], "dilations": [2, 2], "ceil_mode": 1, "strides": [2, 2]}, 18),
        ((1, 2, 4, 5, 4), {"kernel_shape": [2, 2, 2]}, 18),
    ],
)
def test_lp_pool(shape, attrs, opset):
    x = rand(*shape)
    types = check(model(helper.make_node("LpPool", ["x"], ["y"], **attrs), {"x": x}, opset), {"x": x}, rtol=1e-4)
    assert types == ["LpPool"]


def test_lp_pool_refuses_p_below_one():
    node = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2], p=0, name="lp")
    refused(model(node, {"x": rand(1, 1, 4)}, 18), "node 'lp' (LpPool)", "p 0 must be at least 1")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shape", "attrs"),
    [
        ((2, 3, 7, 6), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}),
        ((1, 2, 6, 5), {"kernel_shape": [2, 2], "storage_order": 1, "ceil_mode": 1, "strides": [2, 2]}),
        ((1, 2, 7, 7), {"kernel_shape": [2, 2], "dilations": [2, 2]}),
        ((2, 2, 9), {"kernel_shape": [3], "strides": [2]}),
        ((1, 2, 4, 5, 4), {"kernel_shape": [2, 2, 2], "storage_order": 1}),
    ],
)
def test_max_pool_with_indices(shape, attrs):
    x = rand(*shape)
    node = helper.make_node("MaxPool", ["x"], ["y", "z"], **attrs)
    m = model(node, {"x": x}, 12)
    m.graph.output[1].type.tensor_type.elem_type = TensorProto.INT64
    assert check(m, {"x": x}) == ["MaxPoolWithArgmax"]


# --------------------------------------------------------------------- MaxUnpool


@pytest.mark.slow
@pytest.mark.parametrize("output_shape", [None, [2, 3, 5, 5]])
def test_max_unpool(output_shape):
    """The indices are flat in the output: a 2x2 window's cell of each output cell,
    counted in the output plane (4 or 5 wide)."""
    x = rand(2, 3, 2, 2)
    height, width = (output_shape or [2, 3, 4, 4])[2:]
    window = RNG.integers(0, 2, (2, 3, 2, 2, 2))
    rows = np.arange(2)[:, None] * 2 + window[..., 0]
    cols = np.arange(2)[None, :] * 2 + window[..., 1]
    planes = np.arange(6).reshape(2, 3, 1, 1) * height * width
    indices = (planes + rows * width + cols).astype(np.int64)
    inputs = ["x", "i"] + (["s"] if output_shape else [])
    weights = {"i": indices, **({"s": np.array(output_shape, np.int64)} if output_shape else {})}
    node = helper.make_node("MaxUnpool", inputs, ["y"], kernel_shape=[2, 2], strides=[2, 2])
    assert check(model(node, {"x": x}, 11, weights), {"x": x}) == ["MaxUnpool"]


def test_max_unpool_refuses_an_output_shape_changing_n_or_c():
    weights = {"i": np.zeros((1, 1, 2, 2), np.int64), "s": np.array([1, 2, 4, 4], np.int64)}
    node = helper.make_node("MaxUnpool", ["x", "i", "s"], ["y"], kernel_shape=[2, 2], strides=[2, 2], name="mu")
    refused(model(node, {"x": rand(1, 1, 2, 2)}, 11, weights), "node 'mu' (MaxUnpool)", "must keep the input's N and C [1, 1]")


# -------------------------------------------------------------- GridSample, AffineGrid

GRID_CASES = [
    (mode, padding, corners)
    for mode in ("bilinear", "nearest", "bicubic")
    for padding in ("zeros", "border", "reflection")
    for corners in (0, 1)
]


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "padding", "corners"), GRID_CASES)
@pytest.mark.parametrize("opset", [16, 20])
def test_grid_sample(opset, mode, padding, corners):
    name = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode) if opset >= 20 else mode
    x, grid = rand(2, 3, 4, 5), rand(2, 6, 3, 2, low=-1.3, high=1.3)
    node = helper.make_node("GridSample", ["x", "g"], ["y"], mode=name, padding_mode=padding, align_corners=corners)
    assert (check(model(node, {"x": x, "g": grid}, opset), {"x": x, "g": grid})) == ["GridSampler2D"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("corners", [0, 1])
def test_grid_sample_volumetric(mode, corners):
    x, grid = rand(1, 2, 3, 4, 5), rand(1, 2, 3, 4, 3, low=-1.2, high=1.2)
    node = helper.make_node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode="border", align_corners=corners)
    assert (check(model(node, {"x": x, "g": grid}, 20), {"x": x, "g": grid})) == ["GridSampler3D"]


def test_grid_sample_refusals():
    x, grid = rand(1, 1, 2, 2, 2), rand(1, 1, 1, 1, 3)
    node = helper.make_node("GridSample", ["x", "g"], ["y"], mode="cubic", name="gs")
    refused(model(node, {"x": x, "g": grid}, 20), "node 'gs' (GridSample)", "cubic mode is unsupported for 5-D inputs")
    node = helper.make_node("GridSample", ["x", "g"], ["y"], mode="linear", name="gs16")
    refused(model(node, {"x": rand(1, 1, 2, 2), "g": rand(1, 1, 1, 2)}, 16), "node 'gs16'", "mode 'linear' is not bilinear, nearest, bicubic")


@pytest.mark.slow
@pytest.mark.parametrize("corners", [0, 1])
@pytest.mark.parametrize(("theta_shape", "size"), [((2, 2, 3), [2, 3, 4, 5]), ((2, 3, 4), [2, 3, 3, 4, 5])])
def test_affine_grid(theta_shape, size, corners):
    theta = rand(*theta_shape)
    node = helper.make_node("AffineGrid", ["t", "s"], ["y"], align_corners=corners)
    check(model(node, {"t": theta}, 20, {"s": np.array(size, np.int64)}), {"t": theta})


# ---------------------------------------------------------- Resize antialias, Pad wrap


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize(("scales", "sizes"), [([1, 1, 0.6, 0.4], None), (None, [1, 2, 5, 3]), ([1, 1, 0.5, 1.5], None)])
def test_resize_antialias(mode, scales, sizes):
    x = rand(1, 2, 9, 8)
    weights = {"r": np.zeros(0, np.float32), "sc": np.array(scales or [], np.float32)}
    inputs = ["x", "r", "sc"]
    if sizes:
        weights["sz"] = np.array(sizes, np.int64)
        inputs = ["x", "r", "", "sz"]
        del weights["sc"]
    node = helper.make_node("Resize", inputs, ["y"], mode=mode, antialias=1)
    check(model(node, {"x": x}, 18, weights), {"x": x})


@pytest.mark.slow
@pytest.mark.parametrize("pads", [[1, 2, 2, 1], [0, 3, 1, 0], [-1, 1, 2, -1]])
def test_pad_wrap(pads):
    x = rand(3, 4)
    node = helper.make_node("Pad", ["x", "p"], ["y"], mode="wrap")
    check(model(node, {"x": x}, 19, {"p": np.array(pads, np.int64)}), {"x": x})


# ---------------------------------------------------------- Col2Im, CenterCropPad


@pytest.mark.slow
@pytest.mark.parametrize(
    ("x_shape", "image", "block", "attrs"),
    [
        ((1, 5, 5), [5, 5], [1, 5], {}),
        ((2, 12, 6), [5, 6], [2, 3], {"strides": [2, 1], "pads": [1, 0, 1, 0], "dilations": [1, 2]}),
        ((1, 8, 8), [3, 3, 3], [2, 2, 2], {}),
    ],
)
def test_col2im(x_shape, image, block, attrs):
    x = rand(*x_shape)
    weights = {"i": np.array(image, np.int64), "b": np.array(block, np.int64)}
    node = helper.make_node("Col2Im", ["x", "i", "b"], ["y"], **attrs)
    assert (check(model(node, {"x": x}, 18, weights), {"x": x})) == ["Col2im"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shape", "target", "axes", "ops"),
    [
        ((20, 10, 3), [10, 7, 3], None, ["StridedSliceD"]),
        ((10, 7, 3), [20, 10, 3], None, ["PadV3"]),
        ((20, 8, 3), [10, 10], [0, 1], ["StridedSliceD", "PadV3"]),
        ((3, 20, 9), [11, 10], [-2, -1], ["StridedSliceD", "PadV3"]),
    ],
)
def test_center_crop_pad(shape, target, axes, ops):
    x = rand(*shape)
    attrs = {"axes": axes} if axes else {}
    node = helper.make_node("CenterCropPad", ["x", "s"], ["y"], **attrs)
    types = check(model(node, {"x": x}, 18, {"s": np.array(target, np.int64)}), {"x": x})
    assert types == ops


def test_center_crop_pad_refuses_a_shape_of_another_length():
    node = helper.make_node("CenterCropPad", ["x", "s"], ["y"], axes=[0], name="ccp")
    refused(model(node, {"x": rand(4, 4)}, 18, {"s": np.array([2, 2], np.int64)}), "node 'ccp' (CenterCropPad)", "needs 1 values")


# ------------------------------------------------------------ DeformConv, RoiAlign


@pytest.mark.slow
@pytest.mark.parametrize(
    ("attrs", "with_mask", "with_bias"),
    [({}, False, False), ({"pads": [1, 1, 1, 1]}, True, True), ({"offset_group": 2, "group": 2, "strides": [2, 1], "dilations": [1, 2]}, True, False)],
)
def test_deform_conv(attrs, with_mask, with_bias):
    x, w = rand(1, 4, 6, 7), rand(4, 4 // attrs.get("group", 1), 2, 3)
    (st, sw), (dh, dw) = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    pt, pl, pb, pr = attrs.get("pads", [0, 0, 0, 0])
    oh, ow = (6 + pt + pb - dh - 1) // st + 1, (7 + pl + pr - 2 * dw - 1) // sw + 1
    groups = attrs.get("offset_group", 1)
    feeds = {"x": x, "o": rand(1, groups * 6 * 2, oh, ow, low=-2, high=2)}
    inputs = ["x", "w", "o"] + (["b" if with_bias else "", "m"] if with_mask else ["b"] if with_bias else [])
    if with_mask:
        feeds["m"] = rand(1, groups * 6, oh, ow, low=0, high=1)
    weights = {"w": w, **({"b": rand(4)} if with_bias else {})}
    node = helper.make_node("DeformConv", inputs, ["y"], **attrs)
    types = check(model(node, feeds, 19, weights), feeds)
    assert types[-2:] == ["DeformableOffsets", "Conv2D"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("opset", "attrs"),
    [
        (11, {"output_height": 3, "output_width": 2, "sampling_ratio": 2, "spatial_scale": 0.5}),
        (16, {"output_height": 2, "output_width": 3}),
        (16, {"mode": "max", "output_height": 3, "output_width": 3, "sampling_ratio": 2, "coordinate_transformation_mode": "output_half_pixel"}),
        (16, {"output_height": 2, "output_width": 2, "spatial_scale": 0.25, "coordinate_transformation_mode": "half_pixel"}),
    ],
)
def test_roi_align(opset, attrs):
    x = rand(2, 3, 8, 9)
    rois = np.array([[0, 0, 7, 7], [1.5, 2.2, 5.1, 6.9], [-1, -2, 3, 4], [6, 5, 12, 11]], np.float32)
    batch = np.array([0, 1, 1, 0], np.int64)
    node = helper.make_node("RoiAlign", ["x", "r", "i"], ["y"], **attrs)
    feeds = {"x": x, "r": rois, "i": batch}
    assert (check(model(node, feeds, opset), feeds)) == ["ROIAlign"]


def test_roi_align_refuses_an_unknown_transform():
    node = helper.make_node("RoiAlign", ["x", "r", "i"], ["y"], coordinate_transformation_mode="corner", name="ra")
    feeds = {"x": rand(1, 1, 4, 4), "r": rand(1, 4), "i": np.zeros(1, np.int64)}
    refused(model(node, feeds, 16), "node 'ra' (RoiAlign)", "'corner' is not half_pixel or output_half_pixel")


# --------------------------------------------------------------- Reshape allowzero


@pytest.mark.parametrize(("shape", "target"), [((0, 3, 4), [3, 4, 0]), ((2, 0), [0, 5])])
def test_reshape_allowzero_keeps_a_zero(shape, target):
    x = np.zeros(shape, np.float32)
    node = helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=1)
    assert check(model(node, {"x": x}, 14, {"s": np.array(target, np.int64)}), {"x": x}) == ["Reshape"]


def test_reshape_allowzero_refuses_a_zero_beside_minus_one():
    node = helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=1, name="rz")
    refused(model(node, {"x": np.zeros((0, 3), np.float32)}, 14, {"s": np.array([0, -1], np.int64)}), "both a 0 and a -1")
