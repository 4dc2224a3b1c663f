"""A TCP proxy that a test can cut: agents dial it instead of the controller, and ``cut()`` closes every connection
through it and refuses new ones (their board goes offline while its agent and its processes live on) until
``restore()``. Real sockets, in a thread of its own; ``close()`` ends it (use it as a context manager)."""

from __future__ import annotations

import selectors
import socket
import threading


class CuttableProxy:
    """Forwards 127.0.0.1:``port`` (bound to port 0, read back) to ``target`` (HOST:PORT) byte for byte."""

    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self.target = (host.strip("[]"), int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._peers: dict[socket.socket, socket.socket] = {}
        self._lock = threading.Lock()
        self._cut = False
        self._closed = False
        self.accepted = 0   # connections forwarded, refused ones not counted
        self._thread = threading.Thread(target=self._run, name=f"proxy-{self.port}", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        """HOST:PORT to dial instead of the target."""
        return f"127.0.0.1:{self.port}"

    def cut(self) -> None:
        """Close every connection through the proxy now, and refuse new ones until ``restore``."""
        with self._lock:
            self._cut = True
            for s in list(self._peers):
                self._drop(s)

    def restore(self) -> None:
        """Forward new connections again."""
        with self._lock:
            self._cut = False

    def close(self) -> None:
        """Stop forwarding and close everything."""
        with self._lock:
            self._closed = True
            for s in list(self._peers):
                self._drop(s)
        self._thread.join(5)
        self._sel.close()
        self._listener.close()

    def __enter__(self) -> CuttableProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _drop(self, s: socket.socket) -> None:   # with the lock held
        other = self._peers.pop(s, None)
        for x in (s, other):
            if x is None:
                continue
            self._peers.pop(x, None)
            try:
                self._sel.unregister(x)
            except (KeyError, ValueError):
                pass
            x.close()

    def _run(self) -> None:
        while True:
            events = self._sel.select(0.05)
            with self._lock:
                if self._closed:
                    return
                for key, _ in events:
                    s = key.fileobj
                    assert isinstance(s, socket.socket)
                    if s is self._listener:
                        self._accept()
                    elif s in self._peers:
                        self._forward(s)

    def _accept(self) -> None:   # with the lock held
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        if self._cut:
            client.close()
            return
        try:
            upstream = socket.create_connection(self.target, timeout=2)
        except OSError:
            client.close()
            return
        for s in (client, upstream):
            s.setblocking(True)
            s.settimeout(2)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._peers[client], self._peers[upstream] = upstream, client
        self._sel.register(client, selectors.EVENT_READ, None)
        self._sel.register(upstream, selectors.EVENT_READ, None)
        self.accepted += 1

    def _forward(self, s: socket.socket) -> None:   # with the lock held
        try:
            data = s.recv(65536)
            if data:
                self._peers[s].sendall(data)
                return
        except OSError:
            pass
        self._drop(s)
