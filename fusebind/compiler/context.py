"""`OptimizationContext`: everything `optimize_graph` may know besides the IR.

This module owns the one object through which the optimizer sees the world:
the binding-table snapshot (`bindings`), the backend, the machine model
(Layer-1 costs), the options (maximum region size), the recipe registry that
hands out ids for synthesized regions, and the capability gate.

The registry is required: there is no global one to fall back on, so
`optimize_graph` is pure and the ids it allocates depend only on the
registry it was given (a fresh `RecipeRegistry()` gives the same ids for the
same module every time). The `gate_*` / `with_ids` constructors make a fresh
registry when none is passed; the runtime passes its session's.

How the gate reaches the table without the compiler importing the runtime:
the context holds a *kernel query*, a callable `(bindings, fused_id,
backend) -> bool`. The runtime supplies it (`fusebind.runtime.jit` builds
contexts with `fused_kernel_available_in`, the table-passing variant, never
the global one), so `OptimizationContext.has_kernel(id)` always asks the
snapshot held in this context. Tests and `fuse{gate=all|none}` use the
`gate_all()` / `gate_none()` constructors, which need no table at all.

It must not read the global binding table or import `fusebind.runtime`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from fusebind.compiler.cost import MachineModel
from fusebind.compiler.recipes import RecipeRegistry

#: `(bindings, fused_id, backend) -> bool`: is a kernel bound for the id?
KernelQuery = Callable[[Any, int, str], bool]

#: The name of the default backend (`cpu`: native code for the host). The
#: backend itself is lowering's (`fusebind.lowering.backend`, which registers
#: it under this name); the compiler knows only the name it gates and prices for.
DEFAULT_BACKEND = "cpu"

#: Default bound on the number of primitive ops in one region.
DEFAULT_MAX_REGION_OPS = 64

#: Extent assumed for each dynamic dimension when a cost must be priced
#: symbolically (see `pricing.py`).
DEFAULT_SYMBOLIC_DIM = 1024


def _always(_bindings: Any, _fused_id: int, _backend: str) -> bool:
    return True


def _never(_bindings: Any, _fused_id: int, _backend: str) -> bool:
    return False


@dataclass(frozen=True, kw_only=True)
class OptimizationContext:
    """What `optimize_graph` reads besides the module (it is pure in both).

    - `bindings`: the binding-table snapshot the gate asks (opaque here).
    - `kernel_query`: `(bindings, id, backend) -> bool`; the runtime passes
      `fused_kernel_available_in`.
    - `backend`: e.g. `"cpu"`.
    - `machine`: the Layer-1 cost model.
    - `max_region_ops`: regions hold at most this many primitive ops.
    - `recipes`: the `RecipeRegistry` synthesized regions get their ids from (required).
    - `symbolic_dim`: extent assumed for a dynamic dim when pricing symbolically.
    """

    recipes: RecipeRegistry
    bindings: Any = None
    kernel_query: KernelQuery = _never
    backend: str = DEFAULT_BACKEND
    machine: MachineModel = field(default_factory=MachineModel.default)
    max_region_ops: int = DEFAULT_MAX_REGION_OPS
    symbolic_dim: int = DEFAULT_SYMBOLIC_DIM

    def __post_init__(self) -> None:
        if not isinstance(self.recipes, RecipeRegistry):
            raise TypeError(
                f"OptimizationContext.recipes must be a RecipeRegistry (the registry synthesized regions get "
                f"their ids from; pass RecipeRegistry() or a session's .recipes), got {type(self.recipes).__name__}"
            )
        if not isinstance(self.max_region_ops, int) or self.max_region_ops < 2:
            raise ValueError(
                f"OptimizationContext.max_region_ops must be an int >= 2 (a region fuses at least two ops), "
                f"got {self.max_region_ops!r}"
            )
        if not callable(self.kernel_query):
            raise TypeError(
                f"OptimizationContext.kernel_query must be callable (bindings, id, backend) -> bool, "
                f"got {type(self.kernel_query).__name__}"
            )
        if not isinstance(self.backend, str) or not self.backend:
            raise ValueError(f"OptimizationContext.backend must be a non-empty string, got {self.backend!r}")
        if not isinstance(self.symbolic_dim, int) or self.symbolic_dim < 1:
            raise ValueError(f"OptimizationContext.symbolic_dim must be an int >= 1, got {self.symbolic_dim!r}")

    def has_kernel(self, fused_id: int) -> bool:
        """The capability gate: is a kernel for `fused_id` bound on this
        context's backend in this context's snapshot?"""
        return bool(self.kernel_query(self.bindings, fused_id, self.backend))

    def recipe_registry(self) -> RecipeRegistry:
        """The registry synthesized regions get their ids from."""
        return self.recipes

    @staticmethod
    def gate_all(**options: Any) -> "OptimizationContext":
        """A context that assumes every kernel is bound (what-if analysis, `fuse{gate=all}`)."""
        return OptimizationContext(kernel_query=_always, **_with_registry(options))

    @staticmethod
    def gate_none(**options: Any) -> "OptimizationContext":
        """A context that assumes no kernel is bound: everything is gated out."""
        return OptimizationContext(kernel_query=_never, **_with_registry(options))

    @staticmethod
    def with_ids(ids: Any, **options: Any) -> "OptimizationContext":
        """A context whose gate is open exactly for `ids` (a set of FusedOpIds)."""
        bound = frozenset(ids)
        return OptimizationContext(bindings=bound, kernel_query=lambda b, i, _backend: i in b,
                                   **_with_registry(options))


def _with_registry(options: dict[str, Any]) -> dict[str, Any]:
    """`options` with a fresh registry unless one is given (deterministic ids)."""
    if options.get("recipes") is None:
        options = {**options, "recipes": RecipeRegistry()}
    return options
