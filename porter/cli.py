"""The `porter` command line. Each subcommand is a thin shell over one stage module."""

import re
import sys
import traceback
from pathlib import Path

import click

from porter.errors import PorterError

# porter.codegen.decoder.QUANT_MODES and porter.serve.redact.DEFAULT_REQUEST_BUDGET_MS, spelled
# here so that --help imports nothing heavy
QUANT_MODES = ("float32", "q8_0", "q8_0_int8")
# porter.reference.ort.cpu.choices(), likewise
ORT_CPU_CHOICES = "auto|avx2|avxvnni|avx512|avx512vnni"
ORT_CPU_HELP = (f"ONNX graphs: the CPU whose onnxruntime arithmetic to reproduce ({ORT_CPU_CHOICES}); "
                "auto: the golden's CPU where a golden that records one is given, else this machine's.")


L1D_HELP = ("TFLite graphs: the L1 data cache size (like 32K or 48K) of the CPU whose LiteRT float products "
            "to reproduce (Eigen blocks deep ones by it); auto: the golden's where one is given, else this machine's.")


def ort_cpu_option(function):
    """--ort-cpu and --l1d: whose CPU's arithmetic a program reproduces (both vary by CPU)."""
    function = click.option("--l1d", "l1d", default="auto", show_default=True, metavar="SIZE", help=L1D_HELP)(function)
    return click.option("--ort-cpu", "ort_cpu", default="auto", show_default=True, metavar="TARGET",
                        help=ORT_CPU_HELP)(function)


REQUEST_BUDGET_MS = 20_000
# An unexpected exception is porter's fault, not the input's: its own exit code.
INTERNAL_ERROR_EXIT = 3
# File contents reach messages (tensor and node names): a newline or escape sequence in one
# must not break the one-line promise or drive the terminal, and a name of megabytes must not
# make the line a dump.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")
LINE_LIMIT = 1000  # characters of a message; longer ones keep their start and end


def one_line(text: str) -> str:
    text = CONTROL_CHARACTERS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    if len(text) <= LINE_LIMIT:
        return text
    return f"{text[:LINE_LIMIT * 3 // 4]} ... ({len(text) - LINE_LIMIT} characters left out) ... {text[-LINE_LIMIT // 5:]}"


class PorterGroup(click.Group):
    """The last line of defence: PorterError becomes one `porter: error:` line and exit 2; any
    other exception (a bug) one `porter: internal error:` line naming the command and its file,
    and exit 3. --debug adds the traceback."""

    def resolve_command(self, ctx, args):
        # Remembered so that an internal error can name the command and the file it was given
        # (a copy of its arguments: parsing them consumes the list).
        name, command, rest = super().resolve_command(ctx, args)
        ctx.meta["porter.command"] = name, command, list(rest)
        return name, command, rest

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except PorterError as e:
            click.echo(f"porter: error: {one_line(str(e))}", err=True)
            sys.exit(e.exit_code)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as e:
            if ctx.params.get("debug"):
                traceback.print_exc()
            detail = one_line(" ".join(str(e).split())) or "no message"
            click.echo(f"porter: internal error: {self.what_was_running(ctx)}: {type(e).__name__}: {detail} "
                       f"(a bug in porter{'' if ctx.params.get('debug') else '; --debug shows the traceback'})",
                       err=True)
            sys.exit(INTERNAL_ERROR_EXIT)

    @staticmethod
    def what_was_running(ctx) -> str:
        """`porter COMMAND FILE`: the subcommand and its first path argument, as given."""
        name, command, args = ctx.meta.get("porter.command", (None, None, []))
        if command is None:
            return "porter"
        parsed = command.make_context(name, list(args), parent=ctx, resilient_parsing=True).params
        paths = [parsed.get(p.name) for p in command.params if isinstance(p, click.Argument)]
        return " ".join(["porter", name] + [one_line(str(p)) for p in paths[:1] if p is not None])


@click.group(cls=PorterGroup)
@click.version_option(package_name="porter")
@click.option("--debug", is_flag=True, help="On an internal error (a bug), print its traceback too.")
def main(debug):
    """Compile small transformer models into Rust + wasm simd128 forward passes."""


# Subcommands. Each is a thin shell over one stage module, imported lazily so that
# `porter --help` stays fast. Keep them in data-flow order.


