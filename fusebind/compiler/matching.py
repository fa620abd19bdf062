"""What a fusion rule is and what it may read.

This module owns the vocabulary shared by every rule and by the optimizer:
`Candidate` (a proposed region: ops of one block, in block order),
`Rejection` (a merge a rule refused while growing a candidate), `MatchState`
(the graph, the ops already claimed, the size bound), `Rule` and its
`Matcher`, plus the two facts every matcher asks of an op (`op_kind`,
`in_block_order`). It holds no rule and must not price, gate or rewrite.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from xdsl.ir import Operation

from fusebind.compiler.graph import DataflowGraph


@dataclass(frozen=True)
class Candidate:
    """A proposed region: the rule, a name, its ops in block order, and the
    static catalog id when the rule is a catalog op (None: synthesized)."""

    rule: str
    name: str
    ops: tuple[Operation, ...]
    static_id: int | None = None


@dataclass(frozen=True)
class Rejection:
    """A merge a rule refused while growing a candidate."""

    verdict: str  # "illegal" or "too-big"
    rule: str
    name: str
    ops: tuple[Operation, ...]
    detail: str


@dataclass
class MatchState:
    """What a rule may read: the graph, the ops already claimed by an earlier
    rule (fused, or reserved for a gated region), and the size bound."""

    graph: DataflowGraph
    claimed: set[Operation]
    max_ops: int
    rejections: list[Rejection] = field(default_factory=list)

    def free(self, op: Operation | None) -> bool:
        return op is not None and op not in self.claimed


Matcher = Callable[[MatchState], list[Candidate]]


@dataclass(frozen=True)
class Rule:
    """A fusion rule: its name, the static id it is tied to (None when ids
    are synthesized per match) and its matcher."""

    name: str
    static_id: int | None
    match: Matcher


def op_kind(op: Operation | None) -> str | None:
    """The prim op's `KIND` (`"add"`, `"exp"` …), None for anything else."""
    return getattr(op, "KIND", None) if op is not None else None


def in_block_order(state: MatchState, ops: Collection[Operation]) -> tuple[Operation, ...]:
    """`ops` without repeats, in block order (how a `Candidate` holds them)."""
    return tuple(sorted(set(ops), key=state.graph.index.__getitem__))


def private_producers(state: MatchState, root: Operation, accept: Callable[[Operation], bool],
                      taken: Collection[Operation]) -> list[Operation]:
    """`root` and, transitively, the free producers `accept` allows whose every user is already
    collected (a prologue no op outside it reads), up to `state.max_ops` ops; `root` first."""
    g = state.graph
    members: list[Operation] = [root]
    stack = [root]
    while stack and len(members) < state.max_ops:
        cur = stack.pop()
        for p in g.producers(cur):
            if (accept(p) and state.free(p) and p not in taken and p not in members
                    and all(u in members for u in g.users(p)) and len(members) < state.max_ops):
                members.append(p)
                stack.append(p)
    return members
