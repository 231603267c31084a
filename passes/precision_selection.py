"""Precision selection: each op's dtype, engine and implementation mode.

GE runs it in "optimize original graph", after graph fusion and before format
selection, so tensors are in their origin formats (dump `AfterPrecision`). For
each op, in topological order, it picks the dtypes of its inputs and outputs by
the rules below, checks them against the op information of the SoC
(`ge/core/opinfo`) and falls back to AI CPU where AI Core has no kernel; then it makes
the graph agree: a constant is converted in the weight store, any other value
gets one Cast per dtype it is needed in, and graph inputs and outputs keep their
dtypes. Cast pairs that cancel are removed at the end.

The bodies of If, Loop and Scan are selected as graphs of their own: the op passes
its operands to them and takes their yields in the dtypes it has (like graph
inputs and outputs), so Casts go inside a body where its ops compute otherwise.

Each op records why in the discardable attribute `_precision_reason` (the rule,
or the file and line, that decided), its engine in `_engine = "DNN_VM_AICPU"`
(absent: AI Core), and its implementation mode in `impl_mode`. An op reading a
data-dependent result (NonZero's, Unique's, ..., or that of an op reading one: its
shape is known only when the producer has run, and AI Core kernels are built for
static shapes) runs on the AI CPU in its own dtypes, as GE places such ops; so does a
Cast of one. An op with GE's
`keep_dtype = true` keeps its dtype; the keep_dtype file sets that attribute on
the ops it names. So does an op reading a 32- or 64-bit integer converted to float
(the int32 sums of an integer product before their scales): float16 cannot hold them. A cube op whose result is wider than its inputs carries the
`dtype` property (float16 in, float32 out).

A float constant converted to float16 or bfloat16 saturates: a finite value beyond the
new dtype's range becomes its largest finite value (±65504 in float16), never ±inf
(which only an infinite value stays). Models write "minus infinity" as a finite
number, `torch.finfo(torch.float32).min` for a masked attention score: as inf, a mask
multiplied by it makes 0 * -inf = NaN. Each such constant records the values it
saturated in `_saturated` (count) and `_saturated_worst` (the value furthest out),
and is listed in `PrecisionSummary.saturated` and by `ge precision-report`.

The precision_mode policies, for an op whose original float dtype is `o`
(precision_mode_v2 values map onto them, see `ge/core/precision_files.py`):

- must_keep_origin_dtype: `o`. Where AI Core lacks it: float16 runs in float32
  if AI Core has float32, else on AI CPU in float16; float32 runs on AI CPU;
  bfloat16 like float16; no kernel anywhere is an error.
- force_fp16: float16 where AI Core has it, else `o`. force_lowerprecision: the
  same, but a bfloat16 op stays bfloat16 and an op without float16 takes
  bfloat16 (our reading: "lower precision" means either 16-bit type, float16
  first).
- allow_fp32_to_fp16 / allow_fp32_to_bf16: cube ops of float32 compute in the
  16-bit type; vector ops keep float32 where AI Core has it, else the 16-bit type.
- cube_fp16in_fp32out and force_fp32 (the same policy): cube ops take float16 in
  and float32 out, else float32 in and out, else float16 in and out, else the
  compile fails; vector ops compute in float32 where AI Core has it; a block-list
  op without it goes to AI CPU in float32; another keeps 16 bits.
- allow_mix_precision(_fp16) / allow_mix_precision_bf16: float32 ops on the trust
  list compute in the 16-bit type, those on the block list keep float32, and a
  gray op computes in 16 bits when every input it reads from another op (not a
  constant) arrives in 16 bits from a lowered op; graph inputs count as float32.
  modify_mixlist moves op types between the lists. Our reading: mixed precision
  lowers float32 only, it never raises a 16-bit op.

Per op, these win over the policy, first first: customize_dtypes by node name,
then by op type (the dtypes exactly as given, or the compile fails; ignored under
must_keep_origin_dtype), then keep_dtype by name or type (must_keep_origin_dtype
for that op). Implementation modes: op_precision_mode by node name, then by op
type; without an op_precision_mode file, op_select_implmode's built-in list (or
optypelist_for_implmode's types). An op gets a mode only if it offers it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache

import ml_dtypes
import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import (
    BoolAttr,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    TensorType,
    f64,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass

from dialects import ascend_graph as ag
from dialects.shapes import is_static
from ge.core import dtypes, opinfo
from ge.core.errors import ModelError, OptionError
from ge.core.opinfo import OpInfo, OpInfoLibrary, Support
from ge.core.options import AICPU_ENGINE, check_fields, option_field
from ge.core.precision_files import BF16_MODES, DtypeRule, PrecisionSettings, settings_of
from ge.core.reference import const_value
from ge.core.weights import derived, store_of

log = logging.getLogger("ge")

F16, F32, BF16, F64 = "float16", "float32", "bfloat16", "float64"
AICORE, AICPU = "AI Core", "AI CPU"
"""GE's name of the AI CPU engine: the value of `_engine` on an op that runs there."""
REASON = "_precision_reason"
SATURATED = "_saturated"
SATURATED_WORST = "_saturated_worst"
ENGINE = "_engine"
IMPL_MODE = "impl_mode"
KEEP_DTYPE = "keep_dtype"
BOUNDARY = "dtype boundary"
"""The reason of every Cast the pass inserts."""

