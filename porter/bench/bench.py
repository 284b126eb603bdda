"""`porter bench`: porter's wasm module against peer runtimes, side by side, on the same inputs.

Runners (each one thread):
- porter: the built eval module under wasmtime with epoch interruption on, as Spin runs it; its
  forward time is measured inside wasm, and split into matmul / attention / other;
- LiteRT native, builtin kernels and XNNPACK, on the .tflite the module was compiled from;
- onnxruntime native (CPU execution provider) and ONNX Runtime Web's wasm SIMD build in Node,
  on an ONNX export of the same network (`--onnx`);
- tract (tract-onnx built to wasm32-wasip1 with simd128) under the same wasmtime engine as
  porter, on that ONNX export: the engine a Spin component would embed instead. A fresh instance
  per call parses and optimises the model (its start-up, reported on its own, as Spin pays it
  per request), then times each forward pass.

Encoder cases: a full window (every token live) and a short input (20 live tokens). Porter computes only
the live rows where the model's padding is inert; the peers run the graph as exported (a fixed
window pads the short input to the full window, which is what serving that file costs).

Every round runs every runner on every case, interleaved, so that a change in machine load hits
all of them alike; each (runner, case) reports its min and median over all rounds, and the ratio
of its median to porter's. Only the forward pass is timed for every runner (sessions and
interpreters are created once, outside the timing); porter's start-up (instantiation, model load)
is reported on its own.

The roofline (roofline.py): each stage's work counted from the IR, the rate it reached, and the
floor measured by microbenchmarks in wasm under wasmtime once per round (the best round kept).

Decoders (a module from `porter compile` of a graph with a KV cache): the cases are a prompt
pass of 8 tokens (ms per pass) and greedy decoding of 64 tokens (ms per token, and tokens per
second); the peer is onnxruntime native running the same graph with the same cache loop.
"""

from __future__ import annotations

import io
import json
import os
import platform
import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from porter import package_path
from porter.bench.machine import host_cpu, kernel_variant, machine_line
from porter.bench.roofline import measure_floors, roofline_lines, roofline_report
from porter.runtime import evalproto

from porter.runtime import wasm
from porter.errors import PorterError
from porter.fsutil import write_atomic
from porter.check.golden import load_golden
from porter.check.modules import locate_module
from porter.recover.decoder.io import fed_value

BENCH_FORMAT = "porter.bench/1"
SHORT_TOKENS = 20
ORT_WEB_VERSION = "1.30.0"
PEER_SCRIPT = "bench/peers/ort_web.mjs"  # in porter's package data
PORTER = "porter wasm"
PEERS = ("litert-builtin", "litert-xnnpack", "ort", "ort-web", "tract")


@dataclass(frozen=True)
class Case:
    name: str
    live: int
    ids: np.ndarray  # [seq] int32
    mask: np.ndarray  # [seq] int32

    def request(self, n: int) -> bytes:
        """An eval-module request of this window n times."""
        return evalproto.encode_request(np.tile(self.ids, (n, 1)), np.tile(self.mask, (n, 1)), np.full(n, self.live))


@dataclass
class Timings:
    ms: dict = field(default_factory=dict)  # (runner, case) -> [ms]
    stages: dict = field(default_factory=dict)  # case -> {"matmul": [ms], ..., "rows": [n]}

    def add(self, runner: str, case: str, values: list[float]) -> None:
        self.ms.setdefault((runner, case), []).extend(values)


@dataclass(frozen=True)
class DecoderCase:
    name: str
    prompt: np.ndarray  # token ids
    steps: int  # greedy tokens generated after the prompt pass
    per_token: bool  # time per generated token (else per prompt pass)


DECODER_PROMPT, DECODER_STEPS = 8, 64


def make_decoder_cases(vocab: int) -> list[DecoderCase]:
    prompt = np.random.default_rng(0).integers(1, vocab, DECODER_PROMPT).astype(np.int32)
    return [DecoderCase(f"prompt ({DECODER_PROMPT} tokens)", prompt, 1, False),
            DecoderCase(f"decode ({DECODER_STEPS} tokens, per token)", prompt, DECODER_STEPS, True)]


