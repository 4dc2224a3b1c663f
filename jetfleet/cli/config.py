"""`jetfleet config show` (where the controller and TLS settings come from) and `jetfleet completion SHELL`."""

from __future__ import annotations

import click

from jetfleet.cli.common import Connection, connection_options, emit, handle_errors, output_option


@click.group("config")
def config_group() -> None:
    """Where the CLI finds the controller and the TLS files."""


@config_group.command("show")
@connection_options
@output_option
@handle_errors
def config_show(conn: Connection, output: str) -> None:
    """The settings a client command would use now, and where each comes from (flag > env > config file >
    default). The config file is $JETFLEET_CONFIG, else $XDG_CONFIG_HOME/jetfleet/config.toml (~/.config/...)."""
    from pathlib import Path

    from jetfleet.client.settings import KEYS, resolve

    s = resolve(conn.controller, tls_ca=conn.tls_ca, tls_cert=conn.tls_cert, tls_key=conn.tls_key)
    data = {"config_file": s.config_file, "config_file_exists": Path(s.config_file).is_file(),
            "settings": {k: {"value": getattr(s, k) or None, "source": s.sources[k]} for k in KEYS}}

    def text(d: dict[str, object]) -> str:
        exists = "" if data["config_file_exists"] else " (does not exist)"
        lines = [f"config file: {data['config_file']}{exists}"]
        for k in KEYS:
            v = data["settings"][k]  # type: ignore[index]
            lines.append(f"{k:<10} {v['value'] or '-':<50} from {v['source']}")
        return "\n".join(lines)

    emit(output, data, text)


@click.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for bash, zsh or fish.

    \b
    bash:  eval "$(jetfleet completion bash)"     (in ~/.bashrc)
    zsh:   eval "$(jetfleet completion zsh)"      (in ~/.zshrc)
    fish:  jetfleet completion fish > ~/.config/fish/completions/jetfleet.fish

    Device ids, board models and workloads complete from the controller (and the built-in names)."""
    from click.shell_completion import get_completion_class

    from jetfleet.cli.main import cli

    cls = get_completion_class(shell)
    assert cls is not None   # the Choice allows only the shells click knows
    click.echo(cls(cli, {}, "jetfleet", "_JETFLEET_COMPLETE").source())
