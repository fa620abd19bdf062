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
- `shape_cap(shapes)` ("shape=4x8,8"; "?" for a dim read at run time): the
  kernel was compiled for exactly these shapes (inputs then outputs). A row
  without a shape cap or CAP_SHAPE_DYNAMIC is trusted to take any shape of
  its ranks.

Kernels must fit what they are bound for. Adoption checks the kernel's
signature against the region (dtypes and ranks, inputs then outputs) and, for
a kernel that knows the shapes it was compiled for (`Kernel.from_decomposition`
sets `compiled_shapes`; read it with `compiled_shapes_of`), those shapes too;
every binder adds the caps those shapes imply (`compiled_shape_caps`), so a
kernel compiled for 1024 elements never resolves for a 4096-element region
(`resolve.region_row_fits`). C/ctypes kernels carry no shapes: their dims are
the binder's responsibility (see `adopt_runtime_fused`).

Every writer and reader takes `session=` (None: the default session, whose
table and recipes are the global ones; see session.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, NewType

from typing import TYPE_CHECKING

from fusebind.dialect.errors import FusebindError
from fusebind.compiler.catalog import RUNTIME_FUSED_BASE, static_kernel_op
from fusebind.compiler.cost import Cost
from fusebind.runtime.bindings import (
    BindingError,
    BindingKey,
    BindingTable,
    BindingTableBuilder,
    DTypes,
    parse_backend,
)
from fusebind.runtime.session import Session, default_session
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
    "shape_cap_fits",
    "compiled_shapes_of",
    "compiled_shape_caps",
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


def shape_cap(shapes: Iterable[Iterable[int | None]]) -> str:
    """The cap of a kernel compiled for exactly `shapes` (inputs then outputs):
    `shape=4x8,8,4x8` (a rank-0 shape is empty; a dim compiled dynamic, None
    or negative, is `?` and matches any size: `shape=?x8,?x8`)."""
    return SHAPE_CAP_PREFIX + ",".join("x".join(_dim_text(d) for d in s) for s in shapes)


def _dim_text(dim: int | None) -> str:
    return "?" if dim is None or int(dim) < 0 else str(int(dim))


def shape_cap_fits(cap: str, shapes: Iterable[Iterable[int | None]]) -> bool:
    """Do `shapes` (inputs then outputs; None = a dynamic dim) fit the exact-shapes
    cap `cap` (`shape_cap`)? A `?` in the cap fits any size; a dynamic dim of
    `shapes` fits only a `?`."""
    if not cap.startswith(SHAPE_CAP_PREFIX):
        return False
    want = [s.split("x") if s else [] for s in cap[len(SHAPE_CAP_PREFIX):].split(",")]
    got = [list(s) for s in shapes]
    if len(want) != len(got) or any(len(w) != len(g) for w, g in zip(want, got)):
        return False
    return all(w == "?" or (d is not None and w == str(int(d))) for ws, gs in zip(want, got) for w, d in zip(ws, gs))


def compiled_shapes_of(kernel: Kernel) -> tuple[tuple[int | None, ...], ...] | None:
    """The shapes a kernel was compiled for (inputs then outputs, None = a
    dynamic dim), when it says so: kernels made by `Kernel.from_decomposition`
    carry them as `compiled_shapes`. None for kernels without that knowledge
    (C code, ctypes callbacks): their dims are the binder's responsibility."""
    shapes = getattr(kernel, "compiled_shapes", None)
    if shapes is None:
        return None
    return tuple(tuple(None if d is None or int(d) < 0 else int(d) for d in s) for s in shapes)


def compiled_shape_caps(kernel: Kernel) -> frozenset[str]:
    """The caps a kernel's compiled shapes imply: `CAP_SHAPE_DYNAMIC` when
    every dim is dynamic, else `shape_cap(shapes)` (`?` for the dynamic dims);
    nothing for a kernel that does not know its shapes."""
    shapes = compiled_shapes_of(kernel)
    if shapes is None:
        return frozenset()
    if all(d is None for s in shapes for d in s):
        return frozenset({CAP_SHAPE_DYNAMIC})
    return frozenset({shape_cap(shapes)})


class InvalidFusedOpId(BindingError):
    """An id outside the range an operation accepts."""


class FusedLookupMiss(FusebindError, LookupError):
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
    if builder.find_kernel(key, dtypes, backend, kernel) is not None:
        return
    # The same object code loaded twice (two JIT compilers racing on one recipe, or two
    # processes' cache loads) is the same kernel, not an alternative: its source names the
    # code's hash. Only generated code is compared this way; user kernels stay by address.
    if kernel.source.startswith("llvm:") and any(
            row.source == kernel.source and row.caps == caps for row in builder.lookup(key, dtypes, backend)):
        return
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
    session: Session | None = None,
) -> FusedOpId:
    """Register `region`'s recipe (same math, same id; first name wins) and
    bind `kernel` under `RuntimeFused(id)`, in one writer critical section.

    Idempotent: the same recipe, kernel, dtypes and backend again changes
    nothing (not even the generation). Another kernel for the same slot
    becomes an alternative row. `cost` is the composed Layer-1 cost, if the
    caller has one; the row otherwise starts with UNKNOWN_COST. `caps` are
    the row's kernel caps (`CAP_SPLIT_AXIS0`, `CAP_SHAPE_DYNAMIC`, ...).

    The kernel must fit the region: its signature lists, inputs then outputs,
    the region's element types and ranks (else `BindingError` naming the first
    difference). A kernel that knows the shapes it was compiled for
    (`Kernel.from_decomposition`: `compiled_shapes_of`) must fit the region's
    shapes too (a kernel compiled for 1024 elements is refused for a
    4096-element region), and the row gets the caps they imply
    (`compiled_shape_caps`: `CAP_SHAPE_DYNAMIC` or `shape_cap(...)`), so it
    never resolves for other shapes. A kernel from C or ctypes carries no
    shapes: its ranks are checked, its dims are the caller's responsibility
    (name them with `caps=(shape_cap(shapes),)` or `CAP_SHAPE_DYNAMIC`); every
    call still checks the arrays against the region's shapes.

    `session`: whose table and recipe registry (None: the default session's,
    the global ones); `recipes` overrides the session's registry.
    """
    from fusebind.compiler.recipes import prepare_recipe

    caps_set = _parse_caps(caps)
    dtypes_t = parse_dtypes(dtypes)
    backend = parse_backend(backend)
    if not isinstance(kernel, Kernel):
        raise BindingError(f"expected a fusebind Kernel, got {type(kernel).__name__}; use Kernel.from_object(...)")
    session = session or default_session()
    registry = recipes if recipes is not None else session.recipes
    # Parse, verify and canonicalise outside the writer lock: it is the slow part.
    prepared = prepare_recipe(name, region)
    _check_region_dtypes(prepared.region, dtypes_t, name)
    _check_kernel_fits_region(kernel, prepared.region, name)
    caps_set = caps_set | compiled_shape_caps(kernel)

    def adopt(builder: BindingTableBuilder) -> FusedOpId:
        # Registry lock nests inside the table writer lock, never the reverse.
        fused_id = registry.register_prepared(prepared)
        _bind_idempotent(builder, BindingKey.runtime_fused(fused_id), dtypes_t, backend, kernel, cost, caps_set)
        return FusedOpId(fused_id)

    return session.extend_bindings(adopt)


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


