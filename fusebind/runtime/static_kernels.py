"""Static kernels: one per prim op x dtypes x rank (x op attributes), built
through the same path as fused regions and bound under `BindingKey.static(op)`.

Owns: `StaticKernels` (lazy compilation, a memo per session, batch preparation),
`StaticRequest`, the BLAS-backed matmul thunk, and `ensure_static_kernel`
(compile if needed, then bind into the global table).

The ABI of a static kernel is the kernel ABI (docs/KERNEL-ABI.md) with all
dims dynamic. Elementwise kernels take inputs of the output's rank with any
strides: the caller passes `np.broadcast_to` views (stride 0) for broadcast
operands. matmul is OpenBLAS's `cblas_?gemm` (the copy numpy ships in
numpy.libs, ILP64), called from a small LLVM thunk that reads the memref
descriptors; integer matmul has no BLAS and uses the generated linalg.matmul.

Must not: be imported by `lowering` or `compiler` (imports flow runtime ->
lowering).
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from fusebind.lowering.backend import DEFAULT_BACKEND
from fusebind.dialect.errors import FusebindError
from fusebind.lowering import ObjectCache, build_object, emit_linalg, kernel_signature
from fusebind.lowering.blas_ir import GEMMS, compile_blas_thunk
from fusebind.lowering.build import default_fastmath
from fusebind.runtime.session import Session, default_session
from fusebind.runtime.table import BindingKey, BindingRow
from fusebind.runtime.dtypes import DType, KernelSignature
from fusebind.runtime.kernel import Kernel

BACKEND = DEFAULT_BACKEND


class StaticKernelError(FusebindError, ValueError):
    """A static kernel was requested for a signature that has none."""


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
    """Lazily built static kernels, memoised per (op, dtypes, rank, attrs)."""

    cache: ObjectCache | None = None
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
            if len(todo) > 1:
                self._build_batch(todo)
        return [self.kernel_for(r) for r in requests]

    # -- building ---------------------------------------------------------
    def _cache(self) -> ObjectCache:
        from fusebind.lowering.cache import default_cache

        return self.cache if self.cache is not None else default_cache()

    def _emit(self, req: StaticRequest) -> Any:
        from fusebind.dialect import parse_module

        try:
            module = parse_module(op_text(req))
        except Exception as exc:
            raise StaticKernelError(f"Static({req.op}) has no kernel for dtypes {req.dtypes} rank {req.rank} "
                                    f"attrs {dict(req.attrs)}: {exc}") from None
        op = next(iter(next(iter(module.ops)).body.blocks[0].ops))
        if not getattr(op, "kernel_computable", lambda: True)():
            # integer pow: its exponent is an argument here, which numpy may refuse (negative),
            # and a kernel cannot raise; the executor runs the op's checking reference instead
            raise StaticKernelError(f"Static({req.op}) has no kernel for dtypes {req.dtypes}: {op.name} on "
                                    f"{req.dtypes[0]} must check its exponent, which a kernel cannot report")
        fm = default_fastmath()
        return emit_linalg(next(iter(module.ops)), kernel_name(req), dynamic=True,
                           strided_inputs=req.op != "matmul", fastmath=fm[0] if fm else None,
                           fastmath_defs=fm[1] if fm else None)

    def _build(self, req: StaticRequest) -> Kernel:
        if req.op == "matmul" and req.dtypes[0] in ("f32", "f64"):
            return blas_matmul_kernel(req.dtypes[0])
        emitted = self._emit(req)
        built = build_object(emitted, cache=self._cache(), key_parts={"static": kernel_name(req)})
        return Kernel.from_object(built.object_code, built.symbol,
                                  signature=kernel_signature(emitted.inputs, emitted.outputs))

    def _build_batch(self, todo: list[StaticRequest]) -> None:
        from fusebind.lowering.cache import CachedObject, cache_key
        from fusebind.lowering.build import target_key_parts

        cache = self._cache()
        emitted = {r: self._emit(r) for r in todo}
        keys = {r: cache_key(static=kernel_name(r), **target_key_parts(), text=e.text, entry=e.entry)
                for r, e in emitted.items()}
        missing = [r for r in todo if cache.get(keys[r]) is None]
        if len(missing) < 2:
            return  # nothing to share; kernel_for builds (or loads) one by one
        from fusebind.lowering.codegen import compile_llvm_ir
        from fusebind.lowering.passes import _merge
        from fusebind.lowering.pipeline import run_upstream_pipeline, translate_to_llvm_ir

        # one module; the fastmath definitions the kernels share appear once (lowering's merge)
        text = _merge([emitted[r].text for r in missing])
        llvm_ir = translate_to_llvm_ir(run_upstream_pipeline(text))
        for r in missing:
            code = compile_llvm_ir(llvm_ir, emitted[r].entry)
            cache.put(keys[r], CachedObject(emitted[r].entry, code))
            if not cache.enabled:
                self._kernels[r] = Kernel.from_object(code, emitted[r].entry, signature=kernel_signature(
                    emitted[r].inputs, emitted[r].outputs))


# --------------------------------------------------------------------------- BLAS


def _openblas_path() -> str:
    import numpy

    libs = os.path.join(os.path.dirname(os.path.dirname(numpy.__file__)), "numpy.libs")
    found = sorted(glob.glob(os.path.join(libs, "libscipy_openblas*.so*")))
    if not found:
        raise StaticKernelError(f"no OpenBLAS found in {libs}; numpy wheels ship libscipy_openblas there. "
                                "Install numpy from a wheel, or bind a matmul kernel yourself.")
    return found[0]


def blas_gemm_address(elem: str) -> int:
    """Address of numpy's bundled OpenBLAS cblas_?gemm (ILP64)."""
    symbol = GEMMS[elem].symbol
    lib = ctypes.CDLL(_openblas_path())
    try:
        return ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value or 0
    except AttributeError:
        raise StaticKernelError(f"{_openblas_path()} lacks {symbol}") from None


