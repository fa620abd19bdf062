"""The runtime-fused facade: adopt, gate and look up fused ops by FusedOpId.

This module owns the id-oriented API of the original design
(`adopt_runtime_fused`, `register_runtime_kernel`, `fused_kernel_available`,
`fused_kernel_available_in`, `lookup_runtime_kernel`) and its miss types.
There is no second registry behind it: kernels live in the one binding table
(bindings.py) under `BindingKey.runtime_fused(id)`; recipes live in the
recipe registry (compiler/recipes.py).

Static (catalog) fused ops, ids below RUNTIME_FUSED_BASE, are bound under
`BindingKey.static("fused.<catalog name>")` (see compiler/catalog.py) by
`bind_catalog_kernel`, so the gate answers for both kinds from the same table.

Kernel caps (a row's `caps`, DESIGN.md "binding table") that fused rows use;
the plan and `compile_one` read them from the resolved row:
- `CAP_SPLIT_AXIS0` ("split:axis0"): the kernel may be called on chunks of
  every operand and result along axis 0 (rows are independent, the leading
  dim is read from the descriptors), so large calls run on several threads.
- `CAP_SHAPE_DYNAMIC` ("shape:dynamic"): every dim is read from the
  descriptors; the kernel runs any shape of its signature's ranks.
- `shape_cap(shapes)` ("shape=4x8,8"): the kernel was compiled for exactly
  these shapes (inputs then outputs). A static catalog row (one key for every
  shape) without a shape cap is trusted to take any shape of its ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, NewType

from typing import TYPE_CHECKING

from fusebind.compiler.catalog import RUNTIME_FUSED_BASE, static_kernel_op
from fusebind.compiler.cost import Cost
from fusebind.runtime.bindings import (
    BindingError,
    BindingKey,
    BindingTable,
    BindingTableBuilder,
    DTypes,
    extend_global_bindings,
    global_bindings,
    parse_backend,
)
from fusebind.runtime.dtypes import DType, parse_dtypes
from fusebind.runtime.kernel import Kernel

if TYPE_CHECKING:  # the registry pulls in xDSL: import it only when adopting
    from fusebind.compiler.recipes import RecipeRegistry

FusedOpId = NewType("FusedOpId", int)

__all__ = [
    "CAP_SHAPE_DYNAMIC",
    "CAP_SPLIT_AXIS0",
    "RUNTIME_FUSED_BASE",
    "FusedOpId",
    "RuntimeKernelBinding",
    "FusedLookupMiss",
    "KernelNotBound",
    "AmbiguousKernel",
    "InvalidFusedOpId",
    "adopt_runtime_fused",
    "bind_catalog_kernel",
    "register_runtime_kernel",
    "shape_cap",
    "fused_kernel_available",
    "fused_kernel_available_in",
    "lookup_runtime_kernel",
]


#: The kernel may run on chunks along axis 0 (see the module doc).
CAP_SPLIT_AXIS0 = "split:axis0"
#: The kernel reads every dim from its descriptors (any shape of its ranks).
CAP_SHAPE_DYNAMIC = "shape:dynamic"
#: Prefix of the exact-shapes cap (`shape_cap`).
SHAPE_CAP_PREFIX = "shape="


def shape_cap(shapes: Iterable[Iterable[int]]) -> str:
    """The cap of a kernel compiled for exactly `shapes` (inputs then outputs):
    `shape=4x8,8,4x8` (a rank-0 shape is empty)."""
    return SHAPE_CAP_PREFIX + ",".join("x".join(str(int(d)) for d in s) for s in shapes)


class InvalidFusedOpId(BindingError):
    """An id outside the range an operation accepts."""


class FusedLookupMiss(LookupError):
    """Why a runtime-fused lookup returned no kernel."""

    def __init__(self, message: str, fused_id: int, backend: str) -> None:
        super().__init__(message)
        self.fused_id = fused_id
        self.backend = backend


class KernelNotBound(FusedLookupMiss):
    """No kernel is bound for the id on the backend. Fix: register one."""


class AmbiguousKernel(FusedLookupMiss):
    """Several dtype tuples are bound. Fix: name the signature you want."""

    def __init__(self, message: str, fused_id: int, backend: str, signatures: tuple[DTypes, ...]) -> None:
        super().__init__(message, fused_id, backend)
        self.signatures = signatures


@dataclass(frozen=True)
class RuntimeKernelBinding:
    """A runtime-fused binding as `lookup_runtime_kernel` returns it (a
    diagnostic view: dispatch resolves dtype-precisely through the table)."""

    kernel: Kernel
    caps: frozenset[str]
    precision: str
    dtypes: DTypes
    cost: Cost


def _check_runtime_id(fused_id: Any, what: str) -> int:
    if not isinstance(fused_id, int) or isinstance(fused_id, bool) or fused_id < RUNTIME_FUSED_BASE:
        raise InvalidFusedOpId(
            f"{what} needs a runtime FusedOpId >= RUNTIME_FUSED_BASE ({RUNTIME_FUSED_BASE}), got {fused_id!r}; "
            "static catalog ids are bound under BindingKey.static('fused.<name>')"
        )
    return fused_id


def _bind_idempotent(
    builder: BindingTableBuilder, key: BindingKey, dtypes: DTypes, backend: str, kernel: Kernel, cost: Cost | None,
    caps: frozenset[str] = frozenset(),
) -> None:
    if builder.find_kernel(key, dtypes, backend, kernel) is None:
        builder.bind(key, dtypes, backend, kernel, cost=cost, caps=caps)


def _parse_caps(caps: Iterable[str]) -> frozenset[str]:
    if isinstance(caps, str):
        raise BindingError(f"caps must be an iterable of cap names, got the string {caps!r}; "
                           f"write caps=({caps!r},)")
    out = frozenset(caps)
    bad = sorted(repr(c) for c in out if not isinstance(c, str) or not c)
    if bad:
        raise BindingError(f"caps must be non-empty strings (e.g. {CAP_SPLIT_AXIS0!r}), got {', '.join(bad)}")
    return out


def adopt_runtime_fused(
    name: str,
    region: Any,
    kernel: Kernel,
    dtypes: Iterable[DType | str],
    backend: str,
    *,
    cost: Cost | None = None,
    recipes: RecipeRegistry | None = None,
    caps: Iterable[str] = (),
) -> FusedOpId:
    """Register `region`'s recipe (same math, same id; first name wins) and
    bind `kernel` under `RuntimeFused(id)`, in one writer critical section.

    Idempotent: the same recipe, kernel, dtypes and backend again changes
    nothing (not even the generation). Another kernel for the same slot
    becomes an alternative row. `cost` is the composed Layer-1 cost, if the
    caller has one; the row otherwise starts with UNKNOWN_COST. `caps` are
    the row's kernel caps (`CAP_SPLIT_AXIS0`, `CAP_SHAPE_DYNAMIC`, ...).
    """
    from fusebind.compiler.recipes import global_recipes, prepare_recipe

    caps_set = _parse_caps(caps)
    dtypes_t = parse_dtypes(dtypes)
    backend = parse_backend(backend)
    if not isinstance(kernel, Kernel):
        raise BindingError(f"expected a fusebind Kernel, got {type(kernel).__name__}; use Kernel.from_object(...)")
    registry = recipes if recipes is not None else global_recipes()
    # Parse, verify and canonicalise outside the writer lock: it is the slow part.
    prepared = prepare_recipe(name, region)
    _check_region_dtypes(prepared.region, dtypes_t, name)

    def adopt(builder: BindingTableBuilder) -> FusedOpId:
        # Registry lock nests inside the table writer lock, never the reverse.
        fused_id = registry.register_prepared(prepared)
        _bind_idempotent(builder, BindingKey.runtime_fused(fused_id), dtypes_t, backend, kernel, cost, caps_set)
        return FusedOpId(fused_id)

    return extend_global_bindings(adopt)


def _check_region_dtypes(region: Any, dtypes: DTypes, name: str) -> None:
    """The dtype tuple must list the region's inputs then outputs."""
    from fusebind.dialect.types import element_type_name

    values = [*region.operands, *region.results]
    expected: list[str] = []
    for value in values:
        elem = getattr(value.type, "get_element_type", lambda: value.type)()
        try:
            expected.append(element_type_name(elem))
        except ValueError:
            expected.append(str(elem))
    if [d.value for d in dtypes] != expected:
        raise BindingError(
            f"adopt_runtime_fused({name!r}): dtypes ({', '.join(d.value for d in dtypes)}) do not match the "
            f"region's inputs then outputs ({', '.join(expected)})"
        )


