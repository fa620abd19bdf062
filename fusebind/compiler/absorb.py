"""Neighbour absorption: a catalog pattern must not split a larger cluster.

This module owns growing a catalog candidate with its adjacent elementwise
ops (`absorb_neighbours`: convex, size-bounded) and the verdict on the grown
cluster (`consider_absorbing`): when it is legal and cheaper than the
catalog region plus those ops unfused, it is fused as one synthesized
region (rule `elementwise`/`reduction`, detail "absorbs catalog <name>"), so
`relu(a*b+c)` is one kernel, not `mul` + `bias_relu`. If only the catalog
kernel is bound, that runs now and the cluster is queued. It does not
match catalog patterns or rewrite IR.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Operation

from fusebind.compiler.cost import cheaper
from fusebind.compiler.function_fusion import FunctionFusion, PricedCandidate
from fusebind.compiler.graph import DataflowGraph
from fusebind.compiler.matching import Candidate
from fusebind.compiler.pricing import add_costs, basis, format_us, primitives_cost, region_cost
from fusebind.compiler.regions import discard_region
from fusebind.compiler.synthesized_rules import is_fusable_elementwise, merged_name


def absorb_neighbours(graph: DataflowGraph, ops: tuple[Operation, ...], free: Callable[[Operation], bool],
                      max_ops: int) -> tuple[Operation, ...]:
    """`ops` grown with the adjacent elementwise/broadcast ops that are
    `free` (producers and consumers, transitively, breadth-first), as long as
    the set stays convex and within `max_ops`. In block order.

    This is what keeps a catalog pattern from fragmenting a larger fusable
    cluster: `relu(a*b+c)` must not become `mul` + `bias_relu`. The optimizer
    prices the grown set against the catalog region plus its neighbours."""
    members = set(ops)
    queue = list(ops)
    head = 0
    while head < len(queue) and len(members) < max_ops:
        cur = queue[head]
        head += 1
        for nb in (*graph.producers(cur), *graph.users(cur)):
            if len(members) >= max_ops:
                break
            if nb in members or not (is_fusable_elementwise(nb) and free(nb)):
                continue
            members.add(nb)
            if graph.nonconvex_witness(members) is not None:
                members.discard(nb)
                continue
            queue.append(nb)
    return tuple(sorted(members, key=graph.index.__getitem__))


def consider_absorbing(fusion: FunctionFusion, cand: Candidate, grown: tuple[Operation, ...]) -> bool:
    """A catalog candidate with fusable neighbours: fuse the grown cluster
    as one synthesized region when it is legal and cheaper (Layer-1) than
    the catalog region plus its neighbours unfused. True when that settled
    the candidate (fused, or queued with the catalog region fused now)."""
    ctx = fusion.ctx
    extra = tuple(op for op in grown if op not in cand.ops)
    rule = "elementwise" if all(is_fusable_elementwise(o) for o in grown) else "reduction"
    big = Candidate(rule, merged_name(grown), grown)
    priced = fusion.check(big)
    if priced is None:
        return False
    base = fusion.check(cand)
    if base is None:
        discard_region(priced.region)
        return False
    symbolic = priced.symbolic or base.symbolic
    merged_cost = region_cost(priced.region, ctx, symbolic)
    baseline = add_costs(region_cost(base.region, ctx, symbolic), primitives_cost(extra, ctx, symbolic))
    how = basis(symbolic)
    if not cheaper(merged_cost, baseline):
        fusion.decide("unprofitable", big, f"absorbing {len(extra)} neighbour op(s) into catalog "
                      f"{cand.name}: {format_us(merged_cost)} >= {format_us(baseline)}, {how}",
                      costs=(merged_cost, baseline))
        discard_region(priced.region)
        discard_region(base.region)
        return False
    runtime_id = ctx.recipe_registry().register(big.name, priced.region)
    detail = (f"{len(grown)} ops, absorbs catalog {cand.name} and {len(extra)} neighbour op(s); "
              f"fused {format_us(merged_cost)} < catalog + neighbours {format_us(baseline)}, {how}")
    grown_priced = PricedCandidate(priced.region, merged_cost, priced.unfused, symbolic)
    if ctx.has_kernel(runtime_id):
        discard_region(base.region)
        fusion.accept(big, grown_priced, runtime_id, detail)
        return True
    if cand.static_id not in fusion.gated_static:  # the catalog kernel runs until the cluster's is bound
        fusion.queue(big, priced.region, runtime_id, None, "queued; " + detail)
        discard_region(priced.region)
        fusion.claimed.update(extra)
        fusion.consider_exact(cand, base)
    else:
        discard_region(base.region)
        fusion.accept(big, grown_priced, runtime_id, "queued; " + detail, gated=True)
    return True
