"""The loss and normalisation ops against onnxruntime: NegativeLogLikelihoodLoss,
SoftmaxCrossEntropyLoss, RMSNormalization, LpNormalization, GroupNormalization,
MeanVarianceNormalization and LRN.

Each hand-built graph runs imported through the reference interpreter and compiled
(Ascend910B1) through the simulator, and both must give onnxruntime's outputs; the
refusals name what is allowed. An If on a condition constant at import is the branch
it takes (torch's LocalResponseNorm export has one); torch's GroupNorm export
compiles and runs, and so does its LocalResponseNorm export where 3-D AveragePool
(AvgPool3D) is imported.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import ge
from dialects import ascend_graph as ag
from ge.core import opinfo
from ge.core.errors import ModelError
from ge.session import Session

SOC = "Ascend910B1"
RNG = np.random.default_rng(20261126)
_ONNX_TYPES = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.int64): TensorProto.INT64,
}


def model(op_type: str, feeds: dict[str, np.ndarray], outputs: list[str], opset: int, **attrs) -> onnx.ModelProto:
    """One node of `op_type` reading `feeds` (graph inputs, in order) and writing `outputs`
    of the first input's element type, their shapes left to inference."""
    inputs = [helper.make_tensor_value_info(name, _ONNX_TYPES[a.dtype], a.shape) for name, a in feeds.items()]
    node = helper.make_node(op_type, list(feeds), outputs, name=op_type.lower(), **attrs)
    float_type = _ONNX_TYPES[next(iter(feeds.values())).dtype]
    outs = [helper.make_tensor_value_info(name, float_type, None) for name in outputs]
    graph = helper.make_graph([node], "g", inputs, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def onnxruntime(proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def check(
    proto: onnx.ModelProto, feeds: dict[str, np.ndarray], rtol: float = 1e-5, atol: float = 1e-6, **options
) -> None:
    """Reference and compiled+simulated outputs equal onnxruntime's within the tolerance."""
    want = onnxruntime(proto, feeds)
    module = ge.load_onnx(proto)[0]
    referenced = ge.reference.run(module, feeds)
    settings = {"soc_version": SOC, "precision_mode": "must_keep_origin_dtype"} | options
    compiled = Session().run(ge.compile(module, settings), feeds).outputs
    for route, got in (("reference", referenced), ("compiled", compiled)):
        assert sorted(got) == sorted(want), route
        for name, value in want.items():
            assert got[name].dtype == value.dtype and got[name].shape == value.shape, (route, name)
            np.testing.assert_allclose(
                got[name].astype(np.float64), value.astype(np.float64), rtol=rtol, atol=atol, err_msg=f"{route} {name}"
            )


def scores(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def targets(shape: tuple[int, ...], classes: int, ignore: int | None = None) -> np.ndarray:
    """Class indices, a quarter of them `ignore` when given."""
    t = RNG.integers(0, classes, shape).astype(np.int64)
    if ignore is not None:
        t[RNG.random(shape) < 0.25] = ignore
    return t


# ------------------------------------------------------------------------ losses

LOSS_CASES = [
    # (input shape, reduction, weighted, ignore_index)
    ((4, 5), "none", False, None),
    ((4, 5), "mean", True, None),
    ((3, 5, 2), "sum", False, 1),
    ((3, 5, 2), "mean", True, -1),
    ((2, 4, 3, 2), "mean", False, 2),
    ((2, 4, 3, 2), "none", True, -3),
    ((2, 3, 2, 2, 2), "sum", True, 7),
]


def _loss_feeds(
    shape: tuple[int, ...], weighted: bool, ignore: int | None, dtype: type = np.float32
) -> dict[str, np.ndarray]:
    feeds = {"x": scores(*shape, dtype=dtype), "t": targets(shape[:1] + shape[2:], shape[1], ignore)}
    if weighted:
        feeds["w"] = RNG.uniform(0.5, 2.0, shape[1]).astype(dtype)
    return feeds


def _loss_attrs(reduction: str, ignore: int | None) -> dict:
    return {"reduction": reduction} | ({} if ignore is None else {"ignore_index": ignore})


@pytest.mark.parametrize("opset", [13, 22])
@pytest.mark.parametrize(("shape", "reduction", "weighted", "ignore"), LOSS_CASES)
def test_nll_loss(shape, reduction, weighted, ignore, opset) -> None:
    feeds = _loss_feeds(shape, weighted, ignore)
    feeds["x"] = np.log(np.abs(feeds["x"]) + 0.1)  # log-probability-like scores
    proto = model("NegativeLogLikelihoodLoss", feeds, ["loss"], opset, **_loss_attrs(reduction, ignore))
    check(proto, feeds)


@pytest.mark.parametrize("opset", [12, 13])
@pytest.mark.parametrize(("shape", "reduction", "weighted", "ignore"), LOSS_CASES)
def test_softmax_cross_entropy_loss(shape, reduction, weighted, ignore, opset) -> None:
    feeds = _loss_feeds(shape, weighted, ignore)
    proto = model("SoftmaxCrossEntropyLoss", feeds, ["loss", "log_prob"], opset, **_loss_attrs(reduction, ignore))
    check(proto, feeds)


def test_softmax_cross_entropy_loss_without_log_prob_output() -> None:
    feeds = _loss_feeds((3, 4, 2), True, 0)
    proto = model("SoftmaxCrossEntropyLoss", feeds, ["loss"], 13, **_loss_attrs("mean", 0))
    check(proto, feeds)


def test_float16_loss_within_float16_tolerance() -> None:
    feeds = _loss_feeds((4, 6, 3), True, 1, np.float16)
    proto = model("SoftmaxCrossEntropyLoss", feeds, ["loss", "log_prob"], 13, **_loss_attrs("mean", 1))
    check(proto, feeds, rtol=2e-3, atol=2e-3)


def test_mean_loss_divides_by_the_weights_taken() -> None:
    """Every target but one ignored: the mean is that one's loss, not a share of the count."""
    feeds = {"x": scores(4, 3), "t": np.array([2, 0, 0, 0], np.int64), "w": np.array([1.0, 2.0, 4.0], np.float32)}
    proto = model("NegativeLogLikelihoodLoss", feeds, ["loss"], 13, reduction="mean", ignore_index=0)
    got = ge.reference.run(ge.load_onnx(proto)[0], feeds)["loss"]
    np.testing.assert_allclose(got, -feeds["x"][0, 2], rtol=1e-6)


def test_loss_refusals() -> None:
    feeds = _loss_feeds((3, 4), False, None)
    with pytest.raises(ModelError, match="reduction 'max' is not none, sum or mean"):
        ge.load_onnx(model("NegativeLogLikelihoodLoss", feeds, ["loss"], 13, reduction="max"))
    feeds["t"] = np.array([0, 4, 1], np.int64)
    module = ge.load_onnx(model("SoftmaxCrossEntropyLoss", feeds, ["loss"], 13, reduction="sum"))[0]
    with pytest.raises(ModelError, match=r"target 4 is outside the classes 0\.\.3"):
        ge.reference.run(module, feeds)


# ---------------------------------------------------------------- normalisations


@pytest.mark.parametrize(
    ("shape", "axis", "scale_rank"), [((3, 4), -1, 1), ((2, 3, 5), 1, 2), ((2, 3, 4, 5), 0, 4), ((2, 3, 4, 5), -2, 1)]
)
def test_rms_normalization(shape, axis, scale_rank) -> None:
    feeds = {"x": scores(*shape), "scale": scores(*shape[len(shape) - scale_rank :])}
    check(model("RMSNormalization", feeds, ["y"], 23, axis=axis, epsilon=1e-3), feeds)


def test_rms_normalization_float16() -> None:
    feeds = {"x": scores(4, 16, dtype=np.float16), "scale": scores(16, dtype=np.float16)}
    check(model("RMSNormalization", feeds, ["y"], 23), feeds, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("opset", [13, 22])
@pytest.mark.parametrize(("p", "axis"), [(1, -1), (2, -1), (2, 0), (1, 1)])
def test_lp_normalization(p, axis, opset) -> None:
    feeds = {"x": scores(3, 4, 5)}
    check(model("LpNormalization", feeds, ["y"], opset, p=p, axis=axis), feeds)


def test_lp_normalization_keeps_a_zero_vector_zero() -> None:
    x = scores(3, 4)
    x[1] = 0
    check(model("LpNormalization", {"x": x}, ["y"], 13, p=2, axis=-1), {"x": x})


@pytest.mark.parametrize(
    ("shape", "groups"), [((2, 6, 3, 4), 2), ((2, 6, 3, 4), 6), ((3, 4, 5), 1), ((2, 6, 2, 2, 2), 3)]
)
def test_group_normalization(shape, groups) -> None:
    feeds = {"x": scores(*shape), "scale": scores(shape[1]), "bias": scores(shape[1])}
    check(model("GroupNormalization", feeds, ["y"], 21, num_groups=groups, epsilon=1e-4), feeds)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axes", [None, [1], [0, 1, 2, 3], [2, 3]])
def test_mean_variance_normalization(axes, opset) -> None:
    feeds = {"x": scores(2, 3, 4, 5)}
    attrs = {} if axes is None else {"axes": axes}
    check(model("MeanVarianceNormalization", feeds, ["y"], opset, **attrs), feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize(
    ("size", "alpha", "beta", "bias"), [(3, 1e-4, 0.75, 1.0), (5, 0.5, 0.5, 2.0), (1, 0.1, 1.0, 1.0)]
)
def test_lrn(size, alpha, beta, bias, opset) -> None:
    feeds = {"x": scores(2, 6, 3, 3)}
    check(model("LRN", feeds, ["y"], opset, size=size, alpha=alpha, beta=beta, bias=bias), feeds)


def test_lrn_even_size_window_leans_forward() -> None:
    """onnxruntime takes odd sizes only; ONNX's window for size 4 is channels c-1 .. c+2,
    checked here element by element against the formula."""
    x = scores(1, 5, 2, 2)
    proto = model("LRN", {"x": x}, ["y"], 13, size=4, alpha=0.5, beta=0.5, bias=2.0)
    module = ge.load_onnx(proto)[0]
    want = np.empty_like(x)
    for c in range(5):
        window = x[:, max(0, c - 1) : min(5, c + 3)]
        want[:, c] = x[:, c] / (2.0 + 0.5 / 4 * np.sum(window * window, axis=1)) ** 0.5
    compiled = (
        Session()
        .run(ge.compile(module, {"soc_version": SOC, "precision_mode": "must_keep_origin_dtype"}), {"x": x})
        .outputs
    )
    for got in (ge.reference.run(module, {"x": x})["y"], compiled["y"]):
        np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("op_type", ["NLLLoss", "SoftmaxCrossEntropyLoss", "RmsNorm", "LpNorm", "GroupNorm", "MVNV2"])
def test_reductions_over_many_terms_are_on_the_block_list(op_type) -> None:
    assert opinfo.load(SOC).op(op_type).mix_list == "black"


def test_block_listed_norm_keeps_float32_under_mixed_precision() -> None:
    feeds = {"x": scores(4, 32), "scale": scores(32)}
    check(model("RMSNormalization", feeds, ["y"], 23), feeds, precision_mode="allow_mix_precision")


def test_normalisation_refusals() -> None:
    x = {"x": scores(2, 6, 3)}
    with pytest.raises(ModelError, match="p 3 is unsupported; only 1 and 2 are"):
        ge.load_onnx(model("LpNormalization", x, ["y"], 13, p=3))
    rms = {"x": scores(2, 6), "scale": scores(6)}
    with pytest.raises(ModelError, match=r"stash_type 10 is unsupported; only 1 \(FLOAT, the default\) is"):
        ge.load_onnx(model("RMSNormalization", rms, ["y"], 23, stash_type=TensorProto.FLOAT16))
    group = {"x": scores(2, 6, 3), "scale": scores(6), "bias": scores(6)}
    with pytest.raises(ModelError, match=r"the \[6\] channels do not split into num_groups 4"):
        ge.load_onnx(model("GroupNormalization", group, ["y"], 21, num_groups=4))
    per_group = {"x": scores(2, 6, 3), "scale": scores(2), "bias": scores(2)}
    with pytest.raises(ModelError, match="GroupNormalization-18 .* is deprecated and ONNX's checker refuses it"):
        ge.load_onnx(model("GroupNormalization", per_group, ["y"], 18, num_groups=2))


# ----------------------------------------------- If on a constant condition (torch's LRN)


def if_model(dim: int, then_op: str) -> onnx.ModelProto:
    """x -> Relu -> If(shape[1] == 1) -> Exp: the then branch `then_op` over axis 1 of
    the Relu (which the branch reads from the graph around it), else ReduceMax there."""
    reduce = {"axes": [1], "keepdims": 0}
    then_nodes = [
        helper.make_node(
            then_op,
            ["r", "one_axis"] if then_op == "Squeeze" else ["r"],
            ["t"],
            **({} if then_op == "Squeeze" else reduce),
        )
    ]
    branches = {
        "then_branch": helper.make_graph(
            then_nodes, "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)]
        ),
        "else_branch": helper.make_graph(
            [helper.make_node("ReduceMax", ["r"], ["e"], **reduce)],
            "else",
            [],
            [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)],
        ),
    }
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Shape", ["r"], ["s"]),
        helper.make_node(
            "Constant", [], ["one_axis"], value=helper.make_tensor("one_axis", TensorProto.INT64, [1], [1])
        ),
        helper.make_node("Gather", ["s", "one_axis"], ["d"], axis=0),
        helper.make_node("Equal", ["d", "one_axis"], ["c"]),
        helper.make_node("If", ["c"], ["y"], name="if", **branches),
        helper.make_node("Exp", ["y"], ["out"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, dim, 3])]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(
    ("dim", "then_op", "taken"),
    [(1, "Squeeze", "Squeeze"), (1, "ReduceMin", "ReduceMin"), (4, "ReduceMin", "ReduceMax")],
)
def test_if_on_a_constant_condition_is_the_branch_it_takes(dim, then_op, taken) -> None:
    proto = if_model(dim, then_op)
    check(proto, {"x": scores(2, dim, 3)})
    names = [op.props.str("name") for op in ge.load_onnx(proto)[0].walk() if isinstance(op, ag.AscendOp)]
    assert f"if/{taken}_0" in names


def test_if_on_a_computed_condition_is_an_if_op() -> None:
    proto = if_model(1, "ReduceMin")
    del proto.graph.node[1:5]
    proto.graph.node[1].input[0] = "c"
    proto.graph.input.append(helper.make_tensor_value_info("c", TensorProto.BOOL, []))
    assert [op.label for op in ge.load_onnx(proto)[0].walk() if isinstance(op, ag.IfOp)] == ["if"]


# --------------------------------------------------------------------- torch export


@pytest.mark.slow
def test_torch_group_norm_export_matches_onnxruntime() -> None:
    torch = pytest.importorskip("torch")
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.GroupNorm(4, 8), torch.nn.ReLU())
    with torch.no_grad():
        module[1].weight.uniform_(0.5, 1.5)
        module[1].bias.uniform_(-0.5, 0.5)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module.eval(), torch.randn(2, 3, 6, 6), buffer, opset_version=17, dynamo=False, input_names=["x"]
        )
    proto = onnx.load_from_string(buffer.getvalue())
    feeds = {"x": scores(2, 3, 6, 6)}
    check(proto, feeds, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.skipif(
    not hasattr(ag, "AvgPool3DOp"),
    reason="torch exports LocalResponseNorm through a 3-D AveragePool (AvgPool3D, ops-spatial)",
)
@pytest.mark.parametrize("size", [3, 4])
def test_torch_local_response_norm_export_matches_onnxruntime(size) -> None:
    """torch writes LRN as Pad, a 3-D AveragePool over the channels and an If on a
    shape (a constant condition): the If is the branch it takes."""
    torch = pytest.importorskip("torch")
    module = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.LocalResponseNorm(size, alpha=1e-2, beta=0.75, k=2.0)
    )
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module.eval(), torch.randn(2, 3, 6, 6), buffer, opset_version=17, dynamo=False, input_names=["x"]
        )
    proto = onnx.load_from_string(buffer.getvalue())
    check(proto, {"x": scores(2, 3, 6, 6)}, rtol=1e-4, atol=1e-4)
