"""The BLAS matmul thunk: LLVM IR that calls `cblas_?gemm` on three memref descriptors.

Owns `GEMMS` (per element type: the ILP64 cblas symbol numpy's bundled
OpenBLAS exports, its C element type, the kernel's short name), `NARROW_GEMMS`
(f16 / bf16: widened to f32 buffers, sgemm, rounded once: `narrow_blas_thunk_ir`),
`blas_thunk_ir` (the IR text) and `compile_blas_thunk` (that text -> object
code exporting `_mlir_ciface_<name>`).

This is code generation, so it lives in lowering; finding the gemm's address
in the process and linking the object are the runtime's (its backend's
`blas_kernel`). The thunk embeds the address as a constant, so its object
code is valid in one process only and is never put in the object cache.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BLAS_GEMMS", "GEMMS", "MAX_BATCH_DIMS", "NARROW", "NARROW_GEMMS", "Gemm", "batched_blas_thunk_ir",
           "blas_gate_ir", "blas_thunk_ir", "compile_batched_blas_thunk", "compile_blas_gate", "compile_blas_thunk",
           "narrow_blas_thunk_ir", "trans_suffix"]


@dataclass(frozen=True)
class Gemm:
    """One cblas gemm: its exported `symbol`, the C element type `ctype`, the `short` name (sgemm)."""

    symbol: str
    ctype: str
    short: str

    @property
    def entry(self) -> str:
        """The thunk's exported symbol."""
        return f"_mlir_ciface_fb_blas_{self.short}"


#: the element types BLAS covers (integer matmul has no BLAS: it uses the generated linalg.matmul)
GEMMS: dict[str, Gemm] = {"f32": Gemm("scipy_cblas_sgemm64_", "float", "sgemm"),
                          "f64": Gemm("scipy_cblas_dgemm64_", "double", "dgemm")}
#: f16 and bf16 up-convert to f32 and call sgemm (`NARROW`): this host's CPUs have no avx512_bf16
#: (nor AVX512-FP16), so there is no native narrow gemm to prefer. The `ctype` is the storage type.
NARROW_GEMMS: dict[str, Gemm] = {"f16": Gemm("scipy_cblas_sgemm64_", "half", "hgemm_via_sgemm"),
                                 "bf16": Gemm("scipy_cblas_sgemm64_", "i16", "bf16gemm_via_sgemm")}
#: every element type with a BLAS matmul kernel (the static kernels' choice)
BLAS_GEMMS: dict[str, Gemm] = {**GEMMS, **NARROW_GEMMS}
#: narrow element -> (LLVM IR widening `%dst = f32 of %src`, narrowing `%dst = narrow of %src`)
NARROW: dict[str, tuple[str, str]] = {
    "f16": ("  %{d} = fpext half %{s} to float", "  %{d} = fptrunc float %{s} to half"),
    # bf16 is the top half of an f32: widening shifts it up; narrowing rounds to nearest even
    # (bias 0x7FFF plus the kept LSB) and keeps a NaN a quiet NaN, as ml_dtypes does
    "bf16": ("  %{d}.z = zext i16 %{s} to i32\n  %{d}.h = shl i32 %{d}.z, 16\n  %{d} = bitcast i32 %{d}.h to float",
             "  %{d}.b = bitcast float %{s} to i32\n  %{d}.l0 = lshr i32 %{d}.b, 16\n  %{d}.l = and i32 %{d}.l0, 1\n"
             "  %{d}.bias = add i32 %{d}.l, 32767\n  %{d}.r0 = add i32 %{d}.b, %{d}.bias\n"
             "  %{d}.r = lshr i32 %{d}.r0, 16\n  %{d}.q = or i32 %{d}.l0, 64\n  %{d}.nan = fcmp uno float %{s}, %{s}\n"
             "  %{d}.s = select i1 %{d}.nan, i32 %{d}.q, i32 %{d}.r\n  %{d} = trunc i32 %{d}.s to i16"),
}

_DESC = "{ ptr, ptr, i64, [2 x i64], [2 x i64] }"  # a rank-2 memref descriptor


