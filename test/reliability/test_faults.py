"""Fault injection into lowering, the object cache and the kernel boundary.

Each fault must end in correct values through arm 0 (the primitive body) or a
clear `LoweringError` naming its stage, and must leave the binding table, the
recipe registry and the cache consistent. (Background-compile-thread death
and faults under the executor come in phase 2.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from conftest import expected, operands, region_of, region_text, run_kernel, scaled
from fusebind.dialect import interpret, parse_module
from fusebind.lowering import LoweringError, ObjectCache, decompose_region, emit_linalg, inline_region
from fusebind.lowering.cache import CacheWarning, _decode
from fusebind.runtime.kernel import Kernel


def state_fingerprint() -> tuple[int, int, tuple[int, ...]]:
    """(table generation, rows, recipe ids): what a failed lowering must not move."""
    from fusebind.runtime.bindings import global_recipes
    from fusebind.runtime.bindings import global_bindings

    table = global_bindings()
    return table.generation, len(table), global_recipes().ids()


def arm0_values(text: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The fallback: inline the region into its function and interpret it."""
    module = parse_module(text)
    result = inline_region(region_of(module))
    assert result.inlined, result.diagnostic
    return interpret(module, a, b)


def assert_cache_consistent(directory: Path) -> None:
    """Every visible entry (`<key>.o`) decodes and verifies; temp files are never entries."""
    for path in directory.glob("*.o"):
        if path.name.startswith(".tmp-"):
            continue
        assert _decode(path.read_bytes()) is not None, f"corrupt visible cache entry {path.name}"


# --------------------------------------------------------------------------- lowering faults


@pytest.mark.parametrize("pipeline, stage", [
    ("builtin.module(no-such-pass)", "mlir-passes"),
    ("builtin.module(one-shot-bufferize{no-such-option=1})", "mlir-passes"),
    ("garbage((", "mlir-passes"),
])
def test_a_failing_pass_pipeline_is_a_staged_error_and_arm0_still_answers(pipeline: str, stage: str) -> None:
    from fusebind.lowering.pipeline import run_upstream_pipeline

    text = region_text(32)
    emitted = emit_linalg(region_of(parse_module(text)), "k")
    before = state_fingerprint()
    with pytest.raises(LoweringError) as info:
        run_upstream_pipeline(emitted.text, pipeline=pipeline)
    err = info.value
    assert err.stage == stage and err.ir == emitted.text and "fusebind.lowering.repro" in err.reproducer
    assert state_fingerprint() == before
    a, b = operands(32)
    np.testing.assert_array_equal(arm0_values(text, a, b), expected("mul", a, b))


def test_ir_the_passes_reject_is_a_staged_error() -> None:
    from fusebind.lowering.pipeline import run_upstream_pipeline

    # Parses, but one-shot-bufferize has no bufferization for shape.shape_of.
    text = ("func.func @k(%a: tensor<4xf32>) -> index {\n"
            "  %s = shape.shape_of %a : tensor<4xf32> -> tensor<1xindex>\n  %c0 = arith.constant 0 : index\n"
            "  %e = tensor.extract %s[%c0] : tensor<1xindex>\n  return %e : index\n}\n")
    before = state_fingerprint()
    with pytest.raises(LoweringError) as info:
        run_upstream_pipeline(text)
    assert info.value.stage == "mlir-passes" and "op was not bufferized" in info.value.message
    assert "shape.shape_of" in info.value.message and state_fingerprint() == before


def test_llvm_rejecting_the_ir_is_a_staged_error_and_nothing_is_cached(tmp_path: Path) -> None:
    from fusebind.lowering.codegen import compile_llvm_ir
    from fusebind.lowering.pipeline import lower_to_llvm_ir

    emitted = emit_linalg(region_of(parse_module(region_text(8))), "k")
    good = lower_to_llvm_ir(emitted.text)
    broken = good.replace("ret void", "ret i32 %undefined_value", 1)
    with pytest.raises(LoweringError) as info:
        compile_llvm_ir(broken, emitted.entry)
    assert info.value.stage == "llvm-parse" and info.value.ir.startswith(broken[:40])
    assert compile_llvm_ir(good, emitted.entry)[:4] == b"\x7fELF"  # the codegen state is not poisoned


