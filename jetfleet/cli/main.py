"""The ``jetfleet`` command. Groups are thin: they parse, call library code, and print.

Each top-level command's module is imported only when that command runs. A new top-level command is one line of
``COMMANDS`` (``jetfleet/cli/commands.py``): its name, ``module:attribute``, and the one-line help the root help
lists (a test checks it matches the command's)."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from jetfleet.cli.commands import COMMANDS, HELP_OPTION, ROOT_HELP, VERBOSE_HELP, terminal_width


class LazyGroup(click.Group):
    """A group whose subcommands are imported when used; usage errors and interrupts are reported the way
    ``jetfleet.cli.common`` reports every error (JSON with --output json, the documented exit codes)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command name, loaded or not."""
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        """The command ``name``, importing its module the first time."""
        if name not in self.commands and name in COMMANDS:
            module, _, attr = COMMANDS[name][0].partition(":")
            self.add_command(getattr(importlib.import_module(module), attr), name)
        return self.commands.get(name)

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        """The root context, told the terminal's width: click would ask shutil, whose import (with bz2 and lzma)
        costs --help a fifth of its start-up."""
        if parent is None and "terminal_width" not in extra:
            extra["terminal_width"] = terminal_width()
        return super().make_context(info_name, args, parent, **extra)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of --help from COMMANDS' one-line help, without importing a module."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max((len(n) for n in names), default=0)
        rows = [(name, (self.commands.get(name) or click.Command(name, help=COMMANDS[name][1])).get_short_help_str(limit))
                for name in names]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        """Run the command line; in standalone mode (the default) every failure exits with its documented code."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        argv = list(sys.argv[1:] if args is None else args)
        try:
            rv = super().main(argv, prog_name, complete_var, False, **extra)
        except click.exceptions.UsageError as e:
            from jetfleet.cli.common import EXIT_USAGE, fail, wants_json

            if type(e).__name__ == "NoArgsIsHelpError" and not wants_json(argv):   # a group without its command
                click.echo(e.format_message(), err=True)
                sys.exit(EXIT_USAGE)
            hint = f" (try: {e.ctx.command_path} --help)" if e.ctx is not None else ""
            param = getattr(e, "param", None)
            field = param.name if param is not None else getattr(e, "option_name", None)
            fail("USAGE", e.format_message() + hint, json_output=wants_json(argv),
                 field=str(field).lstrip("-").replace("-", "_") if field else None)
        except click.ClickException as e:
            from jetfleet.cli.common import fail, wants_json

            fail("INTERNAL" if e.exit_code == 1 else "USAGE", e.format_message(), json_output=wants_json(argv))
        except click.exceptions.Abort:   # Ctrl-C outside a command that says more
            from jetfleet.cli.common import fail, wants_json

            fail("INTERRUPTED", "interrupted", json_output=wants_json(argv))
        sys.exit(rv if isinstance(rv, int) and 0 <= rv <= 255 else 0)


@click.group(cls=LazyGroup, help=ROOT_HELP,
             context_settings={"auto_envvar_prefix": "JETFLEET", "help_option_names": list(HELP_OPTION)})
@click.option("-v", "--verbose", count=True, help=VERBOSE_HELP)
@click.version_option(package_name="jetfleet")
def cli(verbose: int) -> None:  # noqa: D103 - its help is ROOT_HELP (jetfleet.cli.commands)
    import logging  # not at import time: `jetfleet --help` need not load it

    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
