// A string attribute with a non-ASCII character is refused: the printer escapes it as UTF-8 bytes
// that the parser reads back as bytes, so such a module would not print and parse back.
// RUN: fusebind-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{has a non-ASCII character; use ASCII names and strings}}
"func.func"() <{sym_name = "chain", function_type = (tensor<4xf32>) -> tensor<4xf32>}> ({
^bb0(%a: tensor<4xf32>):
  "func.return"(%a) : (tensor<4xf32>) -> ()
}) : () -> ()
