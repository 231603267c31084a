"""Indexing and signal ops end to end: GatherND, ScatterND, ScatterElements, Scatter,
TensorScatter, ReverseSequence, DFT, STFT, the windows and MelWeightMatrix.

Each case is a one-node ONNX model run by onnxruntime, by the reference interpreter
(after import) and compiled and simulated (precision_mode must_keep_origin_dtype, so
the model's dtypes are kept), compared within the dtype's tolerance."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.core.errors import ModelError
from ge.testing.refusals import refused as refusal

SOC = "Ascend910B1"
TOLERANCE = {np.dtype(np.float32): (1e-5, 1e-5), np.dtype(np.float16): (1e-3, 1e-3), np.dtype(np.float64): (1e-9, 1e-9)}


def node_model(
    op_type: str, inputs: Sequence[tuple[str, np.ndarray | None]], opset: int, constants: Sequence[str] = (),
    **attrs: object,
) -> onnx.ModelProto:
    """One node: `inputs` as (name, value) in order, a None value an absent input; the
    names in `constants` are initializers, the others graph inputs. The output has the
    first input's element type, or the node's `output_datatype`."""
    names = [name if value is not None else "" for name, value in inputs]
    node = helper.make_node(op_type, names, ["y"], **attrs)
    feeds = [(n, v) for n, v in inputs if v is not None]
    out = attrs.get("output_datatype", helper.np_dtype_to_tensor_dtype(inputs[0][1].dtype))
    graph = helper.make_graph(
        [node], op_type.lower(),
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in feeds if n not in constants],
        [helper.make_tensor_value_info("y", out, None)],
        [numpy_helper.from_array(v, n) for n, v in feeds if n in constants],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def feeds_of(model: onnx.ModelProto, inputs: Sequence[tuple[str, np.ndarray | None]]) -> dict[str, np.ndarray]:
    names = {i.name for i in model.graph.input}
    return {n: v for n, v in inputs if v is not None and n in names}


def onnxruntime_outputs(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, dict(feeds))


def ours(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The outputs of the reference interpreter and of the compiled, simulated model."""
    module, _ = ge.load_onnx(model)
    names = [o.name for o in model.graph.output]
    reference = ge.reference.run(module, feeds)
    compiled = ge.compile(module, {"soc_version": SOC, "precision_mode": "must_keep_origin_dtype"})
    with ge.Session() as session:
        simulated = session.run(compiled, feeds).outputs
    return [reference[n] for n in names], [simulated[n] for n in names]


def assert_matches(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    if want.dtype.kind == "f":
        rtol, atol = TOLERANCE[want.dtype]
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * max(1.0, float(np.abs(want).max(initial=0))))
    else:
        np.testing.assert_array_equal(got, want)


def check(op_type: str, inputs: Sequence[tuple[str, np.ndarray | None]], opset: int, constants: Sequence[str] = (),
          want: Sequence[np.ndarray] | None = None, **attrs: object) -> None:
    """Both routes agree with onnxruntime (or with `want` where onnxruntime differs from ONNX)."""
    model = node_model(op_type, inputs, opset, constants, **attrs)
    feeds = feeds_of(model, inputs)
    expected = onnxruntime_outputs(model, feeds) if want is None else list(want)
    for route in ours(model, feeds):
        for got, value in zip(route, expected):
            assert_matches(got, value)


def refused(op_type: str, inputs: Sequence[tuple[str, np.ndarray | None]], opset: int, constants: Sequence[str] = (),
            **attrs: object) -> str:
    return refusal(node_model(op_type, inputs, opset, constants, **attrs))


rng = np.random.default_rng(0)


