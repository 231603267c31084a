"""Build the bundled demo models with onnx.helper and seeded numpy weights.

    python -m ge.models.build [--out DIR]      # default: ge/models/

The output is deterministic: the same seed gives the same bytes, so the bundled
files can be checked against a fresh build (tests/test_demo_models.py does).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ge.models import (
    FFN_HIDDEN,
    HEADS,
    HIDDEN,
    IMAGE_SHAPE,
    MODELS_DIR,
    NUM_CLASSES,
    SEQ_LEN,
    VOCAB_SIZE,
)

OPSET = 17
IR_VERSION = 8  # the IR version of opset 17, so that older runtimes load the files too


class GraphBuilder:
    """Nodes and initializers of one graph; every node's output is named after it."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def const(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def normal(self, name: str, shape: Sequence[int], scale: float) -> str:
        return self.const(name, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def uniform(self, name: str, shape: Sequence[int], low: float, high: float) -> str:
        return self.const(name, self.rng.uniform(low, high, shape).astype(np.float32))

    def node(self, op_type: str, inputs: Sequence[str], name: str, output: str | None = None, **attrs: object) -> str:
        """Add a node; its output is named after it unless it is a graph output."""
        output = output or name
        self.nodes.append(helper.make_node(op_type, list(inputs), [output], name=name, **attrs))
        return output

    def model(
        self,
        name: str,
        inputs: Sequence[onnx.ValueInfoProto],
        outputs: Sequence[onnx.ValueInfoProto],
        doc: str,
    ) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, list(inputs), list(outputs), self.initializers, doc_string=doc)
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name="ascend-ge ge.models.build",
            ir_version=IR_VERSION,
        )
        onnx.checker.check_model(model, full_check=True)
        return model


# ----------------------------------------------------------------------- tiny_resnet


def _conv_bn(g: GraphBuilder, prefix: str, x: str, cin: int, cout: int, k: int, stride: int, relu: bool) -> str:
    """Conv (with a bias) -> BatchNormalization (inference statistics) [-> Relu]."""
    fan_in = cin * k * k
    w = g.normal(f"{prefix}.conv.weight", (cout, cin, k, k), (2.0 / fan_in) ** 0.5)
    b = g.normal(f"{prefix}.conv.bias", (cout,), 0.1)
    pad = k // 2
    y = g.node("Conv", [x, w, b], f"{prefix}.conv", kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
    scale = g.uniform(f"{prefix}.bn.weight", (cout,), 0.5, 1.5)
    shift = g.normal(f"{prefix}.bn.bias", (cout,), 0.1)
    mean = g.normal(f"{prefix}.bn.running_mean", (cout,), 0.2)
    var = g.uniform(f"{prefix}.bn.running_var", (cout,), 0.5, 2.0)
    y = g.node("BatchNormalization", [y, scale, shift, mean, var], f"{prefix}.bn", epsilon=1e-5)
    return g.node("Relu", [y], f"{prefix}.relu") if relu else y


def build_tiny_resnet(seed: int = 0) -> onnx.ModelProto:
    g = GraphBuilder(seed)
    x = _conv_bn(g, "stem", "input", IMAGE_SHAPE[1], 16, 3, 1, relu=True)
    x = g.node("MaxPool", [x], "stem.pool", kernel_shape=[2, 2], strides=[2, 2])

    y = _conv_bn(g, "layer1.0", x, 16, 16, 3, 1, relu=True)
    y = _conv_bn(g, "layer1.1", y, 16, 16, 3, 1, relu=False)
    x = g.node("Relu", [g.node("Add", [y, x], "layer1.add")], "layer1.relu")

    y = _conv_bn(g, "layer2.0", x, 16, 32, 3, 2, relu=True)
    y = _conv_bn(g, "layer2.1", y, 32, 32, 3, 1, relu=False)
    shortcut = _conv_bn(g, "layer2.downsample", x, 16, 32, 1, 2, relu=False)
    x = g.node("Relu", [g.node("Add", [y, shortcut], "layer2.add")], "layer2.relu")

    x = g.node("GlobalAveragePool", [x], "avgpool")
    x = g.node("Flatten", [x], "flatten", axis=1)
    w = g.normal("fc.weight", (NUM_CLASSES, 32), (1.0 / 32) ** 0.5)
    b = g.normal("fc.bias", (NUM_CLASSES,), 0.1)
    g.node("Gemm", [x, w, b], "fc", output="logits", transB=1)
    return g.model(
        "tiny_resnet",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, IMAGE_SHAPE)],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, (IMAGE_SHAPE[0], NUM_CLASSES))],
        "A ResNet-style CNN with random weights (ascend-ge demo).",
    )


