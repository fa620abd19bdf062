// Every verifier message of prim.check (issue 14).
// RUN: fusebind-opt %s --split-input-file --verify-diagnostics

func.func @f(%a: tensor<4xi64>, %c: tensor<4xi32>) {
  // expected-error @+1 {{prim.check: condition element type i32 is not i1}}
  %0 = prim.check %a, %c {message = "m"} : (tensor<4xi64>, tensor<4xi32>) -> tensor<4xi64>
  func.return
}

// -----

func.func @f(%a: tensor<4xi64>, %c: tensor<4xi1>) {
  // expected-error @+1 {{prim.check: result type tensor<4xf32> does not match the inferred shape (4,) and element type i64}}
  %0 = prim.check %a, %c {message = "m"} : (tensor<4xi64>, tensor<4xi1>) -> tensor<4xf32>
  func.return
}
