"""Static kernels: one per prim op x dtypes x rank (x op attributes), built
through the same path as fused regions and bound under `BindingKey.static(op)`.

Owns: `StaticKernels` (lazy compilation, a memo per session and backend, batch
preparation), `StaticRequest`, and `ensure_static_kernel` (compile if needed,
then bind into the table of a session, under the backend's name). The backend
object (runtime/backend.py, found by name) emits with its fast-math choice,
keys the object cache with its target facts, loads the code, and gives the
BLAS matmul kernel (runtime/blas.py, its thunk's IR: lowering/blas_ir.py).

The ABI of a static kernel is the kernel ABI (docs/KERNEL-ABI.md) with all
dims dynamic. Elementwise kernels take inputs of the output's rank with any
strides: the caller passes `np.broadcast_to` views (stride 0) for broadcast
operands. matmul is OpenBLAS's `cblas_?gemm` (the copy numpy ships in
numpy.libs, ILP64), called from a small LLVM thunk that reads the memref
descriptors (blas.py); integer matmul has no BLAS and uses the generated linalg.matmul.

Must not: be imported by `lowering` or `compiler` (imports flow runtime ->
lowering).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from fusebind.dialect.errors import FusebindError
from fusebind.lowering.backend import DEFAULT_BACKEND
from fusebind.runtime.backend import RuntimeBackend, runtime_backend
from fusebind.lowering import ObjectCache, build_object, emit_linalg, kernel_signature
from fusebind.lowering.build import BuiltObject, find_prebuilt, note_prebuilt, prebuilt_key
from fusebind.lowering.decompose import EMITTED_CLASSES
from fusebind.lowering.emit import CheckedKernel
from fusebind.lowering.blas_ir import BLAS_GEMMS
from fusebind.runtime.blas import StaticKernelError  # re-exported: the static kernels' error
from fusebind.runtime.session import Session, default_session
from fusebind.runtime.table import BindingKey, BindingRow
from fusebind.runtime.dtypes import DType
from fusebind.runtime.kernel import Kernel


@dataclass(frozen=True)
class StaticRequest:
    """One static kernel: `op` (a prim KIND), `dtypes` (inputs then output), `rank` of the output
    (reductions: of the input), and op attributes (`axes`, `keepdims`, `perm`, `predicate`)."""

    op: str
    dtypes: tuple[str, ...]
    rank: int
    attrs: tuple[tuple[str, Any], ...] = ()

    @staticmethod
    def of(op: str, dtypes: Iterable[DType | str], rank: int, **attrs: Any) -> "StaticRequest":
        names = tuple(DType.parse(d).value for d in dtypes)
        frozen = tuple(sorted((k, tuple(v) if isinstance(v, (list, tuple)) else v) for k, v in attrs.items()))
        return StaticRequest(op, names, int(rank), frozen)

    @property
    def caps(self) -> frozenset[str]:
        return frozenset(f"attr:{k}={v}" for k, v in self.attrs)


def _t(rank: int, elem: str) -> str:
    return "tensor<" + "?x" * rank + elem + ">"


def op_text(req: StaticRequest) -> str:
    """A `func.func` holding just the requested prim op, all dims dynamic."""
    attrs = dict(req.attrs)
    *ins, out = req.dtypes
    r = req.rank
    in_ranks = [r] * len(ins)
    out_rank = r
    props = ""
    keyword = ""
    if req.op.startswith("reduce_"):
        axes = sorted({a % r for a in attrs.get("axes", tuple(range(r)))}) if r else []
        keep = bool(attrs.get("keepdims", False))
        out_rank = r if keep else r - len(axes)
        props = f" {{axes = [{', '.join(map(str, axes))}]{', keepdims' if keep else ''}}}"
    elif req.op == "transpose":
        perm = attrs.get("perm", tuple(reversed(range(r))))
        props = f" {{perm = [{', '.join(map(str, perm))}]}}"
    elif req.op == "compare":
        keyword = f" {attrs.get('predicate', 'eq')}"
    elif req.op == "matmul":
        in_ranks, out_rank = [2, 2], 2
    elif req.op in ("reshape", "broadcast_to", "constant"):
        raise StaticKernelError(f"Static({req.op}) has no generated kernel: {req.op} needs static shapes; "
                                "the executor performs it as a numpy view/copy")
    operands = ", ".join(f"%a{i}" for i in range(len(ins)))
    in_types = [_t(k, e) for k, e in zip(in_ranks, ins)]
    sig = in_types[0] if len(in_types) == 1 else f"({', '.join(in_types)})"
    params = ", ".join(f"%a{i}: {t}" for i, t in enumerate(in_types))
    rt = _t(out_rank, out)
    # a built-in op's KIND is its short kind ("add"); a user op's is its full name ("mylib.cube")
    name = req.op if "." in req.op else "prim." + req.op
    return (f"func.func @f({params}) -> {rt} {{\n  %r = {name}{keyword} {operands}{props} : {sig} -> {rt}\n"
            f"  func.return %r : {rt}\n}}\n")


def kernel_name(req: StaticRequest) -> str:
    tag = "_".join(f"{k}{''.join(str(x) for x in (v if isinstance(v, tuple) else (v,)))}" for k, v in req.attrs)
    return "fb_static_" + "_".join(filter(None, [req.op, "_".join(req.dtypes), f"r{req.rank}", tag]))


@dataclass
class StaticKernels:
    """Lazily built static kernels, memoised per (op, dtypes, rank, attrs), made and
    loaded by `backend` (None: the default one); BLAS kernels are `session`'s."""

    cache: ObjectCache | None = None
    backend: RuntimeBackend | None = None
    session: Session | None = None
    _kernels: dict[StaticRequest, Kernel] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def kernel_for(self, req: StaticRequest) -> Kernel:
        with self._lock:
            if req not in self._kernels:
                self._kernels[req] = self._build(req)
            return self._kernels[req]

    def prepare(self, requests: Sequence[StaticRequest]) -> list[Kernel]:
        """Build several kernels; cache misses share one MLIR module and one pass-pipeline run."""
        with self._lock:
            todo = [r for r in dict.fromkeys(requests) if r not in self._kernels and r.op != "matmul"]
            for r in list(todo):
                kernel = self._prebuilt(r)
                if kernel is not None:
                    self._kernels[r] = kernel
                    todo.remove(r)
            if len(todo) > 1:
                self._build_batch(todo)
        return [self.kernel_for(r) for r in requests]

    # -- building ---------------------------------------------------------
    def _backend(self) -> RuntimeBackend:
        return self.backend if self.backend is not None else runtime_backend(DEFAULT_BACKEND)

    def _cache(self) -> ObjectCache:
        from fusebind.lowering.cache import default_cache

        return self.cache if self.cache is not None else default_cache()

    def _emit(self, req: StaticRequest) -> Any:
        from fusebind.dialect import parse_module

        try:
            module = parse_module(op_text(req))
        except FusebindError as exc:  # the request names no valid op signature (IRParseError / IRVerifyError)
            raise StaticKernelError(f"Static({req.op}) has no kernel for dtypes {req.dtypes} rank {req.rank} "
                                    f"attrs {dict(req.attrs)}: {exc}") from None
        op = next(iter(next(iter(module.ops)).body.blocks[0].ops))
        if not getattr(op, "kernel_computable", lambda: True)():
            # integer pow: its exponent is an argument here, which numpy may refuse (negative),
            # and a kernel cannot raise; the executor runs the op's checking reference instead
            raise StaticKernelError(f"Static({req.op}) has no kernel for dtypes {req.dtypes}: {op.name} on "
                                    f"{req.dtypes[0]} must check its exponent, which a kernel cannot report")
        fm = self._backend().fastmath()
        return emit_linalg(next(iter(module.ops)), kernel_name(req), dynamic=True,
                           strided_inputs=req.op != "matmul", fastmath=fm[0] if fm else None,
                           fastmath_defs=fm[1] if fm else None)

    def _prebuilt_key(self, req: StaticRequest) -> str | None:
        """The pre-emission key of `req`'s kernel (lowering/build.py): its op text says exactly
        what is emitted, with the emission options `_emit` passes; None for a request with no text."""
        if not self._cache().enabled:
            return None
        try:
            text = op_text(req)
        except StaticKernelError:
            return None
        return prebuilt_key({"static": kernel_name(req), "text": text, "dynamic": True,
                             "strided": req.op != "matmul"}, self._backend())

    def _prebuilt(self, req: StaticRequest) -> Kernel | None:
        """`req`'s kernel from the object cache without emitting it (noted by an earlier build), or None."""
        found = find_prebuilt(self._cache(), self._prebuilt_key(req), EMITTED_CLASSES)
        if found is None:
            return None
        emitted, built = found
        return self._backend().load(built.object_code, built.symbol,
                                    signature=kernel_signature(emitted.inputs, emitted.outputs))

    def _build(self, req: StaticRequest) -> Kernel:
        backend = self._backend()
        if req.op == "matmul" and req.dtypes[0] in BLAS_GEMMS:  # f16/bf16: through f32 sgemm
            return backend.blas_kernel(req.dtypes[0], self.session)
        kernel = self._prebuilt(req)  # (only a kernel that was built, so never one _emit refuses)
        if kernel is not None:
            return kernel
        emitted = self._emit(req)
        if isinstance(emitted, CheckedKernel):
            # a static kernel is called by plain thunks with no status operand (ABI v1); one that
            # checks indices would be called without its status pointer: the executor runs the
            # op's checking reference instead
            raise StaticKernelError(f"Static({req.op}) has no kernel for dtypes {req.dtypes}: it checks indices, "
                                    "which needs the kernel ABI v2 status operand static kernels do not pass")
        cache = self._cache()
        built = build_object(emitted, cache=cache, key_parts={"static": kernel_name(req)}, backend=backend)
        note_prebuilt(cache, self._prebuilt_key(req), emitted, built, EMITTED_CLASSES)
        return backend.load(built.object_code, built.symbol, signature=kernel_signature(emitted.inputs, emitted.outputs))

    def _build_batch(self, todo: list[StaticRequest]) -> None:
        from fusebind.lowering.cache import CachedObject, cache_key
        from fusebind.lowering.build import target_key_parts

        cache = self._cache()
        backend = self._backend()
        emitted = {r: self._emit(r) for r in todo}
        if any(isinstance(e, CheckedKernel) for e in emitted.values()):
            return  # kernel_for refuses those one by one (see _build)
        target = target_key_parts(backend)
        keys = {r: cache_key(static=kernel_name(r), **target, text=e.text, entry=e.entry)
                for r, e in emitted.items()}
        missing = [r for r in todo if cache.get(keys[r]) is None]
        if len(missing) < 2:
            return  # nothing to share; kernel_for builds (or loads) one by one
        from fusebind.lowering.build import interleave_of
        from fusebind.lowering.codegen import compile_llvm_ir
        from fusebind.lowering.passes import merge_modules
        from fusebind.lowering.pipeline import run_upstream_pipeline, translate_to_llvm_ir

        # one module; the fastmath definitions the kernels share appear once (lowering's merge)
        text = merge_modules([emitted[r].text for r in missing])
        llvm_ir = translate_to_llvm_ir(run_upstream_pipeline(text))
        for r in missing:
            # the interleave build_object gives the same kernel alone (erf/tanh loops: codegen.interleave_count)
            code = compile_llvm_ir(llvm_ir, emitted[r].entry, interleave=interleave_of(emitted[r]))
            if cache.put(keys[r], CachedObject(emitted[r].entry, code)):
                note_prebuilt(cache, self._prebuilt_key(r), emitted[r],
                              BuiltObject(code, emitted[r].entry, False, {}, keys[r]), EMITTED_CLASSES)
            if not cache.enabled:
                self._kernels[r] = backend.load(code, emitted[r].entry, signature=kernel_signature(
                    emitted[r].inputs, emitted[r].outputs))


