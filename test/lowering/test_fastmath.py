"""fusebind.lowering.fastmath: interface, ULP bounds and IEEE edge cases.

Each function is compiled into a 1-D ``linalg.generic`` kernel on memrefs
that calls ``func.call @__fb_<fn>_<elem>``, through the lowering's own path
(``fusebind.lowering.compile_text``: upstream MLIR pipeline, LLVM IR, llvmlite
O3 for the host), linked by ``fusebind.runtime.loader.load_object`` and run
with ctypes on numpy arrays.

References: float32 results are compared with numpy's float64 functions
(math.erf for erf), rounded to the nearest float32 only in the ULP measure;
float64 results with numpy's long double (x87 80-bit) functions, and with
math.erf (glibc, < 1 ULP) for erf.
"""

from __future__ import annotations

import ctypes
import math
from typing import Callable

import numpy as np
import pytest

from fusebind.lowering import ObjectCache, fastmath
from lowering_helpers import compile_func

ENTRY = "_mlir_ciface_kernel"


def host_ldexp() -> bool:
    """What the lowering chooses (build.default_fastmath): ldexp scaling on AVX-512 hosts."""
    from fusebind.lowering.codegen import host_target

    return host_target().has_avx512


def kernel_text(fn: str, elem: str, ldexp: bool = False) -> str:
    """A module: out[i] = fn(in[i]) as a linalg.generic calling the fast-math func."""
    name = fastmath.function_name(fn, elem)
    mem = f"memref<?x{elem}>"
    return f"""#map = affine_map<(d0) -> (d0)>
module {{
  func.func @kernel(%in: {mem}, %out: {mem}) attributes {{llvm.emit_c_interface}} {{
    linalg.generic {{indexing_maps = [#map, #map], iterator_types = ["parallel"]}}
        ins(%in : {mem}) outs(%out : {mem}) {{
    ^bb0(%a: {elem}, %b: {elem}):
      %r = func.call @{name}(%a) : ({elem}) -> {elem}
      linalg.yield %r : {elem}
    }}
    return
  }}
{fastmath.definitions([(fn, elem)], ldexp=ldexp)}}}
"""


class _Descriptor(ctypes.Structure):
    _fields_ = [
        ("allocated", ctypes.c_void_p),
        ("aligned", ctypes.c_void_p),
        ("offset", ctypes.c_int64),
        ("size", ctypes.c_int64),
        ("stride", ctypes.c_int64),
    ]


class Kernel:
    """out = fn(in), built by the lowering's own path (compile_text, O3 for the
    host) and linked by the runtime loader; keeps its code alive."""

    def __init__(self, fn: str, elem: str, ldexp: bool = False) -> None:
        from fusebind.lowering import compile_text
        from fusebind.runtime.loader import load_object

        self.text = kernel_text(fn, elem, ldexp)
        self._code = load_object(compile_text(self.text, ENTRY), ENTRY)
        proto = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Descriptor), ctypes.POINTER(_Descriptor))
        self._call = proto(self._code.address)
        self.dtype = np.dtype(np.float32 if elem == "f32" else np.float64)

    def llvm_ir(self) -> tuple[str, str]:
        """(translated, O3-optimized) LLVM IR of this kernel, as compile_text builds it."""
        from fusebind.lowering.codegen import optimized_ir
        from fusebind.lowering.pipeline import lower_to_llvm_ir

        translated = lower_to_llvm_ir(self.text)
        return translated, optimized_ir(translated, ENTRY)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=self.dtype)
        out = np.empty_like(x)
        dx = _Descriptor(x.ctypes.data, x.ctypes.data, 0, x.shape[0], 1)
        do = _Descriptor(out.ctypes.data, out.ctypes.data, 0, out.shape[0], 1)
        self._call(ctypes.byref(dx), ctypes.byref(do))
        return out


_KERNELS: dict[tuple[str, str, bool], Kernel] = {}


def kernel(fn: str, elem: str, ldexp: bool | None = None) -> Kernel:
    """The kernel of fn on elem; ldexp=None: as the lowering builds it on this host."""
    key = (fn, elem, host_ldexp() if ldexp is None else ldexp)
    if key not in _KERNELS:
        _KERNELS[key] = Kernel(*key)
    return _KERNELS[key]


