"""Every dialect has a round-trip and an invalid FileCheck test, and every registered pass
of the project has a `.mlir` test that runs it (lit runs them: `make test`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from passes import registry

FILECHECK = Path(__file__).resolve().parent / "filecheck"


@pytest.mark.parametrize("dialect", ["ascend_graph", "ascend_kernel"])
@pytest.mark.parametrize("kind", ["roundtrip", "invalid"])
def test_each_dialect_has_its_filecheck_tests(dialect: str, kind: str) -> None:
    path = FILECHECK / "dialects" / dialect / f"{kind}.mlir"
    assert path.is_file(), path
    assert "// RUN: ge-opt %s" in path.read_text() and "// CHECK" in path.read_text()


@pytest.mark.parametrize("name", sorted(registry.project_passes()))
def test_each_project_pass_has_a_filecheck_test_that_runs_it(name: str) -> None:
    path = FILECHECK / "passes" / f"{name}.mlir"
    assert path.is_file(), f"no FileCheck test for pass {name} ({path})"
    runs = [line for line in path.read_text().splitlines() if line.startswith("// RUN:")]
    assert any(f"-p {name}" in line or f"-p '{name}" in line or f",{name}" in line for line in runs), runs
    assert "// CHECK" in path.read_text()
