"""The `fusebind` command: compile, run, check and time a prim-dialect program.

Subcommands:
- `fusebind run [FILE | --example NAME]` (the default: `fusebind FILE` means
  `fusebind run FILE`; `fusebind run` alone runs the `transformer` example).
  It parses the program, draws seeded random inputs (dynamic dims from
  `--dim N` or `--shape NAME=4x8`), compiles it with `fusebind.compile` (whose
  executor specializes dynamic dims to the inputs' shapes, optimizes and
  compiles; progress on stderr, `-q` silences it),
  runs it, checks it against the reference interpreter
  (`fusebind.dialect.interpret`), times it against the interpreter and,
  for built-in examples, a plain-numpy version, and prints the report
  (`fusebind.report`; `--json` for a machine-readable one).
- `fusebind examples`: list the built-in examples (`--mlir NAME` prints one).
- `fusebind explain [FILE | --example NAME]`: the optimized IR and the plan;
  `--dot` prints the plan as a Graphviz graph (runtime/explain_dot.py), `--svg
  FILE` draws it with Graphviz's `dot` (absent: bad input saying how to
  install it). `--machine default` prices with the documented model, so the
  picture is the same on every machine (docs/transformer.dot).
- `fusebind run --profile`: the report, then the time of each plan step
  (region, kernel, arm, % of the call: fusebind.cli_profile).
- An ONNX model: `fusebind run model.onnx` loads it (`fusebind.onnx.load`; a
  model fusebind does not run is bad input naming node, op and opset), takes
  inputs from `--input NAME=FILE` (.npy/.pb) or draws them (symbolic dims:
  `--dim`, default 1, or `--shape`), and checks and times it against
  onnxruntime when that is installed (else the report says "unchecked");
  `fusebind explain model.onnx`; `fusebind import model.onnx -o model.mlir`
  writes the traced prim module (what `fusebind-opt` and `fusebind run` read).
  These are in fusebind.cli_onnx.

Exit codes: 0 all checks passed, 1 a check failed, 2 bad input (missing
file, parse error, unknown entry or example, bad option, shapes whose inputs
do not fit in memory), 3 an internal error (one line; `--traceback` shows
it). Input sizes are checked before anything is allocated: the bytes the
inputs need (plus the float64 draw a float input is made from) against the
memory available (`MemAvailable`); a `MemoryError` later (the run, the
reference interpreter's intermediates) is bad input too, never exit 3.

Owns: argument parsing, progress, the prim-program commands (inputs and exit
codes: `fusebind.cli_inputs`; timing and the profile: `fusebind.cli_profile`;
ONNX models: `fusebind.cli_onnx`; the report: `fusebind.report`). Shape
specialization is the executor's (fusebind/runtime/specialize.py). Must not:
write the binding table other than by compiling through the public API, or
swap process-wide streams (it writes to the streams it is given).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TextIO

import numpy as np

from fusebind.compiler.catalog import RUNTIME_FUSED_BASE
from fusebind.cli_inputs import (
    EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_INTERNAL, EXIT_OK, CliError, allocate_inputs, argument_shapes, parse_shapes,
    random_inputs,
)
from fusebind.cli_onnx import cmd_import, cmd_run_onnx, explain_onnx, is_onnx
from fusebind.cli_profile import format_profile, profile_rows, time_interleaved
from fusebind.examples_builtin import BUILTIN_EXAMPLES, DEFAULT_EXAMPLE, BuiltinExample, UnknownExampleError, get_example

SUBCOMMANDS = ("run", "examples", "explain", "import")

#: Extent of every dynamic dimension of a program file when neither `--dim` nor `--shape` sets it.
DEFAULT_FILE_DIM = 1024


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the fix."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise CliError(f"{message} (see `{self.prog} --help`)")


# ----------------------------------------------------------------- progress
class Progress:
    """One line per stage or kernel on `stream`, unless quiet."""

    def __init__(self, stream: TextIO, quiet: bool) -> None:
        self.stream, self.quiet = stream, quiet
        self.t0 = time.perf_counter()

    def __call__(self, message: str) -> None:
        if not self.quiet:
            self.stream.write(f"[{time.perf_counter() - self.t0:7.3f}s] {message}\n")
            self.stream.flush()


# ----------------------------------------------------------------- the program
@dataclass
class Program:
    """What to run: its text, parsed module, display name and entries."""

    source: str
    module: Any
    entries: list[str]
    example: BuiltinExample | None


def _defined_functions(module: Any) -> list[str]:
    return [op.sym_name.data for op in module.ops if op.name == "func.func" and op.body.blocks]


def load_program(path: str | None, example: str | None, entry: str | None) -> Program:
    """Read and parse the program; pick its entries. Raises CliError on bad input."""
    from fusebind.dialect import FusebindIRError, parse_module

    if path is not None and example is not None:
        raise CliError("give either a program FILE or --example NAME, not both")
    ex = None
    if path is None:
        try:
            ex = get_example(example or DEFAULT_EXAMPLE)
        except UnknownExampleError as err:
            raise CliError(str(err)) from None
        text, source = ex.mlir, f"example:{ex.name}"
    else:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as err:
            reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
            raise CliError(f"cannot read program file '{path}': {reason}") from None
        source = path
    try:
        module = parse_module(text, name=source)
    except FusebindIRError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CliError(f"{source}:{first}") from None
    funcs = _defined_functions(module)
    if not funcs:
        raise CliError(f"{source}: the module defines no func.func with a body; nothing to run")
    if entry is not None:
        if entry not in funcs:
            raise CliError(f"{source}: no function @{entry}; it defines {', '.join('@' + f for f in funcs)}")
        entries = [entry]
    else:
        entries = [ex.entry] if ex is not None else funcs
    return Program(source, module, entries, ex)


def _func(module: Any, name: str) -> Any:
    return next(op for op in module.ops if op.name == "func.func" and op.sym_name.data == name)


def entry_inputs(program: Program, entry: str, args: argparse.Namespace, rng: np.random.Generator,
                 example_inputs: bool) -> tuple[list[tuple[str, str, tuple[int, ...]]], list[np.ndarray]]:
    """(name, element type, shape) per argument of `entry` (`--dim`, `--shape`), and its inputs drawn
    from `rng`: with `example_inputs` and no `--shape`, a built-in example's own; else `random_inputs`."""
    ex = program.example
    dim = args.dim if args.dim is not None else (ex.default_dim if ex is not None else DEFAULT_FILE_DIM)
    specs = argument_shapes(_func(program.module, entry), dim, parse_shapes(args.shape))
    if ex is not None and example_inputs and not args.shape:
        return specs, allocate_inputs(specs, entry, lambda: ex.make_inputs(rng, dim))
    return specs, allocate_inputs(specs, entry, lambda: random_inputs(specs, rng))


