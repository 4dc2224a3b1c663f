#!/usr/bin/env python3
"""Run a command, then list and kill whatever it left running: `sweep.py COMMAND...` (make test runs the suite so).

This process makes itself the children's subreaper (PR_SET_CHILD_SUBREAPER), so a process whose parent died
(a controller started by a test whose interpreter aborted, a tool's daemon) is re-parented here, not to init,
and is found however it detached (new process group or session). When the command ends, every process still
below this one is printed (pid, seconds running, command line) and killed; leftovers make the exit status non-zero
(the command's own failure status is kept if it had one). Ctrl-C reaches the command as usual (same process
group); this process waits for it, then sweeps."""

import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def descendants(root: int) -> dict[int, tuple[int, str, str]]:
    """pid -> (ppid, state, command line) of every live process below ``root``."""
    procs: dict[int, tuple[int, str, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        procs[int(entry)] = (int(fields[1]), fields[0], cmd or stat.split("(", 1)[1].rsplit(")", 1)[0])
    below: dict[int, tuple[int, str, str]] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, state, cmd) in procs.items():
            if ppid == parent and pid not in below:
                below[pid] = (ppid, state, cmd)
                frontier.append(pid)
    return below


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: sweep.py COMMAND...", file=sys.stderr)
        return 2
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("sweep: cannot become a subreaper; leftovers will not be found", file=sys.stderr)
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the command gets Ctrl-C (same group); we sweep after it
    # spawned with SIGINT at its default (an ignored signal would be inherited through exec)
    pid = os.posix_spawnp(argv[0], argv, os.environ, setsigdef=(signal.SIGINT,))
    signal.signal(signal.SIGTERM, lambda *_: os.kill(pid, signal.SIGTERM))
    _, wait_status = os.waitpid(pid, 0)
    status = os.waitstatus_to_exitcode(wait_status)
    status = 128 - status if status < 0 else status
    reap()
    left = {pid: p for pid, p in descendants(os.getpid()).items() if p[1] != "Z"}
    if left:
        tick = os.sysconf("SC_CLK_TCK")
        print(f"== {len(left)} process(es) left running after `{' '.join(argv)}` (pid, s, command), now killed:",
              file=sys.stderr)
        uptime = float(open("/proc/uptime").read().split()[0])
        for pid, (_, _, cmd) in sorted(left.items()):
            try:
                started = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19]) / tick
            except OSError:
                started = uptime
            print(f"{pid:>8} {uptime - started:7.0f} {cmd[:200]}", file=sys.stderr)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while descendants(os.getpid()) and time.monotonic() < deadline:
            reap()
            time.sleep(0.05)
        return status or 1
    print(f"== sweep: nothing left running after `{' '.join(argv[:3])} ...`", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
