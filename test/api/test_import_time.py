"""Import cost: bfloat16's ml_dtypes (~1 s of CPU to import) is loaded only by programs that use
bfloat16 (dialect/types.py resolves its dtype on first use; docs/COMPILE_LATENCY.md). One fresh
child process answers every question (module-scoped)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    from fusebind.dialect import types as T
    out = {}
    # the element table and its lookups, on every non-bf16 dtype and on foreign values
    names = [T.element_of_numpy(np.dtype(T.ELEMENTS[n].dtype_source)) for n in T.ELEMENT_TYPES if n != "bf16"]
    table = T.NumpyDtypeNames()
    out["lookups"] = [names == [n for n in T.ELEMENT_TYPES if n != "bf16"],
                      T.element_of_numpy(np.dtype(np.complex64)) is None, T.element_of_numpy("float32") is None,
                      np.dtype(np.float32) in table, "float32" not in table, table[np.dtype(np.int8)] == "i8",
                      not T.is_bfloat16(np.float16), T.name_of_numpy_dtype("float32") == "f32",
                      T.ELEMENTS["bf16"].nbytes == 2, T.NUMPY_NAMES[-1] == "uint64", "bfloat16" in T.NUMPY_NAMES]
    out["types_ml_dtypes"] = "ml_dtypes" in sys.modules
    import fusebind as fb
    f = fb.jit(lambda a, b: fb.exp(a) * b + 1)
    x = np.linspace(0, 1, 64, dtype=np.float32)
    out["f32_ok"] = bool(np.allclose(f(x, x), np.exp(x) * x + 1, rtol=1e-6))
    out["program_ml_dtypes"] = "ml_dtypes" in sys.modules
    import ml_dtypes  # now bfloat16 exists: every lookup knows it
    bf = np.dtype(ml_dtypes.bfloat16)
    out["bf16"] = [T.is_bfloat16(bf), T.element_of_numpy(bf) == "bf16", T.name_of_numpy_dtype(bf) == "bf16",
                   bf in table, T.numpy_dtype("bf16") == bf, list(table)[T.ELEMENT_TYPES.index("bf16")] == bf]
    xb = x.astype(bf)
    yb = f(xb, xb)
    ref = (np.exp(xb.astype(np.float32)) * xb.astype(np.float32) + 1)
    out["bf16_ok"] = bool(yb.dtype == bf and np.allclose(yb.astype(np.float32), ref, rtol=2e-2))
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def child() -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_element_table_answers_without_ml_dtypes(child: dict) -> None:
    assert child["lookups"] == [True] * len(child["lookups"])
    assert child["types_ml_dtypes"] is False


def test_bfloat16_still_works_once_ml_dtypes_is_loaded(child: dict) -> None:
    assert child["f32_ok"] is True
    assert child["bf16"] == [True] * len(child["bf16"])
    assert child["bf16_ok"] is True


def test_a_program_without_bfloat16_never_imports_ml_dtypes(child: dict) -> None:
    assert child["program_ml_dtypes"] is False


def test_promotion_bfloat16_is_the_ml_dtypes_dtype() -> None:
    import ml_dtypes

    from fusebind.api import promotion

    assert promotion.BFLOAT16 == np.dtype(ml_dtypes.bfloat16) and promotion.is_floating(promotion.BFLOAT16)
    assert promotion.bf16_lattice([promotion.BFLOAT16, np.dtype(np.int32)]) == promotion.BFLOAT16
    assert promotion.bf16_lattice([np.dtype(np.float32)]) is None
    with pytest.raises(AttributeError):
        promotion.NOT_A_NAME  # noqa: B018