def _region_types(region: Any) -> list[tuple[str, tuple[int | None, ...]]]:
    """(element type, shape) of the region's inputs then outputs (None = dynamic dim)."""
    from fusebind.dialect.types import elem_of, shape_of

    return [(elem_of(v.type), tuple(None if d is None or int(d) < 0 else int(d) for d in shape_of(v.type)))
            for v in (*region.operands, *region.results)]


def _fmt_shape(shape: Iterable[int | None]) -> str:
    return "x".join("?" if d is None else str(d) for d in shape) or "scalar"


def _check_kernel_fits_region(kernel: Kernel, region: Any, name: str) -> None:
    """The kernel's signature (and compiled shapes, if it knows them) must fit
    the region's inputs then outputs; BindingError names the first difference."""
    sig = kernel.signature
    params = [*sig.inputs, *sig.outputs]
    types = _region_types(region)
    n_in = len(region.operands)

    def where(i: int) -> str:
        return f"input #{i}" if i < n_in else f"output #{i - n_in}"

    head = f"adopt_runtime_fused({name!r}): the kernel {kernel.source} with signature {sig}"
    if (len(sig.inputs), len(sig.outputs)) != (n_in, len(region.results)):
        raise BindingError(f"{head} does not match the region: it takes {len(sig.inputs)} inputs and "
                           f"{len(sig.outputs)} outputs, the region has {n_in} operands and {len(region.results)} "
                           "results; adopt a kernel compiled from this region (decompose_region)")
    for i, ((dtype, rank), (elem, shape)) in enumerate(zip(params, types)):
        if dtype.value != elem or rank != len(shape):
            raise BindingError(f"{head} does not match the region: {where(i)} is {rank}-d {dtype.value} in the "
                               f"kernel but tensor<{_fmt_shape(shape)}x{elem}> (rank {len(shape)}) in the region; "
                               "adopt a kernel compiled from this region (decompose_region)")
    compiled = compiled_shapes_of(kernel)
    if compiled is None:
        return
    for i, (got, (_, shape)) in enumerate(zip(compiled, types)):
        if len(got) != len(shape) or any(c is not None and c != d for c, d in zip(got, shape)):
            raise BindingError(f"adopt_runtime_fused({name!r}): the kernel {kernel.source} was compiled for shapes "
                               f"[{', '.join(_fmt_shape(s) for s in compiled)}] but the region's are "
                               f"[{', '.join(_fmt_shape(s) for _, s in types)}] ({where(i)} differs): it would read "
                               "and write the wrong number of elements. Compile the kernel from this region, or "
                               "with decompose_region(..., dynamic=True) for any shape")


