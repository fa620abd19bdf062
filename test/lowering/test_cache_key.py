"""The pre-emission cache key (lowering/build.py's prebuilt index): a hit skips emission, and
the key stays exact: regions differing only in a constant, a dtype, a shape or an attribute get
different keys and each its own code; a note whose object is gone, or a damaged note, is a miss
that rebuilds; an edited fusebind source file gives new keys."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from fusebind.dialect import parse_module
from fusebind.lowering import ObjectCache, decompose_region
from fusebind.lowering import build
from fusebind.lowering.cache import NOTE_SUFFIX
from fusebind.runtime.dtypes import descriptor_for
from fusebind.runtime.kernel import Kernel

# x (R x 8) -> sum over `axes` of (C * transpose-or-not(x) + x): constant, dtype, shape, attribute
TEMPLATE = """
func.func @main(%a: tensor<{R}x8x{T}>) -> tensor<{R}x{T}> {{
  %r = fused.region @k (%a) : (tensor<{R}x8x{T}>) -> tensor<{R}x{T}> {{
  ^bb0(%x: tensor<{R}x8x{T}>):
    %c = prim.constant dense<{C}> : tensor<{T}>
    %m = prim.mul %c, %x : (tensor<{T}>, tensor<{R}x8x{T}>) -> tensor<{R}x8x{T}>
    %e = prim.{OP} %m : tensor<{R}x8x{T}> -> tensor<{R}x8x{T}>
    %s = prim.reduce_sum %e {{axes = [1]}} : tensor<{R}x8x{T}> -> tensor<{R}x{T}>
    fused.yield %s : tensor<{R}x{T}>
  }}
  func.return %r : tensor<{R}x{T}>
}}
"""
BASE = {"R": 8, "T": "f32", "C": "2.0", "OP": "exp"}
VARIANTS = {"base": {}, "constant": {"C": "3.0"}, "dtype": {"T": "f64"}, "shape": {"R": 9},
            "op": {"OP": "neg"}}


def _text(name: str) -> str:
    return TEMPLATE.format(**{**BASE, **VARIANTS[name]})


def _region(text: str):
    return next(op for op in parse_module(text).walk() if op.name == "fused.region")


def _check(d, name: str) -> None:
    p = {**BASE, **VARIANTS[name]}
    dt = np.float32 if p["T"] == "f32" else np.float64
    x = (np.arange(p["R"] * 8, dtype=dt).reshape(p["R"], 8) / 64).astype(dt)
    m = dt(float(p["C"])) * x
    want = (np.exp(m) if p["OP"] == "exp" else -m).sum(axis=1)
    out = np.empty(p["R"], dt)
    Kernel.from_decomposition(d)(descriptor_for(x), descriptor_for(out))
    np.testing.assert_allclose(out, want, rtol=1e-5 if dt == np.float32 else 1e-12)


def test_each_difference_gets_its_own_key_and_code(tmp_path: Path) -> None:
    cache = ObjectCache(tmp_path)
    first = {n: decompose_region(_region(_text(n)), cache=cache) for n in VARIANTS}
    assert not any(d.from_cache for d in first.values())
    assert len(list(tmp_path.glob(f"*{NOTE_SUFFIX}"))) == len(VARIANTS)  # one key each
    assert len(list(tmp_path.glob("*.o"))) == len(VARIANTS)
    for name in VARIANTS:
        again = decompose_region(_region(_text(name)), cache=cache)
        assert again.from_cache and "emit" not in again.timings, name  # found without emitting
        assert again.object_code == first[name].object_code and again.emitted == first[name].emitted, name
        _check(again, name)


def test_dynamic_and_symbol_are_part_of_the_key(tmp_path: Path) -> None:
    cache = ObjectCache(tmp_path)
    static = decompose_region(_region(_text("base")), cache=cache)
    dynamic = decompose_region(_region(_text("base")), cache=cache, dynamic=True)
    renamed = decompose_region(_region(_text("base").replace("@k ", "@other ")), cache=cache)
    assert not dynamic.from_cache and not renamed.from_cache
    assert dynamic.shapes != static.shapes and renamed.symbol != static.symbol
    assert len(list(tmp_path.glob(f"*{NOTE_SUFFIX}"))) == 3


@pytest.mark.parametrize("damage", ["object-gone", "note-garbage"])
def test_a_broken_note_is_a_miss_that_rebuilds(damage: str, tmp_path: Path) -> None:
    cache = ObjectCache(tmp_path)
    first = decompose_region(_region(_text("base")), cache=cache)
    (note,) = tmp_path.glob(f"*{NOTE_SUFFIX}")
    if damage == "object-gone":
        (obj,) = tmp_path.glob("*.o")
        obj.unlink()
    else:
        note.write_bytes(b"garbage")
    again = decompose_region(_region(_text("base")), cache=cache)
    # emitted again; the object is rebuilt (gone) or found by its own key (a damaged note only)
    assert "emit" in again.timings and again.object_code == first.object_code
    assert again.from_cache == (damage == "note-garbage")
    _check(again, "base")
    assert decompose_region(_region(_text("base")), cache=cache).timings.keys().isdisjoint({"emit"})


def test_an_edited_source_file_changes_the_fingerprint(tmp_path: Path) -> None:
    src = tmp_path / "pkg" / "mod.py"
    src.parent.mkdir()
    src.write_text("x = 1\n")
    (tmp_path / "pkg" / "notes.txt").write_text("not code")
    before = build.tree_fingerprint(str(tmp_path))
    st = os.stat(src)
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # as an edit would
    assert build.tree_fingerprint(str(tmp_path)) != before
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert build.tree_fingerprint(str(tmp_path)) == before
    src.write_text("x = 22\n")  # another size under the same mtime
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert build.tree_fingerprint(str(tmp_path)) != before
    (tmp_path / "pkg" / "notes.txt").write_text("other")  # not a .py file: not code
    src.write_text("x = 1\n")
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert build.tree_fingerprint(str(tmp_path)) == before
    (tmp_path / "pkg" / "new.py").write_text("")
    assert build.tree_fingerprint(str(tmp_path)) != before
    assert build.code_fingerprint() == build.code_fingerprint()  # once per process


def test_no_note_without_a_cache_or_for_a_foreign_backend() -> None:
    assert build.prebuilt_key({"x": 1}) is not None

    class Foreign(type(build.backend_named(build.DEFAULT_BACKEND))):  # a backend defined outside fusebind
        pass

    Foreign.__module__ = "my_backends"
    assert build.prebuilt_key({"x": 1}, Foreign("foreign-test")) is None
    d = decompose_region(_region(_text("base")), cache=ObjectCache(None))
    assert not d.from_cache and "emit" in d.timings
