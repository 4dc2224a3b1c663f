"""The channel to the controller and the two ways to call it (one answer, or a stream of them), with every
failure turned into a typed domain error (``jetfleet.client.errors``) that names the field, where there is one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc

from jetfleet.client.settings import ClientSettings, resolve
from jetfleet.shared.errors import JetfleetError
from jetfleet.shared.grpc_errors import from_controller, from_rpc_error, leader_of
from jetfleet.shared.netutil import channel_credentials
from jetfleet.shared.proto import operator_pb2_grpc

DEFAULT_TIMEOUT_S = 30.0


class ClientBase:
    """A blocking gRPC channel to the operator API. The typed methods live in one mixin per area
    (``devices.py``, ``campaigns.py``, ``models.py``, ``jobs.py``); ``OperatorClient`` combines them."""

    def __init__(self, address: str | None = None, *, tls_ca: str | None = None, tls_cert: str | None = None,
                 tls_key: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                 settings: ClientSettings | None = None) -> None:
        """Connect to ``address`` (HOST[:PORT]); what is not given comes from the environment, then the config
        file (``jetfleet.client.settings``). Mutual TLS when the lab CA, an operator certificate and its key are
        known (``jetfleet certs issue operator NAME``)."""
        self.settings = settings or resolve(address, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key)
        # several addresses: a lab's leader and its standbys ("a:50051,b:50051"); calls go to the one that leads
        self.addresses = self.settings.controller.split(",")
        self.timeout_s = timeout_s
        self._creds = channel_credentials(self.settings.tls_ca, self.settings.tls_cert, self.settings.tls_key)
        self.tls = self._creds is not None
        self._use(self.addresses[0])

    def _use(self, address: str) -> None:
        """Talk to ``address`` from now on (the channel to the previous one is closed)."""
        old = getattr(self, "_channel", None)
        self.address = address
        self._channel = (grpc.secure_channel(address, self._creds) if self._creds
                         else grpc.insecure_channel(address))
        self._stub = operator_pb2_grpc.OperatorStub(self._channel)
        if old is not None:
            old.close()

    def _next_address(self, e: grpc.RpcError, tried: list[str]) -> str | None:
        """Where to send a call again after ``e``: the leader a standby named (it refused the call, so nothing was
        done), or the next address not yet tried when this one could not be reached; None: give up."""
        if e.code() != grpc.StatusCode.UNAVAILABLE:  # type: ignore[attr-defined]
            return None
        if from_controller(e):
            leader = leader_of(e)
            return leader if leader and leader not in tried else None
        rest = [a for a in self.addresses if a not in tried]
        return rest[0] if rest else None

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel to the controller."""
        self._channel.close()

    def _error(self, e: grpc.RpcError) -> JetfleetError:
        err = from_rpc_error(e)
        if not from_controller(e):
            if e.code() == grpc.StatusCode.UNAVAILABLE:  # type: ignore[attr-defined]
                err.message = f"controller {self.address} is unreachable ({e.details()})"  # type: ignore[attr-defined]
                err.field = "controller"
            elif e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:  # type: ignore[attr-defined]
                err.message = f"controller {self.address} did not answer in time"
                err.field = "controller"
        return err

    def _unary(self, method: str, request: Any, timeout_s: float | None = None) -> Any:
        """Call rpc ``method`` with ``request`` and return its answer (protobuf); a failure as a domain error. A
        standby's refusal naming the leader sends the call there; an address that cannot be reached, to the next."""
        tried = [self.address]
        while True:
            try:
                return getattr(self._stub, method)(request, timeout=timeout_s or self.timeout_s, wait_for_ready=False)
            except grpc.RpcError as e:
                target = self._next_address(e, tried)
                if target is None:
                    raise self._error(e) from None
                tried.append(target)
                self._use(target)

    def _stream(self, method: str, request: Any, timeout_s: float | None = None) -> Iterator[Any]:
        """The answers of server-streaming rpc ``method`` as they arrive; a failure as a domain error. Leaving the
        iteration early (or Ctrl-C) cancels the call, which the controller sees."""
        call = getattr(self._stub, method)(request, timeout=timeout_s)
        try:
            yield from call
        except grpc.RpcError as e:
            raise self._error(e) from None
        finally:
            call.cancel()

    def call(self, method: str, request: Any, timeout_s: float = 600.0) -> Any:
        """Low level: any unary operator rpc by name, protobuf in and out. For an rpc that has no typed method yet;
        add one (docs/client.md) rather than calling this from the CLI."""
        return self._unary(method, request, timeout_s)
