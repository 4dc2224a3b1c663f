"""The ``jetfleet`` console script: the root help from ``jetfleet.cli.commands`` (no click needed), anything else
through the click command (``jetfleet.cli.main``)."""

from __future__ import annotations

import os
import sys


def main() -> None:
    """Run ``jetfleet`` with the process's arguments."""
    if sys.argv[1:] in (["--help"], ["-h"]) and not os.environ.get("_JETFLEET_COMPLETE"):
        from jetfleet.cli.commands import root_help

        sys.stdout.write(root_help())
        sys.stdout.flush()
        return
    from jetfleet.cli.main import cli

    cli(prog_name="jetfleet")