def _desc(rank: int) -> str:
    return f"{{ ptr, ptr, i64, [{rank} x i64], [{rank} x i64] }}"


def _load(t: str, arg: str, p: str, transposed: bool = False, rank: int = 2) -> str:
    """Read descriptor `arg` into %<p>.ptr (first element), .d0/.d1 (sizes), .trans
    (111 NoTrans when rows are unit-stride or one column wide, else 112 Trans) and .ld.
    `transposed`: the operand is the transpose of the array the descriptor holds, read by
    swapping its two sizes and two strides (the view `x.T` is, with no copy): a row-major x
    then comes out as a column-major operand, which the gemm takes as its Trans flag.
    `rank` > 2: the matrix is the descriptor's last two dims (a batched operand)."""
    desc = _desc(rank)
    i0, i1 = (rank - 1, rank - 2) if transposed else (rank - 2, rank - 1)
    return f"""
  %{p}.al = getelementptr {desc}, ptr %{arg}, i32 0, i32 1
  %{p}.base = load ptr, ptr %{p}.al
  %{p}.offp = getelementptr {desc}, ptr %{arg}, i32 0, i32 2
  %{p}.off = load i64, ptr %{p}.offp
  %{p}.ptr = getelementptr {t}, ptr %{p}.base, i64 %{p}.off
  %{p}.s0p = getelementptr {desc}, ptr %{arg}, i32 0, i32 3, i64 {i0}
  %{p}.d0 = load i64, ptr %{p}.s0p
  %{p}.s1p = getelementptr {desc}, ptr %{arg}, i32 0, i32 3, i64 {i1}
  %{p}.d1 = load i64, ptr %{p}.s1p
  %{p}.t0p = getelementptr {desc}, ptr %{arg}, i32 0, i32 4, i64 {i0}
  %{p}.st0 = load i64, ptr %{p}.t0p
  %{p}.t1p = getelementptr {desc}, ptr %{arg}, i32 0, i32 4, i64 {i1}
  %{p}.st1 = load i64, ptr %{p}.t1p
  %{p}.unit = icmp eq i64 %{p}.st1, 1
  %{p}.narrow = icmp sle i64 %{p}.d1, 1
  %{p}.rowmajor = or i1 %{p}.unit, %{p}.narrow
  %{p}.trans = select i1 %{p}.rowmajor, i32 111, i32 112
  %{p}.ld.r0 = call i64 @llvm.smax.i64(i64 %{p}.st0, i64 %{p}.d1)
  %{p}.ld.c0 = call i64 @llvm.smax.i64(i64 %{p}.st1, i64 %{p}.d0)
  %{p}.ld.s = select i1 %{p}.rowmajor, i64 %{p}.ld.r0, i64 %{p}.ld.c0
  %{p}.ld = call i64 @llvm.smax.i64(i64 %{p}.ld.s, i64 1)"""


def blas_thunk_ir(elem: str, gemm_address: int, name: str, trans: tuple[bool, bool] = (False, False),
                  gate: tuple[int, int, int] | None = None) -> str:
    """LLVM IR of `_mlir_ciface_<name>(A*, B*, C*)`: reads the three rank-2 memref
    descriptors and calls cblas_?gemm(RowMajor, tA, tB, M, N, K, 1, A, lda, B, ldb, 0, C, ldc)
    at `gemm_address`. A transposed (column-unit-stride) operand is passed as Trans; others
    need a unit inner stride. `trans` (for A, B): the thunk computes op(A) @ op(B) with op the
    transpose where set, the descriptor holding the untransposed array (`_load`).
    `gate` (enter, leave addresses, n): the gemm runs between enter(n) and leave(n) of the BLAS
    thread gate (`blas_gate_ir`): at most n BLAS threads, fewer when another open request asks."""
    t = GEMMS[elem].ctype
    enter = leave = ""
    if gate is not None:
        enter = f"  %genter = inttoptr i64 {gate[0]} to ptr\n  call void %genter(i32 {gate[2]})"
        leave = f"  %gleave = inttoptr i64 {gate[1]} to ptr\n  call void %gleave(i32 {gate[2]})"
    return f"""declare i64 @llvm.smax.i64(i64, i64)

define void @_mlir_ciface_{name}(ptr %a, ptr %b, ptr %c) {{
{_load(t, "a", "A", trans[0])}
{_load(t, "b", "B", trans[1])}
{_load(t, "c", "C")}
  %fn = inttoptr i64 {gemm_address} to ptr
  %ldc = call i64 @llvm.smax.i64(i64 %C.d1, i64 1)
{enter}
  call void %fn(i32 101, i32 %A.trans, i32 %B.trans, i64 %A.d0, i64 %B.d1, i64 %A.d1, {t} 1.0, ptr %A.ptr, i64 %A.ld, ptr %B.ptr, i64 %B.ld, {t} 0.0, ptr %C.ptr, i64 %ldc)
{leave}
  ret void
}}
"""


