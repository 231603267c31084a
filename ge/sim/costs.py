"""Instruction costs of the AI Core: cycles for one transfer, one `mmad`, one vector
instruction, on one core of a given part.

    from ge.sim import costs
    costs.transfer_cycles("Ascend910B1", "GM_TO_L1", 64 * 1024)
    costs.transfer_cycles("Ascend910B1", "L1_TO_L0A", repeats=16)   # 16 fractals of 512 B
    costs.mmad_cycles("Ascend910B1", 128, 256, 64, "float16")
    costs.vector_cycles("Ascend910B1", "VADD", "FP16_FP16_FP16", 4096)

The forms are physical, with few constants each, fitted to the measured tables of
`ge/sim/calibration_data/` (see `ge.sim.calibration`, `ge calibrate --fit` to refit,
`ge calibrate --check` to see how well they predict every measured point):

- transfer: the larger of a latency line and a bandwidth line,
  `cycles = max(L1 + bytes / B1, L2 + bytes / B2)`. Small copies pay the request
  latency (GM: ~70-280 cycles; on-chip: a few), large ones stream at the path's
  peak `B2` (bytes per cycle); a line without a rate is a floor (minimum issue cost).
- mmad: `cycles = latency + ceil(m/m0) * ceil(k/k0) * ceil(n/n0)`, one cube block
  (m0 x k0 x n0 from the SoC's cube shape: 16x16x16 for fp16) per cycle.
- vector: `cycles = max(floor, start + per_repeat * repeats + misaligned * partial
  + refill * refills)` over 256-byte repeats of the first dtype; `partial` is 1 when
  a compare's bit-mask output ends inside a 32-byte block (read-modify-write), and
  `refills` counts the offset-register reloads of a block gather (one per 8 repeats).

Parts with measurements (910B1, 910B3, 910_95) use their own fits; a path or
instruction a part was not measured on borrows another measured part's fit. Parts
with a SoC profile and no measurements (Ascend310, 310P3, 910A) are derived from the
910B1 fits and their profile: on-chip copies, the cube and the vector unit cost the
same cycles (same widths: 256 B/cycle vector, 16x16x16 cube, 512-byte fractals);
GM copies keep the 910B1's latency in nanoseconds and scale its bandwidth by the
profile's GM rate (bytes per ns) relative to the 910B1's, capped at the whole chip's
rate (`ai_cores * gm_bytes_per_cycle`).

Cycles are floats: the simulator sums them and rounds where it needs to.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from statistics import median

from ge.core import soc as soc_profiles
from ge.core.errors import CalibrationError
from ge.core.soc import SocProfile

MODEL_FILE = Path(__file__).resolve().parent / "cost_model.json"

FRACTAL_BYTES = 512
"""One L0A/L0B fractal (16 x 16 fp16, 16 x 32 int8): the unit of a `repeat` transfer."""
REPEAT_BYTES = 256
"""One vector repeat reads 256 bytes of its first operand."""
MASK_BLOCK_BYTES = 32
"""UB block: a compare's bit-mask output that ends inside one costs a read-modify-write."""
GATHER_OFFSETS_PER_REFILL = 8
"""A block gather (VGATHERB) reloads its offset register once per 8 repeats."""
REFERENCE_SOC = "Ascend910B1"
"""The measured part that parts without measurements are derived from."""

DTYPE_BYTES: dict[str, float] = {
    "INT4": 0.5, "INT8": 1, "UINT8": 1, "FP16": 2, "BF16": 2, "INT16": 2, "UINT16": 2,
    "FP32": 4, "INT32": 4, "UINT32": 4, "FP64": 8, "INT64": 8, "UINT64": 8,
}  # fmt: skip

