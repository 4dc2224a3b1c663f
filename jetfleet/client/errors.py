"""The errors a client call raises: one class per gRPC status the controller answers with, each carrying
``code`` (the status name), ``message`` and ``field`` (the request field to fix, where there is one)."""

from __future__ import annotations

from jetfleet.shared.errors import (
    AlreadyExists,
    Cancelled,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    JetfleetError,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)

__all__ = ["AlreadyExists", "Cancelled", "DeadlineExceeded", "FailedPrecondition", "InvalidArgument", "JetfleetError",
           "NotFound", "PermissionDenied", "ResourceExhausted", "Unauthenticated", "Unavailable"]
