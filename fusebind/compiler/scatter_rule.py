"""The scatter rule: each `prim.scatter` gets a region, with the elementwise ops that only feed it.

A scatter outside a region runs its numpy reference (`ufunc.at`, an unbuffered per-element loop);
inside one it lowers to a loop over the updates (`lowering/emit_scatter.py`). So every free
scatter is proposed as a region, joined by its prologue: the free fusable elementwise producers
(casts, broadcasts of the values, index arithmetic, the computation of x), reshapes (the scatter
reads its operands by `tensor.extract`, not through indexing maps, so the indices reshaped to x's
rank, `i[:, None]`, need no buffer of their own) and earlier scatters
(`fb.at(fb.at(x)[i].add(v))[j].set(w)`: one kernel updating one buffer) whose every user is already
in the region, up to the size bound. Its consumers stay outside (the scatter's result is a
whole updated array; a consumer reading it is a separate loop anyway).

A region of the scatter alone is priced below the op alone: the unfused op's reference passes over
its indices several times (`ScatterOp.reference_index_passes`, which the Layer-1 cost asks), the
kernel once.

Must not: price, gate or rewrite IR (a rule only proposes `Candidate`s); import synthesized_rules
(it imports this module).
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Operation

from fusebind.compiler.matching import Candidate, MatchState, in_block_order, private_producers
from fusebind.dialect.prim_scatter import ScatterOp
from fusebind.dialect.prim_structured import ReshapeOp


def scatter_regions(state: MatchState, fusable: Callable[[Operation], bool],
                    name: Callable[[str, tuple[Operation, ...]], str]) -> list[Candidate]:
    """The candidates; `fusable` and `name` are synthesized_rules' `is_fusable_elementwise` and
    `synthesized_name` (passed in by the rule table there, which imports this module)."""
    out: list[Candidate] = []
    g = state.graph
    taken: set[Operation] = set()
    for sc in reversed(g.ops):  # the last of a chain of scatters first: it collects the earlier ones
        if not isinstance(sc, ScatterOp) or not state.free(sc) or sc in taken:
            continue
        members = private_producers(state, sc, lambda p: fusable(p) or isinstance(p, (ScatterOp, ReshapeOp)),
                                    taken)
        ops = in_block_order(state, members)
        taken.update(ops)
        out.append(Candidate("scatter", name("fused_", ops), ops))
    out.reverse()  # in block order
    return out
