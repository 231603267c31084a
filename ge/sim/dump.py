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
from xdsl.ir import Operation, SSAValue

from dialects import ascend_graph as ag
from dialects.ascend_kernel import KernelOp, YieldOp
from ge.core import reference
from ge.core.files import published
from ge.om.tasks import Arg, KernelTask
from ge.sim.config import RunConfig
from ge.sim.kernels import Layout, Numerics
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
    op: str
    """The op of the kernel that made the first inf/NaN (or read it from a weight)."""
    op_type: str
    dtype: str
    """The dtype `op` computed in."""
    weight: bool = False
    """The inf/NaN came from a weight, not from the kernel. Precision selection saturates the
    constants it converts to 16 bits, so such a weight was not finite in the model either."""

    def advice(self) -> str:
        """One line naming the op, where it ran, and the precision options that keep it in float32."""
        where = f"op '{self.op}' ({self.op_type}, kernel task {self.task} @{self.kernel})"
        if self.weight:
            return f"{where} reads a weight holding inf/NaN in {self.dtype}, as the model's constant does (no precision option changes it)"
        what = f"turned finite inputs into inf/NaN in {self.dtype}"
        if self.dtype not in ("float16", "bfloat16"):
            return f"{where} {what}"
        mixlist = json.dumps({"black-list": {"to-add": [self.op_type]}})
        return (
            f"{where} {what}; keep it in float32: compile with --precision_mode=allow_mix_precision and "
            f"--modify_mixlist=FILE holding {mixlist}, or with --keep_dtype=FILE naming {self.op} (or OpType::{self.op_type}), "
            "or with --precision_mode=allow_fp32_to_fp16 or must_keep_origin_dtype"
        )


class NonFiniteWarning(UserWarning):
    """A run's outputs hold inf or NaN, or a kernel made them: `Session.run` warns with it
    (naming the first op that did, and the options that avoid it); `ge run` prints it."""


@dataclass
class Watch:
    """One run's dumps and overflow records."""

    config: RunConfig
    step: int
    weights: tuple[int, int] = (0, 0)
    """The device memory range of the weights: a non-finite input there was made by the compile."""
    entries: list[dict] = field(default_factory=list)
    debug_entries: list[dict] = field(default_factory=list)
    overflows: list[Overflow] = field(default_factory=list)
    dumping: bool = field(init=False)
    debugging: bool = field(init=False)
    layer: frozenset[str] | None = field(init=False)
    folder: Path = field(init=False)
    debug_folder: Path = field(init=False)

    def __post_init__(self) -> None:
        config, steps = self.config, self.config.steps()
        self.dumping = config.enable_dump and (steps is None or any(a <= self.step <= b for a, b in steps))
        self.debugging = config.enable_dump_debug and config.dump_debug_mode != "atomic_overflow"
        self.layer = frozenset(config.dump_layer.split()) if config.dump_layer else None
        self.folder = Path(config.dump_path or ".") / str(self.step)
        self.debug_folder = Path(config.dump_debug_path or config.dump_path or ".") / str(self.step)

    def kernel(
        self, index: int, task: KernelTask, header: Header, numerics: Numerics, memory: np.ndarray, writes: list[tuple[int, np.ndarray]]
    ) -> None:
        """Watch one kernel task: `memory` still holds its inputs, `writes` its outputs' bytes."""
        ins, outs = numerics.layouts(task.kernel)
        bad = tuple(i for i, (layout, (_, data)) in enumerate(zip(outs, writes)) if not _finite(data, layout.dtype))
        ops = tuple(task.name.split("+"))
        if self.dumping and (self.layer is None or not self.layer.isdisjoint(ops)):
            tensors = _tensors(self.config.dump_mode, ins, outs, task.inputs, memory, writes)
            self.entries += _write(self.folder, index, task, header, tensors)
        if not bad:
            return
        came = [arg for layout, arg in zip(ins, task.inputs) if not _finite(layout.physical(memory, arg.addr), layout.dtype)]
        weight = any(self.weights[0] <= arg.addr < self.weights[1] for arg in came)
        if came and not weight:
            return  # inf/NaN came in from another kernel or the inputs: propagated, not made here
        values = [layout.load(memory, arg.addr) for layout, arg in zip(ins, task.inputs)]
        op, dtype = _first_nonfinite(numerics.kernel(task.kernel), values)
        label = op.label if isinstance(op, ag.AscendOp) else task.name
        op_type = op.OP_TYPE if isinstance(op, ag.AscendOp) else "+".join(header.op_types)
        self.overflows.append(Overflow(index, task.kernel, ops, header.op_types, bad, label, op_type, dtype or str(outs[bad[0]].dtype), weight))
        if self.debugging:
            self.debug_entries += _write(self.debug_folder, index, task, header, _tensors("all", ins, outs, task.inputs, memory, writes))

    def finish(self) -> None:
        """Write the manifests of what was dumped."""
        if self.dumping:
            _manifest(self.folder, self.entries)
        if self.debugging:
            _manifest(self.debug_folder, self.debug_entries)


def _first_nonfinite(kernel: KernelOp, inputs: list[np.ndarray]) -> tuple[Operation | None, str | None]:
    """The first op of the kernel's compute region that made an inf/NaN from finite
    operands, or read one from an argument, and the dtype it computed in (the
    reference interpreter's values: only run for a kernel that overflowed)."""
    block = kernel.compute.block
    values: dict[SSAValue, np.ndarray] = dict(zip(block.args, inputs))
    with np.errstate(all="ignore"):
        for op in block.ops:
            if isinstance(op, YieldOp):
                break
            operands = [values[v] for v in op.operands]
            if any(not _finite(v, v.dtype) for v, arg in zip(operands, op.operands) if arg in block.args):
                return op, str(operands[0].dtype)
            results = reference.evaluate_op(op, operands)
            if not all(_finite(r, r.dtype) for r in results):
                return op, str(results[0].dtype)
            values.update(zip(op.results, results))
    return None, None


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
