"""Differential testing of the whole pipeline: random prim graphs run three ways.

Each case is a small graph (elementwise chains, broadcasts against rows,
columns and scalar constants, reductions with keepdims, a matmul head,
compare/select, casts; f32, f64, i32, i64) printed as MLIR text and run by:
1. the reference interpreter (`fusebind.dialect.interpret`),
2. arm 0: `fb.compile(text, optimize=False)` (primitive kernels only),
3. the fused arm: `fb.compile(text)` (synchronous JIT, fused kernels).

Agreement: integers exactly; floats within an error bound propagated op by op
through the graph at the actual intermediate values (first-order: each input
error times the op's derivative, plus the op's own rounding: 1 ULP for basic
ops, the FASTMATH.md bound + numpy's own for transcendentals, n·eps·Σ|x| for
a reduction over n and K·eps·Σ|a||b| for a matmul). NaN / inf positions must
match exactly. Graph ops are "safe" forms (exp(-|x|), log(|x|+1),
x/(|y|+1)...) so the bound is meaningful; compares read arguments only (a
1-ULP difference must not flip a branch).

Compile cost: the pooled test draws from a small fixed set of structures x
shapes (kernels are shared through the table and the object cache) and
varies the values widely; the free test lets hypothesis draw (and shrink) the
structure. A failure prints the module text and value seed; add it to
`corpus/differential/` (`// case: {json}` header, then the module) and
`test_differential_corpus_replays` keeps it.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import LONG, scaled
from index_maps import available_kinds, index_values, mlir_line, plan, propagate, registered_index_map_kinds
from index_maps import apply as apply_index_map

CORPUS = Path(__file__).resolve().parent / "corpus" / "differential"
FLOATS = ("f32", "f64")
INTS = ("i32", "i64")
NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "i1": np.bool_}
#: ULPs charged for one transcendental: FASTMATH.md bound (<= 4) + numpy's own (<= 3) + 1.
TRANSCENDENTAL_ULP = 8.0
#: safety factor on the propagated first-order bound (second-order terms, tie rounding)
SAFETY = 4.0


# --------------------------------------------------------------------------- graphs


@dataclass
class Graph:
    """A prim graph as data: arguments, then ops each appending one value.

    values[i] = (elem, shape). An op is (kind, operand indices, attrs dict).
    Kinds: unary names, binary names, "const" (scalar), "reduce_*" (axis 1,
    keepdims), "matmul", "compare", "select", "cast".
    """

    args: list[tuple[str, tuple[int, ...]]]
    ops: list[tuple[str, list[int], dict[str, Any]]] = field(default_factory=list)
    values: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    index_bounds: dict[int, int] = field(default_factory=dict)  # index argument -> its axis size

    def __post_init__(self) -> None:
        if not self.values:
            self.values = list(self.args)

    def add(self, kind: str, operands: list[int], elem: str, shape: tuple[int, ...], **attrs: Any) -> int:
        self.ops.append((kind, operands, attrs))
        self.values.append((elem, tuple(shape)))
        return len(self.values) - 1


def ttype(elem: str, shape: tuple[int, ...]) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


UNARY = ("neg", "abs", "relu", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf")
BINARY = ("add", "sub", "mul", "div", "max", "min")


def to_mlir(g: Graph, name: str = "main") -> str:
    """The graph as a prim module with one function @name."""
    names = [f"%a{i}" for i in range(len(g.args))] + [f"%v{i}" for i in range(len(g.ops))]
    params = ", ".join(f"{names[i]}: {ttype(*t)}" for i, t in enumerate(g.args))
    results = ", ".join(ttype(*g.values[o]) for o in g.outputs)
    lines = [f"func.func @{name}({params}) -> ({results}) {{"]
    for k, (kind, opnds, attrs) in enumerate(g.ops):
        res = names[len(g.args) + k]
        rt = ttype(*g.values[len(g.args) + k])
        ins = ", ".join(names[i] for i in opnds)
        its = ", ".join(ttype(*g.values[i]) for i in opnds)
        if kind == "const":
            lines.append(f"  {res} = prim.constant dense<{attrs['value']!r}> : {rt}")
        elif kind in UNARY or kind == "cast":
            lines.append(f"  {res} = prim.{kind} {ins} : {its} -> {rt}")
        elif (line := mlir_line(kind, res, [names[i] for i in opnds], [ttype(*g.values[i]) for i in opnds], rt,
                                attrs)) is not None:
            lines.append(line)
        elif kind.startswith("reduce_"):
            keep = ", keepdims" if attrs.get("keepdims", True) else ""
            lines.append(f"  {res} = prim.{kind} {ins} {{axes = [{attrs['axis']}]{keep}}} : {its} -> {rt}")
        elif kind == "compare":
            lines.append(f"  {res} = prim.compare {attrs['pred']} {ins} : ({its}) -> {rt}")
        else:  # binary, matmul, select
            lines.append(f"  {res} = prim.{kind} {ins} : ({its}) -> {rt}")
    lines.append(f"  func.return {', '.join(names[o] for o in g.outputs)} : {results}")
    lines.append("}")
    return "\n".join(lines) + "\n"


class Chooser:
    """Where a builder's choices come from: hypothesis (`draw`) or `random.Random`."""

    def __init__(self, draw: Callable[[Any], Any] | None = None, rng: random.Random | None = None) -> None:
        self._draw, self._rng = draw, rng

    def pick(self, seq: tuple[Any, ...] | list[Any]) -> Any:
        if self._draw is not None:
            return self._draw(st.sampled_from(list(seq)))
        return self._rng.choice(list(seq))  # type: ignore[union-attr]

    def int(self, lo: int, hi: int) -> int:
        if self._draw is not None:
            return self._draw(st.integers(lo, hi))
        return self._rng.randint(lo, hi)  # type: ignore[union-attr]