# --------------------------------------------------------------------------- binding

def default_static_kernels(session: Session | None = None, backend: str = DEFAULT_BACKEND) -> StaticKernels:
    """The static-kernel memo of `backend` in `session` (None: the default session's), made on
    first use: a backend's static kernels are its own (built, keyed and loaded by it)."""
    target = runtime_backend(backend)
    session = session or default_session()
    slot = "static_kernels" if target.name == DEFAULT_BACKEND else f"static_kernels:{target.name}"
    return session.slot(slot, lambda: StaticKernels(backend=target, session=session))


def ensure_static_kernel(op: str, dtypes: Iterable[DType | str], rank: int, *,
                         kernels: StaticKernels | None = None, session: Session | None = None,
                         backend: str = DEFAULT_BACKEND, **attrs: Any) -> BindingRow:
    """Build (on first request) the static kernel for (op, dtypes, rank, attrs) and bind it
    under `BindingKey.static(op)` on `backend` in `session`'s table (None: the global
    one); returns its row. `kernels`: the memo to build with (None: the backend's in
    `session`). Idempotent."""
    req = StaticRequest.of(op, dtypes, rank, **attrs)
    session = session or default_session()
    target = runtime_backend(backend)
    kernel = (kernels or default_static_kernels(session, target.name)).kernel_for(req)
    key = BindingKey.static(op)
    name = target.name

    def bind(builder: Any) -> BindingRow:
        row = builder.find_kernel(key, req.dtypes, name, kernel)
        if row is not None:
            return row
        return builder.bind(key, req.dtypes, name, kernel, caps=req.caps | {f"rank={req.rank}"},
                            source=kernel.source)

    return session.extend_bindings(bind)
