"""The JAX peer: each workload's math under `jax.jit` (XLA CPU, float32).

Owns: `JaxOps` (the `ops` namespace of bench/workloads.py over `jax.numpy`,
with the library's own `jax.nn` GELU/softmax/sigmoid, what a JAX user writes)
and `jax_candidate`, which jits `w.fn`, puts the inputs on the device once,
and times `f(*args).block_until_ready()` (JAX dispatches asynchronously, so
without the block the call would return before the work is done).

jax is optional (the `bench` venv has it, the default test venv does not): a
missing or broken jax gives `Unavailable` with the reason, never an error.
Must not: time anything, or be imported at the suite's top level (importing
jax starts XLA's thread pool; the one-core child pins itself first).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from bench.peers import Built, Candidate, Unavailable, _why
from bench.workloads import LN_EPS, Workload

NAME = "XLA (jax.jit)"


def jax_status() -> str | None:
    """None if jax imports and runs on this machine, else the reason the column is empty."""
    try:
        import jax
        import jax.numpy as jnp

        jax.jit(lambda a: a + 1)(jnp.ones(2, jnp.float32)).block_until_ready()
        return None
    except ImportError as exc:
        return f"jax not installed ({_why(exc)}); install jax[cpu] for this column"
    except Exception as exc:
        return _why(exc)


class JaxOps:
    """`ops` for JAX: the same names as `NumpyOps`, over jax.numpy (weak-typed Python floats keep f32)."""

    def __init__(self) -> None:
        import jax
        import jax.numpy as jnp

        self.jnp, self.nn = jnp, jax.nn
        for name in ("exp", "log", "sqrt", "tanh", "matmul", "maximum", "minimum", "where", "swapaxes", "arange"):
            setattr(self, name, getattr(jnp, name))

    def relu(self, x: Any) -> Any:
        return self.nn.relu(x)

    def sigmoid(self, x: Any) -> Any:
        return self.nn.sigmoid(x)

    def gelu(self, x: Any) -> Any:
        return self.nn.gelu(x, approximate=True)  # the tanh form, as NumpyOps.gelu (GELU_C = sqrt(2/pi))

    def softmax(self, x: Any, axis: int = -1) -> Any:
        return self.nn.softmax(x, axis=axis)

    def mean(self, x: Any, axis: int = -1, keepdims: bool = False) -> Any:
        return self.jnp.mean(x, axis=axis, keepdims=keepdims)

    def layer_norm(self, x: Any, weight: Any = None, bias: Any = None, eps: float = LN_EPS) -> Any:
        m = x.mean(axis=-1, keepdims=True)
        d = x - m
        y = d * self.jnp.reciprocal(self.jnp.sqrt((d * d).mean(axis=-1, keepdims=True) + eps))
        if weight is not None:
            y = y * weight
        if bias is not None:
            y = y + bias
        return y


def jax_candidate(w: Workload, xs: Sequence[np.ndarray]) -> Built:
    """`jax.jit(w.fn)` on device-resident float32 inputs; the first call (compile) happens here, untimed."""
    why = jax_status()
    if why is not None:
        return Unavailable(NAME, why)
    try:
        import jax

        ops = JaxOps()
        fn = w.fn
        f = jax.jit(lambda *a: fn(ops, *a))
        args = [jax.device_put(x) for x in xs]
        y = f(*args).block_until_ready()
        if y.dtype != np.float32:
            return Unavailable(NAME, f"jax computed {y.dtype}, not float32")
    except Exception as exc:
        return Unavailable(NAME, _why(exc))
    return Candidate(NAME, lambda: f(*args).block_until_ready(),
                     "jax.jit (XLA CPU), inputs on device, block_until_ready")
