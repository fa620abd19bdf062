// RUN: not fusebind-opt %t.does-not-exist.mlir 2>&1 | filecheck %s
// CHECK: fusebind-opt: error: cannot read {{.*}}does-not-exist.mlir
