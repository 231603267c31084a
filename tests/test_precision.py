"""Precision selection on small graphs: every mode, every file, op by op.

The sample graph (float32):

    x -> conv (white) -> relu (gray) -> flat (gray) -> matmul (white) -> softmax (black) -> add (gray) -+-> mul (gray) -> out
    y -> sigmoid (gray) ---------------------------------------------------------------------------------+
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import BoolAttr, ModuleOp, StringAttr, f16, f32

from dialects.ascend_graph import (
    AddOp,
    AscendOp,
    CastOp,
    ConstOp,
    Conv2DOp,
    DataOp,
    FlattenOp,
    MatMulV2Op,
    MulOp,
    NetOutputOp,
    PowOp,
    ReluOp,
    ResizeOp,
    SigmoidOp,
    SoftmaxOp,
    dtype_of,
)
from ge.core import dtypes, opinfo, reference
from ge.core.errors import ModelError, OptionError
from ge.core.precision_files import resolve
from ge.testing import GraphBuilder, GraphCase, count_ops
from ge.core.weights import store_of
from passes.precision_selection import AICPU_ENGINE, ENGINE, IMPL_MODE, REASON, select_precision

LAYERS = ("conv", "relu", "flat", "matmul", "softmax", "add", "sigmoid", "mul")
F16, F32, BF16 = "float16", "float32", "bfloat16"


def sample_graph() -> GraphCase:
    g = GraphBuilder(seed=1)
    x = g.input((1, 3, 8, 8), name="x")
    y = g.input((1, 10), name="y")
    conv = g.op(
        Conv2DOp, [x, g.random_weight((4, 3, 3, 3)), g.random_weight((4,))], name="conv",
        strides=[1, 1, 1, 1], pads=[1, 1, 1, 1], dilations=[1, 1, 1, 1], groups=1,
    )
    relu = g.op(ReluOp, [conv], name="relu")
    flat = g.op(FlattenOp, [relu], name="flat", axis=1)
    mm = g.op(MatMulV2Op, [flat, g.random_weight((256, 10), low=-0.1, high=0.1)], name="matmul", transpose_x1=False, transpose_x2=False)
    sm = g.op(SoftmaxOp, [mm], name="softmax", axes=[-1])
    add = g.op(AddOp, [sm, g.random_weight((10,))], name="add")
    sig = g.op(SigmoidOp, [y], name="sigmoid")
    mul = g.op(MulOp, [add, sig], name="mul")
    g.output(mul, "out")
    return g.finish()


def compile_(case: GraphCase | ModuleOp, soc: str = "Ascend910B1", **options) -> ModuleOp:
    module = (case.module if isinstance(case, GraphCase) else case).clone()
    select_precision(module, opinfo.load(soc), resolve(**options))
    return module


def ops_by_name(module: ModuleOp) -> dict[str, AscendOp]:
    return {op.label: op for op in module.walk() if isinstance(op, AscendOp) and op.node_name is not None}


def layer_dtypes(module: ModuleOp) -> dict[str, str]:
    """Each layer's dtype: its first input's and first output's, "a->b" where they differ."""
    out = {}
    for name, op in ops_by_name(module).items():
        if name not in LAYERS and not isinstance(op, PowOp | ResizeOp):
            continue
        a, b = dtypes.name(dtype_of(op.operands[0].type)), dtypes.name(dtype_of(op.results[0].type))
        out[name] = b if a == b else f"{a}->{b}"
    return out


def attr(op: AscendOp, key: str) -> str | None:
    value = op.attributes.get(key)
    return value.data if isinstance(value, StringAttr) else None


def every(dtype: str) -> dict[str, str]:
    return {name: dtype for name in LAYERS}


MIXED = {"conv": F16, "relu": F16, "flat": F16, "matmul": F16, "softmax": F32, "add": F32, "sigmoid": F32, "mul": F32}
EXPECTED: dict[str, dict[str, str]] = {
    "must_keep_origin_dtype": every(F32),
    "force_fp16": every(F16),
    "force_lowerprecision": every(F16),
    "allow_fp32_to_fp16": {**every(F32), "conv": F16, "matmul": F16},
    "allow_fp32_to_bf16": {**every(F32), "conv": BF16, "matmul": BF16},
    "cube_fp16in_fp32out": {**every(F32), "conv": "float16->float32", "matmul": "float16->float32"},
    "force_fp32": {**every(F32), "conv": "float16->float32", "matmul": "float16->float32"},
    "allow_mix_precision": MIXED,
    "allow_mix_precision_fp16": MIXED,
    "allow_mix_precision_bf16": {k: BF16 if v == F16 else v for k, v in MIXED.items()},
}
V2 = {
    "fp16": "force_fp16",
    "origin": "must_keep_origin_dtype",
    "cube_fp16in_fp32out": "cube_fp16in_fp32out",
    "mixed_float16": "allow_mix_precision_fp16",
    "mixed_bfloat16": "allow_mix_precision_bf16",
}


