"""`fusebind.compiler` and `fusebind.runtime` hand out their public names lazily through one resolver
(`compiler/lazy_exports.py`): a name loads its submodule on first use, unknown names are refused,
and importing either package loads no submodule, nor xDSL, nor llvmlite."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import fusebind.compiler
import fusebind.runtime


def test_a_lazy_name_is_the_submodules_object_and_is_kept() -> None:
    from fusebind.compiler.cost import UNKNOWN_COST
    from fusebind.runtime.dtypes import DType

    assert fusebind.runtime.DType is DType and fusebind.compiler.UNKNOWN_COST is UNKNOWN_COST
    assert vars(fusebind.runtime)["DType"] is DType  # cached: __getattr__ is not asked again
    assert {"DType", "Kernel", "__getattr__"} <= set(dir(fusebind.runtime))
    assert "optimize_graph" in dir(fusebind.compiler) and fusebind.compiler.__all__ == sorted(fusebind.compiler._EXPORTS)


@pytest.mark.parametrize("package", [fusebind.compiler, fusebind.runtime], ids=lambda p: p.__name__)
def test_an_unknown_name_is_an_attribute_error_naming_the_package(package: object) -> None:
    with pytest.raises(AttributeError, match=rf"^module '{package.__name__}' has no attribute 'no_such_name'$"):
        package.no_such_name  # type: ignore[attr-defined]
    assert not hasattr(package, "no_such_name")


def test_importing_the_packages_loads_nothing_heavy() -> None:
    code = ("import sys, json; import fusebind.runtime, fusebind.compiler; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('fusebind', 'xdsl', 'llvmlite', 'mlir'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(out.stdout) == ["fusebind", "fusebind.compiler", "fusebind.compiler.lazy_exports", "fusebind.runtime"]
