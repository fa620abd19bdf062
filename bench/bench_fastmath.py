"""Throughput of fusebind's fast-math functions at 1e7 float32, single thread.

Candidates, per function, timed interleaved in one process (medians, ratios):
  fastmath     our arith-only approximations (fusebind.lowering.fastmath)
  fastmath512  the same with the kernel marked prefer-vector-width=512 and
               exp's 2**n scaling by llvm.intr.ldexp (the lowering's AVX-512 form)
  libm         math.<fn> lowered to scalar libm calls (the loop stays scalar)
  libmvec      math.<fn> vectorized by LLVM into llvm.<fn>.v8f32, then those
               intrinsics renamed to glibc's libmvec _ZGVdN8v_<fn>f (AVX2)
               and libmvec.so.1 loaded; only exp/log (and sigmoid through
               exp) have an intrinsic to rename, tanh/erf stay scalar libm
  numpy        numpy's float32 ufunc expression
  SOL          a copy kernel with the same reads and writes (speed of light)

Run:  /work/venv/bin/python bench/bench_fastmath.py [--n 10000000] [--repeat 15]

LLVM's own route, llvm.set_option("", "-vector-library=LIBMVEC"), is
process-wide state and had no effect through llvmlite 0.50 here (the loop
still called expf lane by lane), hence the explicit rename.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import statistics
import time
from typing import Callable

import numpy as np

from fusebind.lowering import fastmath

PIPELINE = (
    "builtin.module(linalg-fuse-elementwise-ops,one-shot-bufferize{{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map}},buffer-deallocation-pipeline,"
    "convert-linalg-to-loops,convert-scf-to-cf,convert-math-to-llvm,{libm}expand-strided-metadata,"
    "lower-affine,convert-arith-to-llvm,finalize-memref-to-llvm,convert-func-to-llvm,"
    "convert-cf-to-llvm,reconcile-unrealized-casts)"
)
FUNCS = ["exp", "log", "tanh", "erf"]  # prim.sigmoid is 1/(1+exp(-x)) on the fast exp: no own body


def body(fn: str, variant: str) -> tuple[str, str]:
    """(scalar body computing %r from %a, extra module-level definitions)."""
    if variant.startswith("fastmath"):
        name = fastmath.function_name(fn, "f32")
        # 512: as the lowering builds it on AVX-512 hosts (ldexp scaling: one vscalefps)
        defs = fastmath.definitions([(fn, "f32")], ldexp=variant == "fastmath512")
        return f"%r = func.call @{name}(%a) : (f32) -> f32", defs
    if variant == "copy":
        return "%r = arith.addf %a, %a : f32", ""
    return f"%r = math.{fn} %a : f32", ""


def module_text(fn: str, variant: str) -> str:
    text, defs = body(fn, variant)
    attrs = "llvm.emit_c_interface"
    if variant == "fastmath512":
        attrs += ', passthrough = [["prefer-vector-width", "512"]]'
    mem = "memref<?xf32>"
    return f"""#map = affine_map<(d0) -> (d0)>
