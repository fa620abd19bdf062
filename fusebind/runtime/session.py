"""`Session`: the mutable state one fusebind runtime works against.

A session owns:
- the binding table: the current immutable snapshot (`table`), its
  generation counter, and the one writer lock (`extend_bindings`);
- the recipe registry (`recipes`: runtime FusedOpIds and their regions);
- the caches of what was built for it: the machine calibration, the static
  and BLAS kernels, the call thunks and the split thread pools. Each is held
  in a named slot (`slot(name, factory)`) filled on first use by the module
  that owns the concept (calibrate.py, static_kernels.py, thunk.py, call.py),
  so this module imports none of them and none of them is a module global.

`default_session()` is the process's one default session. `use_session(s)`
makes `s` the *current* session of a block (`current_session()`): what
objects made inside it (an `Executor`, a `JitCompiler`, `jit.table_context`)
bind into and allocate from; `fusebind-opt` runs each input chunk in a fresh
one, so the ids in its output are deterministic. The global API of
the seed (`bindings.global_bindings`, `extend_global_bindings`,
`bindings_generation`, `runtime.testing`'s reset and snapshot helpers) is
exactly this session's; the executor, the JIT and the adopt facade use it
unless they are given another. Two sessions share nothing: a kernel adopted
into one is not bound in the other, and their recipe registries allocate
ids independently (so the ids a fresh session hands out are deterministic).

Kernel budget (budget.py, docs/KERNEL-BUDGET.md): every swap that binds a
row also evicts, in the same new snapshot, the least recently used
JIT-compiled runtime kernels beyond the session's budget
(`Session(kernel_budget=n)`, else the process's: `FUSEBIND_KERNEL_BUDGET`,
`budget.set_kernel_budget`, default 512). The same swaps trim the recipe
registry to the recipes with a kernel bound plus `RECIPES_UNBOUND` (64)
recently used others (compiler/recipes.py `trim`, docs/SOAK.md).

Concurrency: the table is swapped whole (copy-on-write). Readers read one
attribute (`table`) and take no lock. Writers are serialised by the
session's writer lock; whoever needs more inside that critical section (the
facade's recipe registration) does it inside `fn`. Lock order: writer lock,
then any other lock (the recipe registry's, a slot's), never the reverse.
"""

from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Callable, Iterator, TypeVar

from fusebind.runtime.budget import BudgetState, check_budget, enforce
from fusebind.runtime.strict import internal_bug
from fusebind.runtime.table import BindingError, BindingTable, BindingTableBuilder

if TYPE_CHECKING:  # the registry pulls in xDSL: import it only when a recipe is needed
    from fusebind.compiler.recipes import RecipeRegistry

T = TypeVar("T")

#: recipes kept beyond those with a kernel bound (docs/SOAK.md): the recent regions still
#: queued for, or being, compiled, and the ones gated but cheap to re-register
RECIPES_UNBOUND = 64