def rand(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


# ------------------------------------------------------------------------ GatherND


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_gather_nd_matches_onnxruntime(opset: int, dtype: type) -> None:
    data = (rng.standard_normal((3, 4, 5)) * 10).astype(dtype)
    indices = np.array([[[0, 1], [2, -1]], [[1, 3], [-3, 0]]], np.int64)  # negative indices count from the end
    check("GatherND", [("data", data), ("indices", indices)], opset)
    check("GatherND", [("data", data), ("indices", indices[..., :1])], opset)  # slices of two dims


@pytest.mark.parametrize("batch_dims, indices_shape", [(1, (3, 2, 1)), (1, (3, 2)), (2, (3, 4, 1))])
def test_gather_nd_batch_dims_match_onnxruntime(batch_dims: int, indices_shape: tuple[int, ...]) -> None:
    data = rand(3, 4, 5)
    bound = data.shape[batch_dims]
    indices = rng.integers(-bound, bound, indices_shape).astype(np.int64)
    check("GatherND", [("data", data), ("indices", indices)], 13, batch_dims=batch_dims)


def test_gather_nd_refuses_an_index_deeper_than_the_data() -> None:
    message = refused("GatherND", [("data", rand(2, 3)), ("indices", np.zeros((1, 3), np.int64))], 13)
    assert "index depth 3 must be in [1, 2]" in message


def test_gather_nd_refuses_an_index_out_of_range() -> None:
    model = node_model("GatherND", [("data", rand(2, 3)), ("indices", np.array([[2, 0]], np.int64))], 13)
    module, _ = ge.load_onnx(model)
    with pytest.raises(ModelError, match="index 2 is out of range for a dimension of 2"):
        ge.reference.run(module, {"data": rand(2, 3), "indices": np.array([[2, 0]], np.int64)})


# ----------------------------------------------------------------------- ScatterND


@pytest.mark.parametrize("opset, reduction", [(11, None), (13, None), (16, "add"), (16, "mul"), (18, "max"), (18, "min")])
def test_scatter_nd_matches_onnxruntime(opset: int, reduction: str | None) -> None:
    data = rand(4, 3, 2)
    indices = np.array([[1], [3], [1]] if reduction else [[1], [-1]], np.int64)  # duplicates only under a reduction
    updates = rand(len(indices), 3, 2)
    attrs = {"reduction": reduction} if reduction else {}
    check("ScatterND", [("data", data), ("indices", indices), ("updates", updates)], opset, **attrs)
    elements = np.array([[0, 2, 1], [3, 0, 0]], np.int64)
    check("ScatterND", [("data", data), ("indices", elements), ("updates", rand(2))], opset, **attrs)


@pytest.mark.parametrize("dtype, reduction", [(np.int32, "add"), (np.int64, "max"), (np.float16, "none")])
def test_scatter_nd_integers_and_float16_match_onnxruntime(dtype: type, reduction: str) -> None:
    """onnxruntime 1.32 reduces no float16 ScatterND."""
    data = (rng.standard_normal((5, 4)) * 8).astype(dtype)
    indices = np.array([[4], [0]], np.int64)
    check("ScatterND", [("data", data), ("indices", indices), ("updates", data[:2] + 1)], 18, reduction=reduction)


def test_scatter_nd_refuses_a_reduction_its_version_lacks() -> None:
    inputs = [("data", rand(4)), ("indices", np.array([[1]], np.int64)), ("updates", rand(1))]
    message = refused("ScatterND", inputs, 16, reduction="max")
    assert "reduction 'max' is not one of none, add, mul (version 16)" in message


def test_scatter_nd_refuses_updates_of_the_wrong_shape() -> None:
    inputs = [("data", rand(4, 3)), ("indices", np.array([[1]], np.int64)), ("updates", rand(1, 2))]
    assert "updates have shape [1, 2], expected [1, 3]" in refused("ScatterND", inputs, 18)


# ----------------------------------------------------------------- ScatterElements


@pytest.mark.parametrize("opset, reduction", [(11, None), (13, None), (16, "add"), (16, "mul"), (18, "max"), (18, "min")])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements_matches_onnxruntime(opset: int, reduction: str | None, axis: int) -> None:
    data = rand(3, 4)
    shape = (2, 3)
    bound = data.shape[axis]
    indices = rng.integers(-bound, bound, shape).astype(np.int64)
    if reduction is None:  # distinct targets: ONNX leaves duplicates without a reduction undefined
        indices = np.broadcast_to(np.arange(shape[axis]).reshape((-1, 1) if axis == 0 else (1, -1)), shape).copy()
    attrs = {"axis": axis, **({"reduction": reduction} if reduction else {})}
    check("ScatterElements", [("data", data), ("indices", indices), ("updates", rand(*shape))], opset, **attrs)


def test_scatter_elements_int64_indices_as_int32_match_onnxruntime() -> None:
    data = rng.integers(-50, 50, (4, 4)).astype(np.int64)
    indices = np.array([[3, 2, 1, 0]], np.int32)
    check("ScatterElements", [("data", data), ("indices", indices), ("updates", data[:1] * 2)], 18, axis=0, reduction="mul")


def test_scatter_elements_refuses_indices_and_updates_of_different_shapes() -> None:
    inputs = [("data", rand(3, 3)), ("indices", np.zeros((2, 3), np.int64)), ("updates", rand(3, 3))]
    assert "indices [2, 3] and updates [3, 3] must have one shape" in refused("ScatterElements", inputs, 18)


# ------------------------------------------------------------------- TensorScatter


def tensor_scatter_want(cache: np.ndarray, update: np.ndarray, starts: np.ndarray, axis: int, circular: bool) -> np.ndarray:
    """The update written into a copy of the cache, position by position."""
    out = cache.copy()
    axis %= cache.ndim
    for b in range(cache.shape[0]):
        for s in range(update.shape[axis]):
            position = starts[b] + s
            if circular:
                position %= cache.shape[axis]
            target = [b] + [slice(None)] * (cache.ndim - 1)
            source = [b] + [slice(None)] * (cache.ndim - 1)
            target[axis], source[axis] = position, s
            out[tuple(target)] = update[tuple(source)]
    return out


@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("axis", [-2, 2])
def test_tensor_scatter_writes_the_update_at_each_batchs_index(mode: str, axis: int) -> None:
    """onnxruntime 1.32 has no TensorScatter kernel: the expected values come from a loop."""
    cache, update = rand(2, 3, 6, 4), rand(2, 3, 3, 4)
    starts = np.array([1, 5] if mode == "circular" else [0, 3], np.int64)
    want = tensor_scatter_want(cache, update, starts, axis, mode == "circular")
    inputs = [("past_cache", cache), ("update", update), ("write_indices", starts)]
    check("TensorScatter", inputs, 24, want=[want], mode=mode, axis=axis)
    check("TensorScatter", inputs[:2], 24, want=[tensor_scatter_want(cache, update, np.zeros(2, np.int64), axis, False)],
          mode=mode, axis=axis)


def test_tensor_scatter_refuses_an_update_longer_than_the_cache() -> None:
    inputs = [("past_cache", rand(1, 4, 2)), ("update", rand(1, 5, 2))]
    assert "does not fit past_cache [1, 4, 2] along axis 1" in refused("TensorScatter", inputs, 24, axis=1)


def test_tensor_scatter_linear_write_past_the_end_is_an_error() -> None:
    inputs = [("past_cache", rand(1, 4, 2)), ("update", rand(1, 2, 2)), ("write_indices", np.array([3], np.int64))]
    module, _ = ge.load_onnx(node_model("TensorScatter", inputs, 24, axis=1))
    with pytest.raises(ModelError, match="writing 2 entries from 3 overruns the cache of 4"):
        ge.reference.run(module, dict(inputs))


def test_tensor_scatter_refuses_an_unknown_mode() -> None:
    inputs = [("past_cache", rand(1, 4, 2)), ("update", rand(1, 1, 2))]
    assert "mode 'ring' is not linear or circular" in refused("TensorScatter", inputs, 24, mode="ring")


# ----------------------------------------------------------------- ReverseSequence


@pytest.mark.parametrize("batch_axis, time_axis", [(1, 0), (0, 1)])
@pytest.mark.parametrize("opset", [11, 21])
def test_reverse_sequence_matches_onnxruntime(batch_axis: int, time_axis: int, opset: int) -> None:
    x = rand(4, 3, 2) if time_axis == 0 else rand(3, 4, 2)
    lengths = np.array([4, 1, 3], np.int64)
    check("ReverseSequence", [("x", x), ("lengths", lengths)], opset, batch_axis=batch_axis, time_axis=time_axis)


def test_reverse_sequence_refuses_equal_axes() -> None:
    inputs = [("x", rand(3, 3)), ("lengths", np.array([1, 2, 3], np.int64))]
    assert "batch_dim and seq_dim are both 0" in refused("ReverseSequence", inputs, 11, batch_axis=0, time_axis=0)


# ---------------------------------------------------------------------------- DFT


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("inverse, onesided, complex_", [(0, 0, False), (0, 1, False), (0, 0, True), (1, 0, True)])
@pytest.mark.parametrize("length", [None, 6, 12])
def test_dft_matches_onnxruntime(opset: int, inverse: int, onesided: int, complex_: bool, length: int | None) -> None:
    x = rand(2, 8, 3, 2 if complex_ else 1)
    inputs: list[tuple[str, np.ndarray | None]] = [("x", x), ("dft_length", None if length is None else np.array(length, np.int64))]
    attrs = {"inverse": inverse, "onesided": onesided}
    if opset == 17:
        attrs["axis"] = 1
    else:
        inputs.append(("axis", np.array(1, np.int64)))
    check("DFT", inputs, opset, constants=("dft_length", "axis"), **attrs)


@pytest.mark.parametrize("axis", [0, -3])
def test_dft_along_the_batch_axis_matches_onnxruntime(axis: int) -> None:
    """ONNX accepts axis 0 (and -rank) too: the transform runs along the first dim."""
    inputs = [("x", rand(6, 4, 2)), ("dft_length", None), ("axis", np.array(axis, np.int64))]
    check("DFT", inputs, 20, constants=("axis",))


def test_dft_along_the_last_signal_dim_by_default_matches_numpy() -> None:
    """DFT-20's default axis is -2, the last signal dim; with inverse and onesided it is
    the inverse real FFT (ONNX's reference; onnxruntime 1.32 refuses it)."""
    x = rand(2, 3, 5, 2)
    signal = x[..., 0] + 1j * x[..., 1]
    forward = np.fft.fft(signal, axis=-1)
    check("DFT", [("x", x)], 20, want=[np.stack([forward.real, forward.imag], -1).astype(np.float32)])
    check("DFT", [("x", x)], 20, want=[np.fft.irfft(signal, 8, axis=-1)[..., None].astype(np.float32)], inverse=1, onesided=1)


def test_dft_refuses_the_complex_dim_as_axis() -> None:
    inputs = [("x", rand(1, 4, 2)), ("dft_length", None), ("axis", np.array(-1, np.int64))]
    assert "axis -1 of the rank-3 input is not in [-3, -2] or [0, 1]" in refused("DFT", inputs, 20, constants=("axis",))


def test_dft_refuses_a_computed_length() -> None:
    assert "must be a constant" in refused("DFT", [("x", rand(1, 4, 1)), ("dft_length", np.array(4, np.int64))], 20)


# --------------------------------------------------------------------------- STFT


@pytest.mark.parametrize("onesided", [0, 1, None])
@pytest.mark.parametrize("window", [False, True])
def test_stft_matches_onnxruntime(onesided: int | None, window: bool) -> None:
    """Without `onesided` it is 1, the schema's default (ONNX's shape inference reads 0,
    which the importer's cross-check must not hold against the import)."""
    signal = rand(2, 64, 1)
    hann = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(16) / 16)).astype(np.float32)
    inputs = [("signal", signal), ("frame_step", np.array(6, np.int64)), ("window", hann if window else None),
              ("frame_length", np.array(16, np.int64))]
    attrs = {} if onesided is None else {"onesided": onesided}
    check("STFT", inputs, 17, constants=("frame_step", "window", "frame_length"), **attrs)


