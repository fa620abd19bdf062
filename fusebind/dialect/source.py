"""Reading IR text with source locations, and verifying with diagnostics.

Owns the one guarded entry into xDSL's parser (`parse_text`): every door that
reads user text (`parse_module`, `fusebind-opt`, recipe text, `fb.compile`)
goes through it, so all of them get the same protections:

- a linear pre-scan of string literals (`check_string_literals`): xDSL 0.74's
  string regex backtracks exponentially on an unclosed `"` or a bad escape,
  so such text is refused here, before the lexer sees it;
- a cap on the element count of `dense<...>` attributes
  (`MAX_DENSE_ELEMENTS`), checked once the type is known and before xDSL
  expands a splat into one Python object per element;
- every exception from inside xDSL becomes an `IRParseError` with a location,
  placed as MLIR places it: an "expected ..." error (or one at the end of
  the input) whose token starts a line is reported at the end of the code
  before it, skipping blank lines and `//` comments (MLIR's
  `emitWrongTokenError`: a missing `>` is on the line that lacks it, not
  at the next line's first token); a value used but never defined is
  reported at its first use (xDSL notices only at the end of the module).

xDSL operations do not remember where they came from, so `LocatingParser`
records the text offset of every op it parses; `SourceMap` turns offsets
into line/column only when asked (binary search over a newline index built
once), so locating n ops costs O(text + n log n), not O(n * text).
`verify_with_locations` verifies op by op and reports each failure at its
op's location.

Must not: print, or verify anything beyond what `verify_with_locations` is
asked to do.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from xdsl.context import Context
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, VerifyException

from fusebind.dialect.errors import IRParseError

T = TypeVar("T")

#: Largest element count of a `dense<...>` attribute that parses (2**24 =
#: 16 Mi elements, 64 MiB as f32). xDSL stores a splat expanded, and builds a
#: Python list of every element first (~8 bytes per element on top of the
#: data), so `dense<1.0> : tensor<100000x100000xf32>` would need 100+ GB.
#: Larger constants belong in an input array, not in IR text.
MAX_DENSE_ELEMENTS = 1 << 24


class LineIndex:
    """Offsets -> 1-based (line, column) of one text; the newline index is
    built on first use, in one pass."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._starts: list[int] | None = None

    def line_col(self, pos: int) -> tuple[int, int]:
        if self._starts is None:
            self._starts = [0, *(m.end() for m in re.finditer("\n", self._text))]
        line = bisect_right(self._starts, pos)
        return line, pos - self._starts[line - 1] + 1


@dataclass
class SourceMap:
    """Where each parsed op starts, keyed by the op's identity: an offset into
    the text, converted to a 1-based (line, column) by `location`."""

    index: LineIndex = field(default_factory=lambda: LineIndex(""))
    offsets: dict[int, int] = field(default_factory=dict)
    ops: list[Operation] = field(default_factory=list)  # keeps the ids valid

    def location(self, op: Operation) -> tuple[int | None, int | None]:
        offset = self.offsets.get(id(op))
        if offset is None:
            return None, None
        return self.index.line_col(offset)


@dataclass(frozen=True)
class Diagnostic:
    """One error at a location (line/column 1-based, None when unknown)."""

    message: str
    line: int | None
    column: int | None


def line_col(text: str, pos: int) -> tuple[int, int]:
    """1-based (line, column) of one offset (scans the text up to `pos`; use a
    `LineIndex` for many offsets of one text)."""
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


# A `"` opens a string literal anywhere outside a `//` comment (xDSL's lexer:
# comments run to "\n"; a literal is one line: it cannot hold "\n", "\v", "\f").
_QUOTE_OR_COMMENT = re.compile(r'"|//[^\n]*')
# The body of a literal, possessive so that a failed match cannot backtrack:
# plain chars, or the escapes xDSL accepts (\" \n \t \\ and two hex digits).
_STRING_BODY = re.compile(r'(?:[^"\\\n\v\f]++|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*+')


