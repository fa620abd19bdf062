"""Shape specialization: a function refined to the concrete shapes of one call.

Owns `specialize_function(func, shapes) -> func`: a detached copy of a
`func.func` whose arguments have the given static shapes, every dynamic
result type re-inferred op by op from its operands with each prim op's own
shape rule (`infer_shape`, the one the dialect's constructors and verifiers
use), fused.region block arguments and results included. Plans are
per input signature, so the optimizer, the lowering and the binding all see
static shapes: dynamic MLIR input runs the same fused native kernels as
static input.

Also owns the reverse, `generalize_function(func, dims) -> func`: a copy
whose chosen argument dims are dynamic (`?`), every value's shape re-inferred
with the same rules (a result dim that follows a generalized dim becomes `?`;
a dim an op pins, such as a reshape to a constant, stays what the op says).
`dynamic_dims(...)` picks which dims may be generalized (sizes 0 and 1 stay
static: broadcasting depends on them). Whether a generalized function really
serves other sizes is decided by the caller (api/jit.py) by tracing again at
the new size and comparing generalized texts: the rule is in
docs/DYNAMIC-SHAPES.md.

No numpy work is done to learn a shape (the references are never run).
Must not: optimize, compile or run anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

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


class GeneralizationError(FusebindError, ValueError):
    """An op's shape rule refused the generalized (dynamic) operand shapes: the dims stay static."""


#: a dim mask per argument: True where the dim is generalized to `?`
DimMask = tuple[tuple[bool, ...], ...]


def dynamic_dims(shapes: Sequence[Shape], candidates: DimMask | None = None) -> DimMask:
    """Which dims of these argument `shapes` may be dynamic: every dim of size >= 2 (or, with
    `candidates`, those of them the mask names). Sizes 0 and 1 stay specialized: a dim of 1
    broadcasts and a dim of 0 empties the result, so a kernel for `?` would mean something else."""
    return tuple(tuple(d >= 2 and (candidates is None or bool(candidates[i][k])) for k, d in enumerate(s))
                 for i, s in enumerate(shapes))


def mask_fits(mask: DimMask, pattern: Sequence[Shape], shapes: Sequence[Shape]) -> bool:
    """Do argument `shapes` fit a function generalized by `mask` from `pattern`: same ranks, every
    static dim equal, every dynamic dim of a size >= 2 (0 and 1 are never served by `?`)."""
    if len(shapes) != len(pattern) or len(mask) != len(pattern):
        return False
    for m, p, s in zip(mask, pattern, shapes):
        if len(s) != len(p) or len(m) != len(p):
            return False
        for dyn, want, got in zip(m, p, s):
            if (dyn and got < 2) or (not dyn and want != got):
                return False
    return True


def _generalized_shape(op: Any, shapes: list[tuple[int | None, ...]]) -> tuple[int | None, ...]:
    from fusebind.dialect.errors import ShapeInferenceError
    from fusebind.dialect.prim import PrimOp

    if not isinstance(op, PrimOp):
        raise GeneralizationError(f"{op.name}: no shape rule to generalize it")
    try:
        return tuple(op.inferred_shape(shapes))
    except ShapeInferenceError as err:
        raise GeneralizationError(str(err)) from None


def _generalize_block(block: Any, arg_shapes: Sequence[tuple[int | None, ...]]) -> list[tuple[int | None, ...]]:
    """Re-infer `block` in place from its (generalized) argument shapes; returns the shapes its
    terminator yields/returns."""
    from xdsl.rewriter import Rewriter

    from fusebind.dialect.types import elem_of, shape_of, tensor_type

    def set_shape(value: Any, shape: tuple[int | None, ...]) -> Any:
        if tuple(shape_of(value.type)) == tuple(shape):
            return value
        if len(shape_of(value.type)) != len(shape):
            raise GeneralizationError(f"a value of type {value.type} cannot have shape {list(shape)}")
        return Rewriter.replace_value_with_new_type(value, tensor_type(list(shape), elem_of(value.type)))

    known: dict[Any, tuple[int | None, ...]] = {}
    for arg, shape in zip(list(block.args), arg_shapes):
        known[set_shape(arg, tuple(shape))] = tuple(shape)
    for op in list(block.ops):
        ins = [known.get(v, tuple(shape_of(v.type))) for v in op.operands]
        if op.name in ("func.return", "fused.yield"):
            return ins
        if op.name == "fused.region":
            outs = _generalize_block(op.body.blocks[0], ins)
        elif not op.operands:  # a constant: its shape is its own
            outs = [tuple(shape_of(r.type)) for r in op.results]
        else:
            outs = [_generalized_shape(op, ins)]
        for r, s in zip(list(op.results), outs):
            known[set_shape(r, s)] = s
    return []


