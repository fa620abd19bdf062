"""The lowering of `prim.gather` / `prim.take_along` inside a fused region: an index map.

One `linalg.generic` per op whose output map is the identity: it reads the index tensor through
its indexing map (gather: the result dims `axis .. axis + idx.rank - 1`; take_along: every
result dim, a broadcast one read at 0) and the operand `x` with `tensor.extract` at
`(d..., i, d...)`, `i` the normalized index. Because the result map is the identity and the
read of `x` is in the body, upstream elementwise fusion folds the op into its consumer: the
region has no loop nest and no buffer for the gather (an embedding lookup feeding a sum is one
loop that reads the rows it needs).

The index `i`:
- indices that are a `prim.constant` (known when compiling) were range-checked by the verifier:
  only a negative one needs `i + n`, no runtime check;
- `in_bounds` indices were checked by the caller before the call: normalized, and clamped to
  [0, n) so that a broken promise still reads inside `x` (no error report needed);
- any other indices are first checked by a loop of their own (`em.checked_index`, the kernel
  ABI's error channel: the first bad one in C order is reported and the call raises), then
  read as `in_bounds` ones are. The gather's loop so has no side effects, and fuses away.

Must not: import `emitter` or `emit_dispatch` (the dispatch imports this module); use `em`'s methods and `linalg_types`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusebind.lowering.linalg_types import Dim, Value, flag, ints, op_attr, op_kind, storage, ttype
from fusebind.lowering.scalar_text import ScalarEmitError, TextScalarBuilder

KINDS: frozenset[str] = frozenset({"gather", "take_along"})


def _axis(op: Any) -> int:
    value = op_attr(op, "axis")
    got = getattr(value, "value", None)
    if got is not None:
        return int(got.data)
    return int(ints(value)[0])


def _constant_indices(op: Any) -> np.ndarray | None:
    owner = op.operands[1].owner
    if getattr(type(owner), "KIND", None) == "constant":  # (a block argument's owner is a Block)
        return np.asarray(owner.reference())
    return None


def _feeds_reduction(op: Any) -> bool:
    """A reduction reads `op`'s result, directly or through ops that read by maps (elementwise
    ops, broadcasts, other index maps): fusion will try to fold the gather into it."""
    seen, todo = set(), [op]
    while todo:
        cur = todo.pop()
        for use in cur.results[0].uses if len(cur.results) == 1 else ():
            user = use.operation
            if id(user) in seen:
                continue
            seen.add(id(user))
            kind = op_kind(user) if hasattr(user, "name") else ""
            if kind.startswith("reduce"):
                return True
            if hasattr(user, "scalar_body") or kind == "broadcast_to" or getattr(type(user), "INDEX_MAP", False):
                todo.append(user)
    return False


def _size_i64(em: Any, b: TextScalarBuilder, size: Dim) -> str:
    if isinstance(size, int):
        return b.constant(size, "i64")
    return b._op(f"arith.index_cast {size} : index to i64", "i64")


def _checked(op: Any) -> bool:
    """The indices need a check in the kernel: neither a constant nor `in_bounds`."""
    return _constant_indices(op) is None and op_attr(op, "in_bounds") is None


def _index(em: Any, op: Any, b: TextScalarBuilder, raw: str, size: Dim, axis: int) -> str:
    """The `index` value that reads `x` for the i64 index `raw` (see the module docstring):
    normalized, and clamped unless the indices are a constant (verified in range)."""
    const = _constant_indices(op)
    if const is None or (const < 0).any():
        n = _size_i64(em, b, size)
        neg = b.compare("lt", raw, b.constant(0, "i64"))
        raw = b.select(neg, b.add(raw, n), raw)
        if const is None:  # checked before (check loop, or the caller): never read outside x
            zero = b.constant(0, "i64")
            last = b._op(f"arith.subi {n}, {b.constant(1, 'i64')} : i64", "i64")
            raw = b._op(f"arith.minsi {b._op(f'arith.maxsi {raw}, {zero} : i64', 'i64')}, {last} : i64", "i64")
    return b._op(f"arith.index_cast {raw} : i64 to index", "index")


def _check_loop(em: Any, op: Any, idx: Any, size: Dim, axis: int) -> None:
    """An `scf.for` nest over the indices (C order) that only checks them (`em.checked_index`: the
    first bad one is reported). Kept apart from the gather's own loop so that loop has no side
    effects: elementwise fusion then folds it into its consumer and erases it (a checked body
    would stay behind as a second gather loop)."""
    b = TextScalarBuilder(em.fresh, em.fastmath)
    ivs = [em.fresh("ci") for _ in idx.shape]
    head = [f"{'  ' * k}scf.for {iv} = {em.index(0)} to {d if isinstance(d, str) else em.index(d)} step "
            f"{em.index(1)} {{" for k, (iv, d) in enumerate(zip(ivs, idx.shape))]
    v = b._op(f"tensor.extract {idx.name}[{', '.join(ivs)}] : {ttype(idx.shape, idx.elem)}", idx.elem)
    shown = op.shown_axis() if hasattr(op, "shown_axis") else axis  # numpy's axis, for the message
    em.checked_index(b, b.cast(v, "i64"), size, f"axis {shown} of {op.name}")
    pad = "  " * len(ivs)
    tail = ["  " * k + "}" for k in reversed(range(len(ivs)))]
    em.lines.extend(head + [pad + line for line in b.lines] + tail)


def emit(em: Any, op: Any, args: list[Any], result_type: Any) -> Any:
    x, idx = args
    kind = op_kind(op)
    axis = _axis(op)
    r = len(x.shape)
    if kind == "gather":
        m = len(idx.shape)
        shape: list[Dim] = list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:])
        idx_res = [f"d{axis + j}" for j in range(m)]
        x_dims: list[int | None] = [j for j in range(axis)] + [None] + [axis + m + j for j in range(r - axis - 1)]
        x_zero = [False] * r
    else:
        if len(idx.shape) != r:
            raise ScalarEmitError(f"{op.name}: indices of rank {len(idx.shape)} for an operand of rank {r}")
        shape = []
        for j, (a, c) in enumerate(zip(x.shape, idx.shape)):
            shape.append(c if j == axis or a == 1 else a)
        idx_res = [("0" if (c == 1 and shape[j] != 1) else f"d{j}") for j, c in enumerate(idx.shape)]
        x_dims = [None if j == axis else j for j in range(r)]
        x_zero = [j != axis and a == 1 and shape[j] != 1 for j, a in enumerate(x.shape)]
    if isinstance(x.shape[axis], int) and x.shape[axis] == 0:
        raise ScalarEmitError(f"{op.name}: a gather from an empty axis has no element to read (every index is "
                              "out of range: the reference raises)")
    rank = len(shape)
    dims = ", ".join(f"d{j}" for j in range(rank))
    maps = [f"affine_map<({dims}) -> ({', '.join(idx_res)})>"]
    ins, params = [idx], []
    if _checked(op):
        _check_loop(em, op, idx, x.shape[axis], axis)
    b = TextScalarBuilder(em.fresh, em.fastmath)
    (p,), (iv,) = em._bind_args(b, [idx])
    params.append(p)
    cover = _feeds_reduction(op)
    if cover:
        # Upstream elementwise fusion folds a producer into a *reduction* only when every loop dim
        # keeps an input that defines it, and the indices alone do not cover x's other dims. So
        # x is an input too, read through a map at position 0 of the gathered axis, and used (so
        # that canonicalization keeps it) by a select whose condition is always true (the read
        # index is >= 0): LLVM folds it and the dead load away.
        x_res = ["0" if d is None or x_zero[j] else f"d{d}" for j, d in enumerate(x_dims)]
        maps.append(f"affine_map<({dims}) -> ({', '.join(x_res)})>")
        ins.append(x)
        params.append(b.bind(em.fresh("x"), storage(x.elem)))
    maps.append(f"affine_map<({dims}) -> ({dims})>")
    raw = b.cast(iv, "i64")
    at = _index(em, op, b, raw, x.shape[axis], axis)
    coords = []
    for j, d in enumerate(x_dims):
        if d is None:
            coords.append(at)
        elif x_zero[j]:
            coords.append(b._op("arith.constant 0 : index", "index"))
        else:
            coords.append(b._op(f"linalg.index {d} : index", "index"))
    val = b._op(f"tensor.extract {x.name}[{', '.join(coords)}] : {ttype(x.shape, x.elem)}", storage(x.elem))
    if cover:
        as_int = b._op(f"arith.index_cast {at} : index to i64", "i64")
        keep = b.compare("ge", as_int, b.constant(0, "i64"))
        val = b._op(f"arith.select {keep}, {val}, {params[1]} : {storage(x.elem)}", storage(x.elem))
    if x.elem == "i1":  # the generic yields the storage type; _generic extends an i1 result itself
        val = b._op(f"arith.trunci {val} : i8 to i1", "i1")
    em.called |= b.called
    return em._generic(ins, maps, ["parallel"] * rank, shape, x.elem, params, b, val, em.empty(shape, x.elem))
