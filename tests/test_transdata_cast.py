"""TransdataCastFusionPass: a Cast and the TransData beside it become one kernel,
whose simulated values are those of the two kernels it replaces."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings

import ge
from ge.om.tasks import KernelTask
from ge.session import Session
from ge.testing import assert_equivalent, clone, graphs
from passes.transdata_cast import TransdataCastFusionPass

QUIET = {"export_compile_stat": 0}
LAYOUT_OPS = ("conv2d", "pool", "unary", "binary", "cast", "batch_norm")
"""Op kinds whose values the formats move between NCHW and NC1HWC0."""


def kernels(model: ge.Model) -> int:
    return sum(isinstance(t, KernelTask) for t in model.tasks)


def switched_off(tmp_path) -> str:
    path = tmp_path / "switch.cfg"
    path.write_text(json.dumps({"Switch": {"GraphFusion": {TransdataCastFusionPass.name: "off"}}}))
    return str(path)


@settings(max_examples=15)
@given(graphs(ops=LAYOUT_OPS, max_ops=4))
def test_the_fused_kernel_computes_what_the_two_did(tmp_path_factory, case) -> None:
    """On a float32 graph under force_fp16 (Cast and TransData at its inputs and outputs)."""
    options = {**QUIET, "soc_version": "Ascend310P3"}
    fused = ge.compile(clone(case).module, options)
    apart = ge.compile(clone(case).module, {**options, "fusion_switch_file": switched_off(tmp_path_factory.mktemp("cfg"))})
    assert kernels(fused) <= kernels(apart)
    feeds = case.inputs(0)
    want = Session().run(apart, feeds).outputs
    got = Session().run(fused, feeds).outputs
    for name, value in want.items():
        np.testing.assert_allclose(got[name].astype(np.float64), value.astype(np.float64), rtol=1e-3, atol=1e-3, err_msg=name)


@given(graphs(ops=LAYOUT_OPS, max_ops=4))
def test_the_pass_changes_no_value(case) -> None:
    """It only marks scopes: the graph's values stay the reference interpreter's."""
    after = clone(case)
    TransdataCastFusionPass(soc_version="Ascend310P3").apply(None, after.module)  # type: ignore[arg-type]
    assert_equivalent(case, after)


@pytest.mark.slow
def test_resnet50_has_no_more_kernels_than_in_float32(resnet50_onnx) -> None:
    """Under force_fp16 its float32 input's Cast and TransData are one kernel (58 -> 57 on 910B1)."""
    fp16 = ge.compile(resnet50_onnx, {**QUIET, "soc_version": "Ascend910B1"})
    fp32 = ge.compile(resnet50_onnx, {**QUIET, "soc_version": "Ascend910B1", "precision_mode": "must_keep_origin_dtype"})
    assert kernels(fp16) <= kernels(fp32)
