"""The numpy handlers a traced array calls, bound late: the table that keeps the api free of circles.

A `Tracer` (tracer.py) is a symbolic array whose operators, methods and numpy
protocols (NEP 13 `__array_ufunc__`, NEP 18 `__array_function__`) are
implemented by the numpy_* modules, and those build Tracers. If the Tracer
imported them, every numpy_* module would sit in one import circle with it.
So the Tracer's methods (numpy_operators.ArrayMethods, tracer.Tracer) call
the functions in `NUMPY`, and trace.py, the one module above every numpy_*
module, fills the table (`install`) when it is imported. Every traced array
is made by `trace.trace_graph`, so the table is full before the first one.

Reading a handler costs one attribute load of a slot (cheaper than the
function-level import it replaces).

Must not: import any numpy_* module, the tracer or trace.py.
"""

from __future__ import annotations

from typing import Any, Callable

from fusebind.dialect.errors import FusebindInternalError

#: each handler: its signature and the function trace.py installs for it
HANDLERS: dict[str, str] = {
    "binop": "(ufunc, a, b): a Python binary operator (numpy_ufuncs.binop)",
    "inplace": "(ufunc, x, o): `x <op>= o` (numpy_ufuncs.inplace)",
    "unary": "(symbol, x): -x, +x, abs(x), ~x (numpy_ufuncs.unary_operator)",
    "ufunc": "(ufunc, inputs, kwargs, what=None): a ufunc call (numpy_ufuncs.call)",
    "array_ufunc": "(ufunc, method, inputs, kwargs): NEP 13 (numpy_ufuncs.array_ufunc)",
    "ufunc_reduce": "(ufunc, inputs, kwargs): ufunc.reduce (numpy_reductions.ufunc_reduce)",
    "function": "(func, args, kwargs): a numpy function call (numpy_dispatch.call)",
    "array_function": "(func, types, args, kwargs): NEP 18 (numpy_dispatch.array_function)",
    "getitem": "(x, key): x[key] (numpy_indexing.getitem)",
    "no_value": "(x, what): the error for what needs a traced array's values (numpy_dispatch.no_value)",
    "attribute": "(x, name): another ndarray attribute (numpy_dispatch.attribute)",
    "has_attribute": "(name): whether ndarray has it (numpy_dispatch.has_attribute)",
}


class Handlers:
    """The late-bound handlers, one slot each (see `HANDLERS`)."""

    __slots__ = tuple(HANDLERS)

    def __getattr__(self, name: str) -> Any:  # only reached for a slot not installed
        if name in HANDLERS:
            raise FusebindInternalError(f"fusebind: internal error: the numpy handler {name!r} is not installed; traced "
                               "arrays are made by fusebind.api.trace.trace_graph, which installs them")
        raise AttributeError(name)

    def install(self, **handlers: Callable[..., Any]) -> None:
        """Set every handler at once (trace.py); a missing or unknown name is a fusebind bug."""
        if set(handlers) != set(HANDLERS):
            raise FusebindInternalError(f"fusebind: internal error: install() got {sorted(handlers)}, expected "
                               f"{sorted(HANDLERS)}")
        for name, fn in handlers.items():
            setattr(self, name, fn)


NUMPY = Handlers()