# ------------------------------------------------------------------------------ modes


@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_precision_mode_chooses_each_layers_dtype(mode: str) -> None:
    case = sample_graph()
    module = compile_(case, precision_mode=mode)
    assert layer_dtypes(module) == EXPECTED[mode]
    for name, op in ops_by_name(module).items():
        if name in LAYERS:
            assert attr(op, REASON) is not None and attr(op, REASON).startswith(f"precision_mode={mode}"), name
            assert attr(op, ENGINE) is None, name
    # graph inputs and outputs keep their dtypes
    assert [dtype_of(d.out.type) for d in module.walk() if isinstance(d, DataOp)] == [f32, f32]
    out = next(op for op in module.walk() if isinstance(op, NetOutputOp))
    assert [dtype_of(v.type) for v in out.operands] == [f32]
    if mode == "must_keep_origin_dtype":
        assert count_ops(module, CastOp) == 0
        np.testing.assert_array_equal(reference.run(module, case.inputs())["out"], reference.run(case.module, case.inputs())["out"])


@pytest.mark.parametrize("value", sorted(V2))
def test_precision_mode_v2_selects_the_same_policy(value: str) -> None:
    module = compile_(sample_graph(), precision_mode_v2=value)
    assert layer_dtypes(module) == EXPECTED[V2[value]]
    assert attr(ops_by_name(module)["relu"], REASON).startswith(f"precision_mode_v2={value}")


def test_the_default_is_force_fp16() -> None:
    module = compile_(sample_graph())
    assert layer_dtypes(module) == EXPECTED["force_fp16"]
    assert attr(ops_by_name(module)["conv"], REASON) == "precision_mode=force_fp16 (default)"


def test_mixed_precision_reasons_name_the_list() -> None:
    ops = ops_by_name(compile_(sample_graph(), precision_mode="allow_mix_precision"))
    assert attr(ops["conv"], REASON) == "precision_mode=allow_mix_precision: white list"
    assert attr(ops["relu"], REASON) == "precision_mode=allow_mix_precision: gray list, follows its float16 inputs"
    assert attr(ops["softmax"], REASON) == "precision_mode=allow_mix_precision: black list"
    assert attr(ops["sigmoid"], REASON) == "precision_mode=allow_mix_precision: gray list, follows its float32 inputs"


def test_cube_fp16in_fp32out_sets_the_cube_result_dtype_and_a_float32_bias() -> None:
    conv = ops_by_name(compile_(sample_graph(), precision_mode="cube_fp16in_fp32out"))["conv"]
    assert isinstance(conv, Conv2DOp)
    assert conv.properties["dtype"] == f32
    assert [dtype_of(v.type) for v in conv.operands] == [f16, f16, f32]
    assert "dtype = f32" in str(conv)


def resize_graph() -> GraphCase:
    """x -> conv -> pow (black) -> resize (gray) -> out, for Ascend310's float16-only kernels."""
    g = GraphBuilder(seed=2)
    x = g.input((1, 2, 4, 4), name="x")
    conv = g.op(
        Conv2DOp, [x, g.random_weight((2, 2, 1, 1))], name="conv",
        strides=[1, 1, 1, 1], pads=[0, 0, 0, 0], dilations=[1, 1, 1, 1], groups=1,
    )
    p = g.op(PowOp, [conv, g.constant(2.0)], name="pow")
    r = g.op(
        ResizeOp, [p], name="resize", sizes=[1, 2, 8, 8], scales=[1, 1, 2, 2], mode="nearest",
        coordinate_transformation_mode="asymmetric", nearest_mode="floor", cubic_coeff_a=-0.75,
        exclude_outside=False, extrapolation_value=0.0,
    )
    g.output(r, "out")
    return g.finish()


