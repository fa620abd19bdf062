"""The recipe registry: runtime FusedOpIds and their recipes (the "sidecar").

This module owns `RUNTIME_FUSED_BASE`, `canonical_recipe(region)` (the
value-name independent text that structural dedup and the object cache key
on), `as_region(region_or_text)`, and `RecipeRegistry`: it validates a
`fused.region`, allocates a runtime id from `RUNTIME_FUSED_BASE` upward,
dedups structurally (equal regions share an id; the first name wins),
gives the recipe back by id, and is bounded (`trim`: the least recently used
recipes without a kernel are forgotten; ids are never reused).

There is no process-wide registry here: each runtime `Session` owns one
(the default session's is the global one), and `OptimizationContext.recipes`
names the registry `optimize_graph` may allocate from, so its ids depend
only on that registry. It never touches the binding table. Lock order: the registry's own lock is
always the innermost one (the runtime facade takes the table writer lock
first, then calls `register`); the registry never calls out while holding it.
"""

from __future__ import annotations

import hashlib
import io
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from xdsl.ir import Block, Operation, SSAValue

from fusebind.dialect.errors import FusebindError
from fusebind.dialect.registry import is_primitive_op
from fusebind.compiler.catalog import RUNTIME_FUSED_BASE

#: Properties that label a region but are not part of its math.
_LABEL_PROPERTIES = ("fused_id", "name", "cost")

#: Discardable attributes that describe how a region may be *run* (e.g. the
#: in-place epilogue marker of `optimize.py`), not its math: canonical text,
#: dedup and the object cache ignore them.
_LABEL_ATTRIBUTES = ("fused.inplace",)

_REGION_OP = "fused.region"
_YIELD_OP = "fused.yield"


class RecipeError(FusebindError, ValueError):
    """A region cannot become a recipe."""


class RecipeParseError(RecipeError):
    """Recipe text does not parse or does not hold exactly one fused.region."""


class NotPrimitiveOnlyError(RecipeError):
    """A recipe body holds an op that is not a `prim.*` op."""


class MalformedRecipeError(RecipeError):
    """A recipe does not verify."""


class RecipeIdSpaceExhausted(RecipeError):
    """Every runtime FusedOpId of the registry is taken."""


class NotARegionError(RecipeError, TypeError):
    """What was given as a recipe is neither a `fused.region` op nor its MLIR text."""


