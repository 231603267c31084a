"""Data dumps and overflow detection: what a run with numerics watches of its kernel tasks.

NPURunConfig's dump (`enable_dump`): each kernel task of a selected iteration
(`dump_step`) whose ops are listed (`dump_layer`, or all) writes its inputs and/or
outputs (`dump_mode`) as `.npy` in their logical layout (decoded from the device
format) to `dump_path/<step>/`, listed in that folder's `manifest.json`, so that a
dump lines up with a framework's per-node values (`ge compare`).

Overflow detection (`enable_dump_debug`) writes the kernel tasks whose finite
inputs gave inf or NaN outputs, with their tensors, to `dump_debug_path/<step>/`.
Without it a run still notices non-finite outputs, at a small cost: only outputs are
checked (`np.isfinite` on the bytes the kernel writes), and a kernel's inputs are
read only when one of its outputs is not finite. The first kernel that turned finite
inputs into inf/NaN is where precision was lost; later ones mostly propagate it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ge.core.files import published
from ge.om.tasks import Arg, KernelTask
from ge.sim.config import RunConfig
from ge.sim.kernels import Layout
from ge.sim.program import Header

MANIFEST = "manifest.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class Overflow:
    """A kernel task whose finite inputs gave inf or NaN outputs."""

    task: int
    kernel: str
    ops: tuple[str, ...]
    op_types: tuple[str, ...]
    outputs: tuple[int, ...]
    dtype: str

    def advice(self) -> str:
        """One line naming the op and the precision options that keep it out of float16."""
        names = "+".join(self.ops)
        where = f"kernel task {self.task} ('{names}', {'+'.join(self.op_types)})"
        if self.dtype not in ("float16", "bfloat16"):
            return f"{where} turned finite inputs into inf/NaN in {self.dtype}"
        return (
            f"{where} turned finite inputs into inf/NaN in {self.dtype}; compile with --precision_mode=allow_fp32_to_fp16 "
            f"or must_keep_origin_dtype, or keep its dtype with --keep_dtype (a file naming {self.ops[-1]})"
        )


@dataclass
class Watch:
    """One run's dumps and overflow records."""

    config: RunConfig
    step: int
    dumping: bool = False
    debugging: bool = False
    layer: frozenset[str] | None = None
    entries: list[dict] = field(default_factory=list)
    debug_entries: list[dict] = field(default_factory=list)
    overflows: list[Overflow] = field(default_factory=list)
    nonfinite: int = 0
    """Kernel tasks with an inf or NaN output, from finite inputs or not."""

    def __post_init__(self) -> None:
        config, steps = self.config, self.config.steps()
        self.dumping = config.enable_dump and (steps is None or any(a <= self.step <= b for a, b in steps))
        self.debugging = config.enable_dump_debug and config.dump_debug_mode != "atomic_overflow"
        self.layer = frozenset(config.dump_layer.split()) if config.dump_layer else None

    def kernel(
        self, index: int, task: KernelTask, header: Header, layouts: tuple[list[Layout], list[Layout]],
        memory: np.ndarray, writes: list[tuple[int, np.ndarray]],
    ) -> None:
        """Watch one kernel task: `memory` still holds its inputs, `writes` its outputs' bytes."""
        ins, outs = layouts
        bad = tuple(i for i, (layout, (_, data)) in enumerate(zip(outs, writes)) if not _finite(data, layout.dtype))
        ops = tuple(task.name.split("+"))
        if self.dumping and (self.layer is None or not self.layer.isdisjoint(ops)):
            tensors = _tensors(self.config.dump_mode, ins, outs, task.inputs, memory, writes)
            folder = Path(self.config.dump_path) / str(self.step)  # type: ignore[arg-type]
            self.entries += _write(folder, index, task, header, tensors)
        if not bad:
            return
        self.nonfinite += 1
        if not all(_finite(layout.physical(memory, arg.addr), layout.dtype) for layout, arg in zip(ins, task.inputs)):
            return  # inf/NaN came in: propagated, not made here
        self.overflows.append(Overflow(index, task.kernel, ops, header.op_types, bad, str(outs[bad[0]].dtype)))
        if self.debugging:
            folder = Path(self.config.dump_debug_path or self.config.dump_path) / str(self.step)  # type: ignore[arg-type]
            self.debug_entries += _write(folder, index, task, header, _tensors("all", ins, outs, task.inputs, memory, writes))

    def finish(self) -> None:
        """Write the manifests of what was dumped."""
        if self.dumping:
            _manifest(Path(self.config.dump_path) / str(self.step), self.entries)  # type: ignore[arg-type]
        if self.debugging:
            _manifest(Path(self.config.dump_debug_path or self.config.dump_path) / str(self.step), self.debug_entries)  # type: ignore[arg-type]


def _finite(data: np.ndarray, dtype: np.dtype) -> bool:
    """True for an integer tensor or a float one without inf or NaN."""
    if dtype.kind != "f" and dtype.name != "bfloat16":
        return True
    return bool(np.isfinite(data.view(dtype)).all())


def _tensors(
    mode: str, ins: list[Layout], outs: list[Layout], args: Sequence[Arg], memory: np.ndarray, writes: list[tuple[int, np.ndarray]]
) -> list[tuple[str, int, np.ndarray]]:
    """(input/output, index, logical value) of the tensors `mode` dumps."""
    tensors = []
    if mode in ("input", "all"):
        tensors += [("input", i, layout.load(memory, arg.addr)) for i, (layout, arg) in enumerate(zip(ins, args))]
    if mode in ("output", "all"):
        tensors += [("output", i, layout.load(data, 0)) for i, (layout, (_, data)) in enumerate(zip(outs, writes))]
    return tensors


def _write(folder: Path, index: int, task: KernelTask, header: Header, tensors: list[tuple[str, int, np.ndarray]]) -> list[dict]:
    """Each tensor as `<task>.<kernel>.<input|output>.<i>.npy` in `folder`; their manifest entries."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for kind, i, value in tensors:
        name = f"{index}.{_UNSAFE.sub('_', task.kernel)}.{kind}.{i}.npy"
        with published(folder / name, "wb", what="dump file") as f:
            np.save(f, value)
        entries.append({
            "task": index, "kernel": task.kernel, "ops": task.name.split("+"), "op_types": list(header.op_types),
            "tensor": kind, "index": i, "dtype": str(value.dtype), "shape": list(value.shape), "file": name,
        })  # fmt: skip
    return entries


def _manifest(folder: Path, entries: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with published(folder / MANIFEST, "w", what="dump manifest") as f:
        json.dump({"tensors": entries}, f, indent=1)
        f.write("\n")
