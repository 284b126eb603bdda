"""porter: compile small transformer graphs into Rust + wasm simd128 forward passes."""

from pathlib import Path

__version__ = "0.1.0"

# The repository root: templates/, graphs/ and golden/ live beside the package.
REPO_ROOT = Path(__file__).resolve().parent.parent
TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
