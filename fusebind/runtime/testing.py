"""Test helpers: reset or isolate the global state, make throwaway kernels.

This module owns the only sanctioned ways to wipe a session's binding table
and recipe registry (the default session's: the global table and recipes). Order matters: rows go first, recipes
second, both inside the table writer lock, so an id the registry hands out
again can never reach a kernel bound for the recipe that had it before.
Restoring goes the other way: recipes first, then rows.

Not for production code paths.
"""

from __future__ import annotations

import ctypes
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from fusebind.runtime.dtypes import DType, KernelSignature
from fusebind.runtime.kernel import Kernel
from fusebind.runtime.session import Session, default_session


def reset_global_state(session: Session | None = None) -> None:
    """Empty the (default) session's table (a swap: the generation rises), then its recipes."""
    session = session or default_session()
    registry = session.recipes
    with session.writer_lock:
        session.extend_locked(lambda b: b.clear())
        registry.reset()


@contextmanager
def isolated_global_state(session: Session | None = None) -> Iterator[None]:
    """Run the body against an empty table and registry of the (default)
    session, then put the previous rows and recipes back (recipes first, then rows)."""
    session = session or default_session()
    registry = session.recipes
    with session.writer_lock:
        saved_table = session.table
        saved_recipes = registry.snapshot()
        session.extend_locked(lambda b: b.clear())
        registry.reset()
    try:
        yield
    finally:
        with session.writer_lock:
            session.extend_locked(lambda b: b.clear())
            registry.restore(saved_recipes)
            session.extend_locked(lambda b: b.replace_all(saved_table))


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
