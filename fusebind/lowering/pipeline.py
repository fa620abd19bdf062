"""The upstream MLIR stage: parse linalg-on-tensors text, run the pass pipeline
in process, translate the LLVM dialect to LLVM IR text.

Owns: the pass pipeline as data (`UPSTREAM_PIPELINE`), `run_upstream_pipeline`
(which refuses a kernel that elementwise fusion made wrong: `fusion_hazards`)
and `translate_to_llvm_ir`. Imports `mlir` lazily, inside the functions, so
that importing this module is cheap and a cache hit never loads MLIR.
Must not: know about prim ops (that is `emit.py`) or llvmlite (`codegen.py`).
"""

from __future__ import annotations

import ctypes
import os
import re
import threading
from typing import Any

from fusebind.lowering.errors import LoweringError

# The pipeline is data: (pass, why). `pipeline_text()` joins it.
UPSTREAM_PIPELINE: tuple[tuple[str, str], ...] = (
    ("linalg-fuse-elementwise-ops", "fuse producer/consumer linalg.generic chains into one loop nest"),
    ("eliminate-empty-tensors", "let tensor.empty outputs bufferize into the caller's out memref (no heap temporaries)"),
    ("one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}",
     "tensors -> memrefs, destination-passing, in place"),
    ("func.func(buffer-loop-hoisting)",
     "row-wise kernels: row-sized temporaries are allocated once per call, not once per row"),
    ("func.func(promote-buffers-to-stack{max-alloc-size-in-bytes=65536})",
     "small static temporaries (a row, a row's statistics) live on the stack: no malloc at all"),
    ("buffer-deallocation-pipeline", "free anything bufferization still had to allocate"),
    ("convert-linalg-to-loops", "scalar loops; LLVM's loop vectorizer vectorizes them at O3"),
    ("convert-scf-to-cf", "structured control flow -> branches"),
    ("convert-math-to-llvm", "math.* -> LLVM intrinsics / libm calls"),
    ("expand-strided-metadata", "memref views -> explicit offsets/strides"),
    ("lower-affine", "affine.apply from expand-strided-metadata -> arith"),
    ("convert-arith-to-llvm", "arith -> llvm"),
    ("finalize-memref-to-llvm", "memref descriptors -> llvm structs"),
    ("convert-func-to-llvm", "func -> llvm.func; emits _mlir_ciface_ wrappers"),
    ("convert-cf-to-llvm", "branches -> llvm"),
    ("reconcile-unrealized-casts", "drop the casts left between converted dialects"),
)


# bf16 has no x86 conversion instructions without AVX512-BF16 (LLVM calls `__truncsfbf2`, which the
# JIT does not link): a kernel that names bf16 expands its extf/truncf into integer ops before
# arith -> llvm (round to nearest even; a NaN stays a quiet NaN, as ml_dtypes). Only such kernels
# run it: arith-expand also rewrites other ops (maximumf, ceildivsi) the other kernels lower natively.
BF16_EXPAND = ("arith-expand{include-bf16=true}", "bf16 extf/truncf -> integer ops (RNE, NaN kept)")
ARITH_TO_LLVM = "convert-arith-to-llvm"


def with_narrow_float_passes(passes: tuple[tuple[str, str], ...], text: str) -> tuple[tuple[str, str], ...]:
    """`passes`, with `BF16_EXPAND` before arith -> llvm when the kernel `text` names bf16."""
    names = [p for p, _ in passes]
    if "bf16" not in text or ARITH_TO_LLVM not in names:
        return passes
    at = names.index(ARITH_TO_LLVM)
    return passes[:at] + (BF16_EXPAND,) + passes[at:]


# Passes that only matter when bufferization left a heap allocation. Most kernels have
# none (outputs are written in place, row temporaries live on the stack), and the
# canonicalizations inside this pipeline were the most expensive upstream step.
DEALLOCATION_PASS = "buffer-deallocation-pipeline"
# After it, `fusion_hazards` checks the fused loops (a wrong kernel is refused, never built).
FUSION_PASS = "linalg-fuse-elementwise-ops"

# A context costs ~10 ms to create, more than the passes for a small kernel. Each
# thread keeps one and replaces it after this many modules, since uniqued attributes
# (dense constants) stay in a context for its lifetime.
CONTEXT_REUSE = 64


