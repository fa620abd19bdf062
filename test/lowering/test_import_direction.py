"""Imports flow runtime -> lowering -> compiler -> dialect (DESIGN.md), never back.

Each check runs in a fresh interpreter with an import hook that records which
module first imported each fusebind package, and scans `sys.modules` after
importing the package and after exercising it (for lowering: decompose_region
on a row-wise region and an elementwise one, cache off, so the whole pipeline runs).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

PACKAGES = ("dialect", "compiler", "lowering", "runtime")
# What each package must never import (the packages above it in the order).
FORBIDDEN = {"dialect": ("compiler", "lowering", "runtime"), "compiler": ("lowering", "runtime"),
             "lowering": ("runtime",)}

_EXERCISE = {
    "dialect": """
from fusebind.dialect import parse_module, interpret
import numpy as np
m = parse_module('func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\\n'
                 '  %b = prim.exp %a : tensor<4xf32> -> tensor<4xf32>\\n  func.return %b : tensor<4xf32>\\n}')
interpret(m, np.ones(4, np.float32))
""",
    "compiler": """
from fusebind.dialect import parse_module
from fusebind.compiler import optimize_graph, OptimizationContext
""",
    "lowering": """
from fusebind.dialect import parse_module
from fusebind.lowering import ObjectCache, decompose_region
T, R = 'tensor<3x5xf32>', 'tensor<3x1xf32>'
text = ('func.func @main(%a: ' + T + ') -> ' + T + ' {\\n'
        '  %r = fused.region @softmax (%a) : (' + T + ') -> ' + T + ' {\\n'
        '  ^bb0(%x: ' + T + '):\\n'
        '    %m = prim.reduce_max %x {axes = [1], keepdims} : ' + T + ' -> ' + R + '\\n'
        '    %d = prim.sub %x, %m : (' + T + ', ' + R + ') -> ' + T + '\\n'
        '    %e = prim.exp %d : ' + T + ' -> ' + T + '\\n'
        '    fused.yield %e : ' + T + '\\n  }\\n  func.return %r : ' + T + '\\n}')
region = next(op for op in parse_module(text).walk() if op.name == 'fused.region')
d = decompose_region(region, cache=ObjectCache(None))
assert d.emitted.rowwise and d.object_code and d.signature.dtypes
""",
}

_SCRIPT = """
import builtins, json, sys
first_importer = {{}}
_orig = builtins.__import__
def hook(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {{}}).get('__name__', '?')
    mod = _orig(name, globals, locals, fromlist, level)
    for pkg in ('dialect', 'compiler', 'lowering', 'runtime'):
        full = 'fusebind.' + pkg
        if full in sys.modules and full not in first_importer:
            first_importer[full] = importer
    return mod
builtins.__import__ = hook
import fusebind.{pkg}
after_import = sorted(m for m in sys.modules if m.startswith('fusebind.'))
{exercise}
after_use = sorted(m for m in sys.modules if m.startswith('fusebind.'))
print(json.dumps({{'after_import': after_import, 'after_use': after_use, 'first_importer': first_importer}}))
"""


def _loaded_packages(modules: list[str]) -> set[str]:
    return {m.split(".")[1] for m in modules if m.count(".") >= 1}


@pytest.mark.parametrize("pkg", sorted(FORBIDDEN))
def test_no_upward_import(pkg: str) -> None:
    script = _SCRIPT.format(pkg=pkg, exercise=textwrap.dedent(_EXERCISE[pkg]))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    for stage in ("after_import", "after_use"):
        loaded = _loaded_packages(report[stage])
        bad = sorted(loaded & set(FORBIDDEN[pkg]))
        assert not bad, (f"fusebind.{pkg} pulled in {bad} ({stage}); first importers: "
                         f"{ {f'fusebind.{b}': report['first_importer'].get(f'fusebind.{b}') for b in bad} }")


def test_runtime_reexports_the_abi_names() -> None:
    from fusebind.lowering import abi
    from fusebind.runtime import dtypes

    for name in ("DType", "KernelSignature", "memref_descriptor", "parse_dtypes"):
        assert getattr(dtypes, name) is getattr(abi, name)
    sig = dtypes.KernelSignature(inputs=(("f32", 2),), outputs=((dtypes.DType.F32, 2),))
    assert sig.dtypes == (abi.DType.F32, abi.DType.F32)
