"""The memory plan an offline model carries: four regions and every tensor's place in them.

The planner that makes it is `ge.backend.memory`; the simulator lays device memory
out by it. Sizes and offsets are in bytes, aligned to `ALIGNMENT` (GE's 512).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Region(str, Enum):
    """Where a buffer lives; only the feature map is shared between buffers."""

    FEATURE_MAP = "feature_map"
    INPUT = "input"
    OUTPUT = "output"
    WEIGHT = "weight"


ALIGNMENT = 512
REGION_ORDER = (Region.FEATURE_MAP, Region.INPUT, Region.OUTPUT, Region.WEIGHT)


def align(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


@dataclass(frozen=True)
class Placement:
    """A buffer's place: `offset` within its region, `size` aligned to 512 bytes."""

    name: str
    region: Region
    offset: int
    size: int


@dataclass(frozen=True)
class MemoryPlan:
    strategy: str
    placements: tuple[Placement, ...]
    """One per schedule buffer, in the schedule's buffer order."""
    bases: dict[Region, int]
    sizes: dict[Region, int]
    feature_map_minimum: int
    feature_map_no_reuse: int
    candidates: dict[str, int]
    """The feature-map size each assigner reached (the kept one is `strategy`)."""

    @property
    def total(self) -> int:
        return sum(self.sizes.values())

    def addr(self, tensor: int, offset: int = 0) -> int:
        """The device address of byte `offset` of tensor `tensor` (a placement index)."""
        p = self.placements[tensor]
        return self.bases[p.region] + p.offset + offset

    def to_json(self) -> dict[str, object]:
        return {
            "alignment": ALIGNMENT,
            "strategy": self.strategy,
            "total_size": self.total,
            "regions": {r.value: {"base": self.bases[r], "size": self.sizes[r]} for r in REGION_ORDER},
            "feature_map_minimum": self.feature_map_minimum,
            "feature_map_no_reuse": self.feature_map_no_reuse,
            "candidates": dict(self.candidates),
            "tensors": [
                {"name": p.name, "region": p.region.value, "offset": p.offset, "size": p.size} for p in self.placements
            ],
        }

    @classmethod
    def from_json(cls, data: dict) -> MemoryPlan:
        regions = {Region(name): r for name, r in data["regions"].items()}
        return cls(
            data["strategy"],
            tuple(Placement(t["name"], Region(t["region"]), t["offset"], t["size"]) for t in data["tensors"]),
            {r: v["base"] for r, v in regions.items()},
            {r: v["size"] for r, v in regions.items()},
            data["feature_map_minimum"],
            data["feature_map_no_reuse"],
            dict(data["candidates"]),
        )