_LOSSLESS: dict[str, frozenset[str]] = {
    "bool": frozenset({"int8", "uint8", "int16", "int32", "int64", F16, BF16, F32, F64}),
    "int8": frozenset({"int16", "int32", "int64", F16, BF16, F32, F64}),
    "uint8": frozenset({"int16", "int32", "int64", F16, BF16, F32, F64}),
    "int16": frozenset({"int32", "int64", F32, F64}),
    "int32": frozenset({"int64", F64}),
    F16: frozenset({F32, F64}),
    BF16: frozenset({F32, F64}),
    F32: frozenset({F64}),
}
"""src -> the dtypes that hold every src value exactly: a Cast A -> B -> C with B in
_LOSSLESS[A] is the Cast A -> C."""


@cache
def _name(dtype: Attribute) -> str:
    """The dtype's name, remembered: asked for every slot of every op, it goes through numpy."""
    return dtypes.name(dtype)


def _attr(name: str) -> Attribute:
    return dtypes.from_numpy(np.dtype(ml_dtypes.bfloat16) if name == BF16 else np.dtype(name))


def _is_float(name: str) -> bool:
    return name in (F16, F32, BF16, F64)


# ------------------------------------------------------------------------- the pass


@dataclass(frozen=True)
class PrecisionSelection(ModulePass):
    """Choose each op's dtype, engine and implementation mode (precision_mode and its files)."""

    name = "precision-selection"

    soc_version: str = option_field("soc_version")
    precision_mode: str | None = option_field("precision_mode")
    precision_mode_v2: str | None = option_field("precision_mode_v2")
    modify_mixlist: str | None = option_field("modify_mixlist")
    keep_dtype: str | None = option_field("keep_dtype")
    customize_dtypes: str | None = option_field("customize_dtypes")
    op_precision_mode: str | None = option_field("op_precision_mode")
    op_select_implmode: str | None = option_field("op_select_implmode")
    optypelist_for_implmode: str | None = option_field("optypelist_for_implmode")

    def settings(self) -> PrecisionSettings:
        check_fields(self)
        return settings_of(self)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        select_precision(op, opinfo.load(self.soc_version), self.settings())


@dataclass
class PrecisionSummary:
    """What one run changed, for logs and tests."""

    casts_inserted: int = 0
    casts_removed: int = 0
    weights_converted: int = 0
    aicpu_ops: list[str] = field(default_factory=list)
    saturated: list[Saturation] = field(default_factory=list)


@dataclass(frozen=True)
class Saturation:
    """A constant whose finite values beyond a 16-bit dtype's range were saturated."""

    name: str
    """The constant's name (the converted one's is this with `_<dtype>` appended)."""
    dtype: str
    count: int
    worst: float
    """The original value furthest out of range (its sign kept)."""

    @classmethod
    def of(cls, const: ag.ConstOp) -> Saturation | None:
        """What a converted constant records of its saturation, if it saturated."""
        count, worst = const.attributes.get(SATURATED), const.attributes.get(SATURATED_WORST)
        if not isinstance(count, IntegerAttr) or not isinstance(worst, FloatAttr):
            return None
        dtype = _name(ag.dtype_of(const.out.type))
        return cls(const.label.removesuffix(f"_{dtype}"), dtype, count.value.data, worst.value.data)


def select_precision(module: ModuleOp, library: OpInfoLibrary, settings: PrecisionSettings) -> PrecisionSummary:
    """Choose dtypes, engines and implementation modes for every graph of `module`, in place."""
    _check_against_library(library, settings)
    summary = PrecisionSummary()
    for graph in [op for op in module.ops if isinstance(op, ag.GraphOp)]:
        _Selector(module, graph.body.block, library, settings, summary).run()
    module.verify()
    return summary


def _check_against_library(library: OpInfoLibrary, settings: PrecisionSettings) -> None:
    """Fail early on options that name what this SoC lacks; warn on options without effect."""
    if settings.policy in BF16_MODES and not library.has_bfloat16:
        raise OptionError(
            f"{settings.spelled} needs bfloat16, which {library.soc_version} does not have; "
            "use Ascend910B1, or a float16 mode"
        )
    if settings.mixlist is not None and not settings.mixed:
        log.warning("modify_mixlist has no effect under %s: it only changes mixed precision", settings.spelled)
    if settings.mixlist is not None:
        for op_type, source in settings.mixlist.sources.items():
            if op_type not in library.ops:
                log.warning("%s: op type '%s' is not in the op information of %s; the entry has no effect", source, op_type, library.soc_version)
    if settings.customize_dtypes is not None and settings.policy == "must_keep_origin_dtype":
        log.warning("customize_dtypes has no effect under %s", settings.spelled)
    sources = [*(settings.keep_dtype.op_types.items() if settings.keep_dtype else ())]
    if settings.customize_dtypes:
        sources += [(op_type, rule.source) for op_type, rule in settings.customize_dtypes.op_types.items()]
    for op_type, source in sources:
        if op_type not in library.ops:
            raise OptionError(f"{source}: unknown op type '{op_type}' for {library.soc_version}")
    ini = settings.op_precision_mode
    if ini is not None:
        if settings.op_select_implmode_given or settings.optypelist_for_implmode:
            log.warning("op_select_implmode and optypelist_for_implmode are ignored: op_precision_mode takes precedence")
        for op_type, rule in ini.op_types.items():
            _check_mode(library, op_type, rule.mode, str(rule.source))
        return
    for op_type in settings.optypelist_for_implmode:
        _check_mode(library, op_type, settings.op_select_implmode, "optypelist_for_implmode")