class UnknownRecipeError(FusebindError, KeyError):
    """No recipe is registered under this id."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Recipe:
    """A registered recipe: its id, first name, canonical text and region.

    The registry keeps the region private: `region` returns a fresh detached
    copy on every access, so a caller that mutates what it got (renames,
    erases ops, re-stamps ids) cannot corrupt the registry."""

    fused_id: int
    name: str
    canonical: str
    stored: Operation = field(repr=False, compare=False)

    @property
    def region(self) -> Operation:
        """A detached copy of the recipe region, stamped with id and name."""
        return _detached_copy(self.stored, self.fused_id, self.name)


# --------------------------------------------------------------------------- coercion


def _parse_ops(parser: Any) -> list[Operation]:
    from xdsl.utils.mlir_lexer import MLIRTokenKind

    ops: list[Operation] = []
    while (op := parser.parse_optional_operation()) is not None:
        ops.append(op)
    if parser._current_token.kind != MLIRTokenKind.EOF:
        parser.raise_error("unexpected text after the last operation")
    return ops


def _parse_region_text(text: str) -> Operation:
    from fusebind.dialect import IRParseError, make_context
    from fusebind.dialect.source import parse_text

    # The dialect's guarded parser: the same pre-scan, size caps and error
    # mapping as parse_module, so nothing but a RecipeError leaves this door.
    try:
        ops, parser = parse_text(make_context(), text, "<recipe>", _parse_ops)
    except IRParseError as err:
        raise RecipeParseError(f"recipe text does not parse: {err}") from err
    if not ops:
        raise RecipeParseError("recipe text holds no operation; pass a fused.region op or a module with one")
    regions = [o for top in ops for o in top.walk() if o.name == _REGION_OP]
    if len(regions) != 1:
        raise RecipeParseError(
            f"recipe text must hold exactly one {_REGION_OP}, found {len(regions)}; "
            "pass the region op text or a module containing only that region"
        )
    region = regions[0]
    # Bare region op text: its operands were never defined. Give them a home.
    forward = [v for _, refs in sorted(parser.forward_ssa_references.items()) for _, v in sorted(refs.items())]
    if forward:
        if region.parent is not None:
            raise RecipeParseError(
                "recipe text uses undefined values outside the region: "
                + ", ".join("%" + n for n in parser.forward_ssa_references)
            )
        holder = Block(arg_types=[v.type for v in forward])
        for value, arg in zip(forward, holder.args):
            value.replace_all_uses_with(arg)
    elif region.parent is not None:
        region = region.clone()
    return region


def as_region(region: Any) -> Operation:
    """A `fused.region` op from an op or its MLIR text (a module holding
    exactly one region, or the region op text itself)."""
    if isinstance(region, str):
        return _parse_region_text(region)
    if isinstance(region, Operation):
        if region.name != _REGION_OP:
            raise RecipeError(f"expected a {_REGION_OP} op, got {region.name}")
        return region
    raise NotARegionError(f"expected a {_REGION_OP} op or its MLIR text, got {type(region).__name__}")


# --------------------------------------------------------------------------- canonical form


def canonical_recipe(region: Any) -> str:
    """Generic text of the region's math: SSA names normalised, the labels
    `fused_id`/`name`/`cost` dropped. Equal math gives equal text.
    Raises `RecipeError` (text that does not parse, an op that is not a
    region, `NotARegionError` for anything else), nothing else by design."""
    from xdsl.printer import Printer

    op = as_region(region)
    holder = Block(arg_types=[o.type for o in op.operands])
    mapper: dict[SSAValue, SSAValue] = dict(zip(op.operands, holder.args))
    clone = op.clone(value_mapper=mapper)
    holder.add_op(clone)
    for name in _LABEL_PROPERTIES:
        clone.properties.pop(name, None)
        clone.attributes.pop(name, None)
    for name in _LABEL_ATTRIBUTES:
        clone.attributes.pop(name, None)
    for value in holder.args:
        value.name_hint = None
    for inner in clone.walk():
        for value in inner.results:
            value.name_hint = None
        for reg in inner.regions:
            for block in reg.blocks:
                for arg in block.args:
                    arg.name_hint = None
    out = io.StringIO()
    Printer(stream=out, print_generic_format=True).print_op(clone)
    return out.getvalue().strip()


# --------------------------------------------------------------------------- validation


def validate_recipe(region: Operation) -> None:
    """Raise a typed RecipeError unless `region` is a well-formed, primitive-only region."""
    for inner in region.walk():
        if inner is region or inner.name == _YIELD_OP or is_primitive_op(inner):
            continue
        raise NotPrimitiveOnlyError(
            f"{_REGION_OP}: body holds {inner.name}, but a recipe may hold only prim.* ops, "
            f"registered user ops and {_YIELD_OP}; decompose it into primitive ops first"
        )
    try:
        region.verify()
    except Exception as err:  # xDSL raises VerifyException and, for broken IR, others
        raise MalformedRecipeError(f"{_REGION_OP} does not verify: {err}") from err


@dataclass(frozen=True)
class PreparedRecipe:
    """A validated region with its canonical text, not yet registered."""

    name: str
    region: Operation
    canonical: str


def prepare_recipe(name: str, region: Any) -> PreparedRecipe:
    """Parse (if text), validate and canonicalise a region; typed errors."""
    if not isinstance(name, str) or not name:
        raise RecipeError(f"a recipe needs a non-empty name, got {name!r}")
    op = as_region(region)
    validate_recipe(op)
    return PreparedRecipe(name, op, canonical_recipe(op))


# --------------------------------------------------------------------------- registry


class RecipeRegistry:
    """Runtime FusedOpIds with their recipes. Thread-safe; `capacity` bounds
    the id space (ids `base .. base+capacity-1`) so tests can exhaust it.

    Bounded (`trim`, docs/SOAK.md): a serving process registers a region per
    new shape for days, and a recipe holds its region's IR (3.8 KB for a
    one-op region, more for bigger ones). The session trims at every swap
    that bound a kernel: every recipe whose id is bound in its table stays,
    and of the others only the `keep` most recently used (registered or
    looked up) do; the rest are *forgotten*: their region and text go, a
    16-byte digest of their canonical text -> id stays (~280 B each,
    `FORGOTTEN_LIMIT` of them, oldest dropped first). Ids are never reused
    (allocated from a counter, not from the count), so a forgotten id never
    names another region; the same region registered again gets its old id
    back (what the JIT's compile records and plans refer to), unless its
    digest was dropped too, then a new id (the JIT binds whatever id the
    adoption returns). `recipe_of` a forgotten id is an UnknownRecipeError;
    `id_of` a forgotten region is None (nothing registered equals it now)."""

    #: digests of forgotten recipes kept (~280 B each with their dict entry, measured: ~4.6 MB at the limit)
    FORGOTTEN_LIMIT = 1 << 14

    def __init__(self, *, base: int = RUNTIME_FUSED_BASE, capacity: int = 1 << 40) -> None:
        if base < RUNTIME_FUSED_BASE:
            raise ValueError(f"runtime ids start at RUNTIME_FUSED_BASE={RUNTIME_FUSED_BASE}, got base={base}")
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        self._base = base
        self._capacity = capacity
        self._lock = threading.Lock()
        self._by_canonical: dict[str, int] = {}
        #: live recipes, least recently used first (register / id_of / recipe_of move one to the end)
        self._by_id: OrderedDict[int, Recipe] = OrderedDict()
        #: digest of a forgotten recipe's canonical text -> its id, oldest first
        self._forgotten: OrderedDict[bytes, int] = OrderedDict()
        self._next = base
        #: recipes forgotten so far (statistics)
        self.forgotten_total = 0

    def register(self, name: str, region: Any) -> int:
        """The id of `region`'s recipe: the existing one if an equal recipe is
        registered (its first name stays), else a newly allocated one."""
        return self.register_prepared(prepare_recipe(name, region))

    def register_prepared(self, prepared: "PreparedRecipe") -> int:
        """`register` for a recipe already validated and canonicalised by
        `prepare_recipe`: only dictionary work, so callers can keep it inside
        a critical section and do the parsing outside."""
        with self._lock:
            existing = self._by_canonical.get(prepared.canonical)
            if existing is not None:
                self._by_id.move_to_end(existing)
                return existing
            fused_id = self._forgotten.pop(_digest(prepared.canonical), None)
            if fused_id is None:
                if self._next - self._base >= self._capacity:
                    raise RecipeIdSpaceExhausted(
                        f"all {self._capacity} runtime FusedOpIds from {self._base} are taken; "
                        f"cannot register recipe {prepared.name!r}"
                    )
                fused_id = self._next
                self._next += 1
            region = _detached_copy(prepared.region, fused_id, prepared.name)
            self._by_id[fused_id] = Recipe(fused_id, prepared.name, prepared.canonical, region)
            self._by_canonical[prepared.canonical] = fused_id
            return fused_id

    def id_of(self, region: Any) -> int | None:
        """The id of an equal registered recipe, or None."""
        canonical = canonical_recipe(region)
        with self._lock:
            fused_id = self._by_canonical.get(canonical)
            if fused_id is not None:
                self._by_id.move_to_end(fused_id)
            return fused_id

    def recipe_of(self, fused_id: int) -> Recipe:
        """The recipe registered under `fused_id`."""
        with self._lock:
            recipe = self._by_id.get(fused_id)
            if recipe is not None:
                self._by_id.move_to_end(fused_id)
        if recipe is None:
            raise UnknownRecipeError(
                f"no recipe is registered under FusedOpId {fused_id}; "
                "adopt the region first (adopt_runtime_fused) or check the id"
            )
        return recipe

    def trim(self, keep: int, pinned: Any = ()) -> int:
        """Forget the least recently used recipes beyond `keep`, except those
        whose id is in `pinned` (ids with a kernel bound: they always stay).
        Returns how many were forgotten."""
        if keep < 0:
            raise ValueError(f"trim keeps a number of recipes >= 0, got {keep}")
        pinned = frozenset(pinned)
        with self._lock:
            excess = sum(1 for i in self._by_id if i not in pinned) - keep
            if excess <= 0:
                return 0
            victims = []
            for fused_id in self._by_id:  # least recently used first
                if fused_id not in pinned:
                    victims.append(fused_id)
                    if len(victims) == excess:
                        break
            for fused_id in victims:
                recipe = self._by_id.pop(fused_id)
                del self._by_canonical[recipe.canonical]
                self._forgotten[_digest(recipe.canonical)] = fused_id
            while len(self._forgotten) > self.FORGOTTEN_LIMIT:
                self._forgotten.popitem(last=False)
            self.forgotten_total += len(victims)
            return len(victims)

    def forgotten(self) -> int:
        """Digests of forgotten recipes held now (each can give its id back)."""
        with self._lock:
            return len(self._forgotten)

    def ids(self) -> tuple[int, ...]:
        with self._lock:
            return tuple(self._by_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_id)

    def snapshot(self) -> tuple[dict[str, int], dict[int, Recipe], dict[bytes, int], int]:
        with self._lock:
            return dict(self._by_canonical), dict(self._by_id), dict(self._forgotten), self._next

    def restore(self, state: tuple[Any, ...]) -> None:
        with self._lock:
            self._by_canonical, self._by_id = dict(state[0]), OrderedDict(state[1])
            self._forgotten = OrderedDict(state[2]) if len(state) > 2 else OrderedDict()
            self._next = state[3] if len(state) > 3 else self._base + len(self._by_id)

    def reset(self) -> None:
        """Forget every recipe. Unbind their kernels first (see runtime.testing)."""
        with self._lock:
            self._by_canonical.clear()
            self._by_id.clear()
            self._forgotten.clear()
            self._next = self._base


def _digest(canonical: str) -> bytes:
    return hashlib.blake2b(canonical.encode(), digest_size=16).digest()


def _detached_copy(op: Operation, fused_id: int, name: str) -> Operation:
    holder = Block(arg_types=[o.type for o in op.operands])
    clone = op.clone(value_mapper=dict(zip(op.operands, holder.args)))
    holder.add_op(clone)
    _stamp(clone, fused_id, name)
    return clone


def _stamp(op: Operation, fused_id: int, name: str) -> None:
    from xdsl.dialects.builtin import IntegerAttr, StringAttr, i64

    if "fused_id" in op.properties:
        op.properties["fused_id"] = IntegerAttr(fused_id, i64)
    if "name" in op.properties:
        op.properties["name"] = StringAttr(name)
