"""LiteRT's builtin kernels as numpy definitions: floats (the float kernels, Eigen's SSE order and
its L1-dependent blocking). The integer kernels of full-integer graphs will sit beside it."""
