"""The dynamic-shape section of a `.om` (format version 4): what a fully dynamic
build (`ge.dynamic`) leaves for the run time.

    ranges     every graph input's (lo, hi) per dim (hi -1: unbounded)
    inputs     the graph inputs' names and dtypes, in order; outputs likewise
    graph      the optimised `ascend_graph` module as IR text, its dynamic dims `?`
               (import, constant folding, graph fusion, precision and format
               selection, UB fusion and Split no-task done: none of them needs
               the concrete shape)
    weights    each weight handle of the graph: name, digest, dtype, shape and its
               offset in the model's weight region (weights.bin)

Each field is checked on read before it sizes anything: counts, ranks, dtypes, every
weight within the weight region and its bytes those of its shape and dtype (its
digest is checked again when the run time puts it in a weight store); a graph that
does not parse is refused at the run's first shape, naming the file's section.
"""

from __future__ import annotations

from dataclasses import dataclass

from ge.core.shape_ranges import UNBOUNDED, DimRange, Ranges
from ge.om import limits
from ge.om.limits import Malformed, integer, items, mapping, text

GRAPH_CHARS = 64 * limits.MiB
"""The graph's IR text: 1.1 MB for ResNet-50."""


@dataclass(frozen=True)
class Port:
    name: str
    dtype: str


@dataclass(frozen=True)
class WeightEntry:
    """A weight of the graph, at `offset` in the model's weight region."""

    name: str
    digest: str
    dtype: str
    shape: tuple[int, ...]
    offset: int

    @property
    def size(self) -> int:
        n = limits.ITEMSIZE[self.dtype]
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class DynamicGraph:
    """A fully dynamic graph with its ranges, compiled once for every shape within them."""

    ranges: Ranges
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    graph: str
    weights: tuple[WeightEntry, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "ranges": {name: [list(r) for r in dims] for name, dims in self.ranges.items()},
            "inputs": [[p.name, p.dtype] for p in self.inputs],
            "outputs": [[p.name, p.dtype] for p in self.outputs],
            "graph": self.graph,
            "weights": [[w.name, w.digest, w.dtype, list(w.shape), w.offset] for w in self.weights],
        }

    @classmethod
    def from_json(cls, data: object, weight_region: int, where: str = "dynamic") -> DynamicGraph:
        """The section of a `.om` description, every field bounded (weights within the
        `weight_region` bytes of the model)."""
        data = mapping(data, where)
        inputs = _ports(limits.field(data, "inputs", where), f"{where}.inputs")
        outputs = _ports(limits.field(data, "outputs", where), f"{where}.outputs")
        ranges = mapping(limits.field(data, "ranges", where), f"{where}.ranges")
        if list(ranges) != [p.name for p in inputs]:
            raise Malformed(f"{where}.ranges has inputs {list(ranges)[:8]}; the graph's are {[p.name for p in inputs][:8]}")
        graph = limits.field(data, "graph", where)
        if not isinstance(graph, str) or not graph or len(graph) > GRAPH_CHARS:
            raise Malformed(f"{where}.graph must be the graph's IR text of 1 to {GRAPH_CHARS} characters")
        listed = items(limits.field(data, "weights", where), f"{where}.weights", limits.TENSORS)
        return cls(
            {name: _dims(value, f"{where}.ranges.{name}") for name, value in ranges.items()},
            inputs,
            outputs,
            graph,
            tuple(_weight(w, f"{where}.weights[{i}]", weight_region) for i, w in enumerate(listed)),
        )


def _ports(data: object, where: str) -> tuple[Port, ...]:
    ports = []
    for i, entry in enumerate(items(data, where, limits.PORTS)):
        at = f"{where}[{i}]"
        if len(items(entry, at, 2)) != 2:
            raise Malformed(f"{at} must be [name, dtype]")
        ports.append(Port(text(entry[0], f"{at} name"), _dtype(entry[1], f"{at} dtype")))
    return tuple(ports)


def _dtype(value: object, where: str) -> str:
    dtype = text(value, where)
    if dtype not in limits.ITEMSIZE:
        raise Malformed(f"{where} is {dtype!r}; allowed: {', '.join(limits.ITEMSIZE)}")
    return dtype


def _dims(data: object, where: str) -> tuple[DimRange, ...]:
    dims = []
    for i, entry in enumerate(items(data, where, limits.RANK)):
        at = f"{where}[{i}]"
        if len(items(entry, at, 2)) != 2:
            raise Malformed(f"{at} must be [lo, hi]")
        lo = integer(entry[0], f"{at} lo", 1, limits.BLOCK_DIM * limits.TENSORS)
        hi = entry[1] if entry[1] == UNBOUNDED else integer(entry[1], f"{at} hi", lo, limits.BLOCK_DIM * limits.TENSORS, " (>= lo, or -1)")
        dims.append((lo, hi))
    return tuple(dims)


def _weight(data: object, where: str, region: int) -> WeightEntry:
    if len(items(data, where, 5)) != 5:
        raise Malformed(f"{where} must be [name, digest, dtype, shape, offset]")
    name, digest, dtype, shape, offset = data  # type: ignore[misc]
    shape = tuple(integer(d, f"{where} shape[{i}]", 0, region) for i, d in enumerate(items(shape, f"{where} shape", limits.RANK)))
    entry = WeightEntry(text(name, f"{where} name"), text(digest, f"{where} digest"), _dtype(dtype, f"{where} dtype"), shape,
                        integer(offset, f"{where} offset", 0, region, " (within the weight region)"))
    if entry.size > region - entry.offset:
        raise Malformed(f"{where} [{entry.offset}, {entry.offset + entry.size}) lies outside the {region}-byte weight region")
    return entry