def test_stft_refuses_a_window_of_another_length() -> None:
    inputs = [("signal", rand(1, 32, 1)), ("frame_step", np.array(4, np.int64)), ("window", rand(8)),
              ("frame_length", np.array(16, np.int64))]
    assert "window has shape [8], expected [16]" in refused("STFT", inputs, 17, constants=("frame_step", "window", "frame_length"))


# ----------------------------------------------------- windows and MelWeightMatrix


@pytest.mark.parametrize("op_type", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("output_datatype", [TensorProto.FLOAT, TensorProto.DOUBLE])
def test_windows_fold_to_onnxruntimes_values(op_type: str, periodic: int, output_datatype: int) -> None:
    """onnxruntime computes every window in float32: a float64 one is compared at that precision."""
    model = node_model(op_type, [("size", np.array(10, np.int64))], 17, constants=("size",), periodic=periodic,
                       output_datatype=output_datatype)
    module, _ = ge.load_onnx(model)
    got, want = ge.reference.run(module, {})["y"], onnxruntime_outputs(model, {})[0]
    assert got.dtype == want.dtype
    assert_matches(got.astype(np.float32), want.astype(np.float32))


def test_window_refuses_a_negative_size() -> None:
    assert "must be a non-negative integer, got -1" in refused("HannWindow", [("size", np.array(-1, np.int64))], 17, ("size",))


@pytest.mark.parametrize("bins, dft_length, rate, low, high", [(8, 16, 8192, 0.0, 4096.0), (5, 64, 16000, 300.0, 6000.0)])
def test_mel_weight_matrix_folds_to_onnxruntimes_values(bins: int, dft_length: int, rate: int, low: float, high: float) -> None:
    names = ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")
    values = [np.array(bins, np.int64), np.array(dft_length, np.int64), np.array(rate, np.int64), np.array(low, np.float32),
              np.array(high, np.float32)]
    model = node_model("MelWeightMatrix", list(zip(names, values)), 17, constants=names, output_datatype=TensorProto.FLOAT)
    module, _ = ge.load_onnx(model)
    got = ge.reference.run(module, {})["y"]
    assert got.shape == (dft_length // 2 + 1, bins)
    assert_matches(got, onnxruntime_outputs(model, {})[0])


# ------------------------------------------------------------------- torch exports


def torch_model(module: object, args: tuple, dynamo: bool) -> onnx.ModelProto:
    import io

    import torch

    names = [f"in{i}" for i in range(len(args))]
    if dynamo:
        return torch.onnx.export(module, args, input_names=names, output_names=["y"], dynamo=True, verbose=False).model_proto
    buffer = io.BytesIO()
    torch.onnx.export(module, args, buffer, input_names=names, output_names=["y"], opset_version=17, dynamo=False)
    return onnx.load_from_string(buffer.getvalue())


def check_torch(module: object, args: tuple, dynamo: bool, expect: str) -> None:
    """The export holds `expect`, and compiled and simulated it gives onnxruntime's answer."""
    model = torch_model(module, args, dynamo)
    assert expect in {n.op_type for n in model.graph.node}
    feeds = {f"in{i}": a.numpy() for i, a in enumerate(args)}
    want = onnxruntime_outputs(model, feeds)
    for route in ours(model, feeds):
        for got, value in zip(route, want):
            assert_matches(got, value)


@pytest.mark.parametrize("dynamo, expect", [pytest.param(True, "GatherND", marks=pytest.mark.slow), (False, "Gather")])
def test_torch_advanced_indexing_matches_onnxruntime(dynamo: bool, expect: str) -> None:
    """x[i, j] with index tensors (no boolean mask): torch's dynamo exporter makes it a
    GatherND; the TorchScript one (dynamo=False) makes it flat-index arithmetic and a Gather."""
    import torch

    class Index(torch.nn.Module):
        def forward(self, x: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
            return x[i, j] * 2

    args = (torch.randn(4, 5, 3), torch.tensor([0, 3, 1, -1]), torch.tensor([4, 0, 2, 1]))
    check_torch(Index(), args, dynamo, expect)


def test_torch_index_put_and_scatter_match_onnxruntime() -> None:
    """index_put_ with accumulate exports a ScatterND (reduction add), scatter a ScatterElements."""
    import torch

    class Put(torch.nn.Module):
        def forward(self, x: torch.Tensor, rows: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
            y = x.clone()
            y.index_put_((rows,), values, accumulate=True)
            return y.scatter(1, torch.tensor([[0, 2], [1, 0], [2, 2], [0, 1]]), 5.0)

    args = (torch.randn(4, 3), torch.tensor([1, 0, 1]), torch.randn(3, 3))
    check_torch(Put(), args, False, "ScatterND")
    model = torch_model(Put(), args, False)
    assert "ScatterElements" in {n.op_type for n in model.graph.node}
