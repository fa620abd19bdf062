// Gathers and concats are index maps (INDEX_MAP): they join their consumer's fused.region as
// prologues. Cross-entropy's take_along feeds the same region as the row max it is compared to;
// np.take by constant indices (a negative one too) feeds a broadcasting add; RoPE's rotate_half
// (two slices, a neg, a concat) is one region with its multiply.
// RUN: fusebind-opt %s -p 'fuse{gate=all}' | filecheck %s
// CHECK-LABEL: func.func @xent(
// CHECK-NEXT: fused.region @fused_take_along_reduce_max_sub id {{[0-9]+}} (%logits, %labels)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %p = prim.take_along %logits_1, %labels_1 {axis = 1} : (tensor<4x10xf32>, tensor<4x1xi64>) -> tensor<4x1xf32>
// CHECK-NEXT: prim.reduce_max %logits_1
// CHECK-NEXT: prim.sub %p, %m
// CHECK-NEXT: fused.yield
// CHECK-LABEL: func.func @take(
// CHECK-NEXT: fused.region @ew_gather_add id {{[0-9]+}} (%x, %b)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %i = prim.constant dense<[4, -5]> : tensor<2xi64>
// CHECK-NEXT: %g = prim.gather %x_1, %i {axis = 0} : (tensor<5x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
// CHECK-NEXT: prim.add %g, %b_1
// CHECK-NEXT: fused.yield
// CHECK-LABEL: func.func @rotate_half(
// CHECK-NEXT: fused.region @{{[a-z_0-9]+}} id {{[0-9]+}} (%x, %c)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: prim.slice %x_1 {starts = [0, 0], limits = [4, 4], strides = [1, 1]}
// CHECK-NEXT: prim.slice %x_1 {starts = [0, 4], limits = [4, 8], strides = [1, 1]}
// CHECK-NEXT: prim.neg %b
// CHECK-NEXT: %r = prim.concat %n, %a {axis = 1} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: prim.mul %r, %c_1
// CHECK-NEXT: fused.yield
// CHECK-NEXT: }
// CHECK-NEXT: func.return
func.func @xent(%logits: tensor<4x10xf32>, %labels: tensor<4x1xi64>) -> tensor<4x1xf32> {
  %p = prim.take_along %logits, %labels {axis = 1} : (tensor<4x10xf32>, tensor<4x1xi64>) -> tensor<4x1xf32>
  %m = prim.reduce_max %logits {axes = [1], keepdims} : tensor<4x10xf32> -> tensor<4x1xf32>
  %d = prim.sub %p, %m : (tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  func.return %d : tensor<4x1xf32>
}
func.func @take(%x: tensor<5x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %i = prim.constant dense<[4, -5]> : tensor<2xi64>
  %g = prim.gather %x, %i {axis = 0} : (tensor<5x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %r = prim.add %g, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  func.return %r : tensor<2x3xf32>
}
func.func @rotate_half(%x: tensor<4x8xf32>, %c: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = prim.slice %x {starts = [0, 0], limits = [4, 4], strides = [1, 1]} : tensor<4x8xf32> -> tensor<4x4xf32>
  %b = prim.slice %x {starts = [0, 4], limits = [4, 8], strides = [1, 1]} : tensor<4x8xf32> -> tensor<4x4xf32>
  %n = prim.neg %b : tensor<4x4xf32> -> tensor<4x4xf32>
  %r = prim.concat %n, %a {axis = 1} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x8xf32>
  %y = prim.mul %r, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
