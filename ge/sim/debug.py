"""The operator debug options on the simulator: op_debug_config's `oom`, the kernel
programs written to kernel_meta (op_debug_level 1, 2 and 4, dump_cce, dump_loc), and
enable_exception_dump's dump of a failing kernel.

`oom`: a kernel's GM writes checked against its task's argument ranges as it starts.

A kernel's pipe program names the GM buffer each copy writes (its program block's
arguments are the task's inputs, outputs and workspace, in that order) and how many
bytes it moves, not where in the buffer: the check is on extents. Every copy into GM
must fit its argument's allocation (its size rounded up to the memory plan's
alignment); a tiling whose copy is larger overwrites the tensors after it (the
reference's "memory overwriting in the Global Memory"), and the check fails the kernel
naming the task, the argument and the range it would reach.

What byte counts cannot bound is left unchecked: the sum of a kernel's writes (a
workspace is rewritten in place, attention's blocks each write per head) and its
reads (a convolution's tiles re-read halo rows, so a tile can hold more bytes than
its input). The numerics refuse an argument whose size is not its tensor's.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np

from ge.core.errors import ModelError
from ge.core.files import published
from ge.om.memory import ALIGNMENT
from ge.om.tasks import Arg, KernelTask
from ge.sim.program import BARRIER, LOOP, RUN, SET, SIM_PIPES, WAIT, KernelText

_ARG = re.compile(r"(%\w+): !ascend_kernel\.buffer<\"GM\">")
_WRITE = re.compile(r"^\s*ascend_kernel\.copy \"\w+\" %\w+ -> (%\w+), (\d+) bytes")


def largest_writes(kernel: KernelText) -> dict[str, int]:
    """The largest single copy into each buffer of the kernel's program, by value name."""
    largest: dict[str, int] = {}
    for line in kernel.program_lines:
        write = _WRITE.match(line)
        if write is not None:
            largest[write.group(1)] = max(largest.get(write.group(1), 0), int(write.group(2)))
    return largest


