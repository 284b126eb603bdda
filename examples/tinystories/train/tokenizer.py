"""Train a byte-level BPE tokenizer (HF `tokenizers`) on the training split only.

ByteLevel pre-tokenizer (add_prefix_space=False, GPT-2 regex), ByteLevel decoder, no normalizer,
vocab 2048 including the single special token <|endoftext|> (id 0) that separates documents.
Writes model/tokenizer.json.
"""
import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = Path(__file__).resolve().parent
VOCAB = 2048
EOT = "<|endoftext|>"


def main():
    docs = [json.loads(l) for l in open(HERE / ".cache/train.jsonl", encoding="utf-8")]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=[EOT], min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(docs, trainer=trainer)
    out = HERE.parent / "model/tokenizer.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(out))
    n = sum(len(e.ids) for e in tok.encode_batch(docs[:2000]))
    c = sum(len(d) for d in docs[:2000])
    print(f"vocab {tok.get_vocab_size()}  chars/token {c / n:.2f}  -> {out}")
    print(tok.encode("Hello world, the computer is a wise man.").tokens)


if __name__ == "__main__":
    main()
