"""The lowering of `prim.scan` (np.cumsum / np.cumprod along one axis) inside a fused region.

Not an index map: element j along the axis needs every element before it. Scalar loops
(`scf.for` nests carrying the result tensor, `tensor.extract` / `tensor.insert`: no copy, no
malloc, nothing that calls the C runner library):
- the last axis: the axis loop is innermost and carries the running value (first the identity);
- another axis: the loops run in C order (the axis loop walks whole rows, not one stride per
  step), and each element combines the result's previous element along the axis (read back; the
  identity at 0) with its own.
Each element so gets `((x0 + x1) + x2) + ...`: numpy's sequential order, exactly, for floats
(one combine per step, no fast-math flags; a float sum starts from -0.0, so x0 = -0.0 stays -0.0)
and integers (arith's adds and muls wrap as numpy's do). `max` / `min` combine with the scalar
builder's `maximum` / `minimum` (numpy's: the running value first, NaN propagates, a tie gives the
new element), starting from -inf / +inf (the integer type's min / max). An empty dim is a
zero-trip loop.

Must not: import `emitter` or `emit_dispatch` (the dispatch imports this module); use `em`'s methods and `linalg_types`.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from fusebind.dialect.types import ELEMENTS, numpy_dtype
from fusebind.lowering.linalg_types import Dim, Value, op_attr, ttype
from fusebind.lowering.scalar_text import ScalarEmitError, TextScalarBuilder

KINDS: frozenset[str] = frozenset({"scan"})

#: a kernel input's tensor (lowering/emit.py names them `%t<k>`: bufferization.to_tensor ... restrict)
_INPUT = re.compile(r"%t\d+")

#: the scalar builder's combine of each kind (the running value is its first operand)
_COMBINE = {"sum": "add", "prod": "mul", "max": "maximum", "min": "minimum"}


def _identity(kind: str, elem: str) -> float | int:
    """The value the running combination starts from: combined with x0 it gives x0 exactly."""
    if kind == "sum":
        return -0.0 if elem.startswith("f") else 0  # -0.0 + v is v for every v; 0.0 + -0.0 would be 0.0
    if kind == "prod":
        return 1
    dt = numpy_dtype(elem)
    if dt.kind == "f":
        return -np.inf if kind == "max" else np.inf
    info = np.iinfo(dt)
    return int(info.min if kind == "max" else info.max)


def _combine(em: Any, combine: str, elem: str, acc: str, v: str) -> str:
    """`acc <kind> v` through the scalar builder (no fast-math flags: numpy's order and values)."""
    b = TextScalarBuilder(em.fresh, None)
    out = getattr(b, combine)(b.bind(acc, elem), b.bind(v, elem))
    em.lines.extend(b.lines)
    return out


def _size(em: Any, d: Dim) -> str:
    return d if isinstance(d, str) else em.index(d)


def emit(em: Any, op: Any, args: list[Value], result_type: Any) -> Value:
    kind = str(op_attr(op, "kind").data)
    axis = int(op_attr(op, "axis").value.data)
    if kind not in _COMBINE:
        raise ScalarEmitError(f"{op.name}: kind '{kind}' has no lowering")
    (x,) = args
    elem, shape = x.elem, list(x.shape)
    t = ttype(shape, elem)
    combine = _COMBINE[kind]
    b = TextScalarBuilder(em.fresh, None)
    identity = b.constant(_identity(kind, elem), elem)
    em.lines.extend(b.lines)

    # In place over an operand the region computed (its producers' generic): element j is read just
    # before it is overwritten and never after, so the scan needs no second buffer, and empty-tensor
    # elimination lets the producers write straight into the caller's out memref. Not over a kernel
    # input (`%t<k>`, read-only: bufferization would copy it).
    inplace = not _INPUT.fullmatch(x.name)
    if axis != len(shape) - 1:
        return _c_order(em, x, axis, combine, identity, inplace)
    # the other dims, outermost first (any order gives each element the same sequence of combines)
    others = [k for k in range(len(shape)) if k != axis]
    ivs = {k: em.fresh("j") for k in range(len(shape))}
    carried = x.name if inplace else em.empty(shape, elem)
    results = []
    for k in others:
        res, acc = em.fresh("r"), em.fresh("y")
        em.lines.append(f"{res} = scf.for {ivs[k]} = {em.index(0)} to {_size(em, shape[k])} step {em.index(1)} "
                        f"iter_args({acc} = {carried}) -> ({t}) {{")
        results.append(res)
        carried = acc
    scan, run, out = em.fresh("scan"), em.fresh("run"), em.fresh("sout")  # (not "t": %t<i> are the inputs)
    em.lines.append(f"{scan}:2 = scf.for {ivs[axis]} = {em.index(0)} to {_size(em, shape[axis])} step {em.index(1)} "
                    f"iter_args({run} = {identity}, {out} = {carried}) -> ({ELEMENTS[elem].mlir}, {t}) {{")
    at = ", ".join(ivs[k] for k in range(len(shape)))
    v, put = em.fresh("v"), em.fresh("w")
    em.lines.append(f"{v} = tensor.extract {out if inplace else x.name}[{at}] : {t}")
    c = _combine(em, combine, elem, run, v)
    em.lines.append(f"{put} = tensor.insert {c} into {out}[{at}] : {t}")
    em.lines.append(f"scf.yield {c}, {put} : {ELEMENTS[elem].mlir}, {t}")
    em.lines.append("}")
    inner = f"{scan}#1"
    for res in reversed(results):
        em.lines.append(f"scf.yield {inner} : {t}")
        em.lines.append("}")
        inner = res
    return Value(inner, shape, elem)


def _c_order(em: Any, x: Value, axis: int, combine: str, identity: str, inplace: bool) -> Value:
    """A scan along a dim that is not the last: loops in C order (the axis loop walking whole rows,
    not a stride per step), each element combining the result's previous element along the axis
    (read back from the carried result; the identity at 0) with its own. Same combines, same order.
    `inplace`: the carried result starts as x itself (element i is still x's when it is read)."""
    elem, shape = x.elem, list(x.shape)
    t = ttype(shape, elem)
    ivs = [em.fresh("j") for _ in shape]
    carried = x.name if inplace else em.empty(shape, elem)
    results = []
    for k, d in enumerate(shape):
        res, acc = em.fresh("r"), em.fresh("y")
        em.lines.append(f"{res} = scf.for {ivs[k]} = {em.index(0)} to {_size(em, d)} step {em.index(1)} "
                        f"iter_args({acc} = {carried}) -> ({t}) {{")
        results.append(res)
        carried = acc
    i = ivs[axis]
    first, back, prev_i, raw, prev = (em.fresh(h) for h in ("z", "m", "q", "o", "p"))
    em.lines.append(f"{first} = arith.cmpi eq, {i}, {em.index(0)} : index")
    em.lines.append(f"{back} = arith.subi {i}, {em.index(1)} : index")
    em.lines.append(f"{prev_i} = arith.select {first}, {em.index(0)}, {back} : index")
    at = ", ".join(ivs)
    at_prev = ", ".join(prev_i if k == axis else iv for k, iv in enumerate(ivs))
    # at i = 0 this reads the result's element 0 before it is written; the select discards it
    em.lines.append(f"{raw} = tensor.extract {carried}[{at_prev}] : {t}")
    em.lines.append(f"{prev} = arith.select {first}, {identity}, {raw} : {ELEMENTS[elem].mlir}")
    v, put = em.fresh("v"), em.fresh("w")
    em.lines.append(f"{v} = tensor.extract {carried if inplace else x.name}[{at}] : {t}")
    c = _combine(em, combine, elem, prev, v)
    em.lines.append(f"{put} = tensor.insert {c} into {carried}[{at}] : {t}")
    inner = put
    for res in reversed(results):
        em.lines.append(f"scf.yield {inner} : {t}")
        em.lines.append("}")
        inner = res
    return Value(inner, shape, elem)
