"""Users' models: small models of the kinds users bring, made by tools we do not control.

Each is built in-process with the tool a user would use (torch's TorchScript exporter,
torch's dynamo exporter, `onnx.helper` at an old opset, onnxruntime's quantization
tools), at a fixed seed, and cached in the model cache (`ge.testing.real_models`)
under `users/`. They are small so that tests and `benchmarks/users_models.py` can
run every one, but each has the structure of the real thing: an OCR recogniser
(CRNN: convolutions, then a bidirectional LSTM), an OCR detector head (DBNet-style
ConvTranspose upsampling), a voice-activity detector with recurrent state in and
out, a sentence encoder exported by the dynamo exporter (masked attention with the
float32 minimum) and the same encoder dynamically quantized to int8, a statically
quantized CNN (QDQ), an AlexNet-style CNN with LRN, an opset-9 CNN with Upsample,
and the control-flow and data-dependent patterns (torch.cond, a scripted loop,
boolean-mask indexing).

    from ge.testing.user_models import USER_MODELS, user_model
    path, feeds = user_model("crnn_ocr")
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
import onnx

from ge.testing.real_models import CACHE_DIR, SEED, _locked, _torchvision

USERS_VERSION = "1"


@dataclass(frozen=True)
class UserModel:
    name: str
    kind: str  # what a user would call it
    tool: str  # what made the ONNX file
    build: Callable[[], tuple[onnx.ModelProto, dict[str, np.ndarray]]]


def _torchscript(module, args: tuple, inputs: list[str], outputs: list[str], opset: int = 17, **kwargs) -> onnx.ModelProto:
    import torch

    buffer = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module, args, buffer, input_names=inputs, output_names=outputs, opset_version=opset, dynamo=False, **kwargs)
    return onnx.load_from_string(buffer.getvalue())


def _dynamo(module, args: tuple, inputs: list[str], outputs: list[str]) -> onnx.ModelProto:
    import torch

    with torch.no_grad():
        program = torch.onnx.export(module, args, input_names=inputs, output_names=outputs, dynamo=True, verbose=False)
    return program.model_proto


def _feeds(inputs: list[str], args: tuple) -> dict[str, np.ndarray]:
    return {name: a.numpy() for name, a in zip(inputs, args)}


def _crnn() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    import torch
    from torch import nn

    class CRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.cnn = nn.Sequential(
                nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d((2, 1)),
            )
            self.rnn = nn.LSTM(32 * 8, 48, num_layers=2, bidirectional=True, batch_first=True)
            self.fc = nn.Linear(96, 37)

        def forward(self, image):
            f = self.cnn(image)  # [N, 32, 8, W/2]
            n, c, h, w = f.shape
            seq = f.permute(0, 3, 1, 2).reshape(n, w, c * h)
            out, _ = self.rnn(seq)
            return self.fc(out).log_softmax(-1)

    torch.manual_seed(SEED)
    args = (torch.randn(1, 1, 32, 64),)
    return _torchscript(CRNN().eval(), args, ["image"], ["logits"]), _feeds(["image"], args)


def _dbnet_head() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    import torch
    from torch import nn

    torch.manual_seed(SEED)
    head = nn.Sequential(
        nn.Conv2d(16, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.ConvTranspose2d(8, 8, 2, stride=2), nn.BatchNorm2d(8), nn.ReLU(),
        nn.ConvTranspose2d(8, 1, 2, stride=2), nn.Sigmoid(),
    ).eval()
    args = (torch.randn(1, 16, 16, 16),)
    return _torchscript(head, args, ["features"], ["probability"]), _feeds(["features"], args)


def _vad() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    import torch
    from torch import nn

    class VAD(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Conv1d(40, 64, 3, padding=1), nn.ReLU())
            self.lstm = nn.LSTM(64, 64, batch_first=True)
            self.out = nn.Linear(64, 1)

        def forward(self, frames, h, c):
            x = self.encoder(frames.transpose(1, 2)).transpose(1, 2)
            y, (h, c) = self.lstm(x, (h, c))
            return torch.sigmoid(self.out(y)), h, c

    torch.manual_seed(SEED)
    args = (torch.randn(1, 20, 40), torch.zeros(1, 1, 64), torch.zeros(1, 1, 64))
    names = ["frames", "h", "c"]
    return _torchscript(VAD().eval(), args, names, ["speech", "h_out", "c_out"]), _feeds(names, args)


def _encoder(exporter: Callable) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    import torch

    _torchvision()  # transformers imports torchvision when it is installed
    from transformers import BertConfig, BertModel

    torch.manual_seed(SEED)
    config = BertConfig(
        vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
        max_position_embeddings=64, attn_implementation="eager",
    )

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = BertModel(config).eval()

        def forward(self, input_ids, attention_mask):
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return (hidden * mask).sum(1) / mask.sum(1)

    ids = torch.randint(0, 1000, (1, 16))
    mask = torch.ones(1, 16, dtype=torch.int64)
    mask[:, 12:] = 0
    args = (ids, mask)
    names = ["input_ids", "attention_mask"]
    return exporter(Encoder().eval(), args, names, ["sentence_embedding"]), _feeds(names, args)


def _encoder_int8() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    import tempfile

    from onnxruntime.quantization import QuantType, quantize_dynamic

    model, feeds = _encoder(_torchscript)
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        onnx.save(model, str(src))
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
        return onnx.load(str(dst)), feeds


def _small_cnn():
    import torch
    from torch import nn

    torch.manual_seed(SEED)
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
    ).eval()


def _cnn_int8_qdq() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    import tempfile

    import torch
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    args = (torch.randn(1, 3, 32, 32),)
    model = _torchscript(_small_cnn(), args, ["image"], ["logits"], opset=13)
    rng = np.random.default_rng(SEED)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"image": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(8)])

        def get_next(self):
            return next(self.batches, None)

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        onnx.save(model, str(src))
        quantize_static(
            str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
        )
        return onnx.load(str(dst)), _feeds(["image"], args)


def _alexnet_lrn() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    import torch
    from torch import nn

    torch.manual_seed(SEED)
    net = nn.Sequential(
        nn.Conv2d(3, 16, 5, stride=2, padding=2), nn.ReLU(), nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0),
        nn.MaxPool2d(3, stride=2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
        nn.LocalResponseNorm(5), nn.Flatten(), nn.Linear(32 * 7 * 7, 10),
    ).eval()
    args = (torch.randn(1, 3, 32, 32),)
    return _torchscript(net, args, ["image"], ["logits"]), _feeds(["image"], args)


def _cnn_opset9() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    import torch
    from torch import nn

    torch.manual_seed(SEED)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Upsample(scale_factor=2, mode="nearest"),
        nn.Conv2d(8, 4, 3, padding=1), nn.Sigmoid(),
    ).eval()
    args = (torch.randn(1, 3, 16, 16),)
    return _torchscript(net, args, ["image"], ["mask"], opset=9), _feeds(["image"], args)


def _cond() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    import torch

    class Gate(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 8)

        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda x: self.linear(x).relu(), lambda x: x.neg(), (x,))

    torch.manual_seed(SEED)
    args = (torch.randn(2, 8),)
    return _dynamo(Gate().eval(), args, ["x"], ["y"]), _feeds(["x"], args)


def _loop() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    import torch

    class Repeat(torch.nn.Module):
        def forward(self, x, n: int):
            for _ in range(n):
                x = torch.tanh(x * 1.5 + 0.1)
            return x

    scripted = torch.jit.script(Repeat())
    args = (torch.randn(4, 6), 5)
    model = _torchscript(scripted, args, ["x", "n"], ["y"])
    return model, {"x": args[0].numpy(), "n": np.array(5, np.int64)}


def _mask_select() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    import torch

    class Positive(torch.nn.Module):
        def forward(self, x):
            return x[x > 0] * 2

    torch.manual_seed(SEED)
    args = (torch.randn(4, 5),)
    return _torchscript(Positive(), args, ["x"], ["y"]), _feeds(["x"], args)


def _masked_attention() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    import torch

    class Masked(torch.nn.Module):
        def forward(self, q, k, v, mask):
            scores = q @ k.transpose(-1, -2) / 4.0
            scores = scores + (1.0 - mask[:, None, :]) * torch.finfo(torch.float32).min
            return scores.softmax(-1) @ v

    torch.manual_seed(SEED)
    mask = torch.ones(2, 8)
    mask[:, 6:] = 0
    args = (torch.randn(2, 8, 16), torch.randn(2, 8, 16), torch.randn(2, 8, 16), mask)
    names = ["q", "k", "v", "mask"]
    return _torchscript(Masked(), args, names, ["out"]), _feeds(names, args)


USER_MODELS: dict[str, UserModel] = {
    m.name: m
    for m in [
        UserModel("crnn_ocr", "OCR text recogniser (CNN + 2-layer BiLSTM)", "torch.onnx (TorchScript)", _crnn),
        UserModel("dbnet_head", "OCR text detector head (ConvTranspose x2)", "torch.onnx (TorchScript)", _dbnet_head),
        UserModel("lstm_vad", "voice-activity detector, LSTM state in and out", "torch.onnx (TorchScript)", _vad),
        UserModel("encoder_dynamo", "sentence encoder (2-layer BERT, masked mean)", "torch.onnx (dynamo)", lambda: _encoder(_dynamo)),
        UserModel("encoder_int8", "sentence encoder, int8 weights", "onnxruntime quantize_dynamic", _encoder_int8),
        UserModel("cnn_int8_qdq", "statically quantized CNN (QDQ)", "onnxruntime quantize_static", _cnn_int8_qdq),
        UserModel("alexnet_lrn", "AlexNet-style CNN with LRN", "torch.onnx (TorchScript)", _alexnet_lrn),
        UserModel("cnn_opset9", "opset-9 CNN with Upsample", "torch.onnx (TorchScript, opset 9)", _cnn_opset9),
        UserModel("cond", "torch.cond gate (If)", "torch.onnx (dynamo)", _cond),
        UserModel("loop", "scripted loop (Loop)", "torch.jit.script + torch.onnx", _loop),
        UserModel("mask_select", "boolean-mask indexing (NonZero, GatherND)", "torch.onnx (TorchScript)", _mask_select),
        UserModel("masked_attention", "attention masked with float32 min", "torch.onnx (TorchScript)", _masked_attention),
    ]
}


def _cache() -> Path:
    versions = "-".join(metadata.version(p) for p in ("torch", "transformers", "onnxruntime"))
    return CACHE_DIR / "users" / f"v{USERS_VERSION}-{versions}"


def user_model(name: str) -> tuple[Path, dict[str, np.ndarray]]:
    """The model's ONNX file (built on first use) and its inputs."""
    spec = USER_MODELS[name]
    directory = _cache()
    path, inputs = directory / f"{name}.onnx", directory / f"{name}.npz"
    directory.mkdir(parents=True, exist_ok=True)
    with _locked(directory / f"{name}.lock"):
        if not path.exists() or not inputs.exists():
            model, feeds = spec.build()
            np.savez(inputs, **feeds)
            onnx.save(model, str(path))
    with np.load(inputs) as data:
        return path, {k: data[k] for k in data.files}


def opset_of(path: Path) -> int:
    model = onnx.load(str(path), load_external_data=False)
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)

