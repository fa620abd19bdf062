// Round trip of prim.check (issue 14: np.nanargmax's data-dependent error), custom and generic form.
// RUN: fusebind-opt %s | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// GENERIC: "prim.check"(%a, %c) <{message = "numpy.nanargmax: All-NaN slice encountered"}> : (tensor<4xi64>, tensor<4xi1>) -> tensor<4xi64>

// CHECK-LABEL: func.func @checks
// CHECK-NEXT: %0 = prim.check %a, %c {message = "numpy.nanargmax: All-NaN slice encountered"} : (tensor<4xi64>, tensor<4xi1>) -> tensor<4xi64>
// CHECK-NEXT: %1 = prim.check %b, %d {message = "m"} : (tensor<2x3xf32>, tensor<2x1xi1>) -> tensor<2x3xf32>
func.func @checks(%a: tensor<4xi64>, %c: tensor<4xi1>, %b: tensor<2x3xf32>, %d: tensor<2x1xi1>) -> (tensor<4xi64>, tensor<2x3xf32>) {
  %0 = prim.check %a, %c {message = "numpy.nanargmax: All-NaN slice encountered"} : (tensor<4xi64>, tensor<4xi1>) -> tensor<4xi64>
  %1 = prim.check %b, %d {message = "m"} : (tensor<2x3xf32>, tensor<2x1xi1>) -> tensor<2x3xf32>
  func.return %0, %1 : tensor<4xi64>, tensor<2x3xf32>
}
