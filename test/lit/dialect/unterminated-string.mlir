// An unclosed string literal is refused at its quote, at once (xDSL's own lexer would backtrack exponentially).
// RUN: not fusebind-opt %s 2>&1 | filecheck %s
// CHECK: unterminated-string.mlir:6:12: error: unterminated string literal: close it with " on the same line
// CHECK-NOT: Traceback
// A "closed" literal in a comment is fine.
func.func @"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa() {
  func.return
}
