"""`fusebind.jit`: the callable a user gets for a traced Python function.

Owns `JitFunction` (per-signature cache of traced modules and their
executors, `.mlir`, `.optimized`, `.explain`, `.stats`) and `jit` (the
decorator, with or without options) and `default_optimizer` (the
capability-gated `optimize_graph` against the table snapshot). A new input
signature (shapes and dtypes) is traced once; later calls with it go
straight to its executor.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from fusebind.api.errors import ArgumentError
from fusebind.api.trace import SUPPORTED, parameter_names, trace
from fusebind.runtime import bindings as _bindings
from fusebind.runtime.executor import Executor


def default_optimizer(backend: str) -> Callable[..., Any]:
    """optimize_graph over the given table snapshot, gated by fused_kernel_available_in,
    priced with `machine` (the executor passes its model; None: `machine_model()`)."""
    def optimize(module: Any, table: Any, machine: Any = None) -> Any:
        from fusebind.compiler.context import OptimizationContext
        from fusebind.compiler.optimize import optimize_graph
        from fusebind.runtime.calibrate import machine_model
        from fusebind.runtime.fused_kernels import fused_kernel_available_in

        ctx = OptimizationContext(bindings=table, kernel_query=fused_kernel_available_in, backend=backend,
                                  machine=machine_model(machine))
        return optimize_graph(module, ctx)
    return optimize


@dataclass(repr=False)
class JitStats:
    """Summed over every signature, and counted for every call (fast-path
    calls too): calls, traces, plans built, plan_hits (calls that reused the
    cached plan of their signature), compiles (kernels really compiled),
    object_cache_hits (kernels loaded from the on-disk object cache instead),
    arm0_calls / fused_calls (region runs per arm; a region still queued for
    compilation runs as primitives and counts as arm 0).

    Timed only with `fb.jit(profile=True)`: run_seconds (time running plans;
    the kernel call on the fast path), arm0_seconds and fused_seconds (time
    in region runs per arm). Without profile they are None, and the repr
    says "seconds: not measured (pass profile=True)"."""

    calls: int = 0
    traces: int = 0
    plans: int = 0
    plan_hits: int = 0
    compiles: int = 0
    object_cache_hits: int = 0
    arm0_calls: int = 0
    fused_calls: int = 0
    profile: bool = False
    run_seconds: float | None = None
    arm0_seconds: float | None = None
    fused_seconds: float | None = None

    @property
    def cache_hits(self) -> int:
        """The old name of `plan_hits` (plan-cache hits, not object-cache hits)."""
        return self.plan_hits

    def __repr__(self) -> str:
        from dataclasses import fields

        from fusebind.runtime.executor import format_stats

        shown = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "profile"}
        return format_stats("JitStats", shown, self.profile)


class JitFunction:
    """A traced, optimized, compiled version of `fn` (see `fusebind.jit`)."""

    def __init__(self, fn: Callable[..., Any], *, background: bool = False, verify: bool = False,
                 verify_action: str = "raise", backend: str = "cpu", threads: int | None = None,
                 cache: Any = None, before_compile: Callable[[str], None] | None = None,
                 machine: Any = None, profile: bool = False) -> None:
        self.fn = fn
        self.name = getattr(fn, "__name__", "fn")
        self._options = dict(background=background, verify=verify, verify_action=verify_action, backend=backend,
                             threads=threads, cache=cache, before_compile=before_compile, machine=machine,
                             profile=profile)
        self._executors: dict[Any, Executor] = {}
        self._fast: Any = None  # the FastPath of the last plan run (see Executor.__call__)
        self._traces = 0
        functools.update_wrapper(self, fn)

    # ------------------------------------------------------------------ calls
    def __call__(self, *args: Any, out: Any = None) -> Any:
        """Run on numpy arrays. `out`: write the result into this array (a
        tuple of arrays or Nones for several results) and return it; it must
        have the result's dtype and shape, be C-contiguous and writeable, and
        share no memory with an input. Without `out`, large results come from
        a recycler: an earlier result you no longer reference may be reused."""
        # Fast path: one fused kernel, whose thunk checks every argument itself
        # (exact ndarray, dtype, shape, contiguity) and declines with None.
        fast = self._fast
        if fast is not None and fast.generation == _bindings._current.generation:
            if out is None:
                o = fast.alloc()
                if fast.function(*args, o) is not None:
                    fast.calls += 1
                    return o
            elif type(out) is np.ndarray and out.base is None:
                # inline fast_out_ok (executor.py): inputs that own their memory cannot overlap `out`
                for a in args:
                    if a is out or type(a) is not np.ndarray or a.base is not None:
                        break
                else:
                    if fast.function(*args, out) is not None:
                        fast.calls += 1
                        return out
        arrays = [a if type(a) is np.ndarray else np.asarray(a) for a in args]
        sig = tuple((a.shape, a.dtype) for a in arrays)
        ex = self._executors.get(sig)
        if ex is None:
            ex = self.executor(*arrays)
        result = ex.run_signature(sig, arrays, out)
        self._fast = ex.fast
        return result

    def executor(self, *args: Any) -> Executor:
        """The executor for arguments like these (traced on first use)."""
        arrays = [np.asarray(a) for a in args]
        sig = tuple((a.shape, a.dtype) for a in arrays)
        ex = self._executors.get(sig)
        if ex is not None:
            return ex
        names = parameter_names(self.fn, len(arrays))
        for i, a in enumerate(arrays):
            if a.dtype not in SUPPORTED:
                raise ArgumentError(f"fusebind: argument '{names[i]}' (#{i}) of '{self.name}': dtype {a.dtype} is "
                                    "not supported; use float32, float64, int32, int64 or bool (native byte order)")
        module = trace(self.fn, arrays, names, self.name)
        self._traces += 1
        ex = Executor(module, self.name, name=self.name, optimize=default_optimizer(self._options["backend"]),
                      arg_names=names, **self._options)
        self._executors[sig] = ex
        return ex

    # ------------------------------------------------------------------ inspection
    def mlir(self, *args: Any) -> str:
        """The traced module (prim ops) for arguments like these."""
        from fusebind.dialect import print_module

        return print_module(self.executor(*args).module)

    def optimized(self, *args: Any) -> str:
        """The module after fusion against the current table (text)."""
        from fusebind.dialect import print_module

        ex = self.executor(*args)
        ex.plan_for([np.asarray(a) for a in args])
        return print_module(ex.optimized_module)

    def explain(self, *args: Any) -> str:
        """Regions, ids, costs, chosen arms and gate decisions, for a person."""
        return self.executor(*args).explain([np.asarray(a) for a in args])

    def wait_compiled(self, timeout: float | None = None) -> bool:
        """Wait for background compilation of every signature; False on timeout."""
        return all(ex.wait_compiled(timeout) for ex in list(self._executors.values()))

    @property
    def stats(self) -> JitStats:
        """Counters summed over every signature (see `JitStats`); seconds only with profile=True."""
        profile = bool(self._options["profile"])
        s = JitStats(traces=self._traces, profile=profile)
        seconds = [0.0, 0.0, 0.0]
        for ex in self._executors.values():
            st = ex.stats
            s.calls += st.calls
            s.plans += st.plans
            s.plan_hits += st.plan_hits
            s.compiles += st.compiles
            s.object_cache_hits += st.object_cache_hits
            s.arm0_calls += st.arms.arm0_calls
            s.fused_calls += st.arms.fused_calls
            if profile:
                seconds[0] += st.run_seconds or 0.0
                seconds[1] += st.arms.arm0_seconds or 0.0
                seconds[2] += st.arms.fused_seconds or 0.0
        if profile:
            s.run_seconds, s.arm0_seconds, s.fused_seconds = seconds
        return s


def jit(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """`@fb.jit` or `@fb.jit(background=True, verify=False, backend="cpu", threads=None, machine=None,
    profile=False)`.

    machine: the Layer-1 machine model fusion and arm choice are priced with:
    None (`FUSEBIND_MACHINE`, else this machine's measured model, calibrated
    once per machine and cached on disk), "default", "measured", or a
    `MachineModel`. `.explain()` names the one used.

    profile: time every call, fast path included, into `.stats`
    (`run_seconds`, `arm0_seconds`, `fused_seconds`). Off (the default),
    calls are counted but not timed, so the fast path stays one native call;
    the seconds are then None and `.stats` says "seconds: not measured".
    """
    if fn is None:
        return lambda f: JitFunction(f, **options)
    return JitFunction(fn, **options)
