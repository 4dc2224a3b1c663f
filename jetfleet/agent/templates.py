"""Job templates: the only commands an agent ever launches (``job submit --template NAME --arg K=V``).

They come from the agent's configuration, a TOML file (``jetfleet agent run --templates FILE``)::

    kill_grace_s = 10                      # SIGTERM to the process group, then SIGKILL after this long

    [templates.digits]
    command = ["python3", "train.py", "--epochs", "{epochs}", "--name", "{workload}"]
    cwd = "/home/lab/own-training"
    env = { OMP_NUM_THREADS = "2" }
    user = "lab"                           # only when the agent runs as root
    args = ["epochs"]                      # the --arg names it accepts (each one required)
    exit_wait_s = 60                       # after the job's length, how long it may take to exit

``args`` may instead be a table that gives each arg a rule, checked by the controller before it stores the job and by
the agent before it launches (``jetfleet/shared/template_args.py``)::

    [templates.digits.args]
    epochs = { type = "int", min = 1, max = 1000 }
    lr = { type = "float", min = 0.00001, max = 1 }    # either bound may be left out
    optimizer = { choices = ["sgd", "adam"] }
    tag = {}                                           # any allowed text, as in the list form

The command is an argv list, never a shell string. ``{name}`` placeholders are substituted in argv elements only
(never in cwd, env or the program itself), each by a whole value: an ``--arg`` the template accepts, or one the
agent fills in: ``{workload}`` (the session name the process must use: the template's name), ``{minibatches}``
(the job's length; what is left of it when an earlier agent's process trained part), ``{job_id}``. An
``--arg`` value is 1..128 characters of letters, digits and ``._-+,:=/@``, not starting with ``-`` unless it is a
number (no option injection). A template that breaks any of this is refused
when the configuration loads, naming the template and the field, and the agent does not start."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Mapping

from jetfleet.shared.compat import toml_reader
from jetfleet.shared.errors import InvalidArgument
from jetfleet.shared.session_wire import check_name
from jetfleet.shared.template_args import ARG_NAME, MAX_ARGS, ArgRule, check_args

BUILTIN_ARGS = ("workload", "minibatches", "job_id")   # filled in by the agent, never given with --arg
MAX_TEMPLATES = 64
MAX_ARGV = 256
DEFAULT_EXIT_WAIT_S = 60.0
DEFAULT_KILL_GRACE_S = 10.0
_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]{0,31})\}")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


@dataclass(frozen=True)
class JobTemplate:
    """One command the agent may launch (module docstring)."""

    name: str
    command: tuple[str, ...]
    cwd: str = ""
    env: tuple[tuple[str, str], ...] = ()
    user: str = ""
    args: tuple[str, ...] = ()
    exit_wait_s: float = DEFAULT_EXIT_WAIT_S
    rules: tuple[ArgRule, ...] = ()   # each arg's rule, in the order of ``args`` (empty: any allowed text)

    def rule_of(self) -> dict[str, ArgRule]:
        """Each arg's rule by name."""
        return dict(zip(self.args, self.rules))

    def argv(self, values: Mapping[str, str], builtin: Mapping[str, str]) -> list:
        """The command with its placeholders filled: ``values`` must hold exactly the template's args (each
        checked against its rule); InvalidArgument naming the arg otherwise, before anything starts."""
        check_args(self.name, self.args, values, self.rule_of())
        filled = dict(builtin)
        filled.update(values)
        return [self.command[0]] + [_PLACEHOLDER.sub(lambda m: filled[m.group(1)], a) for a in self.command[1:]]


@dataclass(frozen=True)
class TemplatesConfig:
    """The agent's templates and how what it launched is stopped."""

    templates: tuple[JobTemplate, ...] = ()
    kill_grace_s: float = DEFAULT_KILL_GRACE_S

    def get(self, name: str) -> JobTemplate:
        """The template ``name``; InvalidArgument naming those configured otherwise (the agent runs nothing else)."""
        for t in self.templates:
            if t.name == name:
                return t
        raise InvalidArgument(f"template {name[:64]!r} is not in this agent's configuration (it has: "
                              f"{', '.join(t.name for t in self.templates) or 'none'})", field="template")


def load_templates(path: str, *, euid: int | None = None) -> TemplatesConfig:
    """Read and check the agent's templates file (module docstring); InvalidArgument naming the template and the
    field. ``euid``: the agent's effective uid (a ``user`` is allowed only for root)."""
    try:
        with open(path, "rb") as f:
            doc = toml_reader.load(f)
    except OSError as e:
        raise InvalidArgument(f"templates file {path}: {e.strerror or e}", field="templates") from None
    except toml_reader.TOMLDecodeError as e:
        raise InvalidArgument(f"templates file {path} is not TOML: {e}", field="templates") from None
    return parse_templates(doc, os.geteuid() if euid is None else euid)


def parse_templates(doc: Mapping[str, object], euid: int) -> TemplatesConfig:
    """A parsed templates document, checked (``load_templates``)."""
    extra = sorted(set(doc) - {"templates", "kill_grace_s"})
    if extra:
        raise InvalidArgument(f"templates file: unknown setting {extra[0]!r} (allowed: kill_grace_s, [templates.NAME])",
                              field=extra[0])
    grace = _seconds(doc.get("kill_grace_s", DEFAULT_KILL_GRACE_S), "kill_grace_s", 0.1, 600.0)
    table = doc.get("templates", {})
    if not isinstance(table, dict):
        raise InvalidArgument("templates: a table of [templates.NAME] sections", field="templates")
    if len(table) > MAX_TEMPLATES:
        raise InvalidArgument(f"{len(table)} templates: at most {MAX_TEMPLATES}", field="templates")
    return TemplatesConfig(tuple(_template(str(k), v, euid) for k, v in table.items()), grace)


