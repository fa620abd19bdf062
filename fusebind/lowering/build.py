"""Emitted MLIR text -> object code, through the cache, with stage timings.

Owns: `build_object` (cache lookup, then pipeline -> translate -> llvmlite),
`default_fastmath` (which math functions call `fastmath.py` definitions),
`target_key_parts` (what about the host goes into a cache key), and the
*prebuilt index* (`prebuilt_key`, `find_prebuilt`, `note_prebuilt`): a note in the
object cache from a key computed before emission (the caller's exact description of
the kernel: a region's canonical recipe, a static kernel's op text) to the emitted
kernel and its object's key, so a hit in a new process skips emission entirely. The
pre-emission key includes `code_fingerprint()` (every fusebind source file's size
and mtime, as Python's own bytecode cache checks them, and xDSL's version), so an
edited emitter gives new keys; the object's own key stays the emitted text's.
Must not: import `mlir` before a cache miss.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

from fusebind.lowering.cache import CachedObject, ObjectCache, cache_key, default_cache
from fusebind.lowering.linalg_types import EmittedKernel, TensorSpec

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
    key: str | None = None  # the object's cache key (None: the cache is off)


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
            return BuiltObject(hit.object_code, hit.symbol, True, timings, key)
    code = compile_text(emitted.text, emitted.entry, timings, interleave=interleave)
    if key is not None:
        cache.put(key, CachedObject(emitted.entry, code))
    return BuiltObject(code, emitted.entry, False, timings, key)


# ----------------------------------------------------------------- the prebuilt index

@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A digest of the code that decides what fusebind emits: each fusebind source file's path,
    size and mtime (what Python's bytecode cache trusts), and xDSL's package (its `__init__` and
    directory: a reinstall rewrites them). Once per process."""
    import xdsl

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the fusebind package
    # xDSL by its installed files (its `__version__` reads package metadata: tens of ms)
    extra = [f"{f}:{st.st_size}:{st.st_mtime_ns}" for f in (xdsl.__file__, os.path.dirname(xdsl.__file__))
             for st in (os.stat(f),)]
    return tree_fingerprint(root, extra)


def tree_fingerprint(root: str, extra: list[str] | None = None) -> str:
    """The digest of every `.py` file's relative path, size and mtime under `root` (and `extra`)."""
    rows = list(extra or [])
    for where, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                st = os.stat(os.path.join(where, name))
                rows.append(f"{os.path.relpath(os.path.join(where, name), root)}:{st.st_size}:{st.st_mtime_ns}")
    return cache_key(code="\n".join(rows))


def prebuilt_key(parts: dict[str, Any], backend: Backend | None = None) -> str | None:
    """The pre-emission key of a kernel `parts` describes exactly, or None when `backend`'s class is
    not fusebind's own (its emission choices, e.g. `fastmath()`, lie outside `code_fingerprint`)."""
    target = backend or backend_named(DEFAULT_BACKEND)
    if not type(target).__module__.startswith("fusebind."):
        return None
    return cache_key(prebuilt=parts, code=code_fingerprint(), **target_key_parts(target))


def _frozen(value: Any) -> Any:
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def _emitted_from(note: dict[str, Any], classes: dict[str, type]) -> EmittedKernel | None:
    cls = classes.get(note.get("class", ""))
    fields = note.get("fields")
    if cls is None or not isinstance(fields, dict) or set(fields) != {f.name for f in dataclasses.fields(cls)}:
        return None
    values = {k: (tuple(TensorSpec(e, _frozen(shape)) for e, shape in v) if k in ("inputs", "outputs")
                  else _frozen(v)) for k, v in fields.items()}
    return cls(**values)


def _note_of(emitted: EmittedKernel) -> dict[str, Any]:
    fields = {}
    for f in dataclasses.fields(emitted):
        v = getattr(emitted, f.name)
        fields[f.name] = [[s.elem, list(s.shape)] for s in v] if f.name in ("inputs", "outputs") else v
    return {"class": type(emitted).__name__, "fields": fields}


def find_prebuilt(cache: ObjectCache, key: str | None,
                  classes: dict[str, type]) -> tuple[EmittedKernel, BuiltObject] | None:
    """The emitted kernel and its object noted under the pre-emission `key`, or None (no note, a
    note of another shape, or its object gone: the caller emits and builds as usual)."""
    if key is None or not cache.enabled:
        return None
    t = time.perf_counter()
    data = cache.get_note(key)
    if data is None:
        return None
    try:
        note = json.loads(data)
        emitted = _emitted_from(note["emitted"], classes)
        object_key = note["key"]
    except (ValueError, KeyError, TypeError):
        return None
    if emitted is None or not isinstance(object_key, str):
        return None
    hit = cache.get(object_key)
    if hit is None or hit.symbol != emitted.entry:
        return None
    return emitted, BuiltObject(hit.object_code, hit.symbol, True, {"cache-lookup": time.perf_counter() - t},
                                object_key)


def note_prebuilt(cache: ObjectCache, key: str | None, emitted: EmittedKernel, built: BuiltObject,
                  classes: dict[str, type]) -> None:
    """Note `emitted` and its object's key under the pre-emission `key` (only if the note reads
    back as exactly `emitted`: a kernel with fields JSON cannot carry is simply not noted)."""
    if key is None or built.key is None or not cache.enabled:
        return
    note = _note_of(emitted)
    try:
        text = json.dumps({"key": built.key, "emitted": note})
    except (TypeError, ValueError):
        return
    if _emitted_from(json.loads(text)["emitted"], classes) == emitted:
        cache.put_note(key, text.encode())


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
