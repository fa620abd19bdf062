"""The JIT loop: compile the optimizer's work order, adopt the kernels, re-optimize.

This module owns:
- `table_context(backend, **options)`: an `OptimizationContext` over the
  current global snapshot, gated by `fused_kernel_available_in` (the
  table-passing variant: the gate reads the snapshot it was given, never a
  newer one). `fuse{gate=table}` gets it from the tools layer
  (`fusebind.tools.passes`, through `fusion_passes.FuseServices`).
- `compile_work_order(work_order, ...) -> JitReport`: for each gated region,
  `decompose_region` then `adopt_runtime_fused(..., cost=decomp.cost)`; an
  exact static catalog match (`WorkItem.static_id`, or an item whose
  `fused_id` is a catalog id) is compiled for dynamic shapes and bound under
  `BindingKey.static("fused.<name>")` instead (`bind_catalog_kernel`), so the
  region keeps its built-in id. A failing compile is a `JitDiagnostic` in the
  report, never an exception: the region stays unfused and arm 0 runs.
- kernel caps: what the JIT knows about the code it compiled goes into the
  row's `caps` (`CAP_SHAPE_DYNAMIC`, `CAP_SPLIT_AXIS0`), never into side
  state here; the plan reads them from the resolved row.
- `optimize_with_jit(module, ...)`: optimize, compile the work order, and
  optimize again against the new snapshot (sync mode).
- `JitCompiler`: the one implementation of that step (compile at most once
  per recipe, failures recorded, sync or on one background worker thread,
  the `before_compile` hook). The executor and the `fuse-jit` pass both use
  it; `JitWorker` is its background form, so the caller continues on arm 0
  while kernels are adopted.
- the `fuse-jit` pass of `fusebind-opt` is not here: it is defined in
  `fusebind.tools.passes` over `optimize_with_jit` (the runtime holds no
  xDSL passes).

Machine model: `JitCompiler(machine=...)` (a `MachineModel`, "default",
"measured", or None: `FUSEBIND_MACHINE`, else measured; see calibrate.py)
prices every compiled region's Layer-1 cost (`decompose_region(...,
machine=)`), resolved on the first compile, not before.
"""

from __future__ import annotations

import contextvars
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable


from fusebind.lowering.backend import DEFAULT_BACKEND
from fusebind.dialect.errors import FusebindError, FusebindInternalError
from fusebind.compiler.context import OptimizationContext
from fusebind.compiler.cost import MachineModel
from fusebind.compiler.optimize import OptimizeResult, WorkItem, optimize_graph
from fusebind.compiler.splitting import region_is_splittable
from fusebind.runtime.attention_bind import adopt_attention, is_attention_item
from fusebind.runtime.budget import was_evicted
from fusebind.runtime.session import Session, current_session
from fusebind.runtime.calibrate import machine_model
from fusebind.runtime.backend import runtime_backend
from fusebind.runtime.strict import InternalErrorWarning, internal_bug, strict_mode  # noqa: F401 - re-exported
from fusebind.compiler.catalog import RUNTIME_FUSED_BASE, static_kernel_op
from fusebind.runtime.fused_kernels import (
    CAP_SHAPE_DYNAMIC,
    CAP_SPLIT_AXIS0,
    adopt_runtime_fused,
    bind_catalog_kernel,
    fused_kernel_available_in,
    register_runtime_kernel,
)

Decompose = Callable[..., Any]


def table_context(backend: str = DEFAULT_BACKEND, *, session: Session | None = None, recipes: Any = None,
                  **options: Any) -> OptimizationContext:
    """A context over `session`'s current snapshot (None: the current session,
    `session.current_session()`), gated by `fused_kernel_available_in`, whose
    ids come from `recipes` (None: the session's registry)."""
    session = session or current_session()
    return OptimizationContext(bindings=session.table, kernel_query=fused_kernel_available_in, backend=backend,
                               recipes=session.recipes if recipes is None else recipes, **options)


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
        return [_adopted_remark(i) for i in self.adopted] + [d.remark() for d in self.diagnostics]


def _adopted_remark(fused_id: int) -> str:
    if 0 < fused_id < RUNTIME_FUSED_BASE:
        return f"remark: bound id {fused_id} as Static({static_kernel_op(fused_id)})"
    return f"remark: adopted id {fused_id}"


