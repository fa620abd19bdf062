"""Compiling the fused arms of regions and adopting them, now or on a worker.

Owns `RegionCompiler`: given the regions of a plan whose fused arm is not
bound (the work order), it lowers each (`decompose_region`), JIT-links it
and adopts it (`adopt_runtime_fused`, priced with its Layer-1 cost). The
adoption swaps the global table, whose generation bump makes executors
re-plan and pick the fused arm. With `background=True` the work runs on one
worker thread, so calls keep running arm 0 meanwhile.

A region that fails to lower stays on arm 0; its diagnostic is kept in
`failures` (shown by `explain`). Must not: run kernels, or read plans.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from fusebind.runtime.dtypes import DType


def region_is_splittable(region: Any) -> bool:
    """Elementwise-only regions whose operands and results all have one static
    shape: their kernel can be compiled for dynamic shapes and split along axis 0."""
    from fusebind.dialect.prim import ElementwiseOp
    from fusebind.dialect.types import is_static, shape_of

    body = list(region.body.blocks[0].ops)[:-1]
    if not body or not all(isinstance(op, ElementwiseOp) for op in body):
        return False
    shapes = {shape_of(v.type) for v in (*region.operands, *region.results)}
    if len(shapes) != 1:
        return False
    shape = next(iter(shapes))
    return is_static(shape) and len(shape) >= 1


@dataclass
class CompileRecord:
    """One region the compiler handled: its adopted id, or why it failed."""

    name: str
    fused_id: int = 0
    error: str | None = None
    seconds: float = 0.0
    dynamic: bool = False


@dataclass
class RegionCompiler:
    """Lowers and adopts regions of one executor (see module docstring).

    `before_compile` (tests) runs on the compiling thread before each region:
    block it on an event to hold the fused arm back deterministically.
    """

    backend: str = "cpu"
    background: bool = False
    cache: Any = None
    before_compile: Callable[[str], None] | None = None
    records: dict[str, CompileRecord] = field(default_factory=dict)
    splittable_addresses: set[int] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _pending: list[Future[Any]] = field(default_factory=list)
    _worker: ThreadPoolExecutor | None = None

    @property
    def compiles(self) -> int:
        return sum(1 for r in self.records.values() if r.error is None and r.fused_id)

    def submit(self, regions: list[tuple[str, Any]]) -> None:
        """Compile `(canonical, region)` pairs not handled yet (regions are
        detached copies the caller does not touch again)."""
        with self._lock:
            todo = [(c, r) for c, r in regions if c not in self.records]
            for canonical, region in todo:
                self.records[canonical] = CompileRecord(region.region_name)
        if not todo:
            return
        if not self.background:
            for canonical, region in todo:
                self._compile(canonical, region)
            return
        with self._lock:
            if self._worker is None:
                self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fusebind-jit")
            self._pending.append(self._worker.submit(self._compile_all, todo))

    def _compile_all(self, todo: list[tuple[str, Any]]) -> None:
        for canonical, region in todo:
            self._compile(canonical, region)

    def _compile(self, canonical: str, region: Any) -> None:
        import time

        from fusebind.lowering import decompose_region
        from fusebind.runtime.fused_kernels import adopt_runtime_fused
        from fusebind.runtime.resolve import node_dtypes

        record = self.records[canonical]
        t0 = time.perf_counter()
        try:
            if self.before_compile is not None:
                self.before_compile(record.name)
            dtypes = node_dtypes(region)
            dynamic = region_is_splittable(region)
            dec = decompose_region(region, [d.value for d in dtypes], cache=self.cache, dynamic=dynamic)
            kernel = dec.load()
            if dynamic:
                with self._lock:
                    self.splittable_addresses.add(kernel.address)
            record.dynamic = dynamic
            record.fused_id = int(adopt_runtime_fused(record.name or "region", region, kernel, dtypes,
                                                      self.backend, cost=dec.cost))
        except Exception as exc:  # a region that cannot compile stays on arm 0
            record.error = f"{type(exc).__name__}: {exc}"
        record.seconds = time.perf_counter() - t0

    def wait(self, timeout: float | None = None) -> bool:
        """Block until submitted work is done; False on timeout."""
        import concurrent.futures

        with self._lock:
            pending = list(self._pending)
        done, not_done = concurrent.futures.wait(pending, timeout=timeout)
        with self._lock:
            self._pending = [f for f in self._pending if f not in done]
        return not not_done

    def close(self) -> None:
        if self._worker is not None:
            self._worker.shutdown(wait=False)


__all__ = ["CompileRecord", "DType", "RegionCompiler", "region_is_splittable"]
