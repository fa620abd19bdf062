"""The torch peer: each workload's math under `torch.compile` (Inductor CPU, default mode, float32).

Owns: `TorchOps` (the `ops` namespace of bench/workloads.py over torch, with
torch's own GELU/softmax/layer_norm, what a torch user writes) and
`torch_candidate`: `torch.compile(fn, dynamic=False)` per workload size (one
static specialisation each, so a second size never turns the graph dynamic),
called on `torch.from_numpy` views (no copy) under `torch.inference_mode()`.
`compile=False` runs the same ops eagerly (the smoke test checks the math
without Inductor's seconds of C++ compile).

torch is optional: a missing or broken torch gives `Unavailable` with the
reason. Must not: time anything, or be imported at the suite's top level.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from bench.peers import Built, Candidate, Unavailable, _why
from bench.workloads import LN_EPS, Workload

NAME = "Inductor (torch.compile)"
EAGER_NAME = "torch eager"
#: dynamo's per-code-object recompile limit for the suite: every workload size is one specialisation.
RECOMPILE_LIMIT = 4096


def torch_status() -> str | None:
    """None if torch imports, else the reason the column is empty."""
    try:
        import torch  # noqa: F401

        return None
    except ImportError as exc:
        return f"torch not installed ({_why(exc)}); install torch for this column"
    except Exception as exc:
        return _why(exc)


class TorchOps:
    """`ops` for torch: the same names as `NumpyOps`; numpy-style `axis`/`keepdims` mapped to dim/keepdim."""

    def __init__(self) -> None:
        import torch
        import torch.nn.functional as F

        self.torch, self.F = torch, F
        for name in ("exp", "log", "sqrt", "tanh", "matmul", "maximum", "minimum", "relu", "sigmoid"):
            setattr(self, name, getattr(torch, name))

    def where(self, c: Any, a: Any, b: Any) -> Any:
        return self.torch.where(c, a, b)

    def swapaxes(self, x: Any, a: int, b: int) -> Any:
        return self.torch.transpose(x, a, b)

    def arange(self, n: int) -> Any:
        return self.torch.arange(n)

    def gelu(self, x: Any) -> Any:
        return self.F.gelu(x, approximate="tanh")

    def softmax(self, x: Any, axis: int = -1) -> Any:
        return self.torch.softmax(x, dim=axis)

    def mean(self, x: Any, axis: int = -1, keepdims: bool = False) -> Any:
        return self.torch.mean(x, dim=axis, keepdim=keepdims)

    def layer_norm(self, x: Any, weight: Any = None, bias: Any = None, eps: float = LN_EPS) -> Any:
        return self.F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def torch_candidate(w: Workload, xs: Sequence[np.ndarray], *, compile: bool = True) -> Built:
    """`torch.compile(w.fn)` on from_numpy views under inference_mode; the first call (compile) happens here."""
    name = NAME if compile else EAGER_NAME
    why = torch_status()
    if why is not None:
        return Unavailable(name, why)
    try:
        import torch

        ops = TorchOps()
        fn = w.fn

        def program(*a: Any) -> Any:
            return fn(ops, *a)
        if compile:
            # Every candidate's `program` shares one code object, and dynamo counts recompiles per code
            # object: past its limit (8) it silently runs the function eagerly, which would time torch
            # eager under Inductor's name for every later workload size.
            cfg = torch._dynamo.config
            for limit in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit"):
                if hasattr(cfg, limit):
                    setattr(cfg, limit, max(getattr(cfg, limit), RECOMPILE_LIMIT))
        f = torch.compile(program, dynamic=False) if compile else program
        args = [torch.from_numpy(x) for x in xs]
        with torch.inference_mode():
            y = f(*args)
        if y.dtype != torch.float32:
            return Unavailable(name, f"torch computed {y.dtype}, not float32")
    except Exception as exc:
        return Unavailable(name, _why(exc))

    def run() -> Any:
        with torch.inference_mode():
            return f(*args)
    note = ("torch.compile(dynamic=False), Inductor default mode, from_numpy views, inference_mode" if compile
            else "the same torch ops, eager")
    return Candidate(name, run, note)
