"""The `ascend_graph` dialect: a GE graph at framework level.

One op per CANN op type, named after it in snake case. Every op keeps its CANN op
type (`OP_TYPE`, the key of fusion patterns, op info and dtype files) and its ONNX
node name (the `name` property, because users address nodes by name).

Tensors are builtin `tensor<...>` types. Their encoding, when present, is a
`#ascend_graph.format<format, origin_format, origin_shape>`; a tensor without one is
in its origin format (ND, or NCHW for the 4-D feature maps of an ONNX model) and its
shape is its origin shape. Weights never live in the IR: `ascend_graph.const` holds
a `#ascend_graph.weight<name, digest>` handle into the weight store, or, for small
constants (shapes, axes, scalars), an inline dense attribute.

Every op computes its result types from its operands and properties
(`infer_result_types`); the constructor uses it and the verifier checks the declared
types against it, so a wrong shape is reported with the rule it breaks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    BoolAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    Signedness,
    StringAttr,
    SymbolNameConstraint,
    TensorType,
    f32,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.ir import Region
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    VariadicDef,
    irdl_attr_definition,
    irdl_op_definition,
    opt_operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
    operand_def,
)
from xdsl.parser import AttrParser
from xdsl.pattern_rewriter import RewritePattern
from xdsl.printer import Printer
from xdsl.traits import ConstantLike, HasCanonicalizationPatternsTrait, HasFolder, IsTerminator, Pure, SymbolOpInterface
from xdsl.traits import HasParent, IsolatedFromAbove, RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException

from dialects import formats, shapes
from dialects.shapes import DYN, Shape, ShapeError

FORMATS = ("ND", "NCHW", "NHWC", "NC1HWC0", "FRACTAL_Z", "FRACTAL_NZ")


# --------------------------------------------------------------------------- attributes


@irdl_attr_definition
class FormatAttr(ParametrizedAttribute):
    """Tensor encoding: the physical format, and the origin format and shape it maps."""

    name = "ascend_graph.format"

    format: StringAttr
    origin_format: StringAttr
    origin_shape: DenseArrayBase

    def __init__(self, format: str, origin_format: str, origin_shape: Sequence[int]):
        super().__init__(
            StringAttr(format), StringAttr(origin_format), DenseArrayBase.from_list(i64, origin_shape)
        )

    def verify(self) -> None:
        for label, value in (("format", self.format.data), ("origin format", self.origin_format.data)):
            if value not in FORMATS:
                raise VerifyException(f"unknown {label} {value!r}; known: {', '.join(FORMATS)}")

    def print_parameters(self, printer: Printer) -> None:
        """As the generic form prints it, but a dynamic origin dim as `?` (not INT64_MIN)."""
        with printer.in_angle_brackets():
            printer.print_attribute(self.format)
            printer.print_string(", ")
            printer.print_attribute(self.origin_format)
            printer.print_string(", array<i64")
            dims = self.origin_shape.get_values()
            if dims:
                printer.print_string(": " + ", ".join("?" if d == DYN else str(d) for d in dims))
            printer.print_string(">")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            format = parser.parse_str_literal(" (the device format)")
            parser.parse_punctuation(",")
            origin_format = parser.parse_str_literal(" (the origin format)")
            parser.parse_punctuation(",")
            parser.parse_keyword("array", " (the origin shape)")
            with parser.in_angle_brackets():
                parser.parse_keyword("i64", " (the origin shape's element type)")
                dims: list[int] = []
                if parser.parse_optional_punctuation(":") is not None:
                    dims = parser.parse_comma_separated_list(
                        parser.Delimiter.NONE, lambda: DYN if parser.parse_optional_punctuation("?") else parser.parse_integer()
                    )
        return [StringAttr(format), StringAttr(origin_format), DenseArrayBase.from_list(i64, dims)]


@irdl_attr_definition
class WeightRefAttr(ParametrizedAttribute):
    """A handle into the weight store: the weight's name and a content-digest prefix."""

    name = "ascend_graph.weight"

    weight: StringAttr
    digest: StringAttr

    def __init__(self, weight: str, digest: str):
        super().__init__(StringAttr(weight), StringAttr(digest))


# ------------------------------------------------------------ attribute construction


def ints(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [int(v) for v in values])


def int_attr(value: int) -> IntegerAttr:
    return IntegerAttr(int(value), i64)


def float_attr(value: float) -> FloatAttr:
    return FloatAttr(float(value), f32)


def bool_attr(value: bool) -> BoolAttr:
    return BoolAttr.from_bool(bool(value))


def tensor(dtype: Attribute, shape: Sequence[int], encoding: Attribute | None = None) -> TensorType:
    if encoding is None:
        return TensorType(dtype, shape)
    return TensorType(dtype, shape, encoding)


class Props:
    """Typed reads of an op's properties, for shape functions and passes."""

    def __init__(self, props: Mapping[str, Attribute]):
        self._props = props

    def has(self, key: str) -> bool:
        return key in self._props

    def ints(self, key: str, default: Sequence[int] = ()) -> tuple[int, ...]:
        attr = self._props.get(key)
        return tuple(default) if attr is None else tuple(attr.get_values())  # type: ignore[union-attr]

    def int(self, key: str, default: int = 0) -> int:
        attr = self._props.get(key)
        return default if attr is None else attr.value.data  # type: ignore[union-attr]

    def float(self, key: str, default: float = 0.0) -> float:
        attr = self._props.get(key)
        return default if attr is None else attr.value.data  # type: ignore[union-attr]

    def bool(self, key: str, default: bool = False) -> bool:
        attr = self._props.get(key)
        return default if attr is None else bool(attr.value.data)  # type: ignore[union-attr]

    def str(self, key: str, default: str = "") -> str:
        attr = self._props.get(key)
        return default if attr is None else attr.data  # type: ignore[union-attr]

    def type(self, key: str) -> Attribute:
        return self._props[key]


def shape_of(t: Attribute) -> Shape:
    """The logical shape: the origin shape of a tensor in a device format, else its shape.

    Shape rules and values are logical; a device format (NC1HWC0, FRACTAL_Z, ...)
    only says how the same values are laid out, so ops check origin shapes.
    """
    assert isinstance(t, TensorType)
    if isinstance(t.encoding, FormatAttr):
        return tuple(t.encoding.origin_shape.get_values())
    return tuple(t.get_shape())


def dtype_of(t: Attribute) -> Attribute:
    assert isinstance(t, TensorType)
    return t.element_type


def format_of(t: Attribute) -> str | None:
    """The device format of a tensor, or None for a tensor in its origin format."""
    assert isinstance(t, TensorType)
    return t.encoding.format.data if isinstance(t.encoding, FormatAttr) else None


def device_tensor(dtype: Attribute, format: str, origin_format: str, origin_shape: Sequence[int]) -> TensorType:
    """A tensor in a device format: its physical shape, encoded with the origin it maps."""
    physical = formats.physical_shape(format, origin_format, origin_shape, dtype)
    return TensorType(dtype, physical, FormatAttr(format, origin_format, origin_shape))


def verify_layout(t: Attribute, what: str) -> None:
    """A tensor in a device format must have the physical shape its format maps its origin shape to."""
    if not isinstance(t, TensorType) or not isinstance(t.encoding, FormatAttr):
        return
    enc = t.encoding
    try:
        want = formats.physical_shape(enc.format.data, enc.origin_format.data, enc.origin_shape.get_values(), t.element_type)
    except ShapeError as e:
        raise VerifyException(f"{what}: {e}") from e
    if tuple(t.get_shape()) != want:
        raise VerifyException(
            f"{what}: a {enc.format.data} tensor of origin shape {shapes.fmt(enc.origin_shape.get_values())} "
            f"has the physical shape {shapes.fmt(want)}, not {shapes.fmt(t.get_shape())}"
        )


def is_float(dtype: Attribute) -> bool:
    return isinstance(dtype, Float16Type | BFloat16Type | Float32Type | Float64Type)


def is_unsigned(dtype: Attribute) -> bool:
    return isinstance(dtype, IntegerType) and dtype.signedness.data == Signedness.UNSIGNED


# --------------------------------------------------------------------------- op bases


def _by_defs(defs: Sequence[object], items: Sequence) -> list:
    flexible = len(items) - sum(not isinstance(d, VariadicDef) for d in defs)
    rest = iter(items)
    return [[next(rest) for _ in range(flexible)] if isinstance(d, VariadicDef) else next(rest) for d in defs]


class FoldsToOperand(HasFolder):
    """xDSL's folding hook (run by `canonicalize`): an op that returns one of its operands
    unchanged is replaced by it: `x * 1`, `x + 0`, `x - 0`, `x / 1` (with the constant
    inline, and only where it does not broadcast `x` to another shape), Identity, a Cast
    to the type it has, a reshape to the shape it has, an identity Transpose.

    `x + 0` gives -0.0 for x = -0.0 where the sum gives +0.0: equal in value, which is
    what the reference interpreter's comparisons and every consumer see."""

    @classmethod
    def fold(cls, op: Operation) -> Sequence[SSAValue | Attribute] | None:
        assert isinstance(op, AscendOp)
        value = op.folded_operand()
        return None if value is None else [value]


class GraphCanonicalization(HasCanonicalizationPatternsTrait):
    """The canonicalization patterns of `ascend_graph` (`ascend_graph_canonicalization`)."""

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        from dialects.ascend_graph_canonicalization import PATTERNS

        return PATTERNS


def _inline_all(value: SSAValue, number: float) -> bool:
    """`value` is an inline constant whose every element equals `number`."""
    op = value.owner
    if not isinstance(op, ConstOp) or not isinstance(op.value, DenseIntOrFPElementsAttr):
        return False
    return all(v == number for v in op.value.get_values())


class AscendOp(IRDLOperation):
    """Base of every graph op: CANN op type, ONNX node name, inferred result types."""

    OP_TYPE: ClassVar[str]
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "operands attr-dict `:` functional-type(operands, results)"

    node_name = opt_prop_def(StringAttr, prop_name="name")

    def __init__(
        self,
        operands: Sequence[SSAValue | Operation],
        props: Mapping[str, Attribute] | None = None,
        name: str | None = None,
        result_types: Sequence[Attribute] | None = None,
    ):
        values = [SSAValue.get(o) for o in operands]
        properties = dict(props or {})
        if name is not None:
            properties["name"] = StringAttr(name)
        if result_types is None:
            result_types = self.infer_result_types([v.type for v in values], Props(properties))
        super().__init__(operands=self._group(values), properties=properties, result_types=self._group_results(result_types))

    @classmethod
    def _group(cls, values: Sequence[SSAValue]) -> list[SSAValue | list[SSAValue]]:
        """Arrange a flat operand list by the op's definitions (one variadic at most)."""
        return _by_defs([d for _, d in cls.get_irdl_definition().operands], values)

    @classmethod
    def _group_results(cls, types: Sequence[Attribute]) -> list[Attribute | list[Attribute]]:
        return _by_defs([d for _, d in cls.get_irdl_definition().results], types)

    @property
    def op_type(self) -> str:
        return self.OP_TYPE

    @property
    def label(self) -> str:
        """The ONNX node name, or the op type where the node had none."""
        return self.node_name.data if self.node_name else self.OP_TYPE

    @property
    def props(self) -> Props:
        return Props(self.properties)

    @classmethod
    def infer_result_types(cls, operand_types: Sequence[Attribute], props: Props) -> list[Attribute]:
        raise NotImplementedError(cls.__name__)

    def folded_operand(self) -> SSAValue | None:
        """The operand the op returns unchanged, if it provably does (see `FoldsToOperand`)."""
        return None

    def _unchanged(self, value: SSAValue) -> SSAValue | None:
        """`value` when the op's one result has exactly its type (so no broadcast, no cast)."""
        return value if len(self.results) == 1 and self.results[0].type == value.type else None

    def verify_(self) -> None:
        types = [o.type for o in self.operands]
        for i, t in enumerate(types):
            if not isinstance(t, TensorType):
                raise VerifyException(f"{self.OP_TYPE} '{self.label}': operand {i} is {t}, not a tensor")
        try:
            inferred = self.infer_result_types(types, self.props)
        except ShapeError as e:
            raise VerifyException(f"{self.OP_TYPE} '{self.label}': {e}") from e
        if len(inferred) != len(self.results):
            raise VerifyException(
                f"{self.OP_TYPE} '{self.label}': has {len(self.results)} results, expected {len(inferred)}"
            )
        for i, (res, want) in enumerate(zip(self.results, inferred)):
            got = res.type
            if not isinstance(got, TensorType) or got.element_type != dtype_of(want):
                raise VerifyException(
                    f"{self.OP_TYPE} '{self.label}': result {i} is {got}, expected element type {dtype_of(want)}"
                )
            if not shapes.compatible(shape_of(got), shape_of(want)):
                raise VerifyException(
                    f"{self.OP_TYPE} '{self.label}': result {i} has shape {shapes.fmt(shape_of(got))}, "
                    f"but the inputs give {shapes.fmt(shape_of(want))}"
                )


def _same(types: Sequence[Attribute], what: str, indices: Sequence[int] | None = None) -> Attribute:
    """The common element type of the given operands (all of them by default)."""
    picked = [types[i] for i in (indices if indices is not None else range(len(types))) if i < len(types)]
    dtypes = {dtype_of(t) for t in picked}
    if len(dtypes) > 1:
        raise ShapeError(f"{what} operands have different element types {sorted(map(str, dtypes))}")
    return dtype_of(picked[0])


class UnaryOp(AscendOp):
    """y = f(x), elementwise, same type."""

    x = operand_def(TensorType)
    y = result_def(TensorType)
    traits = traits_def(Pure(), FoldsToOperand())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        return [operand_types[0]]


class FloatUnaryOp(UnaryOp):
    @classmethod
    def infer_result_types(cls, operand_types, props):
        if not is_float(dtype_of(operand_types[0])):
            raise ShapeError(f"needs a floating-point input, got {dtype_of(operand_types[0])}")
        return [operand_types[0]]


class BinaryOp(AscendOp):
    """y = f(x1, x2), elementwise with numpy broadcasting."""

    x1 = operand_def(TensorType)
    x2 = operand_def(TensorType)
    y = result_def(TensorType)
    traits = traits_def(Pure(), FoldsToOperand())

    @classmethod
    def result_dtype(cls, dtype: Attribute) -> Attribute:
        return dtype

    @classmethod
    def infer_result_types(cls, operand_types, props):
        dtype = _same(operand_types, "the two")
        shape = shapes.broadcast(shape_of(operand_types[0]), shape_of(operand_types[1]))
        return [tensor(cls.result_dtype(dtype), shape)]


class CompareOp(BinaryOp):
    @classmethod
    def result_dtype(cls, dtype):
        return i1


class LogicalBinaryOp(BinaryOp):
    @classmethod
    def infer_result_types(cls, operand_types, props):
        if any(dtype_of(t) != i1 for t in operand_types):
            raise ShapeError("needs bool (i1) operands")
        return super().infer_result_types(operand_types, props)


class CubeOp(AscendOp):
    """An op of the cube unit. The cube multiplies in its inputs' dtype and
    accumulates in float32, so it can write a wider result than it reads (float16
    in, float32 out: precision_mode cube_fp16in_fp32out). The optional `dtype`
    property is that result dtype; without it the result has the inputs' dtype."""

    result_dtype = opt_prop_def(TypeAttribute, prop_name="dtype")


def _cube_dtype(
    operand_types: Sequence[Attribute], props: Props, what: str, inputs: Sequence[int], bias: int | None = None
) -> Attribute:
    """The result dtype of a cube op: the `dtype` property, else the common dtype of
    the multiplied `inputs`. A bias joins the float32 accumulator, so it may have
    the inputs' dtype or the result's."""
    dtype = _same(operand_types, what, inputs)
    out = props.type("dtype") if props.has("dtype") else dtype
    if bias is not None and bias < len(operand_types) and dtype_of(operand_types[bias]) not in (dtype, out):
        raise ShapeError(f"bias element type {dtype_of(operand_types[bias])} is neither the inputs' {dtype} nor the result's {out}")
    return out


# ------------------------------------------------------------------- structural ops


@irdl_op_definition
class GraphOp(IRDLOperation):
    """A GE graph: one block of ops from `data` to `net_output`."""

    name = "ascend_graph.graph"
    sym_name = prop_def(SymbolNameConstraint())
    body = region_def("single_block")
    traits = traits_def(SymbolOpInterface())
    assembly_format = "$sym_name attr-dict-with-keyword $body"

    def __init__(self, sym_name: str, body):
        super().__init__(properties={"sym_name": StringAttr(sym_name)}, regions=[body])

    @property
    def inputs(self) -> list[DataOp]:
        return sorted((op for op in self.body.block.ops if isinstance(op, DataOp)), key=lambda d: d.index.value.data)

    @property
    def output(self) -> NetOutputOp:
        last = self.body.block.last_op
        assert isinstance(last, NetOutputOp)
        return last

    def verify_(self) -> None:
        last = self.body.block.last_op
        if not isinstance(last, NetOutputOp):
            raise VerifyException(f"graph @{self.sym_name.data} must end with ascend_graph.net_output")
        indices = sorted(d.index.value.data for d in self.inputs)
        if indices != list(range(len(indices))):
            raise VerifyException(f"graph @{self.sym_name.data}: data indices {indices} are not 0..{len(indices) - 1}")
        for op in self.body.walk():
            for i, r in enumerate(op.results):
                verify_layout(r.type, f"graph @{self.sym_name.data}: {op.name} result {i}")


@irdl_op_definition
class DataOp(AscendOp):
    """A graph input (CANN `Data`); `index` is its position among the inputs."""

    name = "ascend_graph.data"
    OP_TYPE: ClassVar[str] = "Data"
    index = prop_def(IntegerAttr)
    out = result_def(TensorType)
    assembly_format = "attr-dict `:` type($out)"

    def __init__(self, index: int, type: TensorType, name: str):
        super().__init__([], {"index": int_attr(index)}, name, [type])

    def verify_(self) -> None:
        if self.index.value.data < 0:
            raise VerifyException(f"Data '{self.label}': index {self.index.value.data} is negative")


@irdl_op_definition
class ConstOp(AscendOp):
    """A constant (CANN `Const`): a weight-store handle, or an inline dense value."""

    name = "ascend_graph.const"
    OP_TYPE: ClassVar[str] = "Const"
    value = prop_def(WeightRefAttr | DenseIntOrFPElementsAttr)
    out = result_def(TensorType)
    traits = traits_def(Pure(), ConstantLike())
    assembly_format = "attr-dict `:` type($out)"

    def __init__(self, value: WeightRefAttr | DenseIntOrFPElementsAttr, type: TensorType, name: str | None = None):
        super().__init__([], {"value": value}, name, [type])

    def verify_(self) -> None:
        if isinstance(self.value, DenseIntOrFPElementsAttr) and self.value.get_type() != self.out.type:
            raise VerifyException(f"Const '{self.label}': inline value type {self.value.get_type()} is not {self.out.type}")


@irdl_op_definition
class NetOutputOp(AscendOp):
    """The graph's outputs (CANN `NetOutput`), named by `names`."""

    name = "ascend_graph.net_output"
    OP_TYPE: ClassVar[str] = "NetOutput"
    outputs = var_operand_def(TensorType)
    names = prop_def(ArrayAttr[StringAttr])
    traits = traits_def(IsTerminator())
    assembly_format = "$outputs attr-dict `:` type($outputs)"

    def __init__(self, outputs: Sequence[SSAValue | Operation], names: Sequence[str]):
        super().__init__(outputs, {"names": ArrayAttr([StringAttr(n) for n in names])}, None, [])

    def verify_(self) -> None:
        if len(self.names) != len(self.outputs):
            raise VerifyException(f"NetOutput has {len(self.outputs)} outputs but {len(self.names)} names")


# ------------------------------------------------------------------------ elementwise


@irdl_op_definition
class AddOp(BinaryOp):
    """x1 + x2 (CANN `Add`)."""

    name = "ascend_graph.add"
    OP_TYPE: ClassVar[str] = "Add"

    def folded_operand(self) -> SSAValue | None:
        if _inline_all(self.x2, 0):
            return self._unchanged(self.x1)
        return self._unchanged(self.x2) if _inline_all(self.x1, 0) else None


@irdl_op_definition
class SubOp(BinaryOp):
    """x1 - x2 (CANN `Sub`)."""

    name = "ascend_graph.sub"
    OP_TYPE: ClassVar[str] = "Sub"

    def folded_operand(self) -> SSAValue | None:
        return self._unchanged(self.x1) if _inline_all(self.x2, 0) else None


@irdl_op_definition
class MulOp(BinaryOp):
    """x1 * x2 (CANN `Mul`)."""

    name = "ascend_graph.mul"
    OP_TYPE: ClassVar[str] = "Mul"

    def folded_operand(self) -> SSAValue | None:
        if _inline_all(self.x2, 1):
            return self._unchanged(self.x1)
        return self._unchanged(self.x2) if _inline_all(self.x1, 1) else None


@irdl_op_definition
class DivOp(BinaryOp):
    """x1 / x2 (CANN `Div`); integer division truncates toward zero, as in ONNX."""

    name = "ascend_graph.div"
    OP_TYPE: ClassVar[str] = "Div"

    def folded_operand(self) -> SSAValue | None:
        return self._unchanged(self.x1) if _inline_all(self.x2, 1) else None


@irdl_op_definition
class PowOp(BinaryOp):
    """x1 ** x2 (CANN `Pow`)."""

    name = "ascend_graph.pow"
    OP_TYPE: ClassVar[str] = "Pow"


@irdl_op_definition
class MaximumOp(BinaryOp):
    """max(x1, x2) (CANN `Maximum`)."""

    name = "ascend_graph.maximum"
    OP_TYPE: ClassVar[str] = "Maximum"


@irdl_op_definition
class MinimumOp(BinaryOp):
    """min(x1, x2) (CANN `Minimum`)."""

    name = "ascend_graph.minimum"
    OP_TYPE: ClassVar[str] = "Minimum"


@irdl_op_definition
class PReluOp(BinaryOp):
    """x1 if x1 >= 0 else x1 * x2, slope broadcast to x1 (CANN `PRelu`)."""

    name = "ascend_graph.prelu"
    OP_TYPE: ClassVar[str] = "PRelu"


@irdl_op_definition
class EqualOp(CompareOp):
    """x1 == x2 (CANN `Equal`)."""

    name = "ascend_graph.equal"
    OP_TYPE: ClassVar[str] = "Equal"


@irdl_op_definition
class LessOp(CompareOp):
    """x1 < x2 (CANN `Less`)."""

    name = "ascend_graph.less"
    OP_TYPE: ClassVar[str] = "Less"


@irdl_op_definition
class LessEqualOp(CompareOp):
    """x1 <= x2 (CANN `LessEqual`)."""

    name = "ascend_graph.less_equal"
    OP_TYPE: ClassVar[str] = "LessEqual"


@irdl_op_definition
class GreaterOp(CompareOp):
    """x1 > x2 (CANN `Greater`)."""

    name = "ascend_graph.greater"
    OP_TYPE: ClassVar[str] = "Greater"


@irdl_op_definition
class GreaterEqualOp(CompareOp):
    """x1 >= x2 (CANN `GreaterEqual`)."""

    name = "ascend_graph.greater_equal"
    OP_TYPE: ClassVar[str] = "GreaterEqual"


@irdl_op_definition
class LogicalAndOp(LogicalBinaryOp):
    """x1 and x2 (CANN `LogicalAnd`)."""

    name = "ascend_graph.logical_and"
    OP_TYPE: ClassVar[str] = "LogicalAnd"