@main.command()
@click.option("--root", type=click.Path(path_type=Path), default=Path("/"), hidden=True,
              help="Look for system packages under this root instead of / (for tests).")
def doctor(root):
    """Check the wasm toolchain and runtimes; print how to install what is missing."""
    from porter.toolchain.discover import discover

    report = discover(root)
    for finding in report.findings:
        click.echo(finding.line())
    for finding in report.optional:
        click.echo(finding.line(optional=True))
    if report.ok:
        click.echo(f"porter doctor: all {len(report.findings)} checks passed "
                   f"({report.toolchain.route} toolchain; optional: {len([f for f in report.optional if f.ok])} "
                   f"of {len(report.optional)} found)")
        return
    click.echo(f"porter doctor: {len(report.missing)} of {len(report.findings)} missing", err=True)
    sys.exit(1)


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the stable JSON report (schema porter.inspect/1).")
@click.option("--ir", "show_ir", is_flag=True,
              help="Print the recovered encoder architecture (the IR) instead of the graph report.")
@ort_cpu_option
def inspect(model, as_json, show_ir, ort_cpu, l1d):
    """Report a model's signature, ops, constant data, weight quantisation and options."""
    import json

    if show_ir:
        from porter.codegen.compile import recover
        from porter.ir.describe import format_ir

        ir = recover(model, ort_cpu, l1d)
        click.echo(json.dumps(ir.summary(), indent=1, default=float) if as_json else format_ir(ir))
        return
    from porter.frontends import load_graph
    from porter.frontends.inspect import format_report, inspect_model
    from porter.frontends.schemes import is_onnxruntime_qdq
    from porter.recover.canonical.ort_qdq import kernels_of_file_ops

    report = inspect_model(model)
    graph = load_graph(model)
    if is_onnxruntime_qdq(graph):  # which kernel onnxruntime runs each layer in (its QDQ transformers)
        try:
            kernels = kernels_of_file_ops(graph)
        except PorterError:  # a rewrite porter does not model: `porter compile` names it
            kernels = {}
        for layer in report["schemes"]["layers"]:
            layer["onnxruntime_runs"] = kernels.get(layer["op"])
    click.echo(json.dumps(report, indent=2) if as_json else format_report(report))


@main.command("compile")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=Path), required=True,
              help="Directory for the crate (with model.bin, layout.json, ir.json).")
@click.option("--quant", type=click.Choice(QUANT_MODES),
              help="Decoders: float32 weights (the default); q8_0 weights; or q8_0_int8, q8_0 weights "
                   "times inputs quantised to q8_0 in integers (faster; not onnxruntime's arithmetic).")
@click.option("--context", type=click.IntRange(min=1),
              help="Decoders: the longest prompt + generation the module serves (needed when the graph "
                   "computes its positions for any length; at most a learned position table's rows).")
@click.option("--window", type=click.IntRange(min=1),
              help="Encoders whose graph leaves the sequence length symbolic (dynamic axes): the tokens "
                   "per window to compile for (default: the position table's rows); the batch is 1.")
@ort_cpu_option
def compile_cmd(model, out_dir, quant, context, window, ort_cpu, l1d):
    """Recover the IR from MODEL (an encoder, or a decoder with a KV cache); write the Rust crate,
    model.bin, layout.json and ir.json."""
    from porter.codegen.compile import compile_model
    from porter.ir.decoder import DecoderIR

    ir = compile_model(model, out_dir, quant, ort_cpu, context, l1d, window)
    target = f", onnxruntime on {ir.ort_cpu} CPUs" if ir.ort_cpu else ""
    if getattr(ir, "eigen_l1d", None) and any(lin.weights.value == "float32" for lin in ir.linears()):
        target = f", float products blocked for a {ir.eigen_l1d // 1024} KiB L1"
    if isinstance(ir, DecoderIR):
        size_mb = (Path(out_dir) / "model.bin").stat().st_size / 1e6
        click.echo(f"{model}: decoder, {len(ir.layers)} layers, hidden {ir.hidden}, {ir.heads} heads, "
                   f"FFN {ir.ffn}, vocab {ir.vocab}, context {ir.n_ctx}, {quant or 'float32'} weights "
                   f"(model.bin {size_mb:.1f} MB){target} -> {out_dir}")
        return
    output = f"{ir.width} values per token" if ir.output_tokens else f"{ir.width} values per window"
    click.echo(f"{model}: encoder, {len(ir.steps)} steps ({len(ir.attentions())} attention blocks), "
               f"vocab {ir.vocab}, window {ir.seq}, {output}, mask {ir.mask.value}, "
               f"{ir.reference.value} arithmetic{target} -> {out_dir}")


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--golden", "golden_path", type=click.Path(path_type=Path),
              help="Run every window of this golden and compare with its logits.")
