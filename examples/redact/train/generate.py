"""Synthetic PII token-classification data for the redact example, built on Faker.

Every example is a text plus character spans `[start, end, label]` over the 20 categories of
examples/redact/labels.json. Texts come from hand-written templates in 11 languages (the
locale's own language, plus English for every locale), forms and lists, e-mail-like messages,
identity numbers in context (templates.ID_WORDS / ID_FRAMES: the words around a number decide
whether it is an SSN, a TAX_ID or a GOVERNMENT_ID), and ~25 % texts without any PII (with distractors: dates, amounts, order and product
codes, times, percentages, versions).

The template set is split in two, disjoint: `--split train` uses the templates whose index in
their list is not 3 mod 4, `--split test` those that are (and a different form layout set,
e-mail skeleton set and no-PII template set). Together with a different seed this gives the
held-out test set. Output is deterministic for a given (split, seed, n): one random.Random and
one Faker instance per locale, all seeded from `seed`, under PYTHONHASHSEED=0 (main() re-executes
itself with it, since some Faker providers draw from hash-ordered collections).

    python generate.py --split train --seed 1 --n 8000 --out data/train.jsonl
    python generate.py --split test  --seed 2 --n 1000 --out data/test.jsonl

Each JSONL line: {"text": ..., "spans": [[start, end, "LABEL"], ...], "locale": ..., "lang": ...,
"kind": ...}. Spans are sorted, non-overlapping, and never start or end on whitespace.
"""

import argparse
import json
import os
import random
import re
import string
import sys
import unicodedata
from pathlib import Path

from faker import Faker

sys.path.insert(0, str(Path(__file__).resolve().parent))
from templates import (EMAIL_SKELETONS, FIELD_LABELS, FORM_GROUPS, FORM_LAYOUTS, ID_FRAMES, ID_WORDS,  # noqa: E402
                       NEGNUM_WORDS, NOPII, NOUNS, PRODUCTS, ROOMS, T, TEAMS, WEEKDAYS)

CATEGORIES = [
    "SSN", "CREDIT_CARD", "EMAIL", "URL", "IP_ADDRESS", "GIVEN_NAME", "SURNAME", "PHONE",
    "TAX_ID", "BANK_ACCOUNT", "ROUTING_NUMBER", "GOVERNMENT_ID", "PASSPORT", "DRIVERS_LICENSE",
    "BUILDING_NUMBER", "STREET_NAME", "SECONDARY_ADDRESS", "CITY", "STATE", "ZIP_CODE",
]

# locale -> sampling weight
LOCALES = {
    "en_GB": 3, "en_US": 4, "en_IE": 1, "fr_FR": 3, "de_DE": 3, "de_AT": 1, "de_CH": 1,
    "es_ES": 3, "it_IT": 3, "nl_NL": 2, "nl_BE": 1, "pt_PT": 2, "pl_PL": 2, "sv_SE": 2,
    "da_DK": 2, "fi_FI": 2,
}


# ----------------------------------------------------------------------------- value makers

def _digits(r, n):
    return "".join(r.choice(string.digits) for _ in range(n))


def _letters(r, n):
    return "".join(r.choice(string.ascii_uppercase) for _ in range(n))


def _ascii(s):
    s = unicodedata.normalize("NFKD", s).encode("ascii", "ignore").decode()
    return re.sub(r"[^A-Za-z0-9]", "", s).lower()


def _luhn_complete(r, prefix, length):
    body = prefix + _digits(r, length - len(prefix) - 1)
    total = 0
    for i, c in enumerate(reversed(body)):
        d = int(c)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return body + str((10 - total % 10) % 10)


def credit_card(f, r, loc):
    kind = r.random()
    if kind < 0.5:
        prefix, n = r.choice([("4", 16), ("51", 16), ("55", 16), ("2221", 16), ("6011", 16),
                              ("37", 15), ("34", 15), ("4", 13), ("35", 16)])
        num = _luhn_complete(r, prefix, n)
    else:
        num = re.sub(r"\D", "", f.credit_card_number())
    style = r.random()
    if style < 0.45 and len(num) == 16:
        return " ".join(num[i:i + 4] for i in range(0, 16, 4))
    if style < 0.6 and len(num) == 16:
        return "-".join(num[i:i + 4] for i in range(0, 16, 4))
    if style < 0.7 and len(num) == 15:
        return f"{num[:4]} {num[4:10]} {num[10:]}"
    return num


def ssn(f, r, loc):
    if loc == "en_US":
        v = f.ssn()
        return v if r.random() < 0.7 else v.replace("-", r.choice(["", " "]))
    if loc in ("en_GB", "en_IE"):
        if loc == "en_IE":
            return _digits(r, 7) + _letters(r, 1) + r.choice(["", "A", "W"])  # PPSN
        v = f.ssn()
        return v if r.random() < 0.5 else v.replace(" ", "")
    if loc == "fr_FR":
        v = f.ssn()
        if r.random() < 0.5:
            v = f"{v[0]} {v[1:3]} {v[3:5]} {v[5:7]} {v[7:10]} {v[10:13]} {v[13:]}"
        return v
    if loc == "da_DK":
        return f"{r.randint(1, 28):02d}{r.randint(1, 12):02d}{r.randint(40, 99):02d}-{_digits(r, 4)}"
    if loc == "de_AT":  # österreichische SV-Nummer: 4 digits (3 + check) and the birth date DDMMYY
        return f"{_digits(r, 4)} {r.randint(1, 28):02d}{r.randint(1, 12):02d}{_digits(r, 2)}" if r.random() < 0.6 else \
            f"{_digits(r, 4)}{r.randint(1, 28):02d}{r.randint(1, 12):02d}{_digits(r, 2)}"
    if loc == "nl_BE":  # rijksregisternummer / NISS: YY.MM.DD-XXX.CC
        v = f.ssn()
        return f"{v[:2]}.{v[2:4]}.{v[4:6]}-{v[6:9]}.{v[9:]}" if r.random() < 0.6 else v
    if loc == "sv_SE" and r.random() < 0.3:
        return f"{r.choice(['19', '20'])}{f.ssn()}"
    if loc == "de_DE":  # Sozialversicherungsnummer
        return f"{_digits(r, 2)} {r.randint(1, 28):02d}{r.randint(1, 12):02d}{_digits(r, 2)} {_letters(r, 1)} {_digits(r, 3)}" \
            if r.random() < 0.5 else f"{_digits(r, 2)}{r.randint(1, 28):02d}{r.randint(1, 12):02d}{_digits(r, 2)}{_letters(r, 1)}{_digits(r, 3)}"
    if loc == "es_ES":  # NUSS
        return f"{_digits(r, 2)}/{_digits(r, 8)}/{_digits(r, 2)}" if r.random() < 0.6 else _digits(r, 12)
    if loc == "it_IT":  # INPS / social-security numbers; the codice fiscale is a TAX_ID (gold conventions)
        return _digits(r, 11) if r.random() < 0.5 else f"{_letters(r, 2)}{_digits(r, 8)}"
    if loc == "pt_PT":  # NISS
        return "1" + _digits(r, 10)
    try:
        return f.ssn()
    except AttributeError:
        return _digits(r, 9)


