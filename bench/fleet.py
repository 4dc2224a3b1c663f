"""Fleet benchmark: the controller process under N agents, beside a minimal grpc.aio server of the same
service under the same load, in the same run.

The load comes from ``bench/fleet_load.py`` processes (4 by default, N/4 agents each, one gRPC
connection per agent): every agent sends one telemetry batch of 10 samples a second (10 Hz sampling,
1 s batches) with its heartbeat folded in, or, to a controller that does not say it reads them, a
batch of sample messages plus a heartbeat of its own. Figures, each beside its limit and the ratio:

- messages per CPU-second of the controller vs the minimal server at N agents (>= 0.8 x minimal),
  medians of 3 windows each; in each of 3 rounds the two run at the same time, each under its own load, their
  windows at the same moments (``--alternately``: one after the other), and the ratio is the median of the rounds';
- N = 5,000 agents on one controller: all online without a reconnect storm (sessions that failed and were
  dialled again: the limit is none; sessions the controller turned away while admitting others, told when to
  dial again, are counted apart), ingest keeping up with what was sent, controller CPU (its whole process: the
  event loop and gRPC's threads) within one core; with ``--controller-cpus 0`` the controller is pinned to one
  CPU (given less than a core: it shares it) and ``--load-cpus 1`` keeps the load off that CPU;
- `mode set` round trips through the operator client under the N = 1,000 load (p99 < 50 ms).

The load processes' own CPU is printed too: on a 2-core machine they share the cores with the server.

    python bench/fleet.py [--agents 1000] [--big 5000] [--window 10] [--rounds 3] [--alternately] [--mode-sets 200]
                          [--load-procs 4]
                          [--controller-repo PATH]   # another checkout's controller (a before figure)
                          [--controller-cpus 0] [--load-cpus 1] [--max-hellos N] [--connect-rate 5000]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jetfleet.client import OperatorClient  # noqa: E402
from jetfleet.shared.errors import JetfleetError  # noqa: E402
from tests.harness import free_port  # noqa: E402

LOAD = str(ROOT / "bench" / "fleet_load.py")
PRESETS = {"agx-orin": ("MAXN", "15W"), "agx-xavier": ("MAXN", "MODE_15W"), "orin-nano": ("MAXN", "7W")}
MODELS = ["agx-orin", "agx-xavier", "orin-nano"]
RATIO_LIMIT, P99_LIMIT_MS = 0.8, 50.0
ERRORS: dict[int, Any] = {}   # a load process's stderr (a temporary file), by pid
LISTENING = re.compile(r"listening on \S*:(\d+)")   # the controller's first line: `controller listening on HOST:PORT`


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """A process's resident memory now (MiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def ask(proc: subprocess.Popen[str]) -> list[int]:
    """A load process's or the minimal server's counters ('count' on its stdin, one line back)."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("count\n")
    proc.stdin.flush()
    return [int(x) for x in proc.stdout.readline().split()]


def start_load(address: str, n: int, procs: int, kind: str = "agents", cpus: set[int] | None = None,
               connect_rate: float = 0.0) -> list[subprocess.Popen[str]]:
    per = -(-n // procs)
    out = []
    for i in range(procs):
        if n - i * per <= 0:
            break
        # stderr: why sessions failed, how many for each reason (printed at the end), and asyncio's
        # complaints about the sessions the controller dropped
        err = tempfile.TemporaryFile("w+")
        rate = [str(connect_rate)] if connect_rate and kind == "agents" else []
        p = subprocess.Popen([sys.executable, LOAD, kind, address, str(i * per), str(min(per, n - i * per)), *rate],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)
        ERRORS[p.pid] = err
        if cpus:
            os.sched_setaffinity(p.pid, cpus)
        out.append(p)
    return out


def stop_all(procs: list[subprocess.Popen[str]]) -> list[str]:
    """Stop the load processes; why their sessions failed, each reason with how many, most first."""
    for p in procs:
        if p.stdin:
            p.stdin.close()
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    reasons: dict[str, int] = {}
    for p in procs:
        err = ERRORS.pop(p.pid, None)
        if err is not None:
            err.seek(0)
            for line in err:
                if "session failed: " in line:
                    k, _, why = line.split("session failed: ", 1)[1].strip().partition(" ")
                    reasons[why] = reasons.get(why, 0) + int(k)
            err.close()
    return [f"{k} {why}" for why, k in sorted(reasons.items(), key=lambda kv: -kv[1])]


def wait_welcomed(loads: list[subprocess.Popen[str]], n: int, timeout_s: float = 600,
                  server_pid: int | None = None) -> float:
    """Seconds until all n agents were welcomed; progress on stderr every 15 s (welcomed, failed sessions, CPU)."""
    t0 = last = time.monotonic()
    c0 = cpu_s(server_pid) if server_pid else 0.0
    while time.monotonic() - t0 < timeout_s:
        counts = [ask(p) for p in loads]
        if sum(c[1] for c in counts) >= n:
            return time.monotonic() - t0
        if time.monotonic() - last >= 15:
            last = time.monotonic()
            cpu = f", server CPU {(cpu_s(server_pid) - c0) / (last - t0) * 100:.0f} %" if server_pid else ""
            print(f"    {last - t0:4.0f} s: {sum(c[1] for c in counts)}/{n} welcomed, "
                  f"{sum(c[2] for c in counts)} sessions failed, {sum(c[3] for c in counts)} turned "
                  f"away{cpu}", file=sys.stderr, flush=True)
        time.sleep(0.5)
    raise RuntimeError(f"only {sum(ask(p)[1] for p in loads)} of {n} agents were welcomed in {timeout_s:.0f} s")


def windows(server_pid: int, loads: list[subprocess.Popen[str]], count: callable, window_s: float,  # type: ignore[valid-type]
            repeat: int = 3) -> list[dict[str, float]]:
    """``repeat`` windows: messages the server got (``count()``) per CPU-second of the server, its CPU share,
    the load's CPU share and the messages sent."""
    out = []
    for _ in range(repeat):
        m0, c0, l0, s0, t0 = count(), cpu_s(server_pid), sum(cpu_s(p.pid) for p in loads), \
            sum(ask(p)[0] for p in loads), time.monotonic()
        time.sleep(window_s)
        m1, c1, l1, s1, t1 = count(), cpu_s(server_pid), sum(cpu_s(p.pid) for p in loads), \
            sum(ask(p)[0] for p in loads), time.monotonic()
        wall = t1 - t0
        out.append({"per_cpu_s": (m1 - m0) / max(c1 - c0, 1e-9), "cpu": (c1 - c0) / wall, "load_cpu": (l1 - l0) / wall,
                    "msgs": (m1 - m0) / wall, "sent": (s1 - s0) / wall})
    return out


