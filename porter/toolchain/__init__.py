"""Finding a wasm32-wasip1 + simd128 toolchain and wasmtime (`porter doctor`), and running cargo
with one shared target directory."""
