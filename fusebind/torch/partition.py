"""An aten FX graph -> the same graph with its fusebind-mappable parts as `fb.jit` functions.

Owns: `unsupported_reason` (why a node stays in eager torch, or None), `partition_graph` (the
graph with each maximal supported region replaced by a `FusedPartition`), `FusedPartition` and
`GraphReport`.

Partitioning is torch's own `CapabilityBasedPartitioner` over `unsupported_reason`: it groups
supported nodes into the largest regions that create no cycle, so the eager nodes in between run
unchanged and a model always runs. A region of one node is kept only when it computes something
worth a kernel (a matmul, a conv); a region of shape ops alone is left to torch (its views are free).
Each region is interpreted once, under `fb.jit`, by the rules of `rules.RULES`; its values check
their dtype and shape against the node's fake tensor while tracing, so a rule that disagreed with
torch would be a clear `FusebindTorchError`, never a wrong answer.
"""

from __future__ import annotations

import operator
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import GraphModule, Node, map_arg
from torch.fx.node import _get_qualified_name
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

import fusebind as fb
from fusebind.torch import aten_elementwise, aten_structured  # noqa: F401 (they fill RULES)
from fusebind.torch.crossing import NP_OF_TORCH, to_numpy, to_torch
from fusebind.torch.errors import FusebindTorchError, FusebindTorchWarning
from fusebind.torch.rules import RULES, aten, meta

#: ops that move no data (the partitioner trims them from a region's ends and does not count them)
_NON_COMPUTE = [aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.permute.default,
                aten.squeeze.dims, aten.squeeze.dim, aten.squeeze.default, aten.unsqueeze.default, aten.expand.default,
                aten.clone.default, aten.alias.default, aten.select.int, aten.slice.Tensor, aten.t.default,
                aten.transpose.int, aten.flatten.using_ints, operator.getitem]
#: ops worth a region of their own
_SINGLE = [aten.mm.default, aten.bmm.default, aten.addmm.default, aten.convolution.default,
           aten._softmax.default, aten._log_softmax.default, aten.native_layer_norm.default,
           aten.max_pool2d_with_indices.default, aten.avg_pool2d.default, aten.gelu.default]


def _tensor_reason(v: Any, what: str) -> str | None:
    if not isinstance(v, torch.Tensor):
        return f"{what} is {type(v).__name__}, not a tensor"
    if v.device.type != "cpu" or v.layout != torch.strided:
        return f"{what} is on {v.device} / {v.layout}"
    if v.dtype not in NP_OF_TORCH:
        return f"{what} is {v.dtype}, a dtype fusebind does not carry"
    if any(not isinstance(d, int) for d in v.shape):
        return f"{what} has a symbolic shape {tuple(v.shape)}"
    return None


def unsupported_reason(node: Node) -> str | None:
    """None when the node maps onto fusebind, else why it stays in eager torch."""
    if node.op != "call_function":
        return f"{node.op} {node.target}"
    if node.target is operator.getitem:
        src = node.args[0]
        return unsupported_reason(src) if isinstance(src, Node) else "getitem of a non-node"
    r = RULES.get(node.target)
    if r is None:
        return f"{node.target} has no fusebind rule"
    outs = meta(node)
    for i, v in enumerate(outs if isinstance(outs, (tuple, list)) else [outs]):
        reason = _tensor_reason(v, f"{node.target}'s output {i}")
        if reason:
            return reason
    bad: list[str] = []
    map_arg((node.args, node.kwargs), lambda a: bad.append(_tensor_reason(meta(a), f"operand {a.name}") or "") or a)
    if any(bad):
        return next(b for b in bad if b)
    return r.check(node) if r.check else None


class _Support(OperatorSupportBase):
    def is_node_supported(self, submodules: Any, node: Node) -> bool:
        return unsupported_reason(node) is None


@dataclass
class GraphReport:
    """What one compiled graph became: fused regions (node names) and the nodes left to torch (reason)."""
    partitions: list[list[str]] = field(default_factory=list)
    eager: list[tuple[str, str]] = field(default_factory=list)
    fallbacks: list[str] = field(default_factory=list)  # regions that raised under fb.jit and run eagerly


def _check(node: Node, v: Any, want: Any) -> None:
    if isinstance(want, (tuple, list)):
        for x, w in zip(v, want):
            _check(node, x, w)
        return
    shape, dt = tuple(int(d) for d in want.shape), NP_OF_TORCH[want.dtype]
    if tuple(v.shape) != shape or v.dtype != dt:
        raise FusebindTorchError(f"the rule for {node.target} gave {v.dtype}{list(v.shape)} where torch gives "
                                 f"{dt}{list(shape)} (node {node.name}); this is a fusebind bug: report it")


