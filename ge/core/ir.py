"""The xDSL context of the project, text I/O of modules, and a module's graph."""

import re

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.parser import Parser

from dialects.ascend_graph import AscendGraph, GraphOp
from dialects.ascend_kernel import AscendKernel
from ge.core import limits
from ge.core.errors import ModelError

_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]()]')
_DENSE = re.compile(r'"(?:[^"\\]|\\.)*"|dense<[^>]*>\s*:\s*tensor<((?:\d+x)*)([a-z]+)(\d*)>')


def context() -> Context:
    """A context with builtin and our dialects loaded."""
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(AscendGraph)
    ctx.load_dialect(AscendKernel)
    return ctx


def check_text(text: str, name: str) -> None:
    """Refuse IR text that xDSL's parser cannot take without running out of stack or
    memory: nesting deeper than `limits.MAX_NESTING_DEPTH` (the parser recurses per
    level), and a dense attribute larger than `limits.MAX_FOLDED_BYTES` (the parser
    expands a splat `dense<1.0> : tensor<100000x100000xf32>` to its full size)."""
    depth = deepest = 0
    for match in _BRACKETS.finditer(text):
        token = match.group()
        if token in "{[(":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "}])":
            depth -= 1
    limits.check_nesting(deepest, f"'{name}'")
    for match in _DENSE.finditer(text):
        dims, kind, bits = match.groups()
        if kind is None:
            continue  # a string literal
        shape = [int(d) for d in dims.split("x") if d]
        itemsize = max(int(bits or 8) // 8, 1) if kind in ("f", "i", "si", "ui", "bf") else 8
        limits.check_folded(shape, itemsize, f"'{name}': a dense attribute")


def parse(text: str, name: str = "<text>") -> ModuleOp:
    """The module in `text`, checked by `check_text` before xDSL's parser meets it."""
    check_text(text, name)
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