@click.option("--ids", help="Comma-separated token ids for one window (padded with 0).")
@click.option("--dump", type=click.Path(path_type=Path),
              help="Write every intermediate of the first window to this .npz file.")
@click.option("--locate", is_flag=True,
              help="Run the reference runtime (LiteRT's builtin kernels, or onnxruntime) on the "
                   "first window and report the first step whose output differs.")
@ort_cpu_option
def run(model, golden_path, ids, dump, locate, ort_cpu, l1d):
    """Run MODEL's recovered program in the numpy executor (the reference's arithmetic)."""
    from porter.check import run as runner

    runner.run_command(model, golden_path, ids, dump, locate, click.echo, ort_cpu, l1d)


def golden_source_options(command):
    """The options that say what a golden is made from (`porter golden`, `porter check`)."""
    options = [
        click.option("--texts", type=click.Path(path_type=Path),
                     help="Texts to window as the redaction service does: one per line, or a JSON list."),
        click.option("--tokenizer", type=click.Path(path_type=Path),
                     help="The model's tokenizer.json (for --texts, and for text --prompts)."),
        click.option("--pad-id", type=int, help="Padding id for --texts (default: the tokenizer's)."),
        click.option("--random", "random_windows", type=int, metavar="N",
                     help="N seeded windows of random ids and varied live lengths (no tokenizer needed)."),
        click.option("--seed", type=int, default=0, show_default=True, help="Seed for --random."),
        click.option("--prompts", type=click.Path(path_type=Path),
                     help="Decoders: prompts, one text per line or a JSON list of texts or id lists."),
        click.option("--steps", type=int, help="Decoders: greedy tokens generated per prompt."),
        click.option("--mode", type=click.Choice(["builtin", "xnnpack", "ort"]),
                     help="Reference kernels: LiteRT builtin (default for .tflite) or xnnpack; "
                          "ort for .onnx."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("-o", "--out", "out", type=click.Path(path_type=Path), required=True,
              help="The golden to write: OUT.npz and OUT.json.")
@golden_source_options
def golden(model, out, texts, tokenizer, pad_id, random_windows, seed, prompts, steps, mode):
    """Run the reference runtime on MODEL and write a golden in porter's format."""
    from porter.check.make_golden import make_golden

    written = make_golden(model, out, texts=texts, tokenizer=tokenizer, random=random_windows, seed=seed,
                          prompts=prompts, steps=steps, mode=mode, pad_id=pad_id, echo=click.echo)
    click.echo(f"wrote {written} and {written.with_suffix('.json')}")


@main.command()
@click.argument("target", type=click.Path(path_type=Path))
@click.option("--golden", "goldens", multiple=True, required=True, type=click.Path(path_type=Path),
              help="Golden to compare with, gated by the thresholds and the baseline (repeatable).")
@click.option("--compare", "compares", multiple=True, type=click.Path(path_type=Path),
              help="Golden to compare with and report only, never gated (repeatable).")
@click.option("--baseline", type=click.Path(path_type=Path),
              help="Require the module's logits to be bit-identical to this baseline .npz.")
@click.option("--write-baseline", "write_baseline_to", type=click.Path(path_type=Path),
              help="Write the module's logits on the --golden windows as a baseline .npz.")
@click.option("--min-label-agreement", type=float, default=1.0, show_default=True,
              help="Lowest label agreement on live tokens (decoders: greedy tokens) that passes, per --golden.")
@click.option("--max-abs", type=float, default=0.05, show_default=True,
              help="Largest |dlogit| on live tokens that passes, per --golden.")
@click.option("--report", "report_path", type=click.Path(path_type=Path),
              help="JSON report (porter.verify/1); default verify-report.json in the compiled directory.")
@click.option("--plot", "plot_path", type=click.Path(path_type=Path),
              help="PNG histogram of |dlogit|; default verify-dlogit.png in the compiled directory.")
@click.option("--timeout", "timeout_per_window_s", type=float, default=60.0, show_default=True,
              help="Seconds per window (decoders: per prompt) before the epoch deadline interrupts the module.")
@click.option("--model", type=click.Path(path_type=Path),
              help="The model TARGET was compiled from, when the path in its ir.json does not lead there from here.")
def verify(target, goldens, compares, baseline, write_baseline_to, min_label_agreement, max_abs,
           report_path, plot_path, timeout_per_window_s, model):
    """Run the module built in TARGET (a compiled directory or its .wasm) on golden windows, or
    for a decoder on golden prompts (greedy tokens and logits)."""
    from porter.check.verify import Thresholds, verify as run_verify

    report = run_verify(target, list(goldens), list(compares), baseline, write_baseline_to,
                        Thresholds(min_label_agreement, max_abs), report_path, plot_path,
                        timeout_per_window_s, click.echo, model)
    if not report["passed"]:
        sys.exit(1)


@main.command("check")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--golden", "goldens", multiple=True, type=click.Path(path_type=Path),
              help="Golden to verify against (repeatable); or make one with --texts, --random or --prompts.")
@golden_source_options
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=Path), default=Path("porter-check"),
              show_default=True,
              help="Directory for the compiled crate and module, report.json, junit.xml and summary.md.")
