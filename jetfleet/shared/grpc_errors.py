"""Errors across gRPC, translated in one place each way.

Server side: typed domain errors become (status, safe message); anything else becomes INTERNAL
with the detail logged, never sent. Client side: a status becomes the matching domain error."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from jetfleet.shared.errors import JetfleetError, Unavailable, error_from_code
from jetfleet.shared.proto import common_pb2

log = logging.getLogger(__name__)
T = TypeVar("T")


def status_of(err: JetfleetError) -> grpc.StatusCode:
    return getattr(grpc.StatusCode, err.code, grpc.StatusCode.INTERNAL)


def error_pb(err: BaseException) -> common_pb2.Error:
    if isinstance(err, JetfleetError):
        return common_pb2.Error(code=err.code, message=err.message, field=err.field or "")
    log.exception("unexpected error", exc_info=err)
    return common_pb2.Error(code="INTERNAL", message="internal error (see the peer's log)")


def rpc(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Wrap a unary servicer method: map errors to a gRPC status on the context."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> T:
        try:
            if hasattr(self, "authorize"):
                self.authorize(context)
            return await fn(self, request, context)
        except JetfleetError as e:
            await context.abort(status_of(e), e.message)
        except Exception:
            log.exception("%s failed", fn.__name__)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error (see the controller log)")
        raise AssertionError("unreachable")

    return wrapper


def rpc_stream(fn: Callable[..., AsyncIterator[T]]) -> Callable[..., AsyncIterator[T]]:
    """The same for server-streaming methods."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[T]:
        try:
            if hasattr(self, "authorize"):
                self.authorize(context)
            async for item in fn(self, request, context):
                yield item
        except JetfleetError as e:
            await context.abort(status_of(e), e.message)
        except Exception:
            log.exception("%s failed", fn.__name__)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error (see the controller log)")

    return wrapper


def from_rpc_error(e: grpc.RpcError) -> JetfleetError:
    """Client side: a failed call as a domain error (the CLI prints its message)."""
    code = e.code() if hasattr(e, "code") else None
    details = e.details() if hasattr(e, "details") else str(e)
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) and not details:
        return Unavailable("controller unreachable")
    name = code.name if code is not None else "INTERNAL"
    return error_from_code(name, details or name)
