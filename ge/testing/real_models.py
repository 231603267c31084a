"""Real models exported to ONNX at random weights, for tests and benchmarks.

They are cached in `$GE_MODEL_CACHE`, else `~/.cache/ascend-ge/models`.

Each model is built with a fixed seed, its weights randomised so that no bias is
zero, no BatchNorm is the identity and no LayerNorm is plain normalisation (a pass
that drops a "no-op" would otherwise go unnoticed), and exported with the
TorchScript exporter (`dynamo=False`) without constant folding, so the graph keeps
the ops a framework would hand to ATC (ResNet-50 keeps its 53 BatchNormalization
nodes). BatchNorm running statistics are measured on random images (cumulative
average in training mode) so that activations keep unit scale through the network,
then gamma and beta are drawn at random.

Exports are keyed by `CACHE_VERSION` and the torch/transformers versions: bump the
version when an export changes. A file lock makes concurrent pytest-xdist workers
export each model once. torch is imported only when an export is needed, so a warm
cache costs nothing.

    from ge.testing.real_models import model_path, model_inputs
    path = model_path("resnet50")                      # exports on first use
    feeds = model_inputs(path)                         # seeded inputs by ONNX signature
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

CACHE_DIR = Path(os.environ.get("GE_MODEL_CACHE") or Path.home() / ".cache" / "ascend-ge" / "models")
CACHE_VERSION = "2"
BACKEND_REPORT = CACHE_DIR / "onnx_backend_report.md"
SEED = 20240611
OPSET = 17
# BERT-base inputs: batch 1, sequence 128; the last PAD tokens are masked out.
SEQ_LEN = 128
PAD = 16


@dataclass(frozen=True)
class ModelSpec:
    """How to build one model: a factory returning the module and example inputs."""

    name: str
    build: Callable[[], tuple[object, tuple, list[str], list[str]]]


def _torchvision():
    """Import torchvision without its compiled ops (installed with --no-deps)."""
    import torch

    for name, schema in (
        ("nms", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"),
        ("qnms", "(Tensor qdets, Tensor qscores, float iou_threshold, float scale, int zero_point) -> Tensor"),
    ):
        if not hasattr(torch.ops.torchvision, name):
            torch.library.define(f"torchvision::{name}", schema)
    import torchvision

    return torchvision


def _randomise(model, generator) -> None:
    """Non-trivial biases, norm affine parameters, and unit-gain linear weights."""
    import torch
    from torch import nn

    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                fan_in = module.weight.shape[1]
                module.weight.copy_(torch.randn(module.weight.shape, generator=generator) / fan_in**0.5)
            if isinstance(module, (nn.Conv2d, nn.Linear)) and module.bias is not None:
                module.bias.copy_(0.1 * torch.randn(module.bias.shape, generator=generator))
            if isinstance(module, nn.MultiheadAttention) and module.in_proj_bias is not None:
                module.in_proj_bias.copy_(0.1 * torch.randn(module.in_proj_bias.shape, generator=generator))
            if isinstance(module, (nn.BatchNorm2d, nn.LayerNorm)):
                module.weight.copy_(0.5 + torch.rand(module.weight.shape, generator=generator))
                module.bias.copy_(0.1 * torch.randn(module.bias.shape, generator=generator))


def _calibrate_batch_norm(model, images) -> None:
    """Set BatchNorm running statistics to the cumulative statistics of `images`."""
    import torch
    from torch import nn

    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for bn in norms:
        bn.reset_running_stats()
        bn.momentum = None
    model.train()
    with torch.no_grad():
        for batch in images:
            model(batch)
    model.eval()
    for bn in norms:
        bn.momentum = 0.1


def _vision(factory_name: str, batch_norm: bool) -> tuple[object, tuple, list[str], list[str]]:
    import torch

    torch.manual_seed(SEED)
    torchvision = _torchvision()
    model = getattr(torchvision.models, factory_name)(weights=None)
    generator = torch.Generator().manual_seed(SEED)
    _randomise(model, generator)
    if hasattr(model, "class_token"):
        with torch.no_grad():
            model.class_token.copy_(torch.randn(model.class_token.shape, generator=generator))
    if batch_norm:
        _calibrate_batch_norm(model, [torch.randn(4, 3, 224, 224, generator=generator) for _ in range(2)])
    model.eval()
    return model, (torch.randn(1, 3, 224, 224, generator=generator),), ["input"], ["output"]


def _bert() -> tuple[object, tuple, list[str], list[str]]:
    import torch

    _torchvision()  # transformers imports torchvision when it is installed
    from transformers import BertConfig, BertModel

    torch.manual_seed(SEED)
    config = BertConfig(
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        max_position_embeddings=512,
        attn_implementation="eager",
    )
    bert = BertModel(config)
    _randomise(bert, torch.Generator().manual_seed(SEED))
    bert.eval()

    class Encoder(torch.nn.Module):
        """BertModel called with keywords, returning plain tensors for the tracer."""

        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state, out.pooler_output

    model = Encoder().eval()
    ids = torch.randint(0, config.vocab_size, (1, SEQ_LEN))
    mask = torch.ones(1, SEQ_LEN, dtype=torch.int64)
    mask[:, -PAD:] = 0
    types = torch.zeros(1, SEQ_LEN, dtype=torch.int64)
    return (
        model,
        (ids, mask, types),
        ["input_ids", "attention_mask", "token_type_ids"],
        ["last_hidden_state", "pooler_output"],
    )


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec("resnet50", lambda: _vision("resnet50", batch_norm=True)),
        ModelSpec("mobilenet_v2", lambda: _vision("mobilenet_v2", batch_norm=True)),
        ModelSpec("vit_b_16", lambda: _vision("vit_b_16", batch_norm=False)),
        ModelSpec("bert_base", _bert),
    )
}


def _cache_key() -> str:
    versions = [metadata.version(p) for p in ("torch", "transformers", "onnx")]
    return "-".join([f"v{CACHE_VERSION}", *(v.replace("+", "_") for v in versions)])


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def model_path(name: str) -> Path:
    """The cached ONNX file of model `name`, exported first if missing."""
    spec = MODELS[name]
    path = CACHE_DIR / f"{name}-{_cache_key()}.onnx"
    if path.exists():
        return path
    with _locked(CACHE_DIR / f"{name}.lock"):
        if not path.exists():
            _export(spec, path)
            for stale in CACHE_DIR.glob(f"{name}-v*.onnx"):
                if stale != path:
                    stale.unlink()
    return path


def _export(spec: ModelSpec, path: Path, batch: int = 1) -> None:
    import warnings

    import torch

    model, args, input_names, output_names = spec.build()
    args = tuple(a.repeat(batch, *[1] * (a.dim() - 1)) for a in args)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            args,
            str(tmp),
            dynamo=False,
            do_constant_folding=False,
            training=torch.onnx.TrainingMode.EVAL,
            opset_version=OPSET,
            input_names=input_names,
            output_names=output_names,
        )
    os.replace(tmp, path)


DYNAMIC_EXPORTERS = ("torchscript", "dynamo")
"""How `dynamic_path` exports: torch.onnx.export's TorchScript exporter with `dynamic_axes`,
or its dynamo exporter with `dynamic_shapes` (torch.export.Dim)."""

def _gpt2() -> tuple[object, tuple, list[str], list[str]]:
    """A small GPT-2 decoder (2 layers, width 128, 4 heads; HuggingFace's GPT2Model with
    its causal mask), traced at batch 1, sequence 32."""
    import torch

    _torchvision()
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(SEED)
    config = GPT2Config(n_layer=2, n_embd=128, n_head=4, n_positions=512, vocab_size=1000, attn_implementation="eager")
    gpt2 = GPT2Model(config)
    _randomise(gpt2, torch.Generator().manual_seed(SEED))
    gpt2.eval()

    class Decoder(torch.nn.Module):
        """GPT2Model called with keywords and no KV cache, returning the hidden states."""

        def __init__(self):
            super().__init__()
            self.gpt2 = gpt2

        def forward(self, input_ids, attention_mask):
            return self.gpt2(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state

    ids = torch.randint(0, config.vocab_size, (1, 32))
    return Decoder().eval(), (ids, torch.ones(1, 32, dtype=torch.int64)), ["input_ids", "attention_mask"], ["last_hidden_state"]


DYNAMIC_MODELS: dict[str, ModelSpec] = {spec.name: spec for spec in (MODELS["bert_base"], ModelSpec("gpt2_small", _gpt2))}
"""The models `dynamic_path` exports with dynamic batch and sequence dims."""


def dynamic_path(name: str, exporter: str) -> Path:
    """The cached export of model `name` (of `DYNAMIC_MODELS`) with its batch and sequence
    dims dynamic (dim_params `batch` and `sequence`, as the exporter writes them), exported
    first if missing by `exporter` (one of `DYNAMIC_EXPORTERS`) at the shape its builder traces."""
    if name not in DYNAMIC_MODELS or exporter not in DYNAMIC_EXPORTERS:
        raise ValueError(f"no dynamic export of '{name}' by '{exporter}'; there are {sorted(DYNAMIC_MODELS)} by {DYNAMIC_EXPORTERS}")
    path = CACHE_DIR / f"{name}-{exporter}-dynamic-{_cache_key()}.onnx"
    if path.exists():
        return path
    with _locked(CACHE_DIR / f"{name}-{exporter}-dynamic.lock"):
        if not path.exists():
            _export_dynamic(DYNAMIC_MODELS[name], exporter, path)
            for stale in CACHE_DIR.glob(f"{name}-{exporter}-dynamic-v*.onnx"):
                if stale != path:
                    stale.unlink()
    return path


def _export_dynamic(spec: ModelSpec, exporter: str, path: Path) -> None:
    import warnings

    import torch

    model, args, input_names, output_names = spec.build()
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if exporter == "torchscript":
            axes = {n: {0: "batch", 1: "sequence"} for n in [*input_names, output_names[0]]}
            axes |= {n: {0: "batch"} for n in output_names[1:]}
            torch.onnx.export(
                model, args, str(tmp), dynamo=False, do_constant_folding=False, training=torch.onnx.TrainingMode.EVAL,
                opset_version=OPSET, input_names=input_names, output_names=output_names, dynamic_axes=axes,
            )
        else:
            batch, sequence = torch.export.Dim("batch", max=64), torch.export.Dim("sequence", max=512)
            shapes = {n: {0: batch, 1: sequence} for n in input_names}
            program = torch.onnx.export(
                model, args, dynamo=True, input_names=input_names, output_names=output_names, dynamic_shapes=shapes,
                verbose=False,
            )
            program.save(str(tmp))
    os.replace(tmp, path)


def batched_path(name: str, batch: int) -> Path:
    """The model exported at batch `batch` (its example inputs repeated along the batch):
    the exporter writes the batch into the shape constants of models that reshape by
    it (ViT's patch sequence, BERT's heads), so the batch is an export's, never a
    rewrite of the batch-1 file's dims."""
    if batch == 1:
        return model_path(name)
    spec = MODELS[name]
    path = CACHE_DIR / f"{name}-{_cache_key()}-batch{batch}.onnx"
    if path.exists():
        return path
    with _locked(CACHE_DIR / f"{name}-batch{batch}.lock"):
        if not path.exists():
            _export(spec, path, batch)
    return path