def tax_id(f, r, loc):
    c = r.random()
    if loc == "en_US":
        return f"{_digits(r, 2)}-{_digits(r, 7)}" if c < 0.6 else f"9{_digits(r, 2)}-{r.choice(['7', '8'])}{_digits(r, 1)}-{_digits(r, 4)}"
    if loc in ("en_GB",):
        return _digits(r, 10) if c < 0.5 else f"GB{_digits(r, 9)}"
    if loc == "es_ES":
        return f.nif() if c < 0.6 else f.vat_id()
    if loc == "it_IT":
        return f.ssn() if c < 0.6 else f.vat_id()  # codice fiscale / partita IVA
    if loc == "de_DE":  # Steuer-ID (11 digits, often grouped 2-3-3-3), Steuernummer, USt-IdNr.
        if c < 0.25:
            return _digits(r, 11)
        if c < 0.45:
            d = _digits(r, 11)
            return f"{d[:2]} {d[2:5]} {d[5:8]} {d[8:]}"
        return f"{_digits(r, 2)}/{_digits(r, 3)}/{_digits(r, 5)}" if c < 0.75 else f.vat_id()
    if loc == "pl_PL":  # NIP
        if c < 0.45:
            return f"{_digits(r, 3)}-{_digits(r, 3)}-{_digits(r, 2)}-{_digits(r, 2)}"
        return _digits(r, 10) if c < 0.75 else f.vat_id()
    if loc == "pt_PT":
        return r.choice("123") + _digits(r, 8) if c < 0.6 else f.vat_id()
    if loc == "fr_FR":  # numéro fiscal (SPI, 13 digits) or a VAT number
        if c < 0.4:
            return f"{r.choice('0123')}{_digits(r, 1)} {_digits(r, 2)} {_digits(r, 3)} {_digits(r, 3)} {_digits(r, 3)}"
        return r.choice("0123") + _digits(r, 12) if c < 0.7 else f"FR{_digits(r, 2)} {_digits(r, 9)}"
    if loc == "de_AT":
        return f"{_digits(r, 2)}-{_digits(r, 3)}/{_digits(r, 4)}" if c < 0.5 else f.vat_id()
    if loc == "de_CH":
        return f"756.{_digits(r, 4)}.{_digits(r, 4)}.{_digits(r, 2)}" if c < 0.2 else f"CHE-{_digits(r, 3)}.{_digits(r, 3)}.{_digits(r, 3)}"
    if loc == "nl_NL":
        return f"NL{_digits(r, 9)}B{_digits(r, 2)}"
    if loc == "da_DK":
        return _digits(r, 8) if c < 0.6 else f"DK{_digits(r, 8)}"
    if loc == "sv_SE":
        return f"SE{_digits(r, 10)}01"
    if loc == "en_IE":
        return f"IE{_digits(r, 7)}{_letters(r, 1)}"
    try:
        return f.vat_id()
    except AttributeError:
        return _digits(r, 10)


def bank_account(f, r, loc):
    c = r.random()
    if loc == "en_US":
        return _digits(r, r.randint(8, 12))
    if loc == "en_GB" and c < 0.4:
        return _digits(r, 8)
    try:
        iban = f.iban()
    except AttributeError:
        iban = "GB" + _digits(r, 2) + _letters(r, 4) + _digits(r, 14)
    if c < 0.5:
        return " ".join(iban[i:i + 4] for i in range(0, len(iban), 4))
    if c < 0.85:
        return iban
    return f.bban()


def routing_number(f, r, loc):
    if loc == "en_US":
        return f.aba()
    c = r.random()
    if loc in ("en_GB", "en_IE"):
        return f"{_digits(r, 2)}-{_digits(r, 2)}-{_digits(r, 2)}" if c < 0.8 else _digits(r, 6)
    if c < 0.6:  # BIC / SWIFT
        cc = loc.split("_")[1]
        return _letters(r, 4) + cc + _letters(r, 1) + r.choice(string.digits + string.ascii_uppercase) + (
            r.choice(["", "XXX", _letters(r, 3)]))
    if loc == "de_DE" or loc == "de_AT":  # Bankleitzahl
        return f"{_digits(r, 3)} {_digits(r, 3)} {_digits(r, 2)}" if c < 0.8 else _digits(r, 8)
    return _digits(r, r.choice([5, 8, 9]))


def government_id(f, r, loc):
    c = r.random()
    if loc == "pl_PL":  # dowód osobisty (the PESEL is an SSN: gold conventions)
        v = f.identity_card_number()
        return v if c < 0.7 else f"{v[:3]} {v[3:]}"
    if loc == "es_ES":  # DNI / NIE
        return f.nif() if c < 0.6 else f"{r.choice('XYZ')}{_digits(r, 7)}{_letters(r, 1)}"
    if loc in ("de_DE", "de_AT"):
        alnum = "CFGHJKLMNPRTVWXYZ0123456789"
        return "".join(r.choice(alnum) for _ in range(9))
    if loc == "it_IT":
        return f"C{_letters(r, 1)}{_digits(r, 5)}{_letters(r, 2)}"
    if loc in ("nl_NL", "nl_BE"):
        return _letters(r, 2) + "".join(r.choice(string.ascii_uppercase + string.digits) for _ in range(6)) + _digits(r, 1)
    if loc == "fr_FR":
        return "".join(r.choice(string.ascii_uppercase + string.digits) for _ in range(9)) if c < 0.5 else _digits(r, 12)
    if loc == "pt_PT":
        return f"{_digits(r, 8)} {_digits(r, 1)} {_letters(r, 2)}{_digits(r, 1)}"
    if loc == "sv_SE":  # ID-kort number (the personnummer is an SSN)
        return _digits(r, 8)
    if loc == "fi_FI":  # henkilökortti number (the henkilötunnus is an SSN)
        return _digits(r, 9)
    if loc == "da_DK":
        return _digits(r, 9) if c < 0.6 else f"{_letters(r, 2)}{_digits(r, 7)}"
    if loc == "en_GB" or loc == "en_IE":
        return _letters(r, 2) + _digits(r, 7) if c < 0.5 else _digits(r, 9)
    if loc == "de_CH":
        return f"{_letters(r, 1)}{_digits(r, 7)}"
    if loc == "nl_BE":  # Belgian eID card number 000-0000000-00
        return f"{_digits(r, 3)}-{_digits(r, 7)}-{_digits(r, 2)}" if c < 0.6 else _digits(r, 12)
    if loc == "en_US":
        return f"{_letters(r, 1)}{_digits(r, 8)}" if c < 0.5 else f"{_digits(r, 3)}-{_digits(r, 3)}-{_digits(r, 3)}"
    return _letters(r, r.randint(1, 2)) + _digits(r, r.randint(6, 8))


