"""The redaction service's decoding after the model, in Python: what /redact returns for given
per-token labels. Used to measure the model the way a caller sees it (metrics over character
spans) without building the service; evaluate.py checks that it agrees with the served
component span for span.

It mirrors porter/templates/redact_service/src: bioes.rs (lenient BIOES decoding), redact.rs
(token offsets to characters without surrounding whitespace, checks, recognisers replacing the
model spans they overlap), checks.rs (the checks that veto a model span) and recognise.rs (the
checksummed recognisers). Positions are code points, as in the service.
"""

from __future__ import annotations

from dataclasses import dataclass

CHECKED = ("CREDIT_CARD", "BANK_ACCOUNT", "IP_ADDRESS", "EMAIL", "URL")
OPENING = "([{<'\"«“‘"
CLOSING = ".,;:!?)]}>'\"»”’"
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21,
    "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28,
    "NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22,
    "RU": 33, "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25,
    "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}
HEX = set("0123456789abcdefABCDEF")


@dataclass(frozen=True)
class Span:
    label: str
    start: int
    end: int
    score: float = 1.0


def _ascii_digit(c: str) -> bool:
    return "0" <= c <= "9"


def _ascii_upper(c: str) -> bool:
    return "A" <= c <= "Z"


def _ascii_alnum(c: str) -> bool:
    return _ascii_digit(c) or _ascii_upper(c) or "a" <= c <= "z"


# --- checks.rs ----------------------------------------------------------------------------


def luhn_valid(digits: str) -> bool:
    total = 0
    for position, c in enumerate(reversed(digits)):
        if not _ascii_digit(c):
            return False
        d = int(c)
        if position % 2 == 1:
            d = d * 2 - 9 if d * 2 > 9 else d * 2
        total += d
    return total % 10 == 0


def iban_valid(chars: str) -> bool:
    if len(chars) < 5 or not all(_ascii_upper(c) or _ascii_digit(c) for c in chars):
        return False
    if IBAN_LENGTHS.get(chars[:2]) != len(chars):
        return False
    remainder = 0
    for c in chars[4:] + chars[:4]:
        value = int(c, 36)
        remainder = (remainder * (100 if value >= 10 else 10) + value) % 97
    return remainder == 1


def trim_punctuation(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start] in OPENING:
        start += 1
    while end > start and text[end - 1] in CLOSING:
        if end - start >= 2 and text[end - 1] == ":" and text[end - 2] == ":":
            break
        end -= 1
    return start, end


def card_valid(value: str) -> bool:
    groups = value.replace("-", " ").split(" ")
    if not all(g and all(_ascii_digit(c) for c in g) for g in groups):
        return False
    digits = "".join(groups)
    return 13 <= len(digits) <= 19 and luhn_valid(digits)


def iban_shaped(value: str) -> bool:
    head = value.replace(" ", "")[:4]
    return (len(head) == 4 and head[0].isascii() and head[0].isalpha() and head[1].isascii() and head[1].isalpha()
            and _ascii_digit(head[2]) and _ascii_digit(head[3]))


def _decimal(digits: str) -> int | None:
    if not digits or len(digits) > 3 or (len(digits) > 1 and digits[0] == "0") or not all(map(_ascii_digit, digits)):
        return None
    return int(digits)


def ipv4_valid(value: str) -> bool:
    parts = value.split(".")
    return len(parts) == 4 and all((n := _decimal(p)) is not None and n <= 255 for p in parts)


def ipv6_valid(value: str) -> bool:
    at = value.find("::")
    compressed = at >= 0
    head, tail = (value[:at], value[at + 2:]) if compressed else (value, "")
    if "::" in tail:
        return False
    groups = (head.split(":") if head else []) + ((tail.split(":") if tail else []) if compressed else [])
    count = len(groups)
    if groups and "." in groups[-1]:
        if not ipv4_valid(groups[-1]):
            return False
        count += 1
        groups = groups[:-1]
    if not all(1 <= len(g) <= 4 and all(c in HEX for c in g) for g in groups):
        return False
    return count < 8 if compressed else count == 8


