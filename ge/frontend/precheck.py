"""The pre-check (`ge atc --mode=3`): every problem an import would meet, at once.

`load_onnx` stops at the first problem; a user fixing a model wants them all. The
pre-check runs the import's own steps (`onnx_importer.prepare`, `Importer.start`,
`convert_node`, `finish`), so what it reports is what the import says, word for word,
and a model passes exactly when `load_onnx` accepts it:
- a problem of the model as a whole (unreadable, no graph, an unsupported opset, a bad
  graph input, an undefined value, a cycle) stops it: no node can be checked without
  the graph; it is reported with no node.
- every node a graph output depends on is converted in order, each in a `try`: a node
  that fails is reported and its outputs become unknown.
- a node with an unknown input cannot be converted (a converter needs its inputs'
  types), so it is checked for support only (`onnx_importer.supported`: domain, op
  type, opset schema, arity, attribute names and kinds). An unsupported op behind
  another is found; a bad attribute *value* behind one is not, until the first is fixed.
- when no node failed, the import's last step runs (ONNX's checker and strict
  inference against our types, then verification).

No node's outputs are guessed (say, by ONNX's inference of the failed node): a guess
would make its users report problems of the guess, and ONNX's inference of a node it
finds inconsistent can abort the process (see `onnx_importer`).

Each problem is put in a category (`CATEGORIES`) read from where it arose and what its
message says; the messages are the import's own, so the table reads those.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import onnx

from ge.core.errors import ModelError
from ge.core.limits import LimitError
from ge.frontend.onnx_importer import _node_label, prepare, supported

MODEL = "model"
UNSUPPORTED_OP = "unsupported op"
BAD_ATTRIBUTE = "bad attribute"
CATEGORIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (UNSUPPORTED_OP, re.compile(r"^(op type \S+ (is unsupported|does not exist)|domain '.*' is unsupported)|semantics are not implemented")),
    ("inputs/outputs", re.compile(r"^has \d+ (inputs|outputs), needs|^input \d+ is missing|^needs at least one input|^output \d+ .* but the graph uses it")),
    (BAD_ATTRIBUTE, re.compile(r"attribute '")),
    ("dtype", re.compile(r"does not accept|type conflict|unsupported type|element type|must hold integers")),
    ("constant input", re.compile(r"must be a constant")),
)
"""The first whose pattern the message (after `node 'X' (Op): `) matches; else "bad
attribute" if it names one of the node's attributes (`axes` for `axis`), else
"shape" if it speaks of one (`SHAPE`), else "unsupported use"."""
SHAPE = re.compile(r"shape|dynamic|rank|\bdims?\b|\d-D\b")
UNSUPPORTED_USE = "unsupported use"
PLURAL = {"axis": "axes"}


@dataclass(frozen=True)
class Problem:
    """One reason the model cannot be imported: a node's (or the model's, `node` None)."""

    node: str | None
    op_type: str | None
    category: str
    message: str
    """The import's message, without the `node 'X' (Op): ` it starts with."""

    def __str__(self) -> str:
        where = f"node '{self.node}' ({self.op_type}): " if self.node is not None else ""
        return f"{where}{self.message}"


@dataclass
class CheckResult:
    """What the pre-check found: `problems` empty when the model imports."""

    model: str
    nodes: int = 0
    """The nodes a graph output depends on: those the import converts."""
    problems: list[Problem] = field(default_factory=list)
    support_only: list[str] = field(default_factory=list)
    """Nodes behind a failed one, checked for support only."""

    @property
    def passed(self) -> bool:
        return not self.problems

    @property
    def categories(self) -> dict[str, int]:
        """How many problems of each category, in the order they first occur."""
        return dict(Counter(p.category for p in self.problems))

    def to_json(self) -> dict[str, object]:
        return {
            "model": self.model,
            "result": "success" if self.passed else "failed",
            "nodes_checked": self.nodes,
            "nodes_checked_for_support_only": self.support_only,
            "problems": len(self.problems),
            "categories": self.categories,
            "details": [asdict(p) for p in self.problems],
        }


def precheck(
    model: str | os.PathLike | onnx.ModelProto, input_shape: str | Mapping[str, Sequence[int]] | None = None
) -> CheckResult:
    """Every problem `load_onnx(model, input_shape)` would meet; an `OptionError` (a bad
    `input_shape`) is the caller's, and raised."""
    result = CheckResult(os.fspath(model) if isinstance(model, str | os.PathLike) else "<memory>")
    try:
        importer, overrides, _ = prepare(model, input_shape)
        live = importer.start(overrides)
    except ModelError as e:
        result.problems.append(Problem(None, None, MODEL, e.args[0]))
        return result
    result.nodes = len(live)
    unknown: set[str] = set()
    graph = importer.graph
    for i in live:
        node = graph.node[i]
        label = _node_label(node, i)
        where = f"node '{label}' ({node.op_type})"
        behind = any(name in unknown for name in node.input)
        try:
            if behind:
                result.support_only.append(label)
                if supported(node, importer.opset, where) is None:
                    raise ModelError(f"{where}: op type {node.op_type} is unsupported")
            else:
                importer.convert_node(i)
        except ModelError as e:
            result.problems.append(_problem(e, node, label, where))
            behind = True
        if behind:
            unknown.update(o for o in node.output if o)
    if result.passed:
        try:
            importer.finish(live, overrides)
        except ModelError as e:
            result.problems.append(_node_problem(e, graph, live))
    return result


def _problem(error: ModelError, node: onnx.NodeProto, label: str, where: str) -> Problem:
    message = error.args[0].removeprefix(f"{where}: ")
    return Problem(label, node.op_type, _category(error, message, node), message)


_NODE = re.compile(r"^node '(.*?)' \((\S+)\): ")


def _node_problem(error: ModelError, graph: onnx.GraphProto, live: Sequence[int]) -> Problem:
    """A problem of the import's last step, which names its node when it has one."""
    match = _NODE.match(error.args[0])
    if match is None:
        return Problem(None, None, MODEL, error.args[0])
    label = match.group(1)
    node = next((graph.node[i] for i in live if _node_label(graph.node[i], i) == label), None)
    message = error.args[0][match.end() :]
    category = _category(error, message, node) if node is not None else "shape"
    return Problem(label, match.group(2), category, message)


def _category(error: ModelError, message: str, node: onnx.NodeProto) -> str:
    if isinstance(error, LimitError):
        return "limit"
    for category, pattern in CATEGORIES:
        if pattern.search(message):
            return category
    names = [a.name for a in node.attribute]
    names += [PLURAL[n] for n in names if n in PLURAL]
    if names and re.search(r"\b(" + "|".join(map(re.escape, names)) + r")\b", message):
        return BAD_ATTRIBUTE
    return "shape" if SHAPE.search(message) else UNSUPPORTED_USE
