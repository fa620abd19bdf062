"""The table of aten ops the backend maps, and the facts each rule reads off an FX node.

Owns: `AtenRule`, `RULES` (aten overload -> rule), `rule` (the decorator the op modules register
with), and the node helpers the rules share: `meta` (a node's fake tensor), `np_dtype`,
`compute_dtype` (torch's promotion of two operands), `cast`.

A rule is an `impl(node, *args, **kwargs)` over traced values (fusebind tracers under `fb.jit`,
Python scalars and lists for the non-tensor arguments, exactly as the FX node carries them) and an
optional `check(node) -> reason | None`: a node the check refuses (a dtype, an argument fusebind
would answer differently from torch) stays in eager torch. Dtypes are torch's, not numpy's: each
rule casts its operands to the dtype torch computes in (`compute_dtype`, from the node's fake
tensors), so numpy's promotion never decides (int / int, int * float, 0-dim tensors differ).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
from torch.fx import Node

from fusebind.torch.crossing import NP_OF_TORCH

FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
aten = torch.ops.aten


@dataclass(frozen=True)
class AtenRule:
    impl: Callable[..., Any]
    check: Callable[[Node], str | None] | None = None


RULES: dict[Any, AtenRule] = {}


def rule(*targets: Any, check: Callable[[Node], str | None] | None = None) -> Callable[[Callable[..., Any]], Any]:
    def register(impl: Callable[..., Any]) -> Callable[..., Any]:
        for t in targets:
            RULES[t] = AtenRule(impl, check)
        return impl
    return register


def meta(node: Any) -> Any:
    """The node's value as FX's fake tensor (a tuple for multi-output ops), or the Python value."""
    return node.meta.get("val") if isinstance(node, Node) else node


def np_dtype(node: Node, index: int | None = None) -> np.dtype:
    v = meta(node)
    return NP_OF_TORCH[(v[index] if index is not None else v).dtype]


def out_shape(node: Node) -> tuple[int, ...]:
    return tuple(int(d) for d in meta(node).shape)


def _probe(v: Any) -> Any:
    m = meta(v)
    if isinstance(m, torch.Tensor):  # torch promotes a 0-dim tensor like a scalar: keep that distinction
        return torch.empty((1,) if m.dim() > 0 else (), dtype=m.dtype)
    return m


def compute_dtype(a: Any, b: Any) -> torch.dtype:
    """The dtype torch computes `a op b` in (operands: nodes or Python scalars)."""
    return torch.result_type(_probe(a), _probe(b))


def cast(v: Any, dt: torch.dtype) -> Any:
    """A traced value in torch's dtype `dt`; a Python scalar stays weak (numpy's NEP 50 then keeps `dt`)."""
    if isinstance(v, (bool, int, float)):
        return v
    want = NP_OF_TORCH[dt]
    return v if v.dtype == want else v.astype(want)


def wide(v: Any) -> Any:
    """A float16/bfloat16 traced value as float32 (torch's CPU kernels compute narrow floats in f32 and round
    once at the end: normalisations and means do so here too); any other value unchanged."""
    if v is None or isinstance(v, (bool, int, float)) or v.dtype.itemsize != 2 or v.dtype.kind in "iu":
        return v
    return v.astype(np.float32)


def floats_only(node: Node) -> str | None:
    """Every tensor operand and the result are floating point (integer semantics differ: eager)."""
    tensors = [a for a in node.args if isinstance(a, Node)] + [node]
    for t in tensors:
        m = meta(t)
        if isinstance(m, torch.Tensor) and m.dtype not in FLOATS:
            return f"{node.target} on {m.dtype}: fusebind maps it for floating point only"
    return None


def int_scalars_fit(node: Node) -> str | None:
    """A Python int operand fits the dtype torch computes in (numpy would raise where torch wraps)."""
    tensors = [a for a in node.args if isinstance(a, Node)]
    ints = [a for a in node.args if isinstance(a, int) and not isinstance(a, bool)]
    if not tensors or not ints:
        return None
    dt = meta(node).dtype if isinstance(meta(node), torch.Tensor) else None
    if dt is None or dt in FLOATS or dt == torch.bool:
        return None
    info = np.iinfo(NP_OF_TORCH[dt])
    if any(not info.min <= v <= info.max for v in ints):
        return f"{node.target}: a Python int outside {dt}'s range (torch wraps it, numpy refuses)"
    return None

