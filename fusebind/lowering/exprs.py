"""Elementwise expressions emitted inside the reduction that consumes them.

Owns: `Expr` (an elementwise op whose value is not emitted as a `linalg.generic` of its
own but rebuilt, scalar by scalar, inside each block of the sum that uses it),
`make_expr`, `deferred_ops` (which ops become Exprs), `leaves` (the
emitted values an Expr reads) and `build` (its scalar body).

Why: the blocked sums of `accumulate.py` slice their operand block by block, and
linalg's elementwise fusion does not reach through a slice, so an operand computed by
its own generic would be materialized whole (a 64 MB temporary for `(x * x).sum()` over
2^24 floats). Inlining single-use producers is what that fusion pass did for the
unblocked reduction. Must not: emit anything itself (the consumer's generic does).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from fusebind.lowering.linalg_types import Dim, Value, broadcast_dims, element_name
from fusebind.lowering.scalar_text import TextScalarBuilder


@dataclass(frozen=True, eq=False)
class Expr:
    """An elementwise op not emitted yet: `op` applied to `args` (Exprs or emitted values)."""

    op: Any
    args: tuple["Expr | Value", ...]
    elem: str
    shape: list[Dim]


def make_expr(op: Any, args: Iterable["Expr | Value"]) -> Expr:
    args = tuple(args)
    return Expr(op, args, element_name(op.results[0].type), broadcast_dims([list(a.shape) for a in args], op.name))


def deferred_ops(block: Any, ops: list[Any], sink: Callable[[Any], bool], roots: set[Any]) -> set[Any]:
    """The elementwise ops of `ops` to inline instead of emitting: a result with exactly one
    use in the block (operand slots, the terminator included) whose user is a `sink` (a
    blocked sum), one of `roots` (the mapped op of a blocked row map-reduce) or itself
    inlined. As with linalg's elementwise fusion, a value used twice is emitted once and
    read twice."""
    uses: Counter[Any] = Counter()
    user: dict[Any, Any] = {}
    for op in block.ops:
        for o in op.operands:
            uses[o] += 1
            user[o] = op
    deferred: set[Any] = set()
    for op in reversed(ops):
        if not hasattr(op, "scalar_body") or len(op.results) != 1 or uses[op.results[0]] != 1:
            continue
        u = user[op.results[0]]
        if u in deferred or u in roots or sink(u):
            deferred.add(op)
    return deferred


def leaves(node: "Expr | Value", found: dict[str, Value]) -> dict[str, Value]:
    """The emitted values an expression reads, by SSA name, into `found` (returned)."""
    if isinstance(node, Value):
        found.setdefault(node.name, node)
    else:
        for a in node.args:
            leaves(a, found)
    return found


def build(b: TextScalarBuilder, node: "Expr | Value", leaf: dict[str, str]) -> str:
    """The scalar value of `node` in one generic body; `leaf` maps leaf names to scalars."""
    if isinstance(node, Value):
        return leaf[node.name]
    result = node.op.scalar_body(b, *[build(b, a, leaf) for a in node.args])
    return result if b.elem(result) == node.elem else b.cast(result, node.elem)
