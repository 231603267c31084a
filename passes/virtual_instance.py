"""`virtual-instance`: partition every kernel's work for virtual instances (GE's
`--virtual_type=1`).

A virtual instance (a vNPU) is a slice of the chip's AI cores, of one of the sizes
the SoC allows (`SocProfile.virtual_aicore_nums`, e.g. 1, 2, 4 or 8 of the 8 cores of
an Ascend310P3). A kernel of block_dim b runs on a slice of s cores in ceil(b / s)
waves, balanced only when s divides b. So the model is tiled once for the least
common multiple L of the allowed sizes: every kernel-making op gets
`_virtual_cores = L`, and `lower-to-kernel` gives its kernel a block_dim that is a
multiple of L (cutting the work into L shares; a kernel with fewer work units than L
keeps idle blocks). Soft-sync ops, whose blocks meet at a cross-core barrier and so
must all be resident at once, cannot be spread over more blocks than a slice has
cores: they get `_virtual_cores = 1` and run on one core, as GE does (the reference
warns that this slows them). Vector kernels stay on the AI cores (no vector-core
attachment), since a slice's share of the vector cores is not fixed.

The numbers a model computes do not depend on its tiling; only its time does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.passes import ModulePass

from dialects.kernel_boundary import VIRTUAL_CORES_ATTR, makes_kernel, op_type
from ge.core import opinfo, soc
from ge.core.errors import OptionError
from ge.core.options import option_field

SOFT_SYNC_OP_TYPES = ("DynamicRNN", "PadV2D", "SquareSumV2", "DynamicRNNV2", "DynamicRNNV3", "DynamicGRUV2")
"""The soft-sync op types GE's reference names; the op information library marks
others (`OpInfo.soft_sync`)."""


@dataclass(frozen=True)
class VirtualInstance(ModulePass):
    """Tile every kernel for virtual instances: block_dim a multiple of the LCM of the
    SoC's slice sizes; soft-sync ops on one core."""

    name = "virtual-instance"

    soc_version: str = option_field("soc_version")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        profile = soc.load(self.soc_version)
        if not profile.virtual_aicore_nums:
            raise OptionError(f"virtual-instance: {profile.name} has no virtual instances (no allowed slice sizes)")
        cores = math.lcm(*profile.virtual_aicore_nums)
        library = opinfo.load(self.soc_version)
        for child in op.walk():
            if not makes_kernel(child):
                continue
            kind = op_type(child)
            soft_sync = kind in SOFT_SYNC_OP_TYPES or (kind in library.ops and library.op(kind).soft_sync)
            child.attributes[VIRTUAL_CORES_ATTR] = IntegerAttr(1 if soft_sync else cores, 64)
