"""What a job template's ``--arg`` may be, checked alike by the controller (before a job is stored) and by the agent
(before it launches anything): ``jetfleet/agent/templates.py`` says how templates use them.

Every value is 1..128 characters of letters, digits and ``._-+,:=/@`` (``check_value``). A template may also give an
arg a rule (``ArgRule``): an integer or a number within bounds, or one of a list of words. The agent's hello carries
each rule as its text (``"int 1..1000"``, ``"float 0.0001..1"``, ``"one of sgd|adam"``; ``""`` for any allowed text),
so the controller refuses a value before it stores the job, naming the arg and what it allows."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from jetfleet.shared.errors import InvalidArgument

ARG_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,31}$")
_VALUE = re.compile(r"^[A-Za-z0-9._+,:=/@-]{1,128}$")
_NUMBER = re.compile(r"^-[0-9.]")
MAX_ARGS = 16
MAX_CHOICES = 32
RULE_KINDS = ("text", "int", "float", "choice")
_BOUNDS = re.compile(r"^(int|float) (\S*)\.\.(\S*)$")
_NUMERALS = {"int": re.compile(r"^[+-]?[0-9]{1,18}$"),   # as a program's own parser reads them: no 1_000, no nan
             "float": re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]{1,3})?$")}


@dataclass(frozen=True)
class ArgRule:
    """What one arg's value may be beyond its characters: ``kind`` text (anything ``check_value`` allows), int or
    float (within ``lo``..``hi``, either bound optional), or choice (one of ``choices``)."""

    kind: str = "text"
    lo: float | None = None
    hi: float | None = None
    choices: tuple = ()

    def text(self) -> str:
        """The rule as the hello carries it (``parse`` reads it back)."""
        if self.kind == "choice":
            return "one of " + "|".join(self.choices)
        if self.kind in ("int", "float"):
            return f"{self.kind} {_num(self.lo, self.kind)}..{_num(self.hi, self.kind)}"
        return ""

    def allowed(self) -> str:
        """What a value may be, in words (for errors and `devices show`)."""
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind in ("int", "float"):
            what = "an integer" if self.kind == "int" else "a number"
            if self.lo is not None and self.hi is not None:
                return f"{what} in {_num(self.lo, self.kind)}..{_num(self.hi, self.kind)}"
            if self.lo is not None:
                return f"{what} >= {_num(self.lo, self.kind)}"
            if self.hi is not None:
                return f"{what} <= {_num(self.hi, self.kind)}"
            return what
        return "text"

    def check(self, arg: str, value: str) -> str:
        """``value`` when this rule allows it (after ``check_value``); InvalidArgument naming the arg otherwise."""
        check_value(arg, value)
        if self.kind == "text":
            return value
        ok = value in self.choices if self.kind == "choice" else _in_bounds(value, self.kind, self.lo, self.hi)
        if not ok:
            raise InvalidArgument(f"--arg {arg[:32]}={value[:40]!r}: allowed {self.allowed()}",
                                  field=f"template_args.{arg[:32]}")
        return value

    @staticmethod
    def parse(text: str, field: str) -> ArgRule:
        """A rule from its text (``text``); InvalidArgument naming ``field`` when it is not one."""
        if not isinstance(text, str) or len(text) > 2048:
            raise InvalidArgument(f"{field}: an arg rule is a short text", field=field)
        if text == "":
            return ArgRule()
        if text.startswith("one of "):
            return _rule({"choices": text[len("one of "):].split("|")}, field)
        m = _BOUNDS.match(text)
        if m is None:
            raise InvalidArgument(f"{field}: {text[:64]!r} is not an arg rule ('', 'int LO..HI', 'float LO..HI' or "
                                  "'one of A|B'; a bound may be left out)", field=field)
        kind, lo, hi = m.groups()
        try:
            bounds = {k: (int(v) if kind == "int" else float(v)) for k, v in (("min", lo), ("max", hi)) if v}
        except ValueError:
            raise InvalidArgument(f"{field}: {text[:64]!r}: its bounds are not {kind} numbers", field=field) from None
        return _rule({"type": kind, **bounds}, field)

    @staticmethod
    def from_config(spec: object, field: str) -> ArgRule:
        """A rule from a templates file's table: ``{}`` (any allowed text), ``{type = "int"|"float", min = .., max
        = ..}`` (bounds optional) or ``{choices = ["a", "b"]}``; InvalidArgument naming ``field`` otherwise."""
        return _rule(spec, field)


def _rule(spec: object, field: str) -> ArgRule:
    if not isinstance(spec, dict):
        raise InvalidArgument(f"{field}: a table: {{}}, {{type = \"int\" or \"float\", min = .., max = ..}} or "
                              "{choices = [..]}", field=field)
    extra = sorted(set(spec) - {"type", "min", "max", "choices"})
    if extra:
        raise InvalidArgument(f"{field}: unknown setting {extra[0]!r} (allowed: type, min, max, choices)", field=field)
    if "choices" in spec:
        choices = spec["choices"]
        if set(spec) - {"choices", "type"} or spec.get("type", "choice") != "choice":
            raise InvalidArgument(f"{field}: choices take no type, min or max", field=field)
        if not isinstance(choices, list) or not 1 <= len(choices) <= MAX_CHOICES or len(set(choices)) != len(choices):
            raise InvalidArgument(f"{field}: choices is a list of 1..{MAX_CHOICES} different values", field=field)
        for c in choices:
            if not isinstance(c, str) or not _allowed_value(c) or "|" in c:
                raise InvalidArgument(f"{field}: choice {str(c)[:40]!r} is not an allowed --arg value (letters, "
                                      "digits and ._-+,:=/@)", field=field)
        return ArgRule("choice", choices=tuple(choices))
    kind = spec.get("type", "text")
    if kind not in ("text", "int", "float"):
        raise InvalidArgument(f"{field}: type {str(kind)[:32]!r}: allowed text, int, float (or give choices)",
                              field=field)
    if kind == "text":
        if set(spec) - {"type"}:
            raise InvalidArgument(f"{field}: min and max are for type int or float", field=field)
        return ArgRule()
    bounds: list[float | None] = []
    for key in ("min", "max"):
        v = spec.get(key)
        if v is None:
            bounds.append(None)
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or (
                kind == "int" and not float(v).is_integer()):
            raise InvalidArgument(f"{field}.{key}={v!r}: a finite {'integer' if kind == 'int' else 'number'}",
                                  field=f"{field}.{key}")
        bounds.append(float(v))
    lo, hi = bounds
    if lo is not None and hi is not None and lo > hi:
        raise InvalidArgument(f"{field}: min {lo:g} is above max {hi:g}", field=field)
    return ArgRule(kind, lo, hi)


def _num(v: float | None, kind: str) -> str:
    if v is None:
        return ""
    text = repr(float(v))   # exact, so that the hello's text reads back to the same bound
    return str(int(v)) if kind == "int" or text.endswith(".0") and float(v).is_integer() else text


def _in_bounds(value: str, kind: str, lo: float | None, hi: float | None) -> bool:
    if not _NUMERALS[kind].match(value):
        return False
    v = float(value)
    if not math.isfinite(v):
        return False
    return (lo is None or v >= lo) and (hi is None or v <= hi)


def _allowed_value(value: str) -> bool:
    return bool(_VALUE.match(value)) and (not value.startswith("-") or bool(_NUMBER.match(value)))


def check_value(arg: str, value: object) -> str:
    """An --arg value: 1..128 characters of letters, digits and ``._-+,:=/@``, not starting with ``-`` unless it is
    a number (no option injection); InvalidArgument naming the arg otherwise."""
    if not isinstance(value, str) or not _allowed_value(value):
        raise InvalidArgument(f"--arg {arg[:32]}={str(value)[:40]!r}: allowed 1..128 characters of letters, digits "
                              "and ._-+,:=/@ (not starting with '-' unless a number)", field=f"template_args.{arg[:32]}")
    return value


def check_args(template: str, takes: Sequence[str], values: Mapping[str, str],
               rules: Mapping[str, ArgRule] | None = None) -> None:
    """``values`` holds exactly the args template ``template`` takes, each value allowed (by its rule in ``rules``,
    if it has one); InvalidArgument naming the first arg that is not (what it takes in the message)."""
    unknown = sorted(set(values) - set(takes))
    if unknown:
        raise InvalidArgument(f"template {template!r} takes no arg {unknown[0][:32]!r}; it takes "
                              f"{', '.join(takes) or 'none'}", field=f"template_args.{unknown[0][:32]}")
    missing = [a for a in takes if a not in values]
    if missing:
        raise InvalidArgument(f"template {template!r} needs --arg {missing[0]}=VALUE (it takes {', '.join(takes)})",
                              field=f"template_args.{missing[0]}")
    for k, v in values.items():
        (rules or {}).get(k, _TEXT).check(k, v)


_TEXT = ArgRule()
__all__ = ["ARG_NAME", "MAX_ARGS", "ArgRule", "check_args", "check_value"]
