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
from ge.core import reference
from ge.testing import GraphBuilder, assert_equivalent, clone, graphs
from dialects.ascend_graph import MatMulV2Op
from passes.transdata_cast import TransdataCastFusionPass

QUIET = {"export_compile_stat": 0}
LAYOUT_OPS = ("conv2d", "pool", "matmul", "gemm", "unary", "binary", "cast", "batch_norm")
"""Op kinds whose values the formats move between NCHW and NC1HWC0, or ND and FRACTAL_NZ."""


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


def test_a_matmuls_cast_output_is_stored_by_the_matmul_kernel() -> None:
    """float16 matmul, its TransData FRACTAL_NZ -> ND and the Cast to float32: one kernel."""
    g = GraphBuilder(3)
    x = g.input((4, 32))
    g.output(g.op(MatMulV2Op, [x, g.random_weight((32, 24))], transpose_x1=False, transpose_x2=False))
    case = g.finish()
    model = ge.compile(case.module, {**QUIET, "soc_version": "Ascend310P3"})
    assert [t.kernel for t in model.tasks if isinstance(t, KernelTask)] == ["te_cast_trans_data_0", "te_mat_mul_v2_trans_data_cast_0"]
    got = Session().run(model, case.inputs(1)).outputs
    want = reference.run(case.module, case.inputs(1), case.store)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=2e-2, atol=2e-2)


@pytest.mark.slow
def test_resnet50_has_no_more_kernels_than_in_float32(resnet50_onnx) -> None:
    """Under force_fp16 every Cast shares a kernel with a TransData (ResNet-50: 60 -> 58
    kernels on Ascend310P3, 58 -> 57 on Ascend910B1, as many as in float32)."""
    fp16 = ge.compile(resnet50_onnx, {**QUIET, "soc_version": "Ascend910B1"})
    fp32 = ge.compile(resnet50_onnx, {**QUIET, "soc_version": "Ascend910B1", "precision_mode": "must_keep_origin_dtype"})
    assert kernels(fp16) <= kernels(fp32)
    on_310p = ge.compile(resnet50_onnx, {**QUIET, "soc_version": "Ascend310P3"})
    assert not [t.kernel for t in on_310p.tasks if isinstance(t, KernelTask) and t.kernel.startswith("te_cast_") and "trans_data" not in t.kernel]
