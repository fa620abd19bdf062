"""The catalog rules: one matcher per static catalog entry, derived from its pattern.

This module owns `CATALOG_RULES`: for each entry of `catalog.CATALOG`, in
the entries' priority order (an entry whose pattern holds another's comes
first: bias_gelu before gelu), the rule `pattern_match.pattern_rule` makes
from the entry's pattern, tied to its static id. No matcher is written by
hand: a new catalog entry is a new rule. Commuted operands of commutative
ops match (their trait says so).
"""

from __future__ import annotations

from fusebind.compiler.catalog import CATALOG
from fusebind.compiler.matching import Rule
from fusebind.compiler.pattern_match import pattern_rule

CATALOG_RULES: tuple[Rule, ...] = tuple(
    pattern_rule(entry.name, entry.fused_id, entry.pattern)
    for entry in sorted(CATALOG, key=lambda e: e.priority)
)
