// prim.concat in a fused region is an index map (issue 13): one linalg.generic over the result
// whose inputs are the pieces, each read through a `(d - offset) mod size` map (always inside the
// piece), and a select chain on linalg.index of the axis; elementwise fusion folds the piece's
// producer (the neg) and the consumer into it, the slices stay views, and the LLVM IR of the
// whole region allocates nothing. (Pieces of unequal length: equal ones along the innermost dim
// may take the split form of emit_concat.py.)
// RUN: fusebind-opt %s -p lower-to-linalg | filecheck %s
// RUN: fusebind-opt %s -p lower-to-linalg | %python -m fusebind.lowering.mlir_check | filecheck %s --check-prefix=UPSTREAM
// RUN: fusebind-opt %s -p lower-to-llvm | filecheck %s --check-prefix=LLVM
// UPSTREAM: ok: upstream MLIR parsed and verified
// CHECK-LABEL: func.func @fb_rope_0(%in0: memref<4x8xf32>, %in1: memref<8xf32>, %out0: memref<4x8xf32>)
// CHECK: %[[T:.*]] = bufferization.to_tensor %in0 restrict
// CHECK: tensor.extract_slice %[[T]][0, 0] [4, 3] [1, 1] : tensor<4x8xf32> to tensor<4x3xf32>
// CHECK: tensor.extract_slice %[[T]][0, 3] [4, 5] [1, 1] : tensor<4x8xf32> to tensor<4x5xf32>
// CHECK: linalg.generic
// CHECK: arith.negf
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, (d1 mod 5))>, affine_map<(d0, d1) -> (d0, ((d1 + -5) mod 3))>, affine_map<(d0, d1) -> (d0, d1)>]{{.*}} ins(%{{.*}}, %{{.*}} :
// CHECK: %[[I:.*]] = linalg.index 1 : index
// CHECK: %[[C:.*]] = arith.cmpi ult, %[[I]], %idx5 : index
// CHECK: arith.select %[[C]]
// CHECK: arith.mulf
// CHECK-NOT: prim.
// LLVM: define void @fb_rope_0(
// LLVM-NOT: @malloc
// LLVM: define void @_mlir_ciface_fb_rope_0(ptr
func.func @main(%a: tensor<4x8xf32>, %s: tensor<8xf32>) -> tensor<4x8xf32> {
  %r = fused.region @rope (%a, %s) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x: tensor<4x8xf32>, %ss: tensor<8xf32>):
    %lo = prim.slice %x {starts = [0, 0], limits = [4, 3], strides = [1, 1]} : tensor<4x8xf32> -> tensor<4x3xf32>
    %hi = prim.slice %x {starts = [0, 3], limits = [4, 8], strides = [1, 1]} : tensor<4x8xf32> -> tensor<4x5xf32>
    %n = prim.neg %hi : tensor<4x5xf32> -> tensor<4x5xf32>
    %rot = prim.concat %n, %lo {axis = 1} : (tensor<4x5xf32>, tensor<4x3xf32>) -> tensor<4x8xf32>
    %m = prim.mul %rot, %ss : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    fused.yield %m : tensor<4x8xf32>
  }
  func.return %r : tensor<4x8xf32>
}
