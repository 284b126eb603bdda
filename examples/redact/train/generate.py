"""Synthetic PII token-classification data for the redact example, built on Faker.

Every example is a text plus character spans `[start, end, label]` over the 20 categories of
examples/redact/labels.json. Texts come from hand-written templates in 11 languages (the
locale's own language, plus English for every locale), forms and lists, e-mail-like messages,
and ~18 % texts without any PII (with distractors: dates, amounts, order and product
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
    if loc == "de_DE" or loc == "de_AT":  # Sozialversicherungsnummer
        return f"{_digits(r, 2)} {r.randint(1, 28):02d}{r.randint(1, 12):02d}{_digits(r, 2)} {_letters(r, 1)} {_digits(r, 3)}" \
            if r.random() < 0.5 else f"{_digits(r, 2)}{r.randint(1, 28):02d}{r.randint(1, 12):02d}{_digits(r, 2)}{_letters(r, 1)}{_digits(r, 3)}"
    if loc == "es_ES":  # NUSS
        return f"{_digits(r, 2)}/{_digits(r, 8)}/{_digits(r, 2)}" if r.random() < 0.6 else _digits(r, 12)
    if loc == "it_IT":
        return _digits(r, 11) if r.random() < 0.3 else f.ssn()
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
    if loc == "de_DE":
        return _digits(r, 11) if c < 0.4 else (f"{_digits(r, 2)}/{_digits(r, 3)}/{_digits(r, 5)}" if c < 0.7 else f.vat_id())
    if loc == "pl_PL":
        return f"{_digits(r, 3)}-{_digits(r, 3)}-{_digits(r, 2)}-{_digits(r, 2)}" if c < 0.5 else f.vat_id()
    if loc == "pt_PT":
        return r.choice("123") + _digits(r, 8) if c < 0.6 else f.vat_id()
    if loc == "fr_FR":
        return f"{r.choice('0123')}{_digits(r, 1)} {_digits(r, 2)} {_digits(r, 3)} {_digits(r, 3)} {_digits(r, 3)}" if c < 0.5 else f.vat_id()
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
    if loc == "pl_PL":
        return f.identity_card_number() if c < 0.6 else f.pesel()
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
    if loc == "sv_SE":
        return f.ssn() if c < 0.3 else _digits(r, 8)
    if loc == "fi_FI":
        return f.ssn() if c < 0.3 else _digits(r, 9)
    if loc == "en_US":
        return f"{_letters(r, 1)}{_digits(r, 8)}" if c < 0.5 else f"{_digits(r, 3)}-{_digits(r, 3)}-{_digits(r, 3)}"
    return _letters(r, r.randint(1, 2)) + _digits(r, r.randint(6, 8))


def passport(f, r, loc):
    c = r.random()
    if c < 0.6:
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
        return f"{_digits(r, 5)}/{_digits(r, 2)}/{_digits(r, 4)}"
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
    return v


def street_name(f, r, loc):
    v = f.street_name()
    if loc.startswith("fr") and r.random() < 0.5:
        v = v[0].upper() + v[1:]
    return v


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
                                                  "{GIVEN_NAME} {GIVEN_NAME} {SURNAME}"]

# ----------------------------------------------------------------------------- templates
# {NAME} and {ADDRESS} expand to NAME_FORMATS / ADDRESS_FORMATS; other {CAT} are single entities;
# {DATE} {AMOUNT} {ORDER} {TIME} {PCT} {CODE} are unlabelled distractors.

T = {
    "en": [
        "My name is {NAME} and I live at {ADDRESS}.",
        "Please send the invoice to {NAME}, {ADDRESS}.",
        "You can reach me at {PHONE} or {EMAIL}.",
        "Hi, this is {GIVEN_NAME}. My card number is {CREDIT_CARD}, expiry {DATE}.",
        "The login from {IP_ADDRESS} at {TIME} was flagged for user {EMAIL}.",
        "Customer {NAME} (SSN {SSN}) called about order {ORDER}.",
        "Wire {AMOUNT} to account {BANK_ACCOUNT}, routing number {ROUTING_NUMBER}.",
        "Passport no. {PASSPORT} issued to {NAME} on {DATE}.",
        "Driver's license {DRIVERS_LICENSE} belongs to {GIVEN_NAME} {SURNAME} of {CITY}, {STATE}.",
        "Our new office is at {BUILDING_NUMBER} {STREET_NAME}, {SECONDARY_ADDRESS}, {CITY}.",
        "Tax ID: {TAX_ID}. Name: {NAME}. Phone: {PHONE}.",
        "Visit {URL} for details or email {EMAIL}.",
        "Dear {GIVEN_NAME}, your parcel to {ADDRESS} will arrive on {DATE}.",
        "Please update my address to {ADDRESS} and my phone to {PHONE}.",
        "{NAME} was born on {DATE} and holds ID card {GOVERNMENT_ID}.",
        "I moved from {CITY} to {CITY} last year; new zip code is {ZIP_CODE}.",
        "Contact {NAME} at {PHONE}; backup contact {NAME}, {EMAIL}.",
        "The server {IP_ADDRESS} redirected to {URL} after {TIME}.",
        "Refund {AMOUNT} to card ending {CREDIT_CARD} for {NAME}.",
        "social security number {SSN}, date of birth {DATE}",
        "Ship to: {NAME}, {BUILDING_NUMBER} {STREET_NAME}, {CITY} {ZIP_CODE}",
        "{GIVEN_NAME} said she'd call back from {PHONE} before {TIME}.",
        "Our records show national ID {GOVERNMENT_ID} and passport {PASSPORT} for {NAME}.",
        "Please confirm your IBAN {BANK_ACCOUNT} and BIC {ROUTING_NUMBER}.",
        "Mr. {SURNAME} lives in {CITY}, {STATE}, near {STREET_NAME}.",
        "Can you check why {EMAIL} can't log in from {IP_ADDRESS}?",
        "License number {DRIVERS_LICENSE}, state {STATE}, expires {DATE}.",
        "I'm {GIVEN_NAME} {SURNAME}, my tax number is {TAX_ID} and my SSN is {SSN}.",
        "Ms {SURNAME} asked us to send the documents to {EMAIL} instead of {ADDRESS}.",
        "{NAME} paid {AMOUNT} with card {CREDIT_CARD} on {DATE}.",
        "The account holder {NAME} uses bank account {BANK_ACCOUNT}.",
        "Meet me at {BUILDING_NUMBER} {STREET_NAME} at {TIME}, it's {SECONDARY_ADDRESS}.",
        "According to {URL}, the office in {CITY} closes at {TIME}.",
        "New hire: {NAME}, SSN {SSN}, phone {PHONE}, starting {DATE}.",
        "please call {GIVEN_NAME} on {PHONE} about the lease at {ADDRESS}",
        "Sender IP {IP_ADDRESS}, reply-to {EMAIL}, subject: order {ORDER}.",
        "{GIVEN_NAME} and {GIVEN_NAME} {SURNAME} moved into {SECONDARY_ADDRESS}, {BUILDING_NUMBER} {STREET_NAME}.",
        "Your passport number {PASSPORT} and driving licence {DRIVERS_LICENSE} were verified.",
        "Routing {ROUTING_NUMBER} / account {BANK_ACCOUNT} / amount {AMOUNT}",
        "Thanks {NAME}! We'll mail the card to {ZIP_CODE}, {CITY}.",
        "The patient, {NAME}, age {NUM}, lives in {CITY} and can be reached at {PHONE}.",
        "Employee {SURNAME} ({EMAIL}) changed the VPN gateway to {IP_ADDRESS}.",
        "Hello, I'm writing on behalf of {NAME} whose ID is {GOVERNMENT_ID}.",
        "Our website {URL} lists {ADDRESS} as the head office.",
    ],
    "fr": [
        "Je m'appelle {NAME} et j'habite au {ADDRESS}.",
        "Vous pouvez me joindre au {PHONE} ou par e-mail à {EMAIL}.",
        "Merci d'envoyer la facture à {NAME}, {ADDRESS}.",
        "Mon numéro de sécurité sociale est le {SSN}.",
        "Le paiement de {AMOUNT} a été fait avec la carte {CREDIT_CARD} le {DATE}.",
        "Veuillez virer la somme sur le compte {BANK_ACCOUNT} (BIC {ROUTING_NUMBER}).",
        "Passeport n° {PASSPORT} délivré à {NAME} le {DATE}.",
        "Numéro fiscal : {TAX_ID}, carte d'identité : {GOVERNMENT_ID}.",
        "{GIVEN_NAME} {SURNAME} habite à {CITY} depuis {DATE}.",
        "Connexion suspecte depuis l'adresse IP {IP_ADDRESS} sur le compte {EMAIL}.",
        "Mon permis de conduire porte le numéro {DRIVERS_LICENSE}.",
        "Bonjour {GIVEN_NAME}, votre colis pour le {BUILDING_NUMBER} {STREET_NAME}, {ZIP_CODE} {CITY} arrive à {TIME}.",
        "Mme {SURNAME} a changé de numéro : {PHONE}.",
        "Consultez {URL} ou écrivez à {EMAIL}.",
        "Le client {NAME} ({EMAIL}) réside {SECONDARY_ADDRESS}, {ADDRESS}.",
        "M. {SURNAME} travaille à {CITY}, en {STATE}.",
        "appelez {GIVEN_NAME} au {PHONE} avant {TIME} svp",
    ],
    "de": [
        "Mein Name ist {NAME} und ich wohne in der {ADDRESS}.",
        "Sie erreichen mich unter {PHONE} oder per E-Mail an {EMAIL}.",
        "Bitte senden Sie die Rechnung an {NAME}, {ADDRESS}.",
        "Meine Sozialversicherungsnummer lautet {SSN}.",
        "Die Zahlung über {AMOUNT} erfolgte mit der Kreditkarte {CREDIT_CARD}.",
        "Bitte überweisen Sie den Betrag auf das Konto {BANK_ACCOUNT}, BLZ {ROUTING_NUMBER}.",
        "Reisepass Nr. {PASSPORT}, ausgestellt am {DATE} für {NAME}.",
        "Steuer-ID: {TAX_ID}, Personalausweis: {GOVERNMENT_ID}.",
        "Herr {SURNAME} wohnt seit {DATE} in {CITY}.",
        "Anmeldung von der IP-Adresse {IP_ADDRESS} für das Konto {EMAIL} blockiert.",
        "Führerscheinnummer: {DRIVERS_LICENSE}",
        "Hallo {GIVEN_NAME}, dein Paket an {STREET_NAME} {BUILDING_NUMBER}, {ZIP_CODE} {CITY} kommt um {TIME}.",
        "Frau {SURNAME} hat eine neue Telefonnummer: {PHONE}.",
        "Weitere Infos unter {URL} oder bei {EMAIL}.",
        "Der Kunde {NAME} wohnt {SECONDARY_ADDRESS} in der {ADDRESS}.",
        "{GIVEN_NAME} {SURNAME} aus {CITY} ({STATE}) hat angerufen.",
        "ruf bitte {GIVEN_NAME} unter {PHONE} zurück, es geht um Auftrag {ORDER}",
    ],
    "es": [
        "Me llamo {NAME} y vivo en {ADDRESS}.",
        "Puede contactarme en el {PHONE} o en {EMAIL}.",
        "Envíe la factura a {NAME}, {ADDRESS}.",
        "Mi número de la Seguridad Social es {SSN}.",
        "El pago de {AMOUNT} se realizó con la tarjeta {CREDIT_CARD}.",
        "Transfiera el importe a la cuenta {BANK_ACCOUNT}, código {ROUTING_NUMBER}.",
        "Pasaporte n.º {PASSPORT} expedido a {NAME} el {DATE}.",
        "NIF: {TAX_ID}; DNI: {GOVERNMENT_ID}.",
        "{GIVEN_NAME} {SURNAME} vive en {CITY}, {STATE}.",
        "Acceso sospechoso desde la IP {IP_ADDRESS} a la cuenta {EMAIL}.",
        "Mi permiso de conducir es {DRIVERS_LICENSE}.",
        "Hola {GIVEN_NAME}, tu pedido {ORDER} llegará a {STREET_NAME} {BUILDING_NUMBER}, {SECONDARY_ADDRESS}, {ZIP_CODE} {CITY}.",
        "La Sra. {SURNAME} tiene un nuevo teléfono: {PHONE}.",
        "Más información en {URL} o escribiendo a {EMAIL}.",
        "El cliente {NAME} ({EMAIL}) se mudó a {CITY}.",
        "D. {NAME} reside en {ADDRESS} desde {DATE}.",
        "llama a {GIVEN_NAME} al {PHONE} antes de las {TIME}",
    ],
    "it": [
        "Mi chiamo {NAME} e abito in {ADDRESS}.",
        "Potete contattarmi al {PHONE} oppure a {EMAIL}.",
        "Inviare la fattura a {NAME}, {ADDRESS}.",
        "Il mio codice fiscale è {TAX_ID}.",
        "Il pagamento di {AMOUNT} è stato fatto con la carta {CREDIT_CARD}.",
        "Bonifico sul conto {BANK_ACCOUNT}, BIC {ROUTING_NUMBER}.",
        "Passaporto n. {PASSPORT} rilasciato a {NAME} il {DATE}.",
        "Carta d'identità {GOVERNMENT_ID}, patente {DRIVERS_LICENSE}.",
        "{GIVEN_NAME} {SURNAME} vive a {CITY} ({STATE}).",
        "Accesso sospetto dall'indirizzo IP {IP_ADDRESS} per l'account {EMAIL}.",
        "Numero di previdenza sociale: {SSN}.",
        "Ciao {GIVEN_NAME}, il pacco per {STREET_NAME} {BUILDING_NUMBER}, {ZIP_CODE} {CITY} arriva alle {TIME}.",
        "La sig.ra {SURNAME} ha un nuovo numero: {PHONE}.",
        "Maggiori informazioni su {URL} o scrivendo a {EMAIL}.",
        "Il cliente {NAME} abita {SECONDARY_ADDRESS}, {ADDRESS}.",
        "chiama {GIVEN_NAME} al {PHONE} entro le {TIME}",
    ],
    "nl": [
        "Mijn naam is {NAME} en ik woon op {ADDRESS}.",
        "U kunt mij bereiken op {PHONE} of via {EMAIL}.",
        "Stuur de factuur naar {NAME}, {ADDRESS}.",
        "Mijn burgerservicenummer is {SSN}.",
        "De betaling van {AMOUNT} is gedaan met creditcard {CREDIT_CARD}.",
        "Maak het bedrag over naar rekening {BANK_ACCOUNT}, BIC {ROUTING_NUMBER}.",
        "Paspoortnummer {PASSPORT}, afgegeven aan {NAME} op {DATE}.",
        "Btw-nummer: {TAX_ID}, identiteitskaart: {GOVERNMENT_ID}.",
        "{GIVEN_NAME} {SURNAME} woont sinds {DATE} in {CITY}.",
        "Verdachte login vanaf IP-adres {IP_ADDRESS} op account {EMAIL}.",
        "Rijbewijsnummer: {DRIVERS_LICENSE}.",
        "Hoi {GIVEN_NAME}, je pakket voor {STREET_NAME} {BUILDING_NUMBER}, {ZIP_CODE} {CITY} komt om {TIME}.",
        "Mevrouw {SURNAME} heeft een nieuw nummer: {PHONE}.",
        "Kijk op {URL} of mail naar {EMAIL}.",
        "bel {GIVEN_NAME} even terug op {PHONE}, het gaat over {ORDER}",
        "De heer {SURNAME} uit {CITY} ({STATE}) heeft gebeld.",
    ],
    "pt": [
        "O meu nome é {NAME} e moro na {ADDRESS}.",
        "Pode contactar-me pelo {PHONE} ou por e-mail para {EMAIL}.",
        "Envie a fatura para {NAME}, {ADDRESS}.",
        "O meu número de segurança social é {SSN}.",
        "O pagamento de {AMOUNT} foi feito com o cartão {CREDIT_CARD}.",
        "Transfira o valor para a conta {BANK_ACCOUNT}, BIC {ROUTING_NUMBER}.",
        "Passaporte n.º {PASSPORT} emitido em nome de {NAME} a {DATE}.",
        "NIF: {TAX_ID}; cartão de cidadão: {GOVERNMENT_ID}.",
        "{GIVEN_NAME} {SURNAME} vive em {CITY} desde {DATE}.",
        "Acesso suspeito a partir do IP {IP_ADDRESS} na conta {EMAIL}.",
        "Carta de condução n.º {DRIVERS_LICENSE}.",
        "Olá {GIVEN_NAME}, a encomenda para {STREET_NAME} {BUILDING_NUMBER}, {ZIP_CODE} {CITY} chega às {TIME}.",
        "A Sra. {SURNAME} tem um novo telefone: {PHONE}.",
        "Mais informações em {URL} ou através de {EMAIL}.",
        "ligue ao {GIVEN_NAME} para o {PHONE} antes das {TIME}",
        "O cliente {NAME} mudou-se para {SECONDARY_ADDRESS}, {ADDRESS}.",
    ],
    "pl": [
        "Nazywam się {NAME} i mieszkam przy {ADDRESS}.",
        "Można się ze mną skontaktować pod numerem {PHONE} lub mailowo: {EMAIL}.",
        "Proszę wysłać fakturę do: {NAME}, {ADDRESS}.",
        "Mój PESEL to {SSN}.",
        "Płatność {AMOUNT} została wykonana kartą {CREDIT_CARD}.",
        "Proszę przelać kwotę na konto {BANK_ACCOUNT}, BIC {ROUTING_NUMBER}.",
        "Paszport nr {PASSPORT} wydany dla {NAME} w dniu {DATE}.",
        "NIP: {TAX_ID}, dowód osobisty: {GOVERNMENT_ID}.",
        "{GIVEN_NAME} {SURNAME} mieszka w {CITY} od {DATE}.",
        "Podejrzane logowanie z adresu IP {IP_ADDRESS} na konto {EMAIL}.",
        "Numer prawa jazdy: {DRIVERS_LICENSE}.",
        "Cześć {GIVEN_NAME}, paczka na ul. {STREET_NAME} {BUILDING_NUMBER}, {ZIP_CODE} {CITY} dotrze o {TIME}.",
        "Pani {SURNAME} ma nowy numer telefonu: {PHONE}.",
        "Więcej informacji na {URL} lub pod adresem {EMAIL}.",
        "zadzwoń do {GIVEN_NAME} na {PHONE} przed {TIME}",
        "Pan {SURNAME} z {CITY} (woj. {STATE}) dzwonił w sprawie zamówienia {ORDER}.",
    ],
    "sv": [
        "Jag heter {NAME} och bor på {ADDRESS}.",
        "Du når mig på {PHONE} eller {EMAIL}.",
        "Skicka fakturan till {NAME}, {ADDRESS}.",
        "Mitt personnummer är {SSN}.",
        "Betalningen på {AMOUNT} gjordes med kortet {CREDIT_CARD}.",
        "För över beloppet till konto {BANK_ACCOUNT}, clearingnummer {ROUTING_NUMBER}.",
        "Pass nr {PASSPORT} utfärdat till {NAME} den {DATE}.",
        "Organisationsnummer: {TAX_ID}, ID-kort: {GOVERNMENT_ID}.",
        "{GIVEN_NAME} {SURNAME} har bott i {CITY} sedan {DATE}.",
        "Misstänkt inloggning från IP-adressen {IP_ADDRESS} på kontot {EMAIL}.",
        "Körkortsnummer: {DRIVERS_LICENSE}.",
        "Hej {GIVEN_NAME}, ditt paket till {STREET_NAME} {BUILDING_NUMBER}, {ZIP_CODE} {CITY} kommer kl. {TIME}.",
        "{SURNAME} har nytt telefonnummer: {PHONE}.",
        "Läs mer på {URL} eller mejla {EMAIL}.",
        "ring {GIVEN_NAME} på {PHONE} innan {TIME}",
        "Kunden {NAME} i {CITY}, {STATE} ringde om order {ORDER}.",
    ],
    "da": [
        "Jeg hedder {NAME} og bor på {ADDRESS}.",
        "Du kan kontakte mig på {PHONE} eller {EMAIL}.",
        "Send fakturaen til {NAME}, {ADDRESS}.",
        "Mit CPR-nummer er {SSN}.",
        "Betalingen på {AMOUNT} blev foretaget med kortet {CREDIT_CARD}.",
        "Overfør beløbet til konto {BANK_ACCOUNT}, reg.nr. {ROUTING_NUMBER}.",
        "Pas nr. {PASSPORT} udstedt til {NAME} den {DATE}.",
        "CVR/SE-nummer: {TAX_ID}, ID-kort: {GOVERNMENT_ID}.",
        "{GIVEN_NAME} {SURNAME} har boet i {CITY} siden {DATE}.",
        "Mistænkeligt login fra IP-adressen {IP_ADDRESS} på kontoen {EMAIL}.",
        "Kørekortnummer: {DRIVERS_LICENSE}.",
        "Hej {GIVEN_NAME}, din pakke til {STREET_NAME} {BUILDING_NUMBER}, {SECONDARY_ADDRESS}, {ZIP_CODE} {CITY} kommer kl. {TIME}.",
        "{SURNAME} har fået nyt telefonnummer: {PHONE}.",
        "Læs mere på {URL} eller skriv til {EMAIL}.",
        "ring til {GIVEN_NAME} på {PHONE} før {TIME}",
        "Kunden {NAME} fra {CITY} i Region {STATE} ringede om ordre {ORDER}.",
    ],
    "fi": [
        "Nimeni on {NAME} ja asun osoitteessa {ADDRESS}.",
        "Minut tavoittaa numerosta {PHONE} tai sähköpostilla {EMAIL}.",
        "Lähettäkää lasku: {NAME}, {ADDRESS}.",
        "Henkilötunnukseni on {SSN}.",
        "Maksu {AMOUNT} tehtiin kortilla {CREDIT_CARD}.",
        "Siirrä summa tilille {BANK_ACCOUNT}, BIC {ROUTING_NUMBER}.",
        "Passi nro {PASSPORT} myönnetty henkilölle {NAME} {DATE}.",
        "Y-tunnus: {TAX_ID}, henkilökortti: {GOVERNMENT_ID}.",
        "{GIVEN_NAME} {SURNAME} on asunut kaupungissa {CITY} vuodesta {NUM}.",
        "Epäilyttävä kirjautuminen IP-osoitteesta {IP_ADDRESS} tilille {EMAIL}.",
        "Ajokortin numero: {DRIVERS_LICENSE}.",
        "Hei {GIVEN_NAME}, pakettisi osoitteeseen {STREET_NAME} {BUILDING_NUMBER} {SECONDARY_ADDRESS}, {ZIP_CODE} {CITY} saapuu klo {TIME}.",
        "{SURNAME} on vaihtanut puhelinnumeroa: {PHONE}.",
        "Lisätietoja osoitteessa {URL} tai sähköpostilla {EMAIL}.",
        "soita {GIVEN_NAME}lle numeroon {PHONE} ennen klo {TIME}",
        "Asiakas {NAME} ({CITY}, {STATE}) soitti tilauksesta {ORDER}.",
    ],
}

# Form field labels per language (shared by both splits; layouts are split instead).
FIELD_LABELS = {
    "en": {"GIVEN_NAME": ["First name", "Given name", "Forename"], "SURNAME": ["Last name", "Surname", "Family name"],
           "EMAIL": ["Email", "E-mail address"], "PHONE": ["Phone", "Tel", "Mobile"], "SSN": ["SSN", "Social security no."],
           "CREDIT_CARD": ["Card number", "Credit card"], "URL": ["Website", "Homepage"], "IP_ADDRESS": ["IP", "Client IP"],
           "TAX_ID": ["Tax ID", "TIN", "VAT no."], "BANK_ACCOUNT": ["Account number", "IBAN"], "ROUTING_NUMBER": ["Routing number", "Sort code", "BIC"],
           "GOVERNMENT_ID": ["National ID", "ID card no."], "PASSPORT": ["Passport", "Passport number"],
           "DRIVERS_LICENSE": ["Driver's license", "Driving licence no."], "BUILDING_NUMBER": ["House number", "No."],
           "STREET_NAME": ["Street"], "SECONDARY_ADDRESS": ["Apt/Suite", "Address line 2"], "CITY": ["City", "Town"],
           "STATE": ["State", "County", "Region"], "ZIP_CODE": ["ZIP", "Postcode", "Postal code"]},
    "fr": {"GIVEN_NAME": ["Prénom"], "SURNAME": ["Nom", "Nom de famille"], "EMAIL": ["E-mail", "Courriel"], "PHONE": ["Téléphone", "Tél."],
           "SSN": ["N° de sécurité sociale"], "CREDIT_CARD": ["Carte bancaire"], "URL": ["Site web"], "IP_ADDRESS": ["Adresse IP"],
           "TAX_ID": ["Numéro fiscal", "N° TVA"], "BANK_ACCOUNT": ["IBAN", "Compte"], "ROUTING_NUMBER": ["BIC"],
           "GOVERNMENT_ID": ["Carte d'identité"], "PASSPORT": ["Passeport"], "DRIVERS_LICENSE": ["Permis de conduire"],
           "BUILDING_NUMBER": ["Numéro"], "STREET_NAME": ["Rue", "Voie"], "SECONDARY_ADDRESS": ["Complément d'adresse"],
           "CITY": ["Ville"], "STATE": ["Région"], "ZIP_CODE": ["Code postal"]},
    "de": {"GIVEN_NAME": ["Vorname"], "SURNAME": ["Nachname", "Name"], "EMAIL": ["E-Mail"], "PHONE": ["Telefon", "Handy"],
           "SSN": ["Sozialversicherungsnummer", "SV-Nummer"], "CREDIT_CARD": ["Kreditkarte"], "URL": ["Webseite"], "IP_ADDRESS": ["IP-Adresse"],
           "TAX_ID": ["Steuernummer", "USt-IdNr."], "BANK_ACCOUNT": ["IBAN", "Kontonummer"], "ROUTING_NUMBER": ["BIC", "BLZ"],
           "GOVERNMENT_ID": ["Ausweisnummer"], "PASSPORT": ["Reisepass"], "DRIVERS_LICENSE": ["Führerschein"],
           "BUILDING_NUMBER": ["Hausnummer", "Nr."], "STREET_NAME": ["Straße"], "SECONDARY_ADDRESS": ["Adresszusatz"],
           "CITY": ["Ort", "Stadt"], "STATE": ["Bundesland"], "ZIP_CODE": ["PLZ", "Postleitzahl"]},
    "es": {"GIVEN_NAME": ["Nombre"], "SURNAME": ["Apellidos"], "EMAIL": ["Correo electrónico"], "PHONE": ["Teléfono", "Móvil"],
           "SSN": ["N.º Seguridad Social"], "CREDIT_CARD": ["Tarjeta"], "URL": ["Web"], "IP_ADDRESS": ["Dirección IP"],
           "TAX_ID": ["NIF"], "BANK_ACCOUNT": ["IBAN", "Cuenta"], "ROUTING_NUMBER": ["BIC", "SWIFT"], "GOVERNMENT_ID": ["DNI/NIE"],
           "PASSPORT": ["Pasaporte"], "DRIVERS_LICENSE": ["Permiso de conducir"], "BUILDING_NUMBER": ["Número"],
           "STREET_NAME": ["Calle", "Vía"], "SECONDARY_ADDRESS": ["Piso/Puerta"], "CITY": ["Localidad", "Ciudad"],
           "STATE": ["Provincia"], "ZIP_CODE": ["Código postal", "C.P."]},
    "it": {"GIVEN_NAME": ["Nome"], "SURNAME": ["Cognome"], "EMAIL": ["Email"], "PHONE": ["Telefono", "Cellulare"],
           "SSN": ["Numero previdenza"], "CREDIT_CARD": ["Carta di credito"], "URL": ["Sito web"], "IP_ADDRESS": ["Indirizzo IP"],
           "TAX_ID": ["Codice fiscale", "Partita IVA"], "BANK_ACCOUNT": ["IBAN"], "ROUTING_NUMBER": ["BIC"],
           "GOVERNMENT_ID": ["Carta d'identità"], "PASSPORT": ["Passaporto"], "DRIVERS_LICENSE": ["Patente"],
           "BUILDING_NUMBER": ["Civico"], "STREET_NAME": ["Via"], "SECONDARY_ADDRESS": ["Interno"], "CITY": ["Città", "Comune"],
           "STATE": ["Provincia"], "ZIP_CODE": ["CAP"]},
    "nl": {"GIVEN_NAME": ["Voornaam"], "SURNAME": ["Achternaam"], "EMAIL": ["E-mail"], "PHONE": ["Telefoon"], "SSN": ["BSN"],
           "CREDIT_CARD": ["Creditcard"], "URL": ["Website"], "IP_ADDRESS": ["IP-adres"], "TAX_ID": ["Btw-nummer"],
           "BANK_ACCOUNT": ["IBAN", "Rekeningnummer"], "ROUTING_NUMBER": ["BIC"], "GOVERNMENT_ID": ["ID-kaart"],
           "PASSPORT": ["Paspoort"], "DRIVERS_LICENSE": ["Rijbewijs"], "BUILDING_NUMBER": ["Huisnummer"], "STREET_NAME": ["Straat"],
           "SECONDARY_ADDRESS": ["Toevoeging"], "CITY": ["Plaats", "Woonplaats"], "STATE": ["Provincie"], "ZIP_CODE": ["Postcode"]},
    "pt": {"GIVEN_NAME": ["Nome próprio"], "SURNAME": ["Apelido"], "EMAIL": ["Email"], "PHONE": ["Telefone", "Telemóvel"],
           "SSN": ["NISS"], "CREDIT_CARD": ["Cartão"], "URL": ["Sítio web"], "IP_ADDRESS": ["Endereço IP"], "TAX_ID": ["NIF", "Contribuinte"],
           "BANK_ACCOUNT": ["IBAN"], "ROUTING_NUMBER": ["BIC"], "GOVERNMENT_ID": ["Cartão de cidadão"], "PASSPORT": ["Passaporte"],
           "DRIVERS_LICENSE": ["Carta de condução"], "BUILDING_NUMBER": ["Número"], "STREET_NAME": ["Rua"],
           "SECONDARY_ADDRESS": ["Andar"], "CITY": ["Localidade"], "STATE": ["Distrito"], "ZIP_CODE": ["Código postal"]},
    "pl": {"GIVEN_NAME": ["Imię"], "SURNAME": ["Nazwisko"], "EMAIL": ["E-mail"], "PHONE": ["Telefon"], "SSN": ["PESEL"],
           "CREDIT_CARD": ["Karta"], "URL": ["Strona"], "IP_ADDRESS": ["Adres IP"], "TAX_ID": ["NIP"], "BANK_ACCOUNT": ["Nr konta"],
           "ROUTING_NUMBER": ["BIC"], "GOVERNMENT_ID": ["Nr dowodu"], "PASSPORT": ["Paszport"], "DRIVERS_LICENSE": ["Prawo jazdy"],
           "BUILDING_NUMBER": ["Nr domu"], "STREET_NAME": ["Ulica"], "SECONDARY_ADDRESS": ["Nr lokalu"], "CITY": ["Miejscowość"],
           "STATE": ["Województwo"], "ZIP_CODE": ["Kod pocztowy"]},
    "sv": {"GIVEN_NAME": ["Förnamn"], "SURNAME": ["Efternamn"], "EMAIL": ["E-post"], "PHONE": ["Telefon", "Mobil"], "SSN": ["Personnummer"],
           "CREDIT_CARD": ["Kortnummer"], "URL": ["Webbplats"], "IP_ADDRESS": ["IP-adress"], "TAX_ID": ["Momsnummer"],
           "BANK_ACCOUNT": ["Kontonummer"], "ROUTING_NUMBER": ["Clearingnummer"], "GOVERNMENT_ID": ["ID-kort"], "PASSPORT": ["Pass"],
           "DRIVERS_LICENSE": ["Körkort"], "BUILDING_NUMBER": ["Gatunummer"], "STREET_NAME": ["Gata"], "SECONDARY_ADDRESS": ["Lägenhet"],
           "CITY": ["Ort"], "STATE": ["Län"], "ZIP_CODE": ["Postnummer"]},
    "da": {"GIVEN_NAME": ["Fornavn"], "SURNAME": ["Efternavn"], "EMAIL": ["E-mail"], "PHONE": ["Telefon", "Mobil"], "SSN": ["CPR-nr."],
           "CREDIT_CARD": ["Kortnummer"], "URL": ["Hjemmeside"], "IP_ADDRESS": ["IP-adresse"], "TAX_ID": ["CVR-nr."],
           "BANK_ACCOUNT": ["Kontonummer"], "ROUTING_NUMBER": ["Reg.nr."], "GOVERNMENT_ID": ["ID-kort"], "PASSPORT": ["Pas"],
           "DRIVERS_LICENSE": ["Kørekort"], "BUILDING_NUMBER": ["Husnummer"], "STREET_NAME": ["Vej"], "SECONDARY_ADDRESS": ["Etage"],
           "CITY": ["By"], "STATE": ["Region"], "ZIP_CODE": ["Postnr."]},
    "fi": {"GIVEN_NAME": ["Etunimi"], "SURNAME": ["Sukunimi"], "EMAIL": ["Sähköposti"], "PHONE": ["Puhelin"], "SSN": ["Henkilötunnus"],
           "CREDIT_CARD": ["Kortin numero"], "URL": ["Verkkosivu"], "IP_ADDRESS": ["IP-osoite"], "TAX_ID": ["Y-tunnus"],
           "BANK_ACCOUNT": ["Tilinumero"], "ROUTING_NUMBER": ["BIC"], "GOVERNMENT_ID": ["Henkilökortti"], "PASSPORT": ["Passi"],
           "DRIVERS_LICENSE": ["Ajokortti"], "BUILDING_NUMBER": ["Talon numero"], "STREET_NAME": ["Katu"], "SECONDARY_ADDRESS": ["Huoneisto"],
           "CITY": ["Kaupunki"], "STATE": ["Maakunta"], "ZIP_CODE": ["Postinumero"]},
}

# Form layouts: (line format, joiner). Index 3 mod 4 -> test.
FORM_LAYOUTS = [
    ("{k}: {v}", "\n"), ("{k} = {v}", "; "), ("{k}: {v}", " | "), ("- {k}: {v}", "\n"),
    ("{k}\t{v}", "\n"), ("{K}: {v}", ", "), ("[{k}] {v}", " "), ("{k} -> {v}", "\n"),
]

FORM_GROUPS = [
    ["GIVEN_NAME", "SURNAME", "EMAIL", "PHONE"],
    ["GIVEN_NAME", "SURNAME", "STREET_NAME", "BUILDING_NUMBER", "ZIP_CODE", "CITY"],
    ["SURNAME", "GIVEN_NAME", "SSN", "TAX_ID", "BANK_ACCOUNT"],
    ["GIVEN_NAME", "SURNAME", "PASSPORT", "GOVERNMENT_ID", "DRIVERS_LICENSE"],
    ["EMAIL", "IP_ADDRESS", "URL"],
    ["GIVEN_NAME", "SURNAME", "CREDIT_CARD", "ZIP_CODE"],
    ["BANK_ACCOUNT", "ROUTING_NUMBER", "GIVEN_NAME", "SURNAME"],
    ["STREET_NAME", "BUILDING_NUMBER", "SECONDARY_ADDRESS", "CITY", "STATE", "ZIP_CODE", "PHONE"],
]

EMAIL_SKELETONS = {
    "en": [("Hi {G},", "Thanks for your message. {S}", "Best regards,\n{NAME}"),
           ("Dear team,", "{S} {S}", "Cheers, {GIVEN_NAME}"),
           ("Hello,", "Following up on our call: {S}", "Kind regards\n{NAME}\n{PHONE}"),
           ("To whom it may concern,", "{S}", "Sincerely,\n{NAME}\n{EMAIL}")],
    "fr": [("Bonjour {G},", "{S}", "Cordialement,\n{NAME}"), ("Madame, Monsieur,", "{S} {S}", "Bien à vous,\n{NAME}\n{PHONE}"),
           ("Salut {G} !", "{S}", "À bientôt, {GIVEN_NAME}"), ("Bonjour,", "Suite à notre échange : {S}", "{NAME}\n{EMAIL}")],
    "de": [("Hallo {G},", "{S}", "Viele Grüße\n{NAME}"), ("Sehr geehrte Damen und Herren,", "{S} {S}", "Mit freundlichen Grüßen\n{NAME}\n{PHONE}"),
           ("Hi {G},", "{S}", "LG {GIVEN_NAME}"), ("Guten Tag,", "wie besprochen: {S}", "{NAME}\n{EMAIL}")],
}

NOPII = {
    "en": ["The meeting moved to {DATE} at {TIME}.", "Order {ORDER} ships in 3-5 business days.",
           "Your total is {AMOUNT}, including VAT.", "Product code {CODE} is out of stock until {DATE}.",
           "Revenue grew {PCT} in Q3 compared to last year.", "Please restart the router and try again.",
           "Version {CODE} fixes the login timeout bug.", "The train leaves platform 4 at {TIME}.",
           "We received {NUM} applications this month.", "Invoice {ORDER} for {AMOUNT} is due on {DATE}.",
           "Thanks for your feedback, we'll look into it!", "Set the thermostat to 21 degrees after {TIME}.",
           "Flight LH {NUM} is delayed by 40 minutes.", "The warranty covers {NUM} months from {DATE}.",
           "Item SKU {CODE} was returned, refund of {AMOUNT} pending.", "Reminder: the office is closed on {DATE}."],
    "fr": ["La réunion est reportée au {DATE} à {TIME}.", "La commande {ORDER} sera expédiée sous 3 jours.",
           "Le montant total est de {AMOUNT} TTC.", "Le produit {CODE} est en rupture de stock.",
           "Merci pour votre retour, nous allons vérifier.", "Le train part à {TIME} du quai 2.",
           "La facture {ORDER} de {AMOUNT} est à régler avant le {DATE}.", "Les ventes ont progressé de {PCT}."],
    "de": ["Das Meeting wurde auf den {DATE} um {TIME} verschoben.", "Bestellung {ORDER} wird in 2 Tagen versendet.",
           "Der Gesamtbetrag beträgt {AMOUNT} inkl. MwSt.", "Artikel {CODE} ist derzeit nicht lieferbar.",
           "Vielen Dank für Ihre Rückmeldung!", "Der Zug fährt um {TIME} von Gleis 7.",
           "Rechnung {ORDER} über {AMOUNT} ist am {DATE} fällig.", "Der Umsatz stieg um {PCT}."],
    "es": ["La reunión se ha movido al {DATE} a las {TIME}.", "El pedido {ORDER} se enviará mañana.",
           "El importe total es {AMOUNT} con IVA.", "El producto {CODE} está agotado.",
           "Gracias por tu mensaje, lo revisamos.", "La factura {ORDER} de {AMOUNT} vence el {DATE}."],
    "it": ["La riunione è spostata al {DATE} alle {TIME}.", "L'ordine {ORDER} sarà spedito domani.",
           "Il totale è di {AMOUNT} IVA inclusa.", "Il prodotto {CODE} non è disponibile.",
           "Grazie per il feedback!", "La fattura {ORDER} di {AMOUNT} scade il {DATE}."],
    "nl": ["De vergadering is verplaatst naar {DATE} om {TIME}.", "Bestelling {ORDER} wordt morgen verzonden.",
           "Het totaalbedrag is {AMOUNT} incl. btw.", "Product {CODE} is uitverkocht.", "Bedankt voor je bericht!",
           "Factuur {ORDER} van {AMOUNT} vervalt op {DATE}."],
    "pt": ["A reunião passou para {DATE} às {TIME}.", "A encomenda {ORDER} será enviada amanhã.",
           "O total é {AMOUNT} com IVA.", "O produto {CODE} está esgotado.", "Obrigado pelo seu contacto!",
           "A fatura {ORDER} de {AMOUNT} vence a {DATE}."],
    "pl": ["Spotkanie przeniesiono na {DATE} o {TIME}.", "Zamówienie {ORDER} zostanie wysłane jutro.",
           "Łączna kwota to {AMOUNT} brutto.", "Produkt {CODE} jest niedostępny.", "Dziękujemy za wiadomość!",
           "Faktura {ORDER} na {AMOUNT} jest płatna do {DATE}."],
    "sv": ["Mötet är flyttat till {DATE} kl. {TIME}.", "Order {ORDER} skickas i morgon.", "Totalbeloppet är {AMOUNT} inkl. moms.",
           "Produkten {CODE} är slutsåld.", "Tack för ditt meddelande!", "Faktura {ORDER} på {AMOUNT} förfaller {DATE}."],
    "da": ["Mødet er flyttet til {DATE} kl. {TIME}.", "Ordre {ORDER} sendes i morgen.", "Det samlede beløb er {AMOUNT} inkl. moms.",
           "Produktet {CODE} er udsolgt.", "Tak for din besked!", "Faktura {ORDER} på {AMOUNT} forfalder {DATE}."],
    "fi": ["Kokous siirtyi päivälle {DATE} klo {TIME}.", "Tilaus {ORDER} lähetetään huomenna.", "Kokonaissumma on {AMOUNT} sis. alv.",
           "Tuote {CODE} on loppuunmyyty.", "Kiitos viestistäsi!", "Lasku {ORDER} ({AMOUNT}) erääntyy {DATE}."],
}


def split_items(items, split):
    return [t for i, t in enumerate(items) if (i % 4 == 3) == (split == "test")]


# ----------------------------------------------------------------------------- rendering

PH = re.compile(r"\{([A-Z_]+)\}")
DISTRACTORS = {"DATE", "AMOUNT", "ORDER", "TIME", "PCT", "CODE", "NUM", "G", "S", "K"}


def distractor(f, r, name):
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
    raise KeyError(name)


def _case(r, v):
    c = r.random()
    if c < 0.06:
        return v.upper()
    if c < 0.12:
        return v.lower()
    return v


class Builder:
    def __init__(self):
        self.text = ""
        self.spans = []

    def add(self, s, label=None):
        if label is not None and s.strip():
            lead = len(s) - len(s.lstrip())
            start = len(self.text) + lead
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
            render(b, r.choice(NAME_FORMATS), smp, r, loc)
        elif name == "ADDRESS":
            fmts = address_formats(loc)
            if smp.value_or_none("STATE") is None:
                fmts = [x for x in fmts if "{STATE}" not in x] or ["{BUILDING_NUMBER} {STREET_NAME}, {CITY}"]
            render(b, r.choice(fmts), smp, r, loc)
        elif name in ("G",):
            smp.new_person()
            b.add(_case(r, smp.value("GIVEN_NAME")), "GIVEN_NAME")
        elif name in DISTRACTORS:
            b.add(distractor(smp.f, r, name))
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
        self.locs = sorted(LOCALES)
        self.weights = [LOCALES[x] for x in self.locs]

    def example(self):
        r = self.r
        loc = r.choices(self.locs, self.weights)[0]
        f = self.fakers[loc]
        native = loc.split("_")[0]
        lang = native if (native == "en" or r.random() < 0.65) else "en"
        smp = Sampler(f, r, loc)
        b = Builder()
        kind = r.random()
        if kind < 0.14:
            kind = "nopii"
            for i in range(r.choice([1, 1, 1, 2])):
                if i:
                    b.add(" ")
                render(b, r.choice(self.nopii[lang]), smp, r, loc)
        elif kind < 0.27:
            kind = "form"
            self._form(b, smp, r, loc, lang)
        elif kind < 0.34 and lang in self.skeletons:
            kind = "email"
            self._email(b, smp, r, loc, lang)
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
