// bias+relu (catalog id 4) and a matmul epilogue (matmul stays outside, on BLAS;
// the epilogue is marked to run in place in the matmul's output buffer).
// RUN: fusebind-opt %s -p 'fuse{gate=all}' | filecheck %s
// RUN: fusebind-opt %s -p 'fuse{gate=none remarks=true}' 2>&1 >/dev/null | filecheck %s --check-prefix=GATED
// CHECK-LABEL: func.func @br(
// CHECK-NEXT: fused.region @bias_relu id 4 (%a, %b)
// CHECK-NOT: fused.inplace
// CHECK: fused.yield
// CHECK-NEXT: }
// CHECK-NEXT: func.return
// CHECK-NOT: prim.relu
// CHECK-LABEL: func.func @mm(
// CHECK-NEXT: %m = prim.matmul
// CHECK-NEXT: fused.region @matmul_epilogue_add_sigmoid_add id 65536 (%m, %bias, %res) {{.*}} attributes {fused.inplace = array<i64: 0, 0>} {
// CHECK: fused.yield
// CHECK-NEXT: }
// CHECK-NEXT: func.return
// CHECK-NOT: prim.sigmoid
// GATED: remark: gated id 4 (no kernel on cpu): @bias_relu in @br
// GATED: remark: gated id 65537 (no kernel on cpu): @matmul_epilogue_add_sigmoid_add in @mm
func.func @br(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %x = prim.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y = prim.relu %x : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
func.func @mm(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %bias: tensor<16xf32>, %res: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %m = prim.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %x = prim.add %m, %bias : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %y = prim.sigmoid %x : tensor<4x16xf32> -> tensor<4x16xf32>
  %z = prim.add %y, %res : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  func.return %z : tensor<4x16xf32>
}