def generalize_function(func: Any, mask: DimMask) -> Any:
    """A detached copy of `func` whose argument dims named by `mask` are `?`, every value's shape
    re-inferred by its op's `infer_shape`. Raises GeneralizationError when a rule refuses."""
    from xdsl.dialects.builtin import FunctionType

    from fusebind.dialect.types import shape_of

    out = func.clone()
    block = out.body.blocks[0]
    shapes = []
    for arg, m in zip(block.args, list(mask) + [()] * (len(block.args) - len(mask))):
        s = tuple(shape_of(arg.type))
        shapes.append(tuple(None if k < len(m) and m[k] else d for k, d in enumerate(s)))
    _generalize_block(block, shapes)
    ret = block.last_op
    out.function_type = FunctionType.from_lists([a.type for a in block.args], [v.type for v in ret.operands])
    return out


def describe_dynamic(func: Any, names: Sequence[str]) -> str:
    """`shapes: dynamic trace x: float32[?,64], ...`, for `explain`: the dims one trace serves at any size."""
    from fusebind.dialect.types import elem_of, numpy_dtype, shape_of

    shown = [f"{n}: {numpy_dtype(elem_of(a.type))}[{','.join('?' if d is None else str(d) for d in shape_of(a.type))}]"
             for n, a in zip(names, func.body.blocks[0].args)]
    return ("shapes: dynamic trace " + ", ".join(shown) + " (one trace and one set of fused kernels serve every "
            "size >= 2 of the ? dims; a static kernel bound for these very shapes is preferred)")


def no_data(shape: Shape, dtype: Any) -> Any:
    """An array of `shape` and `dtype` that owns one element (every stride 0): what a probe
    trace reads (only shapes and dtypes), at no memory cost for any size."""
    import numpy as np

    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, (0,) * len(shape))


@dataclass
class PolyEntry:
    """One shape-polymorphic trace: argument dims `mask` generalized from the shapes `pattern`,
    the generalized module, its `fingerprint`, and the one executor that serves every fitting size."""

    mask: DimMask
    pattern: tuple[Shape, ...]
    text: tuple[Any, ...]
    module: Any
    executor: Any = None


def fingerprint(func: Any, mask: DimMask) -> tuple[Any, ...] | None:
    """What the generalized function's text says, without building it: per op its name,
    properties, attributes, operands (by position) and its re-inferred (shape, element) types.
    Equal for two traces iff their generalizations by `mask` print the same (for the flat
    prim-op functions traces are). None when a shape rule refuses or an op nests a region."""
    from fusebind.dialect.types import elem_of, shape_of

    block = func.body.blocks[0]
    where: dict[Any, int] = {}
    known: dict[Any, tuple[int | None, ...]] = {}
    out: list[Any] = []
    for i, arg in enumerate(block.args):
        m = mask[i] if i < len(mask) else ()
        shape = tuple(None if k < len(m) and m[k] else d for k, d in enumerate(shape_of(arg.type)))
        where[arg], known[arg] = len(where), shape
        out.append((shape, elem_of(arg.type)))
    for op in block.ops:
        if op.regions:
            return None
        ins = [known.get(v, tuple(shape_of(v.type))) for v in op.operands]
        refs = tuple(where.get(v, -1) for v in op.operands)
        if op.name == "func.return":
            out.append((op.name, refs))
            break
        try:
            shape = tuple(shape_of(op.results[0].type)) if not op.operands else _generalized_shape(op, ins)
        except GeneralizationError:
            return None
        props = tuple(sorted(op.properties.items())) + tuple(sorted(op.attributes.items()))
        for r in op.results:
            where[r], known[r] = len(where), shape
        out.append((op.name, props, refs, shape, tuple(elem_of(r.type) for r in op.results)))
    return tuple(out)


def _func(module: Any) -> Any:
    return next(iter(module.ops))


