"""ONNX files are untrusted input (issue 19): external data only from inside the model's directory,
size claims checked before any allocation, invalid graphs refused naming the node, and onnx's C++
passes run in a child process whose crash refuses the model instead of ending the caller.
(fusebind/onnx/trust.py, external_data.py, trust_worker.py, trust_child.py.) Every model here is
x[4] + w[4] (or fails before compiling), so the one kernel is compiled once."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fusebind as fb
from fusebind.onnx import trust_worker
from fusebind.onnx.frontdoor import load
from fusebind.onnx.importer import import_model
from fusebind.onnx.registry import UnsupportedModel
from fusebind.onnx.trust import ExternalDataRefused, InvalidModel, ModelTooLarge

F32 = TensorProto.FLOAT
X = np.array([1.0, -2.0, 3.5, 0.25], np.float32)
W = np.array([10.0, 20.0, 30.0, 40.0], np.float32)


def graph_model(nodes, inputs=(("x", [4]),), outputs=(("y", [4]),), inits=(), opset=21, domains=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F32, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, F32, s) for n, s in outputs], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)] +
                             [helper.make_opsetid(d, v) for d, v in domains])


def external_tensor(location: str, dims=(4,), offset=None, length=None, name="w") -> TensorProto:
    t = TensorProto(name=name, data_type=F32, dims=list(dims), data_location=TensorProto.EXTERNAL)
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = t.external_data.add()
            entry.key, entry.value = key, str(value)
    return t


def add_model(w: TensorProto) -> onnx.ModelProto:
    return graph_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], inits=[w])


def save(tmp: Path, model: onnx.ModelProto, name: str = "model.onnx") -> Path:
    path = tmp / name
    path.write_bytes(model.SerializeToString())
    return path


@pytest.fixture
def weights_dir(tmp_path: Path) -> Path:
    """tmp/model/ (the model's directory, holding w.bin) and tmp/outside/w.bin (the same bytes)."""
    (tmp_path / "model").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "model" / "w.bin").write_bytes(W.tobytes())
    (tmp_path / "outside" / "w.bin").write_bytes(W.tobytes())
    return tmp_path / "model"


# --------------------------------------------------------------------------- external data


def test_external_data_inside_the_directory_is_read(weights_dir: Path) -> None:
    (weights_dir / "sub").mkdir()
    (weights_dir / "sub" / "packed.bin").write_bytes(b"\x00" * 8 + W.tobytes() + b"\xff" * 3)
    f = load(save(weights_dir, add_model(external_tensor("sub/packed.bin", offset=8, length=16))))
    got = f(X)
    assert got.dtype == np.float32 and got.shape == (4,)
    np.testing.assert_array_equal(got, X + W)
    (weights_dir / "inner_link.bin").symlink_to(weights_dir / "w.bin")  # a symlink that stays inside: fine
    np.testing.assert_array_equal(load(save(weights_dir, add_model(external_tensor("inner_link.bin"))))(X), X + W)


@pytest.mark.parametrize("location, why", [
    ("../outside/w.bin", "contains '..'"),
    ("sub/../../outside/w.bin", "contains '..'"),
    ("ABSOLUTE", "is an absolute path"),
])
def test_external_data_outside_the_directory_is_refused(weights_dir: Path, location: str, why: str) -> None:
    if location == "ABSOLUTE":
        location = str(weights_dir.parent / "outside" / "w.bin")
    path = save(weights_dir, add_model(external_tensor(location)))
    with pytest.raises(ExternalDataRefused) as info:
        import_model(path)
    assert str(info.value) == (f"fusebind.onnx: initializer 'w': the external data location {location!r} {why}; "
                               "fusebind reads external data only from files inside the model's directory")
    assert isinstance(info.value, ValueError) and isinstance(info.value, fb.FusebindError)


def test_a_symlinked_directory_leading_out_is_refused(weights_dir: Path) -> None:
    (weights_dir / "link").symlink_to(weights_dir.parent / "outside")
    with pytest.raises(ExternalDataRefused, match=r"initializer 'w': the external data location 'link/w.bin' leads "
                       r"outside the directory through a symlink \(to '.*outside/w.bin'\)"):
        import_model(save(weights_dir, add_model(external_tensor("link/w.bin"))))


