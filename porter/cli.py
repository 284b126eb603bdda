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
def inspect(model, as_json):
    """Report a model's signature, ops, constant data, weight quantisation and options."""
    import json

    from porter.inspect import format_report, inspect_model

    report = inspect_model(model)
    click.echo(json.dumps(report, indent=2) if as_json else format_report(report))
