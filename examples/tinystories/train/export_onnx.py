"""Export the trained GPT to ONNX with an explicit KV cache, verify it in onnxruntime, write goldens.

Graph interface (L layers, H heads, hd = d_model / H, V vocab):
  inputs   input_ids        int64 [1, T]
           past_key_i       f32   [1, H, P, hd]   i = 0..L-1   (P = tokens already in the cache, may be 0)
           past_value_i     f32   [1, H, P, hd]
  outputs  logits           f32   [1, T, V]
           present_key_i    f32   [1, H, P + T, hd]   (= concat(past_key_i, new keys) along axis 2)
           present_value_i  f32   [1, H, P + T, hd]
Positions are P .. P + T - 1, with P read from past_key_0's shape (no separate position input);
P + T must stay <= n_ctx. T and P are dynamic axes ("seq", "past").

Exporter: torch.onnx.export(dynamo=True) (torch.export + onnxscript), opset 18, constant folding
and the exporter's optimizer on, per-node stack-trace metadata stripped so the file is reproducible.

Checks (onnxruntime CPU, 1 intra-op thread, ORT_ENABLE_ALL; timings give wall-clock medians and, because
the machine is shared, process-CPU-time medians too):
  * ORT full forward vs torch (max |delta| of logits);
  * cached decoding (prompt pass, then one token per step) vs one full forward over the same ids,
    every position (max |delta|);
  * ms per single-token step at several cache lengths, and the prompt pass.
Golden: golden/tinystories_greedy.npz + golden/manifest.json: for each prompt the prompt ids, the
prompt-pass logits [T, V], greedy decoding of 32 tokens with the cache (no stop on <|endoftext|>),
the logits each step chose from [32, V], the generated ids and text.

--seed-scale: instead builds a random-weight ~30M-parameter model of the seed write-up's shape
(vocab 50257, d 384, 6 layers, 6 heads, ctx 256; most parameters in the embedding) into
train/.cache/seed_scale.onnx (not committed: 120 MB float), times it the same way and writes
train/seed_scale_report.json.
"""
import argparse
import hashlib
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from tokenizers import Tokenizer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from model import GPT, GPTConfig  # noqa: E402

GOLDEN_PROMPTS = ["The computer", "A man walks into a bar", "Love is", "The secret of life is",
                  "Q: What do you get when you cross", "Never trust"]
GEN_STEPS = 32


class CachedGPT(torch.nn.Module):
    def __init__(self, m: GPT):
        super().__init__()
        self.m = m
        self.L = m.config.n_layer

    def forward(self, input_ids, *past):
        past_len = past[0].shape[2]
        pairs = [(past[2 * i], past[2 * i + 1]) for i in range(self.L)]
        logits, presents = self.m(input_ids, past_len=past_len, past=pairs)
        out = [logits]
        for k, v in presents:
            out += [k, v]
        return tuple(out)


def names(L):
    ins = ["input_ids"] + [f"past_{kv}_{i}" for i in range(L) for kv in ("key", "value")]
    outs = ["logits"] + [f"present_{kv}_{i}" for i in range(L) for kv in ("key", "value")]
    return ins, outs


def empty_past(cfg, P=0, rng=None):
    hd = cfg.d_model // cfg.n_head
    shape = (1, cfg.n_head, P, hd)
    mk = (lambda: torch.zeros(shape)) if rng is None else (lambda: torch.randn(shape, generator=rng))
    return [mk() for _ in range(2 * cfg.n_layer)]


