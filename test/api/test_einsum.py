"""np.einsum on traced arrays (api/numpy_einsum.py) and the matmul family beside it (np.tensordot,
np.dot, np.inner, np.outer, np.vdot): numpy's values, dtype and shape through the interpreter,
arm 0 (fb.compile without fusion) and the fused arm; attention scores then softmax fused; numpy's
dtypes (NEP 50: operands are arrays, Python scalars strong); numpy's errors and the clear
refusals of the forms fusebind does not plan.

Compile cost: every contraction is one output of one function (one arm-0 plan, one fused
compile), plus the attention program."""

from __future__ import annotations


import numpy as np
import pytest

import fusebind as fb
from api_trace_helpers import interp
from fusebind.api.trace import trace
from fusebind.dialect import print_module

RNG = np.random.default_rng(14)


def _f(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


A34, B45, C56, V3, V4 = _f(3, 4), _f(4, 5), _f(5, 6), _f(3), _f(4)
S44, T34, BA, BB = _f(4, 4), _f(3, 4), _f(2, 3, 4), _f(2, 4, 5)

# (subscripts, operands): each a contraction numpy's einsum docs list, sharing shapes
CASES = [
    ("ij,jk->ik", A34, B45), ("ij,jk", A34, B45), ("bij,bjk->bik", BA, BB), ("i,j->ij", V3, V4),
    ("ij->ji", A34), ("ba", A34), ("ii->i", S44), ("ii", S44), ("ij,ij->", A34, T34), ("ij,ij->i", A34, T34),
    ("i,i", V4, V4), ("ij,j->i", A34, V4), ("ij,jk,kl->il", A34, B45, C56), ("...ij,...jk", BA, B45),
    ("ij,ij->ij", A34[:1], T34), ("bij,bkj->bki", BA, BA), ("ijk->", BA), ("ijk->kj", BA), ("i,i->i", V4, V4),
]


def _all(*xs):
    """Every case, then tensordot (axes int and pairs) and the other products, on the same arrays."""
    it = iter(xs)
    outs = [np.einsum(s, *[next(it) for _ in ops]) for s, *ops in CASES]
    a, b, ba, bb = xs[0], xs[1], xs[4], xs[5]  # A34, B45 (case 0), BA, BB (case 2), as traced arguments
    outs += [np.tensordot(a, b, 1), np.tensordot(ba, a, ([1, 2], [0, 1])), np.tensordot(a, a, 0),
             np.tensordot(ba, ba, axes=([0, 1], [0, 1])), np.dot(a, b), np.inner(a, a), np.outer(a[0], b[1]),
             np.vdot(a, a), np.dot(ba, b), np.dot(a[0], bb)]
    return tuple(outs)


ARGS = [x for _, *ops in CASES for x in ops]


def _close(got, want, what):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=what)


def _names():
    return [c[0] for c in CASES] + ["tensordot 1", "tensordot pairs", "tensordot 0", "tensordot batch", "dot",
                                    "inner", "outer", "vdot", "dot 3-D 2-D",
                                    "dot 1-D 3-D"]


def test_every_contraction_is_numpys_answer_on_the_interpreter_arm0_and_fused(object_cache) -> None:
    want = _all(*ARGS)
    module = trace(_all, ARGS, [f"a{i}" for i in range(len(ARGS))], "f")
    fused = fb.jit(_all, cache=object_cache)
    arms = {"interpreter": interp(_all, *ARGS), "arm 0": fb.compile(print_module(module), optimize=False)(*ARGS),
            "fused": fused(*ARGS)}
    for arm, got in arms.items():
        assert len(got) == len(want)
        for name, g, w in zip(_names(), got, want):
            _close(g, w, f"{arm}: {name}")
    assert fused.stats.arm0_calls == 0 and fused.stats.fused_calls >= 1, fused.stats


def test_a_two_d_contraction_is_a_prim_matmul_and_a_product_sum_is_a_reduce() -> None:
    ops = lambda m: [op.name for op in m.walk()]  # noqa: E731
    assert "prim.matmul" in ops(trace(lambda a, b: np.einsum("ij,jk->ik", a, b), [A34, B45], ["a", "b"], "f"))
    dot = ops(trace(lambda a, b: np.einsum("ij,ij->i", a, b), [A34, T34], ["a", "b"], "f"))
    assert "prim.matmul" not in dot and "prim.mul" in dot and "prim.reduce_sum" in dot
    vdot = ops(trace(lambda a, b: np.vdot(a, b), [A34, T34], ["a", "b"], "f"))
    assert "prim.matmul" not in vdot and "prim.reduce_sum" in vdot
    # np.dot of a stack with a matrix merges the stack into rows: one 2-D matmul (the BLAS kernel)
    module = trace(lambda a, b: np.dot(a, b), [BA, B45], ["a", "b"], "f")
    (mm,) = [op for op in module.walk() if op.name == "prim.matmul"]
    assert [len(v.type.get_shape()) for v in mm.operands] == [2, 2]


def test_batch_labels_stay_matmul_batch_dims_so_attention_scores_copy_only_k() -> None:
    q = _f(2, 4, 16, 8)
    module = trace(lambda a, b: np.einsum("bhqd,bhkd->bhqk", a, b), [q, q], ["a", "b"], "f")
    names = [op.name for op in module.walk() if op.name.startswith("prim.")]
    assert names == ["prim.transpose", "prim.matmul"], names  # k's last two axes swapped, no batch merge


def _attention(q, k):
    s = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(np.float32(q.shape[-1]))
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_attention_scores_then_softmax_run_fused_and_match_numpy(object_cache) -> None:
    q, k = _f(2, 4, 16, 8), _f(2, 4, 16, 8)
    f = fb.jit(_attention, cache=object_cache)
    got = f(q, k)
    _close(got, _attention(q, k), "attention")
    assert f.stats.fused_calls == 1 and f.stats.arm0_calls == 0, f.stats
    assert "chosen: fused" in f.explain(q, k)


