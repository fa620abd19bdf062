"""`optimize_graph`: capability-gated, cost-based fusion of a prim module.

This module owns the decision loop and its records: `optimize_graph(module,
ctx) -> OptimizeResult(module, work_order, decisions)`, `Decision` (what was
fused, what was rejected and why: `gated`, `unprofitable`, `illegal`,
`too-big`) and `WorkItem` (a gated region the JIT may compile).

For each function block, the rules of `rules.py` run in priority order
(catalog ops, matmul epilogue, reduction pro/epilogue, elementwise chains)
until a sweep claims nothing new. Each candidate is checked in this order:
size bound (`too-big`), convexity (`illegal`), no cycle with the regions
taken so far (`illegal: would create a cycle`), cost (`unprofitable`), gate
(`gated`). Only then is it fused. Ops of a gated candidate are reserved, so
lower-priority rules do not queue overlapping regions for the same ops.

A catalog candidate first tries to absorb its adjacent elementwise ops
(`rules.absorb_neighbours`): when the grown cluster is legal and cheaper
than the catalog region plus those ops unfused, the cluster is fused as one
synthesized region, so `relu(a*b+c)` is one kernel, not `mul` + `bias_relu`.
If only the catalog kernel is bound, it runs now and the cluster is queued.

Merge step: after the sweeps, regions are merged along their dataflow edges
until nothing changes (convex, acyclic with the other regions, within the
size bound, cheaper than the two; gated regions merge too, so the work order
holds the merged region). Last, a region reading a matmul result in place
is marked (`inplace.py`), and the block is rewritten.

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
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Block, Operation, Region, SSAValue

from fusebind.compiler.context import OptimizationContext
from fusebind.compiler.cost import (
    UNKNOWN_COST,
    Cost,
    CostEstimate,
    MachineModel,
    cheaper,
    compose_primitives_cost,
    compose_region_cost,
)
from fusebind.compiler.graph import DataflowGraph
from fusebind.compiler.inplace import inplace_operand, mark_inplace
from fusebind.compiler.rules import (
    ALL_RULES,
    Candidate,
    MatchState,
    Rule,
    absorb_neighbours,
    capability_gated_rules,
    is_fusable_elementwise,
    merged_name,
)
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
    #: (operand index, result index) when the fused region may write that
    #: result into that operand's buffer (see `fusebind.compiler.inplace`).
    inplace: tuple[int, int] | None = None

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


def _region_cost(region: RegionOp, ops: tuple[Operation, ...], ctx: OptimizationContext, symbolic: bool) -> Cost:
    """The cost of running `region` (which replaces `ops`) as one kernel:
    Layer-1, or priced with every dynamic dim taken as `ctx.symbolic_dim`."""
    if not symbolic:
        return compose_region_cost(region, ctx.machine)
    dim, m = ctx.symbolic_dim, ctx.machine
    body = [o for o in region.body.blocks[0].ops if not isinstance(o, YieldOp)]
    flops = sum(_symbolic_flops(o, dim) for o in body)
    nbytes = _symbolic_bytes([*region.operands, *region.results], dim)
    return CostEstimate(flops, nbytes, _symbolic_ns(flops, nbytes, m))


def _primitives_cost(ops: tuple[Operation, ...], ctx: OptimizationContext, symbolic: bool) -> Cost:
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


def _sum(a: Cost, b: Cost) -> Cost:
    if not (a.is_known and b.is_known):
        return UNKNOWN_COST
    return a + b  # type: ignore[operator]


def price(region: RegionOp, ops: tuple[Operation, ...], ctx: OptimizationContext) -> tuple[Cost, Cost, bool]:
    """(fused cost, unfused cost, symbolic?) of fusing `ops` into `region`."""
    fused = _region_cost(region, ops, ctx, False)
    unfused = _primitives_cost(ops, ctx, False)
    if fused.is_known and unfused.is_known:
        return fused, unfused, False
    return _region_cost(region, ops, ctx, True), _primitives_cost(ops, ctx, True), True


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


def _discard(region: RegionOp) -> None:
    """Drop a built region nobody will insert: it must not keep uses of the
    block's values (they would look like outside users to later checks)."""
    region.drop_all_references()


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
    """A region decided on: its candidate, the built region, the values it
    replaces (in result order), whether it was priced symbolically, and its
    pending decision. A `gated` one has no kernel yet: it is not rewritten but
    queued at the end (after merging, so the work order holds the merged
    regions, not their parts); its ops stay reserved meanwhile."""

    candidate: Candidate
    region: RegionOp
    outputs: list[SSAValue]
    symbolic: bool
    decision: Decision
    gated: bool = False
    runtime_id: int = 0
    static_id: int | None = None


