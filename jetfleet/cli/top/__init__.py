"""`jetfleet top`: a live terminal view of the fleet (the ``top`` extra: textual). The click command is here;
the view (``app``, ``view``) and the one module that asks the controller (``data``) load when it runs."""

from __future__ import annotations

from pathlib import Path

import click

from jetfleet.cli.common import Connection, connection_options, handle_errors

SORT_KEYS = ("id", "power", "temp", "model", "state")


@click.command("top")
@connection_options
@click.option("--interval", "interval_s", type=click.FloatRange(0.2, 60), default=1.0, show_default=True,
              metavar="SECONDS", help="seconds between two looks at the fleet")
@click.option("--sort", type=click.Choice(SORT_KEYS), default="id", show_default=True,
              help="sort boards by (the s key changes it, r reverses it)")
@click.option("--board", default="", metavar="DEVICE", help="start on this board's screen")
@click.option("--screenshot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="draw once, save the screen as SVG to this file and exit (no terminal needed)")
@handle_errors
def top(conn: Connection, interval_s: float, sort: str, board: str, screenshot: Path | None) -> None:
    """A live view of the fleet: boards, state, mode, power per rail, temperatures, running jobs and campaigns.

    Keys: arrows move, Enter opens a board (Esc goes back), s changes the sort, r reverses it, q quits.
    Talks to the controller like every command (--controller, $JETFLEET_CONTROLLER or the config file; mutual
    TLS from --tls-ca/--tls-cert/--tls-key, $JETFLEET_TLS_CA/CERT/KEY or the config file)."""
    try:
        from jetfleet.cli.top.app import TopApp
    except ImportError as e:   # textual is the `top` extra
        raise click.ClickException(f"jetfleet top needs the top extra: pip install 'jetfleet[top]' ({e})") from None
    from jetfleet.cli.top.data import FleetSource

    source = FleetSource(lambda: conn.client(timeout_s=10))
    try:
        app = TopApp(source, interval_s=interval_s, sort=sort, board=board, screenshot=screenshot)
        if screenshot is not None:
            app.run(headless=True, size=(160, 40))
        else:
            app.run()
    finally:
        source.close()
    if app.return_code:   # the app stopped on an error (textual printed it)
        raise SystemExit(app.return_code)
