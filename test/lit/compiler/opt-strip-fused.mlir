// strip-fused inlines regions (all, or only unassigned ones).
// RUN: fusebind-opt %s -p strip-fused | filecheck %s
// RUN: fusebind-opt %s -p 'strip-fused{only-unassigned=true}' | filecheck %s --check-prefix=UNASSIGNED
// CHECK-LABEL: func.func @f(
// CHECK-NEXT: %z = prim.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %e = prim.exp %z : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: func.return %e : tensor<4xf32>
// CHECK-NOT: fused.region
// UNASSIGNED: fused.region @kept id 7
// UNASSIGNED-NOT: fused.region @gone
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %r = fused.region @gone (%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
    %z = prim.add %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    fused.yield %z : tensor<4xf32>
  }
  %s = fused.region @kept id 7 (%r) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %e = prim.exp %x : tensor<4xf32> -> tensor<4xf32>
    fused.yield %e : tensor<4xf32>
  }
  func.return %s : tensor<4xf32>
}
