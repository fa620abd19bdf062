"""docs/ONNX-COVERAGE.md: what the importer claims (`registry.HANDLERS`) joined with a suite run.

`python -m fusebind.onnx.coverage --results run.json --write docs/ONNX-COVERAGE.md`, where run.json
is what `test/onnx/test_backend_conformance.py` writes under FUSEBIND_ONNX_RESULTS=run.json
({case: [pass|fail|error|skip, reason]}). Without --results the doc has the claim table only;
`--claims-only --write docs/ONNX-COVERAGE.md` rewrites just the claim section (a handler added since
the run), keeping the run's results as they are.

The claim table sits between the `claims` markers and is generated from HANDLERS alone, so a test
can check it against the registry (`claim_table()` equals the doc's section). The results part
counts, per op type, the cases that use it (an op type of a case is every node's op in its model),
and names each failing case whose op types are all claimed, with its reason.

Must not: run the suite itself (the conformance test does; this only reads its results).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import warnings
from typing import Any, Iterable

from fusebind.onnx.registry import HANDLERS

#: what a failing case's analysis found (shown beside the runner's message)
KNOWN_FAILURES = {
    "test_dft_inverse_cpu": "the expected values carry numpy's complex64 FFT rounding (the reference runs pocketfft "
                            "in float32): near-zero imaginary parts of 1.9e-7, where atol is 1e-7; fusebind's float64 "
                            "DFT matrix gives 5.6e-16 (onnxruntime misses by 1.9e-5)",
    "test_dft_inverse_opset19_cpu": "as test_dft_inverse_cpu (the same data at opset 19)",
    "test_attention_4d_causal_fp16_expanded_cpu": "2 of 192 elements one float16 ulp apart (4.9e-4 at 0.47, rtol "
                                                  "1e-3): fusebind computes a fused region's float16 values in "
                                                  "float32 and rounds once (docs/DTYPES.md), the reference rounds "
                                                  "after every op of the expanded graph",
}

START, END = "<!-- claims:start -->", "<!-- claims:end -->"

#: onnx's model-kind directories and the BackendTest class each becomes
MODEL_KINDS = {"real": "OnnxBackendRealModelTest", "simple": "OnnxBackendSimpleModelTest",
               "pytorch-converted": "OnnxBackendPyTorchConvertedModelTest",
               "pytorch-operator": "OnnxBackendPyTorchOperatorModelTest"}

#: the model-kind cases that run only under FUSEBIND_LONG=1 (test/onnx/test_backend_conformance.py
#: reads this; the default run has every other model case): the full-size CNNs of `real` but
#: squeezenet and resnet50, each 5 to 20 s with a warm object cache on a loaded 2-core machine
#: (squeezenet 2 s, resnet50 6, inception_v1 5, alexnet 6, inception_v2 6, zfnet512 8, shufflenet 8,
#: densenet121 11, vgg19 20; cold: squeezenet 7, resnet50 16, inception_v1 19), the other 140 model
#: cases 17 s together
MODEL_LONG_ONLY = frozenset({
    "test_bvlc_alexnet_cpu", "test_densenet121_cpu", "test_inception_v1_cpu", "test_inception_v2_cpu",
    "test_shufflenet_cpu", "test_vgg19_cpu", "test_zfnet512_cpu",
})


def _claims() -> dict[str, str]:
    """op type -> its opsets ("1.." or "7..12, 13..") for the default domain and others by prefix."""
    from fusebind.onnx.importer import _load_handlers
    _load_handlers()
    out = {}
    for (domain, op), handlers in sorted(HANDLERS.items(), key=lambda kv: (kv[0][0], kv[0][1].lower())):
        spans = ", ".join(f"{h.since}..{h.until if h.until is not None else ''}" for h in
                          sorted(handlers, key=lambda h: h.since))
        out[f"{domain + '.' if domain else ''}{op}"] = spans
    return out


def claim_table() -> str:
    """The doc's claim section: one row per op type the registry has, with its opsets."""
    claims = _claims()
    rows = [START, "", f"{len(claims)} op types.", "", "| op type | opsets |", "|---|---|"]
    rows += [f"| {op} | {spans} |" for op, spans in claims.items()]
    rows += ["", END]
    return "\n".join(rows)


