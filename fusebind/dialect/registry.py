"""The op registry: every op class fusebind knows, per process, append-only.

Owns: `register_op` (the one door for an op class, built-in or user),
`registered_ops`, `op_class` (by KIND or full name), `op_fingerprint` (what
lowering's object cache keys a user op by) and `user_dialects` (the xDSL
dialects `make_context` loads for user ops).

Rules:
- append-only: a name registered once stays; a second, different class of
  the same name is an `OpRegistrationError` naming where the first came from
  (module:qualname and file:line), since silently replacing an op would let
  already-built IR and cached code mean something else;
- re-registering the same class is a no-op;
- `prim.` belongs to fusebind: a user op uses its own dialect prefix
  (`mylib.cube`), which becomes an xDSL dialect on first use;
- a built-in op's KIND is its short name (`"add"`); a user op's KIND is its
  full name (`"mylib.cube"`), so the two can never collide.

Imports only dialect modules (dialect room).
"""

from __future__ import annotations

import difflib
import hashlib
import inspect
from collections.abc import Iterable
from typing import Any

from xdsl.ir import Dialect
from xdsl.irdl import IRDLOperation

from fusebind.dialect.errors import OpRegistrationError, UnknownOpError
from fusebind.dialect.prim_base import PrimOp

__all__ = [
    "OpRegistrationError", "UnknownOpError", "is_user_op", "op_class", "op_fingerprint", "register_op",
    "registered_ops", "user_dialects", "user_ops",
]

#: dialect prefixes fusebind itself loads in `make_context`; a user op may not use them
RESERVED_PREFIXES = frozenset({"prim", "fused", "builtin", "func", "arith"})

# name -> (class, source); insertion order is registration order (built-ins first: prim.py registers
# them at its import, before any user code can run).
_BY_NAME: dict[str, tuple[type[PrimOp], str]] = {}
_BY_KIND: dict[str, type[PrimOp]] = {}
_USER: list[type[PrimOp]] = []  # the user ops alone: lowering's cache key scans them on every key
_FINGERPRINTS: dict[type, str] = {}


def _describe(cls: type) -> str:
    """`module:qualname (file:line)`: where a class was defined, for clash messages."""
    where = f"{cls.__module__}:{cls.__qualname__}"
    try:
        file = inspect.getsourcefile(cls) or inspect.getfile(cls)
        line = inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):  # defined in a REPL or exec'd text: no file to name
        return where
    return f"{where} ({file}:{line})"


def _check_class(cls: Any) -> None:
    if not (isinstance(cls, type) and issubclass(cls, IRDLOperation) and issubclass(cls, PrimOp)):
        raise OpRegistrationError(
            f"register_op: {cls!r} is not an op class; define it as an @irdl_op_definition class subclassing "
            "fusebind.dialect.UnaryOp or fusebind.dialect.BinaryOp")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or "." not in name:
        raise OpRegistrationError(
            f"register_op: {cls.__qualname__} has no full op name (found {name!r}); set name = '<dialect>.<op>', "
            "e.g. name = 'mylib.cube'")
    try:
        cls.get_irdl_definition()
    except AttributeError:
        raise OpRegistrationError(
            f"register_op: {cls.__qualname__} is not decorated with @irdl_op_definition; decorate the class") from None


def _register(cls: type[PrimOp], source: str | None, builtin: bool) -> type[PrimOp]:
    _check_class(cls)
    name = cls.name
    prefix = name.split(".", 1)[0]
    known = _BY_NAME.get(name)
    if known is not None:
        if known[0] is cls:
            return cls
        raise OpRegistrationError(
            f"register_op: op name '{name}' is already registered by {known[1] or _describe(known[0])}; "
            "the registry is append-only, "
            f"so {_describe(cls)} cannot take it; give the new op another name")
    if builtin:
        kind = cls.KIND
    else:
        if prefix in RESERVED_PREFIXES:
            raise OpRegistrationError(
                f"register_op: '{name}' uses the '{prefix}.' prefix, which belongs to fusebind; a user op uses its "
                f"own dialect prefix, e.g. 'mylib.{name.split('.', 1)[1]}'")
        declared = cls.__dict__.get("KIND")
        if declared is not None and declared != name:
            raise OpRegistrationError(
                f"register_op: {cls.__qualname__} sets KIND = {declared!r}; a user op's KIND is its full name "
                f"'{name}' (leave KIND out)")
        kind = name
        cls.KIND = name  # type: ignore[misc]
    if not hasattr(cls, "DTYPES"):
        raise OpRegistrationError(
            f"register_op: {cls.__qualname__} declares no DTYPES; set DTYPES = frozenset({{'f32', 'f64'}}) "
            "(the element types it accepts)")
    # a built-in's source is described only when a clash names it (inspect parses the file: ~14 ms an op)
    _BY_NAME[name] = (cls, source or (None if builtin else _describe(cls)))
    _BY_KIND[kind] = cls
    if not builtin:
        _USER.append(cls)
    return cls


