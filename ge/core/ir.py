"""The xDSL context of the project, text I/O of modules, and a module's graph."""

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.parser import Parser

from dialects.ascend_graph import AscendGraph, GraphOp
from dialects.ascend_kernel import AscendKernel
from ge.core.errors import ModelError


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


def graph_of(module: ModuleOp) -> GraphOp:
    """The one `ascend_graph.graph` of a module (the interpreter and the backend take one)."""
    graphs = [op for op in module.ops if isinstance(op, GraphOp)]
    if len(graphs) != 1:
        raise ModelError(f"the module holds {len(graphs)} ascend_graph.graph ops; exactly one is needed")
    return graphs[0]
