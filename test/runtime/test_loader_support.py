"""The compiler-runtime functions the loader gives every kernel (loader.SUPPORT_IR): `__truncsfbf2`
rounds like ml_dtypes, and kernels that call it link (they ran arm 0 with "Symbols not found")."""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np

import fusebind as fb
from fusebind.lowering.codegen import compile_llvm_ir
from fusebind.runtime.loader import load_object

CALLER = """
declare bfloat @__truncsfbf2(float)

define void @round_all(ptr %in, ptr %out, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %p = getelementptr float, ptr %in, i64 %i
  %x = load float, ptr %p
  %b = call bfloat @__truncsfbf2(float %x)
  %q = getelementptr bfloat, ptr %out, i64 %i
  store bfloat %b, ptr %q
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
"""


def test_truncsfbf2_rounds_every_float_as_ml_dtypes_does() -> None:
    specials = np.array([0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 3.0e38, -3.0e38, 1e-40, -1e-40, 1e-45],
                        np.float32).view(np.uint32)
    ties = np.array([0x3F808000, 0x3F818000, 0x3F80_7FFF, 0x3F80_8001, 0x7F7F_8000, 0x0000_8000], np.uint32)
    nans = np.array([0x7FC0_0000, 0xFFC0_0000, 0x7F80_0001, 0xFF80_0001, 0x7FFF_FFFF], np.uint32)
    bits = np.concatenate([specials, ties, nans, np.random.default_rng(0).integers(0, 1 << 32, 100_000,
                                                                                     dtype=np.uint32)])
    x = bits.view(np.float32)
    out = np.zeros(x.size, np.uint16)
    loaded = load_object(compile_llvm_ir(CALLER, "round_all"), "round_all")
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(loaded.address)
    fn(x.ctypes.data, out.ctypes.data, x.size)
    with np.errstate(invalid="ignore"):  # (the NaNs' cast)
        want = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    nan = np.isnan(x)
    np.testing.assert_array_equal(out[~nan], want[~nan])
    got = out[nan].view(ml_dtypes.bfloat16).astype(np.float32)
    assert np.isnan(got).all() and (np.signbit(got) == np.signbit(x[nan])).all()


def test_a_bf16_pooling_with_padding_runs_its_fused_kernel() -> None:
    x = np.random.default_rng(1).standard_normal((2, 3, 9, 9)).astype(ml_dtypes.bfloat16)
    f = fb.jit(lambda a: fb.nn.avg_pool(a, (3, 3), strides=(2, 2), pads=(1, 1, 1, 1)))
    got = f(x)
    # computed in f32 and rounded once (docs/DTYPES.md), so: the f32 pooling, rounded
    want = fb.nn.avg_pool(x.astype(np.float32), (3, 3), strides=(2, 2), pads=(1, 1, 1, 1)).astype(ml_dtypes.bfloat16)
    assert got.dtype == ml_dtypes.bfloat16 and got.shape == (2, 3, 5, 5)
    np.testing.assert_array_equal(got.view(np.uint16), np.asarray(want).view(np.uint16))
    assert (f.stats.fused_calls, f.stats.arm0_calls) == (1, 0)
