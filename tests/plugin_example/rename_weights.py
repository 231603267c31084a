"""A pass plug-in: copies every weight under a new name, so that its file is stale."""
from dataclasses import dataclass

from xdsl.passes import ModulePass

from dialects.ascend_graph import ConstOp, WeightRefAttr
from ge.core import weights
from passes.registry import register_pass


@register_pass
@dataclass(frozen=True)
class RenameWeights(ModulePass):
    """Store every weight again under a name ending in '.copy'."""

    name = "rename-weights"

    def apply(self, ctx, op):
        store = weights.store_of(op)
        for const in op.walk():
            if isinstance(const, ConstOp) and isinstance(const.value, WeightRefAttr):
                array = store.get(const.value)
                const.value = store.add(const.value.weight.data + ".copy", array)
