"""Recurrent layers: ONNX LSTM, GRU and RNN as DynamicRNN, DynamicGRUV2 and RNN.

Hand-built graphs of several attribute combinations and opsets (layout arrived in
opset 14, bfloat16 in 22) through the reference interpreter and through compile +
simulate, against onnxruntime; the refusals; torch exports (two bidirectional
batch-first layers with initial states, and a tanh RNN) at the default precision
and must_keep_origin_dtype on the Ascend910B1; and the time loop in the kernel's
program and in its cycles.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, StringAttr, f32

import ge
from dialects import ascend_graph as ag
from dialects.shapes import ShapeError
from ge.session import Session

SOC = "Ascend910B1"
EXACT = {"soc_version": SOC, "precision_mode": "must_keep_origin_dtype"}
T, B, I, H = 4, 3, 5, 6
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _model(
    op_type: str, opset: int, attrs: dict[str, object], *, bias: bool = True, lengths: list[int] | None = None,
    initial: bool = False, peepholes: bool = False, steps: int = T, seed: int = 0,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One recurrent node: weights as initializers, X, sequence_lens and the initial
    states as graph inputs; the model and its feeds."""
    rng = np.random.default_rng(seed)
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    gates = GATES[op_type]
    layout = attrs.get("layout", 0)
    x_shape = [B, steps, I] if layout else [steps, B, I]
    state_shape = [B, dirs, H] if layout else [dirs, B, H]
    inits = [
        helper.make_tensor("W", TensorProto.FLOAT, [dirs, gates * H, I], rng.uniform(-0.5, 0.5, dirs * gates * H * I)),
        helper.make_tensor("R", TensorProto.FLOAT, [dirs, gates * H, H], rng.uniform(-0.5, 0.5, dirs * gates * H * H)),
    ]
    names = ["X", "W", "R"]
    feeds = {"X": rng.standard_normal(x_shape).astype(np.float32)}
    graph_inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)]
    if bias:
        inits.append(helper.make_tensor("B", TensorProto.FLOAT, [dirs, 2 * gates * H], rng.uniform(-0.5, 0.5, dirs * 2 * gates * H)))
    names.append("B" if bias else "")
    if lengths is not None:
        feeds["sequence_lens"] = np.array(lengths, np.int32)
        graph_inputs.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [B]))
    names.append("sequence_lens" if lengths is not None else "")
    states = ["initial_h", "initial_c"] if op_type == "LSTM" else ["initial_h"]
    for state in states:
        if initial:
            feeds[state] = rng.standard_normal(state_shape).astype(np.float32)
            graph_inputs.append(helper.make_tensor_value_info(state, TensorProto.FLOAT, state_shape))
        names.append(state if initial else "")
    if peepholes:
        inits.append(helper.make_tensor("P", TensorProto.FLOAT, [dirs, 3 * H], rng.uniform(-0.5, 0.5, dirs * 3 * H)))
        names.append("P")
    while names[-1] == "":
        names.pop()
    outputs = ["Y", "Y_h", "Y_c"][: 3 if op_type == "LSTM" else 2]
    node = helper.make_node(op_type, names, outputs, name="layer", hidden_size=H, **attrs)
    y_shape = [B, steps, dirs, H] if layout else [steps, dirs, B, H]
    outs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, y_shape)]
    outs += [helper.make_tensor_value_info(o, TensorProto.FLOAT, state_shape) for o in outputs[1:]]
    graph = helper.make_graph([node], "recurrent", graph_inputs, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, feeds


def _onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    return dict(zip(names, session.run(names, feeds)))


def _expected(op_type: str, opset: int, attrs: dict[str, object], options: dict[str, object], feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime's outputs. It refuses layout = 1, so a batch-major case runs as its
    time-major twin (the same weights) on transposed inputs, its outputs transposed back."""
    if not attrs.get("layout"):
        return _onnxruntime(_model(op_type, opset, attrs, **options)[0], feeds)
    twin, _ = _model(op_type, opset, {k: v for k, v in attrs.items() if k != "layout"}, **options)
    moved = {k: v.transpose(1, 0, 2) if v.ndim == 3 else v for k, v in feeds.items()}
    got = _onnxruntime(twin, moved)
    return {k: v.transpose(2, 0, 1, 3) if v.ndim == 4 else v.transpose(1, 0, 2) for k, v in got.items()}


def _close(got: dict[str, np.ndarray], want: dict[str, np.ndarray], tolerance: float) -> None:
    assert got.keys() == want.keys()
    for name, value in want.items():
        assert got[name].shape == value.shape, name
        np.testing.assert_allclose(got[name].astype(np.float64), value, rtol=tolerance, atol=tolerance, err_msg=name)


CASES = {
    "lstm_forward_11": ("LSTM", 11, {}, {}),
    "lstm_reverse_layout_14": ("LSTM", 14, {"direction": "reverse", "layout": 1}, {"initial": True, "lengths": [4, 2, 3]}),
    "lstm_bidirectional_peepholes_clip_22": (
        "LSTM", 22, {"direction": "bidirectional", "clip": 1.5}, {"initial": True, "peepholes": True, "lengths": [0, 4, 3]},
    ),
    "lstm_input_forget_activations_14": (
        "LSTM", 14,
        {"input_forget": 1, "activations": ["HardSigmoid", "LeakyRelu", "Softsign"], "activation_alpha": [0.3, 0.05], "activation_beta": [0.4]},
        {"bias": False},
    ),
    "gru_forward_no_bias_11": ("GRU", 11, {}, {"bias": False}),
    "gru_bidirectional_linear_before_reset_layout_14": (
        "GRU", 14, {"direction": "bidirectional", "linear_before_reset": 1, "layout": 1}, {"initial": True, "lengths": [3, 0, 1]},
    ),
    "gru_reverse_clip_activations_22": (
        "GRU", 22, {"direction": "reverse", "clip": 0.8, "activations": ["Sigmoid", "Relu"]}, {"initial": True, "lengths": [1, 1, 3]},
    ),
    "rnn_forward_11": ("RNN", 11, {}, {}),
    "rnn_bidirectional_layout_14": (
        "RNN", 14, {"direction": "bidirectional", "layout": 1, "activations": ["Relu", "Tanh"]}, {"initial": True, "lengths": [2, 4, 4]},
    ),
    "rnn_reverse_affine_22": (
        "RNN", 22, {"direction": "reverse", "activations": ["Affine"], "activation_alpha": [0.7], "activation_beta": [0.1]}, {},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_reference_matches_onnxruntime(case: str) -> None:
    op_type, opset, attrs, options = CASES[case]
    model, feeds = _model(op_type, opset, attrs, **options)
    module, _ = ge.load_onnx(model)
    ops = [op for op in module.walk() if isinstance(op, ag.RecurrentOp)]
    assert len(ops) == (2 if attrs.get("direction") == "bidirectional" else 1)
    _close(ge.reference.run(module, feeds), _expected(op_type, opset, attrs, options, feeds), 1e-5)


@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_matches_onnxruntime(case: str) -> None:
    op_type, opset, attrs, options = CASES[case]
    model, feeds = _model(op_type, opset, attrs, **options)
    module, _ = ge.load_onnx(model)
    _close(Session().run(ge.compile(module, EXACT), feeds).outputs, _expected(op_type, opset, attrs, options, feeds), 1e-5)


@pytest.mark.parametrize(
    ("op_type", "attrs", "message"),
    [
        ("LSTM", {"direction": "sideways"}, "direction 'sideways' is not forward, reverse or bidirectional"),
        ("GRU", {"activations": ["Sigmoid", "Gelu"]}, "activation 'Gelu' is unsupported; supported: Relu, Tanh, Sigmoid"),
        ("RNN", {"activations": ["Tanh", "Tanh"]}, "activations ['Tanh', 'Tanh'] need 1 per direction (1)"),
        ("RNN", {"layout": 2}, "layout 2 is not 0 (time major) or 1 (batch major)"),
    ],
)
def test_unsupported_attributes_are_refused(op_type: str, attrs: dict[str, object], message: str) -> None:
    model, _ = _model(op_type, 14, {})
    node = model.graph.node[0]
    del node.attribute[:]
    node.attribute.extend([helper.make_attribute("hidden_size", H)] + [helper.make_attribute(k, v) for k, v in attrs.items()])
    with pytest.raises(ge.ModelError, match=re.escape(message)):
        ge.load_onnx(model)


def test_hidden_size_must_match_the_weights() -> None:
    model, _ = _model("GRU", 14, {})
    model.graph.node[0].attribute[0].i = H + 1
    with pytest.raises(ge.ModelError, match=re.escape(f"hidden_size {H + 1} differs from R's [1, {3 * H}, {H}]")):
        ge.load_onnx(model)


# ------------------------------------------------------------------- torch exports


def _torch_model(kind: str, tmp_path: Path, steps: int = T) -> tuple[Path, dict[str, np.ndarray]]:
    """nn.LSTM / nn.GRU of two bidirectional batch-first layers with initial states,
    or a one-layer tanh nn.RNN, exported with the TorchScript exporter; its feeds."""
    torch.manual_seed(0)
    if kind == "rnn":
        module = torch.nn.RNN(I, H, nonlinearity="tanh")
        feeds = {"x": torch.randn(steps, B, I)}
        args: tuple = (feeds["x"],)
        outputs = ["y", "h"]
    else:
        layer = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
        module = layer(I, H, num_layers=2, bidirectional=True, batch_first=True)
        feeds = {"x": torch.randn(B, steps, I), "h0": torch.randn(4, B, H)}
        if kind == "lstm":
            feeds["c0"] = torch.randn(4, B, H)
        args = (feeds["x"], (feeds["h0"], feeds["c0"]) if kind == "lstm" else feeds["h0"])
        outputs = ["y", "h", "c"] if kind == "lstm" else ["y", "h"]
    path = tmp_path / f"{kind}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer warnings
        torch.onnx.export(module.eval(), args, str(path), input_names=list(feeds), output_names=outputs, dynamo=False, opset_version=17)
    return path, {name: value.numpy() for name, value in feeds.items()}


def _ort_file(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return _onnxruntime(onnx.load(str(path)), feeds)


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn"])
@pytest.mark.parametrize(("precision", "tolerance"), [(None, 2e-3), ("must_keep_origin_dtype", 1e-5)])
def test_torch_exports_compile_and_simulate(kind: str, precision: str | None, tolerance: float, tmp_path: Path) -> None:
    """The default precision (force_fp16) computes the layers in float16: h is
    rounded to float16 every step, so the error stays at float16's few ulps."""
    path, feeds = _torch_model(kind, tmp_path)
    options = {"soc_version": SOC} | ({"precision_mode": precision} if precision else {})
    model = ge.compile(path, options)
    ops = re.findall(r"op_types = \[\"(DynamicRNN|DynamicGRUV2|RNN)\"\]", model.kernels)
    assert ops, "no recurrent kernel"
    _close(Session().run(model, feeds).outputs, _ort_file(path, feeds), tolerance)


def _recurrent_cycles(path: Path, feeds: dict[str, np.ndarray]) -> float:
    result = Session().run(ge.compile(path, {"soc_version": SOC}), feeds)
    rows = [row for row in result.profile.rows() if row.record.op_type == "RNN"]
    assert len(rows) == 1
    return rows[0].block_cycles


def test_cycles_grow_linearly_with_the_sequence(tmp_path: Path) -> None:
    """Every step waits for the one before (h_{t-1} @ R, then the gates, then sync_all):
    T steps cost T times one step, plus the input projection and the prologue."""
    cycles = {}
    for steps in (8, 16, 32):
        folder = tmp_path / str(steps)
        folder.mkdir()
        cycles[steps] = _recurrent_cycles(*_torch_model("rnn", folder, steps))
    per_step = (cycles[32] - cycles[16]) / 16
    assert per_step > 0
    assert (cycles[16] - cycles[8]) / 8 == pytest.approx(per_step, rel=0.02)
    assert cycles[32] / cycles[16] == pytest.approx(2.0, rel=0.1)


def test_the_program_loops_over_the_steps(tmp_path: Path) -> None:
    """The kernel's program holds a loop of T trips with the step's mmad and the gates'
    vector instructions, ending in sync_all."""
    path, _ = _torch_model("rnn", tmp_path, steps=7)
    text = ge.compile(path, {"soc_version": SOC}).kernels
    loop = text[text.index("ascend_kernel.loop 7 times"):]
    step = loop[: loop.index("ascend_kernel.sync_all")]
    assert "ascend_kernel.mmad" in step
    assert re.search(r'ascend_kernel\.vec "VEXP"', step)


def _props(activations: list[str], **extra: object) -> dict:
    zeros = DenseArrayBase.from_list(f32, [0.0] * len(activations))
    return {
        "direction": StringAttr("UNIDIRECTIONAL"), "activations": ArrayAttr([StringAttr(a) for a in activations]),
        "activation_alpha": zeros, "activation_beta": zeros, **extra,
    }


@pytest.mark.parametrize(
    ("cls", "shapes_", "props", "message"),
    [
        (ag.DynamicRNNOp, [(5, 3, 8), (11, 16)], {"input_forget": ag.bool_attr(False)}, "w has shape [11, 16], expected [12, 16]"),
        (ag.DynamicRNNOp, [(5, 3, 8), (12, 16), None, None, None, None, (4,)], {"input_forget": ag.bool_attr(False)},
         "the peepholes are wci, wcf and wco together, got wci"),
        (ag.DynamicGRUV2Op, [(5, 3, 8), (8, 12), (4, 12), None, None, None, (1, 2, 4)], {"reset_after": ag.bool_attr(True)},
         "init_h has shape [1, 2, 4], expected [1, 3, 4]"),
        (ag.RNNOp, [(5, 3), (12, 4)], {}, "x [5, 3] must be 3-D [T, B, I] (time major)"),
    ],
)
def test_shape_rules_name_the_operand(cls: type, shapes_: list, props: dict, message: str) -> None:
    activations = {ag.DynamicRNNOp: ["Sigmoid", "Tanh", "Tanh"], ag.DynamicGRUV2Op: ["Sigmoid", "Tanh"], ag.RNNOp: ["Tanh"]}[cls]
    values = [None if s is None else ag.DataOp(i, ag.tensor(f32, s), f"in{i}").out for i, s in enumerate(shapes_)]
    with pytest.raises(ShapeError, match=re.escape(message)):
        cls(values, _props(activations, **props), "layer")


def test_the_dialect_refuses_an_activation_it_has_no_kernel_for() -> None:
    x, w = ag.DataOp(0, ag.tensor(f32, (5, 3, 8)), "x").out, ag.DataOp(1, ag.tensor(f32, (12, 4)), "w").out
    with pytest.raises(ShapeError, match="activation 'Gelu' is not one of Relu, Tanh"):
        ag.RNNOp([x, w], _props(["Gelu"]), "layer")


@pytest.mark.parametrize(("hidden", "soc", "resident"), [(H, SOC, 1), (1024, "Ascend310", 0)])
def test_r_stays_in_l1_when_it_fits(hidden: int, soc: str, resident: int, tmp_path: Path) -> None:
    """A block's R (H x its gates' columns) stays in L1 through the steps where it fits;
    a 1024-wide RNN on the Ascend310's two cores (512 columns a block, 1 MB of float16)
    loads it again every step. Both compute the layer."""
    torch.manual_seed(0)
    x = torch.randn(3, B, I)
    path = tmp_path / "rnn.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(torch.nn.RNN(I, hidden).eval(), (x,), str(path), input_names=["x"], output_names=["y", "h"], dynamo=False)
    model = ge.compile(path, {"soc_version": soc})
    assert re.findall(r"r_resident = (\d)", model.kernels) == [str(resident)]
    feeds = {"x": x.numpy()}
    _close(Session().run(model, feeds).outputs, _ort_file(path, feeds), 2e-3)
