"""The lowering of `prim.scatter` inside a fused region: a copy of x, then a loop over the updates.

The result starts as x: x itself when the region computed it and nothing else reads it (the loop
then updates its buffer in place; bufferization sees the value is dead), otherwise a copy of x into
a fresh tensor (a `linalg.generic` with no inputs that reads x by `tensor.extract`, which
canonicalization cannot erase and whose `tensor.empty` becomes the kernel's out buffer). Then an
`scf.for` nest over the update shape (x's, with idx's `axis` dim), in C order (numpy's update
order: a repeated position accumulates in exactly numpy's sequence, so float sums round as
`np.add.at`'s), carries the tensor in `iter_args`; each iteration extracts the index (a size-1 dim
of idx or v reads element 0: numpy's broadcast), makes it a position along `axis`, extracts the old
value and the update, combines them (`mode`: as the dialect documents, in v's element type, cast
back to x's) and inserts the new value. A scalar update (`prim.broadcast_to` of a constant) reads
the constant itself: the broadcast is never written.

A traced index goes through `em.checked_index` (the kernel error channel: a bad index is clamped
and reported, the runtime raises `fb.IndexOutOfBounds`). An op marked `in_bounds` (its indices
were checked before the call) only normalizes negative indices and clamps, so a broken promise
still never writes outside x.

Must not: import `emitter` or `emit_dispatch` (the dispatch imports this module); emit anything but through `em`.
"""

from __future__ import annotations

from typing import Any

from xdsl.ir import OpResult

from fusebind.lowering.linalg_types import Dim, Value, op_attr, storage, ttype
from fusebind.lowering.scalar_text import ScalarEmitError, TextScalarBuilder

KINDS: frozenset[str] = frozenset({"scatter"})

_COMBINE = {"add": "add", "mul": "mul", "min": "minimum", "max": "maximum"}


def emit(em: Any, op: Any, args: list[Any], result_type: Any) -> Any:
    x, idx, v = args
    v = _unbroadcast_constant(em, op, v)
    mode = str(op_attr(op, "mode").data)
    axis = int(op_attr(op, "axis").value.data)
    if mode != "set" and mode not in _COMBINE:
        raise ScalarEmitError(f"{op.name}: mode '{mode}' has no lowering")
    in_bounds = op_attr(op, "in_bounds") is not None
    init = x if _dead_after(op) else em._gather_copy(x)
    update = [idx.shape[d] if d == axis else n for d, n in enumerate(x.shape)]
    if any(d == 0 for d in update if isinstance(d, int)):
        return Value(init.name, list(x.shape), x.elem)
    t = ttype(x.shape, x.elem)
    rank = len(update)
    ivs = [em.fresh("j") for _ in update]
    accs = [em.fresh("y") for _ in update]
    results = [em.fresh("r") for _ in update]
    for d, n in enumerate(update):
        upper = n if isinstance(n, str) else em.index(n)
        carried = init.name if d == 0 else accs[d - 1]
        em.lines.append(f"{results[d]} = scf.for {ivs[d]} = {em.index(0)} to {upper} step {em.index(1)} "
                        f"iter_args({accs[d]} = {carried}) -> ({t}) {{")
    b = TextScalarBuilder(em.fresh, em.fastmath)
    acc = accs[-1]
    raw = b._op(f"tensor.extract {idx.name}[{_at(em, ivs, idx.shape, update)}] : {ttype(idx.shape, idx.elem)}",
                idx.elem)
    if idx.elem != "i64":
        raw = b.cast(raw, "i64")
    size = x.shape[axis]
    if in_bounds:
        pos = _clamped(b, raw, size)
    else:
        pos = em.checked_index(b, raw, size, f"axis {axis} of {op.name}")
    at_p = ", ".join(pos if d == axis else iv for d, iv in enumerate(ivs))
    new = _load(b, f"tensor.extract {v.name}[{_at(em, ivs[rank - len(v.shape):], v.shape, update[rank - len(v.shape):])}] "
                   f": {ttype(v.shape, v.elem)}", v.elem)
    if mode != "set":
        old = _load(b, f"tensor.extract {acc}[{at_p}] : {t}", x.elem)
        new = b.cast(getattr(b, _COMBINE[mode])(b.cast(old, v.elem), new), x.elem)
    if x.elem == "i1":
        new = b._op(f"arith.extui {new} : i1 to i8", "i8")
    put = b._op(f"tensor.insert {new} into {acc}[{at_p}] : {t}", x.elem)
    em.called |= b.called
    em.lines.extend("  " + line for line in b.lines)
    em.lines.append(f"  scf.yield {put} : {t}")
    for d in range(rank - 1, 0, -1):
        em.lines.append("}")
        em.lines.append(f"scf.yield {results[d]} : {t}")
    em.lines.append("}")
    return Value(results[0], list(x.shape), x.elem)


def _unbroadcast_constant(em: Any, op: Any, v: Value) -> Value:
    """The values of a scalar update (`prim.broadcast_to` of a constant in the region): that
    constant, read with broadcast indices, so the broadcast's buffer is never written (its
    generic is left unused, and erased as dead by the upstream passes)."""
    owner = getattr(op.operands[2], "owner", None)
    if getattr(owner, "name", "") != "prim.broadcast_to" or len(list(op.operands[2].uses)) != 1:
        return v
    src = getattr(owner.operands[0], "owner", None)
    if getattr(src, "name", "") != "prim.constant":
        return v
    return em.constant(src, src.results[0].type)


def _at(em: Any, ivs: list[str], shape: list[Dim], update: list[Dim]) -> str:
    """The indices of an operand broadcast to the update shape: a static 1 against another size
    (numpy's broadcast) reads element 0."""
    return ", ".join(em.index(0) if n == 1 and u != 1 else iv for iv, n, u in zip(ivs, shape, update))


def _load(b: TextScalarBuilder, text: str, elem: str) -> str:
    """An element read from a tensor, as the logical value (an i1 is stored as a byte)."""
    if elem != "i1":
        return b._op(text, elem)
    byte = b._op(text, storage(elem))
    zero = b.constant(0, "i8")
    return b._op(f"arith.cmpi ne, {byte}, {zero} : i8", "i1")


def _clamped(b: TextScalarBuilder, raw: str, size: Dim) -> str:
    """`raw` (i64) as an `index` in [0, size): negative counts from the end, then clamped (the
    indices were checked before the call; the clamp only keeps a broken promise inside x)."""
    if isinstance(size, str):
        n = b._op(f"arith.index_cast {size} : index to i64", "i64")
    else:
        n = b.constant(size, "i64")
    zero, one = b.constant(0, "i64"), b.constant(1, "i64")
    neg = b.compare("lt", raw, zero)
    p = b.select(neg, b.add(raw, n), raw)
    p = b.select(b.compare("lt", p, zero), zero, p)
    last = b._op(f"arith.subi {n}, {one} : i64", "i64")
    p = b.select(b.compare("gt", p, last), last, p)
    return b._op(f"arith.index_cast {p} : i64 to index", "index")


def _dead_after(op: Any) -> bool:
    """x is a fresh tensor computed inside the region (by an elementwise op, a broadcast or another
    scatter: not a block argument, which is the caller's read-only input, nor a constant, nor a
    view of either) and the scatter is its only use: its buffer may be updated in place."""
    x = op.operands[0]
    if not isinstance(x, OpResult) or len(list(x.uses)) != 1:
        return False
    owner = x.owner
    return hasattr(owner, "scalar_body") or owner.name in ("prim.broadcast_to", "prim.scatter")
