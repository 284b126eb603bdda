"""The `porter` command line. Each subcommand is a thin shell over one stage module."""

import sys
from pathlib import Path

import click

from porter.errors import PorterError


class PorterGroup(click.Group):
    """Turns PorterError into one line on stderr and exit code 2, with no traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except PorterError as e:
            click.echo(f"porter: error: {e}", err=True)
            sys.exit(e.exit_code)


@click.group(cls=PorterGroup)
@click.version_option(package_name="porter")
def main():
    """Compile small transformer models into Rust + wasm simd128 forward passes."""


# Subcommands. Each is a thin shell over one stage module, imported lazily so that
# `porter --help` stays fast. Keep them in data-flow order.


@main.command()
@click.option("--root", type=click.Path(path_type=Path), default=Path("/"), hidden=True,
              help="Look for system packages under this root instead of / (for tests).")
def doctor(root):
    """Check the wasm toolchain and runtimes; print how to install what is missing."""
    from porter.toolchain import discover

    report = discover(root)
    for finding in report.findings:
        click.echo(finding.line())
    if report.ok:
        click.echo(f"porter doctor: all {len(report.findings)} checks passed "
                   f"({report.toolchain.route} toolchain)")
        return
    click.echo(f"porter doctor: {len(report.missing)} of {len(report.findings)} missing", err=True)
    sys.exit(1)


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the stable JSON report (schema porter.inspect/1).")
@click.option("--ir", "show_ir", is_flag=True,
              help="Print the recovered encoder architecture (the IR) instead of the graph report.")
def inspect(model, as_json, show_ir):
    """Report a model's signature, ops, constant data, weight quantisation and options."""
    import json

    if show_ir:
        from porter.compile import recover
        from porter.describe import format_ir

        ir = recover(model)
        click.echo(json.dumps(ir.summary(), indent=1, default=float) if as_json else format_ir(ir))
        return
    from porter.inspect import format_report, inspect_model

    report = inspect_model(model)
    click.echo(json.dumps(report, indent=2) if as_json else format_report(report))


@main.command("compile")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=Path), required=True,
              help="Directory for model.bin, layout.json and ir.json.")
def compile_cmd(model, out_dir):
    """Recover the encoder IR from MODEL and write model.bin, layout.json and ir.json."""
    from porter.compile import compile_model

    ir = compile_model(model, out_dir)
    click.echo(f"{model}: {len(ir.layers)} layers, hidden {ir.hidden}, {ir.heads} heads, "
               f"FFN {ir.ffn}, vocab {ir.vocab}, window {ir.seq}, {ir.labels} labels, "
               f"mask {ir.mask} -> {out_dir}")


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--golden", "golden_path", type=click.Path(path_type=Path),
              help="Run every window of this golden and compare with its logits.")
@click.option("--ids", help="Comma-separated token ids for one window (padded with 0).")
@click.option("--dump", type=click.Path(path_type=Path),
              help="Write every intermediate of the first window to this .npz file.")
@click.option("--locate", is_flag=True,
              help="Run LiteRT (builtin kernels) on the first window with its intermediates "
                   "preserved and report the first IR block whose output differs.")
def run(model, golden_path, ids, dump, locate):
    """Run MODEL's recovered IR in the numpy executor (LiteRT's builtin arithmetic)."""
    from porter import runner

    runner.run_command(model, golden_path, ids, dump, locate, click.echo)


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
              help="Lowest label agreement on live tokens that passes, per --golden.")
@click.option("--max-abs", type=float, default=0.05, show_default=True,
              help="Largest |dlogit| on live tokens that passes, per --golden.")
@click.option("--report", "report_path", type=click.Path(path_type=Path),
              help="JSON report (porter.verify/1); default verify-report.json in the compiled directory.")
@click.option("--plot", "plot_path", type=click.Path(path_type=Path),
              help="PNG histogram of |dlogit|; default verify-dlogit.png in the compiled directory.")
@click.option("--timeout", "timeout_per_window_s", type=float, default=60.0, show_default=True,
              help="Seconds per window before the epoch deadline interrupts the module.")
def verify(target, goldens, compares, baseline, write_baseline_to, min_label_agreement, max_abs,
           report_path, plot_path, timeout_per_window_s):
    """Run the eval module built in TARGET (a compiled directory or its .wasm) on golden windows."""
    from porter.verify import Thresholds, verify as run_verify

    report = run_verify(target, list(goldens), list(compares), baseline, write_baseline_to,
                        Thresholds(min_label_agreement, max_abs), report_path, plot_path,
                        timeout_per_window_s, click.echo)
    if not report["passed"]:
        sys.exit(1)
