"""File access for the real backend, under an injected root (``/`` on a board, a fixture tree in
tests). OS errors become DeviceError naming the path and what to do, at this one boundary."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from jetfleet.shared.errors import DeviceError


class Sysfs:
    """Reads and writes board files under an injected root; OS errors become DeviceError naming the path and a fix."""

    def __init__(self, root: Path | str = "/") -> None:
        self.root = Path(root)

    def path(self, rel: str) -> Path:
        """The path of ``rel`` under the root (a leading slash is ignored)."""
        return self.root / rel.lstrip("/")

    def exists(self, rel: str) -> bool:
        """True if ``rel`` exists under the root."""
        return self.path(rel).exists()

    def glob(self, pattern: str) -> list[str]:
        """Relative paths matching ``pattern`` (sorted, naturally by trailing number)."""
        found = [str(p.relative_to(self.root)) for p in self.root.glob(pattern.lstrip("/"))]
        return sorted(found, key=_natural)

    def read(self, rel: str) -> str:
        """The text of a board file, NUL bytes dropped and whitespace stripped; DeviceError if missing or unreadable."""
        p = self.path(rel)
        try:
            return p.read_bytes().replace(b"\x00", b"").decode(errors="replace").strip()
        except FileNotFoundError:
            raise DeviceError(f"missing board node {p}: this kernel/JetPack does not expose it",
                              field=rel) from None
        except PermissionError:
            raise DeviceError(f"permission denied reading {p}: run the agent as root", field=rel) from None
        except OSError as e:
            raise DeviceError(f"cannot read {p}: {e.strerror}", field=rel) from None

    def read_text(self, rel: str) -> str:
        """A regular file's exact text (a config file to put back byte for byte); DeviceError if unreadable."""
        try:
            return self.path(rel).read_bytes().decode()
        except OSError as e:
            raise DeviceError(f"cannot read {self.path(rel)}: {e.strerror}", field=rel) from None

    def read_int(self, rel: str) -> int:
        """The first integer in a board file; DeviceError if it does not start with one."""
        text = self.read(rel)
        try:
            return int(text.split()[0])
        except (ValueError, IndexError):
            raise DeviceError(f"{self.path(rel)} holds {text!r}, expected an integer", field=rel) from None

    def locate(self, rel: str) -> str:
        """The path of ``rel`` under the root as text, resolved once by a caller that reads it often."""
        return str(self.path(rel))

    def read_int_at(self, path: str, rel: str) -> int:
        """``read_int`` of a file ``locate`` resolved: one open, one read, one close, no Path objects. Anything
        unusual (a missing file, NUL bytes, not an integer) goes the slow way for its error."""
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                data = os.read(fd, 4096)
            finally:
                os.close(fd)
            return int(data.split(None, 1)[0])
        except (OSError, ValueError, IndexError):
            return self.read_int(rel)

    def read_ints(self, rel: str) -> list[int]:
        """Every whitespace-separated integer in a board file (a frequency table); DeviceError on anything else."""
        text = self.read(rel)
        try:
            return [int(x) for x in text.split()]
        except ValueError:
            raise DeviceError(f"{self.path(rel)} holds {text!r}, expected integers", field=rel) from None

    def check_writable(self, rel: str) -> None:
        """Raise DeviceError unless ``rel`` exists and this process may write it (the pre-flight of a mode change)."""
        p = self.path(rel)
        if not p.exists():
            raise DeviceError(f"missing board node {p}: cannot set this knob here", field=rel)
        if not os.access(p, os.W_OK):
            raise DeviceError(f"permission denied writing {p}: the agent needs root (or CAP_SYS_ADMIN "
                              "and write access to cpufreq/devfreq/debugfs)", field=rel)

    def write(self, rel: str, value: str | int) -> None:
        """Write ``value`` to a board file in one write(); DeviceError naming the path if the kernel refuses it."""
        p = self.path(rel)
        try:
            with open(p, "w") as f:  # sysfs wants one write() of the whole value, no truncation games
                f.write(str(value))
        except PermissionError:
            raise DeviceError(f"permission denied writing {p}: the agent needs root", field=rel) from None
        except OSError as e:
            if e.errno == errno.EINVAL:
                raise DeviceError(f"the kernel rejected {value!r} for {p}", field=rel) from None
            raise DeviceError(f"cannot write {p}: {e.strerror}", field=rel) from None


    def replace_file(self, rel: str, text: str, mode: int = 0o600) -> None:
        """Write a regular file (the agent's own state, a conf copy) atomically: a reader sees the old or the new text."""
        p = self.path(rel)
        tmp = p.with_name(f".{p.name}.tmp")
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            with os.fdopen(fd, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, p)
        except OSError as e:
            raise DeviceError(f"cannot write {p}: {e.strerror}", field=rel) from None

    def remove(self, rel: str) -> None:
        """Delete a regular file if it exists."""
        try:
            self.path(rel).unlink()
        except FileNotFoundError:
            pass
        except OSError as e:
            raise DeviceError(f"cannot remove {self.path(rel)}: {e.strerror}", field=rel) from None


def _natural(text: str) -> tuple[object, ...]:
    import re

    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text))


def parse_cpu_list(text: str) -> list[int]:
    """'0-3,6,8-11' -> [0, 1, 2, 3, 6, 8, 9, 10, 11] (the kernel's cpulist format)."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out
