"""torch.compile(backend="fusebind") against eager torch: values, dtype and shape.

Three modules (an MLP, a multi-head attention block, a small CNN) run wholly in fusebind (one
region, nothing left to torch, no fallback warning); a graph with an op fusebind has no rule for
runs partitioned; a training call warns and runs eager; bf16 crosses as int16 bits; torch's dtype
promotion (not numpy's) decides every result dtype. Shapes are small: dynamo and each kernel's
compile dominate the time.
"""

from __future__ import annotations

import importlib.metadata
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch.compile backend needs torch (pip install 'fusebind[torch]')")
nn = torch.nn

from fusebind.torch import FusebindTorchWarning, fusebind_backend  # noqa: E402
from fusebind.torch.crossing import to_numpy, to_torch  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    torch.manual_seed(0)
    yield
    torch._dynamo.reset()


def _run(model, *xs, expect_eager=()):
    """The model compiled with backend="fusebind" under no_grad, its report, and eager's answer."""
    report: list = []
    f = torch.compile(model, backend="fusebind", options={"report": report})
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", FusebindTorchWarning)  # a region that fell back would fail here
        got = f(*xs)
        ref = model(*xs)
    assert report, "the fusebind backend was not called"
    left = {name.rstrip("_0123456789") for r in report for name, _ in r.eager}
    assert left == set(expect_eager), [r.eager for r in report]
    return got, ref, report


def _same(got, ref, rtol=1e-5, atol=1e-6):
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_allclose(got.detach().float().numpy(), ref.detach().float().numpy(), rtol=rtol, atol=atol)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(16, 32), nn.Linear(32, 8)

    def forward(self, x):
        return self.l2(nn.functional.gelu(self.l1(x)))


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
        self.ln = nn.LayerNorm(16)

    def forward(self, x):
        y, _ = self.attn(x, x, x, need_weights=False)
        return self.ln(x + y)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.fc = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        return self.fc(x.flatten(1))


def test_mlp_one_region():
    got, ref, report = _run(MLP().eval(), torch.randn(4, 16))
    _same(got, ref)
    assert [len(r.partitions) for r in report] == [1]


def test_attention_block():
    got, ref, _ = _run(Attention().eval(), torch.randn(2, 5, 16))
    _same(got, ref)


def test_cnn_conv_batchnorm_relu_maxpool_linear():
    m = CNN().eval()
    with torch.no_grad():  # running statistics that are not 0 and 1, so batchnorm's arithmetic shows
        m.bn.running_mean.uniform_(-1, 1)
        m.bn.running_var.uniform_(0.5, 2)
        m.bn.weight.uniform_(0.5, 1.5)
    got, ref, report = _run(m, torch.randn(2, 3, 8, 8))
    _same(got, ref)
    assert "convolution" in report[0].partitions[0] and "max_pool2d_with_indices" in report[0].partitions[0]


class WithCumsum(nn.Module):
    def forward(self, x):
        a = torch.relu(x * 2 + 1)
        return torch.exp(torch.cumsum(a, 1) * 0.1) - 1  # cumsum: no rule, eager between two regions


def test_unsupported_op_runs_partitioned():
    got, ref, report = _run(WithCumsum(), torch.randn(3, 6), expect_eager=("cumsum",))
    _same(got, ref)
    assert len(report[0].partitions) == 2
    assert "no fusebind rule" in report[0].eager[0][1]


def test_training_call_warns_and_runs_eager():
    m = MLP().train()
    f = torch.compile(m, backend="fusebind")
    x = torch.randn(4, 16)
    with pytest.warns(FusebindTorchWarning, match="needs gradients.*torch.no_grad"):
        y = f(x)
    ref = m(x)
    _same(y, ref)
    y.sum().backward()  # the eager graph keeps autograd: gradients as torch's own
    g = m.l1.weight.grad.clone()
    m.zero_grad()
    ref.sum().backward()
    torch.testing.assert_close(g, m.l1.weight.grad)


def test_bf16_crosses_as_int16_bits_without_copies():
    t = torch.randn(3, 5).to(torch.bfloat16)
    a = to_numpy(t)
    assert str(a.dtype) == "bfloat16" and a.shape == (3, 5)
    assert a.ctypes.data == t.data_ptr()  # a view, not a copy
    back = to_torch(a)
    assert back.dtype == torch.bfloat16 and back.data_ptr() == t.data_ptr() and torch.equal(back, t)
    s = torch.randn(4, 6).t()  # strided: still a view
    assert to_numpy(s).ctypes.data == s.data_ptr() and np.array_equal(to_numpy(s), s.numpy())


def test_bf16_model_against_eager():
    m = MLP().eval().to(torch.bfloat16)
    got, ref, _ = _run(m, torch.randn(4, 16).to(torch.bfloat16))
    assert got.dtype == torch.bfloat16
    _same(got, ref, rtol=3e-2, atol=3e-2)  # f32 accumulation rounded once vs torch's bf16 gemm: a few bf16 ulps