_blas_lock = threading.Lock()


def blas_matmul_kernel(elem: str, session: Session | None = None) -> Kernel:
    """The BLAS matmul kernel for f32/f64, one per session (None: the default one). Its thunk
    (lowering/blas_ir.py) embeds the gemm's address in this process, so it is not cached."""
    if elem not in GEMMS:
        raise StaticKernelError(f"no BLAS matmul for {elem}; BLAS covers f32 and f64")
    blas_kernels: dict[str, Kernel] = (session or default_session()).slot("blas_kernels", dict)
    with _blas_lock:
        if elem not in blas_kernels:
            code, entry = compile_blas_thunk(elem, blas_gemm_address(elem))
            sig = KernelSignature(((DType(elem), 2), (DType(elem), 2)), ((DType(elem), 2),))
            k = Kernel.from_object(code, entry, signature=sig)
            blas_kernels[elem] = Kernel(k.function, k.signature, k.address, f"blas:{GEMMS[elem].short}", k.keepalive)
        return blas_kernels[elem]


# --------------------------------------------------------------------------- binding

def default_static_kernels(session: Session | None = None) -> StaticKernels:
    """The static-kernel memo of `session` (None: the default session's), made on first use."""
    return (session or default_session()).slot("static_kernels", StaticKernels)


def ensure_static_kernel(op: str, dtypes: Iterable[DType | str], rank: int, *,
                         kernels: StaticKernels | None = None, session: Session | None = None,
                         **attrs: Any) -> BindingRow:
    """Build (on first request) the static kernel for (op, dtypes, rank, attrs) and bind it
    under `BindingKey.static(op)` on `cpu` in `session`'s table (None: the global
    one); returns its row. Idempotent."""
    req = StaticRequest.of(op, dtypes, rank, **attrs)
    session = session or default_session()
    kernel = (kernels or default_static_kernels(session)).kernel_for(req)
    key = BindingKey.static(op)

    def bind(builder: Any) -> BindingRow:
        row = builder.find_kernel(key, req.dtypes, BACKEND, kernel)
        if row is not None:
            return row
        return builder.bind(key, req.dtypes, BACKEND, kernel, caps=req.caps | {f"rank={req.rank}"},
                            source=kernel.source)

    return session.extend_bindings(bind)
