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
- `fusebind explain [FILE | --example NAME]`: the optimized IR and the plan.
- An ONNX model: `fusebind run model.onnx` loads it (`fusebind.onnx.load`; a
  model fusebind does not run is bad input naming node, op and opset), takes
  inputs from `--input NAME=FILE` (.npy/.pb) or draws them (symbolic dims:
  `--dim`, default 1, or `--shape`), and checks and times it against
  onnxruntime when that is installed (else the report says "unchecked");
  `fusebind explain model.onnx`; `fusebind import model.onnx -o model.mlir`
  writes the traced prim module (what `fusebind-opt` and `fusebind run` read).

Exit codes: 0 all checks passed, 1 a check failed, 2 bad input (missing
file, parse error, unknown entry or example, bad option, shapes whose inputs
do not fit in memory), 3 an internal error (one line; `--traceback` shows
it). Input sizes are checked before anything is allocated: the bytes the
inputs need (plus the float64 draw a float input is made from) against the
memory available (`MemAvailable`); a `MemoryError` later (the run, the
reference interpreter's intermediates) is bad input too, never exit 3.

Owns: argument parsing, progress, timing (inputs: `fusebind.cli_inputs`). Shape
specialization is the executor's (fusebind/runtime/specialize.py). Must not:
write the binding table other than by compiling through the public API, or
swap process-wide streams (it writes to the streams it is given).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TextIO

import numpy as np

from fusebind.compiler.catalog import RUNTIME_FUSED_BASE
from fusebind.cli_inputs import CliError, allocate_inputs, argument_shapes, model_inputs, parse_shapes, random_inputs
from fusebind.examples_builtin import BUILTIN_EXAMPLES, DEFAULT_EXAMPLE, BuiltinExample, UnknownExampleError, get_example

SUBCOMMANDS = ("run", "examples", "explain", "import")
EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3

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
                  before_compile: Callable[[str], None]) -> tuple[Any, Any]:
    """`fusebind.compile` the entry (other functions dropped) and plan it for
    `arrays`: (compiled function, plan). Shapes that do not fit the
    function's ops are a CliError."""
    import fusebind as fb
    from fusebind.api import ArgumentError
    from fusebind.dialect import print_module

    compiled = fb.compile(print_module(only_entry(program.module, entry)), entry=entry,
                          before_compile=before_compile)
    try:
        plan = compiled.executor.plan_for(arrays)
    except ArgumentError as err:
        message = str(err).strip().splitlines()[0].removeprefix("fusebind: ")
        raise CliError(f"{message}; pick argument shapes that fit each other with --dim / --shape") from None
    return compiled, plan


# ----------------------------------------------------------------- timing
def time_interleaved(fns: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """Median seconds per call of each function, the candidates interleaved
    round by round (the machine is noisy; see PERFORMANCE.md)."""
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t)
    return {k: float(np.median(v)) for k, v in samples.items()}


# ----------------------------------------------------------------- run
def _outputs(value: Any) -> list[np.ndarray]:
    return list(value) if isinstance(value, tuple) else [value]


def plan_report(rep: Any, executor: Any, plan: Any, arrays: Sequence[np.ndarray]) -> Any:
    """`rep` (a FunctionReport) filled from the executor's plan for `arrays`: machine, regions,
    rejections, kernels bound, compiles, notes, arm calls."""
    from fusebind.report import kernel_rows, region_rows
    from fusebind.runtime.bindings import global_bindings

    rep.machine = (plan.machine or executor.machine).describe()
    rep.regions = region_rows(plan.decisions)
    rep.rejected = [d.remark().removeprefix("remark: ") for d in executor.decisions if d.verdict != "fused"]
    fused_arm = {d.name: int(d.fused_id) for d in plan.decisions if d.arm == "fused"}
    shapes = tuple(tuple(a.shape) for a in arrays)
    rep.kernels = kernel_rows(executor.optimized_func(global_bindings(), shapes), global_bindings(),
                              executor.options.backend, fused_arm)
    rep.compiles = [f"@{r.name} -> id {r.fused_id} in {r.seconds * 1e3:.0f} ms" if not r.error
                    else f"@{r.name} failed: {r.error}" for r in executor.compiler.records.values()]
    rep.notes = list(plan.notes)
    arms = executor.stats.arms
    rep.arm_calls = {"fused": arms.fused_calls, "arm 0": arms.arm0_calls}
    return rep


