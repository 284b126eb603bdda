"""The IRs recovery produces and codegen consumes: the encoder program (steps over named
buffers, each with exact arithmetic) and the decoder's typed blocks; weights by name."""