#: batch dims a batched thunk takes (its env holds this many sizes and strides per operand)
MAX_BATCH_DIMS = 8
#: env slots (i64) of the batched thunk: pointers, matrix sizes, then sizes / strides per batch dim
_ENV = {"a": 0, "b": 1, "c": 2, "nbd": 3, "m": 4, "n": 5, "k": 6, "lda": 7, "ldb": 8, "ldc": 9, "ta": 10,
        "tb": 11, "csize": 12, "astr": 12 + MAX_BATCH_DIMS, "bstr": 12 + 2 * MAX_BATCH_DIMS,
        "cstr": 12 + 3 * MAX_BATCH_DIMS}
_ENV_SLOTS = 12 + 4 * MAX_BATCH_DIMS


def _env_store(value: str, slot: int, ty: str = "i64") -> str:
    return (f"  %e.{slot}.{value.lstrip('%').replace('.', '_')} = getelementptr [{_ENV_SLOTS} x i64], ptr %env, i64 0, "
            f"i64 {slot}\n  store {ty} {value}, ptr %e.{slot}.{value.lstrip('%').replace('.', '_')}")


def _batch_dims(arg: str, p: str, rank: int, nbd: int, slot: str) -> list[str]:
    """Store operand `arg`'s stride for each of the output's `nbd` batch dims into env[slot + k]:
    0 where the operand broadcasts (its dim is 1, or it has fewer batch dims: numpy's rule)."""
    lines, pad = [], nbd - (rank - 2)
    for k in range(nbd):
        j = k - pad
        if j < 0:
            lines.append(_env_store("0", _ENV[slot] + k))
            continue
        lines += [f"  %{p}.bs{k}p = getelementptr {_desc(rank)}, ptr %{arg}, i32 0, i32 3, i64 {j}",
                  f"  %{p}.bs{k} = load i64, ptr %{p}.bs{k}p",
                  f"  %{p}.bt{k}p = getelementptr {_desc(rank)}, ptr %{arg}, i32 0, i32 4, i64 {j}",
                  f"  %{p}.bt{k} = load i64, ptr %{p}.bt{k}p",
                  f"  %{p}.b1{k} = icmp eq i64 %{p}.bs{k}, 1",
                  f"  %{p}.bx{k} = select i1 %{p}.b1{k}, i64 0, i64 %{p}.bt{k}",
                  _env_store(f"%{p}.bx{k}", _ENV[slot] + k)]
    return lines


