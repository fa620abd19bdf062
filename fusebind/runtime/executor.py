"""The executor: runs one function of a module on numpy arrays.

Owns `Executor` (per-signature plan cache, re-planning when the binding
table's generation moves, stats; `explain`'s text is executor_explain.py's) and re-exports `compile_one` /
`KernelMiss` (resolve.py), `FusedArmMismatch` (arms.py), `ArgumentError` and
`format_array_type` (arguments.py, which owns the argument and out= checks).

Flow per call: the fast path first (`FastPath.call`, steps.py, the one
implementation the API callables use too): when the last plan is one fused
kernel and the table generation has not moved, allocate (or recycle,
call.py) the output, or take the caller's `out=` array when `fast_out_ok`
shows it cannot overlap an input, and make one native call (the thunk,
thunk.py, checks every argument itself and declines when one does not fit). Otherwise look the input signature (shapes, dtypes)
up in the plan cache; if the plan is missing or was built against an older
table generation, specialize the function to the call's shapes
(specialize.py), (re)optimize it against the current snapshot, build the
plan, and hand the work order (regions whose fused arm is not bound) to the
`JitCompiler` (jit.py, the one JIT loop) — synchronously, or on its worker
with `background=True`, in which case calls run arm 0 until the adoption
bumps the generation.

Dynamic dims (`Executor(dynamic=True)`, docs/DYNAMIC-SHAPES.md): the function as declared,
with its `?` dims, is optimized once per table generation and its regions compiled once with
those dims dynamic; each signature's plan specializes the optimized function to its shapes.
At `static_shapes` a region resolves under its static recipe's id, where the JIT binds the
dynamic kernel beside the static one and the table picks (`resolve.choose_row`).

Machine model: `Executor(machine=...)` takes a `MachineModel`, `"default"`,
`"measured"` or None (`FUSEBIND_MACHINE`, else measured: calibrate.py). It
is resolved on the first plan, never at construction, and the same model
prices the optimizer's decisions (`optimize(module, table, machine)` when the
optimizer accepts it), the plan's arms and the JIT's compiled costs;
`explain` names it.

Stats (`Executor.stats`): every call is counted, fast-path calls too
(calls, plan hits, calls per arm); nothing is timed unless the executor
was made with `profile=True`, so the fast path stays one native call. With
it, every call is timed, fast path included (the seconds fields are None
without it, and the repr says so).

A kernel's checked index (kernel ABI v2, docs/KERNEL-ABI.md) raises
`fb.IndexOutOfBounds` after its call; the executor words it with the
function's name and the argument the index came from (`kernel.located`; the
fast path knows its kernel's inputs are the arguments: `name_arguments`).

`out=`: the caller's arrays for the results (`check_outputs`, arguments.py: exact
dtype and shape, C-contiguous, writeable, no overlap with an input or
another output, except an argument and result pair `Plan.inplace_args`
allows, passed as the very same memory); the plan writes into them.

Must not: write the binding table itself (jit.py and static_kernels.py
do, through their APIs).
"""

from __future__ import annotations

import threading
import time

from typing import Any, Callable, Sequence

import numpy as np

from fusebind.lowering.backend import DEFAULT_BACKEND
from fusebind.dialect.errors import EntryError, FusebindValueError
from fusebind.compiler.cost import MACHINE_CHOICES, MachineModel
from fusebind.runtime.bindings import BindingTable, parse_backend
from fusebind.runtime.session import Session, current_session
from fusebind.runtime.calibrate import machine_model
from fusebind.runtime.call import SPLIT_THRESHOLD
from fusebind.runtime.jit import JitCompiler
from fusebind.dialect.errors import IndexOutOfBounds, UnsupportedOperation
from fusebind.runtime.kernel import located
from fusebind.runtime.arguments import (
    ArgumentError,
    check_arguments,
    check_outputs,
    format_array_type,
)
from fusebind.runtime.arms import ArmStats, FusedArmMismatch, FusedArmMismatchWarning
from fusebind.runtime.builder import PlanOptions
from fusebind.runtime.plan import Plan, build_plan
from fusebind.runtime.steps import FastPath
from fusebind.runtime.executor_stats import NOT_TIMED, ExecutorStats, format_stats  # noqa: F401 (re-exported)
from fusebind.runtime.resolve import KernelMiss, ResolvedKernel, compile_one
from fusebind.runtime.specialize import SpecializationError, specialize_function

