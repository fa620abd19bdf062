"""Test helpers: reset or isolate the global state, make throwaway kernels.

This module owns the only sanctioned ways to wipe the global binding table
and the global recipe registry. Order matters: rows go first, recipes
second, both inside the table writer lock, so an id the registry hands out
again can never reach a kernel bound for the recipe that had it before.
Restoring goes the other way: recipes first, then rows.

Not for production code paths.
"""

from __future__ import annotations

import ctypes
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from fusebind.runtime import bindings
from fusebind.runtime.dtypes import DType, KernelSignature
from fusebind.runtime.kernel import Kernel


def _global_recipes() -> Any:
    from fusebind.compiler.recipes import global_recipes

    return global_recipes()


def reset_global_state() -> None:
    """Empty the global table (a swap: the generation rises), then the recipes."""
    registry = _global_recipes()
    with bindings._WRITER_LOCK:
        bindings._extend_locked(lambda b: b.clear())
        registry.reset()


@contextmanager
def isolated_global_state() -> Iterator[None]:
    """Run the body against an empty global table and registry, then put the
    previous rows and recipes back (recipes first, then rows)."""
    registry = _global_recipes()
    with bindings._WRITER_LOCK:
        saved_table = bindings.global_bindings()
        saved_recipes = registry.snapshot()
        bindings._extend_locked(lambda b: b.clear())
        registry.reset()
    try:
        yield
    finally:
        with bindings._WRITER_LOCK:
            bindings._extend_locked(lambda b: b.clear())
            registry.restore(saved_recipes)
            bindings._extend_locked(lambda b: b.replace_all(saved_table))


def simple_signature(dtypes: tuple[DType | str, ...] = ("f32", "f32"), rank: int = 1) -> KernelSignature:
    """All operands of one rank; the last dtype is the output."""
    parsed = [DType.parse(d) for d in dtypes]
    return KernelSignature(tuple((d, rank) for d in parsed[:-1]), ((parsed[-1], rank),))


def noop_kernel(
    signature: KernelSignature | None = None,
    *,
    source: str | None = None,
    body: Callable[..., None] | None = None,
) -> Kernel:
    """A fresh ctypes callback (a distinct function pointer each call) for
    table-semantics tests; it does nothing unless `body` is given."""
    signature = signature or simple_signature()

    def run(*args: Any) -> None:
        if body is not None:
            body(*args)

    cfunc = signature.cfunctype()(run)
    return Kernel.from_ctypes(cfunc, signature=signature, source=source or "test:noop_kernel")
