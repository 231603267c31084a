"""`ge compare`: a run's dump against onnxruntime's per-node values, to find where accuracy is lost.

    ge run model.om --input x=x.npy --dump_path dump/
    ge compare dump/0 model.onnx --input x=x.npy

Each dumped kernel output (`manifest.json`, `ge.sim.dump`) is matched to the output
of the ONNX node its kernel ends with: the last of the kernel's fused op names that
is a node of the model (a fused conv+add+relu gives relu's output; the TransData and
Cast ops the compile adds name no node and are skipped). A node folded into the op
before it leaves no name behind (a BatchNormalization folded into its Conv: the
kernel is named after the conv, its value is the BN's), so the match moves on to a
node's only consumer while that is a `FOLDED` type named by no dumped kernel. onnxruntime computes every
node's output on the same inputs (a copy of the model with every node output made a
graph output). The table gives per op the max abs error, the max relative error
(|dump - ort| / |ort|, over the elements where ort is not 0), the cosine similarity,
and whether the error is within the dump's dtype tolerance: a max abs error at most
`rtol` times the largest |ort| value (at least 1), and a cosine similarity of at
least `COSINE`. The first op past its tolerance, in task order, is the first
diverging op: where to look (its precision, or the fusion that made it).

onnxruntime is a test and benchmark dependency, not a runtime one: the command
imports it when it runs and says how to install it when it is missing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from ge.core.errors import InputError, ModelError, OptionError

if TYPE_CHECKING:
    import numpy as np

console = Console(soft_wrap=True)

RTOL = {"float16": 1e-2, "bfloat16": 4e-2, "float32": 1e-4, "float64": 1e-8}
"""Allowed max abs error relative to the largest value, by dumped dtype: a few units in
the last place of a float16 (11 bits) or bfloat16 (8 bits) value accumulated over a net."""
MANIFEST_FIELDS = frozenset(("task", "ops", "op_types", "tensor", "index", "dtype", "file"))
COSINE = 0.99
FOLDED = frozenset(("BatchNormalization", "Identity", "Dropout"))
"""ONNX node types the compile folds into the op before them, dropping their names."""
"""The least cosine similarity of a matching output (CANN's accuracy comparison flags less)."""


@dataclass(frozen=True)
class Row:
    """One dumped output against onnxruntime's."""

    task: int
    op: str
    op_type: str
    dtype: str
    max_abs: float
    max_rel: float
    cosine: float
    limit: float
    """The max abs error allowed."""

    @property
    def ok(self) -> bool:
        return self.cosine >= COSINE and self.max_abs <= self.limit


def compare(
    dump: Annotated[Path, typer.Argument(help="A dump folder (dump_path/<step>, with manifest.json), or dump_path itself for step 0.", show_default=False)],
    model: Annotated[Path, typer.Argument(help="The ONNX model the .om was compiled from.", show_default=False)],
    inputs: Annotated[
        list[str] | None,
        typer.Option("--input", help="name=FILE.npy for each graph input, as given to ge run (FILE.npy alone for one input)."),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option("--seed", help="Without --input: ge run's generated inputs of this seed (zeros without it).", show_default=False),
    ] = None,
) -> None:
    """Compare a dump with onnxruntime's per-node outputs: errors per op and the first diverging op."""
    entries = read_manifest(dump)
    if not model.is_file():
        raise OptionError(f"'{model}': no such ONNX model file")
    try:
        import onnxruntime
    except ImportError:
        raise OptionError("ge compare needs onnxruntime, which is not installed: pip install onnxruntime") from None
    import numpy as np
    import onnx

    proto = onnx.load(str(model))
    names = [i.name for i in proto.graph.input if i.name not in {t.name for t in proto.graph.initializer}]
    if inputs:
        if seed is not None:
            raise OptionError("--seed makes inputs for a compare without --input; give one or the other")
        from ge.cli.run import read_inputs

        feeds = read_inputs(inputs, names)
    else:
        from ge.core.inputs import describe, generated

        feeds = generated(_specs(proto, names), seed)
        console.print(f"no --input: comparing on generated inputs, {describe(seed)} (as ge run makes them)")
    reference = _node_outputs(onnxruntime, proto, feeds)
    matched = match(entries, proto)
    rows = []
    for entry, op, tensor in matched:
        value = np.load(Path(entry["folder"]) / entry["file"], allow_pickle=False)
        rows.append(_row(entry, op, value, reference[tensor]))
    print_table(rows, sum(e["tensor"] == "output" for e in entries) - len(matched))


def match(entries: list[dict], proto) -> list[tuple[dict, str, str]]:
    """(entry, ONNX node, its output tensor) of each dumped output that names a node."""
    nodes = {n.name: list(n.output) for n in proto.graph.node if n.name}
    folded = _folded(proto, {op for e in entries for op in e["ops"]})
    matched = []
    for entry in entries:
        if entry["tensor"] != "output":
            continue
        op = next((o for o in reversed(entry["ops"]) if o in nodes), None)
        while op in folded:
            op = folded[op]
        if op is not None and entry["index"] < len(nodes[op]):
            matched.append((entry, op, nodes[op][entry["index"]]))
    return matched


def read_manifest(dump: Path) -> list[dict]:
    """The manifest's entries (each with the folder its file is in)."""
    folder = dump if (dump / "manifest.json").is_file() or not (dump / "0" / "manifest.json").is_file() else dump / "0"
    path = folder / "manifest.json"
    if not path.is_file():
        raise OptionError(f"'{dump}' holds no manifest.json; give a dump folder written by ge run --dump_path (dump_path/<step>)")
    try:
        entries = json.loads(path.read_text())["tensors"]
        for entry in entries:
            missing = MANIFEST_FIELDS - entry.keys()
            if missing:
                raise KeyError(", ".join(sorted(missing)))
            entry["folder"] = str(folder)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ModelError(f"'{path}' is not a dump manifest ({type(e).__name__}: {e})") from None
    return entries


def _folded(proto, dumped: set[str]) -> dict[str, str]:
    """{node: its only consumer} where that consumer is a `FOLDED` node no dumped kernel names."""
    consumers: dict[str, list] = {}
    for node in proto.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    graph_outputs = {o.name for o in proto.graph.output}
    folded = {}
    for node in proto.graph.node:
        after = [c for out in node.output for c in consumers.get(out, [])]
        if not node.name or len(after) != 1 or graph_outputs.intersection(node.output):
            continue
        if after[0].op_type in FOLDED and after[0].name and after[0].name not in dumped:
            folded[node.name] = after[0].name
    return folded


def _specs(proto, names: list[str]) -> list[tuple[str, np.dtype, list[int]]]:
    """(name, dtype, shape) of the ONNX graph inputs, for generated inputs."""
    from onnx import helper

    specs = []
    for i in proto.graph.input:
        if i.name not in names:
            continue
        t = i.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
        specs.append((i.name, helper.tensor_dtype_to_np_dtype(t.elem_type), shape))
    return specs


def _node_outputs(onnxruntime, proto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every node output of the model on `feeds`, by tensor name, from onnxruntime."""
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    graph = copy.graph
    have = {o.name for o in graph.output}
    for node in graph.node:
        graph.output.extend(onnx.ValueInfoProto(name=name) for name in node.output if name and name not in have)
        have.update(node.output)
    try:
        session = onnxruntime.InferenceSession(copy.SerializeToString(), providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(names, feeds)))
    except Exception as e:  # noqa: BLE001  (onnxruntime raises its own exception types for bad feeds and models)
        raise InputError(f"onnxruntime cannot run the model on these inputs: {e}") from None


def _row(entry: dict, op: str, value: np.ndarray, reference: np.ndarray) -> Row:
    import numpy as np

    dumped = np.asarray(value, np.float64)
    ref = np.asarray(reference, np.float64)
    if dumped.size != ref.size:
        raise ModelError(f"task {entry['task']} ({op}): the dump holds {list(dumped.shape)}, onnxruntime {list(ref.shape)}")
    dumped, ref = dumped.reshape(-1), ref.reshape(-1)
    error = np.abs(dumped - ref)
    nonzero = ref != 0
    norms = np.linalg.norm(dumped) * np.linalg.norm(ref)
    cosine = float(dumped @ ref / norms) if norms else float(np.array_equal(dumped, ref))
    scale = max(1.0, float(np.abs(ref).max(initial=0.0)))
    return Row(
        entry["task"], op, "+".join(entry.get("op_types", [])), entry["dtype"], float(error.max(initial=0.0)),
        float((error[nonzero] / np.abs(ref[nonzero])).max(initial=0.0)), cosine, RTOL.get(entry["dtype"], 0.0) * scale,
    )


def print_table(rows: list[Row], unmatched: int) -> None:
    table = Table(title=f"dump against onnxruntime ({len(rows)} kernel outputs matched to ONNX nodes)", title_justify="left")
    for column in ("task", "op", "type", "dtype", "max abs err", "max rel err", "cosine", "ok"):
        table.add_column(column, justify="right" if column in ("task", "max abs err", "max rel err", "cosine") else "left")
    for r in rows:
        table.add_row(str(r.task), r.op, r.op_type, r.dtype, f"{r.max_abs:.3g}", f"{r.max_rel:.3g}", f"{r.cosine:.6f}", "yes" if r.ok else "NO")
    wide = 90 + max((len(r.op) + len(r.op_type) for r in rows), default=0)
    Console(width=max(console.width, wide)).print(table)  # cut to a pipe's 80 columns, the op names would be lost
    if unmatched:
        console.print(f"{unmatched} dumped outputs name no ONNX node (TransData, Cast and other ops the compile adds)")
    first = next((r for r in rows if not r.ok), None)
    if first is None:
        console.print(f"all {len(rows)} ops match within their dtype's tolerance")
        return
    console.print(
        f"first diverging op: {first.op} ({first.op_type}, task {first.task}): max abs error {first.max_abs:.3g} "
        f"(allowed {first.limit:.3g} in {first.dtype}), cosine similarity {first.cosine:.6f} (at least {COSINE})"
    )