__all__ = [
    "ArgumentError", "Executor", "ExecutorStats", "FusedArmMismatch", "FusedArmMismatchWarning", "KernelMiss",
    "ResolvedKernel", "UnsupportedOperation", "compile_one", "format_array_type",
]

Optimizer = Callable[[Any, BindingTable], Any]

#: plans (and, for a dynamic trace, specialized functions) an executor caches, least recently
#: built dropped first (docs/SOAK.md): a dynamic trace serves every shape, one plan each
#: (~25 KiB), so without a bound a serving process grows by one per new shape forever.
#: 512: a working set of up to 512 shapes never re-plans (at 64, 300 shapes visited at
#: random re-planned on most calls: the soak went 10 s -> 27 s)
MAX_PLANS = 512


def _arg_name(value: Any, index: int) -> str:
    hint = getattr(value, "name_hint", None)
    return hint if hint else f"arg{index}"


class Executor:
    """Runs `entry` of `module` (prim ops and fused regions) on numpy arrays.

    optimize(module_copy, table) -> module: the optimizer, re-run when the
    table generation moves (None: run the module as given).
    verify: also run arm 0 beside every fused arm and compare
    (`verify_action` "raise" -> FusedArmMismatch, "warn" -> a warning).
    background: compile fused arms on a worker; calls run arm 0 meanwhile.
    threads: split large elementwise kernels over this many threads.
    machine: the Layer-1 machine model (a `MachineModel`, "default",
    "measured", or None for `FUSEBIND_MACHINE`/measured); resolved lazily.
    profile: time every call (fast path included) into `stats`; off, calls
    are only counted.
    session: whose binding table and recipes it plans, binds and compiles
    against (None: the current session, normally the default one).
    """

    #: the exact argument and out= checks of the slow path (arguments.py)
    check_arguments = check_arguments
    check_outputs = check_outputs

    def __init__(self, module: Any, entry: str | None = None, *, name: str | None = None,
                 optimize: Optimizer | None = None, backend: str = DEFAULT_BACKEND, verify: bool = False,
                 verify_action: str = "raise", background: bool = False, threads: int | None = None,
                 cache: Any = None, static_kernels: Any = None,
                 before_compile: Callable[[str], None] | None = None,
                 arg_names: Sequence[str] | None = None, machine: MachineModel | str | None = None,
                 profile: bool = False, session: Session | None = None, dynamic: bool = False) -> None:
        from fusebind.dialect.types import elem_of, numpy_dtype, shape_of

        if verify_action not in ("raise", "warn"):
            raise FusebindValueError(f"verify_action must be 'raise' or 'warn', got {verify_action!r}")
        self.module = module
        self.func = _pick_func(module, entry)
        self.name = name or self.func.sym_name.data
        self._optimize = optimize
        threads = _default_threads() if threads is None else int(threads)
        if threads < 1:
            raise FusebindValueError(f"threads must be >= 1 (or None for the CPU count), got {threads}")
        self._machine_choice = _check_machine_choice(machine)
        self.session = session or current_session()
        self.options = PlanOptions(session=self.session, backend=parse_backend(backend), verify=verify, verify_action=verify_action,
                                   threads=threads, static_kernels=static_kernels,
                                   machine=machine if isinstance(machine, MachineModel) else None,
                                   profile=bool(profile), cache=cache)
        self.compiler = JitCompiler(self.options.backend, background=background, cache=cache,
                                    before_compile=before_compile,
                                    # one thread never splits: static-shape kernels (a dynamic one is up to 8% slower)
                                    split_threshold=SPLIT_THRESHOLD if threads > 1 else None,
                                    machine=self._machine_choice, session=self.session)
        self._stats = ExecutorStats(compiler=self.compiler, profile=bool(profile),
                                    run_seconds=0.0 if profile else None)
        self._fast_paths: list[FastPath] = []
        #: the fast path of the last plan run: (generation, FastPath), or None
        self.fast: FastPath | None = None
        args = self.func.body.blocks[0].args
        self.arg_names = list(arg_names) if arg_names is not None else [_arg_name(a, i) for i, a in enumerate(args)]
        self.arg_types = [(numpy_dtype(elem_of(a.type)), shape_of(a.type)) for a in args]
        self._plans: dict[Any, Plan] = {}
        #: optimize the function as declared (its `?` dims kept: one set of kernels for every
        #: size), then specialize the optimized function per call signature (DYNAMIC-SHAPES.md)
        self.dynamic = bool(dynamic)
        #: shapes (per argument) at which a static trace compiled static kernels: there a region
        #: resolves under the static recipe's id, whose rows hold the static and dynamic kernels
        self.static_shapes: set[tuple[tuple[int, ...], ...]] = set()
        self._static_plan = False  # the plan being built is at one of `static_shapes`
        self._optimized: dict[Any, tuple[int, Any, Any, list[Any], list[Any]]] = {}
        self.optimized_module: Any = module
        self.decisions: list[Any] = []  # the optimizer's decisions (fused / gated / rejected)
        self._lock = threading.RLock()
        self.session.on_evict(self._drop_stale_plans)  # held weakly: the executor's life is its own

    def _drop_stale_plans(self) -> None:
        """The session evicted kernels (runtime/budget.py): drop the plans of older table generations
        so the evicted kernels' code can be freed. A try-lock: it never blocks a thread binding kernels
        (the next call re-plans anyway). A dropped fast path's counts move into the stats."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            generation = self.session.table.generation
            self._plans = {sig: p for sig, p in self._plans.items() if p.generation == generation}
            self._retire_fast_paths()
        finally:
            self._lock.release()

    def _retire_fast_paths(self) -> None:
        """Keep only the fast paths of cached plans (under the lock); a dropped one's counts move
        into the stats. Without it every plan ever built (one per signature per table generation)
        kept its FastPath, and with it its kernel and code (docs/SOAK.md)."""
        keep = {id(p.fast) for p in self._plans.values() if p.fast is not None}
        s = self._stats
        for f in self._fast_paths:
            if id(f) not in keep:
                s.calls += f.calls
                s.plan_hits += f.calls
                s.arms.fused_calls += f.calls
                if s.profile:
                    s.arms.fused_seconds = (s.arms.fused_seconds or 0.0) + f.seconds
                    s.run_seconds = (s.run_seconds or 0.0) + f.seconds
        self._fast_paths = [f for f in self._fast_paths if id(f) in keep]
        if self.fast is not None and id(self.fast) not in keep:
            self.fast = None

    # ------------------------------------------------------------------ calls
    def __call__(self, *args: Any, out: Any = None) -> Any:
        fast = self.fast  # one fused kernel and the table has not moved: one native call
        if fast is not None:
            result = fast.call(args, out)
            if result is not None:
                return result
        arrays = [a if type(a) is np.ndarray else np.asarray(a) for a in args]
        return self.run_signature(tuple([(a.shape, a.dtype) for a in arrays]), arrays, out)

    def run_signature(self, sig: Any, arrays: list[np.ndarray], out: Any = None) -> Any:
        """Run with a precomputed signature key `((shape, dtype), ...)`;
        `out`: None, an array (one result) or a tuple of arrays or Nones."""
        plan = self._plans.get(sig)
        stats = self._stats
        if plan is None or plan.generation != self.session.table.generation:
            plan = self.plan_for(arrays, sig)
        else:
            stats.plan_hits += 1
        self.fast = plan.fast
        checked = None if out is None else self.check_outputs(plan, arrays, out)
        try:
            if stats.profile:
                t = time.perf_counter()
                outs = plan.run(arrays, checked)
                stats.run_seconds += time.perf_counter() - t  # type: ignore[operator]
            else:
                outs = plan.run(arrays, checked)
        except IndexOutOfBounds as err:  # a kernel's checked index (ABI v2): name the function, argument
            named = located(err, self.name, arrays, self.arg_names)
            if named is err:  # not a kernel's status (arm 0's reference), or already named
                raise
            raise named from None
        # regions still queued for compilation ran as primitives: their arm 0
        stats.arms.arm0_calls += len(plan.pending)
        stats.calls += 1
        return outs[0] if len(outs) == 1 else tuple(outs)

    @property
    def stats(self) -> ExecutorStats:
        """Counters so far (a copy). Fast-path calls count as calls, plan hits
        and fused-arm calls; their time (profile only) as fused-arm and run time."""
        fast = sum(f.calls for f in self._fast_paths)
        s = self._stats
        if not s.profile:
            arms = ArmStats(s.arms.arm0_calls, s.arms.fused_calls + fast, None, None)
            return ExecutorStats(s.calls + fast, s.plans, s.plan_hits + fast, arms, self.compiler)
        fast_s = sum(f.seconds for f in self._fast_paths)
        arms = ArmStats(s.arms.arm0_calls, s.arms.fused_calls + fast, s.arms.arm0_seconds,
                        s.arms.fused_seconds + fast_s)
        return ExecutorStats(s.calls + fast, s.plans, s.plan_hits + fast, arms, self.compiler, True,
                             s.run_seconds + fast_s)  # type: ignore[operator]

    # ------------------------------------------------------------------ planning
    @property
    def machine(self) -> MachineModel:
        """The machine model this executor prices with (resolved, and for
        "measured" possibly calibrated, on first use)."""
        if self.options.machine is None:
            self.options.machine = machine_model(self._machine_choice)
        return self.options.machine

    def plan_for(self, arrays: Sequence[np.ndarray], sig: Any = None) -> Plan:
        """The current plan for these arguments (built, compiled and cached as needed)."""
        arrays = [a if type(a) is np.ndarray else np.asarray(a) for a in arrays]
        sig = sig if sig is not None else tuple((a.shape, a.dtype) for a in arrays)
        with self._lock:
            plan = self._plans.get(sig)
            if plan is not None and plan.generation == self.session.table.generation:
                return plan
            self.check_arguments(arrays)
            shapes = tuple(a.shape for a in arrays)
            self._static_plan = shapes in self.static_shapes
            self.options.machine = self.machine  # resolved before anything is priced
            for _ in range(3):
                table = self.session.table
                func = self.optimized_func(table, shapes)
                plan = build_plan(func, table, self.options, self._stats.arms, self._fused_id_of)
                self._stats.plans += 1
                pending = list(self._optimized[shapes][3])  # gated regions: their ops run as primitives
                plan.pending = [item.name for item in pending]
                work = list(plan.work_order) + pending
                if not work:
                    if self.session.table.generation == table.generation:
                        break
                    continue  # building it bound a dynamic row beside a static one: plan on that table
                before = self.session.table.generation
                self.compiler.submit(work)
                if self.compiler.background or self.session.table.generation == before:
                    break
            self._plans.pop(sig, None)
            self._plans[sig] = plan  # type: ignore[assignment]  # the newest last: the dict is an LRU of plans
            while len(self._plans) > MAX_PLANS:
                del self._plans[next(iter(self._plans))]
            if plan.fast is not None:  # type: ignore[union-attr]
                self._fast_paths.append(plan.fast)  # type: ignore[union-attr, arg-type]
                plan.fast.name_arguments(self.name, self.arg_names)  # its kernel's inputs are the arguments
            if len(self._fast_paths) > len(self._plans):
                self._retire_fast_paths()
            return plan  # type: ignore[return-value]

    def specialized_func(self, shapes: Sequence[tuple[int, ...]], func: Any = None) -> Any:
        """The entry function (or `func`) with its argument and value types refined to `shapes`."""
        try:
            return specialize_function(self.func if func is None else func, shapes)
        except SpecializationError as err:
            shown = ", ".join(f"{n}: {list(s)}" for n, s in zip(self.arg_names, shapes))
            raise ArgumentError(f"fusebind: the shapes of the arguments of '{self.name}' ({shown}) do not fit "
                                f"its ops: {err}") from None

    def optimized_func(self, table: BindingTable | None = None, shapes: Sequence[tuple[int, ...]] | None = None) -> Any:
        """The entry function, specialized to `shapes` (None: as declared) and
        optimized against `table` (cached per shapes and table generation)."""
        from xdsl.dialects.builtin import ModuleOp

        table = table if table is not None else self.session.table
        key = tuple(shapes) if shapes is not None else None
        with self._lock:
            hit = self._optimized.get(key)
            if hit is not None and hit[0] == table.generation:
                self.optimized_module, self.decisions = hit[2], hit[4]
                return hit[1]
            if self.dynamic and key is not None:  # the kernels of the function as declared, at these shapes
                general = self.optimized_func(table, None)
                _, _, _, work, decisions = self._optimized[None]
                func = self.specialized_func(key, general)
                module = ModuleOp([func])
                self._optimized.pop(key, None)
                self._optimized[key] = (table.generation, func, module, work, decisions)
                while len(self._optimized) > MAX_PLANS + 1:  # + the function as declared (key None)
                    del self._optimized[next(k for k in self._optimized if k is not None)]
                self.optimized_module, self.decisions = module, decisions
                return func
            func = self.func if key is None else self.specialized_func(key)
            module = self.module if func is self.func else ModuleOp([func])
            work: list[Any] = []
            decisions: list[Any] = []
            if self._optimize is not None:
                result = self._call_optimizer(module.clone(), table)
                module = getattr(result, "module", result)  # an OptimizeResult, or a bare module
                work = list(getattr(result, "work_order", ()))
                decisions = list(getattr(result, "decisions", ()))
                func = _pick_func(module, self.func.sym_name.data)
            self._optimized[key] = (table.generation, func, module, work, decisions)
            self.optimized_module, self.decisions = module, decisions
            return func

    def _call_optimizer(self, module: Any, table: BindingTable) -> Any:
        """The optimizer, given this executor's machine model when it takes one."""
        import inspect

        optimize = self._optimize
        try:
            takes_machine = "machine" in inspect.signature(optimize).parameters  # type: ignore[arg-type]
        except (TypeError, ValueError):
            takes_machine = False
        if takes_machine:
            return optimize(module, table, machine=self.machine)  # type: ignore[misc, call-arg]
        return optimize(module, table)  # type: ignore[misc]

    def _fused_id_of(self, region: Any) -> tuple[int, str]:
        from fusebind.compiler.recipes import RecipeError, canonical_recipe

        if self.dynamic and region.id:  # the id the optimizer gave the `?` region: no text per shape
            return (self.compiler.beside_static(region) if self._static_plan else region.id), ""
        try:
            canonical = canonical_recipe(region)
        except RecipeError:  # not a valid recipe: no id, and nothing to compile
            return region.id, "!failed"
        record = self.compiler.records.get(canonical)
        if record is not None and record.error is not None:
            return region.id, "!failed"
        if record is not None and record.fused_id:
            return record.fused_id, canonical
        return region.id or (self.session.recipes.id_of(region) or 0), canonical

    def wait_compiled(self, timeout: float | None = None) -> bool:
        """Wait for background compilation to finish; False on timeout."""
        return self.compiler.wait(timeout)

    def close(self) -> None:
        """Stop the background compiler (queued work finishes first)."""
        self.compiler.close()

    # ------------------------------------------------------------------ explain
    def explain(self, arrays: Sequence[np.ndarray], format: str = "text") -> str:
        """Regions, ids, costs, chosen arms and why, for these arguments: text
        for a person, or (`format="dot"`) a Graphviz picture (explain_dot.py)."""
        from fusebind.runtime.executor_explain import explain

        return explain(self, arrays, format)


