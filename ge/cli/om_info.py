"""What `ge atc --mode=1|5|6` shows of a model: JSON documents and the information tables.

- `om_json`: an offline model as JSON (`--mode=1 --om=X.om`). The `.om` keeps no
  `ascend_graph` graph, only what the build made of it, so "the graph" is the
  kernel-level one: each KERNEL task with its kernel, the graph ops fused into it
  (their ONNX names and op types, from the kernel's compute region) and the tensors it
  reads and writes (named by the memory plan). Beside it: every task, every kernel
  (name, op types, block_dim, core type, impl mode, tiling, workspace, arguments),
  the memory plan (regions, candidates, placements), inputs/outputs, the options it
  was built with and the build record.
- `onnx_json`: an ONNX model as JSON (`--mode=1 --om=X.onnx --framework=5`), by
  protobuf's `json_format.MessageToJson`, ONNX's own JSON mapping. A tensor of more
  than `DATA_SHOWN` elements (initializers, Constant values, at any depth) has its
  data left out and says so in its `docString`, with its byte count and SHA-256, so
  the document stays small and still tells two weights apart.
- `dump_json`: a graph dump as JSON (`--mode=5`): every op of each
  `ascend_graph.graph` with its name, op type, inputs (`producer:index`, as GE's JSON
  dumps name them), output types and attributes.
- `show`: `--mode=6`'s tables.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    import onnx
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.ir import Attribute, Operation, SSAValue

    from ge.om import Model

DATA_SHOWN = 16
"""Tensors of up to this many elements (shapes, axes, scalars) keep their data in `onnx_json`."""


# ---------------------------------------------------------------------- --mode=1 .om


def om_json(model: Model, path: str) -> dict[str, object]:
    from dialects.ascend_graph import AscendOp
    from dialects.ascend_kernel import KernelOp
    from ge.cli.gears import gears_json
    from ge.om.tasks import KernelTask

    description = model.description()
    kernels = {op.sym_name.data: op for op in model.kernel_module().ops if isinstance(op, KernelOp)}
    names = [p.name for p in model.memory.placements]
    graph = [
        {
            "name": task.name,
            "kernel": task.kernel,
            "stream": task.stream,
            "ops": [{"name": op.label, "type": op.op_type} for op in kernels[task.kernel].compute.block.ops if isinstance(op, AscendOp)],
            "inputs": [names[a.tensor] for a in task.inputs],
            "outputs": [names[a.tensor] for a in task.outputs],
        }
        for task in model.tasks
        if isinstance(task, KernelTask)
    ]
    return {
        "om": path,
        "format_version": description["format_version"],
        "soc_version": model.soc_version,
        "options": model.options,
        "build": model.build,
        "inputs": description["inputs"],
        "outputs": description["outputs"],
        "graph": graph,
        "streams": model.streams,
        "events": model.events,
        "tasks": description["tasks"],
        "kernels": [_kernel_json(op) for op in kernels.values()],
        "memory": description["memory"],
        "shapes": gears_json(model),
    }


def _kernel_json(op) -> dict[str, object]:
    from ge.core import dtypes

    return {
        "name": op.sym_name.data,
        "op_types": [t.data for t in op.op_types],
        "block_dim": op.block_dim.value.data,
        "core_type": op.core_type.data,
        "impl_mode": op.impl_mode.data,
        "tiling": op.parameters,
        "workspace": op.workspace.value.data,
        "args": [
            {"kind": a.kind.data, "dtype": dtypes.name(a.dtype), "shape": list(a.shape.get_values()), "format": a.format.data}
            for a in op.args
        ],
    }


# ------------------------------------------------------------------ --mode=1 .onnx


def onnx_json(model: onnx.ModelProto) -> str:
    """The model as protobuf's JSON, large tensors' data left out (see the module's docstring)."""
    from google.protobuf import json_format

    from ge.core.weights import graph_tensors

    for tensor in graph_tensors(model.graph):
        _summarise(tensor)
    return json_format.MessageToJson(model, indent=1)


DATA_FIELDS = ("raw_data", "float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")


def _summarise(tensor: onnx.TensorProto) -> None:
    elements = 1
    for d in tensor.dims:
        elements *= d
    if elements <= DATA_SHOWN:
        return
    digest = hashlib.sha256(tensor.SerializeToString()).hexdigest()
    for name in DATA_FIELDS:
        tensor.ClearField(name)
    note = f"ge: data of {elements} elements left out (sha256 of the tensor as stored: {digest})"
    tensor.doc_string = f"{tensor.doc_string}; {note}" if tensor.doc_string else note


# ---------------------------------------------------------------------- --mode=5


def dump_json(module: ModuleOp, path: str) -> dict[str, object]:
    from dialects.ascend_graph import GraphOp

    return {
        "dump": path,
        "graphs": [{"name": g.sym_name.data, "ops": _ops_json(g.body.block.ops)} for g in module.ops if isinstance(g, GraphOp)],
    }


def _ops_json(ops) -> list[dict[str, object]]:
    producers: dict[SSAValue, str] = {}
    listed = []
    for op in ops:
        name = _name(op)
        for i, result in enumerate(op.results):
            producers[result] = f"{name}:{i}"
        listed.append(
            {
                "name": name,
                "type": getattr(op, "OP_TYPE", op.name),
                "op": op.name,
                "inputs": [producers.get(v, str(v)) for v in op.operands],
                "outputs": [_type_json(r.type) for r in op.results],
                "attrs": {k: _attr(v) for k, v in (*op.properties.items(), *op.attributes.items()) if k != "name"},
            }
        )
    return listed


def _name(op: Operation) -> str:
    name = op.properties.get("name")
    return name.data if name is not None else op.name  # type: ignore[attr-defined]


def _type_json(type: Attribute) -> dict[str, object] | str:
    from xdsl.dialects.builtin import TensorType

    from dialects.ascend_graph import format_of
    from dialects.shapes import DYN
    from ge.core import dtypes

    if not isinstance(type, TensorType):
        return str(type)
    shape = ["?" if d == DYN else d for d in type.get_shape()]
    origin = "NCHW" if len(shape) == 4 else "ND"  # as a kernel argument without a format is read
    return {"dtype": dtypes.name(type.element_type), "shape": shape, "format": format_of(type) or origin}


def _attr(value: Attribute) -> object:
    from xdsl.dialects.builtin import IntegerAttr, StringAttr

    if isinstance(value, StringAttr):
        return value.data
    if isinstance(value, IntegerAttr):
        return value.value.data
    return str(value)


# ---------------------------------------------------------------------- --mode=6


def show(model: Model, path: str, console: Console) -> None:
    """The key facts of a `.om`: SoC, options, ports, memory, counts, what it was built for."""
    from ge.om.memory import human_bytes
    from ge.om import Region
    from ge.om.tasks import KernelTask

    build = model.build
    console.print(f"[bold]{path}[/]: .om format {model.description()['format_version']}, built for [bold]{model.soc_version}[/]", soft_wrap=True)
    options = Table(title="build options", title_justify="left")
    options.add_column("option")
    options.add_column("value")
    for name, value in sorted(model.options.items()):
        options.add_row(f"--{name}", str(value))
    console.print(options)

    for title, ports in (("inputs", model.inputs), ("outputs", model.outputs)):
        table = Table(title=title, title_justify="left")
        for column in ("name", "dtype", "shape", "format", "origin shape", "bytes"):
            table.add_column(column, justify="right" if column == "bytes" else "left")
        for p in ports:
            origin = f"{list(p.origin_shape)} {p.origin_format}"
            table.add_row(p.name, p.dtype, str(list(p.shape)), p.format, origin, f"{p.size:,}")
        console.print(table)

    plan = model.memory
    memory = Table(title=f"memory ({plan.strategy})", title_justify="left")
    memory.add_column("region")
    memory.add_column("bytes", justify="right")
    memory.add_column("")
    for region, label in ((Region.FEATURE_MAP, "feature map"), (Region.WEIGHT, "weights"), (Region.INPUT, "inputs"), (Region.OUTPUT, "outputs")):
        memory.add_row(label, f"{plan.sizes[region]:,}", human_bytes(plan.sizes[region]))
    memory.add_row("total", f"{plan.total:,}", human_bytes(plan.total), style="bold")
    console.print(memory)

    kinds = Counter(t.KIND for t in model.tasks)
    launches = [t for t in model.tasks if isinstance(t, KernelTask)]
    console.print(
        f"kernels: {len({t.kernel for t in launches})}, tasks: {len(model.tasks)} "
        f"({', '.join(f'{k} {n}' for k, n in kinds.most_common())}), streams: {model.streams}, event ids: {model.events}",
        soft_wrap=True,
    )
    virtual = build.get("virtual_instance")
    if isinstance(virtual, dict):
        console.print(
            f"built for virtual instances: slices of {', '.join(map(str, virtual['slice_sizes']))} AI cores, "
            f"every block_dim a multiple of {virtual['block_dim_multiple']}",
            soft_wrap=True,
        )
    else:
        console.print("built for the whole chip (not for virtual instances)")
    from ge.cli import gears

    gears.show(model, console)
