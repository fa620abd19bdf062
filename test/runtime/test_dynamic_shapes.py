"""Dynamic dims in the runtime (docs/DYNAMIC-SHAPES.md): generalizing a function (the reverse of
specialize.py), the fingerprint that decides whether a trace serves another size, the shape
policy, an executor of a `?` function compiling each region once, its rows' caps and how
explain names them."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from fusebind.api.jit import default_optimizer
from fusebind.dialect import parse_module, print_module
from fusebind.runtime.bindings import global_bindings
from fusebind.runtime.executor import Executor
from fusebind.runtime.fused_kernels import CAP_SHAPE_DYNAMIC, CAP_SPLIT_AXIS0
from fusebind.runtime.jit import _splits_dynamic
from fusebind.runtime.resolve import row_is_dynamic, row_shapes
from fusebind.runtime.specialize import (
    ShapePolicy,
    dynamic_dims,
    fingerprint,
    generalize_function,
    mask_fits,
    no_data,
)

pytestmark = pytest.mark.usefixtures("isolated_bindings")


def func_of(text: str):
    return next(iter(parse_module(text).ops))


def chain(n: int | str, reshape: bool = False) -> str:
    """x * w, tanh; with `reshape`, then flattened to the constant n * 64."""
    t = f"tensor<{n}x64xf32>"
    flat = f"tensor<{64 * n if isinstance(n, int) else '?'}xf32>"
    tail = (f"  %r = prim.reshape %b : {t} -> {flat}\n  func.return %r : {flat}\n" if reshape
            else f"  func.return %b : {t}\n")
    return (f"func.func @f(%x: {t}, %w: tensor<64xf32>) -> {flat if reshape else t} {{\n"
            f"  %a = prim.mul %x, %w : ({t}, tensor<64xf32>) -> {t}\n"
            f"  %b = prim.tanh %a : {t} -> {t}\n" + tail + "}\n")


def test_generalize_re_infers_every_value_and_keeps_what_an_op_pins() -> None:
    mask = dynamic_dims([(8, 64), (64,)], ((True, False), (False,)))
    assert mask == ((True, False), (False,))
    text = print_module(ModuleOp([generalize_function(func_of(chain(8)), mask)]))
    assert "%x: tensor<?x64xf32>" in text and "-> tensor<?x64xf32>" in text and "tensor<64xf32>" in text
    pinned = print_module(ModuleOp([generalize_function(func_of(chain(8, True)), mask)]))
    assert "prim.reshape %b : tensor<?x64xf32> -> tensor<512xf32>" in pinned  # the op's own target


def test_sizes_zero_and_one_are_never_dynamic_and_mask_fits_says_which_calls_fit() -> None:
    assert dynamic_dims([(0, 5), (1, 7), ()]) == ((False, True), (False, True), ())
    mask, pattern = ((True, False),), ((8, 64),)
    assert mask_fits(mask, pattern, [(9, 64)]) and mask_fits(mask, pattern, [(2, 64)])
    assert not mask_fits(mask, pattern, [(1, 64)]) and not mask_fits(mask, pattern, [(0, 64)])
    assert not mask_fits(mask, pattern, [(9, 65)]) and not mask_fits(mask, pattern, [(9, 64, 1)])


def test_fingerprint_is_equal_across_sizes_unless_an_op_depends_on_the_size() -> None:
    mask = ((True, False), (False,))
    assert fingerprint(func_of(chain(8)), mask) == fingerprint(func_of(chain(9)), mask)
    assert fingerprint(func_of(chain(8)), ((False, False), (False,))) != fingerprint(
        func_of(chain(9)), ((False, False), (False,)))
    assert fingerprint(func_of(chain(8, True)), mask) != fingerprint(func_of(chain(9, True)), mask)


def test_the_shape_policy_automatic_true_and_false() -> None:
    probes: list[list[tuple[int, ...]]] = []

    def probe(shapes):
        probes.append(shapes)
        return parse_module(chain(shapes[0][0]))

    auto = ShapePolicy(None)
    assert auto.entry("k", [(8, 64), (64,)], parse_module(chain(8)), probe) is None  # first size: static
    made = auto.entry("k", [(9, 64), (64,)], parse_module(chain(9)), probe)
    assert made is not None and made.mask == ((True, False), (False,)) and probes == []
    assert auto.entry("k", [(30, 64), (64,)], parse_module(chain(30)), probe) is made
    assert auto.entry("k", [(1, 64), (64,)], parse_module(chain(1)), probe) is None
    eager = ShapePolicy(True)
    first = eager.entry("k", [(8, 64), (64,)], parse_module(chain(8)), probe)
    assert first is not None and first.mask == ((True, True), (True,))  # every dim of size >= 2
    assert probes == [[(9, 65), (65,)]]  # one probe, each dim one larger
    assert ShapePolicy(False).entry("k", [(9, 64), (64,)], parse_module(chain(9)), probe) is None
    assert no_data((3, 1 << 40), np.float32).strides == (0, 0)


def test_an_executor_of_a_dynamic_function_compiles_each_region_once() -> None:
    ex = Executor(parse_module(chain("?")), optimize=default_optimizer("cpu"), dynamic=True, threads=1)
    w = np.linspace(-1, 1, 64, dtype=np.float32)
    for n in range(2, 8):
        x = np.random.default_rng(n).standard_normal((n, 64)).astype(np.float32)
        np.testing.assert_allclose(ex(x, w), np.tanh(x * w), rtol=2e-6, atol=1e-7)
    assert ex.stats.compiles + ex.stats.object_cache_hits == 1 and ex.stats.arms.fused_calls == 6
    d = ex.plan_for([x, w]).decisions[0]
    assert d.arm == "fused" and d.fused_cost.is_known  # priced again at this call's shapes
    assert d.kernel.row.caps == frozenset({"shape=?x64,64,?x64"})
    assert row_is_dynamic(d.kernel.row) and row_shapes(d.kernel.row) == "dynamic kernel for ?x64,64,?x64"
    assert "shapes: dynamic trace x: float32[?,64], w: float32[64]" in ex.explain([x, w])


def test_a_dynamic_leading_dim_lets_an_elementwise_region_run_in_chunks() -> None:
    src = ("func.func @g(%x: tensor<?x64xf32>, %y: tensor<?x64xf32>) -> tensor<?x64xf32> {\n"
           "  %a = prim.mul %x, %y : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>\n"
           "  %b = prim.exp %a : tensor<?x64xf32> -> tensor<?x64xf32>\n"
           "  func.return %b : tensor<?x64xf32>\n}\n")
    result = default_optimizer("cpu")(parse_module(src), global_bindings())
    (item,) = result.work_order
    assert _splits_dynamic(item.region)
    broadcast = default_optimizer("cpu")(parse_module(chain("?")), global_bindings()).work_order[0]
    assert not _splits_dynamic(broadcast.region)  # w (64) has a lower rank: chunks would misread it
    static = default_optimizer("cpu")(parse_module(src.replace("?", "8")), global_bindings()).work_order[0]
    assert not _splits_dynamic(static.region)
    ex = Executor(parse_module(src), optimize=default_optimizer("cpu"), dynamic=True, threads=2)
    x = np.random.default_rng(1).standard_normal((6, 64)).astype(np.float32)
    np.testing.assert_allclose(ex(x, x), np.exp(x * x), rtol=2e-6)
    row = ex.plan_for([x, x]).decisions[0].kernel.row
    assert CAP_SPLIT_AXIS0 in row.caps and CAP_SHAPE_DYNAMIC not in row.caps


def test_row_shapes_names_static_dynamic_and_silent_rows() -> None:
    class Row:  # the one field row_shapes and row_is_dynamic read
        def __init__(self, *caps: str) -> None:
            self.caps = frozenset(caps)

    assert row_shapes(Row("shape=8x64,64")) == "static kernel for 8x64,64"
    assert row_shapes(Row(CAP_SHAPE_DYNAMIC, CAP_SPLIT_AXIS0)) == "dynamic kernel for any shape"
    assert row_shapes(Row()) == "" and not row_is_dynamic(Row("shape=8x64")) and row_is_dynamic(Row("shape=?"))