def _check_mode(library: OpInfoLibrary, op_type: str, mode: str, where: str) -> None:
    if op_type not in library.ops:
        raise OptionError(f"{where}: unknown op type '{op_type}' for {library.soc_version}")
    offered = library.ops[op_type].impl_modes
    if mode not in offered:
        raise OptionError(
            f"{where}: {op_type} has no implementation mode {mode} on {library.soc_version}; "
            f"it offers {', '.join(offered) or 'none'} (ops offering {mode}: {', '.join(library.offering(mode)) or 'none'})"
        )


# ---------------------------------------------------------------------- one op's slots


@dataclass(frozen=True)
class Slot:
    """One present operand or result of an op: its op-info param name and value."""

    param: str
    value: SSAValue
    is_input: bool


def _slots(op: Operation) -> list[Slot]:
    """The op's operands and results named as the dialect (and the op info) names them."""
    definition = type(op).get_irdl_definition()
    slots: list[Slot] = []
    for defs, is_input in ((definition.operands, True), (definition.results, False)):
        for name, _ in defs:
            got = getattr(op, name)
            for value in (() if got is None else (got,) if isinstance(got, SSAValue) else got):
                slots.append(Slot(name, value, is_input))
    return slots


@dataclass(frozen=True)
class Candidate:
    """A dtype for the op's key (first float input, first float output) on one engine."""

    key_in: str | None
    key_out: str | None
    engine: str
    note: str = ""


@dataclass(frozen=True)
class Choice:
    dtypes: dict[str, str]
    """Param -> dtype; a variadic param's values share one."""
    engine: str
    reason: str


Engines = tuple[tuple[str, Support | None], ...]
"""The engines an op may run on, first first, with the op's support on each."""


def _reads(value: SSAValue) -> str:
    """Why an op reading the data-dependent `value` runs on the AI CPU."""
    producer = value.owner
    assert isinstance(producer, ag.AscendOp)
    return f"reads the data-dependent result of {producer.OP_TYPE} '{producer.label}': AI CPU"


# ----------------------------------------------------------------------- the selector