def ulp_error(got: np.ndarray, ref: np.ndarray, dtype: type) -> np.ndarray:
    """|got - ref| in ULPs of ``dtype`` at the correctly rounded ref (0 for equal inf/NaN)."""
    with np.errstate(all="ignore"):
        rounded = np.abs(ref.astype(dtype))
        below = np.abs(ref) < rounded.astype(ref.dtype)  # ulp is the lower binade's
        ulp = np.where(below, np.spacing(np.nextafter(rounded, dtype(0))), np.spacing(rounded))
        ulp = np.where(np.isinf(rounded), np.spacing(np.finfo(dtype).max), ulp)
        err = np.abs(got.astype(ref.dtype) - ref) / ulp.astype(ref.dtype)
        exact = (np.isnan(got) & np.isnan(ref)) | (np.isinf(got) & (got == ref.astype(dtype)))
    err = np.where(exact, 0.0, err)
    return np.where(np.isnan(err), np.inf, err).astype(np.float64)


# ---------------------------------------------------------------- references

LD = np.longdouble
_erf = np.vectorize(math.erf, otypes=[np.float64])

REFERENCE: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp,
    "expm1": np.expm1,
    "log": np.log,
    "tanh": np.tanh,
    "erf": lambda x: _erf(x.astype(np.float64)),
}

SWEEP_RANGE = {
    "exp": (-110.0, 90.0),
    "expm1": (-20.0, 90.0),
    "log": (0.0, 1e4),
    "tanh": (-12.0, 12.0),
    "erf": (-7.0, 7.0),
}


def sweep(fn: str, dtype: type, seed: int = 0) -> np.ndarray:
    """Dense linspace + uniform randoms + log-uniform magnitudes of both signs."""
    rng = np.random.default_rng(seed)
    lo, hi = SWEEP_RANGE[fn]
    parts = [np.linspace(lo, hi, 400_000), rng.uniform(lo, hi, 300_000), rng.uniform(-1, 1, 100_000)]
    low_exp = -149 if dtype is np.float32 else -1074
    mags = np.exp2(rng.uniform(low_exp, 7, 200_000))
    parts.append(mags * rng.choice([-1.0, 1.0], mags.size))
    x = np.concatenate(parts).astype(dtype)
    if fn == "log":
        x = np.abs(x)
        top = 128 if dtype is np.float32 else 1024
        x = np.concatenate([x, np.exp2(rng.uniform(low_exp, top, 200_000)).astype(dtype)])
    return x


def reference(fn: str, x: np.ndarray) -> np.ndarray:
    wide = x.astype(np.float64 if x.dtype == np.float32 else LD)
    with np.errstate(all="ignore"):
        return np.asarray(REFERENCE[fn](wide))


CASES = sorted((fn, elem) for fn in fastmath.FASTMATH_FUNCTIONS for elem in fastmath.ELEMENT_TYPES)


# --------------------------------------------------------------------- tests


def test_interface_names() -> None:
    assert fastmath.FASTMATH_FUNCTIONS == {"exp", "expm1", "log", "tanh", "erf"} == set(fastmath.APPROXIMATIONS)
    assert fastmath.function_name("exp", "f32") == "__fb_exp_f32"
    assert fastmath.function_name("erf", "f64") == "__fb_erf_f64"
    assert set(fastmath.ULP_BOUNDS) == set(CASES)
    # one record per function: its bounds are the table's
    assert all(fastmath.APPROXIMATIONS[fn].ulps[elem] == bound for (fn, elem), bound in fastmath.ULP_BOUNDS.items())


def test_unknown_function_and_element_type_are_named() -> None:
    with pytest.raises(fastmath.FastMathError, match=r"no approximation for 'sinc'; available: arccos, arccosh, "):
        fastmath.function_name("sinc", "f32")
    assert fastmath.function_name("sin", "f64") == "__fb_sin_f64"  # the transcendentals' table too
    with pytest.raises(fastmath.FastMathError, match=r"'exp' has no definition for element type 'i32'"):
        fastmath.definitions([("exp", "i32")])
    # prim.sigmoid is 1 / (1 + exp(-x)) and calls the fast exp: there is no fast sigmoid to ask for
    with pytest.raises(fastmath.FastMathError, match=r"no approximation for 'sigmoid'; available: .*, erf, exp, exp2, "
                                                     r"expm1, .*, tanh$"):
        fastmath.function_name("sigmoid", "f32")


