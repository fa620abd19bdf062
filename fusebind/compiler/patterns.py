"""Patterns as data: a fused op's math written once, as an expression over a builder.

A `Pattern` is a small dataflow tree of prim ops (`Node`: an op kind, its
operands, its properties), leaves `Input` (an operand of the fused op, with
a shape role: `X` the full-shaped input, `ROW` a 1-d operand as long as X's
last axis) and `Const` (a splat `prim.constant` equal to a value within a
relative tolerance). One node object used twice is one shared sub-value
(softmax's `exp` feeds both the sum and the division): a match binds it to
one SSA value.

A pattern is written as a Python function over any *builder*: an object
with one method per prim kind (`b.add(a, c)`, `b.tanh(a)`,
`b.reduce_max(a, axes=LAST, keepdims=True)`) and `b.constant(value)`.
`Pattern.trace` runs the function on a `PatternBuilder`, which records
nodes; `Pattern.evaluate` replays a pattern on any other builder, in the
order the function made its ops. That is how one entry gives both the
recipe (replayed on `prim_text.PrimTextBuilder`) and the matcher
(`pattern_match.pattern_rule` reads the same nodes); the same function run
on a numpy or a tracer builder gives the numpy twin or the traced API
function (`catalog.gelu_tanh`).

Commutativity is not written here: the matcher takes it from the matched
op's `Commutative` trait. This module never imports xDSL (the examples list
and the runtime read the catalog without paying for it).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fusebind.dialect.errors import FusebindValueError

#: Shape roles of a pattern's inputs.
X = "x"  # the full-shaped input: the fused op's result has its shape
ROW = "row"  # a 1-d operand as long as X's last axis (bias, gamma, beta)
ROLES = (X, ROW)

#: `axes=LAST`: a reduction over the last axis of its operand, whatever the rank.
LAST = "last"

#: Relative tolerance of a `Const` condition: f32 rounding of a decimal constant is < 6e-8 relative.
CONST_REL_TOL = 1e-6

_SEQ = itertools.count()  # creation order: operands are always made before their users


class PatternError(FusebindValueError):
    """A pattern that cannot be a catalog entry (an undeclared input, a bad role, no op)."""


@dataclass(eq=False)
class Input:
    """An operand of the fused op: `name` and shape `role` (X or ROW)."""

    name: str
    role: str = X
    seq: int = field(default_factory=lambda: next(_SEQ))


@dataclass(eq=False)
class Const:
    """A splat constant equal to `value` within `rel_tol` (relative). The recipe writes `value`; a
    kernel compiled from a match computes with the matched constant, so the tolerance is tight."""

    value: float
    rel_tol: float = CONST_REL_TOL
    seq: int = field(default_factory=lambda: next(_SEQ))

    def accepts(self, got: float) -> bool:
        return math.isclose(got, self.value, rel_tol=self.rel_tol, abs_tol=0.0)


@dataclass(eq=False)
class Node:
    """A prim op of kind `kind` (its `KIND`: "add", "reduce_max" ...) over `operands`, with `props`
    (`axes`: LAST or a tuple of axes; `keepdims`: bool)."""

    kind: str
    operands: tuple[Term, ...]
    props: tuple[tuple[str, Any], ...] = ()
    seq: int = field(default_factory=lambda: next(_SEQ))


Term = Input | Const | Node

#: The properties a pattern node may state, and what each may be.
_PROPS: dict[str, Callable[[Any], bool]] = {
    "axes": lambda v: v == LAST or (isinstance(v, tuple) and all(isinstance(a, int) for a in v)),
    "keepdims": lambda v: isinstance(v, bool),
}


class PatternBuilder:
    """The builder that records: each call makes a `Node` (any prim kind: `b.exp(x)`,
    `b.reduce_sum(x, axes=LAST, keepdims=True)`), `constant(v)` a `Const`."""

    def constant(self, value: float) -> Const:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise PatternError(f"pattern constant must be a finite number, got {value!r}")
        return Const(float(value))

    def op(self, kind: str, *operands: Term, **props: Any) -> Node:
        for arg in operands:
            if not isinstance(arg, (Input, Const, Node)):
                raise PatternError(f"pattern op {kind!r}: operand {arg!r} is not a pattern value; "
                                   "use b.constant(v) for a constant")
        for key, value in props.items():
            check = _PROPS.get(key)
            if check is None:
                raise PatternError(f"pattern op {kind!r}: unknown property {key!r}; a pattern may state "
                                   f"{', '.join(sorted(_PROPS))}")
            if not check(value):
                raise PatternError(f"pattern op {kind!r}: {key}={value!r} is not allowed "
                                   "(axes: LAST or a tuple of ints; keepdims: a bool)")
        return Node(kind, tuple(operands), tuple(sorted(props.items())))

    def __getattr__(self, kind: str) -> Callable[..., Node]:
        if kind.startswith("_"):
            raise AttributeError(kind)
        return lambda *operands, **props: self.op(kind, *operands, **props)


@dataclass(frozen=True, eq=False)
class Pattern:
    """A fused op's math: its inputs (in operand order, the first one X), its root, and every node
    in creation order (a topological order)."""

    inputs: tuple[Input, ...]
    root: Node
    nodes: tuple[Term, ...]

    @staticmethod
    def trace(body: Callable[..., Any], roles: Sequence[str], names: Sequence[str] | None = None) -> Pattern:
        """The pattern `body(builder, *inputs)` builds, with one input per role."""
        for role in roles:
            if role not in ROLES:
                raise PatternError(f"pattern input role {role!r} is not one of {', '.join(ROLES)}")
        names = list(names) if names is not None else [f"in{i}" for i in range(len(roles))]
        if len(names) != len(roles):
            raise PatternError(f"pattern: {len(names)} input names for {len(roles)} roles")
        inputs = tuple(Input(n, r) for n, r in zip(names, roles))
        return Pattern.of(inputs, body(PatternBuilder(), *inputs))

    @staticmethod
    def of(inputs: Sequence[Input], root: Any) -> Pattern:
        """The pattern rooted at `root` over `inputs`; checks it is one a matcher can find."""
        inputs = tuple(inputs)
        if not inputs or inputs[0].role != X:
            raise PatternError("a pattern's first input must have role X (the full-shaped operand)")
        if not isinstance(root, Node):
            raise PatternError(f"a pattern's root must be a prim op, got {type(root).__name__}")
        seen: dict[int, Term] = {}
        stack: list[Term] = [root]
        while stack:
            term = stack.pop()
            if id(term) in seen:
                continue
            seen[id(term)] = term
            if isinstance(term, Node):
                stack.extend(term.operands)
            elif isinstance(term, Input) and all(term is not i for i in inputs):
                raise PatternError(f"pattern input {term.name!r} is used but not declared")
        nodes = tuple(sorted(seen.values(), key=lambda t: t.seq))
        return Pattern(inputs, root, nodes)

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(i.role for i in self.inputs)

    def ops(self) -> tuple[Node, ...]:
        """The op nodes (what a match claims; constants are cloned into regions instead)."""
        return tuple(t for t in self.nodes if isinstance(t, Node))

    def constants(self) -> tuple[Const, ...]:
        return tuple(t for t in self.nodes if isinstance(t, Const))

    def evaluate(self, builder: Any, *args: Any) -> Any:
        """Replay the pattern on `builder` (`args`: one value per input), in creation order, so a
        traced body gives the same op order on every builder. Returns the root's value."""
        if len(args) != len(self.inputs):
            raise PatternError(f"pattern takes {len(self.inputs)} inputs, got {len(args)}")
        values: dict[int, Any] = {id(i): a for i, a in zip(self.inputs, args)}
        for term in self.nodes:
            if isinstance(term, Const):
                values[id(term)] = builder.constant(term.value)
            elif isinstance(term, Node):
                operands = [values[id(o)] for o in term.operands]
                values[id(term)] = getattr(builder, term.kind)(*operands, **dict(term.props))
        return values[id(self.root)]
