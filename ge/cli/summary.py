"""What `ge demo` and `ge inspect` report about an imported graph, read from the IR."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Attribute

from dialects.ascend_graph import AscendOp, ConstOp, DataOp, GraphOp, NetOutputOp, WeightRefAttr
from dialects.shapes import fmt, numel
from ge.core import dtypes


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: str

    @classmethod
    def of(cls, name: str, type: Attribute) -> TensorInfo:
        assert isinstance(type, TensorType)
        return cls(name, dtypes.name(type.element_type), fmt(type.get_shape()))


@dataclass(frozen=True)
class WeightInfo:
    """A constant: in the weight store, or inline in the IR when it is small."""

    name: str
    dtype: str
    shape: str
    numel: int
    nbytes: int
    stored: bool


@dataclass
class GraphSummary:
    """Inputs, outputs, compute ops by CANN type, and the constants the graph holds."""

    inputs: list[TensorInfo] = field(default_factory=list)
    outputs: list[TensorInfo] = field(default_factory=list)
    ops: Counter[str] = field(default_factory=Counter)
    weights: list[WeightInfo] = field(default_factory=list)

    @property
    def parameters(self) -> int:
        return sum(w.numel for w in self.weights)

    @property
    def weight_bytes(self) -> int:
        return sum(w.nbytes for w in self.weights)

    @property
    def stored(self) -> int:
        return sum(w.stored for w in self.weights)

    @classmethod
    def of(cls, module: ModuleOp) -> GraphSummary:
        summary = cls()
        for graph in module.walk():
            if isinstance(graph, GraphOp):
                summary._add_graph(graph)
        return summary

    def _add_graph(self, graph: GraphOp) -> None:
        self.inputs += [TensorInfo.of(d.label, d.out.type) for d in graph.inputs]
        out = graph.output
        self.outputs += [TensorInfo.of(n.data, v.type) for n, v in zip(out.names, out.outputs)]
        for op in graph.body.block.ops:
            if isinstance(op, ConstOp):
                self.weights.append(_weight_info(op.label, op.out.type, isinstance(op.value, WeightRefAttr)))
            elif isinstance(op, AscendOp) and not isinstance(op, DataOp | ConstOp | NetOutputOp):
                self.ops[op.op_type] += 1


def _weight_info(name: str, type: Attribute, stored: bool) -> WeightInfo:
    assert isinstance(type, TensorType)
    shape = type.get_shape()
    n = numel(shape)
    nbytes = n * dtypes.to_numpy(type.element_type).itemsize
    return WeightInfo(name, dtypes.name(type.element_type), fmt(shape), n, nbytes, stored)
