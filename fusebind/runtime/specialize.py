"""Shape specialization: a function refined to the concrete shapes of one call.

Owns `specialize_function(func, shapes) -> func`: a detached copy of a
`func.func` whose arguments have the given static shapes, every dynamic
result type re-inferred op by op from its operands with the prim ops' own
shape rules (broadcasting, reductions, transpose, matmul, reshape,
broadcast_to), fused.region block arguments and results included. Plans are
per input signature, so the optimizer, the lowering and the binding all see
static shapes: dynamic MLIR input runs the same fused native kernels as
static input.

No numpy work is done to learn a shape (the references are never run).
Must not: optimize, compile or run anything.
"""

from __future__ import annotations

from typing import Any, Sequence
from fusebind.dialect.errors import FusebindError

Shape = tuple[int, ...]


class SpecializationError(FusebindError, ValueError):
    """The call's shapes do not fit the function (an op's shape rule refused them)."""


def _result_shape(op: Any, shapes: list[Shape], declared: Sequence[int | None]) -> Shape:
    """The static result shape of `op` on operands of `shapes`."""
    from fusebind.dialect.prim import (
        BroadcastToOp, ElementwiseOp, MatmulOp, ReductionOp, ReshapeOp, TransposeOp,
    )
    from fusebind.dialect.types import broadcast_shapes

    name = op.name
    if isinstance(op, ElementwiseOp):
        out = broadcast_shapes(*shapes)
        if out is None:
            raise SpecializationError(f"{name}: operand shapes {', '.join(map(str, shapes))} do not broadcast")
        return tuple(int(d) for d in out)  # type: ignore[arg-type]
    if isinstance(op, ReductionOp):
        (x,) = shapes
        axes = set(op.axes_list())
        keep = op.keepdims is not None
        return tuple(1 if i in axes else d for i, d in enumerate(x) if keep or i not in axes)
    if isinstance(op, TransposeOp):
        return tuple(shapes[0][p] for p in op.perm_list())
    if isinstance(op, MatmulOp):
        a, b = shapes
        if len(a) < 1 or len(b) < 1 or a[-1] != (b[-2] if len(b) >= 2 else b[0]):
            raise SpecializationError(f"{name}: shapes {a} and {b} do not contract")
        batch = broadcast_shapes(a[:-2], b[:-2])
        if batch is None:
            raise SpecializationError(f"{name}: batch dims of {a} and {b} do not broadcast")
        tail = b[-1:] if len(b) >= 2 else ()
        return (*[int(d) for d in batch], *a[-2:-1], *tail)  # type: ignore[misc]
    if isinstance(op, BroadcastToOp):
        (x,) = shapes
        off = len(declared) - len(x)
        return tuple(x[i - off] if d is None and i >= off else (1 if d is None else int(d))
                     for i, d in enumerate(declared))
    if isinstance(op, ReshapeOp):
        (x,) = shapes
        n = 1
        for d in x:
            n *= d
        known = 1
        for d in declared:
            known *= 1 if d is None else int(d)
        if known == 0 or n % known:
            raise SpecializationError(f"{name}: cannot reshape {x} to {list(declared)}")
        return tuple(n // known if d is None else int(d) for d in declared)
    raise SpecializationError(f"{name}: no shape rule to specialize it; give it static shapes")


def _refine_block(block: Any, arg_shapes: Sequence[Shape]) -> list[Shape]:
    """Refine `block` in place from its argument shapes; returns the shapes of
    the values its terminator yields/returns."""
    from xdsl.rewriter import Rewriter

    from fusebind.dialect.types import elem_of, is_static, shape_of, tensor_type

    def set_shape(value: Any, shape: Shape) -> Any:
        declared = shape_of(value.type)
        if tuple(declared) == shape:
            return value
        if len(declared) != len(shape) or any(d is not None and d != s for d, s in zip(declared, shape)):
            raise SpecializationError(f"a value of type {value.type} cannot have shape {list(shape)}")
        return Rewriter.replace_value_with_new_type(value, tensor_type(shape, elem_of(value.type)))

    known: dict[Any, Shape] = {}
    for arg, shape in zip(list(block.args), arg_shapes):
        known[set_shape(arg, tuple(shape))] = tuple(shape)
    for op in list(block.ops):
        ins = [known.get(v) or tuple(shape_of(v.type)) for v in op.operands]
        if op.name in ("func.return", "fused.yield"):
            return [tuple(s) for s in ins]  # type: ignore[misc]
        if op.name == "fused.region":
            outs = _refine_block(op.body.blocks[0], ins)  # type: ignore[arg-type]
        elif all(is_static(shape_of(r.type)) for r in op.results):
            outs = [tuple(int(d) for d in shape_of(r.type)) for r in op.results]  # type: ignore[arg-type]
        else:
            outs = [_result_shape(op, ins, shape_of(op.results[0].type))]  # type: ignore[arg-type]
        for r, s in zip(list(op.results), outs):
            known[set_shape(r, s)] = s
    return []


def specialize_function(func: Any, shapes: Sequence[Shape]) -> Any:
    """A detached copy of `func` (a func.func) specialized to argument `shapes`.

    A function whose values are all static already is returned as is.
    Raises SpecializationError when the shapes do not fit an op.
    """
    from xdsl.dialects.builtin import FunctionType

    from fusebind.dialect.types import is_static, shape_of

    block = func.body.blocks[0]
    values = [*block.args, *(r for op in func.walk() for r in op.results)]
    if all(is_static(shape_of(v.type)) for v in values if hasattr(v.type, "get_shape")):
        return func
    out = func.clone()
    block = out.body.blocks[0]
    _refine_block(block, [tuple(int(d) for d in s) for s in shapes])
    ret = block.last_op
    out.function_type = FunctionType.from_lists([a.type for a in block.args], [v.type for v in ret.operands])
    return out


__all__ = ["SpecializationError", "specialize_function"]