PASSPORT_FORMATS = {
    "de_DE": lambda r: r.choice("CFGHJK") + "".join(r.choice("CFGHJKLMNPRTVWXYZ0123456789") for _ in range(8)),
    "de_AT": lambda r: _letters(r, 1) + _digits(r, 7),
    "de_CH": lambda r: _letters(r, 1) + _digits(r, 7),
    "fr_FR": lambda r: _digits(r, 2) + _letters(r, 2) + _digits(r, 5),
    "es_ES": lambda r: _letters(r, 3) + _digits(r, 6),
    "it_IT": lambda r: _letters(r, 2) + _digits(r, 7),
    "nl_NL": lambda r: _letters(r, 2) + "".join(r.choice("ABCDEFGHJKLMNPRSTUVWXYZ0123456789") for _ in range(6)) + _digits(r, 1),
    "nl_BE": lambda r: _letters(r, 2) + _digits(r, 6),
    "pt_PT": lambda r: _letters(r, 1) + _digits(r, 6),
    "pl_PL": lambda r: _letters(r, 2) + _digits(r, 7),
    "sv_SE": lambda r: _digits(r, 8),
    "da_DK": lambda r: _digits(r, 9),
    "fi_FI": lambda r: _letters(r, 2) + _digits(r, 7),
    "en_GB": lambda r: _digits(r, 9),
    "en_IE": lambda r: _letters(r, 2) + _digits(r, 7),
    "en_US": lambda r: (_letters(r, 1) if r.random() < 0.4 else "") + _digits(r, 8 if r.random() < 0.4 else 9),
}


def passport(f, r, loc):
    c = r.random()
    if loc in PASSPORT_FORMATS and c < 0.75:
        v = PASSPORT_FORMATS[loc](r)
        return v if r.random() < 0.85 else f"{v[:2]} {v[2:]}"
    if c < 0.85:
        try:
            return f.passport_number()
        except AttributeError:
            pass
    return _letters(r, r.randint(1, 2)) + _digits(r, r.randint(6, 8))


def drivers_license(f, r, loc):
    c = r.random()
    if loc == "en_US":
        return r.choice([
            f"{_letters(r, 1)}{_digits(r, 7)}", f"{_letters(r, 1)}{_digits(r, 12)}",
            f"{_digits(r, 3)}-{_digits(r, 3)}-{_digits(r, 3)}", f"{_letters(r, 1)}{_digits(r, 3)}-{_digits(r, 4)}-{_digits(r, 4)}",
        ])
    if loc == "en_GB":
        sur = (_ascii(f.last_name()).upper() + "99999")[:5]
        return f"{sur}{_digits(r, 6)}{_letters(r, 2)}{_digits(r, 1)}{_letters(r, 2)}"
    if loc in ("de_DE", "de_AT", "de_CH"):
        return f"{_letters(r, 1)}{_digits(r, 3)}{_letters(r, 1)}{_digits(r, 1)}{_letters(r, 1)}{_digits(r, 4)}"
    if loc == "fr_FR":
        return _digits(r, 12) if c < 0.5 else f"{_digits(r, 2)}{_letters(r, 2)}{_digits(r, 5)}"
    if loc == "it_IT":
        return f"{_letters(r, 2)}{_digits(r, 7)}{_letters(r, 1)}"
    if loc == "es_ES":
        return f.nif()
    if loc == "pl_PL":
        return f"{_digits(r, 5)}/{_digits(r, 2)}/{_digits(r, 4)}" if c < 0.7 else _letters(r, 1) + _digits(r, 8)
    if loc == "nl_NL" or loc == "nl_BE":
        return _digits(r, 10)
    if loc == "pt_PT":
        return f"{_letters(r, 1)}-{_digits(r, 6)} {_digits(r, 1)}" if c < 0.6 else f"{_letters(r, 2)}-{_digits(r, 6)}"
    if loc == "sv_SE" or loc == "da_DK":
        return _digits(r, 8) if c < 0.6 else _digits(r, 10)
    if loc == "fi_FI":
        return _digits(r, 8)
    if loc == "en_IE":
        return f"{_digits(r, 3)}{_digits(r, 3)}{_digits(r, 3)}"
    return _letters(r, r.randint(0, 2)) + _digits(r, r.randint(7, 10))


def phone(f, r, loc):
    v = f.phone_number()
    if r.random() < 0.15:
        v = re.sub(r"x\d+$", "", v)
    return v.strip()


def email(f, r, loc, person=None):
    if person and r.random() < 0.6:
        g, s = _ascii(person[0]), _ascii(person[1])
        user = r.choice([f"{g}.{s}", f"{g[:1]}{s}", f"{g}_{s}", f"{s}{_digits(r, 2)}", g, f"{g}.{s}{r.randint(1, 99)}"])
        dom = r.choice([f.free_email_domain(), f.domain_name()])
        return f"{user or 'info'}@{dom}"
    return f.email() if r.random() < 0.6 else f.company_email()


def url(f, r, loc):
    c = r.random()
    if c < 0.4:
        return f.url()
    if c < 0.7:
        return f.url().rstrip("/") + "/" + f.uri_path()
    if c < 0.85:
        return "www." + f.domain_name()
    return f.uri()


def ip(f, r, loc):
    c = r.random()
    return f.ipv4() if c < 0.6 else (f.ipv4_private() if c < 0.8 else f.ipv6())


