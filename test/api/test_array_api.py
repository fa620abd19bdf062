"""Array API interop: a traced value's `__array_namespace__` (api/array_api.py), so functions
written only against the standard (`xp = array_namespace(x)`) trace through `fb.jit` and give
numpy's answer (values, dtype, shape); what a trace cannot compute is a named fb error."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
import fusebind.api.array_api as A

compat = pytest.importorskip("array_api_compat", reason="array-api-compat is not installed (the test extra has it)")
array_namespace = compat.array_namespace


# ------------------------------------------------------------------ functions written only against the standard
def softmax(x):
    xp = array_namespace(x)
    e = xp.exp(x - xp.max(x, axis=-1, keepdims=True))
    return e / xp.sum(e, axis=-1, keepdims=True)


def standardise(x):
    xp = array_namespace(x)
    return (x - xp.mean(x, axis=0)) / xp.std(x, axis=0, correction=1)


def logsumexp(x):
    xp = array_namespace(x)
    m = xp.max(x, axis=-1, keepdims=True)
    return xp.squeeze(m, axis=-1) + xp.log(xp.sum(xp.exp(x - m), axis=-1))


def masked_where(x, mask):
    xp = array_namespace(x, mask)
    return xp.where(mask, x, xp.zeros_like(x))


def concat_permute(x, y):
    xp = array_namespace(x, y)
    return xp.permute_dims(xp.concat([x, xp.astype(y, x.dtype)], axis=1), (1, 0))


def wrappers(x):
    """The names whose standard signature is not numpy's, and creation of constants."""
    xp = array_namespace(x)
    eps = xp.finfo(x).eps
    c = xp.clip(x, min=-1.0) + xp.clip(x, max=1.0) + xp.clip(x)
    d = xp.diff(x, axis=-1, prepend=xp.zeros((x.shape[0], 1), dtype=x.dtype))
    idx = xp.asarray([[0], [1], [2], [3]], dtype=xp.int64)
    t = xp.take_along_axis(x, idx, axis=1)
    v = xp.vecdot(x, x)[:, None] + xp.linalg.matmul(x, xp.matrix_transpose(x))[:, :1]
    r = xp.reshape(xp.arange(8, dtype=x.dtype), (1, 8)) * xp.full((1, 1), 0.5, dtype=x.dtype)
    (b,) = xp.broadcast_arrays(t)[:1]
    return c + d + r + eps + xp.cumulative_sum(x, axis=1), v + b


def counts_and_norms(x, k):
    """Integer and boolean paths: numpy's dtypes (int32 sums to int64, mean of ints is float64)."""
    xp = array_namespace(x, k)
    unit = x / xp.linalg.vector_norm(x, axis=1, keepdims=True)
    hits = xp.count_nonzero(k > 2, axis=1)
    return unit, xp.sum(k, axis=0), xp.mean(xp.astype(k, xp.float64)), hits, xp.astype(k > 2, xp.float32) @ unit.mT


X32 = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
X64 = np.linspace(-3, 1, 32, dtype=np.float64).reshape(4, 8)


def same(got, want) -> None:
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    for g, w in zip(got, want):
        assert (g.dtype, g.shape) == (w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=2e-6 if w.dtype == np.float32 else 1e-12, atol=1e-6)


@pytest.mark.parametrize("fn, args", [
    (softmax, (X32,)), (softmax, (X64,)), (standardise, (X32,)), (logsumexp, (X32,)),
    (masked_where, (X32, X32 > 0.3)), (concat_permute, (X32, (X32 * 4).astype(np.int32))), (wrappers, (X32,)),
    (counts_and_norms, (X32, np.arange(32, dtype=np.int32).reshape(4, 8) % 5)),
], ids=["softmax-f32", "softmax-f64", "standardise", "logsumexp", "masked-where", "concat-permute", "wrappers",
        "counts-and-norms"])
def test_standard_only_functions_trace_and_match_numpy(fn, args) -> None:
    # on numpy arrays, array_namespace gives array_api_compat's numpy: numpy's answer
    same(fb.jit(fn)(*args), fn(*args))


def test_the_namespace_of_a_traced_value_is_ours() -> None:
    seen = []

    def probe(x):
        seen.append((array_namespace(x), x.__array_namespace__(), x.__array_namespace__(api_version="2023.12"),
                     compat.device(x), x.to_device("cpu") is x, compat.is_array_api_obj(x)))
        return x.mT

    out = fb.jit(probe)(X32)
    assert (out.dtype, out.shape) == (np.float32, (8, 4)) and np.array_equal(out, X32.T)
    assert seen == [(A, A, A, "cpu", True, True)]
    assert A.__array_api_version__ == "2024.12"


