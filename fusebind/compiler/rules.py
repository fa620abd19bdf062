"""The fusion rule set and its capability gate.

This module owns the rules in priority order (`ALL_RULES`: the catalog
rules of `catalog_rules.py`, derived from the catalog's patterns, then the
synthesized rules of `synthesized_rules.py`) and
`capability_gated_rules(has_kernel)`, which returns the active rules and the static ids it gated out; synthesized rules
are always returned, since their gate is asked per region at match time.

What a rule is (`Candidate`, `Rejection`, `MatchState`, `Rule`) lives in
`matching.py`; `absorb_neighbours` lives in `absorb.py`. Those names are
re-exported here, where they were first defined. A rule proposes
candidates; it does not price, gate by runtime id, or rewrite IR:
`optimize.py` does.
"""

from __future__ import annotations

from collections.abc import Callable

from fusebind.compiler.absorb import absorb_neighbours
from fusebind.compiler.attention_rule import ATTENTION_RULE
from fusebind.compiler.catalog_rules import CATALOG_RULES
from fusebind.compiler.matching import Candidate, Matcher, MatchState, Rejection, Rule
from fusebind.compiler.synthesized_rules import SYNTHESIZED_RULES, is_fusable_elementwise, merged_name

__all__ = [
    "ALL_RULES",
    "CATALOG_RULES",
    "SYNTHESIZED_RULES",
    "Candidate",
    "MatchState",
    "Matcher",
    "Rejection",
    "Rule",
    "absorb_neighbours",
    "capability_gated_rules",
    "is_fusable_elementwise",
    "merged_name",
]

ALL_RULES: tuple[Rule, ...] = (ATTENTION_RULE,) + CATALOG_RULES + SYNTHESIZED_RULES  # attention first: its softmax is no catalog region


def capability_gated_rules(has_kernel: Callable[[int], bool]) -> tuple[list[Rule], list[int]]:
    """The rules whose fused op has a kernel, and the static ids gated out.

    A catalog rule is active only when `has_kernel(its id)`. Synthesized rules
    are always active: their ids come from the recipe registry per match, and
    the optimizer asks `has_kernel` for each such id (gated ones go on the
    work order). Rules come in priority order.
    """
    active: list[Rule] = []
    gated: list[int] = []
    for rule in ALL_RULES:
        if rule.static_id is None or has_kernel(rule.static_id):
            active.append(rule)
        else:
            gated.append(rule.static_id)
    return active, gated