def test_a_symlink_in_the_directory_pointing_out_is_refused(weights_dir: Path) -> None:
    (weights_dir / "evil.bin").symlink_to(weights_dir.parent / "outside" / "w.bin")
    with pytest.raises(ExternalDataRefused, match=r"location 'evil.bin' leads outside the directory through a "
                       "symlink"):
        import_model(save(weights_dir, add_model(external_tensor("evil.bin"))))


def test_a_fifo_is_refused_without_blocking(weights_dir: Path) -> None:
    os.mkfifo(weights_dir / "pipe.bin")
    with pytest.raises(ExternalDataRefused, match=r"location 'pipe.bin' is not a regular file"):
        import_model(save(weights_dir, add_model(external_tensor("pipe.bin"))))


def test_external_data_shorter_than_claimed_is_refused(weights_dir: Path) -> None:
    with pytest.raises(InvalidModel) as info:
        import_model(save(weights_dir, add_model(external_tensor("w.bin", offset=4))))
    assert str(info.value) == ("fusebind.onnx: initializer 'w': its dims [4] need 16 bytes from offset 4 of 'w.bin', "
                               "but the file has 16 bytes (data shorter than claimed)")
    with pytest.raises(InvalidModel, match=r"its external data length 12 in 'w.bin' does not match its dims \[4\] "
                       r"of FLOAT \(16 bytes\)"):
        import_model(save(weights_dir, add_model(external_tensor("w.bin", length=12))))
    with pytest.raises(InvalidModel, match=r"the external data offset '-4' of 'w.bin' is not a non-negative integer"):
        import_model(save(weights_dir, add_model(external_tensor("w.bin", offset=-4))))


def test_external_data_without_a_directory_is_refused(weights_dir: Path) -> None:
    model = add_model(external_tensor("w.bin"))
    for given in (model, model.SerializeToString()):
        with pytest.raises(ExternalDataRefused) as info:
            import_model(given)
        assert str(info.value) == ("fusebind.onnx: initializer 'w' stores its data outside the model ('w.bin'), and a "
                                   "model given as bytes or a ModelProto has no directory to read it from: pass the "
                                   "model's path instead")


def test_the_budget_is_checked_before_external_data_is_read(weights_dir: Path) -> None:
    # 2^28 floats (1 GiB) at a location that does not exist: refused by the budget, nothing opened
    path = save(weights_dir, add_model(external_tensor("missing.bin", dims=(1 << 28,))))
    with pytest.raises(ModelTooLarge, match=r"the model's tensors need more than 1000000 bytes \(the budget, "
                       r"max_initializer_bytes=\) by initializer 'w' \(\[268435456\] of FLOAT\)"):
        import_model(path, max_initializer_bytes=1_000_000)


# --------------------------------------------------------------------------- size claims


def _raw(dims, data: bytes = b"", name: str = "w") -> TensorProto:
    return TensorProto(name=name, data_type=F32, dims=list(dims), raw_data=data)


@pytest.mark.parametrize("dims", [(1 << 62, 1 << 62), (1 << 40, 1 << 40, 1 << 40)])
def test_dims_whose_product_overflows_are_refused_before_allocation(dims) -> None:
    with pytest.raises(ModelTooLarge, match=r"the model's tensors need more than 4294967296 bytes"):
        import_model(add_model(_raw(dims, W.tobytes())))


def test_a_negative_dim_is_refused() -> None:
    with pytest.raises(InvalidModel) as info:
        import_model(add_model(_raw((-4,), W.tobytes())))
    assert str(info.value) == "fusebind.onnx: initializer 'w' declares the negative dim -4 (dims [-4])"


def test_inline_data_that_does_not_match_its_dims_is_refused() -> None:
    with pytest.raises(InvalidModel) as info:
        import_model(add_model(_raw((4,), W.tobytes()[:12])))
    assert str(info.value) == ("fusebind.onnx: initializer 'w' declares dims [4] of FLOAT (16 bytes) but holds 12 "
                               "bytes of raw data")
    typed = TensorProto(name="w", data_type=F32, dims=[1000], float_data=[1.0, 2.0])
    with pytest.raises(InvalidModel, match=r"initializer 'w' declares dims \[1000\] of FLOAT \(1000 elements, 1000 "
                       r"values in float_data\) but holds 2"):
        import_model(add_model(typed))
    const = helper.make_node("Constant", [], ["w"], name="c", value=_raw((2, 2), b"\x00" * 4))
    with pytest.raises(InvalidModel, match=r"attribute 'value' of node 'c' \(Constant\) declares dims \[2, 2\]"):
        import_model(graph_model([const, helper.make_node("Add", ["x", "w"], ["y"])]))