def ip_valid(value: str) -> bool:
    address, slash, prefix = value.partition("/")
    if ipv4_valid(address):
        most = 32
    elif ipv6_valid(address):
        most = 128
    else:
        return False
    return not slash or ((n := _decimal(prefix)) is not None and n <= most)


def domain_valid(domain: str) -> bool:
    if not domain or len(domain) > 253:
        return False
    labels = domain.split(".")

    def label_ok(label: str) -> bool:
        return (1 <= len(label) <= 63 and label[0] != "-" and label[-1] != "-"
                and all(c.isalnum() or c == "-" for c in label))

    tld = labels[-1]
    punycode = len(tld) > 4 and tld[:4].lower() == "xn--"
    return len(labels) >= 2 and all(map(label_ok, labels)) and (punycode or (len(tld) >= 2 and tld.isalpha()))


def email_valid(value: str) -> bool:
    local, at, domain = value.partition("@")
    if not at:
        return False
    atom = set("!#$%&'*+/=?^_`{|}~-")
    local_ok = (0 < len(local) <= 64
                and all(run and all(c.isalnum() or c in atom for c in run) for run in local.split(".")))
    return local_ok and domain_valid(domain)


def url_valid(value: str) -> bool:
    if not value or any(c.isspace() or not c.isprintable() for c in value):
        return False
    at = value.find("://")
    if at >= 0:
        scheme = value[:at]
        if not (scheme and scheme[0].isascii() and scheme[0].isalpha()
                and all(_ascii_alnum(c) or c in "+.-" for c in scheme)):
            return False
        rest = value[at + 3:]
    else:
        rest = value
    cut = min([i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0], default=len(rest))
    authority = rest[:cut]
    if at >= 0 and "@" in authority:
        authority = authority[authority.rfind("@") + 1:]
    search_from = authority.find("]") if authority.startswith("[") else 0
    search_from = max(search_from, 0)
    colon = authority[search_from:].rfind(":")
    host, port = (authority[:search_from + colon], authority[search_from + colon + 1:]) if colon >= 0 else (authority, None)
    if port is not None and not (port and len(port) <= 5 and all(map(_ascii_digit, port)) and int(port) <= 65535):
        return False
    bracketed = host.startswith("[") and host.endswith("]") and len(host) > 2 and ipv6_valid(host[1:-1])
    return host.lower() == "localhost" or bracketed or ipv4_valid(host) or domain_valid(host)


def _widen(text: str, start: int, end: int, member, grouped: bool) -> tuple[int, int]:
    def inside(i: int) -> bool:
        return member(text[i]) or (grouped and text[i] in " -" and 0 < i < len(text) - 1
                                   and member(text[i - 1]) and member(text[i + 1]))

    while start > 0 and inside(start - 1):
        start -= 1
    while end < len(text) and inside(end):
        end += 1
    return start, end


def _ip_char(c: str) -> bool:
    return c in HEX or c in ".:/"


def _decimal_port(digits: str) -> bool:
    return 0 < len(digits) <= 5 and all(map(_ascii_digit, digits)) and int(digits) <= 65535


IBAN_RUN_CHARS = 34 + 8


def _iban_run_overlapping(text: str, start: int, end: int):
    for p in range(max(0, start - IBAN_RUN_CHARS), end):
        word_start = p == 0 or not text[p - 1].isalnum()
        head = text[p:p + 4]
        if not (word_start and len(head) == 4 and iban_shaped(head)):
            continue
        ends, i, count = [], p, 0
        while True:
            group_start = i
            while i < len(text) and _ascii_alnum(text[i]) and count < 34:
                i += 1
                count += 1
            if i == group_start:
                break
            ends.append(i)
            if i + 1 < len(text) and text[i] == " " and _ascii_alnum(text[i + 1]) and count < 34:
                i += 1
            else:
                break
        if ends and p < end and start < ends[-1]:
            return p, ends
    return None


def _bank_account(text: str, start: int, end: int):
    run = _iban_run_overlapping(text, start, end)
    if run is not None:
        run_start, ends = run
        for e in reversed(ends):
            if iban_valid(text[run_start:e].replace(" ", "").upper()):
                return run_start, e
        return None
    start, end = trim_punctuation(text, start, end)
    value = text[start:end]
    if not iban_shaped(value):
        return UNCHECKED
    return (start, end) if iban_valid(value.replace(" ", "").upper()) else None


