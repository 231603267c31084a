"""ONNX Attention, RotaryEmbedding, Einsum and TopK: one-node graphs through import +
reference and through compile + simulate, against onnxruntime; and what is refused."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import ge
from dialects import ascend_graph as ag
from ge.core.errors import ModelError

RNG = np.random.default_rng(7)
TOLERANCE = {np.dtype(np.float32): (1e-4, 1e-5), np.dtype(np.float16): (4e-3, 2e-3)}

# ------------------------------------------------------------------------ helpers


def model_of(
    op_type: str, inputs: Sequence[np.ndarray | None], n_out: int, opset: int,
    consts: dict[int, np.ndarray] | None = None, outputs: Sequence[int] | None = None, **attrs: object,
) -> onnx.ModelProto:
    """One node: arrays are graph inputs, `consts` initializers, None an omitted input;
    `outputs` are the node outputs the graph returns (all by default)."""
    consts = consts or {}
    names = ["" if a is None and i not in consts else f"i{i}" for i, a in enumerate(inputs)]
    wanted = list(range(n_out)) if outputs is None else list(outputs)
    node = helper.make_node(op_type, names, [f"o{k}" if k in wanted else "" for k in range(n_out)], **attrs)
    infos = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for i, (n, a) in enumerate(zip(names, inputs)) if a is not None and i not in consts
    ]
    inits = [onnx.numpy_helper.from_array(a, f"i{i}") for i, a in consts.items()]
    graph = helper.make_graph([node], "g", infos, [helper.make_empty_tensor_value_info(f"o{k}") for k in wanted], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def feeds_of(model: onnx.ModelProto, inputs: Sequence[np.ndarray | None]) -> dict[str, np.ndarray]:
    names = {i.name for i in model.graph.input}
    return {f"i{i}": a for i, a in enumerate(inputs) if a is not None and f"i{i}" in names}


def expected(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def ours(model: onnx.ModelProto, feeds: dict[str, np.ndarray], compiled: bool) -> list[np.ndarray]:
    module = ge.load_onnx(model)[0]
    names = [o.name for o in model.graph.output]
    if not compiled:
        got = ge.reference.run(module, feeds)
    else:
        om = ge.compile(module, {"precision_mode": "must_keep_origin_dtype", "soc_version": "Ascend910B1"})
        with ge.Session() as session:
            got = dict(session.run(om, feeds).outputs)
    return [got[n] for n in names]


def check(op_type: str, inputs: Sequence[np.ndarray | None], n_out: int = 1, opset: int = 23, compiled: bool = False,
          consts: dict[int, np.ndarray] | None = None, outputs: Sequence[int] | None = None, **attrs: object) -> None:
    model = model_of(op_type, inputs, n_out, opset, consts, outputs, **attrs)
    feeds = feeds_of(model, inputs)
    want = expected(model, feeds)
    got = ours(model, feeds, compiled)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w)
        else:
            rtol, atol = TOLERANCE[w.dtype]
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol)


def refused(model: onnx.ModelProto, match: str) -> None:
    with pytest.raises(ModelError, match=match):
        ge.load_onnx(model)


def normal(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


# ------------------------------------------------------------------------ Attention

ROUTES = [pytest.param(False, id="reference"), pytest.param(True, id="compiled")]


@pytest.mark.parametrize("compiled", ROUTES)
@pytest.mark.parametrize("opset", [23, 24])
def test_attention_4d_gqa_float_mask(opset: int, compiled: bool) -> None:
    q, k, v = normal(2, 4, 3, 8), normal(2, 2, 5, 8), normal(2, 2, 5, 6)
    check("Attention", [q, k, v, normal(3, 5)], n_out=1, opset=opset, compiled=compiled)


@pytest.mark.parametrize("compiled", ROUTES)
def test_attention_3d_heads_causal_scale_softcap(compiled: bool) -> None:
    q, k, v = normal(2, 4, 24), normal(2, 6, 12), normal(2, 6, 12)
    check("Attention", [q, k, v], compiled=compiled, q_num_heads=6, kv_num_heads=3, is_causal=1, scale=0.2, softcap=1.5)


@pytest.mark.parametrize("compiled", ROUTES)
def test_attention_bool_mask_broadcast(compiled: bool) -> None:
    q, k, v = normal(1, 2, 3, 4), normal(1, 2, 5, 4), normal(1, 2, 5, 4)
    mask = RNG.random((1, 1, 3, 5)) > 0.3
    mask[..., 0] = True
    check("Attention", [q, k, v, mask], compiled=compiled)


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("dtype", [np.bool_, np.float32])
def test_attention_short_mask_masks_the_remaining_keys(dtype: type, compiled: bool) -> None:
    """ONNX pads a mask shorter than the keys with masked positions (onnxruntime
    refuses such a mask, so the padded mask is the oracle here)."""
    q, k, v = normal(1, 2, 3, 4), normal(1, 2, 5, 4), normal(1, 2, 5, 4)
    short = (RNG.random((3, 3)) > 0.3) | np.eye(3, dtype=bool) if dtype is np.bool_ else normal(3, 3)
    fill = False if dtype is np.bool_ else -np.inf
    padded = np.concatenate([short, np.full((3, 2), fill, short.dtype)], axis=1)
    got, want = ([ours(model, feeds_of(model, arrays), compiled)[0] for model, arrays in (
        (model_of("Attention", arrays, 1, 23), arrays) for arrays in ([q, k, v, short], [q, k, v, padded])
    )])
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert not np.allclose(got, ours(model_of("Attention", [q, k, v], 1, 23), {"i0": q, "i1": k, "i2": v}, compiled)[0])


@pytest.mark.parametrize("compiled", ROUTES)
@pytest.mark.parametrize("three_d", [False, True])
def test_attention_past_and_present_causal(three_d: bool, compiled: bool) -> None:
    """The KV cache: present = past + new along the sequence, the causal band shifted by the past."""
    if three_d:
        q, k, v = normal(2, 3, 8), normal(2, 3, 8), normal(2, 3, 10)
        attrs = {"q_num_heads": 2, "kv_num_heads": 2}
    else:
        q, k, v = normal(2, 2, 3, 4), normal(2, 2, 3, 4), normal(2, 2, 3, 5)
        attrs = {}
    past_k, past_v = normal(2, 2, 4, 4), normal(2, 2, 4, 5)
    check("Attention", [q, k, v, normal(3, 7), past_k, past_v], n_out=3, compiled=compiled, is_causal=1, **attrs)


@pytest.mark.parametrize("compiled", ROUTES)
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_attention_qk_matmul_output(mode: int, compiled: bool) -> None:
    """The fourth output at each of ONNX's four points; mode 0 is the product before
    the softcap, as the spec and onnxruntime have it (onnx's reference evaluator
    returns it capped)."""
    q, k, v = normal(1, 2, 3, 4), normal(1, 2, 4, 4), normal(1, 2, 4, 4)
    check("Attention", [q, k, v, normal(3, 4)], n_out=4, outputs=[0, 3], compiled=compiled, qk_matmul_output_mode=mode, softcap=1.0)


@pytest.mark.parametrize("compiled", ROUTES)
def test_attention_nonpad_kv_seqlen(compiled: bool) -> None:
    """Opset 24: keys from each batch's length on are padding."""
    q, k, v = normal(2, 2, 3, 4), normal(2, 2, 5, 4), normal(2, 2, 5, 4)
    lengths = np.array([3, 5], np.int64)
    check("Attention", [q, k, v, normal(3, 5), None, None, lengths], opset=24, compiled=compiled)


