"""A graph-engine compiler for Ascend-style NPUs, on xDSL.

The Python API:
- `ge.load_onnx(path, input_shape=...) -> (module, weights)` imports an ONNX model;
- `ge.reference.run(module, inputs) -> outputs` executes it with numpy.

Submodules load on first use, so that `ge --help` starts fast.
"""

import importlib

from ge.errors import GEError, ModelError, OptionError

__all__ = ["GEError", "ModelError", "OptionError", "load_onnx", "reference"]


def load_onnx(path, input_shape=None):
    """Import an ONNX model: returns the `ascend_graph` module and its weight store."""
    from ge.frontend import load_onnx as _load_onnx

    return _load_onnx(path, input_shape=input_shape)


def __getattr__(name: str):
    if name == "reference":
        return importlib.import_module("ge.reference")
    raise AttributeError(f"module 'ge' has no attribute {name!r}")
