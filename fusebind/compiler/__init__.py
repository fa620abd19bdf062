"""fusebind.compiler: passes over the IR, the recipe registry, the catalog
and the Layer-1 cost model. It never imports fusebind.runtime.

Public names are imported lazily (PEP 562): `fusebind.runtime` needs the cost
types without paying for xDSL.
"""

from __future__ import annotations

import importlib
from typing import Any

from fusebind.compiler import lazy_exports

_EXPORTS: dict[str, str] = {
    # cost.py
    "CostEstimate": "cost",
    "UnknownCost": "cost",
    "UNKNOWN_COST": "cost",
    "TRUST_ORDER": "cost",
    "cheaper": "cost",
    "more_trusted": "cost",
    "MachineModel": "cost",
    "compose_region_cost": "cost",
    "compose_primitives_cost": "cost",
    # recipes.py
    "RUNTIME_FUSED_BASE": "catalog",
    "Recipe": "recipes",
    "PreparedRecipe": "recipes",
    "prepare_recipe": "recipes",
    "RecipeRegistry": "recipes",
    "RecipeError": "recipes",
    "RecipeParseError": "recipes",
    "NotPrimitiveOnlyError": "recipes",
    "MalformedRecipeError": "recipes",
    "RecipeIdSpaceExhausted": "recipes",
    "UnknownRecipeError": "recipes",
    "canonical_recipe": "recipes",
    "as_region": "recipes",
    "validate_recipe": "recipes",
    # catalog.py
    "CATALOG": "catalog",
    "CatalogEntry": "catalog",
    "CatalogError": "catalog",
    "catalog_entry": "catalog",
    "static_kernel_op": "catalog",
    "recipe_function_text": "catalog",
    "recipe_region_text": "catalog",
    # context.py, rules.py, optimize.py (fusion)
    "OptimizationContext": "context",
    "capability_gated_rules": "rules",
    "optimize_graph": "optimize",
    "OptimizeResult": "optimize",
    "Decision": "optimize",
    "WorkItem": "optimize",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_exports.attribute(globals(), _EXPORTS, name,
                                  lambda module: importlib.import_module(f"fusebind.compiler.{module}"))


def __dir__() -> list[str]:
    return lazy_exports.names(globals(), _EXPORTS)