def _template(name: str, t: object, euid: int) -> JobTemplate:
    where = f"templates.{name}"
    check_name(name, where)
    if not isinstance(t, dict):
        raise InvalidArgument(f"template {name!r}: a table of settings", field=where)
    allowed = ("command", "cwd", "env", "user", "args", "exit_wait_s")
    extra = sorted(set(t) - set(allowed))
    if extra:
        raise InvalidArgument(f"template {name!r}: unknown setting {extra[0]!r} (allowed: {', '.join(allowed)})",
                              field=f"{where}.{extra[0]}")
    args = t.get("args", [])
    specs = args if isinstance(args, dict) else {}
    if isinstance(args, dict):
        args = list(args)
    if not isinstance(args, list) or len(args) > MAX_ARGS or not all(isinstance(a, str) and ARG_NAME.match(a)
                                                                        and a not in BUILTIN_ARGS for a in args):
        raise InvalidArgument(f"template {name!r}: args is a list of at most {MAX_ARGS} names (lower case, digits, _; "
                              f"not {', '.join(BUILTIN_ARGS)}, which the agent fills in), or a table of those names "
                              "and their rules", field=f"{where}.args")
    rules = tuple(ArgRule.from_config(specs.get(a, {}), f"{where}.args.{a}") for a in args)
    command = t.get("command")
    if isinstance(command, str):
        raise InvalidArgument(f"template {name!r}: command is an argv list, never a shell string "
                              f"(e.g. [\"python3\", \"train.py\"])", field=f"{where}.command")
    if not isinstance(command, list) or not 1 <= len(command) <= MAX_ARGV or not all(
            isinstance(a, str) and a and "\0" not in a for a in command):
        raise InvalidArgument(f"template {name!r}: command is a list of 1..{MAX_ARGV} non-empty strings",
                              field=f"{where}.command")
    if _PLACEHOLDER.search(command[0]) or "{" in command[0]:
        raise InvalidArgument(f"template {name!r}: the program ({command[0][:64]!r}) takes no placeholder",
                              field=f"{where}.command")
    known = set(args) | set(BUILTIN_ARGS)
    for a in command[1:]:
        for m in _PLACEHOLDER.finditer(a):
            if m.group(1) not in known:
                raise InvalidArgument(f"template {name!r}: placeholder {{{m.group(1)}}} in command is neither one of "
                                      f"its args ({', '.join(args) or 'none'}) nor {', '.join(BUILTIN_ARGS)}",
                                      field=f"{where}.command")
        if "{" in _PLACEHOLDER.sub("", a) or "}" in _PLACEHOLDER.sub("", a):
            raise InvalidArgument(f"template {name!r}: {a[:64]!r} has a brace that is not a {{name}} placeholder",
                                  field=f"{where}.command")
    cwd = t.get("cwd", "")
    if not isinstance(cwd, str) or (cwd and not Path(cwd).is_absolute()):
        raise InvalidArgument(f"template {name!r}: cwd is an absolute directory", field=f"{where}.cwd")
    if cwd and not Path(cwd).is_dir():
        raise InvalidArgument(f"template {name!r}: cwd {cwd!r} is not a directory on this board", field=f"{where}.cwd")
    env = t.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) and _ENV_NAME.match(k) and isinstance(v, str)
                                            and "\0" not in v for k, v in env.items()):
        raise InvalidArgument(f"template {name!r}: env is a table of NAME = \"value\" strings", field=f"{where}.env")
    user = t.get("user", "")
    if not isinstance(user, str):
        raise InvalidArgument(f"template {name!r}: user is a user name", field=f"{where}.user")
    if user:
        if euid != 0:
            raise InvalidArgument(f"template {name!r}: user {user!r} needs the agent to run as root (it runs as uid "
                                  f"{euid}); drop the setting to run it as the agent's user", field=f"{where}.user")
        import pwd

        try:
            pwd.getpwnam(user)
        except KeyError:
            raise InvalidArgument(f"template {name!r}: no user {user!r} on this board", field=f"{where}.user") from None
        if shutil.which("setpriv") is None:
            raise InvalidArgument(f"template {name!r}: user needs util-linux's setpriv on this board (not on PATH)",
                                  field=f"{where}.user")
    wait = _seconds(t.get("exit_wait_s", DEFAULT_EXIT_WAIT_S), f"{where}.exit_wait_s", 0.0, 3600.0)
    env_items: tuple[tuple[str, str], ...] = tuple(sorted(env.items()))
    return JobTemplate(name, tuple(command), cwd, env_items, user, tuple(args), wait, rules)


def _seconds(v: object, field: str, lo: float, hi: float) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        raise InvalidArgument(f"{field}={v!r}: seconds in {lo:g}..{hi:g}", field=field)
    return float(v)


ArgValues = Dict[str, str]
__all__ = ["ArgValues", "JobTemplate", "TemplatesConfig", "load_templates", "parse_templates"]
