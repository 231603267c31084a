"""The operator debug options' effects on the simulator: op_debug_config's `oom`
refuses a kernel whose program writes past its arguments (a tampered, resealed `.om`),
for the kernels op_debug_list names or all of them."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

import ge
from ge.core.errors import ModelError
from ge.models import DEMO_MODELS
from ge.om import model as om
from ge.sim.config import RunConfig
from ge.sim.runtime import Runtime
from tests.test_om_hostile import entries, sealed

SOC = "Ascend310"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    model = ge.compile(DEMO_MODELS[0].path, {"export_compile_stat": 0, "soc_version": SOC})
    return Path(model.save(tmp_path_factory.mktemp("debug") / "tiny.om"))


@pytest.fixture(scope="module")
def overwriting(tiny: Path, tmp_path_factory) -> Path:
    """tiny_resnet with its first kernel's first GM write four times as large."""
    contents = entries(tiny)
    text = contents[om.KERNELS].decode()
    write = re.search(r'(ascend_kernel\.copy "MTE3" %\w+ -> %\w+, )(\d+)( bytes)', text)
    assert write is not None
    contents[om.KERNELS] = (text[: write.start(2)] + str(4 * int(write.group(2))) + text[write.end(2) :]).encode()
    return sealed(tmp_path_factory.mktemp("debug") / "overwriting.om", contents)


def debug_config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "op_debug_config.ini"
    path.write_text(text)
    return str(path)


def inputs(runtime: Runtime) -> dict[str, np.ndarray]:
    return {name: np.ones(shape, dtype) for name, dtype, shape in runtime.input_specs()}


def test_oom_refuses_a_kernel_writing_past_its_argument(overwriting: Path, tmp_path: Path):
    config = RunConfig(op_debug_config=debug_config(tmp_path, "op_debug_config=oom\n"))
    with pytest.raises(ModelError, match=r"oom: task \d+ \('[^']+'\) kernel @te_cast_trans_data_0 writes \d+ bytes to argument 1 .* past its allocation"):
        Runtime(om.read(overwriting), config)


def test_without_oom_the_overwrite_goes_unseen(overwriting: Path):
    runtime = Runtime(om.read(overwriting))
    runtime.run(inputs(runtime))


def test_oom_keeps_to_op_debug_list(overwriting: Path, tmp_path: Path):
    elsewhere = debug_config(tmp_path, "op_debug_config=oom\nop_debug_list=OpType::MatMulV2\n")
    Runtime(om.read(overwriting), RunConfig(op_debug_config=elsewhere))
    listed = debug_config(tmp_path, "op_debug_config=oom\nop_debug_list=OpType::TransData\n")
    with pytest.raises(ModelError, match="oom: "):
        Runtime(om.read(overwriting), RunConfig(op_debug_config=listed))


@pytest.mark.parametrize("model", DEMO_MODELS, ids=lambda m: Path(m.path).stem)
def test_oom_passes_the_compilers_kernels(model, tmp_path: Path):
    compiled = ge.compile(model.path, {"export_compile_stat": 0, "soc_version": SOC})
    runtime = Runtime(compiled, RunConfig(op_debug_config=debug_config(tmp_path, "op_debug_config=oom\n")))
    runtime.run(inputs(runtime))