UNCHECKED = "unchecked"


def check(label: str, text: str, start: int, end: int):
    """checks.rs's Verdict: None = vetoed, UNCHECKED = not a checked label (or a national account
    number), otherwise the (start, end) of the whole value the span is part of, which passed."""
    if label not in CHECKED:
        return UNCHECKED
    if label == "CREDIT_CARD":
        start, end = trim_punctuation(text, *_widen(text, start, end, _ascii_digit, True))
        return (start, end) if card_valid(text[start:end]) else None
    if label == "IP_ADDRESS":
        start, end = trim_punctuation(text, *_widen(text, start, end, _ip_char, False))
        value = text[start:end]
        if ip_valid(value):
            return start, end
        colon = value.rfind(":")
        if colon >= 0 and ipv4_valid(value[:colon]) and _decimal_port(value[colon + 1:]):
            return start, start + colon
        return None
    if label == "BANK_ACCOUNT":
        return _bank_account(text, start, end)
    start, end = trim_punctuation(text, start, end)
    value = text[start:end]
    return (start, end) if (email_valid(value) if label == "EMAIL" else url_valid(value)) else None


# --- recognise.rs -------------------------------------------------------------------------


def _starts_word(text: str, i: int) -> bool:
    return i == 0 or not text[i - 1].isalnum()


def _ends_word(text: str, end: int) -> bool:
    return end == len(text) or not text[end].isalnum()


def _group_ends(text: str, start: int, member, separator) -> list[int]:
    ends, i = [], start
    while True:
        group_start = i
        while i < len(text) and member(text[i]):
            i += 1
        if i == group_start:
            break
        ends.append(i)
        if i + 1 < len(text) and separator(text[i]) and member(text[i + 1]):
            i += 1
        else:
            break
    return ends


def _longest_valid(text: str, start: int, ends: list[int], valid):
    for end in reversed(ends):
        compact = "".join(c for c in text[start:end] if _ascii_alnum(c))
        if _ends_word(text, end) and valid(compact):
            return end
    return None


def _card_at(text, start):
    ends = _group_ends(text, start, _ascii_digit, lambda c: c in " -")
    return _longest_valid(text, start, ends, lambda d: 13 <= len(d) <= 19 and luhn_valid(d))


def _iban_at(text, start):
    head = text[start:start + 4]
    if not (len(head) == 4 and _ascii_upper(head[0]) and _ascii_upper(head[1]) and _ascii_digit(head[2]) and _ascii_digit(head[3])):
        return None
    ends = _group_ends(text, start, lambda c: _ascii_upper(c) or _ascii_digit(c), lambda c: c == " ")
    return _longest_valid(text, start, ends, lambda c: 15 <= len(c) <= 34 and iban_valid(c))


def _ipv4_at(text, start):
    if start >= 2 and text[start - 1] == "." and _ascii_digit(text[start - 2]):
        return None
    i = start
    for octet in range(4):
        if octet:
            if i >= len(text) or text[i] != ".":
                return None
            i += 1
        digits_start = i
        while i < len(text) and _ascii_digit(text[i]) and i - digits_start < 3:
            i += 1
        digits = text[digits_start:i]
        if not digits or (len(digits) > 1 and digits[0] == "0") or int(digits) > 255:
            return None
    dotted_more = i < len(text) and text[i] == "." and i + 1 < len(text) and _ascii_digit(text[i + 1])
    return i if _ends_word(text, i) and not dotted_more else None


def _local_char(c: str) -> bool:
    return _ascii_alnum(c) or c in "._%+-"