@pytest.mark.parametrize("subs, xs, dtype", [
    ("ij,jk", (np.arange(12, dtype=np.int32).reshape(3, 4), np.arange(20).reshape(4, 5)), np.int64),
    ("i,i", (np.array([True, False, True]), np.array([False, False, True])), np.bool_),
    ("i,i->i", (np.array([True, False, True]), np.array([True, True, False])), np.bool_),
    ("ij,jk", (np.array([[True, False]]), np.array([[False], [False]])), np.bool_),
])
def test_numpys_dtypes(subs, xs, dtype) -> None:
    want = np.einsum(subs, *xs)
    assert want.dtype == dtype
    got = interp(lambda *a: np.einsum(subs, *a), *xs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("subs, shapes", [
    ("i,i", [(0,), (0,)]), ("ij,jk", [(2, 0), (0, 3)]), ("ij,jk", [(0, 2), (2, 3)]), ("ij,jk", [(1, 2), (2, 0)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 6)]), ("...ii->...i", [(2, 3, 3)]), ("iij->ji", [(2, 2, 3)]),
    ("bij,bjk->bik", [(1, 2, 3), (4, 3, 2)]), ("i,i,i->", [(3,), (3,), (3,)]), ("ij,kl->", [(2, 3), (4, 5)]),
])
def test_empty_broadcast_ellipsis_and_diagonal_forms(subs, shapes) -> None:
    xs = [RNG.standard_normal(s) for s in shapes]  # size-0 labels broadcast from 1 (a regression: 0 became 1)
    _close(interp(lambda *a: np.einsum(subs, *a), *xs), np.asarray(np.einsum(subs, *xs)), subs)


def _ints_and_bools(i, j, p, q):
    return (np.einsum("ij,jk", i, j), np.einsum("ij,ij->i", i, i), np.einsum("i,i", p[0], q[0]),
            np.einsum("ij,kj->ik", p, q), np.einsum("bij,bjk->bik", i.reshape(1, 3, 4), j.reshape(1, 4, 5)))


def test_integer_and_bool_contractions_on_arm0_and_fused(object_cache) -> None:
    i, j = RNG.integers(-9, 9, (3, 4)).astype(np.int32), RNG.integers(-9, 9, (4, 5))
    p, q = RNG.standard_normal((3, 4)) > 0, RNG.standard_normal((2, 4)) > 0
    want = _ints_and_bools(i, j, p, q)
    module = trace(_ints_and_bools, [i, j, p, q], ["i", "j", "p", "q"], "f")
    for arm, got in (("arm 0", fb.compile(print_module(module), optimize=False)(i, j, p, q)),
                     ("fused", fb.jit(_ints_and_bools, cache=object_cache)(i, j, p, q))):
        for g, w in zip(got, want):
            g = np.asarray(g)
            assert g.dtype == w.dtype and g.shape == w.shape, (arm, g.dtype, w.dtype)
            np.testing.assert_array_equal(g, w, err_msg=arm)


def test_a_python_scalar_operand_is_strong_as_numpy_makes_it_an_array() -> None:
    got = interp(lambda a: np.einsum("i,->i", a, 2.0), V4)
    _close(got, np.einsum("i,->i", V4, 2.0), "scalar")
    assert got.dtype == np.float64


def test_dtype_argument_casts_safely_or_raises_numpys_error() -> None:
    got = interp(lambda a, b: np.einsum("ij,jk", a, b, dtype=np.float64), A34, B45)
    _close(got, np.einsum("ij,jk", A34, B45, dtype=np.float64), "dtype=")
    with pytest.raises(fb.UnsupportedOperation, match=r"according to the rule 'safe'"):
        fb.jit(lambda a, b: np.einsum("ij,jk", a, b, dtype=np.int32))(A34, B45)


@pytest.mark.parametrize("fn, cls, message", [
    (lambda a, b: np.einsum("ij,jk->ii", a, b), fb.FusebindValueError,
     "einstein sum subscripts string includes output subscript 'i' multiple times"),
    (lambda a, b: np.einsum("ij,jk->iz", a, b), fb.FusebindValueError,
     "output subscript 'z' which never appeared in an input"),
    (lambda a, b: np.einsum("ij,kk->ik", a, b), fb.FusebindValueError,
     "dimensions in operand 1 for collapsing index 'k' don't match (4 != 5)"),
    (lambda a, b: np.einsum("ij,jk->ik", a, b, optimize="optimal"), fb.UnsupportedOperation,
     "numpy.einsum(..., optimize='optimal') is not supported on traced arrays (fusebind plans the contraction "
     "itself); pass optimize=False, True or 'greedy'"),
    (lambda a, b: np.einsum("ij,jk->ik", a, b, optimize=["einsum_path", (0, 1)]), fb.UnsupportedOperation,
     "pass optimize=False, True or 'greedy'"),
    (lambda a, b: np.einsum(a, [0, 1], b, [1, 2]), fb.UnsupportedOperation,
     "the interleaved sublist form is not supported on traced arrays; write the subscripts as a string"),
    (lambda a, b: np.einsum("ij,jk->ik", a, b, out=np.empty((3, 5), np.float32)), fb.UnsupportedOperation,
     "numpy.einsum(..., out=...) cannot write into an array inside a traced function"),
])
def test_errors_are_numpys_or_a_clear_refusal(fn, cls, message) -> None:
    with pytest.raises(cls) as info:
        fb.jit(fn)(A34, B45)
    assert message in str(info.value), str(info.value)
