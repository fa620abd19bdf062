func.func @f() -> tensor<100000000000x100000000000xf32> {
  %c = prim.constant dense<1.0> : tensor<100000000000x100000000000xf32>
  func.return %c : tensor<100000000000x100000000000xf32>
}