SECONDARY = {
    "en": ["Apt. {n}", "Apt {n}{l}", "Suite {n}", "Flat {n}", "Unit {n}", "Floor {n}", "Room {n}", "#{n}", "Studio {n}"],
    "fr": ["Appartement {n}", "Apt {n}", "Bâtiment {l}", "Étage {n}", "Esc. {l}", "Bureau {n}"],
    "de": ["Wohnung {n}", "Whg. {n}", "App. {n}", "{n}. OG", "Stiege {n}", "Top {n}", "Haus {l}"],
    "es": ["Piso {n}", "{n}º {l}", "Puerta {n}", "Esc. {l}", "Planta {n}", "Bajo {l}"],
    "it": ["Interno {n}", "Int. {n}", "Scala {l}", "Piano {n}", "Appartamento {n}"],
    "nl": ["bus {n}", "Appartement {n}", "{n}e verdieping", "unit {n}", "hs"],
    "pt": ["{n}º Esq.", "{n}º Dto.", "Apartamento {n}", "R/C", "Andar {n}"],
    "pl": ["m. {n}", "lok. {n}", "mieszkanie {n}", "piętro {n}"],
    "sv": ["lgh {n}", "lägenhet {n}", "{n} tr", "våning {n}"],
    "da": ["{n}. th.", "{n}. tv.", "st. tv.", "lejlighed {n}", "{n}. sal"],
    "fi": ["A {n}", "B {n}", "as. {n}", "asunto {n}", "C {n}"],
}


def secondary(f, r, loc, lang):
    if loc in ("en_US", "es_ES", "it_IT") and r.random() < 0.5:
        try:
            return f.secondary_address()
        except AttributeError:
            pass
    t = r.choice(SECONDARY[loc.split("_")[0]])
    return t.format(n=r.randint(1, 120), l=r.choice("ABCDEFGH"))


def building_number(f, r, loc):
    v = f.building_number().lstrip("0") or str(r.randint(1, 200))
    if r.random() < 0.12:
        v += r.choice(["a", "b", "A", "B", "bis"]) if loc.startswith(("fr", "de", "nl", "it", "da", "sv")) else ""
    return v


def state(f, r, loc):
    try:
        v = f.administrative_unit()
    except AttributeError:
        return None
    if loc == "en_US" and r.random() < 0.5:
        return f.state_abbr()
    if loc == "pl_PL" and r.random() < 0.6:  # "województwo mazowieckie"
        return v.lower()
    return v


def street_name(f, r, loc):
    v = f.street_name()
    if loc.startswith("fr") and r.random() < 0.5:
        v = v[0].upper() + v[1:]
    return v


# ----------------------------------------------------------------------------- Polish cases

def _pl_a_dative(w):
    low = w.lower()
    if low.endswith("ka"):
        return w[:-2] + "ce"
    if low.endswith("ga"):
        return w[:-2] + "dze"
    if low.endswith(("ia", "ja", "la")):
        return w[:-1] + "i"
    if low.endswith("ra"):
        return w[:-1] + "ze"
    return w[:-1] + "ie"


def _pl_male(w, case, surname):
    """A rough declension of one word of a Polish man's name (genitive, dative, instrumental),
    enough for the common patterns: -ski/-cki/-dzki, -y/-i, -a, -o, -ek, -eł, consonants. The
    vocative is left in the nominative, as formal letters mostly write it."""
    low = w.lower()
    if case == "voc":
        return w
    if low.endswith(("ski", "cki", "dzki")):
        return {"gen": w[:-1] + "iego", "dat": w[:-1] + "iemu", "ins": w[:-1] + "im"}[case]
    if low.endswith("y"):  # Ignacy, Biały
        return {"gen": w[:-1] + "ego", "dat": w[:-1] + "emu", "ins": w[:-1] + "ym"}[case]
    if low.endswith("i"):  # Antoni
        return {"gen": w + "ego", "dat": w + "emu", "ins": w + "m"}[case]
    if low.endswith("a"):  # Kuba, Zaremba
        gen = w[:-1] + ("i" if low[-2:-1] in ("k", "g", "l", "j", "i") else "y")
        return {"gen": gen, "dat": _pl_a_dative(w), "ins": w[:-1] + "ą"}[case]
    stem = w
    if low.endswith("o"):  # Radzio, Józio
        stem = w[:-1]
    elif low.endswith("ek") and len(w) > 3:  # Marek -> Marka
        stem = w[:-2] + w[-1]
    elif low.endswith("eł"):  # Paweł -> Pawła
        stem = w[:-2] + w[-1]
    ins = "iem" if stem.lower().endswith(("k", "g")) else "em"
    return {"gen": stem + "a", "dat": stem + "owi", "ins": stem + ins}[case]


def _pl_female(w, case, surname):
    low = w.lower()
    if case == "voc":
        return w
    if surname and low.endswith(("ska", "cka", "dzka")):
        return {"gen": w[:-1] + "iej", "dat": w[:-1] + "iej", "ins": w[:-1] + "ą"}[case]
    if low.endswith("a"):
        gen = w[:-1] + ("i" if low[-2:-1] in ("k", "g", "l", "j", "i") else "y")
        if low.endswith(("ia", "ja")):
            gen = w[:-1] + "i"
        return {"gen": gen, "dat": _pl_a_dative(w), "ins": w[:-1] + "ą"}[case]
    return w  # consonant-final women's surnames (Nowak) do not decline


def pl_inflect(name, case, male, surname):
    """Every word of a Polish given name or surname ("Anna Maria", "Nowak-Kowalska") in a case."""
    fn = _pl_male if male else _pl_female
    out = []
    for word in re.split(r"([ -])", name):
        out.append(word if word in (" ", "-", "") else fn(word, case, surname))
    return "".join(out)


def negnum(r, lang):
    """An unlabelled number with what it is ("Kundennummer 4711 0815"): numbers shaped like phone
    numbers or identity numbers that are neither (order, invoice, customer, case numbers)."""
    word = r.choice(NEGNUM_WORDS.get(lang, NEGNUM_WORDS["en"]))
    shape = r.random()
    if shape < 0.2:
        v = _digits(r, r.randint(6, 12))
    elif shape < 0.4:
        v = f"{_digits(r, r.randint(3, 5))} {_digits(r, r.randint(3, 7))}"
    elif shape < 0.5:
        v = f"{_digits(r, 2)} {_digits(r, 3)} {_digits(r, 3)}"
    elif shape < 0.6:
        v = f"{r.randint(2015, 2026)}/{_digits(r, r.randint(4, 6))}"
    elif shape < 0.7:
        v = f"{_digits(r, 3)}-{_digits(r, 3)}-{_digits(r, r.randint(3, 4))}"
    elif shape < 0.8:
        v = f"{_letters(r, r.randint(1, 3))}-{_digits(r, r.randint(5, 9))}"
    elif shape < 0.9:
        v = f"{_digits(r, 2)}.{_digits(r, 3)}.{_digits(r, 3)}"
    else:
        v = f"{_digits(r, 4)}-{_digits(r, 4)}-{_digits(r, 2)}"
    return f"{word} {v}" if r.random() < 0.6 else f"{word}: {v}"


