"""`--virtual_type=1`: kernels tiled for virtual instances (slices of the chip's AI
cores), their block_dim rule, the soft-sync fallback, the forbidden combinations, and
models that give the same values on every slice, faster on larger ones."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.core import soc
from ge.core.errors import OptionError
from ge.models import DEMO_MODELS
from ge.om.tasks import KernelTask
from ge.sim.config import RunConfig
from ge.testing import graphs

RESNET, BERT = DEMO_MODELS
QUIET = {"export_compile_stat": 0}
VIRTUAL_SOCS = [name for name in soc.names() if soc.load(name).virtual_aicore_nums]
BIN = Path(sys.executable).parent


def launches(model) -> list[KernelTask]:
    return [t for t in model.tasks if isinstance(t, KernelTask)]


def run_on(model, cores: int, inputs=None) -> ge.session.Result:
    return ge.Session(RunConfig(aicore_num=cores, timing_only=inputs is None)).run(model, inputs)


# ---------------------------------------------------------------- the block_dim rule


@pytest.mark.parametrize("soc_version", VIRTUAL_SOCS)
def test_every_block_dim_is_a_multiple_of_the_lcm_of_the_slice_sizes(soc_version: str):
    sizes = soc.load(soc_version).virtual_aicore_nums
    cores = math.lcm(*sizes)
    model = ge.compile(RESNET.path, {**QUIET, "soc_version": soc_version, "virtual_type": 1})
    dims = [t.block_dim for t in launches(model)]
    assert dims and all(d % cores == 0 for d in dims), (cores, dims)
    assert model.build["virtual_instance"] == {"slice_sizes": list(sizes), "block_dim_multiple": cores}
    whole = ge.compile(RESNET.path, {**QUIET, "soc_version": soc_version})
    assert any(t.block_dim % cores for t in launches(whole))  # the rule is not what the whole-chip build does anyway


def test_soft_sync_ops_run_on_one_core():
    model = ge.compile(BERT.path, {**QUIET, "soc_version": "Ascend310P3", "virtual_type": 1})
    attention = [t for t in launches(model) if t.name.startswith("attention.context")]  # the fused MultiHeadAttention
    assert attention and all(t.block_dim == 1 for t in attention)
    assert all(t.block_dim in (1, 8) for t in launches(model))
    whole = ge.compile(BERT.path, {**QUIET, "soc_version": "Ascend310P3"})
    assert max(t.block_dim for t in launches(whole) if t.name == attention[0].name) > 1


def test_a_part_without_virtual_instances_refuses_them():
    with pytest.raises(OptionError, match="virtual_type=1: Ascend310 has no virtual instances; they exist on Ascend310P3"):
        ge.compile(RESNET.path, {"soc_version": "Ascend310", "virtual_type": 1})


def test_l1_fusion_is_not_performed_in_virtualization_scenarios():
    with pytest.raises(OptionError, match="L1 fusion is not performed in virtualization scenarios"):
        ge.compile(RESNET.path, {"soc_version": "Ascend310P3", "virtual_type": 1, "buffer_optimize": "l1_optimize"})
    ge.compile(RESNET.path, {**QUIET, "soc_version": "Ascend310P3", "virtual_type": 0, "buffer_optimize": "l1_optimize"})


def test_ge_atc_says_what_the_model_was_built_for(tmp_path: Path):
    env = {"COLUMNS": "400", "ASCEND_CACHE_PATH": os.environ["ASCEND_CACHE_PATH"]}  # the suite's kernel cache, not $HOME's
    args = [str(BIN / "ge"), "atc", f"--model={BERT.path}", "--framework=5", "--soc_version=Ascend310P3", "--export_compile_stat=0"]
    virtual = subprocess.run([*args, f"--output={tmp_path / 'v'}", "--virtual_type=1"], capture_output=True, text=True, env=env)
    assert virtual.returncode == 0, virtual.stderr
    assert "built for virtual instances: balanced on slices of 1, 2, 4, 8 AI cores (every block_dim a multiple of 8)" in virtual.stdout
    assert "on one core (soft-sync): attention.context" in virtual.stdout
    whole = subprocess.run([*args, f"--output={tmp_path / 'w'}"], capture_output=True, text=True, env=env)
    assert "built for the whole chip (--virtual_type=0)" in whole.stdout


# ------------------------------------------------------------------------ slices


@settings(max_examples=15)
@given(graphs(max_ops=6))
def test_a_virtual_model_gives_the_same_values_on_every_slice(case):
    model = ge.compile(case.module, {**QUIET, "soc_version": "Ascend310P3", "virtual_type": 1})
    assert all(t.block_dim % 8 == 0 or t.block_dim == 1 for t in launches(model))
    inputs = case.inputs()
    alone = run_on(model, 8, inputs).outputs
    for cores in (1, 2, 4):
        got = run_on(model, cores, inputs).outputs
        for name, value in alone.items():
            np.testing.assert_array_equal(got[name], value)


def matmul_model(path: Path, m: int = 1024, k: int = 1024, n: int = 1024) -> Path:
    """A matmul by a constant: compute-bound on the cube."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((k, n)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], [w],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_every_kernel_runs_balanced_on_every_slice():
    """A slice of s cores runs each kernel in block_dim / s full waves: every core of the
    slice takes the same number of blocks (soft-sync kernels aside, on one core). The
    whole-chip build has kernels that do not."""
    sizes = soc.load("Ascend310P3").virtual_aicore_nums

    def balanced(model) -> bool:
        for cores in sizes:
            for row in run_on(model, cores).profile.rows():
                if row.record.block_dim == 1:
                    continue  # a soft-sync kernel runs on one core, by design
                per_core = Counter(b.core for b in row.record.blocks if b.phase == 0)
                if row.record.block_dim % cores or set(per_core.values()) != {row.record.block_dim // cores}:
                    return False
        return True

    assert balanced(ge.compile(BERT.path, {**QUIET, "soc_version": "Ascend310P3", "virtual_type": 1}))
    assert not balanced(ge.compile(BERT.path, {**QUIET, "soc_version": "Ascend310P3"}))


def test_latency_falls_as_the_slice_grows(tmp_path: Path):
    model = ge.compile(matmul_model(tmp_path / "mm.onnx"), {**QUIET, "soc_version": "Ascend310P3", "virtual_type": 1})
    device = [run_on(model, cores).profile.device_us for cores in (1, 2, 4, 8)]
    assert device[0] > device[1] > device[2] >= device[3], device
    assert device[0] > 1.5 * device[3], device  # the kernels are GM-bound here: the chip's bandwidth caps the gain
