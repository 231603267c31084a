"""ONNX frontend: `load_onnx(model, input_shape=...) -> (module, weight store)`."""

from ge.frontend.onnx_importer import load_onnx

__all__ = ["load_onnx"]
