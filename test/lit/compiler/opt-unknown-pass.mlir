// RUN: not fusebind-opt %s -p bogus 2>&1 | filecheck %s
// CHECK: error: unknown pass 'bogus'; available passes: {{.*}}strip-fused
// CHECK-NOT: Traceback
func.func @f() {
  func.return
}
