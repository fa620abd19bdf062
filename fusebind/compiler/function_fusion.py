"""The state of fusing one function block, and the steps every policy shares.

This module owns `FunctionFusion`: the book of regions taken in one block
(`accepted`, which op belongs to which region, the claimed ops), the
legality checks every candidate passes (`check`: size bound `too-big`,
convexity `illegal`, no cycle with the regions taken so far `illegal: would
create a cycle`, then build and price), the verdict on a candidate taken as
it is (`consider_exact`: `unprofitable`, fused, or gated), taking a region
(`accept`), queuing a gated one on the work order (`queue`), the decision
records, and the last two steps: `finish` (queue the gated regions, stamp
the in-place marker, record the fused decisions) and `rewrite`.

It does not choose what to try: the sweeps (`optimize.py`), neighbour
absorption (`absorb.py`) and the merge step (`merge.py`) do, through it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.ir import Operation, SSAValue

from fusebind.compiler.context import OptimizationContext
from fusebind.compiler.cost import Cost, cheaper
from fusebind.compiler.decisions import Decision, Verdict, WorkItem
from fusebind.compiler.graph import DataflowGraph
from fusebind.compiler.inplace import inplace_operand, mark_inplace
from fusebind.compiler.pricing import basis, format_us, price
from fusebind.compiler.regions import build_region, detached_recipe, discard_region, region_dtypes, splice_regions
from fusebind.compiler.matching import Candidate
from fusebind.dialect.fused import CostAttr, RegionOp


@dataclass
class AcceptedRegion:
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
class PricedCandidate:
    """A candidate that passed the legality checks, with its region and price."""

    region: RegionOp
    fused: Cost
    unfused: Cost
    symbolic: bool

    @property
    def how(self) -> str:
        return basis(self.symbolic)


class FunctionFusion:
    """The regions taken in one function block of the (already cloned)
    module, and the checks and records every fusion step goes through."""

    def __init__(self, fn: func.FuncOp, ctx: OptimizationContext, gated_static: set[int],
                 decisions: list[Decision], work: dict[int, WorkItem]) -> None:
        self.fname = fn.sym_name.data
        self.ctx = ctx
        self.gated_static = gated_static
        self.decisions = decisions
        self.work = work
        self.block = fn.body.blocks[0]
        self.graph = DataflowGraph(self.block)
        self.claimed: set[Operation] = set()
        self.accepted: dict[int, AcceptedRegion] = {}  # key: acceptance number (block order of acceptance)
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

    # ----------------------------------------------------------------- legality and price

    def check(self, cand: Candidate, ignore: Collection[int] = ()) -> PricedCandidate | None:
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
            discard_region(region)
            self.decide("illegal", cand, "the region has no result used outside it")
            return None
        fused, unfused, symbolic = price(region, cand.ops, self.ctx)
        return PricedCandidate(region, fused, unfused, symbolic)

    # ----------------------------------------------------------------- taking regions

    def consider_exact(self, cand: Candidate, priced: PricedCandidate) -> None:
        """Fuse `cand` as it is when cheaper than its primitives and gated open
        (queued when its kernel is missing)."""
        if not cheaper(priced.fused, priced.unfused):
            self.decide("unprofitable", cand,
                        f"fused {format_us(priced.fused)} >= unfused {format_us(priced.unfused)}, {priced.how}",
                        costs=(priced.fused, priced.unfused))
            discard_region(priced.region)
            return
        fused_id, has_kernel = self.pick_id(cand, priced.region)
        if has_kernel:
            self.accept(cand, priced, fused_id, f"{len(cand.ops)} ops; fused {format_us(priced.fused)} < unfused "
                                                f"{format_us(priced.unfused)}, {priced.how}")
        elif cand.static_id is not None:
            self.accept(cand, priced, fused_id, f"queued as runtime id {fused_id}", gated=True,
                        static_id=cand.static_id)
        else:
            self.accept(cand, priced, fused_id, "queued", gated=True)

    def accept(self, cand: Candidate, priced: PricedCandidate, fused_id: int, detail: str, *, gated: bool = False,
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
        self.accepted[key] = AcceptedRegion(cand, region, self.graph.escaping_results(cand.ops, set(cand.ops)),
                                            priced.symbolic, decision, gated, fused_id, static_id)
        self.region_ops[key] = cand.ops
        for op in cand.ops:
            self.region_of[op] = key

    def release(self, *keys: int) -> None:
        """Forget accepted regions (their ops stay claimed): a merge replaces them."""
        for key in keys:
            discard_region(self.accepted.pop(key).region)
            for op in self.region_ops.pop(key):
                del self.region_of[op]

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
                                             detached_recipe(region, runtime_id), region_dtypes(region),
                                             static_id, cand.rule)

    # ----------------------------------------------------------------- the end

    def finish(self) -> None:
        """Queue the gated regions (work order + decision); stamp the in-place
        marker where sound and record the fused decisions."""
        for acc in sorted(self.accepted.values(), key=lambda acc: self.graph.index[acc.candidate.ops[0]]):
            if acc.gated:
                self.queue(acc.candidate, acc.region, acc.runtime_id, acc.static_id, acc.decision.detail)
                discard_region(acc.region)
                continue
            k = inplace_operand(acc.region, set(acc.candidate.ops), self.graph.in_block)
            decision = acc.decision
            if k is not None:
                mark_inplace(acc.region, k, 0)
                decision = replace(decision, inplace=(k, 0),
                                   detail=decision.detail + f"; in place: result 0 may reuse operand {k}'s buffer")
            self.decisions.append(decision)

    def rewrite(self) -> None:
        """Put the fused (not gated) regions into the block in place of their ops."""
        splice_regions(self.block, [(acc.region, acc.candidate.ops, acc.outputs)
                                    for acc in self.accepted.values() if not acc.gated])
