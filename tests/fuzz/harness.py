"""The fuzzer: seeded mutations of real fixtures through porter's CLI in worker processes with a
memory limit and a per-command time limit, each run classified.

Outcomes, per command (`inspect`, `inspect --ir`, `compile`):
  ok               exit 0
  error            exit 2 with exactly one stderr line, `porter: error: ...`, of a readable length
  internal         anything else: a traceback, `porter: internal error:`, another exit code,
                   or a failed compile that left its output directory behind
  hang             no answer within the time limit (the worker is killed and replaced)
  memory           a MemoryError under the address-space limit, or the peak RSS growing by more
                   than MEMORY_LIMIT_MB during the command
  crash            the worker died (a signal: segfault, the kernel's OOM killer)
  unbuildable      the mutators could not apply their edits (a bug in the fuzzer, not porter)
Everything but ok and error is a crasher: kept under crashers/ as JSON (the edits that rebuild
the file from its fixture, the command, what happened) and replayed by the default test suite.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import random
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CRASHERS = HERE / "crashers"
COMMANDS = ("inspect", "inspect --ir", "compile")
GOOD = ("ok", "error")
# The mutators' own failures (the edits could not be applied): reported, not porter's crashers.
NOT_PORTERS = ("unbuildable",)
# The small fixtures, weighted: every exporter's spelling, the quicker ones more often (ONNX
# graphs without full value_info run shape inference in a child, about 0.5 s per command).
FIXTURES = {
    "tflite": [("graphs/bert-l2-h128-a4-s64-tok3.litert-dq8.tflite", 4), ("graphs/bert-l2-h128-a4-s64-tok3.tf-dq8.tflite", 3),
               ("graphs/bert-l2-h128-a4-s64-tok3.f32.tflite", 2), ("graphs/bert-l2-h128-a4-s64-tok3.nomask.litert-dq8.tflite", 1)],
    "onnx": [("graphs/bert-l2-h128-a4-s64-tok3.f32.onnx", 6), ("graphs/bert-l2-h128-a4-s64-tok3.dq8pc.onnx", 2),
             ("graphs/bert-l2-h128-a4-s64-tok3.dq8pt.onnx", 1), ("graphs/bert-l2-h128-a4-s64-tok3.f32-ts.onnx", 1)],
}
ADDRESS_SPACE_LIMIT = 3 << 30  # the worker's RLIMIT_AS: python, numpy, onnx and porter use ~0.2 GiB
MEMORY_LIMIT_MB = 1024  # growth of the peak RSS during one command on a model of a few MB
# A worker whose RSS stays this high after a command is replaced, so that memory a command
# left behind (freed, but kept by the allocator) is not counted against the next one.
RECYCLE_RSS_MB = 512
COMMAND_TIMEOUT_S = 60.0  # a command on these fixtures takes well under a second
MESSAGE_LIMIT = 2000  # characters: a longer error line is a dump, not a message


@dataclass
class Result:
    case: dict
    outcomes: dict[str, tuple[str, str]] = field(default_factory=dict)  # command -> (outcome, detail)
    seconds: dict[str, float] = field(default_factory=dict)  # command -> how long it ran

    @property
    def crashes(self) -> dict[str, tuple[str, str]]:
        return {c: o for c, o in self.outcomes.items() if o[0] not in GOOD + NOT_PORTERS}


# Cases ------------------------------------------------------------------------------------------


@cache
def _tflite_fixture(path: str):
    from mutate_tflite import sites

    data = (REPO / path).read_bytes()
    return data, sites(data)


@cache
def _onnx_fixture(path: str):
    import onnx

    return onnx.load_model(str(REPO / path), load_external_data=False)


def make_case(fmt: str, seed: int, index: int) -> dict:
    """Case `index` of the run seeded `seed`: a fixture and its mutation, both from the seed."""
    rng = random.Random(f"{seed}/{fmt}/{index}")
    paths, weights = zip(*FIXTURES[fmt])
    fixture = rng.choices(paths, weights)[0]
    if fmt == "tflite":
        from mutate_tflite import mutate

        data, found = _tflite_fixture(fixture)
        edits = mutate(data, rng, found)
    else:
        from mutate_onnx import mutate

        edits = mutate(_onnx_fixture(fixture), rng)
    return {"format": fmt, "fixture": fixture, "edits": edits, "seed": seed, "index": index}


# Workers --------------------------------------------------------------------------------------


class Worker:
    """One worker process (worker.py) under the memory limit; replaced when it hangs or dies."""

    def __init__(self):
        self.process = None
        self.replies: queue.Queue = queue.Queue()

    def start(self) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        self.process = subprocess.Popen([sys.executable, str(HERE / "worker.py"), str(ADDRESS_SPACE_LIMIT)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True, cwd=REPO, env=env)
        self.replies = queue.Queue()
        threading.Thread(target=self.forward_replies, args=(self.process, self.replies), daemon=True).start()

    @staticmethod
    def forward_replies(process, replies: queue.Queue) -> None:
        """Moves the worker's reply lines to a queue (read with a timeout); None when it exits."""
        for line in process.stdout:
            replies.put(json.loads(line))
        replies.put(None)

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def read_reply(self, timeout_s: float) -> dict:
        """The next reply, {"hung": True} if none came in time (the worker is killed), or
        {"died": exit status} if the worker exited."""
        try:
            reply = self.replies.get(timeout=timeout_s)
        except queue.Empty:
            self.stop()
            return {"hung": True}
        if reply is None:
            code = self.process.wait()
            self.process = None
            return {"died": code}
        return reply

    def run(self, case: dict, commands=COMMANDS) -> Result:
        if self.process is None:
            self.start()
        message = {k: case[k] for k in ("format", "fixture", "edits")}
        message["fixture"] = str(REPO / case["fixture"])
        message["commands"] = list(commands)
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()
        result, running, recycle = Result(case), None, False
        while True:
            # Worker start-up (imports) happens inside the first command's time.
            reply = self.read_reply(COMMAND_TIMEOUT_S * (2 if running is None else 1))
            if "start" in reply:
                running = reply["start"]
            elif "finished" in reply:
                result.outcomes[running] = classify(reply["finished"])
                result.seconds[running] = reply["finished"]["seconds"]
                running = None
                recycle = reply["finished"]["rss_mb"] > RECYCLE_RSS_MB
            elif "done" in reply:
                if recycle:
                    self.stop()
                return result
            elif "unbuildable" in reply:
                result.outcomes = {c: ("unbuildable", reply["unbuildable"]) for c in commands}
                return result
            else:  # hung or died: the command that was running gets the blame
                what = ("hang", f"no answer in {COMMAND_TIMEOUT_S:g} s") if "hung" in reply \
                    else ("crash", f"worker exited with {reply['died']}")
                result.outcomes[running or commands[0]] = what
                return result


