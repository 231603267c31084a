"""lit configuration of the FileCheck tests: `ge-opt` and `filecheck` from the running
Python's environment, `%models` for the bundled ONNX models.

    .venv/bin/lit tests/filecheck -v
"""

import os
import sys

import lit.formats

config.name = "ascend-ge"  # noqa: F821 (lit defines `config`)
config.test_format = lit.formats.ShTest(execute_external=False)  # noqa: F821
config.suffixes = [".mlir"]  # noqa: F821
config.test_source_root = os.path.dirname(__file__)  # noqa: F821
config.excludes = ["lit.cfg.py"]  # noqa: F821

root = os.path.dirname(os.path.dirname(config.test_source_root))  # noqa: F821
config.environment["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")  # noqa: F821
config.substitutions.append(("%models", os.path.join(root, "ge", "models")))  # noqa: F821
# the tree these tests live in, not whichever checkout the environment installed (a git worktree)
config.environment["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)  # noqa: F821
