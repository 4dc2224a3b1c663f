"""Fleet commands: run the controller, an agent, or a whole emulated lab; query and drive boards."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import click

from jetfleet.cli.common import emit, handle_errors, output_option, table

log = logging.getLogger(__name__)
DEFAULT_DATA_DIR = "~/.local/share/jetfleet"

controller_option = click.option("--controller", "controller", default=None, metavar="HOST:PORT",
                                 help="controller address (default $JETFLEET_CONTROLLER or 127.0.0.1:50051)")


def run_until_signalled(main: Callable[[asyncio.Event], Coroutine[Any, Any, None]]) -> None:
    """Run ``main(stop)`` until SIGINT or SIGTERM sets ``stop``; main shuts down cleanly."""

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await main(stop)

    asyncio.run(runner())


# --- processes ----------------------------------------------------------------------------------------
@click.group("controller")
def controller_group() -> None:
    """The central controller."""


@controller_group.command("serve")
@click.option("--listen", default="127.0.0.1:50051", show_default=True, metavar="HOST:PORT")
@click.option("--store", default=DEFAULT_DATA_DIR, show_default=True, metavar="PATH|redis://HOST:PORT/DB",
              help="data directory for the embedded SQLite store, or a Redis URL")
@click.option("--metrics-port", type=int, default=None, help="serve Prometheus metrics on this port")
@click.option("--tls-cert", default="", help="controller certificate (jetfleet certs issue controller NAME)")
@click.option("--tls-key", default="")
@click.option("--tls-ca", default="", help="the lab CA: clients must present a certificate it signed")
@click.option("--insecure", is_flag=True, help="allow plaintext on a non-loopback address (logged loudly)")
@handle_errors
def controller_serve(listen: str, store: str, metrics_port: int | None, tls_cert: str, tls_key: str, tls_ca: str,
                     insecure: bool) -> None:
    """Run the controller until SIGTERM or Ctrl-C."""
    from jetfleet.controller.config import ControllerConfig
    from jetfleet.controller.server import Controller

    config = ControllerConfig(listen=listen, store=store, metrics_port=metrics_port, tls_cert=tls_cert,
                              tls_key=tls_key, tls_ca=tls_ca, insecure=insecure)

    async def main(stop: asyncio.Event) -> None:
        ctl = Controller(config)
        port = await ctl.start()
        click.echo(f"controller listening on {listen.rpartition(':')[0]}:{port}, store {ctl.store.url}")
        await stop.wait()
        await ctl.stop()

    run_until_signalled(main)


@click.group("agent")
def agent_group() -> None:
    """The agent that runs on every board."""


@agent_group.command("run")
@controller_option
@click.option("--device", "device_spec", default="auto", show_default=True,
              help="auto (this Jetson) or emulated:MODEL[:SEED]")
@click.option("--id", "device_id", default="", help="device id (default: MODEL-SERIAL)")
@click.option("--speed", default=1.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="emulated boards: time acceleration factor (inf = instant)")
@click.option("--metrics-port", type=int, default=None, help="serve Prometheus metrics on this port")
@click.option("--tls-ca", default="", help="the lab CA")
@click.option("--tls-cert", default="", help="this agent's certificate (its name must be the device id)")
@click.option("--tls-key", default="")
@click.option("--insecure", is_flag=True, help="allow plaintext to a non-loopback controller (logged loudly)")
@handle_errors
def agent_run(controller: str | None, device_spec: str, device_id: str, speed: float,
              metrics_port: int | None, tls_ca: str, tls_cert: str, tls_key: str, insecure: bool) -> None:
    """Dial the controller and serve this board until SIGTERM or Ctrl-C."""
    from jetfleet.agent.config import AgentConfig
    from jetfleet.agent.device import open_device
    from jetfleet.agent.link import AgentLink
    from jetfleet.controller.client import controller_address

    device = open_device(device_spec, speed=speed)
    config = AgentConfig(controller=controller_address(controller), device_id=device_id,
                         metrics_port=metrics_port, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key,
                         insecure=insecure)

    async def main(stop: asyncio.Event) -> None:
        metrics, port = None, 0
        if metrics_port is not None:
            from jetfleet.agent.metrics import AgentMetrics, serve

            metrics = AgentMetrics(device.describe().catalog)
            server, _ = serve(metrics, metrics_port, addr="0.0.0.0")
            port = int(server.server_address[1])
        link = AgentLink(device, config, metrics=metrics, metrics_port=port)
        click.echo(f"agent {link.device_id} ({link.info.model}) dialling {config.controller}"
                   + (f", metrics on :{port}" if port else ""))
        await link.run(stop)

    run_until_signalled(main)


@click.group("lab")
def lab_group() -> None:
    """A controller with the embedded store plus emulated agents, in one process."""


@lab_group.command("up")
@click.option("--listen", default="127.0.0.1:50051", show_default=True, metavar="HOST:PORT")
@click.option("--data-dir", default=DEFAULT_DATA_DIR + "/lab", show_default=True)
@click.option("--boards", default="agx-orin,agx-xavier,orin-nano", show_default=True,
              help="comma-separated board models, one emulated agent each")
@click.option("--speed", default=1.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="emulated time acceleration factor (inf = instant)")
@click.option("--metrics-port", type=int, default=None)
@handle_errors
def lab_up(listen: str, data_dir: str, boards: str, speed: float, metrics_port: int | None) -> None:
    """Run a lab of emulated boards until interrupted."""
    from jetfleet.controller.config import ControllerConfig
    from jetfleet.controller.lab import Lab
    from jetfleet.shared.catalog import get_catalog

    models = [b.strip() for b in boards.split(",") if b.strip()]
    for m in models:
        get_catalog(m)
    config = ControllerConfig(listen=listen, store=str(Path(data_dir).expanduser()), metrics_port=metrics_port)

    async def main(stop: asyncio.Event) -> None:
        lab = Lab(config, models, speed=speed, agent_metrics=metrics_port is not None)
        await lab.start()
        await lab.wait_online()
        click.echo(f"lab up on {lab.address} with {len(models)} emulated boards: "
                   f"{', '.join(a.device_id for a in lab.agents)}")
        click.echo(f"try: JETFLEET_CONTROLLER={lab.address} jetfleet devices ls")
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
    from jetfleet.controller.demo import run_demo

    asyncio.run(run_demo(click.echo))


# --- client commands ------------------------------------------------------------------------------
def _client(controller: str | None) -> Any:
    from jetfleet.controller.client import OperatorClient, controller_address

    return OperatorClient(controller_address(controller))


def device_dict(d: Any) -> dict[str, Any]:
    from jetfleet.shared.convert import mode_text

    out = {"device_id": d.device_id, "model": d.model, "online": d.online,
           "current_mode": mode_text(d.current_mode) if d.HasField("current_mode") else None,
           "current_mode_name": d.current_mode_name or None, "serial": d.serial, "emulated": d.emulated,
           "last_seen_s": d.last_seen_s, "software": dict(d.software)}
    if d.HasField("last_telemetry"):
        out["power_w"] = round(d.last_telemetry.total_w, 3)
        out["rails_w"] = {k: round(v, 3) for k, v in sorted(d.last_telemetry.rails_w.items())}
    return out


@click.group("devices")
def devices_group() -> None:
    """Boards known to the controller."""


@devices_group.command("ls")
@controller_option
@click.option("--model", default="", help="only this board model")
@output_option
@handle_errors
def devices_ls(controller: str | None, model: str, output: str) -> None:
    """Every board: id, model, online state, current mode."""
    with _client(controller) as c:
        rows = [device_dict(d) for d in c.list_devices(model)]
    emit(output, rows, lambda rs: table(
        [[r["device_id"], r["model"], "online" if r["online"] else "offline",
          (r["current_mode"] or "?") + (f" ({r['current_mode_name']})" if r["current_mode_name"] else ""),
          f"{r['power_w']:.1f} W" if "power_w" in r else "-"] for r in rs],
        ["DEVICE", "MODEL", "STATE", "MODE", "POWER"]))


@devices_group.command("show")
@click.argument("device")
@controller_option
@output_option
@handle_errors
def devices_show(device: str, controller: str | None, output: str) -> None:
    """One board in detail."""
    with _client(controller) as c:
        d = c.get_device(device)
    data = device_dict(d)
    data["catalog"] = {"modes": len(d.catalog.cores) * len(d.catalog.cpu_mhz) * len(d.catalog.gpu_mhz)
                       * len(d.catalog.mem_mhz), "presets": sorted(d.catalog.presets),
                       "rails": [r.label for r in d.catalog.rails]}

    def text(x: dict[str, Any]) -> str:
        lines = [f"{k}: {v}" for k, v in x.items() if k not in ("rails_w", "catalog", "software")]
        lines.append("software: " + ", ".join(f"{k}={v}" for k, v in sorted(x["software"].items())))
        lines.append(f"catalog: {x['catalog']['modes']} modes, presets {', '.join(x['catalog']['presets'])}")
        lines += [f"  {k:<18} {v:7.2f} W" for k, v in x.get("rails_w", {}).items()]
        return "\n".join(lines)

    emit(output, data, text)


@click.group("mode")
def mode_group() -> None:
    """Power modes of boards."""


@mode_group.command("set")
@click.argument("device")
@click.argument("mode")
@controller_option
@click.option("--request-id", default="", help="makes the request idempotent (safe to retry)")
@click.option("--timeout", "timeout_s", default=30.0, show_default=True, type=float)
@output_option
@handle_errors
def mode_set(device: str, mode: str, controller: str | None, request_id: str, timeout_s: float,
             output: str) -> None:
    """Set DEVICE to MODE (CORES/CPU/GPU/MEM in MHz, or a preset); prints the mode the board confirms."""
    from jetfleet.shared.convert import mode_text

    with _client(controller) as c:
        r = c.set_mode(device, mode, request_id=request_id, timeout_s=timeout_s)
    data = {"device_id": r.device_id, "requested": mode_text(r.requested), "confirmed": mode_text(r.confirmed),
            "command_id": r.command_id, "latency_ms": round(r.latency_s * 1e3, 2)}
    emit(output, data, lambda d: f"{d['device_id']} confirms {d['confirmed']} ({d['latency_ms']:.0f} ms)")


@click.group("telemetry")
def telemetry_group() -> None:
    """Live telemetry."""


@telemetry_group.command("watch")
@click.argument("device")
@controller_option
@click.option("--count", default=0, type=int, help="stop after this many samples (0 = until Ctrl-C)")
@output_option
@handle_errors
def telemetry_watch(device: str, controller: str | None, count: int, output: str) -> None:
    """Live power per rail of DEVICE (one line per sample; --output json: one JSON object per line)."""
    import json

    with _client(controller) as c:
        c.get_device(device)  # NOT_FOUND before waiting on a stream
        try:
            for s in c.watch(device, count):
                if output == "json":
                    click.echo(json.dumps({"t_s": s.t_s, "total_w": s.total_w, "rails_w": dict(s.rails_w),
                                           "cpu_mhz": s.cpu_mhz, "gpu_mhz": s.gpu_mhz, "mem_mhz": s.mem_mhz}))
                else:
                    rails = "  ".join(f"{k} {v:6.2f}" for k, v in sorted(s.rails_w.items()))
                    stamp = time.strftime("%H:%M:%S", time.localtime(s.t_s)) + f".{int(s.t_s * 10) % 10}"
                    click.echo(f"{stamp}  total {s.total_w:6.2f} W  {rails}")
        except KeyboardInterrupt:
            pass

