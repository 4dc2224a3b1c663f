"""Where a client connects and with which certificates, from four places in this order of precedence:

    an explicit value (a CLI flag, an argument) > the environment > the config file > the default

Environment: ``JETFLEET_CONTROLLER``, ``JETFLEET_TLS_CA``, ``JETFLEET_TLS_CERT``, ``JETFLEET_TLS_KEY``.
Config file: ``$JETFLEET_CONFIG`` if set, else ``$XDG_CONFIG_HOME/jetfleet/config.toml`` (XDG_CONFIG_HOME
defaults to ``~/.config``), TOML with these keys (paths may start with ``~``; relative ones are relative to
the file)::

    controller = "ctl.lab:50051"
    tls_ca = "~/.local/share/jetfleet/pki/ca.crt"
    tls_cert = "~/.local/share/jetfleet/pki/alice.crt"
    tls_key = "~/.local/share/jetfleet/pki/alice.key"

An unknown key is an error naming it (a misspelt ``controler`` would otherwise be ignored without a word).
A controller address without a port gets 50051 (gRPC would dial 443)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from jetfleet.shared.address import DEFAULT_PORT, controller_list
from jetfleet.shared.errors import InvalidArgument

DEFAULT_CONTROLLER = f"127.0.0.1:{DEFAULT_PORT}"
ENV = {"controller": "JETFLEET_CONTROLLER", "tls_ca": "JETFLEET_TLS_CA", "tls_cert": "JETFLEET_TLS_CERT",
       "tls_key": "JETFLEET_TLS_KEY"}
CONFIG_ENV = "JETFLEET_CONFIG"
KEYS = tuple(ENV)
MAX_CONFIG_BYTES = 64 * 1024


@dataclass(frozen=True)
class ClientSettings:
    """The controller to dial and the operator's TLS files ("" for none); ``sources`` says where each came
    from: flag, env (the variable's name), config (the file's path) or default."""

    controller: str = DEFAULT_CONTROLLER
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    sources: Mapping[str, str] = field(default_factory=dict)
    config_file: str = ""


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """The config file's path: $JETFLEET_CONFIG, else $XDG_CONFIG_HOME/jetfleet/config.toml (~/.config by default)."""
    env = os.environ if env is None else env
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV]).expanduser()
    base = Path(env["XDG_CONFIG_HOME"]).expanduser() if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    return base / "jetfleet" / "config.toml"


def read_config(path: Path, *, required: bool = False) -> dict[str, str]:
    """The settings a config file holds ({} if it does not exist, unless ``required``). InvalidArgument naming the
    file and the key for a file that is not TOML, an unknown key or a value that is not a string."""
    from jetfleet.shared.compat import toml_reader
    from jetfleet.shared.files import read_bounded

    if not path.exists():
        if required:
            raise InvalidArgument(f"config file {path} does not exist (${CONFIG_ENV} names it)", field="config")
        return {}
    try:
        data = toml_reader.loads(read_bounded(str(path), "config file", MAX_CONFIG_BYTES, field="config").decode("utf-8"))
    except UnicodeDecodeError as e:
        raise InvalidArgument(f"config file {path}: cannot read it ({e})", field="config") from None
    except toml_reader.TOMLDecodeError as e:
        raise InvalidArgument(f"config file {path} is not valid TOML: {e}", field="config") from None
    out: dict[str, str] = {}
    for key, value in data.items():
        if key not in KEYS:
            raise InvalidArgument(f"config file {path}: unknown key {key!r}; allowed: {', '.join(KEYS)}", field="config")
        if not isinstance(value, str):
            raise InvalidArgument(f"config file {path}: {key} must be a string, got {type(value).__name__}",
                                  field=f"config.{key}")
        if key.startswith("tls_") and value:
            p = Path(value).expanduser()
            value = str(p if p.is_absolute() else (path.parent / p))
        out[key] = value
    return out


def resolve(controller: str | None = None, *, tls_ca: str | None = None, tls_cert: str | None = None,
            tls_key: str | None = None, env: Mapping[str, str] | None = None,
            config_file: Path | None = None) -> ClientSettings:
    """Each setting from the first place that has it: the explicit argument (None or "" means not given),
    the environment, the config file (``config_file``, else ``config_path()``), the default.

    InvalidArgument for a bad config file or a controller address that is not HOST[:PORT]."""
    env = os.environ if env is None else env
    explicit = {"controller": controller, "tls_ca": tls_ca, "tls_cert": tls_cert, "tls_key": tls_key}
    path = config_file if config_file is not None else config_path(env)
    file_values = read_config(path, required=config_file is not None or bool(env.get(CONFIG_ENV)))
    values: dict[str, str] = {}
    sources: dict[str, str] = {}
    for key in KEYS:
        if explicit[key]:
            values[key], sources[key] = str(explicit[key]), "flag"
        elif env.get(ENV[key]):
            values[key], sources[key] = env[ENV[key]], ENV[key]
        elif file_values.get(key):
            values[key], sources[key] = file_values[key], str(path)
        else:
            values[key], sources[key] = (DEFAULT_CONTROLLER if key == "controller" else ""), "default"
    values["controller"] = ",".join(controller_list(values["controller"]))
    return ClientSettings(**values, sources=sources, config_file=str(path))
