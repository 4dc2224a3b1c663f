"""What every CLI command shares: output format, the connection to the controller, and errors — how they are
printed and the exit code each gets, in one place.

Exit codes (docs/cli.md; a script can branch on them):

    0   done                           6   permission denied / not authenticated (certificates)
    1   internal error (a bug)         7   failed precondition (the state refuses it: a board online, a job done)
    2   usage (a flag or argument)     8   already exists
    3   invalid argument (the value)   9   deadline exceeded (a board or the controller did not answer in time)
    4   not found                      10  resource exhausted (a limit)
    5   unavailable (the controller,   11  cancelled
        a board, the store)            12  the work waited for ended failed or cancelled (--wait)
                                       130 interrupted (Ctrl-C)

With ``--output json`` an error is one JSON object on stderr:
``{"error": {"code": "NOT_FOUND", "exit_code": 4, "field": "device_id", "message": "unknown device 'x' ..."}}``."""

from __future__ import annotations

import functools
import json
import logging
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, NoReturn, TypeVar

import click

from jetfleet.shared.errors import InvalidArgument, JetfleetError

if TYPE_CHECKING:
    from jetfleet.client import OperatorClient

F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger(__name__)
UINT32 = click.IntRange(0, 2**32 - 1)
MAX_TEXT_FILE_BYTES = 128 * 1024 * 1024   # a profiles import's limit (docs/limits.md); other files less
MAX_SMALL_FILE_BYTES = 16 * 1024 * 1024   # a modes file, an arrival trace

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_WORK_FAILED = 12
EXIT_CODES = {"INTERNAL": EXIT_INTERNAL, "UNKNOWN": EXIT_INTERNAL, "USAGE": EXIT_USAGE, "INVALID_ARGUMENT": 3,
              "OUT_OF_RANGE": 3, "NOT_FOUND": 4, "UNAVAILABLE": 5, "PERMISSION_DENIED": 6, "UNAUTHENTICATED": 6,
              "FAILED_PRECONDITION": 7, "ALREADY_EXISTS": 8, "DEADLINE_EXCEEDED": 9, "RESOURCE_EXHAUSTED": 10,
              "CANCELLED": 11, "ABORTED": 11, "WORK_FAILED": EXIT_WORK_FAILED, "INTERRUPTED": EXIT_INTERRUPTED}

OUTPUT_ENV = "JETFLEET_OUTPUT"
output_option = click.option("--output", "output", type=click.Choice(["text", "json"]), default="text",
                             show_default=True, envvar=OUTPUT_ENV, show_envvar=True,
                             help="json for scripts (errors too: JSON on stderr)")


def exit_code(code: str) -> int:
    """The exit status of an error code (a gRPC status name, USAGE, WORK_FAILED or INTERRUPTED)."""
    return EXIT_CODES.get(code, EXIT_INTERNAL)


def fail(code: str, message: str, *, json_output: bool, field: str | None = None) -> NoReturn:
    """Print an error on stderr (``error: MESSAGE``, or one JSON object with ``--output json``) and exit with the
    code's status."""
    status = exit_code(code)
    if json_output:
        click.echo(json.dumps({"error": {"code": code, "exit_code": status, "field": field or None,
                                         "message": message}}), err=True)
    else:
        click.echo(f"error: {message}", err=True)
    sys.exit(status)


def wants_json(args: list[str] | None = None) -> bool:
    """Whether a command line (or $JETFLEET_OUTPUT) asks for JSON: for errors raised before a command has parsed
    its options (a usage error)."""
    import os

    argv = sys.argv[1:] if args is None else args
    for i, a in enumerate(argv):
        if a == "--output" and i + 1 < len(argv):
            return argv[i + 1] == "json"
        if a.startswith("--output="):
            return a.split("=", 1)[1] == "json"
    return os.environ.get(OUTPUT_ENV, "") == "json"