@pytest.mark.parametrize("compiled", ROUTES)
def test_attention_float16(compiled: bool) -> None:
    q, k, v = normal(1, 4, 3, 8, dtype=np.float16), normal(1, 2, 6, 8, dtype=np.float16), normal(1, 2, 6, 8, dtype=np.float16)
    check("Attention", [q, k, v, normal(3, 6, dtype=np.float16)], compiled=compiled, is_causal=1)


def test_attention_imports_one_fused_op() -> None:
    model = model_of("Attention", [normal(1, 2, 3, 4)] * 3, 1, 23)
    module = ge.load_onnx(model)[0]
    ops = [op for op in module.walk() if isinstance(op, ag.AscendOp) and not isinstance(op, ag.DataOp | ag.NetOutputOp)]
    assert [type(op) for op in ops] == [ag.FusedInferAttentionScoreOp]


def test_attention_refusals() -> None:
    q = normal(1, 2, 3, 4)
    refused(model_of("Attention", [q, q, q, None, normal(1, 2, 2, 4)], 1, 23), "past_key and past_value must be given together")
    refused(model_of("Attention", [normal(1, 3, 8)] * 3, 1, 23), "need the q_num_heads and kv_num_heads")
    refused(model_of("Attention", [normal(1, 3, 8), q, q], 1, 23), "must all be 3-D or all 4-D")
    refused(
        model_of("Attention", [q, q, q, None, q, q, np.array([3], np.int64)], 1, 24),
        "nonpad_kv_seqlen cannot be combined with past_key",
    )
    refused(model_of("Attention", [q, q, q], 1, 23, softmax_precision=TensorProto.DOUBLE), "softmax_precision 11 is unsupported")
    refused(model_of("Attention", [normal(1, 3, 8)] * 3, 1, 23, q_num_heads=3, kv_num_heads=3), r"does not split into 3 heads")


# ------------------------------------------------------------------ RotaryEmbedding


