"""Shared fixtures: real-model ONNX exports (`ge.testing.real_models`, cached outside the tree).

The exports are made at most once per cache version, by whichever pytest-xdist
worker asks first (see `ge.testing.real_models`); every fixture here only returns a path.
The conformance figures of tests/test_onnx_backend.py are printed in the terminal
summary when that test ran in this session (the full report stays in its file).

One hypothesis profile serves every property test: 40 examples (a test that needs
more or fewer says so with its own `@settings`), no deadline (a compile's time
varies with the machine's load), and no health check for slow data generation
(graphs are large to draw).

Compiles use the kernel compile cache by default (op_compiler_cache_mode=enable, as
in CANN): each test process points ASCEND_CACHE_PATH at a temporary directory of
its own, so the suite never writes into $HOME/atc_data, and removes it at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from ge.testing.real_models import BACKEND_REPORT, model_path

settings.register_profile("ge", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ge")

_summary_ran: list[str] = []
_kernel_cache = tempfile.mkdtemp(prefix="ge-kernel-cache-")
os.environ["ASCEND_CACHE_PATH"] = _kernel_cache


@pytest.fixture(scope="session")
def resnet50_onnx() -> Path:
    """torchvision ResNet-50, random weights, BatchNormalization kept (175 nodes)."""
    return model_path("resnet50")


@pytest.fixture(scope="session")
def mobilenet_v2_onnx() -> Path:
    """torchvision MobileNetV2, random weights, BatchNormalization kept."""
    return model_path("mobilenet_v2")


@pytest.fixture(scope="session")
def vit_b_16_onnx() -> Path:
    """torchvision ViT-B/16, random weights."""
    return model_path("vit_b_16")


@pytest.fixture(scope="session")
def bert_base_onnx() -> Path:
    """A BERT-base encoder (12 layers, hidden 768, 12 heads), batch 1, sequence 128."""
    return model_path("bert_base")


def pytest_runtest_logreport(report) -> None:
    """Note that the conformance summary ran (also seen here for xdist workers' tests)."""
    if report.when == "call" and report.nodeid.endswith("test_onnx_backend.py::test_conformance_summary"):
        _summary_ran.append(report.nodeid)


def pytest_unconfigure(config) -> None:
    shutil.rmtree(_kernel_cache, ignore_errors=True)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if _summary_ran and BACKEND_REPORT.exists():
        terminalreporter.write_sep("=", "ONNX backend node tests (core class: import + reference, compile + simulate)")
        for line in BACKEND_REPORT.read_text().splitlines():
            if line.startswith(("# ", "Core class", "Supported class")):
                terminalreporter.write_line(line)
        terminalreporter.write_line(f"per-op counts and every failure: {BACKEND_REPORT}")


Rewrite = Callable[[Path, Path, Callable[[dict], None]], Path]


@pytest.fixture
def rewritten() -> Rewrite:
    """`rewritten(path, out, change)`: the `.om` at `path` with its model.json changed by
    `change` and the file sealed again, written to `out` (a tampered model for refusal tests)."""
    from ge.om import model as om

    def rewrite(path: Path, out: Path, change: Callable[[dict], None]) -> Path:
        with zipfile.ZipFile(path) as z:
            contents = {name: z.read(name) for name in (om.MANIFEST, *om.ENTRIES)}
        description = json.loads(contents[om.MODEL])
        change(description)
        contents[om.MODEL] = json.dumps(description).encode()
        with open(out, "w+b") as f:
            with zipfile.ZipFile(f, "w") as z:
                for name, data in contents.items():
                    z.writestr(name, data)
                z.comment = om.SEAL + b"0" * om.DIGEST_CHARS
            om.seal(f)
        return out

    return rewrite
