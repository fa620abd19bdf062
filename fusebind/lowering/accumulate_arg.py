"""argmax / argmin as two reductions: the extreme value, then the smallest index holding it.

Owns: `KINDS` and `emit(em, op, x, out_elem, axis_shift)`. Pass 1 is np.max / np.min
(NaN-propagating); pass 2 takes the minimum of `j if x[j] == m else INT64_MAX` (on floats,
when m is NaN, of the NaN positions): numpy's first-occurrence and first-NaN rule whatever
order either loop visits the axis in (both are min/max, which reorder freely). Not one loop
carrying (value, index) pairs: two accumulators that feed each other are what
`pipeline.fusion_hazards` refuses (it cannot tell them from a fusion-made shared output).

Must not: import `emitter` (emitter dispatches here); emit anything but the pair reduction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusebind.dialect.prim_structured import reduced_shape
from fusebind.lowering.linalg_types import Dim, Value, flag, ints, op_attr, op_kind, storage, ttype
from fusebind.lowering.scalar_text import ScalarEmitError, TextScalarBuilder, is_float

KINDS = frozenset({"reduce_argmax", "reduce_argmin"})
_I64_MAX = int(np.iinfo(np.int64).max)


def emit(em: Any, op: Any, x: Value, out_elem: str, axis_shift: int = 0) -> Value:
    """axis_shift: leading dims `x` lacks relative to the op's operand (row-wise emission)."""
    kind = op_kind(op)
    if x.elem == "i1" or out_elem != "i64":
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
    want_max = kind == "reduce_argmax"

    # pass 1: the extreme value (NaN-propagating on floats, as np.max)
    init_b = TextScalarBuilder(em.fresh, None)
    if is_float(x.elem):
        worst = init_b.constant(-np.inf if want_max else np.inf, x.elem)
    else:
        info = np.iinfo(np.dtype(x.elem.replace("i", "int")))
        worst = init_b.constant(int(info.min if want_max else info.max), x.elem)
    start = init_b.constant(_I64_MAX, "i64")
    em.lines.extend(init_b.lines)
    v_t, i_t = ttype(out_shape, x.elem), ttype(out_shape, "i64")
    v_fill, i_fill = em.fresh("f"), em.fresh("f")
    em.lines.append(f"{v_fill} = linalg.fill ins({worst} : {x.elem}) outs({em.empty(out_shape, x.elem)} : {v_t}) "
                    f"-> {v_t}")
    em.lines.append(f"{i_fill} = linalg.fill ins({start} : i64) outs({em.empty(out_shape, 'i64')} : {i_t}) "
                    f"-> {i_t}")
    b = TextScalarBuilder(em.fresh, None)
    xv, v = b.bind(em.fresh("x"), x.elem), b.bind(em.fresh("a"), x.elem)
    m = b.combine_reassoc("max" if want_max else "min", v, xv)
    m_out = em.fresh("r")
    em.lines.append(f"{m_out} = linalg.generic {{indexing_maps = [{ident}, {out_map}], iterator_types = [{iters}]}} "
                    f"ins({x.name} : {ttype(x.shape, x.elem)}) outs({v_fill} : {v_t}) {{")
    em.lines.append(f"^bb0({xv}: {storage(x.elem)}, {v}: {storage(x.elem)}):")
    em.lines.extend("  " + line for line in b.lines)
    em.lines.append(f"  linalg.yield {m} : {storage(x.elem)}")
    em.lines.append(f"}} -> {v_t}")

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
    cand = b.select(hit, j, b.constant(_I64_MAX, "i64"))
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
