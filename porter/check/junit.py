"""`porter check`'s JUnit XML, which CI systems show as tests: one test case per window of an
encoder golden (or prompt of a decoder golden), plus one per whole-run gate.

A window's (prompt's) case fails when one of its logits is further than --max-abs from the
golden's (or is NaN); label agreement is a bar on the whole run (a few disagreeing tokens may
pass a lower --min-label-agreement), so it is its own case, as is the live-rows identity of an
encoder module. Every failing case corresponds to one of verify's failures, and the other way
round. When the model cannot be compiled (or built, or checked) the file holds one failing case
named after that step, with the reason.
"""

from __future__ import annotations

import math
import socket
import xml.etree.ElementTree as ET
from pathlib import Path


def render(report: dict) -> bytes:
    """The porter.check/1 report as JUnit XML."""
    root = ET.Element("testsuites", name="porter check")
    model = Path(report["model"]).name
    verify = report.get("verify")
    if verify is None:
        suite = _suite(root, f"porter check {model}", report)
        step = report["error"]["step"]
        case = _case(suite, _classname(model, step), step, _step_seconds(report, step))
        _fail(case, report["error"]["message"], "PorterError")
    else:
        for golden in verify["goldens"]:
            suite = _suite(root, f"porter check {model} vs {golden['name']}", report)
            if verify["kind"] == "decoder":
                _decoder_cases(suite, model, golden, verify["thresholds"])
            else:
                _encoder_cases(suite, model, golden, verify)
    _count(root)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def _suite(root: ET.Element, name: str, report: dict) -> ET.Element:
    suite = ET.SubElement(root, "testsuite", name=name, hostname=socket.gethostname())
    properties = ET.SubElement(suite, "properties")
    for key in ("model", "model_sha256", "porter_version", "outcome"):
        ET.SubElement(properties, "property", name=key, value=str(report[key]))
    for step in report["steps"]:
        ET.SubElement(properties, "property", name=f"seconds.{step['name']}", value=f"{step['seconds']:.3f}")
    return suite


def _classname(model: str, golden: str) -> str:
    return f"porter.check.{model}.{golden}".replace(" ", "_")


def _case(suite: ET.Element, classname: str, name: str, seconds: float) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=classname, name=name, time=f"{seconds:.6f}")


def _fail(case: ET.Element, message: str, kind: str) -> None:
    failure = ET.SubElement(case, "failure", message=message.splitlines()[0] if message else "", type=kind)
    failure.text = message


def _out(case: ET.Element, text: str) -> None:
    ET.SubElement(case, "system-out").text = text


def _beyond(value: float, limit: float) -> bool:
    return math.isnan(value) or value > limit


def _encoder_cases(suite: ET.Element, model: str, golden: dict, verify: dict) -> None:
    max_abs = verify["thresholds"]["max_abs"]
    classname = _classname(model, golden["name"])
    for w in golden["sequences"]:
        case = _case(suite, classname, f"window {w['window']:03d} (text {w['text_index']}, {w['live']} live tokens)",
                     w["forward_ms"] / 1000)
        line = (f"labels {w['labels_agree']}/{w['tokens']} agree, max |dlogit| {w['max_abs']:.3g}, "
                f"mean |dlogit| {w['mean_abs']:.3g}")
        _out(case, line)
        if _beyond(w["max_abs"], max_abs):
            _fail(case, f"max |dlogit| {w['max_abs']:.3g} > {max_abs:g}: {line}", "threshold")
    _agreement_case(suite, classname, "label agreement", golden["overall"]["label_rate"],
                    verify["thresholds"]["min_label_agreement"], golden["failures"])
    live_rows = verify["live_rows"]
    case = _case(suite, classname, "live rows bit-identical to the whole window", 0.0)
    if not live_rows["identical"]:
        _fail(case, next((f for f in verify["failures"] if f.startswith("the live-rows run")),
                         "the live-rows run differs from the whole-window run"), "bit-identity")


def _decoder_cases(suite: ET.Element, model: str, golden: dict, thresholds: dict) -> None:
    classname = _classname(model, golden["name"])
    for p in golden["sequences"]:
        case = _case(suite, classname, f"prompt {p['prompt']:03d} ({p['length']} tokens, {p['steps']} steps)",
                     (p["prompt_ms"] + p["decode_ms"]) / 1000)
        tokens = ("all tokens equal" if p["first_difference"] is None
                  else f"tokens equal up to step {p['first_difference']}")
        line = f"{tokens}, max |dlogit| {p['max_abs']:.3g} over {p['compared_rows']} rows"
        _out(case, line)
        if _beyond(p["max_abs"], thresholds["max_abs"]):
            _fail(case, f"max |dlogit| {p['max_abs']:.3g} > {thresholds['max_abs']:g}: {line}", "threshold")
    _agreement_case(suite, classname, "greedy token agreement", golden["overall"]["token_rate"],
                    thresholds["min_label_agreement"], golden["failures"])


def _agreement_case(suite: ET.Element, classname: str, name: str, rate: float, minimum: float,
                    failures: list[str]) -> None:
    case = _case(suite, classname, name, 0.0)
    _out(case, f"{100 * rate:.2f}% (at least {100 * minimum:.2f}% passes)")
    if not rate >= minimum:
        _fail(case, next((f for f in failures if "agree" in f), f"{100 * rate:.2f}% < {100 * minimum:.2f}%"),
              "threshold")


def _step_seconds(report: dict, name: str) -> float:
    return next(s["seconds"] for s in report["steps"] if s["name"] == name)


def _count(root: ET.Element) -> None:
    """tests / failures / errors / time on every suite and on the root, as JUnit readers expect."""
    totals = {"tests": 0, "failures": 0, "time": 0.0}
    for suite in root.iter("testsuite"):
        cases = suite.findall("testcase")
        failures = sum(1 for c in cases if c.find("failure") is not None)
        seconds = sum(float(c.get("time")) for c in cases)
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(failures))
        suite.set("errors", "0")
        suite.set("time", f"{seconds:.6f}")
        totals["tests"] += len(cases)
        totals["failures"] += failures
        totals["time"] += seconds
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", "0")
    root.set("time", f"{totals['time']:.6f}")