def register_runtime_kernel(
    fused_id: int,
    dtypes: Iterable[DType | str],
    backend: str,
    kernel: Kernel,
    *,
    cost: Cost | None = None,
    caps: Iterable[str] = (),
    session: Session | None = None,
) -> None:
    """Bind `kernel` under `RuntimeFused(fused_id)` without the recipe step
    (idempotent for the same kernel, like adopt); `caps` as for adopt, plus
    those its compiled shapes imply (`compiled_shape_caps`). There is no
    region here to check the kernel against: `compile_one` declines a row
    whose ranks or shape caps do not fit the region it is asked for."""
    fused_id = _check_runtime_id(fused_id, "register_runtime_kernel")
    _bind_one(BindingKey.runtime_fused(fused_id), dtypes, backend, kernel, cost, caps, session)


def bind_catalog_kernel(
    fused_id: int,
    dtypes: Iterable[DType | str],
    backend: str,
    kernel: Kernel,
    *,
    cost: Cost | None = None,
    caps: Iterable[str] = (),
    session: Session | None = None,
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
    key = BindingKey.static(op)
    _bind_one(key, dtypes, backend, kernel, cost, caps, session)
    return key


def _bind_one(key: BindingKey, dtypes: Iterable[DType | str], backend: str, kernel: Kernel, cost: Cost | None,
              caps: Iterable[str], session: Session | None) -> None:
    """The binder without a recipe step: checked dtypes, backend and caps (plus those the kernel's
    compiled shapes imply), then one idempotent row in one writer critical section."""
    caps_set = _parse_caps(caps) | compiled_shape_caps(kernel)
    dtypes_t = parse_dtypes(dtypes)
    backend = parse_backend(backend)
    (session or default_session()).extend_bindings(
        lambda b: _bind_idempotent(b, key, dtypes_t, backend, kernel, cost, caps_set))


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


def fused_kernel_available(fused_id: int, backend: str, *, session: Session | None = None) -> bool:
    """`fused_kernel_available_in` of the current snapshot of `session` (None: the global one)."""
    return fused_kernel_available_in((session or default_session()).table, fused_id, backend)


def lookup_runtime_kernel(fused_id: int, backend: str, *, table: BindingTable | None = None,
                          session: Session | None = None) -> RuntimeKernelBinding:
    """The binding for (`fused_id`, `backend`) when exactly one dtype tuple is
    bound (its first row). Raises KernelNotBound or AmbiguousKernel otherwise."""
    fused_id = _check_runtime_id(fused_id, "lookup_runtime_kernel")
    backend = parse_backend(backend)
    table = (session or default_session()).table if table is None else table
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
