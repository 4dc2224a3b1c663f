"""What the root of the ``jetfleet`` command is made of, without click: its commands (each imported only when it
runs), its help text and options, and the root help itself.

``jetfleet --help`` is printed from here by the console script (``entry.py``) without importing click, whose own
import costs about as much as starting Python; ``tests/test_cli_startup.py`` checks that the text is exactly the
one click prints for the same command at every terminal width, so the two cannot drift apart."""

from __future__ import annotations

import os
import sys

# name -> (module:attribute, the command's one-line help: `jetfleet --help` lists it without importing the module)
COMMANDS: dict[str, tuple[str, str]] = {
    "agent": ("jetfleet.cli.fleet:agent_group", "The agent that runs on every board."),
    "certs": ("jetfleet.cli.certs:certs_group",
              "The lab's certificate authority and certificates (mutual TLS between agents and controller)."),
    "completion": ("jetfleet.cli.config:completion", "Print the shell completion script for bash, zsh or fish."),
    "config": ("jetfleet.cli.config:config_group", "Where the CLI finds the controller and the TLS files."),
    "controller": ("jetfleet.cli.fleet:controller_group", "The central controller."),
    "devices": ("jetfleet.cli.devices:devices_group", "Boards known to the controller."),
    "eval": ("jetfleet.cli.evals:eval_group",
             "Reproduce PowerTrain's, Pagoda's and Fulcrum's evaluations (emulated boards, or any two profile files)."),
    "fleet": ("jetfleet.cli.power:fleet_group",
              "The lab as one power budget: caps over the boards, and the plan of the jobs under them."),
    "job": ("jetfleet.cli.jobs:job_group",
            "Training jobs under a goal: profile, transfer, choose, run, keep the goal, summarise."),
    "lab": ("jetfleet.cli.fleet:lab_group", "A controller with the embedded store plus emulated agents, in one process."),
    "mode": ("jetfleet.cli.devices:mode_group", "Power modes of boards."),
    "model": ("jetfleet.cli.powertrain:model_group", "Time and power prediction models (PowerTrain)."),
    "modes": ("jetfleet.cli.boards:modes_cmd",
              "List the power modes of BOARD (agx-orin, agx-xavier, nano, orin-nano, tx2, xavier-nx)."),
    "optimize": ("jetfleet.cli.powertrain:optimize",
                 "Choose the mode that meets a goal for WORKLOAD on DEVICE (or --board-model) by its calibrated upper "
                 "bound; --apply to set and verify it (an observation over the budget is flagged)."),
    "pareto": ("jetfleet.cli.powertrain:pareto",
               "The predicted time-power Pareto front of every mode, with calibrated bounds."),
    "predict": ("jetfleet.cli.powertrain:predict",
                "Predicted time per minibatch and power of every mode of a grid, with calibrated bounds."),
    "profile": ("jetfleet.cli.profiling:profile_group",
                "Profiling campaigns: measure a workload across power modes on the fleet."),
    "profiles": ("jetfleet.cli.profiling:profiles_group", "Stored profiles, as CSV (board_model,workload,cpu_cores,"
                 "cpu_mhz,gpu_mhz,mem_mhz,minibatch_time_ms,power_w)."),
    "prometheus": ("jetfleet.cli.observe:prometheus_group", "Prometheus integration."),
    "roofline": ("jetfleet.cli.roofline:roofline",
                 "Time and energy rooflines of a board model's power modes (Pagoda), a workload placed on them."),
    "telemetry": ("jetfleet.cli.devices:telemetry_group", "Live telemetry."),
    "top": ("jetfleet.cli.top:top", "A live view of the fleet: boards, state, mode, power per rail, temperatures, "
            "running jobs and campaigns."),
    "twin": ("jetfleet.cli.boards:twin_group", "The emulated board (digital twin)."),
}

ROOT_HELP = """jetfleet: run a lab of Jetson boards as one fleet.

Every option can also come from the environment: JETFLEET_<COMMAND>_<OPTION> (e.g.
JETFLEET_PROFILE_START_MINIBATCHES=20); the controller and TLS files from JETFLEET_CONTROLLER,
JETFLEET_TLS_CA/CERT/KEY or the config file (jetfleet config show). Exit codes: docs/cli.md."""
VERBOSE_HELP = "more logging (-vv for debug)"
HELP_OPTION = ("-h", "--help")
# The root's options as click lists them (click's own help for --version and --help).
ROOT_OPTIONS = [("-v, --verbose", VERBOSE_HELP), ("--version", "Show the version and exit."),
                (", ".join(HELP_OPTION), "Show this message and exit.")]


def terminal_width() -> int:
    """The help's width as click computes it (the terminal's columns, at most 80, less 2, at least 50), the columns
    read the way shutil.get_terminal_size reads them ($COLUMNS, stdout's terminal, else 80)."""
    columns = 0
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        pass
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return max(min(columns or 80, 80) - 2, 50)


def short_help(text: str, limit: int) -> str:
    """The first sentence of ``text`` within ``limit`` characters, cut at a word with ``...`` (as click cuts it)."""
    words = text.partition("\n\n")[0].split()
    for i, word in enumerate(words):
        if word.endswith(".") and (i == len(words) - 1 or not words[i + 1][0].islower()):
            words = words[:i + 1]
            break
    short = " ".join(words)
    if len(short) <= limit:
        return short
    if limit < 3:
        return "..."
    import textwrap

    return textwrap.shorten(short, limit, placeholder="...", break_on_hyphens=False)


def _wrap(text: str, width: int, indent: str) -> str:
    import textwrap

    wrapper = textwrap.TextWrapper(width, initial_indent=indent, subsequent_indent=indent, replace_whitespace=False)
    return "\n\n".join(wrapper.fill(" ".join(line.strip() for line in par.splitlines()))
                        for par in text.expandtabs().split("\n\n"))


def _definitions(rows: list[tuple[str, str]], width: int) -> list[str]:
    first = min(max(len(a) for a, _ in rows), 30) + 2
    out = []
    for term, text in rows:
        lines = _wrap(text, max(width - first - 2, 10), "").splitlines() or [""]
        pad = " " * (first - len(term)) if len(term) <= first - 2 else "\n" + " " * (first + 2)
        out.append(f"  {term}{pad}{lines[0]}")
        out += [" " * (first + 2) + line for line in lines[1:]]
    return out


def root_help(prog: str = "jetfleet", width: int | None = None) -> str:
    """The text of ``jetfleet --help``, as click formats it for the root group (its trailing newline included)."""
    width = terminal_width() if width is None else width
    limit = width - 6 - max(len(n) for n in COMMANDS)
    lines = [f"Usage: {prog} [OPTIONS] COMMAND [ARGS]...", "", _wrap(ROOT_HELP, width, "  "), "", "Options:",
             *_definitions(ROOT_OPTIONS, width), "", "Commands:",
             *_definitions([(name, short_help(COMMANDS[name][1], limit)) for name in sorted(COMMANDS)], width)]
    return "\n".join(lines) + "\n"
