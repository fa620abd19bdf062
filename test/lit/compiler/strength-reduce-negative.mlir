// A constant negative integer exponent is numpy's ValueError, raised when the graph is
// optimized (strength-reduce.mlir: a dynamic result, possibly empty, is left for run time).
// RUN: not fusebind-opt %s --split-input-file -p strength-reduce 2>&1 | filecheck %s --check-prefix=ERR
// RUN: not fusebind-opt %s --split-input-file -p 'fuse{gate=all}' 2>&1 | filecheck %s --check-prefix=FUSE

// ERR: error: pass 'strength-reduce' failed: IntegerPowerError: Integers to negative integer powers are not allowed. (prim.pow on int64 with a negative exponent
// FUSE: error: pass 'fuse' failed: IntegerPowerError: Integers to negative integer powers are not allowed.
func.func @negative_static(%i: tensor<3xi64>) -> tensor<3xi64> {
  %m = prim.constant dense<[1, -2, 3]> : tensor<3xi64>
  %0 = prim.pow %i, %m : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  func.return %0 : tensor<3xi64>
}