def batched_blas_thunk_ir(elem: str, gemm_address: int, name: str, ranks: tuple[int, int, int],
                          trans: tuple[bool, bool] = (False, False), *, pool: tuple[int, int, int] | None = None,
                          gate: tuple[int, int] | None = None, min_work: int = 1 << 17) -> str:
    """LLVM IR of `_mlir_ciface_<name>(A*, B*, C*)`: a batched matmul, C[i] = op(A[i]) @ op(B[i])
    over C's batch dims (numpy's broadcasting: an operand's batch dim of 1, or a missing one, is
    read with stride 0), one cblas_?gemm per batch entry, all in this one native call.
    `ranks`: of A, B, C (C's rank is the largest; 3 <= rank <= 2 + MAX_BATCH_DIMS).
    `pool` (run address, pool handle, width > 1): when there are >= 2 entries and
    M*N*K*entries >= `min_work` multiply-adds, the entries are the tasks of one parallel-for on
    the native pool (runtime/pool.py `fb_pool_run`), each gemm at one BLAS thread: `gate`
    (enter, exit addresses, `blas_gate_ir`) holds OpenBLAS at 1 thread for the job. Otherwise
    the entries run in order on the calling thread at the BLAS count in force."""
    t = GEMMS[elem].ctype
    ra, rb, rc = ranks
    nbd = rc - 2
    if not (max(ra, rb) == rc and min(ra, rb) >= 2 and 1 <= nbd <= MAX_BATCH_DIMS):
        raise ValueError(f"batched thunk ranks {ranks}: C has the largest rank, 3..{2 + MAX_BATCH_DIMS}")
    e = _ENV
    setup = [_load(t, "a", "A", trans[0], ra), _load(t, "b", "B", trans[1], rb), _load(t, "c", "C", False, rc),
             _env_store("%A.ptr", e["a"], "ptr"), _env_store("%B.ptr", e["b"], "ptr"),
             _env_store("%C.ptr", e["c"], "ptr"), _env_store(str(nbd), e["nbd"]), _env_store("%A.d0", e["m"]),
             _env_store("%B.d1", e["n"]), _env_store("%A.d1", e["k"]), _env_store("%A.ld", e["lda"]),
             _env_store("%B.ld", e["ldb"]), "  %ldc = call i64 @llvm.smax.i64(i64 %C.d1, i64 1)",
             _env_store("%ldc", e["ldc"]), "  %ta = zext i32 %A.trans to i64", "  %tb = zext i32 %B.trans to i64",
             _env_store("%ta", e["ta"]), _env_store("%tb", e["tb"])]
    setup += _batch_dims("a", "A", ra, nbd, "astr") + _batch_dims("b", "B", rb, nbd, "bstr")
    setup += _batch_dims("c", "C", rc, nbd, "cstr")
    nb = "1"
    for k in range(nbd):
        setup += [f"  %C.cs{k}p = getelementptr {_desc(rc)}, ptr %c, i32 0, i32 3, i64 {k}",
                  f"  %C.cs{k} = load i64, ptr %C.cs{k}p", _env_store(f"%C.cs{k}", e["csize"] + k),
                  f"  %nb{k} = mul i64 {nb}, %C.cs{k}"]
        nb = f"%nb{k}"
    if pool is not None and pool[2] > 1 and gate is not None:
        run, handle, width = pool
        enter, leave = gate
        dispatch = f"""  %work0 = mul i64 %A.d0, %B.d1
  %work1 = mul i64 %work0, %A.d1
  %work = mul i64 %work1, {nb}
  %many = icmp sge i64 {nb}, 2
  %big = icmp sge i64 %work, {min_work}
  %par = and i1 %many, %big
  br i1 %par, label %parallel, label %ser.pre
parallel:
  %enter = inttoptr i64 {enter} to ptr
  call void %enter(i32 1)
  %run = inttoptr i64 {run} to ptr
  %pool = inttoptr i64 {handle} to ptr
  call void %run(ptr %pool, ptr @fb_bgemm_task, ptr %env, i64 {nb}, i32 {width})
  %leave = inttoptr i64 {leave} to ptr
  call void %leave(i32 1)
  ret void"""
    else:
        dispatch = "  br label %ser.pre"
    body = "\n".join(setup)
    ld = lambda slot, v: (f"  %{v}.p = getelementptr [{_ENV_SLOTS} x i64], ptr %env, i64 0, i64 {slot}\n"
                          f"  %{v} = load i64, ptr %{v}.p")
    per_dim = []
    for op in ("a", "b", "c"):
        per_dim += [f"  %{op}.si = add i64 %dn, {e[op + 'str']}",
                    f"  %{op}.sp = getelementptr [{_ENV_SLOTS} x i64], ptr %env, i64 0, i64 %{op}.si",
                    f"  %{op}.s = load i64, ptr %{op}.sp", f"  %{op}.d = mul i64 %idx, %{op}.s",
                    f"  %o{op}1 = add i64 %o{op}, %{op}.d"]
    loads = "\n".join(ld(e[k], k) for k in ("m", "n", "k", "lda", "ldb", "ldc", "ta", "tb"))
    return f"""declare i64 @llvm.smax.i64(i64, i64)

define internal void @fb_bgemm_task(ptr %env, i64 %i) {{
entry:
{ld(e["nbd"], "nbd")}
  br label %loop
loop:
  %d = phi i64 [%nbd, %entry], [%dn, %body]
  %rem = phi i64 [%i, %entry], [%rem1, %body]
  %oa = phi i64 [0, %entry], [%oa1, %body]
  %ob = phi i64 [0, %entry], [%ob1, %body]
  %oc = phi i64 [0, %entry], [%oc1, %body]
  %more = icmp sgt i64 %d, 0
  br i1 %more, label %body, label %call
body:
  %dn = sub i64 %d, 1
  %csi = add i64 %dn, {e["csize"]}
  %csp = getelementptr [{_ENV_SLOTS} x i64], ptr %env, i64 0, i64 %csi
  %cs = load i64, ptr %csp
  %idx = urem i64 %rem, %cs
  %rem1 = udiv i64 %rem, %cs
{chr(10).join(per_dim)}
  br label %loop
call:
{loads}
  %pap = getelementptr [{_ENV_SLOTS} x i64], ptr %env, i64 0, i64 {e["a"]}
  %pa0 = load ptr, ptr %pap
  %pbp = getelementptr [{_ENV_SLOTS} x i64], ptr %env, i64 0, i64 {e["b"]}
  %pb0 = load ptr, ptr %pbp
  %pcp = getelementptr [{_ENV_SLOTS} x i64], ptr %env, i64 0, i64 {e["c"]}
  %pc0 = load ptr, ptr %pcp
  %pa = getelementptr {t}, ptr %pa0, i64 %oa
  %pb = getelementptr {t}, ptr %pb0, i64 %ob
  %pc = getelementptr {t}, ptr %pc0, i64 %oc
  %ta32 = trunc i64 %ta to i32
  %tb32 = trunc i64 %tb to i32
  %fn = inttoptr i64 {gemm_address} to ptr
  call void %fn(i32 101, i32 %ta32, i32 %tb32, i64 %m, i64 %n, i64 %k, {t} 1.0, ptr %pa, i64 %lda, ptr %pb, i64 %ldb, {t} 0.0, ptr %pc, i64 %ldc)
  ret void
}}

define void @_mlir_ciface_{name}(ptr %a, ptr %b, ptr %c) {{
entry:
  %env = alloca [{_ENV_SLOTS} x i64], align 8
{body}
{dispatch}
ser.pre:
  br label %ser
ser:
  %si = phi i64 [0, %ser.pre], [%si1, %ser.body]
  %sc = icmp slt i64 %si, {nb}
  br i1 %sc, label %ser.body, label %done
ser.body:
  call void @fb_bgemm_task(ptr %env, i64 %si)
  %si1 = add i64 %si, 1
  br label %ser
done:
  ret void
}}
"""


