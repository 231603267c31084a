"""lower-to-kernel and its tiling: one launch per kernel scope, kernels that fit
their SoC and whose programs do the scope's work.

Every lowered kernel is checked here independently of the dialect's verifier
(`check_kernel`): its buffers fit the SoC's memories at their alignments, its flags
pair (simulated through the loops), its event ids exist, its block_dim reaches the
core count when the work has that many units, and its program moves and computes
as much as the scope needs: the mmads of all blocks cover the padded matmul (and
no more than twice it), every weight byte is loaded, and an elementwise op's
instructions cover its tensor. The reference interpreter runs a launch by running
its kernel's compute region, so a lowered graph computes bitwise what it did.
"""

from __future__ import annotations

import functools
import math
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from ge.testing.real_models import model_inputs, model_path
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, f16, f32, i64

from dialects import ascend_graph as ag
from dialects import formats
from dialects.ascend_kernel import (
    AllocOp,
    CopyOp,
    KernelOp,
    LaunchOp,
    LoopOp,
    MmadOp,
    SetFlagOp,
    VecOp,
    WaitFlagOp,
)
from ge.core import reference
from ge.core import soc as socs
from ge.core.errors import ModelError
from ge.core.ir import parse, to_text
from ge.models import DEMO_MODELS
from ge.testing import GraphBuilder, assert_equivalent, count_ops, graphs, run_pass
from passes.lowering.cube import cube_k
from passes.lowering.program import FRACTAL, vec
from dialects.kernel_boundary import SCOPE_ATTR, kernel_scopes, makes_kernel

SOCS = ["Ascend310", "Ascend310P3", "Ascend910A", "Ascend910B1"]
LEVELS = {"L1": "l1_bytes", "L0A": "l0a_bytes", "L0B": "l0b_bytes", "L0C": "l0c_bytes", "UB": "ub_bytes"}


# ------------------------------------------------------------------- the checks


@dataclass
class Totals:
    """What one block's program does, loops multiplied out."""

    macs: int = 0
    copies: Counter = field(default_factory=Counter)
    """Bytes by path (GM_TO_L1, ...)."""
    vector: Counter = field(default_factory=Counter)
    """Elements by instruction."""


def totals(ops, times: int = 1, into: Totals | None = None) -> Totals:
    out = into if into is not None else Totals()
    for op in ops:
        if isinstance(op, LoopOp):
            totals(op.body.block.ops, times * op.int_prop("trips"), out)
        elif isinstance(op, MmadOp):
            out.macs += times * op.int_prop("m") * op.int_prop("k") * op.int_prop("n")
        elif isinstance(op, CopyOp):
            out.copies[op.path.removesuffix("_TRANS")] += times * op.int_prop("bytes")
        elif isinstance(op, VecOp):
            out.vector[op.str_prop("instr")] += times * op.int_prop("elements")
    return out


def flags_pair(ops, pending: Counter) -> None:
    """Run the program's flags in order (each loop twice: once proves nothing)."""
    for op in ops:
        if isinstance(op, LoopOp):
            for _ in range(min(op.int_prop("trips"), 2)):
                flags_pair(op.body.block.ops, pending)
        elif isinstance(op, SetFlagOp):
            assert not pending[op.key], f"{op.key} set twice"
            pending[op.key] += 1
        elif isinstance(op, WaitFlagOp):
            assert pending[op.key] == 1, f"{op.key} waited for without a set"
            pending[op.key] -= 1


def allocs(ops):
    for op in ops:
        if isinstance(op, AllocOp):
            yield op
        elif isinstance(op, LoopOp):
            yield from allocs(op.body.block.ops)


