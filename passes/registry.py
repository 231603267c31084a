"""The pass registry: every pass that can be run by name (`ge-opt -p`, `get_pass`).

A lazy `name -> factory` dict, as in xDSL: a factory returns the pass class and only
then imports its module, so that start-up and `--help` stay fast. The project's own
passes are listed in `_PROJECT_PASSES` by their GE name (e.g. `ConvBatchnormFusionPass`)
or, for passes GE has no name for, a kebab-case one; xDSL's `canonicalize`, `cse` and
`dce` are merged in.

A pass written outside this package registers itself with one decorator:

    @register_pass
    @dataclass(frozen=True)
    class MyPass(ModulePass):
        \"\"\"One line for `ge-opt --help`.\"\"\"
        name = "my-pass"
        def apply(self, ctx, op): ...

and `ge-opt --load-pass-plugin=my_passes.py -p my-pass` runs it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from xdsl.passes import ModulePass

from ge.core.errors import OptionError

PassFactory = Callable[[], type[ModulePass]]
P = TypeVar("P", bound=type[ModulePass])

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")

# Summaries of the xDSL passes we adopt; not all of them have a docstring to read.
XDSL_PASSES: dict[str, str] = {
    "canonicalize": "Apply the canonicalisation patterns of every loaded dialect (xDSL).",
    "cse": "Merge operations that compute the same value from the same operands (xDSL).",
    "dce": "Erase operations whose results are unused and that have no side effects (xDSL).",
}

# The project's passes: name -> factory importing the pass's module on first use.
_PROJECT_PASSES: dict[str, PassFactory] = {}

# Passes registered at run time with `@register_pass`.
_REGISTERED: dict[str, PassFactory] = {}


_BUILTIN_CLASSES: dict[str, str] = {}
"""The class (`module.qualname`) behind each built-in pass name, known without importing it."""


def _pass_in(module: str, name: str) -> PassFactory:
    """A factory importing `passes.<module>` on first call and returning its class `name`."""
    _BUILTIN_CLASSES[name] = f"passes.{module}.{name}"

    def factory() -> type[ModulePass]:
        import importlib

        return getattr(importlib.import_module(f"passes.{module}"), name)

    return factory


# Conv, matmul and layout graph fusions (class name = GE name), and constant folding.
_PROJECT_PASSES.update(
    {
        **{
            name: _pass_in(module, name)
            for module, names in {
                "conv_fusion": (
                    "ConvBatchnormFusionPass", "ConvScaleFusionPass", "AABiasaddConvFusion",
                    "ConvToFullyConnectionFusionPass",
                ),
                "matmul_fusion": ("GemmToMatmulFusionPass", "MatMulBiasAddFusionPass"),
                "layout_fusion": (
                    "RedundantReshapeTransposeFusionPass", "TransposeReshapeFusionPass", "CastCastFusionPass",
                ),
                "transdata_cast": ("TransdataCastFusionPass",),
                "patch_embedding": ("PatchEmbeddingFusionPass",),
                "quant_fusion": ("QuantCubeFusionPass",),
            }.items()
            for name in names
        },
        "constant-folding": _pass_in("constant_folding", "ConstantFoldingPass"),
        "format-selection": _pass_in("format_selection", "FormatSelection"),
        "TransdataTransdataPass": _pass_in("format_selection", "TransdataTransdataPass"),
        "lower-to-kernel": _pass_in("lower_to_kernel", "LowerToKernel"),
        "precision-selection": _pass_in("precision_selection", "PrecisionSelection"),
        "virtual-instance": _pass_in("virtual_instance", "VirtualInstance"),
    }
)

# Transformer graph fusions: norms and softmax, GELU, attention (class name = GE name).
_PROJECT_PASSES.update(
    {
        name: _pass_in(module, name)
        for module, names in {
            "norm_fusion": ("LayerNormONNXFusionPass", "SoftmaxFusionPass"),
            "activation_fusion": ("GeluONNXFusionPass",),
            "attention_fusion": ("MultiHeadAttentionFusionPass",),
            "attention_layout": ("AttentionLayoutFusionPass",),
        }.items()
        for name in names
    }
)

# UB fusion (class name = GE name) and the Split no-task marking.
_PROJECT_PASSES.update(
    {
        **{
            name: _pass_in(module, name)
            for module, names in {
                "ub_fusion.cube_tails": (
                    "TbeConvDoubleInFusionPass", "TbeCommonRules0FusionPass", "TbeMatmulElemwiseFusionPass",
                    "TbeBatchMatmulElementWiseFusionPass",
                ),
                "ub_fusion.automatic": ("AutomaticUbFusion",),
                "ub_fusion.matmul_transdata": ("MatmulTransdataFusionPass",),
            }.items()
            for name in names
        },
        "FusionVirtualOpSetSwitch": _pass_in("split_no_task", "FusionVirtualOpSetSwitch"),
    }
)


def _xdsl_factories() -> dict[str, PassFactory]:
    from xdsl.transforms import get_all_passes

    every = get_all_passes()
    return {name: every[name] for name in XDSL_PASSES}


def project_passes() -> dict[str, PassFactory]:
    """The passes built into the project (their modules load on first call of a factory)."""
    return dict(_PROJECT_PASSES)


def available_passes() -> dict[str, PassFactory]:
    """Every registered pass, the project's and plug-ins' first, then xDSL's."""
    return {**_PROJECT_PASSES, **_REGISTERED, **_xdsl_factories()}


