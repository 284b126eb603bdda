"""The hand-written evaluation set: handwritten_<lang>.txt -> handwritten.jsonl.

Each .txt file holds one text per line (a first line `# <lang>`, comments start with #). Personal
data is marked inline as [[original|LABEL]]; `\\n` in a line is a line break of the text. A line
without any mark is a text without personal data. The gold conventions are in README.md.

    python examples/redact/eval/handwritten.py          # writes handwritten.jsonl, checks the gold

Besides parsing, it checks what the gold must satisfy: labels are the model's categories, spans
do not start or end on whitespace, every labelled card number, IBAN, IP address, e-mail address
and URL passes the service's checks (train/pipeline.py), and no text without personal data
contains a card number, IBAN or IPv4 address the recognisers would prove (those texts test the
vetoes with numbers that fail them).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "train"))

import pipeline  # noqa: E402
from generate import CATEGORIES  # noqa: E402

MARK = re.compile(r"\[\[([^\[\]|]+)\|([A-Z_]+)\]\]")
OUT = HERE / "handwritten.jsonl"


def parse_line(line: str) -> tuple[str, list[list]]:
    text, spans, at = [], [], 0
    line = line.replace("\\n", "\n")
    length = 0
    for m in MARK.finditer(line):
        plain = line[at:m.start()]
        text.append(plain)
        length += len(plain)
        original, label = m.group(1), m.group(2)
        spans.append([length, length + len(original), label])
        text.append(original)
        length += len(original)
        at = m.end()
    text.append(line[at:])
    out = "".join(text)
    if "[[" in out or "]]" in out:
        raise ValueError(f"unbalanced mark in {line!r}")
    return out, spans


def problems(text: str, spans: list[list]) -> list[str]:
    found = []
    for start, end, label in spans:
        value = text[start:end]
        if label not in CATEGORIES:
            found.append(f"unknown label {label} on {value!r}")
        if value != value.strip():
            found.append(f"{label} {value!r} starts or ends on whitespace")
        if pipeline.check(label, text, start, end) not in (pipeline.UNCHECKED, (start, end)):
            found.append(f"{label} {value!r} does not pass the service's check as it stands")
    if not spans:
        for proven in pipeline.recognise(text):
            if proven.label in ("CREDIT_CARD", "BANK_ACCOUNT", "IP_ADDRESS"):
                found.append(f"no-PII text contains a valid {proven.label} {text[proven.start:proven.end]!r}")
    return found


def load() -> list[dict]:
    rows = []
    for path in sorted(HERE.glob("handwritten_*.txt")):
        lines = path.read_text(encoding="utf-8").splitlines()
        lang = lines[0].removeprefix("#").strip()
        number = 0
        for line in lines[1:]:
            if not line.strip() or line.startswith("#"):
                continue
            number += 1
            text, spans = parse_line(line)
            rows.append({"id": f"{lang}-{number:02d}", "lang": lang, "text": text, "spans": spans})
    return rows


def main():
    rows = load()
    bad = [(row["id"], p) for row in rows for p in problems(row["text"], row["spans"])]
    for ident, problem in bad:
        print(f"{ident}: {problem}", file=sys.stderr)
    if bad:
        raise SystemExit(f"{len(bad)} problems in the gold")
    with open(OUT, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    langs = sorted({r["lang"] for r in rows})
    spans = sum(len(r["spans"]) for r in rows)
    print(f"{OUT.name}: {len(rows)} texts in {len(langs)} languages ({', '.join(langs)}), {spans} spans, "
          f"{sum(not r['spans'] for r in rows)} texts without personal data")


if __name__ == "__main__":
    main()
