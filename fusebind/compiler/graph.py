"""Dataflow facts of one block of prim ops: order, producers, users, convexity.

This module owns `DataflowGraph`: the ops of a block with their topological
index (block order is a topological order of SSA dataflow), the producer of
each operand and the users of each result, and the two questions fusion asks:

- `depends_on(op, members, lo)`: does `op` (transitively) consume a value of
  `members`? A backward search that never looks below index `lo` (the first
  member), so its cost is bounded by the index window of a candidate, not by
  the graph size.
- `nonconvex_witness(members)`: an op outside `members` on a path that leaves
  them and comes back (None if the set is convex).
- `cycle_witness(members, group_of, group_ops)`: the same question with the
  regions already accepted contracted to one node each (a region runs as a
  unit: all its inputs before any of its outputs). Two convex regions can
  still need each other; this finds the region that closes such a cycle.

It does not decide what to fuse and does not rewrite IR.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from xdsl.ir import Block, Operation, SSAValue


class DataflowGraph:
    """Topological indices, producers and users of the ops of one block."""

    def __init__(self, block: Block) -> None:
        self.block = block
        self.ops: list[Operation] = list(block.ops)
        self.index: dict[Operation, int] = {op: i for i, op in enumerate(self.ops)}
        self._producers: list[tuple[Operation, ...]] = []
        self._users: list[list[Operation]] = [[] for _ in self.ops]
        for i, op in enumerate(self.ops):
            prods: list[Operation] = []
            for value in op.operands:
                p = self.producer(value)
                if p is not None and p not in prods:
                    prods.append(p)
                    self._users[self.index[p]].append(op)
            self._producers.append(tuple(prods))

    def producer(self, value: SSAValue) -> Operation | None:
        """The op of this block defining `value` (None for block arguments and outer values)."""
        owner: Any = value.owner
        if isinstance(owner, Operation) and owner in self.index:
            return owner
        return None

    def producers(self, op: Operation) -> tuple[Operation, ...]:
        """Distinct in-block producers of `op`'s operands, in operand order."""
        return self._producers[self.index[op]]

    def users(self, op: Operation) -> list[Operation]:
        """Distinct in-block users of `op`'s results, in block order."""
        return self._users[self.index[op]]

    def depends_on(self, op: Operation, is_member: Callable[[Operation], bool], lo: int) -> bool:
        """Does `op` consume, directly or transitively, a result of a member
        (`is_member(op)`)? Only ops with index >= `lo` are visited (nothing
        below the first member can depend on it)."""
        stack = [op]
        seen = {op}
        while stack:
            cur = stack.pop()
            for p in self._producers[self.index[cur]]:
                if is_member(p):
                    return True
                if p not in seen and self.index[p] >= lo:
                    seen.add(p)
                    stack.append(p)
        return False

    def nonconvex_witness(self, members: Collection[Operation]) -> Operation | None:
        """An op outside `members` lying on a path from a member to a member
        (then fusing `members` would need that op both before and after the
        region), or None when the set is convex. Searches only the index
        window of `members`."""
        if not members:
            return None
        hi = max(self.index[m] for m in members)
        # Forward: ops outside that consume a member and sit before the last member.
        frontier: list[Operation] = []
        seen: set[Operation] = set()
        for m in members:
            for u in self.users(m):
                if u not in members and self.index[u] < hi and u not in seen:
                    seen.add(u)
                    frontier.append(u)
        reach = set(seen)
        while frontier:
            cur = frontier.pop()
            for u in self.users(cur):
                if self.index[u] >= hi and u not in members:
                    continue
                if u in members:
                    return cur
                if u not in reach:
                    reach.add(u)
                    frontier.append(u)
        return None

    def cycle_witness(self, members: Collection[Operation], group_of: Mapping[Operation, Any],
                      group_ops: Mapping[Any, Sequence[Operation]],
                      ignore: Collection[Any] = ()) -> tuple[Any, Operation] | None:
        """Would fusing `members` close a cycle once every group (an accepted
        region: `group_of[op]` is its key, `group_ops[key]` its ops) is
        contracted to a single node? Returns (the key of a group on such a
        path, or None for a plain op-level path; the member it re-enters at),
        or None when the contracted graph stays acyclic. Groups whose key is
        in `ignore` count as plain ops (the two regions a merge dissolves).

        Forward search from the users of `members`. A plain op at or after the
        last member cannot lead back, so it is not visited; a group is entered
        once and continues from the users of all of its ops. `members` must be
        disjoint from the groups."""
        if not members:
            return None
        ordered = list(dict.fromkeys(members))  # deterministic: the caller's order, not set order
        member_set = set(ordered)
        hi = max(self.index[m] for m in member_set)
        seen: set[Operation] = set()
        seen_groups: set[Any] = set()
        stack: list[tuple[Operation, Any]] = []

        def reach(op: Operation, via: Any) -> None:
            key = group_of.get(op)
            if key is not None and key not in ignore:
                if key in seen_groups:
                    return
                seen_groups.add(key)
                for g_op in group_ops[key]:
                    if g_op not in seen:
                        seen.add(g_op)
                        stack.append((g_op, key if via is None else via))
                return
            if op in seen or self.index[op] >= hi:
                return
            seen.add(op)
            stack.append((op, via))

        for m in ordered:
            for u in self.users(m):
                if u not in member_set:
                    reach(u, None)
        while stack:
            cur, via = stack.pop()
            for u in self.users(cur):
                if u in member_set:
                    return via, u
                reach(u, via)
        return None

    def external_inputs(self, members: Iterable[Operation], inside: Collection[Operation]) -> list[SSAValue]:
        """Operands of `members` not defined by an op of `inside`, first use first."""
        out: list[SSAValue] = []
        seen: set[SSAValue] = set()
        for op in members:
            for v in op.operands:
                owner = v.owner
                if isinstance(owner, Operation) and owner in inside:
                    continue
                if v not in seen:
                    seen.add(v)
                    out.append(v)
        return out

    def escaping_results(self, members: Iterable[Operation], inside: Collection[Operation]) -> list[SSAValue]:
        """Results of `members` used by an op of this block not in `inside`
        (they become region results). Uses by ops outside the block (regions
        built for candidates but not inserted yet) do not count."""
        out: list[SSAValue] = []
        for op in members:
            for r in op.results:
                if any(self.in_block(use.operation) and use.operation not in inside for use in r.uses):
                    out.append(r)
        return out

    def in_block(self, op: Operation) -> bool:
        """Is `op` one of the ops of this block (as it was when the graph was built)?"""
        return op in self.index