@pytest.mark.parametrize(
    ("mode", "expected", "aicpu"),
    [
        ("must_keep_origin_dtype", {"conv": F32, "pow": F32, "resize": F32}, {"conv", "pow", "resize"}),
        ("force_fp32", {"conv": "float16->float32", "pow": F32, "resize": F16}, {"pow"}),
        ("allow_fp32_to_fp16", {"conv": F16, "pow": F16, "resize": F16}, set()),
        ("force_fp16", {"conv": F16, "pow": F16, "resize": F16}, set()),
    ],
)
def test_ascend310_falls_back_where_ai_core_lacks_a_dtype(mode: str, expected: dict[str, str], aicpu: set[str]) -> None:
    case = resize_graph()
    module = compile_(case, "Ascend310", precision_mode=mode)
    assert layer_dtypes(module) == expected
    ops = ops_by_name(module)
    assert {n for n in expected if attr(ops[n], ENGINE) == AICPU_ENGINE} == aicpu
    if mode == "force_fp32":
        assert attr(ops["pow"], REASON).endswith("AI Core has no float32 kernel; block list: AI CPU")
        assert attr(ops["resize"], REASON).endswith("AI Core has no float32 kernel, keeps float16")
    if mode == "must_keep_origin_dtype":
        assert attr(ops["conv"], REASON).endswith("AI Core has no float32 kernel: AI CPU")
        np.testing.assert_array_equal(reference.run(module, case.inputs())["out"], reference.run(case.module, case.inputs())["out"])


@pytest.mark.parametrize("mode", ["allow_fp32_to_bf16", "allow_mix_precision_bf16"])
def test_bfloat16_modes_need_a_part_with_bfloat16(mode: str) -> None:
    with pytest.raises(OptionError, match=f"precision_mode={mode} needs bfloat16, which Ascend310P3 does not have"):
        compile_(sample_graph(), "Ascend310P3", precision_mode=mode)
    with pytest.raises(OptionError, match="precision_mode_v2=mixed_bfloat16 needs bfloat16"):
        compile_(sample_graph(), "Ascend910A", precision_mode_v2="mixed_bfloat16")


# ----------------------------------------------------- fallback rules on a made-up library


def library_with(**ops: dict) -> opinfo.OpInfoLibrary:
    doc = json.loads((opinfo._DIR / "Ascend910B1.json").read_text())
    doc = copy.deepcopy(doc)
    for op_type, entry in ops.items():
        doc["ops"][op_type].update(entry)
        if entry.get("aicpu", True) is None:
            del doc["ops"][op_type]["aicpu"]
    return opinfo.parse(doc, "made-up")


def relu_graph(dtype) -> GraphCase:
    g = GraphBuilder(seed=3, dtype=dtype)
    g.output(g.op(ReluOp, [g.input((2, 3), name="x")], name="relu"), "out")
    return g.finish()


def test_must_keep_origin_dtype_float16_without_a_float16_kernel_computes_in_float32() -> None:
    library = library_with(Relu={"aicore": {"x": "float32,bfloat16", "y": "float32,bfloat16"}})
    module = relu_graph(f16).module.clone()
    select_precision(module, library, resolve(precision_mode="must_keep_origin_dtype"))
    relu = ops_by_name(module)["relu"]
    assert dtype_of(relu.results[0].type) == f32 and attr(relu, ENGINE) is None
    assert attr(relu, REASON).endswith("AI Core has no float16 kernel, computed in float32")


def test_must_keep_origin_dtype_float16_with_only_bfloat16_runs_on_ai_cpu() -> None:
    library = library_with(Relu={"aicore": {"x": "bfloat16", "y": "bfloat16"}})
    module = relu_graph(f16).module.clone()
    select_precision(module, library, resolve(precision_mode="must_keep_origin_dtype"))
    relu = ops_by_name(module)["relu"]
    assert dtype_of(relu.results[0].type) == f16 and attr(relu, ENGINE) == AICPU_ENGINE


def test_no_kernel_anywhere_is_an_error_naming_the_op() -> None:
    library = library_with(Relu={"aicore": {"x": "bfloat16", "y": "bfloat16"}, "aicpu": None})
    with pytest.raises(ModelError, match=r"Relu 'relu': no kernel on Ascend910B1 .* \(tried float16 on AI Core, float32 on AI Core, float16 on AI CPU\)"):
        select_precision(relu_graph(f16).module.clone(), library, resolve(precision_mode="must_keep_origin_dtype"))


