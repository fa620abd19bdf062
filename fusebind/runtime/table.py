"""The binding table's values: keys, rows, the immutable snapshot and its builder.

This module owns `BindingKey`, `BindingRow`, the immutable `BindingTable`
snapshot and its mutable copy `BindingTableBuilder`, the backend-name check
(`parse_backend`) and the table's errors. It holds no state: the current
table of a process lives in a `Session` (session.py); `bindings.py` is the
global (default-session) API over it.

Every kernel that can run lives in a table: static kernels of primitive ops and
built-in fused ops under `BindingKey.static(op)`, adopted runtime fused ops
under `BindingKey.runtime_fused(id)`. Same key shape, same row shape.
"""


from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Iterator, Mapping

from fusebind.dialect.errors import FusebindError
from fusebind.compiler.cost import UNKNOWN_COST, Cost, CostEstimate, UnknownCost
from fusebind.lowering.backend import UnknownBackendError as RegistryUnknownBackendError, backend_names
from fusebind.runtime.dtypes import DType, KernelSignature, parse_dtypes
from fusebind.runtime.kernel import Kernel

#: Backends a row may be bound on, as registered when the table was imported
#: (`cpu` = native code for the host CPU); `parse_backend` asks the registry itself.
KNOWN_BACKENDS: frozenset[str] = frozenset(backend_names())


class BindingError(FusebindError, ValueError):
    """A binding was refused: bad key, dtypes, backend or a duplicate kernel."""


class UnknownBackendError(BindingError, RegistryUnknownBackendError):
    """The backend name is not one fusebind knows (the registry's error, as a binding error too)."""


class DuplicateKernelError(BindingError):
    """The same function pointer is already bound under the same key."""


def parse_backend(backend: Any) -> str:
    """Validate a backend name against the backend registry (lowering/backend.py)."""
    names = backend_names()
    if isinstance(backend, str) and backend in names:
        return backend
    known = ", ".join(sorted(names))
    raise UnknownBackendError(f"unknown backend {backend!r}: expected one of {known}")


@dataclass(frozen=True, order=True)
class BindingKey:
    """`BindingKey.static("add")` or `BindingKey.runtime_fused(65536)`."""

    kind: str
    op: str = ""
    fused_id: int = 0

    @staticmethod
    def static(op: str) -> "BindingKey":
        if not isinstance(op, str) or not op:
            raise BindingError(f"BindingKey.static needs an op name such as 'add', got {op!r}")
        return BindingKey("static", op, 0)

    @staticmethod
    def runtime_fused(fused_id: int) -> "BindingKey":
        if not isinstance(fused_id, int) or isinstance(fused_id, bool) or fused_id <= 0:
            raise BindingError(f"BindingKey.runtime_fused needs a positive FusedOpId, got {fused_id!r}")
        return BindingKey("runtime_fused", "", int(fused_id))

    @property
    def is_runtime(self) -> bool:
        return self.kind == "runtime_fused"

    def __repr__(self) -> str:
        return f"Static({self.op})" if self.kind == "static" else f"RuntimeFused({self.fused_id})"

    __str__ = __repr__


DTypes = tuple[DType, ...]
Slot = tuple[BindingKey, DTypes, str]


def _fmt_dtypes(dtypes: Iterable[DType]) -> str:
    return "(" + ", ".join(d.value for d in dtypes) + ")"


#: The recency clock of rows (budget.py's LRU): `next()` is atomic under the GIL, so
#: readers stamp rows with no lock.
_USE_CLOCK = itertools.count(1)


def use_tick() -> int:
    """A fresh recency stamp (larger than every earlier one)."""
    return next(_USE_CLOCK)


@dataclass(frozen=True)
class BindingRow:
    """One kernel bound under (key, dtypes, backend).

    `last_used` is the row's recency stamp (a one-element list shared by every
    snapshot holding the row): set when the row is bound and whenever a
    lookup returns it (a plan being built), never on a call. The kernel
    budget (budget.py) evicts the rows with the oldest stamps."""

    kernel: Kernel = field(compare=False)
    caps: frozenset[str]
    precision: str
    cost: Cost
    source: str
    revision: str
    last_used: list[int] = field(default_factory=lambda: [use_tick()], compare=False, repr=False)

    @property
    def address(self) -> int:
        return self.kernel.address


