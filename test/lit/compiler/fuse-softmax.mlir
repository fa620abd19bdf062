// The softmax catalog rule: static id 1 when its kernel is bound, gated otherwise.
// RUN: fusebind-opt %s -p 'fuse{gate=all remarks=true}' 2>&1 | filecheck %s
// RUN: fusebind-opt %s -p 'fuse{gate=none remarks=true}' 2>&1 | filecheck %s --check-prefix=GATED
// CHECK: remark: fused @softmax id 1 (softmax; 5 ops
// CHECK-LABEL: func.func @sm(
// CHECK-NEXT: %{{.*}} = fused.region @softmax id 1 (%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: prim.reduce_max
// CHECK-NEXT: prim.sub
// CHECK-NEXT: prim.exp
// CHECK-NEXT: prim.reduce_sum
// CHECK-NEXT: prim.div
// CHECK-NEXT: fused.yield
// CHECK-NEXT: }
// CHECK-NEXT: func.return
// GATED: remark: gated id 1 (no kernel on cpu): @softmax in @sm, 5 ops: prim.reduce_max, prim.sub, prim.exp, prim.reduce_sum, prim.div; queued as runtime id 65536
// GATED-NOT: fused.region
func.func @sm(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %m = prim.reduce_max %x {axes = [1], keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %d = prim.sub %x, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %e = prim.exp %d : tensor<4x8xf32> -> tensor<4x8xf32>
  %s = prim.reduce_sum %e {axes = [1], keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %r = prim.div %e, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