def _check_machine_choice(machine: Any) -> MachineModel | str | None:
    """Validate `machine=` at construction (without measuring anything)."""
    if machine is None or isinstance(machine, MachineModel):
        return machine
    if isinstance(machine, str) and machine.strip().lower() in MACHINE_CHOICES:
        return machine.strip().lower()
    raise FusebindValueError(f"fusebind: machine must be a MachineModel, None, or one of {', '.join(MACHINE_CHOICES)}; "
                     f"got {machine!r}")


def _default_threads() -> int:
    import os

    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def _pick_func(module: Any, entry: str | None) -> Any:
    from xdsl.dialects import func as func_d

    funcs = {op.sym_name.data: op for op in module.ops if isinstance(op, func_d.FuncOp) and op.body.blocks}
    if entry is not None:
        if entry not in funcs:
            raise EntryError(f"fusebind: no function @{entry} in the module; it defines "
                           f"{', '.join('@' + n for n in funcs) or 'none'}")
        return funcs[entry]
    if len(funcs) == 1:
        return next(iter(funcs.values()))
    if "main" in funcs:
        return funcs["main"]
    raise EntryError(f"fusebind: cannot choose an entry among {', '.join('@' + n for n in funcs) or 'no functions'}; "
                   "pass entry='<name>'")
