"""Fleet processes: run the controller, an agent, or a whole emulated lab (the boards themselves: devices.py)."""

from __future__ import annotations

import asyncio
import logging
import math
import signal
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import click

from jetfleet.cli.common import controller_address, exit_code, handle_errors, output_option

log = logging.getLogger(__name__)
DEFAULT_DATA_DIR = "~/.local/share/jetfleet"


def run_until_signalled(main: Callable[[asyncio.Event], Coroutine[Any, Any, None]]) -> None:
    """Run ``main(stop)`` until SIGINT or SIGTERM sets ``stop``; main shuts down cleanly."""

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await main(stop)

    asyncio.run(runner())


def raise_fd_limit() -> None:
    """Lift the soft limit on open descriptors to the hard limit: each client connection holds one, and the
    default soft limit (1,024) is far below what a lab's controller may hold (systemd's LimitNOFILE sets the hard)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as e:
            log.warning("cannot raise the open-file limit from %s to %s: %s", soft, hard, e)


# --- processes ----------------------------------------------------------------------------------------
@click.group("controller")
def controller_group() -> None:
    """The central controller."""


@controller_group.command("serve")
@click.option("--listen", default="127.0.0.1:50051", show_default=True, metavar="HOST:PORT")
@click.option("--store", default=DEFAULT_DATA_DIR, show_default=True, envvar="JETFLEET_STORE",
              metavar="PATH|redis://[:PASSWORD@]HOST:PORT/DB|redis+sentinel://[:PASSWORD@]HOST:PORT,.../MASTER",
              help="data directory for the embedded SQLite store, or a Redis URL, or Redis Sentinels' addresses and "
                   "the master's name (a password is never printed; give a URL with a password in $JETFLEET_STORE so "
                   "no process listing shows it)")
@click.option("--store-prefix", default="jetfleet", show_default=True, envvar="JETFLEET_STORE_PREFIX",
              help="Redis key prefix: controllers on one prefix are one lab and elect one leader (docs/standby.md)")
@click.option("--lease-ttl", "lease_ttl_s", default=3.0, show_default=True, type=click.FloatRange(0.6, 600),
              help="Redis: seconds a leader's lease lasts without renewal (a standby takes over this long after the "
                   "leader dies; it renews every ttl/6)")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="serve Prometheus metrics (/metrics) and agent discovery (/sd/agents, for http_sd) on this port")
@click.option("--metrics-address", default="", metavar="HOST", help="bind the metrics endpoint here [the --listen host]")
@click.option("--metrics-tls-cert", default="", help="serve metrics over HTTPS with this certificate ...")
@click.option("--metrics-tls-key", default="", help="... and key")
@click.option("--metrics-auth-file", default="", metavar="FILE",
              help="require HTTP basic auth on the metrics endpoint: a file holding USER:PASSWORD (keep it 0600)")
@click.option("--tls-cert", default="", help="controller certificate (jetfleet certs issue controller NAME)")
@click.option("--tls-key", default="")
@click.option("--tls-ca", default="", help="the lab CA: clients must present a certificate it signed")
@click.option("--insecure", is_flag=True, help="allow plaintext on a non-loopback address (logged loudly)")
@click.option("--max-connections", default=4096, show_default=True, type=click.IntRange(16, 1_000_000),
              help="open client connections at once (also bounded by the open-file limit)")
@click.option("--handshake-timeout", "handshake_timeout_s", default=10.0, show_default=True,
              type=click.FloatRange(0.1, 300), help="seconds a new connection may take to start speaking gRPC")
@click.option("--queued-call-timeout", "queued_call_s", default=300.0, show_default=True,
              type=click.FloatRange(1, 3600), help="seconds a new call (an agent's session, an operator's request) may "
                                                   "wait for the controller to take it before gRPC cancels it")
@click.option("--max-hellos", "max_hellos_in_flight", default=64, show_default=True, type=click.IntRange(1, 100_000),
              help="agents' hellos handled at once; the agents beyond are told when to dial again (a fleet coming up "
                   "or re-dialling a restarted controller arrives spread out instead of all at once)")
@click.option("--hello-timeout", "hello_timeout_s", default=30.0, show_default=True, type=click.FloatRange(0.1, 3600),
              help="seconds an agent's session may take to send its hello; a session silent longer is closed "
                   "(DEADLINE_EXCEEDED) and gives its admission place back")
@handle_errors
def controller_serve(listen: str, store: str, store_prefix: str, lease_ttl_s: float, metrics_port: int | None,
                     metrics_address: str, metrics_tls_cert: str,
                     metrics_tls_key: str, metrics_auth_file: str, tls_cert: str, tls_key: str, tls_ca: str,
                     insecure: bool, max_connections: int, handshake_timeout_s: float, queued_call_s: float,
                     max_hellos_in_flight: int, hello_timeout_s: float) -> None:
    """Run the controller until SIGTERM or Ctrl-C (Python 3.11 or newer).

    On Redis, controllers sharing a --store-prefix elect one leader; the others stand by (refusing calls, naming the
    leader) and take over when the leader's lease expires. A leader that loses its lease stops acting and exits with
    status 5 (systemd starts it again, as a standby)."""
    import sys

    if sys.version_info < (3, 11):
        raise click.UsageError(f"the controller needs Python 3.11 or newer (this is {sys.version.split()[0]}); "
                               "a board runs only the agent")
    from jetfleet.controller.config import ControllerConfig
    from jetfleet.controller.server import Controller, tune_gc

    config = ControllerConfig(listen=listen, store=store, store_prefix=store_prefix, lease_ttl_s=lease_ttl_s,
                              lease_renew_s=lease_ttl_s / 6, lease_try_s=min(0.5, lease_ttl_s / 6),
                              metrics_port=metrics_port, metrics_address=metrics_address,
                              metrics_tls_cert=metrics_tls_cert, metrics_tls_key=metrics_tls_key,
                              metrics_auth_file=metrics_auth_file, tls_cert=tls_cert, tls_key=tls_key, tls_ca=tls_ca,
                              insecure=insecure, max_connections=max_connections,
                              handshake_timeout_s=handshake_timeout_s, queued_call_s=queued_call_s,
                              max_hellos_in_flight=max_hellos_in_flight, hello_timeout_s=hello_timeout_s)
    raise_fd_limit()
    lost = [False]

    async def main(stop: asyncio.Event) -> None:
        ctl = Controller(config)
        port = await ctl.start()
        tune_gc()
        click.echo(f"controller listening on {listen.rpartition(':')[0]}:{port} "
                   f"({'mutual TLS' if ctl.tls else 'plaintext'}), store {ctl.store.url}"
                   + (f", metrics on {ctl.metrics_url}" if ctl.metrics_url else "")
                   + ("" if not ctl.role.redis else ", leader" if ctl.role.leading
                      else f", standby ({ctl.role.describe_leader()})"), nl=True)
        done = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(ctl.role.lost.wait())}
        _, pending = await asyncio.wait(done, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        lost[0] = ctl.role.lost.is_set()
        await ctl.stop()

    run_until_signalled(main)
    if lost[0]:
        click.echo("error: this controller lost the lead (its lease expired or Redis could not be reached) and "
                   "stopped acting; exiting so that it starts again as a standby", err=True)
        raise SystemExit(exit_code("UNAVAILABLE"))


@controller_group.command("status")
@click.option("--store", default=DEFAULT_DATA_DIR, show_default=True, envvar="JETFLEET_STORE",
              metavar="PATH|redis://...|redis+sentinel://...", help="the lab's store, as given to `controller serve`")
@click.option("--store-prefix", default="jetfleet", show_default=True, envvar="JETFLEET_STORE_PREFIX",
              help="the lab's Redis key prefix")
@output_option
@handle_errors
def controller_status(store: str, store_prefix: str, output: str) -> None:
    """Which controller leads the lab and which stand by: read from its store (works while every controller is down)."""
    import json
    from dataclasses import asdict

    from jetfleet.controller.leader.status import lab_status

    st = lab_status(store, store_prefix)
    if output == "json":
        click.echo(json.dumps(asdict(st)))
        return
    if st.leader is None:
        click.echo(f"no controller leads {st.store}" + (f" (prefix {store_prefix})" if st.backend == "redis" else ""))
    elif st.backend == "redis":
        click.echo(f"leader {st.leader.describe()}, fencing token {st.token}, lease expires in "
                   f"{st.expires_in_s:.1f} s (store {st.store}, prefix {store_prefix})")
    for standby in st.standbys:
        click.echo(f"standby {standby.describe()}")
    if st.leader is not None and st.backend != "redis":
        click.echo(f"controller {st.leader.describe()} holds {st.store} (SQLite: one controller)")


@click.group("agent")
def agent_group() -> None:
    """The agent that runs on every board."""


@agent_group.command("run")
@click.option("--controller", "controller", default=None, metavar="HOST[:PORT]", allow_from_autoenv=False,
              help="the controller to dial; port 50051 if none [env JETFLEET_CONTROLLER; config file; 127.0.0.1:50051]")
@click.option("--device", "device_spec", default="auto", show_default=True,
              help="auto (this Jetson) or emulated:MODEL[:SEED]")
@click.option("--id", "device_id", default="", help="device id (default: MODEL-SERIAL)")
@click.option("--speed", "speed_text", default="1", show_default=True, metavar="FACTOR|inf|real",
              help="emulated boards: how fast the board's clock runs (100: 100x real time; inf: instant)")
@click.option("--route", type=click.Choice(["sysfs", "nvpmodel"]), default="sysfs", show_default=True,
              help="how a real board enters a mode: sysfs/debugfs writes, or nvpmodel first (the papers' way)")
@click.option("--telemetry", type=click.Choice(["sysfs", "jtop"]), default="sysfs", show_default=True,
              help="where a real board's samples come from (jtop: jetson-stats' service, sampled every >= 0.5 s)")
@click.option("--fan", type=click.Choice(["max", "leave"]), default="max", show_default=True,
              help="fan at maximum while modes are set (as the papers measured), or left alone")
@click.option("--root", "board_root", default="/", show_default=True, metavar="DIR",
              help="the board's filesystem root (/sys, /proc, /etc are read under it; for containers and tests)")
@click.option("--state-dir", default="/var/lib/jetfleet", show_default=True, metavar="DIR",
              help="where the state found before the first change is kept (restored on exit and after a crash); "
                   "a relative path is under --root")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None, help="serve Prometheus metrics on this port")
@click.option("--metrics-address", default="0.0.0.0", show_default=True, metavar="HOST",
              help="the address the metrics endpoint binds")
@click.option("--metrics-tls-cert", default="", help="serve metrics over HTTPS with this certificate ...")
@click.option("--metrics-tls-key", default="", help="... and key")
@click.option("--metrics-auth-file", default="", metavar="FILE",
              help="require HTTP basic auth: a file holding USER:PASSWORD (keep it 0600)")
@click.option("--tls-ca", default="", help="the lab CA")
@click.option("--tls-cert", default="", help="this agent's certificate (its name must be the device id)")
@click.option("--tls-key", default="")
@click.option("--insecure", is_flag=True, help="allow plaintext to a non-loopback controller (logged loudly)")
@click.option("--session-socket", default="", metavar="PATH",
              help="let training processes on this board join through this Unix socket (jetfleet.session; "
                   "e.g. /run/jetfleet/session.sock)")
@click.option("--session-socket-mode", type=click.Choice(["0600", "0660"]), default="0660", show_default=True,
              help="who may join: the agent's user (0600) or also its group (0660)")
@click.option("--templates", "templates_file", default="", metavar="FILE",
              help="the job templates this agent may launch (`job submit --template`), a TOML file (docs/own-training.md); "
                   "it launches nothing else")
@handle_errors
def agent_run(controller: str | None, device_spec: str, device_id: str, speed_text: str, route: str, telemetry: str,
              fan: str, board_root: str, state_dir: str, metrics_port: int | None, metrics_address: str,
              metrics_tls_cert: str, metrics_tls_key: str, metrics_auth_file: str, tls_ca: str, tls_cert: str,
              tls_key: str, insecure: bool, session_socket: str, session_socket_mode: str, templates_file: str) -> None:
    """Dial the controller and serve this board until SIGTERM or Ctrl-C; a real board is left as it was found."""
    from dataclasses import replace

    from jetfleet.agent.config import AgentConfig
    from jetfleet.agent.device import open_device
    from jetfleet.agent.device.jetson import JetsonOptions
    from jetfleet.agent.link import AgentLink
    from jetfleet.agent.templates import load_templates
    from jetfleet.agent.workloads.plugins import load_workloads
    from jetfleet.shared.metrics_http import MetricsHttpConfig

    speed = parse_speed(speed_text)
    metrics_http = MetricsHttpConfig(address=metrics_address, port=metrics_port or 0, tls_cert=metrics_tls_cert,
                                     tls_key=metrics_tls_key, auth_file=metrics_auth_file)
    metrics_http.check()
    options = JetsonOptions(route=route, telemetry=telemetry, fan_max=fan == "max",
                            state_dir=state_dir)
    workloads = load_workloads()   # the built-ins plus the workload plugins installed on this board
    for name, why in sorted(workloads.registry.broken.items()):
        click.echo(f"warning: workload plugin {name} is broken and not offered: {why}", err=True)
    if templates_file and not session_socket:
        raise click.UsageError("--templates needs --session-socket (what it launches joins through it)")
    config = AgentConfig(controller=controller_address(controller), device_id=device_id,
                         metrics_port=metrics_port, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key,
                         insecure=insecure, session_socket=session_socket,
                         session_socket_mode=int(session_socket_mode, 8),
                         templates=load_templates(templates_file) if templates_file else None)
    if telemetry == "jtop":  # jtop's clients share one interval of at least 0.5 s: sample no faster
        config = replace(config, sample_interval_s=max(config.sample_interval_s, options.jtop_interval_s))
    device = open_device(device_spec, speed=speed, sysfs_root=board_root, options=options, workloads=workloads)

    async def main(stop: asyncio.Event) -> None:
        metrics, server = None, None
        try:
            if metrics_port is not None:
                from jetfleet.agent.link import registered_id
                from jetfleet.agent.metrics import AgentMetrics
                from jetfleet.shared.metrics_http import MetricsServer

                info = device.describe()
                metrics = AgentMetrics(info.catalog, registered_id(config.device_id, info.model, info.serial))
                server = MetricsServer(metrics.registry, metrics_http).start()
            link = AgentLink(device, config, metrics=metrics, metrics_port=server.port if server else 0,
                             workloads=workloads.registry)
            click.echo(f"agent {link.device_id} ({link.info.model}) dialling {', '.join(link.addresses)}"
                       + (f", metrics on {server.url}" if server else "")
                       + (f", training sessions on {config.session_socket}" if config.session_socket else ""))
            await link.run(stop)
        finally:
            if server is not None:
                server.stop()

    try:
        run_until_signalled(main)
    finally:
        device.close()  # a real board: everything jetfleet changed goes back as it was found


@click.group("lab")
def lab_group() -> None:
    """A controller with the embedded store plus emulated agents, in one process."""


LAB_SPEED = 100.0   # the lab's boards run 100x real time unless told: campaigns in minutes, a job's closed loop visible


def parse_speed(text: str) -> float:
    """``100``, ``100x``, ``inf``/``instant`` or ``real``/``1`` -> board seconds per wall second."""
    t = text.strip().lower().rstrip("x")
    if t in ("inf", "instant"):
        return math.inf
    if t in ("real", "realtime", "real-time"):
        return 1.0
    try:
        v = float(t)
    except ValueError:
        v = float("nan")
    if not (v > 0):
        raise click.BadParameter(f"{text!r}: a factor > 0 (100 or 100x), inf (instant) or real (1x)")
    return v


def speed_words(speed: float) -> str:
    """``100x real time``, ``instant``, ``real time``."""
    return "instant (no wall time)" if math.isinf(speed) else "real time" if speed == 1 else f"{speed:g}x real time"


@lab_group.command("up")
@click.option("--listen", default="127.0.0.1:50051", show_default=True, metavar="HOST:PORT")
@click.option("--data-dir", default=DEFAULT_DATA_DIR + "/lab", show_default=True)
@click.option("--boards", default="agx-orin,agx-xavier,orin-nano", show_default=True,
              help="comma-separated board models, one emulated agent each")
@click.option("--speed", "speed_text", default=f"{LAB_SPEED:g}", show_default=True, metavar="FACTOR|inf|real",
              help="how fast the boards' clocks run: 100 (board seconds per wall second), inf (instant: campaigns are "
                   "bound by the store, not the boards) or real (1x, as a real board)")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None)
@click.option("--session-dir", default="", metavar="DIR",
              help="each board takes training sessions (jetfleet.session) on DIR/DEVICE.sock [default: DATA_DIR/sessions]")
@click.option("--templates", "templates_file", default="", metavar="FILE",
              help="every board's agent may launch these job templates (`job submit --template`; as `agent run`)")
@handle_errors
def lab_up(listen: str, data_dir: str, boards: str, speed_text: str, metrics_port: int | None,
           session_dir: str, templates_file: str) -> None:
    """Run a lab of emulated boards until interrupted (their clocks at 100x real time unless --speed says)."""
    from jetfleet.agent.config import AgentConfig
    from jetfleet.agent.templates import load_templates
    from jetfleet.controller.config import ControllerConfig
    from jetfleet.lab import Lab
    from jetfleet.shared.catalog import get_catalog

    speed = parse_speed(speed_text)
    models = [b.strip() for b in boards.split(",") if b.strip()]
    for m in models:
        get_catalog(m)
    config = ControllerConfig(listen=listen, store=str(Path(data_dir).expanduser()), metrics_port=metrics_port)
    agent_config = AgentConfig(templates=load_templates(templates_file)) if templates_file else None
    raise_fd_limit()

    async def main(stop: asyncio.Event) -> None:
        from jetfleet.agent.workloads.plugins import load_workloads

        sessions = session_dir or str(Path(data_dir).expanduser() / "sessions")
        lab = Lab(config, models, speed=speed, agent_metrics=metrics_port is not None,
                  workloads=load_workloads().registry, session_dir=sessions, agent_config=agent_config)
        await lab.start()
        await lab.wait_online()
        click.echo(f"lab up on {lab.address} with {len(models)} emulated boards: "
                   f"{', '.join(a.device_id for a in lab.agents)}")
        click.echo(f"the boards' clocks run at {speed_words(speed)} (--speed; `jetfleet devices ls` shows it); "
                   "times in `profile` and `job` are board time")
        click.echo(f"try: JETFLEET_CONTROLLER={lab.address} jetfleet devices ls")
        click.echo(f"your own training joins a board through {sessions}/DEVICE.sock (jetfleet.session; "
                   "examples/own-training)")
        if metrics_port is not None:
            ports = ", ".join(f"{a.device_id} :{a.metrics_port}" for a in lab.agents)
            click.echo(f"metrics: controller :{metrics_port}; agents {ports} "
                       f"(jetfleet prometheus targets --out FILE lists them for Prometheus)")
        await stop.wait()
        await lab.stop()

    run_until_signalled(main)


@lab_group.command("demo")
@handle_errors
def lab_demo() -> None:
    """The main job end to end against emulated boards, narrated (what `make demo` runs)."""
    from jetfleet.lab.demo import run_demo

    asyncio.run(run_demo(click.echo))
