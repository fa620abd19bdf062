"""A user op outside a fused region runs its generated static kernel, not its numpy reference.

A user op's KIND is its full name (`mylib.cube`), so the static kernel's text names it as it
is; before, `op_text` prefixed every KIND with `prim.`, the parse failed, and the unfused arm
silently ran the op's reference ("no static kernel ... prim.mylib.cube is not registered").
"""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
from fusebind.runtime import default_session
from fusebind.runtime.static_kernels import StaticKernels, StaticRequest, op_text
from fusebind.runtime.table import BindingKey
from user_ops import cube, hypot2

X = np.linspace(-2, 2, 64, dtype=np.float32)


def test_op_text_names_a_user_op_by_its_full_name_and_a_builtin_with_prim() -> None:
    assert "%r = mylib.cube %a0 : tensor<?xf32> -> tensor<?xf32>" in op_text(StaticRequest.of("mylib.cube", ["f32"] * 2, 1))
    assert "%r = prim.exp %a0 : tensor<?xf32> -> tensor<?xf32>" in op_text(StaticRequest.of("exp", ["f32"] * 2, 1))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_a_lone_user_op_runs_its_static_kernel(dt: type) -> None:
    x, y = X.astype(dt), X[::-1].astype(dt)
    f = fb.jit(lambda a: cube(a))
    got = f(x)
    np.testing.assert_allclose(got, x * x * x, rtol=1e-6)
    assert got.dtype == dt
    g = fb.jit(lambda a, b: hypot2(a, b))
    np.testing.assert_allclose(g(x, y), x * x + y * y, rtol=1e-6)
    table = default_session().table
    name = np.dtype(dt).str[1:].replace("f4", "f32").replace("f8", "f64")
    assert table.lookup(BindingKey.static("mylib.cube"), (name, name), "cpu")
    assert table.lookup(BindingKey.static("mylib.hypot2"), (name, name, name), "cpu")
    assert "runs its numpy reference" not in f.explain(x)


def test_user_op_static_kernels_build_in_one_batch_with_builtins() -> None:
    kernels = StaticKernels()
    reqs = [StaticRequest.of("mylib.cube", ["f32"] * 2, 1), StaticRequest.of("mylib.hypot2", ["f64"] * 3, 2),
            StaticRequest.of("neg", ["f32"] * 2, 1)]
    cube_k, hypot_k, neg_k = kernels.prepare(reqs)
    out = np.empty_like(X)
    from fusebind.runtime.dtypes import descriptor_for

    cube_k(descriptor_for(X), descriptor_for(out))
    np.testing.assert_allclose(out, X ** 3, rtol=1e-6)
    neg_k(descriptor_for(X), descriptor_for(out))
    np.testing.assert_array_equal(out, -X)
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    o = np.empty_like(a)
    hypot_k(descriptor_for(a), descriptor_for(a), descriptor_for(o))
    np.testing.assert_array_equal(o, 2 * a * a)
