"""`fusebind.compile(mlir_text, entry=...)`: the jit callable for MLIR input.

Owns `CompiledFunction`: one module parsed once (prim ops, optionally
fused.region ops already), the same interface as a jit function (`.mlir`,
`.optimized`, `.explain`, `.stats`), and argument checks against the
function's declared types; and `check_entry` (a missing or wrong `entry`
raises `EntryError`, naming the functions the module defines). Dynamic dims
are specialized per call signature (the executor refines them to the call's
shapes), so they run fused native kernels too.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from fusebind.lowering.backend import DEFAULT_BACKEND
from fusebind.api.errors import ArgumentError, EntryError, FusebindError
from fusebind.api.jit import default_optimizer
from fusebind.api.travel import build_blob, materialize, plan_and_wait, receive, replay_quietly
from fusebind.runtime.executor import Executor
from fusebind.runtime.session import current_session


class CompiledFunction:
    """An MLIR function callable on numpy arrays."""

    def __init__(self, text: str, entry: str | None = None, *, optimize: bool = True, background: bool = False,
                 verify: bool = False, verify_action: str = "raise", backend: str = DEFAULT_BACKEND,
                 threads: int | None = None, cache: Any = None,
                 before_compile: Callable[[str], None] | None = None, machine: Any = None,
                 profile: bool = False) -> None:
        from fusebind.dialect import parse_module

        #: what a pickle makes the function again from (docs/PORTABLE.md)
        self._init = dict(optimize=optimize, background=background, verify=verify, verify_action=verify_action,
                          backend=backend, threads=threads, cache=cache, before_compile=before_compile,
                          machine=machine, profile=profile)
        self._text, self._entry = text, entry
        #: the signatures planned so far ((shape, dtype) per argument), in order
        self._sigs: dict[tuple[Any, ...], None] = {}
        self._blob: tuple[int, bytes] | None = None
        self.module = parse_module(text)
        entry = check_entry(self.module, entry)
        optimizer = default_optimizer(backend, current_session()) if optimize else None
        self._executor = Executor(self.module, entry, optimize=optimizer,
                                  backend=backend, verify=verify, verify_action=verify_action,
                                  background=background, threads=threads, cache=cache,
                                  before_compile=before_compile, machine=machine, profile=profile)
        self.name = self._executor.name

    def __call__(self, *args: Any, out: Any = None) -> Any:
        """Run on numpy arrays; `out` as for `fusebind.jit` functions."""
        fast = self._executor.fast  # one fused kernel: the runtime's one fast call path
        if fast is not None:
            result = fast.call(args, out)
            if result is not None:
                return result
        plans = len(self._executor._plans)
        result = self._executor(*args, out=out)
        if len(self._executor._plans) != plans:  # a new signature was planned: a pickle replays it
            self._sigs.setdefault(tuple((np.shape(a), np.asarray(a).dtype) for a in args), None)
        return result

    def precompile(self, *args: Any) -> "CompiledFunction":
        """Plan and compile for arguments like these (arrays, or `ArraySpec`s / objects with
        `.shape` and `.dtype`) and wait until every kernel is bound, so a pickle made afterwards
        carries them. Returns the function."""
        arrays = [np.asarray(materialize(a)) for a in args]
        self._sigs.setdefault(tuple((a.shape, a.dtype) for a in arrays), None)
        plan_and_wait(self._executor, arrays)
        return self

    def _replay(self, sigs: list[tuple[Any, ...]]) -> list[str]:
        for sig in sigs:
            arrays = [np.zeros(shape, dtype) for shape, dtype in sig]
            replay_quietly(lambda arrays=arrays: plan_and_wait(self._executor, arrays))
        return [self._text]

    def _portable_blob(self) -> bytes:
        sigs = list(self._sigs)
        if self._blob is None or self._blob[0] != len(sigs):
            from fusebind.runtime.calibrate import machine_model

            machine = machine_model(self._init["machine"])

            def clone(cache: Any) -> CompiledFunction:
                return CompiledFunction(self._text, self._entry, **{**self._init, "cache": cache, "machine": machine,
                                                                    "before_compile": None})
            blob = build_blob(clone, lambda c: c._replay(sigs), self._init["backend"], "compile", self._init["cache"])
            self._blob = (len(sigs), blob)
        return self._blob[1]

    def __reduce__(self) -> Any:
        """Pickled as its text, entry and options, with the blob of the kernels of every
        signature planned so far (docs/PORTABLE.md)."""
        from fusebind.runtime.calibrate import machine_model

        state = (list(self._sigs), self._portable_blob(), machine_model(self._init["machine"]))
        return (_receive_compiled, (self._text, self._entry, self._init, state))

    def __copy__(self) -> "CompiledFunction":
        return self

    def __deepcopy__(self, memo: Any) -> "CompiledFunction":
        return self

    @property
    def executor(self) -> Executor:
        return self._executor

    def mlir(self, *args: Any) -> str:
        from fusebind.dialect import print_module

        return print_module(self.module)

    def optimized(self, *args: Any) -> str:
        from fusebind.dialect import print_module

        self._executor.plan_for([np.asarray(a) for a in args])
        return print_module(self._executor.optimized_module)

    def explain(self, *args: Any, format: str = "text") -> str:
        return self._executor.explain([np.asarray(a) for a in args], format=format)

    def wait_compiled(self, timeout: float | None = None) -> bool:
        return self._executor.wait_compiled(timeout)

    @property
    def stats(self) -> Any:
        return self._executor.stats


def _receive_compiled(text: str, entry: str | None, init: dict[str, Any], state: tuple[Any, ...]) -> CompiledFunction:
    """Unpickling: the function parsed again, its kernels installed (when the machine key is
    this machine's, priced with the sender's machine model) and every signature planned."""
    sigs, blob, machine = state
    name = entry or "main"
    if receive(name, blob, init["backend"]) and init["machine"] is None:
        init = {**init, "machine": machine}
    fn = CompiledFunction(text, entry, **init)
    fn._replay(sigs)
    fn._sigs.update(dict.fromkeys(sigs))
    return fn


def check_entry(module: Any, entry: Any) -> str | None:
    """The entry function's name (`@name` accepted), or EntryError /
    ArgumentError naming what the module defines."""
    from xdsl.dialects import func as func_d

    names = [op.sym_name.data for op in module.ops if isinstance(op, func_d.FuncOp) and op.body.blocks]
    shown = ", ".join("@" + n for n in names)
    if entry is not None and not isinstance(entry, str):
        raise ArgumentError(f"fusebind.compile: entry must be the name of a function (a str), got "
                            f"{type(entry).__name__} {entry!r}; the module defines {shown or 'no function'}")
    if not names:
        raise EntryError("fusebind.compile: the module defines no function with a body (only declarations, or "
                         "nothing); there is no entry to run")
    if entry is not None:
        name = entry[1:] if entry.startswith("@") else entry
        if name not in names:
            raise EntryError(f"fusebind.compile: entry={entry!r}: the module has no function @{name}; it defines "
                             f"{shown} (pass {' or '.join(f'entry={n!r}' for n in names)})")
        return name
    if len(names) > 1 and "main" not in names:
        raise EntryError(f"fusebind.compile: the module defines {len(names)} functions ({shown}) and none is "
                         f"@main, so entry= must choose one: pass entry={names[0]!r}, for example")
    return None


def compile(text: str, entry: str | None = None, **options: Any) -> CompiledFunction:  # noqa: A001
    """Compile MLIR text (prim dialect) to a callable; options as for `fusebind.jit`.

    entry: the function to run (its name, with or without `@`); None: the
    only function, else `@main`. A name the module does not define raises
    `fb.EntryError` (a KeyError) naming the functions it does define."""
    return CompiledFunction(text, entry, **options)
