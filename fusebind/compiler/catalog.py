"""The static catalog: built-in fused ops with ids below RUNTIME_FUSED_BASE.

This module owns the catalog entries (id, name, recipe) and the decision of
where their kernels live in the binding table: under
`BindingKey.static("fused.<name>")` — `static_kernel_op(id)` gives that op
name, so the runtime gate answers for static and runtime ids from one table.

A recipe is prim IR text, parametric over element type and shape:
`recipe_function_text(name, elem, shape)` instantiates it as a `func.func`,
`recipe_region_text(...)` as a module holding one `fused.region` (generic
form). This module does not compile kernels (lowering does) and never
imports the runtime.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence
from fusebind.dialect.errors import FusebindError

#: First runtime (adopted) FusedOpId. Static catalog ids are 1 .. RUNTIME_FUSED_BASE-1.
#: Defined here, with the static id space it bounds; recipes.py re-exports it.
RUNTIME_FUSED_BASE = 1 << 16


class CatalogError(FusebindError, KeyError):
    """No catalog entry matches, or the instantiation arguments do not fit it."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _tensor(shape: Sequence[int | None], elem: str) -> str:
    dims = "".join(("?" if d is None or d < 0 else str(d)) + "x" for d in shape)
    return f"tensor<{dims}{elem}>"


def _float_literal(value: float) -> str:
    """A float literal MLIR parsers accept (a '.' in the mantissa: `1.0e-05`)."""
    text = repr(float(value))
    mantissa, _, exponent = text.partition("e")
    if exponent and "." not in mantissa:
        text = f"{mantissa}.0e{exponent}"
    return text


class _Emitter:
    """Writes prim ops in their custom syntax with fresh SSA names."""

    def __init__(self, elem: str) -> None:
        self.elem = elem
        self.lines: list[str] = []
        self._n = 0

    def _fresh(self) -> str:
        self._n += 1
        return f"%v{self._n}"

    def op(self, kind: str, args: Sequence[tuple[str, str]], result: str, props: str = "") -> tuple[str, str]:
        name = self._fresh()
        types = args[0][1] if len(args) == 1 else "(" + ", ".join(t for _, t in args) + ")"
        operands = ", ".join(v for v, _ in args)
        props = f" {props}" if props else ""
        self.lines.append(f"{name} = prim.{kind} {operands}{props} : {types} -> {result}")
        return name, result

    def scalar(self, value: float) -> tuple[str, str]:
        name = self._fresh()
        typ = _tensor((), self.elem)
        self.lines.append(f"{name} = prim.constant dense<{_float_literal(value)}> : {typ}")
        return name, typ

    def binary(self, kind: str, a: tuple[str, str], b: tuple[str, str], result: str | None = None) -> tuple[str, str]:
        # Result shape: the larger-rank operand's type (catalog recipes broadcast scalars/rows only).
        out = result or (a[1] if a[1].count("x") >= b[1].count("x") else b[1])
        return self.op(kind, [a, b], out)

    def unary(self, kind: str, a: tuple[str, str]) -> tuple[str, str]:
        return self.op(kind, [a], a[1])


Value = tuple[str, str]
Builder = Callable[[_Emitter, list[Value], tuple[int | None, ...]], Value]


def _gelu_tanh(e: _Emitter, x: Value) -> Value:
    # 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
    x3 = e.binary("mul", e.binary("mul", x, x), x)
    inner = e.binary("add", x, e.binary("mul", e.scalar(0.044715), x3))
    t = e.unary("tanh", e.binary("mul", e.scalar(math.sqrt(2.0 / math.pi)), inner))
    return e.binary("mul", e.binary("mul", e.scalar(0.5), x), e.binary("add", e.scalar(1.0), t))


def _softmax(e: _Emitter, args: list[Value], shape: tuple[int | None, ...]) -> Value:
    (x,) = args
    row = _tensor((*shape[:-1], 1), e.elem)
    m = e.op("reduce_max", [x], row, f"{{axes = [{len(shape) - 1}], keepdims}}")
    ex = e.unary("exp", e.binary("sub", x, m, x[1]))
    s = e.op("reduce_sum", [ex], row, f"{{axes = [{len(shape) - 1}], keepdims}}")
    return e.binary("div", ex, s, x[1])


def _layernorm(e: _Emitter, args: list[Value], shape: tuple[int | None, ...]) -> Value:
    x, gamma, beta = args
    row = _tensor((*shape[:-1], 1), e.elem)
    axes = f"{{axes = [{len(shape) - 1}], keepdims}}"
    mean = e.op("reduce_mean", [x], row, axes)
    d = e.binary("sub", x, mean, x[1])
    var = e.op("reduce_mean", [e.binary("mul", d, d)], row, axes)
    r = e.unary("rsqrt", e.binary("add", var, e.scalar(1e-5)))
    y = e.binary("mul", d, r, x[1])
    return e.binary("add", e.binary("mul", y, gamma, x[1]), beta, x[1])


def _gelu(e: _Emitter, args: list[Value], shape: tuple[int | None, ...]) -> Value:
    return _gelu_tanh(e, args[0])


def _bias_relu(e: _Emitter, args: list[Value], shape: tuple[int | None, ...]) -> Value:
    x, bias = args
    return e.unary("relu", e.binary("add", x, bias, x[1]))


def _bias_gelu(e: _Emitter, args: list[Value], shape: tuple[int | None, ...]) -> Value:
    x, bias = args
    return _gelu_tanh(e, e.binary("add", x, bias, x[1]))


_ROW = "row"  # operand shaped like the last axis of x
_X = "x"


@dataclass(frozen=True)
class CatalogEntry:
    """A built-in fused op: `fused_id`, `name`, operand roles, recipe builder."""

    fused_id: int
    name: str
    operands: tuple[str, ...]
    build: Builder
    description: str

    @property
    def kernel_op(self) -> str:
        """The op name of its static binding key: `fused.<name>`."""
        return f"fused.{self.name}"


CATALOG: tuple[CatalogEntry, ...] = (
    CatalogEntry(1, "softmax", (_X,), _softmax, "row-wise softmax over the last axis"),
    CatalogEntry(2, "layernorm", (_X, _ROW, _ROW), _layernorm, "layer norm over the last axis, eps 1e-5, with gamma and beta"),
    CatalogEntry(3, "gelu", (_X,), _gelu, "GELU, tanh form"),
    CatalogEntry(4, "bias_relu", (_X, _ROW), _bias_relu, "relu(x + bias), bias over the last axis"),
    CatalogEntry(5, "bias_gelu", (_X, _ROW), _bias_gelu, "gelu_tanh(x + bias), bias over the last axis"),
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


def _instantiate(name: str, elem: str, shape: Sequence[int | None]) -> tuple[CatalogEntry, list[str], list[str], Value]:
    entry = catalog_entry(name)
    shape_t = tuple(None if d is None or d < 0 else int(d) for d in shape)
    if not shape_t:
        raise CatalogError(f"{entry.name}: needs a shape of rank >= 1, got {tuple(shape)}")
    if elem not in ("f32", "f64"):
        raise CatalogError(f"{entry.name}: is defined for f32 and f64, got {elem!r}")
    e = _Emitter(elem)
    types = [_tensor(shape_t if role == _X else shape_t[-1:], elem) for role in entry.operands]
    args = [(f"%arg{i}", t) for i, t in enumerate(types)]
    result = entry.build(e, args, shape_t)
    return entry, types, e.lines, result


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
