"""Conformance: the ONNX backend node tests through import + reference interpreter.

The onnx 1.22.0 wheel ships ~1,800 single-node (and function-expanded) test cases
under `onnx/backend/test/data/node/<case>/`: a `model.onnx` and data sets of
`input_*.pb` / `output_*.pb`. A case is in scope when the importer says it can
take it: every node is a default-domain op it has a converter for
(`ge.frontend.onnx_ops.CONVERTERS`), the model's opset is at least its
`OPSET_MIN`, every element type is one it maps, and every graph input and output
is a tensor (sequence and optional values are not supported).

Each case in scope is imported and run on every data set, and its outputs are
compared with the shipped ones as onnx's own backend runner does:
`assert_allclose(rtol=1e-3, atol=1e-7)` for floats with NaNs in the same places,
exact equality for integers, bools and strings, and the same shape and dtype.

The importer, like ATC's static `*D` ops, needs axes, shapes, pads, scales and
similar inputs to be constants, which many node tests feed as graph inputs. When an
import names such an input, the graph inputs it depends on are frozen to the data
set's values (made initializers) and the import is retried; the report counts the
cases that needed this, and the pass rate without it.

`test_node[<case>]` shows each case's outcome; `test_conformance_summary` asserts
the pass rate over the cases in scope and the op coverage, and writes the report
(pass rate, out-of-scope reasons, per-op counts, every failure with its reason) to
`onnx_backend_report.md` in the model cache, which the terminal summary prints.
"""

from __future__ import annotations

import functools
import re
import textwrap
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnx.backend.test
import pytest
from ge.testing.real_models import BACKEND_REPORT
from onnx import numpy_helper

import ge
from ge.core.errors import ModelError
from ge.frontend.onnx_importer import OPSET_MIN
from ge.frontend.onnx_ops import CONVERTERS
from ge.frontend.tensors import element_type

NODE_DIR = Path(onnx.backend.test.__file__).parent / "data" / "node"
# The op types the importer has a converter for: its own statement of support.
SUPPORTED_OPS = frozenset(CONVERTERS)
MIN_PASS_RATE = 0.90
RTOL, ATOL = 1e-3, 1e-7
pytestmark = pytest.mark.slow
_MUST_BE_CONSTANT = re.compile(r"input \d+ \([^)]*, '(?P<value>[^']*)'\) must be a constant")
REQUIRED_OPS = frozenset(
    "Conv MatMul Gemm Add Sub Mul Div Pow Sqrt Exp Erf Tanh Sigmoid Relu LeakyRelu Clip HardSigmoid "
    "HardSwish Softmax ReduceMean ReduceSum ReduceMax BatchNormalization LayerNormalization MaxPool "
    "AveragePool GlobalAveragePool Reshape Transpose Flatten Squeeze Unsqueeze Concat Split Slice "
    "Gather Pad Resize Cast Where Expand Identity".split()
)


@dataclass(frozen=True)
class Case:
    name: str
    ops: frozenset[str]
    unsupported: str = ""  # why the case is out of scope: "ops", "opset", "element types", "values"
    detail: str = ""


def _element_types(graph: onnx.GraphProto) -> set[int]:
    """The element types of the graph's inputs, outputs, constants and casts."""
    types = {v.type.tensor_type.elem_type for v in [*graph.input, *graph.output]}
    types |= {t.data_type for t in graph.initializer}
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                types.add(attr.t.data_type)
            if node.op_type == "Cast" and attr.name == "to":
                types.add(attr.i)
    return types


def _unsupported_types(graph: onnx.GraphProto) -> list[str]:
    unsupported = []
    for elem in sorted(_element_types(graph) - {0}):
        try:
            element_type(elem, "value")
        except ModelError:
            unsupported.append(onnx.TensorProto.DataType.Name(elem))
    return unsupported


def _scan(directory: Path) -> Case:
    model = onnx.load(str(directory / "model.onnx"))
    graph = model.graph
    ops = frozenset(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}" for n in graph.node)
    kinds = {v.type.WhichOneof("value") for v in [*graph.input, *graph.output]} - {"tensor_type"}
    if kinds:
        return Case(directory.name, ops, "values", ", ".join(sorted(kinds)))
    missing = sorted(ops - SUPPORTED_OPS)
    if missing:
        return Case(directory.name, ops, "ops", ", ".join(missing))
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    if opset < OPSET_MIN:
        return Case(directory.name, ops, "opset", f"opset {opset} < {OPSET_MIN}")
    types = _unsupported_types(graph)
    return Case(directory.name, ops, "element types" if types else "", ", ".join(types))


