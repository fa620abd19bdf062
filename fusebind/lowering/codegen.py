"""LLVM IR text -> native object code for the host CPU, through llvmlite.

Owns: `HostTarget` (CPU name, features, LLVM version: also part of the cache
key), `compile_llvm_ir` (one external entry, `AVX512_ATTRIBUTES` on
AVX-512 hosts, O3, emit object). Imports llvmlite lazily.
Must not: import `mlir`.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from fusebind.lowering.errors import LoweringError

_DEFINE = re.compile(r"^(define [^\n]*?@(?P<name>[\w.$\"]+)\((?:[^\n]*)\))(?P<attrs>[^\n{]*)\{", re.MULTILINE)


@dataclass(frozen=True)
class HostTarget:
    """What object code is specialised for; every field goes into the cache key."""

    triple: str
    cpu: str
    features: str
    llvm_version: str

    @property
    def has_avx512(self) -> bool:
        return "+avx512f" in self.features.split(",")


# Function attributes on AVX-512 hosts: 512-bit vectors (the loop vectorizer picks
# 256 by default). (Tried: "reciprocal-estimates"="vec-divf:1" with `arcp ninf`
# on tanh's division: vrcp14ps + a Newton step measured 7% slower than vdivps
# in tanh's loop, and missed tanh's saturation at 1.0 by an ulp.)
AVX512_ATTRIBUTES = '"prefer-vector-width"="512"'

# Loops calling erf or tanh (GELU's bodies) are long dependent chains (erf: a 14-term Clenshaw
# series and an exp, 33 dependent FMAs per vector) in which the vectorizer's cost model keeps one
# vector in flight. Four interleaved vectors measured (128x2048 f32, one AVX2 core, min of 50):
# erf 957 -> 498 us, GELU(erf) with its bias 826 -> 524 us, tanh 277 -> 192 us, the same values
# (interleaving runs the same operations on each element). It costs compile time (O3 + codegen of
# the erf kernel ~100 -> ~300 ms), so only kernels of at least INTERLEAVE_MIN_ELEMENTS elements (or
# dynamic shapes) get it (`build.build_object` decides). Other kernels keep the cost model's
# choice, so reductions keep their order. The count is LLVM's process-wide option, set for each
# module's optimisation under `_OPTION_LOCK` (the JIT worker and the caller may compile at once).
INTERLEAVED_CALLS = re.compile(r"@__fb_(?:erf|tanh)_f(?:32|64)\b")
INTERLEAVE_COUNT = 4
INTERLEAVE_MIN_ELEMENTS = 1 << 15
_OPTION_LOCK = threading.Lock()


def interleave_count(text: str, elements: int | None = None) -> int:
    """The forced interleave count for a kernel whose IR (or MLIR) is `text` and whose largest
    operand has `elements` elements (None: dynamic); 0: the cost model's choice."""
    if not INTERLEAVED_CALLS.search(text):
        return 0
    return INTERLEAVE_COUNT if elements is None or elements >= INTERLEAVE_MIN_ELEMENTS else 0


def _llvm() -> Any:
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm


@lru_cache(maxsize=1)
def host_target() -> HostTarget:
    """The host CPU as llvmlite sees it (cached: the CPU does not change under a process)."""
    llvm = _llvm()
    version = ".".join(str(v) for v in llvm.llvm_version_info)
    return HostTarget(llvm.get_process_triple(), llvm.get_host_cpu_name(),
                      llvm.get_host_cpu_features().flatten(), version)


@lru_cache(maxsize=1)
def _target_machine() -> Any:
    llvm = _llvm()
    host = host_target()
    return llvm.Target.from_triple(host.triple).create_target_machine(
        cpu=host.cpu, features=host.features, opt=3, codemodel="jitdefault")


def add_function_attributes(ir: str, attrs: str) -> str:
    """Append string function attributes (e.g. '"prefer-vector-width"="512"') to every definition."""
    return _DEFINE.sub(lambda m: f"{m.group(1)}{m.group('attrs').rstrip()} {attrs} {{", ir)


def compile_llvm_ir(ir: str, entry: str, *, opt_level: int = 3, interleave: int = 0) -> bytes:
    """Optimise `ir` for the host and return an object file whose only external symbol is `entry`.

    Every other defined function becomes internal before optimisation, so O3 can
    inline it into the entry and drop it (one exported copy: PERFORMANCE.md).
    Raises `LoweringError` (llvm-parse, llvm-opt or codegen).
    """
    llvm = _llvm()
    tm = _target_machine()
    if host_target().has_avx512:
        ir = add_function_attributes(ir, AVX512_ATTRIBUTES)
    try:
        mod = llvm.parse_assembly(ir)
        mod.verify()
    except RuntimeError as exc:
        raise LoweringError.at("llvm-parse", str(exc), ir) from None
    found = False
    for fn in mod.functions:
        if fn.is_declaration:
            continue
        if fn.name == entry:
            found = True
        else:
            fn.linkage = llvm.Linkage.internal
    if not found:
        defined = sorted(f.name for f in mod.functions if not f.is_declaration)
        raise LoweringError.at("llvm-opt", f"entry '{entry}' is not defined in the module; defined: {defined}", ir)
    try:
        mod.triple = tm.triple
        mod.data_layout = str(tm.target_data)
        _optimize(llvm, tm, mod, opt_level, interleave)
    except RuntimeError as exc:
        raise LoweringError.at("llvm-opt", str(exc), ir) from None
    try:
        return bytes(tm.emit_object(mod))
    except RuntimeError as exc:
        raise LoweringError.at("codegen", str(exc), str(mod)) from None


def optimized_ir(ir: str, entry: str, interleave: int = 0) -> str:
    """The O3 LLVM IR that `compile_llvm_ir` would emit code for (for inspection and tests)."""
    llvm = _llvm()
    tm = _target_machine()
    if host_target().has_avx512:
        ir = add_function_attributes(ir, AVX512_ATTRIBUTES)
    mod = llvm.parse_assembly(ir)
    for fn in mod.functions:
        if not fn.is_declaration and fn.name != entry:
            fn.linkage = llvm.Linkage.internal
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    _optimize(llvm, tm, mod, 3, interleave)
    return str(mod)


def _optimize(llvm: Any, tm: Any, mod: Any, opt_level: int, interleave: int = 0) -> None:
    """The LLVM module pipeline at `opt_level`, without the loop unroller; `interleave` > 0
    forces the loop vectorizer's interleave count (0: its cost model's, `interleave_count`).

    Measured (bench/RESULTS.md): full unrolling of the static 1024-wide row loops
    doubled O3 + codegen time (layernorm 128x1024: 84 -> 35 ms) for no speed-up; the
    vectorizer's own interleaving already gives four vectors in flight per iteration
    in short bodies (long ones: `INTERLEAVED_CALLS`).
    """
    pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    pto.loop_unrolling = False
    pb = llvm.create_pass_builder(tm, pto)
    with _OPTION_LOCK:
        llvm.set_option("", f"-force-vector-interleave={int(interleave)}")
        try:
            pb.getModulePassManager().run(mod, pb)
        finally:
            if interleave:
                llvm.set_option("", "-force-vector-interleave=0")
