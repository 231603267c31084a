"""The measured tables of `ge/sim/calibration_data/`: reading them strictly, fitting the
cost model's constants to them, and measuring how well a model predicts them.

Three CSV files (msKPP's published single-core measurements on 910B1/910B3/910_95):

- `mte_bandwidth.csv` (soc, path, size_kb, bandwidth_gbps, kind, repeat): a copy of
  `size_kb` KiB, or (kind=repeat) of `repeat` 512-byte fractals, at `bandwidth_gbps`.
  The GB/s are GiB/s: UB_TO_UB's 441 at 1.85 GHz is then exactly the 256 B/cycle of
  the UB port, L1_TO_L0A's 439 exactly 256 and L1_TO_L0B's 220 exactly 128.
- `mmad_throughput.csv` (soc, instr, m, k, n, ops_per_cycle): 2*m*k*n / cycles.
- `vector_throughput.csv` (soc, instr, dtypes, elements, bytes_per_cycle, repeat,
  cycles). The measured cycles are `repeat * 256 / bytes_per_cycle`: the `cycles`
  column agrees on 1588 of 1652 rows and is 0, a thousandfold, or half the rate's on
  the other 64 (VADD/VMUL/VMULS fp16, VCONV fp32->fp16), a recording error.

Fitting is least squares on relative error (`pred / measured - 1`, which bounds the
pull of a wild point), per part and path, per part, and per part, instruction and
dtypes; each piecewise form is fitted for every split of the points by size and the
split with the smallest error, charged for its extra constants, wins. Points a first
fit misses by more than 3x (recording errors) are left out of the second.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ge.core import soc as soc_profiles
from ge.core.errors import CalibrationError, GEError
from ge.core.files import published, read_text
from ge.sim.costs import (
    FRACTAL_BYTES,
    REFERENCE_SOC,
    REPEAT_BYTES,
    CostModel,
    Line,
    SocCosts,
    TransferFit,
    VectorFit,
    VectorKey,
    instruction_class,
    vector_features,
)

ENV_DIR = "GE_CALIBRATION_DIR"
GIB = 2**30
MEASURED_CLOCK_MHZ: dict[str, float] = {"Ascend910B1": 1850, "Ascend910B3": 1850, "Ascend910_95": 1650}
"""Clocks of the measured parts, from the calibration README (GB/s -> bytes per cycle)."""
GOAL_MEDIAN = 0.05
GOAL_P90 = 0.15
NOISE = 0.005
"""Relative error below which a fit is as good as the measurement (model selection)."""
OUTLIER = 3.0
"""A point a first fit misses by this factor is a recording error, left out of the refit."""

REFIT_NOTE = (
    "Fitted by `ge calibrate --fit [DIR]` from ge/sim/calibration_data (mte_bandwidth.csv, "
    "mmad_throughput.csv, vector_throughput.csv); rerun it after the tables change. "
    "Transfers: cycles = max over lines of latency + bytes / bytes_per_cycle (no rate: a floor). "
    "Cube: cycles = cube_latency + blocks of the cube shape, one per cycle. "
    "Vector: cycles = max(floor, start + per_repeat * repeats + misaligned * partial + refill * refills)."
)


# ------------------------------------------------------------------------------ points


@dataclass(frozen=True)
class TransferPoint:
    """A row of mte_bandwidth.csv: one copy and the GiB/s it reached."""

    file: str
    line: int
    soc: str
    path: str
    nbytes: float
    kind: str
    repeat: int | None
    gbps: float

    @property
    def group(self) -> str:
        return self.path

    @property
    def measured(self) -> float:
        return self.gbps

    @property
    def cycles(self) -> float:
        return self.nbytes / (self.gbps * GIB / (MEASURED_CLOCK_MHZ[self.soc] * 1e6))

    def predicted(self, part: SocCosts) -> float:
        if self.kind == "repeat":
            cycles = part.transfer_cycles(self.path, repeats=self.repeat)
        else:
            cycles = part.transfer_cycles(self.path, int(self.nbytes))
        return self.nbytes / cycles * part.clock_mhz * 1e6 / GIB


@dataclass(frozen=True)
class MmadPoint:
    """A row of mmad_throughput.csv: one mmad and the ops (2 per MAC) per cycle it reached."""

    file: str
    line: int
    soc: str
    instr: str
    m: int
    k: int
    n: int
    ops_per_cycle: float

    @property
    def group(self) -> str:
        return self.instr

    @property
    def measured(self) -> float:
        return self.ops_per_cycle

    @property
    def cycles(self) -> float:
        return 2 * self.m * self.k * self.n / self.ops_per_cycle

    def predicted(self, part: SocCosts) -> float:
        return 2 * self.m * self.k * self.n / part.mmad_cycles(self.m, self.k, self.n, _mmad_dtype(self.instr))


@dataclass(frozen=True)
class VectorPoint:
    """A row of vector_throughput.csv: one vector instruction and its cycles."""

    file: str
    line: int
    soc: str
    instr: str
    dtypes: str
    elements: int
    bytes_per_cycle: float
    repeat: int
    cycles_column: float

    @property
    def group(self) -> str:
        return self.instr

    @property
    def key(self) -> VectorKey:
        return VectorKey(self.instr, self.dtypes)

    @property
    def measured(self) -> float:
        return self.cycles

    @property
    def cycles(self) -> float:
        return self.repeat * REPEAT_BYTES / self.bytes_per_cycle

    def predicted(self, part: SocCosts) -> float:
        return part.vector_cycles(self.instr, self.dtypes, self.elements, repeat=self.repeat)


Point = TransferPoint | MmadPoint | VectorPoint

MMAD_DTYPES = {"FP16": "float16", "BF16": "bfloat16", "FP32": "float32"}
"""The tables' dtype spelling -> the SoC profiles' (INT8 -> int8 and the like by case)."""


def _mmad_dtype(instr: str) -> str:
    """MMAD_FP16_FP16_FP32 multiplies float16 (its first input dtype)."""
    parts = instr.split("_")
    if len(parts) < 2 or parts[0] != "MMAD" or not parts[1]:
        raise CalibrationError(f"{instr} is not a cube instruction (MMAD_<input dtype>_...)")
    return MMAD_DTYPES.get(parts[1], parts[1].lower())


# ------------------------------------------------------------------------------ tables


@dataclass(frozen=True)
class Tables:
    """The rows of the three tables."""

    transfers: tuple[TransferPoint, ...]
    mmad: tuple[MmadPoint, ...]
    vector: tuple[VectorPoint, ...]

    def by_file(self) -> dict[str, tuple[Point, ...]]:
        return {MTE_FILE: self.transfers, MMAD_FILE: self.mmad, VECTOR_FILE: self.vector}


MTE_FILE = "mte_bandwidth.csv"
MMAD_FILE = "mmad_throughput.csv"
VECTOR_FILE = "vector_throughput.csv"
COLUMNS: dict[str, tuple[str, ...]] = {
    MTE_FILE: ("soc", "path", "size_kb", "bandwidth_gbps", "kind", "repeat"),
    MMAD_FILE: ("soc", "instr", "m", "k", "n", "ops_per_cycle"),
    VECTOR_FILE: ("soc", "instr", "dtypes", "elements", "bytes_per_cycle", "repeat", "cycles"),
}


def default_dir() -> Path:
    """$GE_CALIBRATION_DIR, else the tables shipped with the package."""
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR])
    return Path(__file__).resolve().parent / "calibration_data"


def load(directory: Path) -> Tables:
    """The three tables of `directory`, every field checked (errors name file and line)."""
    if not directory.exists():
        raise CalibrationError(f"calibration directory {directory} does not exist (give DIR or set {ENV_DIR})")
    if not directory.is_dir():
        raise CalibrationError(f"{directory} is not a directory of calibration tables")
    return Tables(
        transfers=tuple(_transfer(r) for r in _rows(directory / MTE_FILE)),
        mmad=tuple(_mmad(r) for r in _rows(directory / MMAD_FILE)),
        vector=tuple(_vector(r) for r in _rows(directory / VECTOR_FILE)),
    )


@dataclass(frozen=True)
class _Row:
    file: str
    line: int
    fields: dict[str, str]

    def where(self) -> str:
        return f"{self.file} line {self.line}"

    def text(self, column: str) -> str:
        value = self.fields[column].strip()
        if not value:
            raise CalibrationError(f"{self.where()}: {column} is empty")
        return value

    def number(self, column: str) -> float:
        text = self.text(column)
        try:
            value = float(text)
        except ValueError:
            raise CalibrationError(f"{self.where()}: {column} {text!r} is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise CalibrationError(f"{self.where()}: {column} {text!r} is not a finite non-negative number")
        return value

    def positive(self, column: str) -> float:
        value = self.number(column)
        if value <= 0:
            raise CalibrationError(f"{self.where()}: {column} must be positive, not {self.fields[column].strip()}")
        return value

    def count(self, column: str) -> int:
        value = self.positive(column)
        if value != int(value):
            raise CalibrationError(f"{self.where()}: {column} {self.fields[column].strip()!r} is not a whole number")
        return int(value)


def _rows(path: Path) -> Iterable[_Row]:
    if not path.is_file():
        raise CalibrationError(f"{path}: missing (a calibration directory holds {', '.join(COLUMNS)})")
    columns = COLUMNS[path.name]
    with io.StringIO(read_text(path, "calibration table"), newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header) != columns:
            found = ",".join(header) if header else "nothing"
            raise CalibrationError(f"{path} line 1: columns are {found}; expected {','.join(columns)}")
        rows = []
        for fields in reader:
            line = reader.line_num
            if not any(field.strip() for field in fields):
                continue
            if len(fields) != len(columns):
                raise CalibrationError(f"{path.name} line {line}: {len(fields)} fields, expected {len(columns)}")
            rows.append(_Row(path.name, line, dict(zip(columns, fields, strict=True))))
    if not rows:
        raise CalibrationError(f"{path}: no rows")
    return rows


def _transfer(row: _Row) -> TransferPoint:
    kind = row.text("kind")
    if kind == "size_kb":
        nbytes, repeat = row.positive("size_kb") * 1024, None
    elif kind == "repeat":
        repeat = row.count("repeat")
        nbytes = repeat * FRACTAL_BYTES
    else:
        raise CalibrationError(f"{row.where()}: kind {kind!r} is neither size_kb nor repeat")
    return TransferPoint(
        row.file, row.line, row.text("soc"), row.text("path"), nbytes, kind, repeat, row.positive("bandwidth_gbps")
    )


def _mmad(row: _Row) -> MmadPoint:
    instr = row.text("instr")
    try:
        _mmad_dtype(instr)
    except CalibrationError as exc:
        raise CalibrationError(f"{row.where()}: {exc.args[0]}") from None
    m, k, n = (row.count(c) for c in ("m", "k", "n"))
    return MmadPoint(row.file, row.line, row.text("soc"), instr, m, k, n, row.positive("ops_per_cycle"))


def _vector(row: _Row) -> VectorPoint:
    instr, dtypes = row.text("instr").upper(), row.text("dtypes").upper()
    if not all(dtypes.split("_")):
        raise CalibrationError(f"{row.where()}: dtypes {dtypes!r} is not of the form FP16_FP16_FP16")
    return VectorPoint(
        row.file, row.line, row.text("soc"), instr, dtypes, row.count("elements"),
        row.positive("bytes_per_cycle"), row.count("repeat"), row.number("cycles"),
    )  # fmt: skip


# ----------------------------------------------------------------------------- fitting


def _weighted_lstsq(features: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Coefficients minimising sum((features @ c) / y - 1)^2."""
    coef, *_ = np.linalg.lstsq(features / y[:, None], np.ones_like(y), rcond=None)
    return coef


