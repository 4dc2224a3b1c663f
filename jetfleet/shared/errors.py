"""Typed domain errors. Library code raises these; the gRPC layer and the CLI translate them in
one place each (``jetfleet.shared.grpc_errors`` and ``jetfleet.cli.common``)."""

from __future__ import annotations


class JetfleetError(Exception):
    """Base class. ``field`` names the input that was wrong, where there is one."""

    code = "INTERNAL"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return self.message


class InvalidArgument(JetfleetError):
    """A request or message is malformed or out of bounds; ``field`` names the culprit."""

    code = "INVALID_ARGUMENT"


class NotFound(JetfleetError):
    """The named board, board model, workload, campaign, model or file does not exist."""

    code = "NOT_FOUND"


class AlreadyExists(JetfleetError):
    """Something with that name exists already (a device id connected from another board, a lab CA)."""

    code = "ALREADY_EXISTS"


class FailedPrecondition(JetfleetError):
    """The request is valid but the current state refuses it (e.g. pausing a finished campaign)."""

    code = "FAILED_PRECONDITION"


class Unavailable(JetfleetError):
    """A board, the controller or the store cannot be reached now; a retry may succeed."""

    code = "UNAVAILABLE"


class NotLeader(Unavailable):
    """A standby controller refused a call that changes state (or an agent's session): ``leader`` is the address
    (HOST:PORT) of the controller that leads, "" while none is known (a takeover under way)."""

    def __init__(self, message: str, *, field: str | None = None, leader: str = "") -> None:
        super().__init__(message, field=field)
        self.leader = leader


class PermissionDenied(JetfleetError):
    """The peer's certificate lacks the role, or the identity, the call needs."""

    code = "PERMISSION_DENIED"


class Unauthenticated(JetfleetError):
    """The peer presented no identity the callee accepts (gRPC's UNAUTHENTICATED)."""

    code = "UNAUTHENTICATED"


class DeadlineExceeded(JetfleetError):
    """A board did not answer in time; its command stays pending and a retry by id does not repeat it."""

    code = "DEADLINE_EXCEEDED"


class DeviceError(JetfleetError):
    """The board refused or could not do something (missing node, permission, mismatch)."""

    code = "FAILED_PRECONDITION"


class StoreUnavailable(Unavailable):
    """The controller's store (Redis, the SQLite file) cannot be written or read now; nothing was changed.

    Operators see UNAVAILABLE "store unavailable"; campaigns keep their results and retry with backoff."""


class StoreDamaged(FailedPrecondition):
    """The store's data is damaged (a corrupted SQLite file): nothing may run on it until it is recovered."""


class Cancelled(JetfleetError):
    """A command stopped by a cancel command (a profile or a training run); gRPC's CANCELLED."""

    code = "CANCELLED"


class ResourceExhausted(JetfleetError):
    """A limit of the peer was hit (gRPC's RESOURCE_EXHAUSTED, e.g. a message over the size limit). ``retry_after_s``:
    when the peer says how long to wait before trying again (a controller admitting hellos), else None."""

    code = "RESOURCE_EXHAUSTED"

    def __init__(self, message: str, *, field: str | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(message, field=field)
        self.retry_after_s = retry_after_s


ERRORS_BY_CODE: dict[str, type[JetfleetError]] = {
    cls.code: cls for cls in (InvalidArgument, NotFound, AlreadyExists, FailedPrecondition, Unavailable,
                              ResourceExhausted, DeadlineExceeded, PermissionDenied, Unauthenticated, Cancelled)
}


def error_from_code(code: str, message: str, field: str | None = None) -> JetfleetError:
    """The domain error of a status code name; an unknown code gives a plain JetfleetError (code INTERNAL)."""
    return ERRORS_BY_CODE.get(code, JetfleetError)(message, field=field)
