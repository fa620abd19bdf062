"""`fusebind-opt`: the mlir-opt-style driver for fusebind IR (lit tests use it).

    fusebind-opt [file|-] [-p 'pass-a,pass-b{opt=1}'] [--split-input-file]
                 [--verify-diagnostics] [--print-op-generic] [-o out] [--plugin mod]

It reads IR (file or stdin), verifies it, runs the pipeline, verifies again
and prints the result. Every failure (bad text, verifier failure, unknown
pass or option, a pass that raises) is a diagnostic `file:line:col: error:
message` on stderr and exit code 1, never a traceback (a `--plugin` module
that is missing or fails to import too). With
`--verify-diagnostics`, the errors must be exactly those announced in the
input by `// expected-error {{text}}` (same line) or
`// expected-error @+N {{text}}` / `@-N` (relative line); the text must be a
substring of the message.

Passes come from the compiler's registry (`fusebind.compiler.passes`,
`register_pass`), given every room's built-in passes by
`fusebind.tools.passes`; `--plugin some.module` imports a user module that
calls `register_pass`. A plugin asked for by name that is missing or fails to
import is a `PluginError` (the error exit), never skipped. A pass whose
product is text (`passes.set_text_output`, e.g. LLVM IR) ends the pipeline;
the driver prints that text instead of the module.

Each input chunk's passes run in a fresh runtime `Session`, so the ids in the
output are deterministic (lit tests match them exactly).

This is a tool (`fusebind.tools`): it may import every room; it moved here
from `fusebind.compiler.opt`, so the compiler names no room above it.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TextIO

from fusebind.compiler.passes import (
    DEFAULT_REGISTRY,
    TEXT_OUTPUT_ATTR,
    PassRegistry,
    PipelineError,
    register_pass,
    take_text_output,
)
from fusebind.dialect.errors import FusebindError
from fusebind.tools.passes import install_builtin_passes

__all__ = ["PluginError", "load_plugins", "main", "register_pass", "run_opt"]


class PluginError(FusebindError):
    """A plugin module named explicitly (`--plugin`) is missing or fails to import."""


def load_plugins(modules: Iterable[str]) -> None:
    """Import each user plugin module (it registers its passes with
    `register_pass`); raises `PluginError` naming the first that is missing or
    fails to import, and why."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name is not None and module.startswith(err.name):
                raise PluginError(
                    f"--plugin {module}: no module named '{err.name}'; give an importable module name "
                    "(e.g. my_package.passes) that is on sys.path (PYTHONPATH)") from None
            raise PluginError(f"--plugin {module} failed to import: {err}") from None
        except Exception as err:  # a plugin's own failure, whatever it is, is the driver's error exit
            raise PluginError(f"--plugin {module} failed to import: {type(err).__name__}: {err}") from None

SPLIT_MARKER = re.compile(r"^\s*// -----\s*$", re.MULTILINE)
EXPECTED = re.compile(r"//\s*expected-(error|warning|note)\s*(?:@([+-]\d+|above|below))?\s*\{\{(.*?)\}\}")


@dataclass(frozen=True)
class Diag:
    line: int | None
    column: int | None
    message: str


@dataclass
class Chunk:
    text: str
    first_line: int  # 1-based line of the chunk's first line in the file


def split_input(text: str, split: bool) -> list[Chunk]:
    if not split:
        return [Chunk(text, 1)]
    chunks: list[Chunk] = []
    start, line = 0, 1
    for m in SPLIT_MARKER.finditer(text):
        chunks.append(Chunk(text[start:m.start()], line))
        line += text.count("\n", start, m.end()) + 1
        start = m.end() + 1
    chunks.append(Chunk(text[start:], line))
    return chunks


def process_chunk(chunk: Chunk, registry: PassRegistry, pipeline: str | None, generic: bool) -> tuple[str, list[Diag]]:
    """Parse, verify, run passes, verify; return the printed IR or the diagnostics.

    The passes run in a fresh runtime `Session` (its own empty binding table
    and recipe registry), so the ids a chunk's output shows depend only on
    that chunk, never on the chunks or the process before it."""
    if not pipeline:
        return _process_chunk(chunk, registry, pipeline, generic)
    from fusebind.runtime.session import Session, use_session

    with use_session(Session(f"fusebind-opt chunk at line {chunk.first_line}")):
        return _process_chunk(chunk, registry, pipeline, generic)


def _process_chunk(chunk: Chunk, registry: PassRegistry, pipeline: str | None,
                   generic: bool) -> tuple[str, list[Diag]]:
    from fusebind.dialect import make_context, print_module
    from fusebind.dialect.errors import IRParseError
    from fusebind.dialect.source import parse_with_locations, verify_with_locations

    offset = chunk.first_line - 1
    ctx = make_context()
    try:
        module, source_map = parse_with_locations(ctx, chunk.text)
    except IRParseError as err:
        return "", [Diag(None if err.line is None else err.line + offset, err.column, err.message)]
    diags = verify_with_locations(module, source_map)
    if diags:
        return "", [Diag(None if d.line is None else d.line + offset, d.column, d.message) for d in diags]
    if pipeline:
        try:
            passes = registry.parse_pipeline(pipeline)
        except PipelineError as err:
            return "", [Diag(None, None, str(err))]
        text_by: str | None = None
        for p in passes:
            if text_by is not None:
                return "", [Diag(None, None, f"pass '{text_by}' produces text (not IR), so it must end the "
                                             f"pipeline; '{p.name}' follows it: remove '{p.name}' or move it "
                                             f"before '{text_by}'")]
            try:
                p.apply(ctx, module)
            except Exception as err:
                return "", [Diag(None, None, f"pass '{p.name}' failed: {type(err).__name__}: {err}")]
            if TEXT_OUTPUT_ATTR in module.attributes:
                text_by = p.name
                continue
            after = verify_with_locations(module)
            if after:
                return "", [Diag(None, None, f"after pass '{p.name}': {d.message}") for d in after]
        if text_by is not None:
            text = take_text_output(module) or ""
            return text if text.endswith("\n") or not text else text + "\n", []
    return print_module(module, generic=generic), []


