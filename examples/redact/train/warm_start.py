"""Read a trained redact model back out of its int8 LiteRT file, into train.py's torch model.

    python warm_start.py --tflite ../model/redact-me5.litert-dq8.tflite   # the check below

The torch checkpoint of a run is not kept (out/ is git-ignored), but the committed
`redact-me5.litert-dq8.tflite` holds every trained weight: litert-torch + ai-edge-quantizer's
dynamic int8 recipe stores each Linear weight as int8 [out, in] with one float scale per output
channel (zero point 0) and its bias, the LayerNorm gammas and betas, and the position and
token-type embedding rows as float constants. The graph is walked in execution order, which is
the torch module order:

- the embeddings: ADD of the token-type constant [1, 256, 384] (row 0, the only one used,
  broadcast) then ADD of the position constant [1, 256, 384] (positions 0-255);
- every LayerNorm (decomposed): MUL by gamma [384] followed by ADD of beta [384]; the
  embeddings', then per layer the attention output's and the FFN output's, except the last
  one, whose affine the converter folds into the classifier (read back as gamma 1, beta 0 and
  the folded classifier: the same function);
- 37 FULLY_CONNECTED ops (a Linear after a LayerNorm reads the normalised tensor with the
  LayerNorm's gamma and beta folded into it, unfolded here: W = W' / gamma, b = b' - W beta): per layer query, key, value, attention output, intermediate, output,
  then the classifier. Query, key and value are told apart by the graph: the key's output is
  transposed to [.., 32, 256], the query's is the first operand of the score BATCH_MATMUL.

The word-embedding table is not read: train.py keeps it frozen at multilingual-e5-small's rows,
so the model's rows are the base's, for any trimmed vocabulary (rows are taken per piece by
make_vocab.keep_ids). Position rows 256-511 (never used by 256-piece windows) keep the base's.
`check` runs the torch model with the loaded weights against the LiteRT file on a few windows.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


RESOLVER = "BUILTIN_WITHOUT_DEFAULT_DELEGATES"


def _interp(path):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(path), num_threads=1,
                     experimental_op_resolver_type=getattr(__import__("ai_edge_litert.interpreter", fromlist=["x"]).OpResolverType, RESOLVER))
    it.allocate_tensors()
    return it


def read_params(path) -> dict:
    """{torch parameter name: float32 array} from the LiteRT file."""
    it = _interp(path)
    td = {d["index"]: d for d in it.get_tensor_details()}
    ops = it._get_ops_details()

    def const(i):
        return it.get_tensor(i)

    def is_const(i):
        try:
            it.get_tensor(i)
        except ValueError:
            return False
        # constants have a buffer: their name is not an op output
        return i not in produced

    produced = {o for op in ops for o in op["outputs"]}

    def fc_weight(i):
        d = td[i]
        w = const(i).astype(np.float32)
        q = d["quantization_parameters"]
        if d["dtype"] == np.int8:
            assert not np.any(q["zero_points"]), "nonzero zero point"
            w = w * q["scales"].astype(np.float32)[:, None]
        return w

    consumers = {}
    for op in ops:
        for i in op["inputs"]:
            consumers.setdefault(int(i), []).append(op)

    def follow(t, names=("RESHAPE", "TRANSPOSE")):
        """the tensor after reshapes/transposes; returns (tensor, last transpose perm)"""
        perm = None
        while True:
            cs = consumers.get(int(t), [])
            nxt = [c for c in cs if c["op_name"] in names]
            if len(cs) != 1 or not nxt:
                return t, perm, cs
            c = nxt[0]
            if c["op_name"] == "TRANSPOSE":
                perm = tuple(const(c["inputs"][1]).tolist())
            t = c["outputs"][0]

    fcs = [op for op in ops if op["op_name"] == "FULLY_CONNECTED"]

    def fc(op):
        """(W, b) of the torch Linear. The converter feeds a Linear that follows a LayerNorm with
        the normalised tensor before the LayerNorm's affine, folded into it: W' = W * gamma (per
        input column), b' = b + W beta. Unfolded here; the classifier's LayerNorm (the last) has
        no affine left in the graph, so its Linear keeps the folded form (gamma 1, beta 0)."""
        w = fc_weight(op["inputs"][1])
        b = const(op["inputs"][2]).astype(np.float32)
        ln = ln_of_input.get(int(op["inputs"][0]))
        if ln is not None:
            g, beta = ln
            w = w / g[None, :]
            b = b - w @ beta
        return w, b
    assert len(fcs) == 37, len(fcs)
    # LayerNorm affine pairs: MUL by a [384] constant, its output consumed by an ADD of a [384] constant.
    lns = []
    ln_of_input = {}  # normalised tensor (before gamma, beta) -> its LayerNorm's (gamma, beta)
    for op in ops:
        if op["op_name"] != "MUL":
            continue
        c = [i for i in op["inputs"] if i >= 0 and i not in produced and tuple(td[i]["shape"]) == (384,)]
        if not c:
            continue
        nxt = consumers.get(int(op["outputs"][0]), [])
        assert len(nxt) == 1 and nxt[0]["op_name"] == "ADD", nxt
        b = [i for i in nxt[0]["inputs"] if i >= 0 and i not in produced and tuple(td[i]["shape"]) == (384,)]
        assert len(b) == 1
        x_hat = [i for i in op["inputs"] if i >= 0 and i != c[0]][0]
        lns.append((const(c[0]).astype(np.float32), const(b[0]).astype(np.float32)))
        ln_of_input[int(x_hat)] = lns[-1]
    # The last LayerNorm's affine is folded into the classifier by the converter
    # (W (g * x + b) + c = (W g) x + (W b + c)): it reads back as gamma 1, beta 0 and the folded
    # head, the same function.
    assert len(lns) == 12, len(lns)
    lns.append((np.ones(384, np.float32), np.zeros(384, np.float32)))
    emb_adds = [op for op in ops if op["op_name"] == "ADD"
                and any(i not in produced and tuple(td[i]["shape"]) == (1, 256, 384) for i in op["inputs"])]
    assert len(emb_adds) == 2, len(emb_adds)
    ttype = [const(i) for i in emb_adds[0]["inputs"] if i not in produced][0][0]
    pos = [const(i) for i in emb_adds[1]["inputs"] if i not in produced][0][0]
    assert np.allclose(ttype, ttype[0:1]), "token-type constant is not one row broadcast"

    p = {}
    pre = "bert.embeddings."
    p[pre + "token_type_embeddings.weight[0]"] = ttype[0]
    p[pre + "position_embeddings.weight[:256]"] = pos
    p[pre + "LayerNorm.weight"], p[pre + "LayerNorm.bias"] = lns[0]
    for layer in range(6):
        six = fcs[6 * layer: 6 * layer + 6]
        qkv = six[:3]
        roles = {}
        for op in qkv:
            _, perm, cs = follow(op["outputs"][0])
            if perm == (0, 2, 3, 1):
                roles["key"] = op
        # the query feeds the score matmul as operand 0 (after reshapes/transposes)
        for op in qkv:
            if op is roles.get("key"):
                continue
            t, _, cs = follow(op["outputs"][0])
            if any(c["op_name"] == "BATCH_MATMUL" and int(c["inputs"][0]) == int(t) and
                   any(o2["op_name"] == "MUL" for o2 in consumers.get(int(c["outputs"][0]), [])) for c in cs):
                roles["query"] = op
            else:
                roles["value"] = op
        assert set(roles) == {"query", "key", "value"}, (layer, list(roles))
        L = f"bert.encoder.layer.{layer}."
        for role, op in roles.items():
            p[L + f"attention.self.{role}.weight"], p[L + f"attention.self.{role}.bias"] = fc(op)
        for name, op in (("attention.output.dense", six[3]), ("intermediate.dense", six[4]), ("output.dense", six[5])):
            p[L + name + ".weight"], p[L + name + ".bias"] = fc(op)
        p[L + "attention.output.LayerNorm.weight"], p[L + "attention.output.LayerNorm.bias"] = lns[1 + 2 * layer]
        p[L + "output.LayerNorm.weight"], p[L + "output.LayerNorm.bias"] = lns[2 + 2 * layer]
    assert int(fcs[36]["inputs"][0]) not in ln_of_input
    p["classifier.weight"], p["classifier.bias"] = fc(fcs[36])
    return p


def load_into(model, path) -> int:
    """Overwrites the model's trained parameters with the LiteRT file's; returns how many tensors."""
    import torch

    params = read_params(path)
    sd = model.state_dict()
    n = 0
    with torch.no_grad():
        for k, v in params.items():
            if k.endswith("[0]"):
                sd[k[:-3]][0].copy_(torch.from_numpy(v))
            elif k.endswith("[:256]"):
                sd[k[:-6]][:256].copy_(torch.from_numpy(v))
            else:
                assert tuple(sd[k].shape) == v.shape, (k, sd[k].shape, v.shape)
                sd[k].copy_(torch.from_numpy(v))
            n += 1
    return n


def check(path, tokenizer_json, texts):
    """Torch model with the file's weights vs the file itself: logits and argmax agreement."""
    import torch

    import redact_common as rc
    import train

    base = rc.BASES["me5"]
    model = train.build_model(base, init_head=False)
    print("loaded", load_into(model, path), "tensors")
    model.eval()
    tok = rc.load_tokenizer(base)
    it = _interp(path)
    inp = {d["name"]: d["index"] for d in it.get_input_details()}
    out = it.get_output_details()[0]["index"]
    agree = total = 0
    worst = 0.0
    for text in texts:
        ids, _, _ = rc.encode(tok, text)
        for w_ids, _ in rc.windows(base, ids):
            ids256, mask = rc.pad_window(base, w_ids)
            ids256 = np.asarray(ids256, np.int32)[None]
            mask = np.asarray(mask, np.int32)[None]
            keys = sorted(inp)
            it.set_tensor(inp[[k for k in keys if "input_ids" in k][0]], ids256)
            it.set_tensor(inp[[k for k in keys if "attention_mask" in k][0]], mask)
            it.invoke()
            lt = it.get_tensor(out)[0]
            with torch.no_grad():
                lp = model(torch.from_numpy(ids256).long(), torch.from_numpy(mask).long())[0].numpy()
            n = int(mask.sum())
            worst = max(worst, float(np.abs(lt[:n] - lp[:n]).max()))
            agree += int((lt[:n].argmax(-1) == lp[:n].argmax(-1)).sum())
            total += n
    print(f"{total} live tokens, argmax agreement {agree / total:.4f}, max |logit diff| {worst:.3f}")
    return agree / total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tflite", type=Path, required=True)
    ap.add_argument("--data", type=Path, help="a generated JSONL to take texts from")
    ap.add_argument("--n", type=int, default=40)
    args = ap.parse_args()
    import redact_common as rc

    if args.data:
        texts = [r["text"] for r in rc.read_jsonl(args.data)][: args.n]
    else:
        import generate
        texts = [r["text"] for r in generate.generate("test", 7, args.n)]
    check(args.tflite, None, texts)


if __name__ == "__main__":
    main()
