"""The `porter` command line. Each subcommand is a thin shell over one stage module."""

import sys

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
