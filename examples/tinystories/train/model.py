"""GPT-2-style decoder in plain torch, with an explicit KV cache path used by the ONNX export.

Pre-LayerNorm blocks (x + attn(ln1(x)), x + mlp(ln2(x))), learned absolute position embeddings,
causal multi-head self-attention written out as MatMul / scale / mask / Softmax / MatMul (no SDPA,
so the exported graph is plain ops), GELU MLP (exact erf GELU, 4*d), final LayerNorm, LM head tied
to the token embedding (logits = h @ wte^T, no bias).
"""
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class GPTConfig:
    vocab_size: int = 2048
    n_ctx: int = 128
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 256
    dropout: float = 0.0
    ln_eps: float = 1e-5

    def to_dict(self):
        return asdict(self)


class Attention(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.n_head, self.hd = c.n_head, c.d_model // c.n_head
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model)
        self.proj = nn.Linear(c.d_model, c.d_model)
        self.drop = nn.Dropout(c.dropout)

    def forward(self, x, past_k=None, past_v=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, self.hd).transpose(1, 2)
        k = k.view(B, T, self.n_head, self.hd).transpose(1, 2)
        v = v.view(B, T, self.n_head, self.hd).transpose(1, 2)
        if past_k is not None:
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
        S = k.shape[2]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd))
        # query i sits at absolute position S - T + i and may see keys j <= S - T + i
        qi = torch.arange(T, device=x.device).unsqueeze(1) + (S - T)
        kj = torch.arange(S, device=x.device).unsqueeze(0)
        att = att.masked_fill(kj > qi, float("-inf"))
        att = self.drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.drop(self.proj(y)), k, v


class Block(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(c.d_model, eps=c.ln_eps)
        self.attn = Attention(c)
        self.ln2 = nn.LayerNorm(c.d_model, eps=c.ln_eps)
        self.fc = nn.Linear(c.d_model, 4 * c.d_model)
        self.fc_out = nn.Linear(4 * c.d_model, c.d_model)
        self.drop = nn.Dropout(c.dropout)

    def forward(self, x, past_k=None, past_v=None):
        a, k, v = self.attn(self.ln1(x), past_k, past_v)
        x = x + a
        x = x + self.drop(self.fc_out(F.gelu(self.fc(self.ln2(x)))))
        return x, k, v


class GPT(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.config = c
        self.wte = nn.Embedding(c.vocab_size, c.d_model)
        self.wpe = nn.Embedding(c.n_ctx, c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layer))
        self.ln_f = nn.LayerNorm(c.d_model, eps=c.ln_eps)
        self.apply(self._init)
        for n, p in self.named_parameters():  # GPT-2 scaled init of residual projections
            if n.endswith("proj.weight") or n.endswith("fc_out.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * c.n_layer))

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.02)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, 0.0, 0.02)

    def n_params(self):
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx, past_len=0, past=None):
        """idx [B, T] -> logits [B, T, V], presents [(k, v)] each [B, H, past_len + T, hd]."""
        T = idx.shape[1]
        pos = torch.arange(T, device=idx.device) + past_len
        x = self.drop(self.wte(idx) + self.wpe(pos))
        presents = []
        for i, b in enumerate(self.blocks):
            pk, pv = past[i] if past is not None else (None, None)
            x, k, v = b(x, pk, pv)
            presents.append((k, v))
        x = self.ln_f(x)
        logits = x @ self.wte.weight.t()
        return logits, presents
