"""Each aten rule against eager torch: one compiled graph per family of ops (values, dtype, shape).

The default run checks one small graph of common ops in float32; the sweep of every rule family in
float32, float64, float16 and bfloat16 is `slow` (FUSEBIND_LONG=1). Every node must map: a node
left to torch or a region that fell back fails the test, so each case tests a rule, not eager torch.
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch", reason="the torch.compile backend needs torch (pip install 'fusebind[torch]')")
F = torch.nn.functional

from fusebind.torch import FusebindTorchWarning  # noqa: E402

TOL = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def common(x, y, i):  # few outputs, so few kernels: the default run stays short
    ew = (torch.where(x < y, torch.add(x, y, alpha=2) / y, torch.maximum(x, y) ** 2).sigmoid() + F.gelu(x)
          + F.silu(x) * x.abs().rsqrt() + torch.clamp(x, -0.5, 0.5).exp() + torch.div(x, y, rounding_mode="floor")
          + x.floor())
    return ew, i * 2 - 1, x.sum(1) + x.amax(1), x.argmax(1), torch.cat([x[:, 1:3], y[:, :2]], 0).to(torch.int32)


def elementwise(x, y, i):
    return (torch.add(x, y, alpha=2), torch.sub(x, y, alpha=0.5), x / y, torch.div(x, y, rounding_mode="floor"),
            torch.div(x, y, rounding_mode="trunc"), x ** 2, x.abs() ** 0.5, torch.pow(x.abs(), y), torch.maximum(x, y),
            torch.minimum(x, y), x == y, x != 0.5, x < y, x <= y, x > 0, x >= y, (x > 0) & (y > 0), (x > 0) | (y > 0),
            (x > 0) ^ (y > 0), ~(x > 0), torch.where(x > 0, x, y), torch.clamp(x, -0.5, 0.5), torch.clamp(x, min=0.1),
            torch.clamp(x, max=0.2), x.exp(), x.exp2(), x.expm1(), x.abs().log(), x.abs().log2(), x.abs().log10(),
            x.abs().log1p(), x.abs().sqrt(), x.abs().rsqrt(), x.sin(), x.cos(), x.tan(), x.tanh(), x.sigmoid(), x.erf(),
            x.reciprocal(), x.floor(), x.ceil(), x.trunc(), (x * 4).round(), -x, x.relu(), F.gelu(x),
            F.gelu(x, approximate="tanh"), F.silu(x), F.leaky_relu(x, 0.2), F.hardtanh(x, -0.3, 0.4), -i, i.abs(),
            i.relu(), i * 2 - 1, torch.where(i > 0, i, 0), torch.clamp(i, -1, 2), i & 6, i | 1, ~i)


def reductions(x, i, b):
    return (x.sum(), x.sum(1), x.sum((0, 2), keepdim=True), i.sum(1), i.sum(dtype=torch.float64), b.sum(0), x.mean(),
            x.mean(-1, keepdim=True), x.amax(1), x.amin((1, 2)), x.max(), b.any(1), b.all(), b.any(), x.var(1),
            x.var(2, correction=0, keepdim=True), x.argmax(1), x.argmin(-1, keepdim=True), x.argmax(), x.std(0),
            torch.logsumexp(x, 1), x.norm(dim=1))


def shapes(x, y):
    return (x[:, 1:3], x[..., ::2], x[1], x[:, -1], x.transpose(0, 2), x.permute(2, 0, 1).reshape(4, -1), x.flatten(),
            x.unsqueeze(1).expand(2, 5, 3, 4), torch.cat([x, y], 1), torch.cat([x, x.double()], 0), x.to(torch.int32),
            (x * 10).to(torch.int64), x.to(torch.float16), torch.full_like(x, 3.5), torch.zeros_like(x),
            x.squeeze(), x[:, None, :, 1], torch.stack([x, x], 1), x.mT, x.narrow(1, 1, 2), x.split(2, 1)[1],
            x.chunk(2, 2)[0], x.flip(1), F.pad(x, (1, 2)), F.pad(x, (0, 1, 2, 0), value=-1.5))


def matmul_norm(a, b, c, bias, w4):
    return (a @ b, torch.bmm(c, c.transpose(1, 2)), torch.addmm(bias, a, b, beta=0.5, alpha=2), torch.addmm(bias, a, b),
            F.linear(a, b.t(), bias), torch.einsum("bij,bkj->bik", c, c), F.softmax(c, -1), F.log_softmax(c, 1),
            F.layer_norm(c, (3, 4)), F.layer_norm(c, (4,), w4, w4 * 0.5), torch.matmul(c, b))


def conv_pool(x, w, wg, wt, w1, mean, var):
    return (F.conv2d(x, w, stride=2, padding=1), F.conv2d(x, w, dilation=2), F.conv2d(x, wg, groups=2, padding=(1, 2)),
            F.conv_transpose2d(x, wt, stride=2, padding=1, output_padding=1), F.conv1d(x[:, :, 0], w1),
            F.max_pool2d(x, 3, 2, 1), F.max_pool2d(x, 2, ceil_mode=True), F.max_pool2d(x, 3, 1, 1, dilation=2),
            F.avg_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
            F.avg_pool2d(x, 2, 2, 1, count_include_pad=False), F.adaptive_avg_pool2d(x, 1),
            F.adaptive_avg_pool2d(x, (3, 1)), F.batch_norm(x, mean, var), F.group_norm(x, 2, mean, var),
            F.group_norm(x, 4), F.elu(x), F.elu(x, 0.5))


def _inputs(name, dt):
    g = torch.Generator().manual_seed(7)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    ints = torch.randint(-5, 5, (3, 4), generator=g)
    if name in ("common", "elementwise"):
        return r(4, 3).t().to(dt), (r(3, 4) + 0.1).to(dt), ints  # x strided: a transposed view crosses too
    if name == "reductions":
        return r(2, 3, 4).to(dt), torch.randint(-5, 5, (2, 3, 4), generator=g).int(), r(2, 3, 4) > 0.3
    if name == "shapes":
        return r(2, 3, 4).to(dt), r(2, 2, 4).to(dt)
    if name == "matmul_norm":
        return tuple(a.to(dt) for a in (r(3, 4), r(4, 5), r(2, 3, 4), r(5), r(4)))
    return tuple(a.to(dt) for a in (r(2, 4, 6, 6), r(5, 4, 3, 3), r(6, 2, 3, 3), r(4, 3, 3, 3), r(5, 4, 2), r(4),
                                    torch.rand(4, generator=g) + 0.5))


FAMILIES = {f.__name__: f for f in (elementwise, reductions, shapes, matmul_norm, conv_pool)}


def _check(fn, dt):
    torch._dynamo.reset()
    args = _inputs(fn.__name__, dt)
    report: list = []
    f = torch.compile(fn, backend="fusebind", options={"report": report})
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", FusebindTorchWarning)
        got, ref = f(*args), fn(*args)
    assert [r.eager for r in report] == [[]] and report[0].partitions, report
    tol = TOL[dt]
    for k, (g, r) in enumerate(zip(got, ref)):
        assert (g.dtype, g.shape) == (r.dtype, r.shape), (k, g.dtype, r.dtype, g.shape, r.shape)
        torch.testing.assert_close(g, r, rtol=tol, atol=tol, equal_nan=True, msg=lambda m: f"output {k}: {m}")


def test_common_ops_float32():
    _check(common, torch.float32)


@pytest.mark.slow
@pytest.mark.parametrize("dt", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_rule(family, dt):
    _check(FAMILIES[family], dt)