def catalog_id_of(item: WorkItem) -> int | None:
    """The static catalog id a work item stands for (an exact catalog match:
    `item.static_id`, or an item queued under a catalog id), else None."""
    for candidate in (item.static_id, item.fused_id):
        if isinstance(candidate, int) and 0 < candidate < RUNTIME_FUSED_BASE and static_kernel_op(candidate):
            return candidate
    return None


def _default_decompose(region: Any, dtypes: Any, **kwargs: Any) -> Any:
    from fusebind.lowering import decompose_region

    return decompose_region(region, dtypes, **kwargs)


def _numel(region: Any) -> int:
    from fusebind.dialect.types import num_elements, shape_of

    return max((num_elements(shape_of(v.type)) or 0 for v in (*region.operands, *region.results)), default=0)


def _splits_dynamic(region: Any) -> bool:
    """A region traced with dynamic dims (DYNAMIC-SHAPES.md) whose kernel may run in chunks along
    axis 0: the body `region_is_splittable` allows, every operand of the full rank, and every
    operand and result with a dynamic (`?`) leading dim, which the kernel reads per chunk."""
    from fusebind.dialect.prim import ConstantOp, ElementwiseOp, ReductionOp
    from fusebind.dialect.types import shape_of

    shapes = [shape_of(v.type) for v in (*region.operands, *region.results)]
    if not shapes or any(not s or s[0] is not None for s in shapes):
        return False
    rank = max(len(s) for s in shapes)
    if any(len(s) != rank for s in shapes[:len(region.operands)]):
        return False
    body = list(region.body.blocks[0].ops)[:-1]
    for op in body:  # region_is_splittable's body rule (it also asks for static shapes)
        if isinstance(op, ConstantOp):
            if shape_of(op.results[0].type):
                return False
        elif isinstance(op, ReductionOp):
            if 0 in op.axes_list():
                return False
        elif not isinstance(op, ElementwiseOp):
            return False
    return bool(body)


def _key_of(item: WorkItem) -> str:
    """Compile-at-most-once key: the canonical recipe (structural), else the id."""
    from fusebind.compiler.recipes import RecipeError, canonical_recipe

    try:
        return canonical_recipe(item.region)
    except RecipeError:  # not a valid recipe: the id (or name) keys it; compiling it will report why
        return f"id:{item.fused_id}:{item.name}"


@dataclass
class CompileRecord:
    """One work item the JIT handled: the id its kernel is bound for (a
    runtime id, or a static catalog id), or why it failed."""

    name: str
    fused_id: int = 0
    error: str | None = None
    seconds: float = 0.0
    dynamic: bool = False
    #: the object code came from the on-disk object cache (loaded, not compiled)
    from_cache: bool = False