@pytest.mark.parametrize("elem_type, name", [(0, "UNDEFINED"), (29, "29")])
def test_a_tensor_of_no_onnx_element_type_is_refused(elem_type: int, name: str) -> None:
    """Found by the importer fuzzer: the constant folder's numpy_helper.to_array raised KeyError/TypeError."""
    w = TensorProto(name="w", data_type=elem_type, dims=[4], raw_data=W.tobytes())
    bn = [helper.make_node("BatchNormalization", ["x4", "w", "w", "w", "w"], ["y"], name="bn")]
    with pytest.raises(InvalidModel) as info:
        import_model(graph_model(bn, inputs=(("x4", [1, 4, 1, 1]),), outputs=(("y", [1, 4, 1, 1]),), inits=[w]))
    assert str(info.value) == (f"fusebind.onnx: initializer 'w' has the element type {name}, which is not an ONNX "
                               "tensor element type")


def test_raw_data_of_a_type_fusebind_lacks_is_still_checked() -> None:
    """Found by the importer fuzzer: a FLOAT8E8M0 initializer holding 12 bytes for 3 elements reached the
    constant folder's numpy_helper.to_array (ValueError: cannot reshape) before the dtype check."""
    w = TensorProto(name="w", data_type=TensorProto.FLOAT8E8M0, dims=[4], raw_data=W.tobytes())
    bn = [helper.make_node("BatchNormalization", ["x4", "w", "w", "w", "w"], ["y"], name="bn")]
    with pytest.raises(InvalidModel) as info:
        import_model(graph_model(bn, inputs=(("x4", [1, 4, 1, 1]),), outputs=(("y", [1, 4, 1, 1]),), inits=[w]))
    assert str(info.value) == ("fusebind.onnx: initializer 'w' declares dims [4] of FLOAT8E8M0 (4 bytes) but holds 16 "
                               "bytes of raw data")


def test_the_initializer_budget_is_an_option() -> None:
    model = add_model(numpy_helper.from_array(W, "w"))
    with pytest.raises(ModelTooLarge, match=r"need more than 15 bytes .* by initializer 'w' \(\[4\] of FLOAT\); pass "
                       "a larger max_initializer_bytes= for a model you trust"):
        import_model(model, max_initializer_bytes=15)
    np.testing.assert_array_equal(load(model, max_initializer_bytes=16)(X), X + W)


# --------------------------------------------------------------------------- structure


def test_a_cycle_is_refused_naming_its_nodes() -> None:
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="first"),
             helper.make_node("Relu", ["a"], ["b"], name="second"),
             helper.make_node("Identity", ["a"], ["y"], name="out")]
    with pytest.raises(InvalidModel) as info:
        import_model(graph_model(nodes))
    assert str(info.value) == ("fusebind.onnx: node 'first' (Add, opset 21): the graph has a cycle through the nodes "
                               "'first' -> 'second' -> 'first'")


