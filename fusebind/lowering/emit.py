"""prim ops -> upstream MLIR text: `linalg` on tensors, destination-passing (the driver).

Owns: `emit_linalg`, which turns the block of a `fused.region` (or a
`func.func` of prim ops) into one `func.func` whose arguments are memrefs,
inputs then outputs, with `llvm.emit_c_interface`. Inputs enter as
`bufferization.to_tensor ... restrict`; every result is written in place with
`bufferization.materialize_in_destination`, so with `eliminate-empty-tensors`
an elementwise chain needs no heap temporaries. It re-exports `TensorSpec`,
`EmittedKernel` and `element_name` (defined in `linalg_types.py`).
With `inplace=(k, r)` it emits the in-place variant instead: input k is read from
output r's memref (one buffer read and written at one index, so LLVM's vectorizer needs
no overlap check; runtime/builder_inplace.py, docs/EPILOGUES.md), and a static block of
float elementwise ops becomes one `linalg.generic` (`_emit_one_loop`: no temporaries).
A kernel whose ops checked an index (`Emitter.checked_index`) takes one more
argument after its outputs, `%status: memref<4xi64>` (kernel ABI v2,
docs/KERNEL-ABI.md), and is returned as a `CheckedKernel` carrying its checks.

The ops themselves are emitted by `emitter.py` (elementwise ops as `linalg.generic`
with broadcasting maps; reductions a fill + reduction `linalg.generic`, except float
sums and means, which are blocked accumulations: `accumulate.py`, with their
single-use elementwise producers inlined: `exprs.py`; transpose, reshape,
broadcast_to, constants, matmul). Row-wise regions (a reduction over trailing axes
and its uses) are emitted as one loop over rows by `rowwise.py` (`emit_rows`).

Size cap: every static tensor type in the kernel (arguments, results,
intermediates) must hold at most `MAX_TENSOR_BYTES` = 2^62 bytes, counting
its strides too (a zero dim does not excuse the product of the others);
MLIR's index arithmetic is int64 and asserts (aborting the process) on an
overflowing layout, so such a shape is refused here with `LoweringError("emit")`.

Must not: emit an op itself (that is `emitter.py`); run MLIR (`pipeline.py`); import `mlir`.
Nothing that emits (linalg_types, exprs, accumulate, emitter, rowwise) imports this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np

from fusebind.lowering import accumulate, exprs, rowwise as rw
from fusebind.lowering.emit_dispatch import emit_op
from fusebind.lowering.emitter import Emitter, compute_elem
from fusebind.lowering.index_checks import STATUS, STATUS_TYPE
from fusebind.lowering.errors import LoweringError
from fusebind.lowering.linalg_types import (ELEMENT_BYTES, MAX_TENSOR_BYTES, Dim, EmittedKernel, TensorSpec, Value,
                                            element_name, mtype, op_kind, out_spec, shape_of, ttype)
from fusebind.lowering.scalar_text import ScalarEmitError, TextScalarBuilder

__all__ = ["MAX_TENSOR_BYTES", "CheckedKernel", "EmittedKernel", "TensorSpec", "element_name", "emit_linalg"]


@dataclass(frozen=True)
class CheckedKernel(EmittedKernel):
    """An emitted kernel whose body checks indices (`Emitter.checked_index`): kernel ABI v2, its
    C function takes the status operand (`memref<4xi64>`) after the outputs. `checks` are the
    checks' `what`s (status code k names `checks[k - 1]`); `check_sources[k - 1]` the kernel
    inputs (positions) the checked op's indices are computed from, so the runtime can name the
    argument. Both travel with the compiled kernel (`Kernel.checks`)."""

    checks: tuple[str, ...] = ()
    check_sources: tuple[tuple[int, ...], ...] = ()


def _block_of(region_or_func: Any) -> Any:
    if hasattr(region_or_func, "args") and hasattr(region_or_func, "ops"):
        return region_or_func
    return region_or_func.regions[0].blocks[0]


def _check_kernel_ir(block: Any) -> None:
    """Refuse, as `ScalarEmitError`, the IR shapes a user can write that the emitters do not take:
    a scalar argument or result, an op with no or several results, an operand from outside the block,
    a block with no terminator. (Anything else the emitters trip on is a bug and raises as itself.)"""
    known = set(block.args)
    for i, arg in enumerate(block.args):
        if not hasattr(arg.type, "get_shape"):
            raise ScalarEmitError(f"argument {i} has type {arg.type}; a kernel takes tensors only "
                                  "(make a scalar a 0-d tensor)")
    terminator = block.last_op
    if terminator is None:
        raise ScalarEmitError("the block is empty: it has no terminator yielding the results")
    for op in block.ops:
        outside = [k for k, o in enumerate(op.operands) if o not in known]
        if outside:
            raise ScalarEmitError(f"{op.name}: operand {outside[0]} is defined outside the kernel's block; "
                                  "pass it in as an argument")
        if op is terminator:
            break
        if len(op.results) != 1:
            raise ScalarEmitError(f"{op.name}: ops with {len(op.results)} results are not lowered")
        if not hasattr(op.results[0].type, "get_shape"):
            raise ScalarEmitError(f"{op.name}: its result has type {op.results[0].type}; a kernel computes "
                                  "on tensors only (make a scalar a 0-d tensor)")
        known.add(op.results[0])


def emit_linalg(region_or_func: Any, name: str = "fb_kernel", *, dynamic: bool = False, strided_inputs: bool = False,
                fastmath: Callable[[str, str], str | None] | None = None,
                fastmath_defs: Callable[[Iterable[tuple[str, str]]], str] | None = None,
                rowwise: bool = True, inplace: tuple[int, int] | None = None) -> EmittedKernel:
    """Emit the kernel of a `fused.region` / `func.func` of prim ops as upstream MLIR text.

    dynamic: every dim of every argument is `?` (one kernel per dtypes and ranks).
    strided_inputs: inputs take any strides (e.g. numpy broadcast views, stride 0).
    fastmath(fn, elem) names a function to call instead of `math.<fn>`;
    fastmath_defs(called) returns their MLIR definitions.
    rowwise: emit a region whose reductions run over trailing axes as one loop over
    rows (`rowwise.py`); False keeps the whole-tensor form (for comparison and tests).
    inplace=(k, r): the in-place variant (`inplace_header`): input k is read from output
    r's memref, so the caller passes one buffer as both; the `%in{k}` parameter stays in the
    signature (same C ABI as the out-of-place kernel) and is never read. A static block of
    float elementwise ops is then emitted as one loop (`_emit_one_loop`).
    Raises `LoweringError(stage="emit")` for anything it cannot lower.
    """
    try:
        return _emit(region_or_func, name, dynamic, strided_inputs, fastmath, fastmath_defs, rowwise, inplace)
    except ScalarEmitError as exc:  # only what a user's IR can cause; an emitter bug raises as itself
        raise LoweringError.at("emit", f"{type(exc).__name__}: {exc}", _safe_print(region_or_func)) from None


def _safe_print(obj: Any) -> str:
    try:
        return str(obj)
    except Exception:  # printing is best effort inside an error path
        return f"<unprintable {type(obj).__name__}>"


def _emit(region_or_func: Any, name: str, dynamic: bool, strided: bool,
          fastmath: Callable[[str, str], str | None] | None,
          fastmath_defs: Callable[[Iterable[tuple[str, str]]], str] | None, rowwise: bool = True,
          inplace: tuple[int, int] | None = None) -> EmittedKernel:
    block = _block_of(region_or_func)
    _check_sizes(block)
    _check_kernel_ir(block)
    if inplace is not None:
        _check_inplace(block, inplace)
    em = Emitter(fastmath)
    values: dict[Any, Value] = {}
    inputs: list[TensorSpec] = []
    header_lines: list[str] = []
    for i, arg in enumerate(block.args):
        elem = element_name(arg.type)
        shape = tuple(None for _ in shape_of(arg.type)) if dynamic else shape_of(arg.type)
        spec = TensorSpec(elem, shape)
        inputs.append(spec)
        t = ttype([d if d is not None else "?" for d in shape], elem)
        tname = f"%t{i}"
        if inplace is not None and i == inplace[0]:
            header_lines.append(inplace_header(tname, inplace[1], spec, t))
        else:
            header_lines.append(f"{tname} = bufferization.to_tensor %in{i} restrict : {mtype(spec, strided)} to {t}")
        dims: list[Dim] = []
        for k, d in enumerate(shape):
            if d is None:
                dname = f"%in{i}_d{k}"
                header_lines.append(f"{dname} = tensor.dim {tname}, {em.index(k)} : {t}")
                dims.append(dname)
            else:
                dims.append(d)
        values[arg] = Value(tname, dims, elem)
    terminator = block.last_op
    ops = [op for op in block.ops if op is not terminator]
    reads = _input_reads(block, ops)
    plan = rw.plan_rows(block) if rowwise else "row-wise emission off"
    if isinstance(plan, rw.RowPlan):
        # ops are emitted by rowwise.py: the inputs any index map's indices come from
        em.sources = _index_sources(reads, ops)
        outputs, tail = rw.emit_rows(em, block, values, plan, dynamic, strided)
    elif inplace is not None and not dynamic and _one_loop(block, ops):
        outputs, tail = _write_outputs(em, [_emit_one_loop(em, block, values, ops)], dynamic)
    else:
        inlined = exprs.deferred_ops(block, ops, accumulate.is_blocked, set())  # built inside the sums using them
        for op in ops:
            args = [values[o] for o in op.operands]
            em.sources = _index_sources(reads, [op])  # the inputs a checked op's indices come from
            values[op.results[0]] = exprs.make_expr(op, args) if op in inlined else emit_op(em, op, args)
        outputs, tail = _write_outputs(em, [values[r] for r in terminator.operands], dynamic)
    params = [f"%in{i}: {mtype(s, strided)}" for i, s in enumerate(inputs)]
    params += [f"%out{k}: {mtype(s, False)}" for k, s in enumerate(outputs)]
    if em.checks:  # kernel ABI v2: the status operand after the outputs (docs/KERNEL-ABI.md)
        params.append(f"{STATUS}: {STATUS_TYPE}")
    consts = [f"{n} = arith.constant {k} : index" for k, n in sorted(em.index_consts.items())]
    body = consts + header_lines + em.lines + tail + ["return"]
    text = f"func.func @{name}({', '.join(params)}) attributes {{llvm.emit_c_interface}} {{\n"
    text += "".join(f"  {line}\n" for line in body) + "}\n"
    if em.called and fastmath_defs is not None:
        text = fastmath_defs(sorted(em.called)) + "\n" + text
    module = f"module {{\n{text}}}\n"
    if em.checks:
        return CheckedKernel(module, name, tuple(inputs), tuple(outputs), isinstance(plan, rw.RowPlan),
                             tuple(em.checks), tuple(em.check_sources))
    return EmittedKernel(module, name, tuple(inputs), tuple(outputs), isinstance(plan, rw.RowPlan))


_ONE_LOOP_ELEMS = frozenset(("f32", "f64"))


def _one_loop(block: Any, ops: list[Any]) -> bool:
    """Whether `_emit_one_loop` takes the block: float elementwise ops, broadcasts and 0-d
    constants only, yielding one elementwise result."""
    yielded = list(block.last_op.operands)
    if len(yielded) != 1 or yielded[0].owner not in ops or not hasattr(yielded[0].owner, "scalar_body"):
        return False
    for op in ops:
        kind = op_kind(op)
        if not (hasattr(op, "scalar_body") or kind == "broadcast_to"
                or (kind == "constant" and not shape_of(op.results[0].type))):
            return False
        if any(element_name(v.type) not in _ONE_LOOP_ELEMS for v in (*op.operands, *op.results)):
            return False
    return all(element_name(a.type) in _ONE_LOOP_ELEMS for a in block.args)


def _emit_one_loop(em: Emitter, block: Any, values: dict[Any, Value], ops: list[Any]) -> Value:
    """The whole elementwise block as ONE `linalg.generic` over the result's shape: every op's
    scalar body in order, each value computed once per element however many ops read it.

    Why: `linalg-fuse-elementwise-ops` fuses a producer only into its single user, so a value
    read by several ops (gelu's `x` is read four times) is materialized whole, a heap temporary
    and a second pass over memory (2 MiB for a 512x1024 f32 epilogue). The scalar ops are the
    same ones the per-op generics compute, on the same values, so the results are the same.
    Every input is read through numpy's broadcast to the result's shape, which composes: an
    op's (or a `broadcast_to`'s) value at a result index is its value at the broadcast index."""
    result = block.last_op.operands[0]
    shape = shape_of(result.type)
    rank = len(shape)
    dims = ", ".join(f"d{j}" for j in range(rank))
    used = [a for a in block.args if a.uses]
    ins = [values[a] for a in used]
    maps = []
    for a in ins:
        off = rank - len(a.shape)
        res = [("0" if (d == 1 and shape[i + off] != 1) else f"d{i + off}") for i, d in enumerate(a.shape)]
        maps.append(f"affine_map<({dims}) -> ({', '.join(res)})>")
    maps.append(f"affine_map<({dims}) -> ({dims})>")
    b = TextScalarBuilder(em.fresh, em.fastmath)
    params, vals = em._bind_args(b, ins)
    scalar: dict[Any, str] = dict(zip(used, vals))
    for op in ops:
        out_elem = compute_elem(element_name(op.results[0].type))
        if op_kind(op) == "broadcast_to":  # every input is indexed by broadcasting to the result
            scalar[op.results[0]] = scalar[op.operands[0]]
            continue
        if not hasattr(op, "scalar_body"):  # a 0-d constant
            scalar[op.results[0]] = b.constant(np.asarray(op.reference()).item(), out_elem)
            continue
        v = op.scalar_body(b, *[scalar[o] for o in op.operands])
        scalar[op.results[0]] = v if b.elem(v) == out_elem else b.cast(v, out_elem)
    em.called |= b.called
    out_elem = compute_elem(element_name(result.type))
    return em._generic(ins, maps, ["parallel"] * rank, list(shape), out_elem, params, b, scalar[result],
                       em.empty(list(shape), out_elem))


def _check_inplace(block: Any, inplace: tuple[int, int]) -> None:
    """The in-place variant needs input k and result r of one type (one buffer holds both)."""
    k, r = inplace
    results = list(block.last_op.operands)
    if not (0 <= k < len(block.args) and 0 <= r < len(results)) or block.args[k].type != results[r].type:
        raise ScalarEmitError(f"in-place variant ({k}, {r}): input {k} and result {r} must exist and have "
                              "one type (the buffer written in place holds both)")


def inplace_header(tname: str, r: int, spec: TensorSpec, t: str) -> str:
    """Input `tname` of the in-place variant, read from output r's memref (identity layout).

    Why a variant: the out-of-place kernel called with one buffer as input and output loses
    its vectorized loop, since LLVM's runtime overlap check (store range vs load range) sends
    exactly aliased pointers to the scalar remainder loop. Reading and writing one memref
    makes the accesses the same pointer at the same index (distance 0): no check is needed.
    Sound only for same-index bodies (compiler/inplace.py's `inplace_operand`): after
    elementwise fusion the loop writing `%out{r}` reads element i of it before writing it,
    and no other loop writes `%out{r}` (only the yielded value is materialized into it)."""
    return f"{tname} = bufferization.to_tensor %out{r} restrict writable : {mtype(spec, False)} to {t}"


def _index_sources(reads: dict[Any, frozenset[int]], ops: list[Any]) -> tuple[int, ...]:
    """The block arguments the indices of `ops` (their `INDEX_OPERANDS`) are computed from."""
    return tuple(sorted(frozenset().union(*(reads.get(op.operands[k], frozenset()) for op in ops
                                            for k in getattr(type(op), "INDEX_OPERANDS", ())))))


def _input_reads(block: Any, ops: list[Any]) -> dict[Any, frozenset[int]]:
    """For each value of the block: the positions of the block arguments it is computed from."""
    reads: dict[Any, frozenset[int]] = {arg: frozenset((i,)) for i, arg in enumerate(block.args)}
    for op in ops:
        reads[op.results[0]] = frozenset().union(*(reads.get(o, frozenset()) for o in op.operands))
    return reads


def _static_size_error(t: Any) -> str | None:
    """Why the static shape of type `t` is too large for a kernel, or None if it fits."""
    if not hasattr(t, "get_shape"):
        return None
    dims = [int(d) for d in t.get_shape() if d >= 0]  # dynamic dims are checked by nothing static
    try:
        width = ELEMENT_BYTES.get(element_name(t), 8)
    except ScalarEmitError:
        width = 8
    elements = 1
    for d in dims:
        elements *= d
    if elements * width > MAX_TENSOR_BYTES:
        return (f"{t} has {elements} elements, more than the {MAX_TENSOR_BYTES // width} "
                f"({width}-byte) elements of the {MAX_TENSOR_BYTES}-byte (2^62) cap on a static tensor")
    # Strides are products of trailing dims; with a zero dim the count is 0 but they still overflow.
    stride = 1
    for d in reversed(dims):
        if stride * width > MAX_TENSOR_BYTES:
            return (f"{t} has a stride of {stride} elements, more than the {MAX_TENSOR_BYTES // width} "
                    f"({width}-byte) elements of the {MAX_TENSOR_BYTES}-byte (2^62) cap on a static tensor")
        stride *= max(d, 1)
    return None


def _check_sizes(block: Any) -> None:
    """Refuse a kernel naming a static tensor type beyond `MAX_TENSOR_BYTES` (before
    MLIR sees it: its layout arithmetic aborts the process on int64 overflow)."""
    types = [a.type for a in block.args]
    for op in block.walk():
        types.extend(r.type for r in op.results)
        types.extend(a.type for region in op.regions for b in region.blocks for a in b.args)
    seen: set[str] = set()
    for t in types:
        key = str(t)
        if key in seen:
            continue
        seen.add(key)
        problem = _static_size_error(t)
        if problem is not None:
            raise LoweringError.at("emit", f"{problem}; split the computation or use dynamic dims "
                                   "(the shape cannot be allocated anyway)", _safe_print(block.parent_op() or block))


def _write_outputs(em: Emitter, results: list[Value], dynamic: bool) -> tuple[list[TensorSpec], list[str]]:
    """Whole-tensor form: materialize every result into its `%out` memref."""
    outputs: list[TensorSpec] = []
    tail: list[str] = []
    for k, v in enumerate(results):
        spec = out_spec(v, dynamic)
        outputs.append(spec)
        src_t = ttype(v.shape, v.elem)
        want_t = ttype([d if d is not None else "?" for d in spec.shape], v.elem)
        val = v.name
        if src_t != want_t:
            val = em.fresh("cast")
            tail.append(f"{val} = tensor.cast {v.name} : {src_t} to {want_t}")
        tail.append(f"bufferization.materialize_in_destination {val} in restrict writable %out{k} : "
                    f"({want_t}, {mtype(spec, False)}) -> ()")
    return outputs, tail
