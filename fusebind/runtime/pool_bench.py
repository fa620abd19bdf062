"""Microbenchmarks of the native pool (docs/THREADS.md): `python -m fusebind.runtime.pool_bench`.

Prints, as medians and minima of interleaved rounds:
- the hand-off: an empty 2-task job through `fb_pool_run` at width 2 against
  width 1 (the same ctypes call, run serially), and through the parallel
  thunk (`ParallelThunkCall`, 2 chunks of a 128-element call) against one
  plain thunk call;
- an f32 elementwise kernel (y = max(x * 1.5 - 0.5, 0), hand-written LLVM IR,
  memory-bound like the suite's elementwise chains) at 1e4..1e7 elements, one
  plain call against the parallel call on 2 threads, with the chunking the
  steps use (`split_tasks`), and the process's cpu/wall ratio (how much of the
  cores it got: on a busy host a split cannot pay);
- with `--iomp PATH` (a libiomp5.so, not a dependency: measured only), the
  same empty job through `__kmpc_fork_call`.

Must not: be imported by the runtime (a tool; it imports the lowering's codegen).
"""

from __future__ import annotations

import argparse
import ctypes
import time
from typing import Callable

import numpy as np

_KERNEL = """
define void @k(ptr %x, ptr %y) {
entry:
  %xdp = getelementptr i8, ptr %x, i64 8
  %xd = load ptr, ptr %xdp
  %ydp = getelementptr i8, ptr %y, i64 8
  %yd = load ptr, ptr %ydp
  %rp = getelementptr i8, ptr %x, i64 24
  %rows = load i64, ptr %rp
  %cp = getelementptr i8, ptr %x, i64 32
  %cols = load i64, ptr %cp
  %n = mul i64 %rows, %cols
  %none = icmp eq i64 %n, 0
  br i1 %none, label %exit, label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  %xp = getelementptr float, ptr %xd, i64 %i
  %v = load float, ptr %xp
  %a = fmul float %v, 1.5
  %b = fsub float %a, 0.5
  %c = fcmp ogt float %b, 0.0
  %r = select i1 %c, float %b, float 0.0
  %yp = getelementptr float, ptr %yd, i64 %i
  store float %r, ptr %yp
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, %n
  br i1 %more, label %loop, label %exit
exit:
  ret void
}
"""


def _rounds(fns: dict[str, Callable[[], object]], reps: int, rounds: int = 9) -> dict[str, tuple[float, float]]:
    """Median and minimum seconds per call of each fn, rounds interleaved."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            times[name].append((time.perf_counter() - t0) / reps)
    return {k: (float(np.median(v)), min(v)) for k, v in times.items()}


def _us(pair: tuple[float, float]) -> str:
    return f"{pair[0] * 1e6:9.2f} us (min {pair[1] * 1e6:8.2f})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iomp", help="path of a libiomp5.so to measure __kmpc_fork_call against")
    parser.add_argument("--sizes", default="1e4,3e4,65536,1e5,3e5,1e6,1e7")
    args = parser.parse_args(argv)

    from fusebind.lowering.abi import DType, KernelSignature
    from fusebind.lowering.codegen import compile_llvm_ir
    from fusebind.runtime.call import split_tasks
    from fusebind.runtime.kernel import Kernel
    from fusebind.runtime.pool import NativePool, _api, affinity_threads
    from fusebind.runtime.thunk import ParallelThunkCall, ThunkCall

    api = _api()
    pool = NativePool(2)
    print(f"host: {affinity_threads()} CPUs in the affinity mask; pool of 2 threads")
    r = _rounds({"width 1 (serial)": lambda: api.run_c(pool.handle, api.nop, 0, 2, 1),
                 "width 2": lambda: api.run_c(pool.handle, api.nop, 0, 2, 2)}, 3000)
    print(f"empty 2-task job, fb_pool_run via ctypes: width 1 {_us(r['width 1 (serial)'])}  width 2 "
          f"{_us(r['width 2'])}  hand-off {(r['width 2'][0] - r['width 1 (serial)'][0]) * 1e6:.2f} us")
    if args.iomp:
        lib = ctypes.CDLL(args.iomp, mode=ctypes.RTLD_GLOBAL)

        class Ident(ctypes.Structure):
            _fields_ = [("r1", ctypes.c_int32), ("flags", ctypes.c_int32), ("r2", ctypes.c_int32),
                        ("r3", ctypes.c_int32), ("psource", ctypes.c_char_p)]

        ident = Ident(0, 2, 0, 0, b";unknown;unknown;0;0;;")
        fork = lib.__kmpc_fork_call
        fork.restype, fork.argtypes = None, [ctypes.POINTER(Ident), ctypes.c_int32, ctypes.c_void_p]
        lib.omp_set_num_threads(2)
        fork(ctypes.byref(ident), 0, api.nop)  # starts its team
        r2 = _rounds({"iomp": lambda: fork(ctypes.byref(ident), 0, api.nop)}, 3000)
        print(f"empty parallel region, __kmpc_fork_call (2 threads, KMP_BLOCKTIME as set): {_us(r2['iomp'])}")

    sig = KernelSignature(((DType.F32, 2),), ((DType.F32, 2),))
    kernel = Kernel.from_object(compile_llvm_ir(_KERNEL, "k"), "k", signature=sig)
    x = np.ones((2, 64), np.float32)
    out = np.empty_like(x)
    plain = ThunkCall(kernel, [x.shape, x.shape]).released
    par = ParallelThunkCall(kernel, [x.shape, x.shape], pool, 2, 2, [0, 0]).function
    r = _rounds({"plain": lambda: plain(x, out), "par": lambda: par(x, out)}, 3000)
    print(f"128 elements through the thunk: plain {_us(r['plain'])}  parallel (2 chunks, 2 threads) {_us(r['par'])}")

    print("f32 max(x*1.5-0.5, 0), (n/64, 64): one plain call vs the parallel call on 2 threads")
    for n in (int(float(s)) for s in args.sizes.split(",")):
        rows = max(2, n // 64)
        x = np.random.default_rng(0).standard_normal((rows, 64), dtype=np.float32)
        out = np.empty_like(x)
        tasks = max(2, split_tasks(x.size, rows))
        plain = ThunkCall(kernel, [x.shape, x.shape]).released
        par = ParallelThunkCall(kernel, [x.shape, x.shape], pool, tasks, 2, [0, 0]).function
        c0, w0 = time.process_time(), time.perf_counter()
        r = _rounds({"plain": lambda: plain(x, out), "par": lambda: par(x, out)}, max(3, int(2e7 // x.size)))
        load = (time.process_time() - c0) / (time.perf_counter() - w0)
        print(f"  n={x.size:>9d} tasks={tasks:3d}  1 thread {_us(r['plain'])}  2 threads {_us(r['par'])}  "
              f"speed-up {r['plain'][0] / r['par'][0]:5.2f}x (of minima {r['plain'][1] / r['par'][1]:5.2f}x)  "
              f"cpu/wall {load:.2f}")
    pool.close()


if __name__ == "__main__":
    main()
