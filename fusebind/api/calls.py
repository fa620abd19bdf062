"""How a jitted function's Python call becomes flat leaves: keywords, defaults, static arguments, pytrees.

Owns `CallSpec` (per jitted function: its signature and which parameters
are static) and `FlatCall` (one call, flattened: the trace key's structure
part, the leaves, a name per leaf, and `rebuild`, which turns the traced
leaves back into the function's arguments).

The rules, as in JAX:
- the call is bound to the function's signature (`inspect.signature`), so
  keyword arguments work and a wrong call raises Python's own TypeError;
  a parameter not given keeps its default *as a Python value* (it is not
  an argument of the trace), and which parameters were given, positionally
  or by keyword, is part of the trace key;
- a static argument (`static_argnums` / `static_argnames`) is a Python
  value that specializes the trace: its value is part of the key (by hash
  and equality), so it must be hashable;
- every other argument is a pytree (pytree.py): its structure is part of
  the key, its leaves (arrays and Python scalars, weak as before) are the
  trace's arguments.

Must not: trace or run anything (trace.py and the executor do).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Iterable, Sequence

from fusebind.api.errors import UnsupportedOperation
from fusebind.api.pytree import flatten, unflatten


def _positional(params: Sequence[inspect.Parameter]) -> list[inspect.Parameter]:
    return [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


class CallSpec:
    """A function's signature and static parameters, checked once at `fb.jit(...)`."""

    def __init__(self, fn: Callable[..., Any], fn_name: str, static_argnums: Any = (),
                 static_argnames: Any = ()) -> None:
        self.fn_name = fn_name
        try:
            self.signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            self.signature = None
        nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums or ())
        names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames or ())
        params = list(self.signature.parameters.values()) if self.signature is not None else []
        positional = _positional(params)
        by_name = {p.name: p for p in params}
        static = set()
        for n in nums:
            if type(n) is not int:
                raise UnsupportedOperation(f"fusebind.jit: static_argnums of '{fn_name}' must be ints, got {n!r}")
            i = n + len(positional) if n < 0 else n
            if not 0 <= i < len(positional):
                raise UnsupportedOperation(
                    f"fusebind.jit: static_argnums={n} of '{fn_name}': it has {len(positional)} positional "
                    f"parameter{'s' if len(positional) != 1 else ''} ({', '.join(p.name for p in positional)})")
            static.add(positional[i].name)
        for n in names:
            p = by_name.get(n) if isinstance(n, str) else None
            if p is None or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise UnsupportedOperation(
                    f"fusebind.jit: static_argnames={n!r} of '{fn_name}' names no parameter; its parameters "
                    f"are {', '.join(p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))}")
            static.add(n)
        self.static = frozenset(static)
        #: the parameter names when every parameter is positional (no *args, keyword-only or **kw):
        #: a call without keywords then needs no `Signature.bind` (its cost is on every call)
        self.positional: tuple[str, ...] | None = (
            tuple(p.name for p in params) if self.signature is not None and len(positional) == len(params) else None)
        #: how many positional arguments a call needs at least (those after have defaults)
        self.required = max((i + 1 for i, p in enumerate(positional) if p.default is inspect.Parameter.empty),
                            default=0)

    def flat(self, args: Sequence[Any], kwargs: dict[str, Any]) -> "FlatCall":
        """This call bound to the signature and flattened (raises Python's TypeError for a wrong call)."""
        if self.signature is None:  # a builtin or C callable: positional leaves only
            if kwargs:
                raise UnsupportedOperation(f"fusebind: '{self.fn_name}' has no Python signature, so it takes "
                                           "positional arguments only")
            given = [(f"arg{i}", a) for i, a in enumerate(args)]
            return FlatCall(self, given, None)
        names = self.positional
        if names is not None and not kwargs and self.required <= len(args) <= len(names):
            return FlatCall(self, list(zip(names, args)), None)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.fn_name}(): {e}") from None
        return FlatCall(self, list(bound.arguments.items()), bound)


class FlatCall:
    """One call, flattened: `key` (the given parameters, each static value or
    pytree structure), `leaves`, `names` (one readable name per leaf), and
    `rebuild(leaves)` -> (args, kwargs) to call the function with."""

    __slots__ = ("key", "leaves", "names", "_given", "_bound", "_defs")

    def __init__(self, spec: CallSpec, given: list[tuple[str, Any]], bound: Any) -> None:
        key: list[Any] = []
        leaves: list[Any] = []
        names: list[str] = []
        defs: list[Any] = []
        for name, value in given:
            if name in spec.static:
                try:
                    hash(value)
                except TypeError:
                    raise UnsupportedOperation(
                        f"fusebind: static argument '{name}' of '{spec.fn_name}' is an unhashable "
                        f"{type(value).__name__}; a static argument is part of the trace key, so pass a hashable "
                        "value (a tuple instead of a list, a frozenset instead of a set)") from None
                # the type too: 1 == 1.0 == True hash alike but trace differently
                key.append((name, "static", type(value), value))
                defs.append(None)
                continue
            vleaves, treedef, paths = flatten(value, name)
            key.append((name, treedef))
            defs.append(treedef)
            leaves += vleaves
            names += paths
        self.key = tuple(key)
        self.leaves = leaves
        self.names = names
        self._given = given
        self._bound = bound
        self._defs = defs

    def simple(self, args: Sequence[Any]) -> bool:
        """The leaves are exactly `args` (no static, keyword or pytree argument): the executor
        may then be called with the call's own arguments (jit's fast and plain routes)."""
        leaves = self.leaves
        return len(leaves) == len(args) and all(a is b for a, b in zip(leaves, args)) and \
            all(len(k) == 2 for k in self.key)

    def rebuild(self, leaves: Iterable[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """(args, kwargs) of the call, with `leaves` (traced values) in the leaves' places."""
        it = iter(leaves)
        values = {name: (value if d is None else unflatten(d, it)) for (name, value), d in zip(self._given, self._defs)}
        if self._bound is None:
            return tuple(values.values()), {}
        bound = self._bound.signature.bind_partial()
        bound.arguments.update(values)
        return bound.args, bound.kwargs