VECTOR_CLASSES: dict[str, tuple[str, ...]] = {
    "unary": (
        "VABS", "VRELU", "VREC", "VRSQRT", "VNOT", "VSHL", "VSHR", "VCOPY", "VECTORDUP", "VBRCB",
        "VLRELU", "VADDS", "VMULS", "VMAXS", "VMINS", "VTRANSPOSE", "VEXTRACT", "VCONCAT",
    ),
    "binary": (
        "VADD", "VSUB", "VMUL", "VMAX", "VMIN", "VAND", "VOR", "VSEL", "VCMP", "VADDRELU", "VSUBRELU",
        "VMULCONV", "VADDRELUCONV", "VSUBRELUCONV", "VAXPY", "VREDUCE",
    ),
    "conversion": ("VCONV", "VCONVDEQ", "VCONVVDEQ"),
    "multiply_add": ("VMLA", "VMADD", "VMADDRELU"),
    "transcendental": ("VEXP", "VLN", "VSQRT", "VDIV"),
    "reduction": ("VCADD", "VCMAX", "VCMIN", "VCGADD", "VCGMAX", "VCGMIN", "VCPADD", "VREDUCEV2"),
    "compare_mask": ("VCMPV", "VCMPVS"),
    "gather": ("VGATHER", "VSCATTER"),
    "block_gather": ("VGATHERB",),
    "sort": ("VMRGSORT", "VBITSORT", "VMS4"),
}  # fmt: skip
"""Every vector instruction the cost model can price, by family. A family sets the
default of an instruction or dtype the tables did not measure, and which extra terms
its fit has (`compare_mask`: the partial-block penalty; `block_gather`: the refills)."""

SIBLINGS: tuple[frozenset[str], ...] = tuple(
    frozenset(group)
    for group in (
        ("VADD", "VSUB", "VMUL"), ("VMAX", "VMIN"), ("VMAXS", "VMINS"), ("VCMAX", "VCMIN"), ("VCGMAX", "VCGMIN"),
        ("VSHL", "VSHR"), ("VAND", "VOR"), ("VADDRELU", "VSUBRELU"), ("VADDRELUCONV", "VSUBRELUCONV"),
        ("VMLA", "VMADD", "VMADDRELU"),
    )
)  # fmt: skip
"""Instructions that measure alike in every dtype both were measured in (VCMAX and VCMIN
7 cycles a repeat in fp16 and fp32, VMAXS and VMINS with the same 4-cycle floor in
int16 and int32, ...): a sibling's fit in the same dtypes is the best guess for one
the tables lack (VCGMIN fp32 from VCGMAX fp32, 1 cycle a repeat, not the fp16 7)."""

ELEMENT_RATE_CLASSES = frozenset({"transcendental", "gather"})
"""Families whose units work a fixed number of elements per cycle whatever the dtype
(measured: VEXP fp16 takes 4 cycles per repeat of 128, fp32 2 per repeat of 64), so a
repeat of a narrower dtype costs proportionally more; the others cost per repeat."""

INSTRUCTION_CLASS: dict[str, str] = {name: cls for cls, names in VECTOR_CLASSES.items() for name in names}


def _gm_side(path: str) -> bool:
    return path.startswith("GM_") or "_TO_GM" in path


# ------------------------------------------------------------------------------- forms


@dataclass(frozen=True)
class Line:
    """`latency + bytes / bytes_per_cycle` cycles; without a rate, the constant `latency`."""

    latency: float
    bytes_per_cycle: float | None

    def at(self, nbytes: float) -> float:
        if self.bytes_per_cycle is None:
            return self.latency
        return self.latency + nbytes / self.bytes_per_cycle

    def to_json(self) -> dict[str, float | None]:
        return {"latency": _round(self.latency), "bytes_per_cycle": _round(self.bytes_per_cycle)}


@dataclass(frozen=True)
class TransferFit:
    """A copy on one path costs the largest of its lines: the latency regime of small
    copies and the bandwidth regime of large ones."""

    lines: tuple[Line, ...]

    def cycles(self, nbytes: float) -> float:
        return max(line.at(nbytes) for line in self.lines)

    @property
    def peak_bytes_per_cycle(self) -> float:
        """The rate a very large copy approaches: the slowest line's."""
        return min(line.bytes_per_cycle for line in self.lines if line.bytes_per_cycle is not None)

    def to_json(self) -> list[dict[str, float | None]]:
        return [line.to_json() for line in self.lines]


@dataclass(frozen=True)
class VectorFit:
    """One vector instruction for one dtype signature (see the module docstring)."""

    floor: float
    start: float
    per_repeat: float
    misaligned: float = 0.0
    refill: float = 0.0

    def cycles(self, repeat: int, partial: bool, refills: int) -> float:
        busy = self.start + self.per_repeat * repeat + self.misaligned * partial + self.refill * refills
        return max(self.floor, busy)

    def to_json(self) -> dict[str, float]:
        return {k: _round(v) for k, v in vars(self).items()}