def make_cases(seq: int, vocab: int) -> list[Case]:
    """Deterministic ids away from the special tokens; the short case is right-padded with 0."""
    rng = np.random.default_rng(0)
    low = 1000 if vocab > 2000 else 1
    return window_cases(rng.integers(low, vocab, seq).astype(np.int32))


def text_cases(golden_path: Path, seq: int, vocab: int) -> tuple[list[Case], str]:
    """make_cases' windows from a golden's text instead of random ids: its first window whose every
    token is live, and that window's first SHORT_TOKENS. Attention's speed depends on the tokens:
    the wider a row's scores spread, the more of its probabilities are subnormal, and on x86 each
    multiply by one takes a microcode assist. Also says which window it took."""
    golden = load_golden(golden_path)
    if golden.ids.shape[1] != seq:
        raise PorterError(f"{golden_path}: windows of {golden.ids.shape[1]} tokens; the module's hold {seq}")
    full = [w for w in range(golden.windows) if golden.attention_mask[w].all()]
    if not full:
        raise PorterError(f"{golden_path}: no window with all {seq} tokens live, to time as a full window")
    ids = golden.ids[full[0]].astype(np.int32)
    if ids.min() < 0 or ids.max() >= vocab:
        raise PorterError(f"{golden_path}: window {full[0]} has token ids outside the module's vocabulary of {vocab}")
    return window_cases(ids), f"text: window {full[0]} of {golden_path.name}"


def window_cases(ids: np.ndarray) -> list[Case]:
    """The whole window of `ids`, and its first SHORT_TOKENS right-padded with 0."""
    seq = len(ids)
    cases = [Case("full window", seq, ids, np.ones(seq, np.int32))]
    short = min(SHORT_TOKENS, seq)
    if short < seq:
        mask = (np.arange(seq) < short).astype(np.int32)
        cases.append(Case(f"{short} tokens", short, np.where(mask == 1, ids, 0).astype(np.int32), mask))
    return cases


# --- runners ----------------------------------------------------------------------------------


class PorterRunner:
    """One built eval module. The module under test records its stages in timings.stages (the
    roofline reads them); a module given with --also, under its own name, in its own dict."""

    def __init__(self, wasm_path: Path, timings: Timings, ir: dict, name: str = PORTER, stages: dict | None = None):
        self.wasm_path, self.timings, self.ir, self.name = wasm_path, timings, ir, name
        self.stages = timings.stages if stages is None else stages
        self.runtime = wasm.default_runtime()

    def run(self, case: Case, n: int) -> list[float]:
        request = case.request(n)
        done = self.runtime.run_command(self.wasm_path, stdin=request, timeout_s=60.0 * n)
        if done.exit_code != 0:
            raise PorterError(f"{self.wasm_path.name} exited with {done.exit_code}: "
                              f"{done.stderr.decode(errors='replace').strip()[-300:]}")
        results, load_ms = evalproto.decode_reply(done.stdout)
        stages = self.stages.setdefault(case.name, {})
        for r in results:
            for part in ("matmul", "attention", "other"):
                stages.setdefault(part, []).append(getattr(r, f"{part}_ms"))
            stages.setdefault("rows", []).append(r.rows)
        stages.setdefault("model_load", []).append(load_ms)
        return [r.forward_ms for r in results]



def instantiate_ms(wasm_path: Path, n: int) -> list[float]:
    """Instance start: a fresh store and instance of the compiled module, as a server makes per
    request (model.bin is in the data segment: copy-on-write mapped, not copied)."""
    runtime = wasm.default_runtime()
    module = runtime.module(wasm_path)
    out = []
    for _ in range(n):
        store = runtime.new_store(10.0)
        start = time.perf_counter()
        runtime.linker.instantiate(store, module)
        out.append(1000 * (time.perf_counter() - start))
    return out


