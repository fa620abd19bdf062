"""The attention region's kernel: what the JIT binds for a region of the attention rule.

A region the attention rule proposed (`compiler/attention_rule.py`) is not lowered to linalg (the
two matmuls belong on BLAS, and the scores must not be materialised): the JIT asks
`attention_region_kernel(item.region, backend, session)` instead, which reads the region's form
(`describe_attention`), compiles the one native piece, the row softmax of a score block (the
catalog's softmax recipe, for dynamic shapes, through lowering and the object cache), and returns
a `Kernel` of the region's signature whose code is one call of the native attention kernel
(`runtime/attention_native.py`: every batch/head and query block in one native call, on the
native pool) or, where that does not cover the call (f64, additive or per-head masks, a row
keeping nothing, a fill whose exp does not vanish), the tiled loop of `runtime/attention.py`.
It is a Python-callback kernel (`Kernel.from_python`): the plan calls it through
`Kernel.__call__`, so anything it raises reaches the caller.

Refusals are `AttentionUnavailable` (a `FusebindError`): the JIT records it and the region stays
unfused (arm 0, numpy's composition), as for any region that cannot be compiled.

Must not: decide what is fused (the compiler's rule and gate do) or bind kernels itself (the JIT
adopts the returned kernel like any compiled region's).
"""

from __future__ import annotations

import ctypes
import math
import threading
from typing import Any

import numpy as np

from fusebind.compiler.attention_rule import describe_attention, is_attention_rule
from fusebind.compiler.cost import MachineModel, compose_region_cost
from fusebind.dialect.errors import FusebindError
from fusebind.dialect.prim import ConstantOp
from fusebind.dialect.types import elem_of, numpy_dtype, shape_of
from fusebind.lowering.backend import DEFAULT_BACKEND
from fusebind.runtime.attention import AttentionArgs, MaskPlans, attention
from fusebind.runtime.attention_native import NativeAttention
from fusebind.runtime.dtypes import DType, KernelSignature
from fusebind.lowering.abi import memref_descriptor
from fusebind.runtime.kernel import Kernel
from fusebind.runtime.session import Session, current_session

__all__ = ["AttentionUnavailable", "adopt_attention", "attention_region_kernel", "is_attention_item",
           "softmax_block_kernel"]


class AttentionUnavailable(FusebindError, ValueError):
    """The tiled attention kernel cannot compute this region (the region then runs unfused)."""


def is_attention_item(item: Any) -> bool:
    """Is this work item a region of the attention rule (the JIT's question)?"""
    return is_attention_rule(getattr(item, "rule", ""))


_lock = threading.Lock()


def softmax_block_kernel(elem: str, backend: Any = None, session: Session | None = None) -> Kernel:
    """The row softmax over the last axis of a rank-3 block, for any shape (the catalog recipe,
    compiled for dynamic shapes once per session, backend and element type)."""
    from fusebind.compiler.catalog import recipe_region_text
    from fusebind.dialect import parse_module
    from fusebind.lowering.decompose import decompose_region

    name = backend.name if backend is not None else DEFAULT_BACKEND
    kernels: dict[tuple[str, str], Kernel] = (session or current_session()).slot("attention_softmax", dict)
    with _lock:
        if (name, elem) not in kernels:
            module = parse_module(recipe_region_text("softmax", elem, (None, None, None)))
            region = next(op for op in module.walk() if op.name == "fused.region")
            decomp = decompose_region(region, None, dynamic=True, backend=name)
            load = backend.load_decomposition if backend is not None else Kernel.from_decomposition
            kernels[(name, elem)] = load(decomp)
        return kernels[(name, elem)]


def _constant(op: Any) -> np.ndarray:
    return np.asarray(op.reference())


class _View:
    """An `__array_interface__` over kernel memory: numpy views it with no copy (measured ~25x
    cheaper than `np.ctypeslib.as_array` of a pointer, ~70 us per operand)."""

    __slots__ = ("__array_interface__",)

    def __init__(self, address: int, shape: tuple[int, ...], typestr: str) -> None:
        self.__array_interface__ = {"data": (address, False), "shape": shape, "typestr": typestr, "version": 3}