# ------------------------------------------------------------------------- tiny_bert


def _layer_norm_decomposed(g: GraphBuilder, prefix: str, x: str) -> str:
    """LayerNorm as exporters spell it without the LayerNormalization op."""
    gamma = g.uniform(f"{prefix}.weight", (HIDDEN,), 0.5, 1.5)
    beta = g.normal(f"{prefix}.bias", (HIDDEN,), 0.1)
    mean = g.node("ReduceMean", [x], f"{prefix}.mean", axes=[-1], keepdims=1)
    centred = g.node("Sub", [x, mean], f"{prefix}.sub")
    square = g.node("Pow", [centred, g.const(f"{prefix}.two", np.array(2.0, np.float32))], f"{prefix}.pow")
    var = g.node("ReduceMean", [square], f"{prefix}.var", axes=[-1], keepdims=1)
    var = g.node("Add", [var, g.const(f"{prefix}.eps", np.array(1e-5, np.float32))], f"{prefix}.add_eps")
    std = g.node("Sqrt", [var], f"{prefix}.sqrt")
    y = g.node("Div", [centred, std], f"{prefix}.div")
    y = g.node("Mul", [y, gamma], f"{prefix}.mul_gamma")
    return g.node("Add", [y, beta], f"{prefix}.add_beta")


def _layer_norm(g: GraphBuilder, prefix: str, x: str, output: str | None = None) -> str:
    gamma = g.uniform(f"{prefix}.weight", (HIDDEN,), 0.5, 1.5)
    beta = g.normal(f"{prefix}.bias", (HIDDEN,), 0.1)
    return g.node("LayerNormalization", [x, gamma, beta], prefix, output, axis=-1, epsilon=1e-5)


def _linear(g: GraphBuilder, prefix: str, x: str, cin: int, cout: int) -> str:
    w = g.normal(f"{prefix}.weight", (cin, cout), (1.0 / cin) ** 0.5)
    b = g.normal(f"{prefix}.bias", (cout,), 0.1)
    return g.node("Add", [g.node("MatMul", [x, w], f"{prefix}.matmul"), b], f"{prefix}.add")


def _attention(g: GraphBuilder, x: str, mask_bias: str) -> str:
    head_dim = HIDDEN // HEADS
    split = g.const("attention.split_heads_shape", np.array([1, SEQ_LEN, HEADS, head_dim], np.int64))
    merge = g.const("attention.merge_heads_shape", np.array([1, SEQ_LEN, HIDDEN], np.int64))

    def heads(name: str, perm: list[int]) -> str:
        y = _linear(g, f"attention.{name}", x, HIDDEN, HIDDEN)
        y = g.node("Reshape", [y, split], f"attention.{name}.split_heads")
        return g.node("Transpose", [y], f"attention.{name}.transpose", perm=perm)

    q = heads("query", [0, 2, 1, 3])
    k = heads("key", [0, 2, 3, 1])
    v = heads("value", [0, 2, 1, 3])
    scores = g.node("MatMul", [q, k], "attention.scores")
    scale = g.const("attention.scale", np.array(head_dim**0.5, np.float32))
    scores = g.node("Div", [scores, scale], "attention.scale_scores")
    scores = g.node("Add", [scores, mask_bias], "attention.mask_scores")
    probs = g.node("Softmax", [scores], "attention.softmax", axis=-1)
    context = g.node("MatMul", [probs, v], "attention.context")
    context = g.node("Transpose", [context], "attention.context.transpose", perm=[0, 2, 1, 3])
    context = g.node("Reshape", [context, merge], "attention.context.merge_heads")
    return _linear(g, "attention.output", context, HIDDEN, HIDDEN)


