"""The ONNX backend test suite, run on `fusebind.onnx.backend` at the suite's own tolerances.

`onnx.backend.test.BackendTest(fusebind.onnx.backend, __name__)` with `.include(r"^test_.*_cpu$")`:
under FUSEBIND_LONG=1 every cpu case (2033 with onnx 1.23.2) runs. By default a fixed,
representative slice runs (`SLICE`, below: ~one case family per op group the importer claims,
elementwise, comparisons, casts, reductions, arg-reductions, matmul/gemm, shape/layout and the
composites with their `*_expanded` forms, the conv/pool families), chosen so that it fits in
about a minute on a loaded machine: the cases of a family share shapes and dtypes, so their kernels
hit the object cache and the static kernels. The model kinds (`real`, `simple`, `pytorch-converted`,
`pytorch-operator`) run by default too, but for the cases `fusebind.onnx.coverage.MODEL_LONG_ONLY`
names (seven of the nine full-size CNNs of `real`, 5 to 20 s each: squeezenet and resnet50 run
by default), which run under FUSEBIND_LONG=1; docs/ONNX-COVERAGE.md lists both.

A case fusebind does not run is skipped by `prepare` with the node, op and opset in the reason; a
failure is a wrong value, shape or dtype (or an error that is not a refusal). The cases the runner
filters out (other devices, other families) are removed rather than reported as skipped, so the
counts are of the cases run.

FUSEBIND_ONNX_RESULTS=path writes {case: [outcome, reason]} as JSON at exit, the input of
`python -m fusebind.onnx.coverage --results path --write docs/ONNX-COVERAGE.md`.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import re
import unittest
import warnings

import onnx.backend.test

import fusebind.onnx.backend as fusebind_backend
from fusebind.onnx.coverage import MODEL_KINDS, MODEL_LONG_ONLY

LONG = os.environ.get("FUSEBIND_LONG", "").strip() in ("1", "true", "yes", "on")

#: the default slice: one or two case families per op group (a case runs when its name matches)
SLICE = (
    r"^test_(abs|neg|exp|log|sqrt|relu|sigmoid|tanh|reciprocal|floor|sign|round|erf)_cpu$",
    r"^test_(add|sub|mul|div|pow)(_bcast)?_cpu$", r"^test_mod_mixed_sign_(int32|float32)_cpu$",
    r"^test_(equal|less|greater|and|or|xor)(_bcast)?(3d)?_cpu$",
    r"^test_(max|min|sum|mean)_example_cpu$", r"^test_where_example_cpu$", r"^test_clip(_splitbounds)?_cpu$",
    r"^test_cast_(FLOAT_to_DOUBLE|DOUBLE_to_FLOAT)_cpu$",
    r"^test_reduce_(sum|mean|max|l2|log_sum_exp)_keepdims_random_cpu$",
    r"^test_reduce_(min|prod|sum_square)_do_not_keepdims_example_cpu$",
    r"^test_reduce_sum_(empty_axes_input_noop|negative_axes_keepdims)_example_cpu$",
    r"^test_arg(max|min)_keepdims_example(_select_last_index)?_cpu$",
    r"^test_matmul_(2d|3d)_cpu$", r"^test_gemm_(default_no_bias|all_attributes|transposeA)_cpu$",
    r"^test_(reshape_negative_dim|reshape_zero_dim|transpose_default|concat_2d_axis_0|squeeze|unsqueeze_axis_0"
    r"|flatten_axis1|gather_0|slice|split_equal_parts_1d_opset18|expand_dim_changed|tile)_cpu$",
    r"^test_(softmax_axis_1|logsoftmax_axis_1|layer_normalization_2d_axis1|gelu_default_1)(_expanded)?_cpu$",
    r"^test_gelu_tanh_1_cpu$",
    r"^test_(basic_conv_with_padding|conv_with_strides_and_asymmetric_padding|conv_with_autopad_same"
    r"|maxpool_2d_pads|maxpool_2d_ceil|maxpool_with_argmax_2d_precomputed_strides|averagepool_2d_pads_count_include_pad"
    r"|averagepool_2d_same_lower|globalaveragepool|lppool_2d_strides|lrn|convtranspose_pads)_cpu$",
)
INCLUDE = r"^test_.*_cpu$" if LONG else "|".join(f"(?:{p})" for p in SLICE)
#: the classes of the model kinds: their cases run by default but for MODEL_LONG_ONLY
MODEL_CLASSES = frozenset(MODEL_KINDS.values())

#: case -> [outcome, reason], for the coverage doc (FUSEBIND_ONNX_RESULTS)
RESULTS: dict[str, list[str]] = {}


def _recorded(name: str, fn):
    """`fn` (a case's test method) recording its outcome in RESULTS; the outcome itself is unchanged."""
    @functools.wraps(fn)
    def run(self, *args, **kwargs):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # the cases' data on purpose holds inf/nan
                out = fn(self, *args, **kwargs)
        except unittest.SkipTest as e:
            RESULTS[name] = ["skip", str(e)]
            raise
        except AssertionError as e:
            RESULTS[name] = ["fail", str(e).strip().splitlines()[0][:300] if str(e).strip() else "AssertionError"]
            raise
        except Exception as e:
            RESULTS[name] = ["error", f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"]
            raise
        RESULTS[name] = ["pass", ""]
        return out
    return run


def _wanted(cls_name: str, name: str) -> bool:
    if cls_name in MODEL_CLASSES:
        return name.endswith("_cpu") and (LONG or name not in MODEL_LONG_ONLY)
    return re.search(INCLUDE, name) is not None


#: node-case exports the default run does not generate: onnx builds every node case at collection by
#: running its `export_*` function (the reference implementation computes the expected outputs), and
#: these three 3-d pooling exports are 7 of its 9 s of CPU (measured, onnx 1.23.2). Each makes exactly
#: the one case `test_<name>` (checked under FUSEBIND_LONG=1, which runs them all), none in SLICE.
DEFAULT_UNBUILT = {"AveragePool": "export_averagepool_3d_default", "LpPool": "export_lppool_3d_default",
                   "MaxPool": "export_maxpool_3d_default"}


@contextlib.contextmanager
def _default_exports_only():
    """While onnx builds its node cases, the exports of DEFAULT_UNBUILT are not run (default runs only)."""
    from onnx.backend.test.case import base

    if LONG:
        yield
        return
    init = base._Exporter.__init__

    def filtered(cls, name, bases, dct):
        init(cls, name, bases, {k: v for k, v in dct.items() if DEFAULT_UNBUILT.get(name) != k})
    base._Exporter.__init__ = filtered
    try:
        yield
    finally:
        base._Exporter.__init__ = init


def _cases() -> dict[str, type]:
    with _default_exports_only():
        bt = onnx.backend.test.BackendTest(fusebind_backend, __name__)
    bt.include(r"^test_.*_cpu$")  # (which cases run: _wanted, per class)
    cases = bt.test_cases
    for cls_name, cls in cases.items():
        for name in [n for n in vars(cls) if n.startswith("test_")]:
            fn = vars(cls)[name]
            if getattr(fn, "__unittest_skip__", False) and getattr(fn, "__unittest_skip_why__", "") in (
                    "no matched include pattern", "Backend doesn't support device CUDA"):
                delattr(cls, name)  # filtered out by the runner: not a case of this run
            elif not _wanted(cls_name, name):
                delattr(cls, name)
            else:
                setattr(cls, name, _recorded(name, fn))
    return {k: v for k, v in cases.items() if any(n.startswith("test_") for n in vars(v))}


_CASES = _cases()
globals().update(_CASES)


def _write_results() -> None:
    path = os.environ.get("FUSEBIND_ONNX_RESULTS")
    if path and RESULTS:
        with open(path, "w") as f:
            json.dump(RESULTS, f, indent=0, sort_keys=True)


atexit.register(_write_results)


def test_coverage_doc_names_model_skips_and_which_cases_run_by_default(monkeypatch):
    """docs/ONNX-COVERAGE.md's model section: every model case that does not pass, with its reason,
    the counts per kind, and the default / FUSEBIND_LONG=1 lists (coverage.MODEL_LONG_ONLY)."""
    from fusebind.onnx import coverage
    from fusebind.onnx.coverage import _model_section

    monkeypatch.setitem(coverage.KNOWN_FAILURES, "test_resnet50_cpu", "its analysis")

    results = {"test_gradient_of_add_cpu": ["skip", "node 'my_gradient' (Gradient, opset 1): no | handler"],
               "test_squeezenet_cpu": ["pass", ""], "test_resnet50_cpu": ["fail", "Not equal"],
               "test_abs_cpu": ["pass", ""]}
    text = "\n".join(_model_section(results))
    assert "| test_gradient_of_add_cpu | simple | skip | node 'my_gradient' (Gradient, opset 1): no \\| handler |" in text
    assert "| test_resnet50_cpu | real | fail | Not equal: its analysis |" in text
    assert "test_squeezenet_cpu |" not in text and "test_abs_cpu" not in text  # (passing; a node case)
    assert "| real | 9 | 1 | 1 | 0 | 7 |" in text
    assert "| all | 149 | 1 | 1 | 1 | 146 |" in text
    long_line = next(line for line in text.splitlines() if line.startswith("`test_bvlc_alexnet_cpu`"))
    assert "`test_vgg19_cpu`" in long_line and "`test_resnet50_cpu`" not in long_line
    default_line = next(line for line in text.splitlines() if line.startswith("By default: "))
    assert "`test_squeezenet_cpu`" in default_line and "`test_resnet50_cpu`" in default_line
    assert "`test_operator_conv_cpu`" in default_line and "`test_vgg19_cpu`" not in default_line
    assert default_line.count("`test_") == 142


def test_the_exports_a_default_run_skips_make_no_case_it_runs():
    """The case each DEFAULT_UNBUILT export makes, `test_<name>`, is outside the default slice (so not
    building it loses no default case), and FUSEBIND_LONG=1 builds it."""
    for export in DEFAULT_UNBUILT.values():
        case = "test_" + export[len("export_"):] + "_cpu"
        assert re.search("|".join(f"(?:{p})" for p in SLICE), case) is None, case
        if LONG:  # (built and run under FUSEBIND_LONG=1)
            assert any(case in vars(cls) for cls in _CASES.values()), case
