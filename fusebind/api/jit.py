"""`fusebind.jit`: the callable a user gets for a traced Python function.

Owns `JitFunction` (per-signature cache of traced modules and their
executors, `.mlir`, `.optimized`, `.explain`, `.stats`, whose `JitStats` is
in api/jit_stats.py) and `jit` (the
decorator, with or without options) and `default_optimizer` (the
capability-gated `optimize_graph` against the table snapshot). A call is
bound to the function's signature and flattened (calls.py: keywords,
defaults, static arguments, pytrees); a new trace key (which parameters
were given, static values, pytree structures, then per leaf the shape and
dtype of arrays or the Python type of scalars: capture.call_key) is traced
once; later calls with it go straight to its executor. A key may have
several traces, one per shape/dtype of the arrays the function captures
(newest tried first). A jitted function called while another is traced
inlines into that trace (`_inline`).

The one-call entry (`_native`, runtime FastPath.native: one native call
that checks, allocates and runs), the fast path (`_last`) and the plain route (`_plain`) serve only calls
whose positional arguments are the leaves (no static, keyword or pytree
argument) and whose result is an array or a flat tuple: their cost is
unchanged by the rest.

The executor's arguments are the call's (Python scalars as 0-d arrays),
then the captured arrays as they are at the call (capture.Binding); on the
fast path `bind` builds that list and the thunk checks it.
"""

from __future__ import annotations

import functools
import itertools
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from fusebind.lowering.backend import DEFAULT_BACKEND
from fusebind.api.calls import CallSpec, FlatCall
from fusebind.api.capture import Binding, call_key
from fusebind.api.errors import FusebindValueError, UnsupportedOperation
from fusebind.runtime.specialize import ShapePolicy, no_data
from fusebind.api.pytree import LEAF, flatten, unflatten
from fusebind.api.trace import ACTIVE, inline_into_trace, trace_graph, tracing
from fusebind.api.travel import (build_blob, by_reference, call_spec, inner_reference, materialize, plan_and_wait,
                                 receive, replay_quietly)
from fusebind.api.jit_stats import JitStats, add_counts
from fusebind.runtime.executor import Executor
from fusebind.runtime.session import current_session


def default_optimizer(backend: str, session: Any = None) -> Callable[..., Any]:
    """optimize_graph over the given table snapshot, gated by fused_kernel_available_in,
    priced with `machine` (the executor passes its model; None: `machine_model()`),
    allocating ids from `session`'s recipe registry (None: the default session's)."""
    def optimize(module: Any, table: Any, machine: Any = None) -> Any:
        from fusebind.compiler.context import OptimizationContext
        from fusebind.compiler.optimize import optimize_graph
        from fusebind.runtime.calibrate import machine_model
        from fusebind.runtime.fused_kernels import fused_kernel_available_in
        from fusebind.runtime.session import default_session

        ctx = OptimizationContext(bindings=table, kernel_query=fused_kernel_available_in, backend=backend,
                                  machine=machine_model(machine), recipes=(session or default_session()).recipes)
        return optimize_graph(module, ctx)
    return optimize


#: At most this many trace keys (shapes, dtypes, statics) are kept per function; past it the
#: oldest is forgotten (`JitFunction._forget_oldest`). A serving process that sees a new shape per
#: call with dynamic=False keeps ~130 KiB per trace (docs/SOAK.md): this bounds it at ~33 MiB.
MAX_TRACE_KEYS = 256

#: every JitFunction: a trace clears their fast paths, so one called inside it inlines (see _inline)
_ALL: "weakref.WeakSet[JitFunction]" = weakref.WeakSet()


def _describe_tree(tree: tuple[Any, ...]) -> str:
    tag = tree[0]
    name = tree[1].__name__ if tag in ("namedtuple", "dict", "dataclass") else tag
    return f"a {name}"


