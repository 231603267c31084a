"""The op information library: what each op type supports on each SoC, as JSON data.

    from ge.core import opinfo
    library = opinfo.load("Ascend910B1")
    conv = library.op("Conv2D")
    conv.unit, conv.precision_reduce             # "cube", True (the trust list)
    conv.aicore.supports({"x": "float16", "filter": "float16", "y": "float32"})

One file per SoC (`<soc_version>.json`), shaped after CANN's
`aic-<soc>-ops-info.json` and its `impl_mode/*.ini` files:

- `ops.<OpType>.unit`: "cube" or "vector".
- `ops.<OpType>.precision_reduce`: true (trust/white list: mixed precision may
  lower it), false (block list: it keeps float32), absent (gray list: it follows
  the op that produces its input).
- `ops.<OpType>.aicore` and `.aicpu`: one comma-separated dtype list per input and
  output, named as the dialect names the op's operands and results. Entry i of
  every list together is one supported combination (CANN's columns); an optional
  operand that is absent drops out of the match, a variadic one has one dtype for
  all its values. A missing `aicpu` means no AI CPU kernel.
- `ops.<OpType>.impl_modes`: the implementation modes the op offers (the part of
  CANN's all_ops_impl_mode.ini about it).
- `ops.<OpType>.soft_sync`: true when the op's kernel synchronises its blocks across
  cores (GE's soft-sync ops: on a virtual instance, `--virtual_type=1`, it runs on
  one core). MultiHeadAttention and FusedInferAttentionScore are such ops here: their
  phases meet at `sync_all`.
- `impl_mode_lists`: the built-in lists that `--op_select_implmode` selects:
  high_precision and high_performance (small and stable, kept for compatibility)
  and the *_for_all lists (every op offering the mode).

The values are this project's model of the parts, not copied from CANN:

- Cube ops (Conv2D, Conv3D, Conv2DTranspose, Conv3DTranspose, MatMulV2,
  BatchMatMulV2, GEMM, FullyConnection, MultiHeadAttention, FusedInferAttentionScore)
  are on the trust list on every part. They read float16
  everywhere and bfloat16 and float32 on Ascend910B1 only, accumulate in float32
  and write the input dtype or float32; int8 writes int32. Their bias has the
  result's dtype. On AI CPU they compute in one dtype (float16/32/64); for the
  fused MultiHeadAttention that entry stands for its unfused ops there, which is
  where GE would leave a block no AI Core kernel takes (a float32 BERT under
  must_keep_origin_dtype on a part whose cube reads float16 only).
- The block list holds the ops whose float16 results lose most: exponentials and
  logarithms (Exp, Log, Pow, Softplus, Sinh, Cosh, Asinh, Acosh, Atanh), reductions
  that sum or multiply many terms (ReduceMeanD, ReduceSumD, ReduceProdD, Cumsum,
  Cumprod, MatrixDeterminant) and the ops built on them (SoftmaxV2, LogSoftmaxV2,
  LayerNorm, InstanceNorm, RmsNorm, GroupNorm, MVNV2, LpNorm, and the losses NLLLoss
  and SoftmaxCrossEntropyLoss), and the Fourier transforms (DFT, STFT: each bin sums
  the whole signal). Everything else is gray (LRN too: its window sums a few squares
  only).
- Integer ops (FloorMod, Mod, the shifts and bitwise ops, Tril/Triu, Cumsum,
  Cumprod, OneHot) take int8, uint8, int32 and int64 on AI Core, as Add does; int16
  and the wider unsigned types only on AI CPU. MatrixDeterminant has only an AI CPU
  kernel (CANN's is one). Bitcast lists every pair of distinct dtypes of one width:
  it is a view, which launches nothing on either engine.
- AI CPU kernels are templated over the integer types: every AI CPU column of int64
  in the arithmetic, comparison, reduction and data-movement ops also exists for
  uint16, uint32 and uint64 (AI Core has none of them), ReduceMaxD and ReduceMinD
  also reduce bool, and the AI CPU Cast converts between every two of its dtypes
  (float64 and the unsigned types included). NonZero, Compress,
  UniqueWithCountsExt2 and NonMaxSuppressionV6, whose result shapes depend on
  their input values, have AI CPU kernels only, as has TfIdfVectorizer (int32 or
  int64 tokens, float32 counts).
- Quantization (AscendQuant, AscendDequant, AscendRequant) is gray and vector. On
  AI Core it reads and writes int8 and uint8 (AscendDequant also int32, the cube's
  accumulators), on AI CPU the 16-bit integers too. A convolution or matmul whose
  integer product does not fit the int8 cube (ConvInteger, MatMulInteger and the
  QLinear ops with offsets that do not fit, or a computed weight) runs in int32 on
  AI CPU: Conv2D, MatMulV2, BatchMatMulV2 and FullyConnection list int32 there.
- bfloat16 exists only on Ascend910B1. BatchNorm keeps float32 scale, offset,
  mean and variance beside a float16 input, as CANN's BNInfer does.
- Two assumptions give the fallback rules something to act on: on Ascend310, Pow
  and Resize are float16-only on AI Core (float32 on AI CPU); on Ascend910B1,
  Resize has no bfloat16 kernel. Each file's `note` says so.
- Implementation modes: Div, Reciprocal, Rsqrt, Exp, Sigmoid, ReduceMeanD and
  AvgPoolV2 offer high_precision and high_performance; Gelu adds
  super_performance; SoftmaxV2 and LayerNorm add keep_fp16; LogSoftmaxV2 offers
  the two; GatherV2 and GatherElements offer support_out_of_bound_index. The
  compatibility lists hold AvgPoolV2, Gelu, LayerNorm, LogSoftmaxV2 and SoftmaxV2.
  `ge/core/reference.py` says what each mode computes.

Structural ops (Data, Const, NetOutput) belong to GE itself, not to an engine,
and have no entry; nor have the control-flow ops (If, Loop, Scan), which GE's
runtime runs by their bodies' ops, each with its own entry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ge.core.errors import OptionError

_DIR = Path(__file__).resolve().parent

UNITS = ("cube", "vector")
IMPL_MODES = ("high_precision", "high_performance", "super_performance", "keep_fp16", "support_out_of_bound_index")
IMPL_MODE_LISTS = ("high_precision", "high_performance", "high_precision_for_all", "high_performance_for_all")
DTYPE_NAMES = (
    "float16", "float32", "bfloat16", "float64", "int8", "uint8", "int16", "int32", "int64", "uint16", "uint32",
    "uint64", "bool",
)
STRUCTURAL = ("Data", "Const", "NetOutput", "If", "Loop", "Scan")


class OpInfoError(ValueError):
    """An op information file is malformed (a bug in the data, not in a user's input)."""


@dataclass(frozen=True)
class Support:
    """The dtype combinations one engine offers for an op: CANN's columns."""

    params: tuple[str, ...]
    """Input then output names, as the dialect names the op's operands and results."""
    columns: tuple[tuple[str, ...], ...]
    """Each supported combination: one dtype name per param."""

    def supports(self, dtypes: Mapping[str, str]) -> bool:
        """Whether some combination gives every named param its dtype (params not
        named, such as absent optional operands, may have any)."""
        return any(self._fits(column, dtypes) for column in self.columns)

    def matching(self, dtypes: Mapping[str, str]) -> list[dict[str, str]]:
        """The combinations that agree with `dtypes` on every param it names."""
        return [dict(zip(self.params, column)) for column in self.columns if self._fits(column, dtypes)]

    def _fits(self, column: tuple[str, ...], dtypes: Mapping[str, str]) -> bool:
        return all(dtypes[p] == d for p, d in zip(self.params, column) if p in dtypes)

    def dtypes_of(self, param: str) -> tuple[str, ...]:
        """Every dtype a param takes in some combination, in first-seen order."""
        i = self.params.index(param)
        return tuple(dict.fromkeys(column[i] for column in self.columns))


@dataclass(frozen=True)
class OpInfo:
    """What one op type supports on one SoC."""

    op_type: str
    unit: str
    precision_reduce: bool | None
    impl_modes: tuple[str, ...]
    aicore: Support | None
    aicpu: Support | None
    soft_sync: bool = False
    """Its kernel synchronises its blocks across cores through GM (all blocks must be
    resident at once), so on a virtual instance it runs on one core."""

    @property
    def is_cube(self) -> bool:
        return self.unit == "cube"

    @property
    def mix_list(self) -> str:
        """"white", "black" or "gray": the op's place in mixed precision by default."""
        return {True: "white", False: "black", None: "gray"}[self.precision_reduce]


@dataclass(frozen=True)
class OpInfoLibrary:
    """One SoC's op information: every op type, and the built-in impl-mode lists."""

    soc_version: str
    ops: Mapping[str, OpInfo]
    impl_mode_lists: Mapping[str, Mapping[str, str]]
    note: str = ""

    def op(self, op_type: str) -> OpInfo:
        if op_type not in self.ops:
            raise OptionError(f"op type '{op_type}' is not in the op information library of {self.soc_version}")
        return self.ops[op_type]

    @property
    def has_bfloat16(self) -> bool:
        """Whether any AI Core kernel of this SoC computes in bfloat16."""
        return any(
            "bfloat16" in column for info in self.ops.values() if info.aicore for column in info.aicore.columns
        )

    def offering(self, mode: str) -> tuple[str, ...]:
        """The op types that offer implementation mode `mode`, sorted."""
        return tuple(sorted(t for t, info in self.ops.items() if mode in info.impl_modes))


def names() -> tuple[str, ...]:
    """The SoC versions with an op information file, sorted."""
    return tuple(sorted(p.stem for p in _DIR.glob("*.json")))


@cache
def load(soc_version: str) -> OpInfoLibrary:
    """The op information of `soc_version` (as `--soc_version` spells it)."""
    if soc_version not in names():
        raise OptionError(f"no op information for soc_version '{soc_version}'; known: {', '.join(names())}")
    path = _DIR / f"{soc_version}.json"
    return parse(json.loads(path.read_text()), str(path))


def parse(doc: Mapping, where: str = "<op info>") -> OpInfoLibrary:
    """An `OpInfoLibrary` from a document shaped like the JSON files (tests build
    small ones to exercise rules no real part needs)."""
    ops = {op_type: _op(op_type, entry, where) for op_type, entry in doc["ops"].items()}
    lists = {name: dict(doc.get("impl_mode_lists", {}).get(name, {})) for name in IMPL_MODE_LISTS}
    for name, entries in lists.items():
        for op_type, mode in entries.items():
            if op_type not in ops or mode not in ops[op_type].impl_modes:
                raise OpInfoError(f"{where}: impl_mode_lists.{name} gives {op_type} the mode {mode}, which it does not offer")
    return OpInfoLibrary(doc["soc_version"], ops, lists, doc.get("note", ""))


def _op(op_type: str, entry: Mapping, where: str) -> OpInfo:
    here = f"{where}: ops.{op_type}"
    if entry.get("unit") not in UNITS:
        raise OpInfoError(f"{here}.unit is {entry.get('unit')!r}; use {' or '.join(UNITS)}")
    reduce = entry.get("precision_reduce")
    if reduce not in (True, False, None):
        raise OpInfoError(f"{here}.precision_reduce is {reduce!r}; use true, false or leave it out")
    soft_sync = entry.get("soft_sync", False)
    if not isinstance(soft_sync, bool):
        raise OpInfoError(f"{here}.soft_sync is {soft_sync!r}; use true, false or leave it out")
    modes = tuple(entry.get("impl_modes", ()))
    for mode in modes:
        if mode not in IMPL_MODES:
            raise OpInfoError(f"{here}.impl_modes has {mode!r}; known: {', '.join(IMPL_MODES)}")
    return OpInfo(
        op_type,
        entry["unit"],
        reduce,
        modes,
        _support(entry.get("aicore"), f"{here}.aicore"),
        _support(entry.get("aicpu"), f"{here}.aicpu"),
        soft_sync,
    )


def _support(params: Mapping[str, str] | None, here: str) -> Support | None:
    if params is None:
        return None
    lists = {name: [d.strip() for d in spec.split(",")] for name, spec in params.items()}
    lengths = {len(v) for v in lists.values()}
    if len(lengths) != 1:
        raise OpInfoError(f"{here}: the dtype lists have different lengths {sorted(lengths)}")
    for name, dtypes in lists.items():
        for d in dtypes:
            if d not in DTYPE_NAMES:
                raise OpInfoError(f"{here}.{name}: unknown dtype {d!r}; known: {', '.join(DTYPE_NAMES)}")
    names_ = tuple(lists)
    return Support(names_, tuple(zip(*(lists[n] for n in names_))))
