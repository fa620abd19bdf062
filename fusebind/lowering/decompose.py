"""A `fused.region` -> its Layer-1 cost and native object code (arm 1), and
the region -> its primitive body (arm 0).

Owns: `Decomposition`, `decompose_region`, `kernel_signature`, `inline_region`
and `InlineResult`.
Must not: import `mlir` (a cache hit must not load it) — the pipeline is
reached through `build.py`, which imports it lazily on a miss.

A cache hit does not emit: the region's canonical recipe (exact: every op, type,
shape, constant and attribute of its math), its dtypes, `dynamic`, its symbol and
the backend make a pre-emission key (`build.prebuilt_key`), noted on the first build
with the emitted kernel and its object's key (docs/COMPILE_LATENCY.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from fusebind.compiler.inline import InlineResult, inline_region  # noqa: F401 - re-exported: arm 0
from fusebind.lowering.abi import DType, KernelSignature
from fusebind.lowering.backend import DEFAULT_BACKEND, backend_named
from fusebind.lowering.build import build_object, find_prebuilt, note_prebuilt, prebuilt_key
from fusebind.lowering.cache import ObjectCache, default_cache
from fusebind.lowering.emit import CheckedKernel, EmittedKernel, TensorSpec, emit_linalg, element_name
from fusebind.lowering.errors import LoweringError


@dataclass(frozen=True)
class Decomposition:
    """What lowering makes of one region: the composed cost and the kernel's object code.

    `signature` is a `KernelSignature` (`fusebind.lowering.abi`, re-exported by
    `fusebind.runtime.dtypes`). Lowering stops at object code: the runtime
    links it (`fusebind.runtime.kernel.Kernel.from_decomposition`), and the
    kernel keeps `shapes` as its `compiled_shapes`, so adoption can refuse it
    for a region of other shapes and cap its row to these.
    """

    cost: Any
    object_code: bytes
    symbol: str
    signature: KernelSignature
    emitted: EmittedKernel = field(repr=False, compare=False)
    from_cache: bool = False
    timings: dict[str, float] = field(default_factory=dict, compare=False)

    @property
    def shapes(self) -> tuple[tuple[int | None, ...], ...]:
        """The shapes the code was compiled for, inputs then outputs (None = a
        dim read from the descriptor at run time)."""
        return tuple(tuple(s.shape) for s in (*self.emitted.inputs, *self.emitted.outputs))


#: the emitted-kernel classes a prebuilt note may name (build.find_prebuilt)
EMITTED_CLASSES: dict[str, type] = {c.__name__: c for c in (EmittedKernel, CheckedKernel)}


def kernel_signature(inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec],
                     status: bool = False) -> KernelSignature:
    """The C signature (`KernelSignature`) of a kernel over these arguments (`status`: ABI v2, the
    status operand after the outputs; see `emitted_signature`)."""
    return KernelSignature(tuple((DType(s.elem), s.rank) for s in inputs),
                           tuple((DType(s.elem), s.rank) for s in outputs), status=status)


def emitted_signature(emitted: EmittedKernel) -> KernelSignature:
    """The C signature of an emitted kernel: ABI v2 (with the status operand) when its body checks
    indices (`CheckedKernel`), so no caller can call it without the status pointer."""
    return kernel_signature(emitted.inputs, emitted.outputs, status=isinstance(emitted, CheckedKernel))


def _dtype_names(dtypes: Sequence[Any]) -> list[str]:
    return [getattr(d, "value", d) if not isinstance(d, str) else d for d in dtypes]


def _symbol_for(region: Any) -> str:
    name = getattr(region, "region_name", "")
    if callable(name):
        name = name()
    name = name if isinstance(name, str) else ""
    safe = "".join(c if c.isalnum() else "_" for c in name) or "region"
    return f"fb_{safe}"


def decompose_region(region: Any, dtypes: Sequence[Any] | None = None, *, machine: Any = None,
                     cache: ObjectCache | None = None, dynamic: bool = False,
                     backend: str = DEFAULT_BACKEND) -> Decomposition:
    """Lower a `fused.region` to (Layer-1 cost, object code, symbol, signature).

    dtypes: the binding-row dtype tuple (inputs then outputs, `DType` or names);
    it must match the region's types. `machine` defaults to
    `MachineModel.default()`. With `dynamic=True` every dim is dynamic (one
    kernel per dtypes and ranks). `backend` (a registered backend's name) gives
    the fast-math choice and the cache key's target facts. Raises `LoweringError`.
    """
    from fusebind.compiler.cost import MachineModel, compose_region_cost
    from fusebind.compiler.recipes import RecipeError, canonical_recipe

    t0 = time.perf_counter()
    block = region.regions[0].blocks[0]
    actual = [element_name(a.type) for a in block.args] + [element_name(v.type) for v in block.last_op.operands]
    if dtypes is not None and _dtype_names(dtypes) != actual:
        raise LoweringError("emit", f"{region.name}: dtypes {_dtype_names(dtypes)} do not match the region's "
                            f"types {actual} (inputs then outputs); pass the region's own dtypes")
    cost = compose_region_cost(region, machine or MachineModel.default())
    target = backend_named(backend)
    cache = cache if cache is not None else default_cache()
    try:
        recipe = canonical_recipe(region)
    except RecipeError:  # a region the registry cannot canonicalise is still compiled; the text keys it
        recipe = ""
    symbol = _symbol_for(region)
    pre = (prebuilt_key({"region": recipe, "dtypes": actual, "dynamic": dynamic, "symbol": symbol}, target)
           if recipe and cache.enabled else None)
    found = find_prebuilt(cache, pre, EMITTED_CLASSES)
    if found is not None:  # noted by an earlier build: no emission
        emitted, built = found
        timings = {"key": time.perf_counter() - t0, **built.timings}
        return Decomposition(cost, built.object_code, built.symbol, emitted_signature(emitted),
                             emitted, True, timings)
    fm = target.fastmath()
    emitted = emit_linalg(region, symbol, dynamic=dynamic,
                          fastmath=fm[0] if fm else None, fastmath_defs=fm[1] if fm else None)
    t1 = time.perf_counter()
    shapes = [list(s.shape) for s in (*emitted.inputs, *emitted.outputs)]
    built = build_object(emitted, cache=cache, key_parts={"recipe": recipe, "dtypes": actual, "shapes": shapes,
                                                          "dynamic": dynamic}, backend=target)
    note_prebuilt(cache, pre, emitted, built, EMITTED_CLASSES)
    timings = {"emit": t1 - t0, **built.timings}  # (cost, recipe and emission, as before)
    return Decomposition(cost, built.object_code, built.symbol, emitted_signature(emitted),
                         emitted, built.from_cache, timings)
