"""docs/SCALAR-BUILDER.md: its worked user op and its check run as written, and every method the
page documents is in the protocol and in both builders."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from fusebind.dialect.scalar import NumpyScalarBuilder, ScalarBuilder
from fusebind.lowering.scalar_text import TextScalarBuilder

DOC = (Path(__file__).resolve().parents[2] / "docs" / "SCALAR-BUILDER.md").read_text()


def test_the_worked_op_and_its_check_run_as_documented() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC, re.S)
    op_block, check_block = blocks
    class_only = op_block.split("softplus = fb.register_op")[0]  # registering is the API's (fb.register_op)
    ns: dict = {}
    exec(class_only, ns)
    exec(check_block, ns)  # raises if the body and the reference disagree
    x = np.array([-100.0, 0.0, 100.0], np.float32)
    np.testing.assert_allclose(ns["op"].scalar_body(NumpyScalarBuilder(), x), [0.0, np.log(2.0), 100.0], rtol=1e-6)


def test_every_documented_method_is_in_the_protocol_and_both_builders() -> None:
    table = DOC.split("## Methods")[1].split("##")[0]
    documented = set(re.findall(r"`([a-z_]+)\(", table))
    protocol = {n for n in vars(ScalarBuilder) if not n.startswith("_")}
    assert documented == protocol
    for builder in (NumpyScalarBuilder, TextScalarBuilder):
        assert all(callable(getattr(builder, n, None)) for n in protocol), builder
