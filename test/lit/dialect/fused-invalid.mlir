// Every verifier message of the fused dialect.
// RUN: fusebind-opt %s --split-input-file --verify-diagnostics

func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{fused.region: fused_id must be >= 0 (0 = unassigned), found -2}}
  %r = fused.region @g id -2 (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    fused.yield %x : tensor<4xf32>
  }
  func.return
}

// -----

func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{fused.region: body has 1 block arguments, the region has 2 operands}}
  %r = fused.region @g (%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    fused.yield %x : tensor<4xf32>
  }
  func.return
}

// -----

func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{fused.region: block argument #0 has type tensor<4xf64>, operand #0 has type tensor<4xf32>}}
  %r = fused.region @g (%a) : (tensor<4xf32>) -> tensor<4xf64> {
  ^bb0(%x: tensor<4xf64>):
    fused.yield %x : tensor<4xf64>
  }
  func.return
}

// -----

func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{fused.region: body holds 'arith.constant'; only prim ops (and registered user ops) and fused.yield are allowed}}
  %r = fused.region @g (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %c = arith.constant 1 : i32
    fused.yield %x : tensor<4xf32>
  }
  func.return
}

// -----

func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{fused.region: body must end with fused.yield, found 'func.return'}}
  %r = fused.region @g (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    // expected-error @+1 {{'func.return' expects parent op 'func.func'}}
    func.return %x : tensor<4xf32>
  }
  func.return
}

// -----

func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{fused.region: yield has 2 values, the region declares 1 results}}
  %r = fused.region @g (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    fused.yield %x, %x : tensor<4xf32>, tensor<4xf32>
  }
  func.return
}

// -----

func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{fused.region: yield value #0 has type tensor<4xf32>, result #0 has type tensor<4xf64>}}
  %r = fused.region @g (%a) : (tensor<4xf32>) -> tensor<4xf64> {
  ^bb0(%x: tensor<4xf32>):
    fused.yield %x : tensor<4xf32>
  }
  func.return
}

// -----

func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{fused.yield: must be inside fused.region, found parent 'func.func'}}
  fused.yield %a : tensor<4xf32>
}

// -----

func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{Region 'body' at position 0 expected a single block, but got 2 blocks}}
  %r = "fused.region"(%a) <{fused_id = 0 : i64, name = "g"}> ({
  ^bb0(%x: tensor<4xf32>):
    "fused.yield"(%x) : (tensor<4xf32>) -> ()
  ^bb1:
    "fused.yield"(%x) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}
