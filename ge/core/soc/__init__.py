"""SoC profiles: the numbers of each Ascend part, kept as JSON data files beside this module.

    from ge.core import soc
    profile = soc.load("Ascend310P3")        # a frozen SocProfile
    profile.ub_bytes, profile.align("ub", 100) == 128

Each file holds one part's AI core counts, clock, buffer sizes, GM rate, L2 read
rate (the simulator's L2 cache; an estimate, its source says so), cube shapes,
vector rate, event ids, alignments, FIX pipe, the aicore_num values a virtual
instance may have, its device memory and its AI CPU engine (`AicpuProfile`: the
cost model of KERNEL_EX tasks), plus a `source` object saying where each number
comes from. Device memory (one chip, as its usual card ships it):

    Ascend310     8 GiB LPDDR4X   Atlas 200 module / Atlas 300I (model 3000), per chip
    Ascend310P3  24 GiB LPDDR4X   Atlas 300I Pro
    Ascend910A   32 GiB HBM2      Atlas 300T (model 9000) / Atlas 800 (model 9000)
    Ascend910B1  64 GiB HBM2e     Atlas 800T A2

Passes read them by `--soc_version` name; an unknown name is an `OptionError`
that lists the known ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ge.core.errors import OptionError

QUEUE_DEPTH = 16
"""Instructions a pipe's queue holds ahead of its execution, on every part: the
simulator's (`ge.sim.timing`) and the cube tiling cost's. Not published; 16 lets the
scalar unit run a double-buffered iteration ahead of the slowest pipe."""

_DIR = Path(__file__).resolve().parent

BUFFERS = ("l0a", "l0b", "l0c", "l1", "ub", "l2")
ALIGNED = ("ub", "l1", "l0a", "l0b", "l0c")


@dataclass(frozen=True)
class CubeShape:
    """The m x k x n block one cube instruction multiplies per cycle."""

    m: int
    k: int
    n: int

    @property
    def macs(self) -> int:
        return self.m * self.k * self.n


@dataclass(frozen=True)
class AicpuProfile:
    """The part's AI CPU engine, as the simulator times a KERNEL_EX task: `launch_us`
    to schedule it, then on one AI CPU core its arguments' bytes at `bytes_per_us` and
    its elements (inputs and outputs) at `elements_per_us`; `cores` such tasks run at once."""

    cores: int
    launch_us: float
    elements_per_us: float
    bytes_per_us: float


@dataclass(frozen=True)
class SocProfile:
    """One Ascend part. Sizes are bytes, rates per cycle and per core."""

    name: str
    ai_cores: int
    """Cores with a cube unit (on split parts, the cube cores)."""
    vector_cores: int
    """Vector-only cores beside them (0 where every AI core has its own vector unit only)."""
    split_cores: bool
    """Cube and vector units in separate cores (the 910B generation)."""
    clock_mhz: int
    l0a_bytes: int
    l0b_bytes: int
    l0c_bytes: int
    l1_bytes: int
    ub_bytes: int
    l2_bytes: int
    gm_bytes_per_cycle: float
    l2_bytes_per_cycle: float
    """What one core reads from L2 per cycle; the chip's L2 bandwidth is `ai_cores` times it."""
    cube: tuple[tuple[str, CubeShape], ...]
    vector_bytes_per_cycle: int
    event_ids: int
    alignment: tuple[tuple[str, int], ...]
    fix_pipe: bool
    virtual_aicore_nums: tuple[int, ...]
    """The aicore_num values a virtual instance of this part may have (empty: none)."""
    device_memory_bytes: int
    """The device memory (DDR or HBM) of one chip as its usual card ships it: the
    most a model's memory plan may need, at compile time and when loaded."""
    aicpu: AicpuProfile
    source: tuple[tuple[str, str], ...]
    """Where each number comes from, by field."""

    @property
    def vector_per_cube(self) -> int:
        """The vector cores that share a cube core's vector half (a cube kernel's mixed
        epilogue, attention's softmax): two on the 910B, each taking half of every
        tile's rows into its own UB (Ascend C's 1:2 mixed kernels); one where a core
        holds both units."""
        return max(1, self.vector_cores // self.ai_cores) if self.split_cores else 1

    def cube_shape(self, dtype: str) -> CubeShape:
        """The cube block for a dtype name ("float16", "int8", "int4", ...)."""
        shapes = dict(self.cube)
        if dtype not in shapes:
            raise OptionError(f"{self.name} has no cube mode for {dtype}; it has {', '.join(shapes)}")
        return shapes[dtype]

    def align(self, buffer: str, nbytes: int) -> int:
        """`nbytes` rounded up to the buffer's alignment."""
        unit = dict(self.alignment)[buffer]
        return -(-nbytes // unit) * unit


def names() -> tuple[str, ...]:
    """The SoC versions with a profile, sorted."""
    return tuple(sorted(p.stem for p in _DIR.glob("*.json")))


@cache
def load(name: str) -> SocProfile:
    """The profile of SoC version `name` (as `--soc_version` spells it)."""
    path = _DIR / f"{name}.json"
    if name not in names():
        raise OptionError(f"unknown soc_version '{name}'; known: {', '.join(names())}")
    return _profile(json.loads(path.read_text()))


def _profile(doc: dict) -> SocProfile:
    buffers = doc["buffers"]
    return SocProfile(
        name=doc["name"],
        ai_cores=doc["ai_cores"],
        vector_cores=doc["vector_cores"],
        split_cores=doc["split_cores"],
        clock_mhz=doc["clock_mhz"],
        l0a_bytes=buffers["l0a"],
        l0b_bytes=buffers["l0b"],
        l0c_bytes=buffers["l0c"],
        l1_bytes=buffers["l1"],
        ub_bytes=buffers["ub"],
        l2_bytes=buffers["l2"],
        gm_bytes_per_cycle=doc["gm_bytes_per_cycle"],
        l2_bytes_per_cycle=doc["l2_bytes_per_cycle"],
        cube=tuple((dtype, CubeShape(*mkn)) for dtype, mkn in doc["cube"].items()),
        vector_bytes_per_cycle=doc["vector_bytes_per_cycle"],
        event_ids=doc["event_ids"],
        alignment=tuple((b, doc["alignment"][b]) for b in ALIGNED),
        fix_pipe=doc["fix_pipe"],
        virtual_aicore_nums=tuple(doc["virtual_aicore_nums"]),
        device_memory_bytes=doc["device_memory_bytes"],
        aicpu=AicpuProfile(**doc["aicpu"]),
        source=tuple(doc["source"].items()),
    )