@pytest.mark.parametrize(
    ("columns", "expected"),
    [
        ({"x1": "float32", "x2": "float32", "bias": "float32", "y": "float32"}, "float32"),
        ({"x1": "float16", "x2": "float16", "bias": "float16", "y": "float16"}, "float16"),
    ],
)
def test_cube_rules_fall_back_from_fp16_in_fp32_out(columns: dict[str, str], expected: str) -> None:
    library = library_with(MatMulV2={"aicore": columns})
    module = sample_graph().module.clone()
    select_precision(module, library, resolve(precision_mode="cube_fp16in_fp32out"))
    assert layer_dtypes(module)["matmul"] == expected


def test_cube_rules_fail_when_nothing_fits() -> None:
    library = library_with(MatMulV2={"aicore": {"x1": "bfloat16", "x2": "bfloat16", "bias": "bfloat16", "y": "bfloat16"}})
    with pytest.raises(ModelError, match="MatMulV2 'matmul': no kernel"):
        select_precision(sample_graph().module.clone(), library, resolve(precision_mode="cube_fp16in_fp32out"))


# ------------------------------------------------------------------------------ casts


def casts(module: ModuleOp) -> list[CastOp]:
    return [op for op in module.walk() if isinstance(op, CastOp)]


def test_casts_only_at_dtype_boundaries_and_weights_converted_in_the_store() -> None:
    case = sample_graph()
    module = compile_(case, precision_mode="force_fp16")
    inserted = casts(module)
    assert sorted(c.label for c in inserted) == ["mul_cast_float32", "x_cast_float16", "y_cast_float16"]
    assert all(not isinstance(c.x.owner, ConstOp) for c in inserted)
    store = store_of(module)
    originals = {c.label: c for c in case.module.walk() if isinstance(c, ConstOp)}
    converted = [op for op in module.walk() if isinstance(op, ConstOp)]
    assert sorted(c.label for c in converted) == sorted(f"{name}_float16" for name in originals)
    for const in converted:
        original = reference.const_value(originals[const.label.removesuffix("_float16")], case.store)
        np.testing.assert_array_equal(reference.const_value(const, store), original.astype(np.float16))


def test_one_cast_per_value_and_dtype() -> None:
    g = GraphBuilder(seed=4)
    x = g.input((2, 3), name="x")
    g.output(g.op(ReluOp, [x], name="a"), "a")
    g.output(g.op(SigmoidOp, [x], name="b"), "b")
    module = compile_(g.finish(), precision_mode="force_fp16")
    assert sorted(c.label for c in casts(module)) == ["a_cast_float32", "b_cast_float32", "x_cast_float16"]


def test_cast_pairs_that_cancel_are_removed() -> None:
    g = GraphBuilder(seed=5, dtype=f16)
    x = g.input((2, 3), name="x")
    wide = g.op(CastOp, [x], name="widen", dst_type=f32)
    g.output(g.op(ReluOp, [wide], name="relu"), "out")
    case = g.finish()
    module = compile_(case, precision_mode="force_fp16")
    (only,) = casts(module)
    assert only.x.owner is ops_by_name(module)["relu"] and dtype_of(only.y.type) == f32
    relu = ops_by_name(module)["relu"]
    assert isinstance(relu.operands[0].owner, DataOp)
    np.testing.assert_array_equal(reference.run(module, case.inputs())["out"], reference.run(case.module, case.inputs())["out"])


def test_inline_constants_are_converted_inline() -> None:
    g = GraphBuilder(seed=6)
    x = g.input((2, 3), name="x")
    g.output(g.op(MulOp, [x, g.constant(0.5)], name="half"), "out")
    module = compile_(g.finish(), precision_mode="force_fp16")
    (const,) = [op for op in module.walk() if isinstance(op, ConstOp)]
    assert dtype_of(const.out.type) == f16 and "dense<" in str(const)
    assert float(reference.const_value(const)) == 0.5


# ----------------------------------------------------------------------- modify_mixlist


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("doc", "changes"),
    [
        ({"black-list": {"to-remove": ["SoftmaxV2"]}}, {"softmax": F16, "add": F16}),
        ({"white-list": {"to-remove": ["Conv2D"]}}, {"conv": F32, "relu": F32, "flat": F32}),
        ({"black-list": {"to-add": ["Relu"]}}, {"relu": F32, "flat": F32}),
        ({"white-list": {"to-add": ["Sigmoid"]}}, {"sigmoid": F16}),
        ({"gray-list": {"to-add": ["Conv2D"]}}, {"conv": F32, "relu": F32, "flat": F32}),
        ({"black-list": {"to-remove": ["Conv2D"]}}, {}),
    ],
)
def test_modify_mixlist_moves_op_types_between_lists(tmp_path: Path, doc: dict, changes: dict[str, str]) -> None:
    path = write(tmp_path, "mix.json", json.dumps(doc, indent=2))
    module = compile_(sample_graph(), precision_mode="allow_mix_precision", modify_mixlist=path)
    assert layer_dtypes(module) == {**MIXED, **changes}