class ShapePolicy:
    """Which trace serves a call, by shapes (the rule of docs/DYNAMIC-SHAPES.md).

    `dynamic`: None (automatic: a dim seen with a second distinct size >= 2 becomes dynamic),
    True (every dim of size >= 2 is dynamic from the first call) or False (every shape its own
    trace). A dynamic trace is used for a call only when the function traced at the call's
    shapes, generalized by the same mask, prints the same text: a program whose ops or
    constants depend on a size (a reshape to a constant, a slice bound, `1 / x.shape[0]`,
    a Python branch on a size) differs there, and that call gets its own static trace."""

    #: static traces remembered per shape-erased key for the automatic rule
    KEEP = 4

    def __init__(self, dynamic: bool | None) -> None:
        self.dynamic = dynamic
        self.poly: dict[Any, list[PolyEntry]] = {}
        self.seen: dict[Any, list[tuple[tuple[Shape, ...], Any]]] = {}
        self.tried: set[Any] = set()  # keys dynamic=True has picked its dims for

    def entry(self, erased: Any, shapes: Sequence[Shape], module: Any,
              probe: Callable[[list[Shape]], Any]) -> PolyEntry | None:
        """The polymorphic trace for a call whose trace at its own `shapes` is `module` (None: the
        call runs its own static trace). `erased`: the trace key without sizes; `probe(shapes)`:
        the function traced at other shapes (dynamic=True tries them to pick its dims)."""
        if self.dynamic is False:
            return None
        shapes = tuple(tuple(int(d) for d in s) for s in shapes)
        func = _func(module)
        entries = self.poly.setdefault(erased, [])
        for p in entries:
            if mask_fits(p.mask, p.pattern, shapes):
                got = fingerprint(func, p.mask)
                if got is not None and got == p.text:
                    return p
        made = self._new_entry(erased, shapes, func, probe)
        if made is not None:
            entries.insert(0, made)
            return made
        seen = self.seen.setdefault(erased, [])
        seen.append((shapes, func))
        del seen[:-self.KEEP]
        return None

    def _new_entry(self, erased: Any, shapes: tuple[Shape, ...], func: Any,
                   probe: Callable[[list[Shape]], Any]) -> PolyEntry | None:
        if self.dynamic and erased not in self.tried:  # once per key; then as automatic
            self.tried.add(erased)
            return self._all_dims(shapes, func, probe)
        others = [(p.pattern, _func(p.module), p.mask) for p in self.poly.get(erased, ())]
        others += [(s, f, None) for s, f in reversed(self.seen.get(erased, []))]
        for pattern, other, known in others:
            mask = _varied(pattern, shapes, known)
            if mask is None:
                continue
            mine = fingerprint(func, mask)
            if mine is not None and mine == fingerprint(other, mask):
                return _entry(func, mask, shapes, mine)
        return None

    def _all_dims(self, shapes: tuple[Shape, ...], func: Any,
                  probe: Callable[[list[Shape]], Any]) -> PolyEntry | None:
        """dynamic=True: every dim of size >= 2, checked against a probe trace where each is one
        larger; a dim whose probe differs (or fails) stays static."""
        full = dynamic_dims(shapes)

        def agrees(mask: DimMask) -> bool:
            mine = fingerprint(func, mask)
            if mine is None:
                return False
            try:
                other = probe([tuple(d + 1 if m else d for d, m in zip(s, ms)) for s, ms in zip(shapes, mask)])
            except Exception:  # the function refuses those sizes (its own checks): not polymorphic there
                return False
            return fingerprint(_func(other), mask) == mine

        if not any(any(m) for m in full):
            return None
        mask = full
        if not agrees(full):
            single = [(i, k) for i, m in enumerate(full) for k, d in enumerate(m) if d]
            ok = {ik for ik in single if agrees(_only(full, {ik}))}
            mask = _only(full, ok)
            if not ok or not agrees(mask):
                return None
        return _entry(func, mask, shapes, fingerprint(func, mask))


def _entry(func: Any, mask: DimMask, shapes: tuple[Shape, ...], text: Any) -> PolyEntry | None:
    from xdsl.dialects.builtin import ModuleOp

    try:
        module = ModuleOp([generalize_function(func, mask)])
    except GeneralizationError:
        return None
    return None if text is None else PolyEntry(mask, shapes, text, module)


def _only(full: DimMask, dims: set[tuple[int, int]]) -> DimMask:
    return tuple(tuple((i, k) in dims for k in range(len(m))) for i, m in enumerate(full))


def _varied(pattern: Sequence[Shape], shapes: Sequence[Shape], known: DimMask | None) -> DimMask | None:
    """The mask of a call whose shapes differ from `pattern` (a trace's shapes; `known`: its dims
    already dynamic): the dims that differ, plus `known`. None when the ranks differ, nothing new
    varies, or a varying dim is 0 or 1 (those sizes stay specialized)."""
    if len(pattern) != len(shapes) or any(len(p) != len(s) for p, s in zip(pattern, shapes)):
        return None
    mask, new = [], False
    for i, (p, s) in enumerate(zip(pattern, shapes)):
        row = []
        for k, (a, b) in enumerate(zip(p, s)):
            was = bool(known is not None and known[i][k])
            if was and b < 2:
                return None
            if a != b and not was:
                if a < 2 or b < 2:
                    return None
                new = True
            row.append(was or a != b)
        mask.append(tuple(row))
    return tuple(mask) if new else None


__all__ = ["describe_dynamic", "DimMask", "GeneralizationError", "SpecializationError", "dynamic_dims", "generalize_function",
           "mask_fits", "no_data", "PolyEntry", "ShapePolicy", "specialize_function"]
