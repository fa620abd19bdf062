"""Helpers shared by the lowering tests (a module with a unique name, so it
cannot be confused with another directory's conftest): compile a func of prim
ops and call it, compare with the reference, sample inputs, count ulps."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from fusebind.dialect import parse_module
from fusebind.dialect.types import numpy_dtype
from fusebind.lowering import ObjectCache, build_object, emit_linalg, kernel_signature
from fusebind.lowering.build import default_fastmath


def compile_func(text: str, cache: ObjectCache, *, dynamic: bool = False, strided: bool = False,
                 fastmath: bool = True, name: str = "k") -> Callable[..., tuple[np.ndarray, ...]]:
    """Compile the only func of `text`; the result is called as f(*inputs, out_shapes=[...])."""
    from fusebind.runtime.dtypes import descriptor_for
    from fusebind.runtime.kernel import Kernel

    module = parse_module(text)
    func = next(iter(module.ops))
    fm = default_fastmath() if fastmath else None
    emitted = emit_linalg(func, name, dynamic=dynamic, strided_inputs=strided,
                          fastmath=fm[0] if fm else None, fastmath_defs=fm[1] if fm else None)
    built = build_object(emitted, cache=cache, key_parts={"test": text, "dynamic": dynamic, "strided": strided})
    kernel = Kernel.from_object(built.object_code, built.symbol,
                                signature=kernel_signature(emitted.inputs, emitted.outputs))

    def call(*arrays: np.ndarray, out_shapes: list[tuple[int, ...]] | None = None) -> tuple[np.ndarray, ...]:
        shapes = out_shapes or [tuple(s.shape) for s in emitted.outputs]
        outs = [np.full(shape, 0x5A, dtype=numpy_dtype(spec.elem)) for shape, spec in zip(shapes, emitted.outputs)]
        keep = [np.require(a, requirements="C") if not strided else a for a in arrays]
        kernel(*(descriptor_for(a) for a in keep), *(descriptor_for(o) for o in outs))
        return tuple(outs)

    call.emitted = emitted  # type: ignore[attr-defined]
    call.module = module  # type: ignore[attr-defined]
    call.built = built  # type: ignore[attr-defined]
    return call


def reference(module: Any, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    from fusebind.dialect import interpret

    out = interpret(module, *arrays)
    return out if isinstance(out, tuple) else (out,)


UNARY = {"f32": ["neg", "abs", "relu", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf"],
         "i32": ["neg", "abs", "relu"]}
UNARY["f64"], UNARY["i64"] = UNARY["f32"], UNARY["i32"]
BINARY = {"f32": ["add", "sub", "mul", "div", "max", "min", "pow"], "i32": ["add", "sub", "mul", "div", "max", "min"]}
BINARY["f64"], BINARY["i64"] = BINARY["f32"], BINARY["i32"]
PREDS = ["eq", "ne", "lt", "le", "gt", "ge"]
APPROX = {"exp", "log", "tanh", "sigmoid", "erf", "pow"}
# fastmath.ULP_BOUNDS is <= 3 per function; sigmoid composes exp, neg, add, div (+1 ulp each at most).
ULP_BOUND = 4


def _t(shape: tuple[int | None, ...], elem: str) -> str:
    return "tensor<" + "".join(f"{'?' if d is None else d}x" for d in shape) + f"{elem}>"



def sample(elem: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if elem in ("f32", "f64"):
        specials = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1.0, -1.0, 0.5, 1e-30, 100.0])
        vals = rng.standard_normal(n) * 3
        k = min(n, len(specials))
        vals[:k] = rng.permutation(specials)[:k]
        return vals.astype(elem.replace("f", "float")).reshape(shape)
    info = np.iinfo(elem.replace("i", "int"))
    vals = rng.integers(-50, 50, n)
    specials = np.array([0, -1, 1, info.min, info.max, 7, -7])
    k = min(n, len(specials))
    vals[:k] = rng.permutation(specials)[:k]
    return vals.astype(elem.replace("i", "int")).reshape(shape)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    itype = np.int32 if a.dtype == np.float32 else np.int64
    ia, ib = a.view(itype).astype(np.int64), b.view(itype).astype(np.int64)
    # map the sign-magnitude float order onto a monotone integer line
    ia = np.where(ia < 0, np.iinfo(itype).min - ia, ia)
    ib = np.where(ib < 0, np.iinfo(itype).min - ib, ib)
    return np.abs(ia - ib)


def check(name: str, got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (name, got.shape, want.shape, got.dtype, want.dtype)
    if got.dtype.kind == "f":
        nan_g, nan_w = np.isnan(got), np.isnan(want)
        assert np.array_equal(nan_g, nan_w), f"{name}: NaN positions differ\n{got}\n{want}"
        g, w = got[~nan_g], want[~nan_w]
        if name.partition("@")[0] in APPROX:
            d = ulp_distance(g, w)
            assert d.max(initial=0) <= ULP_BOUND, f"{name}: {d.max()} ulps > {ULP_BOUND}\n{g}\n{w}"
        else:
            assert np.array_equal(g, w) and np.array_equal(np.signbit(g), np.signbit(w)), f"{name}:\n{g}\n{w}"
    else:
        assert np.array_equal(got, want), f"{name}:\n{got}\n{want}"



REGION_MODULE = """
func.func @main(%a: tensor<64xf32>, %b: tensor<64xf32>, %c: tensor<64xf32>) -> tensor<64xf32> {
  %r = fused.region @mul_add_relu (%a, %b, %c) : (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%x: tensor<64xf32>, %y: tensor<64xf32>, %z: tensor<64xf32>):
    %m = prim.mul %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
    %s = prim.add %m, %z : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
    %q = prim.relu %s : tensor<64xf32> -> tensor<64xf32>
    fused.yield %q : tensor<64xf32>
  }
  func.return %r : tensor<64xf32>
}
"""


def _region(module: object) -> object:
    return next(op for op in module.walk() if op.name == "fused.region")  # type: ignore[attr-defined]