class JitCompiler:
    """The one JIT loop step: compile work items and adopt them, now or on a worker.

    Each item is compiled at most once per compiler (keyed by its canonical
    recipe; failures are not retried). `decompose_region` -> load ->
    `adopt_runtime_fused(..., cost=decomp.cost)`; the adoption swaps the
    global table and its generation bump makes planners re-optimize. A
    failure is a `CompileRecord.error` and a `JitDiagnostic`, never raised.

    background: compile on one worker thread (`submit` returns at once).
    before_compile(name) (tests, progress): runs on the compiling thread
    before each item; block it on an event to hold a fused arm back.
    split_threshold: a splittable region (`region_is_splittable`) with at
    least this many output elements is compiled for dynamic shapes and bound
    with caps {CAP_SHAPE_DYNAMIC, CAP_SPLIT_AXIS0}, so calls can run it in
    chunks on several threads. This does not depend on the caller's thread
    count: the kernel is shared by every executor through the table.

    Static catalog items (`catalog_id_of`) are always compiled for dynamic
    shapes (one static key serves every shape) and bound with
    `bind_catalog_kernel` (caps CAP_SHAPE_DYNAMIC, plus CAP_SPLIT_AXIS0 when
    the recipe is splittable); their record holds the catalog id.

    A BaseException (KeyboardInterrupt, SystemExit) while compiling an item is
    recorded like any failure (`CompileRecord.error`, a diagnostic, `.explain()`)
    and then not swallowed: in sync mode it reaches the caller (a Ctrl-C stops
    a sync compile; items of that submit not tried yet are forgotten, so a
    later submit tries them); on the worker it ends the thread and is reported
    through `threading.excepthook` (CPython prints it; SystemExit is silent
    there by Python's rule), listed in `worker_deaths`, and queued items go
    to a fresh worker (else the next `submit` starts one), so `wait()` still
    returns and later work still compiles. Signals only ever reach the main
    thread, so a KeyboardInterrupt on the worker was raised by code, not by
    the user's Ctrl-C: it is not re-raised in the caller's thread.

    machine: the model compiled costs are priced with (`calibrate.machine_model`
    resolves it on the first compile; it is passed to `decompose` as `machine=`).
    """

    def __init__(self, backend: str = DEFAULT_BACKEND, *, background: bool = False, recipes: Any = None,
                 decompose: Decompose | None = None, cache: Any = None,
                 before_compile: Callable[[str], None] | None = None,
                 split_threshold: int | None = None, machine: MachineModel | str | None = None,
                 session: Session | None = None) -> None:
        self.backend = backend
        #: what loads the kernels compiled here (an unknown name is refused now, naming the known ones)
        self._runtime = runtime_backend(backend)
        #: where kernels are bound and recipes registered (None: the current session)
        self.session = session or current_session()
        self.machine = machine
        self.background = background
        self.before_compile = before_compile
        self.split_threshold = split_threshold
        self._recipes = recipes
        self._decompose = decompose
        self._cache = cache
        self._lock = threading.Lock()
        self.records: dict[str, CompileRecord] = {}
        self.report = JitReport()
        #: (key, item, the submitter's context: its session and stand-in object cache hold on the worker)
        self._queue: queue.Queue[tuple[str, WorkItem, contextvars.Context] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._closed = False
        #: "Type: message" of each BaseException that ended a worker thread
        self.worker_deaths: list[str] = []

    def beside_static(self, region: Any) -> int:
        """The id a region traced with dynamic dims (specialized to one call's shapes) resolves
        under: the static recipe's id when a static kernel is bound for these very shapes (after
        `bind_beside` put the dynamic rows there too), else its own id."""
        from fusebind.runtime.bindings import BindingKey
        from fusebind.runtime.resolve import node_dtypes

        if region.id < RUNTIME_FUSED_BASE:  # a catalog kernel: compiled for any shape, one key for all
            return region.id
        static_id = self.session.recipes.id_of(region)
        dtypes = node_dtypes(region)
        if static_id is None or static_id == region.id or not self.session.table.lookup(
                BindingKey.runtime_fused(static_id), dtypes, self.backend):
            return region.id
        self.bind_beside(static_id, region.id, dtypes)
        return static_id

    def bind_beside(self, static_id: int, dynamic_id: int, dtypes: Any) -> bool:
        """Bind the dynamic-dim rows of `dynamic_id` (a region traced with `?` dims) as alternative
        rows under `static_id` (the same math at one static shape, whose static kernel is bound
        there), so the table holds both and `resolve.choose_row` picks: the priced static row
        for the shape it was built for, the dynamic one for no other (it fits only under its own
        id then). True when a row was added (the generation moved)."""
        from fusebind.runtime.bindings import BindingKey
        from fusebind.runtime.resolve import row_is_dynamic

        table = self.session.table
        rows = [r for r in table.lookup(BindingKey.runtime_fused(dynamic_id), dtypes, self.backend)
                if row_is_dynamic(r)]
        there = table.lookup(BindingKey.runtime_fused(static_id), dtypes, self.backend)
        new = [r for r in rows if all(r.kernel is not t.kernel for t in there)]
        for row in new:
            register_runtime_kernel(static_id, dtypes, self.backend, row.kernel, cost=row.cost, caps=row.caps,
                                    session=self.session)
        return bool(new)

    @property
    def compiles(self) -> int:
        """Kernels really compiled and adopted (object-cache loads not counted)."""
        return sum(1 for r in self.records.values() if r.error is None and r.fused_id and not r.from_cache)

    @property
    def object_cache_hits(self) -> int:
        """Kernels adopted from object code found in the on-disk object cache."""
        return sum(1 for r in self.records.values() if r.error is None and r.fused_id and r.from_cache)

    def submit(self, work_order: Iterable[WorkItem]) -> int:
        """Compile (sync) or queue (background) the items not handled before;
        returns how many were new."""
        todo: list[tuple[str, WorkItem]] = []
        with self._lock:
            if self._closed:
                raise FusebindInternalError(f"{type(self).__name__} is closed; create a new one to compile more regions")
            for item in work_order:
                key = _key_of(item)
                if key in self.records and not was_evicted(self.session, self.records[key].fused_id):
                    continue
                self.records[key] = CompileRecord(item.name)
                todo.append((key, item))
            if todo and self.background:
                for key, item in todo:  # one context each: a Context is entered by one thread at a time
                    self._queue.put((key, item, contextvars.copy_context()))
                if self._thread is None:
                    self._start_worker()
        if not self.background:
            for i, (key, item) in enumerate(todo):
                try:
                    self._compile(key, item)
                except BaseException:
                    # Recorded by _compile and raised to the caller (a Ctrl-C interrupts a sync
                    # compile); the items not tried yet are forgotten, so a later submit tries them.
                    with self._lock:
                        for later, _ in todo[i + 1:]:
                            self.records.pop(later, None)
                    raise
        return len(todo)

    def _start_worker(self) -> None:
        """Start a worker thread (caller holds `self._lock`)."""
        self._thread = threading.Thread(target=self._run, name="fusebind-jit", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            entry = self._queue.get()
            try:
                if entry is None:
                    return
                key, item, context = entry
                context.run(self._compile, key, item)
            except BaseException as err:
                self._worker_died(err)
                raise  # reported through threading.excepthook, like any exception that ends a thread
            finally:
                self._queue.task_done()

    def _worker_died(self, err: BaseException) -> None:
        """The worker is left by a BaseException (its item is already recorded
        as failed): forget the thread, and hand queued items to a fresh worker
        (without queued items, the next `submit` starts one)."""
        with self._lock:
            self.worker_deaths.append(f"{type(err).__name__}: {err}")
            if self._thread is threading.current_thread():
                self._thread = None
            if not self._queue.empty():
                self._start_worker()

    def _compile(self, key: str, item: WorkItem) -> None:
        record = self.records[key]
        t0 = time.perf_counter()
        if self.before_compile is not None:
            try:
                self.before_compile(item.name)
            except Exception as err:  # the caller's hook refused this region: its error, not a fusebind bug
                self._fail(record, item, err)
                record.seconds = time.perf_counter() - t0
                return
            except BaseException as err:  # KeyboardInterrupt, SystemExit: recorded, then not swallowed
                self._fail(record, item, err)
                record.seconds = time.perf_counter() - t0
                raise
        try:
            static_id = catalog_id_of(item)
            splittable = region_is_splittable(item.region)
            if static_id is not None:
                dynamic = True
            else:
                dynamic = (self.split_threshold is not None and splittable
                           and _numel(item.region) >= self.split_threshold)
            caps = ({CAP_SHAPE_DYNAMIC} | ({CAP_SPLIT_AXIS0} if splittable else set())) if dynamic else set()
            if not dynamic and _splits_dynamic(item.region):  # a `?` leading dim: chunks fit its kernel
                caps = {CAP_SPLIT_AXIS0}
            if is_attention_item(item):  # a tiled loop over BLAS, not lowered code (runtime/attention_bind.py)
                fused_id = adopt_attention(item, self._runtime, self.session, machine_model(self.machine),
                                           self._recipes)
                with self._lock:
                    record.dynamic, record.fused_id = False, fused_id
                    self.report.adopted.append(fused_id)
                return
            run = self._decompose or _default_decompose
            kwargs: dict[str, Any] = {"cache": self._cache} if self._cache is not None else {}
            if self._decompose is None:  # a caller's hook keeps its own signature
                kwargs["backend"] = self.backend
            kwargs["machine"] = machine_model(self.machine)
            if dynamic:
                kwargs["dynamic"] = True
            decomp = run(item.region, list(item.dtypes), **kwargs)
            kernel = self._runtime.load_decomposition(decomp)
            if static_id is not None:
                bind_catalog_kernel(static_id, item.dtypes, self.backend, kernel, cost=decomp.cost, caps=caps,
                                    session=self.session)
                fused_id = static_id
            else:
                fused_id = int(adopt_runtime_fused(item.name or "region", item.region, kernel, item.dtypes,
                                                   self.backend, cost=decomp.cost, recipes=self._recipes,
                                                   caps=caps, session=self.session))
            with self._lock:
                record.dynamic, record.fused_id = dynamic, fused_id
                record.from_cache = bool(getattr(decomp, "from_cache", False))
                self.report.adopted.append(fused_id)
        except FusebindError as err:  # a region fusebind cannot compile (it says why): arm 0 stays
            self._fail(record, item, err)
        except Exception as err:  # a fusebind bug: arm 0 stays for users, but it must not hide as "not fused"
            self._fail(record, item, err)
            self._internal_bug(item, err)
        except BaseException as err:  # KeyboardInterrupt, SystemExit: recorded, then not swallowed
            self._fail(record, item, err)
            raise
        finally:
            record.seconds = time.perf_counter() - t0

    def _internal_bug(self, item: WorkItem, err: Exception) -> None:
        """An exception that is not an fb error came out of lowering or adoption: a bug
        (`strict.internal_bug`: raises under FUSEBIND_STRICT=1, else warns once; arm 0 runs)."""
        internal_bug(f"compiling region @{item.name or 'region'}", err, "the region runs unfused (arm 0)")

    def _fail(self, record: CompileRecord, item: WorkItem, err: BaseException) -> None:
        message = f"{type(err).__name__}: {err}"
        with self._lock:
            record.error = message
            self.report.diagnostics.append(JitDiagnostic(item.fused_id, item.name, message))

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every submitted item is done; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._queue.all_tasks_done.wait(left)
        return True

    def snapshot(self) -> JitReport:
        """The report so far (a copy)."""
        with self._lock:
            return JitReport(list(self.report.adopted), list(self.report.diagnostics))

    def close(self) -> None:
        """Finish the queued items and stop the worker; later submits raise."""
        with self._lock:
            self._closed = True
            thread = self._thread if self._thread is not None and self._thread.is_alive() else None
            if thread is not None:
                self._queue.put(None)
        while thread is not None:
            thread.join()
            with self._lock:  # a worker that died handed the queue (and the sentinel) to a fresh one
                thread = self._thread if self._thread is not thread else None

    def __enter__(self) -> "JitCompiler":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class JitWorker(JitCompiler):
    """A background `JitCompiler` whose `wait()` returns the report so far."""

    def __init__(self, backend: str = DEFAULT_BACKEND, *, recipes: Any = None, decompose: Decompose | None = None,
                 cache: Any = None, before_compile: Callable[[str], None] | None = None) -> None:
        super().__init__(backend, background=True, recipes=recipes, decompose=decompose, cache=cache,
                         before_compile=before_compile)

    def wait(self, timeout: float | None = None) -> JitReport:  # type: ignore[override]
        """Block until every submitted item is done; returns the report so far."""
        super().wait(timeout)
        return self.snapshot()


def compile_work_order(work_order: Iterable[WorkItem], backend: str = DEFAULT_BACKEND, *, recipes: Any = None,
                       decompose: Decompose | None = None, cache: Any = None,
                       machine: MachineModel | str | None = None) -> JitReport:
    """Compile and adopt every item now; failures become diagnostics (arm 0 stays)."""
    compiler = JitCompiler(backend, recipes=recipes, decompose=decompose, cache=cache, machine=machine)
    compiler.submit(work_order)
    return compiler.snapshot()


def optimize_with_jit(module: Any, backend: str = DEFAULT_BACKEND, *, recipes: Any = None,
                      decompose: Decompose | None = None, cache: Any = None,
                      **options: Any) -> tuple[OptimizeResult, JitReport]:
    """Sync mode: optimize, compile and adopt the work order, optimize again
    against the new snapshot. Returns the final result and the JIT report.
    `options["machine"]` (a MachineModel; default: the documented default,
    as OptimizationContext has it) prices both the fusion and the kernels."""
    options.setdefault("machine", MachineModel.default())
    first = optimize_graph(module, table_context(backend, recipes=recipes, **options))
    report = compile_work_order(first.work_order, backend, recipes=recipes, decompose=decompose, cache=cache,
                                machine=options["machine"])
    if not report.adopted:
        return first, report
    return optimize_graph(module, table_context(backend, recipes=recipes, **options)), report
