"""The README's table of supported numpy is the one the live dispatch tables give (fusebind.tools.numpy_table)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from fusebind.api import functions
from fusebind.api.numpy_ufuncs import ELEMENTWISE
from fusebind.dialect.registry import registered_ops
from fusebind.tools import numpy_table

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_table_is_current() -> None:
    err = io.StringIO()
    assert numpy_table.main(["--check", str(README)], err=err) == 0, err.getvalue()


def test_a_stale_table_fails_the_check_and_write_fixes_it(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{numpy_table.BEGIN}\n| old | table |\n{numpy_table.END}\nrest\n")
    err = io.StringIO()
    assert numpy_table.main(["--check", str(doc)], err=err) == 1
    assert err.getvalue() == (f"numpy_table: the table in {doc} is not the one the dispatch tables give now; run "
                              f"`python -m fusebind.tools.numpy_table --write {doc}`\n")
    assert numpy_table.main(["--write", str(doc)]) == 0
    assert doc.read_text() == f"intro\n{numpy_table.BEGIN}\n{numpy_table.table()}{numpy_table.END}\nrest\n"
    assert numpy_table.main(["--check", str(doc)]) == 0
    out = io.StringIO()
    assert numpy_table.main([], out=out) == 0 and out.getvalue() == numpy_table.table()


def test_the_table_lists_what_the_registry_and_the_tables_hold() -> None:
    rows = dict(numpy_table.rows())
    text = numpy_table.table()
    for cls in registered_ops():
        if cls.NUMPY_UFUNC and cls.NUMPY_UFUNC in ELEMENTWISE:
            assert f"`{cls.NUMPY_UFUNC}`" in rows[next(k for k in rows if "NUMPY_UFUNC" in k)]
        if cls.API_NAME and "." not in cls.KIND:
            assert f"`{cls.API_NAME}`" in rows[next(k for k in rows if "API_NAME" in k)]
    assert all(f"`{n}`" in text for n in functions.COMPOSITES)
    assert "`sum`" in rows["numpy functions"] and "`linalg.norm`" in rows["`numpy.linalg` functions"]
    assert "`sort`" not in text and "`cumsum`" in rows["numpy functions"]  # refused names are not listed
    assert f"numpy {np.__version__}" in text
