// A user op (`mylib.cube`, `mylib.hypot2`: one class each, defined only in test/api/user_ops.py, which
// registers them with fb.register_op) through `fusebind-opt --plugin`: it parses, verifies and prints
// back as it was written (user-op-fuse.mlir: fusion). Without the plugin it is an unknown op (exit 1).
// RUN: env PYTHONPATH=%S/../../api fusebind-opt %s --plugin user_ops | filecheck %s --check-prefix=ROUND
// RUN: env PYTHONPATH=%S/../../api fusebind-opt %s --plugin user_ops -p verify | filecheck %s --check-prefix=ROUND
// RUN: not fusebind-opt %s 2>&1 | filecheck %s --check-prefix=UNKNOWN

func.func @f(%a: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
  %c = mylib.cube %a : tensor<64xf32> -> tensor<64xf32>
  %m = prim.mul %c, %b : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %h = mylib.hypot2 %m, %a : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return %h : tensor<64xf32>
}

// ROUND:      func.func @f(%a: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
// ROUND-NEXT:   %c = mylib.cube %a : tensor<64xf32> -> tensor<64xf32>
// ROUND-NEXT:   %m = prim.mul %c, %b : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
// ROUND-NEXT:   %h = mylib.hypot2 %m, %a : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
// ROUND-NEXT:   func.return %h : tensor<64xf32>

// UNKNOWN: user-op-plugin.mlir:9:19: error: Operation mylib.cube is not registered
// UNKNOWN-NOT: Traceback
