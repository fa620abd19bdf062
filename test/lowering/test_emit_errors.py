"""emit_linalg's errors: what a user's IR can cause is a `LoweringError("emit")` naming it; an emitter
bug raises as itself (issue 12: the broad except turned every AttributeError/TypeError/KeyError/
IndexError into `LoweringError("emit")`, which the JIT takes as "not fused")."""

from __future__ import annotations

import pytest

from fusebind.dialect import parse_module
from fusebind.lowering import LoweringError
from fusebind.lowering.emit import emit_linalg
from fusebind.lowering.emitter import Emitter

T = "tensor<4xf32>"


def _func(text: str):
    return next(iter(parse_module(text).ops))


def test_a_scalar_argument_is_an_emit_error_naming_it() -> None:
    # before: "AttributeError: 'Float32Type' object has no attribute 'get_shape'"
    with pytest.raises(LoweringError) as info:
        emit_linalg(_func("func.func @f(%a: f32) -> f32 {\n  func.return %a : f32\n}"))
    assert info.value.stage == "emit"
    assert info.value.message == ("ScalarEmitError: argument 0 has type f32; a kernel takes tensors only "
                                  "(make a scalar a 0-d tensor)")


def test_an_emitter_bug_raises_as_itself_not_as_a_lowering_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self, op, x, result_type):
        raise AttributeError("an emitter bug")

    monkeypatch.setattr(Emitter, "transpose", broken)
    text = (f"func.func @f(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {{\n"
            f"  %t = prim.transpose %a {{perm = [1, 0]}} : tensor<2x3xf32> -> tensor<3x2xf32>\n"
            f"  func.return %t : tensor<3x2xf32>\n}}")
    with pytest.raises(AttributeError, match="an emitter bug"):
        emit_linalg(_func(text))
    monkeypatch.undo()
    assert "linalg.transpose" in emit_linalg(_func(text)).text  # the IR itself lowers