@dataclass
class _Priced:
    """A candidate that passed the legality checks, with its region and price."""

    region: RegionOp
    fused: Cost
    unfused: Cost
    symbolic: bool

    @property
    def how(self) -> str:
        return "symbolic per-element cost" if self.symbolic else "Layer-1"


class _FunctionOptimizer:
    """Runs the rules over one function block of the (already cloned) module,
    merges the accepted regions to a fixpoint, then rewrites the block."""

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
        self.accepted: dict[int, _Accepted] = {}  # key: acceptance number (block order of acceptance)
        self.region_of: dict[Operation, int] = {}
        self.region_ops: dict[int, tuple[Operation, ...]] = {}
        self._next_key = 0
        self._seen_rejections: set[tuple[Any, ...]] = set()

    # ----------------------------------------------------------------- records

    def decision(self, verdict: Verdict, cand: Candidate, detail: str, fused_id: int = 0,
                 costs: tuple[Any, Any] = (None, None)) -> Decision:
        return Decision(verdict, cand.rule, cand.name, self.fname, tuple(o.name for o in cand.ops),
                        fused_id, detail, costs[0], costs[1], self.ctx.backend)

    def decide(self, verdict: Verdict, cand: Candidate, detail: str, fused_id: int = 0,
               costs: tuple[Any, Any] = (None, None)) -> None:
        """Record a verdict that is final now (every one but `fused`, whose
        decision waits for the merge step)."""
        key = (verdict, cand.rule, tuple(id(o) for o in cand.ops), detail)
        if key in self._seen_rejections:
            return
        self._seen_rejections.add(key)
        self.decisions.append(self.decision(verdict, cand, detail, fused_id, costs))

    # ----------------------------------------------------------------- the sweeps

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
        self.merge_regions()
        self.finish()
        self.rewrite()

    def check(self, cand: Candidate, ignore: Collection[int] = ()) -> _Priced | None:
        """Size bound, convexity, cycles with accepted regions (except the
        `ignore`d ones), region build and price; None after recording why not."""
        if len(cand.ops) > self.ctx.max_region_ops:
            self.decide("too-big", cand, f"{len(cand.ops)} ops > max-ops {self.ctx.max_region_ops}")
            return None
        via = self.graph.nonconvex_witness(cand.ops)
        if via is not None:
            self.decide("illegal", cand, f"non-convex: a path leaves the region through {via.name} and re-enters")
            return None
        if self.accepted:
            cycle = self.graph.cycle_witness(cand.ops, self.region_of, self.region_ops, ignore)
            if cycle is not None:
                key, at = cycle
                other = f"region @{self.accepted[key].candidate.name}" if key is not None else "an outside op"
                self.decide("illegal", cand, f"would create a cycle: a path leaves through {other} "
                                             f"and re-enters at {at.name}")
                return None
        region = build_region(self.graph, cand.ops, cand.name)
        if not region.results:
            _discard(region)
            self.decide("illegal", cand, "the region has no result used outside it")
            return None
        fused, unfused, symbolic = price(region, cand.ops, self.ctx)
        return _Priced(region, fused, unfused, symbolic)

    def consider(self, cand: Candidate) -> None:
        if self.claimed.intersection(cand.ops):
            return
        if cand.static_id is not None and len(cand.ops) < self.ctx.max_region_ops:
            grown = absorb_neighbours(self.graph, cand.ops, lambda op: op not in self.claimed,
                                      self.ctx.max_region_ops)
            if len(grown) > len(cand.ops) and self.consider_absorbing(cand, grown):
                return
        priced = self.check(cand)
        if priced is not None:
            self.consider_exact(cand, priced)

    def consider_absorbing(self, cand: Candidate, grown: tuple[Operation, ...]) -> bool:
        """A catalog candidate with fusable neighbours: fuse the grown cluster
        as one synthesized region when it is legal and cheaper (Layer-1) than
        the catalog region plus its neighbours unfused. True when that settled
        the candidate (fused, or queued with the catalog region fused now)."""
        extra = tuple(op for op in grown if op not in cand.ops)
        rule = "elementwise" if all(is_fusable_elementwise(o) for o in grown) else "reduction"
        big = Candidate(rule, merged_name(grown), grown)
        priced = self.check(big)
        if priced is None:
            return False
        base = self.check(cand)
        if base is None:
            _discard(priced.region)
            return False
        symbolic = priced.symbolic or base.symbolic
        merged_cost = _region_cost(priced.region, grown, self.ctx, symbolic)
        baseline = _sum(_region_cost(base.region, cand.ops, self.ctx, symbolic),
                        _primitives_cost(extra, self.ctx, symbolic))
        how = "symbolic per-element cost" if symbolic else "Layer-1"
        if not cheaper(merged_cost, baseline):
            self.decide("unprofitable", big, f"absorbing {len(extra)} neighbour op(s) into catalog "
                        f"{cand.name}: {_us(merged_cost)} >= {_us(baseline)}, {how}", costs=(merged_cost, baseline))
            _discard(priced.region)
            _discard(base.region)
            return False
        registry = self.ctx.recipe_registry()
        runtime_id = registry.register(big.name, priced.region)
        detail = (f"{len(grown)} ops, absorbs catalog {cand.name} and {len(extra)} neighbour op(s); "
                  f"fused {_us(merged_cost)} < catalog + neighbours {_us(baseline)}, {how}")
        if self.ctx.has_kernel(runtime_id):
            _discard(base.region)
            self.accept(big, _Priced(priced.region, merged_cost, priced.unfused, symbolic), runtime_id, detail)
            return True
        if cand.static_id not in self.gated_static:  # the catalog kernel runs until the cluster's is bound
            self.queue(big, priced.region, runtime_id, None, "queued; " + detail)
            _discard(priced.region)
            self.claimed.update(extra)
            self.consider_exact(cand, base)
        else:
            _discard(base.region)
            self.accept(big, _Priced(priced.region, merged_cost, priced.unfused, symbolic), runtime_id,
                        "queued; " + detail, gated=True)
        return True

    def consider_exact(self, cand: Candidate, priced: _Priced) -> None:
        """Fuse `cand` as it is when cheaper than its primitives and gated open."""
        if not cheaper(priced.fused, priced.unfused):
            self.decide("unprofitable", cand,
                        f"fused {_us(priced.fused)} >= unfused {_us(priced.unfused)}, {priced.how}",
                        costs=(priced.fused, priced.unfused))
            _discard(priced.region)
            return
        fused_id, has_kernel = self.pick_id(cand, priced.region)
        if has_kernel:
            self.accept(cand, priced, fused_id, f"{len(cand.ops)} ops; fused {_us(priced.fused)} < unfused "
                                                f"{_us(priced.unfused)}, {priced.how}")
        elif cand.static_id is not None:
            self.accept(cand, priced, fused_id, f"queued as runtime id {fused_id}", gated=True,
                        static_id=cand.static_id)
        else:
            self.accept(cand, priced, fused_id, "queued", gated=True)

    def accept(self, cand: Candidate, priced: _Priced, fused_id: int, detail: str, *, gated: bool = False,
               static_id: int | None = None) -> None:
        """Take `cand` as a region: fused under `fused_id`, or (gated) pending
        the kernel of runtime id `fused_id`."""
        region = priced.region
        if not priced.symbolic:
            region.properties["cost"] = CostAttr(priced.fused.flops, priced.fused.bytes, priced.fused.ns)  # type: ignore[union-attr]
        region.properties["fused_id"] = IntegerAttr(fused_id, i64)
        self.claimed.update(cand.ops)
        key = self._next_key
        self._next_key += 1
        if gated:
            decision = self.decision("gated", cand, detail, static_id if static_id is not None else fused_id)
        else:
            decision = self.decision("fused", cand, detail, fused_id, (priced.fused, priced.unfused))
        self.accepted[key] = _Accepted(cand, region, self.graph.escaping_results(cand.ops, set(cand.ops)),
                                       priced.symbolic, decision, gated, fused_id, static_id)
        self.region_ops[key] = cand.ops
        for op in cand.ops:
            self.region_of[op] = key

    def pick_id(self, cand: Candidate, region: RegionOp) -> tuple[int, bool]:
        """(id, has a kernel): the static id when its kernel is bound, else the
        registry's id for the region and whether the gate is open for it."""
        if cand.static_id is not None and cand.static_id not in self.gated_static:
            return cand.static_id, True
        registry = self.ctx.recipe_registry()
        runtime_id = registry.register(cand.name, region)
        return runtime_id, self.ctx.has_kernel(runtime_id)

    def queue(self, cand: Candidate, region: RegionOp, runtime_id: int, static_id: int | None, detail: str) -> None:
        """Record `gated` and put the region on the work order (once per id)."""
        self.decide("gated", cand, detail, static_id if static_id is not None else runtime_id)
        if runtime_id not in self.work:
            registry = self.ctx.recipe_registry()
            self.work[runtime_id] = WorkItem(runtime_id, registry.recipe_of(runtime_id).name,
                                             _detached_recipe(region, runtime_id), _dtypes(region),
                                             static_id, cand.rule)

    # ----------------------------------------------------------------- merging

    def merge_regions(self) -> None:
        """Merge accepted regions along their dataflow edges (producer region
        into a consumer region) until nothing changes: a merge must keep the
        contracted graph acyclic, stay within max-ops, be cheaper (Layer-1)
        than the two regions, and have a kernel (else it is queued)."""
        tried: set[tuple[int, int]] = set()
        changed = True
        while changed:
            changed = False
            for a_key in sorted(self.accepted):
                if a_key not in self.accepted:
                    continue
                for b_key in self.consumer_regions(a_key):
                    if (a_key, b_key) in tried:
                        continue
                    tried.add((a_key, b_key))
                    if self.try_merge(a_key, b_key):
                        changed = True
                        break

    def consumer_regions(self, key: int) -> list[int]:
        out: list[int] = []
        for op in self.region_ops[key]:
            for u in self.graph.users(op):
                other = self.region_of.get(u)
                if other is not None and other != key and other not in out:
                    out.append(other)
        return out

    def try_merge(self, a_key: int, b_key: int) -> bool:
        a, b = self.accepted[a_key], self.accepted[b_key]
        ops = tuple(sorted((*a.candidate.ops, *b.candidate.ops), key=self.graph.index.__getitem__))
        epilogue = "matmul-epilogue" in (a.candidate.rule, b.candidate.rule)
        name = merged_name(ops, "matmul_epilogue_" if epilogue else None)
        cand = Candidate("merge", name, ops)
        if len(ops) > self.ctx.max_region_ops:
            self.decide("too-big", cand, f"merging @{a.candidate.name} and @{b.candidate.name}: "
                                         f"{len(ops)} ops > max-ops {self.ctx.max_region_ops}")
            return False
        priced = self.check(cand, ignore=(a_key, b_key))
        if priced is None:
            return False
        symbolic = priced.symbolic or a.symbolic or b.symbolic
        merged_cost = _region_cost(priced.region, ops, self.ctx, symbolic)
        parts = _sum(_region_cost(a.region, a.candidate.ops, self.ctx, symbolic),
                     _region_cost(b.region, b.candidate.ops, self.ctx, symbolic))
        how = "symbolic per-element cost" if symbolic else "Layer-1"
        what = f"merges @{a.candidate.name} ({a.candidate.rule}) and @{b.candidate.name} ({b.candidate.rule})"
        if not cheaper(merged_cost, parts):
            self.decide("unprofitable", cand, f"{what}: {_us(merged_cost)} >= {_us(parts)}, {how}",
                        costs=(merged_cost, parts))
            _discard(priced.region)
            return False
        registry = self.ctx.recipe_registry()
        runtime_id = registry.register(name, priced.region)
        detail = f"{len(ops)} ops, {what}; fused {_us(merged_cost)} < the two regions {_us(parts)}, {how}"
        has_kernel = self.ctx.has_kernel(runtime_id)
        if not has_kernel and not (a.gated and b.gated):  # a part runs fused now; queue the merge for later
            self.queue(cand, priced.region, runtime_id, None, "queued; " + detail)
            _discard(priced.region)
            return False
        if "matmul-epilogue" in (a.candidate.rule, b.candidate.rule):
            cand = Candidate("matmul-epilogue", name, ops)
        _discard(a.region)
        _discard(b.region)
        del self.accepted[a_key], self.accepted[b_key]
        del self.region_ops[a_key], self.region_ops[b_key]
        for op in ops:
            del self.region_of[op]
        unfused = _sum(_primitives_cost(a.candidate.ops, self.ctx, symbolic),
                       _primitives_cost(b.candidate.ops, self.ctx, symbolic))
        self.accept(cand, _Priced(priced.region, merged_cost, unfused, symbolic), runtime_id,
                    detail if has_kernel else "queued; " + detail, gated=not has_kernel)
        return True

    def finish(self) -> None:
        """Queue the gated regions (work order + decision); stamp the in-place
        marker where sound and record the fused decisions."""
        for acc in sorted(self.accepted.values(), key=lambda acc: self.graph.index[acc.candidate.ops[0]]):
            if acc.gated:
                self.queue(acc.candidate, acc.region, acc.runtime_id, acc.static_id, acc.decision.detail)
                _discard(acc.region)
                continue
            k = inplace_operand(acc.region, set(acc.candidate.ops), self.graph.in_block)
            decision = acc.decision
            if k is not None:
                mark_inplace(acc.region, k, 0)
                decision = replace(decision, inplace=(k, 0),
                                   detail=decision.detail + f"; in place: result 0 may reuse operand {k}'s buffer")
            self.decisions.append(decision)

    # ----------------------------------------------------------------- rewriting

    def rewrite(self) -> None:
        accepted = [acc for acc in self.accepted.values() if not acc.gated]
        if not accepted:
            return
        for acc in accepted:
            first = acc.candidate.ops[0]
            self.block.insert_op_before(acc.region, first)
            for old, new in zip(acc.outputs, acc.region.results):
                old.replace_uses_with_if(new, lambda use, ops=set(acc.candidate.ops): use.operation not in ops)
        constants: dict[Operation, None] = {}
        for acc in accepted:
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


