"""Child processes for the tests: spawned, never forked; each in a process group of its own; ended with its test.

Why not `subprocess`: on CPython 3.8 and 3.9 (JetPack 5's Python) `subprocess.Popen` forks, and with gRPC loaded a
fork runs gRPC's fork handlers, which can wait forever or abort the interpreter (grpc/grpc#37259: `Fatal Python
error: Aborted` inside `_execute_child`, seen in `make test-boards`); on any Python a `preexec_fn` forks too.
`os.posix_spawn` runs no fork handlers (glibc spawns with CLONE_VFORK), on every Python the tests run on.

Every child gets a process group of its own (the test can signal it and what it started as one), stays in the test
run's session (so the last sweep of `make test` finds anything that outlived an aborted interpreter), and is
registered: the `children` fixture of tests/conftest.py kills the groups a test started when the test ends,
whether it passed, failed or errored; children of a session-scoped fixture (``scope="session"``) at the end of
the run. conftest.py also fails any test during which this process forked.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from typing import IO, Any, Mapping, Sequence, Union

from .waiting import wait_until

PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
STDOUT = subprocess.STDOUT
Target = Union[int, IO[Any], None]   # PIPE, DEVNULL, STDOUT (stderr only), an open file, or None (inherit)

_LOCK = threading.Lock()
_LIVE: list[Child] = []      # started and not yet ended by their owner, in start order


class Child:
    """A spawned program: the parts of `subprocess.Popen` the tests use (``stdout``/``stderr``/``stdin`` files,
    ``poll``, ``wait``, ``communicate``, ``send_signal``, ``terminate``, ``kill``, ``returncode``), plus
    ``kill_group`` for everything it started."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                 cwd: os.PathLike | str | None = None, stdin: int | None = DEVNULL, stdout: Target = PIPE,
                 stderr: Target = PIPE, text: bool = True, scope: str = "test") -> None:
        if scope not in ("test", "session"):
            raise ValueError(f"scope={scope!r}: allowed 'test' or 'session'")
        env = dict(os.environ if env is None else env)
        exe = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=env.get("PATH", os.defpath))
        if exe is None:
            raise FileNotFoundError(f"{argv[0]} is not on PATH")
        cmd = [exe, *argv[1:]]
        if cwd is not None:          # posix_spawn has no chdir: coreutils' env changes directory, then execs
            cmd = [shutil.which("env") or "/usr/bin/env", "-C", str(cwd), *cmd]
        self.args = list(argv)
        self.scope = scope
        self.returncode: int | None = None
        self._ended = threading.Event()
        actions: list[tuple[Any, ...]] = []
        close_after: list[int] = []   # the child's ends, closed here once it has them
        mine: dict[str, int] = {}     # our ends of the pipes
        for fd, target in ((0, stdin), (1, stdout), (2, stderr)):
            if target is None:
                continue
            if target == PIPE:
                r, w = os.pipe()      # non-inheritable; dup2 gives the child its end
                ours, theirs = (w, r) if fd == 0 else (r, w)
                mine[str(fd)] = ours
                close_after.append(theirs)
                actions.append((os.POSIX_SPAWN_DUP2, theirs, fd))
            elif target == DEVNULL:
                actions.append((os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0))
            elif target == STDOUT and fd == 2:
                actions.append((os.POSIX_SPAWN_DUP2, 1, 2))
            elif isinstance(target, int) and target >= 0:
                actions.append((os.POSIX_SPAWN_DUP2, target, fd))
            else:
                actions.append((os.POSIX_SPAWN_DUP2, target.fileno(), fd))   # type: ignore[union-attr]
        try:
            # setpgroup=0: a group of its own; SIGPIPE back to its default (Python ignores it in this process)
            self.pid = os.posix_spawn(cmd[0], cmd, env, file_actions=actions, setpgroup=0,
                                      setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT))
        except BaseException:
            for fd in (*close_after, *mine.values()):
                os.close(fd)
            raise
        for fd in close_after:
            os.close(fd)
        self.stdin = _wrap(mine.get("0"), "w", text)
        self.stdout = _wrap(mine.get("1"), "r", text)
        self.stderr = _wrap(mine.get("2"), "r", text)
        self._readers: dict[str, tuple[threading.Thread, list[Any]]] = {}
        threading.Thread(target=self._reap, name=f"reap-{self.pid}", daemon=True).start()
        with _LOCK:
            _LIVE.append(self)

    def _reap(self) -> None:
        # A thread blocked in waitpid: `wait(timeout)` is an event wait, not a polling loop
        _, status = os.waitpid(self.pid, 0)
        self.returncode = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
        self._ended.set()

    def poll(self) -> int | None:
        """The exit status, or None while it runs."""
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child to end; `subprocess.TimeoutExpired` after ``timeout`` seconds."""
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Signal the child itself (not its group), unless it has ended."""
        if not self._ended.is_set():
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        """SIGTERM to the child."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL to the child."""
        self.send_signal(signal.SIGKILL)

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        """``sig`` to the child's process group: the child and whatever it started that stayed in its group."""
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def communicate(self, input: str | bytes | None = None, timeout: float | None = None) -> tuple[Any, Any]:
        """Write ``input`` (then close stdin), read stdout and stderr to their end, wait for the child; as
        `subprocess.Popen.communicate`, a `subprocess.TimeoutExpired` can be followed by another call."""
        if self.stdin is not None and "stdin" not in self._readers:
            def feed(stdin: IO[Any] = self.stdin) -> None:
                try:
                    if input:
                        stdin.write(input)
                    stdin.close()
                except (BrokenPipeError, ValueError):
                    pass
            writer = threading.Thread(target=feed, daemon=True)
            writer.start()
            self._readers["stdin"] = (writer, [])
        for name in ("stdout", "stderr"):
            f = getattr(self, name)
            if f is not None and name not in self._readers:
                got: list[Any] = []
                t = threading.Thread(target=lambda f=f, got=got: got.append(f.read()), daemon=True)
                t.start()
                self._readers[name] = (t, got)
        for t, _ in self._readers.values():
            t.join(timeout)
            if t.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.wait(timeout)
        outs = [self._readers[n][1][0] if n in self._readers else None for n in ("stdout", "stderr")]
        return outs[0], outs[1]

    def end(self, timeout_s: float = 30.0) -> None:
        """Kill the group, reap the child, close stdin; forget it. Its output stays readable to the end (the
        read ends are closed with their file objects: closing one here could wait on a thread reading it)."""
        self.kill_group()
        self._ended.wait(timeout_s)
        # SIGKILL to a group is delivered to each member as it is next scheduled: on a loaded machine a grandchild
        # can still run for a moment after the child is reaped. The test ends when the group is gone.
        try:
            wait_until(lambda: not group_alive(self.pid), timeout_s, f"process group {self.pid} to end")
        except AssertionError:   # still there: the last sweep of the run lists and kills it, failing the run
            pass
        if self.stdin is not None:
            try:
                self.stdin.close()
            except (OSError, ValueError):
                pass
        with _LOCK:
            if self in _LIVE:
                _LIVE.remove(self)

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (not a zombie), from /proc."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:   # gone meanwhile
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