def pipeline_text(passes: tuple[tuple[str, str], ...] = UPSTREAM_PIPELINE) -> str:
    """The textual pass pipeline, as `mlir-opt --pass-pipeline` takes it."""
    return "builtin.module(" + ",".join(p for p, _ in passes) + ")"


class _CapiPtr(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p)]


class _CapiFunctions:
    """ctypes view of the two C API entry points the Python bindings do not wrap."""

    def __init__(self) -> None:
        import mlir._mlir_libs as libs

        lib = ctypes.CDLL(os.path.join(os.path.dirname(libs.__file__), "libMLIRPythonCAPI.so"))
        self.register = lib.mlirRegisterAllLLVMTranslations
        self.register.argtypes = [_CapiPtr]
        self.register.restype = None
        self.translate = lib.mlirTranslateModuleToLLVMIRToString
        self.translate.argtypes = [_CapiPtr]
        self.translate.restype = ctypes.c_void_p
        self.free = ctypes.CDLL(None).free
        self.free.argtypes = [ctypes.c_void_p]
        self.free.restype = None
        self.get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        self.get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        self.get_pointer.restype = ctypes.c_void_p
        self.get_name = ctypes.pythonapi.PyCapsule_GetName
        self.get_name.argtypes = [ctypes.py_object]
        self.get_name.restype = ctypes.c_char_p

    def pointer(self, obj: Any) -> _CapiPtr:
        capsule = obj._CAPIPtr
        return _CapiPtr(self.get_pointer(capsule, self.get_name(capsule)))


_capi: _CapiFunctions | None = None


def _c_api() -> _CapiFunctions:
    global _capi  # a lazily built, immutable view of a shared library; not process state
    if _capi is None:
        _capi = _CapiFunctions()
    return _capi


def new_context() -> Any:
    """A fresh MLIR context whose errors carry their diagnostics."""
    from mlir import ir

    ctx = ir.Context()
    ctx.emit_error_diagnostics = True
    return ctx


class _ThreadContext(threading.local):
    """This thread's reusable context (MLIR contexts must not be shared across threads)."""

    ctx: Any = None
    uses: int = 0


_thread_context = _ThreadContext()


def _reused_context() -> Any:
    pool = _thread_context
    if pool.ctx is None or pool.uses >= CONTEXT_REUSE:
        pool.ctx = new_context()
        pool.ctx.enable_multithreading(False)  # small modules; a thread pool only adds start-up cost
        capi = _c_api()
        capi.register(capi.pointer(pool.ctx))
        pool.uses = 0
    pool.uses += 1
    return pool.ctx


def fusion_hazards(module: Any) -> list[str]:
    """The outputs, after elementwise fusion, that several iterations of the fused loop
    would share while its payload reads them: a wrong answer, never a slow one (each
    iteration re-reads what the one before wrote). `linalg-fuse-elementwise-ops` makes them
    when it fuses a generic that reads its `outs` (an in-place update) into a consumer that
    broadcasts its result: the producer's result stays an output of the fused op, indexed
    by the consumer's map, e.g. (d0, d1) -> (0, d1). Flagged: such an output whose map
    leaves out a parallel loop, or a reduction loop while another output's value depends
    on it (a reduction's own accumulator leaves out its reduction loops and feeds only
    itself). The kernels we emit avoid both (accumulate `_fold`, rowwise's in-place rows,
    emit's reductions over no axes); this check turns any new case into a `LoweringError`,
    which leaves the region on its unfused arm, instead of a silently wrong kernel."""
    from mlir import ir

    found: list[str] = []

    def visit(op: Any) -> Any:
        if op.name != "linalg.generic":
            return ir.WalkResult.ADVANCE
        n_out = len(op.results)
        block = op.regions[0].blocks[0]
        outs = list(block.arguments)[len(block.arguments) - n_out:]
        read = [i for i in range(n_out) if any(True for _ in outs[i].uses)]
        if not read:
            return ir.WalkResult.ADVANCE
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
        iters = ["parallel" in str(it) for it in ir.ArrayAttr(op.attributes["iterator_types"])]
        for i in read:
            m = maps[len(maps) - n_out + i]
            used = {e.position for e in m.results if isinstance(e, ir.AffineDimExpr)}
            dropped = [d for d in range(len(iters)) if d not in used]
            shared = [f"d{d}" for d in dropped if iters[d]]
            if not shared and dropped and _feeds_another_output(block, i, n_out):
                shared = [f"d{d}" for d in dropped]
            if shared:
                found.append(f"{op.location}: output #{i} of a linalg.generic is read by its payload and "
                             f"indexed by {m}, which leaves out the loop(s) {', '.join(shared)}")
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def _feeds_another_output(block: Any, i: int, n_out: int) -> bool:
    """Whether the value of output `i` read in `block` (a generic's payload) reaches the
    yielded value of another output."""
    args = list(block.arguments)
    reached = {args[len(args) - n_out + i]}
    ops = list(block.operations)
    for op in ops[:-1]:
        if any(v in reached for v in op.operands):
            reached.update(op.results)
    yielded = list(ops[-1].operands)
    return any(v in reached for j, v in enumerate(yielded) if j != i)