def check_string_literals(text: str, index: LineIndex | None = None) -> None:
    """Refuse an unclosed string literal or a bad escape in one linear pass.

    Raises `IRParseError` at the opening quote ("unterminated string
    literal") or at the backslash of an escape xDSL does not accept.
    """
    index = index or LineIndex(text)
    pos, end = 0, len(text)
    while (m := _QUOTE_OR_COMMENT.search(text, pos)) is not None:
        if m.group() != '"':
            pos = m.end()
            continue
        stop = _STRING_BODY.match(text, m.end()).end()  # type: ignore[union-attr]  # matches the empty string
        if stop < end and text[stop] == '"':
            pos = stop + 1
            continue
        if stop < end and text[stop] == "\\":
            raise IRParseError(
                f"invalid escape '{text[stop:stop + 2]}' in string literal; "
                'use \\", \\n, \\t, \\\\ or two hex digits (\\0A)', *index.line_col(stop))
        raise IRParseError(
            'unterminated string literal: close it with " on the same line', *index.line_col(m.start()))


class LocatingParser(Parser):
    """An xDSL parser that records where each operation starts and refuses
    dense attributes above `MAX_DENSE_ELEMENTS` before they are built."""

    def __init__(self, ctx: Context, text: str, name: str = "<input>", source_map: SourceMap | None = None):
        super().__init__(ctx, text, name)
        self.text = text
        self.source_map = source_map if source_map is not None else SourceMap(LineIndex(text))
        self._dense_start = 0
        self.first_forward_use: dict[str, int] = {}  # name -> offset of its first use before a definition

    def parse_operation(self) -> Operation:
        start = self._current_token.span.start
        op = super().parse_operation()
        self.source_map.offsets[id(op)] = start
        self.source_map.ops.append(op)
        return op

    def resolve_operand(self, operand: Any, type: Any) -> Any:
        name = operand.operand_name
        if name not in self.ssa_values:
            self.first_forward_use.setdefault(name, operand.span.start)
        return super().resolve_operand(operand, type)

    def parse_dense_int_or_fp_elements_attr(self, type: Any) -> DenseIntOrFPElementsAttr:
        self._dense_start = self._current_token.span.start
        if type is not None:
            self._check_dense_size(type)
        return super().parse_dense_int_or_fp_elements_attr(type)

    def _parse_dense_literal_type(self) -> Any:
        # xDSL 0.74 parses a dense literal's type here, after its contents and
        # before it expands a splat: the last moment to refuse a huge one.
        type = super()._parse_dense_literal_type()
        self._check_dense_size(type)
        return type

    def _check_dense_size(self, type: Any) -> None:
        count = math.prod(type.get_shape())
        # Beyond int64 xDSL's own expansion fails at once (OverflowError, no
        # allocation) and test/reliability pins that message: leave it to xDSL.
        if MAX_DENSE_ELEMENTS < count < 1 << 63:
            self.raise_error(
                f"dense attribute of type {type} has {count} elements, more than the {MAX_DENSE_ELEMENTS} "
                "fusebind parses (MAX_DENSE_ELEMENTS); pass a constant that large as an input array",
                self._dense_start, self.pos)


def parse_text(ctx: Context, text: str, name: str, body: Callable[[LocatingParser], T]) -> tuple[T, LocatingParser]:
    """Run `body` on a fresh `LocatingParser` over `text`, guarded: the
    string-literal pre-scan first, and any failure inside xDSL (syntax,
    verify-on-construct, overflow, recursion, memory) as an `IRParseError`
    at the best known location. The one way fusebind hands text to xDSL."""
    index = LineIndex(text)
    check_string_literals(text, index)
    parser: LocatingParser | None = None
    try:
        parser = LocatingParser(ctx, text, name, SourceMap(index))
        result = body(parser)
    except IRParseError:
        raise
    except ParseError as err:
        message, pos = _placed(err, parser, text)
        raise IRParseError(message, *index.line_col(pos)) from None
    except VerifyException as err:
        # Some xDSL constructors verify while parsing (e.g. malformed attributes).
        message = str(err).strip().splitlines()[-1] if str(err).strip() else "invalid attribute"
        raise IRParseError(message, *index.line_col(_pos(parser, text))) from None
    except Exception as err:  # an unexpected failure inside xDSL must not escape as-is
        raise IRParseError(f"cannot parse: {type(err).__name__}: {err}", *index.line_col(_pos(parser, text))) from None
    return result, parser