def register_runtime_kernel(
    fused_id: int,
    dtypes: Iterable[DType | str],
    backend: str,
    kernel: Kernel,
    *,
    cost: Cost | None = None,
    caps: Iterable[str] = (),
) -> None:
    """Bind `kernel` under `RuntimeFused(fused_id)` without the recipe step
    (idempotent for the same kernel, like adopt); `caps` as for adopt."""
    fused_id = _check_runtime_id(fused_id, "register_runtime_kernel")
    caps_set = _parse_caps(caps)
    dtypes_t = parse_dtypes(dtypes)
    backend = parse_backend(backend)
    key = BindingKey.runtime_fused(fused_id)
    extend_global_bindings(lambda b: _bind_idempotent(b, key, dtypes_t, backend, kernel, cost, caps_set))


def bind_catalog_kernel(
    fused_id: int,
    dtypes: Iterable[DType | str],
    backend: str,
    kernel: Kernel,
    *,
    cost: Cost | None = None,
    caps: Iterable[str] = (),
) -> BindingKey:
    """Bind `kernel` for the static catalog op `fused_id` (1 ..
    RUNTIME_FUSED_BASE-1) under `BindingKey.static("fused.<name>")`, which
    opens the gate for that id. Idempotent for the same kernel. One key serves
    every shape: give the kernel `CAP_SHAPE_DYNAMIC` or a `shape_cap(...)`
    unless it really takes any shape of its ranks. Returns the key."""
    if not isinstance(fused_id, int) or isinstance(fused_id, bool) or not 0 < fused_id < RUNTIME_FUSED_BASE:
        raise InvalidFusedOpId(
            f"bind_catalog_kernel needs a static catalog FusedOpId in 1 .. {RUNTIME_FUSED_BASE - 1}, got "
            f"{fused_id!r}; runtime ids are bound with adopt_runtime_fused or register_runtime_kernel")
    op = static_kernel_op(fused_id)
    if op is None:
        raise InvalidFusedOpId(f"bind_catalog_kernel: no built-in fused op has id {fused_id}; see "
                               "fusebind.compiler.catalog.CATALOG for the ids")
    caps_set = _parse_caps(caps)
    dtypes_t = parse_dtypes(dtypes)
    backend = parse_backend(backend)
    key = BindingKey.static(op)
    extend_global_bindings(lambda b: _bind_idempotent(b, key, dtypes_t, backend, kernel, cost, caps_set))
    return key