def test_translating_a_half_lowered_module_is_an_error_not_a_segfault() -> None:
    script = textwrap.dedent("""
        import sys
        sys.path.insert(0, %r)
        from conftest import region_of, region_text
        from fusebind.dialect import parse_module
        from fusebind.lowering import LoweringError, emit_linalg
        from fusebind.lowering.pipeline import run_upstream_pipeline, translate_to_llvm_ir
        e = emit_linalg(region_of(parse_module(region_text())), "k")
        m = run_upstream_pipeline(e.text, pipeline="builtin.module(convert-func-to-llvm,reconcile-unrealized-casts)")
        try:
            translate_to_llvm_ir(m)
        except LoweringError as err:
            print("stage", err.stage)
    """) % str(Path(__file__).parent)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.split() == ["stage", "translate"], proc.stderr[-500:]


# --------------------------------------------------------------------------- cache faults


def _decompose(text: str, cache: ObjectCache) -> Any:
    return decompose_region(region_of(parse_module(text)), cache=cache)


def test_every_truncation_or_bit_flip_of_an_entry_is_detected_and_rebuilt(tmp_path: Path) -> None:
    cache = ObjectCache(tmp_path)
    text = region_text(24, "sub")
    first = _decompose(text, cache)
    (entry,) = tmp_path.glob("*.o")
    pristine = entry.read_bytes()
    a, b = operands(24, seed=3)
    rng = np.random.default_rng(0)
    cuts = sorted({0, 1, 7, 8, 40, len(pristine) - 1, *rng.integers(0, len(pristine), scaled(6, 60)).tolist()})
    flips = sorted({0, 8, 20, 72, 80, len(pristine) - 1, *rng.integers(0, len(pristine), scaled(6, 60)).tolist()})
    damaged = [pristine[:c] for c in cuts] + [
        pristine[:i] + bytes([pristine[i] ^ 0x10]) + pristine[i + 1:] for i in flips]
    for blob in damaged:
        entry.write_bytes(blob)
        got = cache.get(entry.stem)
        # The hash covers the symbol and the code: any damaged byte makes the entry a miss.
        assert got is None, "a damaged entry was accepted"
        rebuilt = _decompose(text, cache)
        assert not rebuilt.from_cache and rebuilt.object_code == first.object_code
        assert entry.read_bytes() == pristine  # rebuilt and overwritten
    kernel = Kernel.from_decomposition(_decompose(text, cache))
    np.testing.assert_array_equal(run_kernel(kernel, a, b, out_like=a), expected("sub", a, b))


def test_the_entry_hash_covers_the_symbol_too(tmp_path: Path) -> None:
    from fusebind.lowering.cache import CachedObject

    cache = ObjectCache(tmp_path)
    cache.put("k", CachedObject("_mlir_ciface_fb_k", b"\x7fELF-code"))
    path = tmp_path / "k.o"
    path.write_bytes(path.read_bytes().replace(b"_mlir_ciface_fb_k", b"_mlir_ciface_fb_x"))
    assert cache.get("k") is None


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (root only); skipped where mounting is not permitted."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tiny tmpfs needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode(errors='replace').strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_full_cache_disk_costs_only_the_cache(tiny_tmpfs: Path) -> None:
    filler = tiny_tmpfs / "filler"
    with open(filler, "wb") as f:
        try:
            f.write(b"\0" * (64 * 1024))
        except OSError:
            pass
    cache = ObjectCache(tiny_tmpfs / "cache")
    text = region_text(40, "max")
    before = state_fingerprint()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        d1 = _decompose(text, cache)
        d2 = _decompose(text.replace("@k", "@k2"), cache)
    assert [w.category for w in caught] == [CacheWarning] and "cannot write" in str(caught[0].message)
    assert not d1.from_cache and not d2.from_cache
    a, b = operands(40, seed=5)
    np.testing.assert_array_equal(run_kernel(Kernel.from_decomposition(d1), a, b, out_like=a), expected("max", a, b))
    leftovers = [p.name for p in (tiny_tmpfs / "cache").iterdir()] if (tiny_tmpfs / "cache").exists() else []
    assert leftovers == [], f"a failed write left files behind: {leftovers}"
    assert state_fingerprint() == before
    filler.unlink()  # space again: the same cache object now stores entries
    d3 = _decompose(text, cache)
    assert not d3.from_cache and _decompose(text, cache).from_cache
    assert_cache_consistent(tiny_tmpfs / "cache")