@click.option("--quant", type=click.Choice(QUANT_MODES), help="Decoders: how weights are stored (see `porter compile`).")
@click.option("--min-label-agreement", type=float, default=1.0, show_default=True,
              help="Lowest label agreement on live tokens (decoders: greedy tokens) that passes.")
@click.option("--max-abs", type=float, default=0.05, show_default=True,
              help="Largest |dlogit| that passes.")
@click.option("--timeout", "timeout_s", type=float, default=60.0, show_default=True,
              help="Seconds per window (decoders: per prompt) before the module is interrupted.")
def check_cmd(model, goldens, texts, tokenizer, pad_id, random_windows, seed, prompts, steps, mode, out_dir,
              quant, min_label_agreement, max_abs, timeout_s):
    """Compile, build and verify MODEL as CI does; write report.json, junit.xml and summary.md.

    Exits 0 when verification passes, 1 when it fails, 2 when the model cannot be compiled
    (or built, or checked), with the reason on one line."""
    from porter.check.ci import GoldenSource, check
    from porter.check.verify import Thresholds

    source = GoldenSource(texts, tokenizer, pad_id, random_windows, seed, prompts, steps, mode)
    result = check(model, out_dir, list(goldens), source, Thresholds(min_label_agreement, max_abs), quant,
                   timeout_s, click.echo)
    click.echo(f"report {result.report_path}, JUnit {result.junit_path}, summary {result.summary_path}")
    if result.error is not None:
        click.echo(f"porter: error: {' | '.join(result.error.splitlines())}", err=True)
    else:
        click.echo(f"porter check: {'PASS' if result.passed else 'FAIL'} ({result.report['total_seconds']:.1f} s)")
    sys.exit(result.exit_code)


@main.command()
@click.argument("target", type=click.Path(path_type=Path), required=False)
@click.option("--onnx", "onnx_path", type=click.Path(path_type=Path),
              help="An ONNX export of the same network, for the onnxruntime peers.")
@click.option("--peers", default=",".join(("litert-builtin", "litert-xnnpack", "ort", "ort-web", "tract")),
              show_default=True, help="Comma-separated peers to run beside porter.")
@click.option("--rounds", type=int, default=5, show_default=True,
              help="Rounds; each runs every runner on every case, interleaved.")
@click.option("--iterations", type=int, default=3, show_default=True, help="Forward passes per runner per round.")
@click.option("--json", "json_path", type=click.Path(path_type=Path),
              help="Where to write the JSON results (default: TARGET/bench.json).")
@click.option("--png", "png_path", type=click.Path(path_type=Path),
              help="Where to write the chart (default: TARGET/bench.png).")
