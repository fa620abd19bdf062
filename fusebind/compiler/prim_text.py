"""Prim IR text from a builder: the recipe side of a pattern.

`PrimTextBuilder` is a pattern builder (`patterns.py`) that writes each op
as one line of prim custom syntax with a fresh SSA name
(`%v3 = prim.mul %v1, %v2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>`).
A value is a `TextValue` (its SSA name and its shape). Result shapes:
numpy broadcasting for elementwise ops (`None` is a dynamic dimension),
the reduced shape for `axes=` (LAST: the operand's last axis). The catalog
instantiates its recipes with it; the built-in examples write their GELU
with it. It never imports xDSL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fusebind.compiler.patterns import LAST, PatternError

Shape = tuple[int | None, ...]


def tensor_type(shape: Sequence[int | None], elem: str) -> str:
    """`tensor<4x?xf32>` (None or a negative extent is dynamic)."""
    dims = "".join(("?" if d is None or d < 0 else str(d)) + "x" for d in shape)
    return f"tensor<{dims}{elem}>"


def float_literal(value: float) -> str:
    """A float literal MLIR parsers accept (a '.' in the mantissa: `1.0e-05`)."""
    text = repr(float(value))
    mantissa, _, exponent = text.partition("e")
    if exponent and "." not in mantissa:
        text = f"{mantissa}.0e{exponent}"
    return text


def broadcast(*shapes: Shape) -> Shape:
    """numpy's broadcast of static-or-dynamic shapes (a dynamic dim against n > 1 is n)."""
    rank = max(len(s) for s in shapes)
    out: list[int | None] = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        sized = {d for d in dims if d is not None and d != 1}
        if len(sized) > 1:
            raise PatternError(f"shapes {', '.join(map(str, shapes))} do not broadcast")
        if sized:
            out.append(sized.pop())
        elif None in dims:
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


@dataclass(frozen=True)
class TextValue:
    """An SSA value of the text being written: its name (`%v3`) and shape."""

    name: str
    shape: Shape


class PrimTextBuilder:
    """Writes prim ops of element type `elem`, naming results `<prefix><n>` (n from 1)."""

    def __init__(self, elem: str, prefix: str = "%v") -> None:
        self.elem = elem
        self.prefix = prefix
        self.lines: list[str] = []
        self._n = 0

    def type_of(self, value: TextValue) -> str:
        return tensor_type(value.shape, self.elem)

    def _fresh(self) -> str:
        self._n += 1
        return f"{self.prefix}{self._n}"

    def constant(self, value: float) -> TextValue:
        name = self._fresh()
        self.lines.append(f"{name} = prim.constant dense<{float_literal(value)}> : {tensor_type((), self.elem)}")
        return TextValue(name, ())

    def op(self, kind: str, *args: TextValue, **props: Any) -> TextValue:
        if "axes" in props:
            (x,) = args
            axes = props["axes"]
            axes = (len(x.shape) - 1,) if axes == LAST else tuple(axes)
            keep = bool(props.get("keepdims", False))
            shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes)
            attrs = f" {{axes = [{', '.join(map(str, axes))}]{', keepdims' if keep else ''}}}"
        else:
            shape = broadcast(*(a.shape for a in args))
            attrs = ""
        name = self._fresh()
        types = [self.type_of(a) for a in args]
        operand_types = types[0] if len(types) == 1 else "(" + ", ".join(types) + ")"
        operands = ", ".join(a.name for a in args)
        self.lines.append(f"{name} = prim.{kind} {operands}{attrs} : {operand_types} -> "
                          f"{tensor_type(shape, self.elem)}")
        return TextValue(name, shape)

    def __getattr__(self, kind: str) -> Any:
        if kind.startswith("_"):
            raise AttributeError(kind)
        return lambda *args, **props: self.op(kind, *args, **props)