def test_a_read_only_cache_mount_costs_only_the_cache(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a read-only tmpfs needs root")
    mnt = tmp_path / "ro"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(mnt)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {proc.stderr.decode(errors='replace').strip()}")
    try:
        cache = ObjectCache(mnt)
        text = region_text(12, "min")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            d = _decompose(text, cache)
            _decompose(text, cache)
        assert [w.category for w in caught] == [CacheWarning] and "Read-only" in str(caught[0].message)
        a, b = operands(12, seed=6)
        np.testing.assert_array_equal(run_kernel(Kernel.from_decomposition(d), a, b, out_like=a), expected("min", a, b))
        assert list(mnt.iterdir()) == []
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_cache_files_are_owner_only_and_verified_before_loading(tmp_path: Path) -> None:
    cache = ObjectCache(tmp_path / "c")
    text = region_text(8, "add")
    _decompose(text, cache)
    assert (tmp_path / "c").stat().st_mode & 0o777 == 0o700
    (entry,) = (tmp_path / "c").glob("*.o")
    assert entry.stat().st_mode & 0o777 == 0o600
    # Swap in a different, well-formed object under the same key: the hash in the
    # header no longer matches, so it is never loaded.
    other = _decompose(region_text(8, "sub"), ObjectCache(None)).object_code
    data = entry.read_bytes()
    header_end = data.index(b"\n", data.index(b"\n", 7) + 1) + 1
    entry.write_bytes(data[:header_end] + other)
    d = _decompose(text, cache)
    assert not d.from_cache
    a, b = operands(8, seed=7)
    np.testing.assert_array_equal(run_kernel(Kernel.from_decomposition(d), a, b, out_like=a), expected("add", a, b))


# --------------------------------------------------------------------------- killed writers

#: each writer is a fresh interpreter that imports only cache.py and the two modules it needs: the
#: packages `fusebind`, `fusebind.dialect`, `fusebind.lowering` are stood in by empty packages on the
#: real directories, so their __init__ (xdsl, llvmlite, numpy dtypes: 1.8 s of CPU) does not run for
#: each of the writers the test kills (0.2 s each instead); the code under test is the real cache.py
WRITER = textwrap.dedent("""
    import importlib.util, sys, os, types
    from pathlib import Path
    root = Path(importlib.util.find_spec("fusebind").origin).parent
    for name in ("fusebind", "fusebind.dialect", "fusebind.lowering"):
        package = types.ModuleType(name)
        package.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
        sys.modules[name] = package
    from fusebind.lowering.cache import CachedObject, ObjectCache
    cache = ObjectCache(Path(sys.argv[1]))
    i = 0
    print("ready", flush=True)
    while True:
        payload = bytes([i % 251]) * (1 << 20) + i.to_bytes(8, "little")
        cache.put(f"key{i % 3}", CachedObject("sym", payload))
        i += 1
""")


def test_a_writer_killed_mid_write_never_leaves_a_visible_partial_entry(tmp_path: Path) -> None:
    import threading

    rng = np.random.default_rng(1)
    kills = scaled(8, 100)
    stop = threading.Event()
    seen = {"complete": 0, "partial": 0}

    def reader() -> None:  # reads while writers write and die: old, new or nothing, never partial
        while not stop.is_set():
            for path in tmp_path.glob("key*.o"):
                try:
                    data = path.read_bytes()
                except OSError:
                    continue
                seen["complete" if _decode(data) is not None else "partial"] += 1
            time.sleep(0.002)  # leave the GIL to the test thread spawning writers

    watcher = threading.Thread(target=reader, daemon=True)
    watcher.start()
    for _ in range(kills):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE)
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        time.sleep(float(rng.uniform(0.0, 0.05)))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert_cache_consistent(tmp_path)
    stop.set()
    watcher.join(30)
    assert seen["partial"] == 0, f"a concurrent reader saw {seen['partial']} partial entries"
    assert seen["complete"] > 0, "the concurrent reader never saw an entry"
    entries = sorted(p.name for p in tmp_path.glob("key*.o"))
    assert entries, "the writer never completed one entry; raise the sleep range"
    cache = ObjectCache(tmp_path)
    for name in entries:
        got = cache.get(name[:-2])
        assert got is not None and got.symbol == "sym" and len(got.object_code) == (1 << 20) + 8


# --------------------------------------------------------------------------- the kernel boundary


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_kernel_that_raises_through_a_python_callback_is_not_silent() -> None:
    from fusebind.runtime.dtypes import descriptor_for
    from fusebind.runtime.testing import noop_kernel

    def body(*_: Any) -> None:
        raise ValueError("kernel failed")

    kernel = noop_kernel(body=body)
    a = np.ones(4, np.float32)
    out = np.zeros(4, np.float32)
    with pytest.raises(Exception, match="kernel failed"):
        kernel(descriptor_for(a), descriptor_for(out))