@click.option("--service", "service_dir", type=click.Path(path_type=Path),
              help="A built redaction service (OUT_DIR of serve-build): also time 20-token and "
                   "one-window requests served by --host, from their Server-Timing (alone, without TARGET).")
@click.option("--host", "hosts", default="wasmtime", show_default=True, metavar="wasmtime,spin",
              help="What serves --service: wasmtime (`porter serve`), spin (`spin up` from the manifest "
                   "`porter deploy` writes), or both, comma-separated: served at once, requests alternating.")
@click.option("--also", "also", type=click.Path(path_type=Path), multiple=True,
              help="Another built module of the same network (another scheme or export), timed in the same "
                   "interleaved rounds; repeatable.")
@click.option("--golden", "golden", type=click.Path(path_type=Path),
              help="Time text instead of random token ids: this golden's first window whose every token is "
                   "live, and its first 20 tokens (attention's speed depends on the tokens).")
def bench(target, onnx_path, peers, rounds, iterations, json_path, png_path, service_dir, hosts, also, golden):
    """Time the eval module built in TARGET against LiteRT and onnxruntime, side by side; and/or a
    served redaction component (--service)."""
    from porter.bench.service import parse_hosts

    chosen_hosts = tuple(parse_hosts(hosts))
    if target is None:
        if service_dir is None:
            raise PorterError("give TARGET (a crate built by `porter build`), --service OUT_DIR, or both")
        import json

        from porter.bench.bench import SHORT_TOKENS
        from porter.bench.service import bench_service
        from porter.fsutil import write_atomic

        report = bench_service(service_dir, SHORT_TOKENS, rounds * iterations, chosen_hosts, click.echo)
        if json_path is not None:
            write_atomic(json_path, (json.dumps(report, indent=1) + "\n").encode())
        return
    from porter.bench.bench import bench as run_bench

    chosen = [p.strip() for p in peers.split(",") if p.strip()]
    run_bench(target, onnx_path, chosen, rounds, iterations, json_path, png_path, click.echo, service_dir,
              chosen_hosts, also, golden)


@main.command("serve-build")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--tokenizer", "tokenizer_json", type=click.Path(path_type=Path), required=True,
              help="The model's Hugging Face tokenizer.json.")
@click.option("--task", type=click.Choice(("redact", "embeddings", "sequence-classification", "rerank",
                                           "token-classification")),
              help="What to serve (default: what the model outputs: one row per token -> redact, a "
                   "Linear head's row -> sequence-classification, or rerank for one output, another row -> "
                   "embeddings).")
@click.option("--labels", "labels_json", type=click.Path(path_type=Path),
              help="redact: labels.json, {\"labels\": [\"O\", \"B-CAT\", ...]}, one BIOES label per output; "
                   "the classifications: a JSON list, {\"labels\": [...]} or config.json's id2label.")
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=Path), required=True,
              help="Directory for the crates, the component and service.json.")
@click.option("--pad-id", type=int, help="Padding token id (default: the tokenizer's).")
@click.option("--max-body-bytes", type=int, help="Larger request bodies get 413 (default: 64 KiB for redact, 256 KiB otherwise).")
@click.option("--max-windows", type=int, default=16, show_default=True,
              help="redact: texts needing more model windows get 413.")
@click.option("--max-batch", type=int, default=32, show_default=True,
              help="embeddings and the classifications: more inputs in one request get 413.")
@click.option("--request-budget-ms", type=int, default=REQUEST_BUDGET_MS, show_default=True,
              help="A request that would run longer (estimated between windows) stops and gets 503 "
                   "with Retry-After; keep it below the host's timeout.")
def serve_build(model, tokenizer_json, task, labels_json, out_dir, pad_id, max_body_bytes, max_windows,
                max_batch, request_budget_ms):
    """Build MODEL into a service, a wasi:http component for Spin: PII redaction, embeddings or
    sequence classification."""
    from porter.serve.encoder import serve_build as build

    sizes = {"max_body_bytes": max_body_bytes} if max_body_bytes is not None else {}
    build(model, tokenizer_json, out_dir, task=task, labels_path=labels_json, pad_id=pad_id,
          max_windows=max_windows, max_batch=max_batch, request_budget_ms=request_budget_ms,
          echo=click.echo, **sizes)


