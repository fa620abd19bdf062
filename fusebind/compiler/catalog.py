"""The static catalog: built-in fused ops with ids below RUNTIME_FUSED_BASE.

This module owns the catalog entries and the decision of where their
kernels live in the binding table: under `BindingKey.static("fused.<name>")`
— `static_kernel_op(id)` gives that op name, so the runtime gate answers for
static and runtime ids from one table.

An entry is data: id, name, priority and one `Pattern` (patterns.py), traced
from a body written once over any builder (`gelu_tanh` is GELU's). Both the
recipe and the matcher are derived from that pattern by generic code: the
recipe here, by replaying it on a `PrimTextBuilder`; the matcher in
catalog_rules.py. A new catalog op is one `_entry(...)` line and its body.

A recipe is prim IR text, parametric over element type and shape:
`recipe_function_text(name, elem, shape)` instantiates it as a `func.func`,
`recipe_region_text(...)` as a module holding one `fused.region` (generic
form). This module does not compile kernels (lowering does), never imports
the runtime, and never imports xDSL.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fusebind.compiler.patterns import LAST, ROW, X, Pattern
from fusebind.compiler.prim_text import PrimTextBuilder, TextValue
from fusebind.dialect.errors import FusebindError

#: First runtime (adopted) FusedOpId. Static catalog ids are 1 .. RUNTIME_FUSED_BASE-1.
#: Defined here, with the static id space it bounds; recipes.py re-exports it.
RUNTIME_FUSED_BASE = 1 << 16


class CatalogError(FusebindError, KeyError):
    """No catalog entry matches, or the instantiation arguments do not fit it."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


# --------------------------------------------------------------------------- the entries' math
# Each body is written once, over any builder (patterns.py): the catalog traces it into its
# pattern, from which both the recipe (prim_text) and the matcher (pattern_match) come.


def gelu_tanh(b: Any, x: Any) -> Any:
    """GELU, tanh form, on any builder with `add`, `mul`, `tanh` and `constant`:
    0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), x^3 as (x * x) * x.

    The one definition: the `gelu` and `bias_gelu` entries trace it, the built-in examples
    write their IR and numpy twin with it, and a tracer builder gives `fb.gelu`."""
    x3 = b.mul(b.mul(x, x), x)
    inner = b.add(x, b.mul(b.constant(0.044715), x3))
    t = b.tanh(b.mul(b.constant(math.sqrt(2.0 / math.pi)), inner))
    return b.mul(b.mul(b.constant(0.5), x), b.add(b.constant(1.0), t))


def _softmax(b: Any, x: Any) -> Any:
    ex = b.exp(b.sub(x, b.reduce_max(x, axes=LAST, keepdims=True)))
    return b.div(ex, b.reduce_sum(ex, axes=LAST, keepdims=True))


def _layernorm(b: Any, x: Any, gamma: Any, beta: Any) -> Any:
    d = b.sub(x, b.reduce_mean(x, axes=LAST, keepdims=True))
    var = b.reduce_mean(b.mul(d, d), axes=LAST, keepdims=True)
    r = b.rsqrt(b.add(var, b.constant(1e-5)))  # the kernel computes with the matched eps: it must be 1e-5
    return b.add(b.mul(b.mul(d, r), gamma), beta)


def _bias_relu(b: Any, x: Any, bias: Any) -> Any:
    return b.relu(b.add(x, bias))


def _bias_gelu(b: Any, x: Any, bias: Any) -> Any:
    return gelu_tanh(b, b.add(x, bias))


@dataclass(frozen=True)
class CatalogEntry:
    """A built-in fused op: `fused_id`, `name`, its `pattern` (operand roles and math),
    `description`, and the matcher's `priority` (lower first: an entry whose pattern holds
    another's, bias_gelu around gelu, must come before it)."""

    fused_id: int
    name: str
    pattern: Pattern
    description: str
    priority: int

    @property
    def operands(self) -> tuple[str, ...]:
        """The operand roles (X, ROW), in operand order."""
        return self.pattern.roles

    @property
    def kernel_op(self) -> str:
        """The op name of its static binding key: `fused.<name>`."""
        return f"fused.{self.name}"


def _entry(fused_id: int, name: str, body: Callable[..., Any], roles: tuple[tuple[str, str], ...],
           description: str, priority: int) -> CatalogEntry:
    pattern = Pattern.trace(body, [r for _, r in roles], [n for n, _ in roles])
    return CatalogEntry(fused_id, name, pattern, description, priority)


