"""The in-place kernel variant of a region the executor runs in place, and the
call of a fused arm.

Owns `inplace_variant` (the variant's Kernel, built once per process and kept
in the object cache), `variant_call` (its call, when it replaces a fused arm),
`fused_call` (a fused arm's call: its thunk, else ctypes descriptors) and
`plain_fused_runner` (the step of a fused arm that is one plain thunk call),
used by `StepBuilder.region_step` (builder.py).

Why a variant: a region marked `fused.inplace` (compiler/inplace.py) writes
its result r into operand k's buffer. Its out-of-place kernel called with one
array as operand k and output r gives the right values but loses its vector
loop: LLVM's runtime overlap check between the store range and the load range
fails on the exact alias and runs the scalar loop (relu(y + b) at 512x1024:
~0.4 ms instead of ~0.1 ms). The variant (`emit_linalg(inplace=(k, r))`)
reads operand k from output r's memref, so every access is one pointer at one
index and LLVM needs no check. It keeps the out-of-place kernel's C ABI
(operand k's descriptor is passed and never read), so the thunk, the splits
and the plan's buffers are the same; it is called only with output r being
operand k's buffer, which is why it is never bound in the binding table
(a table row is callable with any buffers). Its object-cache key has
`inplace: [k, r]` and its text differs (`to_tensor %out{r}`), so it never
shares an entry with the out-of-place kernel.

Must not: decide whether a region may run in place (compiler/inplace.py and
the plan builder do), or bind anything in a binding table.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from fusebind.lowering.backend import backend_named
from fusebind.lowering.build import build_object
from fusebind.lowering.cache import default_cache
from fusebind.lowering.decompose import emitted_signature
from fusebind.lowering.emit import CheckedKernel, element_name, emit_linalg
from fusebind.lowering.errors import LoweringError
from fusebind.runtime.backend import runtime_backend
from fusebind.runtime.call import KernelCall
from fusebind.runtime.steps import DescriptorStep, GuardedStep, static_shape
from fusebind.runtime.thunk import ThunkUnavailable

#: (backend, canonical text, types, k, r, id(object cache)) -> (that cache, Kernel | None (refused)),
#: least recently used first.
#: Bounded, so a long-lived process of many shapes does not grow (RELIABILITY.md); an evicted
#: kernel stays alive as long as a plan's step holds it.
_VARIANTS: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
MAX_VARIANTS = 128
_LOCK = threading.Lock()
#: in-place variants built (compiled or loaded from the object cache) in this process
BUILT = [0]


def _types(region: Any) -> tuple[str, ...]:
    return tuple(str(v.type) for v in (*region.operands, *region.results))


def inplace_variant(region: Any, k: int, r: int, canonical: str, backend: str, notes: list[str],
                    cache: Any = None, dynamic: bool = False) -> Any:
    """The Kernel of `region`'s in-place variant (result r written over operand k), or None
    when it cannot be built (a `LoweringError`, noted in `notes`): the caller then runs the
    out-of-place kernel in place, which is correct, only slower. `canonical` is the region's
    canonical text (`fused_ids`), the memo key with its types; regions without one
    (`!failed` or empty) get no variant. `cache`: the object cache (None: `default_cache()`).
    `dynamic`: compile it for any shape (every dim `?`), as a call split in chunks along axis 0
    needs: a static kernel called on a chunk runs over its whole static shape from the chunk's
    base, past the buffer's end (it corrupted the heap: test_inplace_variant_split)."""
    if not canonical or canonical.startswith("!"):
        return None
    # per object cache: a pickling replay's recording cache (travel.py) must see the variant
    # built through it, or the pickle would lack it and its receiver compile it (importing mlir)
    store = cache if cache is not None else default_cache()
    key = (backend, canonical, _types(region), k, r, dynamic, id(store))
    with _LOCK:
        hit = _VARIANTS.get(key)
        if hit is not None and hit[0] is store:  # the entry holds `store`: its id is not reused
            _VARIANTS.move_to_end(key)
            return hit[1]
        kernel = _build(region, k, r, canonical, backend, notes, store, dynamic)
        _VARIANTS[key] = (store, kernel)
        while len(_VARIANTS) > MAX_VARIANTS:
            _VARIANTS.popitem(last=False)
        return kernel


