"""A catalog kernel serves every match of its pattern, so the pattern's constants are conditions.

Regression: the hand-written layernorm matcher accepted any eps. A layernorm with eps 0.5 fused under
the catalog id 2, the JIT bound its kernel (computing with eps 0.5) as Static(fused.layernorm), and a
later true layernorm (eps 1e-5) ran that kernel: off by 0.8. The pattern now states eps = 1e-5.
"""

from __future__ import annotations

import numpy as np

import fusebind as fb
from fusebind.compiler.catalog import recipe_function_text
from fusebind.runtime.testing import isolated_global_state


def _layernorm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    d = x - x.mean(-1, keepdims=True)
    return d / np.sqrt((d * d).mean(-1, keepdims=True) + eps) * g + b


def test_a_layernorm_with_another_eps_does_not_bind_the_catalog_kernel(tmp_path) -> None:
    from fusebind.lowering import ObjectCache

    cache = ObjectCache(tmp_path)
    true_ln = recipe_function_text("layernorm", "f32", (None, 32))
    other = true_ln.replace("dense<1.0e-05>", "dense<0.5>")
    assert other != true_ln
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    g = (1 + 0.1 * rng.standard_normal(32)).astype(np.float32)
    b = (0.1 * rng.standard_normal(32)).astype(np.float32)
    with isolated_global_state():
        first = fb.compile(other, cache=cache, threads=1)
        np.testing.assert_allclose(first(x, g, b), _layernorm(x, g, b, 0.5), rtol=1e-5, atol=1e-5)
        assert first.executor.plan_for([x, g, b]).decisions[0].fused_id != 2
        second = fb.compile(true_ln, cache=cache, threads=1)
        np.testing.assert_allclose(second(x, g, b), _layernorm(x, g, b, 1e-5), rtol=1e-5, atol=1e-5)
        assert second.executor.plan_for([x, g, b]).decisions[0].fused_id == 2