def make_row(
    key: BindingKey,
    dtypes: DTypes,
    backend: str,
    kernel: Kernel,
    *,
    caps: Iterable[str] = (),
    precision: str = "native",
    cost: Cost | None = None,
    source: str | None = None,
) -> BindingRow:
    """Build (and check) a row for the slot; the revision hashes what defines it."""
    if not isinstance(kernel, Kernel):
        raise BindingError(f"expected a fusebind Kernel, got {type(kernel).__name__}; use Kernel.from_ctypes(...)")
    if kernel.signature.dtypes != dtypes:
        raise BindingError(
            f"kernel {kernel.source} has signature {kernel.signature} whose dtypes "
            f"{_fmt_dtypes(kernel.signature.dtypes)} differ from the binding dtypes {_fmt_dtypes(dtypes)} "
            f"of {key!r} on {backend!r}"
        )
    cost = UNKNOWN_COST if cost is None else cost
    if not isinstance(cost, (CostEstimate, UnknownCost)):
        raise BindingError(f"cost must be a CostEstimate or UNKNOWN_COST, got {cost!r}")
    caps_set = frozenset(caps)
    source = source or kernel.source
    blob = repr((repr(key), _fmt_dtypes(dtypes), backend, str(kernel.signature), source, sorted(caps_set), precision))
    revision = hashlib.sha256(blob.encode()).hexdigest()[:16]
    return BindingRow(kernel, caps_set, precision, cost, source, revision)


class BindingTable:
    """An immutable snapshot: (key, dtypes, backend) -> rows in registration order."""

    __slots__ = ("_rows", "_by_key", "generation")

    def __init__(
        self,
        rows: Mapping[Slot, tuple[BindingRow, ...]] | None = None,
        generation: int = 0,
    ) -> None:
        rows = dict(rows or {})
        by_key: dict[BindingKey, list[tuple[DTypes, str]]] = {}
        for key, dtypes, backend in rows:
            by_key.setdefault(key, []).append((dtypes, backend))
        self._rows: Mapping[Slot, tuple[BindingRow, ...]] = MappingProxyType(rows)
        self._by_key: Mapping[BindingKey, tuple[tuple[DTypes, str], ...]] = MappingProxyType(
            {k: tuple(v) for k, v in by_key.items()}
        )
        self.generation = generation

    @staticmethod
    def empty() -> "BindingTable":
        return _EMPTY

    # ---------------------------------------------------------------- reads (no locks)
    def lookup(self, key: BindingKey, dtypes: Iterable[DType | str], backend: str) -> tuple[BindingRow, ...]:
        """Rows bound under (key, dtypes, backend), in registration order (maybe empty).
        Stamps the rows of a runtime key as used (the kernel budget's recency: a plan
        is built from lookups; calls never come here)."""
        rows = self._rows.get((key, parse_dtypes(dtypes), backend), ())
        if rows and key.kind == "runtime_fused":
            tick = next(_USE_CLOCK)
            for row in rows:
                row.last_used[0] = tick
        return rows

    def signatures(self, key: BindingKey, backend: str) -> tuple[DTypes, ...]:
        """Every dtype tuple bound for `key` on `backend`, in registration order."""
        return tuple(d for d, b in self._by_key.get(key, ()) if b == backend)

    def bindings_of(self, key: BindingKey) -> tuple[tuple[DTypes, str], ...]:
        """Every (dtypes, backend) bound for `key`, in registration order."""
        return self._by_key.get(key, ())

    def has_key_on(self, key: BindingKey, backend: str) -> bool:
        """Is any row bound for `key` on `backend` (any dtypes)?"""
        return any(b == backend for _, b in self._by_key.get(key, ()))

    def keys(self) -> tuple[BindingKey, ...]:
        return tuple(self._by_key)

    def rows(self) -> Iterator[tuple[BindingKey, DTypes, str, BindingRow]]:
        for (key, dtypes, backend), rows in self._rows.items():
            for row in rows:
                yield key, dtypes, backend, row

    def __len__(self) -> int:
        """Total number of rows."""
        return sum(len(r) for r in self._rows.values())

    def describe_nearby(self, key: BindingKey, backend: str) -> str:
        """What is bound for `key`, for miss messages."""
        bound = self.bindings_of(key)
        if not bound:
            return f"nothing is bound for {key!r} on any backend"
        parts = [f"{_fmt_dtypes(d)} on {b!r}" for d, b in bound]
        return f"bound for {key!r}: " + ", ".join(parts)

    def validate(self) -> None:
        """Check the invariants every swapped-in table must hold."""
        for (key, dtypes, backend), rows in self._rows.items():
            parse_backend(backend)
            if not rows:
                raise BindingError(f"empty row list under {key!r} {_fmt_dtypes(dtypes)} on {backend!r}")
            seen: dict[int, str] = {}
            for row in rows:
                if row.kernel.signature.dtypes != dtypes:
                    raise BindingError(f"row {row.source} under {key!r} has dtypes that differ from its key")
                if row.address in seen:
                    raise DuplicateKernelError(
                        f"{key!r} {_fmt_dtypes(dtypes)} on {backend!r} holds function pointer "
                        f"0x{row.address:x} twice (first from {seen[row.address]})"
                    )
                seen[row.address] = row.source

    # ---------------------------------------------------------------- functional update
    def with_row(
        self,
        key: BindingKey,
        dtypes: Iterable[DType | str],
        backend: str,
        kernel: Kernel,
        **row_fields: Any,
    ) -> "BindingTable":
        """A new table with one more row; this one is unchanged (for tests and
        table-local registration that must not touch the global table)."""
        builder = BindingTableBuilder(self)
        builder.bind(key, dtypes, backend, kernel, **row_fields)
        return builder.build(self.generation)

    def __repr__(self) -> str:
        return f"<BindingTable generation={self.generation} keys={len(self._by_key)} rows={len(self)}>"


