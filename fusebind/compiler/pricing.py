"""Pricing a candidate region against its primitives (Layer-1 or symbolic).

This module owns the cost side of every fusion verdict: `price(region, ops,
ctx)` gives (fused cost, unfused cost, symbolic?). Both sides use the
Layer-1 model of `cost.py` (`compose_region_cost`, `compose_primitives_cost`)
when the shapes are static. A dynamic dim makes Layer-1 UNKNOWN; then both
sides are priced *symbolically*, with every dynamic dim taken as
`ctx.symbolic_dim` elements, by the same roofline, so the comparison is per
element and elementwise fusion (fewer launches, less traffic) still wins.

It must not decide (the optimizer compares with `cost.cheaper`), stamp
costs on IR, or build regions.
"""

from __future__ import annotations

import math

from xdsl.ir import Operation, SSAValue

from fusebind.compiler.context import OptimizationContext
from fusebind.compiler.cost import (
    UNKNOWN_COST,
    Cost,
    CostEstimate,
    MachineModel,
    compose_primitives_cost,
    compose_region_cost,
)
from fusebind.dialect.fused import RegionOp, YieldOp
from fusebind.dialect.prim import MatmulOp, ReductionOp
from fusebind.dialect.types import ELEMENT_BYTES, elem_of, shape_of


def _elements(value: SSAValue, dim: int) -> int:
    return math.prod(dim if d is None else d for d in shape_of(value.type))


def _symbolic_bytes(values: list[SSAValue], dim: int) -> float:
    total = 0.0
    for v in values:
        total += _elements(v, dim) * ELEMENT_BYTES[elem_of(v.type)]
    return total


def _symbolic_flops(op: Operation, dim: int) -> float:
    known = op.flops() if hasattr(op, "flops") else 0.0  # type: ignore[attr-defined]
    if known is not None:
        return float(known)
    per = float(getattr(op, "FLOPS_PER_ELEMENT", 0.0))
    if isinstance(op, ReductionOp):
        return per * _elements(op.operands[0], dim)
    if isinstance(op, MatmulOp):
        k = shape_of(op.operands[0].type)[-1]
        return per * _elements(op.results[0], dim) * (dim if k is None else k)
    return per * _elements(op.results[0], dim)


def _symbolic_ns(flops: float, nbytes: float, machine: MachineModel) -> float:
    return machine.roofline_ns(flops, nbytes) + machine.launch_ns


def region_cost(region: RegionOp, ctx: OptimizationContext, symbolic: bool) -> Cost:
    """The cost of running `region` as one kernel: Layer-1, or priced with
    every dynamic dim taken as `ctx.symbolic_dim`."""
    if not symbolic:
        return compose_region_cost(region, ctx.machine)
    dim, m = ctx.symbolic_dim, ctx.machine
    body = [o for o in region.body.blocks[0].ops if not isinstance(o, YieldOp)]
    flops = sum(_symbolic_flops(o, dim) for o in body)
    nbytes = _symbolic_bytes([*region.operands, *region.results], dim)
    return CostEstimate(flops, nbytes, _symbolic_ns(flops, nbytes, m))


def primitives_cost(ops: tuple[Operation, ...], ctx: OptimizationContext, symbolic: bool) -> Cost:
    """The cost of running `ops` one kernel each (Layer-1 or symbolic)."""
    if not symbolic:
        return compose_primitives_cost(ops, ctx.machine)
    dim, m = ctx.symbolic_dim, ctx.machine
    total = CostEstimate(0.0, 0.0, 0.0)
    for op in ops:
        fl = _symbolic_flops(op, dim)
        nb = _symbolic_bytes([*op.operands, *op.results], dim)
        total = total + CostEstimate(fl, nb, _symbolic_ns(fl, nb, m))
    return total


def add_costs(a: Cost, b: Cost) -> Cost:
    """`a + b`, UNKNOWN when either is."""
    if not (a.is_known and b.is_known):
        return UNKNOWN_COST
    return a + b  # type: ignore[operator]


def price(region: RegionOp, ops: tuple[Operation, ...], ctx: OptimizationContext) -> tuple[Cost, Cost, bool]:
    """(fused cost, unfused cost, symbolic?) of fusing `ops` into `region`."""
    fused = region_cost(region, ctx, False)
    unfused = primitives_cost(ops, ctx, False)
    if fused.is_known and unfused.is_known:
        return fused, unfused, False
    return region_cost(region, ctx, True), primitives_cost(ops, ctx, True), True


def basis(symbolic: bool) -> str:
    """How a price was made, as remarks say it."""
    return "symbolic per-element cost" if symbolic else "Layer-1"


def format_us(cost: Cost) -> str:
    """A cost's time in microseconds for remarks (`unknown` when UNKNOWN)."""
    return f"{cost.ns / 1000:.3g}us" if cost.is_known else "unknown"  # type: ignore[union-attr]
