"""One fused kernel per chunk: a slice of the traced prim function, re-emitted at block shapes.

Owns `kernel_text(...)` (the ops a dask value needs since the last materialized values, cloned into
a new `func.func` whose every type is the value's block shape, as prim text), and `BlockKernel`, the
picklable callable a dask task runs: it holds one `fb.compile` function per distinct tuple of input
block shapes, all compiled on the client when the graph is built (a chunking has few distinct
block shapes: the regular chunk and the last one per axis). `process_compiles()` counts the
kernels those functions compiled (or loaded from the object cache) in this process, which is what the
tests read on workers.

A tree reduction's *partial* kernel is the slice of its operand followed by the same reduction over
every reduced axis of the block, with keepdims, and a cast of float sums to f64: each chunk's
partial has fusebind's blocked-accumulation bound for its n_c elements, and the f64 combine of the
m partials adds less than one float32 rounding, so the total stays within 2·log2(n)·eps·Σ|x|
(docs/DASK.md).

Must not: build the dask graph (fusebind.dask.graph does).
"""

from __future__ import annotations

import hashlib
import pickle
import threading
import weakref
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

#: every compiled kernel function this process made or received (for process_compiles)
_FUNCTIONS: "weakref.WeakSet[Any]" = weakref.WeakSet()
_LOCK = threading.Lock()
#: the block kernels this process unpickled, by content: every task of a graph unpickles its
#: kernel, and they all get this one object, so its functions are bound once per process
_PROCESS_KERNELS: "OrderedDict[str, BlockKernel]" = OrderedDict()
_PROCESS_KERNELS_MAX = 64  # a long-lived worker keeps the newest kernels only (each holds JIT memory)
#: what this process built itself, summed when each function was built (kept past its life)
_BUILT = {"compiles": 0, "object_cache_hits": 0}


def process_compiles() -> dict[str, int]:
    """What fusebind.dask's block kernels in this process had to build themselves: `compiles`
    (kernels really compiled) and `object_cache_hits` (kernels loaded from the on-disk object
    cache). Both are 0 on a worker that received every kernel in the pickle."""
    with _LOCK:
        functions = list(_FUNCTIONS)
        built = dict(_BUILT)
    # a received function that compiles later (it should not) counts too
    return {"compiles": built["compiles"] + sum(int(f.stats.compiles) for f in functions),
            "object_cache_hits": built["object_cache_hits"] + sum(int(f.stats.object_cache_hits) for f in functions)}


def kernel_text(analysis: Any, ops: Sequence[Any], inputs: Sequence[Any], output: Any, sizes: dict[int, int],
                partial: Any = None) -> str:
    """The prim module of `ops` (in body order) from `inputs` to `output`, every value typed at its
    block shape (`sizes`: block size per axis class). `partial`: a reduction op, appended over
    `output` with keepdims (and a cast to f64 for a float sum/mean/prod)."""
    from xdsl.dialects import func as func_d
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.ir import Block, Region
    from xdsl.rewriter import Rewriter

    from fusebind.dialect import print_module
    from fusebind.dialect.prim import CastOp, ReduceMaxOp, ReduceMeanOp, ReduceMinOp, ReduceProdOp, ReduceSumOp
    from fusebind.dialect.types import elem_of, tensor_type

    def typ(v: Any) -> Any:
        shape = [1 if c is None else sizes[c] for c in analysis.cls(v)]
        return tensor_type(shape, elem_of(v.type))

    block = Block(arg_types=[typ(v) for v in inputs])
    mapping: dict[Any, Any] = dict(zip(inputs, block.args))
    for arg, v in zip(block.args, inputs):
        arg.name_hint = "in"
    for op in ops:
        new = op.clone(value_mapper=mapping)
        block.add_op(new)
        for old_r, new_r in zip(op.results, list(new.results)):
            mapping[old_r] = Rewriter.replace_value_with_new_type(new_r, typ(old_r))
    result = mapping[output]
    results = [result]
    if partial is not None and not hasattr(partial, "KIND"):  # a moments.Variance: (mean_c, M2_c)
        from fusebind.dialect.prim import MulOp, SubOp

        axes = list(partial.axes)
        mean = ReduceMeanOp(result, axes, keepdims=True)
        d = SubOp(result, mean.results[0])
        sq = MulOp(d.results[0], d.results[0])
        m2 = ReduceSumOp(sq.results[0], axes, keepdims=True)
        results = []
        for op in (mean, d, sq, m2):
            block.add_op(op)
        for v in (mean.results[0], m2.results[0]):
            if elem_of(v.type) != "f64":
                cast = CastOp(v, "f64")
                block.add_op(cast)
                v = cast.results[0]
            results.append(v)
    elif partial is not None:
        kind = partial.KIND
        # sum and mean both partial-sum (the aggregate divides by the global count once)
        cls = {"reduce_sum": ReduceSumOp, "reduce_mean": ReduceSumOp, "reduce_max": ReduceMaxOp,
               "reduce_min": ReduceMinOp, "reduce_prod": ReduceProdOp}[kind]
        red = cls(result, partial.axes_list(), keepdims=True)
        block.add_op(red)
        result = red.results[0]
        if elem_of(result.type) in ("f16", "bf16", "f32") and kind in ("reduce_sum", "reduce_mean", "reduce_prod"):
            cast = CastOp(result, "f64")
            block.add_op(cast)
            result = cast.results[0]
        results = [result]
    block.add_op(func_d.ReturnOp(*results))
    fn = func_d.FuncOp("chunk", ([a.type for a in block.args], [r.type for r in results]), Region(block))
    return print_module(ModuleOp([fn]))


