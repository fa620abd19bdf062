"""The `fusebind` command's inputs: `--shape` specs, argument shapes, the memory check, seeded random arrays.

Owns: the exit codes and `CliError` (bad input to the command, exit 2), parsing `NAME=4x8` specs, the concrete
shape of each argument, refusing inputs that cannot fit in the memory available before any is
allocated, and drawing the inputs; for an ONNX model, its inputs from `--input` files (.npy,
.pb TensorProto) or drawn (`model_inputs`: integers in [0, 8) so they index any table of 8 or
more rows; an op-parameter input, such as a Reshape's shape, only from a file). `fusebind.cli` drives it; it imports nothing of the CLI.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from typing import Any, Callable, Sequence

import numpy as np

from fusebind.dialect.errors import FusebindError

#: extent of a symbolic dim of an ONNX model's input when neither --dim nor --shape sets it (a batch of 1)
DEFAULT_ONNX_DIM = 1


#: the command's exit codes: all checks passed, a check failed, bad input (a CliError), an internal error
EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


class CliError(FusebindError):
    """Bad input to the command: printed as one line, exit code 2."""


_SHAPE_RE = re.compile(r"^([A-Za-z_][\w$.-]*)=(\d+(?:x\d+)*|scalar)$")


def parse_shapes(specs: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """`["x=4x8", "s=scalar"]` -> {"x": (4, 8), "s": ()}."""
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        m = _SHAPE_RE.match(spec.strip())
        if m is None:
            raise CliError(f"--shape '{spec}' is not NAME=DIMxDIM... (e.g. --shape x=4x8)")
        dims = () if m.group(2) == "scalar" else tuple(int(d) for d in m.group(2).split("x"))
        shapes[m.group(1)] = dims
    return shapes


def argument_shapes(func: Any, dim: int, shapes: dict[str, tuple[int, ...]]) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, element type, concrete shape) per argument of `func`."""
    from fusebind.dialect.types import elem_of, format_shape, shape_of

    out = []
    names = []
    for i, arg in enumerate(func.body.blocks[0].args):
        name = arg.name_hint or f"arg{i}"
        names.append(name)
        declared = shape_of(arg.type)
        if name in shapes:
            given = shapes[name]
            if len(given) != len(declared) or any(d is not None and d != g for d, g in zip(declared, given)):
                raise CliError(f"--shape {name}={'x'.join(map(str, given)) or 'scalar'} does not fit argument "
                               f"'{name}' of @{func.sym_name.data}, declared {format_shape(declared)}")
            concrete = given
        else:
            concrete = tuple(dim if d is None else int(d) for d in declared)
        out.append((name, elem_of(arg.type), concrete))
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise CliError(f"--shape names no argument of @{func.sym_name.data}: {', '.join(unknown)}; "
                       f"its arguments are {', '.join(names)}")
    return out


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (Linux `MemAvailable`,
    else free physical pages); None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def format_bytes(n: float) -> str:
    """1234567 -> '1.2 MiB' (binary units, as numpy's MemoryError says them)."""
    units, i = ("B", "KiB", "MiB", "GiB", "TiB", "PiB"), 0
    while n >= 1024 and i < len(units) - 1:
        n, i = n / 1024, i + 1
    return f"{n:.0f} B" if i == 0 else f"{n:.1f} {units[i]}"


def input_bytes(specs: Sequence[tuple[str, str, tuple[int, ...]]]) -> tuple[int, int]:
    """(bytes of the inputs, peak bytes while drawing them): a float input is
    drawn as float64 and then cast, so the peak adds the largest such draw."""
    from fusebind.dialect.types import numpy_dtype

    total = peak_extra = 0
    for _name, elem, shape in specs:
        count = math.prod(shape)
        dtype = numpy_dtype(elem)
        total += count * dtype.itemsize
        if dtype.kind == "f" and dtype != np.float64:
            peak_extra = max(peak_extra, count * 8)
    return total, total + peak_extra


def check_input_memory(specs: Sequence[tuple[str, str, tuple[int, ...]]], entry: str) -> None:
    """Refuse (CliError) inputs that cannot fit in the memory available, before allocating any."""
    total, peak = input_bytes(specs)
    available = available_memory()
    if available is None or peak <= available:
        return
    name, elem, shape = max(specs, key=lambda s: math.prod(s[2]))
    raise CliError(f"the inputs of @{entry} need {format_bytes(peak)} to create ({format_bytes(total)} of arrays; "
                   f"the largest, {name}: {elem}[{','.join(map(str, shape))}]), more than the "
                   f"{format_bytes(available)} of memory available; pick a smaller --dim or --shape")


def allocate_inputs(specs: Sequence[tuple[str, str, tuple[int, ...]]], entry: str,
                    make: Callable[[], list[np.ndarray]]) -> list[np.ndarray]:
    """`make()` the inputs after `check_input_memory`; a MemoryError is a CliError."""
    check_input_memory(specs, entry)
    try:
        return make()
    except MemoryError as err:
        total, peak = input_bytes(specs)
        raise CliError(f"not enough memory for the inputs of @{entry} ({format_bytes(peak)} to create, "
                       f"{format_bytes(total)} of arrays): {err or 'an allocation failed'}; "
                       "pick a smaller --dim or --shape") from None


