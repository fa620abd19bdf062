// Non-convex candidates are refused; values used outside become results.
// RUN: fusebind-opt %s -p 'fuse{gate=all remarks=true}' 2>&1 | filecheck %s
// CHECK: remark: rejected @ew_add (illegal: non-convex: a path leaves the region through prim.transpose and re-enters at prim.add) in @nonconvex
// CHECK: remark: fused @ew_exp_neg id 65536 (elementwise; 2 ops
// CHECK-LABEL: func.func @nonconvex(
// CHECK-NOT: fused.region
// CHECK: func.return
// CHECK-LABEL: func.func @multiuse(
// CHECK-NEXT: %e, %n = fused.region @ew_exp_neg id 65536 (%a) : (tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
// CHECK: fused.yield %{{.*}}, %{{.*}} : tensor<8xf32>, tensor<8xf32>
// CHECK: %t = prim.reshape %e
// CHECK-NEXT: func.return %n, %t
func.func @nonconvex(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %e = prim.exp %a : tensor<4x4xf32> -> tensor<4x4xf32>
  %t = prim.transpose %e {perm = [1, 0]} : tensor<4x4xf32> -> tensor<4x4xf32>
  %s = prim.add %e, %t : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  func.return %s : tensor<4x4xf32>
}
func.func @multiuse(%a: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %e = prim.exp %a : tensor<8xf32> -> tensor<8xf32>
  %n = prim.neg %e : tensor<8xf32> -> tensor<8xf32>
  %t = prim.reshape %e : tensor<8xf32> -> tensor<8xf32>
  func.return %n, %t : tensor<8xf32>, tensor<8xf32>
}
