"""Goldens: reference outputs made by `porter golden` (porter.check.make_golden) or
golden/make_*_goldens.py, read by `porter run`, `porter verify` and `porter check`.

An encoder golden is `<name>.npz` (ids, attention_mask [N, seq], live [N], text_index [N],
logits [N, seq, labels], or [N, 1, width] for a pooled head; token_type_ids [N, seq] where the
model has a token-type input and a window has a segment B) with `<name>.json` beside it saying
which model file, runtime and kernels made it.

A decoder golden (manifest "format": "porter.decoder-golden/1", the layout of
examples/tinystories/golden) holds per prompt i `p{i}_prompt_ids` int64 [T],
`p{i}_prompt_logits` float32 [T, vocab] (the prompt pass), `p{i}_step_logits` float32
[steps, vocab] (row k chose generated token k; row 0 is the prompt's last row) and
`p{i}_generated_ids` int64 [steps], greedy.

porter checks the model file's SHA-256 against the manifest before comparing, so a golden can
never silently be compared with a different model.
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from porter.errors import PorterError
from porter.frontends import model_format
from porter.reference.litert import floats as LF
from porter.reference.ort import cpu as ort_cpus
from porter.fsutil import reproducible_npz, write_atomic

ARRAYS = ("ids", "attention_mask", "live", "text_index", "logits")
TYPES = "token_type_ids"  # optional: the windows' token types (zeros without it)
ENCODER_FORMAT = "porter.golden/1"
DECODER_FORMAT = "porter.decoder-golden/1"
DECODER_KEYS = ("prompt_ids", "prompt_logits", "step_logits", "generated_ids")


@dataclass
class Golden:
    path: Path
    manifest: dict
    ids: np.ndarray
    attention_mask: np.ndarray
    live: np.ndarray
    text_index: np.ndarray
    logits: np.ndarray
    token_type_ids: np.ndarray  # [N, seq]: zeros where the golden has none

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
        return reference_label(self.manifest)


@dataclass
class DecoderGolden:
    path: Path
    manifest: dict
    prompt_ids: list[np.ndarray]
    prompt_logits: list[np.ndarray]
    step_logits: list[np.ndarray]
    generated_ids: list[np.ndarray]

    @property
    def prompts(self) -> int:
        return len(self.prompt_ids)

    @property
    def steps(self) -> int:
        return len(self.generated_ids[0])

    @property
    def label(self) -> str:
        return reference_label(self.manifest)


def reference_label(manifest: dict) -> str:
    m = manifest
    return f"{m.get('runtime', '?')} {m.get('runtime_version', '')} {m.get('mode', '?')}".strip()


def npz_path(path: str | Path) -> Path:
    """GOLDEN or GOLDEN.npz -> GOLDEN.npz."""
    path = Path(path)
    return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


def _read(path: str | Path) -> tuple[Path, dict, dict[str, np.ndarray]]:
    npz = npz_path(path)
    if not npz.is_file():
        raise PorterError(f"golden {path}: no such file")
    manifest = read_manifest(npz)
    try:
        with np.load(npz) as data:
            arrays = {k: data[k] for k in data.files}
    except (ValueError, OSError, zipfile.BadZipFile) as e:
        raise PorterError(f"golden {npz}: not a golden archive ({e})") from None
    return npz, manifest, arrays


def read_manifest(path: str | Path) -> dict:
    """A golden's manifest alone (empty when it has none), without loading its arrays."""
    manifest_path = npz_path(path).with_suffix(".json")
    try:
        return json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    except (ValueError, OSError) as e:
        raise PorterError(f"golden {path}: its manifest {manifest_path.name} is not JSON ({e})") from None


FLAGS_KEY, L1D_KEY = "cpu_flags", "cpu_l1d_bytes"  # what a manifest records of its CPU