def _drop_self_copies(module: Any) -> bool:
    """Erase the copies of a buffer onto itself (left by in-place materialize_in_destination
    and insert_slice) and say whether a heap allocation remains. One walk instead of a
    canonicalize run; a dynamic strided self-copy would otherwise call the `memrefCopy`
    runtime function, which is not linked into our kernels. "Itself" (`_same_buffer`):
    the same value, a loop result that is its own iter_arg passed through, or an identical
    subview of the same buffer (the blocked sums' stored rows, accumulate.py)."""
    from mlir import ir

    self_copies: list[Any] = []
    heap = []

    def visit(op: Any) -> Any:
        name = op.name
        if name == "memref.copy" and _same_buffer(ir, op.operands[0], op.operands[1]):
            self_copies.append(op)
        elif name in ("memref.alloc", "memref.realloc"):
            heap.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    for op in self_copies:
        op.erase()
    return bool(heap)


_SUBVIEW_ATTRS = ("static_offsets", "static_sizes", "static_strides")


def _through_loops(ir: Any, v: Any) -> Any:
    """What a buffer passed through control flow is: the init of an `scf.for` result whose
    iteration yields its iter_arg unchanged (the loop updated it in place), the buffer both
    branches of an `scf.if` yield; else `v`."""
    while isinstance(v, ir.OpResult) and v.owner.name in ("scf.for", "scf.if"):
        op, i = v.owner, v.result_number
        if op.name == "scf.if":
            if len(op.regions) < 2 or not op.regions[1].blocks:
                break
            then, other = (list(r.blocks[0].operations)[-1].operands[i] for r in op.regions[:2])
            if not _same_buffer(ir, then, other):
                break
            v = _through_loops(ir, then)
            continue
        body = op.regions[0].blocks[0]
        yielded = list(body.operations)[-1].operands[i]
        if not (isinstance(yielded, ir.BlockArgument) and yielded.owner == body
                and yielded.arg_number == i + 1):  # block arg 0 is the induction variable
            break
        v = op.operands[3 + i]  # operands: lower, upper, step, inits
    return v


def _same_buffer(ir: Any, a: Any, b: Any) -> bool:
    """Whether memrefs `a` and `b` are the same memory with the same layout."""
    a, b = _through_loops(ir, a), _through_loops(ir, b)
    if a == b:
        return True
    if not (isinstance(a, ir.OpResult) and isinstance(b, ir.OpResult)):
        return False
    oa, ob = a.owner, b.owner
    if oa.name != "memref.subview" or ob.name != "memref.subview" or str(a.type) != str(b.type):
        return False
    if any(str(oa.attributes[k]) != str(ob.attributes[k]) for k in _SUBVIEW_ATTRS):
        return False
    xs, ys = list(oa.operands), list(ob.operands)
    return (len(xs) == len(ys) and _same_buffer(ir, xs[0], ys[0])
            and all(x == y for x, y in zip(xs[1:], ys[1:])))