def _interpreter(sub: GraphModule) -> Any:
    nodes = list(sub.graph.nodes)
    params = [n for n in nodes if n.op == "placeholder"]
    out = next(n for n in nodes if n.op == "output")

    def run(*arrays: Any) -> Any:
        env: dict[Node, Any] = dict(zip(params, arrays))
        for n in nodes:
            if n.op != "call_function":
                continue
            args, kwargs = map_arg((n.args, n.kwargs), lambda a: env[a])
            env[n] = RULES[n.target].impl(n, *args, **kwargs)
            if n.target is not operator.getitem:
                _check(n, env[n], meta(n) if not isinstance(meta(n), (tuple, list)) else meta(n)[:len(env[n])])
        return map_arg(out.args[0], lambda a: env[a])
    return run, out.args[0]


class FusedPartition(torch.nn.Module):
    """One region as one `fb.jit` function: tensors in and out as views (crossing.py), no copies."""

    def __init__(self, sub: GraphModule, name: str, report: GraphReport) -> None:
        super().__init__()
        run, result = _interpreter(sub)
        self.eager = sub
        self.fn = fb.jit(run, dynamic=False)
        self.name = name
        self.report = report
        self.tuple_out = isinstance(result, (tuple, list))
        self.metas = [meta(n) for n in (result if self.tuple_out else [result])]
        self.ok = False

    def forward(self, *tensors: torch.Tensor) -> Any:
        if self.fn is None:
            return self.eager(*tensors)
        arrays = [to_numpy(t) for t in tensors]
        try:
            outs = self.fn(*arrays)
        except fb.FusebindError as e:
            if self.ok:
                raise  # a region that ran before: this call's own error (an index out of bounds, ...)
            warnings.warn(FusebindTorchWarning(f"fusebind could not compile region {self.name} "
                                               f"({type(e).__name__}: {e}); it runs in eager torch"), stacklevel=2)
            self.report.fallbacks.append(self.name)
            self.fn = None
            return self.eager(*tensors)
        self.ok = True
        res = [self._tensor(a, m) for a, m in zip(outs if self.tuple_out else [outs], self.metas)]
        return tuple(res) if self.tuple_out else res[0]

    # the graph calls the region directly: nn.Module.__call__'s hook machinery costs more than a small kernel
    __call__ = forward

    @classmethod
    def _tensor(cls, a: Any, m: Any) -> Any:
        if isinstance(m, (tuple, list)):  # a multi-output node (layer norm's statistics): its getitems are torch's
            return tuple(cls._tensor(x, mx) for x, mx in zip(a, m))
        t = to_torch(a)
        if any(n > 1 and s != sm for n, s, sm in zip(t.shape, t.stride(), m.stride())):
            # torch's ops after this one may read it by its strides (as_strided): lay it out as torch would
            s = torch.empty_strided(tuple(m.shape), m.stride(), dtype=m.dtype)
            s.copy_(t)
            return s
        return t


def partition_graph(gm: GraphModule, report: GraphReport) -> GraphModule:
    """The graph with every supported region as a `FusedPartition` (the rest unchanged)."""
    for n in gm.graph.nodes:
        if n.op == "call_function":
            reason = unsupported_reason(n)
            if reason:
                report.eager.append((n.name, reason))
    partitioner = CapabilityBasedPartitioner(
        gm, _Support(), allows_single_node_partition=False,
        non_compute_ops=[_get_qualified_name(t) for t in _NON_COMPUTE],
        allowed_single_node_partition_ops=[_get_qualified_name(t) for t in _SINGLE])
    partitions = partitioner.propose_partitions()
    partitioner.remove_bookend_non_compute_ops(partitions)
    partitions = [p for p in partitions if p.size() > 0]
    if not partitions:
        return gm
    fused = partitioner.fuse_partitions(partitions, prefix="fusebind_")
    for n in list(fused.graph.nodes):
        if n.op == "call_module" and str(n.target).startswith("fusebind_"):
            sub = getattr(fused, n.target)
            if not any(m.op == "placeholder" for m in sub.graph.nodes):
                continue  # constants only: nothing to cross, torch makes them as fast
            report.partitions.append([m.name for m in sub.graph.nodes if m.op == "call_function"])
            setattr(fused, n.target, FusedPartition(sub, n.target, report))
    fused.recompile()
    return fused
