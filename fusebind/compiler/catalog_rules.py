"""The catalog rules: pattern matchers for the static built-in fused ops.

This module owns the matchers of `softmax` (max-subtract-exp-sum-div over
the last axis), `layernorm` (mean, var, normalize, scale, shift), `gelu`
(tanh form), `bias_relu` and `bias_gelu`, and `CATALOG_RULES`, each rule tied
to its static id from `catalog.py`. Commuted operands of add/mul match.
A matcher only proposes `Candidate`s: it must not price, gate or rewrite IR.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.ir import Operation, SSAValue

from fusebind.compiler.catalog import catalog_entry
from fusebind.compiler.matching import Candidate, MatchState, Rule, in_block_order, op_kind
from fusebind.dialect.prim import ConstantOp, ReductionOp
from fusebind.dialect.types import shape_of


# --------------------------------------------------------------------------- pattern helpers


def _def(state: MatchState, value: SSAValue, kind: str) -> Operation | None:
    """The free in-block op of `kind` defining `value`, if any."""
    op = state.graph.producer(value)
    return op if state.free(op) and op_kind(op) == kind else None


def _const_value(state: MatchState, value: SSAValue) -> float | None:
    """The value of a splat/scalar `prim.constant`, else None."""
    op = state.graph.producer(value)
    if not isinstance(op, ConstantOp):
        return None
    values = op.value.get_values()
    if len(values) == 0 or any(v != values[0] for v in values):
        return None
    return float(values[0])


def _is_const(state: MatchState, value: SSAValue, expected: float, rel: float = 1e-6) -> bool:
    got = _const_value(state, value)
    return got is not None and math.isclose(got, expected, rel_tol=rel, abs_tol=rel)


def _binary(state: MatchState, op: Operation | None, kind: str) -> tuple[SSAValue, SSAValue] | None:
    if not state.free(op) or op_kind(op) != kind:
        return None
    return op.operands[0], op.operands[1]  # type: ignore[union-attr]


def _last_axis_keepdims(op: Operation) -> bool:
    if not isinstance(op, ReductionOp):
        return False
    rank = len(shape_of(op.x.type))
    return op.axes_list() == (rank - 1,) and op.keepdims is not None


def _commuted(pair: tuple[SSAValue, SSAValue]) -> list[tuple[SSAValue, SSAValue]]:
    return [pair, (pair[1], pair[0])]


# --------------------------------------------------------------------------- catalog rules


def _match_gelu_at(state: MatchState, root: Operation) -> tuple[SSAValue, list[Operation]] | None:
    """0.5*x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x*x*x))), the catalog's form
    (commuted operands of add/mul accepted). Returns (x, ops)."""
    top = _binary(state, root, "mul")
    if top is None:
        return None
    for half_x, one_t in _commuted(top):
        hx = _binary(state, state.graph.producer(half_x), "mul")
        ot = _binary(state, state.graph.producer(one_t), "add")
        if hx is None or ot is None:
            continue
        for c_half, x in _commuted(hx):
            if not _is_const(state, c_half, 0.5):
                continue
            for c_one, t in _commuted(ot):
                if not _is_const(state, c_one, 1.0):
                    continue
                tanh = _def(state, t, "tanh")
                if tanh is None:
                    continue
                scaled = _binary(state, state.graph.producer(tanh.operands[0]), "mul")
                if scaled is None:
                    continue
                for c_s, inner in _commuted(scaled):
                    if not _is_const(state, c_s, math.sqrt(2.0 / math.pi)):
                        continue
                    ops = _match_gelu_inner(state, inner, x)
                    if ops is not None:
                        producers = [state.graph.producer(v) for v in (half_x, one_t, t, tanh.operands[0], inner)]
                        return x, [root, tanh, *[p for p in producers if p is not None], *ops]
    return None


def _match_gelu_inner(state: MatchState, inner: SSAValue, x: SSAValue) -> list[Operation] | None:
    add = _binary(state, state.graph.producer(inner), "add")
    if add is None:
        return None
    for xx, scaled_cube in _commuted(add):
        if xx != x:
            continue
        sc = _binary(state, state.graph.producer(scaled_cube), "mul")
        if sc is None:
            continue
        for c_k, cube in _commuted(sc):
            if not _is_const(state, c_k, 0.044715):
                continue
            cube_op = state.graph.producer(cube)
            c = _binary(state, cube_op, "mul")
            if c is None:
                continue
            for sq, x3 in _commuted(c):
                sq_op = state.graph.producer(sq)
                s = _binary(state, sq_op, "mul")
                if x3 == x and s is not None and s == (x, x):
                    return [state.graph.producer(scaled_cube), cube_op, sq_op]  # type: ignore[list-item]
    return None


def _is_row_of(state: MatchState, bias: SSAValue, x: SSAValue) -> bool:
    xs, bs = shape_of(x.type), shape_of(bias.type)
    return len(xs) >= 1 and len(bs) == 1 and bs[0] == xs[-1]


def _bias_add(state: MatchState, value: SSAValue, like: SSAValue | None = None) -> Operation | None:
    """The free `prim.add` defining `value` that adds a row bias (a 1-d value
    as long as the last dim) to a tensor shaped like `like` (default: `value`)."""
    add = _def(state, value, "add")
    if add is None:
        return None
    shape = shape_of((value if like is None else like).type)
    for a, bias in _commuted((add.operands[0], add.operands[1])):
        if _is_row_of(state, bias, a) and shape_of(a.type) == shape:
            return add
    return None


def _catalog(name: str, matcher: Callable[[MatchState, Operation], list[Operation] | None]) -> Rule:
    entry = catalog_entry(name)

    def match(state: MatchState) -> list[Candidate]:
        out: list[Candidate] = []
        taken: set[Operation] = set()
        for op in reversed(state.graph.ops):  # roots are last: match from the end
            if op in taken or not state.free(op):
                continue
            ops = matcher(state, op)
            if ops is None or taken.intersection(ops):
                continue
            taken.update(ops)
            out.append(Candidate(entry.name, entry.name, in_block_order(state, ops), entry.fused_id))
        return list(reversed(out))

    return Rule(entry.name, entry.fused_id, match)


def _gelu(state: MatchState, root: Operation) -> list[Operation] | None:
    found = _match_gelu_at(state, root)
    return None if found is None else found[1]


def _bias_gelu(state: MatchState, root: Operation) -> list[Operation] | None:
    found = _match_gelu_at(state, root)
    if found is None:
        return None
    x, ops = found
    add = _bias_add(state, x)
    return None if add is None else [*ops, add]


def _bias_relu(state: MatchState, root: Operation) -> list[Operation] | None:
    if op_kind(root) != "relu" or not state.free(root):
        return None
    add = _bias_add(state, root.operands[0], root.results[0])
    return None if add is None else [add, root]


def _softmax(state: MatchState, root: Operation) -> list[Operation] | None:
    div = _binary(state, root, "div")
    if div is None:
        return None
    ex_v, s_v = div
    s = _def(state, s_v, "reduce_sum")
    ex = _def(state, ex_v, "exp")
    if s is None or ex is None or s.operands[0] != ex_v or not _last_axis_keepdims(s):
        return None
    sub = _binary(state, state.graph.producer(ex.operands[0]), "sub")
    if sub is None:
        return None
    x, m_v = sub
    m = _def(state, m_v, "reduce_max")
    if m is None or m.operands[0] != x or not _last_axis_keepdims(m):
        return None
    return [m, state.graph.producer(ex.operands[0]), ex, s, root]  # type: ignore[list-item]


def _layernorm(state: MatchState, root: Operation) -> list[Operation] | None:
    out = _binary(state, root, "add")
    if out is None:
        return None
    for yg_v, beta in _commuted(out):
        yg_op = state.graph.producer(yg_v)
        yg = _binary(state, yg_op, "mul")
        if yg is None:
            continue
        for y_v, gamma in _commuted(yg):
            y_op = state.graph.producer(y_v)
            y = _binary(state, y_op, "mul")
            if y is None or not (_is_row_of(state, gamma, y_v) and _is_row_of(state, beta, y_v)):
                continue
            for d_v, r_v in _commuted(y):
                found = _layernorm_stats(state, d_v, r_v)
                if found is not None:
                    return [root, yg_op, y_op, *found]  # type: ignore[list-item]
    return None


def _layernorm_stats(state: MatchState, d_v: SSAValue, r_v: SSAValue) -> list[Operation] | None:
    r = _def(state, r_v, "rsqrt")
    d_op = state.graph.producer(d_v)
    d = _binary(state, d_op, "sub")
    if r is None or d is None:
        return None
    x, mean_v = d
    mean = _def(state, mean_v, "reduce_mean")
    if mean is None or mean.operands[0] != x or not _last_axis_keepdims(mean):
        return None
    eps_op = state.graph.producer(r.operands[0])
    eps = _binary(state, eps_op, "add")
    if eps is None:
        return None
    for var_v, c in _commuted(eps):
        var = _def(state, var_v, "reduce_mean")
        if var is None or not _last_axis_keepdims(var) or _const_value(state, c) is None:
            continue
        sq_op = state.graph.producer(var.operands[0])
        if _binary(state, sq_op, "mul") == (d_v, d_v):
            return [r, d_op, mean, eps_op, var, sq_op]  # type: ignore[list-item]
    return None


CATALOG_RULES: tuple[Rule, ...] = (
    _catalog("bias_gelu", _bias_gelu),
    _catalog("gelu", _gelu),
    _catalog("softmax", _softmax),
    _catalog("layernorm", _layernorm),
    _catalog("bias_relu", _bias_relu),
)