def register_op(cls: type[PrimOp], *, source: str | None = None) -> type[PrimOp]:
    """Register a user op class (append-only, per process); returns the class.

    `source` describes the registration in later clash messages (default: the
    class's module:qualname and file:line)."""
    return _register(cls, source, builtin=False)


def register_builtin_ops(classes: Iterable[type[PrimOp]]) -> None:
    """fusebind's own `prim` ops (called once, by `fusebind.dialect.prim` at its import)."""
    for cls in classes:
        _register(cls, None, builtin=True)


def registered_ops() -> tuple[type[PrimOp], ...]:
    """Every registered op class: the built-in prim ops first, then user ops, in registration order."""
    return tuple(cls for cls, _ in _BY_NAME.values())


def user_ops() -> tuple[type[PrimOp], ...]:
    """The registered user ops (not fusebind's own), in registration order."""
    return tuple(_USER)


def is_user_op(cls: type) -> bool:
    """A registered op outside fusebind's own dialects (its KIND is its full name)."""
    entry = _BY_NAME.get(getattr(cls, "name", ""))
    return entry is not None and entry[0] is cls and cls.name.split(".", 1)[0] not in RESERVED_PREFIXES


def is_primitive_op(op: Any) -> bool:
    """A primitive op a region may hold: a `prim.*` op or an instance of a registered user op class."""
    name = getattr(op, "name", "")
    if name.startswith("prim."):
        return True
    entry = _BY_NAME.get(name)
    return entry is not None and type(op) is entry[0]


def op_class(kind_or_name: str) -> type[PrimOp]:
    """The op class of a KIND (`"add"`, `"mylib.cube"`) or full name (`"prim.add"`)."""
    cls = _BY_KIND.get(kind_or_name)
    if cls is None:
        entry = _BY_NAME.get(kind_or_name)
        cls = entry[0] if entry else None
    if cls is None:
        close = difflib.get_close_matches(kind_or_name, list(_BY_KIND) + list(_BY_NAME), n=3)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else \
            "; register a user op with fusebind.dialect.registry.register_op (fb.register_op) first"
        raise UnknownOpError(f"no op '{kind_or_name}' is registered{hint}")
    return cls


def user_dialects() -> tuple[Dialect, ...]:
    """One xDSL dialect per user prefix, holding its registered ops (built anew: the registry grows)."""
    groups: dict[str, list[type[PrimOp]]] = {}
    for cls, _ in _BY_NAME.values():
        prefix = cls.name.split(".", 1)[0]
        if prefix not in RESERVED_PREFIXES:
            groups.setdefault(prefix, []).append(cls)
    return tuple(Dialect(prefix, ops, []) for prefix, ops in groups.items())


# ---------------------------------------------------------------- fingerprint
def _code_text(fn: Any) -> str:
    """The source of a function, or (no source file: REPL, exec) its bytecode and constants."""
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        if code is None:
            return repr(fn)
        return f"{code.co_code.hex()}|{code.co_consts!r}|{code.co_names!r}"


def _facts(cls: type[PrimOp]) -> list[str]:
    defn = cls.get_irdl_definition()
    traits = sorted(type(t).__name__ for t in defn.traits)
    return [
        cls.name, str(getattr(cls, "KIND", "")), repr(sorted(getattr(cls, "DTYPES", ()))),
        repr(getattr(cls, "FLOPS_PER_ELEMENT", 0.0)), repr(getattr(cls, "API_NAME", None)),
        repr(getattr(cls, "NUMPY_UFUNC", None)), repr(traits),
        repr([n for n, _ in defn.operands]), repr([n for n, _ in defn.results]), repr(sorted(defn.properties)),
    ]


def op_fingerprint(cls: type[PrimOp]) -> str:
    """A stable hash (hex) of an op class's facts and of the source of its `scalar_body`,
    `reference` (and `_ref`, the built-ins' form of it), and `infer_shape`: lowering's object
    cache includes it for user ops, so editing a body cannot load stale code."""
    known = _FINGERPRINTS.get(cls)
    if known is not None:
        return known
    h = hashlib.sha256()
    for part in _facts(cls):
        h.update(part.encode())
        h.update(b"\0")
    for method in ("scalar_body", "reference", "_ref", "infer_shape"):
        fn = getattr(cls, method, None)
        if fn is not None:
            h.update(method.encode())
            h.update(_code_text(getattr(fn, "__func__", fn)).encode())
            h.update(b"\0")
    digest = h.hexdigest()[:32]
    _FINGERPRINTS[cls] = digest
    return digest