def _email_at(text, start):
    if start > 0 and _local_char(text[start - 1]):
        return None
    i = start
    while i < len(text) and _local_char(text[i]):
        i += 1
    if i == start or text[start] == "." or text[i - 1] == "." or i >= len(text) or text[i] != "@":
        return None
    domain = i + 1
    ends = _group_ends(text, domain, lambda c: _ascii_alnum(c) or c == "-", lambda c: c == ".")
    if len(ends) < 2:
        return None
    end = ends[-1]
    last_label_start = text.rfind(".", domain, end) + 1
    tld = text[last_label_start:end]
    return end if len(tld) >= 2 and all(c.isascii() and c.isalpha() for c in tld) and _ends_word(text, end) else None


def _url_at(text, start):
    head = text[start:start + 8].lower()
    if not any(head.startswith(s) for s in ("http://", "https://", "www.")):
        return None
    end = start
    while end < len(text) and not text[end].isspace():
        end += 1
    while end > start and text[end - 1] in ".,;:!?)]}'\"":
        end -= 1
    slashes = head.find("//")
    min_length = (slashes + 2 if slashes >= 0 else 4) + 1
    return end if end - start > min_length else None


def recognise(text: str) -> list[Span]:
    found, i = [], 0
    while i < len(text):
        if _starts_word(text, i):
            for label, finder in (("URL", _url_at), ("EMAIL", _email_at), ("BANK_ACCOUNT", _iban_at),
                                  ("IP_ADDRESS", _ipv4_at), ("CREDIT_CARD", _card_at)):
                end = finder(text, i)
                if end is not None:
                    found.append(Span(label, i, end))
                    i = end
                    break
            else:
                i += 1
            continue
        i += 1
    return found


# --- bioes.rs and redact.rs ---------------------------------------------------------------


def decode_bioes(labels: list[str], scores: list[float]) -> list[tuple[str, int, int, float]]:
    """Lenient BIOES: B opens, I/E extend an open span of the same category or open one, E/S
    close, O or another category closes. (category, first token, last token, mean score)."""
    spans, open_span = [], None

    def close(last):
        nonlocal open_span
        if open_span is not None:
            category, first, total = open_span
            spans.append((category, first, last, total / (last + 1 - first)))
            open_span = None

    for i, (label, score) in enumerate(zip(labels, scores)):
        tag, _, category = label.partition("-")
        continues = open_span is not None and open_span[0] == category
        if tag in ("O", "B", "S") or not continues:
            close(i - 1)
        if tag == "O":
            continue
        if open_span is None:
            open_span = (category, i, 0.0)
        open_span = (open_span[0], open_span[1], open_span[2] + score)
        if tag in ("E", "S"):
            close(i)
    close(len(labels) - 1)
    return spans


def apply_checks(text: str, spans: list[Span]) -> tuple[list[Span], list[Span]]:
    """(kept, vetoed) as redact.rs's apply_checks: a checked value replaces the other model spans
    it overlaps, the first of several overlapping values wins."""
    checked, unchecked, vetoed = [], [], []

    def overlaps(a: Span, b: Span) -> bool:
        return a.start < b.end and b.start < a.end

    for span in spans:
        verdict = check(span.label, text, span.start, span.end)
        if verdict is None:
            vetoed.append(span)
        elif verdict == UNCHECKED:
            unchecked.append(span)
        else:
            value = Span(span.label, verdict[0], verdict[1], span.score)
            if not any(overlaps(c, value) for c in checked):
                checked.append(value)
    kept = checked + [u for u in unchecked if not any(overlaps(c, u) for c in checked)]
    kept.sort(key=lambda s: s.start)
    return kept, vetoed


def redact_spans(text: str, offsets: list[tuple[int, int]], labels: list[str], scores: list[float]):
    """(items, vetoed) as /redact computes them from per-token labels: items are Spans sorted by
    start, vetoed the model spans the checks refused. `offsets` are code points, as the service's."""
    chars_spans = []
    for category, first, last, score in decode_bioes(labels, scores):
        start, end = offsets[first][0], offsets[last][1]
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        chars_spans.append(Span(category, start, end, score))
    kept, vetoed = apply_checks(text, chars_spans)
    proven = recognise(text)
    spans = [m for m in kept if m.start < m.end and not any(m.start < p.end and p.start < m.end for p in proven)]
    spans += proven
    spans.sort(key=lambda s: s.start)  # stable, as Rust's sort_by_key
    return spans, vetoed
