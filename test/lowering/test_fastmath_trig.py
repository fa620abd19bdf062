"""fusebind.lowering.fastmath_trig: the numpy transcendentals' fast-math bodies, their measured
ULP bounds (docs/FASTMATH.md) and numpy's special values.

One compiled object per element type holding a kernel loop per function, over a big array
each (the lowering's own path: compile_text, O3, the runtime loader), shared by every test. References: f32 against numpy's
float64 function rounded in the ULP measure; f64 against numpy's long double (x87) function.
FUSEBIND_LONG=1 widens the sweep tenfold (docs/FASTMATH.md's numbers: 150k per part).
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


FNS = sorted(fastmath_trig.TRIG_FUNCTIONS)


def kernel_text(elem: str, fns: list[str] = FNS) -> str:
    """One func: a 1-D linalg.generic per function, out_fn[i] = fn(in_fn[i], ...) (one compile for all)."""
    mem = f"memref<?x{elem}>"
    params, body = [], []
    for f, fn in enumerate(fns):
        arity = fastmath_trig.TRIG_APPROXIMATIONS[fn].arity
        ins = [f"%in{f}_{i}" for i in range(arity)]
        params += [f"{p}: {mem}" for p in ins] + [f"%out{f}: {mem}"]
        bb = ", ".join(f"%a{i}: {elem}" for i in range(arity))
        args = ", ".join(f"%a{i}" for i in range(arity))
        maps = ", ".join(["#map"] * (arity + 1))
        body.append(f"""    linalg.generic {{indexing_maps = [{maps}], iterator_types = ["parallel"]}}
        ins({", ".join(ins)} : {", ".join([mem] * arity)}) outs(%out{f} : {mem}) {{
    ^bb0({bb}, %o: {elem}):
      %r = func.call @__fb_{fn}_{elem}({args}) : ({", ".join([elem] * arity)}) -> {elem}
      linalg.yield %r : {elem}
    }}""")
    nl = "\n"
    return f"""#map = affine_map<(d0) -> (d0)>