def only_entry(module: Any, entry: str) -> Any:
    """A copy of `module` without the functions `entry` does not call, so the
    optimizer's work order holds only regions this run needs."""
    func = _func(module, entry)
    if any(op.name == "func.call" for op in func.walk()):
        return module
    out = module.clone()
    for op in list(out.ops):
        if op.name == "func.func" and op.sym_name.data != entry:
            out.body.block.erase_op(op)
    return out


def compile_entry(program: Program, entry: str, arrays: Sequence[np.ndarray],
                  before_compile: Callable[[str], None], machine: str | None = None) -> tuple[Any, Any]:
    """`fusebind.compile` the entry (other functions dropped) and plan it for
    `arrays`, its costs priced with `machine` (`--machine`; None: the process's
    model): (compiled function, plan). Shapes that do not fit the function's ops
    are a CliError."""
    import fusebind as fb
    from fusebind.api import ArgumentError
    from fusebind.dialect import print_module

    compiled = fb.compile(print_module(only_entry(program.module, entry)), entry=entry,
                          before_compile=before_compile, machine=machine)
    try:
        plan = compiled.executor.plan_for(arrays)
    except ArgumentError as err:
        message = str(err).strip().splitlines()[0].removeprefix("fusebind: ")
        raise CliError(f"{message}; pick argument shapes that fit each other with --dim / --shape") from None
    return compiled, plan


# ----------------------------------------------------------------- run
def _outputs(value: Any) -> list[np.ndarray]:
    return list(value) if isinstance(value, tuple) else [value]