def test_an_undefined_input_is_refused() -> None:
    with pytest.raises(InvalidModel) as info:
        import_model(graph_model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")]))
    assert str(info.value) == ("fusebind.onnx: node 'add' (Add, opset 21): its input 'ghost' is produced by no node, "
                               "initializer or graph input")


def test_duplicate_output_names_are_refused() -> None:
    twice = [helper.make_node("Relu", ["x"], ["y"], name="one"), helper.make_node("Neg", ["x"], ["y"], name="two")]
    with pytest.raises(InvalidModel) as info:
        import_model(graph_model(twice))
    assert str(info.value) == ("fusebind.onnx: node 'two' (Neg, opset 21): its output 'y' is already produced by node "
                               "'one' (Relu) (ONNX names each value once)")
    shadow = [helper.make_node("Relu", ["x"], ["x"], name="shadow"), helper.make_node("Neg", ["x"], ["y"])]
    with pytest.raises(InvalidModel, match=r"node 'shadow' \(Relu, opset 21\): its output 'x' is already produced by "
                       "the graph input"):
        import_model(graph_model(shadow))
    with pytest.raises(InvalidModel, match=r"^fusebind.onnx: the graph output 'y' is listed twice$"):
        import_model(graph_model([helper.make_node("Relu", ["x"], ["y"])], outputs=(("y", [4]), ("y", [4]))))
    with pytest.raises(InvalidModel, match=r"^fusebind.onnx: the graph output 'z' is produced by no node"):
        import_model(graph_model([helper.make_node("Relu", ["x"], ["y"])], outputs=(("y", [4]), ("z", [4]))))
    with pytest.raises(InvalidModel, match=r"^fusebind.onnx: the graph input 'x' is declared twice$"):
        import_model(graph_model([helper.make_node("Relu", ["x"], ["y"])], inputs=(("x", [4]), ("x", [4]))))


def test_an_unknown_domain_is_refused_naming_the_node() -> None:
    node = helper.make_node("Frobnicate", ["x"], ["y"], name="f", domain="com.example")
    with pytest.raises(UnsupportedModel) as info:
        import_model(graph_model([node]))  # the domain is not even declared in opset_import
    assert str(info.value) == ("node 'f' (Frobnicate, opset 1): the op domain 'com.example' is not one fusebind "
                               "implements")


def test_an_opset_newer_than_supported_is_refused() -> None:
    with pytest.raises(UnsupportedModel) as info:
        import_model(graph_model([helper.make_node("Relu", ["x"], ["y"], name="r")], opset=99))
    assert str(info.value) == ("fusebind.onnx: node 'r' (Relu, opset 99): opset 99 of the domain 'ai.onnx' is newer "
                               "than fusebind supports (up to 28); export the model at opset 28 or older")


def test_bytes_that_are_not_a_model_are_refused() -> None:
    with pytest.raises(InvalidModel, match=r"^fusebind.onnx: the bytes given cannot be read as an ONNX model "
                       r"\(protobuf: "):
        import_model(b"\x08\x07\x12\xff\xff\xff\xff\x0f")


# --------------------------------------------------------------------------- onnx's passes in a child


def _fake_child(tmp_path: Path, body: str) -> str:
    script = tmp_path / "child.py"
    script.write_text(f"import os, sys, time\n{body}\n")
    return str(script)


#: a stand-in child that answers every request with the model unchanged (starts in milliseconds: no onnx)
ECHO = """import struct
stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
while len(head := stdin.read(12)) == 12:
    data = stdin.read(struct.unpack("<IQ", head)[1])
    stdout.write(struct.pack("<BQ", 0, len(data)) + data)
    stdout.flush()
"""


def test_a_crash_of_onnx_passes_refuses_the_model_and_the_caller_lives(tmp_path: Path, monkeypatch) -> None:
    model = add_model(numpy_helper.from_array(W, "w"))
    monkeypatch.setattr(trust_worker, "_child", None)
    monkeypatch.setattr(trust_worker, "_SCRIPT", _fake_child(tmp_path, "sys.stdin.buffer.read(12)\nos.abort()"))
    with pytest.raises(InvalidModel) as info:
        import_model(model)
    assert str(info.value) == ("fusebind.onnx: onnx's version converter / shape inference failed on this model in the "
                               "child process that runs them (it was killed by SIGABRT); the model is refused (for a "
                               "file you trust, trusted=True runs them in this process)")
    assert trust_worker._child is None
    np.testing.assert_array_equal(load(model, trusted=True)(X), X + W)  # in process: no child involved
    assert trust_worker._child is None
    monkeypatch.setattr(trust_worker, "_SCRIPT", _fake_child(tmp_path, ECHO))
    np.testing.assert_array_equal(load(model)(X), X + W)  # a fresh child serves the next model
    assert trust_worker._child is not None and trust_worker._child.served == 1
    trust_worker._child.close()


def test_a_child_that_hangs_is_killed_after_the_timeout(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(trust_worker, "_child", None)
    monkeypatch.setattr(trust_worker, "_SCRIPT", _fake_child(tmp_path, "time.sleep(60)"))
    with pytest.raises(InvalidModel, match=r"in the child process that runs them \(it did not finish in 0.5 s\)"):
        trust_worker.run_in_child(b"", 21, timeout=0.5)
    assert trust_worker._child is None


def test_the_child_is_replaced_after_a_fork_and_after_its_request_budget(tmp_path: Path, monkeypatch) -> None:
    model = add_model(numpy_helper.from_array(W, "w"))
    monkeypatch.setattr(trust_worker, "_child", None)
    monkeypatch.setattr(trust_worker, "_SCRIPT", _fake_child(tmp_path, ECHO))
    import_model(model)
    first = trust_worker._child
    assert first is not None and first.proc.poll() is None
    monkeypatch.setattr(first, "served", trust_worker.CHILD_MAX_REQUESTS)
    import_model(model)
    assert trust_worker._child is not first and first.proc.poll() is not None  # the old one was closed
    second = trust_worker._child
    monkeypatch.setattr(second, "pid", -1)  # as seen from a forked process: not ours to use (nor to kill)
    import_model(model)
    assert trust_worker._child is not second and second.proc.poll() is None
    second.close()
    trust_worker._child.close()


@pytest.mark.skipif(sys.platform != "linux", reason="O_NOFOLLOW / dir_fd semantics checked on Linux")
def test_a_component_swapped_for_a_symlink_after_the_check_is_refused(weights_dir: Path, monkeypatch) -> None:
    """The race realpath cannot see: the directory is replaced by a symlink between the check and the
    open; the component-by-component O_NOFOLLOW open refuses it."""
    from fusebind.onnx import external_data

    (weights_dir / "sub").mkdir()
    (weights_dir / "sub" / "w.bin").write_bytes(W.tobytes())
    real_realpath = os.path.realpath

    def swapping_realpath(p, *a, **k):
        out = real_realpath(p, *a, **k)
        if str(p).endswith("sub/w.bin"):
            os.rename(weights_dir / "sub", weights_dir / "sub.old")
            (weights_dir / "sub").symlink_to(weights_dir.parent / "outside")
        return out
    monkeypatch.setattr(external_data.os.path, "realpath", swapping_realpath)
    with pytest.raises(ExternalDataRefused, match=r"location 'sub/w.bin' cannot be opened as a plain file under the "
                       r"directory \((Not a directory|Too many levels of symbolic links)\)"):
        external_data.open_under(str(weights_dir), "sub/w.bin", "initializer 'w'")


def test_prepare_warms_up_only_on_inputs_of_a_bounded_size(monkeypatch) -> None:
    """The backend's warm-up allocates zeros of the declared input shapes: a file's claim. Beyond
    WARM_UP_BYTES it leaves compiling to the first real run instead of allocating (40 GB here)."""
    import fusebind.onnx.backend as backend

    monkeypatch.setattr(backend, "WARM_UP_BYTES", 16)
    small = backend.prepare(add_model(numpy_helper.from_array(W, "w")))  # the kernel the other tests compile
    assert len(small.imported._fns) == 1  # warmed up: 4 float32 are 16 bytes
    huge = graph_model([helper.make_node("Relu", ["x"], ["y"])], inputs=(("x", [100000, 100000]),),
                       outputs=(("y", [100000, 100000]),))
    rep = backend.prepare(huge)
    assert rep.imported._fns == {}


# --------------------------------------------------------------------------- found by the importer fuzzer


def test_a_node_without_a_required_input_or_with_too_many_is_refused_at_import() -> None:
    """Found by the fuzzer: handlers got None for a required input (TypeError, AttributeError)."""
    with pytest.raises(InvalidModel) as info:
        import_model(graph_model([helper.make_node("Pad", ["x", ""], ["y"], name="p")]))
    assert str(info.value) == "fusebind.onnx: node 'p' (Pad, opset 21): its input 1 ('pads') is required and not given"
    with pytest.raises(InvalidModel) as info:
        import_model(graph_model([helper.make_node("Relu", ["x", "x"], ["y"], name="r")]))
    assert str(info.value) == "fusebind.onnx: node 'r' (Relu, opset 21): it has 2 inputs; Relu takes at most 1"
    with pytest.raises(InvalidModel, match=r"node 's' \(Split, opset 21\): it has 0 outputs; Split has 1\.\."):
        import_model(graph_model([helper.make_node("Split", ["x"], [], name="s"),
                                  helper.make_node("Relu", ["x"], ["y"])]))


def test_a_handler_failing_on_malformed_inputs_names_the_node() -> None:
    """Found by the fuzzer: a Conv bias of 72 values for 4 output channels reached numpy's reshape
    (ValueError) while tracing; now an InvalidModel naming the node, the cause chained."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 1, 1, 1)).astype(np.float32), "cw"),
             numpy_helper.from_array(np.zeros(72, np.float32), "cb")]
    m = graph_model([helper.make_node("Conv", ["x", "cw", "cb"], ["y"], name="c")], inputs=(("x", [1, 1, 3, 3]),),
                    outputs=(("y", [1, 4, 3, 3]),), inits=inits)
    with pytest.raises(InvalidModel) as info:
        import_model(m, trusted=True).run(np.ones((1, 1, 3, 3), np.float32))
    assert str(info.value).startswith("node 'c' (Conv, opset 21): its inputs or attributes are not ones fusebind's "
                                      "Conv can take (ValueError: ")
    assert str(info.value).endswith("if the model is valid ONNX, this is a fusebind bug: please report it")
    assert isinstance(info.value.__cause__, ValueError) and not isinstance(info.value.__cause__, fb.FusebindError)


def test_the_cli_reads_external_data_through_the_same_checks(weights_dir: Path) -> None:
    """`fusebind run model.onnx` loads by path (it once called onnx.load, which reads external data
    itself, past every check here): a location leaving the directory is a one-line error."""
    import io

    from fusebind.cli import main

    path = save(weights_dir, add_model(external_tensor("../outside/w.bin")))
    out, err = io.StringIO(), io.StringIO()
    assert main(["run", str(path), "-q"], stdout=out, stderr=err) == 2
    assert err.getvalue() == ("fusebind: error: fusebind.onnx: initializer 'w': the external data location "
                              "'../outside/w.bin' contains '..'; fusebind reads external data only from files "
                              "inside the model's directory\n")
    out, err = io.StringIO(), io.StringIO()
    assert main(["run", str(save(weights_dir, add_model(external_tensor("w.bin")))), "--repeat", "0", "-q"],
                stdout=out, stderr=err) == 0, err.getvalue()
    assert "result: PASS" in out.getvalue()


_BIG = numpy_helper.from_array(np.array([1 << 20, 1 << 20], np.int64), "s")
_ONE = numpy_helper.from_array(np.ones((1, 1), np.float32), "one")


@pytest.mark.parametrize("op, inputs, inits, shape, size", [
    ("ConstantOfShape", ["s"], [_BIG], (1 << 20, 1 << 20), 4 << 40),
    ("Expand", ["one", "s"], [_ONE, _BIG], (1 << 20, 1 << 20), 4 << 40),
    ("Tile", ["one", "s"], [_ONE, _BIG], (1 << 20, 1 << 20), 4 << 40),
    ("Range", ["a", "b", "d"], [numpy_helper.from_array(np.array(v, np.float32), n)
                                for n, v in (("a", 0.0), ("b", 2.0 ** 40), ("d", 1.0))], (1 << 40,), 8 << 40),
])
def test_constants_a_node_claims_are_checked_before_they_are_allocated(op, inputs, inits, shape, size) -> None:
    """A shape read from the model's constants is a claim like a tensor's dims: over the budget it is
    ModelTooLarge naming the node, not numpy's MemoryError (or, below the machine's memory, an
    allocation of whatever the file asked for)."""
    model = graph_model([helper.make_node(op, inputs, ["c"], name="c"), helper.make_node("Add", ["x", "c"], ["y"])],
                        inputs=(("x", [1]),), outputs=(("y", None),), inits=inits)
    f = load(model.SerializeToString())
    with pytest.raises(ModelTooLarge) as info:
        f(np.zeros(1, np.float32))
    assert str(info.value) == (f"node 'c' ({op}, opset 21): its constant result of shape {shape} would hold {size} "
                               "bytes, more than the import budget (4294967296 bytes); the model's constants claim "
                               "this size")