def _mask_bias(g: GraphBuilder) -> str:
    """0 where attention_mask is 1, -10000 where it is 0, shaped [batch, 1, 1, seq]."""
    mask = g.node("Cast", ["attention_mask"], "mask.cast", to=TensorProto.FLOAT)
    inverted = g.node("Sub", [g.const("mask.one", np.array(1.0, np.float32)), mask], "mask.invert")
    bias = g.node("Mul", [inverted, g.const("mask.neg_inf", np.array(-10000.0, np.float32))], "mask.scale")
    return g.node("Unsqueeze", [bias, g.const("mask.axes", np.array([1, 2], np.int64))], "mask.unsqueeze")


def _gelu(g: GraphBuilder, prefix: str, x: str) -> str:
    """GELU as x * 0.5 * (1 + erf(x / sqrt(2))), the way torch exports it."""
    y = g.node("Div", [x, g.const(f"{prefix}.sqrt2", np.array(2.0**0.5, np.float32))], f"{prefix}.div")
    y = g.node("Erf", [y], f"{prefix}.erf")
    y = g.node("Add", [y, g.const(f"{prefix}.one", np.array(1.0, np.float32))], f"{prefix}.add")
    y = g.node("Mul", [x, y], f"{prefix}.mul")
    return g.node("Mul", [y, g.const(f"{prefix}.half", np.array(0.5, np.float32))], f"{prefix}.half_mul")


def build_tiny_bert(seed: int = 1) -> onnx.ModelProto:
    g = GraphBuilder(seed)
    words = g.normal("embeddings.word_embeddings.weight", (VOCAB_SIZE, HIDDEN), 1.0)
    positions = g.normal("embeddings.position_embeddings.weight", (SEQ_LEN, HIDDEN), 0.5)
    x = g.node("Gather", [words, "input_ids"], "embeddings.word_embeddings", axis=0)
    x = g.node("Add", [x, positions], "embeddings.add_positions")
    x = _layer_norm_decomposed(g, "embeddings.layer_norm", x)

    attended = _attention(g, x, _mask_bias(g))
    x = _layer_norm(g, "attention.layer_norm", g.node("Add", [attended, x], "attention.residual"))

    y = _gelu(g, "ffn.gelu", _linear(g, "ffn.intermediate", x, HIDDEN, FFN_HIDDEN))
    y = _linear(g, "ffn.output", y, FFN_HIDDEN, HIDDEN)
    y = g.node("Add", [y, x], "ffn.residual")
    _layer_norm(g, "ffn.layer_norm", y, output="last_hidden_state")
    return g.model(
        "tiny_bert",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, (1, SEQ_LEN)),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, (1, SEQ_LEN)),
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, (1, SEQ_LEN, HIDDEN))],
        "A BERT-style encoder layer with random weights (ascend-ge demo).",
    )


BUILDERS: dict[str, Callable[[], onnx.ModelProto]] = {
    "tiny_resnet": build_tiny_resnet,
    "tiny_bert": build_tiny_bert,
}


def write_all(folder: Path) -> list[Path]:
    """Build every demo model into `folder`; returns the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, build in BUILDERS.items():
        path = folder / f"{name}.onnx"
        path.write_bytes(build().SerializeToString(deterministic=True))
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ge.models.build", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=MODELS_DIR, help=f"output folder (default: {MODELS_DIR})")
    for path in write_all(parser.parse_args(argv).out):
        print(f"{path}  {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