def flat_result(out: Any, fn_name: str, trees: list[Any]) -> Any:
    """The traced function's result as trace_graph takes it: an array or a flat tuple of
    arrays is passed as it is (the executor returns it so); any other pytree is
    flattened to a tuple of its leaves and its structure appended to `trees`."""
    if out is None or (type(out) in (tuple, list) and not out):
        return out  # trace_graph says what to return instead
    leaves, tree, _ = flatten(out, "")
    if tree is LEAF or tree[0] == "tuple" and len(leaves) >= 2 and all(t is LEAF for t in tree[1]):
        return out
    if not leaves:
        raise UnsupportedOperation(f"fusebind: '{fn_name}' returned {_describe_tree(tree)} with no array in it; a "
                                   "jitted function must return at least one array")
    trees.append(tree)
    return tuple(leaves)


class JitFunction:
    """A traced, optimized, compiled version of `fn` (see `fusebind.jit`)."""

    def __init__(self, fn: Callable[..., Any], *, static_argnums: Any = (), static_argnames: Any = (),
                 background: bool = False, verify: bool = False,
                 verify_action: str = "raise", backend: str = DEFAULT_BACKEND, threads: int | None = None,
                 cache: Any = None, before_compile: Callable[[str], None] | None = None,
                 machine: Any = None, profile: bool = False, dynamic: bool | None = None) -> None:
        if dynamic not in (None, True, False):
            raise FusebindValueError(f"fusebind: dynamic must be None (automatic), True or False, got {dynamic!r}")
        self.fn = fn
        #: what `__init__` was given (a pickle makes the function again from it)
        self._init = dict(static_argnums=static_argnums, static_argnames=static_argnames, background=background,
                          verify=verify, verify_action=verify_action, backend=backend, threads=threads, cache=cache,
                          before_compile=before_compile, machine=machine, profile=profile, dynamic=dynamic)
        #: each call that made a new trace, its arrays as ArraySpecs (api/travel.py), in order
        self._calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        #: (number of calls it covers, the portable blob): what the last pickle carried
        self._blob: tuple[int, bytes] | None = None
        self.name = getattr(fn, "__name__", "fn")
        self._spec = CallSpec(fn, self.name, static_argnums, static_argnames)
        self._options = dict(background=background, verify=verify, verify_action=verify_action, backend=backend,
                             threads=threads, cache=cache, before_compile=before_compile, machine=machine,
                             profile=profile)
        self._executors: dict[Any, Executor] = {}
        self._serial = itertools.count()  # (the executors' keys: a trace key and a serial number)
        #: the counters of executors dropped with their trace keys (`_forget_oldest`), in stats's order
        self._retired: list[Any] = [0] * 7 + [0.0] * 3
        #: per trace key (capture.call_key), its traces, newest first: (binding, executor)
        self._entries: dict[Any, list[tuple[Binding, Executor]]] = {}
        #: trace key -> executor, for traces whose call arguments are the executor's (Binding.plain)
        self._plain: dict[Any, Executor] = {}
        #: (the `call` of the last plan run's FastPath, its binding's `bind` or None when the
        #: call's arguments are the kernel's, the FastPath): one attribute, read at once by
        #: the fast path, which calls the closure itself (no attribute lookup, no bound method)
        self._last: tuple[Any, Any, Any] = (None, None, None)
        #: the last plan's one-call entry (FastPath.native) when the call's arguments are the
        #: kernel's, else None: `native(*args)` checks, allocates and runs in one native call
        self._native: Any = None
        self._traces = 0
        #: shape polymorphism (runtime/specialize.py, docs/DYNAMIC-SHAPES.md): None automatic, True every dim, False never
        self._shapes = ShapePolicy(dynamic)
        functools.update_wrapper(self, fn)
        _ALL.add(self)

    # ------------------------------------------------------------------ calls
    def __call__(self, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        """Run on numpy arrays and Python scalars. `out`: write the result into
        this array (a tuple of arrays or Nones for several results) and return
        it; it must have the result's dtype and shape, be C-contiguous and
        writeable, and share no memory with an input. Without `out`, large
        results come from a recycler: an earlier result you no longer
        reference may be reused.

        Python scalar arguments are weak, as in numpy (NEP 50): `f(x32, 2)`
        computes in float32; their type (bool/int/float) is part of the trace
        key, their value is not. Arrays the function captures (closure
        variables, globals) are read at every call; see `fb.constant`.

        Keyword arguments bind as in Python; a parameter not given keeps its
        default as a Python value. Arguments may be pytrees (tuples, lists,
        dicts, namedtuples, dataclasses, None) of arrays and scalars, and so
        may the result (the same structure with numpy arrays; dicts with
        sorted keys). out= only for an array or flat tuple result."""
        # Fastest path: one fused kernel with a small output, the arguments its operands: one
        # native call checks every argument (exact ndarray, dtype, shape, contiguity) and the
        # table generation, allocates the output and runs, or declines with None (thunk.py).
        native = self._native
        if native is not None and out is None and not kwargs:
            result = native(*args)
            if result is not None:
                return result
        # Fast path: one fused kernel, whose thunk checks every argument itself
        # (exact ndarray, dtype, shape, contiguity) and declines (runtime FastPath.call).
        # With scalar arguments or captured arrays, `bind` first makes the kernel's
        # argument list (0-d scalars, then the captured arrays as they are now).
        call, bind, _ = self._last
        if call is not None and not kwargs:
            full = args if bind is None else bind(args)
            if full is not None:
                result = call(full, out)
                if result is not None:
                    return result
        # A signature traced before with plain arguments (arrays only: no scalars, captures or
        # checks) goes straight to its executor, as before scalars and captures existed.
        # (Not while tracing: a nested jitted function inlines into the trace, see _inline.)
        plain = self._plain
        if plain and not kwargs and not ACTIVE[0]:
            sig = tuple([(a.shape, a.dtype) for a in args if type(a) is np.ndarray])
            ex = plain.get(sig) if len(sig) == len(args) else None
            if ex is not None:
                result = ex.run_signature(sig, list(args), out)
                self._keep(ex.fast, None)
                return result
        if ACTIVE[0] and tracing():
            return self._inline(args, kwargs, out)
        flat = self._spec.flat(args, kwargs)
        simple = not kwargs and flat.simple(args) and not self._spec.static
        binding, ex, full, out_tree = self._entry(flat, simple)
        if out_tree is not None and out is not None:
            raise UnsupportedOperation(f"fusebind: '{self.name}' returns a pytree ({_describe_tree(out_tree)}); "
                                       "out= is supported only for an array or a flat tuple of arrays: call it "
                                       "without out= and copy the results")
        fast = ex.fast  # one fused kernel: its thunk checks the leaves, as on the fast path
        result = None if fast is None else fast.call(full, out)
        if result is None:
            result = ex.run_signature(tuple((a.shape, a.dtype) for a in full), full, out)
        if out_tree is not None:
            self._keep(None, None)
            return unflatten(out_tree, [result] if type(result) is not tuple else result)
        # (not simple: the kernel's arguments are not the call's: no fast path)
        self._keep(ex.fast if simple else None, binding.bind)
        return result

    def _keep(self, fast: Any, bind: Any) -> None:
        """The fast path the next call tries first: `fast` (a FastPath or None), its
        arguments made by `bind` (None: the call's own arguments)."""
        self._last = (None if fast is None else fast.call, bind, fast)
        self._native = None if fast is None or bind is not None else fast.native

    def _inline(self, args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> Any:
        """Called while this thread traces another function (nested jit): `fn` is traced inline
        into that trace, as JAX does (no nested executor; its statics need no key)."""
        if out is not None:
            raise UnsupportedOperation(f"fusebind: the jitted function '{self.name}' is called with out= inside "
                                       "another jitted function, where it is inlined: return its result instead")
        self._spec.flat(args, kwargs)  # the checks of a top-level call (its signature, hashable statics)
        inline_into_trace(self.fn)
        return self.fn(*args, **kwargs)

    @property
    def _fast(self) -> Any:
        """The FastPath of the last plan run (see Executor.__call__), or None."""
        return self._last[2]

    def _entry(self, flat: FlatCall, simple: bool = False) -> tuple[Binding, Executor, list[np.ndarray], Any]:
        """The trace (binding, executor) for this call, the executor's argument list
        (explicit leaves, scalars as 0-d arrays, captured arrays) and the
        output's pytree structure (None: an array or a flat tuple of arrays, as
        the executor returns them); traced when no earlier trace fits (a new
        key, or a captured array whose shape or dtype changed). Runs the
        trace's call-time checks. `simple`: the call's arguments are its leaves
        (then a plain trace is also found by the plain route)."""
        leaves, names = flat.leaves, flat.names
        leaf_key, arrays = call_key(leaves, lambda: names, self.name)
        key = (flat.key, leaf_key)
        for binding, ex, out_tree in self._entries.get(key, ()):
            hidden = binding.hidden()
            if hidden is not None:
                for check in binding.checks:
                    check(leaves)
                return binding, ex, arrays + hidden, out_tree
        kinds = [k if isinstance(k, type) else None for k in leaf_key]
        trees: list[Any] = []

        def call(*tracers: Any) -> Any:
            args, kwargs = flat.rebuild(tracers)
            return flat_result(self.fn(*args, **kwargs), self.name, trees)

        for other in list(_ALL):  # a jitted function called in this trace must not take its fast path
            other._keep(None, None)
        module, graph = trace_graph(self.fn, arrays, names, self.name, kinds, call=call)
        out_tree = trees[0] if trees else None
        self._traces += 1
        self._calls.append(call_spec(flat))
        captures = [cap for cap, _ in graph.captures.values()]  # in hidden-argument order
        binding = Binding(len(leaves), [(i, k, f"argument '{names[i]}' (#{i}) of '{self.name}'")
                                        for i, k in enumerate(kinds) if k is not None], graph.checks, captures)
        arg_names = names + [f"{cap.name} (captured)" for cap in captures]

        def probe(shapes: list[tuple[int, ...]]) -> Any:  # the function traced at other sizes (no data)
            self._traces += 1
            return trace_graph(self.fn, [no_data(s, a.dtype) for s, a in zip(shapes, arrays)], names, self.name,
                               kinds, call=call)[0]

        erased = (flat.key, tuple((len(k[0]), k[1]) if type(k) is tuple else k for k in leaf_key))
        found = self._shapes.entry(erased, [a.shape for a in arrays], module, probe)
        if found is not None and found.executor is None:  # a new polymorphic trace: its one executor
            found.executor = Executor(found.module, self.name, name=self.name, dynamic=True,
                                      optimize=default_optimizer(self._options["backend"], current_session()),
                                      arg_names=arg_names,
                                      **self._options)
            self._executors[(key, next(self._serial))] = found.executor
            self._redirect(erased, found)
        if found is not None:
            ex = found.executor
        else:
            ex = Executor(module, self.name, name=self.name,
                          optimize=default_optimizer(self._options["backend"], current_session()),
                          arg_names=arg_names, **self._options)
            self._executors[(key, next(self._serial))] = ex
        self._entries.setdefault(key, []).insert(0, (binding, ex, out_tree))  # the newest trace is tried first
        if len(self._entries) > MAX_TRACE_KEYS:
            self._forget_oldest()
        if binding.plain and out_tree is None and simple:
            self._plain[leaf_key] = ex
        for check in binding.checks:
            check(leaves)
        hidden = binding.hidden()
        if hidden is None:  # the captured value changed while tracing: use what was traced
            hidden = [cap.convert(cap.obj) if cap.convert is not None else cap.obj for cap in captures]
        return binding, ex, arrays + hidden, out_tree

    def _redirect(self, erased: Any, found: Any) -> None:
        """A new dynamic trace also serves the shapes earlier static traces were made at (where
        it agrees with them): their calls go to its executor, whose plans there resolve under the
        static kernels' key, with the dynamic kernel bound beside them (runtime/jit.py)."""
        from fusebind.dialect.types import shape_of
        from fusebind.runtime.specialize import fingerprint, mask_fits

        moved: dict[int, Executor] = {}
        for key, entries in list(self._entries.items()):  # (another thread may add a key meanwhile)
            if (key[0], tuple((len(k[0]), k[1]) if type(k) is tuple else k for k in key[1])) != erased:
                continue
            shapes = [k[0] if type(k) is tuple else () for k in key[1]]
            for i, (binding, ex, tree) in enumerate(entries):
                if ex.dynamic or not mask_fits(found.mask, found.pattern, shapes) \
                        or fingerprint(ex.func, found.mask) != found.text:
                    continue
                entries[i] = (binding, found.executor, tree)
                moved[id(ex)] = found.executor
                found.executor.static_shapes.add(tuple(tuple(shape_of(a.type)) for a in ex.func.body.blocks[0].args))
        for sig, ex in list(self._plain.items()):
            if id(ex) in moved:
                self._plain[sig] = moved[id(ex)]

    def _flat(self, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Binding, Executor, list[np.ndarray], Any]:
        return self._entry(self._spec.flat(args, kwargs))

    def executor(self, *args: Any, **kwargs: Any) -> Executor:
        """The executor for arguments like these (traced on first use)."""
        return self._flat(args, kwargs)[1]

    # ------------------------------------------------------------------ inspection
    def mlir(self, *args: Any, **kwargs: Any) -> str:
        """The traced module (prim ops) for arguments like these."""
        from fusebind.dialect import print_module

        return print_module(self.executor(*args, **kwargs).module)

    def optimized(self, *args: Any, **kwargs: Any) -> str:
        """The module after fusion against the current table (text)."""
        from fusebind.dialect import print_module

        _, ex, full, _ = self._flat(args, kwargs)
        ex.plan_for(full)
        return print_module(ex.optimized_module)

    def explain(self, *args: Any, format: str = "text", **kwargs: Any) -> str:
        """Regions, ids, costs, chosen arms and gate decisions, for a person
        (`format="dot"`: the same as a Graphviz picture)."""
        _, ex, full, _ = self._flat(args, kwargs)
        return ex.explain(full, format=format)

    def wait_compiled(self, timeout: float | None = None) -> bool:
        """Wait for background compilation of every signature; False on timeout."""
        return all(ex.wait_compiled(timeout) for ex in list(self._executors.values()))

    # ------------------------------------------------------------------ travel (docs/PORTABLE.md)
    def precompile(self, *args: Any, **kwargs: Any) -> "JitFunction":
        """Trace, plan and compile for arguments like these, and wait until every kernel is
        bound, so a pickle made afterwards carries them (a process that unpickles it compiles
        nothing for these shapes). Arrays may be given as `ArraySpec(shape, dtype)` or any object
        with `.shape` and `.dtype`; scalars and static arguments as in a call. Call it once per
        distinct shape (each chunk shape of a map over chunks). Returns the function."""
        flat = self._spec.flat(args, kwargs)
        args, kwargs = flat.rebuild([materialize(leaf) for leaf in flat.leaves])
        _, ex, full, _ = self._flat(args, kwargs)
        plan_and_wait(ex, full)
        return self

    def _replay(self, calls: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> list[str]:
        """Plan every recorded call (arrays as zeros), in order; the traced modules' text."""
        from fusebind.dialect import print_module

        for args, kwargs in calls:
            def step(args: Any = args, kwargs: Any = kwargs) -> None:
                flat = self._spec.flat(args, kwargs)
                _, ex, full, _ = self._flat(*flat.rebuild([materialize(leaf) for leaf in flat.leaves]))
                plan_and_wait(ex, full)
            replay_quietly(step)
        return [print_module(ex.module) for ex in self._executors.values()]

    def _portable_blob(self) -> bytes:
        """The blob a pickle of this function carries (made again when calls were traced since)."""
        calls = list(self._calls)
        if self._blob is None or self._blob[0] != len(calls):
            from fusebind.runtime.calibrate import machine_model

            machine = machine_model(self._options["machine"])

            def clone(cache: Any) -> JitFunction:
                return JitFunction(self.fn, **{**self._init, "cache": cache, "machine": machine,
                                               "before_compile": None})
            blob = build_blob(clone, lambda c: c._replay(calls), self._options["backend"], "jit", self._init["cache"])
            self._blob = (len(calls), blob)
        return self._blob[1]

    def __reduce__(self) -> Any:
        """Pickled by reference (a module-level `@fb.jit def f`: the receiver imports it) or by
        value (its Python function, pickled as pickle/cloudpickle pickle functions), with the
        recorded calls and the blob of their kernels (docs/PORTABLE.md)."""
        from fusebind.runtime.calibrate import machine_model

        if inner_reference(self):  # the reference inside our own reduce below: pickle saves it as a global
            return self.__qualname__
        state = (list(self._calls), self._portable_blob(), machine_model(self._options["machine"]))
        if by_reference(self):
            return (_receive_reference, (self, state))
        return (_receive_value, (self.fn, self._init, state))

    def __copy__(self) -> "JitFunction":
        return self  # a handle: copies share the traces and kernels (and pickling is not copying)

    def __deepcopy__(self, memo: Any) -> "JitFunction":
        return self

    @property
    def stats(self) -> JitStats:
        """Counters summed over every signature (see `JitStats`), the forgotten traces'
        (`MAX_TRACE_KEYS`) included; seconds only with profile=True."""
        profile = bool(self._options["profile"])
        totals = list(self._retired)
        for ex in self._executors.values():
            add_counts(totals, ex.stats)
        s = JitStats(traces=self._traces, profile=profile)
        (s.calls, s.plans, s.plan_hits, s.compiles, s.object_cache_hits, s.arm0_calls, s.fused_calls,
         run, arm0, fused) = totals
        if profile:
            s.run_seconds, s.arm0_seconds, s.fused_seconds = run, arm0, fused
        return s

    def _forget_oldest(self) -> None:
        """Drop the oldest trace key (past `MAX_TRACE_KEYS`): its traces, their plain route, and the
        executors no other key uses (closed; their counts stay in `stats`). A call at that key again
        traces again."""
        key = next(iter(self._entries))
        dropped = self._entries.pop(key)
        self._keep(None, None)  # (it may be a dropped executor's fast path)
        live = {id(ex) for entries in self._entries.values() for _, ex, _ in entries}
        gone = {id(ex) for _, ex, _ in dropped} - live
        for leaf_key, ex in list(self._plain.items()):
            if id(ex) in gone:
                del self._plain[leaf_key]
        for k, ex in list(self._executors.items()):
            if id(ex) in gone:
                del self._executors[k]
                add_counts(self._retired, ex.stats)
                ex.close()


def _receive(fn: JitFunction, state: tuple[Any, ...]) -> JitFunction:
    calls, blob, machine = state
    if receive(fn.name, blob, fn._options["backend"]) and fn._init["machine"] is None and not fn._executors:
        fn._options["machine"] = machine  # priced as where its kernels were chosen: the same regions
    fn._replay(calls)
    return fn


def _receive_reference(fn: JitFunction, state: tuple[Any, ...]) -> JitFunction:
    """Unpickling by reference: `fn` is the module's own function; its kernels are installed."""
    return _receive(fn, state)


def _receive_value(py_fn: Callable[..., Any], init: dict[str, Any], state: tuple[Any, ...]) -> JitFunction:
    """Unpickling by value: a new JitFunction of the unpickled Python function."""
    return _receive(JitFunction(py_fn, **init), state)


def jit(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """`@fb.jit` or `@fb.jit(static_argnums=(), static_argnames=(), background=True, verify=False,
    backend="cpu", threads=None, machine=None, profile=False)`.

    static_argnums / static_argnames: parameters (positions, names) whose
    Python values specialize the trace, as in JAX: axis numbers, flags,
    modes. Each distinct value (by hash and equality, and its type) is its
    own trace, so a static value must be hashable (a tuple, not a list).
    Other arguments are arrays, Python scalars or pytrees of them.

    machine: the Layer-1 machine model fusion and arm choice are priced with:
    None (`FUSEBIND_MACHINE`, else this machine's measured model, calibrated
    once per machine and cached on disk), "default", "measured", or a
    `MachineModel`. `.explain()` names the one used.

    dynamic: shape polymorphism (docs/DYNAMIC-SHAPES.md). None (the default,
    automatic): a dim seen with a second distinct size is traced as dynamic
    (`?`) from then on, so one set of kernels serves every size; True: every
    dim of size >= 2 is dynamic from the first call; False: every shape is its
    own trace and kernels. Sizes 0 and 1 always stay specialized. A call is
    served by a dynamic trace only when the function traced at its shapes is
    that trace with the same dims generalized (else it gets its own trace), so
    a program whose ops depend on a size (a reshape to a constant, a slice
    bound, a size in a Python computation) is never answered wrongly.

    profile: time every call, fast path included, into `.stats`
    (`run_seconds`, `arm0_seconds`, `fused_seconds`). Off (the default),
    calls are counted but not timed, so the fast path stays one native call;
    the seconds are then None and `.stats` says "seconds: not measured".
    """
    if fn is None:
        return lambda f: JitFunction(f, **options)
    return JitFunction(fn, **options)
