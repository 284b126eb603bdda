"""Goldens for the zoo: golden/zoo/<file>.<mode>.npz + .json, in porter's golden format.

    ~/.cache/porter/export-venv/bin/python graphs/zoo/make_goldens.py [NAME ...]

NAME is a member or a file name (default: everything present in graphs/zoo/).

Encoders: 6 seeded windows per member (`windows_for`), one window per call.
- every .tflite: mode `builtin` (LiteRT, OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
  1 thread); the flavours in the member's `xnnpack` list also mode `xnnpack` (the default
  resolver, XNNPACK delegate applied);
- every .onnx: mode `ort` (onnxruntime CPUExecutionProvider, intra/inter-op threads 1,
  ORT_SEQUENTIAL, ORT_ENABLE_ALL);
- `<member>.torch.npz`: the torch float32 module on the same windows (the reference).
npz arrays: ids, attention_mask [N, seq] int32, live [N] int32, text_index [N] int32 (the
window's index: no texts, the windows are seeded ids), token_type_ids [N, seq] int32 (zeros; only
when the model has that input), logits float32 [N, seq, width] ("tokens") or [N, 1, width]
("pooled": sequence classification, sentence embeddings).

Decoders: `<file>.ort.npz` with p{i}_prompt_ids int64 [T], p{i}_prompt_logits [T, V],
p{i}_step_logits [S, V] (row k = the logits that chose generated token k), p{i}_generated_ids
int64 [S], for 3 seeded prompts of 2-6 ids and 12 greedy steps, the cache fed back; manifest
format "porter.decoder-golden/1".

Every manifest records the runtime, its version, kernels/threads, cpu_model and cpu_flags.
golden/zoo/summary.json is recomputed from every golden present: max |Δ| against torch per file.

The runners (`run_litert`, `run_ort`, `decoder_greedy`) take a model path and windows and return
outputs, for other tools to call; they need only numpy, ai-edge-litert and onnxruntime.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np

ZOO = Path(__file__).resolve().parent
sys.path.insert(0, str(ZOO))
sys.path.insert(0, str(ZOO.parent))
sys.path.insert(0, str(ZOO.parent.parent))

import members as zm  # noqa: E402
import fixture_info  # noqa: E402
from porter.check.references import dequantized_output  # noqa: E402
from porter.fsutil import reproducible_npz, write_atomic  # noqa: E402

WINDOWS = 6
NUM_THREADS = 1
WINDOW_RULE = (
    "6 windows per member, numpy default_rng(10000 + member.seed); live lengths "
    "[seq, seq-1, seq//2, 5, 3, 1]; live ids uniform in [first ordinary id, vocab) with the "
    "family's CLS-like id first and SEP-like id last (a 1-token window is the CLS-like id "
    "alone); padding = the family's pad id; attention_mask 1 on live tokens, 0 on padding; "
    "token_type_ids all zero"
)


# ---------------------------------------------------------------------------------------------
# Machine facts


# graphs/zoo/avx2_cpu/ hides these CPUID features from the process (and so from onnxruntime).
MASKED_BY_AVX2_CPU = ("avx512", "avx_vnni", "avx_ifma", "amx")
AVX2_CPU_NOTE = ("run under graphs/zoo/avx2_cpu/run.sh: CPUID faulting hid AVX-512, AVX-VNNI and AMX, "
                 "so onnxruntime ran its AVX2 kernels; cpu_flags lists what the process saw")


def cpu_facts() -> dict:
    model, flags = None, []
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and model is None:
                model = value.strip()
            elif key == "flags" and not flags:
                flags = value.split()
    except OSError:
        pass
    if os.environ.get("PORTER_CPU_MASK") == "avx2":  # run under graphs/zoo/avx2_cpu/run.sh
        flags = [f for f in flags if not f.startswith(MASKED_BY_AVX2_CPU)]
        return {"cpu_model": model, "cpu_flags": flags, "cpu_masked": AVX2_CPU_NOTE}
    return {"cpu_model": model, "cpu_flags": flags, **l1d_facts()}


def l1d_facts() -> dict:
    """The L1 data cache size (sysfs cpu0, as `porter golden` records it): LiteRT's float
    FULLY_CONNECTED blocks its depth by it (Eigen's CPUID query)."""
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level, kind, size = ((index / n).read_text().strip() for n in ("level", "type", "size"))
        except OSError:
            continue
        if level == "1" and kind in ("Data", "Unified") and size.upper().endswith("K"):
            return {"cpu_l1d_bytes": int(size[:-1]) * 1024}
    return {}


# ---------------------------------------------------------------------------------------------
# Windows


def windows_for(m: zm.Encoder) -> dict[str, np.ndarray]:
    pad, cls, sep, low = m.ids
    rng = np.random.default_rng(10_000 + m.seed)
    lengths = [m.seq, m.seq - 1, m.seq // 2, 5, 3, 1]
    ids = np.full((WINDOWS, m.seq), pad, np.int32)
    mask = np.zeros((WINDOWS, m.seq), np.int32)
    for i, n in enumerate(lengths):
        ids[i, :n] = rng.integers(low, m.vocab, size=n)
        ids[i, 0] = cls
        if n > 1:
            ids[i, n - 1] = sep
        mask[i, :n] = 1
    w = {"input_ids": ids, "attention_mask": mask,
         "live": np.array(lengths, np.int32), "text_index": np.arange(WINDOWS, dtype=np.int32)}
    if m.token_type_input:
        w["token_type_ids"] = np.zeros_like(ids)
    return w


def _feed_names(names: list[str], roles) -> dict[str, str]:
    """file input name -> role (input_ids, attention_mask, token_type_ids).

    Names equal to a role are taken as that role; otherwise `args_<i>` (litert-torch positional)
    or, failing that, the i-th input in the file's order is roles[i]."""
    roles = list(roles)
    out = {}
    for i, n in enumerate(names):
        if n in roles:
            out[n] = n
        elif n.startswith("args_") and n[5:].isdigit():
            out[n] = roles[int(n[5:])]
        else:
            out[n] = roles[i]
    assert sorted(out.values()) == sorted(roles), (names, roles)
    return out


# ---------------------------------------------------------------------------------------------
# Runtimes


def litert_resolver(mode: str):
    from ai_edge_litert.interpreter import OpResolverType

    return {
        "builtin": ("OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES (TFLite builtin kernels)",
                    OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES),
        "xnnpack": ("OpResolverType.AUTO (default; XNNPACK delegate applied)", OpResolverType.AUTO),
    }[mode]


def run_litert(path: Path, windows: dict, roles, mode: str = "builtin", with_io: bool = False):
    """LiteRT signature runner, one window per call: outputs stacked [N, ...] (float32)."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(path), num_threads=NUM_THREADS,
                     experimental_op_resolver_type=litert_resolver(mode)[1])
    sigs = it.get_signature_list()
    assert len(sigs) == 1, f"{path.name}: signatures {list(sigs)}"
    key = next(iter(sigs))
    runner = it.get_signature_runner(key)
    ins, outs = runner.get_input_details(), runner.get_output_details()
    assert len(outs) == 1, f"{path.name}: outputs {list(outs)}"
    (out_name,) = outs
    role_of = _feed_names(list(ins), roles)
    results = []
    for i in range(len(windows["input_ids"])):
        feed = {n: windows[r][i][None].astype(ins[n]["dtype"]) for n, r in role_of.items()}
        out = dequantized_output(runner(**feed)[out_name], outs[out_name])
        results.append(np.asarray(out, dtype=np.float32)[0])
    if not with_io:
        return np.stack(results)
    io = {
        "signature_key": key,
        "inputs": {k: [np.dtype(v["dtype"]).name, [int(d) for d in v["shape"]]] for k, v in ins.items()},
        "input_roles": role_of,
        "outputs": {k: [np.dtype(v["dtype"]).name, [int(d) for d in v["shape"]]] for k, v in outs.items()},
    }
    return np.stack(results), io


ORT_DTYPES = {"tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(float)": np.float32,
              "tensor(float16)": np.float16}


def ort_session(path: Path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = NUM_THREADS
    so.inter_op_num_threads = NUM_THREADS
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


ORT_FACTS = {
    "api": "InferenceSession(path, sess_options, providers=['CPUExecutionProvider'])",
    "execution_provider": "CPUExecutionProvider",
    "graph_optimization_level": "ORT_ENABLE_ALL",
    "execution_mode": "ORT_SEQUENTIAL",
    "intra_op_num_threads": NUM_THREADS,
    "inter_op_num_threads": NUM_THREADS,
}


def run_ort(path: Path, windows: dict, roles, with_io: bool = False):
    """onnxruntime CPU, one window per call: the single output stacked [N, ...] (float32)."""
    sess = ort_session(path)
    ins = {i.name: i for i in sess.get_inputs()}
    outs = sess.get_outputs()
    assert len(outs) == 1, f"{path.name}: outputs {[o.name for o in outs]}"
    role_of = _feed_names(list(ins), roles)
    results = []
    for i in range(len(windows["input_ids"])):
        feed = {n: windows[r][i][None].astype(ORT_DTYPES[ins[n].type]) for n, r in role_of.items()}
        (out,) = sess.run([outs[0].name], feed)
        results.append(np.asarray(out, dtype=np.float32)[0])
    if not with_io:
        return np.stack(results)
    io = {
        "inputs": {k: [np.dtype(ORT_DTYPES[v.type]).name, list(v.shape)] for k, v in ins.items()},
        "input_roles": role_of,
        "outputs": {o.name: [np.dtype(ORT_DTYPES[o.type]).name, list(o.shape)] for o in outs},
    }
    return np.stack(results), io


def run_torch(m: zm.Encoder, windows: dict) -> np.ndarray:
    """The torch float32 module (needs the export environment), one window per call."""
    import torch
    import zoo_torch as zt

    torch.set_num_threads(1)
    module = zt.build_encoder(m)
    out = []
    with torch.no_grad():
        for i in range(len(windows["input_ids"])):
            args = [torch.from_numpy(windows[r][i][None].astype(np.int64)) for r in m.input_roles]
            (y,) = module(*args).values()
            out.append(y[0].numpy().astype(np.float32))
    return np.stack(out)


# ---------------------------------------------------------------------------------------------
# Encoder goldens


def as_golden_logits(m: zm.Encoder, out: np.ndarray) -> np.ndarray:
    """[N, seq, width] for token outputs, [N, 1, width] for pooled ones."""
    if m.output_kind == "pooled":
        out = out[:, None, :]
    assert out.shape == (WINDOWS, m.seq if m.output_kind == "tokens" else 1, m.width), out.shape
    return out.astype(np.float32)


def write_json(path: Path, obj) -> None:
    write_atomic(path, (json.dumps(obj, indent=1, ensure_ascii=False) + "\n").encode())


def write_npz(path: Path, arrays: dict) -> None:
    data = reproducible_npz(arrays)
    assert len(data) < zm.MAX_FILE_BYTES, f"{path.name}: {len(data)} bytes"
    write_atomic(path, data)


def encoder_arrays(m: zm.Encoder, w: dict, logits: np.ndarray) -> dict:
    arrays = {"ids": w["input_ids"], "attention_mask": w["attention_mask"], "live": w["live"],
              "text_index": w["text_index"]}
    if m.token_type_input:
        arrays["token_type_ids"] = w["token_type_ids"]
    arrays["logits"] = logits
    return arrays


def live_rows(m: zm.Encoder, w: dict, logits: np.ndarray) -> np.ndarray:
    """[rows, width]: live tokens of token outputs, every window of pooled ones."""
    if m.output_kind == "tokens":
        return logits[w["attention_mask"].astype(bool)]
    return logits[:, 0]


def versus(m: zm.Encoder, w: dict, a: np.ndarray, ref: np.ndarray) -> dict:
    la, lr = live_rows(m, w, a).astype(np.float64), live_rows(m, w, ref).astype(np.float64)
    d = np.abs(la - lr)
    out = {"max_abs": float(d.max()), "mean_abs": float(d.mean()), "rows": int(len(la))}
    if m.head in ("tok", "seq"):
        agree = la.argmax(-1) == lr.argmax(-1)
        out["label_agreement"] = float(agree.mean())
        out["label_disagreements"] = int((~agree).sum())
    return out


def manifest_base(m: zm.Encoder, w: dict, logits: np.ndarray) -> dict:
    pad, cls, sep, low = m.ids
    return {
        "member": m.name,
        "family": m.family,
        "head": m.head,
        "weights": m.weights,
        "attention": m.attention,
        "output_kind": m.output_kind,
        "width": m.width,
        "seq": m.seq,
        "labels": m.labels,
        "vocab": m.vocab,
        "pad_id": pad,
        "cls_id": cls,
        "sep_id": sep,
        "first_ordinary_id": low,
        "windowing": WINDOW_RULE,
        "windows": int(len(w["input_ids"])),
        "live_tokens": int(w["live"].sum()),
        "arrays": {k: [str(v.dtype), list(v.shape)] for k, v in encoder_arrays(m, w, logits).items()},
        **cpu_facts(),
    }


def torch_golden(m: zm.Encoder, w: dict) -> np.ndarray:
    import torch

    logits = as_golden_logits(m, run_torch(m, w))
    stem = zm.GOLDEN_DIR / f"{m.name}.torch"
    write_npz(stem.with_name(stem.name + ".npz"), encoder_arrays(m, w, logits))
    rows = live_rows(m, w, logits)
    extra = {}
    if m.head in ("tok", "seq") and m.labels > 1:
        top2 = np.sort(rows, axis=-1)[:, -2:]
        extra["min_top2_gap"] = float((top2[:, 1] - top2[:, 0]).min())
    write_json(stem.with_name(stem.name + ".json"), {
        "golden": stem.name + ".npz",
        "model": f"graphs/zoo/zoo_torch.py build_encoder(members.BY_NAME[{m.name!r}])",
        "runtime": "torch",
        "runtime_version": torch.__version__,
        "transformers_version": version("transformers"),
        "mode": "torch",
        "threads": 1,
        "dtype": "float32",
        "inputs": {r: ["int64", [1, m.seq]] for r in m.input_roles},
        "outputs": {m.output_name: ["float32", [1, m.seq, m.width] if m.output_kind == "tokens"
                                    else [1, m.width]]},
        **extra,
        **manifest_base(m, w, logits),
    })
    return logits


U8S8_NOTE = (
    "onnxruntime's CPU MatMulInteger (uint8 activations x int8 weights) on an x86 CPU without "
    "AVX-VNNI / AVX512-VNNI sums products in pairs into int16 with saturation (AVX2 pmaddubsw): "
    "a pair above 32767 is clipped, e.g. 64 x (255 * 127) gives 1048544 instead of 2072640. "
    "These goldens carry that clipping (see cpu_flags); a VNNI machine computes exact int32 sums "
    "and gives different logits for the same file."
)


def has_vnni(flags) -> bool:
    return bool({"avx512_vnni", "avx_vnni"} & set(flags))


def encoder_golden(m: zm.Encoder, flavour: str, mode: str, w: dict, ref: np.ndarray) -> dict:
    path = m.path(flavour)
    if mode == "ort":
        out, io = run_ort(path, w, m.input_roles, with_io=True)
        runtime = {"runtime": "onnxruntime", "runtime_version": version("onnxruntime"), **ORT_FACTS}
        if ("dq8" in flavour or "qdq" in flavour) and not has_vnni(cpu_facts()["cpu_flags"]):
            runtime["kernel_note"] = U8S8_NOTE
    else:
        out, io = run_litert(path, w, m.input_roles, mode=mode, with_io=True)
        runtime = {"runtime": "ai-edge-litert", "runtime_version": version("ai-edge-litert"),
                   "api": "Interpreter(model_path, num_threads=1, experimental_op_resolver_type=...)"
                          ".get_signature_runner(signature_key)",
                   "op_resolver": litert_resolver(mode)[0]}
    logits = as_golden_logits(m, out)
    stem = zm.GOLDEN_DIR / f"{path.name}.{mode}"
    write_npz(stem.with_name(stem.name + ".npz"), encoder_arrays(m, w, logits))
    vs = versus(m, w, logits, ref)
    write_json(stem.with_name(stem.name + ".json"), {
        "golden": stem.name + ".npz",
        "model_file": f"graphs/zoo/{path.name}",
        "model_sha256": fixture_info.sha256(path),
        "flavour": flavour,
        "mode": mode,
        **runtime,
        "threads": NUM_THREADS,
        **io,
        **manifest_base(m, w, logits),
        "vs_torch": vs,
        "torch_reference": f"golden/zoo/{m.name}.torch.npz",
    })
    return vs


# ---------------------------------------------------------------------------------------------
# Decoders


def empty_cache(d: zm.Decoder) -> list[np.ndarray]:
    return [np.zeros((1, d.kv_heads, 0, d.head_dim), np.float32) for _ in range(2 * d.layers)]


def decoder_names(d: zm.Decoder) -> tuple[list[str], list[str]]:
    ins = ["input_ids"] + [f"past_{kv}_{i}" for i in range(d.layers) for kv in ("key", "value")]
    outs = ["logits"] + [f"present_{kv}_{i}" for i in range(d.layers) for kv in ("key", "value")]
    return ins, outs


def decoder_step(sess, d: zm.Decoder, ids, past):
    """One call: ids [T] with the cache `past` -> (logits [T, V], presents)."""
    ins, outs = decoder_names(d)
    feed = {"input_ids": np.asarray(ids, np.int64).reshape(1, -1)}
    feed.update(zip(ins[1:], past))
    r = sess.run(outs, feed)
    return r[0][0], r[1:]


def decoder_greedy(path: Path, d: zm.Decoder, prompt, steps: int, sess=None):
    """Prompt pass (empty cache), then `steps` greedy single-token calls with the cache fed back.
    Returns prompt_logits [T, V], step_logits [steps, V], generated ids [steps]."""
    sess = sess or ort_session(path)
    lg, past = decoder_step(sess, d, prompt, empty_cache(d))
    prompt_logits, cur = lg, lg[-1]
    step_logits, gen = [], []
    for _ in range(steps):
        step_logits.append(cur)
        nxt = int(np.argmax(cur))
        gen.append(nxt)
        lg, past = decoder_step(sess, d, [nxt], past)
        cur = lg[-1]
    return prompt_logits, np.stack(step_logits), np.array(gen, np.int64)


def decoder_prompts(d: zm.Decoder) -> list[np.ndarray]:
    rng = np.random.default_rng(zm.DECODER_PROMPT_SEED + d.seed)
    return [rng.integers(0, d.vocab, size=int(rng.integers(2, 7))).astype(np.int64)
            for _ in range(zm.DECODER_PROMPTS)]


def decoder_golden(d: zm.Decoder) -> dict:
    path = d.path()
    sess = ort_session(path)
    arrays, prompts, gaps = {}, [], []
    torch_delta = None
    try:
        import torch
        import zoo_torch as zt

        torch.set_num_threads(1)
        module = zt.build_decoder(d)
        torch_delta = 0.0
    except ImportError:
        module = None
    for i, prompt in enumerate(decoder_prompts(d)):
        plog, slog, gen = decoder_greedy(path, d, prompt, zm.DECODER_STEPS, sess)
        arrays[f"p{i}_prompt_ids"] = prompt
        arrays[f"p{i}_prompt_logits"] = plog.astype(np.float32)
        arrays[f"p{i}_step_logits"] = slog.astype(np.float32)
        arrays[f"p{i}_generated_ids"] = gen
        top2 = np.sort(slog, axis=-1)[:, -2:]
        gaps.append(float((top2[:, 1] - top2[:, 0]).min()))
        prompts.append({"index": i, "prompt_ids": prompt.tolist(), "generated_ids": gen.tolist()})
        if module is not None:
            # The torch module's full forward over prompt + generated ids: its rows T-1.. are
            # what the cached steps chose from.
            with torch.no_grad():
                full = module(torch.from_numpy(np.concatenate([prompt, gen])[None]),
                              *zt.empty_past(d, 0))[0][0].numpy()
            cached = np.concatenate([plog, slog[1:]], 0)
            torch_delta = max(torch_delta, float(np.abs(full[: len(cached)] - cached).max()))
    stem = zm.GOLDEN_DIR / f"{path.name}.ort"
    write_npz(stem.with_name(stem.name + ".npz"), arrays)
    ins, outs = decoder_names(d)
    s = zm.DECODER_STEPS
    vs = {"max_abs": torch_delta, "min_top2_gap": min(gaps)}
    write_json(stem.with_name(stem.name + ".json"), {
        "format": "porter.decoder-golden/1",
        "golden": stem.name + ".npz",
        "model_file": f"graphs/zoo/{path.name}",
        "model_sha256": fixture_info.sha256(path),
        "member": d.name,
        "family": d.family,
        "flavour": d.flavour,
        "mode": "ort",
        "runtime": "onnxruntime",
        "runtime_version": version("onnxruntime"),
        **ORT_FACTS,
        "threads": NUM_THREADS,
        "inputs": {"input_ids": ["int64", [1, "seq"]],
                   **{n: ["float32", [1, d.kv_heads, "past", d.head_dim]] for n in ins[1:]}},
        "outputs": {"logits": ["float32", [1, "seq", d.vocab]],
                    **{n: ["float32", [1, d.kv_heads, "past + seq", d.head_dim]] for n in outs[1:]}},
        "vocab": d.vocab,
        "layers": d.layers,
        "heads": d.heads,
        "kv_heads": d.kv_heads,
        "head_dim": d.head_dim,
        "n_ctx": d.n_ctx,
        "decoding": f"greedy argmax, {s} steps: one prompt pass with an empty cache (past 0), then "
                    "one token per call with the presents fed back as the next pasts",
        "prompt_rule": f"{zm.DECODER_PROMPTS} prompts, numpy default_rng({zm.DECODER_PROMPT_SEED} "
                       "+ member.seed): length integers(2, 7), ids integers(0, vocab)",
        "npz_keys": {"p{i}_prompt_ids": "int64 [T]", "p{i}_prompt_logits": "float32 [T, V], prompt pass",
                     "p{i}_step_logits": f"float32 [{s}, V], row k = the logits that chose generated "
                                         "token k (row 0 = last prompt row)",
                     "p{i}_generated_ids": f"int64 [{s}]"},
        "prompts": prompts,
        "vs_torch": {"max_abs": torch_delta, "what": "ORT cached logits (prompt rows, then steps) "
                     "against one torch full forward over prompt + generated ids"},
        "min_top2_gap": min(gaps),
        **cpu_facts(),
    })
    return vs


# ---------------------------------------------------------------------------------------------
# Summary


def summary() -> dict:
    """golden/zoo/summary.json from every zoo golden present: max |Δ| against torch per file."""
    rows = {}
    for j in sorted(zm.GOLDEN_DIR.glob("*.json")):
        if j.name == "summary.json" or j.name.endswith(".torch.json"):
            continue
        g = json.loads(j.read_text())
        vs = g.get("vs_torch", {})
        rows[g["golden"]] = {"member": g["member"], "flavour": g["flavour"], "mode": g["mode"],
                             "max_abs_vs_torch": vs.get("max_abs"),
                             "mean_abs_vs_torch": vs.get("mean_abs"),
                             "label_agreement": vs.get("label_agreement"),
                             "model_sha256": g["model_sha256"]}
    modes = {}
    for j in sorted(zm.GOLDEN_DIR.glob("*.tflite.builtin.npz")):
        x = j.with_name(j.name.replace(".builtin.npz", ".xnnpack.npz"))
        if x.exists():
            with np.load(j) as a, np.load(x) as b:
                live = a["attention_mask"].astype(bool)
                d = np.abs(a["logits"].astype(np.float64) - b["logits"])
                d = d[live] if a["logits"].shape[1] == live.shape[1] else d
                modes[j.name[: -len(".builtin.npz")]] = float(d.max())
    out = {"about": "Each zoo golden against the torch float32 module on the same inputs: live "
                    "tokens of token outputs, every window of pooled outputs; decoders: ORT cached "
                    "logits against one torch full forward over prompt + generated ids. "
                    "xnnpack_vs_builtin: max |Δ| between LiteRT's two kernel sets on one file.",
           "goldens": rows,
           "xnnpack_vs_builtin_max_abs": modes,
           **cpu_facts()}
    write_json(zm.GOLDEN_DIR / "summary.json", out)
    return out


def table() -> str:
    """The README's max |Δ| vs torch table: one row per member, one column per flavour
    (LiteRT builtin or onnxruntime; the xnnpack golden in brackets where there is one)."""
    s = json.loads((zm.GOLDEN_DIR / "summary.json").read_text())["goldens"]
    got = {(r["member"], r["flavour"], r["mode"]): r for r in s.values()}
    order = ["litert-f32.tflite", "litert-dq8.tflite", "dynamo-f32.onnx", "dq8pc.onnx", "ts-f32.onnx",
             "dq8pt.onnx", "tf-dq8.tflite", "keras-dq8.tflite"]
    head = "| member | " + " | ".join(zm.SHORT[f] for f in order) + " |"
    lines = [head, "|" + " --- |" * (len(order) + 1)]
    for m in zm.ENCODERS:
        cells = []
        for f in order:
            main = got.get((m.name, f, "ort" if f.endswith(".onnx") else "builtin"))
            if main is None:
                cells.append("")
                continue
            c = f"{main['max_abs_vs_torch']:.2g}"
            x = got.get((m.name, f, "xnnpack"))
            if x is not None:
                c += f" [{x['max_abs_vs_torch']:.2g}]"
            if main["label_agreement"] is not None and main["label_agreement"] < 1:
                c += f" ({100 * main['label_agreement']:.0f}%)"
            cells.append(c)
        lines.append(f"| {m.name} | " + " | ".join(cells) + " |")
    lines += ["", "| decoder | flavour | max abs Δ vs torch (all prompt and step logits) | min top-2 gap |",
              "| --- | --- | --- | --- |"]
    for d in zm.DECODERS:
        j = zm.GOLDEN_DIR / f"{d.path().name}.ort.json"
        if j.exists():
            g = json.loads(j.read_text())
            lines.append(f"| {d.name} | {zm.SHORT[d.flavour]} | {g['vs_torch']['max_abs']:.2g} | "
                         f"{g['min_top2_gap']:.2g} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="member or file names (default: every file present)")
    ap.add_argument("--table", action="store_true", help="print the README's max |Δ| table and stop")
    args = ap.parse_args()
    if args.table:
        print(table())
        return
    zm.GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    want = set(args.names)
    for m in zm.MEMBERS:
        todo = [f for f in m.flavours if m.path(f).exists()
                and (not want or m.name in want or m.path(f).name in want)]
        if not todo:
            continue
        if m.kind == "decoder":
            vs = decoder_golden(m)
            print(f"{m.path().name} [ort]: vs torch {vs['max_abs']:.3g}, "
                  f"min top-2 gap {vs['min_top2_gap']:.3g}", flush=True)
            continue
        w = windows_for(m)
        ref = torch_golden(m, w)
        for f in todo:
            modes = ["ort"] if f.endswith(".onnx") else ["builtin"] + (["xnnpack"] if f in m.xnnpack else [])
            for mode in modes:
                vs = encoder_golden(m, f, mode, w, ref)
                agree = (f", argmax {100 * vs['label_agreement']:.1f}%" if "label_agreement" in vs else "")
                print(f"{m.name}.{f} [{mode}]: vs torch max {vs['max_abs']:.3g} "
                      f"mean {vs['mean_abs']:.3g}{agree}", flush=True)
    summary()


if __name__ == "__main__":
    main()
