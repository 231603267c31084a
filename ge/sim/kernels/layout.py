"""A tensor's bytes in device memory: its dtype, physical shape and format.

Device memory holds the physical layout (`dialects.formats`: a float16 NC1HWC0
tensor of 3 channels occupies 16, the padding zero); kernels compute on logical
values. `Layout.load` turns the bytes at an address into the logical array (a view
of the memory where the layout allows), `Layout.store` a logical array into the
bytes to write, always a copy of its own, so that a write waiting for its kernel's
end cannot change when memory does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import TensorType

from dialects import formats
from dialects.ascend_graph import FormatAttr
from ge.core import dtypes
from ge.core.errors import ModelError


@dataclass(frozen=True)
class Layout:
    """How one tensor lies in memory."""

    dtype: np.dtype
    shape: tuple[int, ...]
    """The physical shape."""
    format: str
    origin_format: str
    origin_shape: tuple[int, ...]
    """The logical shape (the physical one unless the format is a device format)."""

    @classmethod
    def of_type(cls, t: TensorType) -> Layout:
        shape = tuple(t.get_shape())
        dtype = dtypes.to_numpy(t.element_type)
        if isinstance(t.encoding, FormatAttr):
            enc = t.encoding
            return cls(dtype, shape, enc.format.data, enc.origin_format.data, tuple(enc.origin_shape.get_values()))
        origin = "NCHW" if len(shape) == 4 else "ND"
        return cls(dtype, shape, origin, origin, shape)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def device_format(self) -> bool:
        return self.format in formats.DEVICE_FORMATS

    def check(self, size: int, what: str) -> None:
        """The bytes an argument covers must be the bytes the tensor needs."""
        if size != self.nbytes:
            raise ModelError(f"{what} covers {size} bytes, but its {self.dtype}{list(self.shape)} {self.format} tensor needs {self.nbytes}")

    def physical(self, memory: np.ndarray, addr: int) -> np.ndarray:
        """The tensor at `addr` as laid out (a view of the memory)."""
        end = addr + self.nbytes
        if addr < 0 or end > memory.size:
            raise ModelError(f"a {self.nbytes}-byte tensor at {addr} lies outside the {memory.size}-byte device memory")
        return memory[addr:end].view(self.dtype).reshape(self.shape)

    def load(self, memory: np.ndarray, addr: int) -> np.ndarray:
        """The logical value of the tensor at `addr` (read-only)."""
        physical = self.physical(memory, addr)
        value = formats.to_logical(physical, self.format, self.origin_format, self.origin_shape) if self.device_format else physical
        value = value.view()
        value.flags.writeable = False
        return value

    def store(self, value: np.ndarray) -> np.ndarray:
        """The bytes of logical `value` in this layout (a new array)."""
        value = np.asarray(value)
        if value.dtype != self.dtype or value.shape != self.origin_shape:
            raise ModelError(f"a value of {value.dtype}{list(value.shape)} cannot be stored as {self.dtype}{list(self.origin_shape)}")
        physical = formats.to_physical(value, self.format, self.origin_format) if self.device_format else value
        return np.array(physical, order="C", copy=True).reshape(-1).view(np.uint8)
