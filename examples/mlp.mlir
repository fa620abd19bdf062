// A transformer MLP block and a softmax attention function, in prim IR.
// Run it: fusebind run examples/mlp.mlir --entry mlp --shape x=128x64
//   (@mlp: any number of rows, d_model 64, hidden 256; @attention is static)
//   or: fusebind-opt examples/mlp.mlir   (or fusebind.dialect.interpret)

// y = x + W2 · gelu(W1 · layernorm(x) + b1) + b2      (GELU, tanh form)
func.func @mlp(%x: tensor<?x64xf32>, %gamma: tensor<64xf32>, %beta: tensor<64xf32>,
               %w1: tensor<64x256xf32>, %b1: tensor<256xf32>,
               %w2: tensor<256x64xf32>, %b2: tensor<64xf32>) -> tensor<?x64xf32> {
  // layernorm over the last axis, eps = 1e-5
  %mean = prim.reduce_mean %x {axes = [1], keepdims} : tensor<?x64xf32> -> tensor<?x1xf32>
  %xc = prim.sub %x, %mean : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  %sq = prim.mul %xc, %xc : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %var = prim.reduce_mean %sq {axes = [1], keepdims} : tensor<?x64xf32> -> tensor<?x1xf32>
  %eps = prim.constant dense<1.0e-05> : tensor<f32>
  %ve = prim.add %var, %eps : (tensor<?x1xf32>, tensor<f32>) -> tensor<?x1xf32>
  %inv = prim.rsqrt %ve : tensor<?x1xf32> -> tensor<?x1xf32>
  %xn = prim.mul %xc, %inv : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  %xg = prim.mul %xn, %gamma : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %ln = prim.add %xg, %beta : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  // matmul + bias
  %h0 = prim.matmul %ln, %w1 : (tensor<?x64xf32>, tensor<64x256xf32>) -> tensor<?x256xf32>
  %h = prim.add %h0, %b1 : (tensor<?x256xf32>, tensor<256xf32>) -> tensor<?x256xf32>
  // gelu(h) = 0.5 h (1 + tanh(sqrt(2/pi) (h + 0.044715 h^3)))
  %half = prim.constant dense<5.0e-01> : tensor<f32>
  %one = prim.constant dense<1.0> : tensor<f32>
  %k0 = prim.constant dense<0.797884583> : tensor<f32>
  %k1 = prim.constant dense<4.471500e-02> : tensor<f32>
  %h2 = prim.mul %h, %h : (tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x256xf32>
  %h3 = prim.mul %h2, %h : (tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x256xf32>
  %c3 = prim.mul %h3, %k1 : (tensor<?x256xf32>, tensor<f32>) -> tensor<?x256xf32>
  %in = prim.add %h, %c3 : (tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x256xf32>
  %arg = prim.mul %in, %k0 : (tensor<?x256xf32>, tensor<f32>) -> tensor<?x256xf32>
  %t = prim.tanh %arg : tensor<?x256xf32> -> tensor<?x256xf32>
  %t1 = prim.add %t, %one : (tensor<?x256xf32>, tensor<f32>) -> tensor<?x256xf32>
  %hh = prim.mul %h, %half : (tensor<?x256xf32>, tensor<f32>) -> tensor<?x256xf32>
  %g = prim.mul %hh, %t1 : (tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x256xf32>
  // second matmul + bias, residual
  %o0 = prim.matmul %g, %w2 : (tensor<?x256xf32>, tensor<256x64xf32>) -> tensor<?x64xf32>
  %o = prim.add %o0, %b2 : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %y = prim.add %x, %o : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  func.return %y : tensor<?x64xf32>
}

// softmax(q kᵀ / sqrt(d)) v, batched over heads
func.func @attention(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  %kt = prim.transpose %k {perm = [0, 2, 1]} : tensor<2x8x16xf32> -> tensor<2x16x8xf32>
  %s0 = prim.matmul %q, %kt : (tensor<2x8x16xf32>, tensor<2x16x8xf32>) -> tensor<2x8x8xf32>
  %scale = prim.constant dense<2.500000e-01> : tensor<f32>
  %s = prim.mul %s0, %scale : (tensor<2x8x8xf32>, tensor<f32>) -> tensor<2x8x8xf32>
  %m = prim.reduce_max %s {axes = [2], keepdims} : tensor<2x8x8xf32> -> tensor<2x8x1xf32>
  %sc = prim.sub %s, %m : (tensor<2x8x8xf32>, tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %e = prim.exp %sc : tensor<2x8x8xf32> -> tensor<2x8x8xf32>
  %z = prim.reduce_sum %e {axes = [2], keepdims} : tensor<2x8x8xf32> -> tensor<2x8x1xf32>
  %p = prim.div %e, %z : (tensor<2x8x8xf32>, tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %out = prim.matmul %p, %v : (tensor<2x8x8xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  func.return %out : tensor<2x8x16xf32>
}
