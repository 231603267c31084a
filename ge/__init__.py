"""A graph-engine compiler for Ascend-style NPUs, on xDSL.

The Python API:
- `ge.load_onnx(path, input_shape=...) -> (module, weights)` imports an ONNX model;
- `ge.reference.run(module, inputs) -> outputs` executes it with numpy;
- `ge.compile(model, options) -> Model` compiles an ONNX file or module into an
  offline model, `Model.save(path)` writes its `.om`, `ge.load_model(path)` reads one;
- `ge.Session(ge.RunConfig(...)).run(model, inputs) -> Result` runs a model on the
  simulator: `.outputs`, `.latency_us`, `.profile`.

Submodules load on first use, so that `ge --help` starts fast.
"""

import importlib

from ge.core.errors import GEError, ModelError, OptionError

__all__ = [
    "GEError", "Model", "ModelError", "OptionError", "RunConfig", "Session", "compile", "load_model", "load_onnx", "reference",
]


def load_onnx(path, input_shape=None):
    """Import an ONNX model: returns the `ascend_graph` module and its weight store."""
    from ge.frontend import load_onnx as _load_onnx

    return _load_onnx(path, input_shape=input_shape)


def compile(model, options=None):
    """Compile an ONNX file or an imported module into an offline `Model` (see `ge.compiler`)."""
    from ge.compiler import compile as _compile

    return _compile(model, options)


def load_model(path):
    """Read a `.om` file into a `Model`."""
    from ge.compiler import load_model as _load_model

    return _load_model(path)


def __getattr__(name: str):
    if name == "reference":
        return importlib.import_module("ge.core.reference")
    if name == "Model":
        return importlib.import_module("ge.om").Model
    if name == "Session":
        return importlib.import_module("ge.session").Session
    if name == "RunConfig":
        return importlib.import_module("ge.sim.config").RunConfig
    raise AttributeError(f"module 'ge' has no attribute {name!r}")