def blas_gate_ir(get_address: int, set_address: int, max_threads: int = 64) -> str:
    """LLVM IR of the process's BLAS thread gate: `fb_blas_gate_api(out)` writes the addresses of
    `enter(i32 n)` and `leave(i32 n)` to out[0], out[1]. While any enter(n) is not yet left, in any
    thread, OpenBLAS runs at the smallest such n (clamped to 1..`max_threads`), never above the
    count the first enter found (OpenBLAS's own: the CPUs it may use); the last leave restores
    that count. State: a spin lock, the open count, the saved
    count and one counter per n, in one internal global; the BLAS get/set are called under the
    lock so two threads never interleave them."""
    slots = max_threads + 4  # 0 lock, 1 open, 2 saved, 3.. counts[n] at 3 + n
    g = f"[{slots} x i32]"
    return f"""@st = internal global {g} zeroinitializer, align 64

define internal void @lock() {{
entry:
  br label %try
try:
  %p = cmpxchg ptr @st, i32 0, i32 1 acquire monotonic
  %ok = extractvalue {{ i32, i1 }} %p, 1
  br i1 %ok, label %done, label %try
done:
  ret void
}}

define internal void @unlock() {{
  store atomic i32 0, ptr @st release, align 4
  ret void
}}

define internal i32 @clamp(i32 %n) {{
  %lo = icmp slt i32 %n, 1
  %n1 = select i1 %lo, i32 1, i32 %n
  %hi = icmp sgt i32 %n1, {max_threads}
  %n2 = select i1 %hi, i32 {max_threads}, i32 %n1
  ret i32 %n2
}}

; set OpenBLAS to the smallest open n, or to the saved count when none is open (under the lock)
define internal void @apply() {{
entry:
  %openp = getelementptr {g}, ptr @st, i64 0, i64 1
  %open = load i32, ptr %openp
  %svp = getelementptr {g}, ptr @st, i64 0, i64 2
  %sv = load i32, ptr %svp
  %none = icmp eq i32 %open, 0
  br i1 %none, label %saved, label %scan
saved:
  br label %set
scan:
  %n = phi i32 [1, %entry], [%n1, %next]
  %ci = add i32 %n, 3
  %cp = getelementptr {g}, ptr @st, i64 0, i32 %ci
  %cnt = load i32, ptr %cp
  %hit = icmp sgt i32 %cnt, 0
  %last = icmp sge i32 %n, {max_threads}
  %stop = or i1 %hit, %last
  br i1 %stop, label %set, label %next
next:
  %n1 = add i32 %n, 1
  br label %scan
set:
  %want0 = phi i32 [%sv, %saved], [%n, %scan]
  %above = icmp sgt i32 %want0, %sv
  %want = select i1 %above, i32 %sv, i32 %want0
  %get = inttoptr i64 {get_address} to ptr
  %now = call i32 %get()
  %same = icmp eq i32 %now, %want
  br i1 %same, label %out, label %do
do:
  %setf = inttoptr i64 {set_address} to ptr
  call void %setf(i32 %want)
  br label %out
out:
  ret void
}}

define internal void @enter(i32 %n0) {{
entry:
  %n = call i32 @clamp(i32 %n0)
  call void @lock()
  %openp = getelementptr {g}, ptr @st, i64 0, i64 1
  %open = load i32, ptr %openp
  %first = icmp eq i32 %open, 0
  br i1 %first, label %save, label %count
save:
  %get = inttoptr i64 {get_address} to ptr
  %now = call i32 %get()
  %svp = getelementptr {g}, ptr @st, i64 0, i64 2
  store i32 %now, ptr %svp
  br label %count
count:
  %open1 = add i32 %open, 1
  store i32 %open1, ptr %openp
  %ci = add i32 %n, 3
  %cp = getelementptr {g}, ptr @st, i64 0, i32 %ci
  %cnt = load i32, ptr %cp
  %cnt1 = add i32 %cnt, 1
  store i32 %cnt1, ptr %cp
  call void @apply()
  call void @unlock()
  ret void
}}

define internal void @leave(i32 %n0) {{
entry:
  %n = call i32 @clamp(i32 %n0)
  call void @lock()
  %openp = getelementptr {g}, ptr @st, i64 0, i64 1
  %open = load i32, ptr %openp
  %open1 = sub i32 %open, 1
  store i32 %open1, ptr %openp
  %ci = add i32 %n, 3
  %cp = getelementptr {g}, ptr @st, i64 0, i32 %ci
  %cnt = load i32, ptr %cp
  %cnt1 = sub i32 %cnt, 1
  store i32 %cnt1, ptr %cp
  call void @apply()
  call void @unlock()
  ret void
}}

define void @fb_blas_gate_api(ptr %out) {{
  store ptr @enter, ptr %out
  %o1 = getelementptr ptr, ptr %out, i64 1
  store ptr @leave, ptr %o1
  ret void
}}
"""