def run_entry(program: Program, entry: str, args: argparse.Namespace, progress: Progress) -> Any:
    """Compile, run, check and time one entry; returns its FunctionReport."""
    from fusebind.dialect import interpret
    from fusebind.report import FunctionReport, Timing, check_outputs, plan_report

    ex = program.example
    specs, arrays = entry_inputs(program, entry, args, np.random.default_rng(args.seed), example_inputs=True)
    inputs = [f"{n}: {elem}[{','.join(map(str, a.shape))}]" for (n, elem, _), a in zip(specs, arrays)]
    progress(f"inputs for @{entry} (seed {args.seed}): {', '.join(inputs)}")

    def on_compile(name: str) -> None:
        progress(f"compile region @{name}: decompose -> linalg -> LLVM IR -> object code")

    progress(f"optimize @{entry} for these shapes: capability-gated fusion, compile the work order, "
             "resolve every node in the binding table (static kernels are built on first use)")
    compiled, plan = compile_entry(program, entry, arrays, on_compile, args.machine)
    executor = compiled.executor
    for record in executor.compiler.records.values():
        verb = "bound as catalog id" if 0 < record.fused_id < RUNTIME_FUSED_BASE else "adopted as id"
        status = f"{verb} {record.fused_id}" if not record.error else f"FAILED ({record.error})"
        how = "loaded from the object cache" if record.from_cache else "compiled"
        progress(f"  @{record.name}: {status}, {how} in {record.seconds * 1e3:.0f} ms")
    progress(f"run @{entry}")
    outs = _outputs(compiled(*arrays))
    progress(f"check @{entry} against the reference interpreter")
    refs = _outputs(interpret(program.module, *arrays, entry=entry))
    rep = plan_report(FunctionReport(program.source, entry, args.seed, inputs), executor, plan, arrays)
    rep.check = check_outputs(outs, refs, args.tol)
    if args.repeat > 0:
        progress(f"time @{entry}: {args.repeat} interleaved rounds")
        fns: dict[str, Callable[[], Any]] = {
            "fusebind": lambda: compiled(*arrays),
            "interpreter": lambda: interpret(program.module, *arrays, entry=entry),
        }
        if ex is not None and entry == ex.entry:
            fns["numpy"] = lambda: ex.numpy_fn(*arrays)
        t = time_interleaved(fns, args.repeat)
        rep.timing = Timing(args.repeat, t["fusebind"], t["interpreter"], t.get("numpy"))
    if args.profile:
        progress(f"profile @{entry}: {max(1, args.repeat)} runs of each step")
        rep.profile = profile_rows(executor, arrays, args.repeat)
    return rep


def cmd_run(args: argparse.Namespace, out: TextIO, progress: Progress) -> int:
    from fusebind.report import format_report

    if args.repeat < 0:
        raise CliError(f"--repeat must be >= 0, got {args.repeat}")
    if args.dim is not None and args.dim < 1:
        raise CliError(f"--dim must be >= 1, got {args.dim}")
    if args.tol is not None and not (args.tol > 0 and math.isfinite(args.tol)):
        raise CliError(f"--tol must be a positive number, got {args.tol}")
    if is_onnx(args.file):
        if args.example is not None or args.entry is not None or args.machine is not None:
            raise CliError("--example, --entry and --machine apply to prim programs, not to an ONNX model")
        return cmd_run_onnx(args, out, progress)
    if args.input:
        raise CliError("--input gives an ONNX model's inputs; a prim program's are drawn (see --shape)")
    progress("parse " + (args.file or f"example '{args.example or DEFAULT_EXAMPLE}'"))
    program = load_program(args.file, args.example, args.entry)
    if args.shape and len(program.entries) > 1:
        raise CliError(f"--shape applies to one function; pick it with --entry "
                       f"({', '.join('@' + e for e in program.entries)})")
    reports = [run_entry(program, entry, args, progress) for entry in program.entries]
    if args.json:
        json.dump([r.as_dict() for r in reports], out, indent=2, default=str)
        out.write("\n")
    else:
        out.write("\n\n".join(format_report(r) + ("\n" + format_profile(r.profile, args.repeat) if r.profile else "")
                                for r in reports) + "\n")
        failed = [r.entry for r in reports if not r.passed]
        out.write(f"result: {'FAIL (' + ', '.join('@' + f for f in failed) + ')' if failed else 'PASS'}\n")
    return EXIT_OK if all(r.passed for r in reports) else EXIT_CHECK_FAILED


