// prim.slice in a fused region is an index map (issue 13): the forward part of the read is a
// tensor.extract_slice (a strided subview after bufferization: no copy), a reversed dim is a copy
// generic with the map `d -> (size - 1) - d` that elementwise fusion folds into its consumer; the
// LLVM IR of the whole region allocates nothing.
// RUN: fusebind-opt %s -p lower-to-linalg | filecheck %s
// RUN: fusebind-opt %s -p lower-to-linalg | %python -m fusebind.lowering.mlir_check | filecheck %s --check-prefix=UPSTREAM
// RUN: fusebind-opt %s -p lower-to-llvm | filecheck %s --check-prefix=LLVM
// UPSTREAM: ok: upstream MLIR parsed and verified
// CHECK-LABEL: func.func @fb_rope_0(%in0: memref<4x8xf32>, %out0: memref<4x4xf32>)
// CHECK: %[[T:.*]] = bufferization.to_tensor %in0 restrict
// CHECK: tensor.extract_slice %[[T]][0, 0] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
// CHECK: %[[HI:.*]] = tensor.extract_slice %[[T]][0, 4] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, ((d1 * -1) + 3))>, affine_map<(d0, d1) -> (d0, d1)>]{{.*}} ins(%[[HI]] :
// CHECK: arith.mulf
// CHECK-NOT: prim.
// LLVM: define void @fb_rope_0(
// LLVM-NOT: @malloc
// LLVM: define void @_mlir_ciface_fb_rope_0(ptr
func.func @main(%a: tensor<4x8xf32>) -> tensor<4x4xf32> {
  %r = fused.region @rope (%a) : (tensor<4x8xf32>) -> tensor<4x4xf32> {
  ^bb0(%x: tensor<4x8xf32>):
    %lo = prim.slice %x {starts = [0, 0], limits = [4, 4], strides = [1, 1]} : tensor<4x8xf32> -> tensor<4x4xf32>
    %hi = prim.slice %x {starts = [0, 7], limits = [4, 3], strides = [1, -1]} : tensor<4x8xf32> -> tensor<4x4xf32>
    %m = prim.mul %lo, %hi : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    fused.yield %m : tensor<4x4xf32>
  }
  func.return %r : tensor<4x4xf32>
}
