"""`python -m porter` is the `porter` command (the Spin manifest's build step runs porter so)."""

from porter.cli import main

main(prog_name="porter")