def compile_blas_gate(get_address: int, set_address: int) -> tuple[bytes, str]:
    """(object code, exported symbol) of the BLAS thread gate (`blas_gate_ir`)."""
    from fusebind.lowering.codegen import compile_llvm_ir

    return compile_llvm_ir(blas_gate_ir(get_address, set_address), "fb_blas_gate_api"), "fb_blas_gate_api"


def compile_batched_blas_thunk(elem: str, gemm_address: int, ranks: tuple[int, int, int],
                               trans: tuple[bool, bool] = (False, False), *, pool: tuple[int, int, int] | None = None,
                               gate: tuple[int, int] | None = None) -> tuple[bytes, str]:
    """(object code, exported symbol) of the batched thunk (`batched_blas_thunk_ir`)."""
    from fusebind.lowering.codegen import compile_llvm_ir

    width = pool[2] if pool is not None and gate is not None else 1
    name = f"fb_bblas_{GEMMS[elem].short}_{''.join(map(str, ranks))}{trans_suffix(trans)}_w{width}"
    entry = f"_mlir_ciface_{name}"
    ir = batched_blas_thunk_ir(elem, gemm_address, name, tuple(ranks), tuple(trans), pool=pool, gate=gate)
    return compile_llvm_ir(ir, entry), entry


def _copy_loop(p: str, rows: str, cols: str, body: list[str]) -> str:
    """A row-major loop nest over [0, rows) x [0, cols) with induction variables %<p>.i, %<p>.j;
    `body` may use them (it runs once per element, in order)."""
    inner = "\n".join(body)
    return f"""
  br label %{p}.ih
{p}.ih:
  %{p}.i = phi i64 [0, %{p}.pre], [%{p}.i1, %{p}.ie]
  %{p}.ic = icmp slt i64 %{p}.i, %{rows}
  br i1 %{p}.ic, label %{p}.jpre, label %{p}.done
{p}.jpre:
  br label %{p}.jh
{p}.jh:
  %{p}.j = phi i64 [0, %{p}.jpre], [%{p}.j1, %{p}.jb]
  %{p}.jc = icmp slt i64 %{p}.j, %{cols}
  br i1 %{p}.jc, label %{p}.jb, label %{p}.ie
{p}.jb:
{inner}
  %{p}.j1 = add i64 %{p}.j, 1
  br label %{p}.jh
{p}.ie:
  %{p}.i1 = add i64 %{p}.i, 1
  br label %{p}.ih
{p}.done:"""


