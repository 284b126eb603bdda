"""The arithmetic porter reproduces, in numpy: LiteRT's builtin kernels, onnxruntime's CPU kernels
per CPU target, the quantisation formats, and the executors that run an IR with them (the
definition every generated crate is checked against)."""