@irdl_op_definition
class LogicalOrOp(LogicalBinaryOp):
    """x1 or x2 (CANN `LogicalOr`)."""

    name = "ascend_graph.logical_or"
    OP_TYPE: ClassVar[str] = "LogicalOr"


@irdl_op_definition
class LogicalXorOp(LogicalBinaryOp):
    """x1 xor x2 (CANN `LogicalXor`)."""

    name = "ascend_graph.logical_xor"
    OP_TYPE: ClassVar[str] = "LogicalXor"


@irdl_op_definition
class LogicalNotOp(UnaryOp):
    """not x (CANN `LogicalNot`)."""

    name = "ascend_graph.logical_not"
    OP_TYPE: ClassVar[str] = "LogicalNot"


@irdl_op_definition
class IdentityOp(UnaryOp):
    """y = x (CANN `Identity`)."""

    name = "ascend_graph.identity"
    OP_TYPE: ClassVar[str] = "Identity"

    def folded_operand(self) -> SSAValue | None:
        return self._unchanged(self.x)


@irdl_op_definition
class NegOp(UnaryOp):
    """-x (CANN `Neg`)."""

    name = "ascend_graph.neg"
    OP_TYPE: ClassVar[str] = "Neg"
    traits = traits_def(Pure(), FoldsToOperand(), GraphCanonicalization())


@irdl_op_definition
class AbsOp(UnaryOp):
    """|x| (CANN `Abs`)."""

    name = "ascend_graph.abs"
    OP_TYPE: ClassVar[str] = "Abs"


@irdl_op_definition
class SignOp(UnaryOp):
    """sign(x) (CANN `Sign`)."""

    name = "ascend_graph.sign"
    OP_TYPE: ClassVar[str] = "Sign"


@irdl_op_definition
class ReluOp(UnaryOp):
    """max(x, 0) (CANN `Relu`)."""

    name = "ascend_graph.relu"
    OP_TYPE: ClassVar[str] = "Relu"


@irdl_op_definition
class SqrtOp(FloatUnaryOp):
    """sqrt(x) (CANN `Sqrt`)."""

    name = "ascend_graph.sqrt"
    OP_TYPE: ClassVar[str] = "Sqrt"


@irdl_op_definition
class RsqrtOp(FloatUnaryOp):
    """1 / sqrt(x) (CANN `Rsqrt`)."""

    name = "ascend_graph.rsqrt"
    OP_TYPE: ClassVar[str] = "Rsqrt"


@irdl_op_definition
class ExpOp(FloatUnaryOp):
    """e ** x (CANN `Exp`)."""

    name = "ascend_graph.exp"
    OP_TYPE: ClassVar[str] = "Exp"


@irdl_op_definition
class LogOp(FloatUnaryOp):
    """ln(x) (CANN `Log`)."""

    name = "ascend_graph.log"
    OP_TYPE: ClassVar[str] = "Log"


@irdl_op_definition
class ReciprocalOp(FloatUnaryOp):
    """1 / x (CANN `Reciprocal`)."""

    name = "ascend_graph.reciprocal"
    OP_TYPE: ClassVar[str] = "Reciprocal"


@irdl_op_definition
class ErfOp(FloatUnaryOp):
    """erf(x) (CANN `Erf`)."""

    name = "ascend_graph.erf"
    OP_TYPE: ClassVar[str] = "Erf"


@irdl_op_definition
class TanhOp(FloatUnaryOp):
    """tanh(x) (CANN `Tanh`)."""

    name = "ascend_graph.tanh"
    OP_TYPE: ClassVar[str] = "Tanh"


@irdl_op_definition
class SigmoidOp(FloatUnaryOp):
    """1 / (1 + e ** -x) (CANN `Sigmoid`)."""

    name = "ascend_graph.sigmoid"
    OP_TYPE: ClassVar[str] = "Sigmoid"


@irdl_op_definition
class SinOp(FloatUnaryOp):
    """sin(x) (CANN `Sin`)."""

    name = "ascend_graph.sin"
    OP_TYPE: ClassVar[str] = "Sin"


@irdl_op_definition
class CosOp(FloatUnaryOp):
    """cos(x) (CANN `Cos`)."""

    name = "ascend_graph.cos"
    OP_TYPE: ClassVar[str] = "Cos"


@irdl_op_definition
class FloorOp(FloatUnaryOp):
    """floor(x) (CANN `Floor`)."""

    name = "ascend_graph.floor"
    OP_TYPE: ClassVar[str] = "Floor"


@irdl_op_definition
class CeilOp(FloatUnaryOp):
    """ceil(x) (CANN `Ceil`)."""

    name = "ascend_graph.ceil"
    OP_TYPE: ClassVar[str] = "Ceil"


@irdl_op_definition
class RoundOp(FloatUnaryOp):
    """Round half to even (CANN `Round`)."""

    name = "ascend_graph.round"
    OP_TYPE: ClassVar[str] = "Round"


@irdl_op_definition
class SoftplusOp(FloatUnaryOp):
    """ln(1 + e ** x) (CANN `Softplus`)."""

    name = "ascend_graph.softplus"
    OP_TYPE: ClassVar[str] = "Softplus"


@irdl_op_definition
class SoftsignOp(FloatUnaryOp):
    """x / (1 + |x|) (CANN `Softsign`)."""

    name = "ascend_graph.softsign"
    OP_TYPE: ClassVar[str] = "Softsign"


@irdl_op_definition
class HardSwishOp(FloatUnaryOp):
    """x * relu6(x + 3) / 6 (CANN `HardSwish`)."""

    name = "ascend_graph.hard_swish"
    OP_TYPE: ClassVar[str] = "HardSwish"


@irdl_op_definition
class GeluOp(FloatUnaryOp):
    """GELU (CANN `Gelu`); `approximate` is "none" (erf form) or "tanh"."""

    name = "ascend_graph.gelu"
    OP_TYPE: ClassVar[str] = "Gelu"
    approximate = opt_prop_def(StringAttr)

    def verify_(self) -> None:
        super().verify_()
        if self.props.str("approximate", "none") not in ("none", "tanh"):
            raise VerifyException(f"Gelu '{self.label}': approximate must be \"none\" or \"tanh\"")


@irdl_op_definition
class LeakyReluOp(FloatUnaryOp):
    """x if x >= 0 else negative_slope * x (CANN `LeakyRelu`)."""

    name = "ascend_graph.leaky_relu"
    OP_TYPE: ClassVar[str] = "LeakyRelu"
    negative_slope = prop_def(FloatAttr)


@irdl_op_definition
class EluOp(FloatUnaryOp):
    """x if x > 0 else alpha * (e ** x - 1) (CANN `Elu`)."""

    name = "ascend_graph.elu"
    OP_TYPE: ClassVar[str] = "Elu"
    alpha = prop_def(FloatAttr)


@irdl_op_definition
class SeluOp(FloatUnaryOp):
    """gamma * (x if x > 0 else alpha * (e ** x - 1)) (CANN `Selu`)."""

    name = "ascend_graph.selu"
    OP_TYPE: ClassVar[str] = "Selu"
    alpha = prop_def(FloatAttr)
    gamma = prop_def(FloatAttr)


@irdl_op_definition
class HardSigmoidOp(FloatUnaryOp):
    """max(0, min(1, alpha * x + beta)) (CANN `HardSigmoid`)."""

    name = "ascend_graph.hard_sigmoid"
    OP_TYPE: ClassVar[str] = "HardSigmoid"
    alpha = prop_def(FloatAttr)
    beta = prop_def(FloatAttr)


@irdl_op_definition
class ClipByValueOp(UnaryOp):
    """min(max(x, min), max), each bound optional (CANN `ClipByValue`)."""

    name = "ascend_graph.clip_by_value"
    OP_TYPE: ClassVar[str] = "ClipByValue"
    min = opt_prop_def(FloatAttr)
    max = opt_prop_def(FloatAttr)


@irdl_op_definition
class CastOp(AscendOp):
    """Convert to `dst_type` (CANN `Cast`)."""

    name = "ascend_graph.cast"
    OP_TYPE: ClassVar[str] = "Cast"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    dst_type = prop_def(TypeAttribute)
    traits = traits_def(Pure(), FoldsToOperand())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        return [tensor(props.type("dst_type"), shape_of(operand_types[0]))]

    def folded_operand(self) -> SSAValue | None:
        return self._unchanged(self.x)


