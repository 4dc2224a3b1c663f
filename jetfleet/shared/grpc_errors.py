"""Errors across gRPC, translated in one place each way.

Server side: typed domain errors become (status, safe message); anything else becomes INTERNAL
with the detail logged, never sent. Client side: a status becomes the matching domain error."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from jetfleet.shared.errors import JetfleetError, NotLeader, ResourceExhausted, Unavailable, error_from_code
from jetfleet.shared.proto import common_pb2

log = logging.getLogger(__name__)
T = TypeVar("T")
# Trailing metadata on every error the controller sends: the client tells the controller's own
# UNAVAILABLE ("store unavailable", "device offline") from a transport that never reached it.
ERROR_ORIGIN = ("jetfleet-error", "controller")
# Trailing metadata naming the request field a refused call got wrong (the domain error's ``field``), so a
# client (and `--output json`) can say which input to fix without parsing the message.
ERROR_FIELD_KEY = "jetfleet-error-field"
# Trailing metadata on a RESOURCE_EXHAUSTED that says when to try again (whole milliseconds): a controller admitting
# hellos tells the agents it turns away how long to wait, so they come back spread out instead of all at once.
RETRY_AFTER_KEY = "jetfleet-retry-after-ms"
# Trailing metadata on a standby's UNAVAILABLE naming the leader (HOST:PORT): agents and clients go there instead.
LEADER_KEY = "jetfleet-leader"


def status_of(err: JetfleetError) -> grpc.StatusCode:
    """The gRPC status code of a domain error."""
    return getattr(grpc.StatusCode, err.code, grpc.StatusCode.INTERNAL)


def error_pb(err: BaseException) -> common_pb2.Error:
    """An error as a wire message; an unexpected one is logged here and sent as INTERNAL without detail."""
    if isinstance(err, JetfleetError):
        return common_pb2.Error(code=err.code, message=err.message[:2000], field=(err.field or "")[:200])
    log.exception("unexpected error", exc_info=err)
    return common_pb2.Error(code="INTERNAL", message="internal error (see the peer's log)")


def rpc(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Wrap a unary servicer method: authorise the caller (the servicer's ``authorize``), then map
    errors to a gRPC status on the context."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> T:
        try:
            self.authorize(context)
            return await fn(self, request, context)
        except JetfleetError as e:
            await abort(context, e)
        except Exception:
            log.exception("%s failed", fn.__name__)
            await _abort(context, grpc.StatusCode.INTERNAL, "internal error (see the controller log)")
        raise AssertionError("unreachable")

    return wrapper


def rpc_stream(fn: Callable[..., AsyncIterator[T]]) -> Callable[..., AsyncIterator[T]]:
    """Wrap a server-streaming servicer method the same way: authorise the caller, then map errors."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[T]:
        try:
            self.authorize(context)
            async for item in fn(self, request, context):
                yield item
        except JetfleetError as e:
            await abort(context, e)
        except Exception:
            log.exception("%s failed", fn.__name__)
            await _abort(context, grpc.StatusCode.INTERNAL, "internal error (see the controller log)")

    return wrapper


MAX_DETAILS = 2000   # characters of an error message on the wire (status details travel in HTTP/2 trailers)


async def _abort(context: grpc.aio.ServicerContext, code: grpc.StatusCode, message: str,
                 field: str | None = None, retry_after_s: float | None = None, leader: str = "") -> None:
    metadata: tuple[tuple[str, str], ...] = (ERROR_ORIGIN,)
    if leader:
        metadata += ((LEADER_KEY, "".join(c for c in leader[:300] if " " < c <= "~")),)
    if field:  # metadata values are printable ASCII: a field name is an identifier path (hello.board.model)
        safe = "".join(c for c in field[:200] if " " <= c <= "~")
        metadata += ((ERROR_FIELD_KEY, safe),)
    if retry_after_s is not None:
        metadata += ((RETRY_AFTER_KEY, str(max(0, int(round(retry_after_s * 1000))))),)
    context.set_trailing_metadata(metadata)
    await context.abort(code, message if len(message) <= MAX_DETAILS else message[:MAX_DETAILS] + "...")


async def abort(context: grpc.aio.ServicerContext, err: JetfleetError) -> None:
    """End a call with a domain error, as ``rpc`` does: its status, message, field and (RESOURCE_EXHAUSTED) the
    wait before trying again."""
    await _abort(context, status_of(err), err.message, err.field,
                 err.retry_after_s if isinstance(err, ResourceExhausted) else None,
                 err.leader if isinstance(err, NotLeader) else "")


def _trailing(e: grpc.RpcError) -> tuple[tuple[str, str], ...]:
    try:
        return tuple(e.trailing_metadata() or ())  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - not a call error: it came from no controller
        return ()


def from_controller(e: grpc.RpcError) -> bool:
    """True if the controller itself sent this error (not the transport failing to reach it)."""
    return any((k, v) == ERROR_ORIGIN for k, v in _trailing(e))


def leader_of(e: grpc.RpcError) -> str:
    """The leader's address a standby named in its refusal (trailing metadata), or ""."""
    for k, v in _trailing(e):
        if k == LEADER_KEY and v:
            return str(v)
    return ""


def error_field(e: grpc.RpcError) -> str | None:
    """The request field the controller named in its error (trailing metadata), if it named one."""
    for k, v in _trailing(e):
        if k == ERROR_FIELD_KEY and v:
            return str(v)
    return None


def retry_after_s(e: grpc.RpcError) -> float | None:
    """The wait the controller asked for before trying again (a refused hello), if it asked; None otherwise or when
    the value is no whole number of milliseconds."""
    for k, v in _trailing(e):
        if k == RETRY_AFTER_KEY:
            text = v.decode("ascii", "replace") if isinstance(v, bytes) else str(v)
            return int(text) / 1000 if text.isdigit() and len(text) <= 9 else None
    return None


def from_rpc_error(e: grpc.RpcError) -> JetfleetError:
    """Client side: a failed call as a domain error (the CLI prints its message). A transport failure
    (no controller answered) is Unavailable("controller unreachable ...")."""
    code = e.code() if hasattr(e, "code") else None
    details = e.details() if hasattr(e, "details") else str(e)
    if code == grpc.StatusCode.UNAVAILABLE and not from_controller(e):
        return Unavailable(f"controller unreachable ({details})" if details else "controller unreachable",
                           field="controller")
    name = code.name if code is not None else "INTERNAL"
    err = error_from_code(name, details or name)
    err.field = error_field(e)
    if isinstance(err, ResourceExhausted):
        err.retry_after_s = retry_after_s(e)
    return err
