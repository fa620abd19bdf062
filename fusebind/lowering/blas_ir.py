"""The BLAS matmul thunk: LLVM IR that calls `cblas_?gemm` on three memref descriptors.

Owns `GEMMS` (per element type: the ILP64 cblas symbol numpy's bundled
OpenBLAS exports, its C element type, the kernel's short name),
`blas_thunk_ir` (the IR text) and `compile_blas_thunk` (that text -> object
code exporting `_mlir_ciface_<name>`).

This is code generation, so it lives in lowering; finding the gemm's address
in the process and linking the object are the runtime's (its backend's
`blas_kernel`). The thunk embeds the address as a constant, so its object
code is valid in one process only and is never put in the object cache.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GEMMS", "Gemm", "blas_thunk_ir", "compile_blas_thunk"]


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

_DESC = "{ ptr, ptr, i64, [2 x i64], [2 x i64] }"  # a rank-2 memref descriptor


def _load(t: str, arg: str, p: str) -> str:
    """Read descriptor `arg` into %<p>.ptr (first element), .d0/.d1 (sizes), .trans
    (111 NoTrans when rows are unit-stride or one column wide, else 112 Trans) and .ld."""
    desc = _DESC
    return f"""
  %{p}.al = getelementptr {desc}, ptr %{arg}, i32 0, i32 1
  %{p}.base = load ptr, ptr %{p}.al
  %{p}.offp = getelementptr {desc}, ptr %{arg}, i32 0, i32 2
  %{p}.off = load i64, ptr %{p}.offp
  %{p}.ptr = getelementptr {t}, ptr %{p}.base, i64 %{p}.off
  %{p}.s0p = getelementptr {desc}, ptr %{arg}, i32 0, i32 3, i64 0
  %{p}.d0 = load i64, ptr %{p}.s0p
  %{p}.s1p = getelementptr {desc}, ptr %{arg}, i32 0, i32 3, i64 1
  %{p}.d1 = load i64, ptr %{p}.s1p
  %{p}.t0p = getelementptr {desc}, ptr %{arg}, i32 0, i32 4, i64 0
  %{p}.st0 = load i64, ptr %{p}.t0p
  %{p}.t1p = getelementptr {desc}, ptr %{arg}, i32 0, i32 4, i64 1
  %{p}.st1 = load i64, ptr %{p}.t1p
  %{p}.unit = icmp eq i64 %{p}.st1, 1
  %{p}.narrow = icmp sle i64 %{p}.d1, 1
  %{p}.rowmajor = or i1 %{p}.unit, %{p}.narrow
  %{p}.trans = select i1 %{p}.rowmajor, i32 111, i32 112
  %{p}.ld.r0 = call i64 @llvm.smax.i64(i64 %{p}.st0, i64 %{p}.d1)
  %{p}.ld.c0 = call i64 @llvm.smax.i64(i64 %{p}.st1, i64 %{p}.d0)
  %{p}.ld.s = select i1 %{p}.rowmajor, i64 %{p}.ld.r0, i64 %{p}.ld.c0
  %{p}.ld = call i64 @llvm.smax.i64(i64 %{p}.ld.s, i64 1)"""


def blas_thunk_ir(elem: str, gemm_address: int, name: str) -> str:
    """LLVM IR of `_mlir_ciface_<name>(A*, B*, C*)`: reads the three rank-2 memref
    descriptors and calls cblas_?gemm(RowMajor, tA, tB, M, N, K, 1, A, lda, B, ldb, 0, C, ldc)
    at `gemm_address`. A transposed (column-unit-stride) operand is passed as Trans; others
    need a unit inner stride."""
    t = GEMMS[elem].ctype
    return f"""declare i64 @llvm.smax.i64(i64, i64)

define void @_mlir_ciface_{name}(ptr %a, ptr %b, ptr %c) {{
{_load(t, "a", "A")}
{_load(t, "b", "B")}
{_load(t, "c", "C")}
  %fn = inttoptr i64 {gemm_address} to ptr
  %ldc = call i64 @llvm.smax.i64(i64 %C.d1, i64 1)
  call void %fn(i32 101, i32 %A.trans, i32 %B.trans, i64 %A.d0, i64 %B.d1, i64 %A.d1, {t} 1.0, ptr %A.ptr, i64 %A.ld, ptr %B.ptr, i64 %B.ld, {t} 0.0, ptr %C.ptr, i64 %ldc)
  ret void
}}
"""


def compile_blas_thunk(elem: str, gemm_address: int) -> tuple[bytes, str]:
    """(object code, exported symbol) of the `elem` thunk calling the gemm at `gemm_address`."""
    from fusebind.lowering.codegen import compile_llvm_ir

    gemm = GEMMS[elem]
    entry = gemm.entry
    return compile_llvm_ir(blas_thunk_ir(elem, gemm_address, f"fb_blas_{gemm.short}"), entry), entry
