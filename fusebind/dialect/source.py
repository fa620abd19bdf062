"""Reading IR text with source locations, and verifying with diagnostics.

xDSL operations do not remember where they came from, so `LocatingParser`
records the line/column of every op it parses; `verify_with_locations`
verifies op by op and reports each failure at its op's location. This is what
`parse_module` and `fusebind-opt --verify-diagnostics` build on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, VerifyException

from fusebind.dialect.errors import IRParseError


@dataclass
class SourceMap:
    """Line/column (1-based) of each parsed op, keyed by the op's identity."""

    locations: dict[int, tuple[int, int]] = field(default_factory=dict)
    ops: list[Operation] = field(default_factory=list)  # keeps the ids valid

    def location(self, op: Operation) -> tuple[int | None, int | None]:
        return self.locations.get(id(op), (None, None))


@dataclass(frozen=True)
class Diagnostic:
    """One error at a location (line/column 1-based, None when unknown)."""

    message: str
    line: int | None
    column: int | None


def line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


class LocatingParser(Parser):
    """An xDSL parser that records where each operation starts."""

    def __init__(self, ctx: Context, text: str, name: str = "<input>", source_map: SourceMap | None = None):
        super().__init__(ctx, text, name)
        self.text = text
        self.source_map = source_map if source_map is not None else SourceMap()

    def parse_operation(self) -> Operation:
        start = self._current_token.span.start
        op = super().parse_operation()
        self.source_map.locations[id(op)] = line_col(self.text, start)
        self.source_map.ops.append(op)
        return op


def parse_with_locations(ctx: Context, text: str, name: str = "<input>") -> tuple[ModuleOp, SourceMap]:
    """Parse (without verifying); raise IRParseError with the location of a syntax error."""
    parser: LocatingParser | None = None
    try:
        parser = LocatingParser(ctx, text, name)
        module = parser.parse_module()
    except ParseError as err:
        line, col = line_col(text, err.span.start)
        raise IRParseError(err.msg, line, col) from None
    except VerifyException as err:
        # Some xDSL constructors verify while parsing (e.g. malformed attributes).
        line, col = line_col(text, parser.pos if parser else 0)
        raise IRParseError(str(err).strip().splitlines()[-1], line, col) from None
    except Exception as err:  # an unexpected failure inside xDSL must not escape as-is
        line, col = line_col(text, min(parser.pos if parser else 0, len(text)))
        raise IRParseError(f"cannot parse: {type(err).__name__}: {err}", line, col) from None
    return module, parser.source_map  # type: ignore[union-attr]


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
        if message is not None:
            line, col = sm.location(op)
            diags.append(Diagnostic(message, line, col))
    return diags


def _last_message(text: str) -> str:
    for prefix in ("Operation does not verify: ",):
        if prefix in text:
            return text.split(prefix, 1)[1].strip().splitlines()[0]
    return text.strip().splitlines()[0] if text.strip() else text
