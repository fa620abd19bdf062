"""Graph rewrites on the ONNX model before it is traced (SEAM: filled by the rewrites helper).

`rewrite(proto)` returns the model to import: today the same model."""

from __future__ import annotations

from typing import Any


def rewrite(proto: Any) -> Any:
    return proto


__all__ = ["rewrite"]
