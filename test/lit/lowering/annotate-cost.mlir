// annotate-cost writes the Layer-1 cost (default machine: 20 GB/s, 50 GFLOP/s, 500 ns launch).
// RUN: fusebind-opt %s -p annotate-cost | filecheck %s
// CHECK-LABEL: func.func @main(
// CHECK: fused.region @mul_relu (%a, %b) : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32> cost #fused.cost<flops = 2048, bytes = 12288, ns = 1114.4>
// CHECK-NEXT: ^bb0(
// CHECK: fused.region @dyn
// CHECK-NOT: cost
func.func @main(%a: tensor<1024xf32>, %b: tensor<1024xf32>, %c: tensor<?xf32>) -> (tensor<1024xf32>, tensor<?xf32>) {
  %r = fused.region @mul_relu (%a, %b) : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32> {
  ^bb0(%x: tensor<1024xf32>, %y: tensor<1024xf32>):
    %m = prim.mul %x, %y : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
    %q = prim.relu %m : tensor<1024xf32> -> tensor<1024xf32>
    fused.yield %q : tensor<1024xf32>
  }
  %d = fused.region @dyn (%c) : (tensor<?xf32>) -> tensor<?xf32> {
  ^bb0(%x: tensor<?xf32>):
    %e = prim.exp %x : tensor<?xf32> -> tensor<?xf32>
    fused.yield %e : tensor<?xf32>
  }
  func.return %r, %d : tensor<1024xf32>, tensor<?xf32>
}
