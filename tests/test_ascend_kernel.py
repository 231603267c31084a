"""The ascend_kernel dialect: syntax, round trips, what its verifier refuses, and
what `verify_fits` refuses of a kernel on its SoC.

Each refusal starts from a kernel that verifies and fits and changes one thing.
"""

from __future__ import annotations

import pytest
from xdsl.utils.exceptions import ParseError, VerifyException

from dialects.ascend_kernel import (
    CopyOp,
    FlagOp,
    KernelOp,
    SetFlagOp,
    VecOp,
    copy_pipe,
    verify_fits,
)
from ge.core import soc as socs
from ge.core.errors import OptionError
from ge.core.ir import parse, to_text

T = "tensor<4x32xf16>"
ARG = 'array<i64: 4, 32>, "ND">'
UB = '!ascend_kernel.buffer<"UB">'
GM = '!ascend_kernel.buffer<"GM">'

KERNEL = f"""
builtin.module {{
  ascend_graph.graph @main {{
    %x = ascend_graph.data {{index = 0 : i64, name = "x"}} : {T}
    %y = ascend_kernel.launch @add({{LAUNCH_ARGS}}) {{names = ["add0"]}} : ({{LAUNCH_TYPES}}) -> {T}
    ascend_graph.net_output %y {{names = ["y"]}} : {T}
  }}
  ascend_kernel.kernel @add attributes {{op_types = ["Add"], block_dim = 1 : i64, core_type = "{{CORE}}",
      impl_mode = "high_performance", tiling = {{tile = 128 : i64}}, soc = "{{SOC}}", workspace = 0 : i64,
      args = [#ascend_kernel.arg<"input", f16, {ARG}, #ascend_kernel.arg<"input", f16, {ARG},
              #ascend_kernel.arg<"output", f16, {ARG}]}} compute {{
  ^bb0(%a: {T}, %b: {T}):
    %s = ascend_graph.add %a, %b {{name = "add0"}} : ({T}, {T}) -> {T}
    ascend_kernel.yield %s : {T}
  }} program {{
  ^bb0(%ga: {GM}, %gb: {GM}, %gy: {GM}):
    %u0 = ascend_kernel.alloc 256 bytes at 0 : {UB}
    %u1 = ascend_kernel.alloc {{SIZE}} bytes at {{OFFSET}} : {UB}
    ascend_kernel.scalar 32 instrs
    ascend_kernel.set_flag "V" -> "MTE2", 0
    ascend_kernel.loop 2 times {{
      ascend_kernel.wait_flag "V" -> "MTE2", 0
      ascend_kernel.copy "MTE2" %ga -> %u0, 256 bytes : {GM} -> {UB}
      ascend_kernel.copy "{{PIPE}}" %gb -> %u1, 256 bytes : {GM} -> {UB}
      ascend_kernel.set_flag "MTE2" -> "V", {{EVENT}}
      ascend_kernel.wait_flag "MTE2" -> "V", {{EVENT}}
      ascend_kernel.vec "VADD" "FP16_FP16_FP16"(%u0, %u0, %u1) x 128 : {UB}, {UB}, {UB}
      ascend_kernel.set_flag "V" -> "MTE3", 0
      ascend_kernel.wait_flag "V" -> "MTE3", 0
      ascend_kernel.copy "MTE3" %u0 -> %gy, 256 bytes : {UB} -> {GM}
      {{LOOP_END}}
    }}
    {{AFTER}}
  }}
}}
"""

DEFAULTS = {
    "LAUNCH_ARGS": "%x, %x",
    "LAUNCH_TYPES": f"{T}, {T}",
    "SOC": "Ascend910A",
    "CORE": "AiCore",
    "SIZE": "256",
    "OFFSET": "256",
    "PIPE": "MTE2",
    "EVENT": "1",
    "LOOP_END": 'ascend_kernel.set_flag "V" -> "MTE2", 0',
    "AFTER": 'ascend_kernel.wait_flag "V" -> "MTE2", 0',
}


def kernel_text(**changes: str) -> str:
    text = KERNEL
    for key, value in {**DEFAULTS, **changes}.items():
        text = text.replace("{" + key + "}", value)
    return text


def fitted(text: str):
    """Parse and verify the module, then check its kernel against its SoC."""
    module = parse(text)
    kernel = next(op for op in module.ops if isinstance(op, KernelOp))
    verify_fits(kernel, socs.load(kernel.soc.data))
    return module