def test_modify_mixlist_reason_names_the_file_line(tmp_path: Path) -> None:
    path = write(tmp_path, "mix.json", '{\n  "black-list": {\n    "to-add": [\n      "Relu"\n    ]\n  }\n}\n')
    relu = ops_by_name(compile_(sample_graph(), precision_mode="allow_mix_precision", modify_mixlist=path))["relu"]
    assert attr(relu, REASON) == f"modify_mixlist '{path}' line 4: black list"


def test_modify_mixlist_warns_outside_mixed_precision_and_on_unknown_types(tmp_path: Path, caplog) -> None:
    path = write(tmp_path, "mix.json", json.dumps({"white-list": {"to-add": ["Bias"]}}))
    with caplog.at_level(logging.WARNING, logger="ge"):
        module = compile_(sample_graph(), precision_mode="force_fp16", modify_mixlist=path)
    assert layer_dtypes(module) == EXPECTED["force_fp16"]
    assert "modify_mixlist has no effect under precision_mode=force_fp16" in caplog.text
    assert "op type 'Bias' is not in the op information of Ascend910B1" in caplog.text


# ------------------------------------------------------------------------- keep_dtype


def test_keep_dtype_by_name_and_by_type(tmp_path: Path) -> None:
    path = write(tmp_path, "keep.cfg", "# keep these\nrelu\n\nOpType::SoftmaxV2\n")
    ops = ops_by_name(m := compile_(sample_graph(), precision_mode="force_fp16", keep_dtype=path))
    assert layer_dtypes(m) == {**every(F16), "relu": F32, "softmax": F32}
    assert attr(ops["relu"], REASON) == f"keep_dtype '{path}' line 2"
    assert attr(ops["softmax"], REASON) == f"keep_dtype '{path}' line 4"
    assert ops["relu"].attributes["keep_dtype"] == BoolAttr.from_bool(True) and "keep_dtype" not in ops["conv"].attributes


def test_ops_marked_keep_dtype_keep_their_dtype() -> None:
    case = sample_graph()
    ops_by_name(case.module)["sigmoid"].attributes["keep_dtype"] = BoolAttr.from_bool(True)
    module = compile_(case, precision_mode="force_fp16")
    assert layer_dtypes(module) == {**every(F16), "sigmoid": F32}
    assert attr(ops_by_name(module)["sigmoid"], REASON) == "keep_dtype attribute"


def test_keep_dtype_unknown_names_warn_and_unknown_types_fail(tmp_path: Path, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="ge"):
        compile_(sample_graph(), keep_dtype=write(tmp_path, "a.cfg", "no_such_node\n"))
    assert "keep_dtype: no node is named 'no_such_node'" in caplog.text
    path = write(tmp_path, "b.cfg", "OpType::Frob\n")
    with pytest.raises(OptionError, match=f"keep_dtype '{path}' line 1: unknown op type 'Frob' for Ascend910B1"):
        compile_(sample_graph(), keep_dtype=path)


# ------------------------------------------------------------------- customize_dtypes


def test_customize_dtypes_name_beats_type_and_cube_may_widen(tmp_path: Path) -> None:
    path = write(
        tmp_path, "c.cfg",
        "OpType::Relu:InputDtype:bfloat16,OutputDtype:bfloat16\n"
        "relu::InputDtype:float,OutputDtype:float32\n"
        "OpType::MatMulV2:InputDtype:float16,float16,OutputDtype:float32\n",
    )
    module = compile_(sample_graph(), precision_mode="force_fp16", customize_dtypes=path)
    assert layer_dtypes(module) == {**every(F16), "relu": F32, "matmul": "float16->float32"}
    assert attr(ops_by_name(module)["relu"], REASON) == f"customize_dtypes '{path}' line 2"


def test_customize_dtypes_unsupported_dtype_fails_the_compile(tmp_path: Path) -> None:
    path = write(tmp_path, "c.cfg", "sigmoid::InputDtype:int8,OutputDtype:int8\n")
    with pytest.raises(OptionError, match=f"customize_dtypes '{path}' line 1: Sigmoid 'sigmoid' has no kernel for x int8, y int8 on Ascend910B1; supported: AI Core: \\(x float16, y float16\\)"):
        compile_(sample_graph(), customize_dtypes=path)


