"""Shell completion of the names an operator types most: device ids, board models, workloads.

Board models and workloads start from the built-in ones (no controller needed); device ids, and the models and
workloads of the boards online, come from the controller the command line (or the environment, or the config
file) names, asked with a one-second deadline. A controller that does not answer completes nothing more: a
completion never prints an error into the shell."""

from __future__ import annotations

from typing import Any

import click
from click.shell_completion import CompletionItem

ASK_TIMEOUT_S = 1.0


def _devices(ctx: click.Context) -> list[Any]:
    from jetfleet.cli.common import Connection

    p = ctx.params
    try:
        conn = Connection(p.get("controller"), p.get("tls_ca"), p.get("tls_cert"), p.get("tls_key"))
        with conn.client(timeout_s=ASK_TIMEOUT_S) as c:
            return list(c.list_devices())
    except Exception:  # noqa: BLE001 - no controller, no TLS files, a bad config: nothing to offer
        return []


def complete_devices(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The ids of the boards the controller knows, with their model and state as help."""
    return [CompletionItem(d.device_id, help=f"{d.model}, {'online' if d.online else 'offline'}")
            for d in _devices(ctx) if d.device_id.startswith(incomplete)]


def complete_board_models(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The built-in board models and those of the controller's boards."""
    from jetfleet.shared.catalog import builtin_catalogs

    names = set(builtin_catalogs()) | {d.model for d in _devices(ctx)}
    return [CompletionItem(n) for n in sorted(names) if n.startswith(incomplete)]


def complete_workloads(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The built-in workloads and the plugins the controller's boards offer."""
    from jetfleet.shared.workloads import WORKLOADS

    names = set(WORKLOADS) | {w for d in _devices(ctx) for w in d.workloads}
    return [CompletionItem(n) for n in sorted(names) if n.startswith(incomplete)]
