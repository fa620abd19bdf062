"""Imports flow one way (DESIGN.md, issue 12 "true layering"), at every level, and there are no circles.

The rooms, lowest first; a module may import its own room and the rooms below it, never one above:

    dialect < compiler < lowering < runtime < api < onnx < dask < torch < top-level modules < tools

- top-level modules: `fusebind.cli`, `fusebind.report`, `fusebind.examples_builtin`, above the public
  `fusebind.api`; no room imports them.
- `fusebind.tools` (`fusebind-opt`) is the one room that may import every other; nothing imports it.
- the root package `fusebind` is a leaf: its body defines `__version__` and imports nothing of fusebind,
  so any room may read `__version__`; its lazy `__getattr__` hands out `fusebind.api`'s names, so
  `from fusebind import jit` counts as an import of `fusebind.api`.

The checks:
1. every `import` / `from ... import` of every module, at any depth (module top, functions, methods,
   `try` blocks and `TYPE_CHECKING` blocks too), goes down or sideways;
2. no import by name: a dynamic import (`importlib.import_module`, `__import__`, `importlib.reload`,
   `importlib.util.find_spec`, `runpy.run_module`) is allowed only (a) in a package `__init__`'s lazy
   `__getattr__`, for a literal name inside its own package (`f"fusebind.compiler.{module}"`; the root:
   `"fusebind.api"`, and `"fusebind.onnx"` for `fb.onnx`), and (b) in `fusebind.tools` (a user's `--plugin` name). No string constant outside
   tools names a module of a room above its own (`"fusebind.runtime.jit:table_context"`);
3. the module import graph (static imports at any depth, `TYPE_CHECKING` blocks left out; a package's lazy
   names resolved to the module that defines them; importing `a.b.c` from outside `a.b` also runs
   `a/b/__init__.py`) has no cycle at all (the api's Tracer reaches the numpy_* modules through
   `api/handlers.py`, filled by `api/trace.py`);
4. a fresh interpreter imports and exercises the rooms bottom-up (decompose a region; run the compiler's
   `fuse`; `Kernel.from_decomposition`; `fb.jit`; `fusebind-opt -p fuse{gate=table}` and `fuse-jit`) and,
   after each stage, has loaded nothing of a room above it (`sys.modules`, which also sees importlib).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap
import tomllib
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "fusebind"
ROOMS = ("dialect", "compiler", "lowering", "runtime", "api", "onnx", "dask", "torch", "top", "tools")
RANK = {room: i for i, room in enumerate(ROOMS)}
TOP_LEVEL = ("fusebind.cli", "fusebind.cli_inputs", "fusebind.cli_onnx", "fusebind.cli_profile", "fusebind.report",
             "fusebind.examples_builtin")
DYNAMIC_IMPORTS = {"import_module", "__import__", "reload", "find_spec", "run_module"}
MODULE_NAME = re.compile(r"fusebind(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*)?")

# ------------------------------------------------------------------------------------------ the tree


@lru_cache(maxsize=None)
def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def room_of(module: str) -> str:
    """The room of a module (`root` for the root package's own body)."""
    if module == "fusebind":
        return "root"
    if module in TOP_LEVEL:
        return "top"
    room = module.split(".")[1]
    assert room in ROOMS, f"{module}: a module outside every room; give it one in ROOMS/TOP_LEVEL"
    return room


def may_import(importer: str, target: str) -> bool:
    if room_of(target) == "root":
        return True  # only its eager names (__version__); its lazy names resolve to fusebind.api
    if room_of(importer) == "root":
        return False  # the root's body stays a leaf
    return RANK[room_of(target)] <= RANK[room_of(importer)]


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


_TREES: dict[str, ast.Module] = {}
_IMPORTS: dict[str, list[tuple[str, int, bool]]] = {}


def tree_of(module: str) -> ast.Module:
    if module not in _TREES:
        _TREES[module] = ast.parse(modules()[module].read_text(encoding="utf-8"), str(modules()[module]))
    return _TREES[module]


def _package_of(module: str) -> str:
    return module if modules()[module].name == "__init__.py" else module.rpartition(".")[0]


@lru_cache(maxsize=None)
def lazy_exports(package: str) -> dict[str, str]:
    """A package `__init__`'s lazily exported names -> the module that defines each (PEP 562 importers:
    a `_EXPORTS = {name: submodule}` dict, or the root's `_API` names of `fusebind.api`)."""
    if package not in modules() or modules()[package].name != "__init__.py":
        return {}
    out: dict[str, str] = {}
    for node in tree_of(package).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, value = node.target.id, node.value
        else:
            continue
        if name == "_EXPORTS" and isinstance(value, ast.Dict):
            out.update({k.value: f"{package}.{v.value}" for k, v in zip(value.keys, value.values)})
        elif name == "_API" and package == "fusebind" and isinstance(value, ast.Tuple):
            out.update({e.value: "fusebind.api" for e in value.elts})
    return out


def _target(base: str, name: str) -> str:
    full = f"{base}.{name}"
    if full in modules():
        return full
    if base == "fusebind" and name != "__version__":
        return "fusebind.api"  # the root's lazy names: `_API`, and the array functions of fusebind.api.__all__
    return lazy_exports(base).get(name, base)


def imports_of(module: str) -> list[tuple[str, int, bool]]:
    """(imported module, line, inside TYPE_CHECKING) for every static import of `module`, at any depth."""
    if module in _IMPORTS:
        return _IMPORTS[module]
    out: list[tuple[str, int, bool]] = _IMPORTS.setdefault(module, [])
    package = _package_of(module)

    def visit(node: ast.AST, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name == "fusebind" or alias.name.startswith("fusebind."):
                        parts = alias.name.split(".")
                        while ".".join(parts) not in modules():
                            parts.pop()
                        out.append((".".join(parts), child.lineno, type_only))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    head = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join(head + ([base] if base else []))
                if base == "fusebind" or base.startswith("fusebind."):
                    for alias in child.names:
                        out.append((base if alias.name == "*" else _target(base, alias.name), child.lineno, type_only))
            visit(child, type_only or _is_type_checking(child))

    visit(tree_of(module), False)
    return out


def _docstrings(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _literal_head(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return node.values[0].value
    return None


def by_name_imports(module: str) -> list[str]:
    """What `module` imports or names by a string that the rule (2) forbids, as `line: why`."""
    tree = tree_of(module)
    problems: list[str] = []
    aliases = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
               and n.module in ("importlib", "importlib.util", "runpy") for a in n.names if a.name in DYNAMIC_IMPORTS}
    lazy_getattr = {id(n) for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "__getattr__"}
    package = _package_of(module)

    def visit(node: ast.AST, in_lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Call):
                func = child.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if (name in DYNAMIC_IMPORTS and (isinstance(func, ast.Attribute) or name == "__import__")) or (
                        isinstance(func, ast.Name) and name in aliases):
                    head = _literal_head(child.args[0] if child.args else None)
                    own = "fusebind.api" if package == "fusebind" else f"{package}."
                    if room_of(module) == "tools":
                        pass  # (b): the driver imports a user's --plugin module by the name it was given
                    elif not (in_lazy and head is not None and (head in (own, "fusebind.onnx") if package == "fusebind"
                                                                else head.startswith(own))):
                        problems.append(f"{child.lineno}: {name}({ast.unparse(child.args[0]) if child.args else ''})"
                                        " imports by name (only a package __init__'s __getattr__ may, inside its"
                                        " own package)")
            head = _literal_head(child) if isinstance(child, (ast.Constant, ast.JoinedStr)) else None
            if head is not None and id(child) not in docstrings:
                named = head.split(":")[0].rstrip(".")
                if named and (MODULE_NAME.fullmatch(head) or (isinstance(child, ast.JoinedStr) and head.endswith("."))):
                    parts = named.split(".")
                    while parts and ".".join(parts) not in modules():
                        parts.pop()
                    target = ".".join(parts)
                    if len(parts) >= 2 and not may_import(module, target) and room_of(module) != "root":
                        problems.append(f"{child.lineno}: the string {head!r} names {target}, a room above "
                                        f"{room_of(module)}")
            if not isinstance(child, (ast.Constant, ast.JoinedStr)):
                visit(child, in_lazy or id(child) in lazy_getattr)

    docstrings = _docstrings(tree)
    visit(tree, False)
    return problems


# ------------------------------------------------------------------------------------------ 1, 2


def test_every_import_at_any_depth_goes_down_or_sideways() -> None:
    bad = [f"{m}:{line}{' (TYPE_CHECKING)' if type_only else ''} imports {t} ({room_of(m)} -> {room_of(t)})"
           for m in modules() for t, line, type_only in imports_of(m) if not may_import(m, t)]
    assert not bad, "imports against " + " < ".join(ROOMS) + ":\n" + "\n".join(bad)


def test_the_root_package_body_is_a_leaf_and_lazy_names_resolve() -> None:
    assert imports_of("fusebind") == []
    assert lazy_exports("fusebind") and set(lazy_exports("fusebind").values()) == {"fusebind.api"}
    for package in ("fusebind.compiler", "fusebind.runtime"):  # the PEP 562 importers the graph resolves through
        targets = set(lazy_exports(package).values())
        assert targets and all(t in modules() and t.startswith(package + ".") for t in targets), package


def test_no_import_by_name_outside_the_rules() -> None:
    bad = [f"{m}:{p}" for m in modules() for p in by_name_imports(m)]
    assert not bad, "\n".join(bad)


def test_the_rules_see_what_they_forbid(tmp_path: Path) -> None:
    """The scanner itself: each form of upward import, planted in a compiler module, is reported."""
    planted = {
        "fn": "def f():\n    from fusebind.runtime.kernel import Kernel\n",
        "tc": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import fusebind.lowering.emit\n",
        "lazy": "from fusebind.runtime import Kernel\n",
    }
    try:
        for name, text in planted.items():
            modules()[f"fusebind.compiler._planted_{name}"] = path = tmp_path / f"{name}.py"
            path.write_text(text)
        found = {m.rsplit("_", 1)[1]: t for m in modules() if "_planted_" in m for t, _, _ in imports_of(m)}
        assert found == {"fn": "fusebind.runtime.kernel", "tc": "fusebind.lowering.emit",
                         "lazy": "fusebind.runtime.kernel"}
        assert not any(may_import(f"fusebind.compiler._planted_{k}", t) for k, t in found.items())
        for name, text in {"provider": 'P = "fusebind.runtime.jit:table_context"\n',
                           "importlib": "import importlib\nimportlib.import_module('fusebind.lowering')\n",
                           "fstring": "import importlib\ndef g(m):\n    return importlib.import_module(f'fusebind.runtime.{m}')\n",
                           "alias": "from importlib import import_module as im\nim('x')\n",
                           "bare": "from importlib import import_module\nimport_module('x')\n"}.items():
            modules()[f"fusebind.compiler._planted_{name}"] = path = tmp_path / f"{name}.py"
            path.write_text(text)
            assert by_name_imports(f"fusebind.compiler._planted_{name}"), name
    finally:
        for m in [m for m in modules() if "_planted_" in m]:
            del modules()[m]
            _TREES.pop(m, None)
            _IMPORTS.pop(m, None)


def test_fusebind_opt_is_the_tools_driver() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["fusebind-opt"] == "fusebind.tools.opt:main"
    assert "fusebind.compiler.opt" not in modules()


# ------------------------------------------------------------------------------------------ 3


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {imported module: line}, TYPE_CHECKING imports left out."""
    graph: dict[str, dict[str, int]] = {m: {} for m in modules()}
    for m in modules():
        for target, line, type_only in imports_of(m):
            if type_only:
                continue
            parts = target.split(".")
            # importing a.b.c runs a/__init__ and a/b/__init__ first, unless the importer is inside them already
            for k in range(2, len(parts) + 1):
                step = ".".join(parts[:k])
                if step != m and not (m + ".").startswith(step + ".") and (k == len(parts) or step in modules()):
                    graph[m].setdefault(step, line)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on_stack.discard(x)
                        comp.append(x)
                        if x == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
            elif w not in index:
                index[w] = low[w] = len(index)
                stack.append(w)
                on_stack.add(w)
                work.append((w, iter(sorted(graph[w]))))
            elif w in on_stack:
                low[v] = min(low[v], index[w])
    return found


def a_cycle(graph: dict[str, dict[str, int]], members: list[str]) -> str:
    """One concrete cycle through the component, as `a:line -> b:line -> ... -> a`."""
    inside = set(members)
    start = members[0]
    path, seen = [start], {start}
    while True:
        nxt = next((w for w in sorted(graph[path[-1]]) if w in inside and (w == start or w not in seen)), None)
        if nxt is None or nxt == start:
            break
        path.append(nxt)
        seen.add(nxt)
    if start not in graph[path[-1]]:  # the greedy walk dead-ended: name the component
        return ", ".join(members)
    return " -> ".join(f"{a}:{graph[a][b]}" for a, b in zip(path, path[1:] + [start])) + f" -> {start}"


def test_no_import_cycles() -> None:
    graph = import_graph()
    bad = [a_cycle(graph, comp) for comp in cycles(graph)]
    assert not bad, "import cycles (static imports at any depth):\n" + "\n".join(bad)


def test_the_cycle_finder_finds_and_names_a_cycle() -> None:
    graph = {"a": {"b": 3}, "b": {"c": 4}, "c": {"a": 5}, "d": {"a": 1}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert a_cycle(graph, ["a", "b", "c"]) == "a:3 -> b:4 -> c:5 -> a"
    assert cycles({"a": {"b": 1}, "b": {}}) == []


# ------------------------------------------------------------------------------------------ 4

_T, _R = "tensor<3x5xf32>", "tensor<3x1xf32>"
SOFTMAX = (f"func.func @main(%a: {_T}) -> {_T} {{\n  %r = fused.region @softmax (%a) : ({_T}) -> {_T} {{\n"
           f"  ^bb0(%x: {_T}):\n    %m = prim.reduce_max %x {{axes = [1], keepdims}} : {_T} -> {_R}\n"
           f"    %d = prim.sub %x, %m : ({_T}, {_R}) -> {_T}\n    %e = prim.exp %d : {_T} -> {_T}\n"
           f"    fused.yield %e : {_T}\n  }}\n  func.return %r : {_T}\n}}")
CHAIN = ("func.func @f(%a: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {\n"
         "  %m = prim.mul %a, %b : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>\n"
         "  %e = prim.exp %m : tensor<64xf32> -> tensor<64xf32>\n"
         "  func.return %e : tensor<64xf32>\n}")

#: (room, code run in that stage); each stage may load its room and below.
STAGES = [
    ("dialect", """
import numpy as np
from fusebind.dialect import interpret, parse_module
interpret(parse_module(CHAIN), np.ones(64, np.float32), np.ones(64, np.float32))
"""),
    ("compiler", """
from fusebind.compiler import OptimizationContext, optimize_graph
from fusebind.compiler import opt_passes
from fusebind.compiler.fusion_passes import FusePass
from fusebind.compiler.passes import PassRegistry
from fusebind.dialect import parse_module
from fusebind.dialect.errors import FusebindInternalError
assert optimize_graph(parse_module(CHAIN), OptimizationContext.gate_all()).decisions
module = parse_module(CHAIN)
FusePass(gate="all").apply(None, module)
assert any(op.name == "fused.region" for op in module.walk())
for bare in (FusePass(gate="table"), FusePass(gate="all", machine="measured")):
    try:  # the compiler alone cannot reach the table or the calibration: refused, never fetched by name
        bare.apply(None, parse_module(CHAIN))
        raise SystemExit(f"{bare} ran without the runtime")
    except FusebindInternalError:
        pass
assert PassRegistry().available() == [] and opt_passes.PASSES
"""),
    ("lowering", """
from fusebind.dialect import parse_module
from fusebind.lowering import ObjectCache, decompose_region
from fusebind.lowering import opt_passes
region = next(op for op in parse_module(SOFTMAX).walk() if op.name == 'fused.region')
d = decompose_region(region, cache=ObjectCache(None))
assert d.emitted.rowwise and d.object_code and d.signature.dtypes and not hasattr(d, "load")
ew = parse_module(CHAIN)
from fusebind.compiler.fusion_passes import FusePass
FusePass(gate="all").apply(None, ew)
for cls in opt_passes.PASSES:
    if cls.name == "annotate-cost":
        cls().apply(None, ew)
EW = decompose_region(next(op for op in ew.walk() if op.name == 'fused.region'), cache=ObjectCache(None))
"""),
    ("runtime", """
import numpy as np
from fusebind.runtime.dtypes import descriptor_for
from fusebind.runtime.jit import optimize_with_jit, table_context
from fusebind.runtime.kernel import Kernel
from fusebind.compiler import optimize_graph
kernel = Kernel.from_decomposition(EW)
assert kernel.compiled_shapes == ((64,), (64,), (64,))
a = np.linspace(-1, 1, 64, dtype=np.float32); out = np.empty_like(a)
kernel(descriptor_for(a), descriptor_for(a), descriptor_for(out))
assert np.allclose(out, np.exp(a * a), rtol=1e-6)
assert optimize_graph(parse_module(CHAIN), table_context()).work_order
result, jit_report = optimize_with_jit(parse_module(CHAIN))
assert jit_report.adopted and "fused.region" in str(result.module)
"""),
    ("api", """
import numpy as np
import fusebind as fb
f = fb.jit(lambda x, y: np.exp(x * y))
a = np.linspace(-1, 1, 64, dtype=np.float32)
assert np.allclose(f(a, a), np.exp(a * a), rtol=1e-6)
"""),
    ("tools", """
import io
from fusebind.tools.opt import run_opt
# each input chunk runs in a fresh Session (exact ids): the gate=table run sees the kernels fuse-jit bound
for pipeline in ("fuse-jit", "fuse-jit,fuse{gate=table remarks=true}"):
    out, err = io.StringIO(), io.StringIO()
    assert run_opt(["-", "-p", pipeline], io.StringIO(CHAIN), out, err) == 0, err.getvalue()
    assert "fused.region" in out.getvalue(), out.getvalue()
"""),
]

_DRIVER = """
import json, sys, traceback
class Recorder:
    # a meta-path finder that only watches: who first imported each fusebind module
    first = {}
    def find_spec(self, name, path=None, target=None):
        if name.startswith('fusebind') and name not in self.first:
            frames = [f for f in traceback.extract_stack()[:-1] if '/fusebind/' in f.filename]
            self.first[name] = f"{frames[-1].filename.split('/fusebind/')[-1]}:{frames[-1].lineno}" if frames else '<stage>'
        return None
sys.meta_path.insert(0, Recorder())
STAGES = json.loads(sys.argv[1])
CHAIN, SOFTMAX = sys.argv[2], sys.argv[3]
from fusebind.dialect import parse_module
report = []
for room, code in STAGES:
    exec(compile(code, f'<stage {room}>', 'exec'))
    loaded = sorted(m for m in sys.modules if m.startswith('fusebind.'))
    report.append([room, loaded, {m: Recorder.first.get(m) for m in loaded}])
print(json.dumps(report))
"""


def test_each_room_exercised_loads_nothing_above_it() -> None:
    proc = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps([(r, textwrap.dedent(c)) for r, c in STAGES]),
                           CHAIN, SOFTMAX], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [stage[0] for stage in report] == [room for room, _ in STAGES]
    for room, loaded, first in report:
        above = sorted(m for m in loaded if m != "fusebind" and RANK[room_of(m)] > RANK[room])
        assert not above, f"after the {room} stage: {above} loaded, first imported by " \
                          f"{ {m: first[m] for m in above} }"
    assert "fusebind.runtime.kernel" in report[3][1] and "fusebind.tools.passes" in report[-1][1]


def test_runtime_reexports_the_abi_names() -> None:
    from fusebind.lowering import abi
    from fusebind.runtime import dtypes

    for name in ("DType", "KernelSignature", "memref_descriptor", "parse_dtypes"):
        assert getattr(dtypes, name) is getattr(abi, name)
    sig = dtypes.KernelSignature(inputs=(("f32", 2),), outputs=((dtypes.DType.F32, 2),))
    assert sig.dtypes == (abi.DType.F32, abi.DType.F32)