@irdl_op_definition
class TransDataOp(AscendOp):
    """The same values in another format (CANN `TransData`): `src_format` -> `dst_format`.

    A tensor in an origin format (ND, NCHW) has no encoding; in a device format it has
    the physical shape of its origin shape, which the conversion keeps.
    """

    name = "ascend_graph.trans_data"
    OP_TYPE: ClassVar[str] = "TransData"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    src_format = prop_def(StringAttr)
    dst_format = prop_def(StringAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x = operand_types[0]
        src, dst = props.str("src_format"), props.str("dst_format")
        assert isinstance(x, TensorType)
        enc = x.encoding
        if isinstance(enc, FormatAttr):
            origin, actual = enc.origin_format.data, enc.format.data
        else:
            origin = actual = src if src in formats.ORIGIN_FORMATS else "its origin format"
        if actual != src:
            raise ShapeError(f"the input is in {actual}, not in src_format {src}")
        if dst == origin:
            return [tensor(dtype_of(x), shape_of(x))]
        return [device_tensor(dtype_of(x), dst, origin, shape_of(x))]

    def verify_(self) -> None:
        super().verify_()
        want = self.infer_result_types([self.x.type], self.props)[0]
        if self.y.type != want:
            raise VerifyException(f"TransData '{self.label}': result is {self.y.type}, but {self.props.str('dst_format')} gives {want}")


@irdl_op_definition
class SelectOp(AscendOp):
    """condition ? x1 : x2 with broadcasting (CANN `SelectV2`, ONNX `Where`)."""

    name = "ascend_graph.select"
    OP_TYPE: ClassVar[str] = "SelectV2"
    condition = operand_def(TensorType)
    x1 = operand_def(TensorType)
    x2 = operand_def(TensorType)
    y = result_def(TensorType)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        if dtype_of(operand_types[0]) != i1:
            raise ShapeError("condition must be bool (i1)")
        dtype = _same(operand_types, "the two value", [1, 2])
        return [tensor(dtype, shapes.broadcast(*(shape_of(t) for t in operand_types)))]


# ------------------------------------------------------------------------- reductions


class ReduceOp(AscendOp):
    """Reduce over `axes` (all axes when empty), keeping them as 1 when keep_dims."""

    x = operand_def(TensorType)
    y = result_def(TensorType)
    axes = prop_def(DenseArrayBase)
    keep_dims = prop_def(BoolAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        shape = shapes.reduce(shape_of(operand_types[0]), props.ints("axes"), props.bool("keep_dims"))
        return [tensor(dtype_of(operand_types[0]), shape)]


@irdl_op_definition
class ReduceMeanOp(ReduceOp):
    """Mean over axes (CANN `ReduceMeanD`)."""

    name = "ascend_graph.reduce_mean_d"
    OP_TYPE: ClassVar[str] = "ReduceMeanD"


@irdl_op_definition
class ReduceSumOp(ReduceOp):
    """Sum over axes (CANN `ReduceSumD`)."""

    name = "ascend_graph.reduce_sum_d"
    OP_TYPE: ClassVar[str] = "ReduceSumD"


@irdl_op_definition
class ReduceMaxOp(ReduceOp):
    """Maximum over axes (CANN `ReduceMaxD`)."""

    name = "ascend_graph.reduce_max_d"
    OP_TYPE: ClassVar[str] = "ReduceMaxD"


@irdl_op_definition
class ReduceMinOp(ReduceOp):
    """Minimum over axes (CANN `ReduceMinD`)."""

    name = "ascend_graph.reduce_min_d"
    OP_TYPE: ClassVar[str] = "ReduceMinD"


@irdl_op_definition
class ReduceProdOp(ReduceOp):
    """Product over axes (CANN `ReduceProdD`)."""

    name = "ascend_graph.reduce_prod_d"
    OP_TYPE: ClassVar[str] = "ReduceProdD"


class ArgOp(AscendOp):
    """Index of the extreme value along `axis` (int64 result)."""

    x = operand_def(TensorType)
    y = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    keep_dims = prop_def(BoolAttr)
    select_last_index = prop_def(BoolAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        shape = shape_of(operand_types[0])
        axis = shapes.norm_axis(props.int("axis"), len(shape))
        return [tensor(i64, shapes.reduce(shape, [axis], props.bool("keep_dims")))]


@irdl_op_definition
class ArgMaxOp(ArgOp):
    """Index of the maximum (CANN `ArgMaxV2`)."""

    name = "ascend_graph.arg_max"
    OP_TYPE: ClassVar[str] = "ArgMaxV2"


@irdl_op_definition
class ArgMinOp(ArgOp):
    """Index of the minimum (CANN `ArgMin`)."""

    name = "ascend_graph.arg_min"
    OP_TYPE: ClassVar[str] = "ArgMin"


class SoftmaxBase(AscendOp):
    x = operand_def(TensorType)
    y = result_def(TensorType)
    axes = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        shapes.norm_axes(props.ints("axes"), len(shape_of(operand_types[0])))
        if not is_float(dtype_of(operand_types[0])):
            raise ShapeError("needs a floating-point input")
        return [operand_types[0]]


@irdl_op_definition
class SoftmaxOp(SoftmaxBase):
    """exp(x) / sum(exp(x)) over `axes` (CANN `SoftmaxV2`)."""

    name = "ascend_graph.softmax_v2"
    OP_TYPE: ClassVar[str] = "SoftmaxV2"


@irdl_op_definition
class LogSoftmaxOp(SoftmaxBase):
    """log(softmax(x)) over `axes` (CANN `LogSoftmaxV2`)."""

    name = "ascend_graph.log_softmax_v2"
    OP_TYPE: ClassVar[str] = "LogSoftmaxV2"


# ------------------------------------------------------------------------ normalisation


@irdl_op_definition
class BatchNormOp(AscendOp):
    """Inference batch normalisation over axis 1 (CANN `BatchNorm`, is_training=false)."""

    name = "ascend_graph.batch_norm"
    OP_TYPE: ClassVar[str] = "BatchNorm"
    x = operand_def(TensorType)
    scale = operand_def(TensorType)
    offset = operand_def(TensorType)
    mean = operand_def(TensorType)
    variance = operand_def(TensorType)
    y = result_def(TensorType)
    epsilon = prop_def(FloatAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x = shape_of(operand_types[0])
        if len(x) < 2:
            raise ShapeError(f"input must have rank >= 2, got {shapes.fmt(x)}")
        for label, t in zip(("scale", "offset", "mean", "variance"), operand_types[1:]):
            if len(shape_of(t)) != 1 or not shapes.compatible(shape_of(t), (x[1],)):
                raise ShapeError(f"{label} has shape {shapes.fmt(shape_of(t))}, expected [{x[1]}] (the channels)")
        return [operand_types[0]]


@irdl_op_definition
class LayerNormOp(AscendOp):
    """Normalise over the axes from begin_norm_axis on, then gamma * y + beta (CANN `LayerNorm`)."""

    name = "ascend_graph.layer_norm"
    OP_TYPE: ClassVar[str] = "LayerNorm"
    x = operand_def(TensorType)
    gamma = operand_def(TensorType)
    beta = opt_operand_def(TensorType)
    y = result_def(TensorType)
    begin_norm_axis = prop_def(IntegerAttr)
    epsilon = prop_def(FloatAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x = shape_of(operand_types[0])
        axis = shapes.norm_axis(props.int("begin_norm_axis"), len(x), "begin_norm_axis")
        for t in operand_types[1:]:
            shapes.broadcast(x[axis:], shape_of(t))
            if len(shape_of(t)) > len(x) - axis:
                raise ShapeError(f"gamma/beta shape {shapes.fmt(shape_of(t))} has more dims than the normalised {shapes.fmt(x[axis:])}")
        return [operand_types[0]]


@irdl_op_definition
class InstanceNormOp(AscendOp):
    """Normalise each (n, c) plane, then scale and shift per channel (CANN `InstanceNorm`)."""

    name = "ascend_graph.instance_norm"
    OP_TYPE: ClassVar[str] = "InstanceNorm"
    x = operand_def(TensorType)
    gamma = operand_def(TensorType)
    beta = operand_def(TensorType)
    y = result_def(TensorType)
    epsilon = prop_def(FloatAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x = shape_of(operand_types[0])
        if len(x) < 3:
            raise ShapeError(f"input must have rank >= 3, got {shapes.fmt(x)}")
        return [operand_types[0]]


# -------------------------------------------------------------------------- attention


def _agree(a: int, b: int) -> bool:
    return a == b or DYN in (a, b)


@irdl_op_definition
class MultiHeadAttentionOp(CubeOp):
    """Multi-head attention from the inputs of the Q/K/V projections to the merged
    heads (CANN `MultiHeadAttention`), the output projection left outside.

    With H = head_num, E = query_weight's columns (D = E / H per head) and Ev =
    value_weight's columns (Dv = Ev / H):
    q = query @ query_weight + query_bias, and k, v likewise; head h of q is its
    columns h*D .. h*D+D-1; p = softmax(scale * q_h @ k_h^T + atten_mask) over the
    keys; y = p @ v_h, head h in columns h*Dv .. h*Dv+Dv-1 of y.

    `input_layout` is "BSH" (query [B, Sq, Kq], result [B, Sq, Ev]) or "SBH" ([Sq, B,
    Kq] and [Sq, B, Ev], torch.nn.MultiheadAttention without batch_first). Weights are
    [in, out]; the biases are all three or none; atten_mask is added to the scores
    [B, H, Sq, Sk] under numpy broadcasting. The operands are told apart by their
    count: 6, 7 (mask), 9 (biases) or 10 (biases, mask).
    """

    name = "ascend_graph.multi_head_attention"
    OP_TYPE: ClassVar[str] = "MultiHeadAttention"
    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))
    query = operand_def(TensorType)
    key = operand_def(TensorType)
    value = operand_def(TensorType)
    query_weight = operand_def(TensorType)
    key_weight = operand_def(TensorType)
    value_weight = operand_def(TensorType)
    query_bias = opt_operand_def(TensorType)
    key_bias = opt_operand_def(TensorType)
    value_bias = opt_operand_def(TensorType)
    atten_mask = opt_operand_def(TensorType)
    y = result_def(TensorType)
    head_num = prop_def(IntegerAttr)
    scale = prop_def(FloatAttr)
    input_layout = prop_def(StringAttr)
    traits = traits_def(Pure())
    assembly_format = (
        "$query `,` $key `,` $value `weights` `(` $query_weight `,` $key_weight `,` $value_weight `)` "
        "(`biases` `(` $query_bias^ `,` $key_bias `,` $value_bias `)`)? (`mask` $atten_mask^)? attr-dict `:` "
        "`(` type($query) `,` type($key) `,` type($value) `weights` `(` type($query_weight) `,` "
        "type($key_weight) `,` type($value_weight) `)` (`biases` `(` type($query_bias)^ `,` type($key_bias) `,` "
        "type($value_bias) `)`)? (`mask` type($atten_mask)^)? `)` `->` type($y)"
    )

    LAYOUTS: ClassVar[tuple[str, ...]] = ("BSH", "SBH")

    @classmethod
    def _group(cls, values: Sequence[SSAValue]) -> list[SSAValue | list[SSAValue]]:
        if len(values) not in (6, 7, 9, 10):
            raise ShapeError(f"takes 6, 7, 9 or 10 operands, got {len(values)}")
        biases = [[v] for v in values[6:9]] if len(values) >= 9 else [[], [], []]
        mask = [values[-1]] if len(values) in (7, 10) else []
        return [*values[:6], *biases, mask]

    @classmethod
    def infer_result_types(cls, operand_types, props):
        if len(operand_types) not in (6, 7, 9, 10):
            raise ShapeError(f"takes 6, 7, 9 or 10 operands, got {len(operand_types)}")
        dtype = _cube_dtype(operand_types, props, "all", range(len(operand_types)))
        if not is_float(dtype):
            raise ShapeError(f"needs floating-point operands, got {dtype}")
        layout, heads = props.str("input_layout"), props.int("head_num")
        if layout not in cls.LAYOUTS:
            raise ShapeError(f"input_layout {layout!r} is not BSH or SBH")
        if heads < 1:
            raise ShapeError(f"head_num {heads} must be >= 1")
        inputs = [shape_of(t) for t in operand_types[:3]]
        weights = [shape_of(t) for t in operand_types[3:6]]
        if any(len(s) != 3 for s in inputs) or any(len(w) != 2 for w in weights):
            raise ShapeError("query, key and value must be 3-D and their weights 2-D")
        (bq, sq), (bk, sk), (bv, sv) = ((s[0], s[1]) if layout == "BSH" else (s[1], s[0]) for s in inputs)
        if not (_agree(bq, bk) and _agree(bq, bv) and _agree(sk, sv)):
            raise ShapeError(f"query, key and value {', '.join(map(shapes.fmt, inputs))} disagree in batch or key length")
        for label, s, w in zip(("query", "key", "value"), inputs, weights):
            if not _agree(s[2], w[0]):
                raise ShapeError(f"{label} has {s[2]} features, its weight {shapes.fmt(w)} takes {w[0]}")
        e, ev = weights[0][1], weights[2][1]
        if not _agree(e, weights[1][1]):
            raise ShapeError(f"query and key weights give {e} and {weights[1][1]} columns")
        if any(n != DYN and n % heads for n in (e, ev)):
            raise ShapeError(f"{e} query/key and {ev} value columns do not split into {heads} heads")
        if len(operand_types) >= 9:
            for label, t, n in zip(("query", "key", "value"), operand_types[6:9], (e, e, ev)):
                if len(shape_of(t)) != 1 or not _agree(shape_of(t)[0], n):
                    raise ShapeError(f"{label}_bias {shapes.fmt(shape_of(t))} is not [{n}]")
        if len(operand_types) in (7, 10):
            scores = (bq, heads, sq, sk)
            mask = shape_of(operand_types[-1])
            try:
                fits = len(mask) <= 4 and shapes.compatible(shapes.broadcast(scores, mask), scores)
            except ShapeError:
                fits = False
            if not fits:
                raise ShapeError(f"atten_mask {shapes.fmt(mask)} does not broadcast to the scores {shapes.fmt(scores)}")
        out = (bq, sq, ev) if layout == "BSH" else (sq, bq, ev)
        return [tensor(dtype, out)]


# --------------------------------------------------------------------------- cube ops


@irdl_op_definition
class Conv2DOp(CubeOp):
    """2-D convolution, NCHW, filter [Cout, Cin/groups, kh, kw] (CANN `Conv2D`).

    `strides` and `dilations` have 4 entries in NCHW order and `pads` is
    [top, bottom, left, right], as in CANN. `offset_x` (an int8 input's
    quantization offset, CANN's attribute of that name) is the value the padding
    holds, 0 without it.
    """

    name = "ascend_graph.conv2d"
    OP_TYPE: ClassVar[str] = "Conv2D"
    x = operand_def(TensorType)
    filter = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    y = result_def(TensorType)
    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    dilations = prop_def(DenseArrayBase)
    groups = prop_def(IntegerAttr)
    offset_x = opt_prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, w = shape_of(operand_types[0]), shape_of(operand_types[1])
        if len(x) != 4 or len(w) != 4:
            raise ShapeError(f"input {shapes.fmt(x)} and filter {shapes.fmt(w)} must both be 4-D")
        strides, pads, dil = props.ints("strides"), props.ints("pads"), props.ints("dilations")
        groups = props.int("groups", 1)
        if len(strides) != 4 or len(pads) != 4 or len(dil) != 4:
            raise ShapeError("strides and dilations need 4 values (NCHW) and pads 4 (top, bottom, left, right)")
        if min(strides) < 1 or min(dil) < 1 or min(pads) < 0 or groups < 1:
            raise ShapeError("strides, dilations and groups must be >= 1 and pads >= 0")
        offset = props.int("offset_x")
        if offset and (dtype_of(operand_types[0]) != IntegerType(8) or not -128 <= offset < 128):
            raise ShapeError(f"offset_x {offset} needs an int8 input and a value in [-128, 127]")
        if x[1] != DYN and x[1] != w[1] * groups:
            raise ShapeError(f"input channels {x[1]} != filter channels {w[1]} x groups {groups}")
        if w[0] != DYN and w[0] % groups:
            raise ShapeError(f"output channels {w[0]} are not divisible by groups {groups}")
        if len(operand_types) > 2 and not shapes.compatible(shape_of(operand_types[2]), (w[0],)):
            raise ShapeError(f"bias shape {shapes.fmt(shape_of(operand_types[2]))} != [{w[0]}]")
        dtype = _cube_dtype(operand_types, props, "input and filter", [0, 1], bias=2)
        h = shapes.window_out(x[2], w[2], strides[2], pads[0], pads[1], dil[2])
        wd = shapes.window_out(x[3], w[3], strides[3], pads[2], pads[3], dil[3])
        return [tensor(dtype, (x[0], w[0], h, wd))]


def _matmul_shape(a: Shape, b: Shape, ta: bool, tb: bool) -> Shape:
    """numpy.matmul's rule, after optional transposes of the last two dims."""
    if not a or not b:
        raise ShapeError("matmul operands must have rank >= 1")
    a1, b1 = len(a) == 1, len(b) == 1
    if a1:
        a = (1, a[0])
    if b1:
        b = (b[0], 1)
    if ta:
        a = a[:-2] + (a[-1], a[-2])
    if tb:
        b = b[:-2] + (b[-1], b[-2])
    if a[-1] != DYN and b[-2] != DYN and a[-1] != b[-2]:
        raise ShapeError(f"contraction dims differ: {shapes.fmt(a)} x {shapes.fmt(b)}")
    batch = shapes.broadcast(a[:-2], b[:-2])
    out = batch + (() if a1 else (a[-2],)) + (() if b1 else (b[-1],))
    return out


@irdl_op_definition
class MatMulV2Op(CubeOp):
    """2-D matrix product with optional transposes and bias (CANN `MatMulV2`)."""

    name = "ascend_graph.matmul_v2"
    OP_TYPE: ClassVar[str] = "MatMulV2"
    x1 = operand_def(TensorType)
    x2 = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    y = result_def(TensorType)
    transpose_x1 = prop_def(BoolAttr)
    transpose_x2 = prop_def(BoolAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        a, b = shape_of(operand_types[0]), shape_of(operand_types[1])
        if len(a) != 2 or len(b) != 2:
            raise ShapeError(f"operands {shapes.fmt(a)} and {shapes.fmt(b)} must be 2-D")
        out = _matmul_shape(a, b, props.bool("transpose_x1"), props.bool("transpose_x2"))
        if len(operand_types) > 2:
            shapes.broadcast(out, shape_of(operand_types[2]))
        return [tensor(_cube_dtype(operand_types, props, "matmul", [0, 1], bias=2), out)]


@irdl_op_definition
class BatchMatMulOp(CubeOp):
    """numpy.matmul with broadcast batch dims and optional transposes (CANN `BatchMatMulV2`)."""

    name = "ascend_graph.batch_matmul"
    OP_TYPE: ClassVar[str] = "BatchMatMulV2"
    x1 = operand_def(TensorType)
    x2 = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    y = result_def(TensorType)
    adj_x1 = prop_def(BoolAttr)
    adj_x2 = prop_def(BoolAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        a, b = shape_of(operand_types[0]), shape_of(operand_types[1])
        if (props.bool("adj_x1") and len(a) < 2) or (props.bool("adj_x2") and len(b) < 2):
            raise ShapeError("a transposed operand must have rank >= 2")
        out = _matmul_shape(a, b, props.bool("adj_x1"), props.bool("adj_x2"))
        if len(operand_types) > 2:
            shapes.broadcast(out, shape_of(operand_types[2]))
        return [tensor(_cube_dtype(operand_types, props, "matmul", [0, 1], bias=2), out)]


@irdl_op_definition
class GemmOp(CubeOp):
    """alpha * op(a) @ op(b) + beta * c (CANN `GEMM`, ONNX `Gemm`)."""

    name = "ascend_graph.gemm"
    OP_TYPE: ClassVar[str] = "GEMM"
    a = operand_def(TensorType)
    b = operand_def(TensorType)
    c = opt_operand_def(TensorType)
    y = result_def(TensorType)
    alpha = prop_def(FloatAttr)
    beta = prop_def(FloatAttr)
    trans_a = prop_def(BoolAttr)
    trans_b = prop_def(BoolAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        a, b = shape_of(operand_types[0]), shape_of(operand_types[1])
        if len(a) != 2 or len(b) != 2:
            raise ShapeError(f"operands {shapes.fmt(a)} and {shapes.fmt(b)} must be 2-D")
        out = _matmul_shape(a, b, props.bool("trans_a"), props.bool("trans_b"))
        if len(operand_types) > 2 and shapes.broadcast(out, shape_of(operand_types[2])) != out:
            raise ShapeError(f"c {shapes.fmt(shape_of(operand_types[2]))} does not broadcast to {shapes.fmt(out)}")
        return [tensor(_cube_dtype(operand_types, props, "gemm", [0, 1], bias=2), out)]


@irdl_op_definition
class FullyConnectionOp(CubeOp):
    """x flattened from `axis` on, times `num_output` rows of w, plus b (CANN `FullyConnection`).

    As CANN defines it (after Caffe's InnerProduct): K is the product of x's dims
    from `axis` on (1 or 2); without `transpose`, w is [num_output, ...] with
    trailing dims multiplying to K (a conv filter [Cout, C, kh, kw] as it is), with
    it w is [K, num_output]; b is [num_output]. The result keeps x's rank, as CANN's
    4-D FullyConnection output does: x's dims before `axis`, num_output, then 1s,
    so a convolution with a 1x1 output and its FullyConnection have one type.
    """

    name = "ascend_graph.fully_connection"
    OP_TYPE: ClassVar[str] = "FullyConnection"
    x = operand_def(TensorType)
    w = operand_def(TensorType)
    b = opt_operand_def(TensorType)
    y = result_def(TensorType)
    num_output = prop_def(IntegerAttr)
    transpose = prop_def(BoolAttr)
    axis = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, w = shape_of(operand_types[0]), shape_of(operand_types[1])
        axis, n = props.int("axis", 1), props.int("num_output")
        if axis not in (1, 2) or axis >= len(x):
            raise ShapeError(f"axis {axis} must be 1 or 2 and below the input rank {len(x)}")
        if n < 1:
            raise ShapeError(f"num_output {n} must be >= 1")
        k = shapes.numel(x[axis:]) if shapes.is_static(x[axis:]) else DYN
        transpose = props.bool("transpose")
        if transpose:
            fits = len(w) == 2 and shapes.compatible(w, (k, n))
        else:
            per_row = shapes.numel(w[1:]) if shapes.is_static(w[1:]) else DYN
            fits = len(w) >= 2 and shapes.compatible((w[0], per_row), (n, k))
        if not fits:
            layout = "[K, num_output]" if transpose else "[num_output, ...] with K values per row"
            raise ShapeError(f"weight {shapes.fmt(w)} is not {layout} for K = {shapes.fmt([k])[1:-1]}, num_output = {n}")
        if len(operand_types) > 2 and not shapes.compatible(shape_of(operand_types[2]), (n,)):
            raise ShapeError(f"bias shape {shapes.fmt(shape_of(operand_types[2]))} != [{n}]")
        dtype = _cube_dtype(operand_types, props, "fully connection", [0, 1], bias=2)
        return [tensor(dtype, x[:axis] + (n,) + (1,) * (len(x) - axis - 1))]


# --------------------------------------------------------------------------- pooling


class PoolOp(AscendOp):
    """Window pooling over H and W of an NCHW tensor.

    `ksize` and `strides` have 2 values (h, w), `pads` 4 (top, bottom, left, right).
    """

    x = operand_def(TensorType)
    y = result_def(TensorType)
    ksize = prop_def(DenseArrayBase)
    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    ceil_mode = prop_def(BoolAttr)
    traits = traits_def(Pure())

    @classmethod
    def dilations(cls, props: Props) -> tuple[int, ...]:
        return (1, 1)

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x = shape_of(operand_types[0])
        k, s, p = props.ints("ksize"), props.ints("strides"), props.ints("pads")
        if len(x) != 4:
            raise ShapeError(f"input must be 4-D NCHW, got {shapes.fmt(x)}")
        if len(k) != 2 or len(s) != 2 or len(p) != 4:
            raise ShapeError("ksize and strides need 2 values (h, w), pads 4 (top, bottom, left, right)")
        if min(k) < 1 or min(s) < 1 or min(p) < 0:
            raise ShapeError("ksize and strides must be >= 1 and pads >= 0")
        d = cls.dilations(props)
        ceil_mode = props.bool("ceil_mode")
        h = shapes.window_out(x[2], k[0], s[0], p[0], p[1], d[0], ceil_mode)
        w = shapes.window_out(x[3], k[1], s[1], p[2], p[3], d[1], ceil_mode)
        return [tensor(dtype_of(operand_types[0]), (x[0], x[1], h, w))]


@irdl_op_definition
class MaxPoolOp(PoolOp):
    """Max pooling with padding and dilation (CANN `MaxPoolV3`)."""

    name = "ascend_graph.max_pool"
    OP_TYPE: ClassVar[str] = "MaxPoolV3"
    dilations_ = opt_prop_def(DenseArrayBase, prop_name="dilations")

    @classmethod
    def dilations(cls, props):
        return props.ints("dilations", (1, 1))


@irdl_op_definition
class AvgPoolOp(PoolOp):
    """Average pooling; `exclusive` leaves the padding out of the divisor (CANN `AvgPoolV2`)."""

    name = "ascend_graph.avg_pool"
    OP_TYPE: ClassVar[str] = "AvgPoolV2"
    exclusive = prop_def(BoolAttr)
    dilations_ = opt_prop_def(DenseArrayBase, prop_name="dilations")

    @classmethod
    def dilations(cls, props):
        return props.ints("dilations", (1, 1))


class GlobalPoolOp(AscendOp):
    x = operand_def(TensorType)
    y = result_def(TensorType)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x = shape_of(operand_types[0])
        if len(x) < 3:
            raise ShapeError(f"input must have rank >= 3, got {shapes.fmt(x)}")
        return [tensor(dtype_of(operand_types[0]), x[:2] + (1,) * (len(x) - 2))]


@irdl_op_definition
class GlobalAveragePoolOp(GlobalPoolOp):
    """Mean over every spatial axis, kept as 1 (CANN `GlobalAveragePool`)."""

    name = "ascend_graph.global_average_pool"
    OP_TYPE: ClassVar[str] = "GlobalAveragePool"


@irdl_op_definition
class GlobalMaxPoolOp(GlobalPoolOp):
    """Maximum over every spatial axis, kept as 1 (CANN `GlobalMaxPool`)."""

    name = "ascend_graph.global_max_pool"
    OP_TYPE: ClassVar[str] = "GlobalMaxPool"


# ----------------------------------------------------------------------- shape ops


@irdl_op_definition
class ReshapeOp(AscendOp):
    """Reshape to `shape`; one -1 is inferred from the element count (CANN `Reshape`)."""

    name = "ascend_graph.reshape"
    OP_TYPE: ClassVar[str] = "Reshape"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    shape = prop_def(DenseArrayBase)
    traits = traits_def(Pure(), FoldsToOperand(), GraphCanonicalization())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        return [tensor(dtype_of(operand_types[0]), shapes.reshape(shape_of(operand_types[0]), props.ints("shape")))]

    def folded_operand(self) -> SSAValue | None:
        return self._unchanged(self.x)


@irdl_op_definition
class FlattenOp(AscendOp):
    """Collapse to 2-D [prod(dims[:axis]), prod(dims[axis:])] (CANN `Flatten`)."""

    name = "ascend_graph.flatten"
    OP_TYPE: ClassVar[str] = "Flatten"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    traits = traits_def(Pure(), FoldsToOperand())

    def folded_operand(self) -> SSAValue | None:
        return self._unchanged(self.x)

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x = shape_of(operand_types[0])
        axis = props.int("axis", 1)
        if not -len(x) <= axis <= len(x):
            raise ShapeError(f"axis {axis} is out of range for rank {len(x)}")
        axis = axis + len(x) if axis < 0 else axis
        outer, inner = x[:axis], x[axis:]
        dims = tuple(DYN if not shapes.is_static(part) else shapes.numel(part) for part in (outer, inner))
        return [tensor(dtype_of(operand_types[0]), dims)]


@irdl_op_definition
class TransposeOp(AscendOp):
    """Permute dimensions: y.shape[i] = x.shape[perm[i]] (CANN `TransposeD`)."""

    name = "ascend_graph.transpose_d"
    OP_TYPE: ClassVar[str] = "TransposeD"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    perm = prop_def(DenseArrayBase)
    traits = traits_def(Pure(), FoldsToOperand())

    def folded_operand(self) -> SSAValue | None:
        identity = list(self.props.ints("perm")) == list(range(len(shape_of(self.x.type))))
        return self._unchanged(self.x) if identity else None

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, perm = shape_of(operand_types[0]), props.ints("perm")
        if sorted(perm) != list(range(len(x))):
            raise ShapeError(f"perm {list(perm)} is not a permutation of 0..{len(x) - 1}")
        return [tensor(dtype_of(operand_types[0]), tuple(x[p] for p in perm))]


@irdl_op_definition
class ConfusionTransposeOp(AscendOp):
    """A TransposeD and a Reshape as one op (CANN `ConfusionTransposeD`): with
    `transpose_first`, reshape(transpose(x, perm), shape), else
    transpose(reshape(x, shape), perm); `shape` may hold one -1, as Reshape's."""

    name = "ascend_graph.confusion_transpose_d"
    OP_TYPE: ClassVar[str] = "ConfusionTransposeD"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    perm = prop_def(DenseArrayBase)
    shape = prop_def(DenseArrayBase)
    transpose_first = prop_def(BoolAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, perm, target = shape_of(operand_types[0]), props.ints("perm"), props.ints("shape")
        if props.bool("transpose_first"):
            moved = _permuted(x, perm)
            out = shapes.reshape(moved, target)
        else:
            out = _permuted(shapes.reshape(x, target), perm)
        return [tensor(dtype_of(operand_types[0]), out)]


def _permuted(x: Shape, perm: Sequence[int]) -> Shape:
    if sorted(perm) != list(range(len(x))):
        raise ShapeError(f"perm {list(perm)} is not a permutation of 0..{len(x) - 1}")
    return tuple(x[p] for p in perm)


@irdl_op_definition
class SqueezeOp(AscendOp):
    """Drop the size-1 dims in `axis` (all size-1 dims when empty) (CANN `Squeeze`)."""

    name = "ascend_graph.squeeze"
    OP_TYPE: ClassVar[str] = "Squeeze"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    axis = prop_def(DenseArrayBase)
    traits = traits_def(Pure(), FoldsToOperand())

    def folded_operand(self) -> SSAValue | None:
        return self._unchanged(self.x)

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x = shape_of(operand_types[0])
        axes = shapes.norm_axes(props.ints("axis"), len(x))
        if not axes:
            if DYN in x:
                raise ShapeError("squeeze without axes needs a static shape")
            axes = tuple(i for i, d in enumerate(x) if d == 1)
        for a in axes:
            if x[a] not in (1, DYN):
                raise ShapeError(f"dimension {a} has size {x[a]}, not 1")
        return [tensor(dtype_of(operand_types[0]), tuple(d for i, d in enumerate(x) if i not in axes))]


@irdl_op_definition
class UnsqueezeOp(AscendOp):
    """Insert size-1 dims at `axes` of the output (CANN `Unsqueeze`)."""

    name = "ascend_graph.unsqueeze"
    OP_TYPE: ClassVar[str] = "Unsqueeze"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    axes = prop_def(DenseArrayBase)
    traits = traits_def(Pure(), FoldsToOperand())

    def folded_operand(self) -> SSAValue | None:
        return self._unchanged(self.x)

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x = shape_of(operand_types[0])
        rank = len(x) + len(props.ints("axes"))
        axes = shapes.norm_axes(props.ints("axes"), rank)
        rest = iter(x)
        return [tensor(dtype_of(operand_types[0]), tuple(1 if i in axes else next(rest) for i in range(rank)))]


@irdl_op_definition
class ConcatOp(AscendOp):
    """Join along `concat_dim` (CANN `ConcatD`)."""

    name = "ascend_graph.concat_d"
    OP_TYPE: ClassVar[str] = "ConcatD"
    x = var_operand_def(TensorType)
    y = result_def(TensorType)
    concat_dim = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        if not operand_types:
            raise ShapeError("needs at least one input")
        dtype = _same(operand_types, "all")
        first = shape_of(operand_types[0])
        axis = shapes.norm_axis(props.int("concat_dim"), len(first), "concat_dim")
        total = 0
        for t in operand_types:
            s = shape_of(t)
            if len(s) != len(first) or not shapes.compatible(s[:axis] + s[axis + 1 :], first[:axis] + first[axis + 1 :]):
                raise ShapeError(f"input shapes {shapes.fmt(first)} and {shapes.fmt(s)} differ outside axis {axis}")
            total = DYN if DYN in (total, s[axis]) else total + s[axis]
        return [tensor(dtype, first[:axis] + (total,) + first[axis + 1 :])]


class SplitBase(AscendOp):
    x = operand_def(TensorType)
    y = var_result_def(TensorType)
    split_dim = prop_def(IntegerAttr)
    num_split = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def sizes(cls, dim: int, props: Props) -> tuple[int, ...]:
        raise NotImplementedError

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x = shape_of(operand_types[0])
        axis = shapes.norm_axis(props.int("split_dim"), len(x), "split_dim")
        sizes = cls.sizes(x[axis], props)
        return [tensor(dtype_of(operand_types[0]), x[:axis] + (s,) + x[axis + 1 :]) for s in sizes]


@irdl_op_definition
class SplitOp(SplitBase):
    """Split into `num_split` equal parts along `split_dim` (CANN `SplitD`)."""

    name = "ascend_graph.split_d"
    OP_TYPE: ClassVar[str] = "SplitD"

    @classmethod
    def sizes(cls, dim, props):
        n = props.int("num_split")
        if n < 1:
            raise ShapeError(f"num_split {n} must be >= 1")
        if dim == DYN:
            return (DYN,) * n
        if dim % n:
            raise ShapeError(f"dimension {dim} does not split into {n} equal parts")
        return (dim // n,) * n


@irdl_op_definition
class SplitVOp(SplitBase):
    """Split into parts of `size_splits` along `split_dim` (CANN `SplitVD`)."""

    name = "ascend_graph.split_v_d"
    OP_TYPE: ClassVar[str] = "SplitVD"
    size_splits = prop_def(DenseArrayBase)

    @classmethod
    def sizes(cls, dim, props):
        sizes = props.ints("size_splits")
        if len(sizes) != props.int("num_split"):
            raise ShapeError(f"num_split {props.int('num_split')} != {len(sizes)} size_splits")
        if min(sizes, default=0) < 0:
            raise ShapeError(f"size_splits {list(sizes)} has a negative size")
        if dim != DYN and sum(sizes) != dim:
            raise ShapeError(f"size_splits {list(sizes)} do not add up to the dimension {dim}")
        return sizes


@irdl_op_definition
class StridedSliceOp(AscendOp):
    """Slice every dim by begin:end:strides, all normalised (CANN `StridedSliceD`).

    The importer resolves ONNX's negative and out-of-range indices, so `begin`,
    `end` and `strides` have one entry per dim and `end` may be -1 only when a
    negative stride runs past index 0.
    """

    name = "ascend_graph.strided_slice_d"
    OP_TYPE: ClassVar[str] = "StridedSliceD"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    begin = prop_def(DenseArrayBase)
    end = prop_def(DenseArrayBase)
    strides = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x = shape_of(operand_types[0])
        begin, end, strides = props.ints("begin"), props.ints("end"), props.ints("strides")
        if not len(begin) == len(end) == len(strides) == len(x):
            raise ShapeError(f"begin, end and strides need {len(x)} entries each")
        out = []
        for d, b, e, s in zip(x, begin, end, strides):
            if s == 0:
                raise ShapeError("a stride is 0")
            if d == DYN:
                out.append(DYN)
                continue
            out.append(len(range(b, e, s)))
        return [tensor(dtype_of(operand_types[0]), tuple(out))]


@irdl_op_definition
class GatherOp(AscendOp):
    """Take slices of x along `axis` at `indices` (CANN `GatherV2`)."""

    name = "ascend_graph.gather_v2"
    OP_TYPE: ClassVar[str] = "GatherV2"
    x = operand_def(TensorType)
    indices = operand_def(TensorType)
    y = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, idx = shape_of(operand_types[0]), shape_of(operand_types[1])
        if not isinstance(dtype_of(operand_types[1]), IntegerType):
            raise ShapeError("indices must be integers")
        axis = shapes.norm_axis(props.int("axis"), len(x))
        return [tensor(dtype_of(operand_types[0]), x[:axis] + idx + x[axis + 1 :])]


@irdl_op_definition
class GatherElementsOp(AscendOp):
    """y[i][j] = x[index[i][j]][j] along `axis` (CANN `GatherElements`)."""

    name = "ascend_graph.gather_elements"
    OP_TYPE: ClassVar[str] = "GatherElements"
    x = operand_def(TensorType)
    indices = operand_def(TensorType)
    y = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, idx = shape_of(operand_types[0]), shape_of(operand_types[1])
        if len(x) != len(idx):
            raise ShapeError(f"indices rank {len(idx)} != data rank {len(x)}")
        shapes.norm_axis(props.int("axis"), len(x))
        return [tensor(dtype_of(operand_types[0]), idx)]


@irdl_op_definition
class PadOp(AscendOp):
    """Pad each dim by [before, after] pairs, flattened in `paddings` (CANN `PadV3`).

    `mode` is constant, reflect, edge or wrap; `constant_value` fills in constant mode.
    """

    name = "ascend_graph.pad"
    OP_TYPE: ClassVar[str] = "PadV3"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    paddings = prop_def(DenseArrayBase)
    mode = prop_def(StringAttr)
    constant_value = prop_def(FloatAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, p = shape_of(operand_types[0]), props.ints("paddings")
        if len(p) != 2 * len(x):
            raise ShapeError(f"paddings need {2 * len(x)} values (before, after per dim), got {len(p)}")
        if props.str("mode") not in ("constant", "reflect", "edge", "wrap"):
            raise ShapeError(f"mode {props.str('mode')!r} is not constant, reflect, edge or wrap")
        out = tuple(DYN if d == DYN else d + p[2 * i] + p[2 * i + 1] for i, d in enumerate(x))
        if any(d != DYN and d < 0 for d in out):
            raise ShapeError(f"negative padding leaves a negative size {shapes.fmt(out)}")
        return [tensor(dtype_of(operand_types[0]), out)]


@irdl_op_definition
class ResizeOp(AscendOp):
    """Resize to `sizes` (CANN `Resize`), with ONNX's mode, coordinate transform and rounding;
    `antialias` widens a linear or cubic kernel by the factor it shrinks an axis by. With
    tf_crop_and_resize, `roi` holds every dim's crop start then every dim's crop end, as
    fractions of the input, and samples outside the input take `extrapolation_value`."""

    name = "ascend_graph.resize"
    OP_TYPE: ClassVar[str] = "Resize"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    sizes = prop_def(DenseArrayBase)
    scales = prop_def(DenseArrayBase)
    mode = prop_def(StringAttr)
    coordinate_transformation_mode = prop_def(StringAttr)
    nearest_mode = prop_def(StringAttr)
    cubic_coeff_a = prop_def(FloatAttr)
    exclude_outside = prop_def(BoolAttr)
    extrapolation_value = prop_def(FloatAttr)
    antialias = opt_prop_def(BoolAttr)
    roi = opt_prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, sizes = shape_of(operand_types[0]), props.ints("sizes")
        if len(sizes) != len(x) or len(props.ints("scales")) != len(x):
            raise ShapeError(f"sizes and scales need {len(x)} entries")
        crop = props.str("coordinate_transformation_mode") == "tf_crop_and_resize"
        if crop != props.has("roi"):
            raise ShapeError("roi is given exactly when coordinate_transformation_mode is tf_crop_and_resize")
        if crop and len(props.ints("roi")) != 2 * len(x):
            raise ShapeError(f"roi needs {2 * len(x)} entries (every dim's start, then every dim's end)")
        if props.str("mode") not in ("nearest", "linear", "cubic"):
            raise ShapeError(f"mode {props.str('mode')!r} is not nearest, linear or cubic")
        return [tensor(dtype_of(operand_types[0]), sizes)]


@irdl_op_definition
class ExpandOp(AscendOp):
    """Broadcast x to `shape` with numpy rules (CANN `ExpandD`)."""

    name = "ascend_graph.expand_d"
    OP_TYPE: ClassVar[str] = "ExpandD"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    shape = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        return [tensor(dtype_of(operand_types[0]), shapes.broadcast(shape_of(operand_types[0]), props.ints("shape")))]


@irdl_op_definition
class TileOp(AscendOp):
    """Repeat x `multiples` times along each dim (CANN `TileD`)."""

    name = "ascend_graph.tile_d"
    OP_TYPE: ClassVar[str] = "TileD"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    multiples = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, m = shape_of(operand_types[0]), props.ints("multiples")
        if len(m) != len(x) or min(m, default=0) < 0:
            raise ShapeError(f"multiples {list(m)} need {len(x)} non-negative entries")
        return [tensor(dtype_of(operand_types[0]), tuple(DYN if d == DYN else d * k for d, k in zip(x, m)))]


@irdl_op_definition
class DepthToSpaceOp(AscendOp):
    """Move channel blocks into space (CANN `DepthToSpace`); mode DCR or CRD."""

    name = "ascend_graph.depth_to_space"
    OP_TYPE: ClassVar[str] = "DepthToSpace"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    block_size = prop_def(IntegerAttr)
    mode = prop_def(StringAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        n, c, h, w = shape_of(operand_types[0])
        b = props.int("block_size")
        if c != DYN and c % (b * b):
            raise ShapeError(f"channels {c} are not divisible by block_size^2 = {b * b}")
        return [tensor(dtype_of(operand_types[0]), (n, _scaled(c, 1, b * b), _scaled(h, b), _scaled(w, b)))]


@irdl_op_definition
class SpaceToDepthOp(AscendOp):
    """Move spatial blocks into channels (CANN `SpaceToDepth`)."""

    name = "ascend_graph.space_to_depth"
    OP_TYPE: ClassVar[str] = "SpaceToDepth"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    block_size = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        n, c, h, w = shape_of(operand_types[0])
        b = props.int("block_size")
        if any(d != DYN and d % b for d in (h, w)):
            raise ShapeError(f"spatial dims {shapes.fmt((h, w))[1:-1].replace(', ', 'x')} are not divisible by block_size {b}")
        return [tensor(dtype_of(operand_types[0]), (n, _scaled(c, b * b), _scaled(h, 1, b), _scaled(w, 1, b)))]


def _scaled(dim: int, times: int, per: int = 1) -> int:
    """`dim * times // per`, a dynamic dim staying dynamic (DYN is a number: no arithmetic on it)."""
    return DYN if dim == DYN else dim * times // per


# ----------------------------------------------------------------------- dynamic shapes


@irdl_op_definition
class ShapeOp(AscendOp):
    """The dims of x as a 1-D int64 tensor (CANN `Shape`). Only a dynamic shape is an
    op: the importer folds a static one into a constant."""

    name = "ascend_graph.shape"
    OP_TYPE: ClassVar[str] = "Shape"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        return [tensor(i64, (len(shape_of(operand_types[0])),))]


@irdl_op_definition
class DynamicReshapeOp(AscendOp):
    """Reshape to the dims a 1-D integer tensor holds at run time: ONNX's 0 copies the
    input's dim (unless `allowzero`) and one -1 takes what is left. Its length gives the
    rank; every dim is unknown until then. CANN's `Reshape` takes its shape as an input
    too, but our `Reshape` (`ReshapeOp`) holds a static one as a property, and an op
    type names one operand list (op info, fusion patterns): hence a type of its own.
    `dims` (-1 for a dim known only at run time) are the dims the importer proved from
    the model's symbolic dims (`ge.frontend.symbolic`): the result's static dims."""

    name = "ascend_graph.reshape_dynamic"
    OP_TYPE: ClassVar[str] = "DynamicReshape"
    x = operand_def(TensorType)
    shape = operand_def(TensorType)
    y = result_def(TensorType)
    allowzero = opt_prop_def(BoolAttr)
    dims = opt_prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        dims = shape_of(operand_types[1])
        if not isinstance(dtype_of(operand_types[1]), IntegerType) or len(dims) != 1 or dims[0] == DYN:
            raise ShapeError(f"the shape must be a 1-D integer tensor of known length, not {shapes.fmt(dims)}")
        return [tensor(dtype_of(operand_types[0]), _proved(props, (DYN,) * dims[0]))]


def _proved(props: Props, inferred: Shape) -> Shape:
    """`inferred` refined by the optional `dims` property (-1 for a dim known at run time
    only): the dims the importer proved from the model's symbolic dims."""
    known = props.ints("dims", (-1,) * len(inferred))
    if len(known) != len(inferred) or min(known, default=0) < -1:
        raise ShapeError(f"dims {list(known)} need {len(inferred)} entries, each a size or -1")
    if any(d not in (-1, i) and i != DYN for d, i in zip(known, inferred)):
        raise ShapeError(f"dims {list(known)} contradict the inferred {shapes.fmt(inferred)}")
    return tuple(i if d == -1 else d for d, i in zip(known, inferred))


def _vector(t: Attribute, what: str) -> int:
    """The length of a 1-D integer tensor of known length (an operand holding dims)."""
    dims = shape_of(t)
    if not isinstance(dtype_of(t), IntegerType) or len(dims) != 1 or dims[0] == DYN:
        raise ShapeError(f"{what} must be a 1-D integer tensor of known length, not {shapes.fmt(dims)}")
    return dims[0]


@irdl_op_definition
class RangeOp(AscendOp):
    """start, start + delta, ... below limit (CANN `Range`), its scalar bounds read at run
    time: an ONNX Range whose bounds the graph computes from the model's dynamic dims (a
    Range of constants is folded at import)."""

    name = "ascend_graph.range"
    OP_TYPE: ClassVar[str] = "Range"
    start = operand_def(TensorType)
    limit = operand_def(TensorType)
    delta = operand_def(TensorType)
    y = result_def(TensorType)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        if any(shape_of(t) != () for t in operand_types):
            raise ShapeError(f"start, limit and delta must be scalars, not {', '.join(shapes.fmt(shape_of(t)) for t in operand_types)}")
        if len({dtype_of(t) for t in operand_types}) != 1:
            raise ShapeError("start, limit and delta must have one element type")
        return [tensor(dtype_of(operand_types[0]), (DYN,))]


@irdl_op_definition
class BroadcastToOp(AscendOp):
    """x broadcast with the dims a 1-D integer tensor holds at run time (CANN `BroadcastTo`;
    ONNX Expand, whose broadcast goes both ways): an Expand to dims the graph computes
    from the model's dynamic dims. `dims` as DynamicReshape's."""

    name = "ascend_graph.broadcast_to"
    OP_TYPE: ClassVar[str] = "BroadcastTo"
    x = operand_def(TensorType)
    shape = operand_def(TensorType)
    y = result_def(TensorType)
    dims = opt_prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        rank = _vector(operand_types[1], "the shape")
        return [tensor(dtype_of(operand_types[0]), _proved(props, shapes.broadcast(shape_of(operand_types[0]), (DYN,) * rank)))]


@irdl_op_definition
class StridedSliceV2Op(AscendOp):
    """ONNX Slice whose starts or ends are read at run time (CANN `StridedSliceV2`): the
    graph computes them from the model's dynamic dims. begin, end, axes and strides are
    1-D of one length; `dims` as DynamicReshape's (the axes not sliced, and what the
    importer proved of the others)."""

    name = "ascend_graph.strided_slice_v2"
    OP_TYPE: ClassVar[str] = "StridedSliceV2"
    x = operand_def(TensorType)
    begin = operand_def(TensorType)
    end = operand_def(TensorType)
    axes = operand_def(TensorType)
    strides = operand_def(TensorType)
    y = result_def(TensorType)
    dims = opt_prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        lengths = {_vector(t, what) for t, what in zip(operand_types[1:], ("begin", "end", "axes", "strides"))}
        if len(lengths) != 1:
            raise ShapeError(f"begin, end, axes and strides must have one length, not {sorted(lengths)}")
        return [tensor(dtype_of(operand_types[0]), _proved(props, (DYN,) * len(shape_of(operand_types[0]))))]


# -------------------------------------------------------------- indexing and signal ops


def _integer_indices(t: Attribute, what: str = "indices") -> None:
    if not isinstance(dtype_of(t), IntegerType) or dtype_of(t) == i1:
        raise ShapeError(f"{what} must be integers, got {dtype_of(t)}")


def _index_depth(data: Shape, indices: Shape, batch: int) -> int:
    """The index tuple length of a GatherNd/ScatterNd: the last dim of `indices`, static."""
    if not indices:
        raise ShapeError("indices must have rank >= 1")
    k = indices[-1]
    if k == DYN:
        raise ShapeError("the last dim of indices (the index depth) must be static")
    if not 0 <= batch < min(len(indices), len(data)):
        raise ShapeError(f"batch_dims {batch} must be below the ranks of data ({len(data)}) and indices ({len(indices)})")
    if not 1 <= k <= len(data) - batch:
        raise ShapeError(f"index depth {k} must be in [1, {len(data) - batch}] (data rank {len(data)} - batch_dims {batch})")
    if not shapes.compatible(data[:batch], indices[:batch]):
        raise ShapeError(f"batch dims of data {shapes.fmt(data[:batch])} and indices {shapes.fmt(indices[:batch])} differ")
    return k


SCATTER_REDUCTIONS = ("none", "add", "mul", "max", "min")


def _reduction(props: Props) -> None:
    if props.str("reduction", "none") not in SCATTER_REDUCTIONS:
        raise ShapeError(f"reduction {props.str('reduction')!r} is not one of {', '.join(SCATTER_REDUCTIONS)}")


@irdl_op_definition
class GatherNdOp(AscendOp):
    """y = x[indices[..., :]] after `batch_dims` shared leading dims (CANN `GatherNd`)."""

    name = "ascend_graph.gather_nd"
    OP_TYPE: ClassVar[str] = "GatherNd"
    x = operand_def(TensorType)
    indices = operand_def(TensorType)
    y = result_def(TensorType)
    batch_dims = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, idx = shape_of(operand_types[0]), shape_of(operand_types[1])
        _integer_indices(operand_types[1])
        k = _index_depth(x, idx, props.int("batch_dims"))
        return [tensor(dtype_of(operand_types[0]), idx[:-1] + x[props.int("batch_dims") + k :])]


@irdl_op_definition
class ScatterNdUpdateOp(AscendOp):
    """A copy of var with var[indices[..., :]] combined with updates by `reduction`
    (none, add, mul, max, min): ONNX ScatterND (CANN `ScatterNdUpdate` and its
    ScatterNdAdd/Mul/Max/Min siblings in one op)."""

    name = "ascend_graph.scatter_nd_update"
    OP_TYPE: ClassVar[str] = "ScatterNdUpdate"
    var = operand_def(TensorType)
    indices = operand_def(TensorType)
    updates = operand_def(TensorType)
    y = result_def(TensorType)
    reduction = prop_def(StringAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        var, idx, upd = (shape_of(t) for t in operand_types)
        _integer_indices(operand_types[1])
        _reduction(props)
        _same(operand_types, "var and updates", (0, 2))
        want = idx[:-1] + var[_index_depth(var, idx, 0) :]
        if not shapes.compatible(upd, want):
            raise ShapeError(f"updates have shape {shapes.fmt(upd)}, expected {shapes.fmt(want)}")
        return [operand_types[0]]


@irdl_op_definition
class ScatterElementsOp(AscendOp):
    """A copy of data with data[.., indices[i][j], ..] (along `axis`) combined with
    updates[i][j] by `reduction` (CANN `ScatterElements`)."""

    name = "ascend_graph.scatter_elements"
    OP_TYPE: ClassVar[str] = "ScatterElements"
    data = operand_def(TensorType)
    indices = operand_def(TensorType)
    updates = operand_def(TensorType)
    y = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    reduction = prop_def(StringAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        data, idx, upd = (shape_of(t) for t in operand_types)
        _integer_indices(operand_types[1])
        _reduction(props)
        _same(operand_types, "data and updates", (0, 2))
        if len(idx) != len(data) or not shapes.compatible(idx, upd):
            raise ShapeError(
                f"indices {shapes.fmt(idx)} and updates {shapes.fmt(upd)} must have one shape of data's rank {len(data)}"
            )
        shapes.norm_axis(props.int("axis"), len(data))
        return [operand_types[0]]


@irdl_op_definition
class TensorScatterOp(AscendOp):
    """A KV-cache update (ONNX TensorScatter-24; GE has no such op type): a copy of
    past_cache with update written along `axis` from write_indices[b] on for each
    batch b (zeros when absent), wrapping modulo the cache length in `circular` mode."""

    name = "ascend_graph.tensor_scatter"
    OP_TYPE: ClassVar[str] = "TensorScatter"
    past_cache = operand_def(TensorType)
    update = operand_def(TensorType)
    write_indices = opt_operand_def(TensorType)
    y = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    mode = prop_def(StringAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        cache, upd = shape_of(operand_types[0]), shape_of(operand_types[1])
        _same(operand_types, "past_cache and update", (0, 1))
        if props.str("mode") not in ("linear", "circular"):
            raise ShapeError(f"mode {props.str('mode')!r} is not linear or circular")
        if len(cache) != len(upd) or len(cache) < 2:
            raise ShapeError(f"past_cache {shapes.fmt(cache)} and update {shapes.fmt(upd)} need one rank >= 2")
        axis = shapes.norm_axis(props.int("axis"), len(cache))
        if axis == 0:
            raise ShapeError("axis 0 is the batch axis, which cannot be the sequence axis")
        off_axis = [(c, u) for i, (c, u) in enumerate(zip(cache, upd)) if i != axis]
        if not all(shapes.compatible((c,), (u,)) for c, u in off_axis) or DYN not in (cache[axis], upd[axis]) and upd[axis] > cache[axis]:
            raise ShapeError(f"update {shapes.fmt(upd)} does not fit past_cache {shapes.fmt(cache)} along axis {axis}")
        if len(operand_types) > 2:
            _integer_indices(operand_types[2], "write_indices")
            if not shapes.compatible(shape_of(operand_types[2]), cache[:1]):
                raise ShapeError(f"write_indices {shapes.fmt(shape_of(operand_types[2]))} must have shape [{cache[0]}] (the batch)")
        return [operand_types[0]]


@irdl_op_definition
class ReverseSequenceOp(AscendOp):
    """Reverse the first seq_lengths[b] elements along `seq_dim` of each batch b along
    `batch_dim` (CANN `ReverseSequence`)."""

    name = "ascend_graph.reverse_sequence"
    OP_TYPE: ClassVar[str] = "ReverseSequence"
    x = operand_def(TensorType)
    seq_lengths = operand_def(TensorType)
    y = result_def(TensorType)
    batch_dim = prop_def(IntegerAttr)
    seq_dim = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, lengths = shape_of(operand_types[0]), shape_of(operand_types[1])
        _integer_indices(operand_types[1], "seq_lengths")
        if len(x) < 2:
            raise ShapeError(f"input must have rank >= 2, got {shapes.fmt(x)}")
        batch = shapes.norm_axis(props.int("batch_dim"), len(x), "batch_dim")
        seq = shapes.norm_axis(props.int("seq_dim"), len(x), "seq_dim")
        if batch == seq:
            raise ShapeError(f"batch_dim and seq_dim are both {batch}")
        if len(lengths) != 1 or not shapes.compatible(lengths, (x[batch],)):
            raise ShapeError(f"seq_lengths has shape {shapes.fmt(lengths)}, expected [{x[batch]}] (the batch)")
        return [operand_types[0]]


def _signal(x: Shape, what: str) -> None:
    if len(x) < 3 or x[-1] not in (1, 2):
        raise ShapeError(f"{what} must be [batch, ..., 1 or 2] (real, or complex as (re, im)), got {shapes.fmt(x)}")


@irdl_op_definition
class DFTOp(AscendOp):
    """The discrete Fourier transform along `axis` of `length` points (the signal cut
    or zero-padded to it), complex as a last dim (re, im) (ONNX DFT; GE has no AI
    Core DFT in the releases modelled). `inverse` divides by the length; `onesided`
    keeps bins 0..length/2, and with `inverse` reads those and writes a real signal."""

    name = "ascend_graph.dft"
    OP_TYPE: ClassVar[str] = "DFT"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    length = prop_def(IntegerAttr)
    inverse = prop_def(BoolAttr)
    onesided = prop_def(BoolAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x = shape_of(operand_types[0])
        _signal(x, "input")
        if not is_float(dtype_of(operand_types[0])):
            raise ShapeError(f"needs a floating-point input, got {dtype_of(operand_types[0])}")
        axis, n = props.int("axis"), props.int("length")
        if not 0 <= axis <= len(x) - 2:
            raise ShapeError(f"axis {axis} must be in [0, {len(x) - 2}] (not the (re, im) dim)")
        if n < 1:
            raise ShapeError(f"length {n} must be positive")
        inverse, onesided = props.bool("inverse"), props.bool("onesided")
        bins = n // 2 + 1 if onesided and not inverse else n
        out = x[:axis] + (bins,) + x[axis + 1 : -1] + (1 if inverse and onesided else 2,)
        return [tensor(dtype_of(operand_types[0]), out)]


@irdl_op_definition
class STFTOp(AscendOp):
    """The short-time Fourier transform of signal [batch, length, 1 or 2]: frames of
    `frame_length` every `frame_step`, times the window when given, each a DFT
    (ONNX STFT): [batch, frames, bins, 2], bins halved by `onesided`."""

    name = "ascend_graph.stft"
    OP_TYPE: ClassVar[str] = "STFT"
    signal = operand_def(TensorType)
    window = opt_operand_def(TensorType)
    y = result_def(TensorType)
    frame_step = prop_def(IntegerAttr)
    frame_length = prop_def(IntegerAttr)
    onesided = prop_def(BoolAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x = shape_of(operand_types[0])
        if len(x) != 3 or x[-1] not in (1, 2):
            raise ShapeError(f"signal must be [batch, length, 1 or 2], got {shapes.fmt(x)}")
        if not is_float(dtype_of(operand_types[0])):
            raise ShapeError(f"needs a floating-point signal, got {dtype_of(operand_types[0])}")
        step, n = props.int("frame_step"), props.int("frame_length")
        if step < 1 or n < 1:
            raise ShapeError(f"frame_step {step} and frame_length {n} must be positive")
        if len(operand_types) > 1:
            _same(operand_types, "signal and window")
            if not shapes.compatible(shape_of(operand_types[1]), (n,)):
                raise ShapeError(f"window has shape {shapes.fmt(shape_of(operand_types[1]))}, expected [{n}] (frame_length)")
        if x[1] != DYN and x[1] < n:
            raise ShapeError(f"the signal's {x[1]} samples are fewer than frame_length {n}")
        frames = DYN if x[1] == DYN else 1 + (x[1] - n) // step
        bins = n // 2 + 1 if props.bool("onesided") else n
        return [tensor(dtype_of(operand_types[0]), (x[0], frames, bins, 2))]


# ------------------------------------------------------------ losses and normalisations

_REDUCTIONS = ("none", "sum", "mean")


def _float_input(operand_types: Sequence[Attribute], what: str) -> Attribute:
    dtype = dtype_of(operand_types[0])
    if not is_float(dtype):
        raise ShapeError(f"{what} must be floating-point, got {dtype}")
    return dtype


def _loss_result(operand_types: Sequence[Attribute], props: Props) -> TensorType:
    """The loss of [N, C, d1, ..., dk] scores against [N, d1, ..., dk] class indices:
    that shape with reduction "none", a scalar with "sum" and "mean"."""
    dtype = _float_input(operand_types, "the input")
    x, target = shape_of(operand_types[0]), shape_of(operand_types[1])
    if len(x) < 2:
        raise ShapeError(f"the input {shapes.fmt(x)} must have rank >= 2 ([N, C, d1, ...])")
    if not isinstance(dtype_of(operand_types[1]), IntegerType):
        raise ShapeError(f"the target must hold integer class indices, got {dtype_of(operand_types[1])}")
    if not shapes.compatible(target, x[:1] + x[2:]):
        raise ShapeError(f"the target {shapes.fmt(target)} is not the input {shapes.fmt(x)} without its class dim 1")
    if len(operand_types) > 2:
        _same(operand_types, "the input and weight", [0, 2])
        if not shapes.compatible(shape_of(operand_types[2]), (x[1],)):
            raise ShapeError(f"the weight {shapes.fmt(shape_of(operand_types[2]))} is not [{x[1]}] (one per class)")
    reduction = props.str("reduction")
    if reduction not in _REDUCTIONS:
        raise ShapeError(f"reduction {reduction!r} is not none, sum or mean")
    return tensor(dtype, x[:1] + x[2:] if reduction == "none" else ())


@irdl_op_definition
class NLLLossOp(AscendOp):
    """The negative log-likelihood loss (CANN `NLLLoss`, ONNX NegativeLogLikelihoodLoss):
    loss[n, d] = -x[n, target[n, d], d] * weight[target[n, d]], and 0 (with weight 0)
    where target is `ignore_index`; reduced by `reduction`: none, sum, or mean (the sum
    over the sum of the weights taken)."""

    name = "ascend_graph.nll_loss"
    OP_TYPE: ClassVar[str] = "NLLLoss"
    x = operand_def(TensorType)
    target = operand_def(TensorType)
    weight = opt_operand_def(TensorType)
    y = result_def(TensorType)
    reduction = prop_def(StringAttr)
    ignore_index = opt_prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        return [_loss_result(operand_types, props)]


@irdl_op_definition
class SoftmaxCrossEntropyLossOp(AscendOp):
    """The softmax cross-entropy loss (CANN `SoftmaxCrossEntropyLoss`): log_prob is the
    log-softmax of the scores x over the classes (dim 1), y its NLLLoss against the
    labels, with the same weight, `ignore_index` and `reduction`."""

    name = "ascend_graph.softmax_cross_entropy_loss"
    OP_TYPE: ClassVar[str] = "SoftmaxCrossEntropyLoss"
    x = operand_def(TensorType)
    labels = operand_def(TensorType)
    weight = opt_operand_def(TensorType)
    y = result_def(TensorType)
    log_prob = result_def(TensorType)
    reduction = prop_def(StringAttr)
    ignore_index = opt_prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        return [_loss_result(operand_types, props), operand_types[0]]


@irdl_op_definition
class RmsNormOp(AscendOp):
    """x / sqrt(mean(x^2) + epsilon) * gamma, the mean over the axes from begin_norm_axis
    on; gamma broadcasts to those axes (CANN `RmsNorm`)."""

    name = "ascend_graph.rms_norm"
    OP_TYPE: ClassVar[str] = "RmsNorm"
    x = operand_def(TensorType)
    gamma = operand_def(TensorType)
    y = result_def(TensorType)
    begin_norm_axis = prop_def(IntegerAttr)
    epsilon = prop_def(FloatAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        _float_input(operand_types, "the input")
        _same(operand_types, "the input and gamma")
        x, gamma = shape_of(operand_types[0]), shape_of(operand_types[1])
        normalised = x[shapes.norm_axis(props.int("begin_norm_axis"), len(x), "begin_norm_axis") :]
        if len(gamma) > len(normalised) or not shapes.compatible(shapes.broadcast(normalised, gamma), normalised):
            raise ShapeError(
                f"gamma {shapes.fmt(gamma)} does not broadcast to the normalised dims {shapes.fmt(normalised)}"
            )
        return [operand_types[0]]


@irdl_op_definition
class LpNormOp(ReduceOp):
    """The p-norm over axes (CANN `LpNorm`): sum(|x|) for p = 1, sqrt(sum(x^2)) for p = 2."""

    name = "ascend_graph.lp_norm"
    OP_TYPE: ClassVar[str] = "LpNorm"
    p = prop_def(IntegerAttr)

    @classmethod
    def infer_result_types(cls, operand_types, props):
        _float_input(operand_types, "the input")
        if props.int("p") not in (1, 2):
            raise ShapeError(f"p {props.int('p')} is not 1 or 2")
        return super().infer_result_types(operand_types, props)


@irdl_op_definition
class DivNoNanOp(BinaryOp):
    """x1 / x2, and 0 where x2 is 0 (CANN `DivNoNan`): LpNormalization's zero vectors."""

    name = "ascend_graph.div_no_nan"
    OP_TYPE: ClassVar[str] = "DivNoNan"


@irdl_op_definition
class GroupNormOp(AscendOp):
    """Normalise each of `num_groups` groups of channels (dim 1) of each sample over its
    channels and spatial dims (biased variance), then gamma * y + beta per channel
    (CANN `GroupNorm`, inference)."""

    name = "ascend_graph.group_norm"
    OP_TYPE: ClassVar[str] = "GroupNorm"
    x = operand_def(TensorType)
    gamma = operand_def(TensorType)
    beta = operand_def(TensorType)
    y = result_def(TensorType)
    num_groups = prop_def(IntegerAttr)
    epsilon = prop_def(FloatAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        _float_input(operand_types, "the input")
        _same(operand_types, "all")
        x, groups = shape_of(operand_types[0]), props.int("num_groups")
        if len(x) < 2:
            raise ShapeError(f"the input {shapes.fmt(x)} must have rank >= 2 ([N, C, ...])")
        if groups < 1 or (x[1] != DYN and x[1] % groups):
            raise ShapeError(f"the {x[1]} channels do not split into num_groups {groups}")
        for label, t in zip(("gamma", "beta"), operand_types[1:]):
            if not shapes.compatible(shape_of(t), (x[1],)):
                raise ShapeError(f"{label} has shape {shapes.fmt(shape_of(t))}, expected [{x[1]}] (the channels)")
        return [operand_types[0]]


@irdl_op_definition
class MVNV2Op(AscendOp):
    """Mean-variance normalisation over `axes` (CANN `MVNV2`), as ONNX defines it:
    (x - mean) / (sqrt(mean(x^2) - mean^2) + eps), eps added to the deviation."""

    name = "ascend_graph.mvn_v2"
    OP_TYPE: ClassVar[str] = "MVNV2"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    axes = prop_def(DenseArrayBase)
    eps = prop_def(FloatAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        _float_input(operand_types, "the input")
        shapes.norm_axes(props.ints("axes"), len(shape_of(operand_types[0])))
        return [operand_types[0]]


@irdl_op_definition
class LRNOp(AscendOp):
    """Local response normalisation across channels (CANN `LRN`, ONNX's definition):
    x / (bias + alpha / size * sum of x^2 over the channels c - (size-1)//2 to
    c + size//2) ** beta."""

    name = "ascend_graph.lrn"
    OP_TYPE: ClassVar[str] = "LRN"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    size = prop_def(IntegerAttr)
    alpha = prop_def(FloatAttr)
    beta = prop_def(FloatAttr)
    bias = prop_def(FloatAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        _float_input(operand_types, "the input")
        if len(shape_of(operand_types[0])) < 2:
            raise ShapeError(f"the input {shapes.fmt(shape_of(operand_types[0]))} must have rank >= 2 ([N, C, ...])")
        if props.int("size") < 1:
            raise ShapeError(f"size {props.int('size')} must be >= 1")
        return [operand_types[0]]


# -------------------------------------------------------------------------- spatial ops


def _spatial_window(
    x: Shape, kernel: Sequence[int], strides: Sequence[int], pads: Sequence[int], dilations: Sequence[int],
    ceil_mode: bool = False,
) -> Shape:
    """The output extents of a window op over the last len(kernel) axes of x; `pads`
    holds (before, after) per axis."""
    k = len(kernel)
    if len(strides) != k or len(dilations) != k or len(pads) != 2 * k:
        raise ShapeError(f"{k} window axes need {k} strides and dilations and {2 * k} pads (before, after per axis)")
    if min(strides) < 1 or min(dilations) < 1 or min(kernel) < 1 or min(pads) < 0:
        raise ShapeError("kernel, strides and dilations must be >= 1 and pads >= 0")
    return tuple(
        shapes.window_out(d, kk, s, pads[2 * i], pads[2 * i + 1], dl, ceil_mode)
        for i, (d, kk, s, dl) in enumerate(zip(x[-k:], kernel, strides, dilations))
    )


class ConvFamilyOp(CubeOp):
    """A convolution over SPATIAL axes of an N, C, spatial... input; TRANSPOSED ones
    (the gradient of a convolution with respect to its input) take a filter
    [Cin, Cout/groups, k...] and add `output_padding` at the end of each axis.

    `strides`, `dilations` (and `output_padding`) have one entry per axis of the
    input (N and C included, as CANN writes them) and `pads` (before, after) per
    spatial axis."""

    SPATIAL: ClassVar[int]
    TRANSPOSED: ClassVar[bool] = False
    x = operand_def(TensorType)
    filter = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    y = result_def(TensorType)
    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    dilations = prop_def(DenseArrayBase)
    groups = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, w = shape_of(operand_types[0]), shape_of(operand_types[1])
        rank = cls.SPATIAL + 2
        if len(x) != rank or len(w) != rank:
            raise ShapeError(f"input {shapes.fmt(x)} and filter {shapes.fmt(w)} must both be {rank}-D")
        strides, pads, dil = props.ints("strides"), props.ints("pads"), props.ints("dilations")
        extra = props.ints("output_padding", (0,) * rank)
        groups = props.int("groups", 1)
        if len(strides) != rank or len(dil) != rank or len(pads) != 2 * cls.SPATIAL or len(extra) != rank:
            raise ShapeError(f"strides and dilations need {rank} values and pads {2 * cls.SPATIAL} (before, after per axis)")
        if groups < 1 or (x[1] != DYN and x[1] % groups):
            raise ShapeError(f"input channels {x[1]} are not divisible by groups {groups}")
        cin, cout = (w[0], w[1] * groups) if cls.TRANSPOSED else (w[1] * groups, w[0])
        if x[1] != DYN and x[1] != cin:
            raise ShapeError(f"input channels {x[1]} do not match the filter {shapes.fmt(w)} with groups {groups}")
        if cout % groups:
            raise ShapeError(f"output channels {cout} are not divisible by groups {groups}")
        if len(operand_types) > 2 and not shapes.compatible(shape_of(operand_types[2]), (cout,)):
            raise ShapeError(f"bias shape {shapes.fmt(shape_of(operand_types[2]))} != [{cout}]")
        dtype = _cube_dtype(operand_types, props, "input and filter", [0, 1], bias=2)
        if not cls.TRANSPOSED:
            return [tensor(dtype, (x[0], cout, *_spatial_window(x, w[2:], strides[2:], pads, dil[2:])))]
        if min(strides) < 1 or min(dil) < 1 or min(extra) < 0:
            raise ShapeError("strides and dilations must be >= 1 and output_padding >= 0")
        out = []
        for i, (d, k) in enumerate(zip(x[2:], w[2:])):
            size = DYN if d == DYN else (d - 1) * strides[i + 2] + dil[i + 2] * (k - 1) + 1 + extra[i + 2] - pads[2 * i] - pads[2 * i + 1]
            if size != DYN and size < 1:
                raise ShapeError(f"pads {list(pads)} leave spatial axis {i} no output")
            out.append(size)
        return [tensor(dtype, (x[0], cout, *out))]


@irdl_op_definition
class Conv3DOp(ConvFamilyOp):
    """3-D convolution, NCDHW, filter [Cout, Cin/groups, kd, kh, kw] (CANN `Conv3D`)."""

    name = "ascend_graph.conv3d"
    OP_TYPE: ClassVar[str] = "Conv3D"
    SPATIAL: ClassVar[int] = 3


@irdl_op_definition
class Conv2DTransposeOp(ConvFamilyOp):
    """2-D transposed convolution, NCHW, filter [Cin, Cout/groups, kh, kw] (CANN `Conv2DTranspose`)."""

    name = "ascend_graph.conv2d_transpose"
    OP_TYPE: ClassVar[str] = "Conv2DTranspose"
    SPATIAL: ClassVar[int] = 2
    TRANSPOSED: ClassVar[bool] = True
    output_padding = prop_def(DenseArrayBase)


@irdl_op_definition
class Conv3DTransposeOp(ConvFamilyOp):
    """3-D transposed convolution, NCDHW, filter [Cin, Cout/groups, kd, kh, kw] (CANN `Conv3DTranspose`)."""

    name = "ascend_graph.conv3d_transpose"
    OP_TYPE: ClassVar[str] = "Conv3DTranspose"
    SPATIAL: ClassVar[int] = 3
    TRANSPOSED: ClassVar[bool] = True
    output_padding = prop_def(DenseArrayBase)


class WindowPoolOp(AscendOp):
    """Window pooling over the spatial axes of an N, C, spatial... input: `ksize`,
    `strides` and `dilations` one value per spatial axis, `pads` (before, after) per axis."""

    x = operand_def(TensorType)
    y = result_def(TensorType)
    ksize = prop_def(DenseArrayBase)
    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    dilations = prop_def(DenseArrayBase)
    ceil_mode = prop_def(BoolAttr)
    traits = traits_def(Pure())

    @classmethod
    def spatial_ranks(cls) -> tuple[int, ...]:
        return (3,)

    @classmethod
    def infer_result_types(cls, operand_types, props):
        return [_pooled(operand_types[0], props, cls.spatial_ranks())]


def _pooled(x_type: Attribute, props: Props, ranks: Sequence[int]) -> Attribute:
    """The result type of a window pooling of x over `ranks` spatial axes."""
    x = shape_of(x_type)
    k = props.ints("ksize")
    if len(k) not in ranks or len(x) != len(k) + 2:
        raise ShapeError(f"a {len(k)}-D window does not fit the input {shapes.fmt(x)}")
    out = _spatial_window(x, k, props.ints("strides"), props.ints("pads"), props.ints("dilations"), props.bool("ceil_mode"))
    return tensor(dtype_of(x_type), (*x[:2], *out))


@irdl_op_definition
class MaxPool3DOp(WindowPoolOp):
    """3-D max pooling, NCDHW (CANN `MaxPool3D`)."""

    name = "ascend_graph.max_pool3d"
    OP_TYPE: ClassVar[str] = "MaxPool3D"


@irdl_op_definition
class AvgPool3DOp(WindowPoolOp):
    """3-D average pooling, NCDHW; `exclusive` leaves the padding out of the divisor (CANN `AvgPool3D`)."""

    name = "ascend_graph.avg_pool3d"
    OP_TYPE: ClassVar[str] = "AvgPool3D"
    exclusive = prop_def(BoolAttr)


@irdl_op_definition
class LpPoolOp(WindowPoolOp):
    """The p-norm of each window, 1-D to 3-D (CANN `LpPool`); padding counts as zeros."""

    name = "ascend_graph.lp_pool"
    OP_TYPE: ClassVar[str] = "LpPool"
    p = prop_def(IntegerAttr)

    @classmethod
    def spatial_ranks(cls) -> tuple[int, ...]:
        return (1, 2, 3)


@irdl_op_definition
class MaxPoolWithArgmaxOp(AscendOp):
    """Max pooling, 1-D to 3-D (with WindowPoolOp's properties), that also returns where
    each maximum is: its flat int64 index in the input (N and C included), the spatial
    position row-major, or with `storage_order` 1 column-major (ONNX MaxPool's
    Indices; CANN `MaxPoolWithArgmax`)."""

    name = "ascend_graph.max_pool_with_argmax"
    OP_TYPE: ClassVar[str] = "MaxPoolWithArgmax"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    argmax = result_def(TensorType)
    ksize = prop_def(DenseArrayBase)
    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    dilations = prop_def(DenseArrayBase)
    ceil_mode = prop_def(BoolAttr)
    storage_order = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        y = _pooled(operand_types[0], props, (1, 2, 3))
        return [y, tensor(i64, shape_of(y))]


@irdl_op_definition
class MaxUnpoolOp(AscendOp):
    """Scatter x into a zero tensor of `output_shape` at the flat indices MaxPool
    returned (CANN `MaxUnpool`)."""

    name = "ascend_graph.max_unpool"
    OP_TYPE: ClassVar[str] = "MaxUnpool"
    x = operand_def(TensorType)
    indices = operand_def(TensorType)
    y = result_def(TensorType)
    output_shape = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, idx, out = shape_of(operand_types[0]), shape_of(operand_types[1]), props.ints("output_shape")
        if not shapes.compatible(idx, x):
            raise ShapeError(f"indices {shapes.fmt(idx)} must have the input's shape {shapes.fmt(x)}")
        if len(out) != len(x) or tuple(out[:2]) != tuple(x[:2]):
            raise ShapeError(f"output_shape {list(out)} must keep the input's N and C {shapes.fmt(x[:2])}")
        if not isinstance(dtype_of(operand_types[1]), IntegerType) or dtype_of(operand_types[1]) == i1:
            raise ShapeError(f"indices must be integers, got {dtype_of(operand_types[1])}")
        return [tensor(dtype_of(operand_types[0]), out)]


class GridSamplerOp(AscendOp):
    """Sample x [N, C, spatial...] at the normalised coordinates of grid [N, out...,
    SPATIAL] (x, y[, z] order, -1..1), with `interpolation_mode` bilinear, nearest
    or bicubic and `padding_mode` zeros, border or reflection."""

    SPATIAL: ClassVar[int]
    x = operand_def(TensorType)
    grid = operand_def(TensorType)
    y = result_def(TensorType)
    interpolation_mode = prop_def(StringAttr)
    padding_mode = prop_def(StringAttr)
    align_corners = prop_def(BoolAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, grid = shape_of(operand_types[0]), shape_of(operand_types[1])
        rank = cls.SPATIAL + 2
        if len(x) != rank or len(grid) != rank or grid[-1] != cls.SPATIAL:
            raise ShapeError(f"input {shapes.fmt(x)} and grid {shapes.fmt(grid)} need rank {rank}, the grid ending in {cls.SPATIAL}")
        if not shapes.compatible((x[0],), (grid[0],)):
            raise ShapeError(f"input and grid batches differ: {shapes.fmt(x)}, {shapes.fmt(grid)}")
        if props.str("interpolation_mode") not in ("bilinear", "nearest", "bicubic"):
            raise ShapeError(f"interpolation_mode {props.str('interpolation_mode')!r} is not bilinear, nearest or bicubic")
        if cls.SPATIAL == 3 and props.str("interpolation_mode") == "bicubic":
            raise ShapeError("bicubic interpolation is 2-D only")
        if props.str("padding_mode") not in ("zeros", "border", "reflection"):
            raise ShapeError(f"padding_mode {props.str('padding_mode')!r} is not zeros, border or reflection")
        if not is_float(dtype_of(operand_types[1])):
            raise ShapeError(f"the grid must be floating-point, got {dtype_of(operand_types[1])}")
        return [tensor(dtype_of(operand_types[0]), (x[0], x[1], *grid[1:-1]))]


@irdl_op_definition
class GridSampler2DOp(GridSamplerOp):
    """Grid sampling of an NCHW input (CANN `GridSampler2D`)."""

    name = "ascend_graph.grid_sampler2d"
    OP_TYPE: ClassVar[str] = "GridSampler2D"
    SPATIAL: ClassVar[int] = 2


@irdl_op_definition
class GridSampler3DOp(GridSamplerOp):
    """Grid sampling of an NCDHW input (CANN `GridSampler3D`)."""

    name = "ascend_graph.grid_sampler3d"
    OP_TYPE: ClassVar[str] = "GridSampler3D"
    SPATIAL: ClassVar[int] = 3


@irdl_op_definition
class AffineGridOp(AscendOp):
    """The sampling grid [N, (D,) H, W, 2|3] of affine matrices theta [N, 2, 3] or
    [N, 3, 4] over an output of `size` (N, C, (D,) H, W) (CANN `AffineGrid`)."""

    name = "ascend_graph.affine_grid"
    OP_TYPE: ClassVar[str] = "AffineGrid"
    theta = operand_def(TensorType)
    y = result_def(TensorType)
    size = prop_def(DenseArrayBase)
    align_corners = prop_def(BoolAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        theta, size = shape_of(operand_types[0]), props.ints("size")
        if len(size) not in (4, 5):
            raise ShapeError(f"size {list(size)} needs 4 (N, C, H, W) or 5 (N, C, D, H, W) values")
        k = len(size) - 2
        if not shapes.compatible(theta, (size[0], k, k + 1)):
            raise ShapeError(f"theta {shapes.fmt(theta)} must be [{size[0]}, {k}, {k + 1}] for size {list(size)}")
        if not is_float(dtype_of(operand_types[0])):
            raise ShapeError(f"theta must be floating-point, got {dtype_of(operand_types[0])}")
        return [tensor(dtype_of(operand_types[0]), (size[0], *size[2:], k))]


@irdl_op_definition
class Col2imOp(AscendOp):
    """Sum the columns x [N, C * prod(block), L] of sliding blocks into an image
    [N, C, *image_shape] (CANN `Col2im`); `pads` (before, after) per image axis."""

    name = "ascend_graph.col2im"
    OP_TYPE: ClassVar[str] = "Col2im"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    image_shape = prop_def(DenseArrayBase)
    block_shape = prop_def(DenseArrayBase)
    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    dilations = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, image, block = shape_of(operand_types[0]), props.ints("image_shape"), props.ints("block_shape")
        if len(x) != 3 or len(image) != len(block) or not image:
            raise ShapeError(f"input {shapes.fmt(x)} must be 3-D and image_shape {list(image)} match block_shape {list(block)}")
        per = shapes.numel(block)
        if x[1] != DYN and x[1] % per:
            raise ShapeError(f"input channels {x[1]} are not a multiple of the block's {per} elements")
        out = _spatial_window(image, block, props.ints("strides"), props.ints("pads"), props.ints("dilations"))
        if x[2] != DYN and x[2] != shapes.numel(out):
            raise ShapeError(f"{x[2]} columns, but the image {list(image)} has {shapes.numel(out)} block positions")
        return [tensor(dtype_of(operand_types[0]), (x[0], DYN if x[1] == DYN else x[1] // per, *image))]


@irdl_op_definition
class DeformableOffsetsOp(AscendOp):
    """The input sampled bilinearly at each kernel tap moved by its offset and scaled by
    its mask, laid out [N, C, oh * kh, ow * kw] so that a Conv2D with the kernel as
    stride finishes the deformable convolution (CANN `DeformableOffsets`, what GE
    splits DeformableConv2D into). offsets [N, 2 * G * kh * kw, oh, ow] hold (dy, dx)
    per offset group and tap, mask [N, G * kh * kw, oh, ow]."""

    name = "ascend_graph.deformable_offsets"
    OP_TYPE: ClassVar[str] = "DeformableOffsets"
    x = operand_def(TensorType)
    offsets = operand_def(TensorType)
    mask = operand_def(TensorType)
    y = result_def(TensorType)
    ksize = prop_def(DenseArrayBase)
    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    dilations = prop_def(DenseArrayBase)
    deformable_groups = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, off, mask = (shape_of(t) for t in operand_types)
        k, g = props.ints("ksize"), props.int("deformable_groups", 1)
        if len(x) != 4 or len(k) != 2:
            raise ShapeError(f"input {shapes.fmt(x)} must be 4-D NCHW with a 2-D kernel")
        if g < 1 or (x[1] != DYN and x[1] % g):
            raise ShapeError(f"channels {x[1]} are not divisible by deformable_groups {g}")
        oh, ow = _spatial_window(x, k, props.ints("strides"), props.ints("pads"), props.ints("dilations"))
        taps = g * k[0] * k[1]
        if not shapes.compatible(off, (x[0], 2 * taps, oh, ow)) or not shapes.compatible(mask, (x[0], taps, oh, ow)):
            raise ShapeError(f"offsets {shapes.fmt(off)} and mask {shapes.fmt(mask)} must be [{x[0]}, {2 * taps} and {taps}, {oh}, {ow}]")
        return [tensor(dtype_of(operand_types[0]), (x[0], x[1], oh * k[0], ow * k[1]))]


@irdl_op_definition
class ROIAlignOp(AscendOp):
    """Pool each region of interest rois [R, 4] (x1, y1, x2, y2) of image
    batch_indices [R] into [R, C, pooled_height, pooled_width] by averaging (or taking
    the maximum of) bilinear samples (CANN `ROIAlign`); `aligned` shifts by half a pixel."""

    name = "ascend_graph.roi_align"
    OP_TYPE: ClassVar[str] = "ROIAlign"
    x = operand_def(TensorType)
    rois = operand_def(TensorType)
    batch_indices = operand_def(TensorType)
    y = result_def(TensorType)
    pooled_height = prop_def(IntegerAttr)
    pooled_width = prop_def(IntegerAttr)
    sample_num = prop_def(IntegerAttr)
    spatial_scale = prop_def(FloatAttr)
    mode = prop_def(StringAttr)
    aligned = prop_def(BoolAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, rois, idx = (shape_of(t) for t in operand_types)
        if len(x) != 4 or len(rois) != 2 or rois[1] != 4 or len(idx) != 1 or not shapes.compatible(idx, rois[:1]):
            raise ShapeError(f"input {shapes.fmt(x)}, rois {shapes.fmt(rois)}, batch_indices {shapes.fmt(idx)}: need NCHW, [R, 4], [R]")
        if props.str("mode") not in ("avg", "max"):
            raise ShapeError(f"mode {props.str('mode')!r} is not avg or max")
        oh, ow = props.int("pooled_height"), props.int("pooled_width")
        if oh < 1 or ow < 1:
            raise ShapeError(f"the pooled size {oh}x{ow} is empty")
        return [tensor(dtype_of(operand_types[0]), (rois[0], x[1], oh, ow))]


# ------------------------------------------------ attention, rotary embedding and top-k


@irdl_op_definition
class FusedInferAttentionScoreOp(CubeOp):
    """Scaled dot-product attention over heads already split (CANN
    `FusedInferAttentionScore`, input_layout BNSD), the fused op ONNX `Attention` maps to.

    query [B, N, Sq, D], key [B, Nkv, Skv, D], value [B, Nkv, Skv, Dv], N a multiple
    of Nkv (grouped-query attention: query head h reads key/value head h // (N / Nkv)).
    s = scale * q @ k^T; with `softcap` > 0, s = softcap * tanh(s / softcap); then the
    mask: a float `atten_mask` is added, a bool one keeps the positions where it is
    true (the others get -inf); its last dim may be shorter than Skv, the rest being
    masked. `next_tokens`, when present, masks key j for query i where j > i +
    next_tokens (ONNX's upper-left causal mask after `next_tokens` cached keys);
    `actual_seq_lengths_kv` [B] masks the keys from its value on. p = softmax(s)
    over the keys, y = p @ v [B, N, Sq, Dv]. With `qk_output_mode` the op also
    returns the scores [B, N, Sq, Skv] as ONNX's `qk_matmul_output_mode` names
    them: 0 the product (scaled), 1 after the softcap, 2 after the mask, 3 p.
    The optional operands are told apart by type: the integer one is the lengths.
    """

    name = "ascend_graph.fused_infer_attention_score"
    OP_TYPE: ClassVar[str] = "FusedInferAttentionScore"
    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))
    query = operand_def(TensorType)
    key = operand_def(TensorType)
    value = operand_def(TensorType)
    atten_mask = opt_operand_def(TensorType)
    actual_seq_lengths_kv = opt_operand_def(TensorType)
    attention_out = result_def(TensorType)
    qk_out = opt_result_def(TensorType)
    num_heads = prop_def(IntegerAttr)
    num_key_value_heads = prop_def(IntegerAttr)
    scale = prop_def(FloatAttr)
    softcap = opt_prop_def(FloatAttr)
    next_tokens = opt_prop_def(IntegerAttr)
    qk_output_mode = opt_prop_def(IntegerAttr)
    traits = traits_def(Pure())
    assembly_format = (
        "$query `,` $key `,` $value (`mask` $atten_mask^)? (`kv_lengths` $actual_seq_lengths_kv^)? attr-dict `:` "
        "`(` type($query) `,` type($key) `,` type($value) (`mask` type($atten_mask)^)? "
        "(`kv_lengths` type($actual_seq_lengths_kv)^)? `)` `->` type($attention_out) (`,` type($qk_out)^)?"
    )

    @staticmethod
    def _is_lengths(t: Attribute) -> bool:
        return isinstance(dtype_of(t), IntegerType) and dtype_of(t) != i1

    @classmethod
    def _group(cls, values: Sequence[SSAValue]) -> list[SSAValue | list[SSAValue]]:
        if not 3 <= len(values) <= 5:
            raise ShapeError(f"takes 3 to 5 operands, got {len(values)}")
        rest = list(values[3:])
        lengths = [v for v in rest if cls._is_lengths(v.type)]
        masks = [v for v in rest if not cls._is_lengths(v.type)]
        return [*values[:3], masks, lengths]

    @classmethod
    def infer_result_types(cls, operand_types, props):
        if not 3 <= len(operand_types) <= 5:
            raise ShapeError(f"takes 3 to 5 operands, got {len(operand_types)}")
        dtype = _cube_dtype(operand_types, props, "query, key and value", [0, 1, 2])
        in_dtype = dtype_of(operand_types[0])
        if not is_float(dtype):
            raise ShapeError(f"needs floating-point query, key and value, got {dtype}")
        q, k, v = (shape_of(t) for t in operand_types[:3])
        if any(len(s) != 4 for s in (q, k, v)):
            raise ShapeError(f"query, key and value {', '.join(map(shapes.fmt, (q, k, v)))} must be 4-D (BNSD)")
        heads, kv_heads = props.int("num_heads"), props.int("num_key_value_heads")
        if heads < 1 or kv_heads < 1 or heads % kv_heads:
            raise ShapeError(f"num_heads {heads} must be a positive multiple of num_key_value_heads {kv_heads}")
        if not (_agree(q[1], heads) and _agree(k[1], kv_heads) and _agree(v[1], kv_heads)):
            raise ShapeError(f"query {shapes.fmt(q)} needs {heads} heads, key {shapes.fmt(k)} and value {shapes.fmt(v)} {kv_heads}")
        if not (_agree(q[0], k[0]) and _agree(q[0], v[0]) and _agree(k[2], v[2]) and _agree(q[3], k[3])):
            raise ShapeError(f"query {shapes.fmt(q)}, key {shapes.fmt(k)} and value {shapes.fmt(v)} disagree in batch, key length or head size")
        scores = (q[0], heads, q[2], k[2])
        for t in operand_types[3:]:
            s = shape_of(t)
            if cls._is_lengths(t):
                if len(s) != 1 or not _agree(s[0], q[0]):
                    raise ShapeError(f"actual_seq_lengths_kv {shapes.fmt(s)} is not [{q[0]}]")
                continue
            if dtype_of(t) not in (in_dtype, i1):
                raise ShapeError(f"atten_mask element type {dtype_of(t)} is neither bool nor the query's {in_dtype}")
            if not s or len(s) > 4 or (s[-1] != DYN and scores[3] != DYN and s[-1] > scores[3]):
                raise ShapeError(f"atten_mask {shapes.fmt(s)} does not fit the scores {shapes.fmt(scores)}")
            try:
                fits = shapes.compatible(shapes.broadcast(scores[:3], s[:-1]), scores[:3])
            except ShapeError:
                fits = False
            if not fits:
                raise ShapeError(f"atten_mask {shapes.fmt(s)} does not broadcast to the scores {shapes.fmt(scores)}")
        results = [tensor(dtype, (q[0], heads, q[2], v[3]))]
        if props.has("qk_output_mode"):
            if props.int("qk_output_mode") not in range(4):
                raise ShapeError(f"qk_output_mode {props.int('qk_output_mode')} is not 0, 1, 2 or 3")
            results.append(tensor(dtype, scores))
        return results


@irdl_op_definition
class RotaryPositionEmbeddingOp(AscendOp):
    """Rotary position embedding (CANN `RotaryPositionEmbedding`), ONNX's `RotaryEmbedding`
    after the cos/sin rows of each position are gathered.

    x is [B, N, S, D] (`layout` "BNSD") or [B, S, N * D] ("BSH", N = `num_heads`);
    cos and sin are [B, S, R / 2] for the first R = `rotary_dim` features of each
    head (0: all D). The rotated pairs are (x[i], x[i + R/2]), or (x[2i], x[2i + 1])
    when `interleaved`: (a, b) -> (a cos - b sin, a sin + b cos); the other features
    pass through."""

    name = "ascend_graph.rotary_position_embedding"
    OP_TYPE: ClassVar[str] = "RotaryPositionEmbedding"
    x = operand_def(TensorType)
    cos = operand_def(TensorType)
    sin = operand_def(TensorType)
    y = result_def(TensorType)
    layout = prop_def(StringAttr)
    num_heads = opt_prop_def(IntegerAttr)
    rotary_dim = prop_def(IntegerAttr)
    interleaved = prop_def(BoolAttr)
    traits = traits_def(Pure())

    LAYOUTS: ClassVar[tuple[str, ...]] = ("BNSD", "BSH")

    @classmethod
    def infer_result_types(cls, operand_types, props):
        dtype = _same(operand_types, "x, cos and sin")
        if not is_float(dtype):
            raise ShapeError(f"needs floating-point operands, got {dtype}")
        x, cos, sin = (shape_of(t) for t in operand_types)
        layout = props.str("layout")
        if layout not in cls.LAYOUTS:
            raise ShapeError(f"layout {layout!r} is not BNSD or BSH")
        if layout == "BNSD":
            if len(x) != 4:
                raise ShapeError(f"a BNSD x must be 4-D, got {shapes.fmt(x)}")
            b, s, d = x[0], x[2], x[3]
        else:
            heads = props.int("num_heads")
            if len(x) != 3 or heads < 1 or (x[2] != DYN and x[2] % heads):
                raise ShapeError(f"a BSH x must be 3-D with features splitting into num_heads {heads}, got {shapes.fmt(x)}")
            b, s, d = x[0], x[1], DYN if x[2] == DYN else x[2] // heads
        rotary = props.int("rotary_dim") or d
        if rotary != DYN and (rotary % 2 or rotary < 0 or (d != DYN and rotary > d)):
            raise ShapeError(f"rotary_dim {rotary} must be even and at most the head size {d}")
        want = (b, s, DYN if rotary == DYN else rotary // 2)
        for label, c in (("cos", cos), ("sin", sin)):
            if not shapes.compatible(c, want) and not shapes.compatible(want, c):
                raise ShapeError(f"{label} {shapes.fmt(c)} is not [batch, sequence, rotary_dim / 2] = {shapes.fmt(want)}")
        return [operand_types[0]]


@irdl_op_definition
class TopKV2Op(AscendOp):
    """The `k` largest (or smallest) values along `dim` and their int64 indices (CANN
    `TopKV2`; k is known when the graph is built, as a static shape needs). Equal
    values keep the lower index first; `sorted` false leaves the order free, and
    this op gives it sorted all the same."""

    name = "ascend_graph.top_k_v2"
    OP_TYPE: ClassVar[str] = "TopKV2"
    x = operand_def(TensorType)
    values = result_def(TensorType)
    indices = result_def(TensorType)
    k = prop_def(IntegerAttr)
    dim = prop_def(IntegerAttr)
    largest = prop_def(BoolAttr)
    sorted = prop_def(BoolAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x = shape_of(operand_types[0])
        if not x:
            raise ShapeError("needs an input of rank >= 1")
        axis = shapes.norm_axis(props.int("dim"), len(x), "dim")
        k = props.int("k")
        if k < 0 or (x[axis] != DYN and k > x[axis]):
            raise ShapeError(f"k {k} is not in [0, {x[axis]}], the size of dim {axis}")
        out = x[:axis] + (k,) + x[axis + 1 :]
        return [tensor(dtype_of(operand_types[0]), out), tensor(i64, out)]


# ------------ elementwise, bitwise, triangular, cumulative, one-hot and determinant ops


def _is_integer(dtype: Attribute) -> bool:
    """An integer element type other than bool (i1)."""
    return isinstance(dtype, IntegerType) and dtype.width.data > 1


class IntegerBinaryOp(BinaryOp):
    """A binary op on the bits of integers (bool excluded, as ONNX excludes it)."""

    @classmethod
    def infer_result_types(cls, operand_types, props):
        if not all(_is_integer(dtype_of(t)) for t in operand_types):
            raise ShapeError(f"needs integer operands, got {', '.join(str(dtype_of(t)) for t in operand_types)}")
        return super().infer_result_types(operand_types, props)


@irdl_op_definition
class FloorModOp(BinaryOp):
    """x1 - floor(x1 / x2) * x2: the remainder takes the divisor's sign (CANN `FloorMod`, ONNX Mod fmod=0)."""

    name = "ascend_graph.floor_mod"
    OP_TYPE: ClassVar[str] = "FloorMod"


@irdl_op_definition
class ModOp(BinaryOp):
    """x1 - trunc(x1 / x2) * x2: the remainder takes the dividend's sign, C's fmod (CANN `Mod`, ONNX Mod fmod=1)."""

    name = "ascend_graph.mod"
    OP_TYPE: ClassVar[str] = "Mod"


@irdl_op_definition
class LeftShiftOp(IntegerBinaryOp):
    """x1 << x2 (CANN `LeftShift`)."""

    name = "ascend_graph.left_shift"
    OP_TYPE: ClassVar[str] = "LeftShift"


@irdl_op_definition
class RightShiftOp(IntegerBinaryOp):
    """x1 >> x2 (CANN `RightShift`)."""

    name = "ascend_graph.right_shift"
    OP_TYPE: ClassVar[str] = "RightShift"


@irdl_op_definition
class BitwiseAndOp(IntegerBinaryOp):
    """x1 & x2 (CANN `BitwiseAnd`)."""

    name = "ascend_graph.bitwise_and"
    OP_TYPE: ClassVar[str] = "BitwiseAnd"


@irdl_op_definition
class BitwiseOrOp(IntegerBinaryOp):
    """x1 | x2 (CANN `BitwiseOr`)."""

    name = "ascend_graph.bitwise_or"
    OP_TYPE: ClassVar[str] = "BitwiseOr"


@irdl_op_definition
class BitwiseXorOp(IntegerBinaryOp):
    """x1 ^ x2 (CANN `BitwiseXor`)."""

    name = "ascend_graph.bitwise_xor"
    OP_TYPE: ClassVar[str] = "BitwiseXor"


@irdl_op_definition
class InvertOp(UnaryOp):
    """~x, every bit flipped (CANN `Invert`, ONNX BitwiseNot)."""

    name = "ascend_graph.invert"
    OP_TYPE: ClassVar[str] = "Invert"

    @classmethod
    def infer_result_types(cls, operand_types, props):
        if not _is_integer(dtype_of(operand_types[0])):
            raise ShapeError(f"needs an integer input, got {dtype_of(operand_types[0])}")
        return [operand_types[0]]


class FloatTestOp(AscendOp):
    """y = p(x): a bool per element of a floating-point x."""

    x = operand_def(TensorType)
    y = result_def(TensorType)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        if not is_float(dtype_of(operand_types[0])):
            raise ShapeError(f"needs a floating-point input, got {dtype_of(operand_types[0])}")
        return [tensor(i1, shape_of(operand_types[0]))]


@irdl_op_definition
class IsNanOp(FloatTestOp):
    """x is NaN (CANN `IsNan`)."""

    name = "ascend_graph.is_nan"
    OP_TYPE: ClassVar[str] = "IsNan"


@irdl_op_definition
class IsInfOp(FloatTestOp):
    """x is +inf (with detect_positive) or -inf (with detect_negative) (CANN `IsInf`)."""

    name = "ascend_graph.is_inf"
    OP_TYPE: ClassVar[str] = "IsInf"
    detect_positive = prop_def(BoolAttr)
    detect_negative = prop_def(BoolAttr)


@irdl_op_definition
class TanOp(FloatUnaryOp):
    """tan(x) (CANN `Tan`)."""

    name = "ascend_graph.tan"
    OP_TYPE: ClassVar[str] = "Tan"


@irdl_op_definition
class AsinOp(FloatUnaryOp):
    """arcsin(x) (CANN `Asin`)."""

    name = "ascend_graph.asin"
    OP_TYPE: ClassVar[str] = "Asin"


@irdl_op_definition
class AcosOp(FloatUnaryOp):
    """arccos(x) (CANN `Acos`)."""

    name = "ascend_graph.acos"
    OP_TYPE: ClassVar[str] = "Acos"


@irdl_op_definition
class AtanOp(FloatUnaryOp):
    """arctan(x) (CANN `Atan`)."""

    name = "ascend_graph.atan"
    OP_TYPE: ClassVar[str] = "Atan"


@irdl_op_definition
class SinhOp(FloatUnaryOp):
    """sinh(x) (CANN `Sinh`)."""

    name = "ascend_graph.sinh"
    OP_TYPE: ClassVar[str] = "Sinh"


@irdl_op_definition
class CoshOp(FloatUnaryOp):
    """cosh(x) (CANN `Cosh`)."""

    name = "ascend_graph.cosh"
    OP_TYPE: ClassVar[str] = "Cosh"


@irdl_op_definition
class AsinhOp(FloatUnaryOp):
    """arsinh(x) (CANN `Asinh`)."""

    name = "ascend_graph.asinh"
    OP_TYPE: ClassVar[str] = "Asinh"


@irdl_op_definition
class AcoshOp(FloatUnaryOp):
    """arcosh(x) (CANN `Acosh`)."""

    name = "ascend_graph.acosh"
    OP_TYPE: ClassVar[str] = "Acosh"


@irdl_op_definition
class AtanhOp(FloatUnaryOp):
    """artanh(x) (CANN `Atanh`)."""

    name = "ascend_graph.atanh"
    OP_TYPE: ClassVar[str] = "Atanh"


@irdl_op_definition
class ThresholdedReluOp(FloatUnaryOp):
    """x if x > alpha else 0 (CANN `ThresholdedRelu`)."""

    name = "ascend_graph.thresholded_relu"
    OP_TYPE: ClassVar[str] = "ThresholdedRelu"
    alpha = prop_def(FloatAttr)


@irdl_op_definition
class ShrinkOp(UnaryOp):
    """x + bias if x < -lambd, x - bias if x > lambd, else 0 (CANN `Shrink`: HardShrink
    with bias 0, SoftShrink with bias = lambd)."""

    name = "ascend_graph.shrink"
    OP_TYPE: ClassVar[str] = "Shrink"
    lambd = prop_def(FloatAttr)
    bias = prop_def(FloatAttr)


@irdl_op_definition
class SwishOp(FloatUnaryOp):
    """x * sigmoid(scale * x) (CANN `Swish`)."""

    name = "ascend_graph.swish"
    OP_TYPE: ClassVar[str] = "Swish"
    scale = prop_def(FloatAttr)


@irdl_op_definition
class HardmaxOp(AscendOp):
    """1 at the first maximum over `axes` (taken together, as one flattened axis), 0
    elsewhere (CANN `Hardmax`)."""

    name = "ascend_graph.hardmax"
    OP_TYPE: ClassVar[str] = "Hardmax"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    axes = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        axes = shapes.norm_axes(props.ints("axes"), len(shape_of(operand_types[0])))
        if not axes or list(axes) != list(range(axes[0], axes[0] + len(axes))):
            raise ShapeError(f"axes {list(props.ints('axes'))} must be one or more consecutive axes")
        if not is_float(dtype_of(operand_types[0])):
            raise ShapeError(f"needs a floating-point input, got {dtype_of(operand_types[0])}")
        return [operand_types[0]]


class TriangleOp(AscendOp):
    """Keep one triangle of the last two dims (diagonal 0 is the main one, positive
    above it), zero the rest. The diagonal is the `diagonal` property, or, when the
    graph computes it, the int64 scalar operand `k` that the kernel reads when it runs
    (the result's shape does not depend on it)."""

    x = operand_def(TensorType)
    k = opt_operand_def(TensorType)
    y = result_def(TensorType)
    diagonal = opt_prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        if len(shape_of(operand_types[0])) < 2:
            raise ShapeError(f"needs a matrix (rank >= 2), got shape {shapes.fmt(shape_of(operand_types[0]))}")
        if (len(operand_types) > 1) == props.has("diagonal"):
            raise ShapeError("needs the diagonal as either the diagonal property or the k operand")
        if len(operand_types) > 1 and (dtype_of(operand_types[1]) != i64 or shapes.numel(shape_of(operand_types[1])) != 1):
            raise ShapeError(f"k must be one int64, got {dtype_of(operand_types[1])} {shapes.fmt(shape_of(operand_types[1]))}")
        return [operand_types[0]]


@irdl_op_definition
class TrilOp(TriangleOp):
    """The lower triangle, on and below `diagonal` (CANN `Tril`)."""

    name = "ascend_graph.tril"
    OP_TYPE: ClassVar[str] = "Tril"


@irdl_op_definition
class TriuOp(TriangleOp):
    """The upper triangle, on and above `diagonal` (CANN `Triu`)."""

    name = "ascend_graph.triu"
    OP_TYPE: ClassVar[str] = "Triu"


class CumulativeOp(AscendOp):
    """A running reduction along `axis`; `exclusive` leaves each element out of its own
    result, `reverse` runs from the end. When the graph computes the axis, it is the
    int32/int64 scalar operand `axis_input` that the kernel reads when it runs (the
    result's shape does not depend on it)."""

    x = operand_def(TensorType)
    axis_input = opt_operand_def(TensorType)
    y = result_def(TensorType)
    axis = opt_prop_def(IntegerAttr)
    exclusive = prop_def(BoolAttr)
    reverse = prop_def(BoolAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        if (len(operand_types) > 1) == props.has("axis"):
            raise ShapeError("needs the axis as either the axis property or the axis_input operand")
        if props.has("axis"):
            shapes.norm_axis(props.int("axis"), len(shape_of(operand_types[0])))
        elif dtype_of(operand_types[1]) not in (i32, i64) or shapes.numel(shape_of(operand_types[1])) != 1:
            raise ShapeError(f"axis_input must be one int32 or int64, got {dtype_of(operand_types[1])} {shapes.fmt(shape_of(operand_types[1]))}")
        if dtype_of(operand_types[0]) == i1:
            raise ShapeError("needs a number input, not bool")
        return [operand_types[0]]


@irdl_op_definition
class CumsumOp(CumulativeOp):
    """The running sum (CANN `Cumsum`)."""

    name = "ascend_graph.cumsum"
    OP_TYPE: ClassVar[str] = "Cumsum"


@irdl_op_definition
class CumprodOp(CumulativeOp):
    """The running product (CANN `Cumprod`)."""

    name = "ascend_graph.cumprod"
    OP_TYPE: ClassVar[str] = "Cumprod"


@irdl_op_definition
class BitcastOp(AscendOp):
    """The bytes of x read as `dst_type`, of the same width (CANN `Bitcast`): a view,
    no kernel (`dialects.kernel_boundary`)."""

    name = "ascend_graph.bitcast"
    OP_TYPE: ClassVar[str] = "Bitcast"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    dst_type = prop_def(TypeAttribute)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        src, dst = dtype_of(operand_types[0]), props.type("dst_type")
        bits = formats.element_bits(src), formats.element_bits(dst)
        if bits[0] != bits[1]:
            raise ShapeError(f"{src} has {bits[0]} bits and {dst} {bits[1]}; a bitcast keeps the width")
        return [tensor(dst, shape_of(operand_types[0]))]


@irdl_op_definition
class OneHotOp(AscendOp):
    """values[1] where the index (negative ones counted from `depth`) is the position
    along the new axis `axis`, values[0] elsewhere (CANN `OneHot`)."""

    name = "ascend_graph.one_hot"
    OP_TYPE: ClassVar[str] = "OneHot"
    x = operand_def(TensorType)
    values = operand_def(TensorType)
    y = result_def(TensorType)
    depth = prop_def(IntegerAttr)
    axis = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, values = shape_of(operand_types[0]), shape_of(operand_types[1])
        if not _is_integer(dtype_of(operand_types[0])):
            raise ShapeError(f"indices must be integers, not {dtype_of(operand_types[0])}")
        if values != (2,):
            raise ShapeError(f"values must hold [off, on], got shape {shapes.fmt(values)}")
        if props.int("depth") < 1:
            raise ShapeError(f"depth {props.int('depth')} must be positive")
        axis = shapes.norm_axis(props.int("axis"), len(x) + 1)
        return [tensor(dtype_of(operand_types[1]), x[:axis] + (props.int("depth"),) + x[axis:])]


@irdl_op_definition
class MatrixDeterminantOp(AscendOp):
    """The determinant of each square matrix of the last two dims (CANN `MatrixDeterminant`)."""

    name = "ascend_graph.matrix_determinant"
    OP_TYPE: ClassVar[str] = "MatrixDeterminant"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x = shape_of(operand_types[0])
        if len(x) < 2 or not shapes.compatible((x[-1],), (x[-2],)):
            raise ShapeError(f"needs square matrices in the last two dims, got shape {shapes.fmt(x)}")
        if not is_float(dtype_of(operand_types[0])):
            raise ShapeError(f"needs a floating-point input, got {dtype_of(operand_types[0])}")
        return [tensor(dtype_of(operand_types[0]), x[:-2])]


# ------------------------------------------------ data-dependent shapes (AI CPU engine)


class DataDependentOp(AscendOp):
    """An op whose result shapes depend on its input values, not only their shapes: the
    dims known only when it runs are `DYN`. `upper_bounds` gives, per result, a static
    shape of the same rank holding any value it may produce, which the build allocates."""

    def upper_bounds(self, operand_types: Sequence[Attribute] | None = None) -> list[Shape]:
        """The bounds for operands of `operand_types` (static: the upper bounds of
        operands that are themselves data-dependent), by default the operands' own."""
        raise NotImplementedError(type(self).__name__)

    def _static_input(self, index: int, operand_types: Sequence[Attribute] | None) -> Shape:
        shape = shape_of((operand_types or [o.type for o in self.operands])[index])
        if not shapes.is_static(shape):
            raise ShapeError(f"{self.OP_TYPE} '{self.label}': input {index} has the dynamic shape {shapes.fmt(shape)}; its results have no upper bound")
        return shape


def data_dependent_bounds(ops: Iterable[Operation]) -> dict[SSAValue, Shape]:
    """The data-dependent values the ops (in topological order) make, with the static
    upper bound of each: a data-dependent op's dynamic results, and the dynamic results
    of an op reading such a value, bounded by its shape rule applied to the upper
    bounds of its operands (GE runs that op on the AI CPU too, after the run of its
    producer gave the actual shapes; control flow, whose bodies need static shapes,
    and the graph's outputs make none). A result the shape rule leaves dynamic on those
    bounds (a Reshape to a shape computed from the data, a Range) cannot be bounded:
    ShapeError, naming the op."""
    bounds: dict[SSAValue, Shape] = {}
    for op in ops:
        if isinstance(op, DataDependentOp):
            found = op.upper_bounds(_bounded_types(op, bounds))
        elif isinstance(op, AscendOp) and op.results and not op.regions and any(v in bounds for v in op.operands):
            found = _chain_bounds(op, bounds)
        else:
            continue
        bounds.update((r, b) for r, b in zip(op.results, found) if not shapes.is_static(shape_of(r.type)))
    return bounds


def _bounded_types(op: Operation, bounds: Mapping[SSAValue, Shape]) -> list[Attribute]:
    """The op's operand types, a data-dependent one's at its upper bound."""
    return [tensor(dtype_of(v.type), bounds[v]) if v in bounds else v.type for v in op.operands]


def _chain_bounds(op: AscendOp, bounds: Mapping[SSAValue, Shape]) -> list[Shape]:
    """The result bounds of an op reading data-dependent values: its shape rule on
    their upper bounds, the dims its result types know kept."""
    read = ", ".join(f"{shapes.fmt(shape_of(v.type))} <= {shapes.fmt(bounds[v])}" for v in op.operands if v in bounds)
    try:
        inferred = type(op).infer_result_types(_bounded_types(op, bounds), op.props)
    except ShapeError as e:
        raise ShapeError(f"{op.OP_TYPE} '{op.label}' reads data-dependent values ({read}) whose upper bounds break its shape rule: {e}") from e
    found: list[Shape] = []
    for r, t in zip(op.results, inferred):
        declared, bound = shape_of(r.type), shape_of(t)
        merged = tuple(b if d == DYN else d for d, b in zip(declared, bound))
        if len(bound) != len(declared) or not shapes.is_static(merged):
            raise ShapeError(
                f"{op.OP_TYPE} '{op.label}' reads data-dependent values ({read}), and its result {shapes.fmt(declared)} "
                f"has no upper bound: its shape depends on values, not only on the shapes of its inputs "
                f"(a Reshape target computed from a data-dependent dim is bounded only when -1 takes that dim)"
            )
        found.append(merged)
    return found


@irdl_op_definition
class NonZeroOp(DataDependentOp):
    """The indices of the non-zero elements of x, one row per dim: y is [rank(x), n],
    int64, n known when it runs (CANN `NonZero`, ONNX's layout: transposed)."""

    name = "ascend_graph.non_zero"
    OP_TYPE: ClassVar[str] = "NonZero"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        rank = len(shape_of(operand_types[0]))
        if rank == 0:
            raise ShapeError("x must have at least one dim (a scalar has no index rows)")
        return [tensor(i64, (rank, DYN))]

    def upper_bounds(self, operand_types: Sequence[Attribute] | None = None) -> list[Shape]:
        x = self._static_input(0, operand_types)
        return [(len(x), shapes.numel(x))]


@irdl_op_definition
class CompressOp(DataDependentOp):
    """The slices of x along `axis` where the 1-D bool condition holds (x flattened when
    `axis` is absent); a condition shorter than the dim selects among its first slices."""

    name = "ascend_graph.compress"
    OP_TYPE: ClassVar[str] = "Compress"
    x = operand_def(TensorType)
    condition = operand_def(TensorType)
    y = result_def(TensorType)
    axis = opt_prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def _along(cls, operand_types: Sequence[Attribute], props: Props) -> tuple[Shape, int | None, int]:
        """x's shape, the normalised axis (None: flattened) and the condition's length."""
        x, cond = shape_of(operand_types[0]), shape_of(operand_types[1])
        if dtype_of(operand_types[1]) != i1 or len(cond) != 1:
            raise ShapeError(f"condition must be a 1-D bool tensor, not {shapes.fmt(cond)} of {dtype_of(operand_types[1])}")
        axis = shapes.norm_axis(props.int("axis"), len(x)) if props.has("axis") else None
        dim = shapes.numel(x) if axis is None else x[axis]
        if DYN not in (dim, cond[0]) and cond[0] > dim:
            raise ShapeError(f"condition has {cond[0]} values, more than the {dim} slices it selects among")
        return x, axis, cond[0]

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x, axis, _ = cls._along(operand_types, props)
        out = (DYN,) if axis is None else x[:axis] + (DYN,) + x[axis + 1 :]
        return [tensor(dtype_of(operand_types[0]), out)]

    def upper_bounds(self, operand_types: Sequence[Attribute] | None = None) -> list[Shape]:
        self._static_input(0, operand_types)
        self._static_input(1, operand_types)
        x, axis, n = self._along(operand_types or [o.type for o in self.operands], self.props)
        return [(n,) if axis is None else x[:axis] + (n,) + x[axis + 1 :]]


@irdl_op_definition
class UniqueOp(DataDependentOp):
    """ONNX Unique: the distinct values of x (or slices along `axis`), sorted or in order
    of first occurrence, with the index of each one's first occurrence, the inverse
    indices of every input element (or slice) and the counts (CANN `UniqueWithCountsExt2`)."""

    name = "ascend_graph.unique"
    OP_TYPE: ClassVar[str] = "UniqueWithCountsExt2"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    indices = result_def(TensorType)
    inverse_indices = result_def(TensorType)
    counts = result_def(TensorType)
    axis = opt_prop_def(IntegerAttr)
    sorted = prop_def(BoolAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x = shape_of(operand_types[0])
        if props.has("axis"):
            axis = shapes.norm_axis(props.int("axis"), len(x))
            y, n = x[:axis] + (DYN,) + x[axis + 1 :], x[axis]
        else:
            y, n = (DYN,), shapes.numel(x) if shapes.is_static(x) else DYN
        return [tensor(dtype_of(operand_types[0]), y), tensor(i64, (DYN,)), tensor(i64, (n,)), tensor(i64, (DYN,))]

    def upper_bounds(self, operand_types: Sequence[Attribute] | None = None) -> list[Shape]:
        x = self._static_input(0, operand_types)
        if self.props.has("axis"):
            axis = shapes.norm_axis(self.props.int("axis"), len(x))
            n, y = x[axis], x
        else:
            n = shapes.numel(x)
            y = (n,)
        return [y, (n,), (n,), (n,)]


@irdl_op_definition
class NonMaxSuppressionOp(DataDependentOp):
    """ONNX NonMaxSuppression: per batch and class, the boxes kept by greedy IoU
    suppression in descending score, as [batch, class, box] rows (int64) (CANN
    `NonMaxSuppressionV6`). `max_output_boxes_per_class`, `iou_threshold` and
    `score_threshold` are the node's constant inputs; no score_threshold keeps every score."""

    name = "ascend_graph.non_max_suppression_v6"
    OP_TYPE: ClassVar[str] = "NonMaxSuppressionV6"
    boxes = operand_def(TensorType)
    scores = operand_def(TensorType)
    selected_indices = result_def(TensorType)
    center_point_box = prop_def(BoolAttr)
    max_output_boxes_per_class = prop_def(IntegerAttr)
    iou_threshold = prop_def(FloatAttr)
    score_threshold = opt_prop_def(FloatAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        boxes, scores = shape_of(operand_types[0]), shape_of(operand_types[1])
        if len(boxes) != 3 or boxes[2] not in (4, DYN):
            raise ShapeError(f"boxes must be [batch, boxes, 4], not {shapes.fmt(boxes)}")
        if len(scores) != 3 or not shapes.compatible((boxes[0], boxes[1]), (scores[0], scores[2])):
            raise ShapeError(f"scores must be [batch, classes, boxes] of boxes {shapes.fmt(boxes)}, not {shapes.fmt(scores)}")
        if not is_float(dtype_of(operand_types[0])) or dtype_of(operand_types[0]) != dtype_of(operand_types[1]):
            raise ShapeError("boxes and scores must be floats of one dtype")
        if props.int("max_output_boxes_per_class") < 0:
            raise ShapeError(f"max_output_boxes_per_class {props.int('max_output_boxes_per_class')} must be >= 0")
        return [tensor(i64, (DYN, 3))]

    def upper_bounds(self, operand_types: Sequence[Attribute] | None = None) -> list[Shape]:
        batch, boxes, _ = self._static_input(0, operand_types)
        _, classes, _ = self._static_input(1, operand_types)
        return [(batch * classes * min(boxes, self.props.int("max_output_boxes_per_class")), 3)]


# ---------------------------------------------------- recurrent layers (LSTM, GRU, RNN)


RECURRENT_DIRECTIONS = ("UNIDIRECTIONAL", "REDIRECTIONAL")
"""GE's spelling of a recurrent op's direction: forward, or from the last step back."""
RECURRENT_ACTIVATIONS: dict[str, int] = {
    "Relu": 0, "Tanh": 0, "Sigmoid": 0, "Softsign": 0, "Softplus": 0,
    "Affine": 2, "LeakyRelu": 1, "ThresholdedRelu": 1, "ScaledTanh": 2, "HardSigmoid": 2, "Elu": 1,
}
"""The activations a recurrent op's gates may use (ONNX's list), with how many of
alpha and beta each takes."""


def _recurrent_format(required: Sequence[str], optional: Sequence[str], results: Sequence[str]) -> str:
    """The assembly format of a recurrent op: each optional operand after its keyword."""
    operands = " `,` ".join(f"${k}" for k in required) + "".join(f" (`{k}` ${k}^)?" for k in optional)
    types = " `,` ".join(f"type(${k})" for k in required) + "".join(f" (`{k}` type(${k})^)?" for k in optional)
    outs = " `,` ".join(f"type(${k})" for k in results)
    return f"{operands} attr-dict `:` `(` {types} `)` `->` `(` {outs} `)`"


class RecurrentOp(CubeOp):
    """A recurrent layer over a whole sequence in one direction: per time step t, the
    gates are x_t @ W + h_{t-1} @ R (+ biases) on the cube and the gate activations
    on the vector unit.

    x is [T, B, I] (time major); h is [1, B, H] like init_h and output_h, the state
    after the last step of each batch entry (0 for an entry of no steps, as
    onnxruntime gives); y [T, B, H] holds every step's h, and 0 past a batch
    entry's `seq_length` (int32 [B]; absent: T). REDIRECTIONAL runs each entry's
    steps from its last valid one back to 0. `activations` names the gate
    activations in ONNX's spelling, `activation_alpha`/`activation_beta` hold one
    value per activation (0 where it takes none); `cell_clip`, when present,
    clips the gates' inputs to [-cell_clip, cell_clip] (as onnxruntime does: not
    LSTM's c_t on its way into h's activation). The optional operands are told
    apart by `operandSegmentSizes`.
    """

    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))
    GATES: ClassVar[int]
    """The gates' blocks of columns in the weights."""
    ACTIVATIONS: ClassVar[int]
    """How many activations the cell takes."""
    direction = prop_def(StringAttr)
    activations = prop_def(ArrayAttr[StringAttr])
    activation_alpha = prop_def(DenseArrayBase)
    activation_beta = prop_def(DenseArrayBase)
    cell_clip = opt_prop_def(FloatAttr)
    traits = traits_def(Pure())

    def __init__(
        self,
        operands: Sequence[SSAValue | Operation | None],
        props: Mapping[str, Attribute] | None = None,
        name: str | None = None,
        result_types: Sequence[Attribute] | None = None,
    ):
        """`operands` in definition order, None (or left off at the end) for an absent optional one."""
        defs = type(self).get_irdl_definition().operands
        if len(operands) > len(defs):
            raise ShapeError(f"takes at most {len(defs)} operands, got {len(operands)}")
        slots = [None if v is None else SSAValue.get(v) for v in operands] + [None] * (len(defs) - len(operands))
        for (key, d), v in zip(defs, slots):
            if v is None and not isinstance(d, VariadicDef):
                raise ShapeError(f"operand {key} is required")
        properties = dict(props or {})
        if name is not None:
            properties["name"] = StringAttr(name)
        if result_types is None:
            named = {key: v.type for (key, _), v in zip(defs, slots) if v is not None}
            result_types = self.infer_named(named, Props(properties))
        grouped = [([v] if v is not None else []) if isinstance(d, VariadicDef) else v for (_, d), v in zip(defs, slots)]
        IRDLOperation.__init__(self, operands=grouped, properties=properties, result_types=result_types)

    @classmethod
    def infer_result_types(cls, operand_types, props):
        defs = cls.get_irdl_definition().operands
        sizes = props.ints("operandSegmentSizes", [1] * len(defs))
        if len(sizes) != len(defs) or sum(sizes) != len(operand_types) or max(sizes, default=0) > 1:
            raise ShapeError(f"operandSegmentSizes {list(sizes)} do not describe {len(operand_types)} operands")
        present = iter(operand_types)
        return cls.infer_named({key: next(present) for (key, _), n in zip(defs, sizes) if n}, props)

    @classmethod
    def infer_named(cls, types: Mapping[str, Attribute], props: Props) -> list[Attribute]:
        raise NotImplementedError(cls.__name__)

    @classmethod
    def common(cls, types: Mapping[str, Attribute], props: Props, weights: Sequence[str]) -> tuple[Attribute, int, int, int, int]:
        """The checks every recurrent op makes: (result dtype, T, B, I, H), H from the
        columns of `weights[-1]`. The result dtype is the `dtype` property (the cube
        writing float32 from float16 inputs), else the operands'."""
        x = shape_of(types["x"])
        if len(x) != 3:
            raise ShapeError(f"x {shapes.fmt(x)} must be 3-D [T, B, I] (time major)")
        floats = [k for k in types if k != "seq_length"]
        dtype = _same([types[k] for k in floats], "the float")
        if not is_float(dtype):
            raise ShapeError(f"needs floating-point operands, got {dtype}")
        out = props.type("dtype") if props.has("dtype") else dtype
        t, b, i = x
        cols = shape_of(types[weights[-1]])
        if len(cols) != 2 or cols[1] == DYN or cols[1] % cls.GATES:
            raise ShapeError(f"{weights[-1]} {shapes.fmt(cols)} must be 2-D with {cls.GATES} x hidden_size columns")
        h = cols[1] // cls.GATES
        cls.check(types, "seq_length", (b,))
        cls.check(types, "init_h", (1, b, h))
        if "seq_length" in types and dtype_of(types["seq_length"]) != IntegerType(32):
            raise ShapeError(f"seq_length must be int32, got {dtype_of(types['seq_length'])}")
        if props.str("direction") not in RECURRENT_DIRECTIONS:
            raise ShapeError(f"direction {props.str('direction')!r} is not {' or '.join(RECURRENT_DIRECTIONS)}")
        names = [a.data for a in props.type("activations")] if props.has("activations") else []  # type: ignore[attr-defined]
        if len(names) != cls.ACTIVATIONS:
            raise ShapeError(f"needs {cls.ACTIVATIONS} activations, got {names}")
        unknown = [a for a in names if a not in RECURRENT_ACTIVATIONS]
        if unknown:
            raise ShapeError(f"activation {unknown[0]!r} is not one of {', '.join(RECURRENT_ACTIVATIONS)}")
        for key in ("activation_alpha", "activation_beta"):
            if len(props.ints(key)) != len(names):
                raise ShapeError(f"{key} needs one value per activation ({len(names)})")
        if props.has("cell_clip") and not props.float("cell_clip") > 0:
            raise ShapeError(f"cell_clip {props.float('cell_clip')} must be positive")
        return out, t, b, i, h

    @staticmethod
    def check(types: Mapping[str, Attribute], key: str, want: Shape) -> None:
        """Operand `key`, when present, has the shape `want`."""
        if key in types and not shapes.compatible(shape_of(types[key]), want):
            raise ShapeError(f"{key} has shape {shapes.fmt(shape_of(types[key]))}, expected {shapes.fmt(want)}")


@irdl_op_definition
class DynamicRNNOp(RecurrentOp):
    """An LSTM layer in one direction (CANN `DynamicRNN`, cell_type LSTM, gate_order
    ijfo: input, cell candidate j, forget, output).

    w is [I + H, 4H]: x_t's rows, then h_{t-1}'s; b [4H] is the sum of both biases.
    With the peepholes wci, wcf, wco [H]: i = f(.. + wci c_{t-1}), f = f(.. + wcf
    c_{t-1}), o = f(.. + wco c_t); `input_forget` couples the gates (f = 1 - i).
    c_t = f c_{t-1} + i g(j), h_t = o h(c_t), with activations (f, g, h). GE's
    DynamicRNN also returns every step's c and gates for training; inference needs
    the final states only, output_h and output_c [1, B, H].
    """

    name = "ascend_graph.dynamic_rnn"
    OP_TYPE: ClassVar[str] = "DynamicRNN"
    GATES: ClassVar[int] = 4
    ACTIVATIONS: ClassVar[int] = 3
    x = operand_def(TensorType)
    w = operand_def(TensorType)
    b = opt_operand_def(TensorType)
    seq_length = opt_operand_def(TensorType)
    init_h = opt_operand_def(TensorType)
    init_c = opt_operand_def(TensorType)
    wci = opt_operand_def(TensorType)
    wcf = opt_operand_def(TensorType)
    wco = opt_operand_def(TensorType)
    y = result_def(TensorType)
    output_h = result_def(TensorType)
    output_c = result_def(TensorType)
    input_forget = prop_def(BoolAttr)

    assembly_format = _recurrent_format(["x", "w"], ["b", "seq_length", "init_h", "init_c", "wci", "wcf", "wco"], ["y", "output_h", "output_c"])

    @classmethod
    def infer_named(cls, types, props):
        dtype, t, b, i, h = cls.common(types, props, ["w"])
        cls.check(types, "w", (DYN if i == DYN else i + h, 4 * h))
        cls.check(types, "b", (4 * h,))
        cls.check(types, "init_c", (1, b, h))
        peepholes = [k for k in ("wci", "wcf", "wco") if k in types]
        if peepholes and len(peepholes) != 3:
            raise ShapeError(f"the peepholes are wci, wcf and wco together, got {', '.join(peepholes)}")
        for key in peepholes:
            cls.check(types, key, (h,))
        return [tensor(dtype, (t, b, h)), tensor(dtype, (1, b, h)), tensor(dtype, (1, b, h))]


@irdl_op_definition
class DynamicGRUV2Op(RecurrentOp):
    """A GRU layer in one direction (CANN `DynamicGRUV2`, gate_order zrh: update,
    reset, hidden).

    weight_input [I, 3H] and weight_hidden [H, 3H] multiply x_t and h_{t-1}, with
    bias_input and bias_hidden [3H]. z = f(..), r = f(..); with `reset_after`
    (ONNX's linear_before_reset) n = g(x_t Wh + bih + r (h_{t-1} Rh + bhh)), else
    n = g(x_t Wh + bih + (r h_{t-1}) Rh + bhh); h_t = (1 - z) n + z h_{t-1}.
    Activations (f, g).
    """

    name = "ascend_graph.dynamic_gru_v2"
    OP_TYPE: ClassVar[str] = "DynamicGRUV2"
    GATES: ClassVar[int] = 3
    ACTIVATIONS: ClassVar[int] = 2
    x = operand_def(TensorType)
    weight_input = operand_def(TensorType)
    weight_hidden = operand_def(TensorType)
    bias_input = opt_operand_def(TensorType)
    bias_hidden = opt_operand_def(TensorType)
    seq_length = opt_operand_def(TensorType)
    init_h = opt_operand_def(TensorType)
    y = result_def(TensorType)
    output_h = result_def(TensorType)
    reset_after = prop_def(BoolAttr)

    assembly_format = _recurrent_format(["x", "weight_input", "weight_hidden"], ["bias_input", "bias_hidden", "seq_length", "init_h"], ["y", "output_h"])

    @classmethod
    def infer_named(cls, types, props):
        dtype, t, b, i, h = cls.common(types, props, ["weight_input", "weight_hidden"])
        cls.check(types, "weight_input", (i, 3 * h))
        cls.check(types, "weight_hidden", (h, 3 * h))
        for key in ("bias_input", "bias_hidden"):
            cls.check(types, key, (3 * h,))
        return [tensor(dtype, (t, b, h)), tensor(dtype, (1, b, h))]


@irdl_op_definition
class RNNOp(RecurrentOp):
    """A simple RNN layer in one direction (CANN `RNN`): h_t = f(x_t W_xh + h_{t-1}
    W_hh + b), w [I + H, H] stacking W_xh and W_hh, b [H] the sum of both biases.

    GE's name for a whole-sequence plain RNN: BasicRNNCell is one time step, and
    DynamicRNN and DynamicRNNV2 take cell_type LSTM only. GE's RNN (Caffe's layer)
    also has an output projection, which ONNX's RNN has not, so it is left out.
    """

    name = "ascend_graph.rnn"
    OP_TYPE: ClassVar[str] = "RNN"
    GATES: ClassVar[int] = 1
    ACTIVATIONS: ClassVar[int] = 1
    x = operand_def(TensorType)
    w = operand_def(TensorType)
    b = opt_operand_def(TensorType)
    seq_length = opt_operand_def(TensorType)
    init_h = opt_operand_def(TensorType)
    y = result_def(TensorType)
    output_h = result_def(TensorType)

    assembly_format = _recurrent_format(["x", "w"], ["b", "seq_length", "init_h"], ["y", "output_h"])

    @classmethod
    def infer_named(cls, types, props):
        dtype, t, b, i, h = cls.common(types, props, ["w"])
        cls.check(types, "w", (DYN if i == DYN else i + h, h))
        cls.check(types, "b", (h,))
        return [tensor(dtype, (t, b, h)), tensor(dtype, (1, b, h))]


# ----------------------------- quantization (AscendQuant, AscendDequant, AscendRequant)


QUANT_INTEGERS = ("i8", "ui8", "i16", "ui16")
"""The integer dtypes a quantization writes (ONNX QuantizeLinear's, but for int4 and float8)."""


def _quant_integer(dtype: Attribute, what: str, wide: bool = False) -> None:
    """`dtype` is a quantized integer: int8/uint8/int16/uint16, and int32 when `wide`."""
    allowed = QUANT_INTEGERS + (("i32",) if wide else ())
    if not isinstance(dtype, IntegerType) or dtype == i1 or str(dtype) not in allowed:
        raise ShapeError(f"{what} must be one of {', '.join(allowed)}, got {dtype}")


def _quant_params(operand_types: Sequence[Attribute], props: Props, what: str) -> None:
    """The shape rule of a scale (operand 1) and its optional offset (operand 2, one
    value or the scale's shape) against x (operand 0): one value (rank 0 or [1]), one
    per index along `axis` ([x[axis]]), or, with `block_size` > 0, x's shape with
    `axis` cut into blocks (ceil(x[axis] / block_size))."""
    x, scale = shape_of(operand_types[0]), shape_of(operand_types[1])
    if not is_float(dtype_of(operand_types[1])):
        raise ShapeError(f"{what} must be floating-point, got {dtype_of(operand_types[1])}")
    one = ((), (1,))
    offset = shape_of(operand_types[2]) if len(operand_types) > 2 else ()
    if offset not in one and not shapes.compatible(offset, scale):
        raise ShapeError(f"offset {shapes.fmt(offset)} is neither one value nor {what}'s shape {shapes.fmt(scale)}")
    block = props.int("block_size")
    if block < 0:
        raise ShapeError(f"block_size {block} must be >= 0")
    if block == 0 and scale in one:
        return
    axis = shapes.norm_axis(props.int("axis", 1), len(x))
    if block == 0:
        if len(scale) != 1 or not shapes.compatible(scale, (x[axis],)):
            raise ShapeError(
                f"{what} {shapes.fmt(scale)} is neither one value nor [{x[axis]}] (one per index along axis {axis})"
            )
        return
    want = tuple(DYN if d == DYN else -(-d // block) if i == axis else d for i, d in enumerate(x))
    if not shapes.compatible(scale, want):
        raise ShapeError(
            f"blocked {what} {shapes.fmt(scale)} is not {shapes.fmt(want)} "
            f"(x {shapes.fmt(x)} in blocks of {block} along axis {axis})"
        )


@irdl_op_definition
class AscendQuantOp(AscendOp):
    """y = saturate(round_half_even(x / scale) + offset) in `dst_type` (CANN
    `AscendQuant`, widened to ONNX QuantizeLinear: scale and offset are tensors, one
    value, one per index along `axis`, or per block of `block_size` along it).

    The quotient is rounded to `precision` (the scale's dtype unless set) before
    it is rounded to an integer, as QuantizeLinear-23 specifies."""

    name = "ascend_graph.ascend_quant"
    OP_TYPE: ClassVar[str] = "AscendQuant"
    x = operand_def(TensorType)
    scale = operand_def(TensorType)
    offset = opt_operand_def(TensorType)
    y = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    block_size = prop_def(IntegerAttr)
    dst_type = prop_def(TypeAttribute)
    precision = opt_prop_def(TypeAttribute)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        if not is_float(dtype_of(operand_types[0])):
            raise ShapeError(f"x must be floating-point, got {dtype_of(operand_types[0])}")
        dst = props.type("dst_type")
        _quant_integer(dst, "dst_type")
        if len(operand_types) > 2 and dtype_of(operand_types[2]) != dst:
            raise ShapeError(f"offset is {dtype_of(operand_types[2])}, not the result's {dst}")
        if props.has("precision") and not is_float(props.type("precision")):
            raise ShapeError(f"precision must be a floating-point type, got {props.type('precision')}")
        _quant_params(operand_types, props, "scale")
        return [tensor(dst, shape_of(operand_types[0]))]


@irdl_op_definition
class AscendDequantOp(AscendOp):
    """y = (x - offset) * scale, in the scale's dtype (CANN `AscendDequant`: an int32
    cube result times its deq_scale; widened to ONNX DequantizeLinear's integer
    inputs, offsets and per-axis or blocked scales)."""

    name = "ascend_graph.ascend_dequant"
    OP_TYPE: ClassVar[str] = "AscendDequant"
    x = operand_def(TensorType)
    scale = operand_def(TensorType)
    offset = opt_operand_def(TensorType)
    y = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    block_size = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        _quant_integer(dtype_of(operand_types[0]), "x", wide=True)
        if len(operand_types) > 2 and dtype_of(operand_types[2]) != dtype_of(operand_types[0]):
            raise ShapeError(f"offset is {dtype_of(operand_types[2])}, not x's {dtype_of(operand_types[0])}")
        _quant_params(operand_types, props, "scale")
        return [tensor(dtype_of(operand_types[1]), shape_of(operand_types[0]))]


@irdl_op_definition
class AscendRequantOp(AscendOp):
    """y = saturate(round_half_even(x * scale) + offset) in `dst_type`: an int32
    accumulator requantized (CANN `AscendRequant`; `scale` is the requant multiplier,
    one value or one per index along `axis`)."""

    name = "ascend_graph.ascend_requant"
    OP_TYPE: ClassVar[str] = "AscendRequant"
    x = operand_def(TensorType)
    scale = operand_def(TensorType)
    offset = opt_operand_def(TensorType)
    y = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    dst_type = prop_def(TypeAttribute)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        if dtype_of(operand_types[0]) != i32:
            raise ShapeError(f"x must be i32 (an accumulator), got {dtype_of(operand_types[0])}")
        dst = props.type("dst_type")
        if str(dst) not in ("i8", "ui8"):
            raise ShapeError(f"dst_type must be i8 or ui8, got {dst}")
        if len(operand_types) > 2 and dtype_of(operand_types[2]) != dst:
            raise ShapeError(f"offset is {dtype_of(operand_types[2])}, not the result's {dst}")
        _quant_params(operand_types, props, "scale")
        return [tensor(dst, shape_of(operand_types[0]))]


# ------------------------------------------------------------------------- control flow


def _merged(a: Shape, b: Shape, what: str) -> Shape:
    """The shape two values share: their dims where they agree, dynamic where not."""
    if len(a) != len(b):
        raise ShapeError(f"{what} have ranks {len(a)} and {len(b)}; they must agree")
    return tuple(x if x == y else DYN for x, y in zip(a, b))


def _fits(got: Attribute, want: Attribute) -> bool:
    return isinstance(got, TensorType) and dtype_of(got) == dtype_of(want) and shapes.compatible(shape_of(got), shape_of(want))


def _check_types(got: Sequence[Attribute], want: Sequence[Attribute], what: str) -> None:
    if len(got) != len(want):
        raise ShapeError(f"{what}: {len(got)} values, expected {len(want)}")
    for i, (g, w) in enumerate(zip(got, want)):
        if not _fits(g, w):
            raise ShapeError(f"{what}: value {i} is {g}, expected {dtype_of(w)}{shapes.fmt(shape_of(w))}")


def _scalar(t: Attribute, dtype: Attribute, what: str) -> None:
    shape = shape_of(t)
    if dtype_of(t) != dtype or (shapes.is_static(shape) and shapes.numel(shape) != 1):
        raise ShapeError(f"{what} must be one {dtype} element, got {t}")


class ControlFlowOp(AscendOp):
    """An op with bodies (GE's functional control-flow ops, whose subgraphs take their
    inputs as Data). A body is isolated from the graph around it: every value it reads
    from there is an operand of the op and an argument of the body (constants are
    copied into the body instead, so that they fold there). Each body ends with
    `ascend_graph.yield`. The result types are the op's own (a body's yield may
    refine them); `verify_` checks the bodies' arguments and yields against them."""

    traits = traits_def(IsolatedFromAbove(), RecursiveMemoryEffect())

    def __init__(
        self,
        operands: Sequence[SSAValue | Operation],
        bodies: Sequence[Region],
        result_types: Sequence[Attribute],
        props: Mapping[str, Attribute] | None = None,
        name: str | None = None,
    ):
        properties = dict(props or {})
        if name is not None:
            properties["name"] = StringAttr(name)
        IRDLOperation.__init__(
            self, operands=self._group([SSAValue.get(o) for o in operands]), properties=properties,
            result_types=[list(result_types)], regions=list(bodies),
        )

    @classmethod
    def infer_result_types(cls, operand_types, props):
        raise ShapeError(f"the result types of {cls.OP_TYPE} come from its bodies, not from its operands alone")

    def check_bodies(self) -> None:
        """Raise ShapeError where a body's arguments or yield disagree with the op."""
        raise NotImplementedError(type(self).__name__)

    @staticmethod
    def yielded(body: Region) -> list[Attribute]:
        last = body.block.last_op
        if not isinstance(last, YieldOp):
            raise ShapeError("a body must end with ascend_graph.yield")
        return [v.type for v in last.values]

    def verify_(self) -> None:
        for i, t in enumerate(o.type for o in self.operands):
            if not isinstance(t, TensorType):
                raise VerifyException(f"{self.OP_TYPE} '{self.label}': operand {i} is {t}, not a tensor")
        try:
            self.check_bodies()
        except ShapeError as e:
            raise VerifyException(f"{self.OP_TYPE} '{self.label}': {e}") from e


@irdl_op_definition
class IfOp(ControlFlowOp):
    """ONNX If (CANN `If`): runs `then_branch` or `else_branch` on `inputs` by the one
    boolean of `cond`. Both branches take `inputs` as arguments and yield the results;
    where their shapes differ the result's dim is dynamic."""

    name = "ascend_graph.if"
    OP_TYPE: ClassVar[str] = "If"
    cond = operand_def(TensorType)
    inputs = var_operand_def(TensorType)
    outs = var_result_def(TensorType)
    then_branch = region_def("single_block")
    else_branch = region_def("single_block")
    assembly_format = (
        "$cond `(` $inputs `)` attr-dict `:` functional-type(operands, results) `then` $then_branch `else` $else_branch"
    )

    @staticmethod
    def types_from(then_types: Sequence[Attribute], else_types: Sequence[Attribute]) -> list[Attribute]:
        """The results of branches yielding these types."""
        if len(then_types) != len(else_types):
            raise ShapeError(f"the then branch yields {len(then_types)} values, the else branch {len(else_types)}")
        out = []
        for i, (t, e) in enumerate(zip(then_types, else_types)):
            if dtype_of(t) != dtype_of(e):
                raise ShapeError(f"output {i} is {dtype_of(t)} in the then branch and {dtype_of(e)} in the else branch")
            out.append(tensor(dtype_of(t), _merged(shape_of(t), shape_of(e), f"output {i} of the two branches")))
        return out

    def check_bodies(self) -> None:
        _scalar(self.cond.type, i1, "the condition")
        types = [v.type for v in self.inputs]
        for what, body in (("then branch", self.then_branch), ("else branch", self.else_branch)):
            _check_types(body.block.arg_types, types, f"the {what}'s arguments")
            _check_types(self.yielded(body), [r.type for r in self.results], f"the {what}'s yield")

@irdl_op_definition
class LoopOp(ControlFlowOp):
    """ONNX Loop (GE runs it as a While): while `iteration < trip_count` and the
    condition holds, `body(iteration, cond, carried..., captured...)` yields the next
    condition, the next carried values and one slice of each scan output. The results
    are the last carried values and the scan outputs stacked on a new first axis. The
    last `captures` inputs are values of the graph around the loop, not carried; an
    absent trip count is INT64_MAX, an absent condition true."""

    name = "ascend_graph.loop"
    OP_TYPE: ClassVar[str] = "Loop"
    trip_count = operand_def(TensorType)
    cond = operand_def(TensorType)
    inputs = var_operand_def(TensorType)
    captures = prop_def(IntegerAttr)
    outs = var_result_def(TensorType)
    body = region_def("single_block")
    assembly_format = "$trip_count `,` $cond `(` $inputs `)` attr-dict `:` functional-type(operands, results) $body"

    @property
    def carried(self) -> int:
        return len(self.inputs) - self.captures.value.data

    @staticmethod
    def types_from(carried: Sequence[Attribute], yielded: Sequence[Attribute], trips: int = DYN) -> list[Attribute]:
        """The results of a body yielding these types (after the condition) for
        loop-carried values of types `carried`, run `trips` times at most."""
        out = [
            tensor(dtype_of(c), _merged(shape_of(c), shape_of(y), f"carried value {i} and its next value"))
            for i, (c, y) in enumerate(zip(carried, yielded))
        ]
        return out + [tensor(dtype_of(y), (trips, *shape_of(y))) for y in yielded[len(carried):]]

    def check_bodies(self) -> None:
        _scalar(self.trip_count.type, i64, "the trip count")
        _scalar(self.cond.type, i1, "the condition")
        n = self.carried
        if not 0 <= n <= len(self.inputs):
            raise ShapeError(f"captures {self.captures.value.data} is more than its {len(self.inputs)} inputs")
        results = [r.type for r in self.results]
        if len(results) < n:
            raise ShapeError(f"has {len(results)} results for {n} loop-carried values")
        inputs = [v.type for v in self.inputs]
        _check_types(inputs[:n], results[:n], "the initial carried values")
        scalars = [tensor(i64, ()), tensor(i1, ())]
        _check_types(self.body.block.arg_types, [*scalars, *results[:n], *inputs[n:]], "the body's arguments")
        yielded = self.yielded(self.body)
        if any(len(shape_of(r)) < 1 for r in results[n:]):
            raise ShapeError("a scan output needs a leading iteration axis")
        if not yielded:
            raise ShapeError("the body yields no condition")
        _scalar(yielded[0], i1, "the condition the body yields")
        slices = [tensor(dtype_of(r), shape_of(r)[1:]) for r in results[n:]]
        _check_types(yielded[1:], [*results[:n], *slices], "the body's yield after the condition")


@irdl_op_definition
class ScanOp(ControlFlowOp):
    """ONNX Scan (opset 9 and later): `body(states..., slices..., captured...)` runs
    once per position along each scan input's axis (in its direction), yielding the
    next states and one slice of each scan output, stacked along its output axis (in
    its direction). Operands: the initial states, the `num_scan_inputs` scan inputs,
    the `captures` values of the graph around it; axes are non-negative."""

    name = "ascend_graph.scan"
    OP_TYPE: ClassVar[str] = "Scan"
    inputs = var_operand_def(TensorType)
    num_scan_inputs = prop_def(IntegerAttr)
    captures = prop_def(IntegerAttr)
    scan_input_axes = prop_def(DenseArrayBase)
    scan_input_directions = prop_def(DenseArrayBase)
    scan_output_axes = prop_def(DenseArrayBase)
    scan_output_directions = prop_def(DenseArrayBase)
    outs = var_result_def(TensorType)
    body = region_def("single_block")
    assembly_format = "`(` $inputs `)` attr-dict `:` functional-type(operands, results) $body"

    @property
    def states(self) -> int:
        return len(self.inputs) - self.num_scan_inputs.value.data - self.captures.value.data

    @staticmethod
    def slice_types(scanned: Sequence[Attribute], axes: Sequence[int]) -> list[Attribute]:
        """The per-step slices of the scan inputs, and their common sequence length."""
        return [
            tensor(dtype_of(t), tuple(d for j, d in enumerate(shape_of(t)) if j != a)) for t, a in zip(scanned, axes)
        ]

    @staticmethod
    def length(scanned: Sequence[Attribute], axes: Sequence[int]) -> int:
        lengths = {shape_of(t)[a] for t, a in zip(scanned, axes)}
        known = lengths - {DYN}
        if len(known) > 1:
            raise ShapeError(f"the scan inputs have different lengths {sorted(known)} along their scan axes")
        return known.pop() if known else DYN

    def check_bodies(self) -> None:
        m, k = self.num_scan_inputs.value.data, self.captures.value.data
        n = self.states
        if m < 1 or k < 0 or n < 0:
            raise ShapeError(f"{len(self.inputs)} inputs cannot hold {m} scan inputs and {k} captured values")
        in_axes, out_axes = self.scan_input_axes.get_values(), self.scan_output_axes.get_values()
        if len(in_axes) != m or len(self.scan_input_directions.get_values()) != m:
            raise ShapeError(f"needs an axis and a direction for each of its {m} scan inputs")
        inputs = [v.type for v in self.inputs]
        scanned = inputs[n:n + m]
        for t, a in zip(scanned, in_axes):
            if not 0 <= a < len(shape_of(t)):
                raise ShapeError(f"scan axis {a} is outside a scan input of rank {len(shape_of(t))}")
        length = self.length(scanned, in_axes)
        results = [r.type for r in self.results]
        if len(out_axes) != len(results) - n or len(self.scan_output_directions.get_values()) != len(out_axes):
            raise ShapeError(f"needs an axis and a direction for each of its {len(results) - n} scan outputs")
        _check_types(results[:n], inputs[:n], "the final states")
        _check_types(self.body.block.arg_types, [*inputs[:n], *self.slice_types(scanned, in_axes), *inputs[n + m:]], "the body's arguments")
        slices = []
        for r, a in zip(results[n:], out_axes):
            shape = shape_of(r)
            if not 0 <= a < len(shape) or not shapes.compatible((length,), (shape[a],)):
                raise ShapeError(f"scan output {r} has no axis {a} of the sequence length {shapes.fmt((length,))}")
            slices.append(tensor(dtype_of(r), shape[:a] + shape[a + 1:]))
        _check_types(self.yielded(self.body), [*inputs[:n], *slices], "the body's yield")


@irdl_op_definition
class YieldOp(IRDLOperation):
    """The values a body of If, Loop or Scan gives back (its subgraph's NetOutput)."""

    name = "ascend_graph.yield"
    values = var_operand_def(TensorType)
    traits = traits_def(IsTerminator(), HasParent(IfOp, LoopOp, ScanOp))
    assembly_format = "$values attr-dict `:` type($values)"

    def __init__(self, values: Sequence[SSAValue | Operation]):
        super().__init__(operands=[[SSAValue.get(v) for v in values]])


# ---------------------------------------------------------------------- TfIdfVectorizer


@irdl_op_definition
class TfIdfVectorizerOp(AscendOp):
    """Counts of the pool's n-grams in each row of integer tokens (ONNX TfIdfVectorizer,
    AI CPU only). `pool` holds the n-grams by length, `ngram_counts[k]` the pool position
    where the (k+1)-grams start; `ngram_indexes[j]` is the result column of n-gram j. An
    n-gram of length min..max_gram_length may skip up to `max_skip_count` tokens between
    its items (the same gap throughout); `mode` TF counts, IDF writes `weights` (default
    1) where the count is positive, TFIDF multiplies the count by them."""

    name = "ascend_graph.tf_idf_vectorizer"
    OP_TYPE: ClassVar[str] = "TfIdfVectorizer"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    min_gram_length = prop_def(IntegerAttr)
    max_gram_length = prop_def(IntegerAttr)
    max_skip_count = prop_def(IntegerAttr)
    mode = prop_def(StringAttr)
    ngram_counts = prop_def(DenseArrayBase)
    ngram_indexes = prop_def(DenseArrayBase)
    pool = prop_def(DenseArrayBase)
    weights = opt_prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    @classmethod
    def infer_result_types(cls, operand_types, props):
        x = shape_of(operand_types[0])
        if len(x) not in (1, 2) or not _is_integer(dtype_of(operand_types[0])):
            raise ShapeError(f"needs integer tokens of rank 1 or 2, got {dtype_of(operand_types[0])} {shapes.fmt(x)}")
        if props.str("mode") not in ("TF", "IDF", "TFIDF"):
            raise ShapeError(f"mode {props.str('mode')!r} is not TF, IDF or TFIDF")
        if not 1 <= props.int("min_gram_length") <= props.int("max_gram_length") or props.int("max_skip_count") < 0:
            raise ShapeError("needs 1 <= min_gram_length <= max_gram_length and a non-negative max_skip_count")
        indexes = props.ints("ngram_indexes")
        if not indexes or min(indexes) < 0:
            raise ShapeError("ngram_indexes needs at least one entry, none negative")
        if props.has("weights") and len(props.ints("weights")) != len(indexes):
            raise ShapeError(f"weights need one entry per n-gram ({len(indexes)})")
        return [tensor(f32, x[:-1] + (max(indexes) + 1,))]


AscendGraph = Dialect(
    "ascend_graph",
    [
        GraphOp, DataOp, ConstOp, NetOutputOp,
        AddOp, SubOp, MulOp, DivOp, PowOp, MaximumOp, MinimumOp, PReluOp,
        EqualOp, LessOp, LessEqualOp, GreaterOp, GreaterEqualOp,
        LogicalAndOp, LogicalOrOp, LogicalXorOp, LogicalNotOp,
        IdentityOp, NegOp, AbsOp, SignOp, ReluOp, SqrtOp, RsqrtOp, ExpOp, LogOp, ReciprocalOp,
        ErfOp, TanhOp, SigmoidOp, SinOp, CosOp, FloorOp, CeilOp, RoundOp, SoftplusOp, SoftsignOp,
        HardSwishOp, GeluOp, LeakyReluOp, EluOp, SeluOp, HardSigmoidOp, ClipByValueOp, CastOp, TransDataOp, SelectOp,
        ReduceMeanOp, ReduceSumOp, ReduceMaxOp, ReduceMinOp, ReduceProdOp, ArgMaxOp, ArgMinOp,
        SoftmaxOp, LogSoftmaxOp, BatchNormOp, LayerNormOp, InstanceNormOp,
        MultiHeadAttentionOp,
        Conv2DOp, MatMulV2Op, BatchMatMulOp, GemmOp, FullyConnectionOp,
        MaxPoolOp, AvgPoolOp, GlobalAveragePoolOp, GlobalMaxPoolOp,
        ReshapeOp, FlattenOp, TransposeOp, ConfusionTransposeOp, SqueezeOp, UnsqueezeOp, ConcatOp, SplitOp, SplitVOp,
        StridedSliceOp, GatherOp, GatherElementsOp, PadOp, ResizeOp, ExpandOp, TileOp,
        DepthToSpaceOp, SpaceToDepthOp,
        NLLLossOp, SoftmaxCrossEntropyLossOp, RmsNormOp, LpNormOp, DivNoNanOp, GroupNormOp, MVNV2Op, LRNOp,
        GatherNdOp, ScatterNdUpdateOp, ScatterElementsOp, TensorScatterOp, ReverseSequenceOp, DFTOp, STFTOp,
        Conv3DOp, Conv2DTransposeOp, Conv3DTransposeOp, MaxPool3DOp, AvgPool3DOp, LpPoolOp, MaxPoolWithArgmaxOp, MaxUnpoolOp,
        GridSampler2DOp, GridSampler3DOp, AffineGridOp, Col2imOp, DeformableOffsetsOp, ROIAlignOp,
        FusedInferAttentionScoreOp, RotaryPositionEmbeddingOp, TopKV2Op,
        FloorModOp, ModOp, LeftShiftOp, RightShiftOp, BitwiseAndOp, BitwiseOrOp, BitwiseXorOp, InvertOp, IsNanOp, IsInfOp, TanOp, AsinOp, AcosOp, AtanOp, SinhOp, CoshOp, AsinhOp, AcoshOp, AtanhOp, ThresholdedReluOp, ShrinkOp, SwishOp, HardmaxOp, TrilOp, TriuOp, CumsumOp, CumprodOp, BitcastOp, OneHotOp, MatrixDeterminantOp,
        NonZeroOp, CompressOp, UniqueOp, NonMaxSuppressionOp,
        DynamicRNNOp, DynamicGRUV2Op, RNNOp,
        ShapeOp, DynamicReshapeOp, RangeOp, BroadcastToOp, StridedSliceV2Op,
        AscendQuantOp, AscendDequantOp, AscendRequantOp,
        IfOp, LoopOp, ScanOp, YieldOp,
        TfIdfVectorizerOp,
    ],
    [FormatAttr, WeightRefAttr],
)
