"""op_debug_config's `oom` on the simulator: a kernel's GM writes checked against its
task's argument ranges before it runs.

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

import re

from ge.core.errors import ModelError
from ge.om.memory import ALIGNMENT
from ge.om.tasks import Arg, KernelTask
from ge.sim.program import KernelText

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


def check_oom(kernel: KernelText, task: KernelTask, index: int) -> None:
    """Refuse a kernel task whose program would write GM outside its arguments."""
    largest = largest_writes(kernel)
    args: list[Arg] = [*task.inputs, *task.outputs, *task.workspace]
    for position, (name, arg) in enumerate(zip(_ARG.findall(kernel.program_args_line), args)):
        end = arg.addr + -(-arg.size // ALIGNMENT) * ALIGNMENT
        nbytes = largest.get(name, 0)
        if arg.addr + nbytes > end:
            raise ModelError(
                f"oom: task {index} ('{task.name}') kernel @{kernel.header.name} writes {nbytes} bytes to argument "
                f"{position} ({name}) at {arg.addr}, reaching {arg.addr + nbytes}, past its allocation [{arg.addr}, {end})"
            )
