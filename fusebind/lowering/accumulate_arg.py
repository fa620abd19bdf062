"""argmax / argmin as two reductions: the extreme value, then the smallest index holding it.

Owns: `KINDS`, `emit(em, op, x, out_elem, axis_shift)`, and its two passes `extreme(op)`
(pass 1 as the emitter's own reduce_max / reduce_min) and `first_index`. Pass 1 is np.max / np.min
(NaN-propagating); pass 2 takes the minimum of `j if x[j] == m else INT64_MAX` (on floats,
when m is NaN, of the NaN positions): numpy's first-occurrence and first-NaN rule whatever
order either loop visits the axis in (both are min/max, which reorder freely). Not one loop
carrying (value, index) pairs: two accumulators that feed each other are what
`pipeline.fusion_hazards` refuses (it cannot tell them from a fusion-made shared output).

Must not: import `emitter` (emitter and emit_dispatch call here; its methods are reached through `em`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fusebind.dialect.prim_structured import reduced_shape
from fusebind.lowering.linalg_types import Dim, Value, flag, ints, op_attr, op_kind, storage, ttype
from fusebind.lowering.scalar_text import ScalarEmitError, TextScalarBuilder, is_float

KINDS = frozenset({"reduce_argmax", "reduce_argmin"})
_I64_MAX = int(np.iinfo(np.int64).max)


@dataclass(frozen=True)
class _Extreme:
    """The reduce_max / reduce_min an arg reduction's pass 1 is: read by the emitter as an op."""

    KIND: str
    name: str
    axes: Any
    keepdims: Any


def extreme(op: Any) -> _Extreme:
    """Pass 1 of arg reduction `op`: np.max / np.min over its axis, as `Emitter.reduction` and
    `Emitter.map_reduce` lower them (NaN-propagating; the map of a producer in the same loop)."""
    kind = "reduce_max" if op_kind(op) == "reduce_argmax" else "reduce_min"
    return _Extreme(kind, f"prim.{kind}", op_attr(op, "axes"), op_attr(op, "keepdims"))


def emit(em: Any, op: Any, x: Value, out_elem: str, axis_shift: int = 0) -> Value:
    """axis_shift: leading dims `x` lacks relative to the op's operand (row-wise emission)."""
    if x.elem == "i1" or out_elem != "i64":
        raise ScalarEmitError(f"{op.name}: lowered for f32/f64/i32/i64 operands with an i64 result")
    return first_index(em, op, x, em.reduction(extreme(op), x, x.elem, axis_shift), axis_shift)


def first_index(em: Any, op: Any, x: Value, m: Value, axis_shift: int = 0) -> Value:
    """Pass 2: the smallest index along the op's axis where x equals the extreme m (or both are NaN)."""
    if x.elem == "i1":
        raise ScalarEmitError(f"{op.name}: lowered for f32/f64/i32/i64 operands with an i64 result")
    rank = len(x.shape)
    full = rank + axis_shift
    (axis,) = [a % full - axis_shift for a in ints(op_attr(op, "axes"))]
    keep = flag(op_attr(op, "keepdims")) if op_attr(op, "keepdims") is not None else False
    out_shape: list[Dim] = list(reduced_shape(tuple(x.shape), [axis], keep))  # type: ignore[arg-type]
    dims = ", ".join(f"d{j}" for j in range(rank))
    out_res = ", ".join("0" if j == axis else f"d{j}" for j in range(rank) if keep or j != axis)
    ident, out_map = f"affine_map<({dims}) -> ({dims})>", f"affine_map<({dims}) -> ({out_res})>"
    iters = ", ".join('"reduction"' if j == axis else '"parallel"' for j in range(rank))
    init_b = TextScalarBuilder(em.fresh, None)
    start = init_b.constant(_I64_MAX, "i64")
    em.lines.extend(init_b.lines)
    v_t, i_t = ttype(out_shape, x.elem), ttype(out_shape, "i64")
    i_fill = em.fresh("f")
    em.lines.append(f"{i_fill} = linalg.fill ins({start} : i64) outs({em.empty(out_shape, 'i64')} : {i_t}) "
                    f"-> {i_t}")
    m_out = m.name

    # pass 2: the smallest index holding it (or, when it is NaN, holding a NaN)
    b = TextScalarBuilder(em.fresh, None)
    xv, mv, i = b.bind(em.fresh("x"), x.elem), b.bind(em.fresh("m"), x.elem), b.bind(em.fresh("a"), "i64")
    pos = em.fresh("j")
    b.lines.append(f"{pos} = linalg.index {axis} : index")
    j = b._op(f"arith.index_cast {pos} : index to i64", "i64")
    hit = b.compare("eq", xv, mv)
    if is_float(x.elem):
        both_nan = b._op(f"arith.andi {b.is_nan(xv)}, {b.is_nan(mv)} : i1", "i1")
        hit = b._op(f"arith.ori {hit}, {both_nan} : i1", "i1")
    # j | (miss * INT64_MAX) (INT64_MAX when missed, as j >= 0), not select(hit, j, INT64_MAX): LLVM's loop
    # vectorizer leaves a select of the induction variable scalar (17.4 -> 5.1 ms, argmax of 256 x 32000 f32)
    one, big = b.constant(1, "i64"), b.constant(_I64_MAX, "i64")
    miss = b._op(f"arith.xori {b._op(f'arith.extui {hit} : i1 to i64', 'i64')}, {one} : i64", "i64")
    cand = b._op(f"arith.ori {j}, {b._op(f'arith.muli {miss}, {big} : i64', 'i64')} : i64", "i64")
    first = b._op(f"arith.minsi {i}, {cand} : i64", "i64")
    i_out = em.fresh("r")
    em.lines.append(f"{i_out} = linalg.generic {{indexing_maps = [{ident}, {out_map}, {out_map}], "
                    f"iterator_types = [{iters}]}} ins({x.name}, {m_out} : {ttype(x.shape, x.elem)}, {v_t}) "
                    f"outs({i_fill} : {i_t}) {{")
    em.lines.append(f"^bb0({xv}: {storage(x.elem)}, {mv}: {storage(x.elem)}, {i}: i64):")
    em.lines.extend("  " + line for line in b.lines)
    em.lines.append(f"  linalg.yield {first} : i64")
    em.lines.append(f"}} -> {i_t}")
    return Value(i_out, out_shape, "i64")
