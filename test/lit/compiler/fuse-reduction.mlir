// A reduction with its elementwise prologue and epilogue.
// RUN: fusebind-opt %s -p 'fuse{gate=all remarks=true}' 2>&1 | filecheck %s
// CHECK: remark: fused @fused_exp_reduce_sum_log id 65536 (reduction; 3 ops
// CHECK-LABEL: func.func @lse(
// CHECK-NEXT: fused.region @fused_exp_reduce_sum_log
// CHECK-NEXT: ^bb0
// CHECK-NEXT: prim.exp
// CHECK-NEXT: prim.reduce_sum
// CHECK-NEXT: prim.log
// CHECK-NEXT: fused.yield
// CHECK-NEXT: }
// CHECK-NEXT: func.return
func.func @lse(%a: tensor<4x8xf32>) -> tensor<4xf32> {
  %e = prim.exp %a : tensor<4x8xf32> -> tensor<4x8xf32>
  %s = prim.reduce_sum %e {axes = [1]} : tensor<4x8xf32> -> tensor<4xf32>
  %l = prim.log %s : tensor<4xf32> -> tensor<4xf32>
  func.return %l : tensor<4xf32>
}
