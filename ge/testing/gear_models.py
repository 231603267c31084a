"""Models with dynamic dims for the multi-gear tests and benchmark (`ge.gears`).

The exports of `ge.testing.real_models` and the bundled tiny BERT are traced at one
shape (their Reshapes and position embeddings hold it as constants), so they take no
other batch or sequence length. `bert_like` is a BERT-style encoder written to take
any sequence length; `with_dynamic_dims` marks dims of a model's inputs dynamic.

    path = bert_like(tmp / "bert.onnx", hidden=256, layers=4)   # inputs [1, seq]
    path = with_dynamic_dims(RESNET, tmp / "resnet_n.onnx", {0: "N"})
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20261126


def bert_like(path: str | os.PathLike, hidden: int = 32, layers: int = 1, vocab: int = 50) -> str:
    """A BERT-style encoder whose inputs `input_ids` (int64) and `attention_mask` (float,
    0 or -1e4) are [1, seq] with `seq` dynamic: embedding, then per layer LayerNorm,
    single-head attention with the mask, a residual, a GELU feed-forward and a residual."""
    rng = np.random.default_rng(SEED)
    inits: list[onnx.TensorProto] = []

    def weight(name: str, *shape: int, scale: float = 0.2) -> str:
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value, name))
        return name

    nodes = [
        helper.make_node("Gather", [weight("emb", vocab, hidden), "input_ids"], ["x0"], name="embed"),
        helper.make_node("Unsqueeze", ["attention_mask", const("axis1", np.array([1], np.int64))], ["mask"], name="mask_unsqueeze"),
    ]
    scale = const("scale", np.array(hidden**-0.5, np.float32))
    x = "x0"
    for i in range(layers):
        p = f"l{i}."
        g, b = const(p + "ln_g", rng.uniform(0.5, 1.5, hidden).astype(np.float32)), const(p + "ln_b", (rng.standard_normal(hidden) * 0.1).astype(np.float32))
        nodes += [
            helper.make_node("LayerNormalization", [x, g, b], [p + "h"], name=p + "ln", axis=-1, epsilon=1e-5),
            *(helper.make_node("MatMul", [p + "h", weight(p + "w" + n, hidden, hidden, scale=hidden**-0.5)], [p + n], name=p + n) for n in "qkv"),
            helper.make_node("Transpose", [p + "k"], [p + "kt"], name=p + "kt", perm=[0, 2, 1]),
            helper.make_node("MatMul", [p + "q", p + "kt"], [p + "s"], name=p + "scores"),
            helper.make_node("Mul", [p + "s", scale], [p + "ss"], name=p + "scale"),
            helper.make_node("Add", [p + "ss", "mask"], [p + "sm"], name=p + "mask_add"),
            helper.make_node("Softmax", [p + "sm"], [p + "pr"], name=p + "softmax", axis=-1),
            helper.make_node("MatMul", [p + "pr", p + "v"], [p + "a"], name=p + "context"),
            helper.make_node("Add", [p + "a", p + "h"], [p + "r"], name=p + "residual"),
            helper.make_node("MatMul", [p + "r", weight(p + "w1", hidden, 2 * hidden, scale=hidden**-0.5)], [p + "f"], name=p + "ffn_in"),
            helper.make_node("Gelu", [p + "f"], [p + "fg"], name=p + "gelu"),
            helper.make_node("MatMul", [p + "fg", weight(p + "w2", 2 * hidden, hidden, scale=(2 * hidden) ** -0.5)], [p + "o"], name=p + "ffn_out"),
        ]
        last = "last_hidden_state" if i == layers - 1 else p + "out"
        nodes.append(helper.make_node("Add", [p + "o", p + "r"], [last], name=p + "ffn_residual"))
        x = last
    graph = helper.make_graph(
        nodes, "bert_like",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.FLOAT, [1, "seq"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [1, "seq", hidden])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return os.fspath(path)


def bert_like_inputs(seq: int, vocab: int = 50) -> dict[str, np.ndarray]:
    """Seeded inputs of `bert_like` at sequence length `seq`, its last quarter masked."""
    rng = np.random.default_rng(seq)
    mask = np.zeros((1, seq), np.float32)
    mask[0, seq * 3 // 4 :] = -1e4
    return {"input_ids": rng.integers(0, vocab, (1, seq)).astype(np.int64), "attention_mask": mask}


def with_dynamic_dims(source: str | os.PathLike, path: str | os.PathLike, dims: Mapping[int, str]) -> str:
    """`source` with dims `dims` (index -> dim_param) of its first input dynamic, and the
    same index of its outputs when that is the batch (0); value infos are dropped."""
    model = onnx.load(source)
    values = [model.graph.input[0], *(model.graph.output if 0 in dims else ())]
    for value in values:
        for index, name in dims.items():
            if index == 0 or value is model.graph.input[0]:
                value.type.tensor_type.shape.dim[index].dim_param = name
    del model.graph.value_info[:]
    onnx.save(model, path)
    return os.fspath(path)