class LiteRTRunner:
    def __init__(self, model: Path, ir: dict, xnnpack: bool):
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        from porter.frontends import load_graph

        self.name = "LiteRT XNNPACK" if xnnpack else "LiteRT builtin"
        resolver = OpResolverType.AUTO if xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        self.interp = Interpreter(model_path=str(model), num_threads=1, experimental_op_resolver_type=resolver)
        self.interp.allocate_tensors()
        inputs = load_graph(model).inputs
        self.ids_tensor = inputs[ir["ids_input"]]
        self.mask_tensor = inputs[ir["mask_input"]] if ir.get("mask_input") else None

    def run(self, case: Case, n: int) -> list[float]:
        self.interp.set_tensor(self.ids_tensor, case.ids[None])
        if self.mask_tensor is not None:
            self.interp.set_tensor(self.mask_tensor, case.mask[None])
        out = []
        for _ in range(n):
            start = time.perf_counter()
            self.interp.invoke()
            out.append(1000 * (time.perf_counter() - start))
        return out


class DecoderPorterRunner:
    name = PORTER

    def __init__(self, wasm_path: Path, timings: Timings):
        self.wasm_path, self.timings = wasm_path, timings

    def run(self, case: DecoderCase, n: int) -> list[float]:
        from porter.runtime.decoder_proto import generate

        results, load_ms = generate(self.wasm_path, [case.prompt] * n, case.steps)
        self.timings.stages.setdefault(case.name, {}).setdefault("model_load", []).append(load_ms)
        return [r.decode_ms / (case.steps - 1) if case.per_token else r.prompt_ms for r in results]


class DecoderOrtRunner:
    """The decoder's own ONNX graph in onnxruntime, with the same prompt pass + one-token loop."""

    name = "onnxruntime"

    def __init__(self, source: Path, ir: dict):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        self.layers = [ly["attention"] for ly in ir["layers"]]  # each names its cache input and output
        self.empty = np.zeros((1, ir["kv_heads"], 0, ir["head_dim"]), np.float32)
        self.ids, self.logits = ir["ids_input"], ir["logits_output"]
        self.fed = ir.get("fed_inputs", {})  # inputs porter computes itself: position ids, a mask of ones

    def _generate(self, case: DecoderCase) -> tuple[float, float]:
        cache = {name: self.empty for ly in self.layers for name in (ly["past_key"], ly["past_value"])}
        feed, prompt_ms, decode_ms = case.prompt.astype(np.int64)[None], 0.0, 0.0
        names = [o.name for o in self.session.get_outputs()]
        past = 0
        for k in range(case.steps):
            fed = {name: fed_value(kind, past, feed.shape[1]) for name, kind in self.fed.items()}
            start = time.perf_counter()
            outputs = dict(zip(names, self.session.run(None, {self.ids: feed, **cache, **fed})))
            past += feed.shape[1]
            elapsed = 1000 * (time.perf_counter() - start)
            prompt_ms, decode_ms = (elapsed, decode_ms) if k == 0 else (prompt_ms, decode_ms + elapsed)
            for ly in self.layers:
                cache[ly["past_key"]], cache[ly["past_value"]] = outputs[ly["present_key"]], outputs[ly["present_value"]]
            feed = np.array([[int(np.argmax(outputs[self.logits][0, -1]))]], np.int64)
        return prompt_ms, decode_ms

    def run(self, case: DecoderCase, n: int) -> list[float]:
        out = []
        for _ in range(n):
            prompt_ms, decode_ms = self._generate(case)
            out.append(decode_ms / (case.steps - 1) if case.per_token else prompt_ms)
        return out


def onnx_feeds(inputs: list, case: Case) -> dict:
    """name -> (numpy dtype name, dims, values) for every graph input, by input name: ids, the
    mask, and zeros for token types. A symbolic length gets the live tokens only."""
    feeds = {}
    for spec in inputs:
        dtype = {"tensor(int64)": "int64", "tensor(int32)": "int32"}.get(spec.type)
        if dtype is None:
            raise PorterError(f"ONNX input {spec.name} is {spec.type}; porter bench feeds int32/int64 ids")
        length = spec.shape[-1] if isinstance(spec.shape[-1], int) else case.live
        if "mask" in spec.name:
            values = case.mask[:length]
        elif "type" in spec.name:
            values = np.zeros(length, np.int32)
        else:
            values = case.ids[:length]
        feeds[spec.name] = (dtype, [1, length], values.astype(dtype))
    return feeds


