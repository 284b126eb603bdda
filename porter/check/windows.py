"""Model windows from texts, exactly as the redaction service makes them, or from random ids.

The service (templates/redact_service/src/redact.rs: `classify`, `text_tokens`, `run_window`)
encodes a text with the tokenizer's post-processor, checks that the special tokens around it
are the ones it was built with and drops them, replaces ids past the model's vocabulary by the
unknown token, and cuts the rest into consecutive chunks of WINDOW - |prefix| - |suffix|
tokens; each window is prefix + chunk + suffix, right-padded with the padding id, the mask 1
on those live tokens. An empty text has no chunk, so no window. `text_windows` is that rule in
Python, so a golden made from a user's texts holds the very windows the service will run.

A line `text_a<TAB>text_b` of a texts file (or a [text_a, text_b] item of a JSON list) is a
sentence pair (what a cross-encoder, an NLI or a QA model reads): the tokenizer encodes the pair with its own post-processor, special tokens and
segment ids included (BERT: [CLS] a [SEP] b [SEP], token type 1 on b and its [SEP]), truncated
longest-first to the window, as transformers' `tokenizer(a, b, truncation=True)` does; one
window per pair.

Texts without a tokenizer cannot be windowed; `random_windows` makes seeded id windows of
varied live lengths instead (a full window first), with a segment B (token type 1 on the second
half of each window of 4 or more live tokens) when the model reads token types.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from porter.errors import PorterError

PAD_TOKEN_NAMES = ("[PAD]", "<pad>")
RANDOM_PAD_ID = 0
PAIR_SEPARATOR = "\t"
MIN_PAIR_TOKENS = 4  # random windows shorter than this stay one segment


@dataclass(frozen=True)
class WindowRule:
    """How the text's tokens become model windows: special tokens around them, then padding."""

    prefix_ids: list[int]
    suffix_ids: list[int]
    pad_id: int
    unk_id: int | None  # replaces ids past the model's vocabulary; None if the tokenizer has none
    vocab_size: int  # the tokenizer's

    def chunk(self, seq: int) -> int:
        """Text tokens per window of `seq` tokens."""
        room = seq - len(self.prefix_ids) - len(self.suffix_ids)
        if room <= 0:
            raise PorterError(f"the window of {seq} tokens has no room left for text")
        return room


@dataclass
class Windows:
    ids: np.ndarray  # int32 [N, seq]
    attention_mask: np.ndarray  # int32 [N, seq]
    live: np.ndarray  # int32 [N]: live tokens, special tokens included
    text_index: np.ndarray  # int32 [N]: which text (or random draw) each window comes from
    token_type_ids: np.ndarray | None = None  # int32 [N, seq]; None: every token in segment A

    def __post_init__(self):
        if self.token_type_ids is None:
            self.token_type_ids = np.zeros_like(self.ids)


# --- the tokenizer ------------------------------------------------------------------------------


