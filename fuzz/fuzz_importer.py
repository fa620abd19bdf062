"""Coverage-guided fuzzing of fusebind's ONNX importer with atheris: ONNX files are untrusted input.

Feeds mutated protobuf bytes of the shipped models (test/onnx's transformer block, models of onnx's
backend suite) to `fusebind.onnx.importer.import_model` (untrusted: onnx's C++ passes run in its
child process). Half the mutations are atheris' own byte edits; half are structured (`mutate_model`:
a dim, a name, an op type, an attribute, an opset, a data type, a data location changed in the
parsed ModelProto), so inputs reach past the protobuf decoder into the checks and the handlers.
The contract: an `ImportedModel` (traced on zeros when its inputs are small and static: every
handler runs) or an `fb.FusebindError` subclass; anything else, or a crash of this process, is a finding: atheris saves the input as `crash-<sha1>` in the working directory; copy it to
`test/reliability/corpus/onnx/` so pytest replays it (test_fuzz_importer.py).

Run (bounded):  python fuzz/fuzz_importer.py -max_total_time=300 [corpus_dir ...]
Without atheris installed it prints how to get it and exits 0.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: op types a structured mutation swaps in (claimed ones, refused ones, unknown ones)
OP_TYPES = ["Add", "Relu", "Reshape", "MatMul", "Gather", "Conv", "Concat", "Slice", "Transpose", "Expand",
            "ConstantOfShape", "Range", "Tile", "Split", "Loop", "If", "NonZero", "Shape", "Cast", "Softmax",
            "SequenceConstruct", "SequenceAt", "Resize", "Pad", "Einsum", "TopK", "Frobnicate", ""]
INTS = [0, 1, -1, 2, 3, 7, 1 << 31, -(1 << 31), (1 << 62), -(1 << 63), (1 << 63) - 1, 1 << 40]
LOCATIONS = ["w.bin", "../w.bin", "/etc/passwd", "a/../../b", "", "\x00", "."]


def seed_models() -> dict[str, bytes]:
    """name -> serialized ModelProto: the transformer block and a few backend-suite models."""
    import onnx

    sys.path.insert(0, str(ROOT / "test" / "onnx"))
    try:
        from transformer_block_model import transformer_block
    finally:
        sys.path.pop(0)
    seeds = {"transformer_block": transformer_block().SerializeToString()}
    data = Path(onnx.__file__).parent / "backend" / "test" / "data"
    for rel in ("simple/test_single_relu_model", "simple/test_expand_shape_model1", "simple/test_sequence_model1",
                "pytorch-operator/test_operator_conv", "pytorch-operator/test_operator_view",
                "pytorch-operator/test_operator_pad", "pytorch-operator/test_operator_reduced_mean_keepdim",
                "pytorch-converted/test_Conv2d", "pytorch-converted/test_Embedding", "pytorch-operator/test_operator_chunk",
                "pytorch-converted/test_BatchNorm2d_eval", "pytorch-operator/test_operator_maxpool"):
        path = data / rel / "model.onnx"
        if path.exists():
            seeds[rel.split("/")[-1]] = path.read_bytes()
    return seeds


def _names(model: Any) -> list[str]:
    g = model.graph
    return ([vi.name for vi in g.input] + [t.name for t in g.initializer] + [o for n in g.node for o in n.output]
            + ["", "ghost"])


def mutate_model(model: Any, rng: random.Random) -> None:
    """One structured edit of `model` (a ModelProto), in place."""
    from onnx import AttributeProto, TensorProto

    g = model.graph
    kind = rng.randrange(12)
    tensors = list(g.initializer) + [a.t for n in g.node for a in n.attribute if a.HasField("t")]
    if kind == 0 and tensors:  # a dim
        t = rng.choice(tensors)
        if t.dims:
            t.dims[rng.randrange(len(t.dims))] = rng.choice(INTS)
        else:
            t.dims.append(rng.choice(INTS))
    elif kind == 1 and g.node:  # an input name
        n = rng.choice(g.node)
        if n.input:
            n.input[rng.randrange(len(n.input))] = rng.choice(_names(model))
        else:
            n.input.append(rng.choice(_names(model)))
    elif kind == 2 and g.node:  # an output name
        n = rng.choice(g.node)
        if n.output:
            n.output[rng.randrange(len(n.output))] = rng.choice(_names(model))
    elif kind == 3 and g.node:  # an op type
        rng.choice(g.node).op_type = rng.choice(OP_TYPES)
    elif kind == 4 and g.node:  # an int or ints attribute
        n = rng.choice(g.node)
        ints = [a for a in n.attribute if a.type in (AttributeProto.INT, AttributeProto.INTS)]
        if ints:
            a = rng.choice(ints)
            if a.type == AttributeProto.INT:
                a.i = rng.choice(INTS)
            elif a.ints:
                a.ints[rng.randrange(len(a.ints))] = rng.choice(INTS)
            else:
                a.ints.append(rng.choice(INTS))
        else:
            a = n.attribute.add()
            a.name, a.type, a.i = rng.choice(["axis", "perm", "to", "keepdims", "mode"]), AttributeProto.INT, rng.choice(INTS)
    elif kind == 5 and model.opset_import:  # an opset
        model.opset_import[0].version = rng.choice([1, 6, 7, 11, 13, 18, 21, 28, 29, 1 << 40])
    elif kind == 6 and tensors:  # a data type
        rng.choice(tensors).data_type = rng.randrange(0, 30)
    elif kind == 7 and tensors:  # raw data cut or extended
        t = rng.choice(tensors)
        t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data) + 1)] if rng.random() < 0.7 else t.raw_data * 2
    elif kind == 8 and tensors:  # data moved "outside"
        t = rng.choice(tensors)
        t.data_location = TensorProto.EXTERNAL
        e = t.external_data.add()
        e.key, e.value = "location", rng.choice(LOCATIONS)
    elif kind == 9 and g.node:  # a node duplicated or removed
        if rng.random() < 0.5:
            g.node.add().CopyFrom(rng.choice(g.node))
        else:
            del g.node[rng.randrange(len(g.node))]
    elif kind == 10 and g.node:  # a node moved (graph order)
        i, j = rng.randrange(len(g.node)), rng.randrange(len(g.node))
        a, b = type(g.node[i])(), type(g.node[j])()
        a.CopyFrom(g.node[i])
        b.CopyFrom(g.node[j])
        g.node[i].CopyFrom(b)
        g.node[j].CopyFrom(a)
    else:  # a graph input's or output's declared shape
        vis = list(g.input) + list(g.output)
        if vis:
            vi = rng.choice(vis)
            dims = vi.type.tensor_type.shape.dim
            if dims:
                dims[rng.randrange(len(dims))].dim_value = rng.choice(INTS[:6])
            else:
                vi.type.tensor_type.elem_type = rng.randrange(0, 30)


def mutated_bytes(data: bytes, rng: random.Random, edits: int = 1) -> bytes:
    """`data` parsed, given `edits` structured edits, serialized (data itself when it does not parse)."""
    import onnx

    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception:
        return data
    for _ in range(edits):
        try:
            mutate_model(model, rng)
        except (ValueError, IndexError, TypeError):  # protobuf refused the value (e.g. an int out of range)
            pass
    try:
        return model.SerializeToString()
    except Exception:
        return data


#: a model whose declared inputs are static and at most this many elements in all is also traced
#: (`ImportedModel.mlir` on zeros: every handler runs, nothing is compiled)
TRACE_ELEMENTS = 4096


def _zeros(imported: Any) -> list[Any] | None:
    import numpy as np

    shapes = [(s, d) for s, d in imported.input_types]
    if any(s is None or d is None or any(x is None or x < 0 for x in s) for s, d in shapes):
        return None
    if sum(int(np.prod(s, dtype=object)) for s, _ in shapes) > TRACE_ELEMENTS:
        return None
    return [np.zeros(s, d) for s, d in shapes]


def check_one(data: bytes, trace: bool = False) -> str:
    """The importer's contract for one input: 'ok' or the fb error's class name; raises otherwise.
    With `trace`, a model with small static inputs is traced too (the handlers' contract)."""
    import fusebind as fb
    from fusebind.onnx.importer import import_model

    try:
        imported = import_model(bytes(data))
        zeros = _zeros(imported) if trace else None
        if zeros is not None:
            imported.mlir(*zeros)
        return "ok"
    except fb.FusebindError as e:
        if not str(e):
            raise RuntimeError(f"{type(e).__name__} without a message") from e
        return type(e).__name__


def _custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    import atheris

    rng = random.Random(seed)
    if rng.random() < 0.5:
        return atheris.Mutate(data, max_size)
    out = mutated_bytes(data, rng, edits=rng.randint(1, 3))
    return out[:max_size]


def main(argv: list[str]) -> int:
    try:
        import atheris
    except ImportError:
        print("fuzz_importer: atheris is not installed (pip install atheris); skipping", file=sys.stderr)
        return 0
    # the core uninstrumented (atheris instruments whole top-level packages): coverage is wanted in
    # the ONNX room, and the instrumented core took 40 s to import on a busy 2-core host
    import fusebind as fb
    import fusebind.api.capture  # noqa: F401

    fb.jit, fb.constant, fb.JitFunction  # noqa: B018  (the lazy exports the importer uses)

    with atheris.instrument_imports(include=["fusebind.onnx"]):
        import fusebind.onnx.importer

        fusebind.onnx.importer._load_handlers()
    atheris.Setup(argv, lambda data: check_one(data), custom_mutator=_custom_mutator)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
