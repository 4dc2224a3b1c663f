"""Start-up: `jetfleet --help` loads no command's module (no grpc, numpy, protobuf or torch; not even click: the
console script prints the root help itself, the very text click prints), and a command loads only what it needs.
The time it takes is a benchmark's (bench/cli.py), not a test's."""

import json
import os
import sys

import click
import pytest

from jetfleet.cli.main import COMMANDS, cli

from . import procs

HEAVY = ("grpc", "numpy", "torch", "google.protobuf", "matplotlib", "cryptography", "asyncio", "jetfleet.client",
         "jetfleet.shared.proto")


def loaded_by(*args):
    """The modules a fresh interpreter has loaded after running `jetfleet ARGS` through the console script's
    entry point."""
    code = (f"import sys, json\nsys.argv = ['jetfleet', *{list(args)!r}]\nfrom jetfleet.cli.entry import main\ntry:\n    main()\n"
            "except SystemExit:\n    pass\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)")
    r = procs.run([sys.executable, "-c", code], timeout=120)
    return set(json.loads(r.stderr.splitlines()[-1]))


def heavy_in(modules):
    return sorted(m for m in modules if m.startswith(HEAVY))


def test_help_loads_no_command_module_and_nothing_heavy():
    mods = loaded_by("--help")
    assert heavy_in(mods) == [] and "click" not in mods
    assert sorted(m for m in mods if m.startswith("jetfleet")) == ["jetfleet", "jetfleet.cli", "jetfleet.cli.commands",
                                                                   "jetfleet.cli.entry"]


@pytest.mark.parametrize("columns", ["40", "60", "78", "80", "100", "250"])
def test_the_root_help_is_exactly_the_one_click_prints(columns):
    env = {**os.environ, "COLUMNS": columns}
    fast = procs.run([sys.executable, "-c", "import sys; sys.argv = ['jetfleet', '--help']\n"
                           "from jetfleet.cli.entry import main; main()"], env=env,
                     timeout=60)
    slow = procs.run([sys.executable, "-c", "from jetfleet.cli.main import cli; cli(['--help'], "
                           "prog_name='jetfleet')"], env=env, timeout=60)
    assert fast.returncode == slow.returncode == 0
    assert fast.stdout == slow.stdout and "Commands:\n  agent " in fast.stdout


def test_config_show_needs_no_grpc():
    mods = loaded_by("config", "show")
    assert "jetfleet.client.settings" in mods
    assert sorted(m for m in mods if m.startswith(("grpc", "google.protobuf", "numpy", "torch", "jetfleet.client.core"))) == []


@pytest.mark.parametrize("args", [("devices", "ls", "--help"), ("modes", "--help"), ("profile", "start", "--help"),
                                  ("job", "submit", "--help"), ("certs", "--help")])
def test_a_commands_help_loads_its_module_only(args):
    mods = loaded_by(*args)
    assert heavy_in(mods) == [], args


def test_every_listed_command_resolves_and_its_one_line_help_is_the_commands():
    ctx = click.Context(cli)
    for name, (_, short) in COMMANDS.items():
        cmd = cli.get_command(ctx, name)
        assert cmd is not None, name
        assert click.Command(name, help=short).get_short_help_str(500) == cmd.get_short_help_str(500), name
