"""`optimize_graph`: capability-gated, cost-based fusion of a prim module.

This module owns the entry point and the order of the steps:
`optimize_graph(module, ctx) -> OptimizeResult(module, work_order,
decisions)` picks the rule set (the capability gate of `rules.py`), clones
the module, and per function block runs the sweeps, the merge step, the
finish and the rewrite. The pieces live beside it: the records (`Decision`,
`WorkItem`, `OptimizeResult`) in `decisions.py`; the checks, acceptance and
work order in `function_fusion.py`; neighbour absorption in `absorb.py`;
merging in `merge.py`; pricing in `pricing.py`; region construction and the
rewrite in `regions.py`. Their public names are re-exported here.

Before the rules, three rewrites of prim ops: strength reduction (`strength.py`), gather sinking
(`gather_sinking.py`) and the fixed reduction tree (`tree_reduce.py`: a reduction over axis 0
becomes a splittable inner stage over chunks fixed by the shape, then the partials).

For each function block, the rules of `rules.py` run in priority order
(catalog ops, matmul epilogue, reduction pro/epilogue, elementwise chains)
until a sweep claims nothing new. Each candidate is checked in this order:
size bound (`too-big`), convexity (`illegal`), no cycle with the regions
taken so far (`illegal: would create a cycle`), cost (`unprofitable`), gate
(`gated`). Only then is it fused. Ops of a gated candidate are reserved, so
lower-priority rules do not queue overlapping regions for the same ops.

A catalog candidate first tries to absorb its adjacent elementwise ops
(`absorb.py`): when the grown cluster is legal and cheaper
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
for it. The input module is never mutated; the binding table is only ever
asked through `ctx`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from fusebind.dialect.errors import FusebindTypeError
from fusebind.compiler.absorb import absorb_neighbours, consider_absorbing
from fusebind.compiler.context import OptimizationContext
from fusebind.compiler.decisions import Decision, OptimizeResult, Verdict, WorkItem
from fusebind.compiler.function_fusion import FunctionFusion
from fusebind.compiler.matching import Candidate, MatchState
from fusebind.compiler.merge import merge_regions
from fusebind.compiler.pricing import price
from fusebind.compiler.regions import MAX_INLINED_CONSTANT_ELEMENTS, build_region
from fusebind.compiler.rules import ALL_RULES, Rule, capability_gated_rules
from fusebind.compiler.gather_sinking import sink_gathers
from fusebind.compiler.strength import strength_reduce
from fusebind.compiler.tree_reduce import tree_reduce

__all__ = [
    "MAX_INLINED_CONSTANT_ELEMENTS",
    "MAX_SWEEPS",
    "Decision",
    "OptimizeResult",
    "Verdict",
    "WorkItem",
    "build_region",
    "optimize_graph",
    "price",
]

#: Sweeps of the rule set before giving up on a fixpoint (each sweep only
#: looks at ops no earlier sweep claimed, so one more sweep finds nothing new).
MAX_SWEEPS = 4


def _optimize_function(fusion: FunctionFusion, rules: Sequence[Rule]) -> None:
    """Sweep the rules over one block until nothing new is claimed, merge,
    finish and rewrite."""
    for _ in range(MAX_SWEEPS):
        before = len(fusion.claimed)
        for rule in rules:
            state = MatchState(fusion.graph, fusion.claimed, fusion.ctx.max_region_ops)
            candidates = rule.match(state)
            for rej in state.rejections:
                fusion.decide(rej.verdict, Candidate(rej.rule, rej.name, rej.ops), rej.detail)  # type: ignore[arg-type]
            for cand in candidates:
                _consider(fusion, cand)
        if len(fusion.claimed) == before:
            break
    merge_regions(fusion)
    fusion.finish()
    fusion.rewrite()


def _consider(fusion: FunctionFusion, cand: Candidate) -> None:
    """One candidate of a sweep: a catalog one first tries to absorb its
    neighbours; otherwise it is checked and taken as it is."""
    if fusion.claimed.intersection(cand.ops):
        return
    max_ops = fusion.ctx.max_region_ops
    if cand.static_id is not None and len(cand.ops) < max_ops:
        grown = absorb_neighbours(fusion.graph, cand.ops, lambda op: op not in fusion.claimed, max_ops)
        if len(grown) > len(cand.ops) and consider_absorbing(fusion, cand, grown):
            return
    priced = fusion.check(cand)
    if priced is not None:
        fusion.consider_exact(cand, priced)


def optimize_graph(module: ModuleOp, ctx: OptimizationContext, *,
                   rules: Sequence[Rule] | None = None) -> OptimizeResult:
    """Fuse what the gate allows and the cost model favours; see the module doc.

    Returns a new module (the input is not mutated), the deduplicated work
    order of gated regions, and every decision. `rules` replaces the built-in
    rule set (tests, experiments); catalog rules in it are gated by their
    static id like the built-in ones.
    """
    if not isinstance(ctx, OptimizationContext):
        raise FusebindTypeError(f"optimize_graph: ctx must be an OptimizationContext, got {type(ctx).__name__}")
    if not isinstance(module, ModuleOp):
        raise FusebindTypeError(f"optimize_graph: expected a builtin.module, got {type(module).__name__}")
    out = module.clone()
    strength_reduce(out)
    sink_gathers(out)
    tree_reduce(out)  # before fusion: the inner stage must become a region of its own
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
            _optimize_function(FunctionFusion(op, ctx, gated_static, decisions, work), ordered)
    return OptimizeResult(out, tuple(work.values()), tuple(decisions))