def cmd_examples(args: argparse.Namespace, out: TextIO, progress: Progress) -> int:
    if args.mlir is not None:
        try:
            out.write(get_example(args.mlir).mlir)
        except UnknownExampleError as err:
            raise CliError(str(err)) from None
        return EXIT_OK
    width = max(len(n) for n in BUILTIN_EXAMPLES)
    for ex in BUILTIN_EXAMPLES.values():
        default = " (default)" if ex.name == DEFAULT_EXAMPLE else ""
        out.write(f"{ex.name:<{width}}  @{ex.entry}, dynamic dims = {ex.default_dim}: {ex.description}{default}\n")
    out.write("run one with: fusebind run --example NAME   (print its MLIR: fusebind examples --mlir NAME)\n")
    return EXIT_OK


def cmd_explain(args: argparse.Namespace, out: TextIO, progress: Progress) -> int:
    """The plan and the optimized IR; `--dot`: the plan as DOT; `--svg FILE`: that drawn by Graphviz."""
    fmt = "dot" if args.dot or args.svg else "text"
    if args.dot and args.svg:
        raise CliError("give either --dot (print the DOT text) or --svg FILE (draw it), not both")
    if is_onnx(args.file):
        if args.machine is not None:
            raise CliError("--machine applies to prim programs, not to an ONNX model")
        dot = _graphviz() if args.svg else None
        text = explain_onnx(args, progress, fmt)
        if fmt == "dot":
            return _picture(text, args, dot, out, progress)
        out.write(text + "\n")
        return EXIT_OK
    program = load_program(args.file, args.example, args.entry)
    if args.svg and len(program.entries) > 1:
        raise CliError(f"--svg draws one function; pick it with --entry ({', '.join('@' + e for e in program.entries)})")
    dot = _graphviz() if args.svg else None  # before anything is compiled
    pictures = []
    for entry in program.entries:
        _, arrays = entry_inputs(program, entry, args, np.random.default_rng(0), example_inputs=False)
        progress(f"optimize and compile @{entry}")
        compiled, _ = compile_entry(program, entry, arrays, lambda name: progress(f"compile region @{name}"),
                                    args.machine)
        if fmt == "dot":
            pictures.append(compiled.explain(*arrays, format="dot"))
            continue
        out.write(compiled.explain(*arrays) + "\n\n")
        out.write(compiled.optimized(*arrays))
    return _picture("".join(pictures), args, dot, out, progress) if fmt == "dot" else EXIT_OK


#: the programs that render DOT, in the order tried: Graphviz's own `dot`, then `graphviz-pure`
#: (a port of Graphviz 16.1 to Rust on PyPI, EPL-2.0 as Graphviz is; the `pictures` extra installs it)
RENDERERS = ("dot", "graphviz-pure")


def renderer() -> str | None:
    """The path of the first DOT renderer on PATH or beside this Python (a venv's bin, which an
    unactivated `.venv/bin/fusebind` does not put on PATH), or None."""
    here = os.path.dirname(sys.executable)
    for name in RENDERERS:
        dot = shutil.which(name) or shutil.which(name, path=here)
        if dot is not None:
            return dot
    return None


def _graphviz() -> str:
    """The path of a DOT renderer; CliError saying how to install one when none is found."""
    dot = renderer()
    if dot is not None:
        return dot
    raise CliError("--svg needs Graphviz's `dot` program, which is not on PATH: install Graphviz "
                   "(apt install graphviz, or conda install graphviz, or pip install 'fusebind[pictures]'), "
                   "or print the DOT text with --dot")


