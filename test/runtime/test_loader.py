"""The object loader and the kernels made from object code or shared libraries."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fusebind.runtime import (
    BindingKey,
    BindingTable,
    Kernel,
    KernelSignature,
    ObjectLoadError,
    descriptor_for,
    load_object,
)

# out[i] = exp(a[i]) * b[i] for rank-1 f32 memrefs, following the kernel ABI
# (pointers to {allocated, aligned, offset, sizes[1], strides[1]}); calls libm.
KERNEL_IR = textwrap.dedent(
    r"""
    %md = type { ptr, ptr, i64, [1 x i64], [1 x i64] }
    declare float @expf(float)

    define void @_mlir_ciface_exp_mul(ptr %a, ptr %b, ptr %out) {
    entry:
      %ap = getelementptr %md, ptr %a, i32 0, i32 1
      %ad = load ptr, ptr %ap
      %aop = getelementptr %md, ptr %a, i32 0, i32 2
      %aoff = load i64, ptr %aop
      %ast = getelementptr %md, ptr %a, i32 0, i32 4, i32 0
      %as = load i64, ptr %ast
      %bp = getelementptr %md, ptr %b, i32 0, i32 1
      %bd = load ptr, ptr %bp
      %op = getelementptr %md, ptr %out, i32 0, i32 1
      %od = load ptr, ptr %op
      %np = getelementptr %md, ptr %out, i32 0, i32 3, i32 0
      %n = load i64, ptr %np
      br label %loop
    loop:
      %i = phi i64 [0, %entry], [%i1, %body]
      %c = icmp slt i64 %i, %n
      br i1 %c, label %body, label %done
    body:
      %ai0 = mul i64 %i, %as
      %ai = add i64 %ai0, %aoff
      %pa = getelementptr float, ptr %ad, i64 %ai
      %x = load float, ptr %pa
      %e = call float @expf(float %x)
      %pb = getelementptr float, ptr %bd, i64 %i
      %y = load float, ptr %pb
      %r = fmul float %e, %y
      %po = getelementptr float, ptr %od, i64 %i
      store float %r, ptr %po
      %i1 = add i64 %i, 1
      br label %loop
    done:
      ret void
    }
    """
)

SIG = KernelSignature(inputs=(("f32", 1), ("f32", 1)), outputs=(("f32", 1),))


def _object_code(ir: str = KERNEL_IR) -> bytes:
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    tm = llvm.Target.from_default_triple().create_target_machine(opt=2, codemodel="jitdefault")
    return tm.emit_object(llvm.parse_assembly(ir))


@pytest.fixture(scope="module")
def object_code() -> bytes:
    return _object_code()


def _run(kernel: Kernel, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty(b.shape, np.float32)
    kernel(descriptor_for(a), descriptor_for(b), descriptor_for(out))
    return out


def test_load_object_links_and_runs_abi_kernel(object_code: bytes) -> None:
    loaded = load_object(object_code, "_mlir_ciface_exp_mul")
    assert loaded.address > 0 and loaded.symbol == "_mlir_ciface_exp_mul"
    kernel = Kernel.from_object(object_code, "_mlir_ciface_exp_mul", signature=SIG)
    assert kernel.source == "llvm:" + hashlib.sha256(object_code).hexdigest()[:16]
    a = np.linspace(-2, 2, 37, dtype=np.float32)
    b = np.arange(37, dtype=np.float32)
    np.testing.assert_allclose(_run(kernel, a, b), np.exp(a) * b, rtol=1e-6)
    # Strided input: the kernel honours the descriptor's stride.
    wide = np.linspace(-1, 1, 74, dtype=np.float32)
    np.testing.assert_allclose(_run(kernel, wide[::2], b), np.exp(wide[::2]) * b, rtol=1e-6)


def test_each_load_is_a_distinct_function_pointer(object_code: bytes) -> None:
    k1 = Kernel.from_object(object_code, "_mlir_ciface_exp_mul", signature=SIG)
    k2 = Kernel.from_object(object_code, "_mlir_ciface_exp_mul", signature=SIG)
    assert k1.address != k2.address and k1.source == k2.source
    key = BindingKey.runtime_fused(1 << 16)
    table = BindingTable.empty().with_row(key, SIG.dtypes, "cpu", k1).with_row(key, SIG.dtypes, "cpu", k2)
    assert len(table.lookup(key, SIG.dtypes, "cpu")) == 2


def test_load_object_missing_symbol_and_garbage_are_typed_errors(object_code: bytes) -> None:
    with pytest.raises(ObjectLoadError, match="'_mlir_ciface_nope'"):
        load_object(object_code, "_mlir_ciface_nope")
    with pytest.raises(ObjectLoadError, match="cannot link object code"):
        load_object(b"not an object file", "f")
    with pytest.raises(ObjectLoadError, match="non-empty object code"):
        load_object(b"", "f")


def test_loader_never_imports_mlir(object_code: bytes, tmp_path: Path) -> None:
    obj = tmp_path / "k.o"
    obj.write_bytes(object_code)
    script = textwrap.dedent(
        f"""
        import sys
        from fusebind.runtime import Kernel, KernelSignature
        sig = KernelSignature(inputs=(("f32", 1), ("f32", 1)), outputs=(("f32", 1),))
        k = Kernel.from_object(open({str(obj)!r}, "rb").read(), "_mlir_ciface_exp_mul", signature=sig)
        assert k.address
        print(sorted(m for m in sys.modules if m == "mlir" or m.startswith("mlir.")))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


C_KERNEL = textwrap.dedent(
    """
    #include <stdint.h>
    typedef struct { float *allocated, *aligned; int64_t offset, sizes[1], strides[1]; } md1;
    void add_f32(md1 *a, md1 *b, md1 *out) {
        for (int64_t i = 0; i < out->sizes[0]; ++i)
            out->aligned[out->offset + i * out->strides[0]] =
                a->aligned[a->offset + i * a->strides[0]] + b->aligned[b->offset + i * b->strides[0]];
    }
    """
)


def test_kernel_from_library_compiled_with_cc(c_library) -> None:
    lib = c_library("add", C_KERNEL)
    kernel = Kernel.from_library(lib, "add_f32", signature=SIG)
    assert kernel.source == f"lib:{lib}:add_f32"
    a = np.arange(10, dtype=np.float32)
    b = np.full(10, 0.5, np.float32)
    np.testing.assert_array_equal(_run(kernel, a, b), a + b)


def test_object_kernel_adopted_and_run_through_the_table(object_code: bytes, isolated_bindings) -> None:  # noqa: ANN001
    from fusebind.runtime import adopt_runtime_fused, lookup_runtime_kernel

    t = "tensor<16xf32>"
    region = f"""
%r = fused.region @exp_mul (%a, %b) : ({t}, {t}) -> {t} {{
^bb0(%x: {t}, %y: {t}):
  %e = prim.exp %x : {t} -> {t}
  %m = prim.mul %e, %y : ({t}, {t}) -> {t}
  fused.yield %m : {t}
}}"""
    kernel = Kernel.from_object(object_code, "_mlir_ciface_exp_mul", signature=SIG)
    fid = adopt_runtime_fused("exp_mul", region, kernel, ("f32", "f32", "f32"), "cpu")
    binding = lookup_runtime_kernel(fid, "cpu")
    a = np.linspace(-1, 1, 16, dtype=np.float32)
    b = np.full(16, 3.0, np.float32)
    np.testing.assert_allclose(_run(binding.kernel, a, b), np.exp(a) * b, rtol=1e-6)