ALL_CASES = [_scan(d) for d in sorted(NODE_DIR.iterdir()) if (d / "model.onnx").exists()]
CASES = {c.name: c for c in ALL_CASES if not c.unsupported}


def _read_tensor(path: Path) -> np.ndarray:
    proto = onnx.TensorProto()
    proto.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(proto)


def _data_sets(directory: Path, graph: onnx.GraphProto):
    initializers = {i.name for i in graph.initializer}
    inputs = [v.name for v in graph.input if v.name not in initializers]
    outputs = [v.name for v in graph.output]
    for data in sorted(directory.glob("test_data_set_*")):
        feeds = {name: _read_tensor(data / f"input_{i}.pb") for i, name in enumerate(inputs)}
        expected = {name: _read_tensor(data / f"output_{i}.pb") for i, name in enumerate(outputs)}
        yield data.name, feeds, expected


def _inputs_upstream(graph: onnx.GraphProto, value: str) -> set[str]:
    """The graph inputs that `value` depends on."""
    producer = {out: node for node in graph.node for out in node.output}
    inputs = {v.name for v in graph.input}
    found, stack, seen = set(), [value], set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in inputs:
            found.add(name)
        elif name in producer:
            stack.extend(i for i in producer[name].input if i)
    return found


def _freeze(model: onnx.ModelProto, values: dict[str, np.ndarray]) -> onnx.ModelProto:
    """A copy of `model` whose inputs named in `values` are initializers holding them."""
    frozen = onnx.ModelProto()
    frozen.CopyFrom(model)
    kept = [v for v in frozen.graph.input if v.name not in values]
    del frozen.graph.input[:]
    frozen.graph.input.extend(kept)
    frozen.graph.initializer.extend(numpy_helper.from_array(a, name) for name, a in values.items())
    return frozen


def _import(model: onnx.ModelProto, feeds: dict[str, np.ndarray], frozen: set[str]):
    """Import `model`, freezing to `feeds` the inputs the importer needs as constants.

    `frozen` grows in place with the inputs frozen.
    """
    while True:
        try:
            return ge.load_onnx(_freeze(model, {n: feeds[n] for n in sorted(frozen)}) if frozen else model)[0]
        except ModelError as error:
            needed = _MUST_BE_CONSTANT.search(str(error))
            sources = _inputs_upstream(model.graph, needed["value"]) - frozen if needed else set()
            if not sources:
                raise
            frozen |= sources


def _mismatch(name: str, got: np.ndarray, want: np.ndarray) -> str:
    """Why `got` is not `want`, or an empty string when it matches."""
    got = np.asarray(got)
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"output '{name}' is {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
    if want.dtype.kind in "biuUSO":
        wrong = int(np.sum(got != want))
        return f"output '{name}': {wrong} of {want.size} elements differ" if wrong else ""
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    nan_got, nan_want = np.isnan(got64), np.isnan(want64)
    if (nan_got != nan_want).any():
        return f"output '{name}': NaN at {int(np.sum(nan_got != nan_want))} different positions"
    close = np.isclose(got64, want64, rtol=RTOL, atol=ATOL) | nan_want
    if close.all():
        return ""
    diff = np.where(close, 0.0, np.abs(got64 - want64))
    worst = np.unravel_index(np.argmax(diff), diff.shape)
    return (
        f"output '{name}': {int(np.sum(~close))} of {want.size} elements differ, "
        f"worst at {list(map(int, worst))}: {got64[worst]:.6g} vs {want64[worst]:.6g}"
    )


def _brief(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:300]}"


@dataclass(frozen=True)
class Outcome:
    reason: str  # empty when the case passes
    frozen: tuple[str, ...]  # inputs frozen to constants for the import
    refused: bool = False  # the importer declined the case with a clear ModelError


@functools.cache
def outcome(name: str) -> Outcome:
    """Import and run one case on each of its data sets."""
    frozen: set[str] = set()
    reason, refused = _run_case(NODE_DIR / name, frozen)
    return Outcome(reason, tuple(sorted(frozen)), refused)


