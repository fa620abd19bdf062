"""fusebind.tools: the programs built from every room (`fusebind-opt`).

The rooms import one way, runtime -> lowering -> compiler -> dialect (and the
public `fusebind.api` sits above the runtime); none imports a room above it,
not inside a function and not by a module name in a string. A tool needs
all of them at once, so tools live here, above everything: this package may
import every room, and no room imports it. It wires what a lower room cannot
reach by passing it in (see `passes.py`: the table gate, the measured machine
model and the lowering and runtime passes, given to the compiler's pass
registry).

- `opt.py`: the `fusebind-opt` driver (`main`, `run_opt`, `--plugin`).
- `passes.py`: the built-in passes of every room, registered and served.
"""
