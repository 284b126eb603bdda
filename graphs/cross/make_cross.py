"""A cross-encoder reranker's shape, exported and run on sentence pairs: graphs/cross/, golden/cross/.

    ~/.cache/porter/export-venv/bin/python graphs/cross/make_cross.py

`bert-cross` is transformers' BertForSequenceClassification as cross-encoder rerankers are
(type_vocab_size 2, one relevance logit, named input_ids / attention_mask / token_type_ids),
seeded random weights, exported by the zoo's own exporters (graphs/zoo/make_zoo.py: litert-torch
float and ai-edge-quantizer int8, torch.onnx dynamo and quantize_dynamic per channel), each file
checked against the torch module. It is not a zoo member: the zoo's onnxruntime goldens are an
AVX2 CPU's (golden/zoo/), and this one's were made on an AVX-512 VNNI CPU (each manifest's
cpu_flags and ort_cpu say so; porter compiles for that target wherever it runs).

Its goldens are sentence pairs only (graphs/zoo/pair_goldens.py: the zoo's six seeded windows as
`[CLS] a [SEP] b [SEP]`, segment B token type 1), in LiteRT builtin and onnxruntime, with how far
segment B moves the logit and the torch module's logit on the same pairs.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

CROSS = Path(__file__).resolve().parent
REPO = CROSS.parent.parent
sys.path.insert(0, str(REPO / "graphs" / "zoo"))

import make_goldens as mg  # noqa: E402
import make_zoo  # noqa: E402
import members as zm  # noqa: E402
import pair_goldens  # noqa: E402

GOLDEN_DIR = REPO / "golden" / "cross"
COMMAND = "~/.cache/porter/export-venv/bin/python graphs/cross/make_cross.py"


@dataclass(frozen=True)
class CrossEncoder(zm.Encoder):
    def path(self, flavour: str) -> Path:
        return CROSS / f"{self.name}.{flavour}"


MEMBER = CrossEncoder("bert-cross", "bert", "seq", "random", "eager", True, True,
                      2, 64, 4, 128, 320, 64, 1, zm.CORE_FLAVOURS, seed=14)


def main() -> None:
    make_zoo.COMMAND = COMMAND
    missing = [f for f in MEMBER.flavours if not make_zoo.present(MEMBER.path(f))]
    if missing:
        make_zoo.make_encoder(MEMBER, missing)
    GOLDEN_DIR.mkdir(exist_ok=True)
    w = pair_goldens.pair_windows(MEMBER)
    torch_logits = mg.as_golden_logits(MEMBER, mg.run_torch(MEMBER, w))
    for flavour in MEMBER.flavours:
        print(pair_goldens.pair_golden(MEMBER, flavour, w, torch_logits, GOLDEN_DIR), flush=True)


if __name__ == "__main__":
    main()
