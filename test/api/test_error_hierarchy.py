"""Every error class fusebind defines shares one base, `fb.FusebindError`,
and the user-facing ones also subclass the builtin numpy would raise."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest

import fusebind
import fusebind as fb


def _all_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(fusebind.__path__, "fusebind."):
        names.append(info.name)
    return names


def test_every_exception_class_derives_from_fusebind_error() -> None:
    offenders = []
    seen = 0
    for name in _all_modules():
        mod = importlib.import_module(name)
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ != name or not issubclass(cls, BaseException) or issubclass(cls, Warning):
                continue
            seen += 1
            if not issubclass(cls, fb.FusebindError):
                offenders.append(f"{name}.{cls.__qualname__}")
    assert seen >= 30
    assert offenders == []


@pytest.mark.parametrize("cls, builtin", [
    (fb.UnsupportedOperation, TypeError),
    (fb.FusebindValueError, ValueError),
    (fb.FusebindAxisError, np.exceptions.AxisError),
    (fb.FusebindAxisError, ValueError),
    (fb.FusebindAxisError, IndexError),
    (fb.ArgumentError, TypeError),
    (fb.TraceError, ValueError),
])
def test_user_errors_keep_the_builtin_numpy_would_raise(cls: type, builtin: type) -> None:
    assert issubclass(cls, fb.FusebindError)
    assert issubclass(cls, builtin)


def test_axis_error_keeps_its_message() -> None:
    err = fb.FusebindAxisError("fusebind: axis 3 is out of bounds for an array of dimension 2")
    assert str(err) == "fusebind: axis 3 is out of bounds for an array of dimension 2"


def test_bad_jit_options_are_fusebind_errors() -> None:
    x = np.ones(4, np.float32)
    with pytest.raises(fb.FusebindValueError, match="threads must be >= 1"):
        fb.jit(lambda a: a + 1, threads=0)(x)
    with pytest.raises(fb.FusebindValueError, match="verify_action must be 'raise' or 'warn'"):
        fb.jit(lambda a: a + 1, verify_action="ignore")(x)


def test_a_wrong_entry_on_the_executor_is_an_entry_error() -> None:
    from fusebind.dialect import parse_module
    from fusebind.runtime.executor import Executor

    m = parse_module("func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                     "  %b = prim.exp %a : tensor<4xf32> -> tensor<4xf32>\n  func.return %b : tensor<4xf32>\n}")
    with pytest.raises(fb.EntryError) as info:
        Executor(m, "g")
    assert isinstance(info.value, KeyError)
    assert str(info.value) == "fusebind: no function @g in the module; it defines @f"