class OrtRunner:
    name = "onnxruntime"

    def __init__(self, onnx_path: Path):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])

    def run(self, case: Case, n: int) -> list[float]:
        feeds = {name: values.reshape(dims) for name, (_, dims, values) in
                 onnx_feeds(self.session.get_inputs(), case).items()}
        out = []
        for _ in range(n):
            start = time.perf_counter()
            self.session.run(None, feeds)
            out.append(1000 * (time.perf_counter() - start))
        return out


def ort_web_dir() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "porter" / f"ort-web-{ORT_WEB_VERSION}"


def ensure_ort_web() -> Path:
    """onnxruntime-web from npm, installed once into porter's cache."""
    target = ort_web_dir()
    if (target / "node_modules" / "onnxruntime-web" / "package.json").is_file():
        return target
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            raise PorterError(f"the ONNX Runtime Web peer needs {tool} (Debian: apt-get install nodejs npm)")
    target.mkdir(parents=True, exist_ok=True)
    (target / "package.json").write_text(json.dumps({"private": True}) + "\n")
    done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(target),
                           f"onnxruntime-web@{ORT_WEB_VERSION}"], capture_output=True, text=True)
    if done.returncode != 0:
        raise PorterError(f"npm install onnxruntime-web@{ORT_WEB_VERSION} failed: "
                          f"{done.stderr.strip().splitlines()[-1:] or done.returncode}")
    return target


