// prim.slice is an index map (INDEX_MAP): it joins its consumer's fused.region as a prologue
// (read in place, no intermediate array), for positive and negative strides, in front of an
// elementwise chain and of a reduction; a slice with no consumer stays a plain op.
// RUN: fusebind-opt %s -p 'fuse{gate=all}' | filecheck %s
// CHECK-LABEL: func.func @rope_half(
// CHECK-NEXT: fused.region @ew_slice_slice_mul_add id {{[0-9]+}} (%x, %c)
// CHECK-NEXT: ^bb0(%x_1: tensor<4x8xf32>, %c_1: tensor<4x4xf32>):
// CHECK-NEXT: %a = prim.slice %x_1 {starts = [0, 0], limits = [4, 4], strides = [1, 1]} : tensor<4x8xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %b = prim.slice %x_1 {starts = [3, 7], limits = [-1, -1], strides = [-1, -2]} : tensor<4x8xf32> -> tensor<4x4xf32>
// CHECK-NEXT: prim.mul %a, %c_1
// CHECK-NEXT: prim.add %m, %b
// CHECK-NEXT: fused.yield
// CHECK-NEXT: }
// CHECK-NEXT: func.return
// CHECK-LABEL: func.func @row_sum(
// CHECK-NEXT: fused.region @fused_slice_exp_reduce_sum id {{[0-9]+}} (%x)
// CHECK-NEXT: ^bb0(%x_1: tensor<4x8xf32>):
// CHECK-NEXT: prim.slice %x_1 {starts = [0, 7], limits = [4, -1], strides = [1, -1]}
// CHECK-NEXT: prim.exp
// CHECK-NEXT: prim.reduce_sum
// CHECK-NEXT: fused.yield
// CHECK-LABEL: func.func @lone(
// CHECK-NEXT: %a = prim.slice %x {starts = [0, 0], limits = [4, 8], strides = [2, 1]}
// CHECK-NOT: fused.region
// CHECK: func.return %a
func.func @rope_half(%x: tensor<4x8xf32>, %c: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = prim.slice %x {starts = [0, 0], limits = [4, 4], strides = [1, 1]} : tensor<4x8xf32> -> tensor<4x4xf32>
  %b = prim.slice %x {starts = [3, 7], limits = [-1, -1], strides = [-1, -2]} : tensor<4x8xf32> -> tensor<4x4xf32>
  %m = prim.mul %a, %c : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = prim.add %m, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  func.return %s : tensor<4x4xf32>
}
func.func @row_sum(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
  %a = prim.slice %x {starts = [0, 7], limits = [4, -1], strides = [1, -1]} : tensor<4x8xf32> -> tensor<4x8xf32>
  %e = prim.exp %a : tensor<4x8xf32> -> tensor<4x8xf32>
  %r = prim.reduce_sum %e {axes = [1], keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
  func.return %r : tensor<4x1xf32>
}
func.func @lone(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  %a = prim.slice %x {starts = [0, 0], limits = [4, 8], strides = [2, 1]} : tensor<4x8xf32> -> tensor<2x8xf32>
  func.return %a : tensor<2x8xf32>
}
