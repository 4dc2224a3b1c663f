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
    code = "INVALID_ARGUMENT"


class NotFound(JetfleetError):
    code = "NOT_FOUND"


class AlreadyExists(JetfleetError):
    code = "ALREADY_EXISTS"


class FailedPrecondition(JetfleetError):
    code = "FAILED_PRECONDITION"


class Unavailable(JetfleetError):
    code = "UNAVAILABLE"


class PermissionDenied(JetfleetError):
    code = "PERMISSION_DENIED"


class DeadlineExceeded(JetfleetError):
    code = "DEADLINE_EXCEEDED"


class DeviceError(JetfleetError):
    """The board refused or could not do something (missing node, permission, mismatch)."""

    code = "FAILED_PRECONDITION"


class ResourceExhausted(JetfleetError):
    code = "RESOURCE_EXHAUSTED"


ERRORS_BY_CODE: dict[str, type[JetfleetError]] = {
    cls.code: cls for cls in (InvalidArgument, NotFound, AlreadyExists, FailedPrecondition, Unavailable,
                              ResourceExhausted, DeadlineExceeded, PermissionDenied)
}


def error_from_code(code: str, message: str) -> JetfleetError:
    return ERRORS_BY_CODE.get(code, JetfleetError)(message)
