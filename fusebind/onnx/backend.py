"""`fusebind.onnx.backend`: the standard ONNX backend module, as `onnxruntime.backend` is one.

`prepare(model, device="CPU", **kw)` imports the model (importer.py) and returns a `FusebindRep`
whose `.run(inputs)` gives the outputs as a list of numpy arrays; `run_model(model, inputs)` is
prepare-then-run, `run_node(node, inputs)` runs one NodeProto as a one-node model.
`supports_device` and `is_compatible` are true for the CPU (`prepare` says why a model is not run).

A model fusebind cannot run (an op or opset it does not implement, a data-dependent shape, control
flow, strings, sequences, an element type it does not have) raises `unittest.SkipTest` from
`prepare`, with the node, op and opset in the reason, so `onnx.backend.test.BackendTest` counts it
as skipped. (Never `BackendIsNotSupposedToImplementIt`: the runner counts that one as a pass.)

A rep compiles once and runs many times: when the model fixes every input shape, `prepare` runs
the function once on zeros of those shapes, which traces and compiles it (and turns a refusal met
while tracing into the SkipTest); later runs at those shapes reuse the compiled plan. Only up to
`WARM_UP_BYTES` of zeros: the shapes are the (untrusted) file's claim.

Must not: know any op's meaning (the handlers do).
"""

from __future__ import annotations

import unittest
from typing import Any, Sequence

import numpy as np
import onnx
from onnx.backend.base import BackendRep

from fusebind.dialect.errors import UnsupportedOperation
from fusebind.onnx.importer import ImportedModel, import_model
from fusebind.onnx.registry import UnsupportedModel


class FusebindRep(BackendRep):
    """A prepared model: `run(inputs)` -> list of numpy arrays, one per graph output."""

    def __init__(self, imported: ImportedModel) -> None:
        self.imported = imported

    @property
    def input_names(self) -> list[str]:
        return self.imported.input_names

    @property
    def output_names(self) -> list[str]:
        return self.imported.output_names

    def run(self, inputs: Any, **kwargs: Any) -> list[np.ndarray]:  # noqa: ARG002 (the protocol's kwargs)
        names = self.imported.input_names
        if isinstance(inputs, dict):
            missing = [n for n in names if n not in inputs]
            if missing:
                raise KeyError(f"fusebind.onnx: inputs {missing} were not given")
            arrays = [inputs[n] for n in names]
        elif isinstance(inputs, (list, tuple)):
            arrays = list(inputs)
        else:
            arrays = [inputs]
        return self.imported.run(*arrays)

    def explain(self, inputs: Sequence[Any]) -> Any:
        return self.imported.explain(*inputs)


#: the most bytes of zeros `prepare` allocates to warm a model up: the input shapes are the file's
#: claim (an untrusted one: [100000, 100000] is 40 GB); beyond this the first real run compiles
WARM_UP_BYTES = 64 << 20


def _warm_up(imported: ImportedModel) -> None:
    """Trace and compile at the model's own input shapes, when it fixes them all (and they are small)."""
    if imported.params:  # zeros are no values for a shape or axes input: the first real run compiles
        return
    zeros = []
    total = 0
    for shape, dtype in imported.input_types:
        if shape is None or dtype is None or any(d is None for d in shape):
            return
        total += int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize
        if total > WARM_UP_BYTES:
            return
    for shape, dtype in imported.input_types:
        zeros.append(np.zeros(shape, dtype=dtype))
    try:
        imported.run(*zeros)
    except (UnsupportedModel, UnsupportedOperation):
        raise
    except Exception:  # a data-dependent failure on zeros is the real run's to report, with its data
        return


def prepare(model: Any, device: str = "CPU", **kwargs: Any) -> FusebindRep:
    """`model` (a ModelProto, path or bytes) imported and compiled for `device` ("CPU")."""
    if not supports_device(device):
        raise unittest.SkipTest(f"fusebind runs on the CPU only, not {device!r}")
    try:
        imported = import_model(model, **{k: v for k, v in kwargs.items() if k in ("target_opset", "const_limit")})
        _warm_up(imported)
    except UnsupportedModel as e:
        raise unittest.SkipTest(str(e)) from e
    except UnsupportedOperation as e:  # a refusal while tracing that no handler named its node for
        raise unittest.SkipTest(f"fusebind.onnx: {e}") from e
    return FusebindRep(imported)


def run_model(model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> list[np.ndarray]:
    return prepare(model, device, **kwargs).run(inputs)


def run_node(node: onnx.NodeProto, inputs: Sequence[Any], device: str = "CPU", outputs_info: Any = None,
             **kwargs: Any) -> list[np.ndarray]:
    """One node run as a one-node model of the default opset, its inputs typed by the arrays given."""
    arrays = [np.asarray(x) for x in inputs]
    ins = [onnx.helper.make_tensor_value_info(name, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
           for name, a in zip(node.input, arrays)]
    outs = [onnx.helper.make_tensor_value_info(name, 0, None) for name in node.output]
    graph = onnx.helper.make_graph([node], "run_node", ins, outs)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", kwargs.pop("opset", 21))])
    return run_model(model, arrays, device, **kwargs)


def supports_device(device: str) -> bool:
    return str(device).upper() == "CPU"


def is_compatible(model: Any, device: str = "CPU", **kwargs: Any) -> bool:  # noqa: ARG001
    """True for the CPU: whether fusebind runs a model is `prepare`'s to say, with the reason (a False
    here would make the runner skip without one, and import the model twice)."""
    return supports_device(device)


def is_opset_supported(model: Any) -> tuple[bool, str]:
    try:
        import_model(model)
    except UnsupportedModel as e:
        return False, str(e)
    return True, ""


__all__ = ["FusebindRep", "is_compatible", "is_opset_supported", "prepare", "run_model", "run_node",
           "supports_device"]
