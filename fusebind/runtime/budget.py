"""The kernel budget: at most N JIT-compiled kernels bound per session, least recently used evicted.

Every new shape of a function compiles a new kernel (~48 KB of JIT memory
each, measured: docs/KERNEL-BUDGET.md); without a bound a long-running
process grows forever. This module owns the bound:

- **What counts**: kernels fusebind generated and linked itself (a row whose
  kernel's source is `llvm:<hash>`, `Kernel.from_object`/`from_decomposition`)
  bound under a runtime key, `BindingKey.runtime_fused(id)`. Exempt: static
  kernels of primitive ops and of catalog fused ops (`Static(...)`: bounded
  by ops x dtypes, one dynamic-shape kernel each) and every kernel a user
  bound (C, ctypes, Python: fusebind could not make it again).
- **The budget**: `DEFAULT_KERNEL_BUDGET` (512) kernels per session, process
  wide: `FUSEBIND_KERNEL_BUDGET` (a positive integer, or `unlimited`) sets it
  at start, `set_kernel_budget(n)` at run time; `Session(kernel_budget=n)`
  overrides it for one session.
- **Recency**: a row is used when it is bound and when a table lookup returns
  it, which is what building a plan does (table.py stamps `row.last_used`).
  Calls never stamp (the fast path's 1 us budget): a cached plan is rebuilt
  after every table swap, so every kernel used since the last swap has been
  stamped since it, and evictions happen only at swaps. The order is LRU at
  the granularity of table generations.
- **Eviction**: `enforce(session, builder)` runs inside the writer critical
  section of every swap that bound a row (`Session.extend_locked`): the least
  recently used counted kernels beyond the budget lose their rows in that
  same new snapshot (one generation bump for adopt + evict). Rows bound in
  that swap are never evicted by it. Plans built on the old generation are
  rebuilt; an evicted region is gated again, so the JIT compiles it again
  (the on-disk object cache makes that a load) or it runs as primitives.
- **Code**: freed by reference counting, never by this module: an old
  snapshot, a plan or a running call that holds the kernel keeps its code
  mapped (loader.py; `loaded_code_stats()` shows it being freed).
- **Ids**: eviction drops rows, never recipes: a runtime id keeps naming its
  recipe, so it is never handed to another region, and the same region
  compiled again is bound under its old id. `was_evicted(session, id)` tells
  the JIT that a region it compiled before lost its kernel.

Must not: import the session (session.py calls in), touch recipes or free code.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fusebind.dialect.errors import FusebindValueError
from fusebind.runtime.table import BindingRow, BindingTableBuilder

if TYPE_CHECKING:
    from fusebind.runtime.session import Session

#: kernels per session when neither FUSEBIND_KERNEL_BUDGET nor set_kernel_budget says otherwise
DEFAULT_KERNEL_BUDGET = 512
#: the environment variable read on first use
ENV_VAR = "FUSEBIND_KERNEL_BUDGET"
_UNLIMITED_WORDS = ("unlimited", "none", "off")

_lock = threading.Lock()
_process_budget: int | None = None  # None: not read yet; 0: unlimited


def check_budget(value: Any, what: str = "the kernel budget") -> int:
    """A budget as stored: a positive int, or 0 for unlimited (None or "unlimited")."""
    if value is None:
        return 0
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _UNLIMITED_WORDS:
            return 0
        try:
            value = int(text)
        except ValueError:
            value = text
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FusebindValueError(f"fusebind: {what} must be a positive number of kernels, or None / 'unlimited' "
                                 f"for no bound; got {value!r}")
    return int(value)


def _from_env() -> int:
    text = os.environ.get(ENV_VAR)
    if text is None or not text.strip():
        return DEFAULT_KERNEL_BUDGET
    return check_budget(text, f"{ENV_VAR} (the kernel budget)")


def kernel_budget() -> int | None:
    """The process-wide budget in kernels per session (None: unlimited)."""
    global _process_budget
    budget = _process_budget
    if budget is None:
        with _lock:
            if _process_budget is None:
                _process_budget = _from_env()
            budget = _process_budget
    return budget or None


def set_kernel_budget(kernels: int | str | None) -> int | None:
    """Bound every session (that does not set its own) to `kernels` compiled
    kernels; None or "unlimited" removes the bound. Takes effect at the next
    kernel a session binds. Returns the previous budget (None: unlimited)."""
    global _process_budget
    value = check_budget(kernels)
    previous = kernel_budget()
    with _lock:
        _process_budget = value
    return previous


def session_budget(session: "Session") -> int | None:
    """The budget that applies to `session` (its own, else the process's)."""
    own = session.kernel_budget
    if own is not None:
        return own or None
    return kernel_budget()


def counts(row: BindingRow) -> bool:
    """Does the budget count this row's kernel? (code fusebind generated, see the module doc)"""
    return row.kernel.source.startswith("llvm:")


@dataclass
class BudgetState:
    """Per session: evictions so far and the runtime ids whose kernels were evicted and not bound again."""

    evictions: int = 0
    evicted_ids: frozenset[int] = frozenset()


def enforce(session: "Session", builder: BindingTableBuilder) -> int:
    """Evict, from `builder` (the snapshot being built under the writer lock), the
    least recently used counted kernels beyond the session's budget. Returns how
    many kernels went."""
    state: BudgetState = session.budget_state
    rebound = {slot[0].fused_id for slot, _row in builder.added if slot[0].is_runtime}
    if state.evicted_ids and rebound:
        state.evicted_ids = state.evicted_ids - rebound
    if not any(slot[0].is_runtime and counts(row) for slot, row in builder.added):
        return 0  # a static or user kernel: nothing the budget counts got bound
    budget = session_budget(session)
    if budget is None:
        return 0
    kernels: dict[int, list[Any]] = {}  # id(kernel) -> [last used, fresh?, rows, fused ids]
    added = {id(r) for _slot, r in builder.added}
    for (key, _dtypes, _backend), row in builder.rows():
        if not key.is_runtime or not counts(row):
            continue
        entry = kernels.setdefault(id(row.kernel), [0, False, [], set()])
        entry[0] = max(entry[0], row.last_used[0])
        entry[1] = entry[1] or id(row) in added
        entry[2].append(row)
        entry[3].add(key.fused_id)
    excess = len(kernels) - budget
    if excess <= 0:
        return 0
    candidates = sorted((e for e in kernels.values() if not e[1]), key=lambda e: e[0])[:excess]
    doomed = [row for e in candidates for row in e[2]]
    builder.remove_rows(doomed)
    gone = set().union(*(e[3] for e in candidates)) if candidates else set()
    still = {slot[0].fused_id for slot, _ in builder.rows() if slot[0].is_runtime}
    state.evicted_ids = state.evicted_ids | (gone - still)
    state.evictions += len(candidates)
    return len(candidates)


def was_evicted(session: "Session", fused_id: int) -> bool:
    """Was the kernel of runtime id `fused_id` evicted from `session`'s table
    (and nothing bound for it since)? The JIT compiles such a region again."""
    return fused_id in session.budget_state.evicted_ids


@dataclass(frozen=True)
class KernelBudgetStats:
    """`kernel_budget_stats(session)`: the budget (None: unlimited), counted
    kernels bound now, kernels evicted so far, and the process's linked code
    (`loader.loaded_code_stats()`: live and freed objects)."""

    budget: int | None
    kernels: int
    evictions: int
    live_code: int
    freed_code: int


def kernel_budget_stats(session: "Session") -> KernelBudgetStats:
    from fusebind.runtime.loader import loaded_code_stats

    bound = {id(row.kernel) for key, _d, _b, row in session.table.rows() if key.is_runtime and counts(row)}
    code = loaded_code_stats()
    return KernelBudgetStats(session_budget(session), len(bound), session.budget_state.evictions, code.live,
                             code.freed)


__all__ = [
    "DEFAULT_KERNEL_BUDGET", "ENV_VAR", "KernelBudgetStats", "check_budget", "kernel_budget",
    "kernel_budget_stats", "set_kernel_budget", "was_evicted",
]
