"""Check that upstream MLIR accepts a text: parse it and run its verifier.

    python -m fusebind.lowering.mlir_check [FILE|-]

Prints `ok: upstream MLIR parsed and verified N ops` and exits 0, or prints
MLIR's diagnostics to stderr and exits 1. Used by the lit tests to prove that
`fusebind-opt -p lower-to-linalg` emits IR upstream accepts.
"""

from __future__ import annotations

import sys


def check(text: str) -> tuple[bool, str]:
    from mlir import ir

    from fusebind.lowering.pipeline import new_context

    ctx = new_context()
    diagnostics: list[str] = []
    handler = ctx.attach_diagnostic_handler(lambda d: diagnostics.append(f"{d.location}: {d.message}") or True)
    try:
        try:
            module = ir.Module.parse(text, ctx)
        except (ir.MLIRError, ValueError) as exc:  # what MLIR raises for text it cannot read
            return False, "\n".join([str(exc), *diagnostics])
        if not module.operation.verify():
            return False, "\n".join(["verifier failed", *diagnostics])
        count = 0

        def walk(op: object) -> ir.WalkResult:
            nonlocal count
            count += 1
            return ir.WalkResult.ADVANCE

        module.operation.walk(walk)
        return True, f"ok: upstream MLIR parsed and verified {count} ops"
    finally:
        handler.detach()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = args[0] if args else "-"
    text = sys.stdin.read() if path == "-" else open(path).read()
    ok, message = check(text)
    print(message, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