def test_customize_dtypes_counts_must_match_the_op(tmp_path: Path) -> None:
    path = write(tmp_path, "c.cfg", "mul::InputDtype:float16,OutputDtype:float16\n")
    with pytest.raises(OptionError, match=r"line 1: Mul 'mul' has 2 inputs \(x1, x2\), but 1 input dtypes are given"):
        compile_(sample_graph(), customize_dtypes=path)


def test_customize_dtypes_has_no_effect_under_must_keep_origin_dtype(tmp_path: Path, caplog) -> None:
    path = write(tmp_path, "c.cfg", "relu::InputDtype:float16,OutputDtype:float16\n")
    with caplog.at_level(logging.WARNING, logger="ge"):
        module = compile_(sample_graph(), precision_mode="must_keep_origin_dtype", customize_dtypes=path)
    assert layer_dtypes(module) == every(F32)
    assert "customize_dtypes has no effect under precision_mode=must_keep_origin_dtype" in caplog.text


# --------------------------------------------------------------- implementation modes


def modes(module: ModuleOp) -> dict[str, str]:
    return {name: attr(op, IMPL_MODE) for name, op in ops_by_name(module).items() if attr(op, IMPL_MODE)}


def test_op_select_implmode_default_is_high_performance_on_the_compatibility_list() -> None:
    assert modes(compile_(sample_graph())) == {"softmax": "high_performance"}


def test_op_select_implmode_for_all_and_optypelist() -> None:
    assert modes(compile_(sample_graph(), op_select_implmode="high_precision_for_all")) == {
        "softmax": "high_precision", "sigmoid": "high_precision",
    }
    assert modes(compile_(sample_graph(), op_select_implmode="high_precision", optypelist_for_implmode="Sigmoid")) == {
        "sigmoid": "high_precision",
    }


def test_optypelist_needs_offered_modes() -> None:
    with pytest.raises(OptionError, match="optypelist_for_implmode: Relu has no implementation mode high_precision on Ascend910B1; it offers none"):
        compile_(sample_graph(), op_select_implmode="high_precision", optypelist_for_implmode="Relu")
    with pytest.raises(OptionError, match="optypelist_for_implmode 'Sigmoid' needs op_select_implmode high_precision or high_performance, not unset"):
        resolve(optypelist_for_implmode="Sigmoid")
    with pytest.raises(OptionError, match="not high_precision_for_all"):
        resolve(op_select_implmode="high_precision_for_all", optypelist_for_implmode="Sigmoid")


def test_op_precision_mode_name_beats_type_and_beats_op_select_implmode(tmp_path: Path, caplog) -> None:
    path = write(tmp_path, "p.ini", "[ByOpType]\nSoftmaxV2=keep_fp16\nSigmoid=high_performance\n[ByNodeName]\nsoftmax=high_precision\n")
    with caplog.at_level(logging.WARNING, logger="ge"):
        module = compile_(sample_graph(), op_precision_mode=path, op_select_implmode="high_precision_for_all")
    assert modes(module) == {"softmax": "high_precision", "sigmoid": "high_performance"}
    assert "op_precision_mode takes precedence" in caplog.text


def test_op_precision_mode_lines_before_a_section_are_by_op_type(tmp_path: Path) -> None:
    path = write(tmp_path, "p.ini", "SoftmaxV2=keep_fp16 ; a comment\n")
    assert modes(compile_(sample_graph(), op_precision_mode=path)) == {"softmax": "keep_fp16"}


def test_op_precision_mode_must_be_offered(tmp_path: Path, caplog) -> None:
    path = write(tmp_path, "p.ini", "[ByOpType]\n\nRelu=high_precision\n")
    with pytest.raises(OptionError, match=f"op_precision_mode '{path}' line 3: Relu has no implementation mode high_precision"):
        compile_(sample_graph(), op_precision_mode=path)
    path = write(tmp_path, "q.ini", "[ByNodeName]\nrelu=high_precision\n")
    with pytest.raises(OptionError, match=f"op_precision_mode '{path}' line 2 \\('relu'\\): Relu has no implementation mode"):
        compile_(sample_graph(), op_precision_mode=path)
    path = write(tmp_path, "r.ini", "[ByNodeName]\nghost=high_precision\n")
    with caplog.at_level(logging.WARNING, logger="ge"):
        compile_(sample_graph(), op_precision_mode=path)
    assert "op_precision_mode [ByNodeName]: no node is named 'ghost'" in caplog.text
