// A dense attribute above MAX_DENSE_ELEMENTS (2**24) is refused before xDSL expands the splat.
// RUN: not fusebind-opt %s 2>&1 | filecheck %s
// CHECK: dense-size-cap.mlir:7:{{[0-9]+}}: error: dense attribute of type tensor<100000x100000xf32> has 10000000000 elements, more than the 16777216 fusebind parses (MAX_DENSE_ELEMENTS)
// CHECK-NOT: Traceback
// CHECK-NOT: MemoryError
func.func @f() -> tensor<100000x100000xf32> {
  %c = prim.constant dense<1.0> : tensor<100000x100000xf32>
  func.return %c : tensor<100000x100000xf32>
}
