"""Writing outputs so that a failure never leaves a partial file or directory behind.

Every file porter writes (model.bin, layouts, reports, tokenizer blobs, cached modules) goes to a
temporary name in the destination's directory and is renamed into place; a directory (a rendered
crate) is built beside its destination and swapped in whole.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import numpy as np


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` via a temporary file in the same directory and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes the file owner-only; outputs are ordinary files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def reproducible_npz(arrays: dict[str, np.ndarray]) -> bytes:
    """np.savez_compressed's bytes with fixed member timestamps: unchanged arrays, same file."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, array in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, member.getvalue())
    return buffer.getvalue()


def copy_atomic(source: Path, destination: Path) -> Path:
    write_atomic(destination, Path(source).read_bytes())
    return destination


def replace_dir(new: Path, destination: Path) -> None:
    """Swap the finished directory `new` into `destination`; the old tree is moved aside first."""
    if destination.exists():
        retired = Path(tempfile.mkdtemp(prefix=f".{destination.name}.old.", dir=destination.parent))
        os.replace(destination, retired / destination.name)
        try:
            os.replace(new, destination)
        except BaseException:
            os.replace(retired / destination.name, destination)  # the old tree, not nothing
            raise
        finally:
            shutil.rmtree(retired, ignore_errors=True)
    else:
        os.replace(new, destination)


def cache_dir(name: str, override_variable: str) -> Path:
    """Where porter keeps one kind of cache: $override_variable if set, else
    $XDG_CACHE_HOME/porter/<name> (~/.cache/porter/<name>)."""
    configured = os.environ.get(override_variable)
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "porter" / name
