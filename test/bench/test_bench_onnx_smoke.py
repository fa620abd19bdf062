"""bench/bench_onnx.py runs, checks fusebind against onnxruntime before timing, and reports rows.

No wall-clock assertions: its timings are benchmarks, not tests. The default run times the
transformer block at its --quick size at one pinned core (one child process); the long variant
(FUSEBIND_LONG=1) adds all cores, the compile-time section and the profile mode.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

pytest.importorskip("onnxruntime")

from bench import bench_onnx  # noqa: E402
from bench.onnx_models import MODELS, OnnxModel, dummy_inputs, transformer_block, with_logits  # noqa: E402

LONG = os.environ.get("FUSEBIND_LONG", "").strip().lower() in ("1", "true", "yes", "on")
TIME = r"[\d.]+ (?:ns|µs|ms|s)"


def _row(text: str, model: str, threads: str) -> list[str]:
    rows = [line for line in text.splitlines() if line.startswith(f"| {model} | {threads} (")]
    assert len(rows) == 1, text
    return [c.strip() for c in rows[0].strip("|").split("|")]


def test_a_wrong_output_is_an_error_not_a_row(monkeypatch: pytest.MonkeyPatch) -> None:
    real = bench_onnx._fusebind

    def off_by_one(proto, feeds, threads):  # noqa: ANN001, ANN202
        f, outs = real(proto, feeds, threads)
        return f, [o + np.float32(1e-2) for o in outs]
    monkeypatch.setattr(bench_onnx, "_fusebind", off_by_one)
    res = bench_onnx.child_time(["block-s128"], 1, quick=True)
    assert res["rows"] == []
    assert len(res["errors"]) == 1
    assert re.match(r"block-s128 at 1 thread\(s\): RuntimeError: block-s128: output 0 differs from onnxruntime's "
                    r"\(max abs err 0\.01\d*, rtol=0\.001, atol=0\.0001\)", res["errors"][0]), res["errors"]


def test_a_refused_model_is_a_skipped_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model fusebind does not run (strings) but onnxruntime does: the row says why, nothing is timed."""
    node = helper.make_node("StringNormalizer", ["s"], ["y"], case_change_action="UPPER", locale="C")
    graph = helper.make_graph([node], "strings", [helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.STRING, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    monkeypatch.setitem(MODELS, "strings", OnnxModel("strings", "transformer", "strings", "strings",
                                                     lambda quick: model,
                                                     lambda m: {"s": np.array(["a", "b"], dtype=object)}))
    res = bench_onnx.child_time(["strings"], 1, quick=True)
    assert res["errors"] == []
    (row,) = res["rows"]
    assert "fusebind_min" not in row
    assert row["skipped"].startswith("value 's': the element type STRING is not one fusebind has"), row
    text = bench_onnx.timing_table(res["rows"])
    assert re.search(r"\| strings \| 1 \(\d+ cores?\) \| skipped: value 's': the element type STRING", text), text


def _tiny_cnn() -> OnnxModel:
    """Conv (constant weights, as the light models') -> GlobalAveragePool -> Flatten -> Softmax."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 2, 3, 3], [0.02] * 72)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["c"], ["g"]), helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Softmax", ["f"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "tiny_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return OnnxModel("tiny-cnn", "cnn", "tiny", "tiny", lambda quick: model, dummy_inputs)


def test_a_cnn_is_checked_on_its_logits_and_its_softmax_must_be_one() -> None:
    m = _tiny_cnn()
    proto = m.build(True)
    assert [o.name for o in with_logits(proto).graph.output] == ["y", "f"]
    feeds = m.inputs(proto)
    np.testing.assert_array_equal(feeds["x"], (np.arange(72).reshape(1, 2, 6, 6) / 72).astype(np.float32))
    ref = bench_onnx._ort_session(proto, 1).run(None, feeds)
    _, got = bench_onnx._fusebind(proto, feeds, 1)
    assert bench_onnx.verify(m, proto, feeds, 1, got, ref) < 1e-5
    with pytest.raises(RuntimeError, match=r"tiny-cnn: output 0 \(float32\[1, 4\], 1 not finite, sums \[nan\]\) "
                                           r"is no softmax like onnxruntime's \(float32\[1, 4\]\)"):
        bench_onnx.verify(m, proto, feeds, 1, [np.where(np.arange(4) == 2, np.nan, got[0]).astype(np.float32)], ref)


def test_the_block_builder_is_the_one_of_onnx_1_2() -> None:
    """Same graph as test/onnx/transformer_block_model.py (op sequence), at the bench's sizes."""
    ops = [n.op_type for n in transformer_block(seq=16, dim=64, heads=4, vocab=64).graph.node]
    assert ops[:3] == ["Gather", "Add", "LayerNormalization"]
    assert ops.count("MatMul") == 8 and ops.count("Softmax") == 1 and ops.count("Gelu") == 1
    assert ops[-1] == "Add"


def test_profile_labels_every_plan_step() -> None:
    prof = bench_onnx.child_profile("block-s128", 1, quick=True, calls=2)
    kinds = [s["kind"] for s in prof["steps"]]
    assert any(s["kind"] == "prim.matmul" or "matmul" in s["what"] for s in prof["steps"]), prof
    assert any(k.startswith("region (") for k in kinds), kinds  # fused regions are named with their arm
    assert 0 < sum(s["s"] for s in prof["steps"]) <= prof["total_s"], prof
    text = bench_onnx.profile_table("block-s128", prof)
    assert re.search(r"\| outside the steps \(call, checks, copies\) \|  \| " + TIME, text), text


def test_quick_run_times_the_block_after_checking_it(capsys: pytest.CaptureFixture[str]) -> None:
    # after the in-process tests: the child finds their kernels in this run's object cache
    assert bench_onnx.main(["--quick", "--models", "block-s128", "--threads", "1", "--no-compile"]) == 0
    text = capsys.readouterr().out
    cells = _row(text, "block-s128", "1")
    assert cells[1] == "1 (1 pinned core)"
    for c in cells[2:6]:  # fusebind and onnxruntime, min and median
        assert re.fullmatch(TIME, c), cells
    assert re.fullmatch(r"[\d.]+×", cells[6]), cells
    err = float(re.fullmatch(r"✓ \(max rel err (\S+)\)", cells[7]).group(1))
    assert err < 1e-4, cells
    assert re.search(r"by threads row: 1: OpenBLAS \S+ threads=1\n", text), text  # BLAS on the one core
    assert "Errors" not in text


def test_write_block_replaces_only_its_block(tmp_path: Path) -> None:
    path = tmp_path / "RESULTS.md"
    path.write_text(f"# R\n\n{bench_onnx.BEGIN}\nold\n{bench_onnx.END}\n\ntail\n", encoding="utf-8")
    bench_onnx.write_block(path, "new")
    assert path.read_text(encoding="utf-8") == f"# R\n\n{bench_onnx.BEGIN}\nnew\n{bench_onnx.END}\n\ntail\n"
    bench_onnx.write_block(path, "prof", bench_onnx.PROFILE_MARKERS)  # appended: its markers were absent
    begin, end = bench_onnx.PROFILE_MARKERS
    assert path.read_text(encoding="utf-8") == (f"# R\n\n{bench_onnx.BEGIN}\nnew\n{bench_onnx.END}\n\ntail\n\n"
                                                f"{begin}\nprof\n{end}\n")


@pytest.mark.skipif(not LONG, reason="two more children and two compile processes: FUSEBIND_LONG=1 runs it")
def test_quick_run_with_all_cores_compile_times_and_profile(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_onnx.main(["--quick", "--models", "block-s128,bert-layer"]) == 0
    text = capsys.readouterr().out
    n = bench_onnx.all_cores()
    for model in ("block-s128", "bert-layer"):
        assert _row(text, model, "1")[7].startswith("✓")
        assert _row(text, model, str(n))[7].startswith("✓")
        compile_row = [line for line in text.splitlines() if line.startswith(f"| {model} | ") and "compiled)" in line]
        assert len(compile_row) == 1, text
        # the warm process loads kernels from the cache; a region assembled per process (the attention
        # region binds its cached softmax kernel) may still count as compiled, but fewer than cold
        cold, hits, warm = map(int, re.search(r"\((\d+) compiled\) \| [^|]*\((\d+) cache hits, (\d+) compiled\)",
                                              compile_row[0]).groups())
        assert hits >= 1 and warm < cold, compile_row
    assert bench_onnx.main(["--quick", "--profile", "bert-layer", "--threads", "1"]) == 0
    prof = capsys.readouterr().out
    assert re.search(r"\| prim\.matmul \| \d+ \| " + TIME, prof) and "region (fused)" in prof, prof
