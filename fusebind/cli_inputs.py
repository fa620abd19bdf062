"""The `fusebind` command's inputs: `--shape` specs, argument shapes, the memory check, seeded random arrays.

Owns: `CliError` (bad input to the command, exit 2), parsing `NAME=4x8` specs, the concrete
shape of each argument, refusing inputs that cannot fit in the memory available before any is
allocated, and drawing the inputs. `fusebind.cli` drives it; it imports nothing of the CLI.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any, Callable, Sequence

import numpy as np

from fusebind.dialect.errors import FusebindError


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