# ----------------------------------------------------------------------------- entity sampler

class Sampler:
    """Draws PII values for one locale; one person per example (names, derived e-mail)."""

    def __init__(self, f, r, loc):
        self.f, self.r, self.loc = f, r, loc
        self.lang = loc.split("_")[0]
        self.person = None

    def new_person(self):
        f = self.f
        self.person = (f.first_name(), f.last_name())
        return self.person

    def value(self, cat):
        f, r, loc = self.f, self.r, self.loc
        if cat == "GIVEN_NAME":
            return (self.person or self.new_person())[0]
        if cat == "SURNAME":
            return (self.person or self.new_person())[1]
        if cat == "EMAIL":
            return email(f, r, loc, self.person)
        fn = {
            "SSN": ssn, "CREDIT_CARD": credit_card, "URL": url, "IP_ADDRESS": ip, "PHONE": phone,
            "TAX_ID": tax_id, "BANK_ACCOUNT": bank_account, "ROUTING_NUMBER": routing_number,
            "GOVERNMENT_ID": government_id, "PASSPORT": passport, "DRIVERS_LICENSE": drivers_license,
            "BUILDING_NUMBER": building_number, "STREET_NAME": street_name, "STATE": state,
        }.get(cat)
        if fn is not None:
            return fn(f, r, loc)
        if cat == "SECONDARY_ADDRESS":
            return secondary(f, r, loc, self.lang)
        if cat == "CITY":
            return f.city()
        if cat == "ZIP_CODE":
            return f.postcode()
        raise KeyError(cat)


# Address layouts per locale family; {STATE} layouts are skipped where the locale has none.
ADDRESS_FORMATS = {
    "en_US": ["{BUILDING_NUMBER} {STREET_NAME}, {CITY}, {STATE} {ZIP_CODE}",
              "{BUILDING_NUMBER} {STREET_NAME} {SECONDARY_ADDRESS}, {CITY}, {STATE} {ZIP_CODE}",
              "{BUILDING_NUMBER} {STREET_NAME}, {SECONDARY_ADDRESS}, {CITY} {STATE}",
              "{BUILDING_NUMBER} {STREET_NAME}", "{CITY}, {STATE}"],
    "en_GB": ["{BUILDING_NUMBER} {STREET_NAME}, {CITY} {ZIP_CODE}",
              "{SECONDARY_ADDRESS}, {BUILDING_NUMBER} {STREET_NAME}, {CITY}, {ZIP_CODE}",
              "{BUILDING_NUMBER} {STREET_NAME}, {CITY}, {STATE}, {ZIP_CODE}", "{BUILDING_NUMBER} {STREET_NAME}"],
    "en_IE": ["{BUILDING_NUMBER} {STREET_NAME}, {CITY}, Co. {STATE}, {ZIP_CODE}",
              "{BUILDING_NUMBER} {STREET_NAME}, {CITY} {ZIP_CODE}"],
    "fr": ["{BUILDING_NUMBER} {STREET_NAME}, {ZIP_CODE} {CITY}",
           "{BUILDING_NUMBER}, {STREET_NAME}, {SECONDARY_ADDRESS}, {ZIP_CODE} {CITY}",
           "{BUILDING_NUMBER} {STREET_NAME} {ZIP_CODE} {CITY} ({STATE})", "{BUILDING_NUMBER} {STREET_NAME}"],
    "de": ["{STREET_NAME} {BUILDING_NUMBER}, {ZIP_CODE} {CITY}",
           "{STREET_NAME} {BUILDING_NUMBER}, {SECONDARY_ADDRESS}, {ZIP_CODE} {CITY}",
           "{STREET_NAME} {BUILDING_NUMBER}, {ZIP_CODE} {CITY}, {STATE}", "{STREET_NAME} {BUILDING_NUMBER}"],
    "es": ["{STREET_NAME}, {BUILDING_NUMBER}, {ZIP_CODE} {CITY}",
           "{STREET_NAME} {BUILDING_NUMBER}, {SECONDARY_ADDRESS}, {ZIP_CODE} {CITY} ({STATE})",
           "{STREET_NAME}, {BUILDING_NUMBER} {SECONDARY_ADDRESS}, {CITY}"],
    "it": ["{STREET_NAME} {BUILDING_NUMBER}, {ZIP_CODE} {CITY} ({STATE})",
           "{STREET_NAME}, {BUILDING_NUMBER}, {SECONDARY_ADDRESS}, {ZIP_CODE} {CITY}",
           "{STREET_NAME} {BUILDING_NUMBER}, {CITY}"],
    "nl": ["{STREET_NAME} {BUILDING_NUMBER}, {ZIP_CODE} {CITY}",
           "{STREET_NAME} {BUILDING_NUMBER} {SECONDARY_ADDRESS}, {ZIP_CODE} {CITY}", "{STREET_NAME} {BUILDING_NUMBER}, {CITY}"],
    "pt": ["{STREET_NAME}, {BUILDING_NUMBER}, {ZIP_CODE} {CITY}",
           "{STREET_NAME} {BUILDING_NUMBER}, {SECONDARY_ADDRESS}, {ZIP_CODE} {CITY}", "{STREET_NAME} n.º {BUILDING_NUMBER}, {CITY}"],
    "pl": ["ul. {STREET_NAME} {BUILDING_NUMBER}, {ZIP_CODE} {CITY}",
           "ul. {STREET_NAME} {BUILDING_NUMBER} {SECONDARY_ADDRESS}, {ZIP_CODE} {CITY}, woj. {STATE}",
           "{STREET_NAME} {BUILDING_NUMBER}/{BUILDING_NUMBER}, {CITY}"],
    "sv": ["{STREET_NAME} {BUILDING_NUMBER}, {ZIP_CODE} {CITY}",
           "{STREET_NAME} {BUILDING_NUMBER}, {SECONDARY_ADDRESS}, {ZIP_CODE} {CITY}", "{STREET_NAME} {BUILDING_NUMBER}, {CITY}, {STATE}"],
    "da": ["{STREET_NAME} {BUILDING_NUMBER}, {SECONDARY_ADDRESS}, {ZIP_CODE} {CITY}",
           "{STREET_NAME} {BUILDING_NUMBER}, {ZIP_CODE} {CITY}", "{STREET_NAME} {BUILDING_NUMBER}, {CITY}, Region {STATE}"],
    "fi": ["{STREET_NAME} {BUILDING_NUMBER} {SECONDARY_ADDRESS}, {ZIP_CODE} {CITY}",
           "{STREET_NAME} {BUILDING_NUMBER}, {ZIP_CODE} {CITY}", "{STREET_NAME} {BUILDING_NUMBER}, {CITY}, {STATE}"],
}


