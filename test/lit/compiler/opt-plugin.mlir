// `--plugin MOD` imports MOD so it can register passes. A plugin asked for by
// name that is missing or broken is an error (exit 1), never silently skipped.
// RUN: not fusebind-opt %s --plugin nonexistent_mod 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: not fusebind-opt %s --plugin nonexistent_pkg.passes -p verify 2>&1 | filecheck %s --check-prefix=PACKAGE
// RUN: rm -rf %t && mkdir -p %t
// RUN: echo "raise RuntimeError('boom')" > %t/broken_plugin.py
// RUN: not env PYTHONPATH=%t fusebind-opt %s --plugin broken_plugin 2>&1 | filecheck %s --check-prefix=BROKEN
// RUN: echo "import not_installed_dependency" > %t/needs_dep.py
// RUN: not env PYTHONPATH=%t fusebind-opt %s --plugin needs_dep 2>&1 | filecheck %s --check-prefix=DEP
// RUN: echo "from dataclasses import dataclass; from xdsl.passes import ModulePass; from fusebind.compiler.passes import register_pass; register_pass(dataclass(frozen=True)(type('Hello', (ModulePass,), {'name': 'hello-plugin', 'apply': lambda self, ctx, op: None})))" > %t/hello_plugin.py
// RUN: env PYTHONPATH=%t fusebind-opt %s --plugin hello_plugin -p hello-plugin | filecheck %s --check-prefix=OK

// MISSING: fusebind-opt: error: --plugin nonexistent_mod: no module named 'nonexistent_mod'; give an importable module name (e.g. my_package.passes) that is on sys.path (PYTHONPATH)
// PACKAGE: fusebind-opt: error: --plugin nonexistent_pkg.passes: no module named 'nonexistent_pkg'; give an importable module name
// BROKEN: fusebind-opt: error: --plugin broken_plugin failed to import: RuntimeError: boom
// DEP: fusebind-opt: error: --plugin needs_dep failed to import: No module named 'not_installed_dependency'
// MISSING-NOT: Traceback
// BROKEN-NOT: Traceback
// OK: func.func @f

func.func @f() {
  func.return
}