def _picture(text: str, args: argparse.Namespace, dot: str | None, out: TextIO, progress: Progress) -> int:
    """Print the DOT text (`--dot`), or render it to `--svg FILE` with `dot`."""
    if dot is None:
        out.write(text)
        return EXIT_OK
    try:
        done = subprocess.run([dot, "-Tsvg", "-o", args.svg], input=text, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise CliError(f"cannot run Graphviz's dot ({dot}): {err}") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[0]
        raise CliError(f"Graphviz's dot could not write '{args.svg}': {why}")
    progress(f"wrote {args.svg}")
    return EXIT_OK


# ----------------------------------------------------------------- parsing
def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fusebind", description="Compile, run and check prim-dialect programs with fusebind.")
    from fusebind import __version__

    parser.add_argument("--version", action="version", version=f"fusebind {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    def program_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("file", nargs="?", help="an MLIR file of prim ops or an ONNX model (.onnx) "
                       "(default: the built-in example)")
        p.add_argument("-e", "--example", help=f"a built-in example (default: {DEFAULT_EXAMPLE}); see `fusebind examples`")
        p.add_argument("--entry", help="the function to run (default: every function of a file)")
        p.add_argument("--dim", type=int, help="extent of every dynamic dimension "
                       f"(default: the example's, or {DEFAULT_FILE_DIM} for a file)")
        p.add_argument("--shape", action="append", default=[], metavar="NAME=DxD",
                       help="the shape of one argument, e.g. --shape x=4x8 (repeatable)")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
        p.add_argument("--traceback", action="store_true", help="show the traceback of an internal error")
        p.add_argument("--input", action="append", default=[], metavar="NAME=FILE",
                       help="an ONNX model's input from a .npy or .pb (TensorProto) file; a bare FILE is the "
                            "next input in order (repeatable)")

    def machine_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--machine", choices=("default", "measured"), help="the machine model the costs are priced "
                       "with (default: FUSEBIND_MACHINE, else measured; `default` is reproducible)")

    run = sub.add_parser("run", help="compile, run, check and time a program (the default command)")
    program_args(run)
    machine_arg(run)
    run.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    run.add_argument("--repeat", type=int, default=20, help="timing rounds; 0 skips timing (default 20)")
    run.add_argument("--tol", type=float, help="bound on the normwise relative error "
                     "max|out-ref|/max|ref| (default: 1e-4 for f32, 1e-9 for f64)")
    run.add_argument("--json", action="store_true", help="print the report as JSON")
    run.add_argument("--profile", action="store_true", help="also time each step of the plan (region, kernel, "
                     "arm, %% of the call; median of --repeat runs)")
    ex = sub.add_parser("examples", help="list the built-in examples")
    ex.add_argument("--mlir", metavar="NAME", help="print the MLIR of one example")
    ex.set_defaults(quiet=True, traceback=False)
    explain = sub.add_parser("explain", help="show the optimized IR and the plan of a program")
    program_args(explain)
    machine_arg(explain)
    explain.add_argument("--dot", action="store_true", help="print the plan as a Graphviz (DOT) graph")
    explain.add_argument("--svg", metavar="FILE", help="draw the plan into FILE (an SVG; needs Graphviz's dot)")
    imp = sub.add_parser("import", help="write the prim IR of an ONNX model (for fusebind-opt)")
    program_args(imp)
    imp.add_argument("-o", "--output", help="the .mlir file to write (default: stdout)")
    return parser


def _normalize(argv: list[str]) -> list[str]:
    """`fusebind FILE ...` means `fusebind run FILE ...`."""
    if not argv:
        return argv
    if argv[0] in SUBCOMMANDS or argv[0] in ("-h", "--help", "--version"):
        return argv
    return ["run", *argv]


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Entry point of the `fusebind` console script; returns the exit code."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    argv = _normalize(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except CliError as e:
        err.write(f"fusebind: error: {e}\n")
        return EXIT_BAD_INPUT
    if args.command is None:
        parser.print_help(err)
        return EXIT_BAD_INPUT
    progress = Progress(err, args.quiet)
    command = {"run": cmd_run, "examples": cmd_examples, "explain": cmd_explain, "import": cmd_import}[args.command]
    try:
        return command(args, out, progress)
    except CliError as e:
        err.write(f"fusebind: error: {e}\n")
        return EXIT_BAD_INPUT
    except Exception as e:  # internal: one line, unless asked for the traceback
        from fusebind.api import ArgumentError, UnsupportedOperation
        from fusebind.dialect import FusebindIRError

        if isinstance(e, (ArgumentError, UnsupportedOperation, FusebindIRError)):
            err.write(f"fusebind: error: {str(e).strip().splitlines()[0]}\n")
            return EXIT_BAD_INPUT
        if isinstance(e, MemoryError):  # the inputs fitted, the run did not: the shapes asked for too much
            reason = str(e).strip().splitlines()[0] if str(e).strip() else "an allocation failed"
            err.write(f"fusebind: error: not enough memory to run this program with these shapes ({reason}); "
                      "pick a smaller --dim or --shape\n")
            return EXIT_BAD_INPUT
        if args.traceback:
            traceback.print_exc(file=err)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        err.write(f"fusebind: internal error: {type(e).__name__}: {first} (rerun with --traceback for details)\n")
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