def _array(ptr: Any, dtype: np.dtype, rank: int) -> np.ndarray:
    """The ndarray a memref descriptor (pointer) views: the plan passes C-contiguous arrays
    (steps.GuardedStep), so sizes give the view; strides are checked, not trusted."""
    d = ptr.contents
    shape = tuple(d.sizes[:rank]) if rank else ()
    count = math.prod(shape)
    if count and rank > 1 and min(shape) > 1:
        expected = tuple(math.prod(shape[i + 1:]) for i in range(rank))
        if tuple(d.strides[:rank]) != expected:
            raise AttentionUnavailable(f"attention kernel: an operand is not C-contiguous (strides "
                                       f"{tuple(d.strides[:rank])} for shape {shape})")
    if not count:
        return np.empty(shape, dtype)
    return np.asarray(_View(_address(d, dtype), shape, dtype.str))


def _address(d: Any, dtype: np.dtype) -> int:
    """The address of a descriptor's first element (what `_array` views)."""
    return (ctypes.cast(d.aligned, ctypes.c_void_p).value or 0) + int(d.offset) * dtype.itemsize


class _BlockSoftmax:
    """`softmax(s, p)` for the tiled loop: the native row softmax of a C-contiguous rank-3 block
    into `p`, through descriptors made once per buffer and resized per block (`descriptor_for`
    per call measured ~15 us, a block's whole softmax ~100 us), called without `Kernel.__call__`'s
    checks (the kernel has no status operand and is not a Python callback: asserted here)."""

    def __init__(self, kernel: Kernel) -> None:
        if kernel.signature.status or kernel.guard is not None:
            raise AttentionUnavailable(f"the block softmax {kernel.source} needs Kernel.__call__")
        self.function = kernel.function
        self.struct = memref_descriptor(kernel.signature.inputs[0][0], 3)
        self.local = threading.local()

    def _descriptor(self, a: np.ndarray) -> Any:
        cache: dict[int, Any] = self.local.__dict__.setdefault("cache", {})
        address = a.__array_interface__["data"][0]
        d = cache.get(address)
        if d is None:
            if len(cache) > 8:
                cache.clear()
            d = cache[address] = self.struct()
            d.allocated = d.aligned = ctypes.cast(address, type(d.aligned))
            d.offset = 0
        n0, n1, n2 = a.shape
        d.sizes[0], d.sizes[1], d.sizes[2] = n0, n1, n2
        d.strides[0], d.strides[1], d.strides[2] = n1 * n2, n2, 1
        return d

    def __call__(self, s: np.ndarray, p: np.ndarray) -> None:
        ds, dp = self._descriptor(s), self._descriptor(p)
        self.function(ctypes.byref(ds), ctypes.byref(dp))


class _Scratch(threading.local):
    """One reusable score buffer per thread (a call's blocks reuse it; a new call too)."""

    buf: np.ndarray | None = None

    def __call__(self, dtype: np.dtype, n: int) -> np.ndarray:
        if self.buf is None or self.buf.dtype != dtype or self.buf.size < n:
            self.buf = np.empty(n, dtype)
        return self.buf[:n]


class _Plans(threading.local):
    """The mask-plan cache, one per thread (a kernel may run on several at once)."""

    def __init__(self) -> None:
        self.cache = MaskPlans()