def _key_for(fused_id: int) -> BindingKey | None:
    if fused_id >= RUNTIME_FUSED_BASE:
        return BindingKey.runtime_fused(fused_id)
    op = static_kernel_op(fused_id)
    return None if op is None else BindingKey.static(op)


def fused_kernel_available_in(table: BindingTable, fused_id: int, backend: str) -> bool:
    """Is any kernel bound for `fused_id` (static or runtime) on `backend` in
    `table`? Coarse: any dtype counts. Reads only `table`; takes no lock."""
    parse_backend(backend)
    if not isinstance(fused_id, int) or fused_id <= 0:
        return False
    key = _key_for(fused_id)
    return key is not None and table.has_key_on(key, backend)


def fused_kernel_available(fused_id: int, backend: str) -> bool:
    """`fused_kernel_available_in` of the current global snapshot."""
    return fused_kernel_available_in(global_bindings(), fused_id, backend)


def lookup_runtime_kernel(fused_id: int, backend: str, *, table: BindingTable | None = None) -> RuntimeKernelBinding:
    """The binding for (`fused_id`, `backend`) when exactly one dtype tuple is
    bound (its first row). Raises KernelNotBound or AmbiguousKernel otherwise."""
    fused_id = _check_runtime_id(fused_id, "lookup_runtime_kernel")
    backend = parse_backend(backend)
    table = global_bindings() if table is None else table
    key = BindingKey.runtime_fused(fused_id)
    signatures = table.signatures(key, backend)
    if not signatures:
        raise KernelNotBound(
            f"no kernel is bound for runtime fused op {fused_id} ({key!r}) on backend {backend!r}; "
            f"{table.describe_nearby(key, backend)}. Register one with adopt_runtime_fused or "
            "register_runtime_kernel",
            fused_id,
            backend,
        )
    if len(signatures) > 1:
        listed = "; ".join("(" + ", ".join(d.value for d in s) + ")" for s in signatures)
        raise AmbiguousKernel(
            f"runtime fused op {fused_id} ({key!r}) on backend {backend!r} has {len(signatures)} bound "
            f"dtype signatures: {listed}. Name the signature you want: look it up with "
            "global_bindings().lookup(key, dtypes, backend)",
            fused_id,
            backend,
            signatures,
        )
    dtypes = signatures[0]
    row = table.lookup(key, dtypes, backend)[0]
    return RuntimeKernelBinding(row.kernel, row.caps, row.precision, dtypes, row.cost)