def _relative_sse(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.sum((pred / y - 1) ** 2))


def _score(sse: float, n: int, constants: int) -> float:
    """BIC on relative error, with the measurement noise as the floor of the error."""
    return n * math.log(sse / n + NOISE**2) + constants * math.log(max(n, 2))


def _line(x: np.ndarray, y: np.ndarray) -> Line:
    """The latency + bytes / rate line closest to the points, with both terms >= 0."""
    if len(x) == 1 or np.ptp(x) == 0:
        return Line(0.0, float(np.mean(x / y)))
    latency, per_byte = _weighted_lstsq(np.stack([np.ones_like(x), x], 1), y)
    if per_byte <= 0:
        return Line(float(np.median(y)), None)
    if latency < 0:
        (per_byte,) = _weighted_lstsq(x[:, None], y)
        return Line(0.0, float(1 / per_byte))
    return Line(float(latency), float(1 / per_byte))


def fit_transfer(nbytes: Sequence[float], cycles: Sequence[float]) -> TransferFit:
    """The max-of-lines fit of one path: one line, a floor then a line, or two lines."""
    order = np.argsort(nbytes, kind="stable")
    x, y = np.asarray(nbytes, float)[order], np.asarray(cycles, float)[order]
    n = len(x)
    candidates: list[tuple[tuple[Line, ...], int]] = [((_line(x, y),), 2)]
    for s in range(1, n - 1):
        candidates.append(((Line(float(np.median(y[:s])), None), _line(x[s:], y[s:])), 3))
    for s in range(2, n - 1):
        candidates.append(((_line(x[:s], y[:s]), _line(x[s:], y[s:])), 4))

    def score(candidate: tuple[tuple[Line, ...], int]) -> float:
        fit = TransferFit(candidate[0])
        return _score(_relative_sse(np.array([fit.cycles(b) for b in x]), y), n, candidate[1])

    lines, _ = min(candidates, key=score)
    if all(line.bytes_per_cycle is None for line in lines):
        lines = (*lines, Line(0.0, float(np.max(x / y))))
    return TransferFit(lines)


