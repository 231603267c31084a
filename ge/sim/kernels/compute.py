"""A kernel's numerics: its compute region, run between device-memory reads and writes.

The compute regions of a model's kernels are parsed with xDSL the first time a
kernel runs with numerics (all kernels of the model at once: one parse is cheaper
than one per kernel). The ops run in order on the values each argument's bytes
hold in the dtype and format its type declares: a convolution whose input and
filter are in NC1HWC0 and FRACTAL_Z as the cube's product on those layouts
(`cube`), every other op with the reference interpreter's kernel
(`ge.core.reference.evaluate_op`).

A value of data-dependent shape (an AI CPU kernel's NonZero, Unique, Compress or
NonMaxSuppression, or of an op reading such a value) has the layout of its upper
bound, the shape its kernel argument declares: an output's values are written from
the start of it, zeros after, and its actual shape is reported to the runtime; an
input is read at the actual shape its producer reported.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue
from xdsl.utils.exceptions import ParseError, VerifyException

from dialects import ascend_graph as ag
from dialects.ascend_kernel import ArgAttr, KernelOp, YieldOp
from dialects.shapes import is_static
from ge.core import ir, reference
from ge.om.tasks import Arg
from ge.core.errors import ModelError
from ge.sim.kernels import cube
from ge.sim.kernels.layout import Layout
from ge.sim.program import KernelText


_WIDE_INTEGER = re.compile(r"(?<![\w%@#$.])[su]?i\d{3,}\b")
"""An integer type of 100 bits or more (the kernels' dtypes have at most 64)."""


class Numerics:
    """The compute regions of one model's kernels, and how to run one on device memory.

    `constants` is a range of device memory no task writes (the weight region, which
    only the model's load fills): the logical values read from it are kept, laid out
    contiguously, from one kernel and run to the next, rather than converted out of
    FRACTAL_Z again at every launch.
    """

    def __init__(self, kernels: dict[str, KernelText], constants: tuple[int, int] = (0, 0)):
        self._texts = kernels
        self._ops: dict[str, KernelOp] | None = None
        self._layouts: dict[str, tuple[list[Layout], list[Layout]]] = {}
        self._constants = constants
        self._kept: dict[tuple, np.ndarray] = {}

    def kernel(self, name: str) -> KernelOp:
        if self._ops is None:
            self._ops = self._parse()
        if name not in self._ops:
            raise ModelError(f"the model has no kernel @{name}")
        return self._ops[name]

    def _parse(self) -> dict[str, KernelOp]:
        """The kernels' compute regions. A `.om`'s text is read, not trusted: an integer
        type wider than any dtype is refused before xDSL sizes its range (an `i` of a
        billion bits), `ir.parse` bounds nesting and constants and verifies the IR, and
        what xDSL refuses is a ModelError."""
        text = "\n".join(k.compute_text() for k in self._texts.values())
        wide = _WIDE_INTEGER.search(text)
        if wide is not None:
            raise ModelError(f"the model's kernels declare the integer type {wide.group(0)[:40]}; the widest dtype has 64 bits")
        try:
            module = ir.parse(text, "kernels.mlir")  # bounded, then verified: the ops' shape rules hold,
            # so their attributes size nothing their types do not
        except (ParseError, VerifyException, ValueError) as e:
            raise ModelError(f"the model's kernels do not parse: {e}") from e
        return {op.sym_name.data: op for op in module.ops if isinstance(op, KernelOp)}

    def layouts(self, name: str) -> tuple[list[Layout], list[Layout]]:
        """The layouts of the kernel's inputs and outputs, from its compute region's types
        (a dynamic one's: its argument's upper bound)."""
        if name not in self._layouts:
            kernel = self.kernel(name)
            ins = [Layout.of_type(_bounded(a.type, arg)) for a, arg in zip(kernel.compute.block.args, kernel.inputs)]
            outs = [Layout.of_type(_bounded(v.type, arg)) for v, arg in zip(kernel.yield_op.values, kernel.outputs)]
            self._layouts[name] = (ins, outs)
        return self._layouts[name]

    def run(
        self, name: str, label: str, memory: np.ndarray, inputs: Sequence[Arg], outputs: Sequence[Arg],
        shapes: dict[int, tuple[int, ...]] | None = None,
    ) -> list[tuple[int, np.ndarray]]:
        """Read the kernel's inputs from `memory`, compute, and return the writes
        (address, bytes) of its outputs, for the runtime to apply when it ends; the
        actual shapes of data-dependent values are in `shapes` by address: an input's
        read from it, an output's written to it (a static output's address forgotten)."""
        ins, outs = self.layouts(name)
        where = f"kernel @{name} ('{label}')"
        if len(inputs) != len(ins) or len(outputs) != len(outs):
            raise ModelError(
                f"{where} takes {len(ins)} inputs and {len(outs)} outputs; its task gives {len(inputs)} and {len(outputs)}"
            )
        for i, (layout, arg) in enumerate(zip(ins, inputs)):
            layout.check(arg.size, f"{where} input {i}")
        kernel = self.kernel(name)
        actual: dict[SSAValue, tuple[int, ...]] = {}
        for i, (a, arg) in enumerate(zip(kernel.compute.block.args, inputs)):
            if not is_static(ag.shape_of(a.type)):
                if shapes is None or arg.addr not in shapes:
                    raise ModelError(f"{where} input {i} has a data-dependent shape, and no kernel before it reported one")
                actual[a] = shapes[arg.addr]
        results = self._evaluate(kernel, ins, [a.addr for a in inputs], memory, actual)
        writes = []
        for i, (layout, arg, value, v) in enumerate(zip(outs, outputs, results, kernel.yield_op.values)):
            layout.check(arg.size, f"{where} output {i}")
            if is_static(ag.shape_of(v.type)):
                writes.append((arg.addr, layout.store(value)))
                if shapes is not None:
                    shapes.pop(arg.addr, None)
                continue
            data = np.zeros(layout.nbytes, np.uint8)
            flat = np.ascontiguousarray(value, layout.dtype).reshape(-1).view(np.uint8)
            if flat.size > data.size:
                raise ModelError(f"{where} output {i}: {list(np.shape(value))} is beyond its upper bound {list(layout.shape)}")
            data[: flat.size] = flat
            writes.append((arg.addr, data))
            if shapes is not None:
                shapes[arg.addr] = tuple(np.shape(value))
        return writes

    def _evaluate(
        self, kernel: KernelOp, layouts: list[Layout], addrs: list[int], memory: np.ndarray, actual: dict[SSAValue, tuple[int, ...]],
    ) -> list[np.ndarray]:
        """The compute region's ops in order: a convolution on device layouts by the
        cube's img2col product (`cube`), every other op by the reference interpreter;
        an argument in `actual` is the start of its buffer at that shape."""
        block = kernel.compute.block
        arguments = {a: (layout, addr) for a, layout, addr in zip(block.args, layouts, addrs)}
        values: dict[SSAValue, np.ndarray] = {}

        def logical(v: SSAValue) -> np.ndarray:
            if v not in values:
                layout, addr = arguments[v]
                values[v] = self._load(layout, memory, addr)
                if v in actual:
                    values[v] = values[v].reshape(-1)[: math.prod(actual[v])].reshape(actual[v])
            return values[v]

        for op in block.ops:
            if isinstance(op, YieldOp):
                return [logical(v) for v in op.values]
            if isinstance(op, ag.Conv2DOp) and op.x in arguments and op.filter in arguments:
                (x, x_addr), (w, w_addr) = arguments[op.x], arguments[op.filter]
                if cube.fits(op, x.format, w.format, x.dtype) and w.dtype == x.dtype:
                    bias = logical(op.bias) if op.bias is not None else None
                    b = self._filter(w, memory, w_addr)
                    try:
                        values[op.y] = cube.conv2d(op, x.physical(memory, x_addr), b, w.origin_shape[2:], bias)
                    except ValueError as e:  # a shape rule the kernel's attributes break (as the reference reports it)
                        raise ModelError(f"kernel @{kernel.sym_name.data}: {e}") from e
                    continue
            for r, value in zip(op.results, reference.evaluate_op(op, [logical(v) for v in op.operands])):
                values[r] = value
        raise ModelError(f"kernel @{kernel.sym_name.data}: its compute region does not end in ascend_kernel.yield")

    def _filter(self, layout: Layout, memory: np.ndarray, addr: int) -> np.ndarray:
        """A FRACTAL_Z filter as the cube's B matrix (kept when it is a constant)."""
        key = (addr, layout, "filter")
        if key in self._kept:
            return self._kept[key]
        b = cube.filter_matrix(layout.physical(memory, addr))
        lo, hi = self._constants
        if lo <= addr < addr + layout.nbytes <= hi:
            self._kept[key] = b
        return b

    def _load(self, layout: Layout, memory: np.ndarray, addr: int) -> np.ndarray:
        lo, hi = self._constants
        if not lo <= addr < addr + layout.nbytes <= hi:
            return layout.load(memory, addr)
        key = (addr, layout)
        if key not in self._kept:
            value = np.array(layout.load(memory, addr), order="C")  # (ascontiguousarray makes a 0-d array 1-d)
            value.flags.writeable = False
            self._kept[key] = value
        return self._kept[key]


def _bounded(t: object, arg: ArgAttr) -> TensorType:
    """A compute value's type, or for a data-dependent one its upper bound, which its
    argument declares."""
    t = _tensor(t)
    if is_static(t.get_shape()):
        return t
    return ag.tensor(t.element_type, arg.shape.get_values())


def _tensor(t: object) -> TensorType:
    if not isinstance(t, TensorType):
        raise ModelError(f"a kernel argument of type {t} is not a tensor")
    return t