def _build(region: Any, k: int, r: int, canonical: str, backend: str, notes: list[str], cache: Any = None,
           dynamic: bool = False) -> Any:
    from fusebind.runtime.kernel import Kernel

    target = backend_named(backend)
    fm = target.fastmath()
    name = "".join(c if c.isalnum() else "_" for c in str(getattr(region, "region_name", "") or "region"))
    try:
        emitted = emit_linalg(region, f"fb_{name}_inplace_{k}_{r}", fastmath=fm[0] if fm else None,
                              fastmath_defs=fm[1] if fm else None, inplace=(k, r), dynamic=dynamic)
        if isinstance(emitted, CheckedKernel):  # an index-checking body is not same-index: never marked
            notes.append(f"{region.region_name}: no in-place variant (its kernel checks indices)")
            return None
        block = region.body.blocks[0]
        dtypes = [element_name(a.type) for a in block.args] + [element_name(v.type) for v in block.last_op.operands]
        shapes = [list(s.shape) for s in (*emitted.inputs, *emitted.outputs)]
        built = build_object(emitted, cache=cache, key_parts={"recipe": canonical, "dtypes": dtypes, "shapes": shapes,
                                                 "dynamic": dynamic, "inplace": [k, r]}, backend=target)
        kernel = Kernel.from_object(built.object_code, built.symbol, signature=emitted_signature(emitted))
    except LoweringError as exc:
        notes.append(f"{region.region_name}: no in-place variant ({exc}); its kernel runs in place unvectorized")
        return None
    BUILT[0] += 1
    return kernel


def variant_call(region: Any, inplace: tuple[int, int], kernel: Any, canonical: str, splittable: bool,
                 options: Any, notes: list[str], decision: Any) -> Any:
    """The call of `region`'s in-place variant in place of its fused arm `kernel`, or None (run
    `kernel` itself). Only a compiled arm (it knows its `compiled_shapes`) is replaced: a user's
    kernel bound under the region's key is what the user asked to run."""
    if getattr(kernel, "compiled_shapes", None) is None or getattr(kernel.signature, "status", False):
        return None
    split = splittable and options.threads > 1  # chunks need a kernel for any shape (`inplace_variant`)
    variant = inplace_variant(region, inplace[0], inplace[1], canonical, options.backend, notes, options.cache,
                              dynamic=split)
    if variant is None:
        return None
    decision.reason += " (its in-place kernel variant)"
    call = fused_call(region, variant, split, options.threads, runtime_backend(options.backend).split_pool,
                      notes)
    decision.splits = call.splits
    return call


def fused_call(region: Any, kernel: Any, splittable: bool, threads: int, pool: Any, notes: list[str]) -> Any:
    """The call of a fused arm: through its thunk, else ctypes descriptors.
    `splittable`: the row has CAP_SPLIT_AXIS0; `pool`: the backend's split pool."""
    from fusebind.runtime.steps import ThunkStep

    in_shapes = [static_shape(v) for v in region.operands]
    out_shapes = [static_shape(v) for v in region.results]
    if getattr(kernel, "python_callback", False):
        return GuardedStep(kernel, None)
    try:
        return ThunkStep(kernel, in_shapes, out_shapes, splittable, threads, pool)  # type: ignore[arg-type]
    except ThunkUnavailable as exc:
        notes.append(f"call thunk unavailable ({exc}); fused arms are called through ctypes descriptors")
        return DescriptorStep(KernelCall(kernel, in_shapes, out_shapes,  # type: ignore[arg-type]
                                         splittable=splittable, threads=threads, pool=pool))


def plain_fused_runner(kcall: Any, alloc: Any, operand_slots: list[int], result_slot: int, stats: Any) -> Any:
    """A fused arm's step when its call is one whole thunk call (`ThunkStep.plain`) with one fresh
    output and no verify, profile or in-place: the plan's step with nothing around that call
    (about 1.7 us a step less than `run_fused`'s generic form, bench/bench_steps.py), or None."""
    plain = getattr(kcall, "plain", None)
    if plain is None or alloc is None:
        return None

    def run_fused_plain(env: Any) -> None:
        o = alloc(env)
        args = [env[i] for i in operand_slots]
        if plain(*args, o) is None:  # refused (e.g. a non-contiguous view): the step converts
            kcall(args, [o])
        env[result_slot] = o
        stats.fused_calls += 1
    return run_fused_plain
