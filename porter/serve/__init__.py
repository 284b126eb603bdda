"""The wasi:http services built around a compiled model (redaction, generation): serve-build,
generate-build, `porter serve` and `porter deploy`."""
