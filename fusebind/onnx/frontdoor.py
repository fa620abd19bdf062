"""`fusebind.onnx.load(path_or_proto)`: an ONNX model as a callable, like `fb.compile`'s.

Owns `OnnxFunction`: `f(*inputs)` runs the model (inputs in graph-input order, or by name as
keywords) and returns its output (one array) or a tuple of them, as `fb.compile`'s callable
does; `.explain(*inputs)` and `.mlir(*inputs)` show the regions and the traced prim module for
inputs like these; `.input_names`, `.output_names`, `.input_types` describe the graph;
`.imported` is the importer's `ImportedModel`. The model is imported (upgraded, shape-inferred,
every node checked) once, at `load`; each input signature traces and compiles once.

Must not: know any op's meaning (the handlers do) or how the graph is imported (importer.py).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fusebind.api.errors import ArgumentError
from fusebind.onnx.importer import ImportedModel, import_model


class OnnxFunction:
    """A loaded ONNX model (see the module docstring)."""

    def __init__(self, imported: ImportedModel) -> None:
        self.imported = imported

    @property
    def input_names(self) -> list[str]:
        return list(self.imported.input_names)

    @property
    def output_names(self) -> list[str]:
        return list(self.imported.output_names)

    @property
    def input_types(self) -> list[tuple[tuple[int | None, ...] | None, np.dtype | None]]:
        return list(self.imported.input_types)

    def _inputs(self, args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
        if not kwargs:
            return list(args)
        names = self.input_names
        unknown = sorted(set(kwargs) - set(names))
        if unknown:
            raise ArgumentError(f"fusebind.onnx: the model has no input {', '.join(map(repr, unknown))}; its inputs "
                                f"are {', '.join(names)}")
        given = dict(zip(names, args))
        twice = sorted(set(given) & set(kwargs))
        if twice:
            raise ArgumentError(f"fusebind.onnx: input {', '.join(map(repr, twice))} given twice (by position and "
                                "by name)")
        given.update(kwargs)
        missing = [n for n in names if n not in given]
        if missing:
            raise ArgumentError(f"fusebind.onnx: missing input {', '.join(map(repr, missing))} (the model takes "
                                f"{', '.join(names)})")
        return [given[n] for n in names]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        outs = self.imported.run(*self._inputs(args, kwargs))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def run(self, *args: Any, **kwargs: Any) -> list[np.ndarray]:
        """The outputs as a list (every output, in graph order)."""
        return self.imported.run(*self._inputs(args, kwargs))

    def explain(self, *args: Any, **kwargs: Any) -> str:
        return self.imported.explain(*self._inputs(args, kwargs))

    def mlir(self, *args: Any, **kwargs: Any) -> str:
        return self.imported.mlir(*self._inputs(args, kwargs))

    def jit_call(self, *args: Any) -> tuple[Any, list[np.ndarray]]:
        """(the `fb.jit` function, its argument list) that a call with these inputs runs: the inputs
        that are not op parameters, then the weights (what the CLI's report inspects)."""
        arrays = [np.asarray(a) for a in self._inputs(args, {})]
        imp = self.imported
        fn = imp.fn_for(arrays)
        call = [a for n, a in zip(imp.input_names, arrays) if n not in imp.params] + list(imp.weights)
        return fn, call

    def __repr__(self) -> str:
        return (f"<fusebind.onnx model {self.imported.model.graph.name!r}: "
                f"{', '.join(self.input_names)} -> {', '.join(self.output_names)}>")


def load(model: Any, **options: Any) -> OnnxFunction:
    """`model` (a path, bytes or `onnx.ModelProto`) as an `OnnxFunction`. `options` go to the
    importer (`target_opset`, `const_limit`, `trusted`, `max_initializer_bytes`) and to `fb.jit`
    (`background`, `verify`, ...). A model fusebind does not run raises
    `fusebind.onnx.UnsupportedModel` (a `TypeError`) naming the node, op and opset; one that is not
    valid ONNX, reads external data from outside its directory or claims more than the budget,
    `fusebind.onnx.trust.InvalidModel` (a `ValueError`; docs/RELIABILITY.md, the ONNX trust model)."""
    return OnnxFunction(import_model(model, **options))


__all__ = ["OnnxFunction", "load"]