def run_entry(program: Program, entry: str, args: argparse.Namespace, progress: Progress) -> Any:
    """Compile, run, check and time one entry; returns its FunctionReport."""
    from fusebind.dialect import interpret
    from fusebind.report import FunctionReport, Timing, check_outputs

    ex = program.example
    specs, arrays = entry_inputs(program, entry, args, np.random.default_rng(args.seed), example_inputs=True)
    inputs = [f"{n}: {elem}[{','.join(map(str, a.shape))}]" for (n, elem, _), a in zip(specs, arrays)]
    progress(f"inputs for @{entry} (seed {args.seed}): {', '.join(inputs)}")

    def on_compile(name: str) -> None:
        progress(f"compile region @{name}: decompose -> linalg -> LLVM IR -> object code")

    progress(f"optimize @{entry} for these shapes: capability-gated fusion, compile the work order, "
             "resolve every node in the binding table (static kernels are built on first use)")
    compiled, plan = compile_entry(program, entry, arrays, on_compile)
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
        if args.example is not None or args.entry is not None:
            raise CliError("--example and --entry apply to prim programs, not to an ONNX model")
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
        out.write("\n\n".join(format_report(r) for r in reports) + "\n")
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
    if is_onnx(args.file):
        f = load_onnx_model(args.file, progress)
        _, arrays = model_inputs(f, args, np.random.default_rng(0))
        progress("optimize and compile")
        out.write(f.explain(*arrays) + "\n")
        return EXIT_OK
    program = load_program(args.file, args.example, args.entry)
    for entry in program.entries:
        _, arrays = entry_inputs(program, entry, args, np.random.default_rng(0), example_inputs=False)
        progress(f"optimize and compile @{entry}")
        compiled, _ = compile_entry(program, entry, arrays, lambda name: progress(f"compile region @{name}"))
        out.write(compiled.explain(*arrays) + "\n\n")
        out.write(compiled.optimized(*arrays))
    return EXIT_OK


# ----------------------------------------------------------------- ONNX models
def is_onnx(path: str | None) -> bool:
    return path is not None and path.lower().endswith(".onnx")


def load_onnx_model(path: str, progress: Progress) -> Any:
    """The model at `path` as a `fusebind.onnx.OnnxFunction`; CliError when it cannot be read."""
    import onnx

    from fusebind.onnx import load

    progress(f"import {path}: version conversion, shape inference, one handler per node")
    try:
        proto = onnx.load(path)
    except OSError as err:
        raise CliError(f"cannot read model file '{path}': {err.strerror or err}") from None
    except Exception as err:  # protobuf's DecodeError and friends
        raise CliError(f"{path}: not an ONNX model ({type(err).__name__}: {err})") from None
    return load(proto)


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
    from fusebind.report import FunctionReport, Timing, check_outputs, format_report

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
    passed = rep.passed or rep.check is None
    if args.json:
        json.dump([rep.as_dict() | {"reference": "onnxruntime", "unchecked": unchecked, "passed": passed}], out,
                  indent=2, default=str)
        out.write("\n")
        return EXIT_OK if passed else EXIT_CHECK_FAILED
    text = format_report(rep).replace("vs reference interpreter", "vs onnxruntime")
    out.write(text.replace("reference interpreter ", "onnxruntime ") + (f"\nnote: {unchecked}" if unchecked else ""))
    out.write(f"\nresult: {'UNCHECKED' if rep.check is None else 'PASS' if passed else 'FAIL'}\n")
    return EXIT_OK if passed else EXIT_CHECK_FAILED


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

    run = sub.add_parser("run", help="compile, run, check and time a program (the default command)")
    program_args(run)
    run.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    run.add_argument("--repeat", type=int, default=20, help="timing rounds; 0 skips timing (default 20)")
    run.add_argument("--tol", type=float, help="bound on the normwise relative error "
                     "max|out-ref|/max|ref| (default: 1e-4 for f32, 1e-9 for f64)")
    run.add_argument("--json", action="store_true", help="print the report as JSON")
    ex = sub.add_parser("examples", help="list the built-in examples")
    ex.add_argument("--mlir", metavar="NAME", help="print the MLIR of one example")
    ex.set_defaults(quiet=True, traceback=False)
    explain = sub.add_parser("explain", help="show the optimized IR and the plan of a program")
    program_args(explain)
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
