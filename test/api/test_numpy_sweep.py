"""The numpy sweep: every public name of numpy and numpy.linalg, called on traced arrays.

Each sample call (numpy_sweep_table.py) must give numpy's answer (values
within tolerance, exact dtype and shape), a static value equal to numpy's,
or an `fb.FusebindError`; where numpy itself raises, fusebind must raise a
FusebindError too (or numpy's own identical error, when numpy refuses the
call before asking the tracer: np.exp.reduce). Anything else fails: a wrong value, another exception,
numpy wrapping the tracer in an object array, a NumpyMismatchError (fusebind
caught itself about to differ). A name missing from the table fails.

By default every sample is traced and its trace interpreted (the numpy
reference interpreter: no compile), and a representative slice runs end to
end through fb.jit. FUSEBIND_LONG=1 (or `-m slow`) runs every mapped
sample through fb.jit. `python test/api/test_numpy_sweep.py` prints the
number of numpy callables in each outcome.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

import fusebind as fb  # noqa: E402
from fusebind.api.numpy_probe import NumpyMismatchError  # noqa: E402
from fusebind.api.trace import Tracer, trace_graph  # noqa: E402
from fusebind.dialect import interpret  # noqa: E402
from numpy_sweep_table import LINALG, NUMPY, NUMPY_MINOR, UFUNC, Arg, Call  # noqa: E402

LONG = os.environ.get("FUSEBIND_LONG", "").strip() in ("1", "true", "yes", "on")
MINOR = tuple(int(p) for p in np.__version__.split(".")[:2])
pytestmark = pytest.mark.skipif(MINOR != NUMPY_MINOR, reason=f"the sweep table is for numpy "
                                f"{'.'.join(map(str, NUMPY_MINOR))}; this is numpy {np.__version__}")

DTYPES = ("float32", "float64", "int32", "int64", "bool")


class BadOutcome(AssertionError):
    pass


def public(module: Any) -> list[str]:
    return sorted(n for n in dir(module) if not n.startswith("_"))


def _get(module: Any, name: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(module, name)


# ---------------------------------------------------------------- sample arrays
def make(arg: Arg, seed: int) -> np.ndarray:
    rng = np.random.default_rng(1234 + seed)
    dt = np.dtype(arg.dtype)
    if dt == np.bool_:
        return rng.random(arg.shape) > 0.5
    if arg.values == "index":
        return rng.integers(0, 3, arg.shape).astype(dt)
    if dt.kind == "i":
        return rng.integers(-4, 5, arg.shape).astype(dt)
    x = rng.standard_normal(arg.shape) * 2
    if arg.values == "positive":
        x = np.abs(x) + 0.5
    x = x.astype(dt)
    if arg.values == "special" and x.size >= 5:
        flat = x.reshape(-1)
        flat[:5] = [np.nan, np.inf, -np.inf, -0.0, 0.0]
    return x


# ---------------------------------------------------------------- comparison
def _leaves(v: Any) -> list[Any]:
    if isinstance(v, (tuple, list)):
        return [x for item in v for x in _leaves(item)]
    return [v]


def _same_static(got: Any, want: Any) -> bool:
    if isinstance(want, (tuple, list)):
        return isinstance(got, (tuple, list)) and len(got) == len(want) and all(
            _same_static(g, w) for g, w in zip(got, want))
    if isinstance(want, np.ndarray) or isinstance(got, np.ndarray):
        return (isinstance(got, np.ndarray) and isinstance(want, np.ndarray) and got.dtype == want.dtype
                and np.array_equal(got, want))
    return type(got) is type(want) and got == want


def _same_array(got: np.ndarray, want: Any, values: bool) -> str | None:
    w = np.asarray(want)
    if w.dtype == object:
        return f"numpy gives an object array {w!r}"
    if got.dtype != w.dtype or got.shape != w.shape:
        return f"got {got.dtype}{got.shape}, numpy gives {w.dtype}{w.shape}"
    if not values:
        return None
    if w.dtype.kind == "f":
        tol = 2e-5 if w.dtype == np.float32 else 1e-11
        finite = w[np.isfinite(w)]
        scale = float(np.max(np.abs(finite))) if finite.size else 1.0
        if not np.allclose(got, w, rtol=tol, atol=tol * max(scale, 1.0), equal_nan=True):
            return f"values differ:\n{got}\nnumpy:\n{w}"
        return None
    if not np.array_equal(got, w):
        return f"values differ:\n{got}\nnumpy:\n{w}"
    return None


def _eager(fn: Callable[..., Any], arrays: list[np.ndarray]) -> tuple[Any, BaseException | None]:
    copies = [a.copy() for a in arrays]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return fn(*copies), None
        except Exception as exc:  # noqa: BLE001 - numpy refusing is an answer too
            return None, exc


def outcome(call: Call, label: str, jit: bool = False) -> str:
    """'mapped', 'static' or 'refused' for one sample call; BadOutcome for anything else."""
    arrays = [make(a, i) for i, a in enumerate(call.args)]
    want, eager_exc = _eager(call.fn, arrays)
    box: dict[str, Any] = {}

    def traced(*ts: Any) -> Any:
        box["r"] = r = call.fn(*ts)
        outs = [leaf for leaf in _leaves(r) if isinstance(leaf, Tracer)]
        return tuple(outs) if outs else ts[0]

    names = [f"a{i}" for i in range(len(arrays))]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            module, graph = trace_graph(traced, arrays, names, "sample")
        except NumpyMismatchError as exc:
            raise BadOutcome(f"{label}: {exc}") from None
        except fb.FusebindError as exc:
            if not str(exc).startswith("fusebind"):
                raise BadOutcome(f"{label}: a FusebindError without fusebind's prefix: {exc}") from None
            return "refused"
        except Exception as exc:  # noqa: BLE001
            if eager_exc is not None and type(exc) is type(eager_exc) and str(exc) == str(eager_exc):
                return "refused"  # numpy's own error, raised before it asks the tracer (reduce of a unary ufunc)
            raise BadOutcome(f"{label}: {type(exc).__name__} (not a FusebindError): {exc}") from None
    r = box["r"]
    leaves = _leaves(r)
    if not any(isinstance(leaf, Tracer) for leaf in leaves):
        if eager_exc is not None:
            raise BadOutcome(f"{label}: numpy raises {type(eager_exc).__name__}: {eager_exc}; fusebind answered {r!r}")
        if not _same_static(r, want):
            raise BadOutcome(f"{label}: static answer {r!r}, numpy gives {want!r}")
        return "static"
    hidden = [cap.array() for cap, _ in graph.captures.values()]
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            got = fb.jit(traced)(*arrays) if jit else interpret(module, *arrays, *hidden)
    except fb.FusebindError:
        if eager_exc is None:
            raise
        return "refused"  # numpy raises too (e.g. an integer to a negative power)
    if eager_exc is not None:
        raise BadOutcome(f"{label}: numpy raises {type(eager_exc).__name__}: {eager_exc}; fusebind answered")
    got_list = list(got) if isinstance(got, tuple) else [got]
    want_leaves = _leaves(want) if isinstance(r, (tuple, list)) else [want]
    if len(want_leaves) != len(leaves):
        raise BadOutcome(f"{label}: {len(leaves)} results, numpy gives {len(want_leaves)}")
    for leaf, w in zip(leaves, want_leaves):
        if isinstance(leaf, Tracer):
            problem = _same_array(np.asarray(got_list.pop(0)), w, call.values)
        else:
            problem = None if _same_static(leaf, w) else f"static {leaf!r}, numpy gives {w!r}"
        if problem:
            raise BadOutcome(f"{label}: {problem}")
    return "mapped"


# ---------------------------------------------------------------- ufunc samples
def _gufunc_calls(u: np.ufunc) -> list[Call]:
    shapes = {"matmul": [((3, 4), (4, 5)), ((4,), (4, 5)), ((2, 3, 4), (4,))], "vecdot": [((3, 4), (4,))],
              "matvec": [((3, 4), (4,))], "vecmat": [((3,), (3, 4))]}[u.__name__]
    return [Call(u, Arg(dt, a), Arg(dt, b)) for dt in DTYPES for a, b in shapes]


def ufunc_calls(name: str, full: bool) -> dict[str, list[Call]]:
    """Samples per method: __call__ (every dtype, mixed dtypes, Python scalars), reduce, accumulate,
    outer, at, out=, where=."""
    u = _get(np, name)
    calls: dict[str, list[Call]] = {}
    if u.signature:
        calls["__call__"] = _gufunc_calls(u)
        calls["out="] = [Call(lambda a, b, c: u(a, b, out=c), Arg("float32", (3, 4)), Arg("float32", (4, 5)),
                              Arg("float32", (3, 5)))]
        return calls
    vals = "special" if full else "normal"
    if u.nin == 1:
        calls["__call__"] = [Call(u, Arg(dt, (3, 4), vals if dt.startswith("f") else "normal")) for dt in DTYPES]
        calls["at"] = [Call(lambda a: u.at(a, [0]), Arg("float32", (4,)))]
        calls["reduce"] = [Call(lambda a: u.reduce(a), Arg("float32", (4,)))]
        calls["out="] = [Call(lambda a, b: u(a, out=b), Arg("float32", (4,)), Arg("float32", (4,)))]
        calls["where="] = [Call(lambda a, m: u(a, where=m), Arg("float32", (4,)), Arg("bool", (4,)))]
        return calls
    pairs = [(dt, dt) for dt in DTYPES] + [("float32", "float64"), ("int32", "float32"), ("int32", "int64"),
                                           ("bool", "int32"), ("int64", "float32")]
    cs = [Call(u, Arg(a, (3, 4)), Arg(b, (4,))) for a, b in pairs]
    for dt in (DTYPES if full else ("float32", "int32", "bool")):
        for scalar in (2, 2.5, True):
            cs.append(Call(lambda a, s=scalar: u(a, s), Arg(dt)))
        cs.append(Call(lambda a: u(3, a), Arg(dt)))
    calls["__call__"] = cs
    calls["reduce"] = [Call(lambda a: u.reduce(a), Arg(dt)) for dt in ("float32", "int32", "bool")] + [
        Call(lambda a: u.reduce(a, axis=None), Arg("float64")),
        Call(lambda a: u.reduce(a, axis=1, keepdims=True), Arg("int64"))]
    calls["accumulate"] = [Call(lambda a: u.accumulate(a), Arg("float32"))]
    calls["outer"] = [Call(u.outer, Arg(dt, (3,)), Arg(dt, (2, 2))) for dt in ("float32", "int32")] + [
        Call(lambda a: u.outer(a, 2), Arg("int32", (3,)))]
    calls["at"] = [Call(lambda a, b: u.at(a, [0, 1], b), Arg("float32", (4,)), Arg("float32", (2,)))]
    calls["out="] = [Call(lambda a, b, c: u(a, b, out=c), Arg("float32"), Arg("float32"), Arg("float32"))]
    calls["where="] = [Call(lambda a, b, m: u(a, b, where=m), Arg("float32"), Arg("float32"), Arg("bool"))]
    return calls



# ---------------------------------------------------------------- the sweep
def _samples(entry: Any) -> list[Call]:
    return entry if isinstance(entry, list) else [entry]


def sweep(full: bool = False, jit: bool = False) -> tuple[Counter, list[str]]:
    """(outcome per callable name, failures) over both tables."""
    counts: Counter = Counter()
    failures: list[str] = []
    for prefix, module, table in (("numpy", np, NUMPY), ("numpy.linalg", np.linalg, LINALG)):
        for name in public(module):
            entry = table[name]
            if isinstance(entry, str) and entry != UFUNC:
                counts["not an array function"] += 1
                continue
            seen = set()
            if entry == UFUNC:
                for method, calls in ufunc_calls(name, full).items():
                    for i, c in enumerate(calls):
                        try:
                            got = outcome(c, f"{prefix}.{name}.{method}#{i}", jit)
                        except BadOutcome as exc:
                            failures.append(str(exc))
                            continue
                        if method == "__call__":
                            seen.add(got)
            else:
                for i, c in enumerate(_samples(entry)):
                    try:
                        seen.add(outcome(c, f"{prefix}.{name}#{i}", jit))
                    except BadOutcome as exc:
                        failures.append(str(exc))
            kind = "mapped" if "mapped" in seen else "static" if "static" in seen else "refused"
            counts[kind] += 1
    return counts, failures


def test_every_public_name_is_in_the_table() -> None:
    missing = [f"numpy.{n}" for n in public(np) if n not in NUMPY]
    missing += [f"numpy.linalg.{n}" for n in public(np.linalg) if n not in LINALG]
    extra = [n for n in NUMPY if n not in public(np)] + [f"linalg.{n}" for n in LINALG if n not in public(np.linalg)]
    assert missing == [] and extra == []


def test_every_sample_gives_numpys_answer_a_static_value_or_a_fusebind_error() -> None:
    counts, failures = sweep(full=LONG)
    assert failures == []
    assert counts["mapped"] >= 150 and counts["refused"] > 0  # the counts are reported by running this file


#: a representative slice, end to end through fb.jit (compiled kernels, not the interpreter)
SLICE = ["dot", "inner", "kron", "nan_to_num", "take", "sum", "max", "argmax", "where", "concatenate", "var",
         "transpose", "clip", "tensordot"]


def test_a_representative_slice_runs_end_to_end() -> None:
    failures, kinds = [], Counter()
    calls = [(f"numpy.{name}", _samples(NUMPY[name])[0]) for name in SLICE]
    calls += [(f"numpy.{name}.{method}", ufunc_calls(name, False)[method][i]) for name, method, i in (
        ("add", "__call__", 6), ("maximum", "reduce", 2), ("exp", "__call__", 2), ("isnan", "__call__", 0))]
    for label, c in calls:
        try:
            kinds[outcome(c, f"{label} (jit)", jit=True)] += 1
        except BadOutcome as exc:
            failures.append(str(exc))
    assert failures == [] and kinds["mapped"] == len(calls)


@pytest.mark.slow
def test_every_mapped_sample_runs_end_to_end(request: pytest.FixtureRequest) -> None:
    if not (LONG or "slow" in (request.config.getoption("-m") or "")):
        pytest.skip("long run: select with `-m slow` or FUSEBIND_LONG=1")
    counts, failures = sweep(full=True, jit=True)
    assert failures == []


if __name__ == "__main__":
    c, f = sweep(full="--full" in sys.argv, jit="--jit" in sys.argv)
    print("\n".join(f))
    print(f"numpy {np.__version__}: " + ", ".join(f"{k}: {v}" for k, v in sorted(c.items())),
          f"({sum(c.values())} names, {len(f)} failures)")
