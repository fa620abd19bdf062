"""The JIT loop: compile the optimizer's work order, adopt the kernels, re-optimize.

This module owns:
- `table_context(backend, **options)`: an `OptimizationContext` over the
  current global snapshot, gated by `fused_kernel_available_in` (the
  table-passing variant: the gate reads the snapshot it was given, never a
  newer one). `fuse{gate=table}` reaches it by name.
- `compile_work_order(work_order, ...) -> JitReport`: for each gated region,
  `decompose_region` then `adopt_runtime_fused(..., cost=decomp.cost)`. A
  failing compile is a `JitDiagnostic` in the report, never an exception:
  the region stays unfused and arm 0 runs.
- `optimize_with_jit(module, ...)`: optimize, compile the work order, and
  optimize again against the new snapshot (sync mode).
- `JitWorker`: the same on a background thread fed by a queue, so the
  caller continues on arm 0 while kernels are adopted.
- the `fuse-jit` pass of `fusebind-opt`.
"""

from __future__ import annotations

import queue
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from fusebind.compiler.context import DEFAULT_MAX_REGION_OPS, OptimizationContext
from fusebind.compiler.fusion_passes import machine_with, print_remarks, replace_module_body
from fusebind.compiler.optimize import OptimizeResult, WorkItem, optimize_graph
from fusebind.compiler.passes import register_pass
from fusebind.runtime.bindings import global_bindings
from fusebind.runtime.fused_kernels import adopt_runtime_fused, fused_kernel_available_in

Decompose = Callable[..., Any]


def table_context(backend: str = "cpu", **options: Any) -> OptimizationContext:
    """A context over the current global snapshot, gated by `fused_kernel_available_in`."""
    return OptimizationContext(bindings=global_bindings(), kernel_query=fused_kernel_available_in,
                               backend=backend, **options)


@dataclass(frozen=True)
class JitDiagnostic:
    """A work item that did not become a kernel: its id, name, and why."""

    fused_id: int
    name: str
    message: str

    def remark(self) -> str:
        return f"remark: jit failed id {self.fused_id} @{self.name}: {self.message}"


@dataclass
class JitReport:
    """What one pass over a work order did: ids adopted, diagnostics."""

    adopted: list[int] = field(default_factory=list)
    diagnostics: list[JitDiagnostic] = field(default_factory=list)

    def remarks(self) -> list[str]:
        return [f"remark: adopted id {i}" for i in self.adopted] + [d.remark() for d in self.diagnostics]


def _default_decompose(region: Any, dtypes: Any, **kwargs: Any) -> Any:
    from fusebind.lowering import decompose_region

    return decompose_region(region, dtypes, **kwargs)


def compile_one(item: WorkItem, backend: str = "cpu", *, recipes: Any = None,
                decompose: Decompose | None = None, cache: Any = None) -> int:
    """Decompose, load and adopt one work item; returns the adopted id. Raises on failure."""
    run = decompose or _default_decompose
    kwargs = {"cache": cache} if cache is not None else {}
    decomp = run(item.region, list(item.dtypes), **kwargs)
    kernel = decomp.load()
    return int(adopt_runtime_fused(item.name, item.region, kernel, item.dtypes, backend,
                                   cost=decomp.cost, recipes=recipes))


def compile_work_order(work_order: Iterable[WorkItem], backend: str = "cpu", *, recipes: Any = None,
                       decompose: Decompose | None = None, cache: Any = None) -> JitReport:
    """Compile and adopt every item; failures become diagnostics (arm 0 stays)."""
    report = JitReport()
    for item in work_order:
        try:
            report.adopted.append(compile_one(item, backend, recipes=recipes, decompose=decompose, cache=cache))
        except Exception as err:  # a failing compile must not take the caller down
            report.diagnostics.append(JitDiagnostic(item.fused_id, item.name, f"{type(err).__name__}: {err}"))
    return report


def optimize_with_jit(module: ModuleOp, backend: str = "cpu", *, recipes: Any = None,
                      decompose: Decompose | None = None, cache: Any = None,
                      **options: Any) -> tuple[OptimizeResult, JitReport]:
    """Sync mode: optimize, compile and adopt the work order, optimize again
    against the new snapshot. Returns the final result and the JIT report."""
    first = optimize_graph(module, table_context(backend, recipes=recipes, **options))
    report = compile_work_order(first.work_order, backend, recipes=recipes, decompose=decompose, cache=cache)
    if not report.adopted:
        return first, report
    return optimize_graph(module, table_context(backend, recipes=recipes, **options)), report


class JitWorker:
    """A background thread that compiles and adopts submitted work items.

    `submit` returns at once; each id is compiled at most once per worker
    (failed ids are not retried). `wait()` blocks until the queue is empty;
    `close()` stops the thread. Callers keep running arm 0 meanwhile; the
    table's generation bump tells planners to re-optimize.
    """

    def __init__(self, backend: str = "cpu", *, recipes: Any = None, decompose: Decompose | None = None,
                 cache: Any = None) -> None:
        self.backend = backend
        self._recipes = recipes
        self._decompose = decompose
        self._cache = cache
        self._queue: queue.Queue[WorkItem | None] = queue.Queue()
        self._lock = threading.Lock()
        self._seen: set[int] = set()
        self.report = JitReport()
        self._thread = threading.Thread(target=self._run, name="fusebind-jit", daemon=True)
        self._thread.start()

    def submit(self, work_order: Iterable[WorkItem]) -> int:
        """Queue the items not seen before; returns how many were queued."""
        queued = 0
        with self._lock:
            if not self._thread.is_alive():
                raise RuntimeError("JitWorker is closed; create a new one to compile more regions")
            for item in work_order:
                if item.fused_id in self._seen:
                    continue
                self._seen.add(item.fused_id)
                self._queue.put(item)
                queued += 1
        return queued

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                try:
                    adopted = compile_one(item, self.backend, recipes=self._recipes, decompose=self._decompose,
                                          cache=self._cache)
                    with self._lock:
                        self.report.adopted.append(adopted)
                except Exception as err:  # recorded, never raised into the caller
                    with self._lock:
                        self.report.diagnostics.append(
                            JitDiagnostic(item.fused_id, item.name, f"{type(err).__name__}: {err}"))
            finally:
                self._queue.task_done()

    def wait(self) -> JitReport:
        """Block until every submitted item is done; returns the report so far."""
        self._queue.join()
        with self._lock:
            return JitReport(list(self.report.adopted), list(self.report.diagnostics))

    def close(self) -> None:
        """Finish the queued items and stop the thread."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def __enter__(self) -> "JitWorker":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@register_pass
@dataclass(frozen=True)
class FuseJitPass(ModulePass):
    """`fuse` against the global table, after compiling and adopting its work order."""

    name = "fuse-jit"

    max_ops: int = DEFAULT_MAX_REGION_OPS
    remarks: bool = False
    backend: str = "cpu"
    launch_ns: float = -1.0
    gflops: float = -1.0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        result, report = optimize_with_jit(op, self.backend, max_region_ops=self.max_ops,
                                           machine=machine_with(self.launch_ns, self.gflops))
        if self.remarks:
            for line in report.remarks():
                sys.stderr.write(line + "\n")
            print_remarks(result, sys.stderr)
        replace_module_body(op, result.module)