def classify(reply: dict) -> tuple[str, str]:
    """(outcome, detail) of one command from the worker's reply: its exit code, how many lines
    it wrote to stderr, the first of them and the last few."""
    last = reply["tail"].splitlines()[-1] if reply["tail"] else ""
    if reply["grew_mb"] > MEMORY_LIMIT_MB:
        return "memory", f"peak RSS grew by {reply['grew_mb']} MB to {reply['peak_mb']} MB: {last}"
    if reply["exit"] == 0:
        return "ok", ""
    if reply["left_output"]:
        return "internal", f"failed compile left its output directory: {last}"
    if reply["exit"] == 2 and reply["lines"] == 1 and reply["first_line"].startswith("porter: error: "):
        if len(reply["first_line"]) > MESSAGE_LIMIT:
            return "internal", f"a {len(reply['first_line'])}-character error line: {reply['first_line'][:200]}"
        return "error", reply["first_line"]
    if "MemoryError" in reply["tail"]:
        return "memory", last
    return "internal", reply["tail"]


def run_cases(cases, workers: int = 1, progress=None) -> list[Result]:
    """Runs the cases on `workers` worker processes; results in case order."""
    pending: queue.Queue = queue.Queue()
    cases = list(cases)
    for i, case in enumerate(cases):
        pending.put((i, case))
    results: list[Result | None] = [None] * len(cases)

    def drain() -> None:
        worker = Worker()
        try:
            while True:
                try:
                    i, case = pending.get_nowait()
                except queue.Empty:
                    return
                results[i] = worker.run(case, case.get("commands", COMMANDS))
                if progress is not None:
                    progress(results[i])
        finally:
            worker.stop()

    threads = [threading.Thread(target=drain) for _ in range(max(1, workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


# Reports and crashers ---------------------------------------------------------------------------


def summary(results: list[Result]) -> dict:
    """{format: {command: {outcome: count}}} and the number of distinct error messages."""
    counts: dict = {}
    messages = Counter()
    for r in results:
        for command, (outcome, detail) in r.outcomes.items():
            per = counts.setdefault(r.case["format"], {}).setdefault(command, Counter())
            per[outcome] += 1
            if outcome == "error":
                messages[_message_shape(detail)] += 1
    return {"counts": {f: {c: dict(n) for c, n in per.items()} for f, per in counts.items()},
            "distinct_error_messages": len(messages), "error_messages": dict(messages.most_common())}


def _message_shape(line: str) -> str:
    """An error line without its numbers and quoted names, so that messages group by kind."""
    import re

    message = re.sub(r"/\S*porter-fuzz-[^/]+/model\.\w+: ", "", line.removeprefix("porter: error: "))
    return re.sub(r"'[^']*'|\d+", "#", message)


def crasher_record(result: Result) -> dict:
    command, (outcome, detail) = next(iter(result.crashes.items()))
    return {"format": result.case["format"], "fixture": result.case["fixture"], "edits": result.case["edits"],
            "command": command, "found": {"outcome": outcome, "detail": detail,
                                          "seed": result.case.get("seed"), "index": result.case.get("index")},
            "expect": None}


def save_crasher(result: Result) -> Path:
    """Keeps a crasher as JSON named by its content; returns the path (existing ones are kept)."""
    record = crasher_record(result)
    digest = hashlib.sha1(json.dumps([record["fixture"], record["edits"]], sort_keys=True).encode()).hexdigest()[:12]
    path = CRASHERS / f"{record['format']}-{digest}.json"
    if not path.exists():
        CRASHERS.mkdir(exist_ok=True)
        path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def load_crashers() -> list[tuple[Path, dict]]:
    return [(p, json.loads(p.read_text())) for p in sorted(CRASHERS.glob("*.json"))]
