"""`optimize_graph`: capability-gated, cost-based fusion of a prim module.

This module owns the decision loop and its records: `optimize_graph(module,
ctx) -> OptimizeResult(module, work_order, decisions)`, `Decision` (what was
fused, what was rejected and why: `gated`, `unprofitable`, `illegal`,
`too-big`) and `WorkItem` (a gated region the JIT may compile).

For each function block, the rules of `rules.py` run in priority order
(catalog ops, matmul epilogue, reduction pro/epilogue, elementwise chains)
until a sweep claims nothing new. Each candidate is checked in this order:
size bound (`too-big`), convexity (`illegal`), cost (`unprofitable`), gate
(`gated`). Only then is it fused. Ops of a gated candidate are reserved, so
lower-priority rules do not queue overlapping regions for the same ops.

Cost policy: fuse when the Layer-1 cost of the region (`compose_region_cost`)
is strictly cheaper than its primitives (`compose_primitives_cost`); equal or
unknown keeps the primitives. Dynamic shapes make Layer-1 UNKNOWN; then both
sides are priced *symbolically*, with every dynamic dim taken as
`ctx.symbolic_dim` elements, by the same roofline. The comparison is then
per element, so elementwise fusion (fewer launches, less traffic) still wins,
and the symbolic cost is never stamped on the IR.

Ids: a catalog candidate is fused under its static id when that id has a
kernel; otherwise, and for synthesized regions, the recipe registry gives
the id (structural dedup: equal regions share one) and the gate is asked
for it. The input module is never mutated.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Any, Literal

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue

from fusebind.compiler.context import OptimizationContext
from fusebind.compiler.cost import (
    Cost,
    CostEstimate,
    MachineModel,
    cheaper,
    compose_primitives_cost,
    compose_region_cost,
)
from fusebind.compiler.graph import DataflowGraph
from fusebind.compiler.rules import Candidate, MatchState, Rule, capability_gated_rules, ALL_RULES
from fusebind.dialect.fused import CostAttr, RegionOp, YieldOp
from fusebind.dialect.prim import ConstantOp, MatmulOp, ReductionOp
from fusebind.dialect.types import elem_of, shape_of

Verdict = Literal["fused", "gated", "unprofitable", "illegal", "too-big"]

#: Constants with at most this many elements are cloned into a region rather
#: than passed in (scalars of GELU, epsilons): the recipe then holds its math.
MAX_INLINED_CONSTANT_ELEMENTS = 64

#: Sweeps of the rule set before giving up on a fixpoint (each sweep only
#: looks at ops no earlier sweep claimed, so one more sweep finds nothing new).
MAX_SWEEPS = 4


@dataclass(frozen=True)
class Decision:
    """One verdict on one candidate region (or one refused merge)."""

    verdict: Verdict
    rule: str
    name: str
    function: str
    ops: tuple[str, ...]
    fused_id: int = 0
    detail: str = ""
    fused_cost: Any = None
    unfused_cost: Any = None
    backend: str = "cpu"

    def remark(self) -> str:
        """The line `fuse{remarks=true}` prints."""
        where = f"@{self.name} in @{self.function}, {len(self.ops)} ops: {', '.join(self.ops)}"
        if self.verdict == "fused":
            return f"remark: fused @{self.name} id {self.fused_id} ({self.rule}; {self.detail}) in @{self.function}"
        if self.verdict == "gated":
            return f"remark: gated id {self.fused_id} (no kernel on {self.backend}): {where}; {self.detail}"
        return f"remark: rejected @{self.name} ({self.verdict}: {self.detail}) in @{self.function}"


@dataclass(frozen=True)
class WorkItem:
    """A gated region worth compiling: its registry id, name, a detached
    recipe region, its dtypes (inputs then outputs), and the catalog id it
    stands for (None for synthesized regions)."""

    fused_id: int
    name: str
    region: RegionOp
    dtypes: tuple[str, ...]
    static_id: int | None = None
    rule: str = ""


@dataclass(frozen=True)
class OptimizeResult:
    """The optimized (new) module, the deduplicated work order, the decisions."""

    module: ModuleOp
    work_order: tuple[WorkItem, ...]
    decisions: tuple[Decision, ...]

    def fused(self) -> tuple[Decision, ...]:
        return tuple(d for d in self.decisions if d.verdict == "fused")

    def rejected(self) -> tuple[Decision, ...]:
        return tuple(d for d in self.decisions if d.verdict != "fused")

    def remarks(self) -> list[str]:
        return [d.remark() for d in self.decisions]


# --------------------------------------------------------------------------- pricing


def _elements(value: SSAValue, dim: int) -> int:
    return math.prod(dim if d is None else d for d in shape_of(value.type))


def _symbolic_bytes(values: list[SSAValue], dim: int) -> float:
    total = 0.0
    for v in values:
        width = {"f32": 4, "f64": 8, "i32": 4, "i64": 8, "i1": 1}.get(elem_of(v.type), 8)
        total += _elements(v, dim) * width
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


def price(region: RegionOp, ops: tuple[Operation, ...], ctx: OptimizationContext) -> tuple[Cost, Cost, bool]:
    """(fused cost, unfused cost, symbolic?) of fusing `ops` into `region`."""
    fused = compose_region_cost(region, ctx.machine)
    unfused = compose_primitives_cost(ops, ctx.machine)
    if fused.is_known and unfused.is_known:
        return fused, unfused, False
    dim, m = ctx.symbolic_dim, ctx.machine
    body = [o for o in region.body.blocks[0].ops if not isinstance(o, YieldOp)]
    f_flops = sum(_symbolic_flops(o, dim) for o in body)
    f_bytes = _symbolic_bytes([*region.operands, *region.results], dim)
    fused_s = CostEstimate(f_flops, f_bytes, _symbolic_ns(f_flops, f_bytes, m))
    total = CostEstimate(0.0, 0.0, 0.0)
    for op in ops:
        fl = _symbolic_flops(op, dim)
        nb = _symbolic_bytes([*op.operands, *op.results], dim)
        total = total + CostEstimate(fl, nb, _symbolic_ns(fl, nb, m))
    return fused_s, total, True


def _us(cost: Cost) -> str:
    return f"{cost.ns / 1000:.3g}us" if cost.is_known else "unknown"  # type: ignore[union-attr]


# --------------------------------------------------------------------------- regions


def _inlined_constant(op: Operation | None) -> bool:
    if not isinstance(op, ConstantOp):
        return False
    shape = shape_of(op.results[0].type)
    return all(d is not None for d in shape) and math.prod(shape) <= MAX_INLINED_CONSTANT_ELEMENTS  # type: ignore[misc]


def build_region(graph: DataflowGraph, ops: tuple[Operation, ...], name: str, fused_id: int = 0) -> RegionOp:
    """A `fused.region` computing `ops` (not inserted anywhere; its operands
    are the outside values the ops read, its results the values used outside).
    Small constants are cloned in rather than passed as operands."""
    inside = set(ops)
    constants: list[Operation] = []
    inputs: list[SSAValue] = []
    seen: set[SSAValue] = set()
    for op in ops:
        for v in op.operands:
            if v in seen:
                continue
            seen.add(v)
            owner = v.owner
            if isinstance(owner, Operation) and owner in inside:
                continue
            if isinstance(owner, Operation) and _inlined_constant(owner):
                constants.append(owner)
            else:
                inputs.append(v)
    outputs = graph.escaping_results(ops, inside)
    block = Block(arg_types=[v.type for v in inputs])
    mapper: dict[SSAValue, SSAValue] = dict(zip(inputs, block.args))
    for arg, v in zip(block.args, inputs):
        arg.name_hint = v.name_hint
    for op in (*constants, *ops):
        block.add_op(op.clone(value_mapper=mapper))
    block.add_op(YieldOp(*[mapper[v] for v in outputs]))
    return RegionOp(inputs, [v.type for v in outputs], Region(block), name=name, fused_id=fused_id)


def _dtypes(region: RegionOp) -> tuple[str, ...]:
    return tuple(elem_of(v.type) for v in (*region.operands, *region.results))


def _detached_recipe(region: RegionOp, fused_id: int) -> RegionOp:
    holder = Block(arg_types=[v.type for v in region.operands])
    clone = region.clone(value_mapper=dict(zip(region.operands, holder.args)))
    holder.add_op(clone)
    from xdsl.dialects.builtin import IntegerAttr, i64

    clone.properties["fused_id"] = IntegerAttr(fused_id, i64)
    return clone


# --------------------------------------------------------------------------- the loop


@dataclass
class _Accepted:
    candidate: Candidate
    region: RegionOp
    outputs: list[SSAValue]


class _FunctionOptimizer:
    """Runs the rules over one function block of the (already cloned) module."""

    def __init__(self, fn: func.FuncOp, ctx: OptimizationContext, rules: list[Rule], gated_static: set[int],
                 decisions: list[Decision], work: dict[int, WorkItem]) -> None:
        self.fn = fn
        self.fname = fn.sym_name.data
        self.ctx = ctx
        self.rules = rules
        self.gated_static = gated_static
        self.decisions = decisions
        self.work = work
        self.block = fn.body.blocks[0]
        self.graph = DataflowGraph(self.block)
        self.claimed: set[Operation] = set()
        self.accepted: list[_Accepted] = []
        self._seen_rejections: set[tuple[Any, ...]] = set()

    def decide(self, verdict: Verdict, cand: Candidate, detail: str, fused_id: int = 0,
               costs: tuple[Any, Any] = (None, None)) -> None:
        key = (verdict, cand.rule, tuple(id(o) for o in cand.ops), detail)
        if verdict != "fused":
            if key in self._seen_rejections:
                return
            self._seen_rejections.add(key)
        self.decisions.append(Decision(verdict, cand.rule, cand.name, self.fname, tuple(o.name for o in cand.ops),
                                       fused_id, detail, costs[0], costs[1], self.ctx.backend))

    def run(self) -> None:
        for _ in range(MAX_SWEEPS):
            before = len(self.claimed)
            for rule in self.rules:
                state = MatchState(self.graph, self.claimed, self.ctx.max_region_ops)
                candidates = rule.match(state)
                for rej in state.rejections:
                    self.decide(rej.verdict, Candidate(rej.rule, rej.name, rej.ops), rej.detail)  # type: ignore[arg-type]
                for cand in candidates:
                    self.consider(cand)
            if len(self.claimed) == before:
                break
        self.rewrite()

    def consider(self, cand: Candidate) -> None:
        if self.claimed.intersection(cand.ops):
            return
        if len(cand.ops) > self.ctx.max_region_ops:
            self.decide("too-big", cand, f"{len(cand.ops)} ops > max-ops {self.ctx.max_region_ops}")
            return
        via = self.graph.nonconvex_witness(cand.ops)
        if via is not None:
            self.decide("illegal", cand, f"non-convex: a path leaves the region through {via.name} and re-enters")
            return
        region = build_region(self.graph, cand.ops, cand.name)
        if not region.results:
            self.decide("illegal", cand, "the region has no result used outside it")
            return
        fused, unfused, symbolic = price(region, cand.ops, self.ctx)
        how = "symbolic per-element cost" if symbolic else "Layer-1"
        if not cheaper(fused, unfused):
            self.decide("unprofitable", cand, f"fused {_us(fused)} >= unfused {_us(unfused)}, {how}",
                        costs=(fused, unfused))
            return
        fused_id = self.pick_id(cand, region)
        if fused_id is None:
            return
        if not symbolic:
            region.properties["cost"] = CostAttr(fused.flops, fused.bytes, fused.ns)  # type: ignore[union-attr]
        from xdsl.dialects.builtin import IntegerAttr, i64

        region.properties["fused_id"] = IntegerAttr(fused_id, i64)
        self.claimed.update(cand.ops)
        self.accepted.append(_Accepted(cand, region, self.graph.escaping_results(cand.ops, set(cand.ops))))
        self.decide("fused", cand, f"{len(cand.ops)} ops; fused {_us(fused)} < unfused {_us(unfused)}, {how}",
                    fused_id, (fused, unfused))

    def pick_id(self, cand: Candidate, region: RegionOp) -> int | None:
        """The id to fuse under, or None after recording the gated verdict."""
        if cand.static_id is not None and cand.static_id not in self.gated_static:
            return cand.static_id
        registry = self.ctx.recipe_registry()
        runtime_id = registry.register(cand.name, region)
        if self.ctx.has_kernel(runtime_id):
            return runtime_id
        self.claimed.update(cand.ops)  # reserved for the pending kernel
        if cand.static_id is not None:
            self.decide("gated", cand, f"queued as runtime id {runtime_id}", cand.static_id)
        else:
            self.decide("gated", cand, "queued", runtime_id)
        if runtime_id not in self.work:
            self.work[runtime_id] = WorkItem(runtime_id, registry.recipe_of(runtime_id).name,
                                             _detached_recipe(region, runtime_id), _dtypes(region),
                                             cand.static_id, cand.rule)
        return None

    # ----------------------------------------------------------------- rewriting

    def rewrite(self) -> None:
        if not self.accepted:
            return
        for acc in self.accepted:
            first = acc.candidate.ops[0]
            self.block.insert_op_before(acc.region, first)
            for old, new in zip(acc.outputs, acc.region.results):
                old.replace_uses_with_if(new, lambda use, ops=set(acc.candidate.ops): use.operation not in ops)
        constants: dict[Operation, None] = {}
        for acc in self.accepted:
            for op in acc.candidate.ops:
                for v in op.operands:
                    if _inlined_constant(v.owner if isinstance(v.owner, Operation) else None):
                        constants[v.owner] = None  # type: ignore[index]
            for op in reversed(acc.candidate.ops):
                self.block.erase_op(op, safe_erase=False)
        for const in constants:  # cloned into the regions; drop the copies nobody reads now
            if not any(r.uses for r in const.results):
                self.block.erase_op(const)
        _topological_reorder(self.block)


def _topological_reorder(block: Block) -> None:
    """Stable topological order of `block` (current order breaks ties): a
    region is inserted where its first op was, but its inputs may be defined
    by ops that were between its ops."""
    ops = list(block.ops)
    pos = {op: i for i, op in enumerate(ops)}
    indeg = [0] * len(ops)
    users: list[list[int]] = [[] for _ in ops]
    for i, op in enumerate(ops):
        prods = {pos[v.owner] for v in op.operands if isinstance(v.owner, Operation) and v.owner in pos}
        for p in prods:
            users[p].append(i)
        indeg[i] = len(prods)
    heap = [i for i in range(len(ops)) if indeg[i] == 0]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        i = heapq.heappop(heap)
        order.append(i)
        for u in users[i]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(heap, u)
    if len(order) != len(ops):  # pragma: no cover - convexity of each region prevents it
        raise RuntimeError("optimize_graph: fused regions form a cycle; this is a bug in the convexity check")
    if order == list(range(len(ops))):
        return
    for op in ops:
        op.detach()
    for i in order:
        block.add_op(ops[i])


def optimize_graph(module: ModuleOp, ctx: OptimizationContext) -> OptimizeResult:
    """Fuse what the gate allows and the cost model favours; see the module doc.

    Returns a new module (the input is not mutated), the deduplicated work
    order of gated regions, and every decision.
    """
    if not isinstance(ctx, OptimizationContext):
        raise TypeError(f"optimize_graph: ctx must be an OptimizationContext, got {type(ctx).__name__}")
    if not isinstance(module, ModuleOp):
        raise TypeError(f"optimize_graph: expected a builtin.module, got {type(module).__name__}")
    out = module.clone()
    rules, gated = capability_gated_rules(ctx.has_kernel)
    gated_static = set(gated)
    # Gated catalog rules still match: their regions go on the work order.
    ordered = [r for r in ALL_RULES if r in rules or r.static_id in gated_static]
    decisions: list[Decision] = []
    work: dict[int, WorkItem] = {}
    for op in list(out.ops):
        if isinstance(op, func.FuncOp) and op.body.blocks:
            _FunctionOptimizer(op, ctx, ordered, gated_static, decisions, work).run()
    return OptimizeResult(out, tuple(work.values()), tuple(decisions))
