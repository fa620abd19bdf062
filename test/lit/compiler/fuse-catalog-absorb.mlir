// A catalog pattern inside a larger elementwise cluster does not split it:
// relu(a*b+c) is one region (4 arrays of traffic), not prim.mul + bias_relu.
// Softmax absorbs its elementwise prologue and epilogue the same way.
// RUN: fusebind-opt %s -p 'fuse{gate=all remarks=true}' 2>&1 | filecheck %s
// RUN: fusebind-opt %s -p 'fuse{gate=none remarks=true}' 2>&1 >/dev/null | filecheck %s --check-prefix=GATED
// CHECK: remark: fused @ew_mul_add_relu id 65536 (elementwise; 3 ops, absorbs catalog bias_relu and 1 neighbour op(s); fused {{.*}} < catalog + neighbours {{.*}}, Layer-1) in @chain
// CHECK: remark: fused @fused_mul_reduce_max_sub_exp_n7 id 65537 (reduction; 7 ops, absorbs catalog softmax and 2 neighbour op(s);
// CHECK: remark: fused @bias_relu id 4 (bias_relu; 2 ops;
// CHECK-LABEL: func.func @chain(
// CHECK-NEXT: fused.region @ew_mul_add_relu id 65536 (%a, %b, %c)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: prim.mul
// CHECK-NEXT: prim.add
// CHECK-NEXT: prim.relu
// CHECK-NEXT: fused.yield
// CHECK-NEXT: }
// CHECK-NEXT: func.return
// CHECK-LABEL: func.func @scaled_softmax(
// CHECK-NEXT: fused.region @fused_mul_reduce_max_sub_exp_n7 id 65537 (%x, %t)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: prim.mul
// CHECK-NEXT: prim.reduce_max
// CHECK-NEXT: prim.sub
// CHECK-NEXT: prim.exp
// CHECK-NEXT: prim.reduce_sum
// CHECK-NEXT: prim.div
// CHECK-NEXT: prim.neg
// CHECK-NEXT: fused.yield
// CHECK-NEXT: }
// CHECK-NEXT: func.return
// CHECK-LABEL: func.func @exact(
// CHECK-NEXT: fused.region @bias_relu id 4
// GATED: remark: gated id 65536 (no kernel on cpu): @ew_mul_add_relu in @chain, 3 ops: prim.mul, prim.add, prim.relu; queued; 3 ops, absorbs catalog bias_relu
// GATED-NOT: @bias_relu in @chain
// GATED: remark: gated id 65537 (no kernel on cpu): @fused_mul_reduce_max_sub_exp_n7 in @scaled_softmax
// GATED-NOT: @softmax in @scaled_softmax
// GATED: remark: gated id 4 (no kernel on cpu): @bias_relu in @exact
func.func @chain(%a: tensor<1024xf32>, %b: tensor<1024xf32>, %c: tensor<1024xf32>) -> tensor<1024xf32> {
  %0 = prim.mul %a, %b : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %1 = prim.add %0, %c : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %2 = prim.relu %1 : tensor<1024xf32> -> tensor<1024xf32>
  func.return %2 : tensor<1024xf32>
}
func.func @scaled_softmax(%x: tensor<4x8xf32>, %t: tensor<f32>) -> tensor<4x8xf32> {
  %s = prim.mul %x, %t : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = prim.reduce_max %s {axes = [1], keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %d = prim.sub %s, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %e = prim.exp %d : tensor<4x8xf32> -> tensor<4x8xf32>
  %u = prim.reduce_sum %e {axes = [1], keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %r = prim.div %e, %u : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %n = prim.neg %r : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %n : tensor<4x8xf32>
}
func.func @exact(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %x = prim.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y = prim.relu %x : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
