"""Runs the fuzzer and prints the counts per outcome, per format and command.

    python tests/fuzz/run_fuzz.py --cases 10000 --format tflite --format onnx --workers 2

Every case runs `porter inspect`, `porter inspect --ir` and `porter compile` (no build) on one
seeded mutation of a small fixture (see harness.py for the outcomes). Crashers are written to
tests/fuzz/crashers/ (with --keep-crashers), where the default test suite replays them; the
summary goes to stdout and, with --report, to a JSON file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import COMMANDS, make_case, run_cases, save_crasher, summary  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--format", action="append", choices=("tflite", "onnx"), help="default: both")
    parser.add_argument("--cases", type=int, default=1000, help="cases per format")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--first", type=int, default=0, help="index of the first case (resume a run)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--keep-crashers", action="store_true", help="write crashers to tests/fuzz/crashers/")
    parser.add_argument("--report", type=Path, help="also write the summary and crashers as JSON")
    args = parser.parse_args()
    formats = args.format or ["tflite", "onnx"]
    started = time.monotonic()
    done = [0]
    total = args.cases * len(formats)

    def progress(result) -> None:
        done[0] += 1
        for command, (outcome, detail) in result.crashes.items():
            print(f"\n{outcome}: {result.case['format']} case {result.case['index']} ({command}): "
                  f"{detail.splitlines()[-1] if detail else ''}", flush=True)
        if done[0] % 100 == 0:
            print(f"\r{done[0]}/{total} cases, {time.monotonic() - started:.0f} s", end="", flush=True)

    cases = [make_case(fmt, args.seed, i) for fmt in formats for i in range(args.first, args.first + args.cases)]
    results = run_cases(cases, args.workers, progress)
    report = summary(results)
    crashers = [r for r in results if r.crashes]
    print(f"\n{total} cases in {time.monotonic() - started:.0f} s (seed {args.seed}, cases {args.first}.."
          f"{args.first + args.cases - 1} per format)")
    for fmt, per in report["counts"].items():
        print(f"{fmt}:")
        for command in COMMANDS:
            counts = per.get(command, {})
            print(f"  {command:<13} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])))
    print(f"distinct error messages: {report['distinct_error_messages']}; crashers: {len(crashers)}")
    saved = [str(save_crasher(r)) for r in crashers] if args.keep_crashers else []
    for path in saved:
        print(f"  kept {path}")
    if args.report:
        report["crashers"] = [{"case": r.case, "outcomes": r.crashes} for r in crashers]
        report["seconds"] = round(time.monotonic() - started)
        args.report.write_text(json.dumps(report, indent=1) + "\n")
    return 1 if crashers else 0


if __name__ == "__main__":
    sys.exit(main())
