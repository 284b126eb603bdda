"""onnxruntime's CPU provider as numpy definitions: cpu (the CPU targets, which MLAS kernels each
takes) and floats (the float kernels per target). QDQ and float16 kernels will sit beside them."""
