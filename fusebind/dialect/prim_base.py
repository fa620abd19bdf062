"""The common base of every `prim` op: its facts, and the one custom syntax.

Every `prim` op reads and prints as

    %r = prim.<kind> [keyword] %a, %b [{props}] : <in-types> -> <result-type>

where `<in-types>` is a single type for one operand and `(T1, T2, ...)`
otherwise, `keyword` is a property printed bare (the predicate of
`prim.compare`), and `{props}` holds the remaining properties with integer
lists written `[1, 2]` and unit properties bare (`{axes = [1], keepdims}`).
The generic form (`"prim.add"(%a, %b) : (...) -> ...`) always works too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    IntegerAttr,
    StringAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from fusebind.dialect.errors import FusebindValueError, ShapeInferenceError
from fusebind.dialect.types import (
    ELEMENT_TYPES,
    Shape,
    compatible,
    elem_of,
    element_type_name,
    format_shape,
    num_elements,
    numpy_dtype,
    shape_of,
)


def int_list(values: Sequence[int]) -> DenseArrayBase:
    """An i64 dense array property (`array<i64: ...>` in generic form)."""
    return DenseArrayBase.from_list(i64, [int(v) for v in values])


def int_list_values(attr: Attribute) -> tuple[int, ...]:
    if isinstance(attr, DenseArrayBase):
        return tuple(int(v) for v in attr.get_values())
    raise FusebindValueError(f"expected an integer list, found {attr}")


#: how verification messages name an operand field
_OPERAND_WORDS = {"x": "operand", "cond": "condition"}


class PrimOp(IRDLOperation):
    """Base class of `prim` ops; subclasses set the class facts below."""

    KIND: ClassVar[str]
    FLOPS_PER_ELEMENT: ClassVar[float] = 0.0
    # Element types accepted for the (data) operands: the readable fact, and what the one generic
    # check in `verify_` enforces (xDSL's own constraint messages would change the documented ones).
    DTYPES: ClassVar[frozenset[str]]
    # The operands DTYPES applies to (None: every operand; select's condition is i1, not DTYPES).
    DTYPE_OPERANDS: ClassVar[tuple[str, ...] | None] = None
    # Properties printed as a bare keyword right after the op name.
    KEYWORD_PROPS: ClassVar[tuple[str, ...]] = ()
    # Properties that hold integer lists (printed `[1, 2]` in the custom form).
    LIST_PROPS: ClassVar[tuple[str, ...]] = ()
    # The `fb.<name>` function this op provides (None: none), and the numpy ufunc it implements
    # (its `__name__`, e.g. "add"; None: none). The API and the ufunc table are generated from these.
    API_NAME: ClassVar[str | None] = None
    NUMPY_UFUNC: ClassVar[str | None] = None
    # An index map: the op only reads its operands' elements at other positions (slice, gather,
    # concat). Inside a fused region it lowers to a read that elementwise fusion folds into its
    # consumer (a region prologue, no buffer); the fusion rules and the lowering ask this fact.
    INDEX_MAP: ClassVar[bool] = False
    # The operands that hold indices (gather, take_along, scatter: (1,)): a kernel's index check
    # names the arguments these are computed from (lowering/emit.py).
    INDEX_OPERANDS: ClassVar[tuple[int, ...]] = ()

    # --- facts -----------------------------------------------------------
    def flops(self) -> float | None:
        """Total flops for static shapes (FLOPS_PER_ELEMENT × output elements)."""
        if self.FLOPS_PER_ELEMENT == 0:
            return 0.0
        n = num_elements(self.result_shape())
        return None if n is None else float(self.FLOPS_PER_ELEMENT * n)

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{self.name} has no numpy reference")

    def result_shape(self) -> Shape:
        return shape_of(self.results[0].type)

    def describe(self, operands: Sequence[str] = ()) -> str:
        """A short phrase for `explain` (`operands`: how to name the operands). The default is
        the op's KIND, its operands and its properties (`gather x, idx axis 0`); normalized slice
        bounds (`starts`/`limits`/`strides`) read as numpy's subscript (`slice x[1:5:2, :]`).
        An op class may override it with its own wording."""
        def subscript(start: int, limit: int, step: int, n: int | None) -> str:
            """One dim of `x[...]`, numpy's defaults left out (`:`, `1:5:2`, `::-1`)."""
            if start < 0:  # a negative stride's start of -1: the empty range
                return "0:0"
            first, past = (0, n) if step > 0 else (None if n is None else n - 1, -1)
            text = ("" if start == first else str(start)) + ":" + ("" if limit == past else str(limit))
            return text + ("" if step == 1 else f":{step}")

        names = list(operands) or [f"#{i}" for i in range(len(self.operands))]
        props = {k: v for k, v in self.properties.items() if k not in self.KEYWORD_PROPS}
        if {"starts", "limits", "strides"} <= props.keys() and self.operands:
            bounds = zip(*(int_list_values(props.pop(k)) for k in ("starts", "limits", "strides")))
            dims = shape_of(self.operands[0].type)
            names[0] += "[" + ", ".join(subscript(s, l, k, n) for (s, l, k), n in zip(bounds, dims)) + "]"
        words = [self.KIND, *(str(self.properties[k].data) for k in self.KEYWORD_PROPS  # type: ignore[attr-defined]
                              if isinstance(self.properties.get(k), StringAttr))]
        text = " ".join(words) + (" " + ", ".join(names) if names else "")
        for key, value in props.items():
            if isinstance(value, UnitAttr):
                text += f" {key}"
            elif isinstance(value, DenseArrayBase):
                text += f" {key} [{', '.join(str(v) for v in int_list_values(value))}]"
            elif isinstance(value, IntegerAttr):
                text += f" {key} {value.value.data}"
            elif isinstance(value, StringAttr):
                text += f" {key} {value.data}"
            else:
                text += f" {key} {value}"
        return text

    # --- shape inference: the ONE rule per op ---------------------------------
    @classmethod
    def infer_shape(cls, *operand_shapes: Shape, **props: Any) -> Shape:
        """The result shape of this op on operands of `operand_shapes` (ints, or None for a
        dynamic dim), given the properties `shape_props` names. Constructors, verifiers, shape
        specialization and lowering all use it. Raises `ShapeInferenceError`."""
        raise ShapeInferenceError(f"{cls.name}: no shape rule; give its result a static type")

    def shape_props(self) -> dict[str, Any]:
        """The keyword arguments `infer_shape` needs, read from this op (none by default)."""
        return {}

    def inferred_shape(self, operand_shapes: Sequence[Shape] | None = None) -> Shape:
        """`infer_shape` of this op, on its operands' shapes unless others are given."""
        if operand_shapes is None:
            operand_shapes = [shape_of(o.type) for o in self.operands]
        return type(self).infer_shape(*operand_shapes, **self.shape_props())

    def _check_inferred(self, elem: str) -> None:
        """Verify the result type against the inferred shape and `elem`."""
        try:
            shape = self.inferred_shape()
        except ShapeInferenceError as err:
            raise VerifyException(str(err)) from None
        self._check_result(shape, elem)

    def result_elem(self) -> str:
        return elem_of(self.results[0].type)

    # --- verification -------------------------------------------------------
    def verify_(self) -> None:
        """The one element-type check, driven by DTYPES, then the op's own checks (`verify_op`)."""
        defs = self.get_irdl_definition().operands
        for (field, _), value in zip(defs, self.operands):
            if self.DTYPE_OPERANDS is None or field in self.DTYPE_OPERANDS:
                self._check_dtype(self._elem(value, _OPERAND_WORDS.get(field, field)))
        self.verify_op()

    def verify_op(self) -> None:
        """This op's checks beyond the element types (shapes, properties); none by default."""

    def _elem(self, value: SSAValue, what: str) -> str:
        t = value.type
        if not isinstance(t, TensorType):  # the IRDL constraint has already refused this
            raise FusebindValueError(f"{self.name}: {what} is not a ranked tensor: {t}")
        try:
            return element_type_name(t.element_type)
        except ValueError:
            raise VerifyException(
                f"{self.name}: {what} element type {t.element_type} is not supported; "
                f"expected one of {', '.join(ELEMENT_TYPES)}"
            ) from None

    def _check_dtype(self, elem: str, what: str = "operand") -> None:
        if elem not in self.DTYPES:
            allowed = ", ".join(e for e in ELEMENT_TYPES if e in self.DTYPES)
            raise VerifyException(
                f"{self.name}: {what} element type {elem} is not supported; expected one of {allowed}"
            )

    def _check_result(self, shape: Shape, elem: str) -> None:
        rt = self.results[0].type
        r_elem = self._elem(self.results[0], "result")
        r_shape = shape_of(rt)
        if r_elem != elem or not compatible(r_shape, shape):
            raise VerifyException(
                f"{self.name}: result type {rt} does not match the inferred shape "
                f"{format_shape(shape)} and element type {elem}"
            )

    # --- custom syntax -----------------------------------------------------
    def print(self, printer: Printer) -> None:
        for key in self.KEYWORD_PROPS:
            prop = self.properties[key]
            if not isinstance(prop, StringAttr):
                raise FusebindValueError(f"{self.name}: property {key} must be a string")
            printer.print_string(f" {prop.data}")
        if self.operands:
            printer.print_string(" ")
            printer.print_list(self.operands, printer.print_operand)
        self._print_props(printer)
        printer.print_string(" : ")
        types = [o.type for o in self.operands]
        if len(types) == 1:
            printer.print_attribute(types[0])
        else:
            printer.print_string("(")
            printer.print_list(types, printer.print_attribute)
            printer.print_string(")")
        printer.print_string(" -> ")
        printer.print_attribute(self.results[0].type)

    def _print_props(self, printer: Printer) -> None:
        entries: list[tuple[str, Attribute]] = [
            (k, v) for k, v in self.properties.items() if k not in self.KEYWORD_PROPS
        ] + list(self.attributes.items())
        if not entries:
            return
        printer.print_string(" {")

        def one(entry: tuple[str, Attribute]) -> None:
            key, value = entry
            printer.print_identifier_or_string_literal(key)
            if isinstance(value, UnitAttr):
                return
            printer.print_string(" = ")
            if key in self.LIST_PROPS and isinstance(value, DenseArrayBase):
                printer.print_string("[" + ", ".join(str(v) for v in int_list_values(value)) + "]")
            else:
                printer.print_attribute(value)

        printer.print_list(entries, one)
        printer.print_string("}")

    @classmethod
    def parse(cls, parser: Parser) -> PrimOp:
        props: dict[str, Attribute] = {}
        for key in cls.KEYWORD_PROPS:
            props[key] = StringAttr(parser.parse_identifier())
        operands: list[UnresolvedOperand] = []
        first = parser.parse_optional_unresolved_operand()
        if first is not None:
            operands.append(first)
            while parser.parse_optional_punctuation(","):
                operands.append(parser.parse_unresolved_operand())
        attrs: dict[str, Attribute] = {}
        pos = parser.pos
        for key, value in parser.parse_optional_attr_dict().items():
            if key in cls.LIST_PROPS and isinstance(value, ArrayAttr):
                items = value.data
                if not all(isinstance(v, IntegerAttr) for v in items):
                    parser.raise_error(f"{cls.name}: {key} must be a list of integers", pos, parser.pos)
                value = int_list([v.value.data for v in items])  # type: ignore[union-attr]
            if key in cls._prop_names():
                props[key] = value
            else:
                attrs[key] = value
        parser.parse_punctuation(":")
        if parser.parse_optional_punctuation("("):
            in_types = []
            if not parser.parse_optional_punctuation(")"):
                in_types.append(parser.parse_type())
                while parser.parse_optional_punctuation(","):
                    in_types.append(parser.parse_type())
                parser.parse_punctuation(")")
        else:
            in_types = [parser.parse_type()]
        parser.parse_punctuation("->")
        result_type = parser.parse_type()
        if len(in_types) != len(operands):
            parser.raise_error(
                f"{cls.name}: {len(operands)} operands but {len(in_types)} operand types"
            )
        resolved = [parser.resolve_operand(o, t) for o, t in zip(operands, in_types)]
        return cls.create(operands=resolved, result_types=[result_type], properties=props, attributes=attrs)

    @classmethod
    def _prop_names(cls) -> set[str]:
        return set(cls.get_irdl_definition().properties.keys())


def cast_result(op: PrimOp, value: np.ndarray | np.generic) -> np.ndarray:
    """Make a reference result an ndarray of the op's result element type."""
    return np.asarray(value).astype(numpy_dtype(op.result_elem()), copy=False)