def check_oom(kernel: KernelText, largest: dict[str, int], task: KernelTask, index: int) -> None:
    """Fail a kernel task whose program would write GM outside its arguments
    (`largest`: the kernel's `largest_writes`)."""
    args: list[Arg] = [*task.inputs, *task.outputs, *task.workspace]
    for position, (name, arg) in enumerate(zip(_ARG.findall(kernel.program_args_line), args)):
        end = arg.addr + -(-arg.size // ALIGNMENT) * ALIGNMENT
        nbytes = largest.get(name, 0)
        if arg.addr + nbytes > end:
            raise ModelError(
                f"oom: task {index} ('{task.name}') kernel @{kernel.header.name} writes {nbytes} bytes to argument "
                f"{position} ({name}) at {arg.addr}, reaching {arg.addr + nbytes}, past its allocation [{arg.addr}, {end})"
            )


# ------------------------------------------------------------------ kernel_meta


def kernel_meta_dir(debug_dir: str | None) -> str:
    """Where kernel_meta goes, in the reference's order: debug_dir, else ASCEND_WORK_PATH,
    else the current directory."""
    return os.path.join(debug_dir or os.environ.get("ASCEND_WORK_PATH") or os.curdir, "kernel_meta")


def write_kernel_meta(kernels: dict[str, KernelText], directory: str) -> list[str]:
    """Each kernel's IR (`<name>.mlir`: header, compute and program regions) and its
    pipe program one pipe at a time (`<name>.pipes.txt`, cycles as the simulator
    prices them); the paths written."""
    os.makedirs(directory, exist_ok=True)
    written = []
    for name, kernel in kernels.items():
        ir = "\n".join([kernel.header_line, *kernel.compute_lines, "} program {", kernel.program_args_line, *kernel.program_lines, "}", ""])
        for path, text in ((f"{name}.mlir", ir), (f"{name}.pipes.txt", pipe_listing(kernel))):
            with published(os.path.join(directory, path), what="kernel_meta file") as f:
                f.write(text)
            written.append(os.path.join(directory, path))
    return written


def pipe_listing(kernel: KernelText) -> str:
    """One block's program as one section per pipe: the instructions each pipe issues,
    in order, loop bodies indented under their trip counts."""
    sections: dict[int, list[str]] = {p: [] for p in range(len(SIM_PIPES))}

    def walk(body: tuple, depth: int) -> None:
        indent = "  " * depth
        for instr in body:
            kind = instr[0]
            if kind == LOOP:
                for p in instr[3]:
                    sections[p].append(f"{indent}loop {instr[1]} times:")
                walk(instr[2], depth + 1)
            elif kind == RUN:
                sections[instr[1]].append(f"{indent}{instr[7]}  ({instr[2]:.1f} cycles)")
            elif kind in (SET, WAIT):
                src, dst, event = instr[2]
                verb = "set_flag" if kind == SET else "wait_flag"
                sections[instr[1]].append(f"{indent}{verb} {SIM_PIPES[src]} -> {SIM_PIPES[dst]}, {event}")
            elif kind == BARRIER:
                sections[instr[1]].append(f"{indent}pipe_barrier")
            else:
                for lines in sections.values():
                    lines.append(f"{indent}sync_all")

    walk(kernel.program(), 0)
    header = kernel.header
    out = [f"kernel @{header.name}: {'+'.join(header.op_types)}, block_dim {header.block_dim}, {header.core_type}, {header.soc}"]
    for pipe, lines in sections.items():
        if lines:
            out += ["", f"pipe {SIM_PIPES[pipe]}:", *(f"  {line}" for line in lines)]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ exception dump


def exception_dump_dir(mode: int, device_id: int) -> str:
    """Where enable_exception_dump puts a failing kernel's data, as the reference says:
    $NPU_COLLECT_PATH whatever the mode; else mode 1 the current directory, mode 2
    `extra-info/data-dump/<device_id>` under $ASCEND_WORK_PATH or the current directory."""
    collect = os.environ.get("NPU_COLLECT_PATH")
    if collect:
        return collect
    if mode == 1:
        return os.curdir
    return os.path.join(os.environ.get("ASCEND_WORK_PATH") or os.curdir, "extra-info", "data-dump", str(device_id))


def dump_exception(
    directory: str, index: int, task: KernelTask, kernel: KernelText, memory: np.ndarray | None,
    layouts: tuple[list, list] | None, error: str,
) -> str:
    """A failing kernel task's arguments as they are in device memory (`.npy`, in their
    tensors' dtype and device shape where the kernel's types say, else raw bytes) and
    a JSON of the task, its tiling and the error; returns the JSON's path."""
    os.makedirs(directory, exist_ok=True)
    stem = os.path.join(directory, f"{kernel.header.name}.{index}")
    ins, outs = layouts if layouts is not None else ([], [])
    roles = [("input", i, a, ins[i] if i < len(ins) else None) for i, a in enumerate(task.inputs)]
    roles += [("output", i, a, outs[i] if i < len(outs) else None) for i, a in enumerate(task.outputs)]
    roles += [("workspace", i, a, None) for i, a in enumerate(task.workspace)]
    args = []
    for role, i, arg, layout in roles:
        entry: dict[str, object] = {"role": role, "index": i, "addr": arg.addr, "size": arg.size}
        if memory is not None and 0 <= arg.addr and arg.addr + arg.size <= memory.size:
            data = memory[arg.addr : arg.addr + arg.size]
            if layout is not None and layout.nbytes == arg.size:
                data = data.view(layout.dtype).reshape(layout.shape)
                entry.update(dtype=str(layout.dtype), shape=list(layout.shape), format=layout.format)
            file = f"{stem}.{role}.{i}.npy"
            with published(file, "wb", "exception dump") as f:
                np.save(f, data)
            entry["file"] = os.path.basename(file)
        args.append(entry)
    header = kernel.header
    tiling = re.search(r"tiling = \{([^{}]*)\}", kernel.header_line)
    description = {
        "task": index, "name": task.name, "kernel": header.name, "op_types": list(header.op_types),
        "block_dim": task.block_dim, "core_type": header.core_type, "error": error,
        "tiling": {k: int(v) for k, v in re.findall(r"(\w+) = (-?\d+) : i64", tiling.group(1))} if tiling else {},
        "args": args,
    }
    with published(f"{stem}.json", what="exception dump") as f:
        json.dump(description, f, indent=1)
    return f"{stem}.json"
