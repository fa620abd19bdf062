"""Backends, as lowering sees them: what it needs to know to make code for one.

A `Backend` names a code-generation target and says what lowering needs of
it: its `name` (the label binding-table rows carry), `target_key_parts()`
(the facts every object-cache key includes: LLVM version, triple, CPU and
features, the pass pipeline), `pipeline_text()` (the upstream MLIR pass
pipeline), `codegen_opt_level` (llvmlite's -O level) and `fastmath()` (the
fast-math function tables to emit with, or None). The runtime extends a
backend with what running code needs (loading, static and BLAS kernels, the
thread pool: `fusebind.runtime.backend`), so lowering never imports the
runtime.

The registry is per process and append-only: `register_backend(b)` adds one
(a name clash with a different object is an error), `extend_backend(b)`
replaces a registered backend by its extension (an instance of a subclass of
its class with the same lowering facts: this is how the runtime makes `cpu`
one object that also loads and runs code), `backend_named(name)`
finds one (an unknown name raises `UnknownBackendError` listing the known
ones), `backend_names()` lists them in registration order. `cpu` (native
code for the host CPU, through llvmlite) is registered first; its name is
the compiler's `DEFAULT_BACKEND`, which every default in fusebind uses.
Code that needs a backend looks it up by name when it needs it (never keeps
`CPU`), so it gets the extension once the runtime is loaded.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, fields
from typing import Any, Callable, Iterable

from fusebind.compiler.context import DEFAULT_BACKEND
from fusebind.dialect.errors import FusebindValueError

__all__ = ["Backend", "CPU", "DEFAULT_BACKEND", "UnknownBackendError", "backend_named", "backend_names",
           "extend_backend", "host_fastmath", "register_backend"]


class UnknownBackendError(FusebindValueError):
    """A backend name no registered backend has."""


FastMath = tuple[Callable[[str, str], "str | None"], Callable[[Iterable[tuple[str, str]]], str]]


@dataclass(frozen=True)
class Backend:
    """A code-generation target (see the module doc). Subclass it and
    override the methods for a new target; `CPU` is the host's."""

    name: str
    codegen_opt_level: int = 3

    def target_key_parts(self) -> dict[str, Any]:
        """What every object-cache key of this backend includes."""
        from fusebind import __version__
        from fusebind.lowering.codegen import host_target

        host = host_target()
        return {"backend": self.name, "llvm": host.llvm_version, "triple": host.triple, "cpu": host.cpu,
                "features": host.features, "fusebind": __version__, "pipeline": self.pipeline_text()}

    def pipeline_text(self) -> str:
        """The upstream MLIR pass pipeline kernels of this backend go through."""
        from fusebind.lowering.pipeline import pipeline_text

        return pipeline_text()

    def fastmath(self, ldexp: bool | None = None) -> FastMath | None:
        """(name-of, definitions) of the fast-math functions to emit with, or None."""
        return host_fastmath(ldexp)


def host_fastmath(ldexp: bool | None = None) -> FastMath | None:
    """(name-of, definitions) from `fastmath.py`, or None if it is not importable.

    `ldexp`: scale exp by `llvm.intr.ldexp` (`fastmath.definitions`); None = on AVX-512
    hosts (asks llvmlite for the host once). False for text xDSL must parse back (it
    does not know `llvm.intr.ldexp`).
    """
    try:
        from fusebind.lowering import fastmath
    except ImportError:
        return None

    def name_of(fn: str, elem: str) -> str | None:
        if fastmath.has_function(fn, elem):
            return fastmath.function_name(fn, elem)
        return None

    if ldexp is None:
        from fusebind.lowering.codegen import host_target

        ldexp = host_target().has_avx512  # one vscalefps per exp (fastmath.definitions)
    use_ldexp = ldexp

    def definitions(needed: Iterable[tuple[str, str]]) -> str:
        return fastmath.definitions(needed, ldexp=use_ldexp)

    return name_of, definitions


_LOCK = threading.Lock()
_BACKENDS: dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    """Add `backend` to the registry (again: a no-op); a different backend
    under a taken name is refused. Returns `backend`."""
    if not isinstance(backend, Backend) or not isinstance(backend.name, str) or not backend.name:
        raise FusebindValueError(f"register_backend needs a fusebind Backend with a non-empty name, got {backend!r}")
    with _LOCK:
        known = _BACKENDS.get(backend.name)
        if known is not None and known is not backend:
            raise FusebindValueError(f"a backend named {backend.name!r} is registered already ({known!r}); "
                                     "choose another name")
        _BACKENDS[backend.name] = backend
    return backend


def extend_backend(backend: Backend) -> Backend:
    """Replace the backend registered under `backend.name` by `backend`, which extends it:
    an instance of (a subclass of) its class with equal fields (the lowering facts).
    Extending by the registered object again is a no-op. Returns `backend`."""
    with _LOCK:
        known = _BACKENDS.get(backend.name) if isinstance(backend, Backend) else None
        if known is None:
            raise UnknownBackendError(f"extend_backend: no backend named {getattr(backend, 'name', backend)!r} is "
                                      f"registered to extend: expected one of {', '.join(sorted(_BACKENDS))}")
        if known is not backend:
            facts = [f.name for f in fields(known)]
            if not isinstance(backend, type(known)) or any(getattr(known, f) != getattr(backend, f) for f in facts):
                raise FusebindValueError(f"extend_backend: {backend!r} does not extend the registered {known!r} (it "
                                         f"must be an instance of {type(known).__name__} with the same {', '.join(facts)})")
            _BACKENDS[backend.name] = backend
    return backend


def backend_names() -> tuple[str, ...]:
    """The registered backend names, `cpu` first."""
    return tuple(_BACKENDS)


def backend_named(name: Any) -> Backend:
    """The backend registered as `name`; `UnknownBackendError` otherwise."""
    backend = _BACKENDS.get(name) if isinstance(name, str) else None
    if backend is None:
        raise UnknownBackendError(f"unknown backend {name!r}: expected one of {', '.join(sorted(_BACKENDS))}")
    return backend


#: native code for the host CPU (the first backend, and the default one); the runtime
#: extends it (`fusebind.runtime.backend.CPU`), so look it up by name rather than keep this
CPU = register_backend(Backend(DEFAULT_BACKEND))