@dataclass(frozen=True)
class VectorKey:
    """An instruction and the dtype signature the tables spell (FP16_FP16_FP16)."""

    instr: str
    dtypes: str

    @property
    def width(self) -> float:
        """Bytes of the first dtype: the one a repeat's 256 bytes are counted in."""
        return dtype_bytes(self.dtypes.split("_")[0])

    @property
    def family(self) -> str:
        return instruction_class(self.instr)

    def __str__(self) -> str:
        return f"{self.instr}/{self.dtypes}"


def dtype_bytes(name: str) -> float:
    """Bytes per element of a dtype as the tables spell it (INT4 is half a byte)."""
    if name not in DTYPE_BYTES:
        raise CalibrationError(f"unknown vector dtype {name}; known: {', '.join(DTYPE_BYTES)}")
    return DTYPE_BYTES[name]


def instruction_class(instr: str) -> str:
    """The family of a vector instruction (an unknown one cannot be priced)."""
    if instr not in INSTRUCTION_CLASS:
        raise CalibrationError(
            f"no cost for vector instruction {instr}: it is not in the calibration tables "
            f"nor in a known family ({', '.join(VECTOR_CLASSES)})"
        )
    return INSTRUCTION_CLASS[instr]


def vector_features(key: VectorKey, repeat: int) -> tuple[bool, int]:
    """(partial, refills) of `repeat` repeats: the terms only some families have."""
    partial = False
    if key.family == "compare_mask":
        mask_bytes = repeat * (REPEAT_BYTES / key.width) / 8
        partial = mask_bytes % MASK_BLOCK_BYTES != 0
    refills = (repeat - 1) // GATHER_OFFSETS_PER_REFILL if key.family == "block_gather" else 0
    return partial, refills


def default_repeat(dtypes: str, elements: int) -> int:
    """256-byte repeats of the first dtype that `elements` elements take."""
    return max(1, math.ceil(elements * dtype_bytes(dtypes.split("_")[0]) / REPEAT_BYTES))


# ------------------------------------------------------------------------------ a part


@dataclass(frozen=True)
class SocCosts:
    """The instruction costs of one part, on one core."""

    name: str
    clock_mhz: float
    cube: Mapping[str, tuple[int, int, int]]
    cube_latency: float
    transfers: Mapping[str, TransferFit]
    vector: Mapping[VectorKey, VectorFit]
    vector_scale: float = 1.0
    """Vector cycles relative to those of the part the fits come from (its vector width
    over this part's)."""

    def transfer_cycles(self, path: str, nbytes: int | None = None, *, repeats: int | None = None) -> float:
        """Cycles of one copy of `nbytes` bytes, or of `repeats` 512-byte fractals."""
        if nbytes is not None and repeats is None:
            size = nbytes
        elif repeats is not None and nbytes is None:
            size = repeats * FRACTAL_BYTES
        else:
            raise CalibrationError(f"transfer {path}: give its bytes or its fractal repeats, not both or neither")
        if size < 0:
            raise CalibrationError(f"transfer {path}: negative size {size}")
        return self.transfer(path).cycles(size)

    def transfer(self, path: str) -> TransferFit:
        """The fit of `path`; a layout-changing (`_TRANS`) path without one costs as the
        plain path (as FIX's NZ -> ND does: L0C_TO_GM_TRANS measures as L0C_TO_GM)."""
        if path in self.transfers:
            return self.transfers[path]
        plain = path.removesuffix("_TRANS")
        if plain != path and plain in self.transfers:
            return self.transfers[plain]
        raise CalibrationError(f"{self.name} has no transfer path {path}; known: {', '.join(sorted(self.transfers))}")

    def mmad_cycles(self, m: int, k: int, n: int, dtype: str = "float16") -> float:
        """Cycles of one cube `mmad` of m x k x n, in cube blocks of the dtype's shape."""
        if min(m, k, n) < 1:
            raise CalibrationError(f"mmad {m}x{k}x{n}: every dimension must be at least 1")
        if dtype not in self.cube:
            raise CalibrationError(f"{self.name} has no cube mode for {dtype}; it has {', '.join(self.cube)}")
        m0, k0, n0 = self.cube[dtype]
        return self.cube_latency + math.ceil(m / m0) * math.ceil(k / k0) * math.ceil(n / n0)

    def vector_cycles(self, instr: str, dtypes: str, elements: int, *, repeat: int | None = None) -> float:
        """Cycles of one vector instruction over `elements` elements of its first dtype
        (`repeat`: its 256-byte repeats, when the instruction says so itself)."""
        key = VectorKey(instr.upper(), dtypes.upper())
        if elements < 1 and repeat is None:
            raise CalibrationError(f"vector {key}: {elements} elements")
        repeats = repeat if repeat is not None else default_repeat(key.dtypes, elements)
        if repeats < 1:
            raise CalibrationError(f"vector {key}: {repeats} repeats")
        partial, refills = vector_features(key, repeats)
        return self.vector_scale * self.vector_fit(key).cycles(repeats, partial, refills)

    def vector_fit(self, key: VectorKey) -> VectorFit:
        """The measured fit of `key`, else the median fit of the first of: its siblings in
        the same dtypes; the same instruction in other dtypes of this width, then of any
        width; its family in the same dtypes, of this width, of any width (element-rate
        families rescaled to this width)."""
        if key in self.vector:
            return self.vector[key]
        family = key.family
        siblings = next((group for group in SIBLINGS if key.instr in group), frozenset())
        same_instr = [k for k in self.vector if k.instr == key.instr]
        same_family = [k for k in self.vector if k.family == family]
        candidates = (
            [k for k in self.vector if k.instr in siblings and k.dtypes == key.dtypes],
            [k for k in same_instr if k.width == key.width],
            same_instr,
            [k for k in same_family if k.dtypes == key.dtypes],
            [k for k in same_family if k.width == key.width],
            same_family,
        )
        for keys in candidates:
            if keys:
                return _median_fit([self._rescaled(k, key.width) for k in keys])
        raise CalibrationError(f"{self.name}: no measured {family} instruction to price {key} by")

    def _rescaled(self, key: VectorKey, width: float) -> VectorFit:
        fit = self.vector[key]
        if key.family not in ELEMENT_RATE_CLASSES or key.width == width:
            return fit
        return replace(fit, per_repeat=fit.per_repeat * key.width / width)


