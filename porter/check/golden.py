"""Reading goldens: reference logits saved by golden/make_*_goldens.py.

A golden is `<name>.npz` (ids, attention_mask [N, seq], live [N], text_index [N], logits
[N, seq, labels], or [N, 1, width] for a model with one output row per window) with `<name>.json` beside it saying which model file, runtime and kernels
made it. porter checks the model file's SHA-256 against the manifest before comparing, so a
golden can never silently be compared with a different model.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from porter.errors import PorterError

ARRAYS = ("ids", "attention_mask", "live", "text_index", "logits")


@dataclass
class Golden:
    path: Path
    manifest: dict
    ids: np.ndarray
    attention_mask: np.ndarray
    live: np.ndarray
    text_index: np.ndarray
    logits: np.ndarray

    @property
    def windows(self) -> int:
        return len(self.ids)

    @property
    def pooled(self) -> bool:
        """One output row per window (a pooled head), stored as logits [windows, 1, width]."""
        return self.logits.shape[1] == 1 and self.ids.shape[1] != 1

    def output_rows(self, w: int) -> int:
        """The rows of window w's logits a module is compared on: its live tokens, or 1 pooled."""
        return 1 if self.pooled else int(self.live[w])

    @property
    def label(self) -> str:
        m = self.manifest
        return f"{m.get('runtime', '?')} {m.get('runtime_version', '')} {m.get('mode', '?')}".strip()


def load_golden(path: str | Path) -> Golden:
    path = Path(path)
    npz = path if path.suffix == ".npz" else path.with_suffix(path.suffix + ".npz")
    if not npz.is_file():
        raise PorterError(f"golden {path}: no such file")
    manifest_path = npz.with_suffix(".json")
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    try:
        with np.load(npz) as data:
            arrays = {k: data[k] for k in ARRAYS}
    except (KeyError, ValueError, OSError) as e:
        raise PorterError(f"golden {npz}: not a golden archive ({e})") from None
    n, seq = arrays["ids"].shape
    if arrays["logits"].ndim != 3 or arrays["logits"].shape[0] != n or arrays["logits"].shape[1] not in (seq, 1) \
            or arrays["live"].shape != (n,):
        raise PorterError(f"golden {npz}: arrays disagree in shape")
    return Golden(npz, manifest, **arrays)


def model_path_for(golden: Golden) -> Path:
    """The model file a golden was made from, resolved against the repository root."""
    name = golden.manifest.get("model_file")
    if not name:
        raise PorterError(f"golden {golden.path}: its manifest names no model file")
    root = golden.path.resolve().parent.parent
    return (root / name) if not Path(name).is_absolute() else Path(name)


def check_model_matches(golden: Golden, model: str | Path) -> None:
    want = golden.manifest.get("model_sha256")
    if not want:
        return
    got = hashlib.sha256(Path(model).read_bytes()).hexdigest()
    if got != want:
        raise PorterError(f"golden {golden.path.name} was made from a model with sha256 "
                          f"{want[:12]}…, but {model} has {got[:12]}…")
