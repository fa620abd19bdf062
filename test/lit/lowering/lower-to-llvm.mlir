// lower-to-llvm prints LLVM IR with the C-interface entry; an elementwise
// chain writes the caller's buffer (no malloc). The LLVM IR is the whole
// output (the pass's text output): no MLIR module follows it.
// RUN: fusebind-opt %s -p lower-to-llvm | filecheck %s
// CHECK: define void @fb_chain_0(
// CHECK-NOT: @malloc
// CHECK: define void @_mlir_ciface_fb_chain_0(ptr
// CHECK-NOT: builtin.module
func.func @main(%a: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> {
  %r = fused.region @chain (%a, %b) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32> {
  ^bb0(%x: tensor<?xf32>, %y: tensor<?xf32>):
    %m = prim.mul %x, %y : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
    %q = prim.relu %m : tensor<?xf32> -> tensor<?xf32>
    fused.yield %q : tensor<?xf32>
  }
  func.return %r : tensor<?xf32>
}