def test_a_valid_kernel_parses_verifies_fits_and_round_trips() -> None:
    module = fitted(kernel_text())
    text = to_text(module)
    assert to_text(parse(text)) == text
    kernel = next(op for op in module.ops if isinstance(op, KernelOp))
    assert [a.kind.data for a in kernel.args] == ["input", "input", "output"]
    assert kernel.parameters == {"tile": 128}
    copies = [op for op in kernel.program.walk() if isinstance(op, CopyOp)]
    assert [c.path for c in copies] == ["GM_TO_UB", "GM_TO_UB", "UB_TO_GM"]
    (add,) = [op for op in kernel.program.walk() if isinstance(op, VecOp)]
    assert add.repeat(2) == 1 and add.pipe == "V"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"SIZE": str(256 * 1024)}, "overflows UB"),
        ({"OFFSET": "100"}, "not 32-byte aligned"),
        ({"OFFSET": "128"}, "overlap"),
        ({"PIPE": "MTE3"}, "runs on MTE2, not MTE3"),
        ({"EVENT": "4"}, "beyond Ascend910A's 4 ids"),
    ],
)
def test_verify_fits_refuses(changes, message) -> None:
    text = kernel_text(**changes)
    parse(text)  # the dialect's verifier knows no SoC
    with pytest.raises(VerifyException, match=message):
        fitted(text)


def test_a_cube_kernels_ub_is_its_vector_cores_together_where_they_are_apart() -> None:
    """On the 910B a cube kernel's vector half runs on the cube core's two vector
    cores, each with its own UB and its share of every tile: the kernel's UB buffers
    may fill both UBs; a vector kernel's, or any kernel's where a core holds both
    units, one."""
    for soc in ("Ascend910B1", "Ascend310P3"):
        profile = socs.load(soc)
        over_one = {"SOC": soc, "SIZE": str(profile.ub_bytes)}  # from offset 256: past one UB
        if profile.vector_per_cube == 2:
            fitted(kernel_text(**over_one))
            with pytest.raises(VerifyException, match=f"overflows UB's {2 * profile.ub_bytes} bytes"):
                fitted(kernel_text(**over_one | {"SIZE": str(2 * profile.ub_bytes)}))
        else:
            with pytest.raises(VerifyException, match=f"overflows UB's {profile.ub_bytes} bytes"):
                fitted(kernel_text(**over_one))
        with pytest.raises(VerifyException, match=f"overflows UB's {profile.ub_bytes} bytes"):
            fitted(kernel_text(**over_one, CORE="VectorCore"))


def test_a_kernel_for_an_unknown_soc_parses_but_cannot_be_fitted() -> None:
    with pytest.raises(OptionError, match="unknown soc_version"):
        fitted(kernel_text(SOC="Ascend999"))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"LOOP_END": ""}, "leave the flags as it found them"),
        ({"AFTER": ""}, "never waited for"),
        ({"AFTER": 'ascend_kernel.wait_flag "V" -> "MTE2", 0\n ascend_kernel.wait_flag "V" -> "MTE2", 0'}, "no set_flag before it"),
        ({"LOOP_END": 'ascend_kernel.set_flag "V" -> "MTE2", 0\n ascend_kernel.set_flag "V" -> "MTE2", 0'}, "already set"),
        ({"LAUNCH_ARGS": "%x", "LAUNCH_TYPES": T}, "do not match the kernel's arguments"),
    ],
)
def test_the_verifier_refuses(changes, message) -> None:
    with pytest.raises(VerifyException, match=message):
        parse(kernel_text(**changes))


def test_event_ids_follow_the_soc() -> None:
    fitted(kernel_text(SOC="Ascend910B1", EVENT="7"))
    with pytest.raises(VerifyException, match="beyond Ascend910B1's 8 ids"):
        fitted(kernel_text(SOC="Ascend910B1", EVENT="8"))


def test_paths_follow_the_soc() -> None:
    assert copy_pipe("L0C", "GM", fix_pipe=True) == "FIX"
    assert copy_pipe("L0C", "GM", fix_pipe=False) is None
    assert copy_pipe("L0C", "UB", fix_pipe=False) == "V"
    assert copy_pipe("L0C", "UB", fix_pipe=True) is None
    fix = 'ascend_kernel.pipe_barrier "FIX"'
    fitted(kernel_text(SOC="Ascend910B1", LOOP_END=f'ascend_kernel.set_flag "V" -> "MTE2", 0\n {fix}'))
    with pytest.raises(VerifyException, match="has no FIX pipe"):
        fitted(kernel_text(LOOP_END=f'ascend_kernel.set_flag "V" -> "MTE2", 0\n {fix}'))


