"""AOE-style tuning with the simulator as the cost model: operator tuning searches each
kernel's tiling (`search`, over `passes.lowering.space`), the results go to the tune
bank (`bank`) that `ge.compile` and `ge atc` take tilings from (`tune`)."""

from ge.aoe.search import Budget
from ge.aoe.tune import Report, tune

__all__ = ["Budget", "Report", "tune"]
