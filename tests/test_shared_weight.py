"""A batched matmul whose batches share one 2-D weight (a transformer's projection of
[batch, sequence, hidden]) is tiled as one matmul of every batch's rows
(`passes.lowering.cube.gemm_of`): its weight stays in L1 across the batches instead
of being read once per batch. Checked: the tiling's problem, the numerics against
the reference interpreter at several batch and row counts, and the weight's GM reads."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import ge
from dialects import ascend_kernel as ak
from ge.testing.cube_models import gm_reads

F = TensorProto.FLOAT


def batched_matmul(batch: int, rows: int, k: int, n: int, seed: int, shared: bool = True) -> tuple[onnx.ModelProto, dict]:
    """x [batch, rows, k] @ w: [k, n] shared by the batches, or [batch, k, n] one each."""
    rng = np.random.default_rng(seed)
    shape = (k, n) if shared else (batch, k, n)
    weight = numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(k)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "projection",
        [helper.make_tensor_value_info("x", F, [batch, rows, k])], [helper.make_tensor_value_info("y", F, None)], [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, {"x": rng.standard_normal((batch, rows, k)).astype(np.float32)}


def compiled(model: onnx.ModelProto, soc: str = "Ascend310P3") -> ge.Model:
    return ge.compile(ge.load_onnx(model)[0], {"soc_version": soc})


def cube_tiling(om: ge.Model) -> dict[str, int]:
    (kernel,) = [op for op in om.kernel_module().ops if isinstance(op, ak.KernelOp) and "m0" in op.parameters]
    return kernel.parameters


@pytest.mark.parametrize(("rows", "folded"), [(128, 16 * 128), (197, 16 * 208)])
def test_a_shared_weight_makes_one_matmul_of_every_batch(rows: int, folded: int) -> None:
    """Rows of a batch NZ pads to whole fractals count padded (ViT's 197 tokens: 208)."""
    tiling = cube_tiling(compiled(batched_matmul(16, rows, 768, 768, 0)[0]))
    assert (tiling["batch"], tiling["m"]) == (1, folded)


def test_a_weight_per_batch_keeps_its_batches() -> None:
    tiling = cube_tiling(compiled(batched_matmul(4, 64, 256, 256, 0, shared=False)[0]))
    assert (tiling["batch"], tiling["m"]) == (4, 64)


def test_the_shared_weight_is_not_read_per_batch() -> None:
    """BERT-base's feed-forward projection at batch 16 (768 x 3072 float16 weights, 4.7
    MB): read per batch, the kernel's blocks read the weight 16 times over; as one
    matmul they read it a few times (once per tile of the rows that keeps it in L1)."""
    om = compiled(batched_matmul(16, 128, 768, 3072, 0)[0])
    (kernel,) = [op for op in om.kernel_module().ops if isinstance(op, ak.KernelOp) and "m0" in op.parameters]
    weight_reads = kernel.int_prop("block_dim") * gm_reads(kernel.program.block.ops, kernel.program.block.args[1])
    assert weight_reads <= 4 * 768 * 3072 * 2


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(
    soc=st.sampled_from(["Ascend310P3", "Ascend910B1"]),
    batch=st.integers(2, 6),
    rows=st.integers(1, 70),
    k=st.integers(1, 300),
    n=st.integers(1, 200),
    seed=st.integers(0, 2**16),
)
def test_folded_batches_simulate_to_the_reference(soc: str, batch: int, rows: int, k: int, n: int, seed: int) -> None:
    model, feeds = batched_matmul(batch, rows, k, n, seed)
    want = ge.reference.run(ge.load_onnx(model)[0], feeds)["y"]
    with ge.Session() as session:
        got = session.run(compiled(model, soc), feeds).outputs["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * max(float(np.abs(want).max()), 1.0))