def fit_mmad_latency(fractals: Sequence[float], cycles: Sequence[float]) -> float:
    """The cube's fill latency: cycles = latency + blocks at one per cycle."""
    f, y = np.asarray(fractals, float), np.asarray(cycles, float)
    latency = np.sum((y - f) / y**2) / np.sum(1 / y**2)
    return max(0.0, float(latency))


def fit_vector(key: VectorKey, repeats: Sequence[int], cycles: Sequence[float], floor: float) -> VectorFit:
    """The floor-then-line fit of one instruction and dtype signature over its repeats.
    `floor` is the vector pipe's shortest instruction, which holds where the points do
    not show a floor of their own (none of them is floor-bound, or those were not measured)."""
    order = np.argsort(repeats, kind="stable")
    r, y = np.asarray(repeats, float)[order], np.asarray(cycles, float)[order]
    extras = [name for name in ("misaligned", "refill") if _has_term(key, name)]
    columns = [np.ones_like(r), r]
    for name in extras:
        feats = [vector_features(key, int(x)) for x in r]
        columns.append(np.array([p if name == "misaligned" else q for p, q in feats], float))
    features = np.stack(columns, 1)
    n, width = features.shape
    best: tuple[float, VectorFit] | None = None
    for s in range(0, max(1, n - width + 1)):
        least = float(np.median(y[:s])) if s else floor
        rest = slice(s, n)
        coef = _nonnegative_terms(features[rest], y[rest])
        fit = VectorFit(least, float(coef[0]), float(coef[1]), *_extra_terms(extras, coef[2:]))
        pred = np.maximum(least, features @ coef)
        score = _score(_relative_sse(pred, y), n, width + (s > 0))
        if best is None or score < best[0]:
            best = (score, fit)
    assert best is not None
    return best[1]


