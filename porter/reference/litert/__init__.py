"""LiteRT's builtin kernels as numpy definitions: floats (the float kernels, Eigen's SSE order and
its L1-dependent blocking), int8 (the integer kernels of full-integer graphs) and full_integer
(such a graph run op by op with them)."""
