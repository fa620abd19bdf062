"""The merge step: after the sweeps, regions merge along their dataflow edges.

This module owns `merge_regions(fusion)`: a producer region merges into a
consumer region until nothing changes. A merge must keep the contracted
graph acyclic (`FunctionFusion.check` with the two parts ignored), stay
within `max_region_ops` (`too-big`), and be cheaper than the two regions
(`unprofitable`); the merged region takes rule `merge` (`matmul-epilogue`
when a part was one). Gated regions merge too, so the work order holds the
merged region, not its parts; a merge without a kernel whose parts run
fused now is queued instead. It does not propose regions or rewrite IR.
"""

from __future__ import annotations

from fusebind.compiler.attention_rule import is_attention_rule
from fusebind.compiler.cost import cheaper
from fusebind.compiler.function_fusion import FunctionFusion, PricedCandidate
from fusebind.compiler.matching import Candidate
from fusebind.compiler.pricing import add_costs, basis, format_us, primitives_cost, region_cost
from fusebind.compiler.regions import discard_region
from fusebind.compiler.synthesized_rules import merged_name


def merge_regions(fusion: FunctionFusion) -> None:
    """Merge accepted regions along their dataflow edges (producer region
    into a consumer region) until nothing changes: a merge must keep the
    contracted graph acyclic, stay within max-ops, be cheaper (Layer-1)
    than the two regions, and have a kernel (else it is queued)."""
    tried: set[tuple[int, int]] = set()
    changed = True
    while changed:
        changed = False
        for a_key in sorted(fusion.accepted):
            if a_key not in fusion.accepted:
                continue
            for b_key in _consumer_regions(fusion, a_key):
                if (a_key, b_key) in tried:
                    continue
                tried.add((a_key, b_key))
                if _try_merge(fusion, a_key, b_key):
                    changed = True
                    break


def _consumer_regions(fusion: FunctionFusion, key: int) -> list[int]:
    """Keys of the other regions reading a result of region `key`, first found first."""
    out: list[int] = []
    for op in fusion.region_ops[key]:
        for u in fusion.graph.users(op):
            other = fusion.region_of.get(u)
            if other is not None and other != key and other not in out:
                out.append(other)
    return out


def _try_merge(fusion: FunctionFusion, a_key: int, b_key: int) -> bool:
    ctx = fusion.ctx
    a, b = fusion.accepted[a_key], fusion.accepted[b_key]
    if is_attention_rule(a.candidate.rule) or is_attention_rule(b.candidate.rule):
        return False  # its kernel computes the attention form and nothing more (attention_rule.py)
    ops = tuple(sorted((*a.candidate.ops, *b.candidate.ops), key=fusion.graph.index.__getitem__))
    epilogue = "matmul-epilogue" in (a.candidate.rule, b.candidate.rule)
    name = merged_name(ops, "matmul_epilogue_" if epilogue else None)
    cand = Candidate("merge", name, ops)
    if len(ops) > ctx.max_region_ops:
        fusion.decide("too-big", cand, f"merging @{a.candidate.name} and @{b.candidate.name}: "
                                       f"{len(ops)} ops > max-ops {ctx.max_region_ops}")
        return False
    priced = fusion.check(cand, ignore=(a_key, b_key))
    if priced is None:
        return False
    symbolic = priced.symbolic or a.symbolic or b.symbolic
    merged_cost = region_cost(priced.region, ctx, symbolic)
    parts = add_costs(region_cost(a.region, ctx, symbolic), region_cost(b.region, ctx, symbolic))
    how = basis(symbolic)
    what = f"merges @{a.candidate.name} ({a.candidate.rule}) and @{b.candidate.name} ({b.candidate.rule})"
    if not cheaper(merged_cost, parts):
        fusion.decide("unprofitable", cand, f"{what}: {format_us(merged_cost)} >= {format_us(parts)}, {how}",
                      costs=(merged_cost, parts))
        discard_region(priced.region)
        return False
    runtime_id = ctx.recipe_registry().register(name, priced.region)
    detail = f"{len(ops)} ops, {what}; fused {format_us(merged_cost)} < the two regions {format_us(parts)}, {how}"
    has_kernel = ctx.has_kernel(runtime_id)
    if not has_kernel and not (a.gated and b.gated):  # a part runs fused now; queue the merge for later
        fusion.queue(cand, priced.region, runtime_id, None, "queued; " + detail)
        discard_region(priced.region)
        return False
    if epilogue:
        cand = Candidate("matmul-epilogue", name, ops)
    fusion.release(a_key, b_key)
    unfused = add_costs(primitives_cost(a.candidate.ops, ctx, symbolic),
                        primitives_cost(b.candidate.ops, ctx, symbolic))
    fusion.accept(cand, PricedCandidate(priced.region, merged_cost, unfused, symbolic), runtime_id,
                  detail if has_kernel else "queued; " + detail, gated=not has_kernel)
    return True
