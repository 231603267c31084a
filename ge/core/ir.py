"""The xDSL context of the project, and text I/O of modules."""

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.parser import Parser

from dialects.ascend_graph import AscendGraph
from dialects.ascend_kernel import AscendKernel


def context() -> Context:
    """A context with builtin and our dialects loaded."""
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(AscendGraph)
    ctx.load_dialect(AscendKernel)
    return ctx


def parse(text: str, name: str = "<text>") -> ModuleOp:
    module = Parser(context(), text, name).parse_module()
    module.verify()
    return module


def to_text(module: ModuleOp) -> str:
    return str(module) + "\n"
