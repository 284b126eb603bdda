"""Hostile models: every crasher the fuzzer ever found is replayed, and a short seeded fuzz run
must give only `ok` or one-line errors (the full run of 10,000 cases per format is `-m slow`).

Each case runs porter's CLI (`inspect`, `inspect --ir`, `compile` without a build) in a worker
process under a memory limit and a per-command time limit; see harness.py for the outcomes.
"""

from __future__ import annotations

import pytest

from harness import GOOD, Worker, load_crashers, make_case, run_cases, summary

QUICK_CASES = 120  # per format: under a minute on two workers
FULL_CASES = 10_000
QUICK_SEED = 21
FULL_SEED = 0


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.stop()


def _replay(path, record):
    """A crasher not fixed yet ("expect": null, e.g. inside recovery, which its owner fixes) is
    expected to fail; once it passes, strict xfail says so, and its record gets the message."""
    if record["expect"] is not None:
        return pytest.param(record, id=path.stem)
    reason = f"not fixed yet ({record.get('owner', 'porter')}): {record['found']['detail'].splitlines()[-1]}"
    return pytest.param(record, id=path.stem, marks=pytest.mark.xfail(strict=True, reason=reason))


@pytest.mark.parametrize("record", [_replay(p, r) for p, r in load_crashers()])
def test_crasher_gets_its_one_line_error(worker, record):
    outcome, line = worker.run(record, (record["command"],)).outcomes[record["command"]]
    assert outcome == "error", (outcome, line)
    assert (record["expect"] or "") in line, line


def _fuzz(cases: int, seed: int, workers: int) -> None:
    results = run_cases([make_case(fmt, seed, i) for fmt in ("tflite", "onnx") for i in range(cases)], workers)
    crashers = [(r.case["format"], r.case["index"], r.crashes) for r in results if r.crashes]
    counts = summary(results)["counts"]
    for per in counts.values():
        assert sum(n for c in per.values() for o, n in c.items() if o not in GOOD) == 0, counts
    assert not crashers, crashers


def test_quick_fuzz_run_gives_only_ok_or_one_line_errors():
    _fuzz(QUICK_CASES, QUICK_SEED, workers=2)


@pytest.mark.slow
def test_full_fuzz_run_gives_only_ok_or_one_line_errors():
    _fuzz(FULL_CASES, FULL_SEED, workers=2)
