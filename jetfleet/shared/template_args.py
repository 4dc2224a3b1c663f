"""What a job template's ``--arg`` may be, checked alike by the controller (before a job is stored) and by the agent
(before it launches anything): ``jetfleet/agent/templates.py`` says how templates use them."""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from jetfleet.shared.errors import InvalidArgument

ARG_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,31}$")
_VALUE = re.compile(r"^[A-Za-z0-9._+,:=/@-]{1,128}$")
_NUMBER = re.compile(r"^-[0-9.]")
MAX_ARGS = 16


def check_value(arg: str, value: object) -> str:
    """An --arg value: 1..128 characters of letters, digits and ``._-+,:=/@``, not starting with ``-`` unless it is
    a number (no option injection); InvalidArgument naming the arg otherwise."""
    if not isinstance(value, str) or not _VALUE.match(value) or (value.startswith("-") and not _NUMBER.match(value)):
        raise InvalidArgument(f"--arg {arg[:32]}={str(value)[:40]!r}: allowed 1..128 characters of letters, digits "
                              "and ._-+,:=/@ (not starting with '-' unless a number)", field=f"template_args.{arg[:32]}")
    return value


def check_args(template: str, takes: Sequence[str], values: Mapping[str, str]) -> None:
    """``values`` holds exactly the args template ``template`` takes, each value allowed; InvalidArgument naming
    the first arg that is not (what it takes in the message)."""
    unknown = sorted(set(values) - set(takes))
    if unknown:
        raise InvalidArgument(f"template {template!r} takes no arg {unknown[0][:32]!r}; it takes "
                              f"{', '.join(takes) or 'none'}", field=f"template_args.{unknown[0][:32]}")
    missing = [a for a in takes if a not in values]
    if missing:
        raise InvalidArgument(f"template {template!r} needs --arg {missing[0]}=VALUE (it takes {', '.join(takes)})",
                              field=f"template_args.{missing[0]}")
    for k, v in values.items():
        check_value(k, v)


__all__ = ["ARG_NAME", "MAX_ARGS", "check_args", "check_value"]