def attention_region_kernel(region: Any, backend: Any = None, session: Session | None = None,
                            machine: MachineModel | None = None) -> tuple[Kernel, Any]:
    """(the kernel, its Layer-1 cost) for an attention region; `AttentionUnavailable` when the
    region is not exactly one attention form over block arguments."""
    form = describe_attention(region)
    if form is None:
        raise AttentionUnavailable("the region is not one attention form (softmax(q @ kT * scale + mask) @ v); "
                                   "it runs unfused")
    args = list(region.regions[0].blocks[0].args)
    index = {a: i for i, a in enumerate(args)}
    for what, v in (("q", form.q), ("kT", form.kt), ("v", form.v)):
        if v not in index:
            raise AttentionUnavailable(f"attention region: {what} is a constant folded into the region; "
                                       "it runs unfused")
    qi, ki, vi = index[form.q], index[form.kt], index[form.v]
    scale = None
    if form.scale is not None:
        scale = (form.scale_kind, float(_constant(form.scale.owner).reshape(())))
    fill = float(_constant(form.fill.owner).reshape(())) if form.fill is not None else None
    mask_arg = index.get(form.mask) if form.mask is not None else None
    mask_const = None
    if form.mask is not None and mask_arg is None:
        if not isinstance(form.mask.owner, ConstantOp):
            raise AttentionUnavailable("attention region: its mask is computed inside the region; it runs unfused")
        mask_const = _constant(form.mask.owner)
    types = [(numpy_dtype(elem_of(a.type)), len(shape_of(a.type))) for a in args]
    out_t = region.results[0].type
    out_dtype, out_rank = numpy_dtype(elem_of(out_t)), len(shape_of(out_t))
    signature = KernelSignature(tuple((DType.from_numpy(dt), r) for dt, r in types),
                                ((DType.from_numpy(out_dtype), out_rank),))
    # the tiled loop's block softmax (its compile is most of a region's bind time): made now
    # when the tiled loop may be needed, else on the first call that needs it
    box: list[_BlockSoftmax] = []

    def softmax(s: np.ndarray, p: np.ndarray) -> None:
        if not box:
            box.append(_BlockSoftmax(softmax_block_kernel(form.elem, backend, session)))
        box[0](s, p)

    native_only = (form.elem == "f32" and form.mask_kind != "add" and (form.mask is None or mask_const is not None)
                   and (fill is None or fill == -math.inf))
    if not native_only:
        box.append(_BlockSoftmax(softmax_block_kernel(form.elem, backend, session)))

    scratch = _Scratch()
    plans = _Plans()
    native = NativeAttention()

    perms = form.perms
    out_view = None if form.out_perm is None else tuple(sorted(range(out_rank), key=form.out_perm.__getitem__))

    replay = threading.local()  # per thread: (the layout, the native plan made for it)
    operands = ((qi, types[qi][0]), (ki, types[ki][0]), (vi, types[vi][0]), (-1, out_dtype))

    def run(*ptrs: Any) -> None:
        # the same sizes and strides as the call the native plan was made for: only the four
        # addresses change (the views and the plan lookup measured ~0.1 ms of a T=256 call)
        last = getattr(replay, "last", None)
        if last is not None:
            descs = [p.contents for p in ptrs]
            layout = tuple((tuple(d.sizes), tuple(d.strides)) for d in descs)
            if layout == last[0]:
                native.run_plan(last[1], tuple(_address(descs[i], dt) for i, dt in operands))  # type: ignore[arg-type]
                return
        arrays = [_array(p, dt, r) for p, (dt, r) in zip(ptrs, types)]
        q, kt, v = (a if perm is None else a.transpose(perm)
                    for a, perm in zip((arrays[qi], arrays[ki], arrays[vi]), perms))
        out = _array(ptrs[-1], out_dtype, out_rank)
        if out_view is not None:  # the absorbed transpose of the result: write through its inverse
            out = out.transpose(out_view)
        mask = arrays[mask_arg] if mask_arg is not None else mask_const
        call = AttentionArgs(scale, form.mask_kind, mask, fill)
        # a transpose keeps the first element: q, kT, v and out start where their descriptors do
        addresses = tuple(_address(ptrs[i].contents, dt) for i, dt in operands)
        replay.last = None
        if not native.run(q, kt, v, out, call, plans.cache, constant_mask=mask_const is not None,
                          addresses=addresses):  # f64, additive or per-head masks, ...
            attention(q, kt, v, out, call, softmax, scratch, plans.cache)
        elif mask_arg is None and native.last_plan() is not None and all(a.size for a in arrays):
            replay.last = (tuple((tuple(p.contents.sizes), tuple(p.contents.strides)) for p in ptrs),
                           native.last_plan())

    kernel = Kernel.from_python(run, signature=signature, source="attention:native")
    return kernel, compose_region_cost(region, machine or MachineModel.default())


def adopt_attention(item: Any, backend: Any, session: Session, machine: MachineModel, recipes: Any = None) -> int:
    """Bind the tiled kernel for the attention work item `item` (the JIT's step for it), capped to
    the region's shapes (its mask plan and constants are this region's); its FusedOpId. A refusal
    raises AttentionUnavailable (an fb error: the JIT records it and the region runs unfused)."""
    from fusebind.runtime.fused_kernels import adopt_runtime_fused, shape_cap

    kernel, cost = attention_region_kernel(item.region, backend, session, machine)
    body = item.region.regions[0].blocks[0]
    shapes = [shape_of(v.type) for v in (*body.args, *body.last_op.operands)]
    return int(adopt_runtime_fused(item.name or "attention", item.region, kernel, item.dtypes, backend.name,
                                   cost=cost, recipes=recipes, caps={shape_cap(shapes)}, session=session))