def _median_fit(fits: list[VectorFit]) -> VectorFit:
    return VectorFit(*(median(getattr(f, name) for f in fits) for name in vars(fits[0])))


# ------------------------------------------------------------------------ the model


@dataclass(frozen=True)
class CostModel:
    """Fitted constants of the measured parts; `for_soc` completes and derives parts."""

    parts: Mapping[str, SocCosts]
    note: str = ""

    def for_soc(self, name: str) -> SocCosts:
        """The costs of part `name`: its fits, with the paths it lacks borrowed from the
        other measured parts, or, for a part without measurements, derived from its profile."""
        if name in self.parts:
            return self._completed(self.parts[name])
        return self._derived(soc_profiles.load(name))

    def _donors(self, name: str) -> list[SocCosts]:
        order = [REFERENCE_SOC, *sorted(self.parts)]
        return [self.parts[n] for n in dict.fromkeys(order) if n in self.parts and n != name]

    def _completed(self, part: SocCosts) -> SocCosts:
        transfers = dict(part.transfers)
        for donor in self._donors(part.name):
            ratio = part.clock_mhz / donor.clock_mhz
            for path, fit in donor.transfers.items():
                if path not in transfers:  # GM side: the same latency in ns and bytes per ns
                    transfers[path] = _scaled(fit, ratio, 1 / ratio) if _gm_side(path) else fit
        vector = part.vector
        if not vector:
            donor = next((d for d in self._donors(part.name) if d.vector), None)
            if donor is None:
                raise CalibrationError(f"no measured part has vector fits to lend {part.name}")
            vector = donor.vector
        return replace(part, transfers=transfers, vector=vector)

    def _derived(self, profile: SocProfile) -> SocCosts:
        if REFERENCE_SOC not in self.parts:
            raise CalibrationError(f"cannot derive {profile.name}: the cost model has no {REFERENCE_SOC} fits")
        ref = self._completed(self.parts[REFERENCE_SOC])
        ref_profile = soc_profiles.load(REFERENCE_SOC)
        clock = profile.clock_mhz / ref.clock_mhz
        gm_bytes_per_ns = profile.gm_bytes_per_cycle * profile.clock_mhz
        rate = gm_bytes_per_ns / (ref_profile.gm_bytes_per_cycle * ref_profile.clock_mhz)
        chip = profile.ai_cores * profile.gm_bytes_per_cycle
        transfers = {
            path: _scaled(fit, clock, rate / clock, cap=chip) if _gm_side(path) else fit
            for path, fit in ref.transfers.items()
        }
        return SocCosts(
            name=profile.name,
            clock_mhz=profile.clock_mhz,
            cube={dtype: (s.m, s.k, s.n) for dtype, s in profile.cube},
            cube_latency=ref.cube_latency,
            transfers=transfers,
            vector=ref.vector,
            vector_scale=ref_profile.vector_bytes_per_cycle / profile.vector_bytes_per_cycle,
        )

    # ------------------------------------------------------------------------ JSON

    def to_json(self) -> dict:
        return {
            "note": self.note,
            "parts": {
                name: {
                    "clock_mhz": part.clock_mhz,
                    "cube": {dtype: list(shape) for dtype, shape in part.cube.items()},
                    "cube_latency": _round(part.cube_latency),
                    "transfers": {path: fit.to_json() for path, fit in sorted(part.transfers.items())},
                    "vector": {str(key): part.vector[key].to_json() for key in sorted(part.vector, key=str)},
                }
                for name, part in sorted(self.parts.items())
            },
        }

    @classmethod
    def from_json(cls, doc: dict) -> CostModel:
        parts = {}
        for name, p in doc["parts"].items():
            parts[name] = SocCosts(
                name=name,
                clock_mhz=p["clock_mhz"],
                cube={dtype: tuple(shape) for dtype, shape in p["cube"].items()},
                cube_latency=p["cube_latency"],
                transfers={
                    path: TransferFit(tuple(Line(line["latency"], line["bytes_per_cycle"]) for line in lines))
                    for path, lines in p["transfers"].items()
                },
                vector={VectorKey(*key.split("/")): VectorFit(**fit) for key, fit in p["vector"].items()},
            )
        return cls(parts=parts, note=doc.get("note", ""))