_UNDEFINED = "values used but not defined: "
_EXPECTED = re.compile(r"\bexpected\b", re.IGNORECASE)


def _placed(err: ParseError, parser: LocatingParser | None, text: str) -> tuple[str, int]:
    """The message and offset to report a ParseError at (see the module doc)."""
    pos = min(err.span.start, len(text))
    if err.msg.startswith(_UNDEFINED) and parser is not None:
        names = [name for name in parser.forward_ssa_references if name in parser.first_forward_use]
        if names:
            names.sort(key=parser.first_forward_use.__getitem__)
            others = f" (also undefined: {', '.join('%' + n for n in names[1:])})" if names[1:] else ""
            return f"use of undefined value %{names[0]}{others}", parser.first_forward_use[names[0]]
    if _EXPECTED.search(err.msg) or not text[pos:].strip():
        pos = end_of_previous_code(text, pos)
    return err.msg, pos


def end_of_previous_code(text: str, pos: int) -> int:
    """MLIR's rule for a wrong-token error: if the token at `pos` is the first
    on its line, the offset just past the last code before it (blank lines
    and `//` comments skipped); otherwise `pos`. At the very start: `pos`."""
    at = pos
    while True:
        while at > 0 and text[at - 1] in " \t":
            at -= 1
        if at == 0:
            return pos
        if text[at - 1] not in "\r\n":
            return at
        at -= 1  # to the end of the previous line; there, cut a `//` comment
        line_start = max(text.rfind("\n", 0, at), text.rfind("\r", 0, at)) + 1
        comment = text.find("//", line_start, at)
        if comment >= 0:
            at = comment


def _pos(parser: LocatingParser | None, text: str) -> int:
    return min(parser.pos if parser is not None else 0, len(text))


def parse_with_locations(ctx: Context, text: str, name: str = "<input>") -> tuple[ModuleOp, SourceMap]:
    """Parse a module (without verifying); raise IRParseError with the location of a syntax error."""
    module, parser = parse_text(ctx, text, name, lambda p: p.parse_module())
    return module, parser.source_map


def verify_with_locations(module: Operation, source_map: SourceMap | None = None) -> list[Diagnostic]:
    """Verify every op (outer before inner); return one diagnostic per failing op."""
    sm = source_map or SourceMap()
    diags: list[Diagnostic] = []
    for op in module.walk():
        message: str | None = None
        try:
            op.verify_()
        except VerifyException as err:
            message = str(err)
        except Exception as err:  # a verifier crash is still a verification failure of this op
            message = f"{op.name}: verifier failed: {type(err).__name__}: {err}"
        if message is None:
            try:
                op.verify(verify_nested_ops=False)
            except VerifyException as err:
                message = _last_message(str(err))
            except Exception as err:
                message = f"{op.name}: {type(err).__name__}: {err}"
        if message is None:
            message = _non_ascii_string(op)
        if message is not None:
            line, col = sm.location(op)
            diags.append(Diagnostic(message, line, col))
    return diags


def _non_ascii_string(op: Operation) -> str | None:
    """A string attribute with a non-ASCII character, which xDSL's printer escapes as
    UTF-8 bytes that its parser then reads back as bytes, not a string: refused, so every module
    fusebind accepts prints and parses back."""
    for name, attr in (*op.properties.items(), *op.attributes.items()):
        data = getattr(attr, "data", None)
        if isinstance(attr, StringAttr) and isinstance(data, str) and not data.isascii():
            return (f"{op.name}: the string {name} = {data!r} has a non-ASCII character; use ASCII "
                    "names and strings (escapes such as \\09 are fine)")
    return None


def _last_message(text: str) -> str:
    for prefix in ("Operation does not verify: ",):
        if prefix in text:
            return text.split(prefix, 1)[1].strip().splitlines()[0]
    return text.strip().splitlines()[0] if text.strip() else text
