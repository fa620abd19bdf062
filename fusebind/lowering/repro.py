"""Replay one failed lowering stage on the IR a `LoweringError` wrote out.

    python -m fusebind.lowering.repro --stage mlir-passes FILE [--pipeline P] [--entry SYMBOL]

Stages: mlir-parse / mlir-passes (FILE is upstream MLIR), translate (MLIR in
the LLVM dialect), llvm-parse / llvm-opt / codegen (FILE is LLVM IR). Prints
the stage's output on success; on failure prints the error to stderr and
exits 1.
"""

from __future__ import annotations

import argparse
import sys

from fusebind.lowering.errors import LoweringError


def replay(stage: str, text: str, pipeline: str | None = None, entry: str | None = None) -> str:
    """Run `stage` (and the stages it needs) on `text`; return its textual output."""
    if stage in ("emit", "mlir-parse", "mlir-passes"):
        from fusebind.lowering.pipeline import run_upstream_pipeline

        return str(run_upstream_pipeline(text, pipeline=pipeline))
    if stage == "translate":
        from fusebind.lowering.pipeline import new_context, translate_to_llvm_ir
        from mlir import ir

        try:
            module = ir.Module.parse(text, new_context())
        except Exception as exc:
            raise LoweringError("mlir-parse", str(exc)) from None
        return translate_to_llvm_ir(module)
    from fusebind.lowering.codegen import compile_llvm_ir, optimized_ir

    if entry is None:
        import re

        names = re.findall(r"^define [^@]*@(_mlir_ciface_\w+)", text, re.MULTILINE)
        entry = names[0] if names else "main"
    code = compile_llvm_ir(text, entry)
    return optimized_ir(text, entry) if code else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fusebind.lowering.repro", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", required=True)
    parser.add_argument("--pipeline", default=None)
    parser.add_argument("--entry", default=None)
    parser.add_argument("file")
    args = parser.parse_args(argv)
    with open(args.file) as f:
        text = f.read()
    try:
        print(replay(args.stage, text, args.pipeline, args.entry))
    except LoweringError as exc:
        print(f"{exc.stage}: {exc.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
