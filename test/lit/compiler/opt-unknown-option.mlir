// RUN: not fusebind-opt %s -p 'strip-fused{no-such-option=1}' 2>&1 | filecheck %s
// RUN: not fusebind-opt %s -p 'strip-fused{only-unassigned=maybe}' 2>&1 | filecheck %s --check-prefix=BADVALUE
// RUN: not fusebind-opt %s -p 'strip-fused{' 2>&1 | filecheck %s --check-prefix=SYNTAX
// CHECK: error: pass 'strip-fused': {{.*}}no_such_option
// BADVALUE: error: pass 'strip-fused':
// SYNTAX: error: Error parsing pass pipeline specification
// CHECK-NOT: Traceback
func.func @f() {
  func.return
}