def address_formats(loc):
    return ADDRESS_FORMATS.get(loc) or ADDRESS_FORMATS[loc.split("_")[0]]


NAME_FORMATS = ["{GIVEN_NAME} {SURNAME}"] * 6 + ["{SURNAME}, {GIVEN_NAME}", "{GIVEN_NAME}", "{SURNAME}",
                                                  "{GIVEN_NAME} {MIDDLE_NAME} {SURNAME}"]
# Spanish and Portuguese names usually carry two surnames; they form one SURNAME span (see
# Builder.add), as two given names form one GIVEN_NAME span.
DOUBLE_SURNAME_FORMATS = ["{GIVEN_NAME} {SURNAME} {SECOND_SURNAME}"] * 3


def name_formats(loc):
    return NAME_FORMATS + (DOUBLE_SURNAME_FORMATS if loc in ("es_ES", "pt_PT") else [])

def split_items(items, split):
    return [t for i, t in enumerate(items) if (i % 4 == 3) == (split == "test")]


# ----------------------------------------------------------------------------- rendering

PH = re.compile(r"\{([A-Z_]+)\}")
DISTRACTORS = {"NEG", "DATE", "AMOUNT", "ORDER", "TIME", "PCT", "CODE", "NUM", "ORG", "COUNTRY", "ROOM", "PRODUCT",
               "VERSION", "QTY", "TICKET", "BADCARD", "BADIP", "BADIBAN", "WEEKDAY", "NOUN", "JOB", "TEAM"}


def _luhn_breaks(r, digits):
    """digits with the last one changed so that the Luhn check fails."""
    body, last = digits[:-1], digits[-1]
    good = _luhn_complete(r, body, len(digits) + 1)[-1]  # the check digit body would need
    wrong = r.choice([d for d in string.digits if d != good])
    return body + (wrong if last == good else last)


def bad_card(r):
    """A number shaped like a card (16 digits, maybe in groups of four) that fails the Luhn check:
    tracking, order and serial numbers look like this."""
    digits = _luhn_breaks(r, _digits(r, 16))
    style = r.random()
    if style < 0.5:
        return " ".join(digits[i:i + 4] for i in range(0, 16, 4))
    if style < 0.65:
        return "-".join(digits[i:i + 4] for i in range(0, 16, 4))
    return digits


def bad_ip(r):
    """A dotted version or build number that is no IPv4 address: an octet above 255, or five parts."""
    parts = [str(r.randint(0, 30)), str(r.randint(0, 20)), str(r.randint(256, 9999)), str(r.randint(0, 99))]
    r.shuffle(parts)
    if r.random() < 0.3:
        parts.append(str(r.randint(1, 9)))
    return ".".join(parts)


def payment_reference(r):
    """An ISO 11649 creditor reference (RF + 2 digits + up to 21 characters), printed in groups: a
    payment reference, not an account."""
    body = "RF" + _digits(r, 2) + "".join(r.choice(string.digits + string.ascii_uppercase) for _ in range(r.randint(8, 16)))
    return " ".join(body[i:i + 4] for i in range(0, len(body), 4)) if r.random() < 0.6 else body


def hard_negative(f, r, name, lang):
    """The hard negatives: text a model can take for personal data that is not."""
    if name == "ORG":
        return f.company()
    if name == "COUNTRY":
        return f.country()
    if name == "JOB":
        return f.job()
    if name == "ROOM":
        return r.choice(ROOMS.get(lang, ROOMS["en"])).format(n=r.randint(1, 40), m=r.randint(1, 20), L=r.choice("ABCDEFG"))
    if name == "WEEKDAY":
        return r.choice(WEEKDAYS.get(lang, WEEKDAYS["en"]))
    if name == "TEAM":
        return r.choice(TEAMS)
    if name == "NOUN":
        return r.choice(NOUNS)
    if name == "PRODUCT":
        return r.choice(PRODUCTS)
    if name == "VERSION":
        a, b, c = r.randint(0, 20), r.randint(0, 30), r.randint(0, 99)
        return r.choice([f"{a}.{b}.{c}", f"v{a}.{b}", f"{a}.{b}.{c}-rc{r.randint(1, 5)}", f"{r.randint(2019, 2026)}.{r.randint(1, 12)}"])
    if name == "QTY":
        n = r.choice([str(r.randint(1, 500)), f"{r.randint(1, 20)}.{r.randint(1, 9)}", f"{r.randint(1, 20)},{r.randint(1, 9)}"])
        return f"{n} {r.choice(['kg', 'g', 'ml', 'l', 'm', 'km', 'm²', 'pcs', 'boxes', 'pallets', 'MB', 'GB'])}"
    if name == "TICKET":
        return r.choice([f"INC{_digits(r, 7)}", f"INV-{r.randint(2019, 2026)}-{_digits(r, 4)}", f"TCK-{_digits(r, 5)}",
                         f"#{_digits(r, 5)}", f"SR-{_digits(r, 6)}", f"PO{_digits(r, 8)}", f"{_letters(r, 3)}-{_digits(r, 4)}"])
    if name == "BADCARD":
        return bad_card(r)
    if name == "BADIP":
        return bad_ip(r)
    if name == "BADIBAN":
        return payment_reference(r)
    raise KeyError(name)