#: how many index maps a graph draws (LONG: more of them, and more often)
MAP_COUNTS = (0, 0, 1, 2) if LONG else (0, 0, 0, 1)


def build_graph(c: Chooser, shape: tuple[int, int], max_ops: int = 4, index_map: str | None = None) -> Graph:
    """A random graph over a (R, C) base shape; every op is in a "safe" form. `index_map`: a KIND
    of index-map op the graph holds for sure (besides the ones it draws)."""
    R, C = shape
    family = c.pick(("float", "float", "float", "int", "mixed"))
    elem = c.pick(INTS) if family == "int" else c.pick(FLOATS)
    head = c.pick(("plain", "plain", "matmul") if family != "int" else ("plain",))
    K = 5
    args: list[tuple[str, tuple[int, ...]]] = [(elem, (R, C)), (elem, (R, C)), (elem, (C,)), (elem, (R, 1))]
    if head == "matmul":
        args += [(elem, (R, K)), (elem, (K, C))]
    if family == "mixed":
        args.append(("i32", (R, C)))
    mixed_arg = len(args) - 1
    # index maps (the registry's INDEX_MAP ops this corpus can generate), planned before the
    # arguments are fixed: some read an extra argument (a wider array, an index array)
    kinds = available_kinds()
    maps = [plan(c, c.pick(kinds), (R, C), elem) for _ in range(c.pick(MAP_COUNTS) if kinds else 0)]
    if index_map is not None:
        maps.insert(0, plan(c, index_map, (R, C), elem))
    bounds: dict[int, int] = {}
    for m in maps:
        for a_elem, a_shape, bound in m.extra:
            m.arg_positions.append(len(args))
            if bound is not None:
                bounds[len(args)] = bound
            args.append((a_elem, a_shape))
    g = Graph(args, index_bounds=bounds)
    full = [0, 1]
    if head == "matmul":
        full.append(g.add("matmul", [4, 5], elem, (R, C)))
    if family == "mixed":
        full.append(g.add("cast", [mixed_arg], elem, (R, C)))
    cur = full[-1]

    def const(v: float) -> int:
        return g.add("const", [], elem, (), value=(int(v) if elem in INTS else float(v)))

    def bin_(kind: str, a: int, b: int) -> int:
        sa, sb = g.values[a][1], g.values[b][1]
        out = np.broadcast_shapes(sa, sb)
        return g.add(kind, [a, b], elem, out)

    def un(kind: str, a: int) -> int:
        return g.add(kind, [a], elem, g.values[a][1])

    n_ops = c.int(1, max_ops)
    for _ in range(n_ops):
        shape_cur = g.values[cur][1]
        kinds = ["binary", "binary", "reduce", "select", "unary"] + (["index_map"] if maps else [])
        if elem in FLOATS:
            kinds += ["transc", "transc"]
        kind = c.pick(tuple(kinds))
        if kind == "index_map":
            cur = apply_index_map(maps.pop(0), g, cur)
        elif kind == "binary":
            op = c.pick(BINARY if elem in FLOATS else ("add", "sub", "mul", "max", "min"))
            other_kind = c.pick(("full", "row", "col", "scalar", "value"))
            other = {"full": 1, "row": 2, "col": 3}.get(other_kind)
            if other_kind == "scalar":
                other = const(c.pick((0.5, 2.0, -3.0)) if elem in FLOATS else c.pick((2, -3, 7)))
            elif other_kind == "value":
                other = c.pick(tuple(full))
            if op == "div":  # x / (|y| + 1)
                other = bin_("add", un("abs", other), const(1.0))
            operands = [cur, other] if c.int(0, 1) else [other, cur]
            if op == "div":
                operands = [cur, other]
            cur = bin_(op, *operands)
        elif kind == "unary":
            cur = un(c.pick(("neg", "abs", "relu")), cur)
        elif kind == "transc":
            fn = c.pick(("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf"))
            if fn == "exp":  # exp(-|x|)
                cur = un("exp", un("neg", un("abs", cur)))
            elif fn in ("log", "sqrt", "rsqrt"):  # f(|x| + 1)
                cur = un(fn, bin_("add", un("abs", cur), const(1.0)))
            else:
                cur = un(fn, cur)
        elif kind == "reduce":
            if len(shape_cur) != 2 or shape_cur[1] == 1:
                continue
            red = c.pick(("reduce_sum", "reduce_max", "reduce_mean") if elem in FLOATS else ("reduce_sum", "reduce_max"))
            r = g.add(red, [cur], elem, (shape_cur[0], 1), axis=1)
            cur = bin_(c.pick(("sub", "add", "mul")), c.pick(tuple(full)), r)  # broadcast the column back
        elif kind == "select":
            pred = c.pick(("lt", "ge", "ne"))
            cond = g.add("compare", [0, 2], "i1", (R, C), pred=pred)  # arguments only: exact in every arm
            cur = g.add("select", [cond, cur, c.pick(tuple(full))], elem, np.broadcast_shapes(g.values[cur][1], (R, C)))
    for m in maps:  # the ones the loop did not place read the chain's end
        cur = apply_index_map(m, g, cur)
    outs = [cur]
    if c.int(0, 3) == 0 and len(g.values[cur][1]) == 2 and g.values[cur][1][1] > 1:
        red = c.pick(("reduce_sum", "reduce_max"))
        outs = [g.add(red, [cur], elem, (g.values[cur][1][0],), axis=1, keepdims=False)]
    if c.int(0, 4) == 0 and full[-1] not in outs:
        outs.append(full[-1])  # a second result that is also an internal value
    g.outputs = outs
    return g


