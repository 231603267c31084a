"""The simulator's numerics: what each kernel computes, in device memory.

A kernel reads its inputs from device memory at its argument addresses and writes
its outputs there, in the dtypes and physical formats the compiler chose (`layout`:
NC1HWC0, FRACTAL_Z and FRACTAL_NZ bytes really laid out so). Between those two
points it runs its `compute` region (`compute`) on the logical values with the
reference interpreter's op kernels, which multiply in the input dtype and
accumulate in float32 on the cube, round every vector op to its result dtype, and
compute each op's implementation mode (`impl_mode`) as the hardware's
approximations do. Nothing else carries a value from one kernel to the next, so a
memory plan that lets two live tensors share bytes gives a wrong answer.
"""

from ge.sim.kernels.compute import Numerics
from ge.sim.kernels.layout import Layout

__all__ = ["Layout", "Numerics"]
