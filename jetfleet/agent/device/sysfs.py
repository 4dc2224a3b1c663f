"""File access for the real backend, under an injected root (``/`` on a board, a fixture tree in
tests). OS errors become DeviceError naming the path and what to do, at this one boundary."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from jetfleet.shared.errors import DeviceError


class Sysfs:
    def __init__(self, root: Path | str = "/") -> None:
        self.root = Path(root)

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def exists(self, rel: str) -> bool:
        return self.path(rel).exists()

    def glob(self, pattern: str) -> list[str]:
        """Relative paths matching ``pattern`` (sorted, naturally by trailing number)."""
        found = [str(p.relative_to(self.root)) for p in self.root.glob(pattern.lstrip("/"))]
        return sorted(found, key=_natural)

    def read(self, rel: str) -> str:
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

    def read_int(self, rel: str) -> int:
        text = self.read(rel)
        try:
            return int(text.split()[0])
        except (ValueError, IndexError):
            raise DeviceError(f"{self.path(rel)} holds {text!r}, expected an integer", field=rel) from None

    def read_ints(self, rel: str) -> list[int]:
        text = self.read(rel)
        try:
            return [int(x) for x in text.split()]
        except ValueError:
            raise DeviceError(f"{self.path(rel)} holds {text!r}, expected integers", field=rel) from None

    def check_writable(self, rel: str) -> None:
        p = self.path(rel)
        if not p.exists():
            raise DeviceError(f"missing board node {p}: cannot set this knob here", field=rel)
        if not os.access(p, os.W_OK):
            raise DeviceError(f"permission denied writing {p}: the agent needs root (or CAP_SYS_ADMIN "
                              "and write access to cpufreq/devfreq/debugfs)", field=rel)

    def write(self, rel: str, value: str | int) -> None:
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