def export(model: GPT, path: Path, opset=18):
    cfg = model.config
    wrap = CachedGPT(model).eval()
    ins, outs = names(cfg.n_layer)
    rng = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (1, 5), generator=rng)
    past = empty_past(cfg, 7, rng)
    seq = torch.export.Dim("seq", min=1, max=cfg.n_ctx)
    pl = torch.export.Dim("past", min=0, max=cfg.n_ctx - 1)
    dyn = ({1: seq}, tuple({2: pl} for _ in past))  # forward(input_ids, *past)
    with torch.no_grad():
        prog = torch.onnx.export(wrap, (ids, *past), dynamo=True, opset_version=opset,
                                 input_names=ins, output_names=outs, dynamic_shapes=dyn,
                                 optimize=True, verbose=False)
    mp = prog.model_proto
    for node in mp.graph.node:  # drop pkg.torch.onnx.stack_trace etc. (absolute paths)
        keep = [p for p in node.metadata_props if not p.key.startswith("pkg.torch")]
        del node.metadata_props[:]
        node.metadata_props.extend(keep)
    mp.producer_name = "porter examples/tinystories export_onnx.py"
    onnx.checker.check_model(mp, full_check=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(mp, str(path))
    return mp


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def run(sess, cfg, ids, past):
    ins, outs = names(cfg.n_layer)
    feed = {"input_ids": np.asarray(ids, dtype=np.int64).reshape(1, -1)}
    for n, p in zip(ins[1:], past):
        feed[n] = p
    r = sess.run(outs, feed)
    return r[0], r[1:]


def np_empty(cfg):
    hd = cfg.d_model // cfg.n_head
    return [np.zeros((1, cfg.n_head, 0, hd), np.float32) for _ in range(2 * cfg.n_layer)]


def greedy(sess, cfg, prompt_ids, steps):
    lg, past = run(sess, cfg, prompt_ids, np_empty(cfg))
    prompt_logits = lg[0]
    step_logits, gen = [], []
    cur = lg[0, -1]
    for _ in range(steps):
        step_logits.append(cur)
        nxt = int(np.argmax(cur))
        gen.append(nxt)
        lg, past = run(sess, cfg, [nxt], past)
        cur = lg[0, -1]
    return prompt_logits, np.stack(step_logits), gen


def timing(sess, cfg, repeats=3):
    """median ms for one single-token step at cache lengths P, and for a prompt pass of T tokens."""
    res = {}
    rng = np.random.default_rng(0)
    hd = cfg.d_model // cfg.n_head
    for P in sorted({0, 16, 64, cfg.n_ctx - 1}):
        past = [rng.standard_normal((1, cfg.n_head, P, hd)).astype(np.float32) for _ in range(2 * cfg.n_layer)]
        ts, cs = [], []
        for _ in range(max(repeats, 20)):
            t, c = time.perf_counter(), time.process_time()
            run(sess, cfg, [1], past)
            ts.append(time.perf_counter() - t)
            cs.append(time.process_time() - c)
        res[f"step_ms_past{P}"] = round(1000 * float(np.median(ts)), 3)
        res[f"step_cpu_ms_past{P}"] = round(1000 * float(np.median(cs)), 3)
    # a real decode loop: 8-token prompt then single steps up to n_ctx, mean per step
    ts, cs = [], []
    for _ in range(repeats):
        lg, past = run(sess, cfg, list(range(1, 9)), np_empty(cfg))
        t, c = time.perf_counter(), time.process_time()
        n = 0
        while past[0].shape[2] < cfg.n_ctx:
            lg, past = run(sess, cfg, [int(np.argmax(lg[0, -1]))], past)
            n += 1
        ts.append((time.perf_counter() - t) / n)
        cs.append((time.process_time() - c) / n)
    res[f"decode_loop_ms_per_step_to_{cfg.n_ctx}"] = round(1000 * float(np.median(ts)), 3)
    res[f"decode_loop_cpu_ms_per_step_to_{cfg.n_ctx}"] = round(1000 * float(np.median(cs)), 3)
    for T in (8, 32):
        ts = []
        for _ in range(max(repeats, 10)):
            t = time.perf_counter()
            run(sess, cfg, list(range(1, T + 1)), np_empty(cfg))
            ts.append(time.perf_counter() - t)
        res[f"prompt_ms_T{T}"] = round(1000 * float(np.median(ts)), 3)
    return res


def op_histogram(mp):
    h = {}
    for n in mp.graph.node:
        h[n.op_type] = h.get(n.op_type, 0) + 1
    return dict(sorted(h.items()))


def rel(p):
    p = Path(p).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def sha256(p):
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default=str(ROOT / "model/model.pt"))
    ap.add_argument("--out", default=str(ROOT / "model/tinystories.onnx"))
    ap.add_argument("--golden", default=str(ROOT / "golden"))
    ap.add_argument("--opset", type=int, default=18)
    ap.add_argument("--report", default=str(HERE / "export_report.json"))
    ap.add_argument("--seed-scale", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)

    if a.seed_scale:  # only the random-weight seed-scale model
        scfg = GPTConfig(vocab_size=50257, n_ctx=256, n_layer=6, n_head=6, d_model=384)
        torch.manual_seed(0)
        sm = GPT(scfg).eval()
        sp = HERE / ".cache/seed_scale.onnx"
        export(sm, sp, a.opset)
        ss = session(sp)
        rep = {"config": scfg.to_dict(), "params": sm.n_params(), "init": "GPT._init, torch.manual_seed(0)",
               "embedding_params": sm.wte.weight.numel() + sm.wpe.weight.numel(), "opset": a.opset,
               "bytes": sp.stat().st_size, "sha256": sha256(sp),
               "path": "train/.cache/seed_scale.onnx (not committed: over 45 MB)",
               "onnxruntime": ort.__version__, "timing_ort_1thread": timing(ss, scfg, repeats=2)}
        print(json.dumps(rep))
        (HERE / "seed_scale_report.json").write_text(json.dumps(rep, indent=1) + "\n")
        return

    ck = torch.load(a.ckpt, map_location="cpu", weights_only=True)
    cfg = GPTConfig(**ck["config"])
    model = GPT(cfg).eval()
    model.load_state_dict(ck["state_dict"])
    out = Path(a.out)
    mp = export(model, out, a.opset)
    sess = session(out)
    tok = Tokenizer.from_file(str(ROOT / "model/tokenizer.json"))
    report = {"onnx": rel(out), "sha256": sha256(out), "bytes": out.stat().st_size,
              "opset": a.opset, "exporter": f"torch.onnx.export(dynamo=True), torch {torch.__version__}",
              "ops": op_histogram(mp), "config": cfg.to_dict(), "params": model.n_params(),
              "checkpoint_step": ck.get("step")}

    gdir = Path(a.golden)
    gdir.mkdir(parents=True, exist_ok=True)
    # ORT vs torch, and cache vs full, on the golden prompts + their greedy continuations
    d_torch, d_cache, d_split = 0.0, 0.0, 0.0
    golden, manifest_prompts = {}, []
    for pi, prompt in enumerate(GOLDEN_PROMPTS):
        pids = tok.encode(prompt).ids
        plog, slog, gen = greedy(sess, cfg, pids, GEN_STEPS)
        all_ids = pids + gen
        full, _ = run(sess, cfg, all_ids, np_empty(cfg))
        # cached logits at every position: prompt pass rows, then each step's row
        cached = np.concatenate([plog, slog[1:], run_last(sess, cfg, pids, gen)[None]], 0)
        d_cache = max(d_cache, float(np.abs(cached - full[0]).max()))
        with torch.no_grad():
            tl, _ = model(torch.tensor([all_ids]))
        d_torch = max(d_torch, float(np.abs(tl[0].numpy() - full[0]).max()))
        # an uneven split: first 3 tokens, then chunks of 5, through the cache
        past, rows, i = np_empty(cfg), [], 0
        for n in [3] + [5] * 20:
            if i >= len(all_ids):
                break
            lg, past = run(sess, cfg, all_ids[i:i + n], past)
            rows.append(lg[0])
            i += n
        d_split = max(d_split, float(np.abs(np.concatenate(rows, 0) - full[0]).max()))
        text = tok.decode(gen, skip_special_tokens=False)  # <|endoftext|> kept visible
        golden[f"p{pi}_prompt_ids"] = np.array(pids, np.int64)
        golden[f"p{pi}_prompt_logits"] = plog.astype(np.float32)
        golden[f"p{pi}_step_logits"] = slog.astype(np.float32)
        golden[f"p{pi}_generated_ids"] = np.array(gen, np.int64)
        manifest_prompts.append({"index": pi, "prompt": prompt, "prompt_ids": pids, "generated_ids": gen,
                                 "generated_text": text, "full_text": prompt + text})
        print(repr(prompt + text))
    report["max_abs_diff"] = {"ort_full_vs_torch": d_torch, "ort_cached_steps_vs_ort_full": d_cache,
                              "ort_chunked_3_5_vs_ort_full": d_split}
    report["timing_ort_1thread"] = timing(sess, cfg)
    print(json.dumps(report["max_abs_diff"]), json.dumps(report["timing_ort_1thread"]))

    np.savez_compressed(gdir / "tinystories_greedy.npz", **golden)
    manifest = {
        "model": report["onnx"], "model_sha256": report["sha256"],
        "tokenizer": "model/tokenizer.json", "tokenizer_sha256": sha256(ROOT / "model/tokenizer.json"),
        "onnxruntime": ort.__version__, "providers": ["CPUExecutionProvider"], "intra_op_threads": 1,
        "graph_optimization_level": "ORT_ENABLE_ALL", "numpy": np.__version__, "python": platform.python_version(),
        "decoding": f"greedy argmax, {GEN_STEPS} steps, KV cache: one prompt pass (past length 0) then one token "
                    "per call; no stop on <|endoftext|>",
        "npz": rel(gdir / "tinystories_greedy.npz"),
        "npz_keys": {"p{i}_prompt_ids": "int64 [T]", "p{i}_prompt_logits": "f32 [T, V], prompt pass",
                     "p{i}_step_logits": "f32 [32, V], row k = logits that chose generated token k "
                                         "(row 0 = last prompt row)",
                     "p{i}_generated_ids": "int64 [32]"},
        "max_abs_diff": report["max_abs_diff"],
        "prompts": manifest_prompts,
    }
    (gdir / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")

    Path(a.report).write_text(json.dumps(report, indent=1) + "\n")


def run_last(sess, cfg, pids, gen):
    """logits after feeding the last generated token through the cache (the row past the last step)."""
    past = np_empty(cfg)
    lg, past = run(sess, cfg, pids, past)
    for t in gen:
        lg, past = run(sess, cfg, [t], past)
    return lg[0, -1]


if __name__ == "__main__":
    main()
