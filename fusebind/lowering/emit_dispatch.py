"""One prim op -> its emitter: the dispatch by op kind, and the narrow-float rule around it.

Owns `emit_op` (one op's value: its operands widened or narrowed as its kind needs, the emitter of
its kind called, a narrow result the kernel returns rounded once) and `narrowed`. The emitters are
`Emitter`'s methods (emitter.py) and the index-map / scan / scatter / accumulate modules.

Must not: import `emit` or `rowwise` (they import this module); import `mlir`.
"""

from __future__ import annotations

from typing import Any

from fusebind.lowering import accumulate, accumulate_arg, emit_concat, emit_gather, emit_scan, emit_scatter, emit_window
from fusebind.lowering.emitter import NARROW_FLOATS, Emitter, compute_elem
from fusebind.lowering.linalg_types import Value, element_name, op_kind
from fusebind.lowering.scalar_text import ScalarEmitError

#: ops that move narrow values without arithmetic, in their storage type (their emitters read rtype)
_STORAGE_KINDS = emit_gather.KINDS | emit_concat.KINDS | emit_window.KINDS
#: ops whose emitters compute in their operand's own type: given f32 operands, they accumulate in f32
#: (a scan of f16 accumulates in f32, as a sum does; a scatter-add combines in f32)
_WIDENED_KINDS = emit_scan.KINDS | emit_scatter.KINDS | accumulate_arg.KINDS


def emit_op(em: Emitter, op: Any, args: list[Value], axis_shift: int = 0) -> Value:
    """One op's value. A narrow float result (f16, bf16) is an f32 tensor unless it leaves the
    kernel (then it is rounded once, and its consumers still read the f32 one: `Emitter.wide`) or
    the op is an explicit cast; the data-movement ops that read their result type (gather, concat,
    scatter, scan) take and give the narrow storage type."""
    kind = op_kind(op)
    if len(op.results) != 1:
        raise ScalarEmitError(f"{op.name}: ops with {len(op.results)} results are not lowered")
    logical = element_name(op.results[0].type)
    if kind in _STORAGE_KINDS:
        args = [narrowed(em, a, element_name(o.type)) for a, o in zip(args, op.operands)]
    else:
        args = [em.wide.get(getattr(a, "name", ""), a) for a in args]  # an Expr has no name
    if kind in _WIDENED_KINDS:
        args = [em._map_unary(a, lambda bb, x: x, "f32") if a.elem in NARROW_FLOATS else a for a in args]
    if kind == "cast" and logical in NARROW_FLOATS and args[0].elem not in NARROW_FLOATS | {"f32"}:
        # int/f64 -> narrow through f32 (as ml_dtypes converts): x86 has no direct instruction and
        # LLVM's libcalls (__truncdfhf2, __truncsfbf2 for sitofp) are not linked into kernels
        args = [em._map_unary(args[0], lambda bb, x: bb.cast(x, "f32"), "f32")]
    value = _emit_op(em, op, args, axis_shift, logical if kind == "cast" else compute_elem(logical))
    if logical in NARROW_FLOATS and value.elem != logical and _returned(op):
        wide, value = value, narrowed(em, value, logical)
        em.wide[value.name] = wide
    return value


def narrowed(em: Emitter, v: Value, elem: str) -> Value:
    """`v` in the narrow storage type `elem` (rounded to nearest even), or `v` itself."""
    if elem not in NARROW_FLOATS or v.elem == elem:
        return v
    return em._map_unary(v, lambda bb, x: bb.cast(x, elem), elem)


def _returned(op: Any) -> bool:
    """Whether the kernel returns `op`'s result (a use by its block's terminator)."""
    for use in op.results[0].uses:
        user = use.operation
        block = user.parent_block()
        if block is not None and block.last_op is user:
            return True
    return False


def _emit_op(em: Emitter, op: Any, args: list[Value], axis_shift: int, out: str) -> Value:
    kind = op_kind(op)
    rtype = op.results[0].type
    if hasattr(op, "scalar_body"):
        return em.elementwise(op, args, out)
    if kind.startswith("reduce"):
        if kind in accumulate_arg.KINDS:  # (value, index) pairs
            return accumulate_arg.emit(em, op, args[0], out, axis_shift)
        if accumulate.is_blocked(op):  # float sums and means: blocked, accurate (accumulate.py)
            return accumulate.blocked_sum(em, op, args[0], out, axis_shift)
        return em.reduction(op, args[0], out, axis_shift)
    if kind == "transpose":
        return em.transpose(op, args[0], rtype)
    if kind == "reshape":
        return em.reshape(op, args[0], rtype)
    if kind == "broadcast_to":
        return em.broadcast_to(op, args[0], rtype)
    if kind == "slice":
        return em.slice(op, args[0], rtype)
    if kind in emit_gather.KINDS:
        return emit_gather.emit(em, op, args, rtype)
    if kind in emit_window.KINDS:
        return emit_window.emit(em, op, args, rtype)
    if kind in emit_concat.KINDS:
        return emit_concat.emit(em, op, args, rtype)
    if kind in emit_scatter.KINDS:
        return emit_scatter.emit(em, op, args, rtype)
    if kind in emit_scan.KINDS:
        return emit_scan.emit(em, op, args, rtype)
    if kind == "constant":
        return em.constant(op, rtype)
    if kind == "matmul":
        return em.matmul(op, args[0], args[1], out)
    raise ScalarEmitError(f"{op.name}: no lowering to linalg for op kind '{kind}'")
