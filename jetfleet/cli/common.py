"""What every CLI command shares: output format, error translation, the controller address."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from jetfleet.shared.errors import JetfleetError

F = TypeVar("F", bound=Callable[..., Any])

output_option = click.option("--output", "output", type=click.Choice(["text", "json"]), default="text",
                             show_default=True, help="json for scripts")


def emit(output: str, data: Any, text: Callable[[Any], str] | str | None = None) -> None:
    if output == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
    elif callable(text):
        click.echo(text(data))
    else:
        click.echo(text if text is not None else data)


def handle_errors(fn: F) -> F:
    """Domain errors become one clear line on stderr and exit status 2; nothing else is caught."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except JetfleetError as e:
            click.echo(f"error: {e.message}", err=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


def table(rows: list[list[Any]], header: list[str]) -> str:
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)
