"""Build the training text for examples/tinystories from Debian's `fortunes` packages.

Corpus: the fortune cookie files of Debian's `fortunes` + `fortunes-min` packages
(version 1:1.99.1-7.3, bookworm/main, upstream fortune-mod 1.99.1). Debian ships them in
`main` under the BSD licence of fortune-mod (Copyright (c) 1991 The Regents of the University
of California; see usr/share/doc/fortunes/copyright inside the .deb, copied next to the
corpus as `copyright.txt`). The quotations themselves come from many authors; nothing from
the corpus is committed here except short generated samples.

The offensive set (`fortunes-off`) is not used. `ascii-art` (pictures) and `translate-me`
(non-English riddles) are dropped.

Where the files come from (first that exists):
  $FORTUNES_DIR, /usr/share/games/fortunes, train/.debs/root/usr/share/games/fortunes;
otherwise `apt-get download fortunes fortunes-min` into train/.debs and `dpkg-deb -x`
(no root and no installation needed).

Documents: one fortune (text between `%` lines), whitespace runs inside a line collapsed to
one space, lines stripped, exact duplicates removed (first occurrence kept, files in sorted
order). Split: sha256(document) -> val if the first 4 bytes mod 20 == 0 (about 5 %),
deterministic and independent of order.

Writes train/.cache/{train,val}.jsonl (one JSON string per line) and corpus_stats.json.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
DEBS = HERE / ".debs"
DROP = {"ascii-art", "translate-me"}


def fortune_dir() -> Path:
    cands = [os.environ.get("FORTUNES_DIR"), "/usr/share/games/fortunes",
             str(DEBS / "root/usr/share/games/fortunes")]
    for c in cands:
        if c and (Path(c) / "cookie").is_file() and (Path(c) / "fortunes").is_file():
            return Path(c)
    DEBS.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", "fortunes", "fortunes-min"], cwd=DEBS, check=True)
    for deb in sorted(DEBS.glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(DEBS / "root")], check=True)
    return DEBS / "root/usr/share/games/fortunes"


def documents(d: Path):
    names = sorted(p.name for p in d.iterdir()
                   if p.is_file() and not p.is_symlink() and "." not in p.name and p.name not in DROP)
    seen = set()
    per_file = {}
    for name in names:
        raw = (d / name).read_bytes().decode("utf-8", errors="replace")
        n = 0
        for chunk in re.split(r"^%\s*$", raw, flags=re.M):
            lines = [re.sub(r"\s+", " ", ln).strip() for ln in chunk.split("\n")]
            while lines and not lines[0]:
                lines.pop(0)
            while lines and not lines[-1]:
                lines.pop()
            text = "\n".join(lines)
            if len(text) < 8 or text in seen:
                continue
            seen.add(text)
            n += 1
            yield name, text
        per_file[name] = n


def is_val(text: str) -> bool:
    h = hashlib.sha256(text.encode("utf-8")).digest()
    return int.from_bytes(h[:4], "little") % 20 == 0


def main():
    d = fortune_dir()
    CACHE.mkdir(parents=True, exist_ok=True)
    train, val, files = [], [], {}
    for name, text in documents(d):
        files[name] = files.get(name, 0) + 1
        (val if is_val(text) else train).append(text)
    for split, docs in (("train", train), ("val", val)):
        with open(CACHE / f"{split}.jsonl", "w", encoding="utf-8") as f:
            for t in docs:
                f.write(json.dumps(t, ensure_ascii=False) + "\n")
    cp = d.parent.parent / "doc/fortunes/copyright"
    if cp.is_file():
        shutil.copy(cp, CACHE / "copyright.txt")
    stats = {"source": str(d), "files": files,
             "train_docs": len(train), "val_docs": len(val),
             "train_chars": sum(len(t) for t in train), "val_chars": sum(len(t) for t in val),
             "sha256_train": hashlib.sha256((CACHE / "train.jsonl").read_bytes()).hexdigest(),
             "sha256_val": hashlib.sha256((CACHE / "val.jsonl").read_bytes()).hexdigest()}
    (CACHE / "corpus_stats.json").write_text(json.dumps(stats, indent=1))
    print(json.dumps({k: v for k, v in stats.items() if k != "files"}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