def expected_diags(chunk: Chunk) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for i, line_text in enumerate(chunk.text.split("\n")):
        line = chunk.first_line + i
        for m in EXPECTED.finditer(line_text):
            if m.group(1) != "error":
                continue
            where = m.group(2)
            target = line
            if where == "above":
                target = line - 1
            elif where == "below":
                target = line + 1
            elif where:
                target = line + int(where)
            out.append((target, m.group(3)))
    return out


def check_expected(chunk: Chunk, diags: list[Diag], name: str, err: TextIO) -> bool:
    ok = True
    pending = expected_diags(chunk)
    for d in diags:
        match = next((e for e in pending if e[0] == d.line and e[1] in d.message), None)
        if match is None:
            loc = f"{d.line}:{d.column or 1}" if d.line else "?"
            err.write(f"{name}:{loc}: error: unexpected error: {d.message}\n")
            ok = False
        else:
            pending.remove(match)
    for line, text in pending:
        err.write(f"{name}:{line}:1: error: expected error \"{text}\" was not produced\n")
        ok = False
    return ok


def format_diag(name: str, d: Diag) -> str:
    loc = f"{name}:{d.line}:{d.column or 1}" if d.line is not None else name
    return f"{loc}: error: {d.message}\n"


def build_arg_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="fusebind-opt", description="Parse, verify, transform and print fusebind IR.")
    ap.add_argument("input", nargs="?", default="-", help="input file (default: stdin)")
    ap.add_argument("-p", "--passes", default=None, help="pass pipeline, e.g. 'pass-a,pass-b{opt=1}'")
    ap.add_argument("--split-input-file", action="store_true", help="process chunks separated by '// -----'")
    ap.add_argument("--verify-diagnostics", action="store_true", help="check errors against expected-error comments")
    ap.add_argument("--print-op-generic", action="store_true", help="print the generic op form")
    ap.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    ap.add_argument("--plugin", action="append", default=[], help="extra module to import for passes")
    ap.add_argument("--list-passes", action="store_true", help="list registered passes and exit")
    return ap


def run_opt(argv: Sequence[str], stdin: TextIO, stdout: TextIO, stderr: TextIO,
            registry: PassRegistry | None = None) -> int:
    """The driver with explicit streams; returns the exit code. `registry`
    None: the compiler's `DEFAULT_REGISTRY` with every built-in pass."""
    registry = install_builtin_passes(DEFAULT_REGISTRY) if registry is None else registry
    ap = build_arg_parser()
    try:
        args = ap.parse_args(list(argv))
    except SystemExit as exit_:
        return int(exit_.code or 0) and 1
    try:
        registry.load_providers()
        load_plugins(args.plugin)
    except PluginError as err:
        stderr.write(f"fusebind-opt: error: {err}\n")
        return 1
    for w in registry.warnings:
        stderr.write(f"fusebind-opt: warning: {w}\n")
    registry.warnings.clear()
    if args.list_passes:
        for name in registry.available():
            stdout.write(name + "\n")
        return 0
    name = "<stdin>" if args.input == "-" else args.input
    try:
        text = stdin.read() if args.input == "-" else open(args.input, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as err:
        stderr.write(f"fusebind-opt: error: cannot read {name}: {err}\n")
        return 1
    if args.passes is not None:
        try:
            registry.parse_pipeline(args.passes)
        except PipelineError as err:
            stderr.write(f"fusebind-opt: error: {err}\n")
            return 1
    outputs: list[str] = []
    failed = False
    for chunk in split_input(text, args.split_input_file):
        printed, diags = process_chunk(chunk, registry, args.passes, args.print_op_generic)
        if args.verify_diagnostics:
            failed |= not check_expected(chunk, diags, name, stderr)
        else:
            for d in diags:
                stderr.write(format_diag(name, d))
            failed |= bool(diags)
        if not diags:
            outputs.append(printed)
    result = "// -----\n".join(outputs)
    if args.output == "-":
        stdout.write(result)
    else:
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(result)
        except OSError as err:
            stderr.write(f"fusebind-opt: error: cannot write {args.output}: {err}\n")
            return 1
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point of `fusebind-opt`."""
    try:
        return run_opt(sys.argv[1:] if argv is None else argv, sys.stdin, sys.stdout, sys.stderr)
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # last line of defence: a diagnostic, not a traceback
        sys.stderr.write(f"fusebind-opt: internal error: {type(err).__name__}: {err}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