def fills_the_cores(kernel: KernelOp, cores: int) -> bool:
    """block_dim reaches the core count, or the work is in fewer units than that, or
    (a matmul) no split in at most `cores` blocks gives its largest block less work,
    or none of those reads a tenth less of GM (each block reading its rows of A and
    columns of B once, so each N block reads all of A and each M block all of B:
    fewer blocks, fewer duplicated reads; the tiling's cost weighs latencies and
    pipes too, hence the tenth)."""
    p, block_dim = kernel.parameters, kernel.int_prop("block_dim")
    if "m" not in p:
        narrowest = min(formats.element_bits(a.dtype) for a in kernel.args) // 8
        units = math.ceil(p["rows"] / (32 // max(narrowest, 1))) if p["row"] == 1 else p["rows"]
        return block_dim >= min(cores, units)
    dims = (p["batch"], math.ceil(p["m"] / FRACTAL), math.ceil(p["n"] / FRACTAL))
    splits = [
        (b, m, n)
        for b in range(1, min(dims[0], cores) + 1)
        for m in range(1, min(dims[1], cores // b) + 1)
        for n in range(1, min(dims[2], cores // (b * m)) + 1)
    ]

    def share(split: tuple[int, int, int]) -> int:
        return math.prod(-(-u // d) for u, d in zip(dims, split))

    a, b = (kernel.inputs[min(i, len(kernel.inputs) - 1)].nbytes for i in (0, 1))

    def reads(split: tuple[int, int, int]) -> int:
        return split[2] * a + split[1] * b

    chosen = (p["batch_dim"], p["m_dim"], p["n_dim"])
    least = min(share(s) for s in splits)
    balanced = [s for s in splits if share(s) == least]
    return block_dim >= min(cores, math.prod(dims)) or share(chosen) == least or reads(chosen) <= 1.1 * min(reads(s) for s in balanced)


def check_kernel(kernel: KernelOp) -> None:
    profile = socs.load(kernel.soc.data)
    program = list(kernel.program.block.ops)
    shared_ub = profile.vector_per_cube if kernel.str_prop("core_type") == "AiCore" else 1  # a cube kernel's vector cores' UBs together
    for alloc in allocs(program):
        level = alloc.level
        capacity = getattr(profile, LEVELS[level]) * (shared_ub if level == "UB" else 1) if level in LEVELS else 1024
        unit = dict(profile.alignment).get(level.lower(), 32)
        assert alloc.int_prop("offset") + alloc.int_prop("bytes") <= capacity, f"{kernel.sym_name.data}: {level} overflows"
        assert alloc.int_prop("offset") % unit == 0 and alloc.int_prop("bytes") % unit == 0
    pending: Counter = Counter()
    flags_pair(program, pending)
    assert not +pending, f"{kernel.sym_name.data}: flags left set {+pending}"
    events = [op.int_prop("event") for op in kernel.program.walk() if isinstance(op, SetFlagOp | WaitFlagOp)]
    assert max(events, default=0) < profile.event_ids
    cores = profile.vector_cores if kernel.core_type.data == "VectorCore" else profile.ai_cores
    assert "heads" in kernel.parameters or fills_the_cores(kernel, cores), kernel.sym_name.data
    done = totals(program)
    p = kernel.parameters
    if "m" in p:
        kc = cube_k(profile, kernel.args.data[0].dtype)
        padded = p["batch"] * math.ceil(p["m"] / FRACTAL) * FRACTAL * math.ceil(p["k"] / kc) * kc * math.ceil(p["n"] / FRACTAL) * FRACTAL
        all_blocks = done.macs * kernel.int_prop("block_dim")
        assert padded <= all_blocks <= 2 * padded, (kernel.sym_name.data, padded, all_blocks)
        weight = kernel.inputs[min(1, len(kernel.inputs) - 1)]  # x @ x reads one input twice
        loaded = done.copies["GM_TO_L1"] * kernel.int_prop("block_dim")
        assert loaded >= weight.nbytes, kernel.sym_name.data
    if kernel.op_types.data[0].data == "Relu" and len(kernel.op_types) == 1:
        relu = kernel.args.data[0]
        elements = math.prod(relu.shape.get_values())
        assert done.vector["VRELU"] * kernel.int_prop("block_dim") >= elements


def lowered(case, soc: str, fusion: str = "AutomaticUbFusion") -> ModuleOp:
    after = run_pass(case, f"format-selection{{soc_version={soc}}},{fusion}{{soc_version={soc}}},lower-to-kernel{{soc_version={soc}}}")
    for kernel in after.ops:
        if isinstance(kernel, KernelOp):
            check_kernel(kernel)
    text = to_text(after)
    assert to_text(parse(text)) == text
    return after


def kernels_of(module: ModuleOp) -> dict[str, KernelOp]:
    return {op.sym_name.data: op for op in module.ops if isinstance(op, KernelOp)}


def launches_of(module: ModuleOp) -> list[LaunchOp]:
    return [op for op in module.walk() if isinstance(op, LaunchOp)]


# ---------------------------------------------------------------- small graphs


def conv(b: GraphBuilder, x, cout: int, k: int = 1, groups: int = 1, stride: int = 1) -> ag.Conv2DOp:
    cin = ag.shape_of(x.type)[1]
    w = b.random_weight([cout, cin // groups, k, k])
    return b.op(ag.Conv2DOp, [x, w, b.random_weight([cout])], strides=[1, 1, stride, stride], pads=[k // 2] * 4,
                dilations=[1, 1, 1, 1], groups=groups)


def residual_block() -> GraphBuilder:
    b = GraphBuilder(dtype=f16)
    x = b.input([1, 16, 14, 14])
    a = b.op(ag.ReluOp, [conv(b, x, 32).y])
    c = conv(b, a.y, 32, 3)
    s = b.op(ag.AddOp, [c.y, a.y])
    r = b.op(ag.ReluOp, [s.y])
    d = conv(b, r.y, 32, 3, groups=32, stride=2)  # depthwise
    b.op(ag.MaxPoolOp, [d.y], ksize=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0], ceil_mode=False)
    return b


def encoder() -> GraphBuilder:
    b = GraphBuilder(dtype=f16)
    x = b.input([64, 32])
    h = b.op(ag.MatMulV2Op, [x, b.random_weight([32, 96]), b.random_weight([96])], transpose_x1=False, transpose_x2=False)
    g = b.op(ag.GeluOp, [h.y], approximate="tanh")
    o = b.op(ag.MatMulV2Op, [g.y, b.random_weight([96, 32])], transpose_x1=False, transpose_x2=False)
    r = b.op(ag.AddOp, [o.y, x])
    n = b.op(ag.LayerNormOp, [r.y, b.random_weight([32]), b.random_weight([32])], begin_norm_axis=-1, epsilon=1e-5)
    b.op(ag.SoftmaxOp, [n.y], axes=[-1])
    return b


@pytest.mark.parametrize("soc", SOCS)
@pytest.mark.parametrize("build", [residual_block, encoder], ids=["residual_block", "encoder"])
def test_small_graphs_lower_for_every_soc(build, soc) -> None:
    case = build().finish()
    fused = run_pass(case, f"format-selection{{soc_version={soc}}},AutomaticUbFusion{{soc_version={soc}}}")
    after = lowered(case, soc)
    assert len(launches_of(after)) == kernel_scopes(fused)
    graph = after.body.block.first_op.body.block
    assert not [op.name for op in graph.ops if makes_kernel(op) and not isinstance(op, LaunchOp)]
    assert_equivalent(case, after, rtol=0, atol=0)


def test_every_launch_keeps_its_scope_names_and_types() -> None:
    b = GraphBuilder(dtype=f16)
    x = b.input([1, 16, 8, 8])
    c = conv(b, x, 16)
    b.op(ag.ReluOp, [b.op(ag.AddOp, [c.y, x]).y])
    case = b.finish()
    after = run_pass(case, "format-selection{soc_version=Ascend910A},TbeConvDoubleInFusionPass{soc_version=Ascend910A},lower-to-kernel{soc_version=Ascend910A}")
    (launch,) = [op for op in launches_of(after) if "Conv2D_0" in op.label]
    assert [n.data for n in launch.names] == ["Conv2D_0", "Add_0", "Relu_0"]
    kernel = kernels_of(after)[launch.kernel.root_reference.data]
    assert [t.data for t in kernel.op_types] == ["Conv2D", "Add", "Relu"]
    assert [op.name for op in kernel.compute.block.ops] == [
        "ascend_graph.conv2d", "ascend_graph.add", "ascend_graph.relu", "ascend_kernel.yield",
    ]
    assert [a.kind.data for a in kernel.args] == ["input"] * 3 + ["output"]  # x, filter, bias (x read twice)


def epilogue_copies(module: ModuleOp) -> set[str]:
    kernel = next(k for k in kernels_of(module).values() if "Conv2D" in [t.data for t in k.op_types])
    return {f"{op.path}@{op.pipe}" for op in kernel.program.walk() if isinstance(op, CopyOp) and op.path.startswith("L0C")}


def test_the_result_leaves_l0c_as_the_soc_allows() -> None:
    b = GraphBuilder(dtype=f16)
    x = b.input([1, 16, 8, 8])
    b.op(ag.ReluOp, [conv(b, x, 16).y])
    case = b.finish()
    fused = "TbeCommonRules0FusionPass{soc_version=%s}"
    on_a = run_pass(case, "format-selection{soc_version=Ascend910A}," + fused % "Ascend910A" + ",lower-to-kernel{soc_version=Ascend910A}")
    on_b = run_pass(case, "format-selection{soc_version=Ascend910B1}," + fused % "Ascend910B1" + ",lower-to-kernel{soc_version=Ascend910B1}")
    assert epilogue_copies(on_a) == {"L0C_TO_UB@V"}
    assert epilogue_copies(on_b) == {"L0C_TO_GM@FIX"}  # FIX applies the ReLU on the way out
    conv_b = next(k for k in kernels_of(on_b).values() if "Conv2D" in [t.data for t in k.op_types])
    assert not [op for op in conv_b.program.walk() if isinstance(op, VecOp)]
    assert {op.path for op in conv_b.program.walk() if isinstance(op, CopyOp)} >= {"L1_TO_BT"}


def test_a_longer_tail_on_the_fix_generation_goes_through_the_workspace() -> None:
    b = GraphBuilder(dtype=f16)
    x = b.input([1, 16, 8, 8])
    b.op(ag.ReluOp, [b.op(ag.AddOp, [conv(b, x, 16).y, x]).y])
    case = b.finish()
    after = lowered(case, "Ascend910B1", "TbeConvDoubleInFusionPass")
    kernel = next(k for k in kernels_of(after).values() if "Conv2D" in [t.data for t in k.op_types])
    assert kernel.int_prop("workspace") > 0 and len(kernel.program.block.args) == len(kernel.args) + 1
    assert epilogue_copies(after) == {"L0C_TO_GM@FIX"}
    assert_equivalent(case, after, rtol=0, atol=0)


def test_identical_scopes_share_one_kernel() -> None:
    b = GraphBuilder(dtype=f16)
    x = b.input([1, 16, 8, 8])
    y = b.op(ag.ReluOp, [conv(b, x, 16).y])
    b.op(ag.ReluOp, [conv(b, y.y, 16).y])
    case = b.finish()
    after = lowered(case, "Ascend310P3")
    calls = Counter(op.kernel.root_reference.data for op in launches_of(after))
    convs = [name for name in calls if "conv2d" in name]
    assert len(convs) == 1 and calls[convs[0]] == 2


def test_views_no_task_ops_and_constants_stay_in_the_graph() -> None:
    b = GraphBuilder(dtype=f16)
    x = b.input([4, 8])
    r = b.op(ag.ReshapeOp, [b.op(ag.ReluOp, [x]).y], shape=[2, 16])
    split = b.op(ag.SplitOp, [r.y], split_dim=0, num_split=2)
    split.attributes["_no_task"] = IntegerAttr(1, i64)
    for part in split.results:
        b.op(ag.ExpOp, [part])
    case = b.finish()
    after = lowered(case, "Ascend910A")
    graph_ops = [op.name for op in after.body.block.first_op.body.block.ops]
    assert "ascend_graph.reshape" in graph_ops and "ascend_graph.split_d" in graph_ops
    assert len(launches_of(after)) == 3
    assert_equivalent(case, after, rtol=0, atol=0)


def test_launches_follow_their_inputs() -> None:
    """A scope {a, c} whose c reads d, made after a: the launch must come after d."""
    b = GraphBuilder(dtype=f16)
    x, y = b.input([4, 16]), b.input([4, 16])
    a = b.op(ag.ReluOp, [x])
    d = b.op(ag.ExpOp, [y])
    c = b.op(ag.AddOp, [a.y, d.y])
    for op in (a, c):
        op.attributes[SCOPE_ATTR] = IntegerAttr(7, i64)
    case = b.finish()
    after = run_pass(case, "lower-to-kernel{soc_version=Ascend910A}")
    order = [op for op in after.body.block.first_op.body.block.ops]
    seen = set()
    for op in order:
        assert all(v.owner in seen for v in op.operands), op.name
        seen.add(op)
    assert len(launches_of(after)) == 2
    assert_equivalent(case, after, rtol=0, atol=0)


def test_a_float32_matmul_needs_a_cube_dtype() -> None:
    b = GraphBuilder(dtype=f32)
    x = b.input([16, 16])
    b.op(ag.MatMulV2Op, [x, x], transpose_x1=False, transpose_x2=False)
    with pytest.raises(ModelError, match="precision-selection"):
        run_pass(b.finish(), "format-selection{soc_version=Ascend910A},lower-to-kernel{soc_version=Ascend910A}")


def test_vector_kernels_use_the_vector_cores_of_split_parts() -> None:
    b = GraphBuilder(dtype=f16)
    b.op(ag.ReluOp, [b.input([64, 128])])
    case = b.finish()
    for soc, core_type, cores in (("Ascend910B1", "VectorCore", 48), ("Ascend310P3", "AiCore", 8)):
        (kernel,) = kernels_of(lowered(case, soc)).values()
        assert (kernel.core_type.data, kernel.int_prop("block_dim")) == (core_type, cores)


def test_long_vector_work_is_a_loop_of_full_instructions() -> None:
    b = GraphBuilder(dtype=f32)
    b.op(ag.CastOp, [b.input([512, 1024])], dst_type=f16)
    (kernel,) = kernels_of(lowered(b.finish(), "Ascend310")).values()
    casts = [op for op in kernel.program.walk() if isinstance(op, VecOp)]
    assert all(op.repeat(4) <= 255 for op in casts)
    buffer = AllocOp("UB", 0, 32).buffer  # 600 float32 repeats: a loop of two full instructions, then the rest
    loop, rest = vec("VCONV", "FP32_FP16", 600 * 64, [buffer], 4)
    (full,) = [op for op in loop.walk() if isinstance(op, VecOp)]
    assert isinstance(loop, LoopOp) and loop.int_prop("trips") == 2
    assert (full.repeat(4), rest.repeat(4)) == (255, 600 - 2 * 255)


@pytest.mark.parametrize("soc", SOCS)
@settings(max_examples=25)
@given(case=graphs(dtypes=(f16,), max_ops=8))
def test_generated_graphs_lower(case, soc) -> None:
    after = lowered(case, soc)
    assert_equivalent(case, after, rtol=0, atol=0)


def test_ge_opt_prints_kernels(tmp_path: Path) -> None:
    tool = Path(sys.executable).parent / "ge-opt"
    model = DEMO_MODELS[0].path
    pipeline = "precision-selection{soc_version=Ascend910A},format-selection{soc_version=Ascend910A},lower-to-kernel{soc_version=Ascend910A}"
    result = subprocess.run([str(tool), str(model), "-p", pipeline, "-o", str(tmp_path / "k.mlir")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "k.mlir").read_text()
    assert "ascend_kernel.kernel @te_conv2d" in text and "ascend_kernel.mmad" in text
    assert to_text(parse(text)) == text


# ----------------------------------------------------------------- real models


@functools.cache
def imported(name: str) -> ModuleOp:
    import ge

    module, _ = ge.load_onnx(str(model_path(name)))
    return module


@pytest.mark.slow
@pytest.mark.parametrize("soc", SOCS)
@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v2", "bert_base", "vit_b_16"])
def test_real_models_lower(name, soc) -> None:
    from ge import pipeline
    from ge.core.options import CompileOptions
    from ge.core.ir import context
    from passes.lower_to_kernel import LowerToKernel

    module = imported(name).clone()
    pipeline.optimize(module, CompileOptions(soc_version=soc, export_compile_stat=0))
    scopes = kernel_scopes(module)
    if name != "vit_b_16":  # ViT's export reshapes and slices around its attention: TransData there
        assert count_ops(module, ag.TransDataOp) <= 4  # at the model's ends, none between layers
    before = reference.run(module, model_inputs(model_path(name))) if (name, soc) == ("resnet50", "Ascend910A") else None
    LowerToKernel(soc_version=soc).apply(context(), module)
    module.verify()
    assert len(launches_of(module)) == scopes
    kernels = ModuleOp([k.clone() for k in kernels_of(module).values()])
    assert to_text(parse(to_text(kernels))) == to_text(kernels)
    for kernel in kernels_of(module).values():
        check_kernel(kernel)
    if before is not None:
        after = reference.run(module, model_inputs(model_path(name)))
        assert all((after[k] == v).all() for k, v in before.items())


def test_a_matmul_scope_that_writes_nd_stores_its_rows() -> None:
    """MatmulTransdataFusionPass ends a matmul scope in TransData FRACTAL_NZ -> ND:
    MTE3 writes the tile's rows in ND from the tile's own UB buffer."""
    b = GraphBuilder(dtype=f16)
    x = b.input([64, 32])
    h = b.op(ag.MatMulV2Op, [x, b.random_weight([32, 96]), b.random_weight([96])], transpose_x1=False, transpose_x2=False)
    b.op(ag.ReshapeOp, [b.op(ag.GeluOp, [h.y], approximate="tanh").y], shape=[64, 96, 1])
    case = b.finish()
    passes = "TbeMatmulElemwiseFusionPass{soc_version=Ascend910A},MatmulTransdataFusionPass{soc_version=Ascend910A}"
    after = run_pass(case, f"format-selection{{soc_version=Ascend910A}},{passes},lower-to-kernel{{soc_version=Ascend910A}}")
    kernel = next(k for k in kernels_of(after).values() if "MatMulV2" in [t.data for t in k.op_types])
    assert [t.data for t in kernel.op_types] == ["MatMulV2", "Gelu", "TransData"]
    stores = [op for op in kernel.program.walk() if isinstance(op, CopyOp) and op.path == "UB_TO_GM"]
    computed = {op.operands_[0] for op in kernel.program.walk() if isinstance(op, VecOp) and op.str_prop("instr") == "VDIV"}
    assert {op.src for op in stores} <= computed  # the Gelu's buffers are what MTE3 stores
    check_kernel(kernel)
    assert_equivalent(case, after, rtol=0, atol=0)