class Promotions(nn.Module):
    def forward(self, i32, i64, f32, f64_0d):
        return (i32 * 0.5,          # torch: float32 (numpy: float64)
                i32 / i32,          # true division: float32 (numpy: float64)
                i32 + i64,          # int64
                f32 * f64_0d,       # a 0-dim tensor does not widen: float32 (numpy: float64)
                i32 > 1.5,          # compared in float32
                torch.exp(i32),     # float32
                (i32 + 3) * 2)      # weak Python ints: int32


def test_dtypes_follow_torch_promotion():
    xs = (torch.arange(-3, 9, dtype=torch.int32).reshape(3, 4), torch.arange(12).reshape(3, 4),
          torch.randn(3, 4), torch.tensor(1.1, dtype=torch.float64))
    xs[0][0, 0] = 7  # no zero divisor
    got, ref, _ = _run(Promotions(), *xs)
    for g, r in zip(got, ref):
        _same(g, r)


class IntFloorDiv(nn.Module):
    def forward(self, a, b):
        return torch.div(a * 3, b, rounding_mode="floor") + a


def test_integer_floor_division_stays_eager():
    a, b = torch.arange(-6, 6).reshape(3, 4), torch.tensor([[3, -2, 5, 7]]).expand(3, 4).contiguous()
    got, ref, report = _run(IntFloorDiv(), a, b, expect_eager=("div",))
    _same(got, ref)
    assert "floating point only" in dict(report[0].eager)["div"]


def test_a_rule_that_disagrees_with_torch_falls_back_with_a_warning(monkeypatch):
    from fusebind.torch import rules
    bad = rules.AtenRule(lambda node, a, b: np.add(a, b).astype(np.float64))  # a wrong dtype, on purpose
    monkeypatch.setitem(rules.RULES, torch.ops.aten.add.Tensor, bad)
    f = torch.compile(lambda x, y: torch.relu(x + y) * 2, backend="fusebind")
    x, y = torch.randn(5), torch.randn(5)
    with torch.no_grad(), pytest.warns(FusebindTorchWarning, match="FusebindTorchError.*float64.*float32"):
        got = f(x, y)
    _same(got, torch.relu(x + y) * 2)


def test_entry_point_names_the_backend():
    eps = importlib.metadata.entry_points(group="torch_dynamo_backends")
    ep = next(e for e in eps if e.name == "fusebind")
    assert ep.load() is fusebind_backend
    assert "fusebind" in torch._dynamo.list_backends()


def test_unknown_option_is_a_clear_error():
    f = torch.compile(lambda x: x * 2, backend="fusebind", options={"mode": "max"})
    with pytest.raises(Exception, match="unknown options \\['mode'\\]"):
        f(torch.randn(3))


def test_dynamic_shapes_warn_and_stay_correct_static_shapes_stay_fused():
    fn = lambda x: torch.tanh(x * 2) + 1  # noqa: E731
    f = torch.compile(fn, backend="fusebind")
    with torch.no_grad():
        f(torch.randn(3, 4))
        x5 = torch.randn(5, 4)
        with pytest.warns(FusebindTorchWarning, match="symbolic shapes.*dynamic=False"):
            got = f(x5)  # dynamo's automatic dynamic: a graph over a symbolic size, run by torch
        _same(got, fn(x5))
    torch._dynamo.reset()
    report: list = []
    g = torch.compile(fn, backend="fusebind", dynamic=False, options={"report": report})
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", FusebindTorchWarning)
        for n in (3, 5):
            x = torch.randn(n, 4)
            _same(g(x), fn(x))
    assert len(report) == 2 and all(r.partitions and not r.eager for r in report)


def _views(x):
    y = torch.tanh(x) * 3 + 1
    return y, y.t(), y[1:, ::2], x.view(-1)  # views of an intermediate and of an input


def test_outputs_that_are_views_have_torchs_strides():
    x = torch.randn(3, 4)
    got, ref, _ = _run(_views, x)
    for g, r in zip(got, ref):
        _same(g, r)
        assert g.stride() == r.stride()
    assert got[3].data_ptr() == x.data_ptr()  # a view of the input stays one


def test_float_floor_division_is_torchs_not_floor_of_the_quotient():
    a = torch.tensor([1.0, -1.0, 7.5, -7.5, 5.0, 1e-3])
    b = torch.tensor([0.1, 0.1, 2.0, 2.0, -0.0, 3e-4])
    got, ref, _ = _run(lambda a, b: torch.div(a * 1, b, rounding_mode="floor"), a, b)
    _same(got, ref, rtol=0, atol=0)
    assert got[0].item() == 9.0  # floor(1.0 / 0.1) would be 10