def test_definitions_are_deduplicated_sorted_and_private() -> None:
    text = fastmath.definitions([("tanh", "f32"), ("exp", "f64"), ("tanh", "f32")])
    assert text.count("func.func private @__fb_tanh_f32(%x: f32) -> f32") == 1
    assert text.index("@__fb_exp_f64") < text.index("@__fb_tanh_f32")
    assert fastmath.definitions([]) == ""


def test_definitions_use_no_libm_math_ops() -> None:
    text = fastmath.definitions(CASES)
    allowed = {"math.fma", "math.absf", "math.copysign", "math.roundeven"}
    used = {tok for tok in text.split() if tok.startswith("math.")}
    assert used <= allowed, used - allowed


@pytest.mark.parametrize("fn,elem", CASES)
def test_max_ulp_within_documented_bound(fn: str, elem: str) -> None:
    dtype = np.float32 if elem == "f32" else np.float64
    x = sweep(fn, dtype)
    err = ulp_error(kernel(fn, elem)(x), reference(fn, x), dtype)
    worst = int(np.argmax(err))
    bound = fastmath.ULP_BOUNDS[(fn, elem)]
    assert err[worst] <= bound, f"{fn} {elem}: {err[worst]:.3f} ULP at x={x[worst]!r}"


INF, NAN = float("inf"), float("nan")
EDGES: dict[str, list[tuple[float, float]]] = {
    "exp": [(0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, 0.0), (1000.0, INF), (-1000.0, 0.0)],
    "expm1": [(0.0, 0.0), (-0.0, -0.0), (INF, INF), (-INF, -1.0), (1000.0, INF), (-1000.0, -1.0)],
    "log": [(0.0, -INF), (-0.0, -INF), (INF, INF), (-1.0, NAN), (-INF, NAN), (1.0, 0.0)],
    "tanh": [(0.0, 0.0), (-0.0, -0.0), (INF, 1.0), (-INF, -1.0), (30.0, 1.0), (-30.0, -1.0)],
    "erf": [(0.0, 0.0), (-0.0, -0.0), (INF, 1.0), (-INF, -1.0), (10.0, 1.0), (-10.0, -1.0)],
}


@pytest.mark.parametrize("fn,elem", CASES)
def test_edge_values_exact(fn: str, elem: str) -> None:
    dtype = np.float32 if elem == "f32" else np.float64
    xs = np.array([x for x, _ in EDGES[fn]] + [NAN], dtype)
    want = np.array([y for _, y in EDGES[fn]] + [NAN], dtype)
    got = kernel(fn, elem)(xs)
    np.testing.assert_array_equal(got, want)  # NaN == NaN here
    assert np.array_equal(np.signbit(got[~np.isnan(want)]), np.signbit(want[~np.isnan(want)]))


@pytest.mark.parametrize("elem", fastmath.ELEMENT_TYPES)
def test_exp_overflow_underflow_boundaries(elem: str) -> None:
    dtype = np.float32 if elem == "f32" else np.float64
    info = np.finfo(dtype)
    # The last finite result, the first inf, and the denormal tail down to 0.
    x_max = np.log(info.max.astype(LD)).astype(dtype)
    x_den = np.log(np.asarray(info.smallest_subnormal, LD)).astype(dtype)
    xs = np.concatenate(
        [
            [np.nextafter(x_max, dtype(0)), x_max, np.nextafter(x_max, dtype(INF))],
            np.linspace(x_den - 1, np.log(LD(info.tiny)).astype(dtype), 2001).astype(dtype),
        ]
    ).astype(dtype)
    got = kernel("exp", elem)(xs)
    err = ulp_error(got, reference("exp", xs), dtype)
    assert err.max() <= fastmath.ULP_BOUNDS[("exp", elem)]
    assert np.isinf(got[2]) and np.isfinite(got[0])
    assert got[3] == 0.0 and (got[4:] > 0).any() and (got[4:] < info.tiny).any()


@pytest.mark.parametrize("elem", fastmath.ELEMENT_TYPES)
def test_denormal_inputs(elem: str) -> None:
    dtype = np.float32 if elem == "f32" else np.float64
    tiny = np.finfo(dtype).smallest_subnormal
    xs = np.array([tiny, 3 * tiny, np.finfo(dtype).tiny / 2], dtype)
    assert np.array_equal(kernel("tanh", elem)(xs), xs)
    assert np.array_equal(kernel("tanh", elem)(-xs), -xs)
    assert np.array_equal(kernel("expm1", elem)(xs), xs)
    assert np.array_equal(kernel("exp", elem)(xs), np.ones_like(xs))
    err = ulp_error(kernel("log", elem)(xs), reference("log", xs), dtype)
    assert err.max() <= fastmath.ULP_BOUNDS[("log", elem)]


