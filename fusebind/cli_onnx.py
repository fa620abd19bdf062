"""The `fusebind` command on ONNX models: `fusebind run model.onnx`, `explain model.onnx`, `import`.

Owns loading a model for the command (`load_onnx_model`: a file that is not a model is bad
input), the onnxruntime reference (`onnxruntime_session`: absent or refusing, the outputs are
"unchecked"), `cmd_run_onnx` (run, check against onnxruntime, time, `--profile`),
`explain_onnx` (the plan as text or DOT, for `cmd_explain` to print or render) and
`cmd_import` (the traced prim module). Split from cli.py (one job each); cli.py dispatches
here when the FILE ends in `.onnx` (`is_onnx`). Inputs come from `fusebind.cli_inputs`
(`model_inputs`), the report from `fusebind.report`, timing from `fusebind.cli_profile`.

Must not: import fusebind.cli (it imports this), or write the binding table.
"""

from __future__ import annotations

import argparse
import os
import json
from typing import Any, Callable, TextIO

import numpy as np

from fusebind.cli_inputs import EXIT_CHECK_FAILED, EXIT_OK, CliError, model_inputs
from fusebind.cli_profile import format_profile, profile_rows, time_interleaved

Progress = Callable[[str], None]


def is_onnx(path: str | None) -> bool:
    return path is not None and path.lower().endswith(".onnx")


def load_onnx_model(path: str, progress: Progress) -> Any:
    """The model at `path` as a `fusebind.onnx.OnnxFunction`; CliError when it cannot be read."""
    from fusebind.onnx import load
    from fusebind.onnx.trust import InvalidModel

    progress(f"import {path}: version conversion, shape inference, one handler per node")
    if not os.path.isfile(path):
        raise CliError(f"cannot read model file '{path}': no such file")
    try:  # by path: external data is read only from inside the model's directory (onnx/external_data.py)
        return load(path)
    except OSError as err:
        raise CliError(f"cannot read model file '{path}': {err.strerror or err}") from None
    except InvalidModel as err:
        raise CliError(str(err)) from None


def onnxruntime_session(path: str) -> tuple[Any, str]:
    """(an onnxruntime session for the model, "") or (None, why the outputs are unchecked)."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None, "onnxruntime is not installed: the outputs are unchecked (pip install onnxruntime)"
    try:
        return ort.InferenceSession(path, providers=["CPUExecutionProvider"]), ""
    except Exception as err:  # onnxruntime refuses the model: nothing to check against
        return None, f"onnxruntime cannot load the model ({str(err).strip().splitlines()[0]}): outputs unchecked"


def cmd_run_onnx(args: argparse.Namespace, out: TextIO, progress: Progress) -> int:
    """Load, run, check (onnxruntime) and time an ONNX model; the usual report."""
    from fusebind.report import FunctionReport, Timing, check_outputs, format_report, plan_report

    f = load_onnx_model(args.file, progress)
    labels, arrays = model_inputs(f, args, np.random.default_rng(args.seed))
    progress(f"inputs (seed {args.seed}): {', '.join(labels)}; trace, optimize, compile, run")
    jfn, call = f.jit_call(*arrays)
    executor = jfn.executor(*call)
    plan = executor.plan_for(call)
    outs = f.run(*arrays)
    rep = plan_report(FunctionReport(args.file, f.imported.model.graph.name or "graph", args.seed, labels),
                      executor, plan, call)
    session, unchecked = onnxruntime_session(args.file)
    feeds = dict(zip(f.input_names, arrays))
    if session is not None:
        progress("check against onnxruntime")
        rep.check = check_outputs(outs, session.run(None, feeds), args.tol)
    if args.repeat > 0:
        progress(f"time: {args.repeat} interleaved rounds")
        fns: dict[str, Callable[[], Any]] = {"fusebind": lambda: f.run(*arrays)}
        if session is not None:
            fns["onnxruntime"] = lambda: session.run(None, feeds)
        t = time_interleaved(fns, args.repeat)
        if session is not None:
            rep.timing = Timing(args.repeat, t["fusebind"], t["onnxruntime"])
        else:
            rep.notes.append(f"time per call (median of {args.repeat}): fusebind {t['fusebind'] * 1e6:.1f} us")
    if getattr(args, "profile", False):
        progress(f"profile: {max(1, args.repeat)} runs of each step")
        rep.profile = profile_rows(executor, call, args.repeat)
    passed = rep.passed or rep.check is None
    if args.json:
        json.dump([rep.as_dict() | {"reference": "onnxruntime", "unchecked": unchecked, "passed": passed}], out,
                  indent=2, default=str)
        out.write("\n")
        return EXIT_OK if passed else EXIT_CHECK_FAILED
    text = format_report(rep).replace("vs reference interpreter", "vs onnxruntime")
    out.write(text.replace("reference interpreter ", "onnxruntime ") + (f"\nnote: {unchecked}" if unchecked else ""))
    if rep.profile:
        out.write("\n" + format_profile(rep.profile, args.repeat))
    out.write(f"\nresult: {'UNCHECKED' if rep.check is None else 'PASS' if passed else 'FAIL'}\n")
    return EXIT_OK if passed else EXIT_CHECK_FAILED


def explain_onnx(args: argparse.Namespace, progress: Progress, fmt: str) -> str:
    """The plan of the model at `args.file` for its inputs: text, or (`fmt="dot"`) DOT."""
    f = load_onnx_model(args.file, progress)
    _, arrays = model_inputs(f, args, np.random.default_rng(0))
    progress("optimize and compile")
    if fmt == "text":
        return f.explain(*arrays)
    jfn, call = f.jit_call(*arrays)
    return jfn.explain(*call, format=fmt)


def cmd_import(args: argparse.Namespace, out: TextIO, progress: Progress) -> int:
    """An ONNX model's traced prim module (for `fusebind-opt`), to `-o FILE` or stdout."""
    if not is_onnx(args.file):
        raise CliError(f"fusebind import reads an ONNX model (a .onnx file), not '{args.file}'")
    f = load_onnx_model(args.file, progress)
    labels, arrays = model_inputs(f, args, np.random.default_rng(0))
    progress(f"trace for {', '.join(labels)}")
    text = f.mlir(*arrays)
    if args.output in (None, "-"):
        out.write(text)
        return EXIT_OK
    try:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as err:
        raise CliError(f"cannot write '{args.output}': {err.strerror or err}") from None
    progress(f"wrote {args.output} ({len(text.splitlines())} lines of prim IR)")
    return EXIT_OK