class BlockKernel:
    """What one dask task runs: the fused kernel for its blocks' shapes.

    `texts`: input block shapes -> prim text; the functions are compiled on the client
    (`precompile`) and travel in the pickle when fusebind's compiled functions pickle; otherwise a
    worker compiles a text on first use (counted by `process_compiles`)."""

    def __init__(self, name: str, texts: dict[tuple[tuple[int, ...], ...], str], out_dtype: Any,
                 functions: dict[Any, Any] | None = None, counts: dict[Any, int] | None = None) -> None:
        self.name = name
        self.texts = texts
        #: a Welford partial's element count per block shape: the result is stacked (n, mean, M2)
        self.counts = counts
        self.key = hashlib.sha256(repr((sorted(texts.items()), np.dtype(out_dtype).str,
                                        sorted((counts or {}).items()))).encode()).hexdigest()
        self.out_dtype = np.dtype(out_dtype)
        self._functions: dict[Any, Any] = dict(functions or {})
        self._payload: bytes | None = None
        self._lock = threading.Lock()
        for f in self._functions.values():
            with _LOCK:
                _FUNCTIONS.add(f)

    def _function(self, key: Any) -> Any:
        f = self._functions.get(key)
        if f is not None:
            return f
        with self._lock:
            f = self._functions.get(key)
            if f is None:
                import fusebind as fb
                from fusebind.runtime.specialize import no_data

                text = self.texts.get(key)
                if text is None:
                    from fusebind.api.errors import FusebindValueError

                    raise FusebindValueError(
                        f"fusebind.dask kernel {self.name}: no kernel for block shapes {list(key)} (built for "
                        f"{[list(k) for k in self.texts]}); the array was rechunked after fusebind.dask.jit built "
                        "its graph: call the function again on the rechunked array")
                # one thread per kernel call: dask runs the chunks in parallel already
                f = fb.compile(text, threads=1)
                probes = [no_data(s, d) for s, d in zip(key, self._in_dtypes(text))]
                if hasattr(f, "precompile"):  # compiled, bound, and recorded for the pickle
                    f.precompile(*probes)
                else:
                    f.optimized(*probes)  # planning compiles every region
                with _LOCK:
                    _BUILT["compiles"] += int(f.stats.compiles)
                    _BUILT["object_cache_hits"] += int(f.stats.object_cache_hits)
                self._functions[key] = f
        return f

    @staticmethod
    def _in_dtypes(text: str) -> list[Any]:
        from fusebind.dialect import parse_module
        from fusebind.dialect.types import elem_of, numpy_dtype

        module = parse_module(text)
        fn = next(iter(module.ops))
        return [numpy_dtype(elem_of(a.type)) for a in fn.body.blocks[0].args]

    def precompile(self) -> None:
        """Compile every block shape's kernel now (on the client)."""
        for key in self.texts:
            self._function(key)

    def __call__(self, *blocks: Any) -> np.ndarray:
        # (not np.ascontiguousarray: it makes a 0-d block 1-d)
        arrays = [np.require(b, requirements="C") for b in blocks]
        key = tuple(a.shape for a in arrays)
        out = self._function(key)(*arrays)
        if self.counts is None:
            return out
        mean, m2 = out
        return np.stack([np.full(mean.shape, float(self.counts[key])), mean, m2])

    def __reduce__(self) -> Any:
        # the functions travel as bytes, unpickled only by the first task of a process to arrive
        # (binding kernels is not free: the later tasks get the process's one BlockKernel)
        if self._payload is None:
            functions = _portable(self._functions)
            self._payload = b"" if functions is None else pickle.dumps(functions)
        return (_rebuild, (self.key, self.name, self.texts, self.out_dtype.str, self._payload, self.counts))

    def __repr__(self) -> str:
        return f"BlockKernel({self.name}, {len(self.texts)} block shape(s))"


def _portable(functions: dict[Any, Any]) -> dict[Any, Any] | None:
    """The compiled functions themselves when fusebind's compiled functions travel with their
    object code (`CompiledFunction.precompile`, docs/PORTABLE.md); else None, and a worker
    compiles from the text (counted by process_compiles)."""
    from fusebind.api.compile import CompiledFunction

    if not hasattr(CompiledFunction, "precompile"):
        return None
    return dict(functions)


def block_kernel(name: str, texts: dict[Any, str], out_dtype: Any, counts: dict[Any, int] | None = None) -> BlockKernel:
    """The process's BlockKernel of this content, compiled (every block shape) on first use: two
    functions, or two calls, that need the same kernel share it and its pickle."""
    kernel = BlockKernel(name, texts, out_dtype, counts=counts)
    with _LOCK:
        found = _PROCESS_KERNELS.get(kernel.key)
        if found is not None:
            _PROCESS_KERNELS.move_to_end(kernel.key)
            return found
    kernel.precompile()
    with _LOCK:
        found = _PROCESS_KERNELS.setdefault(kernel.key, kernel)
        while len(_PROCESS_KERNELS) > _PROCESS_KERNELS_MAX:
            _PROCESS_KERNELS.popitem(last=False)
    return found


def _rebuild(key: str, name: str, texts: dict[Any, str], out_dtype: str, payload: bytes,
             counts: dict[Any, int] | None) -> BlockKernel:
    """The process's one BlockKernel of this content (a graph's tasks each unpickle it)."""
    with _LOCK:
        found = _PROCESS_KERNELS.get(key)
        if found is not None:
            _PROCESS_KERNELS.move_to_end(key)
            return found
    functions = pickle.loads(payload) if payload else None
    kernel = BlockKernel(name, texts, np.dtype(out_dtype), functions, counts)
    with _LOCK:
        found = _PROCESS_KERNELS.setdefault(key, kernel)
        while len(_PROCESS_KERNELS) > _PROCESS_KERNELS_MAX:
            _PROCESS_KERNELS.popitem(last=False)
    return found
