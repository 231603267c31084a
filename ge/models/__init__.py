"""The bundled demo models: two small real networks that `ge demo` runs end to end.

- `tiny_resnet`: a ResNet-style CNN (conv+BN+relu stages, residual adds, max and
  global-average pooling, flatten, gemm) on 32x32 images;
- `tiny_bert`: a BERT-style encoder layer (embedding gather, position embeddings,
  LayerNorm both decomposed and as one op, 4-head attention with an attention mask,
  GELU via erf, residuals).

Their weights are seeded random numbers with non-zero biases and non-trivial
BatchNorm statistics, so that a pass dropping a "no-op" shows up in the outputs.
`python -m ge.models.build` regenerates the `.onnx` files byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MODELS_DIR = Path(__file__).resolve().parent

# Sizes shared by the builders (ge/models/build.py) and the input samplers below.
IMAGE_SHAPE = (1, 3, 32, 32)
NUM_CLASSES = 10
VOCAB_SIZE = 128
SEQ_LEN = 16
HIDDEN = 32
HEADS = 4
FFN_HIDDEN = 64


@dataclass(frozen=True)
class DemoModel:
    """A bundled model and how to draw valid inputs for it."""

    name: str
    summary: str
    sampler: Callable[[np.random.Generator], dict[str, np.ndarray]]

    @property
    def path(self) -> Path:
        return MODELS_DIR / f"{self.name}.onnx"

    def sample_inputs(self, seed: int = 0) -> dict[str, np.ndarray]:
        return self.sampler(np.random.default_rng(seed))


def _images(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"input": rng.standard_normal(IMAGE_SHAPE, dtype=np.float32)}


def _tokens(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Token ids within the vocabulary, and a mask that pads the tail of the sequence."""
    ids = rng.integers(0, VOCAB_SIZE, size=(1, SEQ_LEN), dtype=np.int64)
    valid = int(rng.integers(SEQ_LEN // 2, SEQ_LEN + 1))
    mask = (np.arange(SEQ_LEN) < valid).astype(np.int64)[None, :]
    return {"input_ids": ids, "attention_mask": mask}


DEMO_MODELS: tuple[DemoModel, ...] = (
    DemoModel("tiny_resnet", "ResNet-style CNN: conv+BN+relu, residual adds, pooling, gemm", _images),
    DemoModel("tiny_bert", "BERT-style encoder layer: embeddings, masked 4-head attention, GELU FFN", _tokens),
)