def handle_errors(fn: F) -> F:
    """Domain errors become one clear line on stderr (JSON with --output json) and the exit status of their code.
    Anything else is a bug, not bad input: one line naming it and exit status 1 (the traceback at debug level,
    -vv). Ctrl-C exits 130."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        as_json = kwargs.get("output") == "json"
        try:
            return fn(*args, **kwargs)
        except JetfleetError as e:
            fail(e.code, e.message, json_output=as_json, field=e.field)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except KeyboardInterrupt:
            fail("INTERRUPTED", "interrupted", json_output=as_json)
        except Exception as e:  # noqa: BLE001 - the CLI never prints a Python traceback
            log.debug("unexpected error", exc_info=True)
            fail("INTERNAL", f"internal error: {type(e).__name__}: {str(e)[:300]} (run with -vv for the traceback)",
                 json_output=as_json)

    return wrapper  # type: ignore[return-value]


# --- the connection to the controller ------------------------------------------------------------------
@dataclass(frozen=True)
class Connection:
    """What a command was told about the controller and the operator's certificates (None: not on the command
    line); the rest comes from the environment, then the config file (``jetfleet config show``)."""

    controller: str | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None

    def client(self, timeout_s: float = 30.0) -> OperatorClient:
        """A client of the controller: flag > environment > config file > 127.0.0.1:50051."""
        from jetfleet.client import OperatorClient

        return OperatorClient(self.controller, tls_ca=self.tls_ca, tls_cert=self.tls_cert, tls_key=self.tls_key,
                              timeout_s=timeout_s)


_CONNECTION_OPTIONS = [
    click.option("--controller", "controller", default=None, metavar="HOST[:PORT]", allow_from_autoenv=False,
                 help="controller address; port 50051 if none [env JETFLEET_CONTROLLER; config file; 127.0.0.1:50051]"),
    click.option("--tls-ca", "tls_ca", default=None, metavar="FILE", allow_from_autoenv=False,
                 help="the lab CA [env JETFLEET_TLS_CA; config file]"),
    click.option("--tls-cert", "tls_cert", default=None, metavar="FILE", allow_from_autoenv=False,
                 help="an operator certificate [env JETFLEET_TLS_CERT; config file]"),
    click.option("--tls-key", "tls_key", default=None, metavar="FILE", allow_from_autoenv=False,
                 help="its key [env JETFLEET_TLS_KEY; config file]"),
]


def connection_options(fn: F) -> F:
    """Add --controller and --tls-ca/--tls-cert/--tls-key to a command, passed to it as ``conn`` (a Connection)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, controller: str | None = None, tls_ca: str | None = None, tls_cert: str | None = None,
                tls_key: str | None = None, **kwargs: Any) -> Any:
        return fn(*args, conn=Connection(controller, tls_ca, tls_cert, tls_key), **kwargs)

    out: Any = wrapper
    for option in reversed(_CONNECTION_OPTIONS):
        out = option(out)
    return out  # type: ignore[no-any-return]


def controller_address(explicit: str | None) -> str:
    """The controller an agent dials: ``explicit``, else $JETFLEET_CONTROLLER, else the config file's, else
    127.0.0.1:50051 (a missing port is 50051)."""
    from jetfleet.client.settings import resolve

    return resolve(explicit).controller


# --- output ---------------------------------------------------------------------------------------------
def emit(output: str, data: Any, text: Callable[[Any], str] | str | None = None) -> None:
    """Print ``data`` as JSON, or as the text ``text`` makes of it."""
    if output == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
    elif callable(text):
        click.echo(text(data))
    else:
        click.echo(text if text is not None else data)


def say(output: str, message: str, **fields: Any) -> None:
    """A note on stderr for the operator (``note: ...``; with --output json one JSON object ``{"note": ...}``),
    so stdout keeps only the command's result."""
    if output == "json":
        click.echo(json.dumps({"note": message, **fields}, default=str), err=True)
    else:
        click.echo(message, err=True)


def read_text_file(path: str, what: str, max_bytes: int = MAX_TEXT_FILE_BYTES) -> str:
    """A UTF-8 text file, ``-`` for standard input (a byte-order mark is dropped), read no further than
    ``max_bytes``; InvalidArgument naming ``what`` for a binary, Latin-1, unreadable or oversized file."""
    from jetfleet.shared.files import STDIN, read_bounded

    data = read_bounded(path, what, max_bytes)
    name = "standard input" if path == STDIN else path
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InvalidArgument(f"{what} {name} is not UTF-8 text (byte {e.start} is {data[e.start:e.start + 1]!r}): "
                              "a binary or Latin-1 file? Save it as UTF-8 CSV", field=what) from None
    if "\x00" in text:
        raise InvalidArgument(f"{what} {name} holds NUL characters: a binary file, not text", field=what)
    return text


def table(rows: list[list[Any]], header: list[str]) -> str:
    """Rows as left-aligned columns under a header."""
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)  # noqa: B905 - 3.8


def when(t_s: float, now_s: float | None = None) -> str:
    """An epoch time for a person: ``2026-03-01 14:02:11 (3 min ago)``; ``never`` for 0."""
    import time

    if t_s <= 0:
        return "never"
    now = time.time() if now_s is None else now_s
    ago = now - t_s
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t_s))
    if ago < 0:
        return stamp
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if ago >= size:
            return f"{stamp} ({ago / size:.0f} {unit} ago)"
    return f"{stamp} ({ago:.0f} s ago)"


def duration(s: float | None) -> str:
    """Seconds as H:MM:SS (days past one day); ``?`` when unknown."""
    if s is None:
        return "?"
    if s >= 86400:
        return f"{s / 86400:.1f} d"
    s = max(0, int(round(s)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
