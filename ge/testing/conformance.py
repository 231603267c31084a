"""The ONNX backend node tests as a conformance figure with a fixed denominator.

The onnx wheel ships about 1,800 single-node (and function-expanded) test cases under
`onnx/backend/test/data/node/<case>/`: a `model.onnx` and data sets of `input_*.pb` /
`output_*.pb`. Two classes of them are measured:

- the **core class** (`Case.core`), fixed in advance and independent of what we
  implement: the default domain only at opsets 7 to 26, tensors in and out, element
  types numpy holds natively (bool, the integers, float16/32/64, bfloat16), no
  training cases and no sequence or optional ops. onnxruntime's pass rate on the
  same class is the peer figure (benchmarks/conformance.py measures it);
- the older **supported class** (`Case.supported`): core cases whose every op has an
  importer converter. Its figure only says how well the implemented ops work.

A case is run on every data set in one of two ways (`Route`): imported and executed by
the reference interpreter, or compiled (`ge.compile`, precision_mode
must_keep_origin_dtype so that the dtypes are the model's) and simulated
(`ge.Session`). Outputs are compared as onnx's backend runner compares them:
`assert_allclose(rtol=1e-3, atol=1e-7)` for floats with NaNs in the same places,
exact equality otherwise, with the same shape and dtype.

The importer, like ATC's static `*D` ops, needs axes, shapes, pads, scales and
similar inputs to be constants, which many node tests feed as graph inputs. When an
import names such an input, the graph inputs it depends on are frozen to the data
set's values (made initializers) and the import is retried: a case passes "as fed"
when it needed no freezing.
"""

from __future__ import annotations

import enum
import re
import textwrap
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnx.backend.test
from onnx import numpy_helper