def read_tokenizer(tokenizer_json: Path):
    """(the reference `tokenizers` Tokenizer with truncation and padding off, its padding
    settings, the parsed file): the service has neither truncation nor padding, it cuts windows
    itself."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_json))
        spec = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
    except Exception as e:  # tokenizers raises a bare Exception for a malformed file
        raise PorterError(f"cannot read tokenizer {tokenizer_json}: {e}") from None
    padding = tokenizer.padding
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer, padding, spec


def window_rule(tokenizer_json: Path, pad_id: int | None = None) -> WindowRule:
    """Special tokens, padding and unknown ids as the reference `tokenizers` library sees them."""
    return _rule(tokenizer_json, *read_tokenizer(tokenizer_json), pad_id)


def _rule(path: Path, tokenizer, padding: dict | None, spec: dict, pad_id: int | None) -> WindowRule:
    # sequence_ids is None exactly on the post-processor's special tokens.
    encoding = tokenizer.encode("a")
    text_positions = [i for i, s in enumerate(encoding.sequence_ids) if s is not None]
    if not text_positions:
        raise PorterError(f"{path}: encoding 'a' gives no text token")
    first, last = text_positions[0], text_positions[-1]
    if pad_id is None:
        pad_id = _pad_id(tokenizer, padding, path)
    return WindowRule(list(encoding.ids[:first]), list(encoding.ids[last + 1:]), pad_id,
                      _unk_id(tokenizer, spec.get("model") or {}), tokenizer.get_vocab_size())


def _pad_id(tokenizer, padding: dict | None, path: Path) -> int:
    if padding and padding.get("pad_id") is not None:
        return int(padding["pad_id"])
    for name in PAD_TOKEN_NAMES:
        found = tokenizer.token_to_id(name)
        if found is not None:
            return found
    raise PorterError(f"{path} names no padding token; give --pad-id")


def _unk_id(tokenizer, model: dict) -> int | None:
    if isinstance(model.get("unk_id"), int):  # Unigram
        return model["unk_id"]
    if model.get("unk_token"):  # WordPiece, BPE
        return tokenizer.token_to_id(model["unk_token"])
    return None


def require_vocabulary_fits(rule: WindowRule, model_vocab: int) -> None:
    if rule.vocab_size > model_vocab and rule.unk_id is None:
        raise PorterError(f"the tokenizer has {rule.vocab_size} ids, the model {model_vocab}, and "
                          "the tokenizer names no unknown token to stand for the rest")


# --- texts -> windows ---------------------------------------------------------------------------


def read_texts(path: Path) -> list[str | tuple[str, str]]:
    """A JSON list of strings or [text_a, text_b] pairs (or {"texts": [...]}, golden/texts.json's
    form), else one text per line, `text_a<TAB>text_b` a pair."""
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PorterError(f"cannot read texts {path}: {e}") from None
    if raw.lstrip()[:1] not in ("[", "{"):
        return [tuple(line.split(PAIR_SEPARATOR, 1)) if PAIR_SEPARATOR in line else line
                for line in raw.splitlines()]
    try:
        texts = json.loads(raw)
    except ValueError as e:
        raise PorterError(f"{path}: starts like JSON but is not ({e})") from None
    if isinstance(texts, dict):
        texts = texts.get("texts")
    def pair(t) -> bool:
        return isinstance(t, list) and len(t) == 2 and all(isinstance(s, str) for s in t)

    if not isinstance(texts, list) or not all(isinstance(t, str) or pair(t) for t in texts):
        raise PorterError(f"{path}: expected a JSON list of strings or [text_a, text_b] pairs "
                          f"(or {{\"texts\": [...]}})")
    return [tuple(t) if pair(t) else t for t in texts]


def text_ids(tokenizer, rule: WindowRule, text: str, model_vocab: int) -> list[int]:
    """The text's own token ids as the service feeds them: special tokens dropped, ids past the
    model's vocabulary replaced by the unknown token."""
    ids = tokenizer.encode(text).ids
    prefix, suffix = rule.prefix_ids, rule.suffix_ids
    if len(ids) < len(prefix) + len(suffix) or ids[:len(prefix)] != prefix \
            or ids[len(ids) - len(suffix):] != suffix:
        raise PorterError(f"the tokenizer's encoding of {text[:40]!r} does not start with "
                          f"{prefix} and end with {suffix}, the special tokens it puts around 'a'")
    inner = ids[len(prefix):len(ids) - len(suffix)]
    return [i if i < model_vocab else rule.unk_id for i in inner]


def chunk_windows(token_lists: list[list[int]], rule: WindowRule, seq: int,
                  empty_text_window: bool = False, allow_empty: bool = False) -> Windows:
    """Each text's ids cut into windows (the service's rule). empty_text_window gives an empty
    text one window of special tokens only, as the repository's own goldens were made before
    the service existed (golden/tokenize_windows.py)."""
    chunk = rule.chunk(seq)
    rows, live, text_index = [], [], []
    for t, ids in enumerate(token_lists):
        chunks = [ids[i:i + chunk] for i in range(0, len(ids), chunk)]
        for part in chunks or ([[]] if empty_text_window else []):
            row = [*rule.prefix_ids, *part, *rule.suffix_ids]
            rows.append(row + [rule.pad_id] * (seq - len(row)))
            live.append(len(row))
            text_index.append(t)
    if not rows and not allow_empty:
        raise PorterError("the texts give no window: every text is empty")
    if not rows:
        return Windows(np.zeros((0, seq), np.int32), np.zeros((0, seq), np.int32), np.zeros(0, np.int32),
                       np.zeros(0, np.int32))
    live_array = np.asarray(live, np.int32)
    return Windows(np.asarray(rows, np.int32), _mask(live_array, seq), live_array,
                   np.asarray(text_index, np.int32))