module {{
  func.func @kernel(%in: {mem}, %out: {mem}) attributes {{{attrs}}} {{
    linalg.generic {{indexing_maps = [#map, #map], iterator_types = ["parallel"]}}
        ins(%in : {mem}) outs(%out : {mem}) {{
    ^bb0(%a: f32, %b: f32):
      {text}
      linalg.yield %r : f32
    }}
    return
  }}
{defs}}}
"""


def _capsule_pointer(obj: object) -> int:
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
    get_ptr.restype, get_ptr.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    capsule = obj._CAPIPtr  # type: ignore[attr-defined]
    return get_ptr(capsule, get_name(capsule))


def to_llvm_ir(text: str, libm: bool) -> str:
    from mlir import ir, passmanager
    import mlir._mlir_libs as libs

    ctx = ir.Context()
    module = ir.Module.parse(text, ctx)
    pipeline = PIPELINE.format(libm="convert-math-to-libm," if libm else "")
    passmanager.PassManager.parse(pipeline, ctx).run(module.operation)
    capi = ctypes.CDLL(os.path.join(os.path.dirname(libs.__file__), "libMLIRPythonCAPI.so"))
    capi.mlirRegisterAllLLVMTranslations.argtypes = [ctypes.c_void_p]
    capi.mlirRegisterAllLLVMTranslations(_capsule_pointer(ctx))
    capi.mlirTranslateModuleToLLVMIRToString.argtypes = [ctypes.c_void_p]
    capi.mlirTranslateModuleToLLVMIRToString.restype = ctypes.c_void_p
    raw = capi.mlirTranslateModuleToLLVMIRToString(_capsule_pointer(module.operation))
    text_out = ctypes.string_at(raw).decode()
    libc = ctypes.CDLL(None)
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free(raw)
    return text_out


class _Descriptor(ctypes.Structure):
    _fields_ = [
        ("allocated", ctypes.c_void_p),
        ("aligned", ctypes.c_void_p),
        ("offset", ctypes.c_int64),
        ("size", ctypes.c_int64),
        ("stride", ctypes.c_int64),
    ]


class Compiled:
    def __init__(self, fn: str, variant: str) -> None:
        import llvmlite.binding as llvm

        tm = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(),
            features=llvm.get_host_cpu_features().flatten(),
            opt=3,
            codemodel="jitdefault",
        )
        t0 = time.perf_counter()
        mod = llvm.parse_assembly(to_llvm_ir(module_text(fn, variant), libm=variant != "fastmath"))
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
        pb.getModulePassManager().run(mod, pb)
        self.ir = str(mod)
        if variant == "libmvec":
            for name in ("exp", "log"):
                self.ir = self.ir.replace(f"@llvm.{name}.v8f32(", f"@_ZGVdN8v_{name}f(")
            mod = llvm.parse_assembly(self.ir)
        self.engine = llvm.create_mcjit_compiler(mod, tm)
        self.engine.finalize_object()
        self.compile_s = time.perf_counter() - t0
        proto = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Descriptor), ctypes.POINTER(_Descriptor))
        self.call = proto(self.engine.get_function_address("_mlir_ciface_kernel"))
        self.vector_calls = self.ir.count("_ZGV")

    def runner(self, x: np.ndarray, out: np.ndarray) -> Callable[[], None]:
        dx = _Descriptor(x.ctypes.data, x.ctypes.data, 0, x.size, 1)
        do = _Descriptor(out.ctypes.data, out.ctypes.data, 0, out.size, 1)
        px, po = ctypes.byref(dx), ctypes.byref(do)
        return lambda: self.call(px, po)


def numpy_runner(fn: str, x: np.ndarray) -> Callable[[], object] | None:
    with np.errstate(all="ignore"):
        if fn == "erf":
            return None  # numpy has no erf
        return lambda: getattr(np, fn)(x)


def main() -> None:
    import llvmlite.binding as llvm

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()

    rng = np.random.default_rng(0)
    inputs = {
        fn: (rng.uniform(0.01, 10, args.n) if fn == "log" else rng.uniform(-5, 5, args.n)).astype(
            np.float32
        )
        for fn in FUNCS
    }
    compiled: dict[tuple[str, str], Compiled] = {}
    for fn in FUNCS:
        for variant in ("fastmath", "fastmath512", "libm"):
            compiled[(fn, variant)] = Compiled(fn, variant)
    compiled[("copy", "copy")] = Compiled("copy", "copy")

    libmvec = ctypes.util.find_library("mvec")
    if libmvec:
        llvm.load_library_permanently(libmvec)
        for fn in FUNCS:
            compiled[(fn, "libmvec")] = Compiled(fn, "libmvec")

    print(f"n={args.n} float32, single thread, medians of {args.repeat} interleaved runs")
    print(f"{'fn':8} {'variant':12} {'ms':>8} {'x SOL':>7} {'numpy/x':>8} {'vec calls':>9}")
    for fn in FUNCS:
        x = inputs[fn]
        out = np.empty_like(x)
        cands: dict[str, Callable[[], object]] = {
            v: compiled[(fn, v)].runner(x, out)
            for v in ("fastmath", "fastmath512", "libm", "libmvec")
            if (fn, v) in compiled
        }
        cands["SOL(copy)"] = compiled[("copy", "copy")].runner(x, out)
        np_run = numpy_runner(fn, x)
        if np_run is not None:
            cands["numpy"] = np_run
        times: dict[str, list[float]] = {k: [] for k in cands}
        for _ in range(args.repeat):
            for k, run in cands.items():
                t0 = time.perf_counter()
                run()
                times[k].append(time.perf_counter() - t0)
        med = {k: statistics.median(v) for k, v in times.items()}
        sol = med["SOL(copy)"]
        for k, t in med.items():
            ratio_np = f"{med['numpy'] / t:8.2f}" if "numpy" in med else f"{'-':>8}"
            vc = compiled[(fn, k)].vector_calls if (fn, k) in compiled else 0
            print(f"{fn:8} {k:12} {t * 1e3:8.2f} {t / sol:7.2f} {ratio_np} {vc:9d}")


if __name__ == "__main__":
    main()
