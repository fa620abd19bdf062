"""The `fused` dialect: `fused.region`, its `fused.yield` terminator and the
`#fused.cost` attribute.

A `fused.region` is a recipe: a single-block, isolated subgraph of `prim` ops
whose block arguments stand for its operands. Custom syntax:

    %r = fused.region @gelu id 3 (%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
           cost #fused.cost<flops = 40, bytes = 48, ns = 1.5> {
    ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
      %z = prim.add %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      fused.yield %z : tensor<4xf32>
    }

`id 0` (unassigned) and the `cost` clause may be omitted when printing
defaults; `@name` is always printed.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import FloatData, FunctionType, IntegerAttr, StringAttr, i64
from xdsl.ir import Attribute, Block, Dialect, Operation, ParametrizedAttribute, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from fusebind.dialect.registry import is_primitive_op


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))


@irdl_attr_definition
class CostAttr(ParametrizedAttribute):
    """`#fused.cost<flops = F, bytes = B, ns = T>`: a region's cost estimate."""

    name = "fused.cost"
    flops: FloatData
    bytes: FloatData
    ns: FloatData

    def __init__(self, flops: float, bytes: float, ns: float):
        super().__init__(FloatData(float(flops)), FloatData(float(bytes)), FloatData(float(ns)))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        values: list[Attribute] = []
        with parser.in_angle_brackets():
            for i, key in enumerate(("flops", "bytes", "ns")):
                if i:
                    parser.parse_punctuation(",")
                parser.parse_keyword(key)
                parser.parse_punctuation("=")
                values.append(FloatData(float(parser.parse_number())))
        return values

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(
            f"<flops = {_num(self.flops.data)}, bytes = {_num(self.bytes.data)}, ns = {_num(self.ns.data)}>"
        )


@irdl_op_definition
class RegionOp(IRDLOperation):
    """A fused subgraph of prim ops with its id, name and optional cost."""

    name = "fused.region"
    inputs = var_operand_def()
    outputs = var_result_def()
    body = region_def("single_block")
    fused_id = prop_def(IntegerAttr)
    sym_name = prop_def(StringAttr, prop_name="name")
    cost = opt_prop_def(CostAttr)
    traits = traits_def(IsolatedFromAbove())

    def __init__(
        self,
        inputs: Sequence[SSAValue | Operation],
        result_types: Sequence[Attribute],
        body: Region | Block,
        name: str = "",
        fused_id: int = 0,
        cost: CostAttr | None = None,
    ):
        region = body if isinstance(body, Region) else Region(body)
        props: dict[str, Attribute | None] = {
            "fused_id": IntegerAttr(fused_id, i64),
            "name": StringAttr(name),
            "cost": cost,
        }
        super().__init__(
            operands=[[SSAValue.get(v) for v in inputs]],
            result_types=[list(result_types)],
            regions=[region],
            properties=props,
        )

    @property
    def id(self) -> int:
        return self.fused_id.value.data

    @property
    def region_name(self) -> str:
        return self.sym_name.data

    def verify_(self) -> None:
        fid = self.fused_id.value.data
        if fid < 0:
            raise VerifyException(f"fused.region: fused_id must be >= 0 (0 = unassigned), found {fid}")
        block = self.body.blocks[0]  # region_def("single_block") has checked there is exactly one
        if len(block.args) != len(self.inputs):
            raise VerifyException(
                f"fused.region: body has {len(block.args)} block arguments, the region has "
                f"{len(self.inputs)} operands"
            )
        for i, (arg, operand) in enumerate(zip(block.args, self.inputs)):
            if arg.type != operand.type:
                raise VerifyException(
                    f"fused.region: block argument #{i} has type {arg.type}, operand #{i} has type {operand.type}"
                )
        for op in block.ops:
            if op is block.last_op:
                break
            if not is_primitive_op(op):
                raise VerifyException(
                    f"fused.region: body holds '{op.name}'; only prim ops (and registered user ops) and "
                    "fused.yield are allowed"
                )
        last = block.last_op
        if not isinstance(last, YieldOp):
            found = "nothing" if last is None else f"'{last.name}'"
            raise VerifyException(f"fused.region: body must end with fused.yield, found {found}")
        if len(last.values) != len(self.outputs):
            raise VerifyException(
                f"fused.region: yield has {len(last.values)} values, the region declares {len(self.outputs)} results"
            )
        for i, (v, r) in enumerate(zip(last.values, self.outputs)):
            if v.type != r.type:
                raise VerifyException(f"fused.region: yield value #{i} has type {v.type}, result #{i} has type {r.type}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        if self.fused_id.value.data != 0:
            printer.print_string(f" id {self.fused_id.value.data}")
        printer.print_string(" (")
        printer.print_list(self.inputs, printer.print_operand)
        printer.print_string(") : ")
        printer.print_function_type([o.type for o in self.inputs], [r.type for r in self.outputs])
        if self.cost is not None:
            printer.print_string(" cost ")
            printer.print_attribute(self.cost)
        if self.attributes:
            printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body)

    @classmethod
    def parse(cls, parser: Parser) -> RegionOp:
        name = parser.parse_symbol_name().data
        fused_id = 0
        if parser.parse_optional_keyword("id"):
            fused_id = parser.parse_integer(allow_boolean=False, allow_negative=True)
        operands = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_unresolved_operand)
        parser.parse_punctuation(":")
        pos = parser.pos
        ftype = parser.parse_function_type()
        if not isinstance(ftype, FunctionType) or len(ftype.inputs.data) != len(operands):
            parser.raise_error(
                f"fused.region: {len(operands)} operands but {len(ftype.inputs.data)} operand types", pos, parser.pos
            )
        cost: CostAttr | None = None
        if parser.parse_optional_keyword("cost"):
            pos = parser.pos
            attr = parser.parse_attribute()
            if not isinstance(attr, CostAttr):
                parser.raise_error(f"fused.region: expected #fused.cost<...>, found {attr}", pos, parser.pos)
            cost = attr
        attrs = parser.parse_optional_attr_dict_with_keyword()
        region = parser.parse_region()
        resolved = [parser.resolve_operand(o, t) for o, t in zip(operands, ftype.inputs.data)]
        props: dict[str, Attribute] = {"fused_id": IntegerAttr(fused_id, i64), "name": StringAttr(name)}
        if cost is not None:
            props["cost"] = cost
        return cls.create(
            operands=resolved,
            result_types=list(ftype.outputs.data),
            regions=[region],
            properties=props,
            attributes=dict(attrs.data) if attrs is not None else {},
        )


@irdl_op_definition
class YieldOp(IRDLOperation):
    """`fused.yield %v : T`: the values a region returns."""

    name = "fused.yield"
    values = var_operand_def()
    traits = traits_def(IsTerminator(), Pure())
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[[SSAValue.get(v) for v in values]])

    def verify_(self) -> None:
        parent = self.parent_op()
        if parent is not None and not isinstance(parent, RegionOp):
            raise VerifyException(f"fused.yield: must be inside fused.region, found parent '{parent.name}'")


Fused = Dialect("fused", [RegionOp, YieldOp], [CostAttr])
