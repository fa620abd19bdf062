"""Emitted MLIR text -> object code, through the cache, with stage timings.

Owns: `build_object` (cache lookup, then pipeline -> translate -> llvmlite),
`default_fastmath` (which math functions call `fastmath.py` definitions), and
`target_key_parts` (what about the host goes into a cache key).
Must not: import `mlir` before a cache miss.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from fusebind.lowering.cache import CachedObject, ObjectCache, cache_key, default_cache
from fusebind.lowering.linalg_types import EmittedKernel

from fusebind.lowering.backend import DEFAULT_BACKEND, Backend, backend_named, host_fastmath

#: the backend `build_object` makes code for by default (the registry's first, `cpu`)
BACKEND = DEFAULT_BACKEND


@dataclass
class BuiltObject:
    """Object code for one kernel, where it came from, and what each stage cost (seconds)."""

    object_code: bytes
    symbol: str
    from_cache: bool
    timings: dict[str, float] = field(default_factory=dict)


#: (name-of, definitions) of the fast-math functions, or None: the CPU backend's choice
#: (`backend.host_fastmath`), kept under its old name for lowering's callers
default_fastmath = host_fastmath


def target_key_parts(backend: Backend | None = None) -> dict[str, Any]:
    """The target facts every cache key of `backend` (None: the default one) includes
    (llvmlite is imported; mlir is not)."""
    return (backend or backend_named(DEFAULT_BACKEND)).target_key_parts()


def interleave_of(emitted: EmittedKernel) -> int:
    """The forced loop interleave count of `emitted`'s code (codegen.interleave_count: erf/tanh
    kernels of at least INTERLEAVE_MIN_ELEMENTS elements or of dynamic shapes)."""
    from fusebind.lowering.codegen import interleave_count

    sizes = []
    for spec in (*emitted.inputs, *emitted.outputs):
        shape = tuple(spec.shape)
        sizes.append(None if any(d is None or d < 0 for d in shape) else math.prod(shape))
    return interleave_count(emitted.text, None if None in sizes else max(sizes, default=0))


def build_object(emitted: EmittedKernel, *, cache: ObjectCache | None = None,
                 key_parts: dict[str, Any] | None = None, backend: Backend | None = None) -> BuiltObject:
    """Compile `emitted` (or fetch it from `cache`) for `backend` (None: the default one).
    Raises `LoweringError` on any failure.

    The key is `key_parts` (the caller's: canonical recipe, dtypes, shapes …) plus
    the backend's target facts and a hash of the emitted text itself.
    """
    cache = cache if cache is not None else default_cache()
    interleave = interleave_of(emitted)
    timings: dict[str, float] = {}
    key = None
    if cache.enabled:
        t = time.perf_counter()
        forced = {"interleave": interleave} if interleave else {}  # such code has its own key
        key = cache_key(**(key_parts or {}), **target_key_parts(backend), **forced, text=emitted.text,
                        entry=emitted.entry)
        hit = cache.get(key)
        timings["cache-lookup"] = time.perf_counter() - t
        if hit is not None and hit.symbol == emitted.entry:
            return BuiltObject(hit.object_code, hit.symbol, True, timings)
    code = compile_text(emitted.text, emitted.entry, timings, interleave=interleave)
    if key is not None:
        cache.put(key, CachedObject(emitted.entry, code))
    return BuiltObject(code, emitted.entry, False, timings)


def compile_text(text: str, entry: str, timings: dict[str, float] | None = None, *, interleave: int = 0) -> bytes:
    """Upstream MLIR text -> object code exporting only `entry` (no cache); `interleave`: the
    forced loop interleave count (`interleave_of`; 0: the vectorizer's cost model)."""
    from fusebind.lowering.codegen import compile_llvm_ir
    from fusebind.lowering.pipeline import run_upstream_pipeline, translate_to_llvm_ir

    timings = timings if timings is not None else {}
    t0 = time.perf_counter()
    module = run_upstream_pipeline(text)
    t1 = time.perf_counter()
    llvm_ir = translate_to_llvm_ir(module)
    t2 = time.perf_counter()
    code = compile_llvm_ir(llvm_ir, entry, interleave=interleave)
    t3 = time.perf_counter()
    timings.update({"mlir-passes": t1 - t0, "translate": t2 - t1, "llvm-o3-codegen": t3 - t2})
    return code