class OrtWebRunner:
    name = "ONNX Runtime Web (Node)"

    def __init__(self, onnx_path: Path):
        import onnxruntime as ort

        # The native session only tells us the inputs' names, types and shapes.
        self.inputs = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"]).get_inputs()
        self.process = subprocess.Popen(["node", str(package_path(PEER_SCRIPT)), str(ensure_ort_web()), str(onnx_path)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        self.version = self._reply()["ready"]

    def _reply(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise PorterError(f"the ONNX Runtime Web peer stopped: {self.process.stderr.read().strip()[-400:]}")
        return json.loads(line)

    def run(self, case: Case, n: int) -> list[float]:
        feeds = {name: {"type": dtype, "dims": dims, "data": values.tolist()}
                 for name, (dtype, dims, values) in onnx_feeds(self.inputs, case).items()}
        self.process.stdin.write(json.dumps({"feeds": feeds, "n": n}) + "\n")
        self.process.stdin.flush()
        return self._reply()["ms"]

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


class TractRunner:
    name, peer = "tract (wasmtime)", "tract"

    def __init__(self, onnx_path: Path, echo):
        import onnxruntime as ort

        from porter.bench.tract import ensure_tract_wasm

        self.module = ensure_tract_wasm(echo)
        self.onnx = onnx_path.read_bytes()
        self.inputs = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"]).get_inputs()
        self.load_ms: dict[str, list[float]] = {}  # case -> parse + optimise, per instance

    def run(self, case: Case, n: int) -> list[float]:
        from porter.bench.tract import run_tract

        reply = run_tract(self.module, self.onnx, list(onnx_feeds(self.inputs, case).values()), n, timeout_s=120.0 * n)
        self.load_ms.setdefault(case.name, []).append(reply.load_ms)
        return reply.run_ms


def make_peers(peers: list[str], model: Path, ir: dict, onnx_path: Path | None, echo) -> tuple[list, dict]:
    """The peer runners that can run here, and why each of the others is skipped."""
    runners, skipped = [], {}
    for peer in peers:
        try:
            if peer in ("litert-builtin", "litert-xnnpack"):
                if ir.get("format") != "tflite":
                    raise PorterError("the module was not compiled from a .tflite")
                runners.append(LiteRTRunner(model, ir, xnnpack=peer == "litert-xnnpack"))
            elif onnx_path is None:
                raise PorterError("give --onnx FILE, an ONNX export of the same network")
            elif peer == "ort":
                runners.append(OrtRunner(onnx_path))
            elif peer == "tract":
                runners.append(TractRunner(onnx_path, echo))
            else:
                runners.append(OrtWebRunner(onnx_path))
        except (PorterError, ImportError) as e:
            skipped[peer] = str(e)
            echo(f"skipping {peer}: {e}")
    return runners, skipped


# --- the run and its report -------------------------------------------------------------------


def _summary(values: list[float]) -> dict:
    return {"min": min(values), "median": statistics.median(values), "runs": len(values)}


def warm_up(runners: list, cases: list, skipped: dict, echo=print) -> list:
    """One run of every runner on every case, so first-call costs (compilation, page faults)
    stay out of the timing; a peer that fails here is skipped with the reason, porter is not."""
    ready = []
    for runner in runners:
        try:
            for case in cases:
                runner.run(case, 1)
        except PorterError as e:
            if runner.name == PORTER:
                raise
            peer = getattr(runner, "peer", runner.name)
            skipped[peer] = f"failed on its first run: {e}"
            echo(f"skipping {peer}: {skipped[peer]}")
            continue
        getattr(runner, "load_ms", {}).clear()
        ready.append(runner)
    return ready


def run_rounds(runners: list, cases: list[Case], rounds: int, iterations: int, timings: Timings,
               after_round=lambda: None) -> None:
    kept = [timings.stages, *(runner.stages for runner in runners if isinstance(runner, PorterRunner))]
    for stages in (by_part for by_case in kept for by_part in by_case.values()):
        stages.clear()  # the warm-up's stage times are not kept
    for _ in range(rounds):
        for case in cases:
            for runner in runners:
                timings.add(runner.name, case.name, runner.run(case, iterations))
        after_round()


def build_report(module, onnx_path: Path | None, cases: list[Case], runners: list, timings: Timings,
                 startup: dict, skipped: dict, rounds: int, iterations: int) -> dict:
    results = {}
    for case in cases:
        porter_median = statistics.median(timings.ms[(PORTER, case.name)])
        per_runner = {}
        for runner in runners:
            s = _summary(timings.ms[(runner.name, case.name)])
            per_runner[runner.name] = {**s, "ratio_to_porter": s["median"] / porter_median}
        stages = timings.stages[case.name]
        if isinstance(case, DecoderCase):
            results[case.name] = {"runners": per_runner, "prompt_tokens": len(case.prompt),
                                  "tokens_per_second": {name: 1000 / r["median"] for name, r in per_runner.items()}
                                  if case.per_token else None}
            continue
        results[case.name] = {
            "live_tokens": case.live, "runners": per_runner,
            "porter_stages_ms": {part: statistics.median(stages[part]) for part in ("matmul", "attention", "other")},
            "porter_rows_computed": int(statistics.median(stages["rows"]))}
    return {"format": BENCH_FORMAT, "wasm": str(module.wasm), "model": str(module.model),
            "onnx": str(onnx_path) if onnx_path else None, "seq": module.seq,
            "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                        "cpus": os.cpu_count(), "cpu": host_cpu()},
            "kernel_variant": kernel_variant(module.compiled_dir),
            "rounds": rounds, "iterations_per_round": iterations, "threads": 1,
            "cases": results, "porter_startup_ms": startup, "skipped": skipped,
            "peer_startup_ms": {runner.name: {case: _summary(ms) for case, ms in runner.load_ms.items()}
                                for runner in runners if getattr(runner, "load_ms", None)}}


def report_lines(report: dict) -> list[str]:
    cpu = report.get("machine", {}).get("cpu")
    lines = [machine_line(cpu, report.get("kernel_variant"))] if cpu else []
    for case, r in report["cases"].items():
        lines.append(f"{case}:" if "live_tokens" not in r else
                     f"{case} ({r['live_tokens']} live tokens of {report['seq']}):")
        width = max(28, *map(len, r["runners"]))
        lines.append(f"  {'runner':{width}s} {'min ms':>9s} {'median ms':>10s} {'x porter':>9s}")
        for name, s in r["runners"].items():
            lines.append(f"  {name:{width}s} {s['min']:9.2f} {s['median']:10.2f} {s['ratio_to_porter']:9.2f}")
        if "porter_stages_ms" not in r:
            if r.get("tokens_per_second"):
                lines.append("  tokens per second (median): " + ", ".join(
                    f"{name} {tps:.1f}" for name, tps in r["tokens_per_second"].items()))
            continue
        st = r["porter_stages_ms"]
        lines.append(f"  porter stages (median ms): matmul {st['matmul']:.2f}, attention {st['attention']:.2f}, "
                     f"other {st['other']:.2f}; rows computed {r['porter_rows_computed']}")
    lines += module_lines(report.get("modules", []))
    s = report["porter_startup_ms"]
    lines.append(f"porter start-up: instantiate {s['instantiate']['median']:.3f} ms median "
                 f"(min {s['instantiate']['min']:.3f}), model load {s['model_load']['median']:.4f} ms median")
    for name, by_case in report.get("peer_startup_ms", {}).items():
        lines.append(f"{name} start-up, per instance (model parse + optimise): " + ", ".join(
            f"{case} {s['median']:.1f} ms median (min {s['min']:.1f})" for case, s in by_case.items()))
    if report.get("roofline"):
        lines += roofline_lines(report["roofline"])
    return lines


def module_lines(modules: list[dict]) -> list[str]:
    """Each timed module's size and scheme; with --also, every module's stages too."""
    lines = []
    for m in modules:
        lines.append(f"{m['name']}: {m['wasm_bytes'] / 2**20:.1f} MiB module, {m['scheme']}")
        if len(modules) > 1:
            lines += [f"  {case}: matmul {st['matmul']:.2f}, attention {st['attention']:.2f}, other {st['other']:.2f} ms"
                      for case, st in m["stages_ms"].items()]
    return lines


def write_chart(path: Path, report: dict) -> None:
    """Median ms per runner, one group of bars per case, the min as a tick."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(report["cases"])
    names = list(report["cases"][cases[0]]["runners"])
    fig, axes = plt.subplots(1, len(cases), figsize=(5 * len(cases), 0.5 * len(names) + 2), squeeze=False)
    for ax, case in zip(axes[0], cases):
        runners = report["cases"][case]["runners"]
        medians = [runners[n]["median"] for n in names]
        ax.barh(names, medians, color=["tab:green" if n.startswith("porter") else "tab:gray" for n in names])
        ax.plot([runners[n]["min"] for n in names], names, "k|", markersize=12, label="min")
        for y, n in enumerate(names):
            ax.text(medians[y], y, f" {medians[y]:.1f} ms ({runners[n]['ratio_to_porter']:.1f}x)", va="center",
                    fontsize="small")
        ax.set_xlim(0, max(medians) * 1.5)
        ax.invert_yaxis()
        ax.set_xlabel("forward pass, median ms (one thread)")
        ax.set_title(case)
    axes[0][0].legend(loc="lower right", fontsize="small")
    fig.suptitle(f"porter bench: {Path(report['model']).name}")
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    plt.close(fig)
    write_atomic(path, png.getvalue())


def scheme_of(ir: dict) -> str:
    """The Linear layers' weight format and activation quantisation, as ir.json names them."""
    forms = sorted({(s["linear"]["weights"], s["linear"]["activation_quant"])
                    for s in ir.get("steps", []) if isinstance(s, dict) and "linear" in s})
    if not forms and any(str(s.get("op", "")).startswith("ort_") for s in ir.get("steps", []) if isinstance(s, dict)):
        return "onnxruntime QDQ: int8 weights, quantised activations, op by op"
    return "; ".join(f"weights {w}, activations {a}" for w, a in forms) or "no Linear layers"


def other_modules(module, ir: dict, also: tuple[Path, ...], timings: Timings) -> list[PorterRunner]:
    """Runners for --also: other builds of the same network (another scheme, another export),
    timed in the same interleaved rounds; each must take the same window and vocabulary."""
    runners = []
    for target in also:
        other = locate_module(target)
        other_ir = json.loads((other.compiled_dir / "ir.json").read_text())
        if other.kind != module.kind or ir.get("kind") == "decoder":
            raise PorterError(f"--also {target}: only encoder modules are compared with --also")
        if (other.seq, other_ir.get("vocab")) != (module.seq, ir.get("vocab")):
            raise PorterError(f"--also {target}: window {other.seq} and vocabulary {other_ir.get('vocab')}, "
                              f"not {module.seq} and {ir.get('vocab')} as {module.model.name}'s")
        runners.append(PorterRunner(other.wasm, timings, other_ir, f"porter {other.model.name}", stages={}))
    if len({runner.name for runner in runners} | {PORTER}) != len(runners) + 1:
        raise PorterError("--also: two modules compiled from files of the same name")
    return runners


def module_facts(runner: PorterRunner) -> dict:
    """A timed module's size, scheme and median stage times per case."""
    return {"name": runner.name, "model": runner.ir["source"], "wasm_bytes": runner.wasm_path.stat().st_size,
            "scheme": scheme_of(runner.ir),
            "stages_ms": {case: {part: statistics.median(by_part[part]) for part in ("matmul", "attention", "other")}
                          for case, by_part in runner.stages.items() if by_part.get("matmul")}}


def bench(target: Path, onnx_path: Path | None = None, peers: list[str] = PEERS, rounds: int = 5,
          iterations: int = 3, json_path: Path | None = None, png_path: Path | None = None, echo=print,
          service_dir: Path | None = None, service_hosts: tuple[str, ...] = ("wasmtime",),
          also: tuple[Path, ...] = (), golden: Path | None = None) -> dict:
    if rounds < 1 or iterations < 1:
        raise PorterError("--rounds and --iterations must be at least 1")
    unknown = sorted(set(peers) - set(PEERS))
    if unknown:
        raise PorterError(f"unknown peer {', '.join(unknown)}; choose from {', '.join(PEERS)}")
    if onnx_path is not None and not onnx_path.is_file():
        raise PorterError(f"{onnx_path}: no such ONNX file")
    if service_dir is not None:
        from porter.bench.service import service_plan

        service_plan(service_dir, SHORT_TOKENS)  # fail before the long part
    module = locate_module(target)
    ir = json.loads((module.compiled_dir / "ir.json").read_text())
    timings = Timings()
    if ir.get("kind") == "decoder":
        if golden is not None:
            raise PorterError("--golden gives an encoder's windows; a decoder is timed on a random prompt")
        cases, ids = make_decoder_cases(int(ir["vocab"])), "random prompt (seed 0)"
        porter = DecoderPorterRunner(module.wasm, timings)
        peer_runners = [DecoderOrtRunner(module.model, ir)] if "ort" in peers else []
        skipped = {peer: "decoders are compared with onnxruntime native only" for peer in peers if peer != "ort"}
    else:
        cases, ids = make_cases(module.seq, int(ir["vocab"])), "random (seed 0)"
        if golden is not None:
            cases, ids = text_cases(golden, module.seq, int(ir["vocab"]))
        porter = PorterRunner(module.wasm, timings, ir)
        peer_runners, skipped = make_peers(list(peers), module.model, ir, onnx_path, echo)
    others = other_modules(module, ir, tuple(also), timings)
    runners = [porter, *others, *peer_runners]
    floor_rounds: list[dict] = []  # the roofline's floors, measured after every round (encoders)

    def after_round() -> None:
        if ir.get("kind") != "decoder":
            floor_rounds.append(measure_floors(ir))

    echo(f"porter bench: {module.model.name}, {len(runners)} runners x {len(cases)} cases x "
         f"{rounds} rounds x {iterations} runs, interleaved; token ids {ids}")
    try:
        runners = warm_up(runners, cases, skipped, echo)
        run_rounds(runners, cases, rounds, iterations, timings, after_round)
    finally:
        for runner in peer_runners:
            getattr(runner, "close", lambda: None)()
    model_load = [ms for case in cases for ms in timings.stages[case.name]["model_load"]]
    startup = {"instantiate": _summary(instantiate_ms(module.wasm, max(10, rounds * iterations))),
               "model_load": _summary(model_load)}
    report = build_report(module, onnx_path, cases, runners, timings, startup, skipped, rounds, iterations)
    report["modules"] = [module_facts(r) for r in runners if isinstance(r, PorterRunner)]
    report["token_ids"] = ids
    if floor_rounds:
        report["roofline"] = roofline_report(ir, {c.name: c.live for c in cases}, timings.stages, floor_rounds)
    for line in report_lines(report):
        echo(line)
    if service_dir is not None:
        from porter.bench.service import bench_service

        report["service"] = bench_service(service_dir, SHORT_TOKENS, rounds * iterations, service_hosts, echo)
    json_path = json_path or module.compiled_dir / "bench.json"
    png_path = png_path or module.compiled_dir / "bench.png"
    write_atomic(json_path, (json.dumps(report, indent=1) + "\n").encode())
    write_chart(png_path, report)
    echo(f"wrote {json_path} and {png_path}")
    return report