@pytest.mark.parametrize("compiled", ROUTES)
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rotary_dim", [0, 4])
def test_rotary_embedding_4d_with_positions(interleaved: int, rotary_dim: int, compiled: bool) -> None:
    half = (rotary_dim or 8) // 2
    x, cos, sin = normal(2, 3, 4, 8), normal(20, half), normal(20, half)
    positions = RNG.integers(0, 20, (2, 4)).astype(np.int64)
    check("RotaryEmbedding", [x, cos, sin, positions], compiled=compiled, interleaved=interleaved, rotary_embedding_dim=rotary_dim)


@pytest.mark.parametrize("compiled", ROUTES)
@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_3d_without_positions(interleaved: int, compiled: bool) -> None:
    x, cos, sin = normal(2, 5, 24), normal(2, 5, 3), normal(2, 5, 3)
    check("RotaryEmbedding", [x, cos, sin], compiled=compiled, interleaved=interleaved, num_heads=4)


def test_rotary_embedding_refusals() -> None:
    refused(model_of("RotaryEmbedding", [normal(2, 5, 24), normal(2, 5, 3), normal(2, 5, 3)], 1, 23), "needs the num_heads")
    with pytest.raises(ModelError, match="rotary_dim / 2"):
        ge.load_onnx(model_of("RotaryEmbedding", [normal(2, 3, 4, 8), normal(2, 4, 3), normal(2, 4, 3)], 1, 23))


# --------------------------------------------------------------------------- Einsum

EQUATIONS = [
    ("bij,bjk->bik", [(3, 2, 4), (3, 4, 5)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("ij->i", [(3, 4)]),
    ("ij->ji", [(3, 4)]),
    ("i,i", [(5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("ii", [(4, 4)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("abc,cd->dba", [(2, 3, 4), (4, 5)]),
]


@pytest.mark.parametrize("equation,shapes", EQUATIONS, ids=[e for e, _ in EQUATIONS])
def test_einsum_reference(equation: str, shapes: list[tuple[int, ...]]) -> None:
    inputs = [normal(*s) for s in shapes] if equation != "i,i" else [normal(5), normal(5)]
    check("Einsum", inputs, opset=12, equation=equation)


@pytest.mark.parametrize("equation,shapes", EQUATIONS[:4] + EQUATIONS[8:9], ids=[e for e, _ in EQUATIONS[:4] + EQUATIONS[8:9]])
def test_einsum_compiled(equation: str, shapes: list[tuple[int, ...]]) -> None:
    check("Einsum", [normal(*s) for s in shapes], opset=12, compiled=True, equation=equation)


def test_einsum_decomposes_into_a_batch_matmul() -> None:
    module = ge.load_onnx(model_of("Einsum", [normal(3, 2, 4), normal(3, 4, 5)], 1, 12, equation="bij,bjk->bik"))[0]
    assert [type(op) for op in module.walk() if isinstance(op, ag.BatchMatMulOp | ag.TransposeOp)] == [ag.BatchMatMulOp]


def test_einsum_refusals() -> None:
    refused(model_of("Einsum", [normal(2, 3), normal(4, 5)], 1, 12, equation="ij,jk->ik"), "letter 'j' has sizes 3 and 4")
    refused(model_of("Einsum", [normal(2, 3)], 1, 12, equation="ij,jk->ik"), "2 input terms for 1 inputs")
    refused(model_of("Einsum", [normal(2, 3)], 1, 12, equation="ijk->i"), "does not match the input ranks")
    refused(model_of("Einsum", [normal(2, 3)], 1, 12, equation="ij->iz"), "names one no input has")


# ----------------------------------------------------------------------------- TopK


@pytest.mark.parametrize("compiled", ROUTES)
@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("axis", [0, -1])
def test_top_k(largest: int, axis: int, compiled: bool) -> None:
    x = normal(5, 6)
    check("TopK", [x, None], n_out=2, opset=11, compiled=compiled, consts={1: np.array([3], np.int64)}, axis=axis, largest=largest)


@pytest.mark.parametrize("compiled", ROUTES)
@pytest.mark.parametrize("largest", [0, 1])
def test_top_k_ties_keep_the_lower_index(largest: int, compiled: bool) -> None:
    x = np.array([[3, 1, 3, 1, 2, 3], [0, 0, 0, 0, 0, 0]], np.int64)
    check("TopK", [x, None], n_out=2, opset=24, compiled=compiled, consts={1: np.array([4], np.int64)}, axis=1, largest=largest)


def test_top_k_refusals() -> None:
    x = normal(3, 4)
    model = model_of("TopK", [x, np.array([2], np.int64)], 2, 11)
    refused(model, "input 1 \\(k, 'i1'\\) must be a constant")
    with pytest.raises(ModelError, match="k 5 is not in"):
        ge.load_onnx(model_of("TopK", [x, None], 2, 11, consts={1: np.array([5], np.int64)}))