class _Selector:
    """One graph's selection: walks its ops in order, remembering each value's
    original dtype, the values lowered to 16 bits (for gray ops to follow), and the
    Casts and converted constants made, so that each is made once."""

    def __init__(
        self, module: ModuleOp, block: Block, library: OpInfoLibrary, settings: PrecisionSettings, summary: PrecisionSummary,
        nested: bool = False,
    ):
        self.module = module
        self.block = block
        self.library = library
        self.settings = settings
        self.summary = summary
        self.converted: dict[tuple[SSAValue, str], SSAValue] = {}
        self.reduced: set[SSAValue] = set()
        self.original: dict[SSAValue, str] = {}
        self.names: set[str] = set()
        self.replaced_consts: list[ag.ConstOp] = []
        self.nested = nested
        """A body of a control-flow op: its names are the enclosing graph's to check."""
        self.dependent: set[SSAValue] = set()
        """The data-dependent values made so far: a data-dependent op's dynamic results,
        and those of the ops (and Casts) reading one."""

    def run(self) -> None:
        ops = list(self.block.ops)
        for op in ops:
            for r in op.results:
                self.original[r] = _name(ag.dtype_of(r.type))
        for op in self.block.walk():
            if isinstance(op, ag.AscendOp) and op.node_name is not None:
                self.names.add(op.node_name.data)
        if not self.nested:
            self._warn_unknown_names()
        for op in ops:
            if isinstance(op, ag.DataOp | ag.ConstOp):
                continue
            if isinstance(op, ag.NetOutputOp | ag.YieldOp):
                self._restore_outputs(op)
                continue
            if isinstance(op, ag.ControlFlowOp):
                # Like GE's If and While, the op runs no kernel: it passes its values to
                # its bodies in their dtypes, and each body is selected as a graph of its own.
                self._restore_outputs(op)
                for body in op.regions:
                    _Selector(self.module, body.block, self.library, self.settings, self.summary, nested=True).run()
                continue
            if not isinstance(op, ag.AscendOp):
                continue
            if isinstance(op, ag.CastOp):
                self._model_cast(op)
                continue
            self._set_impl_mode(self._select(op))
        self._remove_cancelling_casts()
        for const in self.replaced_consts:
            if not const.out.uses:
                self.block.erase_op(const)

    # ------------------------------------------------------------------ dtype choice

    def _select(self, op: ag.AscendOp) -> ag.AscendOp:
        info = self.library.ops.get(op.OP_TYPE)
        if info is None:
            raise ModelError(
                f"{op.OP_TYPE} '{op.label}': op type {op.OP_TYPE} is not in the op information of {self.library.soc_version}"
            )
        slots = _slots(op)
        original = {s.param: self._original_dtype(s) for s in slots}
        floats_in = [s for s in slots if s.is_input and _is_float(original[s.param])]
        floats_out = [s for s in slots if not s.is_input and _is_float(original[s.param])]
        custom = self._customized(op)
        read = next((v for v in op.operands if v in self.dependent), None)
        engines = ((AICPU, info.aicpu),) if read is not None else ((AICORE, info.aicore), (AICPU, info.aicpu))
        if custom is not None or (not floats_in and not floats_out):
            choice = self._custom_choice(op, info, slots, custom, engines) if custom else self._fixed_choice(op, info, slots, engines)
            if read is not None:
                choice = Choice(choice.dtypes, choice.engine, "; ".join(r for r in (choice.reason, _reads(read)) if r))
        else:
            key_in = original[floats_in[0].param] if floats_in else None
            key_out = original[floats_out[0].param] if floats_out else None
            if read is None:
                candidates, reason = self._candidates(op, info, key_in, key_out)
            else:  # its own dtypes, where the AI CPU has them
                no_kernel = "no AI CPU kernel for its dtypes, computed in float32"
                candidates, reason = [Candidate(key_in, key_out, AICPU), self._same(key_in, key_out, F32, AICPU, no_kernel)], _reads(read)
            keys = (floats_in[0].param if floats_in else None, floats_out[0].param if floats_out else None)
            choice = self._first_supported(op, info, slots, keys, candidates, reason)
        new = self._apply(op, slots, choice)
        if floats_out and self._lowers(original[floats_out[0].param], choice.dtypes[floats_out[0].param]):
            self.reduced.update(new.results)
        if read is not None or isinstance(new, ag.DataDependentOp):
            self.dependent.update(r for r in new.results if not is_static(ag.shape_of(r.type)))
        return new

    def _original_dtype(self, slot: Slot) -> str:
        if slot.is_input:
            return self.original.get(slot.value, _name(ag.dtype_of(slot.value.type)))
        return self.original[slot.value]

    @staticmethod
    def _lowers(before: str, after: str) -> bool:
        return before in (F32, F64) and after in (F16, BF16)

    def _candidates(
        self, op: ag.AscendOp, info: OpInfo, key_in: str | None, key_out: str | None
    ) -> tuple[list[Candidate], str]:
        """The dtypes to try for the op, best first, and the rule that chose them."""
        keep = self._kept(op) or self._reads_integer_sums(op)
        if keep is not None:
            return self._keep_origin(key_in, key_out), keep
        policy, reason = self.settings.policy, self.settings.spelled
        o = key_in or key_out
        assert o is not None
        if policy == "must_keep_origin_dtype":
            return self._keep_origin(key_in, key_out), reason
        if policy in ("force_fp16", "force_lowerprecision"):
            lows = [F16, BF16] if policy == "force_lowerprecision" else [F16]
            if policy == "force_lowerprecision" and o == BF16:
                lows = [BF16, F16]
            tries = [self._same(key_in, key_out, t, AICORE) for t in lows]
            return tries + self._keep_origin(key_in, key_out, note=f"AI Core has no {lows[0]} kernel"), reason
        if policy in ("allow_fp32_to_fp16", "allow_fp32_to_bf16"):
            low = F16 if policy == "allow_fp32_to_fp16" else BF16
            if o != F32:
                return self._keep_origin(key_in, key_out), reason
            if info.is_cube:
                return [self._same(key_in, key_out, low, AICORE)] + self._keep_origin(key_in, key_out, note=f"AI Core has no {low} kernel"), reason
            return [
                self._same(key_in, key_out, F32, AICORE),
                self._same(key_in, key_out, low, AICORE, f"AI Core has no float32 kernel, lowered to {low}"),
                self._same(key_in, key_out, F32, AICPU, "AI Core has neither float32 nor the 16-bit type"),
            ], reason
        if policy in ("cube_fp16in_fp32out", "force_fp32"):
            return self._fp32_candidates(info, key_in, key_out), reason
        return self._mixed_candidates(op, info, key_in, key_out)

    @staticmethod
    def _same(key_in: str | None, key_out: str | None, dtype: str, engine: str, note: str = "") -> Candidate:
        return Candidate(dtype if key_in else None, dtype if key_out else None, engine, note)

    def _keep_origin(self, key_in: str | None, key_out: str | None, note: str = "") -> list[Candidate]:
        """must_keep_origin_dtype's order: the original, then CANN's fallbacks."""
        o = key_in or key_out
        assert o is not None
        first = [Candidate(key_in, key_out, AICORE, note)]
        lacks = f"AI Core has no {o} kernel"
        if o in (F16, BF16):
            return first + [
                self._same(key_in, key_out, F32, AICORE, f"{lacks}, computed in float32"),
                Candidate(key_in, key_out, AICPU, f"{lacks}: AI CPU"),
            ]
        return first + [Candidate(key_in, key_out, AICPU, f"{lacks}: AI CPU")]

    def _fp32_candidates(self, info: OpInfo, key_in: str | None, key_out: str | None) -> list[Candidate]:
        if info.is_cube:
            return [
                Candidate(F16 if key_in else None, F32 if key_out else None, AICORE),
                self._same(key_in, key_out, F32, AICORE, "no float16-in float32-out kernel"),
                self._same(key_in, key_out, F16, AICORE, "no float16-in float32-out nor float32 kernel"),
            ]
        o = key_in or key_out
        tries = [self._same(key_in, key_out, F32, AICORE)]
        if info.precision_reduce is False:
            tries.append(self._same(key_in, key_out, F32, AICPU, "AI Core has no float32 kernel; block list: AI CPU"))
        low = [o] if o in (F16, BF16) else [F16, BF16]
        tries += [self._same(key_in, key_out, t, AICORE, f"AI Core has no float32 kernel, keeps {t}") for t in low]
        tries.append(self._same(key_in, key_out, F32, AICPU, "no AI Core kernel: AI CPU"))
        return tries

    def _mixed_candidates(
        self, op: ag.AscendOp, info: OpInfo, key_in: str | None, key_out: str | None
    ) -> tuple[list[Candidate], str]:
        low = BF16 if self.settings.policy == "allow_mix_precision_bf16" else F16
        spelled = self.settings.spelled
        place = info.mix_list
        reason = f"{spelled}: {place} list"
        mixlist = self.settings.mixlist
        if mixlist is not None and mixlist.place(op.OP_TYPE, place) != place:
            place = mixlist.place(op.OP_TYPE, place)
            reason = f"{mixlist.sources[op.OP_TYPE]}: {place} list"
        o = key_in or key_out
        keep = self._keep_origin(key_in, key_out)
        if o != F32 or place == "black":
            return keep, reason
        if place == "gray" and not self._follows_lowered(op):
            return keep, f"{reason}, follows its float32 inputs"
        if place == "gray":
            reason = f"{reason}, follows its {low} inputs"
        return [self._same(key_in, key_out, low, AICORE)] + self._keep_origin(
            key_in, key_out, note=f"AI Core has no {low} kernel"
        ), reason

    def _follows_lowered(self, op: ag.AscendOp) -> bool:
        """A gray op follows its producers: every float input that is not a constant
        arrives lowered (graph inputs count as not lowered)."""
        computed = [
            v
            for v in op.operands
            if _is_float(_name(ag.dtype_of(v.type))) and not isinstance(v.owner, ag.ConstOp)
        ]
        return bool(computed) and all(v in self.reduced for v in computed)

    def _first_supported(
        self,
        op: ag.AscendOp,
        info: OpInfo,
        slots: list[Slot],
        keys: tuple[str | None, str | None],
        candidates: list[Candidate],
        reason: str,
    ) -> Choice:
        """The first candidate some kernel offers; `keys` are the params it names
        (the first float input and output)."""
        tried: list[str] = []
        for c in candidates:
            support = info.aicore if c.engine == AICORE else info.aicpu
            want = {p: d for p, d in zip(keys, (c.key_in, c.key_out)) if p is not None and d is not None}
            column = self._best_column(support, slots, want)
            tried.append(f"{_signature(c.key_in, c.key_out)} on {c.engine}")
            if column is None:
                continue
            why = f"{reason}; {c.note}" if c.note else reason
            return Choice(column, c.engine, why)
        raise ModelError(
            f"{op.OP_TYPE} '{op.label}': no kernel on {self.library.soc_version} for what {reason} allows "
            f"(tried {', '.join(dict.fromkeys(tried))})"
        )

    @staticmethod
    def _best_column(support: Support | None, slots: list[Slot], want: dict[str, str]) -> dict[str, str] | None:
        """The combination giving the key params their dtypes and non-float params
        theirs, changing the fewest other params."""
        if support is None:
            return None
        present = {s.param for s in slots}
        fixed = {s.param: _name(ag.dtype_of(s.value.type)) for s in slots if not _is_float(_name(ag.dtype_of(s.value.type)))}
        matches = [
            {p: d for p, d in column.items() if p in present}
            for column in support.matching({**fixed, **want})
        ]
        if not matches:
            return None
        current = {s.param: _name(ag.dtype_of(s.value.type)) for s in slots}
        return min(matches, key=lambda m: sum(m[p] != current[p] for p in m))

    def _fixed_choice(self, op: ag.AscendOp, info: OpInfo, slots: list[Slot], engines: Engines) -> Choice:
        """An op without float values keeps its dtypes; only its engine is chosen."""
        current = {s.param: _name(ag.dtype_of(s.value.type)) for s in slots}
        for engine, support in engines:
            if support is not None and support.supports(current):
                return Choice(current, engine, "")
        raise ModelError(
            f"{op.OP_TYPE} '{op.label}': no kernel on {self.library.soc_version} for "
            f"{', '.join(f'{p} {d}' for p, d in current.items())}"
        )

    # ------------------------------------------------------------- per-op overrides

    def _kept(self, op: ag.AscendOp) -> str | None:
        """Why the op keeps its dtype: GE's `keep_dtype` attribute on it, or the
        keep_dtype file's line naming it or its op type (which sets the attribute)."""
        if op.attributes.get(KEEP_DTYPE) == BoolAttr.from_bool(True):
            return "keep_dtype attribute"
        keep = self.settings.keep_dtype
        if keep is None:
            return None
        source = keep.names.get(op.label) if op.node_name is not None else None
        source = source or keep.op_types.get(op.OP_TYPE)
        if source is None:
            return None
        op.attributes[KEEP_DTYPE] = BoolAttr.from_bool(True)
        return str(source)

    @staticmethod
    def _reads_integer_sums(op: ag.AscendOp) -> str | None:
        """Why an op keeps its dtype: it reads a 32- or 64-bit integer converted to float,
        the int32 sums of an integer product on their way to being scaled back
        (MatMulInteger, Cast, Mul by the scales: onnxruntime's dynamic quantization),
        whose values float16 cannot hold."""
        for value in op.operands:
            cast = value.owner
            if not isinstance(cast, ag.CastOp):
                continue
            source = ag.dtype_of(cast.x.type)
            if isinstance(source, IntegerType) and source.width.data >= 32:
                return f"reads {dtypes.name(source)} converted to float ('{cast.label}'), beyond float16's range"
        return None

    def _customized(self, op: ag.AscendOp) -> DtypeRule | None:
        """The op's customize_dtypes rule: by node name, else by op type."""
        custom = self.settings.customize_dtypes
        if custom is None or self.settings.policy == "must_keep_origin_dtype":
            return None
        rule = custom.names.get(op.label) if op.node_name is not None else None
        return rule or custom.op_types.get(op.OP_TYPE)

    def _custom_choice(self, op: ag.AscendOp, info: OpInfo, slots: list[Slot], rule: DtypeRule, engines: Engines) -> Choice:
        """Exactly the dtypes the rule gives, on AI Core or else AI CPU, or the compile fails."""
        source = str(rule.source)
        want: dict[str, str] = {}
        for is_input, given in ((True, rule.inputs), (False, rule.outputs)):
            if given is None:
                continue
            mine = [s for s in slots if s.is_input == is_input]
            kind = "input" if is_input else "output"
            if len(given) != len(mine):
                raise OptionError(
                    f"{source}: {op.OP_TYPE} '{op.label}' has {len(mine)} {kind}s "
                    f"({', '.join(s.param for s in mine)}), but {len(given)} {kind} dtypes are given"
                )
            for s, d in zip(mine, given):
                if s.param in want and want[s.param] != d:
                    raise OptionError(f"{source}: the {kind}s of '{s.param}' of {op.OP_TYPE} '{op.label}' need one dtype, not {want[s.param]} and {d}")
                want[s.param] = d
        for engine, support in engines:
            column = self._best_column(support, slots, want) if support is not None else None
            if column is not None and all(column[p] == d for p, d in want.items()):
                note = "" if engine == AICORE or len(engines) == 1 else "; AI Core has no kernel for these dtypes: AI CPU"
                return Choice(column, engine, f"{source}{note}")
        offered = []
        for engine, support in ((AICORE, info.aicore), (AICPU, info.aicpu)):
            if support is not None:
                combos = ["(" + ", ".join(f"{p} {d}" for p, d in zip(support.params, c)) + ")" for c in support.columns]
                offered.append(f"{engine}: {'; '.join(combos)}")
        raise OptionError(
            f"{source}: {op.OP_TYPE} '{op.label}' has no kernel for "
            f"{', '.join(f'{p} {d}' for p, d in want.items())} on {self.library.soc_version}; "
            f"supported: {' | '.join(offered)}"
        )

    # ------------------------------------------------------------------- rewriting

    def _apply(self, op: ag.AscendOp, slots: list[Slot], choice: Choice) -> ag.AscendOp:
        """Give the op the chosen dtypes: convert its operands and rebuild it if its
        operands or results change."""
        operands = [self._as(s.value, choice.dtypes[s.param]) if s.is_input else None for s in slots]
        operands = [v for v in operands if v is not None]
        props = dict(op.properties)
        result_slots = [s for s in slots if not s.is_input]
        if isinstance(op, ag.CubeOp) and slots[0].is_input and result_slots:
            read, written = choice.dtypes[slots[0].param], choice.dtypes[result_slots[0].param]
            if _is_float(read) and _is_float(written) and read != written:
                props["dtype"] = _attr(written)
            elif _is_float(read):
                props.pop("dtype", None)
        try:
            inferred = type(op).infer_result_types([v.type for v in operands], ag.Props(props))
        except ValueError as e:
            raise ModelError(f"{op.OP_TYPE} '{op.label}': the chosen dtypes {choice.dtypes} do not fit the op: {e}") from e
        for s, t in zip(result_slots, inferred):
            if _name(ag.dtype_of(t)) != choice.dtypes[s.param]:
                raise ModelError(
                    f"{op.OP_TYPE} '{op.label}': the op information of {self.library.soc_version} allows "
                    f"{s.param} {choice.dtypes[s.param]}, but the op computes {_name(ag.dtype_of(t))}"
                )
        unchanged = list(op.operands) == operands and [r.type for r in op.results] == list(inferred) and props == dict(op.properties)
        new = op if unchanged else self._rebuild(op, operands, inferred, props)
        if choice.reason:
            new.attributes[REASON] = StringAttr(choice.reason)
        if choice.engine == AICPU:
            new.attributes[ENGINE] = StringAttr(AICPU_ENGINE)
            self.summary.aicpu_ops.append(new.label)
        else:
            new.attributes.pop(ENGINE, None)
        return new

    def _rebuild(self, op: ag.AscendOp, operands: list[SSAValue], types: Sequence[Attribute], props: dict) -> ag.AscendOp:
        new = type(op).create(
            operands=operands,
            result_types=list(types),
            properties=props,
            attributes=dict(op.attributes),
        )
        self.block.insert_op_before(new, op)
        for old, r in zip(op.results, new.results):
            r.name_hint = old.name_hint
            old.replace_all_uses_with(r)
            if old in self.original:
                self.original[r] = self.original[old]
        self.block.erase_op(op)
        return new

    def _as(self, value: SSAValue, dtype: str) -> SSAValue:
        """`value` in `dtype`: itself, a converted constant, or one shared Cast."""
        if _name(ag.dtype_of(value.type)) == dtype:
            return value
        key = (value, dtype)
        if key in self.converted:
            return self.converted[key]
        owner = value.owner
        if isinstance(owner, ag.ConstOp):
            new = self._converted_const(owner, dtype)
            self.replaced_consts.append(owner)
            self.summary.weights_converted += 1
        else:
            new = ag.CastOp([value], {"dst_type": _attr(dtype)}, f"{_label(value)}_cast_{dtype}")
            new.attributes[REASON] = StringAttr(BOUNDARY)
            self.summary.casts_inserted += 1
        if isinstance(owner, Operation):
            self.block.insert_op_after(new, owner)
        else:  # an argument of a control-flow body, whose block ends with its yield
            self.block.insert_op_before(new, self.block.first_op)  # type: ignore[arg-type]
        if isinstance(new, ag.CastOp):
            self._keep_cast(new)
        self.converted[key] = new.results[0]
        return new.results[0]

    def _converted_const(self, const: ag.ConstOp, dtype: str) -> ag.ConstOp:
        """The constant in `dtype`, converted now rather than cast at run time: a weight
        gets a new entry in the store, an inline value a new inline value."""
        store = store_of(self.module)
        t = const.out.type
        assert isinstance(t, TensorType)
        new_type = ag.tensor(_attr(dtype), t.get_shape())

        def converted() -> tuple[Attribute, tuple[int, float] | None]:
            array, saturated = _saturated(const_value(const, store), _attr_numpy(dtype))
            if isinstance(const.value, ag.WeightRefAttr):
                return store.add(f"{const.value.weight.data}_{dtype}", array), saturated
            data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
            return DenseIntOrFPElementsAttr(new_type, BytesAttr(data)), saturated

        value, saturated = derived(("dtype", store.key, const.value, t, dtype), converted)
        new = ag.ConstOp(value, new_type, f"{const.label}_{dtype}")
        new.attributes[REASON] = StringAttr(f"{BOUNDARY}: converted in the weight store")
        if saturated is not None:
            count, worst = saturated
            new.attributes[SATURATED] = IntegerAttr(count, i64)
            new.attributes[SATURATED_WORST] = FloatAttr(worst, f64)
            self.summary.saturated.append(Saturation(const.label, dtype, count, worst))
            log.info("constant '%s': %d values beyond %s's range saturated to its largest finite value (worst %g)", const.label, count, dtype, worst)
        return new

    def _restore_outputs(self, out: Operation) -> None:
        """Graph outputs keep the dtypes the model declares; so do the values a
        control-flow op passes to its bodies and the values a body yields."""
        operands = [self._as(v, self.original.get(v, _name(ag.dtype_of(v.type)))) for v in out.operands]
        if operands != list(out.operands):
            out.operands = operands

    def _cast_engine(self, src: str, dst: str, aicpu_only: bool = False) -> str | None:
        """The engine with a kernel converting src to dst (AI Core first), or None."""
        info = self.library.ops.get("Cast")
        if src == dst or info is None:
            return AICORE  # an identity Cast is removed at the end
        for engine, support in ((AICORE, info.aicore), (AICPU, info.aicpu)):
            if engine == AICORE and aicpu_only:
                continue
            if support is not None and support.supports({"x": src, "y": dst}):
                return engine
        return None

    def _keep_cast(self, cast: ag.CastOp) -> None:
        """A Cast keeps its dtypes; it runs where a kernel converts them (the AI CPU
        for a Cast of a data-dependent value)."""
        src, dst = _name(ag.dtype_of(cast.x.type)), _name(ag.dtype_of(cast.y.type))
        dependent = cast.x in self.dependent
        if dependent:
            self.dependent.add(cast.y)
        engine = self._cast_engine(src, dst, dependent)
        if engine is None:
            raise ModelError(f"Cast '{cast.label}': no kernel on {self.library.soc_version} converts {src} to {dst}")
        if engine == AICPU:
            cast.attributes[ENGINE] = StringAttr(AICPU_ENGINE)
        else:
            cast.attributes.pop(ENGINE, None)

    def _model_cast(self, cast: ag.CastOp) -> None:
        """A Cast of the model converts whatever its producer now gives; where no
        kernel converts that, it reads its original dtype again."""
        src, dst = _name(ag.dtype_of(cast.x.type)), _name(ag.dtype_of(cast.y.type))
        if self._cast_engine(src, dst) is None:
            cast.operands = [self._as(cast.x, self.original.get(cast.x, src))]
        self._keep_cast(cast)

    def _remove_cancelling_casts(self) -> None:
        """Cast A -> B -> C where B holds every A value exactly is Cast A -> C, and
        nothing when C is A: the pairs dtype boundaries leave behind."""
        changed = True
        while changed:
            changed = False
            for cast in [op for op in self.block.ops if isinstance(op, ag.CastOp)]:
                if cast.parent is None:
                    continue
                changed |= self._fold_cast(cast)

    def _fold_cast(self, cast: ag.CastOp) -> bool:
        """Drop an identity Cast, or read past a lossless Cast before it (where a
        kernel converts the result); True if the graph changed."""
        src = cast.x
        dst = _name(ag.dtype_of(cast.y.type))
        if _name(ag.dtype_of(src.type)) == dst:
            cast.y.replace_all_uses_with(src)
            self._erase(cast)
            return True
        first = src.owner
        if not isinstance(first, ag.CastOp):
            return False
        a, b = _name(ag.dtype_of(first.x.type)), _name(ag.dtype_of(first.y.type))
        if b not in _LOSSLESS.get(a, ()):
            return False
        if a == dst:
            cast.y.replace_all_uses_with(first.x)
            self._erase(cast)
        elif self._cast_engine(a, dst) is None:
            return False
        else:
            cast.operands = [first.x]
            self._keep_cast(cast)
        if not first.y.uses:
            self._erase(first)
        return True

    def _erase(self, cast: ag.CastOp) -> None:
        self.block.erase_op(cast)
        self.summary.casts_removed += 1

    # ------------------------------------------------------------- implementation mode

    def _set_impl_mode(self, op: ag.AscendOp) -> None:
        """op_precision_mode by node name, then op type; else op_select_implmode's list."""
        info = self.library.ops.get(op.OP_TYPE)
        ini = self.settings.op_precision_mode
        if info is None:
            return
        if ini is not None:
            rule = ini.names.get(op.label) if op.node_name is not None else None
            if rule is not None:
                _check_mode(self.library, op.OP_TYPE, rule.mode, f"{rule.source} ('{op.label}')")
            rule = rule or ini.op_types.get(op.OP_TYPE)
            if rule is not None:
                op.attributes[IMPL_MODE] = StringAttr(rule.mode)
            return
        mode = self._selected_mode(op.OP_TYPE)
        if mode in info.impl_modes:
            op.attributes[IMPL_MODE] = StringAttr(mode)

    def _selected_mode(self, op_type: str) -> str | None:
        """op_select_implmode's mode for the op type: by optypelist_for_implmode, else the built-in list."""
        settings = self.settings
        if settings.optypelist_for_implmode:
            return settings.op_select_implmode if op_type in settings.optypelist_for_implmode else None
        return self.library.impl_mode_lists[settings.op_select_implmode].get(op_type)

    def _warn_unknown_names(self) -> None:
        """Names change under fusion, so a name no op has is a warning, not an error."""
        tables: list[tuple[str, Iterable[str]]] = []
        if self.settings.keep_dtype:
            tables.append(("keep_dtype", self.settings.keep_dtype.names))
        if self.settings.customize_dtypes:
            tables.append(("customize_dtypes", self.settings.customize_dtypes.names))
        if self.settings.op_precision_mode:
            tables.append(("op_precision_mode [ByNodeName]", self.settings.op_precision_mode.names))
        for option, names in tables:
            for name in names:
                if name not in self.names:
                    log.warning("%s: no node is named '%s' (fusion may have renamed or merged it); the entry has no effect", option, name)


def _signature(key_in: str | None, key_out: str | None) -> str:
    if key_in and key_out and key_in != key_out:
        return f"{key_in} in, {key_out} out"
    return key_in or key_out or ""


def _label(value: SSAValue) -> str:
    owner = value.owner
    return owner.label if isinstance(owner, ag.AscendOp) else "arg"


def _saturated(source: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, tuple[int, float] | None]:
    """`source` in `dtype`, a finite value beyond a 16-bit float dtype's range saturated to
    its largest finite value; and (how many saturated, the worst) when any did."""
    if source.dtype.kind != "f" or dtype.itemsize != 2 or dtype.kind not in "fV":
        return source.astype(dtype), None
    limit = float(ml_dtypes.finfo(dtype).max)
    with np.errstate(over="ignore", invalid="ignore"):
        plain = source.astype(dtype)
        over = np.isinf(plain.astype(np.float32)) & np.isfinite(source)
    if not over.any():
        return plain, None
    worst = float(source[over][np.argmax(np.abs(source[over]))])
    clipped = np.where(over, np.clip(source, -limit, limit), source).astype(dtype)
    return clipped, (int(over.sum()), worst)


def _attr_numpy(name: str) -> np.dtype:
    return dtypes.to_numpy(_attr(name))


