"""The scan rule: each `prim.scan` gets a region, with the elementwise ops that only feed it.

A scan outside a region runs its numpy reference (np.cumsum / np.cumprod / ufunc.accumulate: a
pass over the operand in numpy's order, then a cast copy of the result); inside one it lowers to
scalar loops in the same sequential order (`lowering/emit_scan.py`), so the region's answer is the
reference's bit for bit. So every free scan is proposed as a region, joined by its prologue: the
free fusable elementwise producers whose every user is already in the region (`cumsum(x * 2 + 1)`
is one kernel reading x once: the producers write the result's buffer and the scan runs in place
over it, lowering/emit_scan.py), up to the size bound. Its consumers stay outside: an elementwise
consumer is its own region reading the scan's result (the merge pass may join them when that
prices cheaper).

A region of the scan alone is priced below the op alone: the unfused op's reference makes more
passes than the kernel's one (`ScanOp.reference_passes`, which the Layer-1 cost asks through
`reference_index_passes`, the hook a gather's reference uses for the same reason).

Must not: price, gate or rewrite IR (a rule only proposes `Candidate`s); import synthesized_rules
(it imports this module).
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Operation

from fusebind.compiler.matching import Candidate, MatchState, in_block_order, private_producers
from fusebind.dialect.prim_scan import ScanOp


def scan_regions(state: MatchState, fusable: Callable[[Operation], bool],
                 name: Callable[[str, tuple[Operation, ...]], str]) -> list[Candidate]:
    """The candidates; `fusable` and `name` are synthesized_rules' `is_fusable_elementwise` and
    `synthesized_name` (passed in by the rule table there, which imports this module)."""
    out: list[Candidate] = []
    taken: set[Operation] = set()
    for sc in state.graph.ops:
        if not isinstance(sc, ScanOp) or not state.free(sc) or sc in taken:
            continue
        ops = in_block_order(state, private_producers(state, sc, fusable, taken))
        taken.update(ops)
        out.append(Candidate("scan", name("fused_", ops), ops))
    return out
