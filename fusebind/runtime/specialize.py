"""Shape specialization: a function refined to the concrete shapes of one call.

Owns `specialize_function(func, shapes) -> func`: a detached copy of a
`func.func` whose arguments have the given static shapes, every dynamic
result type re-inferred op by op from its operands with each prim op's own
shape rule (`infer_shape`, the one the dialect's constructors and verifiers
use), fused.region block arguments and results included. Plans are
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


def _result_shape(op: Any, shapes: list[Shape]) -> Shape:
    """The static result shape of `op` on operands of `shapes`: the op's own `infer_shape`."""
    from fusebind.dialect.errors import ShapeInferenceError
    from fusebind.dialect.prim import ElementwiseOp, PrimOp

    if not isinstance(op, PrimOp):
        raise SpecializationError(f"{op.name}: no shape rule to specialize it; give it static shapes")
    try:
        out = op.inferred_shape(shapes)
    except ShapeInferenceError as err:
        if isinstance(op, ElementwiseOp):  # these messages list the call's shapes as Python writes them
            raise SpecializationError(f"{op.name}: operand shapes {', '.join(map(str, shapes))} do not broadcast") \
                from None
        raise SpecializationError(str(err)) from None
    if any(d is None for d in out):
        raise SpecializationError(f"{op.name}: result shape {list(out)} is not static on static operands; "
                                  "give it static shapes")
    return tuple(int(d) for d in out)  # type: ignore[arg-type]


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
            outs = [_result_shape(op, ins)]  # type: ignore[arg-type]
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
