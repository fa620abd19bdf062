"""The object-cache key of code holding a user op includes the op's fingerprint, so editing
its `scalar_body` (or `reference`) cannot load code built from the old body.

The registry is append-only per process, so the two versions of one op name are registered in
two fresh processes, as a user's edited module would be on their next run."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from fusebind.lowering.cache import cache_key

RECIPE = "%1 = keytest.cube %0 : tensor<4xf32> -> tensor<4xf32>"

MODULE = """
from typing import Any, ClassVar
from xdsl.irdl import irdl_op_definition
from fusebind.dialect import UnaryOp, register_op


@irdl_op_definition
class CubeOp(UnaryOp):
    name = "keytest.cube"
    DTYPES: ClassVar[frozenset[str]] = frozenset({{"f32", "f64"}})

    def scalar_body(self, b: Any, *args: Any) -> Any:
        return {body}

    def reference(self, *arrays: Any) -> Any:
        return arrays[0] ** 3


register_op(CubeOp)
"""

PRINT_KEYS = ("import userop; from fusebind.lowering.cache import cache_key; "
              f"print(cache_key(recipe={RECIPE!r}, text='t')); print(cache_key(recipe='prim.neg', text='t'))")


def _keys(tmp: Path, bodies: list[str]) -> list[list[str]]:
    procs = []
    for i, body in enumerate(bodies):
        d = tmp / f"v{i}"
        d.mkdir()
        (d / "userop.py").write_text(textwrap.dedent(MODULE.format(body=body)))
        procs.append(subprocess.Popen([sys.executable, "-c", PRINT_KEYS], cwd=d, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(out.split())
    return outs


def test_an_edited_body_gives_another_key_and_the_same_body_the_same(tmp_path: Path) -> None:
    body = "b.mul(b.mul(args[0], args[0]), args[0])"
    first, same, edited = _keys(tmp_path, [body, body, "b.mul(args[0], b.mul(args[0], args[0]))"])
    assert first[0] == same[0]
    assert first[0] != edited[0]
    # a key that names no user op is as without user ops (this process has none named keytest)
    assert first[1] == same[1] == edited[1] == cache_key(recipe="prim.neg", text="t")
    assert first[0] != cache_key(recipe=RECIPE, text="t")  # unregistered here: no fingerprint