CATALOG: tuple[CatalogEntry, ...] = (
    _entry(1, "softmax", _softmax, (("x", X),), "row-wise softmax over the last axis", 30),
    _entry(2, "layernorm", _layernorm, (("x", X), ("gamma", ROW), ("beta", ROW)),
           "layer norm over the last axis, eps 1e-5, with gamma and beta", 40),
    _entry(3, "gelu", gelu_tanh, (("x", X),), "GELU, tanh form", 20),
    _entry(4, "bias_relu", _bias_relu, (("x", X), ("bias", ROW)), "relu(x + bias), bias over the last axis", 50),
    _entry(5, "bias_gelu", _bias_gelu, (("x", X), ("bias", ROW)),
           "gelu_tanh(x + bias), bias over the last axis", 10),
)

_BY_ID = {e.fused_id: e for e in CATALOG}
_BY_NAME = {e.name: e for e in CATALOG}
if any(not 0 < i < RUNTIME_FUSED_BASE for i in _BY_ID):  # pragma: no cover - a table typo
    raise RuntimeError("catalog ids must lie in 1 .. RUNTIME_FUSED_BASE-1")


def catalog_entry(key: int | str) -> CatalogEntry:
    """The entry with this id or name."""
    entry = _BY_ID.get(key) if isinstance(key, int) else _BY_NAME.get(key)
    if entry is None:
        known = ", ".join(f"{e.fused_id} {e.name}" for e in CATALOG)
        raise CatalogError(f"no built-in fused op {key!r}; the catalog has: {known}")
    return entry


def static_kernel_op(fused_id: int) -> str | None:
    """The static binding-key op (`fused.<name>`) of a catalog id, or None."""
    entry = _BY_ID.get(fused_id)
    return None if entry is None else entry.kernel_op


def _instantiate(name: str, elem: str, shape: Sequence[int | None]
                 ) -> tuple[CatalogEntry, list[str], list[str], tuple[str, str]]:
    entry = catalog_entry(name)
    shape_t = tuple(None if d is None or d < 0 else int(d) for d in shape)
    if not shape_t:
        raise CatalogError(f"{entry.name}: needs a shape of rank >= 1, got {tuple(shape)}")
    if elem not in ("f32", "f64"):
        raise CatalogError(f"{entry.name}: is defined for f32 and f64, got {elem!r}")
    b = PrimTextBuilder(elem)
    args = [TextValue(f"%arg{i}", shape_t if role == X else shape_t[-1:]) for i, role in enumerate(entry.operands)]
    result = entry.pattern.evaluate(b, *args)
    return entry, [b.type_of(a) for a in args], b.lines, (result.name, b.type_of(result))


def recipe_function_text(name: str, elem: str, shape: Sequence[int | None]) -> str:
    """The recipe as a module with one `func.func @<name>` of prim ops."""
    entry, types, lines, (res, rtype) = _instantiate(name, elem, shape)
    params = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(types))
    body = "\n".join(f"    {line}" for line in lines)
    return (
        f"builtin.module {{\n  func.func @{entry.name}({params}) -> {rtype} {{\n{body}\n"
        f"    func.return {res} : {rtype}\n  }}\n}}\n"
    )


def recipe_region_text(name: str, elem: str, shape: Sequence[int | None]) -> str:
    """The recipe as a module holding a function whose body is one
    `fused.region` (generic form, fused_id = the catalog id)."""
    entry, types, lines, (res, rtype) = _instantiate(name, elem, shape)
    params = ", ".join(f"%p{i}: {t}" for i, t in enumerate(types))
    operands = ", ".join(f"%p{i}" for i in range(len(types)))
    block_args = ", ".join(f"%arg{i} : {t}" for i, t in enumerate(types))
    body = "\n".join(f"      {line}" for line in lines)
    return (
        f"builtin.module {{\n  func.func @{entry.name}({params}) -> {rtype} {{\n"
        f'    %r = "fused.region"({operands}) <{{fused_id = {entry.fused_id} : i64, name = "{entry.name}"}}> ({{\n'
        f"    ^bb0({block_args}):\n{body}\n"
        f'      "fused.yield"({res}) : ({rtype}) -> ()\n'
        f"    }}) : ({', '.join(types)}) -> {rtype}\n"
        f"    func.return %r : {rtype}\n  }}\n}}\n"
    )
