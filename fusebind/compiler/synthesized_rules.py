"""The synthesized rules: regions whose ids the recipe registry gives per match.

This module owns what a synthesized region may hold
(`is_fusable_elementwise`), how such a region is named (`synthesized_name`,
`merged_name`), and three rules: a matmul epilogue (bias, activation,
residual add after a `prim.matmul`, or its single-use reshape under
`inplace.THROUGH_RESHAPE`; the matmul
itself stays outside the region, bound to BLAS, because the lowering would generate a slow
`linalg.matmul`), an elementwise prologue/epilogue around a reduction, and
maximal convex chains of elementwise ops (broadcasts included), collected in
`SYNTHESIZED_RULES`. A rule only proposes `Candidate`s and notes the merges
it refused (`Rejection`): it must not price, gate or rewrite IR.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from xdsl.ir import Operation

from fusebind.compiler import inplace
from fusebind.compiler.graph import DataflowGraph
from fusebind.compiler.matching import (Candidate, MatchState, Rejection, Rule, in_block_order, op_kind,
                                        private_producers)
from fusebind.compiler.regions import inlined_constant
from fusebind.compiler.scan_rule import scan_regions
from fusebind.compiler.scatter_rule import scatter_regions
from fusebind.dialect.prim import BroadcastToOp, ElementwiseOp, MatmulOp, PowOp, ReductionOp, ReshapeOp


def is_fusable_elementwise(op: Operation) -> bool:
    """An op a synthesized elementwise region may hold: elementwise, broadcast
    or an index map (`INDEX_MAP`: slice, gather, concat; constants are cloned
    in by the region builder instead). A slice is an index map: lowered as a strided subview of its operand and,
    for a reversed dim, a copy generic that upstream elementwise fusion
    folds into its consumer (lowering/emitter.py), so in a region it costs
    neither a loop nor a buffer.

    Not an integer `prim.pow` whose exponent is not a non-negative constant
    cloned into the region: numpy raises for a negative integer exponent, a
    kernel cannot raise (no error channel in the kernel ABI), so such a pow
    stays outside every region and runs its reference, which checks the
    exponent before computing (`prim_division.PowOp`)."""
    if not getattr(op, "kernel_computable", lambda: True)():  # prim.check: raises, a kernel cannot
        return False
    if isinstance(op, PowOp) and not (op.kernel_computable() and (not op.is_integer()
                                                                   or inlined_constant(op.rhs.owner))):
        return False
    return isinstance(op, (ElementwiseOp, BroadcastToOp)) or bool(getattr(type(op), "INDEX_MAP", False))


def synthesized_name(prefix: str, ops: tuple[Operation, ...]) -> str:
    """`prefix` and the kinds of the first four ops (`_n<count>` past four)."""
    kinds = [(op_kind(o) or "op").replace(".", "_") for o in ops]  # a user op kind is its dotted full name
    head = "_".join(kinds[:4])
    return f"{prefix}{head}" + (f"_n{len(kinds)}" if len(kinds) > 4 else "")


def merged_name(ops: tuple[Operation, ...], prefix: str | None = None) -> str:
    """The synthesized name of a region holding `ops`: `ew_...` when all are
    elementwise, `fused_...` otherwise (or an explicit prefix)."""
    if prefix is None:
        prefix = "ew_" if all(is_fusable_elementwise(o) for o in ops) else "fused_"
    return synthesized_name(prefix, ops)


def _consumer_chain(state: MatchState, start: Operation, room: int,
                    taken: Collection[Operation] = ()) -> list[Operation]:
    """The free fusable ops after `start` along single-use values (each op
    the only user of the one before), at most `room` of them, none in `taken`."""
    chain: list[Operation] = []
    cur = start
    while len(chain) < room:
        users = state.graph.users(cur)
        if len(users) != 1 or len(list(cur.results[0].uses)) != 1:
            break
        nxt = users[0]
        if not (is_fusable_elementwise(nxt) and state.free(nxt)) or nxt in taken:
            break
        chain.append(nxt)
        cur = nxt
    return chain


def _matmul_epilogue(state: MatchState) -> list[Candidate]:
    """Elementwise ops after a matmul (bias, activation, residual add), along
    the chain of single-use values, up to the size bound. The matmul stays
    outside: it runs on BLAS, the region is its in-place epilogue.

    Through a reshape (conv: the (F, P) matmul viewed as (N, F, *out)): when
    the matmul's only reader is a `prim.reshape` with one reader, the chain
    starts after it (the reshape stays outside, a view of the matmul's buffer,
    which the epilogue may then reuse: compiler/inplace.py), and takes the
    `prim.broadcast_to`s only its ops read (conv's bias broadcast), which a
    chain alone would leave outside as a full-size array. Only under
    `inplace.THROUGH_RESHAPE` (on; why there)."""
    out: list[Candidate] = []
    g = state.graph
    for mm in g.ops:
        if not isinstance(mm, MatmulOp):
            continue
        view = _single_use_reshape(state, mm) if inplace.THROUGH_RESHAPE else None
        if view is None:
            chain = _consumer_chain(state, mm, state.max_ops)
        else:
            chain = _consumer_chain(state, view, state.max_ops)
            chain += _private_broadcasts(state, chain, state.max_ops - len(chain))
        if len(chain) >= 2:
            ops = in_block_order(state, chain)
            out.append(Candidate("matmul-epilogue", synthesized_name("matmul_epilogue_", ops), ops))
    return out


def _single_use_reshape(state: MatchState, mm: Operation) -> Operation | None:
    """The `prim.reshape` that is the only reader of `mm`'s result (one use),
    itself read once, or None."""
    users = state.graph.users(mm)
    if len(users) != 1 or len(list(mm.results[0].uses)) != 1 or not isinstance(users[0], ReshapeOp):
        return None
    return users[0]


def _private_broadcasts(state: MatchState, chain: list[Operation], room: int) -> list[Operation]:
    """The free `prim.broadcast_to`s feeding `chain` whose every reader is in it, at most `room`."""
    found: list[Operation] = []
    for op in chain:
        for p in state.graph.producers(op):
            if len(found) >= room:
                return found
            if (isinstance(p, BroadcastToOp) and state.free(p) and p not in found and p not in chain
                    and all(u in chain for u in state.graph.users(p))):
                found.append(p)
    return found


def _reduction_fusion(state: MatchState) -> list[Candidate]:
    """A reduction with its elementwise prologue (single-use producers of its
    input) and epilogue (single-use chain of elementwise consumers)."""
    out: list[Candidate] = []
    taken: set[Operation] = set()
    g = state.graph
    for red in g.ops:
        if not isinstance(red, ReductionOp) or not state.free(red) or red in taken:
            continue
        members = private_producers(state, red, is_fusable_elementwise, taken)
        members += _consumer_chain(state, red, state.max_ops - len(members), taken)
        if len(members) < 2:
            continue
        ops = in_block_order(state, members)
        taken.update(ops)
        out.append(Candidate("reduction", synthesized_name("fused_", ops), ops))
    return out


class _Groups:
    """Union-find over ops with, per group root: size, first index, and the
    ops outside the group that feed it (filtered lazily)."""

    def __init__(self, graph: DataflowGraph) -> None:
        self.graph = graph
        self.parent: dict[Operation, Operation] = {}
        self.size: dict[Operation, int] = {}
        self.lo: dict[Operation, int] = {}
        self.feeds: dict[Operation, list[Operation]] = {}

    def add(self, op: Operation) -> None:
        self.parent[op] = op
        self.size[op] = 1
        self.lo[op] = self.graph.index[op]
        self.feeds[op] = list(self.graph.producers(op))

    def find(self, op: Operation) -> Operation:
        root = op
        while self.parent[root] is not root:
            root = self.parent[root]
        while self.parent[op] is not root:
            self.parent[op], op = root, self.parent[op]
        return root

    def member(self, root: Operation) -> Callable[[Operation], bool]:
        return lambda op: op in self.parent and self.find(op) is root

    def path_between(self, a: Operation, b: Operation) -> Operation | None:
        """An op outside both groups on a path from one to the other, or None."""
        for src, dst in ((a, b), (b, a)):
            in_dst = self.member(dst)
            in_src = self.member(src)
            for u in self.feeds[dst]:
                if in_dst(u) or in_src(u):
                    continue
                if self.graph.depends_on(u, in_src, self.lo[src]):
                    return u
        return None

    def union(self, a: Operation, b: Operation) -> Operation:
        if self.size[a] < self.size[b]:
            a, b = b, a
        self.parent[b] = a
        self.size[a] += self.size[b]
        self.lo[a] = min(self.lo[a], self.lo[b])
        keep = self.member(a)
        self.feeds[a] = [u for u in (*self.feeds[a], *self.feeds.pop(b)) if not keep(u)]
        return a


def _elementwise(state: MatchState) -> list[Candidate]:
    """Maximal convex groups of elementwise ops, grown in block order: each op
    joins the groups of its elementwise producers when the union stays convex
    (checked by a bounded search) and within the size bound."""
    g = state.graph
    groups = _Groups(g)
    for v in g.ops:
        if not (is_fusable_elementwise(v) and state.free(v)):
            continue
        groups.add(v)
        producer_roots: list[Operation] = []
        for p in g.producers(v):
            if p in groups.parent:
                root = groups.find(p)
                if root not in producer_roots:
                    producer_roots.append(root)
        for root in sorted(producer_roots, key=groups.lo.__getitem__):
            mine = groups.find(v)
            root = groups.find(root)
            if root is mine:
                continue
            if groups.size[mine] + groups.size[root] > state.max_ops:
                state.rejections.append(Rejection(
                    "too-big", "elementwise", synthesized_name("ew_", (v,)), (v,),
                    f"{groups.size[mine] + groups.size[root]} ops > max-ops {state.max_ops}"))
                continue
            via = groups.path_between(root, mine)
            if via is not None:
                state.rejections.append(Rejection(
                    "illegal", "elementwise", synthesized_name("ew_", (v,)), (v,),
                    f"non-convex: a path leaves the region through {via.name} and re-enters at {v.name}"))
                continue
            groups.union(mine, root)
    members: dict[Operation, list[Operation]] = {}
    for op in groups.parent:
        members.setdefault(groups.find(op), []).append(op)
    out: list[Candidate] = []
    for ops_list in members.values():
        if len(ops_list) < 2 and not getattr(ops_list[0], "region_alone", lambda: False)():  # a lone gather
            continue
        ops = in_block_order(state, ops_list)
        out.append(Candidate("elementwise", synthesized_name("ew_", ops), ops))
    out.sort(key=lambda c: g.index[c.ops[0]])
    return out


SYNTHESIZED_RULES: tuple[Rule, ...] = (
    Rule("matmul-epilogue", None, _matmul_epilogue),
    Rule("reduction", None, _reduction_fusion),
    Rule("scan", None, lambda state: scan_regions(state, is_fusable_elementwise, synthesized_name)),  # before ew
    Rule("elementwise", None, _elementwise),
    Rule("scatter", None, lambda state: scatter_regions(state, is_fusable_elementwise, synthesized_name)),
)
