"""Reading a file an operator names, with a bound: never more than ``max_bytes`` are read, whatever the file is.

A size from ``stat`` is not a bound: ``/dev/zero``, a FIFO or a file that grows while it is read report 0 or a
stale size and would be read without end (``job submit --trace /dev/zero`` once took 7 GB in 10 s). So every
read here stops at ``max_bytes + 1`` bytes and refuses the file if that last byte came. ``-`` is standard
input, read the same way."""

from __future__ import annotations

import sys
from typing import BinaryIO

from jetfleet.shared.errors import InvalidArgument

STDIN = "-"
CHUNK_BYTES = 1 << 20


def _read_stream(stream: BinaryIO, max_bytes: int) -> bytes:
    parts = []
    left = max_bytes + 1
    while left > 0:
        chunk = stream.read(min(CHUNK_BYTES, left))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_bounded(path: str, what: str, max_bytes: int, *, field: str = "", stdin: BinaryIO | None = None) -> bytes:
    """The bytes of ``path`` (``-``: standard input, or ``stdin``); InvalidArgument naming ``what`` and ``field``
    when it cannot be read or holds more than ``max_bytes``."""
    field = field or what
    name = "standard input" if path == STDIN else str(path)
    try:
        if path == STDIN:
            data = _read_stream(stdin if stdin is not None else sys.stdin.buffer, max_bytes)
        else:
            with open(path, "rb") as f:
                data = _read_stream(f, max_bytes)
    except OSError as e:
        raise InvalidArgument(f"{what} {name}: cannot read it ({e.strerror or e})", field=field) from None
    if len(data) > max_bytes:
        raise InvalidArgument(f"{what} {name}: more than {max_bytes} bytes; at most {max_bytes}", field=field)
    return data


def source_name(path: str) -> str:
    """How a file appears in messages and as an import's source: its name, ``stdin`` for ``-``."""
    if path == STDIN:
        return "stdin"
    return str(path).replace("\\", "/").rsplit("/", 1)[-1]
