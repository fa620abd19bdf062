"""The mutable view of one ONNX graph that fold.py's rewrites work on: its nodes, the readers of
each value, its constants (initializers, and values computed from constants by Constant /
ConstantOfShape / Identity / Cast / the reshapes), fresh names, and what a rewrite removed.

Owns `FoldGraph`. `commit()` writes the result back into the model (the caller's copy).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from onnx import helper, numpy_helper


@dataclass
class FoldGraph:
    """The mutable view of one graph: nodes, consumers, constants, and what was removed."""

    model: Any
    nodes: list = field(default_factory=list)
    removed: set = field(default_factory=set)  # node ids
    new_inits: list = field(default_factory=list)
    dead: set = field(default_factory=set)  # value names no longer produced or used

    def __post_init__(self) -> None:
        g = self.model.graph
        self.nodes = list(g.node)
        self.inits = {t.name: t for t in g.initializer}
        self.outputs = {o.name for o in g.output}
        self.producer = {o: n for n in self.nodes for o in n.output if o}
        self.uses: dict[str, int] = defaultdict(int)
        self.readers: dict[str, list] = defaultdict(list)  # (may hold stale entries: consumer() rechecks)
        for n in self.nodes:
            for i in n.input:
                if i:
                    self.uses[i] += 1
                    self.readers[i].append(n)
        self.names = set(self.inits) | set(self.producer) | {i.name for i in g.input}
        self.opset = next((int(i.version) for i in self.model.opset_import if i.domain in ("", "ai.onnx")), 1)
        self.shapes = {}
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            t = vi.type.tensor_type
            if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
                self.shapes[vi.name] = tuple(d.dim_value for d in t.shape.dim)
        self._const_cache: dict[str, np.ndarray | None] = {}

    def sole_use(self, name: str) -> bool:
        return self.uses.get(name, 0) == 1 and name not in self.outputs

    def consumer(self, name: str) -> Any:
        found = {id(n): n for n in self.readers.get(name, ()) if id(n) not in self.removed and name in n.input}
        return next(iter(found.values())) if len(found) == 1 else None

    def read_by(self, node: Any) -> None:
        """Index `node` as a reader of its inputs (a new node, or one whose inputs changed)."""
        for i in node.input:
            if i:
                self.readers[i].append(node)

    def const(self, name: str) -> np.ndarray | None:
        """The value of `name` when it is a constant of the graph (an initializer, or computed
        from constants by Constant / ConstantOfShape / Identity / Cast / the reshapes), else None."""
        if not name:
            return None
        if name not in self._const_cache:
            self._const_cache[name] = None  # (a cycle cannot make it constant)
            self._const_cache[name] = self._eval(name)
        return self._const_cache[name]

    def _eval(self, name: str) -> np.ndarray | None:
        if name in self.inits:
            return numpy_helper.to_array(self.inits[name])
        node = self.producer.get(name)
        if node is None or node.domain not in ("", "ai.onnx") or len(node.output) != 1:
            return None
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        ins = [self.const(i) if i else None for i in node.input]
        if any(v is None for i, v in zip(node.input, ins) if i):
            return None
        op = node.op_type
        if op == "Constant":
            if "value" in attrs:
                return numpy_helper.to_array(attrs["value"])
            for key, dt in (("value_float", np.float32), ("value_floats", np.float32),
                            ("value_int", np.int64), ("value_ints", np.int64)):
                if key in attrs:
                    return np.asarray(attrs[key], dtype=dt)
            return None
        if op == "ConstantOfShape":
            value = numpy_helper.to_array(attrs["value"]).reshape(-1) if "value" in attrs else np.zeros(1, np.float32)
            return np.full(tuple(int(d) for d in ins[0]), value[0], dtype=value.dtype)
        if op == "Identity":
            return ins[0]
        if op == "Cast":
            return ins[0].astype(helper.tensor_dtype_to_np_dtype(attrs["to"]))
        if op in ("Unsqueeze", "Squeeze"):
            axes = attrs.get("axes") if len(ins) < 2 or ins[1] is None else [int(a) for a in ins[1]]
            x = ins[0]
            if op == "Squeeze":
                return np.squeeze(x) if axes is None else np.squeeze(x, tuple(a % x.ndim for a in axes))
            if axes is None:
                return None
            rank = x.ndim + len(axes)
            return np.expand_dims(x, tuple(sorted(a % rank for a in axes)))
        if op == "Reshape" and len(ins) == 2 and not attrs.get("allowzero", 0):
            target = [x if x != 0 else ins[0].shape[i] for i, x in enumerate(int(v) for v in ins[1])]
            return ins[0].reshape(target)
        return None

    def fresh(self, base: str) -> str:
        """A value name the graph does not use yet."""
        name, k = base, 1
        while name in self.names:
            name, k = f"{base}{k}", k + 1
        self.names.add(name)
        return name

    def replace_init(self, name: str, value: np.ndarray) -> str:
        """`value` in place of the initializer `name` when this one reader is all it has and
        its shape and dtype stay (so a weight keeps its name); else a new initializer."""
        old = self.inits.get(name)
        flat = value.reshape(-1)
        if (old is None or self.uses.get(name, 0) != 1 or name in self.outputs
                or (flat.size > 1 and bool(np.all(flat == flat[0])))
                or tuple(old.dims) != value.shape or old.data_type != helper.np_dtype_to_tensor_dtype(value.dtype)):
            return self.add_init(name, value)
        self.inits[name] = numpy_helper.from_array(np.ascontiguousarray(value), name)
        self._const_cache[name] = value
        return name

    def add_init(self, base: str, value: np.ndarray) -> str:
        """A new constant holding `value`: an initializer, or, when every element is the same
        (the `light` models' weights), the ConstantOfShape those models write, which stays a
        numpy constant of the trace (a large initializer would be a weight argument, and the
        Conv handler's one-filter path for equal filters needs to see the numbers)."""
        name = self.fresh(f"{base}__bnfold")
        flat = value.reshape(-1)
        if flat.size > 1 and value.ndim >= 1 and bool(np.all(flat == flat[0])):
            shape = self.fresh(f"{name}_shape")
            self.new_inits.append(numpy_helper.from_array(np.array(value.shape, np.int64), shape))
            node = helper.make_node("ConstantOfShape", [shape], [name], name=name,
                                    value=numpy_helper.from_array(flat[:1].copy(), "value"))
            self.nodes.insert(0, node)
            self.producer[name] = node
            self.uses[shape] += 1
            self.read_by(node)
            self._const_cache[name] = value
            return name
        self.new_inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def drop_use(self, name: str) -> None:
        if name:
            self.uses[name] -= 1
            if self.uses[name] <= 0 and name not in self.outputs:
                self._collect(name)

    def _collect(self, name: str) -> None:
        """`name` is unused: drop it, and its producer when all the producer's outputs are."""
        self.dead.add(name)
        node = self.producer.get(name)
        if node is None or id(node) in self.removed:
            return
        if all(not o or (self.uses.get(o, 0) <= 0 and o not in self.outputs) for o in node.output):
            self.remove(node)

    def remove(self, node: Any) -> None:
        self.removed.add(id(node))
        for o in node.output:
            self.dead.add(o)
        for i in node.input:
            self.drop_use(i)

    def commit(self) -> None:
        """Write the new node list, initializers and value infos into the model."""
        g = self.model.graph
        keep = [n for n in self.nodes if id(n) not in self.removed]
        del g.node[:]
        g.node.extend(keep)
        kept_inits = [self.inits[t.name] for t in g.initializer if t.name not in self.dead]
        del g.initializer[:]
        g.initializer.extend(kept_inits + self.new_inits)
        inputs = [i for i in g.input if i.name not in self.dead]
        if self.model.ir_version < 4:  # (initializers must be graph inputs before IR 4)
            inputs += [helper.make_tensor_value_info(t.name, t.data_type, t.dims) for t in self.new_inits]
        del g.input[:]
        g.input.extend(inputs)
        infos = [v for v in g.value_info if v.name not in self.dead]
        del g.value_info[:]
        g.value_info.extend(infos)
