// An elementwise chain: relu(a * b + c), and a GELU (erf form) on a dynamic vector.
func.func @chain(%a: tensor<1024xf32>, %b: tensor<1024xf32>, %c: tensor<1024xf32>) -> tensor<1024xf32> {
  %0 = prim.mul %a, %b : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %1 = prim.add %0, %c : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %2 = prim.relu %1 : tensor<1024xf32> -> tensor<1024xf32>
  func.return %2 : tensor<1024xf32>
}

// gelu(x) = 0.5 x (1 + erf(x / sqrt(2)))
func.func @gelu_erf(%x: tensor<?xf32>) -> tensor<?xf32> {
  %half = prim.constant dense<5.000000e-01> : tensor<f32>
  %one = prim.constant dense<1.000000e+00> : tensor<f32>
  %rs2 = prim.constant dense<0.707106769> : tensor<f32>
  %0 = prim.mul %x, %rs2 : (tensor<?xf32>, tensor<f32>) -> tensor<?xf32>
  %1 = prim.erf %0 : tensor<?xf32> -> tensor<?xf32>
  %2 = prim.add %1, %one : (tensor<?xf32>, tensor<f32>) -> tensor<?xf32>
  %3 = prim.mul %x, %half : (tensor<?xf32>, tensor<f32>) -> tensor<?xf32>
  %4 = prim.mul %3, %2 : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  func.return %4 : tensor<?xf32>
}