def get_pass(name: str) -> type[ModulePass]:
    """The pass class registered under `name`."""
    passes = available_passes()
    if name not in passes:
        raise OptionError(f"unknown pass '{name}'; registered passes: {', '.join(sorted(passes))}")
    return passes[name]()


def _summary(cls: type) -> str:
    """The first line of the class's own docstring (not one inherited from ModulePass)."""
    doc = cls.__dict__.get("__doc__") or ""
    if doc.startswith(f"{cls.__name__}("):  # @dataclass writes the signature where no docstring is
        return ""
    lines = [line.strip() for line in doc.strip().splitlines()]
    return lines[0] if lines else ""


def describe(name: str) -> str:
    """One line saying what the pass does, for `--help`."""
    if name in XDSL_PASSES:
        return XDSL_PASSES[name]
    return _summary(get_pass(name))


def options_of(name: str) -> str:
    """The pass's `-p` options with their types and defaults, e.g. `soc_version: str = Ascend310P3`."""
    import dataclasses

    cls = get_pass(name)
    if name in XDSL_PASSES or not dataclasses.is_dataclass(cls):
        return ""
    options = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        default = "" if f.default is dataclasses.MISSING else f" = {f.default}"
        options.append(f"{f.name}: {kind}{default}")
    return ", ".join(options)


def register_pass(cls: P) -> P:
    """Class decorator: make a `ModulePass` available under its `name`.

    The name must be usable in a `-p` pipeline and unused, and the class needs a
    docstring, because its first line is what `ge-opt --help` shows.
    """
    if not (isinstance(cls, type) and issubclass(cls, ModulePass)):
        raise TypeError(f"@register_pass needs a ModulePass subclass, got {cls!r}")
    name = cls.__dict__.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"pass {cls.__qualname__} needs a class attribute `name` of letters, digits, '-' and '_', "
            f"starting with a letter; got {name!r}"
        )
    if not _summary(cls):
        raise ValueError(f"pass {cls.__qualname__} ('{name}') needs a docstring: its first line is its --help text")
    if _BUILTIN_CLASSES.get(name) == f"{cls.__module__}.{cls.__qualname__}":
        return cls  # a built-in pass registering itself while its factory imports its module
    taken = available_passes().get(name)
    if taken is not None and taken() is not cls:
        other = taken()
        raise ValueError(f"pass name '{name}' is already registered by {other.__module__}.{other.__qualname__}")
    _REGISTERED[name] = lambda: cls
    return cls


def plugin_passes() -> tuple[str, ...]:
    """The passes registered from outside the project (plug-ins, passes registered by hand)."""
    return tuple(sorted(_REGISTERED))


def load_plugin(spec: str) -> None:
    """Import a pass plug-in (a `.py` file or a module name) so that its
    `@register_pass` classes register themselves.

    A file is imported as a script is run: its folder goes on `sys.path`, so that it
    can import the modules beside it, and it is entered in `sys.modules` before it
    runs (dataclasses and xDSL read a pass's annotations through its module, which
    `from __future__ import annotations` makes strings). A file already loaded is
    not loaded again, so naming it twice, or in two commands of one process, is fine.
    """
    import importlib
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(spec)
    if spec.endswith(".py") and not path.is_file():
        raise OptionError(f"pass plug-in file '{spec}' does not exist")
    try:
        if path.is_file():
            path = path.resolve()
            name = f"ge_pass_plugin_{path.stem}_{abs(hash(str(path))):x}"
            if name in sys.modules:
                return
            folder = str(path.parent)
            if folder not in sys.path:
                sys.path.insert(0, folder)
            module_spec = importlib.util.spec_from_file_location(name, path)
            assert module_spec is not None and module_spec.loader is not None
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            try:
                module_spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
        else:
            importlib.import_module(spec)
    except OptionError:
        raise
    except ModuleNotFoundError as e:
        if e.name is None or not (spec == e.name or spec.startswith(f"{e.name}.")):
            raise OptionError(f"pass plug-in '{spec}' failed to load: {e}") from e
        raise OptionError(f"pass plug-in '{spec}' is neither a .py file nor an importable module") from e
    except Exception as e:
        raise OptionError(f"pass plug-in '{spec}' failed to load: {type(e).__name__}: {e}") from e