def text_windows(texts: list[str | tuple[str, str]], tokenizer_json: Path, seq: int, model_vocab: int,
                 pad_id: int | None = None) -> tuple[Windows, WindowRule]:
    """Single texts windowed as the service windows them; pairs one window each, encoded by the
    tokenizer's post-processor; in the texts' order."""
    tokenizer, padding, spec = read_tokenizer(tokenizer_json)
    rule = _rule(tokenizer_json, tokenizer, padding, spec, pad_id)
    rule.chunk(seq)
    require_vocabulary_fits(rule, model_vocab)
    parts = []
    for t, text in enumerate(texts):
        if isinstance(text, tuple):
            parts.append(pair_window(tokenizer, rule, text, seq, model_vocab, t))
        else:
            singles = chunk_windows([text_ids(tokenizer, rule, text, model_vocab)], rule, seq, allow_empty=True)
            parts.append(Windows(singles.ids, singles.attention_mask, singles.live,
                                 np.full(len(singles.ids), t, np.int32)))
    windows = Windows(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                        ("ids", "attention_mask", "live", "text_index", "token_type_ids")))
    if not len(windows.ids):
        raise PorterError("the texts give no window: every text is empty")
    return windows, rule


def pair_window(tokenizer, rule: WindowRule, pair: tuple[str, str], seq: int, model_vocab: int,
                index: int) -> Windows:
    """One window of the pair (text_a, text_b): the tokenizer's pair encoding (its special
    tokens and type ids), truncated longest-first to seq tokens, padded."""
    first, second = pair
    tokenizer.enable_truncation(seq, strategy="longest_first")
    try:
        encoding = tokenizer.encode(first, second)
    except Exception as e:  # tokenizers: a pair longer than seq even with both texts cut
        raise PorterError(f"text {index}: the pair cannot be encoded in {seq} tokens ({e})") from None
    finally:
        tokenizer.no_truncation()
    ids = [i if i < model_vocab else rule.unk_id for i in encoding.ids]
    live = len(ids)
    pad = seq - live
    row = np.asarray([ids + [rule.pad_id] * pad], np.int32)
    types = np.asarray([list(encoding.type_ids) + [0] * pad], np.int32)
    live_array = np.asarray([live], np.int32)
    return Windows(row, _mask(live_array, seq), live_array, np.asarray([index], np.int32), types)


def random_windows(count: int, seq: int, vocab: int, seed: int = 0, segment_b: bool = False) -> Windows:
    """`count` windows of uniformly drawn ids; live lengths step down evenly from a full window
    (seq, then ..., seq/count), padded with id 0. Ids avoid the low ids where vocabularies keep
    their special tokens when the vocabulary is large enough to. segment_b: token type 1 from
    (live + 1) // 2 to the last live token of each window of MIN_PAIR_TOKENS or more."""
    if count < 1:
        raise PorterError(f"--random {count}: give at least one window")
    rng = np.random.default_rng(seed)
    low = 1000 if vocab > 2000 else 1
    live = np.array([max(1, round(seq * (count - w) / count)) for w in range(count)], np.int32)
    ids = rng.integers(low, vocab, (count, seq)).astype(np.int32)
    mask = _mask(live, seq)
    ids[mask == 0] = RANDOM_PAD_ID
    types = np.zeros_like(ids)
    if segment_b:
        for w, n in enumerate(live):
            if n >= MIN_PAIR_TOKENS:
                types[w, (n + 1) // 2:n] = 1
    return Windows(ids, mask, live, np.arange(count, dtype=np.int32), types)


def _mask(live: np.ndarray, seq: int) -> np.ndarray:
    return (np.arange(seq)[None, :] < live[:, None]).astype(np.int32)