def doc_claim_section(text: str) -> str:
    """The claim section of a doc's text (markers included), or "" when it has none."""
    m = re.search(re.escape(START) + r".*?" + re.escape(END), text, re.S)
    return m.group(0) if m else ""


def case_op_types() -> dict[str, set[str]]:
    """cpu case name -> the op types of its model (cases whose model is not on disk: no entry)."""
    import onnx
    from onnx.backend.test.loader import load_model_tests

    out: dict[str, set[str]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kind in ("node", "real", "simple", "pytorch-converted", "pytorch-operator"):
            for case in load_model_tests(kind=kind):
                model = case.model
                if model is None and case.model_dir:
                    try:
                        model = onnx.load(f"{case.model_dir}/model.onnx")
                    except Exception:
                        model = None
                if model is not None:
                    out[f"{case.name}_cpu"] = {n.op_type for n in model.graph.node}
    return out


def model_kind_cases() -> dict[str, str]:
    """cpu case name -> its model kind ("real", "simple", "pytorch-converted", "pytorch-operator")."""
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {f"{case.name}_cpu": kind for kind in MODEL_KINDS for case in load_model_tests(kind=kind)}


def _model_section(results: dict[str, list[str]]) -> list[str]:
    """The model kinds: counts per kind, every case that does not pass with its reason, and which
    cases the default run includes (the rest: FUSEBIND_LONG=1)."""
    kinds = model_kind_cases()
    parts = ["## Model kinds", "",
             "The model cases of BackendTest (`real`: the 9 light CNNs, reference outputs from onnx's "
             "ReferenceEvaluator; `simple`; `pytorch-converted`; `pytorch-operator`).", "",
             "| kind | cases | pass | fail | skipped | not in this run |", "|---|---|---|---|---|---|"]
    every = collections.Counter()
    for kind in MODEL_KINDS:
        cases = [c for c, k in kinds.items() if k == kind]
        c = collections.Counter(_outcome(results[n][0]) if n in results else "absent" for n in cases)
        every.update(c)
        parts.append(f"| {kind} | {len(cases)} | {c['pass']} | {c['fail']} | {c['skip']} | {c['absent']} |")
    parts.append(f"| all | {len(kinds)} | {every['pass']} | {every['fail']} | {every['skip']} | {every['absent']} |")
    parts += ["", "### Model cases that do not pass", ""]
    rows = [(case, kinds[case], results[case]) for case in sorted(kinds) if case in results
            and results[case][0] != "pass"]
    if rows:
        parts += ["| case | kind | outcome | reason |", "|---|---|---|---|"]
        for case, kind, (outcome, reason) in rows:
            why = " ".join(reason.split()).replace("|", "\\|")[:240]
            if outcome != "skip" and case in KNOWN_FAILURES:
                why = f"{why}: {KNOWN_FAILURES[case]}"
            parts.append(f"| {case} | {kind} | {_outcome(outcome)} | {why} |")
    else:
        parts.append("None.")
    default = sorted(c for c in kinds if c not in MODEL_LONG_ONLY)
    long_only = sorted(c for c in kinds if c in MODEL_LONG_ONLY)
    parts += ["", "### Which model cases run by default", "",
              f"The default run (`pytest test/onnx/test_backend_conformance.py`) includes {len(default)} model "
              f"cases; {len(long_only)} run only under `FUSEBIND_LONG=1` (full-size CNNs, 5 to 20 s each; "
              "`coverage.MODEL_LONG_ONLY`):", "", ", ".join(f"`{c}`" for c in long_only) + ".", "",
              "By default: " + ", ".join(f"`{c}`" for c in default) + ".", ""]
    return parts


def _outcome(v: str) -> str:
    return "fail" if v in ("fail", "error") else v


def summarize(results: dict[str, list[str]], ops: dict[str, set[str]], claims: Iterable[str]) -> dict[str, Any]:
    """Counts overall and per op type; the failing cases whose op types are all claimed."""
    claimed = set(claims)
    total = collections.Counter(_outcome(v[0]) for v in results.values())
    per_op: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    claimed_failures = []
    for case, (outcome, reason) in sorted(results.items()):
        types = ops.get(case, set())
        for op in types:
            per_op[op][_outcome(outcome)] += 1
        if _outcome(outcome) == "fail" and types and types <= claimed:
            claimed_failures.append((case, sorted(types), reason))
    return {"total": total, "per_op": per_op, "claimed_failures": claimed_failures}


def render(results: dict[str, list[str]] | None, run_note: str = "") -> str:
    claims = _claims()
    parts = ["# ONNX coverage", "",
             "Generated by `python -m fusebind.onnx.coverage` from the importer's handler table "
             "(`fusebind/onnx/registry.py` HANDLERS: what fusebind claims) and a run of "
             "`test/onnx/test_backend_conformance.py` (onnx's BackendTest over the cpu cases, at the suite's "
             "own tolerances). Do not edit by hand.", "",
             "How a case is counted: `prepare` raises `unittest.SkipTest` (skipped) when the importer does not "
             "build the model: an op type, opset or domain without a handler, an element type fusebind does not "
             "have (float8, int4, string, or a family switched off), sequences/optionals, control flow, "
             "data-dependent shapes; the reason names the node, op and opset. A wrong value, shape or dtype, or "
             "any other error, is a failure. Models are upgraded to opset 21 (`importer.TARGET_OPSET`) when "
             "older; a graph input that is an op's parameter (a Reshape's shape, a reduction's axes: "
             "`importer.PARAM_INPUTS`) specializes the function on its value.", "",
             "## Claimed op types", "", claim_table(), ""]
    if results:
        s = summarize(results, case_op_types(), claims)
        t = s["total"]
        parts += ["## Suite run", "", run_note or "", "",
                  f"{sum(t.values())} cases: **{t['pass']} pass**, {t['fail']} fail, {t['skip']} skipped.",
                  f"Failing cases whose op types are all claimed: {len(s['claimed_failures'])}.", "",
                  "### Per op type", "",
                  "Each case counts once for every op type its model uses.", "",
                  "| op type | claimed | pass | fail | skipped |", "|---|---|---|---|---|"]
        for op in sorted(s["per_op"], key=str.lower):
            c = s["per_op"][op]
            parts.append(f"| {op} | {'yes' if op in claims else 'no'} | {c['pass']} | {c['fail']} | {c['skip']} |")
        parts += ["", "### Failing cases of claimed op types", ""]
        if s["claimed_failures"]:
            parts += ["| case | op types | reason |", "|---|---|---|"]
            for case, types, reason in s["claimed_failures"]:
                why = " ".join(reason.split()).replace("|", "\\|")[:240]
                if case in KNOWN_FAILURES:
                    why = f"{why}: {KNOWN_FAILURES[case]}"
                parts.append(f"| {case} | {', '.join(types)} | {why} |")
        else:
            parts.append("None.")
        parts.append("")
        parts += _model_section(results)
    return "\n".join(p for p in parts if p is not None) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fusebind.onnx.coverage", description=__doc__.splitlines()[0])
    ap.add_argument("--results", help="the JSON a conformance run wrote (FUSEBIND_ONNX_RESULTS)")
    ap.add_argument("--note", default="", help="a line saying which run the results are (command, date)")
    ap.add_argument("--write", help="the doc to write (default: print it)")
    ap.add_argument("--claims-only", action="store_true",
                    help="rewrite only the claim section of the --write doc in place (keep its run's results)")
    args = ap.parse_args(argv)
    if args.claims_only:
        if not args.write:
            ap.error("--claims-only needs --write DOC")
        with open(args.write) as f:
            text = f.read()
        old = doc_claim_section(text)
        if not old:
            ap.error(f"{args.write} has no claim section (markers {START} ... {END})")
        with open(args.write, "w") as f:
            f.write(text.replace(old, claim_table()))
        return 0
    results = None
    if args.results:
        with open(args.results) as f:
            results = json.load(f)
    text = render(results, args.note)
    if args.write:
        with open(args.write, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