def cpu_choices(model: str | Path, manifest: dict, golden_name: str, ort_cpu: str = ort_cpus.AUTO,
                l1d: str = ort_cpus.AUTO, float_linears=None, model_kind: str | None = None) -> tuple[str, str]:
    """(--ort-cpu, --l1d) for running or checking `model` against a golden: each choice left at
    auto becomes what the golden's CPU did, read from only what the model's reference computes
    differently by CPU, and an explicit one stays. The one place that decides what a golden's
    CPU record means:

    - an ONNX model runs onnxruntime, whose kernels MLAS picks by the CPU's flags: the manifest
      must list them (cpu_flags, AVX2 and FMA among them), else the golden is refused;
    - a TFLite model runs LiteRT's builtin kernels, which pick nothing by flags (a golden's
      cpu_flags, partial or absent, do not matter); only Eigen's float products deeper than its
      L1 depth block follow the CPU's L1 data cache size, so cpu_l1d_bytes is needed only where
      the model has such a layer (float_linears: its float Linears' (depth, outputs); read from
      the graph when not given).

    model_kind: "onnx" or "tflite" where the caller knows it (a built module), else read from
    the model file."""
    found = model_kind or model_format(model)
    if ort_cpu == ort_cpus.AUTO and found == "onnx":
        ort_cpu = golden_ort_target(manifest, golden_name).name
    if l1d == ort_cpus.AUTO and found == "tflite":
        l1d = str(_golden_l1d(model, manifest, golden_name, float_linears))
    return ort_cpu, l1d


def golden_window(path: str | Path) -> int | None:
    """The tokens per window of an encoder golden (what a graph with a symbolic sequence length
    is compiled for when this golden is given); None for a decoder golden."""
    if read_manifest(path).get("format") == DECODER_FORMAT:
        return None
    return int(load_golden(path).ids.shape[1])


def golden_ort_target(manifest: dict, golden_name: str) -> ort_cpus.OrtCpu:
    """onnxruntime's path on the CPU an ONNX model's golden was made on, from its cpu_flags."""
    flags = manifest.get(FLAGS_KEY)
    record = (f"record the flags line of that machine's /proc/cpuinfo as \"{FLAGS_KEY}\" (a list) in "
              f"its manifest, or choose --ort-cpu {'|'.join(ort_cpus.TARGETS)}")
    if not isinstance(flags, list) or not flags:
        raise PorterError(f"golden {golden_name} records no {FLAGS_KEY}: onnxruntime picks its kernels by "
                          f"the CPU's flags (AVX2, FMA, AVX-512, VNNI), so porter cannot tell which arithmetic "
                          f"made it; {record}")
    missing = [f for f in ort_cpus.REQUIRED_FLAGS if f not in flags]
    if missing:
        raise PorterError(f"golden {golden_name}: its {FLAGS_KEY} have no {' or '.join(missing)}: either the "
                          f"list is partial or the CPU lacks them, where onnxruntime's arithmetic is not "
                          f"reproduced; {record}")
    return ort_cpus.golden_target(manifest, golden_name)


def ort_path_of(manifest: dict) -> str | None:
    """For reports on an ONNX model: the onnxruntime path its golden was made on (None where the
    golden does not say)."""
    try:
        return golden_ort_target(manifest, "golden").name
    except PorterError:
        return None


def _golden_l1d(model, manifest: dict, golden_name: str, float_linears) -> int:
    """The L1 data cache size LiteRT blocked the golden's float products for."""
    value = manifest.get(L1D_KEY)
    if isinstance(value, int) and value > 0:
        return value
    depends = [(k, n) for k, n in (float_linears if float_linears is not None else _float_linears(model))
               if LF.depth_depends_on_l1d(k)]
    if not depends:
        return LF.EIGEN_L1_BYTES  # every float product is one depth block on any CPU
    k, n = depends[0]
    raise PorterError(f"golden {golden_name} records no {L1D_KEY}: LiteRT sums the float layer of depth {k} "
                      f"({n} outputs) in depth blocks that follow the L1 data cache size of the CPU it ran on; "
                      f"record that size in bytes as \"{L1D_KEY}\" in its manifest (getconf LEVEL1_DCACHE_SIZE "
                      f"on that machine), or give --l1d SIZE")