def model_inputs(path: str | os.PathLike, seed: int = SEED, shape: tuple[int, ...] | None = None) -> dict[str, np.ndarray]:
    """Seeded inputs for every graph input of the ONNX model at `path`, of their declared
    shapes or of `shape` (for the dynamic exports, whose inputs share one shape).

    Float inputs are standard normal; `input_ids` are token ids below the
    vocabulary size; `attention_mask` masks out the last `PAD` positions;
    `token_type_ids` mark the second half as segment 1.
    """
    import onnx
    from onnx import helper

    model = onnx.load(str(path), load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor_type = value.type.tensor_type
        dims = shape or tuple(d.dim_value for d in tensor_type.shape.dim)
        dtype = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
        feeds[value.name] = _input(value.name, dims, dtype, rng, _vocab_size(model))
    return feeds


def _vocab_size(model) -> int:
    for init in model.graph.initializer:
        if "word_embeddings" in init.name:
            return int(init.dims[0])
    return 2


def _input(name: str, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator, vocab: int) -> np.ndarray:
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    if name == "attention_mask":
        mask = np.ones(shape, dtype)
        mask[..., -PAD:] = 0
        return mask
    if name == "token_type_ids":
        types = np.zeros(shape, dtype)
        types[..., shape[-1] // 2 :] = 1
        return types
    return rng.integers(0, vocab, shape).astype(dtype)


def onnxruntime_outputs(path: str | os.PathLike, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The model's outputs by onnxruntime's CPU provider, graph optimisations off.

    Optimisations are off so that onnxruntime computes the graph as written
    (no fused attention or GELU approximations) and is a faithful float32 oracle.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))
