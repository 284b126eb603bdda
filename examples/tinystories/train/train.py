"""Train the small GPT (train/model.py) on the fortunes corpus, one CPU thread.

Random 128-token windows from the training stream (documents joined, each preceded by
<|endoftext|>), AdamW (betas 0.9/0.95, wd 0.1 on matrices only), linear warmup + cosine decay to
10 %, gradient clipping 1.0, seeds fixed (data order and init are deterministic). Stops at the step
budget or at the wall-clock guard (--max-minutes), whichever comes first, and says which; the cosine
follows whichever of the two is further along, so the exact number of steps (and hence the weights)
depends on the machine's speed. Writes model/model.pt (state_dict +
config), train/metrics.json (loss curve, samples, timing).
"""
import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from model import GPT, GPTConfig  # noqa: E402

PROMPTS = ["The computer", "A man walks into a bar", "Love is", "The secret of life is",
           "Q: What do you get when you cross"]


def stream(tok, split):
    eot = tok.token_to_id("<|endoftext|>")
    docs = [json.loads(l) for l in open(HERE / f".cache/{split}.jsonl", encoding="utf-8")]
    ids = []
    for e in tok.encode_batch(docs):
        ids.append(eot)
        ids.extend(e.ids)
    return torch.tensor(ids, dtype=torch.long)


@torch.no_grad()
def evaluate(model, data, ctx, n_windows=48):
    model.eval()
    starts = np.linspace(0, len(data) - ctx - 2, n_windows).astype(int)
    x = torch.stack([data[s:s + ctx] for s in starts])
    y = torch.stack([data[s + 1:s + ctx + 1] for s in starts])
    tot = 0.0
    for i in range(0, n_windows, 16):
        lg, _ = model(x[i:i + 16])
        tot += F.cross_entropy(lg.reshape(-1, lg.shape[-1]), y[i:i + 16].reshape(-1), reduction="sum").item()
    model.train()
    return tot / y.numel()


@torch.no_grad()
def generate(model, tok, prompt, n=40, temperature=0.0, top_k=40, seed=0):
    model.eval()
    g = torch.Generator().manual_seed(seed)
    ids = tok.encode(prompt).ids
    x = torch.tensor([ids])
    logits, past = model(x)
    out = []
    for _ in range(n):
        lg = logits[0, -1]
        if temperature <= 0:
            nxt = int(lg.argmax())
        else:
            v, ix = torch.topk(lg / temperature, top_k)
            nxt = int(ix[torch.multinomial(F.softmax(v, -1), 1, generator=g)])
        if nxt == tok.token_to_id("<|endoftext|>") or len(ids) + len(out) >= model.config.n_ctx:
            break
        out.append(nxt)
        logits, past = model(torch.tensor([[nxt]]), past_len=len(ids) + len(out) - 1,
                             past=[(k, v) for k, v in past])
    model.train()
    return prompt + tok.decode(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--d-model", type=int, default=192)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--max-minutes", type=float, default=22.0)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)
    tok = Tokenizer.from_file(str(HERE.parent / "model/tokenizer.json"))
    train, val = stream(tok, "train"), stream(tok, "val")
    print(f"train tokens {len(train)}  val tokens {len(val)}", flush=True)
    cfg = GPTConfig(vocab_size=tok.get_vocab_size(), n_ctx=a.ctx, n_layer=a.layers, n_head=a.heads,
                    d_model=a.d_model, dropout=a.dropout)
    model = GPT(cfg)
    print(f"params {model.n_params()}", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(a.seed)

    def progress(s):
        # the machine is shared and its speed varies: the cosine follows whichever budget (steps or
        # wall clock) is further along, so a run cut by the clock still ends at the low learning rate
        return max(s / a.steps, (time.time() - t0) / 60 / a.max_minutes)

    def lr_at(s):
        if s < a.warmup:
            return a.lr * (s + 1) / a.warmup
        p = progress(s)
        return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))

    curve, t0, step, stopped = [], time.time(), 0, "steps"
    ema = None

    def record(at_step, loss_ema):
        """A validation point on the curve (printed as it is made)."""
        curve.append({"step": at_step, "train_loss_ema": round(loss_ema, 4),
                      "val_loss": round(evaluate(model, val, a.ctx), 4), "lr": lr_at(at_step - 1),
                      "minutes": round((time.time() - t0) / 60, 2),
                      "tokens_seen": at_step * a.batch * a.ctx})
        print(json.dumps(curve[-1]), flush=True)

    def save(at_step):
        torch.save({"config": cfg.to_dict(), "state_dict": model.state_dict(), "step": at_step},
                   HERE.parent / "model/model.pt")

    while step < a.steps:
        if (time.time() - t0) / 60 >= a.max_minutes:
            stopped = "wall-clock guard"
            break
        for gr in opt.param_groups:
            gr["lr"] = lr_at(step)
        ix = torch.randint(0, len(train) - a.ctx - 1, (a.batch,), generator=g)
        x = torch.stack([train[i:i + a.ctx] for i in ix])
        y = torch.stack([train[i + 1:i + a.ctx + 1] for i in ix])
        lg, _ = model(x)
        loss = F.cross_entropy(lg.reshape(-1, lg.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        step += 1
        if step % a.eval_every == 0 or step == a.steps:
            record(step, ema)
            save(step)
    minutes = (time.time() - t0) / 60
    if not curve or curve[-1]["step"] != step:
        record(step, ema)
    save(step)
    samples = {"greedy": [generate(model, tok, p, 40) for p in PROMPTS],
               "top_k40_t0.8_seed0": [generate(model, tok, p, 40, 0.8, 40, 0) for p in PROMPTS]}
    for k, v in samples.items():
        print(f"--- {k}")
        for s in v:
            print(repr(s))
    m = {"args": vars(a), "config": cfg.to_dict(), "params": model.n_params(),
         "train_tokens": len(train), "val_tokens": len(val), "steps_done": step, "stopped_by": stopped,
         "train_minutes": round(minutes, 2), "torch": torch.__version__, "threads": 1,
         "curve": curve, "samples": samples}
    (HERE / "metrics.json").write_text(json.dumps(m, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
