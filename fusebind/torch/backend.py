"""`torch.compile(model, backend="fusebind")`: the dynamo backend (entry point `torch_dynamo_backends`).

Owns: `fusebind_backend(gm, example_inputs, *, report=None)`.

Dynamo hands over a graph of torch calls; AOTAutograd (`aot_autograd`, torch's functionalization
and its core-aten decompositions) turns it into a graph of aten ops with fake tensors on every node,
which `partition.partition_graph` maps region by region onto `fb.jit` functions. Inference only: a
graph that needs gradients (grad mode on and an input or parameter that requires grad, i.e. a
training step) is returned to torch unchanged, with a `FusebindTorchWarning`; fusebind computes no
backward graphs. Run models under `torch.no_grad()` (or `torch.inference_mode()`), in `eval()` mode.

`report`: a list; each graph compiled appends its `partition.GraphReport` (the fused regions, the
nodes left to torch and why), e.g. `torch.compile(m, backend="fusebind", options={"report": r})`.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import torch
from torch._decomp import core_aten_decompositions
from torch._dynamo.backends.common import aot_autograd
from torch.fx import GraphModule

from fusebind.torch.errors import FusebindTorchWarning
from fusebind.torch.partition import GraphReport, partition_graph

_DECOMPOSITIONS = core_aten_decompositions()


def _grad_required(gm: GraphModule, example_inputs: list[Any]) -> bool:
    if not torch.is_grad_enabled():
        return False
    tensors = [t for t in example_inputs if isinstance(t, torch.Tensor)] + list(gm.parameters())
    return any(t.requires_grad for t in tensors)


def fusebind_backend(gm: GraphModule, example_inputs: list[Any], *, report: list[GraphReport] | None = None,
                     options: dict[str, Any] | None = None) -> Callable[..., Any]:
    """The dynamo backend: fusebind's kernels for what maps, eager torch for the rest."""
    options = dict(options or {})  # torch.compile(..., options={...}) arrives here as one dict
    report = options.pop("report", report)
    if options:
        raise TypeError(f"torch.compile(backend='fusebind'): unknown options {sorted(options)} "
                        f"(the one option is 'report', a list)")
    if _grad_required(gm, example_inputs):
        warnings.warn(FusebindTorchWarning(
            "torch.compile(backend='fusebind') got a graph that needs gradients (grad mode is on and an input "
            "or parameter requires grad); fusebind compiles inference only, so it runs in eager torch. "
            "Call the model under torch.no_grad() or torch.inference_mode()."), stacklevel=2)
        return gm.forward

    def compile_inference(fw: GraphModule, inputs: list[Any]) -> Any:
        graph_report = GraphReport()
        if report is not None:
            report.append(graph_report)
        compiled = partition_graph(fw, graph_report)
        symbolic = [name for name, why in graph_report.eager if "symbolic shape" in why]
        if symbolic:  # dynamo's automatic dynamic shapes (a second size seen): fusebind's regions are static
            warnings.warn(FusebindTorchWarning(
                f"{len(symbolic)} node(s) have symbolic shapes (dynamo recompiled the graph with dynamic shapes) "
                "and run in eager torch; compile with torch.compile(..., backend='fusebind', dynamic=False) "
                "for one fusebind graph per shape"), stacklevel=2)
        return compiled

    return aot_autograd(fw_compiler=compile_inference, decompositions=_DECOMPOSITIONS)(gm, example_inputs)
