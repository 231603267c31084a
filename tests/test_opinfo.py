"""The op information library: complete for the dialect, consistent, and as documented."""

from __future__ import annotations

import copy
import json

import pytest

from dialects.ascend_graph import AscendGraph, AscendOp, CubeOp
from ge.core import opinfo
from ge.core.errors import OptionError
from ge.core.opinfo import OpInfoError

SOCS = ("Ascend310", "Ascend310P3", "Ascend910A", "Ascend910B1")
CUBE = (
    "Conv2D", "Conv3D", "Conv2DTranspose", "Conv3DTranspose", "MatMulV2", "BatchMatMulV2", "GEMM", "FullyConnection",
    "MultiHeadAttention", "FusedInferAttentionScore", "DynamicRNN", "DynamicGRUV2", "RNN",
)
BLOCK = (
    "SoftmaxV2", "LogSoftmaxV2", "LayerNorm", "InstanceNorm", "ReduceMeanD", "ReduceSumD", "ReduceProdD",
    "Exp", "Log", "Pow", "Softplus",
    "DFT", "STFT",
    "NLLLoss", "SoftmaxCrossEntropyLoss", "RmsNorm", "LpNorm", "GroupNorm", "MVNV2",
    "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Cumsum", "Cumprod", "MatrixDeterminant",
)
BIAS = {"Conv2D": "bias", "MatMulV2": "bias", "BatchMatMulV2": "bias", "GEMM": "c", "FullyConnection": "b"}


def dialect_ops() -> dict[str, type[AscendOp]]:
    return {
        op.OP_TYPE: op
        for op in AscendGraph.operations
        if issubclass(op, AscendOp) and op.OP_TYPE not in opinfo.STRUCTURAL
    }


def test_every_soc_has_a_file() -> None:
    assert opinfo.names() == SOCS


@pytest.mark.parametrize("soc", SOCS)
def test_every_op_type_of_the_dialect_has_an_entry_with_its_operand_names(soc: str) -> None:
    library = opinfo.load(soc)
    ops = dialect_ops()
    assert set(library.ops) == set(ops)
    for op_type, cls in ops.items():
        definition = cls.get_irdl_definition()
        params = tuple(n for n, _ in definition.operands) + tuple(n for n, _ in definition.results)
        info = library.op(op_type)
        for support in (info.aicore, info.aicpu):
            if support is not None:
                assert support.params == params, op_type


@pytest.mark.parametrize("soc", SOCS)
def test_cube_ops_are_trusted_and_block_list_is_as_documented(soc: str) -> None:
    library = opinfo.load(soc)
    for op_type, info in library.ops.items():
        assert info.is_cube == (op_type in CUBE), op_type
        expected = True if op_type in CUBE else False if op_type in BLOCK else None
        assert info.precision_reduce is expected, op_type
        assert info.mix_list == {True: "white", False: "black", None: "gray"}[expected]


def test_cube_classes_and_cube_unit_agree() -> None:
    for op_type, cls in dialect_ops().items():
        assert issubclass(cls, CubeOp) == (op_type in CUBE), op_type


@pytest.mark.parametrize("soc", SOCS)
def test_cube_ops_write_float32_from_float16_and_their_bias_has_the_result_dtype(soc: str) -> None:
    library = opinfo.load(soc)
    for op_type in CUBE:
        info = library.op(op_type)
        assert info.aicore is not None
        first_in, out = info.aicore.params[0], info.aicore.params[-1]
        assert info.aicore.matching({first_in: "float16", out: "float32"}), op_type
        assert info.aicore.matching({first_in: "float16", out: "float16"}), op_type
        for column in info.aicore.matching({}):
            if op_type in BIAS:
                assert column[BIAS[op_type]] == column[out], (op_type, column)