def random_inputs(specs: Sequence[tuple[str, str, tuple[int, ...]]], rng: np.random.Generator) -> list[np.ndarray]:
    """Floats ~ N(0, 1), integers uniform in [-8, 8), booleans fair coins."""
    from fusebind.dialect.types import numpy_dtype

    arrays = []
    for _name, elem, shape in specs:
        dtype = numpy_dtype(elem)
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.random(shape) < 0.5)
        else:
            arrays.append(rng.integers(-8, 8, size=shape).astype(dtype))
    return arrays


def read_input_file(path: str) -> np.ndarray:
    """One input array from a `.npy` file (numpy's format) or a `.pb` file (a serialized
    `onnx.TensorProto`, as the ONNX test data sets store them). CliError when unreadable."""
    try:
        if path.endswith(".pb"):
            import onnx
            from onnx import numpy_helper

            tensor = onnx.TensorProto()
            with open(path, "rb") as f:
                tensor.ParseFromString(f.read())
            return numpy_helper.to_array(tensor)
        if path.endswith(".npy"):
            return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise CliError(f"cannot read input file '{path}': {reason}") from None
    except Exception as err:  # a .pb that is no TensorProto (protobuf's DecodeError)
        raise CliError(f"cannot read input file '{path}': not a serialized onnx.TensorProto ({err})") from None
    raise CliError(f"input file '{path}' is neither .npy (numpy) nor .pb (onnx.TensorProto)")


def input_files(specs: Sequence[str], names: Sequence[str]) -> dict[str, np.ndarray]:
    """`--input` values (`NAME=FILE`, or a bare `FILE` for the next input in order) as arrays by
    input name. CliError for an unknown name, an input given twice, or more files than inputs."""
    out: dict[str, np.ndarray] = {}
    position = 0
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = "", spec
        if not name:
            while position < len(names) and names[position] in out:
                position += 1
            if position >= len(names):
                raise CliError(f"--input {spec}: the model has {len(names)} inputs ({', '.join(names)}); "
                               "more files than inputs were given")
            name = names[position]
        elif name not in names:
            raise CliError(f"--input {spec}: the model has no input '{name}'; its inputs are {', '.join(names)}")
        if name in out:
            raise CliError(f"--input: input '{name}' is given twice")
        out[name] = read_input_file(path)
    return out


def model_inputs(f: Any, args: argparse.Namespace, rng: np.random.Generator) -> tuple[list[str], list[np.ndarray]]:
    """("name: dtype[shape]" per input, the arrays): from --input files, else drawn from `rng`."""
    names = f.input_names
    given = input_files(getattr(args, "input", None) or [], names)
    shapes = parse_shapes(args.shape)
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise CliError(f"--shape names no input of the model: {', '.join(unknown)}; its inputs are {', '.join(names)}")
    dim = args.dim if args.dim is not None else DEFAULT_ONNX_DIM
    params = set(f.imported.params)
    planned: list[tuple[str, np.dtype, tuple[int, ...]]] = []
    for name, (declared, dtype) in zip(names, f.input_types):
        if name in given:
            continue
        if name in params:
            raise CliError(f"input '{name}' is a parameter of an op (a shape, axes or sizes): its values shape the "
                           f"program, so it is not drawn at random; give it with --input {name}=FILE.npy")
        if dtype is None or declared is None:
            raise CliError(f"input '{name}' has no declared element type or rank; give it with --input {name}=FILE")
        if name in shapes:
            shape = shapes[name]
            if len(shape) != len(declared) or any(d is not None and d != s for d, s in zip(declared, shape)):
                raise CliError(f"--shape {name}={'x'.join(map(str, shape)) or 'scalar'} does not fit input '{name}', "
                               f"declared [{','.join('?' if d is None else str(d) for d in declared)}]")
        else:
            shape = tuple(dim if d is None else int(d) for d in declared)
        planned.append((name, np.dtype(dtype), shape))
    need = sum(math.prod(s) * max(d.itemsize, 8) for _, d, s in planned)
    available = available_memory()
    if available is not None and need > available:
        raise CliError(f"the model's inputs need {format_bytes(need)} to create, more than the "
                       f"{format_bytes(available)} of memory available; pick a smaller --dim or --shape")
    drawn = {}
    for name, dtype, shape in planned:
        if dtype.kind == "f":
            drawn[name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            drawn[name] = rng.random(shape) < 0.5
        else:
            drawn[name] = rng.integers(0, 8, size=shape).astype(dtype)
    arrays = [given[n] if n in given else drawn[n] for n in names]
    labels = [f"{n}: {a.dtype}[{','.join(map(str, a.shape))}]" + (" (file)" if n in given else "")
              for n, a in zip(names, arrays)]
    return labels, arrays
