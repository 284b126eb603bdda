#!/usr/bin/env python3
"""Run the porter CLI from a checkout: `python cli.py doctor` is `porter doctor`."""

from porter.cli import main

if __name__ == "__main__":
    main()