def _widen(elem: str, src: str, dst: str, rows: str, cols: str) -> str:
    """Copy the narrow strided operand %<src> into the contiguous f32 buffer %<dst>.buf."""
    t = NARROW_GEMMS[elem].ctype
    widen = NARROW[elem][0].format(d=f"{dst}.w", s=f"{dst}.v")
    body = [f"  %{dst}.a0 = mul i64 %{src}.st0, %{dst}.i", f"  %{dst}.a1 = mul i64 %{src}.st1, %{dst}.j",
            f"  %{dst}.a = add i64 %{dst}.a0, %{dst}.a1", f"  %{dst}.p = getelementptr {t}, ptr %{src}.ptr, i64 %{dst}.a",
            f"  %{dst}.v = load {t}, ptr %{dst}.p", widen,
            f"  %{dst}.o0 = mul i64 %{dst}.i, %{cols}", f"  %{dst}.o = add i64 %{dst}.o0, %{dst}.j",
            f"  %{dst}.q = getelementptr float, ptr %{dst}.buf, i64 %{dst}.o", f"  store float %{dst}.w, ptr %{dst}.q"]
    return f"  br label %{dst}.pre\n{dst}.pre:" + _copy_loop(dst, rows, cols, body)


def narrow_blas_thunk_ir(elem: str, gemm_address: int, name: str, trans: tuple[bool, bool] = (False, False)) -> str:
    """LLVM IR of `_mlir_ciface_<name>(A*, B*, C*)` for a narrow float (f16, bf16): A (M x K) and
    B (K x N), any strides, are widened into contiguous f32 buffers, sgemm computes C in f32
    (f32 accumulation), and each element of C is rounded once to `elem` (round to nearest even)."""
    t = NARROW_GEMMS[elem].ctype
    narrow = NARROW[elem][1].format(d="cn.n", s="cn.v")
    store = ["  %cn.o0 = mul i64 %cn.i, %C.d1", "  %cn.o = add i64 %cn.o0, %cn.j",
             "  %cn.p = getelementptr float, ptr %cbuf, i64 %cn.o", "  %cn.v = load float, ptr %cn.p", narrow,
             "  %cn.a0 = mul i64 %C.st0, %cn.i", "  %cn.a1 = mul i64 %C.st1, %cn.j", "  %cn.a = add i64 %cn.a0, %cn.a1",
             f"  %cn.q = getelementptr {t}, ptr %C.ptr, i64 %cn.a", f"  store {t} %cn.n, ptr %cn.q"]
    return f"""declare i64 @llvm.smax.i64(i64, i64)
declare ptr @malloc(i64)
declare void @free(ptr)

define void @_mlir_ciface_{name}(ptr %a, ptr %b, ptr %c) {{
entry:
{_load(t, "a", "A", trans[0])}
{_load(t, "b", "B", trans[1])}
{_load(t, "c", "C")}
  %na = mul i64 %A.d0, %A.d1
  %nb = mul i64 %B.d0, %B.d1
  %nc = mul i64 %C.d0, %C.d1
  %sa = shl i64 %na, 2
  %sb = shl i64 %nb, 2
  %sc = shl i64 %nc, 2
  %sa1 = call i64 @llvm.smax.i64(i64 %sa, i64 4)
  %sb1 = call i64 @llvm.smax.i64(i64 %sb, i64 4)
  %sc1 = call i64 @llvm.smax.i64(i64 %sc, i64 4)
  %wa.buf = call ptr @malloc(i64 %sa1)
  %wb.buf = call ptr @malloc(i64 %sb1)
  %cbuf = call ptr @malloc(i64 %sc1)
{_widen(elem, "A", "wa", "A.d0", "A.d1")}
{_widen(elem, "B", "wb", "B.d0", "B.d1")}
  %fn = inttoptr i64 {gemm_address} to ptr
  %lda = call i64 @llvm.smax.i64(i64 %A.d1, i64 1)
  %ldb = call i64 @llvm.smax.i64(i64 %B.d1, i64 1)
  %ldc = call i64 @llvm.smax.i64(i64 %C.d1, i64 1)
  call void %fn(i32 101, i32 111, i32 111, i64 %A.d0, i64 %B.d1, i64 %A.d1, float 1.0, ptr %wa.buf, i64 %lda, ptr %wb.buf, i64 %ldb, float 0.0, ptr %cbuf, i64 %ldc)
  br label %cn.pre
cn.pre:{_copy_loop("cn", "C.d0", "C.d1", store)}
  call void @free(ptr %wa.buf)
  call void @free(ptr %wb.buf)
  call void @free(ptr %cbuf)
  ret void
}}
"""


def trans_suffix(trans: tuple[bool, bool]) -> str:
    """The name suffix of a thunk variant: '' for (False, False), else '_tn', '_nt' or '_tt'."""
    return "" if not any(trans) else "_" + "".join("t" if t else "n" for t in trans)


def compile_blas_thunk(elem: str, gemm_address: int, trans: tuple[bool, bool] = (False, False),
                       gate: tuple[int, int, int] | None = None) -> tuple[bytes, str]:
    """(object code, exported symbol) of the `elem` thunk calling the gemm at `gemm_address`;
    `trans`: which operands it reads transposed; `gate`: f32/f64 only (blas_thunk_ir)."""
    from fusebind.lowering.codegen import compile_llvm_ir

    gemm = BLAS_GEMMS[elem]
    name = f"fb_blas_{gemm.short}{trans_suffix(trans)}" + (f"_g{gate[2]}" if gate is not None else "")
    entry = f"_mlir_ciface_{name}"
    if elem in NARROW:
        ir = narrow_blas_thunk_ir(elem, gemm_address, name, tuple(trans))
    else:
        ir = blas_thunk_ir(elem, gemm_address, name, tuple(trans), gate)
    return compile_llvm_ir(ir, entry), entry