@pytest.mark.parametrize("elem", fastmath.ELEMENT_TYPES)
def test_prim_sigmoid_calls_the_fast_exp_and_stays_in_unit_interval(elem: str, object_cache: ObjectCache) -> None:
    t = f"tensor<100001x{elem}>"
    f = compile_func(f"func.func @k(%x: {t}) -> {t} {{\n  %y = prim.sigmoid %x : {t} -> {t}\n"
                     f"  func.return %y : {t}\n}}", object_cache)
    assert f"func.call @__fb_exp_{elem}" in f.emitted.text and "sigmoid" not in f.emitted.text
    dtype = np.float32 if elem == "f32" else np.float64
    x = np.linspace(-800, 800, 100_001).astype(dtype)
    (y,) = f(x)
    assert (y >= 0).all() and (y <= 1).all() and y[0] == 0.0 and y[-1] == 1.0 and y[50_000] == 0.5
    assert (np.diff(y) >= 0).all()  # monotone on a sorted sweep


def test_calls_are_inlined_and_loop_vectorized() -> None:
    translated, optimized = kernel("tanh", "f32").llvm_ir()
    assert "define internal float @__fb_tanh_f32" in translated
    assert "__fb_tanh_f32" not in optimized  # inlined, then dropped
    assert "<8 x float>" in optimized or "<16 x float>" in optimized
    for libm in ("@expf", "@tanhf", "@logf"):
        assert libm not in optimized
    _, optimized64 = kernel("erf", "f64").llvm_ir()
    assert "<4 x double>" in optimized64 or "<8 x double>" in optimized64


@pytest.mark.parametrize("fn", ["exp", "expm1", "log", "tanh"])
def test_distance_to_numpy_float32(fn: str) -> None:
    # numpy's float32 exp/log are SIMD approximations themselves (a few ULP);
    # our results stay within our bound plus numpy's own error of them.
    x = sweep(fn, np.float32, seed=3)
    with np.errstate(all="ignore"):
        numpy_f32 = getattr(np, fn)(x)
        numpy_err = ulp_error(numpy_f32, reference(fn, x), np.float32).max()
    dist = ulp_error(kernel(fn, "f32")(x), numpy_f32.astype(np.float64), np.float32).max()
    assert dist <= fastmath.ULP_BOUNDS[(fn, "f32")] + numpy_err + 0.5


@pytest.mark.parametrize("ldexp", [False, True], ids=["two-step-scale", "ldexp-scale"])
@pytest.mark.parametrize("fn", ["exp", "erf"])
def test_both_exp_scalings_meet_bounds_and_edges(fn: str, ldexp: bool) -> None:
    """f32 exp scales by 2**n with llvm.intr.ldexp on AVX-512 hosts, with integer ops elsewhere:
    both forms keep the bound, the edge values and the overflow / underflow boundaries."""
    if ldexp and not host_ldexp():
        pytest.skip("host has no AVX-512: ldexp would be a libm call per lane, the lowering does not use it")
    k = kernel(fn, "f32", ldexp)
    assert ("llvm.intr.ldexp" in k.text) == ldexp
    x = sweep(fn, np.float32, seed=5)
    err = ulp_error(k(x), reference(fn, x), np.float32)
    assert err.max() <= fastmath.ULP_BOUNDS[(fn, "f32")], f"{err.max():.3f} at {x[int(np.argmax(err))]!r}"
    xs = np.array([x for x, _ in EDGES[fn]] + [NAN], np.float32)
    want = np.array([y for _, y in EDGES[fn]] + [NAN], np.float32)
    np.testing.assert_array_equal(k(xs), want)
    if fn == "exp":
        info = np.finfo(np.float32)
        x_den = np.log(np.asarray(info.smallest_subnormal, LD)).astype(np.float32)
        xs = np.linspace(x_den - 1, np.log(LD(info.tiny)).astype(np.float32), 2001).astype(np.float32)
        got = k(xs)
        assert ulp_error(got, reference("exp", xs), np.float32).max() <= fastmath.ULP_BOUNDS[("exp", "f32")]
        assert got[0] == 0.0 and (got[1:] > 0).any() and (got < info.tiny).any()
