"""What the agent side needs from newer Pythons, for the boards' interpreters: JetPack 5 ships
Python 3.8, JetPack 6 Python 3.10 (the controller may require 3.11)."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

T = TypeVar("T")

try:  # Python 3.11+
    import tomllib as toml_reader
except ImportError:  # pragma: no cover - exercised on the boards' Pythons (3.8, 3.10)
    import tomli as toml_reader  # type: ignore[no-redef]

__all__ = ["to_thread", "toml_reader"]


async def to_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn`` in the default executor with the caller's context (asyncio.to_thread, 3.9+)."""
    import asyncio  # here, not at import: the catalogs (and `jetfleet modes`) need only the TOML reader
    import contextvars
    import functools

    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await loop.run_in_executor(None, call)
