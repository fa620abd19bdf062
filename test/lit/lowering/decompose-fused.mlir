// decompose-fused inlines every region (arm 0), nested ones included.
// RUN: fusebind-opt %s -p decompose-fused | filecheck %s
// CHECK-LABEL: func.func @main(
// CHECK-NEXT: %m = prim.mul %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %q = prim.relu %m : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: %e = prim.exp %q : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: func.return %e : tensor<4xf32>
// CHECK-NOT: fused.
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %r = fused.region @mul_relu (%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
    %m = prim.mul %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %q = prim.relu %m : tensor<4xf32> -> tensor<4xf32>
    fused.yield %q : tensor<4xf32>
  }
  %s = fused.region @exp (%r) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %e = prim.exp %x : tensor<4xf32> -> tensor<4xf32>
    fused.yield %e : tensor<4xf32>
  }
  func.return %s : tensor<4xf32>
}