def test_what_a_trace_cannot_answer_is_a_named_error() -> None:
    def call(expr):
        return fb.jit(lambda x: expr(array_namespace(x), x))(X32)

    cases = [
        (lambda xp, x: xp.sort(x), "the array API function sort is not supported on traced arrays: fusebind has no "
                                   "sort op; sort outside the jitted function"),
        (lambda xp, x: xp.unique_values(x), "the array API function unique_values is not supported on traced arrays: "
                                            "its result's shape depends on the values"),
        (lambda xp, x: xp.linalg.inv(x[:, :4]), "the array API function linalg.inv is not supported on traced "
                                                "arrays: fusebind has no linear-algebra solver or decomposition"),
        (lambda xp, x: xp.fft.fft(x), "the array API function fft.fft is not supported on traced arrays: fusebind "
                                      "has no FFT op"),
        (lambda xp, x: xp.asarray([x, x]), "the array API function asarray is not supported on a sequence of traced "
                                           "arrays; use stack(arrays) (or concat) instead"),
        (lambda xp, x: xp.from_dlpack(x), "the array API function from_dlpack is not supported on traced arrays"),
        (lambda xp, x: x.to_device("cuda"), "to_device('cuda'): fusebind's only device is 'cpu'"),
    ]
    for expr, message in cases:
        with pytest.raises(fb.UnsupportedOperation) as info:
            call(expr)
        assert message in str(info.value), (message, str(info.value))
    with pytest.raises(fb.FusebindValueError, match=r"zeros\(device='cuda'\): fusebind's only device is 'cpu'"):
        call(lambda xp, x: x + xp.zeros(x.shape, device="cuda"))
    with pytest.raises(fb.FusebindValueError) as info:
        call(lambda xp, x: x.__array_namespace__(api_version="2019.01"))
    assert str(info.value) == ("fusebind: __array_namespace__(api_version='2019.01'): the array API versions "
                               "fusebind implements are 2021.12, 2022.12, 2023.12, 2024.12 (or None)")


def test_refused_names_give_numpys_answer_on_arrays_and_info() -> None:
    x = np.array([3.0, 1.0, 2.0, 1.0])
    assert np.array_equal(A.unique_values(x), np.unique_values(x))
    assert np.array_equal(A.nonzero(x > 1.5)[0], [0, 2])
    np.testing.assert_allclose(A.linalg.inv(np.eye(2) * 2), np.eye(2) / 2)
    info = A.__array_namespace_info__()
    assert info.devices() == ["cpu"] and info.default_device() == "cpu"
    assert info.capabilities()["data-dependent shapes"] is False
    assert info.dtypes(kind="real floating") == {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64)}
    assert A.isdtype(A.float32, "real floating") and A.result_type(A.int8, A.float32) == np.float32


STANDARD_2024_12 = """abs acos acosh add all any arange argmax argmin argsort asarray asin asinh astype atan atan2
atanh bitwise_and bitwise_invert bitwise_left_shift bitwise_or bitwise_right_shift bitwise_xor broadcast_arrays
broadcast_to can_cast ceil clip concat conj copysign cos cosh count_nonzero cumulative_prod cumulative_sum diff
divide empty empty_like equal exp expand_dims expm1 eye finfo flip floor floor_divide from_dlpack full full_like
greater greater_equal hypot iinfo imag isdtype isfinite isinf isnan less less_equal linspace log log10 log1p log2
logaddexp logical_and logical_not logical_or logical_xor matmul matrix_transpose max maximum mean meshgrid min
minimum moveaxis multiply negative nextafter nonzero not_equal ones ones_like permute_dims positive pow prod real
reciprocal remainder repeat reshape result_type roll round searchsorted sign signbit sin sinh sort sqrt square
squeeze stack std subtract sum take take_along_axis tan tanh tensordot tile tril triu trunc unique_all
unique_counts unique_inverse unique_values unstack var vecdot where zeros zeros_like
e inf nan newaxis pi bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64 complex64 complex128
__array_namespace_info__""".split()


def test_every_name_of_the_standard_is_there() -> None:
    assert [n for n in STANDARD_2024_12 if not hasattr(A, n)] == []
    linalg = ("cholesky cross det diagonal eigh eigvalsh inv matmul matrix_norm matrix_power matrix_rank "
              "matrix_transpose outer pinv qr slogdet solve svd svdvals tensordot trace vecdot vector_norm").split()
    assert [n for n in linalg if not hasattr(A.linalg, n)] == []
    fft = "fft ifft fftn ifftn rfft irfft rfftn irfftn hfft ihfft fftfreq rfftfreq fftshift ifftshift".split()
    assert [n for n in fft if not hasattr(A.fft, n)] == []
