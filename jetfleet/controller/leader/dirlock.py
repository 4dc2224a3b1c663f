"""One controller per SQLite data directory: an OS file lock held for the controller's life.

The lock is ``controller.lock`` in the data directory (``flock``, so the kernel drops it when the process dies,
kill -9 included: no stale lock to clean up); who holds it is written beside it, in ``controller.json``, so a second
controller is refused naming the first."""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path

from jetfleet.controller.leader.identity import ControllerIdentity
from jetfleet.shared.errors import FailedPrecondition, StoreUnavailable

log = logging.getLogger(__name__)
LOCK_NAME = "controller.lock"
HOLDER_NAME = "controller.json"


class DataDirLock:
    """The data directory's lock: ``acquire`` or FailedPrecondition naming the controller that holds it."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """True while this controller holds the lock."""
        return self._fd is not None

    def holder(self) -> ControllerIdentity | None:
        """The controller written beside the lock (the last one that held it), or None."""
        try:
            return ControllerIdentity.from_json((self.data_dir / HOLDER_NAME).read_text())
        except OSError:
            return None

    def running(self) -> ControllerIdentity | None:
        """The controller that holds the lock now, or None (a holder file left by a killed one is not a holder)."""
        try:
            fd = os.open(self.data_dir / LOCK_NAME, os.O_RDONLY)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)   # granted only if no controller holds it
        except OSError:
            return self.holder()
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def acquire(self, me: ControllerIdentity) -> None:
        """Take the lock without waiting and write ``me`` beside it; FailedPrecondition if another process holds it."""
        if self._fd is not None:
            self.announce(me)
            return
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            raise StoreUnavailable(f"store unavailable: cannot open {self.data_dir / LOCK_NAME}: {e}",
                                   field="store") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            other = self.holder()
            who = other.describe() if other is not None else "another process (it wrote no controller.json)"
            raise FailedPrecondition(f"store {self.data_dir}: another controller uses this data directory: {who}. "
                                     "SQLite serves exactly one controller; stop that one, give this one another "
                                     "--store, or share a Redis store between controllers (docs/standby.md)",
                                     field="store") from None
        self._fd = fd
        self.announce(me)

    def announce(self, me: ControllerIdentity) -> None:
        """Rewrite who holds the lock (its address is known only once it listens); atomic by rename."""
        tmp = self.data_dir / f".{HOLDER_NAME}.{os.getpid()}"
        tmp.write_text(me.to_json())
        os.replace(tmp, self.data_dir / HOLDER_NAME)

    def release(self) -> None:
        """Remove the holder file and drop the lock (the kernel drops it anyway when the process ends)."""
        if self._fd is None:
            return
        try:
            (self.data_dir / HOLDER_NAME).unlink(missing_ok=True)
        except OSError as e:
            log.warning("cannot remove %s: %s", self.data_dir / HOLDER_NAME, e)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