@main.command("generate-build")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--tokenizer", "tokenizer_json", type=click.Path(path_type=Path), required=True,
              help="The model's Hugging Face tokenizer.json (byte-level BPE).")
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=Path), required=True,
              help="Directory for the crates, the component (generate.wasm) and service.json.")
@click.option("--quant", type=click.Choice(QUANT_MODES), default="float32", show_default=True,
              help="How the decoder's weights are stored and multiplied (see `porter compile`).")
@click.option("--context", type=click.IntRange(min=1),
              help="The longest prompt + generation the service serves (see `porter compile`).")
@click.option("--max-body-bytes", type=int, default=16 * 1024, show_default=True,
              help="Larger request bodies get 413.")
@click.option("--max-prompt-bytes", type=int, default=4096, show_default=True,
              help="Longer prompts (UTF-8 bytes) get 413.")
def generate_build(model, tokenizer_json, out_dir, quant, context, max_body_bytes, max_prompt_bytes):
    """Build decoder MODEL into a text-generation service: a wasi:http component for Spin."""
    from porter.serve.generate import generate_build as build

    build(model, tokenizer_json, out_dir, quant=quant, context=context, max_body_bytes=max_body_bytes,
          max_prompt_bytes=max_prompt_bytes, echo=click.echo)


@main.command()
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option("--port", type=int, default=3000, show_default=True)
@click.option("--timeout", "timeout_s", type=float, default=30.0, show_default=True,
              help="Seconds a request may run before the epoch deadline interrupts it.")
def serve(out_dir, port, timeout_s):
    """Serve a built service (OUT_DIR of serve-build) with `wasmtime serve` on 127.0.0.1."""
    from porter.serve.deploy import serve as run_server

    run_server(out_dir, port, timeout_s, click.echo)


@main.command()
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.argument("spin_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- SPIN_ARGS...]")
@click.option("--up", "modes", flag_value="up", multiple=True,
              help="Run `spin up` here (the default).")
@click.option("--build", "modes", flag_value="build", multiple=True,
              help="Run `spin build`: the manifest's build command remakes OUT_DIR.")
@click.option("--cloud", "plugin", is_flag=False, flag_value="aka", default=None, metavar="[aka|cloud]",
              help="Run `spin PLUGIN deploy` with Spin's deployment plugin: aka (Akamai Functions, the "
                   "default) or cloud (Fermyon Cloud).")
@click.option("--listen", metavar="HOST:PORT", help="Where `spin up` listens (Spin's default: 127.0.0.1:3000).")
@click.option("--manifest", type=click.Path(path_type=Path),
              help="Where to write the Spin manifest (default: OUT_DIR/spin.toml).")
@click.option("--kube", "modes", flag_value="kube", multiple=True,
              help="SpinKube: write OUT_DIR/spinapp.yaml (a SpinApp) and push the app to --image with "
                   "`spin registry push`; porter runs no cluster (apply it with kubectl).")
@click.option("--image", metavar="REF", help="--kube: the OCI reference to push to and pull from, "
                                             "e.g. ghcr.io/you/generate:0.1.0.")
@click.option("--replicas", type=int, default=2, show_default=True,
              help="--kube: the pods to run (with --autoscaler: the fewest).")
@click.option("--max-replicas", type=int, default=3, show_default=True, help="--kube --autoscaler: the most pods.")
@click.option("--autoscaler", type=click.Choice(["hpa", "keda"]),
              help="--kube: scale on CPU and memory utilisation with a HorizontalPodAutoscaler or a KEDA "
                   "ScaledObject (needs --cpu-limit and --memory-limit).")
