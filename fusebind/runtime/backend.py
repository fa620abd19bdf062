"""Backends, as the runtime sees them: lowering's `Backend` plus what running its code needs.

A `RuntimeBackend` is a `fusebind.lowering.backend.Backend` (name, cache-key
target facts, pipeline, codegen level, fast-math choice) that also
- links object code into the process (`load`, `load_decomposition`: the loader);
- builds and memoises static kernels and BLAS kernels, per session
  (`static_kernels(session)`, `blas_kernel(elem, session)`);
- gives the worker pool split calls run on (`split_pool(threads)`: the native
  pool, else Python threads).

There is one registry, lowering's: `CPU` here *extends* lowering's `cpu`
(`extend_backend`), so once the runtime is loaded `backend_named("cpu")` is
this one object for both rooms. `runtime_backend(name)` is how the executor,
the JIT, static kernels and the call steps reach a backend: by the name the
binding table's rows carry; an unknown name (or one registered for lowering
only) is an `UnknownBackendError` naming the registered ones. A new target
registers its own `RuntimeBackend` subclass with `register_runtime_backend`.

Must not: import lowering's or the runtime's heavy modules at import (the
table imports this module); each method imports what it uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fusebind.lowering.backend import (DEFAULT_BACKEND, Backend, UnknownBackendError, backend_named, backend_names,
                                       extend_backend, register_backend)

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from fusebind.runtime.dtypes import KernelSignature
    from fusebind.runtime.kernel import Kernel
    from fusebind.runtime.pool import NativePool
    from fusebind.runtime.session import Session

__all__ = ["CPU", "RuntimeBackend", "UnknownBackendError", "backend_names", "register_runtime_backend",
           "runtime_backend"]


@dataclass(frozen=True)
class RuntimeBackend(Backend):
    """A backend whose code this process can load and run (see the module doc).
    The defaults are the host's: llvmlite's ORC JIT, numpy's OpenBLAS, the native pool."""

    def load(self, code: bytes, symbol: str, *, signature: KernelSignature) -> Kernel:
        """Link `code` and return its `symbol` as a kernel of `signature`."""
        from fusebind.runtime.kernel import Kernel

        return Kernel.from_object(code, symbol, signature=signature)

    def load_decomposition(self, decomposition: Any) -> Kernel:
        """Link what lowering made of a region (`Kernel.from_decomposition`)."""
        from fusebind.runtime.kernel import Kernel

        return Kernel.from_decomposition(decomposition)

    def blas_kernel(self, elem: str, session: Session | None = None) -> Kernel:
        """The f32/f64 matmul kernel calling the host's BLAS (one per session)."""
        from fusebind.runtime.blas import blas_matmul_kernel

        return blas_matmul_kernel(elem, session, backend=self)

    def split_pool(self, threads: int) -> NativePool | ThreadPoolExecutor:
        """What a call split `threads` ways runs on: the process's native pool (pool.py),
        or, where it cannot run, a Python pool of `threads - 1` workers (call.split_pool)."""
        from fusebind.runtime.pool import pool_for

        return pool_for(threads)


def register_runtime_backend(backend: RuntimeBackend) -> RuntimeBackend:
    """Register a new runtime backend (in lowering's registry: its name is then valid in
    bindings and options). A taken name is refused, as by `register_backend`."""
    if not isinstance(backend, RuntimeBackend):
        raise TypeError(f"register_runtime_backend needs a fusebind RuntimeBackend, got {type(backend).__name__}")
    register_backend(backend)
    return backend


def runtime_backend(name: Any) -> RuntimeBackend:
    """The runtime backend registered as `name`; `UnknownBackendError` (naming the
    registered ones) for an unknown name or a backend lowering alone knows."""
    backend = backend_named(name)
    if not isinstance(backend, RuntimeBackend):
        raise UnknownBackendError(f"backend {name!r} is registered for lowering only: this process cannot load or run "
                                  f"its code; register a fusebind.runtime.backend.RuntimeBackend for it, or use one "
                                  f"of {', '.join(n for n in backend_names() if isinstance(backend_named(n), RuntimeBackend))}")
    return backend


#: the host CPU, lowering's `cpu` extended with loading and running (one object: the registry's `cpu`)
CPU = extend_backend(RuntimeBackend(DEFAULT_BACKEND))
