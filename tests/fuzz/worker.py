"""The fuzzer's worker process: builds each mutated model and runs porter's real CLI on it.

Started by harness.Worker with its memory limit as the first argument. It sets that limit on
itself (resource.setrlimit, inherited by the shape-inference child porter starts for ONNX), then
reads one case per line on stdin, as JSON: {"format", "fixture", "edits"}. For each case it
writes the model into a fresh directory and runs `porter inspect`, `porter inspect --ir` and
`porter compile -o DIR` in this process (click's test runner: the CLI group, its error handling
and exit codes as a user gets them), announcing each command before it starts so that the
harness knows which one hung. Replies are JSON lines on the protocol stream (the original
stdout; porter's own output goes elsewhere).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import tempfile
import time
from functools import cache
from pathlib import Path

COMMANDS = {
    "inspect": lambda model, out: ["inspect", str(model)],
    "inspect --ir": lambda model, out: ["inspect", "--ir", str(model)],
    "compile": lambda model, out: ["compile", str(model), "-o", str(out)],
}


def memory_mb(field: str) -> float:
    """VmRSS (now) or VmHWM (the peak since the last reset) of this process, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def reset_peak_rss() -> None:
    """Linux resets VmHWM to the current RSS when "5" is written to clear_refs."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


@cache
def fixture_bytes(path: str) -> bytes:
    return Path(path).read_bytes()


@cache
def fixture_model(path: str):
    import onnx

    return onnx.load_model(path, load_external_data=False)


def write_model(case: dict, folder: Path) -> Path:
    if case["format"] == "tflite":
        from mutate_tflite import apply

        data = apply(fixture_bytes(case["fixture"]), case["edits"])
        model = folder / "model.tflite"
    else:
        from mutate_onnx import apply

        data = apply(fixture_model(case["fixture"]), case["edits"], folder)
        model = folder / "model.onnx"
    model.write_bytes(data)
    return model


def run_command(runner, main, args: list[str]) -> tuple[int, str]:
    result = runner.invoke(main, args, catch_exceptions=True)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        # Escaped the CLI's own handling: a traceback is what a user would have seen.
        stderr += f"\nTraceback (escaped the CLI): {type(result.exception).__name__}: {result.exception}"
        return 1, stderr
    return result.exit_code, stderr


def serve(protocol) -> None:
    from click.testing import CliRunner

    from porter.cli import main

    runner = CliRunner()
    for line in sys.stdin:
        case = json.loads(line)
        folder = Path(tempfile.mkdtemp(prefix="porter-fuzz-"))
        try:
            try:
                model = write_model(case, folder)
            except Exception as e:  # a bug in the mutators, not in porter
                protocol.write(json.dumps({"unbuildable": f"{type(e).__name__}: {e}"}) + "\n")
                protocol.flush()
                continue
            for name in case.get("commands", list(COMMANDS)):
                out = folder / "out"
                protocol.write(json.dumps({"start": name}) + "\n")
                protocol.flush()
                reset_peak_rss()
                before = memory_mb("VmRSS")
                started = time.monotonic()
                code, stderr = run_command(runner, main, COMMANDS[name](model, out))
                lines = stderr.splitlines()
                reply = {"exit": code, "lines": len(lines), "first_line": (lines or [""])[0][:4000],
                         "tail": "\n".join(lines[-12:])[-4000:], "seconds": round(time.monotonic() - started, 3),
                         "peak_mb": round(memory_mb("VmHWM"), 1), "grew_mb": round(memory_mb("VmHWM") - before, 1),
                         "rss_mb": round(memory_mb("VmRSS"), 1), "left_output": code != 0 and out.exists()}
                shutil.rmtree(out, ignore_errors=True)
                protocol.write(json.dumps({"finished": reply}) + "\n")
                protocol.flush()
            protocol.write(json.dumps({"done": True}) + "\n")
            protocol.flush()
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything printed outside the CLI runner must not corrupt the protocol
    sys.path.insert(0, str(Path(__file__).parent))
    serve(protocol)


if __name__ == "__main__":
    main()