def test_bfloat16_and_float32_cube_inputs_only_on_ascend910b1() -> None:
    for soc in SOCS:
        library = opinfo.load(soc)
        assert library.has_bfloat16 == (soc == "Ascend910B1")
        conv = library.op("Conv2D").aicore
        assert conv is not None
        assert ("float32" in conv.dtypes_of("x")) == (soc == "Ascend910B1")
        assert library.op("Relu").aicore.supports({"x": "float32", "y": "float32"})  # type: ignore[union-attr]


def test_documented_assumptions_give_the_fallbacks_something_to_do() -> None:
    a310 = opinfo.load("Ascend310")
    for op_type in ("Pow", "Resize"):
        info = a310.op(op_type)
        assert info.aicore is not None and info.aicpu is not None
        first = info.aicore.params[0]
        assert "float32" not in info.aicore.dtypes_of(first)
        assert "float32" in info.aicpu.dtypes_of(first)
    resize = opinfo.load("Ascend910B1").op("Resize").aicore
    assert resize is not None and "bfloat16" not in resize.dtypes_of("x")
    mha = opinfo.load("Ascend310P3").op("MultiHeadAttention").aicpu
    assert mha is not None and mha.supports({"query": "float32", "y": "float32"})


@pytest.mark.parametrize("soc", SOCS)
def test_batch_norm_keeps_float32_statistics_beside_a_float16_input(soc: str) -> None:
    bn = opinfo.load(soc).op("BatchNorm").aicore
    assert bn is not None
    (column,) = bn.matching({"x": "float16"})
    assert column == {"x": "float16", "scale": "float32", "offset": "float32", "mean": "float32", "variance": "float32", "y": "float16"}


@pytest.mark.parametrize("soc", SOCS)
def test_impl_mode_lists(soc: str) -> None:
    library = opinfo.load(soc)
    lists = library.impl_mode_lists
    for mode in ("high_precision", "high_performance"):
        assert set(lists[f"{mode}_for_all"]) == set(library.offering(mode))
        assert set(lists[mode]) <= set(lists[f"{mode}_for_all"])
        assert set(lists[mode]) == {"AvgPoolV2", "Gelu", "LayerNorm", "LogSoftmaxV2", "SoftmaxV2"}
        assert all(m == mode for m in lists[mode].values())
    assert library.op("Gelu").impl_modes == ("high_precision", "high_performance", "super_performance")
    assert "keep_fp16" in library.op("SoftmaxV2").impl_modes and "keep_fp16" in library.op("LayerNorm").impl_modes
    assert library.offering("support_out_of_bound_index") == ("GatherElements", "GatherV2")
    assert library.op("Relu").impl_modes == ()


def test_unknown_soc_lists_the_known_ones() -> None:
    with pytest.raises(OptionError, match="Ascend310, Ascend310P3, Ascend910A, Ascend910B1"):
        opinfo.load("Ascend999")
    with pytest.raises(OptionError, match="'Frobnicate' is not in the op information"):
        opinfo.load("Ascend310").op("Frobnicate")


def _doc() -> dict:
    return json.loads((opinfo._DIR / "Ascend310.json").read_text())


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["ops"]["Relu"]["aicore"].update(x="float16,float32,int32,int64,int8"), "different lengths"),
        (lambda d: d["ops"]["Relu"]["aicore"].update(x="float16,float33,int32,int64"), "unknown dtype 'float33'"),
        (lambda d: d["ops"]["Relu"].update(unit="scalar"), "unit is 'scalar'"),
        (lambda d: d["ops"]["Relu"].update(precision_reduce="yes"), "precision_reduce is 'yes'"),
        (lambda d: d["ops"]["Relu"].update(impl_modes=["fastest"]), "impl_modes has 'fastest'"),
        (lambda d: d["impl_mode_lists"]["high_precision"].update(Relu="high_precision"), "does not offer"),
    ],
)
def test_malformed_op_info_is_reported_with_its_place(edit, message: str) -> None:
    doc = copy.deepcopy(_doc())
    edit(doc)
    with pytest.raises(OpInfoError, match=message):
        opinfo.parse(doc, "test.json")