def test_a_flag_across_the_cores_names_an_mte2_on_a_part_with_split_cores() -> None:
    """A flag may name whose MTE2 it pairs with (CANN's CrossCoreSetFlag): only a
    cube or a vector core, only with MTE2 at one end, only where the cores are apart."""
    cross = 'ascend_kernel.set_flag "MTE3" -> "MTE2", 1 core "cube"\n ascend_kernel.wait_flag "MTE3" -> "MTE2", 1 core "cube"'
    text = kernel_text(SOC="Ascend910B1", AFTER=f'ascend_kernel.wait_flag "V" -> "MTE2", 0\n {cross}')
    fitted(text)
    flags = [op for op in parse(text).walk() if isinstance(op, FlagOp) and op.core is not None]
    assert [op.core for op in flags] == ["cube", "cube"] and 'core "cube"' in str(flags[0])
    with pytest.raises(VerifyException, match="share a core: no flag names one"):
        fitted(kernel_text(AFTER=f'ascend_kernel.wait_flag "V" -> "MTE2", 0\n {cross}'))
    for bad in (SetFlagOp("MTE3", "V", 1, "cube"), SetFlagOp("MTE3", "MTE2", 1, "aiv")):
        with pytest.raises(VerifyException, match="names whose MTE2 a flag pairs with"):
            bad.verify()


def test_buffers_of_sibling_loops_may_share_memory() -> None:
    scoped = f"""
    ascend_kernel.loop 1 times {{
      %p = ascend_kernel.alloc 1024 bytes at 512 : {UB}
    }}
    ascend_kernel.loop 1 times {{
      %q = ascend_kernel.alloc 2048 bytes at 512 : {UB}
    }}"""
    fitted(kernel_text(AFTER='ascend_kernel.wait_flag "V" -> "MTE2", 0' + scoped))


def test_ops_check_their_memories() -> None:
    mmad = f'ascend_kernel.mmad %u0, %u0 -> %u1, 16 x 16 x 16, f16 : {UB}, {UB} -> {UB}'
    with pytest.raises(VerifyException, match="mmad reads and writes L0A, L0B, L0C"):
        parse(kernel_text(AFTER='ascend_kernel.wait_flag "V" -> "MTE2", 0\n' + mmad))
    vec = f'ascend_kernel.vec "VADD" "FP16_FP16_FP16"(%ga) x 16 : {GM}'
    with pytest.raises(VerifyException, match="works in UB, not GM"):
        parse(kernel_text(AFTER='ascend_kernel.wait_flag "V" -> "MTE2", 0\n' + vec))
    with pytest.raises(VerifyException, match="unknown memory level"):
        parse(kernel_text(AFTER='ascend_kernel.wait_flag "V" -> "MTE2", 0\n %z = ascend_kernel.alloc 32 bytes at 0 : !ascend_kernel.buffer<"L3">'))


def test_copy_modes_and_the_calibration_path_names() -> None:
    trans = f'ascend_kernel.copy "MTE2" %ga -> %u1, 64 bytes mode "nd2nz" : {GM} -> {UB}'
    module = parse(kernel_text(AFTER='ascend_kernel.wait_flag "V" -> "MTE2", 0\n' + trans))
    (copy,) = [op for op in module.walk() if isinstance(op, CopyOp) and op.mode == "nd2nz"]
    assert copy.path == "GM_TO_UB_TRANS"
    with pytest.raises(VerifyException, match="copy mode 'sideways'"):
        parse(kernel_text(AFTER='ascend_kernel.wait_flag "V" -> "MTE2", 0\n' + trans.replace("nd2nz", "sideways")))


def test_a_copy_writes_no_more_than_its_buffer_holds() -> None:
    """A copy into a core buffer moves at most the buffer's bytes (an epilogue piece of
    more rows than its buffers were allocated for would write past them)."""
    fits = f'ascend_kernel.copy "MTE2" %ga -> %u1, 256 bytes : {GM} -> {UB}'
    parse(kernel_text(SIZE="256", AFTER='ascend_kernel.wait_flag "V" -> "MTE2", 0\n' + fits))
    with pytest.raises(VerifyException, match="writes 288 bytes into a buffer of 256"):
        parse(kernel_text(SIZE="256", AFTER='ascend_kernel.wait_flag "V" -> "MTE2", 0\n' + fits.replace("256 bytes", "288 bytes")))


def test_a_kernel_lives_at_module_level_and_a_launch_needs_its_kernel() -> None:
    with pytest.raises(VerifyException, match="no such ascend_kernel.kernel"):
        parse(kernel_text().replace("launch @add(", "launch @missing("))
    with pytest.raises((VerifyException, ParseError)):
        parse(kernel_text().replace('^bb0(%a: tensor<4x32xf16>, %b: tensor<4x32xf16>):', '^bb0(%a: tensor<4x32xf16>, %b: tensor<4x32xf32>):'))