class Session:
    """One binding table, recipe registry and the caches built for them."""

    __slots__ = ("table", "name", "_writer_lock", "_writer_state", "_recipes", "_slots", "_slot_lock",
                 "_kernel_budget", "budget_state", "_evict_listeners")

    def __init__(self, name: str = "session", *, kernel_budget: int | str | None = None) -> None:
        #: the current snapshot; replaced whole by `extend_bindings`, never mutated
        self.table: BindingTable = BindingTable.empty()
        self.name = name
        #: this session's own budget in kernels (None: the process's; 0: unlimited)
        self._kernel_budget: int | None = None if kernel_budget is None else check_budget(
            kernel_budget, "Session(kernel_budget=...)")
        #: evictions so far and the evicted runtime ids (budget.py; written under the writer lock)
        self.budget_state = BudgetState()
        #: weak references to the callables `on_evict` registered
        self._evict_listeners: list[Any] = []
        self._writer_lock = threading.Lock()
        self._writer_state = threading.local()
        self._recipes: RecipeRegistry | None = None
        self._slots: dict[str, Any] = {}
        self._slot_lock = threading.RLock()  # a factory may fill another slot

    # ---------------------------------------------------------------- the binding table
    @property
    def generation(self) -> int:
        """Bumped by every successful swap of this session's table, never otherwise."""
        return self.table.generation

    @property
    def writer_lock(self) -> threading.Lock:
        """The lock `extend_bindings` holds (test helpers take it to reset
        the table and the recipes in one critical section)."""
        return self._writer_lock

    def extend_bindings(self, fn: Callable[[BindingTableBuilder], T]) -> T:
        """Copy the table, apply `fn` to the copy, validate, swap it in.

        Writers are serialised by one lock. If `fn` (or validation) raises, the
        old table stays and the generation does not move. If `fn` changes
        nothing, nothing is swapped. Returns what `fn` returned. `fn` must not
        call `extend_bindings` itself (it has the builder; nesting would
        deadlock, so it is refused)."""
        if getattr(self._writer_state, "active", False):
            raise BindingError(
                "extend_global_bindings was called from inside a writer fn; "
                "use the BindingTableBuilder that fn was given instead"
            )
        with self._writer_lock:
            before = self.budget_state.evictions
            result = self.extend_locked(fn)
            evicted = self.budget_state.evictions != before
        if evicted:  # after the lock: a listener may take its own locks, or bind
            self._notify_evicted()
        return result

    def on_evict(self, callback: Callable[[], None]) -> None:
        """Call `callback()` after every swap that evicted kernels (budget.py),
        with no fusebind lock held. Held weakly (a bound method through
        `weakref.WeakMethod`): registering does not keep its object alive. Meant
        for holders of plans (an executor drops plans of older generations, so
        the evicted kernels' code can be freed); it must not block on a lock
        that a thread binding kernels may hold while it waits (use a try-lock)."""
        ref = weakref.WeakMethod(callback) if hasattr(callback, "__self__") else weakref.ref(callback)
        with self._slot_lock:
            self._evict_listeners = [r for r in self._evict_listeners if r() is not None] + [ref]

    def _notify_evicted(self) -> None:
        for ref in list(self._evict_listeners):
            callback = ref()
            if callback is None:
                continue
            try:
                callback()
            except Exception as err:  # the swap is done: a listener's bug must not fail the adoption
                internal_bug("calling an on_evict listener", err, "the kernels stay evicted; that holder keeps its plans")

    def extend_locked(self, fn: Callable[[BindingTableBuilder], T]) -> T:
        """The body of `extend_bindings`, for a caller that holds `writer_lock`."""
        old = self.table
        builder = BindingTableBuilder(old)
        self._writer_state.active = True
        try:
            result = fn(builder)
        finally:
            self._writer_state.active = False
        state = self.budget_state
        saved = (state.evictions, state.evicted_ids)
        try:
            if builder.added:  # rows were bound: the budget's evictions join this very swap
                enforce(self, builder)
            if builder.changed:
                new = builder.build(old.generation + 1)
                new.validate()
                self.table = new
        except BaseException:  # no swap: the budget's record of evictions stays as the table does
            state.evictions, state.evicted_ids = saved
            raise
        if builder.added and self._recipes is not None:
            self._trim_recipes()
        return result

    def _trim_recipes(self) -> None:
        """Bound the recipe registry (compiler/recipes.py `trim`): every recipe
        whose id is bound in the table stays, plus the RECIPES_UNBOUND most
        recently used others; so it holds at most the kernels bound (the
        budget) + RECIPES_UNBOUND recipes. Runs under the writer lock, after
        the swap (the registry's lock nests inside it, as the order says)."""
        pinned = {key.fused_id for key, _d, _b, _row in self.table.rows() if key.is_runtime}
        self._recipes.trim(RECIPES_UNBOUND, pinned)  # type: ignore[union-attr]

    @property
    def kernel_budget(self) -> int | None:
        """This session's own kernel budget: None (the process's applies), 0
        (unlimited) or a number of kernels. Settable: a positive int, or
        "unlimited"; `None` goes back to the process's."""
        return self._kernel_budget

    @kernel_budget.setter
    def kernel_budget(self, value: int | str | None) -> None:
        self._kernel_budget = None if value is None else check_budget(value, "Session.kernel_budget")

    # ---------------------------------------------------------------- recipes
    @property
    def recipes(self) -> RecipeRegistry:
        """This session's recipe registry (created on first use)."""
        registry = self._recipes
        if registry is None:
            from fusebind.compiler.recipes import RecipeRegistry

            with self._slot_lock:
                if self._recipes is None:
                    self._recipes = RecipeRegistry()
                registry = self._recipes
        return registry

    # ---------------------------------------------------------------- caches
    def slot(self, name: str, factory: Callable[[], T]) -> T:
        """The session's `name` cache, made by `factory()` on first use.
        The slots in use: "calibration" (calibrate.MachineCalibration),
        "static_kernels" (the cpu backend's static_kernels.StaticKernels;
        another backend's is "static_kernels:<name>"), "blas_kernels" (keyed
        by (backend, elem)), "thunks" and "pools" (dicts keyed as their owner
        modules say)."""
        value = self._slots.get(name)
        if value is None:
            with self._slot_lock:
                value = self._slots.get(name)
                if value is None:
                    value = factory()
                    self._slots[name] = value
        return value

    def __repr__(self) -> str:
        return f"<Session {self.name!r} generation={self.generation} rows={len(self.table)}>"


_DEFAULT = Session("default")
_CURRENT: ContextVar[Session | None] = ContextVar("fusebind_session", default=None)


def default_session() -> Session:
    """The process's one default session (what the global functions use)."""
    return _DEFAULT


def current_session() -> Session:
    """The session of the innermost `use_session` block, else the default one."""
    return _CURRENT.get() or _DEFAULT


@contextmanager
def use_session(session: Session) -> Iterator[Session]:
    """Make `session` the current one for the block (this thread / context only)."""
    if not isinstance(session, Session):
        raise TypeError(f"use_session needs a fusebind Session, got {type(session).__name__}")
    token = _CURRENT.set(session)
    try:
        yield session
    finally:
        _CURRENT.reset(token)


__all__ = ["Session", "current_session", "default_session", "use_session"]