def run_upstream_pipeline(text: str, ctx: Any | None = None, pipeline: str | None = None) -> Any:
    """Parse upstream MLIR `text` and lower it to the LLVM dialect. Returns the `ir.Module`.

    Raises `LoweringError` (stage mlir-parse or mlir-passes) with MLIR's diagnostics.
    """
    from mlir import ir, passmanager

    ctx = ctx or _reused_context()
    staged = pipeline is None
    pipeline = pipeline or pipeline_text()
    diagnostics: list[str] = []

    def collect(d: Any) -> bool:
        notes = "".join(f"\n    note: {n}" for n in getattr(d, "notes", ()))
        diagnostics.append(f"{d.location}: {d.message}{notes}")
        return True  # handled: keep MLIR from printing to the process's stderr

    handler = ctx.attach_diagnostic_handler(collect)
    try:
        try:
            module = ir.Module.parse(text, ctx)
        except (ir.MLIRError, ValueError) as exc:  # what MLIR raises for text it cannot read
            raise LoweringError.at("mlir-parse", _message(exc, diagnostics), text) from None
        def run(passes: str) -> None:
            try:
                passmanager.PassManager.parse(passes, ctx).run(module.operation)
            except (ir.MLIRError, ValueError) as exc:  # what MLIR raises: a bad pipeline, a failed pass
                raise LoweringError.at("mlir-passes", _message(exc, diagnostics), text, pipeline) from None

        if staged:
            names = [p for p, _ in UPSTREAM_PIPELINE]
            fused, cut = names.index(FUSION_PASS) + 1, names.index(DEALLOCATION_PASS)
            run(pipeline_text(UPSTREAM_PIPELINE[:fused]))
            _drop_fused_checks(module)
            hazards = fusion_hazards(module)
            if hazards:
                raise LoweringError.at("mlir-passes", "internal error: elementwise fusion made a kernel "
                                       "that would compute a wrong answer, so it is not built:\n  "
                                       + "\n  ".join(hazards), text, pipeline)
            module = write_reshapes_in_place(module, ctx)
            before, after = UPSTREAM_PIPELINE[fused:cut], UPSTREAM_PIPELINE[cut + 1:]
            run(pipeline_text(before))
            if _drop_self_copies(module):
                after = UPSTREAM_PIPELINE[cut:]
            run(pipeline_text(with_narrow_float_passes(after, text)))
        else:
            run(pipeline)
    finally:
        handler.detach()
    return module


_MATERIALIZE = re.compile(r"bufferization\.materialize_in_destination (%[\w.]+) in restrict writable (%[\w.]+) : "
                          r"\((tensor<[^>]*>), (memref<[^>]*>)\) -> \(\)")


def write_reshapes_in_place(module: Any, ctx: Any) -> Any:
    """After fusion: a result that is a static `tensor.collapse_shape` / `expand_shape` of a value
    (elementwise fusion leaves one after a loop nest it expanded, e.g. around a concatenation,
    emit_concat.py) is written by materializing that value into the inverse reshape of the output
    memref, a view. Without this, bufferization gives the value a temporary buffer (eliminate-empty-
    tensors does not look through reshapes) and copies it into the output."""
    from mlir import ir

    found: list[bool] = []
    # the reshapes' results, recorded as the walk passes them (a definition precedes its uses in
    # pre-order): asking `value.owner` would make an OpView, and the first linalg one imports
    # mlir.dialects.linalg (its OpDSL named ops: ~0.3 s of CPU in every process that compiles)
    reshaped: set[Any] = set()

    def visit(op: Any) -> Any:
        name = op.name
        if name in ("tensor.collapse_shape", "tensor.expand_shape"):
            reshaped.update(op.results)
        elif name == "bufferization.materialize_in_destination" and op.operands[0] in reshaped:
            found.append(True)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    if not found:  # the common case: no printing and parsing
        return module
    text = str(module)
    changed = False
    for m in list(_MATERIALIZE.finditer(text)):
        src, dest, _src_t, dest_t = m.groups()
        r = re.search(re.escape(src) + r" = tensor\.(collapse_shape|expand_shape) (%[\w.]+) (\[\[.*?\]\])"
                      r"(?: output_shape \[[^\]]*\])? : tensor<([^>]*)> into tensor<([^>]*)>", text)
        if r is None or len(re.findall(re.escape(src) + r"(?![\w.])", text)) != 2:  # defined, and only written
            continue
        kind, inner, assoc, inner_t, outer_t = r.groups()
        if "?" in inner_t or "?" in outer_t or dest_t != f"memref<{outer_t}>":
            continue
        view = f"{dest}_view"
        if kind == "collapse_shape":
            dims = ", ".join(inner_t.split("x")[:-1])
            reshape = (f"{view} = memref.expand_shape {dest} {assoc} output_shape [{dims}] : "
                       f"memref<{outer_t}> into memref<{inner_t}>")
        else:
            reshape = f"{view} = memref.collapse_shape {dest} {assoc} : memref<{outer_t}> into memref<{inner_t}>"
        text = text.replace(m.group(0), f"{reshape}\n    bufferization.materialize_in_destination {inner} in restrict "
                                         f"writable {view} : (tensor<{inner_t}>, memref<{inner_t}>) -> ()")
        changed = True
    return ir.Module.parse(text, ctx) if changed else module