def optimize_graph(module: ModuleOp, ctx: OptimizationContext, *,
                   rules: Sequence[Rule] | None = None) -> OptimizeResult:
    """Fuse what the gate allows and the cost model favours; see the module doc.

    Returns a new module (the input is not mutated), the deduplicated work
    order of gated regions, and every decision. `rules` replaces the built-in
    rule set (tests, experiments); catalog rules in it are gated by their
    static id like the built-in ones.
    """
    if not isinstance(ctx, OptimizationContext):
        raise TypeError(f"optimize_graph: ctx must be an OptimizationContext, got {type(ctx).__name__}")
    if not isinstance(module, ModuleOp):
        raise TypeError(f"optimize_graph: expected a builtin.module, got {type(module).__name__}")
    out = module.clone()
    if rules is None:
        active, gated = capability_gated_rules(ctx.has_kernel)
        gated_static = set(gated)
        # Gated catalog rules still match: their regions go on the work order.
        ordered = [r for r in ALL_RULES if r in active or r.static_id in gated_static]
    else:
        ordered = list(rules)
        gated_static = {r.static_id for r in ordered if r.static_id is not None and not ctx.has_kernel(r.static_id)}
    decisions: list[Decision] = []
    work: dict[int, WorkItem] = {}
    for op in list(out.ops):
        if isinstance(op, func.FuncOp) and op.body.blocks:
            _FunctionOptimizer(op, ctx, ordered, gated_static, decisions, work).run()
    return OptimizeResult(out, tuple(work.values()), tuple(decisions))