def median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def minimal(n: int, window_s: float, procs: int, *, server_cpus: set[int] | None = None,
            load_cpus: set[int] | None = None, barrier: threading.Barrier | None = None) -> list[dict[str, float]]:
    server = subprocess.Popen([sys.executable, LOAD, "minimal"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    loads: list[subprocess.Popen[str]] = []
    try:
        if server_cpus:
            os.sched_setaffinity(server.pid, server_cpus)
        assert server.stdout is not None
        address = f"127.0.0.1:{int(server.stdout.readline())}"
        loads = start_load(address, n, procs, cpus=load_cpus)
        wait_welcomed(loads, n, server_pid=server.pid)
        time.sleep(min(2.0, 2 * window_s))   # past the sessions' first messages, as the controller's windows are
        if barrier is not None:
            barrier.wait(900)   # the controller's windows open at the same moment
        return windows(server.pid, loads, lambda: ask(server)[0], window_s)
    finally:
        stop_all(loads)
        server.kill()
        server.wait()


def samples_total(metrics_port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30).read().decode()
    # one series per board: the sum over them
    return sum(float(v) for v in re.findall(r"^jetfleet_telemetry_samples_total(?:\{[^}]*\})? ([0-9.e+]+)$", text, re.M))


def controller(n: int, window_s: float, procs: int, mode_sets: int, repo: Path, kind: str = "agents", *,
               controller_cpus: set[int] | None = None, load_cpus: set[int] | None = None,
               max_hellos: int = 0, connect_rate: float = 0.0, queued_call_s: float = 0.0,
               barrier: threading.Barrier | None = None) -> dict[str, object]:
    """The controller (of ``repo``) under n agents: windows, ingest, online count, and mode-set latencies; how the
    agents came online (seconds, the controller's CPU meanwhile, sessions failed and turned away, and why they
    failed), and its memory."""
    result: dict[str, object] = {}
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as d:
        mport = free_port()
        env = {**os.environ, "PYTHONPATH": str(repo)}
        cmd = [sys.executable, "-m", "jetfleet.cli", "controller", "serve", "--listen", "127.0.0.1:0", "--store", d,
               "--metrics-port", str(mport), "--max-connections", str(n + 1000)]
        cmd += ["--max-hellos", str(max_hellos)] if max_hellos else []
        cmd += ["--queued-call-timeout", f"{queued_call_s:g}"] if queued_call_s else []
        ctl = subprocess.Popen(cmd,
                               stdout=subprocess.PIPE, text=True, env=env, cwd=repo)
        assert ctl.stdout is not None
        loads: list[subprocess.Popen[str]] = []
        try:
            if controller_cpus:
                os.sched_setaffinity(ctl.pid, controller_cpus)
            line = ctl.stdout.readline()
            m = LISTENING.search(line)
            if not m:
                raise RuntimeError(f"controller did not start: {line!r}")
            address = f"127.0.0.1:{m.group(1)}"
            c0 = cpu_s(ctl.pid)
            loads = start_load(address, n, procs, kind, load_cpus, connect_rate)
            connect_s = wait_welcomed(loads, n, server_pid=ctl.pid)
            connect_cpu = (cpu_s(ctl.pid) - c0) / connect_s
            time.sleep(min(3.0, 2 * window_s))
            if barrier is not None:
                barrier.wait(900)   # the minimal server's windows open at the same moment
            rows = windows(ctl.pid, loads, lambda: sum(ask(p)[0] for p in loads), window_s)
            s0, t0 = samples_total(mport), time.monotonic()
            time.sleep(window_s)
            ingest = (samples_total(mport) - s0) / (time.monotonic() - t0)
            lat: list[float] = []
            refused: list[str] = []
            with OperatorClient(address, timeout_s=60) as c:
                online = sum(dev.online for dev in c.list_devices())
                for i in range(mode_sets):
                    k = (i * 7919) % n
                    t = time.perf_counter()
                    try:
                        c.set_mode(f"bench-{k:05d}", PRESETS[MODELS[k % 3]][i % 2])
                    except JetfleetError as e:   # a board offline at that moment: counted, not timed
                        refused.append(e.code)
                        continue
                    lat.append((time.perf_counter() - t) * 1e3)
            lat.sort()
            counts = [ask(p) for p in loads]
            result.update({"rows": rows, "connect_s": connect_s, "connect_cpu": connect_cpu, "online": online,
                           "ingest": ingest, "failed": sum(c[2] for c in counts),
                           "turned_away": sum(c[3] for c in counts), "refused": len(refused),
                           "rss_mib": rss_mib(ctl.pid),
                           "p50": statistics.median(lat) if lat else float("nan"),
                           "p99": lat[int(0.99 * (len(lat) - 1))] if lat else float("nan")})
            return result
        finally:
            result["reasons"] = stop_all(loads)
            ctl.terminate()
            try:
                ctl.wait(60)
            except subprocess.TimeoutExpired:
                ctl.kill()
                ctl.wait()


def cpu_set(text: str) -> set[int] | None:
    """'0,1' -> {0, 1}; '' -> None (any CPU)."""
    return {int(x) for x in text.split(",")} if text else None


def verdict(ok: bool) -> str:
    return "holds" if ok else "MISSED"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--agents", type=int, default=1000)
    p.add_argument("--big", type=int, default=5000)
    p.add_argument("--window", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=3, help="rounds of the minimal server beside the controller at --agents")
    p.add_argument("--alternately", action="store_true", help="at --agents, run the minimal server and the controller "
                   "one after the other in each round (default: at the same time, each under its own load, their "
                   "windows at the same moments, so that a shared machine's drift between minutes falls on both alike)")
    p.add_argument("--mode-sets", type=int, default=200)
    p.add_argument("--load-procs", type=int, default=4)
    p.add_argument("--controller-repo", default=str(ROOT))
    p.add_argument("--real-agents", type=int, default=0, help="also N real agents (AgentLink on twins)")
    p.add_argument("--controller-cpus", default="", help="pin the controller (and, at --agents, the minimal server "
                   "beside it) to these CPUs (e.g. 0)")
    p.add_argument("--load-cpus", default="", help="pin the load processes to these CPUs (e.g. 1)")
    p.add_argument("--max-hellos", type=int, default=0, help="the controller's --max-hellos (0: its default)")
    p.add_argument("--queued-call-timeout", type=float, default=0.0,
                   help="the controller's --queued-call-timeout in seconds (0: its default; 30: gRPC's own)")
    p.add_argument("--connect-rate", type=float, default=0.0, help="agents dialling per second and load process "
                   "(0: fleet_load.py's 100, a fleet coming up; 5000: all at once, as after a controller restart)")
    a = p.parse_args()
    allowed = os.sched_getaffinity(0)
    for flag in ("controller_cpus", "load_cpus"):
        text = getattr(a, flag)
        try:
            cpus = cpu_set(text)
        except ValueError:
            p.error(f"--{flag.replace('_', '-')}={text!r}: a comma-separated list of CPU numbers, e.g. 0 or 0,1")
        if cpus and not cpus <= allowed:
            p.error(f"--{flag.replace('_', '-')}={text}: CPUs {sorted(cpus - allowed)} are not available; allowed "
                    f"{','.join(map(str, sorted(allowed)))}")
    repo = Path(a.controller_repo).resolve()
    print(f"fleet benchmark on {os.cpu_count()} cores (shared): {a.load_procs} load processes, one connection per "
          f"agent, 1 batch of 10 samples per agent-second; controller from {repo}; medians of 3 windows of "
          f"{a.window:g} s", flush=True)
    if a.agents:
        small(a, repo)
    if a.big:
        big(a, repo)
    if a.real_agents:
        real = controller(a.real_agents, a.window, a.load_procs, a.mode_sets, repo, kind="real")
        rows = real["rows"]
        assert isinstance(rows, list)
        print(f"  N={a.real_agents} real agents (twins, {a.load_procs} processes): controller CPU "
              f"{median(rows, 'cpu') * 100:4.1f} %, ingest {float(real['ingest']):7.0f} samples/s of "
              f"{a.real_agents * 10}; agent processes {median(rows, 'load_cpu') * 100:4.0f} % of a core; mode set "
              f"p50 {float(real['p50']):5.1f} ms, p99 {float(real['p99']):5.1f} ms (limit p99 < {P99_LIMIT_MS:g} ms: "
              f"{verdict(float(real['p99']) < P99_LIMIT_MS)})", flush=True)


def small(a: argparse.Namespace, repo: Path) -> None:
    """The controller beside the minimal server at ``a.agents`` agents, ``a.rounds`` times, at the same time (or
    alternately: the machine's speed drifts between minutes, which falls on both alike only when they run at once;
    each round's ratio compares the two, the figure is their median),
    and mode sets under that load (first round)."""
    ratios: list[float] = []
    first: dict[str, object] = {}
    cpus, load_cpus = cpu_set(a.controller_cpus), cpu_set(a.load_cpus)
    if cpus or load_cpus:
        print(f"  N={a.agents}: the servers on CPUs {a.controller_cpus or 'any'}, the load on CPUs "
              f"{a.load_cpus or 'any'}", flush=True)
    together = not a.alternately
    if together:
        print(f"  N={a.agents}: the minimal server and the controller at the same time, each under its own load of "
              f"{a.agents} agents", flush=True)

    def run_minimal(barrier: threading.Barrier | None) -> list[dict[str, float]]:
        try:
            return minimal(a.agents, a.window, a.load_procs, server_cpus=cpus, load_cpus=load_cpus, barrier=barrier)
        except BaseException:
            if barrier is not None:
                barrier.abort()   # the controller's run stops waiting and ends
            raise

    for r in range(a.rounds):
        barrier = threading.Barrier(2) if together else None
        with ThreadPoolExecutor(1) as pool:
            minimal_run = pool.submit(run_minimal, barrier)
            if not together:
                minimal_run.result()
            try:
                ours = controller(a.agents, a.window, a.load_procs, a.mode_sets if r == 0 else 0, repo,
                                  controller_cpus=cpus, load_cpus=load_cpus, barrier=barrier)
            except BaseException as e:
                if barrier is not None:
                    barrier.abort()   # the minimal server's run stops waiting and ends
                first_error = minimal_run.exception() if minimal_run.done() else None
                if isinstance(e, threading.BrokenBarrierError) and first_error is not None:
                    raise first_error from e   # the minimal side failed first: its error, not the barrier's
                raise
            mins = minimal_run.result()
        first = first or ours
        rows = ours["rows"]
        assert isinstance(rows, list)
        m, j = median(mins, "per_cpu_s"), median(rows, "per_cpu_s")
        ratios.append(j / m)
        print(f"  N={a.agents}, round {r + 1}: minimal grpc.aio server {m:6.0f} msgs per CPU-second (CPU "
              f"{median(mins, 'cpu') * 100:4.1f} %); controller {j:6.0f} (CPU {median(rows, 'cpu') * 100:4.1f} %, "
              f"{median(rows, 'sent'):5.0f} msgs/s sent, {ours['ingest']:6.0f} samples/s ingested of "
              f"{a.agents * 10}; sessions failed and dialled again: {ours['failed']}, turned away: "
              f"{ours['turned_away']}; load processes "
              f"{median(rows, 'load_cpu') * 100:3.0f} % of a core); ratio {j / m:4.2f}", flush=True)
    ratio = statistics.median(ratios)
    print(f"  messages per CPU-second, controller / minimal: ratio {ratio:5.2f}, median of {a.rounds} rounds "
          f"{[round(x, 2) for x in ratios]}  (limit >= {RATIO_LIMIT}: {verdict(ratio >= RATIO_LIMIT)})")
    if not a.mode_sets:
        return
    p50, p99 = float(first["p50"]), float(first["p99"])  # type: ignore[arg-type]
    print(f"  mode set at N={a.agents} (operator client, {a.mode_sets} calls): p50 {p50:5.1f} ms, "
          f"p99 {p99:5.1f} ms  (limit p99 < {P99_LIMIT_MS:g} ms: {verdict(p99 < P99_LIMIT_MS)}; "
          f"ratio {p99 / P99_LIMIT_MS:4.2f} of the limit)", flush=True)


def big(a: argparse.Namespace, repo: Path) -> None:
    """``a.big`` agents on one controller: all online without a storm, ingest keeping up, CPU within one core."""
    cpus, load_cpus = cpu_set(a.controller_cpus), cpu_set(a.load_cpus)
    big = controller(a.big, a.window, a.load_procs, 20, repo, controller_cpus=cpus, load_cpus=load_cpus,
                     max_hellos=a.max_hellos, connect_rate=a.connect_rate, queued_call_s=a.queued_call_timeout)
    rows = big["rows"]
    assert isinstance(rows, list)
    cpu = median(rows, "cpu")
    online, ingest, failed = int(big["online"]), float(big["ingest"]), int(big["failed"])  # type: ignore[call-overload]
    where = f"controller pinned to CPU {a.controller_cpus}" if cpus else "controller on any CPU"
    if a.connect_rate:
        where += f", agents dialling at {a.connect_rate * a.load_procs:g} a second"
    if a.queued_call_timeout:
        where += f", --queued-call-timeout {a.queued_call_timeout:g}"
    print(f"  N={a.big} ({where}): {online}/{a.big} online (limit all: {verdict(online == a.big)}) after "
          f"{float(big['connect_s']):.0f} s, the controller at {float(big['connect_cpu']) * 100:.0f} % of a core "
          f"meanwhile; sessions that failed and were dialled again: {failed} (limit none: {verdict(failed == 0)}); "
          f"turned away while others were admitted, told when to dial again: {big['turned_away']}", flush=True)
    print(f"  N={a.big}: ingest {ingest:7.0f} samples/s of {a.big * 10} sent (limit >= 95 %: "
          f"{verdict(ingest >= 0.95 * a.big * 10)}; ratio {ingest / (a.big * 10):4.2f}); controller CPU "
          f"{cpu * 100:5.1f} % of one core (limit < 100 %: {verdict(cpu < 1.0)}; ratio {cpu:4.2f}); "
          f"{median(rows, 'per_cpu_s'):6.0f} msgs per CPU-second; RSS {float(big['rss_mib']):5.0f} MiB; load "
          f"processes {median(rows, 'load_cpu') * 100:4.0f} % of a core; mode set p99 {float(big['p99']):5.1f} ms "
          f"({big['refused']} of 20 refused: board offline)", flush=True)
    if big["reasons"]:
        print(f"  N={a.big}: why sessions failed: {'; '.join(big['reasons'][:6])}", flush=True)  # type: ignore[index]


if __name__ == "__main__":
    main()
