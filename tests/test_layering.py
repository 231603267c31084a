"""Every layer imports only downward (DESIGN.md, Layout), read from the source itself.

    ge/cli -> engine (ge/pipeline, ge/compiler, ge/session, ...) -> frontend, passes,
    ge/backend, ge/sim -> ge/om -> ge/core (the foundation) -> dialects

Each rule names a package and the packages it may import from this project; imports
inside functions count too (a lazy import is still an arrow). No module imports
from `tests/`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ("dialects", "passes", "ge", "tests", "benchmarks")

FOUNDATION = ("dialects", "ge.core")
ALLOWED: dict[str, tuple[str, ...]] = {
    "dialects": ("dialects",),
    "ge.core": FOUNDATION,
    "passes": (*FOUNDATION, "passes"),
    "ge.om": (*FOUNDATION, "ge.om"),
    "ge.backend": (*FOUNDATION, "ge.om", "ge.backend"),
    "ge.sim": (*FOUNDATION, "ge.om", "ge.sim"),
    "ge.frontend": (*FOUNDATION, "ge.frontend"),
    "ge.testing": (*FOUNDATION, "passes", "ge.frontend", "ge.testing"),
}
"""The most specific prefix of a module's name picks its rule; the engine modules
directly under `ge` and `ge.cli` may import anything but `tests` (and the engine
never imports the CLI)."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every project module `path` imports, absolute or relative, at any depth."""
    return imports_in(path.read_text(), module_name(path), path.name == "__init__.py")


def imports_in(source: str, module: str, is_package: bool = False) -> set[str]:
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] in PROJECT}


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def rule_of(module: str) -> str | None:
    matches = [prefix for prefix in ALLOWED if within(module, prefix)]
    return max(matches, key=len) if matches else None


def violations(module: str, imported: set[str]) -> list[str]:
    bad = [name for name in imported if within(name, "tests") or within(name, "benchmarks")]
    rule = rule_of(module)
    if rule is not None:
        bad += [name for name in imported if not any(within(name, p) for p in ALLOWED[rule]) and name != "ge"]
    elif not within(module, "ge.cli"):
        bad += [name for name in imported if within(name, "ge.cli")]
    return sorted(set(bad))


def sources() -> list[Path]:
    return sorted(p for top in ("dialects", "passes", "ge", "benchmarks") for p in (ROOT / top).rglob("*.py"))


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_only_downward(path: Path) -> None:
    module = module_name(path)
    bad = violations(module, imports_of(path))
    assert not bad, f"{module} ({rule_of(module) or 'engine'}) must not import {', '.join(bad)}"


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("dialects.ascend_kernel", "from ge.core import soc"),
        ("dialects.kernel_boundary", "from passes.fusion import FusionPass"),
        ("passes.fusion", "from ge.backend.schedule import Schedule"),
        ("passes.lower_to_kernel", "from ge.pipeline import optimize"),
        ("ge.sim.runtime", "from passes.ub_fusion.scopes import working_set"),
        ("ge.sim.runtime", "from ..backend import memory"),
        ("ge.sim.runtime", "from ge.frontend import load_onnx"),
        ("ge.backend.memory", "import ge.sim.timing"),
        ("ge.backend.schedule", "from passes.fusion import FusionPass"),
        ("ge.om.model", "from ge.backend import build"),
        ("ge.core.weights", "from ge.pipeline import optimize"),
        ("ge.compiler", "from ge.cli.atc import atc"),
        ("ge.cli.main", "import tests.models"),
    ],
)
def test_the_rules_catch_an_upward_import(module: str, source: str) -> None:
    assert violations(module, imports_in(source, module)), f"{module}: {source!r} should break the layering"


def test_benchmarks_import_helpers_as_modules() -> None:
    """No sys.path edits in benchmarks: shared helpers are modules (`ge.testing.real_models`).
    (Only the plug-in loader puts a plug-in's folder on the path, as running a script does.)"""
    edits = [p.name for p in (ROOT / "benchmarks").glob("*.py") if "sys.path" in p.read_text()]
    assert not edits, f"sys.path edited in {', '.join(edits)}"
