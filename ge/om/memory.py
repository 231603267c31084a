"""The memory plan an offline model carries: four regions and every tensor's place in them.

The planner that makes it is `ge.backend.memory`; the simulator lays device memory
out by it. Sizes and offsets are in bytes, aligned to `ALIGNMENT` (GE's 512).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ge.om import limits
from ge.om.limits import Malformed, field, integer, items, mapping, shown, text


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
    def from_json(cls, data: object, where: str = "memory") -> MemoryPlan:
        """The plan of a `.om` description, each field checked for its type and sign, and
        each placement for lying within its region (the regions are checked against the
        device's memory by `ge.om.model`)."""
        data = mapping(data, where)
        regions = mapping(field(data, "regions", where), f"{where}.regions")
        if set(regions) != {r.value for r in REGION_ORDER}:  # keys of a JSON object are strings
            raise Malformed(f"{where}.regions has {shown(sorted(regions))}; it must have exactly {[r.value for r in REGION_ORDER]}")
        bases, sizes = {}, {}
        for r in REGION_ORDER:
            at = f"{where}.regions.{r.value}"
            region = mapping(regions[r.value], at)
            bases[r] = integer(field(region, "base", at), f"{at}.base")
            sizes[r] = integer(field(region, "size", at), f"{at}.size")
        tensors = items(field(data, "tensors", where), f"{where}.tensors", limits.TENSORS)
        placements = tuple(_placement(t, f"{where}.tensors[{i}]", sizes) for i, t in enumerate(tensors))
        candidates = mapping(field(data, "candidates", where), f"{where}.candidates")
        return cls(
            text(field(data, "strategy", where), f"{where}.strategy"),
            placements,
            bases,
            sizes,
            integer(field(data, "feature_map_minimum", where), f"{where}.feature_map_minimum"),
            integer(field(data, "feature_map_no_reuse", where), f"{where}.feature_map_no_reuse"),
            {text(k, f"{where}.candidates"): integer(v, f"{where}.candidates.{k}") for k, v in candidates.items()},
        )


def _placement(data: object, where: str, sizes: dict[Region, int]) -> Placement:
    data = mapping(data, where)
    name = text(field(data, "region", where), f"{where}.region")
    if name not in {r.value for r in REGION_ORDER}:
        raise Malformed(f"{where}.region is {name!r}; allowed: {', '.join(r.value for r in REGION_ORDER)}")
    region = Region(name)
    offset = integer(field(data, "offset", where), f"{where}.offset")
    size = integer(field(data, "size", where), f"{where}.size")
    if offset + size > sizes[region]:
        raise Malformed(f"{where} [{offset}, {offset + size}) lies outside its {sizes[region]}-byte {region.value} region")
    return Placement(text(field(data, "name", where), f"{where}.name"), region, offset, size)


def human_bytes(n: float) -> str:
    """A byte count as B, KiB or MiB, as the command summaries print plans."""
    if n < 1024:
        return f"{n:.0f} B"
    if n < 1024**2:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1024**2:.1f} MiB"