_EMPTY = BindingTable()


class BindingTableBuilder:
    """A mutable copy of a table, handed to `extend_global_bindings`' fn."""

    def __init__(self, base: BindingTable) -> None:
        self._base = base
        self._rows: dict[Slot, tuple[BindingRow, ...]] = dict(base._rows)
        self.changed = False
        #: rows `bind` appended in this builder (the kernel budget never evicts them in the same swap)
        self.added: list[tuple[Slot, BindingRow]] = []

    def lookup(self, key: BindingKey, dtypes: Iterable[DType | str], backend: str) -> tuple[BindingRow, ...]:
        return self._rows.get((key, parse_dtypes(dtypes), backend), ())

    def find_kernel(self, key: BindingKey, dtypes: Iterable[DType | str], backend: str, kernel: Kernel) -> BindingRow | None:
        """The row binding this very function pointer under the slot, if any."""
        for row in self.lookup(key, dtypes, backend):
            if row.address == kernel.address:
                return row
        return None

    def bind(
        self,
        key: BindingKey,
        dtypes: Iterable[DType | str],
        backend: str,
        kernel: Kernel,
        *,
        caps: Iterable[str] = (),
        precision: str = "native",
        cost: Cost | None = None,
        source: str | None = None,
    ) -> BindingRow:
        """Append a row (an alternative if the slot has rows already).
        The same function pointer twice under one slot is refused."""
        if not isinstance(key, BindingKey):
            raise BindingError(f"expected a BindingKey, got {key!r}; use BindingKey.static(op) or .runtime_fused(id)")
        dtypes_t = parse_dtypes(dtypes)
        backend = parse_backend(backend)
        row = make_row(key, dtypes_t, backend, kernel, caps=caps, precision=precision, cost=cost, source=source)
        slot = (key, dtypes_t, backend)
        existing = self._rows.get(slot, ())
        for other in existing:
            if other.address == row.address:
                raise DuplicateKernelError(
                    f"function pointer 0x{row.address:x} is already bound under {key!r} "
                    f"{_fmt_dtypes(dtypes_t)} on {backend!r} by {other.source}; "
                    "bind a different kernel, or drop the second registration"
                )
        self._rows[slot] = existing + (row,)
        self.changed = True
        self.added.append((slot, row))
        return row

    def rows(self) -> Iterator[tuple[Slot, BindingRow]]:
        """Every (slot, row) of the copy, in registration order."""
        for slot, rows in self._rows.items():
            for row in rows:
                yield slot, row

    def remove_rows(self, doomed: Iterable[BindingRow]) -> int:
        """Drop these rows (by identity) from the copy; a slot left empty goes too.
        Returns how many rows went."""
        ids = {id(r) for r in doomed}
        removed = 0
        for slot, rows in list(self._rows.items()):
            kept = tuple(r for r in rows if id(r) not in ids)
            if len(kept) != len(rows):
                removed += len(rows) - len(kept)
                if kept:
                    self._rows[slot] = kept
                else:
                    del self._rows[slot]
        if removed:
            self.changed = True
        return removed

    def clear(self) -> None:
        """Remove every row (used by the test helpers' reset)."""
        if self._rows:
            self._rows = {}
            self.changed = True

    def replace_all(self, table: BindingTable) -> None:
        """Make the rows exactly those of `table` (used by test helpers' restore)."""
        self._rows = dict(table._rows)
        self.changed = True

    def build(self, generation: int) -> BindingTable:
        return BindingTable(self._rows, generation)
