"""How many maximal /redact requests at once a built redaction service sustains on this machine.

    .venv/bin/porter serve-build examples/redact/model/redact-me5.litert-dq8.tflite \\
        --tokenizer examples/redact/model/tokenizer.json --labels examples/redact/labels.json -o build/redact
    .venv/bin/python scripts/load_test.py build/redact --levels 1,2,4,6,8,10,12,16,24,32

Serves the component with `wasmtime serve` as `porter serve` does (epoch deadline --timeout, a
fresh instance per request), answers one maximal request (max_windows windows of text) alone,
then sends each level's number of maximal requests at once and prints, per level, the statuses,
the slowest reply, whether every 200 equals the request served alone and whether every 503 is
the component's JSON error with Retry-After. The sustained concurrency is the largest level at
which every request got its 200 (porter.bench.load).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from porter.bench.load import load_test


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path, help="a `porter serve-build` output directory")
    parser.add_argument("--levels", default="1,2,4,8,16,32", help="comma-separated numbers of requests at once")
    parser.add_argument("--timeout", type=float, default=30.0, help="wasmtime serve's epoch deadline, seconds")
    parser.add_argument("--json", type=Path, help="also write the report as JSON")
    args = parser.parse_args()
    levels = [int(n) for n in args.levels.split(",")]
    print(f"{os.cpu_count()} processors, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    report = load_test(args.out_dir, levels, args.timeout)
    bad = [n for n, r in report["levels"].items()
           if set(r["statuses"]) - {200, 503} or not (r["identical_200s"] and r["json_503s"])]
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    if bad:
        print(f"levels with a status other than 200 or the JSON 503, or a 200 unlike the one alone: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