def _run_case(directory: Path, frozen: set[str]) -> tuple[str, bool]:
    """An empty string when every data set matches, else why not; and whether the
    importer refused the case with a ModelError (a named, known limitation)."""
    model = onnx.load(str(directory / "model.onnx"))
    for data_set, feeds, expected in _data_sets(directory, model.graph):
        try:
            module = _import(model, feeds, frozen)
        except Exception as error:
            return f"{data_set}: import: {_brief(error)}", isinstance(error, ModelError)
        try:
            with np.errstate(all="ignore"):
                actual = ge.reference.run(module, {k: v for k, v in feeds.items() if k not in frozen})
        except Exception as error:
            return f"{data_set}: run: {_brief(error)}", False
        for out, want in expected.items():
            if out not in actual:
                return f"{data_set}: output '{out}' missing from the results {sorted(actual)}", False
            reason = _mismatch(out, actual[out], want)
            if reason:
                return f"{data_set}: {reason}", False
    return "", False


@pytest.mark.parametrize("name", sorted(CASES))
def test_node(name: str) -> None:
    """A wrong answer or a crash fails; a clear refusal of an unsupported feature is
    skipped here and counted as a failure in the pass rate and the report."""
    result = outcome(name)
    if result.refused:
        pytest.skip(f"refused (counted as a failure in the conformance rate): {result.reason}")
    assert not result.reason, result.reason


def _ranked(counts: Counter) -> str:
    return ", ".join(f"{key} {n}" for key, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _report(results: dict[str, Outcome]) -> str:
    passed = [name for name, r in results.items() if not r.reason]
    frozen = [name for name in passed if results[name].frozen]
    out = [c for c in ALL_CASES if c.unsupported]
    lines = [
        f"{len(ALL_CASES)} node tests in onnx {onnx.__version__}; in scope {len(results)}; "
        f"passed {len(passed)} ({len(passed) / len(results):.1%}), failed {len(results) - len(passed)}.",
        f"Of the passes, {len(frozen)} needed axes/shape/pads-like graph inputs frozen to constants; "
        f"without freezing, {len(passed) - len(frozen)} pass ({(len(passed) - len(frozen)) / len(results):.1%}).",
        "",
        f"Out of scope: {len(out)}: " + _ranked(Counter(c.unsupported for c in out)) + ".",
        "- missing ops (cases): "
        + _ranked(Counter(op for c in out if c.unsupported == "ops" for op in c.ops - SUPPORTED_OPS)),
        "- element types (cases): "
        + _ranked(Counter(t for c in out if c.unsupported == "element types" for t in c.detail.split(", "))),
        "- values (cases): " + _ranked(Counter(c.detail for c in out if c.unsupported == "values")),
        "- opsets (cases): " + _ranked(Counter(c.detail for c in out if c.unsupported == "opset")),
    ]
    lines = [textwrap.fill(line, 110, subsequent_indent="  ") for line in lines]
    per_op: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for name, result in results.items():
        for op in CASES[name].ops:
            per_op[op][0] += not result.reason
            per_op[op][1] += 1
    lines += ["", "## Per op: passed / in-scope cases containing the op", ""]
    lines.append(textwrap.fill(", ".join(f"{op} {p}/{t}" for op, (p, t) in sorted(per_op.items())), 110))
    failures: dict[str, list[str]] = defaultdict(list)
    for name, result in sorted(results.items()):
        if result.reason:
            failures["+".join(sorted(CASES[name].ops))].append(f"  - {name}: {result.reason}")
    lines += ["", "## Failures, grouped by the ops of the case", ""]
    for ops, entries in sorted(failures.items()):
        lines += [f"- {ops} ({len(entries)})", *entries]
    return "\n".join(lines) + "\n"


def test_conformance_summary() -> None:
    results = {name: outcome(name) for name in sorted(CASES)}
    BACKEND_REPORT.parent.mkdir(parents=True, exist_ok=True)
    BACKEND_REPORT.write_text("# ONNX backend node tests: import + reference interpreter\n\n" + _report(results))
    assert REQUIRED_OPS <= SUPPORTED_OPS, f"unsupported: {sorted(REQUIRED_OPS - SUPPORTED_OPS)}"
    covered = {op for c in CASES.values() for op in c.ops}
    assert REQUIRED_OPS <= covered, f"no backend case in scope for {sorted(REQUIRED_OPS - covered)}"
    rate = sum(not r.reason for r in results.values()) / len(results)
    assert rate >= MIN_PASS_RATE, f"pass rate {rate:.1%} < {MIN_PASS_RATE:.0%}; see {BACKEND_REPORT}"
