"""Running built modules under wasmtime with epoch interruption, as Spin does, and the byte
protocols of the eval and generation modules."""
