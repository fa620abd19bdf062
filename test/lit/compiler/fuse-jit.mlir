// fuse-jit compiles the gated region, adopts its kernel, then fuses under that id.
// RUN: fusebind-opt %s -p 'fuse-jit{remarks=true}' 2>&1 | filecheck %s
// CHECK: remark: adopted id [[ID:[0-9]+]]
// CHECK: remark: fused @ew_add_exp_neg id [[ID]] (elementwise; 3 ops
// CHECK-LABEL: func.func @f(
// CHECK-NEXT: fused.region @ew_add_exp_neg id [[ID]] (%a, %b)
// CHECK: fused.yield
// CHECK-NEXT: }
// CHECK-NEXT: func.return
// CHECK-NOT: prim.exp
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %x = prim.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y = prim.exp %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %z = prim.neg %y : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %z : tensor<4x8xf32>
}
