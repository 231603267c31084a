"""Virtual instances: several models side by side on disjoint slices of one chip.

A cloud user rents part of an NPU (a vNPU): `aicore_num` of its AI cores, the
vector cores in proportion (as `Runtime` gives them for `aicore_num`), and device
memory of its own. `run_tenants` runs each model (a tenant) on its slice, all of
them at once from time 0, their tasks interleaved in time order (the tenant whose
next task can start first goes next; ties: the earlier tenant), and all of them
sharing the chip's GM bandwidth through one `timing.GmLedger` and its L2 cache
(`ge.sim.l2`: one LRU over the tenants' device memories, side by side, and one L2
bandwidth; unless the run config's l2_cache is off). Each tenant is also
run alone on its slice, so that the report can say what sharing cost it; with
numerics, `Tenant.outputs_match` says whether its outputs shared equal its outputs
alone, as they must (the numerics do not depend on the cores).

The slices are laid out in order (the first tenant's cores first) and must fit the
chip: each has one of the SoC's `virtual_aicore_nums`, they add up to at most its AI
cores, and the tenants' memory plans to at most its device memory. Every model must
be for the same SoC.

Not modelled: any partitioning of L2 among tenants (they evict each other's
bytes), the memory controllers' banks and queues (bandwidth is one shared rate),
and any isolation the real part gives a virtual instance beyond its cores and memory.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ge.core import soc as socs
from ge.core.errors import OptionError
from ge.om import Model
from ge.sim import timing
from ge.sim.config import RunConfig
from ge.sim.l2 import L2
from ge.sim.profile import Profile, tenant_trace, write_tenant_files
from ge.sim.runtime import Runtime


@dataclass(frozen=True)
class Tenant:
    """One model of a virtual-instance run, on its slice, and how it ran alone and shared."""

    name: str
    """How reports name the model (its file, or `model N`)."""
    aicore_num: int
    first_cores: dict[str, int]
    """The slice's first core of each kind on the chip (slices are laid out in order)."""
    alone: Profile
    shared: Profile
    outputs: dict[str, np.ndarray]
    """The outputs of the shared run (empty when timing only)."""
    outputs_alone: dict[str, np.ndarray]

    @property
    def label(self) -> str:
        return f"{self.name} on {self.aicore_num} AI core{'s' if self.aicore_num > 1 else ''}"

    @property
    def latency_alone_us(self) -> float:
        return self.alone.latency_us

    @property
    def latency_us(self) -> float:
        """The latency with every tenant running."""
        return self.shared.latency_us

    @property
    def throughput(self) -> float:
        """Samples per second at the model's batch, shared."""
        return self.shared.throughput

    @property
    def slowdown(self) -> float:
        """Shared latency over alone (1: sharing cost nothing)."""
        return self.latency_us / self.latency_alone_us

    @property
    def outputs_match(self) -> bool:
        """Whether the shared run computed exactly the outputs of the run alone."""
        if self.outputs.keys() != self.outputs_alone.keys():
            return False
        return all(np.array_equal(v, self.outputs_alone[k], equal_nan=v.dtype.kind == "f") for k, v in self.outputs.items())


@dataclass(frozen=True)
class ChipRun:
    """Every tenant of a virtual-instance run."""

    soc: str
    tenants: tuple[Tenant, ...]

    def trace(self) -> dict:
        """The shared runs as one Chrome trace: a process per tenant."""
        return tenant_trace([(f"tenant {i}: {t.label}", t.shared, t.first_cores) for i, t in enumerate(self.tenants)])

    @property
    def outputs_match(self) -> bool:
        return all(t.outputs_match for t in self.tenants)

    def write(self, directory: str | os.PathLike) -> list[str]:
        """op_summary.csv (a tenant column first) and trace.json in `directory`; returns their paths."""
        return write_tenant_files(directory, [(t.label, t.shared) for t in self.tenants], self.trace())


def check_slices(models: Sequence[Model], slices: Sequence[int], names: Sequence[str]) -> None:
    """Refuse slices that do not fit the chip, or models for different SoCs, before running any."""
    if not models:
        raise OptionError("no instances to run; give at least one model with its AI cores")
    first = models[0].soc_version
    for model, name in zip(models, names):
        if model.soc_version != first:
            raise OptionError(f"{name} is compiled for {model.soc_version}, {names[0]} for {first}; every instance must be for the same SoC")
    soc = socs.load(first)
    allowed = soc.virtual_aicore_nums
    if not allowed:
        raise OptionError(f"{soc.name} has no virtual instances (its virtual_aicore_nums is empty); run one model on it, with aicore_num")
    sizes = ", ".join(map(str, allowed))
    for n, name in zip(slices, names):
        if n < 1 or n not in allowed:
            raise OptionError(f"{name} asks for {n} AI cores; a virtual instance of {soc.name} has {sizes}")
    if sum(slices) > soc.ai_cores:
        raise OptionError(
            f"the instances ask for {sum(slices)} AI cores ({' + '.join(map(str, slices))}); "
            f"{soc.name} has {soc.ai_cores}, so their slices would overlap"
        )
    memory = sum(m.memory.total for m in models)
    if memory > soc.device_memory_bytes:
        raise OptionError(
            f"the instances need {memory:,} bytes of device memory in all; {soc.name} has {soc.device_memory_bytes:,}"
        )


def run_tenants(
    models: Sequence[Model],
    slices: Sequence[int],
    inputs: Sequence[Mapping[str, np.ndarray] | None],
    config: RunConfig | None = None,
    names: Sequence[str] | None = None,
) -> ChipRun:
    """Run `models[i]` on `slices[i]` AI cores with `inputs[i]`, all at once on one chip, and each alone."""
    config = config if config is not None else RunConfig()
    names = list(names) if names is not None else [f"model {i}" for i in range(len(models))]
    if not len(models) == len(slices) == len(inputs) == len(names):
        raise OptionError(f"{len(models)} models, {len(slices)} slices and {len(inputs)} inputs: give one of each per instance")
    if config.aicore_num is not None:
        raise OptionError(f"aicore_num {config.aicore_num} is for one model; a virtual-instance run gives each model its slice")
    check_slices(models, slices, names)
    runtimes = [Runtime(m, dataclasses.replace(config, aicore_num=n)) for m, n in zip(models, slices)]
    alone = [r.run(feeds) for r, feeds in zip(runtimes, inputs)]
    ledger = timing.GmLedger(timing.chip_gm_bytes_per_cycle(runtimes[0].soc))
    l2 = L2.of(runtimes[0].soc) if config.l2_cache else None
    bases = [sum(r.model.memory.total for r in runtimes[:i]) for i in range(len(runtimes))]
    executions = [
        r.start(feeds, ledger, l2=None if l2 is None else dataclasses.replace(l2, base=base))
        for r, feeds, base in zip(runtimes, inputs, bases)
    ]
    while True:
        pending = [(t, i) for i, e in enumerate(executions) if (t := e.next_time()) is not None]
        if not pending:
            break
        executions[min(pending)[1]].step()
    shared = [e.finish() for e in executions]
    tenants = []
    first = {"AiCore": 0, "VectorCore": 0}
    for name, n, a, s in zip(names, slices, alone, shared):
        tenants.append(Tenant(name, n, dict(first), a.profile, s.profile, s.outputs, a.outputs))
        first = {kind: at + s.profile.cores.get(kind, 0) for kind, at in first.items()}
    return ChipRun(runtimes[0].soc.name, tuple(tenants))