def _wrap(fd: int | None, mode: str, text: bool) -> IO[Any] | None:
    if fd is None:
        return None
    if not text:
        return open(fd, mode + "b")
    # line-buffered writes; reads decode as text mode of subprocess does (universal newlines)
    return open(fd, mode, buffering=1 if mode == "w" else -1, encoding="utf-8", errors="replace")


def spawn(argv: Sequence[str], **kw: Any) -> Child:
    """Start ``argv`` (see `Child` for the keywords); it ends with the test that started it."""
    return Child(argv, **kw)


def run(argv: Sequence[str], *, input: str | bytes | None = None, timeout: float = 600.0,
        check: bool = False, stdout: Target = PIPE, stderr: Target = PIPE, **kw: Any) -> subprocess.CompletedProcess[Any]:
    """Run ``argv`` to its end and return what it printed, as `subprocess.run(..., capture_output=True)` does;
    past ``timeout`` its group is killed and `subprocess.TimeoutExpired` raised."""
    child = Child(argv, stdin=PIPE if input is not None else DEVNULL, stdout=stdout, stderr=stderr, **kw)
    try:
        out, err = child.communicate(input, timeout)
    except subprocess.TimeoutExpired:
        child.end()
        raise
    child.end()
    assert child.returncode is not None
    if check and child.returncode != 0:
        raise subprocess.CalledProcessError(child.returncode, list(argv), out, err)
    return subprocess.CompletedProcess(list(argv), child.returncode, out, err)


def live(scope: str | None = None) -> list[Child]:
    """Every live child (of ``scope``)."""
    with _LOCK:
        return [c for c in _LIVE if scope is None or c.scope == scope]


_FORKS: tuple[list[int], Any] | None = None


def forks() -> list[int]:
    """A list that grows by one each time this process forks (a C-level fork handler, as gRPC registers its own;
    `os.register_at_fork` would miss the forks of `subprocess`, which happen in C). Registered once per process:
    there is no unregistering, and the handler must outlive every fork of the process."""
    global _FORKS
    if _FORKS is None:
        import ctypes

        calls: list[int] = []
        handler = ctypes.CFUNCTYPE(None)(lambda: calls.append(1))
        libc = ctypes.CDLL(None)
        # glibc: pthread_atfork is a static stub over the exported __register_atfork(prepare, parent, child, dso)
        register = getattr(libc, "pthread_atfork", None) or getattr(libc, "__register_atfork")
        register.argtypes = None
        ok = (register(handler, None, None, None) if register.__name__ == "__register_atfork"
              else register(handler, None, None))
        if ok != 0:
            raise OSError(ok, "cannot register a fork handler")
        _FORKS = (calls, handler)
    return _FORKS[0]
