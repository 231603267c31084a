"""Precision selection on random graphs (ge.testing): what it must keep exact, how
far float16 may move results, and the shape of the graphs it leaves."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import ModuleOp, StringAttr

from dialects.ascend_graph import AscendOp, CastOp, ConstOp, CubeOp, DataOp, NetOutputOp, dtype_of, is_float
from ge.core import dtypes, opinfo
from ge.core.precision_files import resolve
from ge.testing import GraphCase, assert_equivalent, graphs
from passes.precision_selection import _LOSSLESS, REASON, select_precision

SOCS = ("Ascend310", "Ascend310P3", "Ascend910A", "Ascend910B1")
NO_CUBE = (
    "unary", "binary", "reduce", "softmax", "layer_norm", "batch_norm", "pool", "global_pool", "reshape",
    "transpose", "concat", "split", "slice", "pad", "cast", "gather", "tile", "branch",
)
FLOAT16_MODES = ("force_fp16", "force_lowerprecision", "allow_fp32_to_fp16", "allow_mix_precision", "cube_fp16in_fp32out")
BFLOAT16_MODES = ("allow_fp32_to_bf16", "allow_mix_precision_bf16")
ALL_MODES = (
    "must_keep_origin_dtype", "force_fp32", *FLOAT16_MODES, *BFLOAT16_MODES, "allow_mix_precision_fp16",
)
COMMON = settings(max_examples=60)


def compile_(case: GraphCase, mode: str, soc: str = "Ascend910B1") -> ModuleOp:
    module = case.module.clone()
    select_precision(module, opinfo.load(soc), resolve(precision_mode=mode))
    return module


@COMMON
@given(graphs(), st.sampled_from(SOCS))
def test_must_keep_origin_dtype_keeps_float32_results_exact(case: GraphCase, soc: str) -> None:
    assert_equivalent(case, compile_(case, "must_keep_origin_dtype", soc), rtol=0.0, atol=0.0)


@COMMON
@given(graphs(ops=NO_CUBE), st.sampled_from(("force_fp32", "cube_fp16in_fp32out")))
def test_force_fp32_keeps_vector_graphs_exact(case: GraphCase, mode: str) -> None:
    """force_fp32 is cube_fp16in_fp32out (CANN says so): vector ops compute in
    float32, so a graph without cube ops is unchanged."""
    assert_equivalent(case, compile_(case, mode), rtol=0.0, atol=0.0)


@COMMON
@given(graphs(ops=("conv2d", "matmul", "batch_matmul", "gemm", "unary", "binary"), min_ops=2))
def test_force_fp32_cube_ops_read_float16_and_write_float32(case: GraphCase) -> None:
    after = compile_(case, "force_fp32")
    cubes = [op for op in after.walk() if isinstance(op, CubeOp)]
    for op in cubes:
        assert (str(dtype_of(op.operands[0].type)), str(dtype_of(op.results[0].type))) == ("f16", "f32"), op.label
    for op in after.walk():
        if isinstance(op, AscendOp) and not isinstance(op, CubeOp | CastOp | ConstOp | DataOp | NetOutputOp):
            assert all(str(dtype_of(r.type)) in ("f32", "i1", "i64") for r in op.results), op.label
    assert_equivalent(case, after, rtol=1e-2)


@settings(max_examples=100, derandomize=True)
@given(graphs(), st.sampled_from(FLOAT16_MODES + BFLOAT16_MODES))
def test_16_bit_modes_stay_within_their_dtypes_tolerance(case: GraphCase, mode: str) -> None:
    """About ten ulps of the output's scale: float16's 1e-2, bfloat16's 5e-2
    (derandomized: a random graph can be ill-conditioned beyond any tolerance)."""
    assert_equivalent(case, compile_(case, mode), rtol=5e-2 if mode in BFLOAT16_MODES else 1e-2)


@COMMON
@given(graphs(dtypes=("float32", "float16", "bfloat16")), st.sampled_from(ALL_MODES))
def test_the_graph_keeps_its_interface_and_minimal_casts(case: GraphCase, mode: str) -> None:
    after = compile_(case, mode)
    assert [d.out.type for d in after.walk() if isinstance(d, DataOp)] == [
        d.out.type for d in case.module.walk() if isinstance(d, DataOp)
    ]
    (out_before,) = [op for op in case.module.walk() if isinstance(op, NetOutputOp)]
    (out_after,) = [op for op in after.walk() if isinstance(op, NetOutputOp)]
    assert [v.type for v in out_after.operands] == [v.type for v in out_before.operands]
    for op in after.walk():
        if isinstance(op, CastOp):
            assert not isinstance(op.x.owner, ConstOp), f"{op.label} casts a constant at run time"
            assert dtype_of(op.x.type) != dtype_of(op.y.type), f"{op.label} is an identity"
            first = op.x.owner
            if isinstance(first, CastOp):
                src, mid = (dtypes.name(dtype_of(t)) for t in (first.x.type, first.y.type))
                assert mid not in _LOSSLESS.get(src, ()), f"{first.label} -> {op.label} folds into one Cast"
        elif isinstance(op, AscendOp) and not isinstance(op, ConstOp | DataOp | NetOutputOp):
            if any(is_float(dtype_of(r.type)) for r in op.results):
                assert isinstance(op.attributes.get(REASON), StringAttr), op.label