def distractor(f, r, name, lang="en"):
    if name == "NEG":
        return negnum(r, lang)
    if name == "DATE":
        d = f.date_between("-30y", "+2y")
        return r.choice([d.strftime("%d/%m/%Y"), d.strftime("%Y-%m-%d"), d.strftime("%d.%m.%Y"), d.strftime("%B %d, %Y"), d.strftime("%d %b %Y")])
    if name == "AMOUNT":
        v = r.uniform(1, 20000)
        return r.choice([f"€{v:,.2f}", f"{v:.2f} EUR", f"${v:,.2f}", f"£{v:.2f}", f"{v:.0f} kr", f"{v:,.2f} zł"])
    if name == "ORDER":
        return r.choice([f"#{_digits(r, 6)}", f"ORD-{_digits(r, 5)}", f"{_letters(r, 2)}-{_digits(r, 4)}-{_digits(r, 2)}", _digits(r, 8)])
    if name == "TIME":
        return r.choice([f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}", f"{r.randint(1, 12)}:{r.randint(0, 59):02d} {r.choice(['am', 'pm', 'AM', 'PM'])}", f"{r.randint(7, 20)}h{r.randint(0, 5)}0"])
    if name == "PCT":
        return f"{r.uniform(0, 60):.1f}%"
    if name == "CODE":
        return r.choice([f"{_letters(r, 3)}-{_digits(r, 4)}", f"v{r.randint(1, 9)}.{r.randint(0, 20)}.{r.randint(0, 9)}", f"{_letters(r, 2)}{_digits(r, 5)}{_letters(r, 1)}", f"{_digits(r, 4)}-{_letters(r, 2)}"])
    if name == "NUM":
        return str(r.randint(2, 99))
    return hard_negative(f, r, name, lang)


def _case(r, v):
    c = r.random()
    if c < 0.06:
        return v.upper()
    if c < 0.12:
        return v.lower()
    return v


# A person's given names form one span, and so do their surnames.
MERGED_NAMES = ("GIVEN_NAME", "SURNAME")


class Builder:
    def __init__(self):
        self.text = ""
        self.spans = []

    def add(self, s, label=None):
        if label is not None and s.strip():
            lead = len(s) - len(s.lstrip())
            start = len(self.text) + lead
            last = self.spans[-1] if self.spans else None
            if (label in MERGED_NAMES and last is not None and last[2] == label
                    and self.text[last[1]:start] in (" ", "-")):
                last[1] = start + len(s.strip())  # "Anna Maria", "García López": one span
            else:
                self.spans.append([start, start + len(s.strip()), label])
        self.text += s


def render(b: Builder, template, smp: Sampler, r, loc):
    """Appends a template to the builder, drawing a value for every placeholder."""
    pos = 0
    for m in PH.finditer(template):
        b.add(template[pos:m.start()])
        pos = m.end()
        name = m.group(1)
        if name == "NAME":
            smp.new_person()
            render(b, r.choice(name_formats(loc)), smp, r, loc)
        elif name == "ADDRESS":
            fmts = address_formats(loc)
            if smp.value_or_none("STATE") is None:
                fmts = [x for x in fmts if "{STATE}" not in x] or ["{BUILDING_NUMBER} {STREET_NAME}, {CITY}"]
            render(b, r.choice(fmts), smp, r, loc)
        elif name in ("NAME_GEN", "NAME_DAT", "NAME_INS", "SURNAME_GEN", "SURNAME_VOC"):
            # a Polish name in a case (pl_inflect); other locales get the plain name
            case = name.split("_")[1].lower()
            if not loc.startswith("pl"):
                smp.new_person()
                render(b, "{SURNAME}" if name.startswith("SURNAME") else r.choice(name_formats(loc)[:8]), smp, r, loc)
            else:
                f = smp.f
                male = r.random() < 0.5
                g = f.first_name_male() if male else f.first_name_female()
                sn = f.last_name_male() if male else f.last_name_female()
                smp.person = (g, sn)
                if name.startswith("SURNAME"):
                    b.add(_case(r, pl_inflect(sn, case, male, True)), "SURNAME")
                else:
                    b.add(_case(r, pl_inflect(g, case, male, False)), "GIVEN_NAME")
                    b.add(" ")
                    b.add(_case(r, pl_inflect(sn, case, male, True)), "SURNAME")
        elif name in ("MIDDLE_NAME", "SECOND_SURNAME"):  # another name of the same person
            value = smp.f.first_name() if name == "MIDDLE_NAME" else smp.f.last_name()
            b.add(_case(r, value), "GIVEN_NAME" if name == "MIDDLE_NAME" else "SURNAME")
        elif name in ("G",):
            smp.new_person()
            b.add(_case(r, smp.value("GIVEN_NAME")), "GIVEN_NAME")
        elif name in DISTRACTORS:
            b.add(distractor(smp.f, r, name, smp.text_lang))
        else:
            v = smp.value(name)
            if v is None:  # e.g. STATE in a locale without one: fall back to a city
                name, v = "CITY", smp.value("CITY")
            b.add(_case(r, v), name)
    b.add(template[pos:])


def _value_or_none(self, cat):
    try:
        return self.value(cat)
    except Exception:
        return None


Sampler.value_or_none = _value_or_none


# Share of texts drawn from the no-PII templates (full of hard negatives); more sentences without
# personal data appear inside longer texts.
NOPII_SHARE = 0.22
# Share of texts about identity numbers in context (Generator._idtext), and their categories.
ID_SHARE = 0.15
ID_CATS = ["SSN", "TAX_ID", "GOVERNMENT_ID", "PASSPORT", "DRIVERS_LICENSE", "PHONE"]
ID_CAT_WEIGHTS = [3, 3, 3, 2, 2, 2]


class Generator:
    def __init__(self, split, seed):
        assert split in ("train", "test")
        self.split, self.seed = split, seed
        self.r = random.Random(f"{split}-{seed}")
        self.fakers = {}
        for i, loc in enumerate(sorted(LOCALES)):
            f = Faker(loc)
            f.seed_instance(seed * 1000 + i + (0 if split == "train" else 500))
            self.fakers[loc] = f
        self.templates = {lang: split_items(ts, split) for lang, ts in T.items()}
        self.nopii = {lang: split_items(ts, split) for lang, ts in NOPII.items()}
        self.layouts = split_items(FORM_LAYOUTS, split)
        self.skeletons = {lang: split_items(ts, split) for lang, ts in EMAIL_SKELETONS.items()}
        self.idframes = {lang: split_items(ts, split) for lang, ts in ID_FRAMES.items()}
        self.locs = sorted(LOCALES)
        self.weights = [LOCALES[x] for x in self.locs]

    def example(self):
        r = self.r
        loc = r.choices(self.locs, self.weights)[0]
        f = self.fakers[loc]
        native = loc.split("_")[0]
        lang = native if (native == "en" or r.random() < 0.65) else "en"
        smp = Sampler(f, r, loc)
        smp.text_lang = lang
        b = Builder()
        kind = r.random()
        if kind < NOPII_SHARE:
            kind = "nopii"
            for i in range(r.choice([1, 1, 1, 2])):
                if i:
                    b.add(" ")
                render(b, r.choice(self.nopii[lang]), smp, r, loc)
        elif kind < NOPII_SHARE + 0.13:
            kind = "form"
            self._form(b, smp, r, loc, lang)
        elif kind < NOPII_SHARE + 0.20 and lang in self.skeletons:
            kind = "email"
            self._email(b, smp, r, loc, lang)
        elif kind < NOPII_SHARE + 0.20 + ID_SHARE:
            kind = "idtext"
            self._idtext(b, smp, r, loc, lang)
        else:
            kind = "sentence"
            n = r.choices([1, 2, 3], [0.6, 0.3, 0.1])[0]
            for i in range(n):
                if i:
                    b.add(r.choice([" ", " ", "\n", "  "]))
                if r.random() < 0.12:
                    render(b, r.choice(self.nopii[lang]), smp, r, loc)
                else:
                    smp.person = None
                    render(b, self._pick_template(lang), smp, r, loc)
        text, spans = self._finish(b, r)
        return {"text": text, "spans": spans, "locale": loc, "lang": lang, "kind": kind}

    def _pick_template(self, lang):
        """70 % of the time a uniformly drawn category first, then a template that has it."""
        r = self.r
        ts = self.templates[lang]
        if r.random() < 0.7:
            cat = r.choice(CATEGORIES)
            alias = {"GIVEN_NAME": "NAME", "SURNAME": "NAME", "BUILDING_NUMBER": "ADDRESS",
                     "STREET_NAME": "ADDRESS", "CITY": "ADDRESS", "ZIP_CODE": "ADDRESS"}.get(cat, cat)
            have = [t for t in ts if "{" + cat + "}" in t or "{" + alias + "}" in t]
            if have:
                return r.choice(have)
        return r.choice(ts)

    def _idtext(self, b, smp, r, loc, lang):
        """1-3 identity numbers (or phones) of the locale, each in a frame with the words used for
        it (templates.ID_WORDS), often next to unlabelled numbers ({NEG}) and names."""
        native = loc.split("_")[0]
        n = r.choices([1, 2, 3], [0.5, 0.35, 0.15])[0]
        for i in range(n):
            if i:
                b.add(r.choice([" ", "\n", "; ", ", ", " | "]))
            cat = r.choices(ID_CATS, ID_CAT_WEIGHTS)[0]
            words = ID_WORDS[cat]
            kw_lang = lang
            if native != lang and r.random() < 0.3:
                kw_lang = native
            kw = r.choice(words.get(kw_lang, words["en"]))
            frame = r.choice(self.idframes[lang])
            if frame.startswith("{kw}") and r.random() < 0.7:
                kw = kw[0].upper() + kw[1:]
            smp.person = None
            render(b, frame.replace("{kw}", kw).replace("{v}", "{" + cat + "}"), smp, r, loc)

    def _form(self, b, smp, r, loc, lang):
        layout, joiner = r.choice(self.layouts)
        group = list(r.choice(FORM_GROUPS))
        if r.random() < 0.3:
            r.shuffle(group)
        if r.random() < 0.4:
            group = group[: r.randint(2, len(group))]
        labels = FIELD_LABELS[lang]
        smp.new_person()
        if r.random() < 0.3:
            b.add(r.choice(["Customer record", "Application form", "Profile", "Registration", "KYC"]) + joiner)
        for i, cat in enumerate(group):
            if i:
                b.add(joiner)
            if cat == "STATE" and smp.value_or_none("STATE") is None:
                continue
            k = r.choice(labels[cat])
            pre, post = layout.split("{v}")
            b.add(pre.replace("{k}", k).replace("{K}", k.upper()))
            b.add(_case(r, smp.value(cat)), cat)
            b.add(post)

    def _email(self, b, smp, r, loc, lang):
        head, body, sign = r.choice(self.skeletons[lang])
        if r.random() < 0.5:
            b.add("From: ")
            smp.new_person()
            b.add(smp.value("EMAIL"), "EMAIL")
            b.add("\nSubject: " + r.choice(["Re: your request", "Update", "Invoice", "Account", "Fwd: details"]) + "\n\n")
        render(b, head, smp, r, loc)
        b.add("\n\n")
        for part in re.split(r"(\{S\})", body):
            if part == "{S}":
                smp.person = None
                render(b, r.choice(self.templates[lang]), smp, r, loc)
            else:
                render(b, part, smp, r, loc)
        b.add("\n\n")
        smp.new_person()
        render(b, sign, smp, r, loc)

    def _finish(self, b, r):
        text, spans = b.text, b.spans
        c = r.random()
        if c < 0.05:
            text = text.upper()
        elif c < 0.10:
            text = text.lower()
        if r.random() < 0.1 and text.endswith("."):
            text = text[:-1]
        # str.upper can change lengths (e.g. 'ß' -> 'SS'); undo the change if it did.
        if len(text) != len(b.text):
            text = b.text
        spans = sorted(spans)
        for i in range(1, len(spans)):
            assert spans[i][0] >= spans[i - 1][1], (text, spans)
        return text, spans


def ensure_hash_seed():
    """Re-executes the running script with PYTHONHASHSEED=0 unless it is already set so.

    Some Faker providers draw from hash-ordered collections, so the same seed gives different
    text under different string-hash seeds; a fixed hash seed makes the output reproducible.
    """
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable] + sys.argv)


def generate(split, seed, n):
    g = Generator(split, seed)
    return [g.example() for _ in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", choices=["train", "test"], required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    ensure_hash_seed()
    rows = generate(args.split, args.seed, args.n)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    nopii = sum(1 for x in rows if not x["spans"])
    counts = {}
    for x in rows:
        for s in x["spans"]:
            counts[s[2]] = counts.get(s[2], 0) + 1
    print(f"{args.out}: {len(rows)} examples, {nopii} without PII ({100 * nopii / len(rows):.1f}%), "
          f"{sum(counts.values())} spans", file=sys.stderr)
    print(json.dumps(dict(sorted(counts.items())), indent=None), file=sys.stderr)


if __name__ == "__main__":
    main()