def _scaled(fit: TransferFit, latency: float, rate: float, cap: float | None = None) -> TransferFit:
    """`fit` with latencies times `latency` and rates times `rate` (at most `cap`)."""
    lines = []
    for line in fit.lines:
        bpc = None if line.bytes_per_cycle is None else line.bytes_per_cycle * rate
        if bpc is not None and cap is not None:
            bpc = min(bpc, cap)
        lines.append(Line(line.latency * latency, bpc))
    return TransferFit(tuple(lines))


def _round(value: float | None) -> float | None:
    """Six significant digits: well below the tables' noise, and a short JSON diff."""
    return None if value is None else float(f"{value:.6g}")


@cache
def default_model() -> CostModel:
    """The fitted model shipped beside this module (`ge calibrate --fit` writes it)."""
    return CostModel.from_json(json.loads(MODEL_FILE.read_text()))


@cache
def _default_part(name: str) -> SocCosts:
    return default_model().for_soc(name)


def for_soc(soc: str | SocProfile, model: CostModel | None = None) -> SocCosts:
    """The costs of a part, by `--soc_version` name or profile."""
    name = soc if isinstance(soc, str) else soc.name
    return _default_part(name) if model is None else model.for_soc(name)


# --------------------------------------------------------------------- the functions


def transfer_cycles(
    soc: str | SocProfile, path: str, nbytes: int | None = None, *, repeats: int | None = None,
    model: CostModel | None = None,
) -> float:
    """Cycles of one copy on `path` (GM_TO_L1, L0C_TO_GM_TRANS, ...) of `nbytes` bytes
    or of `repeats` 512-byte fractals."""
    return for_soc(soc, model).transfer_cycles(path, nbytes, repeats=repeats)


def mmad_cycles(
    soc: str | SocProfile, m: int, k: int, n: int, dtype: str = "float16", *, model: CostModel | None = None
) -> float:
    """Cycles of one cube `mmad` of m x k x n (dtype as the SoC profile names it)."""
    return for_soc(soc, model).mmad_cycles(m, k, n, dtype)


def vector_cycles(
    soc: str | SocProfile, instr: str, dtypes: str, elements: int, *, repeat: int | None = None,
    model: CostModel | None = None,
) -> float:
    """Cycles of one vector instruction (VADD, VEXP, ...; dtypes FP16_FP16_FP16) over
    `elements` elements of its first dtype, or over `repeat` 256-byte repeats."""
    return for_soc(soc, model).vector_cycles(instr, dtypes, elements, repeat=repeat)