def _float_linears(model) -> list[tuple[int, int]]:
    """(depth, outputs) of a TFLite graph's float FULLY_CONNECTED layers (the products Eigen blocks)."""
    from porter.frontends import load_graph

    g = load_graph(model)
    weights = [g.tensor(op.inputs[1]) for op in g.ops if op.type == "FULLY_CONNECTED" and len(op.inputs) > 1]
    return [(w.shape[-1], w.shape[0]) for w in weights if w.is_const and w.dtype == "float32" and len(w.shape) == 2]


def load_golden(path: str | Path) -> Golden:
    npz, manifest, arrays = _read(path)
    missing = [k for k in ARRAYS if k not in arrays]
    if missing:
        kind = " (a decoder golden)" if "p0_prompt_ids" in arrays else ""
        raise PorterError(f"golden {npz}: not an encoder golden{kind}: no {', '.join(missing)}")
    types = arrays.get(TYPES, np.zeros_like(arrays["ids"]))
    arrays = {k: arrays[k] for k in ARRAYS}
    n, seq = arrays["ids"].shape
    logits = arrays["logits"]
    if logits.ndim != 3 or logits.shape[0] != n or logits.shape[1] not in (seq, 1) or arrays["live"].shape != (n,) \
            or types.shape != (n, seq):
        raise PorterError(f"golden {npz}: arrays disagree in shape")
    return Golden(npz, manifest, **arrays, token_type_ids=types)


def load_decoder_golden(path: str | Path) -> DecoderGolden:
    npz, manifest, arrays = _read(path)
    count = len([k for k in arrays if re.fullmatch(r"p\d+_prompt_ids", k)])
    if not count:
        raise PorterError(f"golden {npz}: not a decoder golden (no p0_prompt_ids)")
    try:
        parts = {key: [arrays[f"p{i}_{key}"] for i in range(count)] for key in DECODER_KEYS}
    except KeyError as e:
        raise PorterError(f"golden {npz}: decoder golden without {e.args[0]}") from None
    golden = DecoderGolden(npz, manifest, **parts)
    if golden.steps < 1:
        raise PorterError(f"golden {npz}: no generated token to compare")
    for i in range(count):
        length, steps = len(golden.prompt_ids[i]), len(golden.generated_ids[i])
        if steps != golden.steps or golden.prompt_logits[i].shape[0] != length \
                or golden.step_logits[i].shape[0] != steps:
            raise PorterError(f"golden {npz}: prompt {i}'s arrays disagree in shape")
    return golden


def check_token_types(golden: Golden, type_vocab: int, model_name: str) -> None:
    """A golden's token types must be ones the model reads: a model without a token-type input
    (type_vocab 1) computes every window as segment A, whatever the golden says."""
    types = golden.token_type_ids
    if types.size and (types.min() < 0 or types.max() >= type_vocab):
        w = int(np.argwhere((types < 0) | (types >= type_vocab))[0][0])
        what = ("has no token-type input" if type_vocab == 1
                else f"has a token-type table of {type_vocab} rows")
        raise PorterError(f"golden {golden.path.name}: window {w} has token type {int(types[w].max())}, but "
                          f"{model_name} {what}")


def check_model_matches(golden: Golden | DecoderGolden, model: str | Path) -> None:
    want = golden.manifest.get("model_sha256")
    if not want:
        return
    got = sha256_of(model)
    if got != want:
        raise PorterError(f"golden {golden.path.name} was made from a model with sha256 "
                          f"{want[:12]}…, but {model} has {got[:12]}…")


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_golden(path: str | Path, arrays: dict[str, np.ndarray], manifest: dict) -> Path:
    """GOLDEN.json, then GOLDEN.npz (byte-reproducible), each written whole; a golden is read
    through its .npz, so it appears only once its manifest is in place. Returns the .npz."""
    npz = npz_path(path)
    manifest_path = npz.with_suffix(".json")
    write_atomic(manifest_path, (json.dumps(manifest, indent=1, ensure_ascii=False) + "\n").encode())
    try:
        write_atomic(npz, reproducible_npz(arrays))
    except BaseException:
        manifest_path.unlink(missing_ok=True)
        raise
    return npz