def _drop_fused_checks(module: Any) -> bool:
    """Erase each `linalg.generic` that elementwise fusion left with no use but kept because its
    body stores into the kernel's status (an index check, `Emitter.checked_index`): every use was
    fused into a consumer, which carries the same check, so the leftover is a second pass over the
    whole result (measured: a checked 200000x64 gather into a multiply ran 2-3x as long as the
    unchecked one; with this, the same). The emitters never emit a generic whose result is unused."""
    from mlir import ir

    dead: list[Any] = []

    def stores(op: Any) -> bool:
        found: list[bool] = []

        def inner(o: Any) -> Any:
            if o.name == "memref.store":
                found.append(True)
                return ir.WalkResult.INTERRUPT
            return ir.WalkResult.ADVANCE
        op.walk(inner)
        return bool(found)

    def visit(op: Any) -> Any:
        if op.name != "linalg.generic":
            return ir.WalkResult.ADVANCE
        if all(not any(True for _ in r.uses) for r in op.results) and stores(op):
            dead.append(op)
        return ir.WalkResult.SKIP

    module.operation.walk(visit)
    for op in dead:
        op.erase()
    return bool(dead)


def _message(exc: Exception, diagnostics: list[str]) -> str:
    text = str(exc)
    extra = [d for d in diagnostics if d not in text]
    return text + ("\n" + "\n".join(extra) if extra else "")


def _non_llvm_ops(module: Any, limit: int = 5) -> list[str]:
    """Names of the first ops (at most `limit`, distinct) that are neither
    `builtin.module` nor `llvm.*`: what the translation cannot take."""
    from mlir import ir

    found: list[str] = []

    def visit(op: Any) -> Any:
        name = op.name
        if name != "builtin.module" and not name.startswith("llvm.") and name not in found:
            found.append(name)
            if len(found) >= limit:
                return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def translate_to_llvm_ir(module: Any) -> str:
    """LLVM IR text of an `ir.Module` already in the LLVM dialect (stage translate).

    Raises `LoweringError("translate", …)` if any op other than `builtin.module`
    and `llvm.*` remains: MLIR's `…ToString` helper would crash the process on
    such a module (docs/RELIABILITY.md, bug 4) instead of failing.
    """
    left = _non_llvm_ops(module)
    if left:
        raise LoweringError.at("translate", f"the module is not fully in the LLVM dialect: {', '.join(left)} "
                               "remain; run a pipeline that converts them to llvm.* ops "
                               "(e.g. the default `pipeline_text()`) before translating", str(module))
    capi = _c_api()
    ctx = module.context
    if ctx is not _thread_context.ctx:  # the reused context registered them when it was made
        capi.register(capi.pointer(ctx))
    raw = capi.translate(capi.pointer(module.operation))
    if not raw:
        raise LoweringError.at("translate", "mlirTranslateModuleToLLVMIR returned nothing "
                               "(the module is not fully in the LLVM dialect)", str(module))
    try:
        return ctypes.string_at(raw).decode()
    finally:
        capi.free(raw)


def lower_to_llvm_ir(text: str) -> str:
    """Upstream MLIR text (linalg on tensors) -> LLVM IR text."""
    return translate_to_llvm_ir(run_upstream_pipeline(text))
