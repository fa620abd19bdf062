"""The split of optimize.py / rules.py keeps every public name at its old
address, bound to the one object that now lives in the owning module."""

from __future__ import annotations

import importlib

import pytest

OLD_TO_NEW = [
    ("optimize", "Decision", "decisions"),
    ("optimize", "WorkItem", "decisions"),
    ("optimize", "OptimizeResult", "decisions"),
    ("optimize", "Verdict", "decisions"),
    ("optimize", "build_region", "regions"),
    ("optimize", "MAX_INLINED_CONSTANT_ELEMENTS", "regions"),
    ("optimize", "price", "pricing"),
    ("rules", "Candidate", "matching"),
    ("rules", "MatchState", "matching"),
    ("rules", "Rejection", "matching"),
    ("rules", "Rule", "matching"),
    ("rules", "CATALOG_RULES", "catalog_rules"),
    ("rules", "SYNTHESIZED_RULES", "synthesized_rules"),
    ("rules", "merged_name", "synthesized_rules"),
    ("rules", "is_fusable_elementwise", "synthesized_rules"),
    ("rules", "absorb_neighbours", "absorb"),
]


@pytest.mark.parametrize(("old", "name", "new"), OLD_TO_NEW)
def test_old_address_is_the_owning_modules_object(old: str, name: str, new: str) -> None:
    old_mod = importlib.import_module(f"fusebind.compiler.{old}")
    new_mod = importlib.import_module(f"fusebind.compiler.{new}")
    assert getattr(old_mod, name) is getattr(new_mod, name)
    assert name in old_mod.__all__


@pytest.mark.parametrize("name", ["optimize_graph", "OptimizeResult", "Decision", "WorkItem", "capability_gated_rules"])
def test_package_exports_resolve_to_the_same_objects(name: str) -> None:
    import fusebind.compiler as compiler
    from fusebind.compiler import optimize, rules

    owner = rules if name == "capability_gated_rules" else optimize
    assert getattr(compiler, name) is getattr(owner, name)


def test_all_rules_are_attention_then_catalog_rules_then_synthesized_in_priority_order() -> None:
    from fusebind.compiler.rules import ALL_RULES

    # attention first: its softmax would otherwise be claimed by the catalog or reduction rules
    assert [r.name for r in ALL_RULES] == [
        "attention",
        "bias_gelu", "gelu", "softmax", "layernorm", "bias_relu",
        "matmul-epilogue", "reduction", "scan", "elementwise", "scatter",
    ]
