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

__all__ = ["BLAS_GEMMS", "GEMMS", "NARROW", "NARROW_GEMMS", "Gemm", "blas_thunk_ir", "compile_blas_thunk",
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


def _load(t: str, arg: str, p: str, transposed: bool = False) -> str:
    """Read descriptor `arg` into %<p>.ptr (first element), .d0/.d1 (sizes), .trans
    (111 NoTrans when rows are unit-stride or one column wide, else 112 Trans) and .ld.
    `transposed`: the operand is the transpose of the array the descriptor holds, read by
    swapping its two sizes and two strides (the view `x.T` is, with no copy): a row-major x
    then comes out as a column-major operand, which the gemm takes as its Trans flag."""
    desc = _DESC
    i0, i1 = (1, 0) if transposed else (0, 1)
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


def blas_thunk_ir(elem: str, gemm_address: int, name: str, trans: tuple[bool, bool] = (False, False)) -> str:
    """LLVM IR of `_mlir_ciface_<name>(A*, B*, C*)`: reads the three rank-2 memref
    descriptors and calls cblas_?gemm(RowMajor, tA, tB, M, N, K, 1, A, lda, B, ldb, 0, C, ldc)
    at `gemm_address`. A transposed (column-unit-stride) operand is passed as Trans; others
    need a unit inner stride. `trans` (for A, B): the thunk computes op(A) @ op(B) with op the
    transpose where set, the descriptor holding the untransposed array (`_load`)."""
    t = GEMMS[elem].ctype
    return f"""declare i64 @llvm.smax.i64(i64, i64)

define void @_mlir_ciface_{name}(ptr %a, ptr %b, ptr %c) {{
{_load(t, "a", "A", trans[0])}
{_load(t, "b", "B", trans[1])}
{_load(t, "c", "C")}
  %fn = inttoptr i64 {gemm_address} to ptr
  %ldc = call i64 @llvm.smax.i64(i64 %C.d1, i64 1)
  call void %fn(i32 101, i32 %A.trans, i32 %B.trans, i64 %A.d0, i64 %B.d1, i64 %A.d1, {t} 1.0, ptr %A.ptr, i64 %A.ld, ptr %B.ptr, i64 %B.ld, {t} 0.0, ptr %C.ptr, i64 %ldc)
  ret void
}}
"""


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


def compile_blas_thunk(elem: str, gemm_address: int, trans: tuple[bool, bool] = (False, False)) -> tuple[bytes, str]:
    """(object code, exported symbol) of the `elem` thunk calling the gemm at `gemm_address`;
    `trans`: which operands it reads transposed (blas_thunk_ir)."""
    from fusebind.lowering.codegen import compile_llvm_ir

    gemm = BLAS_GEMMS[elem]
    name = f"fb_blas_{gemm.short}{trans_suffix(trans)}"
    entry = f"_mlir_ciface_{name}"
    make = narrow_blas_thunk_ir if elem in NARROW else blas_thunk_ir
    return compile_llvm_ir(make(elem, gemm_address, name, tuple(trans)), entry), entry