def _has_term(key: VectorKey, name: str) -> bool:
    family = instruction_class(key.instr)
    return (name, family) in (("misaligned", "compare_mask"), ("refill", "block_gather"))


def _nonnegative_terms(features: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Weighted least squares with every term but the start kept >= 0 (a negative
    one is dropped and the rest refitted)."""
    active = list(range(features.shape[1]))
    while True:
        coef = np.zeros(features.shape[1])
        if len(y):
            coef[active] = _weighted_lstsq(features[:, active], y)
        negative = [i for i in active[1:] if coef[i] < 0]
        if not negative:
            return coef
        active.remove(negative[0])


def _extra_terms(extras: list[str], coef: np.ndarray) -> list[float]:
    values = dict(zip(extras, (float(c) for c in coef), strict=True))
    return [values.get("misaligned", 0.0), values.get("refill", 0.0)]


def fit(tables: Tables) -> CostModel:
    """The cost model closest to the tables (every measured part, path, instruction)."""
    socs = sorted({p.soc for points in tables.by_file().values() for p in points})
    for points in tables.by_file().values():
        for p in points:
            if p.soc not in MEASURED_CLOCK_MHZ:
                known = ", ".join(MEASURED_CLOCK_MHZ)
                raise CalibrationError(f"{p.file} line {p.line}: no clock known for {p.soc} (measured parts: {known})")
    transfers: dict[str, dict[str, TransferFit]] = defaultdict(dict)
    for (soc, path), points in _grouped(tables.transfers, lambda p: (p.soc, p.path)).items():
        sizes, cycles = [p.nbytes for p in points], [p.cycles for p in points]
        transfers[soc][path] = _robust(fit_transfer, lambda f, b: f.cycles(b), sizes, cycles)
    latencies: dict[str, float] = {}
    for soc, points in _grouped(tables.mmad, lambda p: p.soc).items():
        blocks = [_blocks(soc, p) for p in points]
        latencies[soc] = fit_mmad_latency(blocks, [p.cycles for p in points])
    vector: dict[str, dict[VectorKey, VectorFit]] = defaultdict(dict)
    groups = _grouped(tables.vector, lambda p: (p.soc, p.key))
    shortest = defaultdict(list)
    for (soc, _), points in groups.items():
        shortest[soc].append(min(p.cycles for p in points))
    for (soc, key), points in groups.items():
        floor = float(np.median(shortest[soc]))
        try:
            vector[soc][key] = _robust(
                lambda r, y, key=key, floor=floor: fit_vector(key, r, y, floor),
                lambda f, r, key=key: f.cycles(r, *vector_features(key, r)),
                [p.repeat for p in points],
                [p.cycles for p in points],
            )
        except GEError as exc:
            raise CalibrationError(f"{points[0].file} line {points[0].line}: {exc.args[0]}") from None
    borrowed = latencies.get(REFERENCE_SOC, float(np.median(list(latencies.values()))))
    parts = {}
    for soc in socs:
        parts[soc] = SocCosts(
            name=soc,
            clock_mhz=MEASURED_CLOCK_MHZ[soc],
            cube=_cube_shapes(soc),
            cube_latency=latencies.get(soc, borrowed),
            transfers=transfers[soc],
            vector=vector[soc],
        )
    return CostModel(parts=parts, note=REFIT_NOTE)


def _robust(fit_points: Callable, predict: Callable, xs: list, ys: list[float]) -> Any:
    """`fit_points(xs, ys)`, refitted without the points it misses by more than
    OUTLIER times (recording errors such as a 14,000-cycle VMUL)."""
    fitted = fit_points(xs, ys)
    kept = [(x, y) for x, y in zip(xs, ys, strict=True) if 1 / OUTLIER < predict(fitted, x) / y < OUTLIER]
    if len(kept) in (0, len(xs)):
        return fitted
    return fit_points([x for x, _ in kept], [y for _, y in kept])


def _cube_shapes(soc: str) -> dict[str, tuple[int, int, int]]:
    """The part's profile's cube shapes, else the reference part's (same cube unit)."""
    name = soc if soc in soc_profiles.names() else REFERENCE_SOC
    return {dtype: (s.m, s.k, s.n) for dtype, s in soc_profiles.load(name).cube}


def _blocks(soc: str, p: MmadPoint) -> int:
    m0, k0, n0 = _cube_shapes(soc)[_mmad_dtype(p.instr)]
    return math.ceil(p.m / m0) * math.ceil(p.k / k0) * math.ceil(p.n / n0)


def _grouped(points: Iterable[Point], key: Callable) -> dict:
    groups: dict = defaultdict(list)
    for p in points:
        groups[key(p)].append(p)
    return groups


def split(tables: Tables, held_out: float, seed: int) -> tuple[Tables, Tables]:
    """(fitted, held out): a random `held_out` share of each table's rows set aside."""
    rng = random.Random(seed)
    kept: list[tuple] = []
    out: list[tuple] = []
    for points in (tables.transfers, tables.mmad, tables.vector):
        chosen = set(rng.sample(range(len(points)), round(held_out * len(points))))
        kept.append(tuple(p for i, p in enumerate(points) if i not in chosen))
        out.append(tuple(p for i, p in enumerate(points) if i in chosen))
    return Tables(*kept), Tables(*out)


# -------------------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class Errors:
    """Relative errors |predicted / measured - 1| of a set of points."""

    values: tuple[float, ...]

    @property
    def count(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float:
        return float(np.median(self.values))

    @property
    def p90(self) -> float:
        return float(np.percentile(self.values, 90))

    @property
    def max(self) -> float:
        return float(np.max(self.values))

    @property
    def meets_goals(self) -> bool:
        return self.median < GOAL_MEDIAN and self.p90 < GOAL_P90


@dataclass(frozen=True)
class TableReport:
    """One table's errors against a model."""

    file: str
    overall: Errors
    groups: dict[tuple[str, str], Errors]
    unpriced: tuple[str, ...]
    """Rows the model cannot price ("file line N: why"), counted as 100% off."""


def evaluate(tables: Tables, model: CostModel) -> list[TableReport]:
    """Each table's errors, overall and per (part, path or instruction). A row of a part,
    path or instruction the model cannot price counts as 100% off, and is named."""
    parts: dict[str, SocCosts] = {}
    reports = []
    for file, points in tables.by_file().items():
        if not points:
            continue
        errors: dict[tuple[str, str], list[float]] = defaultdict(list)
        unpriced = []
        for p in points:
            try:
                part = parts[p.soc] if p.soc in parts else parts.setdefault(p.soc, model.for_soc(p.soc))
                error = abs(p.predicted(part) / p.measured - 1)
            except GEError as exc:
                unpriced.append(f"{p.file} line {p.line}: {exc.args[0]}")
                error = 1.0
            errors[(p.soc, p.group)].append(error)
        overall = Errors(tuple(e for values in errors.values() for e in values))
        groups = {key: Errors(tuple(v)) for key, v in sorted(errors.items())}
        reports.append(TableReport(file, overall, groups, tuple(unpriced)))
    return reports


def write_model(model: CostModel, path: Path) -> None:
    """The model as JSON, one line per fit (so that a refit reads as a short diff)."""
    with published(path, what="cost model") as f:  # whole or not at all, like every output
        f.write(_compact(model.to_json()) + "\n")


def _compact(value: object, indent: int = 0) -> str:
    flat = json.dumps(value)
    if len(flat) + indent <= 110 or not isinstance(value, dict | list):
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k)}: {_compact(v, indent + 2)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [pad + _compact(v, indent + 2) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
