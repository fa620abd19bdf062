// Regions are merged after the sweeps: a reduction region whose result is also
// returned, and the elementwise region that consumes it, become one region.
// RUN: fusebind-opt %s -p 'fuse{gate=all remarks=true}' 2>&1 | filecheck %s
// RUN: fusebind-opt %s -p 'fuse{gate=all max-ops=3 remarks=true}' 2>&1 | filecheck %s --check-prefix=SMALL
// CHECK-NOT: remark: fused @fused_exp_reduce_sum id
// CHECK: remark: fused @fused_exp_reduce_sum_log_neg id 65538 (merge; 4 ops, merges @fused_exp_reduce_sum (reduction) and @ew_log_neg (elementwise); fused {{.*}} < the two regions {{.*}}, Layer-1) in @rowsum
// CHECK-LABEL: func.func @rowsum(
// CHECK-NEXT: %s, %n = fused.region @fused_exp_reduce_sum_log_neg id 65538 (%a) : (tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: prim.exp
// CHECK-NEXT: prim.reduce_sum
// CHECK-NEXT: prim.log
// CHECK-NEXT: prim.neg
// CHECK-NEXT: fused.yield
// CHECK-NEXT: }
// CHECK-NEXT: func.return %s, %n
// SMALL: remark: rejected @fused_exp_reduce_sum_log_neg (too-big: merging @fused_exp_reduce_sum and @ew_log_neg: 4 ops > max-ops 3) in @rowsum
// SMALL: fused.region @fused_exp_reduce_sum id
// SMALL: fused.region @ew_log_neg id
func.func @rowsum(%a: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = prim.exp %a : tensor<4x8xf32> -> tensor<4x8xf32>
  %s = prim.reduce_sum %e {axes = [1]} : tensor<4x8xf32> -> tensor<4xf32>
  %l = prim.log %s : tensor<4xf32> -> tensor<4xf32>
  %n = prim.neg %l : tensor<4xf32> -> tensor<4xf32>
  func.return %s, %n : tensor<4xf32>, tensor<4xf32>
}