module {{
  func.func @kernel({", ".join(params)}) attributes {{llvm.emit_c_interface}} {{
{nl.join(body)}
    return
  }}
{fastmath.definitions([(fn, elem) for fn in fns])}}}
"""


class _Descriptor(ctypes.Structure):
    _fields_ = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_int64),
                ("size", ctypes.c_int64), ("stride", ctypes.c_int64)]


class Kernel:
    """Every function of FNS on one element type, in one compiled object."""

    def __init__(self, elem: str) -> None:
        from fusebind.lowering import compile_text
        from fusebind.runtime.loader import load_object

        self.text = kernel_text(elem)
        self._code = load_object(compile_text(self.text, ENTRY), ENTRY)
        n = sum(fastmath_trig.TRIG_APPROXIMATIONS[fn].arity + 1 for fn in FNS)
        self._call = ctypes.CFUNCTYPE(None, *[ctypes.POINTER(_Descriptor)] * n)(self._code.address)
        self.dtype = np.dtype(np.float32 if elem == "f32" else np.float64)

    def __call__(self, inputs: dict[str, tuple[np.ndarray, ...]]) -> dict[str, np.ndarray]:
        keep, outs, ds = [], {}, []
        for fn in FNS:
            xs = [np.ascontiguousarray(x, dtype=self.dtype) for x in np.broadcast_arrays(*inputs[fn])]
            outs[fn] = np.empty_like(xs[0])
            keep += xs
            ds += [_Descriptor(a.ctypes.data, a.ctypes.data, 0, a.shape[0], 1) for a in (*xs, outs[fn])]
        self._call(*(ctypes.byref(d) for d in ds))
        return outs


_RESULTS: dict[str, tuple[dict, dict]] = {}


def results(elem: str) -> tuple[dict[str, tuple[np.ndarray, ...]], dict[str, np.ndarray]]:
    """(inputs, kernel outputs) of every function on `elem`: one compile and one call per type."""
    if elem not in _RESULTS:
        ins = {fn: inputs(fn, elem) for fn in FNS}
        _RESULTS[elem] = ins, Kernel(elem)(ins)
    return _RESULTS[elem]


# ufunc and the sweep range of each function (plus log-uniform magnitudes of both signs)
RANGES = {
    "sin": (-100.0, 100.0), "cos": (-100.0, 100.0), "tan": (-100.0, 100.0),
    "arcsin": (-1.0, 1.0), "arccos": (-1.0, 1.0), "arctan": (-50.0, 50.0), "arctan2": (-50.0, 50.0),
    "sinh": (-30.0, 30.0), "cosh": (-30.0, 30.0), "arcsinh": (-1e3, 1e3), "arccosh": (1.0, 1e3),
    "arctanh": (-1.0, 1.0), "exp2": (-160.0, 130.0), "log2": (0.0, 1e4), "log10": (0.0, 1e4),
    "log1p": (-1.0, 1e3), "cbrt": (-1e3, 1e3), "hypot": (-1e3, 1e3),
}
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-30, -1e-30, 1e30, -1e30,
                    np.pi / 2, -np.pi / 2, np.pi, 3e38, -3e38, 1e-45, 88.7, 89.5, -89.5, 710.0, 711.0, 1e300])


def sweep(fn: str, dtype: type, n: int = 20_000, seed: int = 0) -> np.ndarray:
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
    with np.errstate(over="ignore"):
        sp = SPECIAL.astype(dtype)
    gx, gy = (a.ravel() for a in np.meshgrid(sp, sp))  # every pair of special values
    return np.concatenate([x, gx]), np.concatenate([y, gy])


CASES = sorted((fn, elem) for fn in fastmath_trig.TRIG_FUNCTIONS for elem in fastmath.ELEMENT_TYPES)


@pytest.mark.parametrize("fn,elem", CASES)
def test_ulp_bound_and_special_values(fn: str, elem: str) -> None:
    ins, outs = results(elem)
    xs, got = ins[fn], outs[fn]
    dtype = np.float32 if elem == "f32" else np.float64
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


@pytest.mark.parametrize("elem", ["f32", "f64"])
def test_without_fast_math_every_op_lowers_to_upstream_math_or_a_composed_form(elem, tmp_path) -> None:
    """lower-to-linalg{fastmath=false}: math.* ops (libm), and the functions upstream math cannot
    lower or lowers inaccurately (hypot cbrt log1p expm1 arcsinh arccosh arctanh) composed from
    the builder's own words: within 4 eps of numpy, NaN / inf / signed zeros as numpy's."""
    from fusebind.dialect.prim_math import MATH_OPS
    from fusebind.lowering import ObjectCache
    from lowering_helpers import compile_func

    dt = np.float32 if elem == "f32" else np.float64
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-3, 3, 500), np.exp2(rng.uniform(-140, 100, 500)) * rng.choice([-1, 1], 500),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-40]]).astype(dt)
    y = rng.permutation(x)
    t = f"tensor<{x.size}x{elem}>"
    lines = [f"  %r{i} = prim.{c.KIND} %a, %b : ({t}, {t}) -> {t}" if c.KIND in ("arctan2", "hypot")
             else f"  %r{i} = prim.{c.KIND} %a : {t} -> {t}" for i, c in enumerate(MATH_OPS)]
    names = ", ".join(f"%r{i}" for i in range(len(MATH_OPS)))
    text = (f"func.func @k(%a: {t}, %b: {t}) -> ({', '.join([t] * len(MATH_OPS))}) {{\n" + "\n".join(lines)
            + f"\n  func.return {names} : {', '.join([t] * len(MATH_OPS))}\n}}")
    got = compile_func(text, ObjectCache(tmp_path), fastmath=False)(x, y)
    eps = np.finfo(dt).eps
    for cls, g in zip(MATH_OPS, got):
        with np.errstate(all="ignore"):
            w = getattr(np, cls.KIND)(x, y) if cls.KIND in ("arctan2", "hypot") else getattr(np, cls.KIND)(x)
            rel = np.abs(g.astype(np.float64) - w) / np.maximum(np.abs(w), np.finfo(dt).tiny)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=cls.KIND)
        finite = np.isfinite(w)
        np.testing.assert_array_equal(g[np.isinf(w)], w[np.isinf(w)], err_msg=cls.KIND)
        assert rel[finite].max() <= 4 * eps, (cls.KIND, rel[finite].max() / eps)
        np.testing.assert_array_equal(np.signbit(g[w == 0]), np.signbit(w[w == 0]), err_msg=cls.KIND)
