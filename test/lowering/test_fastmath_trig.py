"""fusebind.lowering.fastmath_trig: the numpy transcendentals' fast-math bodies, their measured
ULP bounds (docs/FASTMATH.md) and numpy's special values.

One compiled kernel per (function, element type) over a big array (the lowering's own path:
compile_text, O3, the runtime loader), shared by every test. References: f32 against numpy's
float64 function rounded in the ULP measure; f64 against numpy's long double (x87) function.
FUSEBIND_LONG=1 widens the sweep tenfold.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np
import pytest

from fusebind.lowering import fastmath, fastmath_trig
from test_fastmath import ulp_error

ENTRY = "_mlir_ciface_kernel"
LD = np.longdouble
LONG = os.environ.get("FUSEBIND_LONG") == "1"


def kernel_text(fn: str, elem: str, arity: int) -> str:
    mem = f"memref<?x{elem}>"
    ins = ", ".join(f"%in{i}: {mem}" for i in range(arity))
    maps = ", ".join(["#map"] * (arity + 1))
    bb = ", ".join(f"%a{i}: {elem}" for i in range(arity))
    args = ", ".join(f"%a{i}" for i in range(arity))
    types = ", ".join([elem] * arity)
    return f"""#map = affine_map<(d0) -> (d0)>
module {{
  func.func @kernel({ins}, %out: {mem}) attributes {{llvm.emit_c_interface}} {{
    linalg.generic {{indexing_maps = [{maps}], iterator_types = ["parallel"]}}
        ins({", ".join(f"%in{i}" for i in range(arity))} : {", ".join([mem] * arity)}) outs(%out : {mem}) {{
    ^bb0({bb}, %o: {elem}):
      %r = func.call @__fb_{fn}_{elem}({args}) : ({types}) -> {elem}
      linalg.yield %r : {elem}
    }}
    return
  }}
{fastmath.definitions([(fn, elem)])}}}
"""


class _Descriptor(ctypes.Structure):
    _fields_ = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_int64),
                ("size", ctypes.c_int64), ("stride", ctypes.c_int64)]


class Kernel:
    def __init__(self, fn: str, elem: str) -> None:
        from fusebind.lowering import compile_text
        from fusebind.runtime.loader import load_object

        self.arity = fastmath_trig.TRIG_APPROXIMATIONS[fn].arity
        self.text = kernel_text(fn, elem, self.arity)
        self._code = load_object(compile_text(self.text, ENTRY), ENTRY)
        proto = ctypes.CFUNCTYPE(None, *[ctypes.POINTER(_Descriptor)] * (self.arity + 1))
        self._call = proto(self._code.address)
        self.dtype = np.dtype(np.float32 if elem == "f32" else np.float64)

    def __call__(self, *xs: np.ndarray) -> np.ndarray:
        xs = [np.ascontiguousarray(x, dtype=self.dtype) for x in np.broadcast_arrays(*xs)]
        out = np.empty_like(xs[0])
        ds = [_Descriptor(a.ctypes.data, a.ctypes.data, 0, a.shape[0], 1) for a in (*xs, out)]
        self._call(*(ctypes.byref(d) for d in ds))
        return out


_KERNELS: dict[tuple[str, str], Kernel] = {}


def kernel(fn: str, elem: str) -> Kernel:
    if (fn, elem) not in _KERNELS:
        _KERNELS[(fn, elem)] = Kernel(fn, elem)
    return _KERNELS[(fn, elem)]


# ufunc and the sweep range of each function (plus log-uniform magnitudes of both signs)
RANGES = {
    "sin": (-100.0, 100.0), "cos": (-100.0, 100.0), "tan": (-100.0, 100.0),
    "arcsin": (-1.0, 1.0), "arccos": (-1.0, 1.0), "arctan": (-50.0, 50.0), "arctan2": (-50.0, 50.0),
    "sinh": (-30.0, 30.0), "cosh": (-30.0, 30.0), "arcsinh": (-1e3, 1e3), "arccosh": (1.0, 1e3),
    "arctanh": (-1.0, 1.0), "exp2": (-160.0, 130.0), "log2": (0.0, 1e4), "log10": (0.0, 1e4),
    "log1p": (-1.0, 1e3), "hypot": (-1e3, 1e3),
}
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-30, -1e-30, 1e30, -1e30,
                    np.pi / 2, -np.pi / 2, np.pi, 3e38, -3e38, 1e-45, 88.7, 89.5, -89.5, 710.0, 711.0, 1e300])


def sweep(fn: str, dtype: type, n: int = 150_000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = n * (10 if LONG else 1)
    lo, hi = RANGES[fn]
    low_exp = -149 if dtype is np.float32 else -1074
    top = 127 if dtype is np.float32 else 1023
    mags = np.exp2(rng.uniform(low_exp, top, n)) * rng.choice([-1.0, 1.0], n)
    with np.errstate(over="ignore"):
        x = np.concatenate([np.linspace(lo, hi, n), rng.uniform(lo, hi, n), mags, SPECIAL]).astype(dtype)
    return x


def reference(fn: str, *xs: np.ndarray) -> np.ndarray:
    wide = [x.astype(np.float64 if x.dtype == np.float32 else LD) for x in xs]
    with np.errstate(all="ignore"):
        return np.asarray(getattr(np, fn)(*wide))


def inputs(fn: str, elem: str) -> tuple[np.ndarray, ...]:
    dtype = np.float32 if elem == "f32" else np.float64
    x = sweep(fn, dtype)
    if fastmath_trig.TRIG_APPROXIMATIONS[fn].arity == 1:
        return (x,)
    y = np.random.default_rng(1).permutation(x)
    sp = SPECIAL.astype(dtype)
    gx, gy = (a.ravel() for a in np.meshgrid(sp, sp))  # every pair of special values
    return np.concatenate([x, gx]), np.concatenate([y, gy])


CASES = sorted((fn, elem) for fn in fastmath_trig.TRIG_FUNCTIONS for elem in fastmath.ELEMENT_TYPES)


@pytest.mark.parametrize("fn,elem", CASES)
def test_ulp_bound_and_special_values(fn: str, elem: str) -> None:
    xs = inputs(fn, elem)
    dtype = np.float32 if elem == "f32" else np.float64
    got = kernel(fn, elem)(*xs)
    ref = reference(fn, *xs)
    err = ulp_error(got, ref, dtype)
    bound = fastmath_trig.TRIG_APPROXIMATIONS[fn].ulps[elem]
    worst = int(np.argmax(err))
    assert err.max() <= bound, (fn, elem, float(err.max()), [x[worst] for x in xs], got[worst], ref[worst])
    # NaN exactly where numpy's is; signed zeros as numpy's
    with np.errstate(all="ignore"):
        npy = getattr(np, fn)(*xs)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(npy))
    zero = npy == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(npy[zero]))
