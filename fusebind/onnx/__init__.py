"""fusebind's ONNX door: an importer from `onnx.ModelProto` to prim IR, and the standard
ONNX backend module (`fusebind.onnx.backend`).

This room sits above `fusebind.api` (a model becomes a function traced by `fb.jit`) and
below the top-level modules (the CLI's `fusebind run model.onnx` and `fusebind import`).
"""
