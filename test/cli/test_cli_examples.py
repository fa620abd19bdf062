"""The runnable scripts in examples/: each runs and prints what it claims."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_script(name: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, str(REPO / "examples" / name)], cwd=REPO, env=dict(os.environ),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_api_basics_runs_jits_and_explains() -> None:
    out = run_script("api_basics.py").stdout
    err = float(re.search(r"max abs error vs numpy (\S+)", out).group(1))  # type: ignore[union-attr]
    assert err < 1e-3
    assert "func.func @gelu_residual" in out and "prim.matmul" in out
    assert re.search(r"region @\w+ \(FusedOpId \d+\)", out)
    assert "chosen: fused" in out
    assert "fused_calls=1" in out


def test_opt_pipeline_shows_each_stage() -> None:
    out = run_script("opt_pipeline.py").stdout
    stages = out.split("=== ")[1:]
    assert [s.split(":")[0] for s in stages] == ["fuse", "annotate-cost", "lower-to-linalg", "lower-to-llvm"]
    # relu(a*b+c) is one region: the catalog's bias_relu absorbs the multiply before it
    assert "fused.region @ew_mul_add_relu" in stages[0] and "absorbs catalog bias_relu" in stages[0]
    assert "cost #fused.cost<flops = 3072" in stages[1]  # mul, add, relu over 1024 elements
    assert "linalg.generic" in stages[2] and "fused.region" not in stages[2]
    assert "define void @fb_ew_mul_add_relu_0" in stages[3]


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc) to build the custom kernel")
def test_custom_c_kernel_binds_and_runs() -> None:
    out = run_script("custom_c_kernel.py").stdout
    fused_id = int(re.search(r"adopted RuntimeFused\((\d+)\)", out).group(1))  # type: ignore[union-attr]
    assert fused_id >= 65536
    assert "source lib:<tmp>/libbias_relu.so:bias_relu_c" in out
    assert f"region @bias_relu (FusedOpId {fused_id})" in out and "chosen: fused" in out
    assert "fused calls: 1; result equals numpy: True" in out


def test_every_pipeline_the_opt_example_documents_parses_and_runs() -> None:
    """Issue 11: its docstring showed `fuse{gate=all,remarks=true}`, which does not parse."""
    import importlib.util
    import io

    from fusebind.tools.opt import run_opt

    spec = importlib.util.spec_from_file_location("opt_pipeline_example", REPO / "examples" / "opt_pipeline.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)  # main() runs only as a script
    documented = re.findall(r"^\d+\. `([^`]+)`", example.__doc__ or "", re.MULTILINE)
    assert documented == [p for _, p in example.PIPELINES]
    assert documented[0] == "fuse{gate=all remarks=true}"
    for pipeline in documented:
        out, err = io.StringIO(), io.StringIO()
        code = run_opt([str(REPO / "examples" / "chain.mlir"), "-p", pipeline], io.StringIO(), out, err)
        assert code == 0, (pipeline, err.getvalue())
        assert out.getvalue() and "error" not in err.getvalue()