# --------------------------------------------------------------------------- values


def make_args(g: Graph, seed: int, regime: str) -> list[np.ndarray]:
    """Arguments for `g`: regime "unit" (N(0,1)), "wide" (x30), "tiny" (x1e-3),
    "specials" (N(0,1) with NaN, ±0, ±inf sprinkled in), "wrap" (ints near overflow)."""
    rng = np.random.default_rng(seed)
    out = []
    for pos, (elem, shape) in enumerate(g.args):
        if pos in g.index_bounds:  # an index array: in range whatever the regime
            a = index_values(rng, NP[elem], shape, g.index_bounds[pos])
        elif elem in INTS:
            hi = np.iinfo(NP[elem]).max if regime == "wrap" else 50
            a = rng.integers(-hi, hi, size=shape, endpoint=True).astype(NP[elem])
        else:
            scale = {"wide": 30.0, "tiny": 1e-3}.get(regime, 1.0)
            a = (rng.standard_normal(shape) * scale).astype(NP[elem])
            if regime == "specials" and a.size:
                k = max(1, a.size // 8)
                idx = rng.integers(0, a.size, size=k)
                a.reshape(-1)[idx] = rng.choice(np.array([np.nan, 0.0, -0.0, np.inf, -np.inf], NP[elem]), size=k)
        out.append(a)
    return out


# --------------------------------------------------------------------------- the oracle


def error_bounds(g: Graph, args: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Evaluate `g` in numpy in its own dtypes and propagate an absolute error
    bound per value (first order at the actual values). Returns (values, bounds)."""
    vals: list[np.ndarray] = [np.asarray(a) for a in args]
    errs: list[np.ndarray] = [np.zeros(a.shape) for a in args]
    with np.errstate(all="ignore"):
        for kind, opnds, attrs in g.ops:
            elem = g.values[len(vals)][0]
            u = float(np.finfo(NP[elem]).eps) if elem in FLOATS else 0.0
            xs = [vals[i] for i in opnds]
            es = [errs[i] for i in opnds]
            x = xs[0] if xs else None
            e = es[0] if es else None
            ax = np.abs(x).astype(np.float64) if x is not None and x.dtype != np.bool_ else None
            if kind == "const":
                v = np.asarray(attrs["value"], NP[elem])
                err = np.zeros(())
            elif kind == "cast":
                v = x.astype(NP[elem])
                err = e + u * np.abs(v.astype(np.float64))
            elif kind in ("neg", "abs", "relu"):
                v = {"neg": np.negative, "abs": np.abs, "relu": lambda t: np.maximum(t, 0)}[kind](x).astype(x.dtype)
                err = e
            elif kind in ("exp", "tanh", "sigmoid", "erf", "log", "sqrt", "rsqrt"):
                from math import erf as _erf
                xf = x.astype(np.float64)
                if kind == "exp":
                    v, d = np.exp(x), np.exp(xf)
                elif kind == "tanh":
                    v, d = np.tanh(x), 1.0 - np.tanh(xf) ** 2
                elif kind == "sigmoid":
                    s = 1.0 / (1.0 + np.exp(-xf))
                    v, d = s.astype(x.dtype), s * (1 - s)
                elif kind == "erf":
                    v, d = np.vectorize(_erf, otypes=[np.float64])(xf).astype(x.dtype), 1.13 * np.exp(-xf * xf)
                elif kind == "log":
                    v, d = np.log(x), 1.0 / np.abs(xf)
                elif kind == "sqrt":
                    v, d = np.sqrt(x), 0.5 / np.sqrt(np.abs(xf))
                else:
                    v, d = (1.0 / np.sqrt(x)).astype(x.dtype), 0.5 * np.abs(xf) ** -1.5
                err = np.abs(d) * e + TRANSCENDENTAL_ULP * u * np.abs(v.astype(np.float64))
            elif kind in BINARY:
                a, b = xs
                fa, fb_ = a.astype(np.float64), b.astype(np.float64)
                fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
                      "max": np.maximum, "min": np.minimum}[kind]
                v = fn(a, b)
                if elem in INTS:
                    v = v.astype(NP[elem])
                ea, eb = es
                if kind in ("add", "sub"):
                    err = ea + eb
                elif kind == "mul":
                    err = np.abs(fb_) * ea + np.abs(fa) * eb + ea * eb
                elif kind == "div":
                    err = ea / np.abs(fb_) + np.abs(fa) * eb / (fb_ * fb_)
                else:
                    err = np.maximum(ea, eb) + 0 * fa * fb_
                err = err + u * np.abs(v.astype(np.float64))
            elif kind.startswith("reduce_"):
                keep = attrs.get("keepdims", True)
                n = x.shape[attrs["axis"]]
                red = {"reduce_sum": np.sum, "reduce_max": np.max, "reduce_mean": np.mean}[kind]
                v = red(x, axis=attrs["axis"], keepdims=keep).astype(x.dtype)
                if kind == "reduce_max":
                    err = np.max(e, axis=attrs["axis"], keepdims=keep)
                else:
                    s = np.sum(e, axis=attrs["axis"], keepdims=keep) + n * u * np.sum(ax, axis=attrs["axis"], keepdims=keep)
                    err = s / n if kind == "reduce_mean" else s
                    err = err + u * np.abs(v.astype(np.float64))
            elif kind == "matmul":
                a, b = xs
                v = a @ b
                fa, fb_ = np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))
                err = fa @ es[1] + es[0] @ fb_ + a.shape[-1] * u * (fa @ fb_)
            elif kind == "compare":
                a, b = xs
                v = {"lt": np.less, "ge": np.greater_equal, "ne": np.not_equal}[attrs["pred"]](a, b)
                err = np.zeros(v.shape)
            elif (ve := propagate(kind, attrs, xs, es)) is not None:
                v, err = ve
            elif kind == "select":
                cond, a, b = xs
                v = np.where(cond, a, b).astype(a.dtype)
                err = np.maximum(np.broadcast_to(es[1], v.shape), np.broadcast_to(es[2], v.shape))
            else:
                raise ValueError(f"unknown op kind {kind}")
            vals.append(np.asarray(v))
            errs.append(np.broadcast_to(np.nan_to_num(np.asarray(err, np.float64), nan=np.inf), np.shape(v)))
    return vals, errs


def disagreement(got: np.ndarray, ref: np.ndarray, bound: np.ndarray, elem: str) -> str | None:
    """None when `got` agrees with `ref` within `bound`; else what differs."""
    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return f"type {got.dtype}{got.shape} != reference {ref.dtype}{ref.shape}"
    if elem not in FLOATS:
        bad = np.argwhere(got != ref)
        return None if bad.size == 0 else f"{len(bad)} ints differ, first at {tuple(bad[0])}: {got[tuple(bad[0])]} != {ref[tuple(bad[0])]}"
    nan_g, nan_r = np.isnan(got), np.isnan(ref)
    if (nan_g != nan_r).any():
        i = tuple(np.argwhere(nan_g != nan_r)[0])
        return f"NaN mismatch at {i}: got {got[i]}, reference {ref[i]}"
    inf_r = np.isinf(ref) | np.isinf(got)
    if (got[inf_r] != ref[inf_r]).any():
        i = tuple(np.argwhere(inf_r & (got != ref))[0])
        return f"inf mismatch at {i}: got {got[i]}, reference {ref[i]}"
    fin = ~(nan_r | inf_r)
    with np.errstate(all="ignore"):
        return _beyond_bound(got, ref, bound, elem, fin)


def _beyond_bound(got: np.ndarray, ref: np.ndarray, bound: np.ndarray, elem: str, fin: np.ndarray) -> str | None:
    tiny = float(np.finfo(NP[elem]).tiny) * 16
    allowed = SAFETY * 2 * bound + tiny
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    over = fin & (diff > allowed)
    if over.any():
        i = tuple(np.argwhere(over)[0])
        return (f"{int(over.sum())} values beyond the bound, first at {i}: got {got[i]!r}, reference {ref[i]!r}, "
                f"|diff| {diff[i]:.3g} > allowed {allowed[i]:.3g}")
    return None


@dataclass
class Outcome:
    fused: bool  # did the fused arm run a fused kernel


#: the pooled test's parsed module and compiled arms per module text (its structures repeat with
#: new values: the first call of each plans, later ones hit the plan cache or the fast path)
_COMPILED: dict[str, tuple[Any, Any, Any]] = {}


def run_three_ways(text: str, g: Graph, args: list[np.ndarray], reuse: bool = False) -> Outcome:
    """Interpreter, arm 0 and the fused arm on the same arguments; fail on disagreement.
    `reuse`: keep the parsed module and both compiled arms of `text` for its next call."""
    import fusebind as fb
    from fusebind.dialect import interpret, parse_module

    hit = _COMPILED.get(text) if reuse else None
    if hit is None:
        hit = (parse_module(text), fb.compile(text, optimize=False), fb.compile(text))
        if reuse:
            _COMPILED[text] = hit
    module, arm0, fused = hit
    with np.errstate(all="ignore"):
        ref = interpret(module, *args)
    refs = list(ref) if isinstance(ref, tuple) else [ref]
    _, bounds = error_bounds(g, args)
    fused_before = fused.stats.arms.fused_calls
    results = {"arm 0": arm0(*args), "fused": fused(*args)}
    for arm, got in results.items():
        gots = list(got) if isinstance(got, tuple) else [got]
        assert len(gots) == len(refs), f"{arm}: {len(gots)} results, the reference has {len(refs)}"
        for k, (o, r, out) in enumerate(zip(gots, refs, g.outputs)):
            why = disagreement(o, r, bounds[out], g.values[out][0])
            if why is not None:
                pytest.fail(f"{arm} disagrees with the interpreter on result #{k}: {why}\n{text}")
    return Outcome(fused=fused.stats.arms.fused_calls > fused_before)


# --------------------------------------------------------------------------- tests

REGIMES = ("unit", "unit", "wide", "tiny", "specials", "wrap")
POOL_SHAPES = ((3, 8), (1, 17), (4, 1)) if not LONG else ((3, 8), (1, 17), (4, 1), (16, 33), (2, 1000), (64, 64))
POOL_SIZE = scaled(14, 60)
_POOL: dict[int, tuple[Graph, str]] = {}


def pooled_case(index: int, shape_index: int) -> tuple[Graph, str]:
    """Structure `index` of the fixed pool (seeded), on pool shape `shape_index`. Structure k <
    the number of index-map KINDs holds the k-th for sure: the pool covers every one."""
    key = index * 100 + shape_index
    if key not in _POOL:
        kinds = available_kinds()
        g = build_graph(Chooser(rng=random.Random(index)), POOL_SHAPES[shape_index],
                        index_map=kinds[index] if index < len(kinds) else None)
        _POOL[key] = (g, to_mlir(g))
    return _POOL[key]


FUSED_SEEN: list[bool] = []


@settings(max_examples=scaled(300, 4000), deadline=None, derandomize=not LONG, database=None,
          suppress_health_check=list(HealthCheck))
@given(index=st.integers(0, POOL_SIZE - 1), shape_index=st.integers(0, len(POOL_SHAPES) - 1),
       seed=st.integers(0, 2**32 - 1), regime=st.sampled_from(REGIMES))
def test_pooled_graphs_agree_three_ways(index: int, shape_index: int, seed: int, regime: str) -> None:
    g, text = pooled_case(index, shape_index)
    FUSED_SEEN.append(run_three_ways(text, g, make_args(g, seed, regime), reuse=True).fused)


def test_every_index_map_op_has_a_generator() -> None:
    """Every built-in op with the INDEX_MAP fact joins this corpus (index_maps.py generates it);
    a new one without a generator fails here rather than going untested."""
    from index_maps import GENERATORS

    assert registered_index_map_kinds(), "the registry lists no INDEX_MAP op (prim.slice has the fact)"
    assert set(registered_index_map_kinds()) <= GENERATORS, sorted(set(registered_index_map_kinds()) - GENERATORS)


def test_the_pool_covers_every_index_map_kind() -> None:
    """Structure k of the pool holds the k-th index-map KIND, on every pool shape."""
    for shape_index in range(len(POOL_SHAPES)):
        seen = {kind for i in range(POOL_SIZE) for kind, _, _ in pooled_case(i, shape_index)[0].ops}
        assert set(available_kinds()) <= seen, (POOL_SHAPES[shape_index], sorted(set(available_kinds()) - seen))


def test_the_pooled_run_exercised_fused_kernels() -> None:
    """Guard against a vacuous differential run: most pooled cases must have run
    a fused kernel (runs after the pooled test in file order)."""
    if not FUSED_SEEN:
        pytest.skip("the pooled test did not run in this session (selected alone?)")
    assert sum(FUSED_SEEN) >= len(FUSED_SEEN) // 3, f"{sum(FUSED_SEEN)} of {len(FUSED_SEEN)} cases ran fused"


@st.composite
def free_cases(draw: st.DrawFn) -> tuple[Graph, list[np.ndarray]]:
    shape = (draw(st.sampled_from((1, 2, 5))), draw(st.sampled_from((1, 3, 16))))
    g = build_graph(Chooser(draw=draw), shape, max_ops=draw(st.integers(1, 5)))
    return g, make_args(g, draw(st.integers(0, 2**32 - 1)), draw(st.sampled_from(REGIMES)))


@settings(max_examples=scaled(40, 600), deadline=None, derandomize=not LONG, database=None,
          suppress_health_check=list(HealthCheck))
@given(case=free_cases())
def test_free_graphs_agree_three_ways(case: tuple[Graph, list[np.ndarray]]) -> None:
    g, args = case
    run_three_ways(to_mlir(g), g, args)


def corpus_cases() -> list[Path]:
    return sorted(CORPUS.glob("*.mlir")) if CORPUS.is_dir() else []


def graph_from_header(header: dict[str, Any]) -> Graph:
    g = Graph([(e, tuple(s)) for e, s in header["args"]],
              index_bounds={int(k): v for k, v in header.get("index_bounds", {}).items()})
    for kind, opnds, attrs, elem, shape in header["ops"]:
        g.add(kind, opnds, elem, tuple(shape), **attrs)
    g.outputs = header["outputs"]
    return g


def graph_header(g: Graph, seed: int, regime: str) -> str:
    ops = [[k, o, a, *g.values[len(g.args) + i]] for i, (k, o, a) in enumerate(g.ops)]
    extra = {"index_bounds": g.index_bounds} if g.index_bounds else {}
    return "// case: " + json.dumps({"args": g.args, "ops": ops, "outputs": g.outputs, "seed": seed,
                                     "regime": regime, **extra})


@pytest.mark.parametrize("path", corpus_cases(), ids=lambda p: p.name)
def test_differential_corpus_replays(path: Path) -> None:
    """Shrunk reproducers of past disagreements (or edge cases worth keeping)."""
    first, _, rest = path.read_text().partition("\n")
    header = json.loads(first.removeprefix("// case: "))
    g = graph_from_header(header)
    assert to_mlir(g) == rest, "the corpus module and its header disagree; regenerate the file"
    xfail = header.get("xfail")
    if xfail:
        pytest.xfail(xfail)
    run_three_ways(rest, g, make_args(g, header["seed"], header["regime"]))


def test_the_oracle_catches_a_one_percent_error() -> None:
    """The bound is not so loose that a real bug passes: a 1% error on a tanh chain fails."""
    g = Graph([("f32", (3, 8))])
    t = g.add("tanh", [0], "f32", (3, 8))
    g.outputs = [t]
    args = make_args(g, 1, "unit")
    vals, bounds = error_bounds(g, args)
    assert disagreement(vals[t], vals[t], bounds[t], "f32") is None
    assert disagreement(vals[t] * np.float32(1.01), vals[t], bounds[t], "f32") is not None
    assert disagreement(np.where(np.arange(24).reshape(3, 8) == 5, np.nan, vals[t]).astype(np.float32),
                        vals[t], bounds[t], "f32").startswith("NaN mismatch")


# --------------------------------------------------------------------------- fb.jit programs


def jit_program(c: Chooser) -> tuple[Callable[..., Any], str]:
    """A random numpy-style function for fb.jit (operators, Python scalars,
    astype, reductions) and its description."""
    steps = [c.pick(("x + y", "x * 2.0", "x - 0.5", "-x", "x * y + x", "abs(x)", "fb.tanh(x)",
                     "fb.exp(-abs(x))", "fb.maximum(x, y)", "fb.relu(x) * y", "x / (abs(y) + 1.0)",
                     "(x - x.sum(axis=1, keepdims=True))", "x.astype('float64').astype(x.dtype)",
                     "fb.where(x < y, x, y)", "x.max(axis=1, keepdims=True) + y",
                     # layout steps (index maps: slices, concats, gathers), each keeping the shape
                     "x[::-1, ::-1] + y", "np.roll(x, 1, axis=1) * y", "np.concatenate([x[:, 2:], x[:, :2]], axis=1)",
                     "np.pad(x, ((0, 0), (1, 0)), mode='edge')[:, :-1] - y",
                     "np.take(x, np.arange(x.shape[0])[::-2].repeat(2)[:x.shape[0]], axis=0)"))
             for _ in range(c.int(1, 4))]
    src = "def f(x, y):\n" + "".join(f"    x = {s}\n" for s in steps) + "    return x\n"
    return src, " ; ".join(steps)  # type: ignore[return-value]


@settings(max_examples=scaled(40, 800), deadline=None, derandomize=not LONG, database=None,
          suppress_health_check=list(HealthCheck))
@given(index=st.integers(0, scaled(10, 60) - 1), seed=st.integers(0, 2**32 - 1),
       dtype=st.sampled_from((np.float32, np.float64)), shape=st.sampled_from(((4, 8), (1, 5))))
def test_jit_traced_programs_agree_with_numpy(index: int, seed: int, dtype: Any, shape: tuple[int, int]) -> None:
    import fusebind as fb

    src, _ = jit_program(Chooser(rng=random.Random(index)))
    space: dict[str, Any] = {"fb": fb, "np": np}
    exec(src, space)  # noqa: S102 - our own generated source
    fn = space["f"]
    rng = np.random.default_rng(seed)
    x, y = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    np_space: dict[str, Any] = {"fb": _NumpyFb(), "np": np}
    exec(src, np_space)  # noqa: S102
    with np.errstate(all="ignore"):
        want = np_space["f"](x, y)
    got = fb.jit(fn)(x, y)
    assert got.dtype == want.dtype and got.shape == want.shape, (src, got.dtype, want.dtype, got.shape, want.shape)
    eps = float(np.finfo(dtype).eps)
    np.testing.assert_allclose(got, want, rtol=64 * eps * shape[1], atol=64 * eps * shape[1], err_msg=src)


class _NumpyFb:
    """numpy stand-ins for the fb functions the generated programs call."""

    tanh = staticmethod(np.tanh)
    exp = staticmethod(np.exp)
    maximum = staticmethod(np.maximum)
    where = staticmethod(np.where)

    @staticmethod
    def relu(x: np.ndarray) -> np.ndarray:
        return np.maximum(x, 0).astype(x.dtype)


# --------------------------------------------------------------------------- long run


@pytest.mark.slow
def test_long_pooled_run_counts() -> None:
    """Under FUSEBIND_LONG=1 the pooled test above runs 4000 cases over 60
    structures x 6 shapes; this documents the figure and checks it ran."""
    if not FUSED_SEEN:
        pytest.skip("the pooled test did not run in this session")
    assert len(FUSED_SEEN) >= 1000


# --------------------------------------------------------------------------- the op x dtype matrix
#
# Every prim op a fused region may hold, on every dtype it accepts, in one module per dtype
# (all ops read `max(x, x)` == x, so they fuse into one region: one compile per dtype), run
# three ways on arguments built from the edges: zero divisors, MIN // -1, MIN % -1, negative
# operands, NaN, ±inf, ±0. Integer pow appears three ways: by a splat constant (multiplies),
# by a dense constant (the kernel's square-and-multiply) and by a traced exponent (kept out of
# kernels: numpy after a check). Exact ops must agree bit for bit (NaN payloads aside, signs
# of zero included); transcendentals within TRANSCENDENTAL_ULP; sums within n·eps·Σ|x|.

MATRIX_ELEMS = ("f32", "f64", "i32", "i64", "i1")
EXACT, NOSIGN0, ULPS, SUM, MEAN = "exact", "exact-but-zero-sign", "ulps", "sum", "mean"
_FLOAT_UNARY = {"neg": EXACT, "abs": EXACT, "relu": EXACT, "sqrt": EXACT, "rsqrt": EXACT, "exp": ULPS,
                "log": ULPS, "tanh": ULPS, "sigmoid": ULPS, "erf": ULPS}
_BINARY_ALL = ("add", "sub", "mul", "div", "max", "min", "floordiv", "rem", "pow")
_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")


@dataclass
class Matrix:
    """One module holding every op on one dtype; `checks[k]` = (what, how) for result k."""

    elem: str
    text: str
    args: list[np.ndarray]
    checks: list[tuple[str, str]]
    fused_kinds: set[str]  # op kinds that must end up inside a fused region


def _edge_values(elem: str) -> np.ndarray:
    if elem == "i1":
        return np.array([False, True])
    if elem in INTS:
        info = np.iinfo(NP[elem])
        return np.array([info.min, info.min + 1, -7, -3, -1, 0, 1, 2, 3, 7, 100, info.max], NP[elem])
    return np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 7.0, -7.0, 1e-3, 1e30, -1e-30,
                     0.1], NP[elem])


#: the ops this issue added or fixed; the default run covers them on every dtype, FUSEBIND_LONG every op
_NEW_BINARY = ("floordiv", "rem")


def _matrix_args(elem: str) -> tuple[list[np.ndarray], tuple[int, int]]:
    """x, w: every pair of edge values, in rows of 8; k: clean values (casts: finite, in range)."""
    edges = _edge_values(elem)
    x, w = (a.reshape(-1) for a in np.meshgrid(edges, edges))
    if elem == "i1":
        x, w = np.tile(x, 8), np.tile(w, 8)
    shape = (x.size // 8, 8)
    rng = np.random.default_rng(11)
    if elem in FLOATS:
        k = (rng.standard_normal(shape) * 20).astype(NP[elem])
    elif elem in INTS:
        k = rng.integers(-50, 50, shape).astype(NP[elem])
    else:
        k = rng.random(shape) < 0.5
    args = [x.reshape(shape), w.reshape(shape), k]
    if elem in INTS:
        args.append(np.abs(k))  # %e: a traced exponent, never negative here
    return args, shape


def build_matrix(elem: str, full: bool = True) -> Matrix:
    """The module of ops on `elem` (all of them, or with `full=False` those this issue added
    plus one of each other kind), its arguments and how each result is compared."""
    args, shape = _matrix_args(elem)
    rows, cols = shape
    fl = elem in FLOATS
    t = ttype(elem, shape)
    b1 = ttype("i1", shape)
    ident = (lambda v: f"prim.max {v}, {v} : ({t}, {t}) -> {t}") if elem != "i1" else \
        (lambda v: f"prim.select {v}, {v}, {v} : ({t}, {t}, {t}) -> {t}")
    # identities (max(a, a) == a, NaN and -0 included; select(a, a, a) == a) that tie the ops
    # into one region: one compile per dtype
    lines = [f"  %{v}r = {ident('%' + v)}" for v in ("x", "w", "k")]
    results: list[tuple[str, str]] = []
    checks: list[tuple[str, str]] = []
    fused: set[str] = set()

    def emit(line: str, rtype: str, what: str, how: str, kind: str | None) -> None:
        name = f"%r{len(results)}"
        lines.append(f"  {name} = {line}")
        results.append((name, rtype))
        checks.append((what, how))
        if kind:
            fused.add(kind)

    if elem != "i1":
        unary = _FLOAT_UNARY if fl else {"neg": EXACT, "abs": EXACT, "relu": EXACT}
        for op, how in unary.items() if full else list(unary.items())[:1]:
            emit(f"prim.{op} %xr : {t} -> {t}", t, op, how, op)
        binary = _BINARY_ALL if full else _NEW_BINARY + ("add",) + (("pow",) if fl else ())
        for op in binary:
            if op != "pow" or fl:  # integer pow: the three forms below
                emit(f"prim.{op} %xr, %wr : ({t}, {t}) -> {t}", t, op, EXACT, op)
    if elem in INTS:
        dense_t, scalar_t = ttype(elem, (cols,)), ttype(elem, ())
        dense = np.random.default_rng(3).integers(0, 70, cols)  # small: cloned into the region
        lines.append(f"  %edense = prim.constant dense<{dense.tolist()}> : {dense_t}")
        lines.append(f"  %ethree = prim.constant dense<3> : {scalar_t}")
        emit(f"prim.pow %xr, %edense : ({t}, {dense_t}) -> {t}", t, "pow by a dense constant", EXACT, "pow")
        emit(f"prim.pow %xr, %ethree : ({t}, {scalar_t}) -> {t}", t, "pow by 3 (multiplies)", EXACT, None)
        emit(f"prim.pow %xr, %e : ({t}, {t}) -> {t}", t, "pow by a traced exponent", EXACT, None)
    for pred in _PREDICATES if full else ("lt",):
        emit(f"prim.compare {pred} %xr, %wr : ({t}, {t}) -> {b1}", b1, f"compare {pred}", EXACT, "compare")
    lines.append(f"  %cond = prim.compare lt %wr, %xr : ({t}, {t}) -> {b1}")
    emit(f"prim.select %cond, %xr, %wr : ({b1}, {t}, {t}) -> {t}", t, "select", EXACT, "select")
    for to in [e for e in MATRIX_ELEMS if e != elem][: None if full else 1]:
        emit(f"prim.cast %kr : {t} -> {ttype(to, shape)}", ttype(to, shape), f"cast to {to}", EXACT, "cast")
    row_t = ttype(elem, (cols,))
    lines.append(f"  %row = prim.reduce_min %kr {{axes = [0]}} : {t} -> {row_t}")
    emit(f"prim.broadcast_to %row : {row_t} -> {t}", t, "broadcast_to", EXACT, "broadcast_to")
    reductions = ["reduce_max", "reduce_min"] + (["reduce_sum"] if elem != "i1" and full else []) + \
        (["reduce_mean"] if fl and full else [])
    for red in reductions:
        for keep in (True, False) if full else (elem == "i1",):
            out_t = ttype(elem, (rows, 1) if keep else (rows,))
            how = {"reduce_sum": SUM, "reduce_mean": MEAN}.get(red, NOSIGN0) if fl else EXACT
            src = f"%xs{len(results)}"  # its own root: the reduction rule fuses one reduction per region
            lines.append(f"  {src} = {ident('%x')}")
            emit(f"prim.{red} {src} {{axes = [1]{', keepdims' if keep else ''}}} : {t} -> {out_t}", out_t,
                 f"{red}{' keepdims' if keep else ''}", how, red)
    params = ", ".join(f"%{v}: {t}" for v in ("x", "w", "k", "e")[: len(args)])
    types = ", ".join(r for _, r in results)
    text = "\n".join([f"func.func @main({params}) -> ({types}) {{", *lines,
                      f"  func.return {', '.join(n for n, _ in results)} : {types}", "}"]) + "\n"
    return Matrix(elem, text, args, checks, fused)


def _matrix_disagreement(got: np.ndarray, ref: np.ndarray, how: str, reduced: np.ndarray | None) -> str | None:
    got, ref = np.asarray(got), np.asarray(ref)
    if got.dtype != ref.dtype or got.shape != ref.shape:
        return f"type {got.dtype}{got.shape} != reference {ref.dtype}{ref.shape}"
    if got.dtype.kind != "f":
        bad = np.argwhere(got != ref)
        return None if not bad.size else f"{len(bad)} differ, first at {tuple(bad[0])}: {got[tuple(bad[0])]} != {ref[tuple(bad[0])]}"
    nan_g, nan_r = np.isnan(got), np.isnan(ref)
    if (nan_g != nan_r).any():
        i = tuple(np.argwhere(nan_g != nan_r)[0])
        return f"NaN mismatch at {i}: got {got[i]!r}, reference {ref[i]!r}"
    g, r = got[~nan_r], ref[~nan_r]
    if how in (EXACT, NOSIGN0):
        same = (g == r) & ((np.signbit(g) == np.signbit(r)) | (how == NOSIGN0))
    else:
        eps = float(np.finfo(got.dtype).eps)
        with np.errstate(all="ignore"):
            if how == ULPS:
                allowed = TRANSCENDENTAL_ULP * eps * np.abs(r.astype(np.float64)) + float(np.finfo(got.dtype).tiny) * 16
            else:  # a sum (or mean) over the rows of `reduced`: n·eps·Σ|x| per row (/ n for a mean)
                n = reduced.shape[1]
                total = SAFETY * n * eps * np.sum(np.abs(reduced.astype(np.float64)), axis=1)
                total = total / n + 2 * eps * np.abs(ref.reshape(-1)) if how == MEAN else total
                allowed = np.broadcast_to(total.reshape(-1, *([1] * (ref.ndim - 1))), ref.shape)[~nan_r]
            same = (g == r) | (np.abs(g.astype(np.float64) - r.astype(np.float64)) <= allowed)
    if same.all():
        return None
    i = int(np.argwhere(~same)[0][0])
    return f"{int((~same).sum())} values differ, first: got {g[i]!r}, reference {r[i]!r}"


_MATRIX_CACHE: dict[tuple[str, bool], tuple[Matrix, Any, Any]] = {}


def matrix_case(elem: str, full: bool) -> tuple[Matrix, Any, Any]:
    """The dtype's matrix and its two compiled arms, built once per session (shared by the tests)."""
    import fusebind as fb

    if (elem, full) not in _MATRIX_CACHE:
        m = build_matrix(elem, full)
        _MATRIX_CACHE[elem, full] = (m, fb.compile(m.text, optimize=False), fb.compile(m.text))
    return _MATRIX_CACHE[elem, full]


def check_matrix_three_ways(elem: str, full: bool) -> None:
    from fusebind.dialect import interpret, parse_module

    m, arm0, fused = matrix_case(elem, full)
    with np.errstate(all="ignore"):
        refs = interpret(parse_module(m.text), *m.args)
        results = {"arm 0": arm0(*m.args), "fused": fused(*m.args)}
    assert fused.stats.arms.fused_calls >= 1, fused.explain(*m.args)
    inside = _kinds_in_regions(fused.optimized(*m.args))
    assert m.fused_kinds <= inside, f"not fused: {sorted(m.fused_kinds - inside)}\n{fused.explain(*m.args)}"
    for arm, outs in results.items():
        for k, ((what, how), got, ref) in enumerate(zip(m.checks, outs, refs)):
            why = _matrix_disagreement(got, ref, how, m.args[0])
            if why is not None:
                pytest.fail(f"{elem} {what} (result #{k}): {arm} disagrees with the interpreter: {why}\n{m.text}")


@pytest.mark.parametrize("elem", MATRIX_ELEMS)
def test_every_op_on_every_dtype_agrees_three_ways_through_the_fused_path(elem: str) -> None:
    """Default slice: every op on bool; on the others the ops this issue added or fixed
    (floordiv, rem, integer pow three ways, max/min reductions) and one of each other kind.
    `test_full_op_matrix` (long run) takes every op on every dtype."""
    check_matrix_three_ways(elem, full=elem == "i1")


@pytest.mark.slow
@pytest.mark.parametrize("elem", ("f32", "f64", "i32", "i64"))
def test_full_op_matrix(elem: str) -> None:
    check_matrix_three_ways(elem, full=True)


def _kinds_in_regions(optimized: str) -> set[str]:
    from fusebind.dialect import parse_module
    from fusebind.dialect.fused import RegionOp

    kinds: set[str] = set()
    for op in parse_module(optimized).walk():
        if isinstance(op, RegionOp):
            kinds |= {getattr(o, "KIND", "") for o in op.body.blocks[0].ops}
    return kinds


def test_matrix_integer_edges_are_numpys() -> None:
    """The matrix's inputs really hold the edges (a guard against a vacuous matrix), and the
    fused arm's integer division and remainder match numpy's at them."""
    m, _, fused = matrix_case("i32", False)
    x, w = m.args[0], m.args[1]
    lo = np.iinfo(np.int32).min
    assert ((x == lo) & (w == -1)).any() and ((w == 0) & (x != 0)).any() and ((x < 0) & (w > 0)).any()
    outs = fused(*m.args)
    names = [what for what, _ in m.checks]
    q, r = outs[names.index("floordiv")], outs[names.index("rem")]
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(q, np.floor_divide(x, w))
        np.testing.assert_array_equal(r, np.remainder(x, w))
    at = (x == lo) & (w == -1)
    assert (q[at] == lo).all() and (r[at] == 0).all() and (q[w == 0] == 0).all() and (r[w == 0] == 0).all()


def test_matrix_traced_negative_integer_exponent_raises_in_every_arm() -> None:
    from fusebind.dialect import interpret, parse_module
    from fusebind.dialect.prim import IntegerPowerError

    m, arm0, fused = matrix_case("i64", False)
    args = list(m.args)
    args[3] = args[3].copy()
    args[3].reshape(-1)[5] = -1
    for run in (lambda: interpret(parse_module(m.text), *args), lambda: arm0(*args), lambda: fused(*args)):
        with pytest.raises(IntegerPowerError, match="^Integers to negative integer powers are not allowed"):
            run()