@click.option("--cpu-limit", metavar="QUANTITY", help="--kube: each pod's CPU limit, e.g. 500m.")
@click.option("--memory-limit", metavar="QUANTITY", help="--kube: each pod's memory limit, e.g. 256Mi.")
@click.option("--cpu-request", metavar="QUANTITY", help="--kube: each pod's CPU request.")
@click.option("--memory-request", metavar="QUANTITY", help="--kube: each pod's memory request.")
@click.option("--dry-run", is_flag=True, help="Write the manifests and print the spin command instead of running it.")
def deploy(out_dir, spin_args, modes, plugin, listen, manifest, image, replicas, max_replicas, autoscaler, cpu_limit,
           memory_limit, cpu_request, memory_request, dry_run):
    """Write spin.toml for OUT_DIR and hand it to spin: `spin up` (--up, the default), `spin build`
    (--build), `spin PLUGIN deploy` (--cloud) or `spin registry push` with a SpinKube manifest
    (--kube). Arguments after `--` go to spin unchanged, e.g.
    `porter deploy OUT --listen 0.0.0.0:8080 -- --runtime-config-file rc.toml`."""
    from porter.serve.deploy import deploy as run_deploy, deploy_kube
    from porter.serve.kube import Scaling

    chosen = set(modes) | ({"cloud"} if plugin else set())
    if len(chosen) > 1:
        raise PorterError(f"choose one of --up, --build, --cloud and --kube (got {', '.join(sorted('--' + m for m in chosen))})")
    mode = chosen.pop() if chosen else "up"
    scaling = Scaling(replicas, max_replicas, autoscaler, cpu_limit, memory_limit, cpu_request, memory_request)
    if mode != "kube" and (image is not None or scaling != Scaling()):
        raise PorterError(f"--image, --replicas, --autoscaler and the limits are for --kube; they do not apply to --{mode}")
    if mode == "kube":
        if listen is not None:
            raise PorterError("--listen is an address for `spin up`; it does not apply to --kube")
        deploy_kube(out_dir, image, scaling, manifest, spin_args, dry_run, click.echo)
        return
    run_deploy(out_dir, mode, manifest, listen, plugin or "aka", spin_args, dry_run, click.echo)


@main.command()
@click.argument("tokenizer_json", type=click.Path(path_type=Path))
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=Path), required=True,
              help="Directory for tokenizer.bin.")
@click.option("--crate", "crate_dir", type=click.Path(path_type=Path), default=None,
              help="Also render the Rust tokenizer crate (templates/tokenizer) with the blob here.")
def tokenizer(tokenizer_json, out_dir, crate_dir):
    """Compile a Hugging Face tokenizer.json into tokenizer.bin, read in place by Rust."""
    from porter.tokenize.compile import compile_tokenizer, render_tokenizer_crate

    blob_path = compile_tokenizer(tokenizer_json, out_dir)
    click.echo(f"wrote {blob_path} ({blob_path.stat().st_size} bytes)")
    if crate_dir is not None:
        from porter.toolchain.discover import require_toolchain

        render_tokenizer_crate(blob_path.read_bytes(), crate_dir, require_toolchain())
        click.echo(f"rendered the tokenizer crate into {crate_dir}")


@main.command()
@click.argument("crate_dir", type=click.Path(path_type=Path))
@click.option("--checks", is_flag=True, help="Build the kernel-check module (checks/) instead of the eval module.")
@click.option("--tune", is_flag=True,
              help="Time the kernels' tile shapes on a full window under wasmtime and build with the fastest "
                   "(recorded in src/tuning.rs and tuning.json).")
def build(crate_dir, checks, tune):
    """Build a crate from `porter compile` to a wasm32-wasip1 eval module."""
    import threading
    import time

    from porter.codegen.encoder import build_forward_crate, standard_library_is_cold
    from porter.toolchain.discover import require_toolchain

    toolchain = require_toolchain()
    what = "kernel checks" if checks else "eval module"
    if standard_library_is_cold(toolchain):
        click.echo("building the standard library once (a few minutes on 2 cores), then the crate")
    started = time.monotonic()
    done = threading.Event()

    def show_elapsed():
        # cargo's own output is captured for error reports; this line says it is still working.
        while not done.wait(1.0):
            click.echo(f"\r  cargo build ({what}): {time.monotonic() - started:5.0f} s", nl=False, err=True)

    spinner = threading.Thread(target=show_elapsed, daemon=True)
    spinner.start()
    try:
        if tune:
            from porter.bench.tune import tune as run_tune

            run_tune(crate_dir, toolchain, echo=lambda line: click.echo(f"\r{line:78s}"))
        wasm = build_forward_crate(crate_dir, toolchain, checks=checks)
    finally:
        done.set()
        spinner.join()
        click.echo("", err=True)
    size_mb = wasm.stat().st_size / 1e6
    click.echo(f"{wasm} ({size_mb:.1f} MB, built in {time.monotonic() - started:.0f} s)")
