"""The HTTP endpoint both the agent and the controller serve: Prometheus metrics on ``/metrics``, plus extra
routes (the controller's ``/sd/agents`` for Prometheus http_sd), bound where asked, with optional TLS
and HTTP basic auth (Prometheus scrapes with ``tls_config`` and ``basic_auth.password_file``)."""

from __future__ import annotations

import base64
import hmac
import ipaddress
import logging
import socket
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Tuple

from jetfleet.shared.errors import InvalidArgument, JetfleetError, NotFound

log = logging.getLogger(__name__)

Route = Callable[[], Tuple[str, bytes]]   # () -> (content type, body)
HANDSHAKE_TIMEOUT_S = 10.0
MAX_AUTH_FILE_BYTES = 4096   # one line USER:PASSWORD


@dataclass(frozen=True)
class MetricsHttpConfig:
    """Where and how the metrics endpoint listens; built by the CLI."""

    address: str = "127.0.0.1"
    port: int = 0                 # 0: any free port
    tls_cert: str = ""            # HTTPS with this certificate and key (both or neither)
    tls_key: str = ""
    auth_file: str = ""           # basic auth: a file holding USER:PASSWORD

    @property
    def tls(self) -> bool:
        """True when the endpoint serves HTTPS."""
        return bool(self.tls_cert)

    def check(self) -> None:
        """InvalidArgument (or NotFound for a missing file) naming the option, before anything listens."""
        if not 0 <= self.port <= 65535:
            raise InvalidArgument(f"metrics port {self.port} must be 0..65535", field="metrics_port")
        try:
            ipaddress.ip_address(self.address.strip("[]"))
        except ValueError:
            if not self.address or any(c.isspace() for c in self.address):
                raise InvalidArgument(f"metrics address {self.address!r} is not a host name or IP address",
                                      field="metrics_address") from None
        if bool(self.tls_cert) != bool(self.tls_key):
            raise InvalidArgument("metrics over HTTPS needs both a certificate and its key", field="metrics_tls")
        for f in (self.tls_cert, self.tls_key, self.auth_file):
            if f and not Path(f).is_file():
                raise NotFound(f"metrics file {f} does not exist", field="metrics_tls" if f != self.auth_file
                               else "metrics_auth_file")
        if self.auth_file:
            self.credentials()

    def credentials(self) -> tuple[str, str] | None:
        """(user, password) from the auth file, or None without one; InvalidArgument if it is malformed."""
        if not self.auth_file:
            return None
        from jetfleet.shared.files import read_bounded

        raw = read_bounded(self.auth_file, "metrics auth file", MAX_AUTH_FILE_BYTES, field="metrics_auth_file")
        try:
            text = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            text = ""
        user, sep, password = text.partition(":")
        if not sep or not user or not password or "\n" in text:
            raise InvalidArgument(f"metrics auth file {self.auth_file} must hold one line USER:PASSWORD",
                                  field="metrics_auth_file")
        return user, password


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: Any, family: int) -> None:
        self.address_family = family
        super().__init__(address, handler)


class MetricsServer:
    """A threaded HTTP(S) server for /metrics and extra routes; ``start()`` binds, ``stop()`` shuts it down."""

    def __init__(self, registry: Any, config: MetricsHttpConfig, routes: dict[str, Route] | None = None) -> None:
        config.check()
        self.config = config
        self.routes: dict[str, Route] = {"/metrics": self._metrics}
        self.routes.update(routes or {})
        self._registry = registry
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def _metrics(self) -> tuple[str, bytes]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return CONTENT_TYPE_LATEST, generate_latest(self._registry)

    def start(self) -> MetricsServer:
        """Bind and serve in a background thread; InvalidArgument if the address cannot be bound."""
        host = self.config.address.strip("[]")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            server = _Server((host, self.config.port), _handler(self.routes, self.config.credentials()), family)
        except OSError as e:
            raise InvalidArgument(f"cannot serve metrics on {self.config.address}:{self.config.port}: {e.strerror}",
                                  field="metrics_address") from None
        if self.config.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.load_cert_chain(self.config.tls_cert, self.config.tls_key)
            # The handshake happens in each request's thread, so a silent client cannot stall the others.
            server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True)
        self._thread.start()
        log.info("metrics on %s", self.url)
        return self

    @property
    def port(self) -> int:
        """The bound port (the real one when 0 was asked for)."""
        assert self._server is not None, "not started"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http(s)://ADDRESS:PORT/metrics``."""
        host = self.config.address if ":" not in self.config.address.strip("[]") else f"[{self.config.address.strip('[]')}]"
        return f"{'https' if self.config.tls else 'http'}://{host}:{self.port}/metrics"

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _handler(routes: dict[str, Route], credentials: tuple[str, str] | None) -> Any:
    expected = None
    if credentials is not None:
        expected = "Basic " + base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def setup(self) -> None:
            if isinstance(self.request, ssl.SSLSocket):
                self.request.settimeout(HANDSHAKE_TIMEOUT_S)
                self.request.do_handshake()
                self.request.settimeout(None)
            super().setup()

        def handle(self) -> None:
            try:
                super().handle()
            except (ssl.SSLError, OSError) as e:  # a client that hung up or spoke plaintext to HTTPS
                log.debug("metrics client %s: %s", self.client_address, e)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if expected is not None and not hmac.compare_digest(self.headers.get("Authorization", ""), expected):
                self._reply(401, "text/plain", b"authentication required\n",
                            {"WWW-Authenticate": 'Basic realm="jetfleet metrics"'})
                return
            route = routes.get(self.path.split("?", 1)[0])
            if route is None:
                self._reply(404, "text/plain", f"no such path; serving {', '.join(sorted(routes))}\n".encode())
                return
            try:
                content_type, body = route()
            except JetfleetError as e:
                self._reply(503, "text/plain", f"{e.message}\n".encode())
                return
            self._reply(200, content_type, body)

        def _reply(self, status: int, content_type: str, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            log.debug("metrics %s: " + format, self.client_address[0], *args)

    return Handler