NODE_DIR = Path(onnx.backend.test.__file__).parent / "data" / "node"
CORE_OPSETS = (7, 26)
STANDARD_TYPES = frozenset(
    getattr(onnx.TensorProto, name)
    for name in ["BOOL", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64", "FLOAT16", "BFLOAT16", "FLOAT", "DOUBLE"]
)
SEQUENCE_OPS = frozenset(
    ["SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert", "SequenceLength", "SequenceMap", "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalGetElement", "OptionalHasElement"]
)
RTOL, ATOL = 1e-3, 1e-7
_MUST_BE_CONSTANT = re.compile(r"input \d+ \([^)]*, '(?P<value>[^']*)'\) must be a constant")


class Route(enum.Enum):
    """How a case is run."""

    REFERENCE = "import + reference"
    COMPILED = "compile + simulate"


@dataclass(frozen=True)
class Case:
    name: str
    ops: frozenset[str]
    opset: int
    not_core: str = ""  # why the case is outside the core class: empty when it is in
    missing: tuple[str, ...] = ()  # its ops without an importer converter

    @property
    def core(self) -> bool:
        return not self.not_core

    @property
    def supported(self) -> bool:
        return self.core and not self.missing


@dataclass(frozen=True)
class Outcome:
    reason: str  # empty when the case passes
    frozen: tuple[str, ...] = ()  # inputs frozen to constants for the import
    refused: bool = False  # declined with a clear ModelError (a named, known limitation)

    @property
    def passed(self) -> bool:
        return not self.reason


def _element_types(graph: onnx.GraphProto) -> set[int]:
    """The element types of the graph's inputs, outputs, constants and casts."""
    types = {v.type.tensor_type.elem_type for v in [*graph.input, *graph.output] if v.type.HasField("tensor_type")}
    types |= {t.data_type for t in graph.initializer}
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                types.add(attr.t.data_type)
            if node.op_type == "Cast" and attr.name == "to":
                types.add(attr.i)
    return types - {0}


def _not_core(name: str, model: onnx.ModelProto) -> str:
    graph = model.graph
    domains = {o.domain for o in model.opset_import} - {"", "ai.onnx"}
    if domains:
        return "domain " + ", ".join(sorted(domains))
    opset = _opset(model)
    if not CORE_OPSETS[0] <= opset <= CORE_OPSETS[1]:
        return f"opset {opset}"
    if "training" in name:
        return "training"
    if any(not v.type.HasField("tensor_type") for v in [*graph.input, *graph.output]):
        return "sequence/optional values"
    if any(n.op_type in SEQUENCE_OPS for n in graph.node):
        return "sequence/optional ops"
    other = _element_types(graph) - STANDARD_TYPES
    if other:
        return "element types " + ", ".join(sorted(onnx.TensorProto.DataType.Name(t) for t in other))
    return ""


def _opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def scan(directory: Path, converters: Mapping[str, object]) -> Case:
    model = onnx.load(str(directory / "model.onnx"), load_external_data=False)
    ops = frozenset(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}" for n in model.graph.node)
    return Case(directory.name, ops, _opset(model), _not_core(directory.name, model), tuple(sorted(ops - set(converters))))


def all_cases() -> list[Case]:
    from ge.frontend.onnx_ops import CONVERTERS

    return [scan(d, CONVERTERS) for d in sorted(NODE_DIR.iterdir()) if (d / "model.onnx").exists()]


def _read_tensor(path: Path) -> np.ndarray:
    proto = onnx.TensorProto()
    proto.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(proto)


def data_sets(directory: Path, graph: onnx.GraphProto) -> Iterator[tuple[str, dict[str, np.ndarray], dict[str, np.ndarray]]]:
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


def freeze(model: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """A copy of `model` whose inputs named in `values` are initializers holding them."""
    frozen = onnx.ModelProto()
    frozen.CopyFrom(model)
    kept = [v for v in frozen.graph.input if v.name not in values]
    del frozen.graph.input[:]
    frozen.graph.input.extend(kept)
    frozen.graph.initializer.extend(numpy_helper.from_array(a, name) for name, a in values.items())
    return frozen


def _import(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], frozen: set[str]):
    """Import `model`, freezing to `feeds` the inputs the importer needs as constants;
    `frozen` grows in place with the inputs frozen."""
    import ge
    from ge.core.errors import ModelError

    while True:
        try:
            return ge.load_onnx(freeze(model, {n: feeds[n] for n in sorted(frozen)}) if frozen else model)[0]
        except ModelError as error:
            needed = _MUST_BE_CONSTANT.search(str(error))
            sources = _inputs_upstream(model.graph, needed["value"]) - frozen if needed else set()
            if not sources:
                raise
            frozen |= sources


def mismatch(name: str, got: np.ndarray, want: np.ndarray) -> str:
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


def run_case(name: str, route: Route = Route.REFERENCE) -> Outcome:
    """Run one case on each of its data sets."""
    from ge.core.errors import ModelError

    directory = NODE_DIR / name
    model = onnx.load(str(directory / "model.onnx"))
    frozen: set[str] = set()
    for data_set, feeds, expected in data_sets(directory, model.graph):
        try:
            module = _import(model, feeds, frozen)
        except Exception as error:
            return Outcome(f"{data_set}: import: {_brief(error)}", tuple(sorted(frozen)), isinstance(error, ModelError))
        inputs = {k: v for k, v in feeds.items() if k not in frozen}
        try:
            with np.errstate(all="ignore"):
                actual = _execute(module, inputs, route)
        except Exception as error:
            stage = "run" if route is Route.REFERENCE else "compile/simulate"
            return Outcome(f"{data_set}: {stage}: {_brief(error)}", tuple(sorted(frozen)), isinstance(error, ModelError))
        for out, want in expected.items():
            if out not in actual:
                return Outcome(f"{data_set}: output '{out}' missing from the results {sorted(actual)}", tuple(sorted(frozen)))
            reason = mismatch(out, actual[out], want)
            if reason:
                return Outcome(f"{data_set}: {reason}", tuple(sorted(frozen)))
    return Outcome("", tuple(sorted(frozen)))


def _execute(module, inputs: Mapping[str, np.ndarray], route: Route) -> dict[str, np.ndarray]:
    import ge

    if route is Route.REFERENCE:
        return ge.reference.run(module, inputs)
    model = ge.compile(module, {"precision_mode": "must_keep_origin_dtype", "soc_version": "Ascend910B1"})
    with ge.Session() as session:
        return dict(session.run(model, inputs).outputs)


def _ranked(counts: Counter) -> str:
    return ", ".join(f"{key} {n}" for key, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def figures(cases: list[Case], results: Mapping[str, Outcome]) -> dict[str, tuple[int, int]]:
    """(passed, denominator) for the core class, as fed and with freezing, and for the
    supported class."""
    core = [c for c in cases if c.core]
    supported = [c for c in core if c.supported]
    passed = [c for c in core if c.name in results and results[c.name].passed]
    return {
        "core": (len(passed), len(core)),
        "core as fed": (sum(not results[c.name].frozen for c in passed), len(core)),
        "supported": (sum(c.supported for c in passed), len(supported)),
    }


def report(title: str, cases: list[Case], results: Mapping[str, Outcome]) -> str:
    """The figures, what is outside the core class, per-op counts and every failure."""
    fig = figures(cases, results)
    core = [c for c in cases if c.core]

    def pct(key: str) -> str:
        n, d = fig[key]
        return f"{n} / {d} ({n / max(d, 1):.1%})"

    outside = [c for c in cases if not c.core]
    missing = Counter(op for c in core for op in c.missing)
    lines = [
        f"{len(cases)} node tests in onnx {onnx.__version__}; core class {len(core)} "
        f"(opsets {CORE_OPSETS[0]}-{CORE_OPSETS[1]}, default domain, standard element types, no training, "
        "no sequence/optional values or ops).",
        f"Core class passed: {pct('core')}; as fed (no input frozen to a constant): {pct('core as fed')}.",
        f"Supported class (core cases whose ops all have a converter) passed: {pct('supported')}.",
        "",
        f"Outside the core class: {len(outside)}: " + _ranked(Counter(c.not_core.split(" ")[0] for c in outside)) + ".",
        "- ops without a converter (core cases): " + (_ranked(missing) or "none"),
    ]
    lines = [textwrap.fill(line, 110, subsequent_indent="  ") for line in lines]
    per_op: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for c in core:
        for op in c.ops:
            per_op[op][0] += results[c.name].passed
            per_op[op][1] += 1
    lines += ["", "## Per op: passed / core cases containing the op", ""]
    lines.append(textwrap.fill(", ".join(f"{op} {p}/{t}" for op, (p, t) in sorted(per_op.items())), 110))
    failures: dict[str, list[str]] = defaultdict(list)
    for c in core:
        result = results[c.name]
        if not result.passed:
            failures["+".join(sorted(c.ops))].append(f"  - {c.name}: {result.reason}")
    lines += ["", "## Failures, grouped by the ops of the case", ""]
    for ops, entries in sorted(failures.items()):
        lines += [f"- {ops} ({len(entries)})", *entries]
    return f"# {title}\n\n" + "\n".join(lines) + "\n"
