"""Errors of the HTTP API: one JSON shape, ``{"error": {"code", "message"}}``, and the status of each kind.

What the supervisor refuses comes back as ``Upstream(error_type, message)`` (the backend turns the
client's errors into it); a supervisor that cannot be reached is ``NotReady``.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from pegasus.errors import PegasusError


class ApiError(PegasusError):
    """An answer of the API that is an error: its HTTP status, a stable code and a message."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        self.status, self.code, self.message = status, code, message
        self.headers = headers or {}
        super().__init__(f"{status} {code}: {message}")

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message}}


class Upstream(PegasusError):
    """The supervisor refused a request: ``error_type`` is its name for the error."""

    def __init__(self, error_type: str, message: str) -> None:
        self.error_type, self.message = error_type, message
        super().__init__(message)


class NotReady(PegasusError):
    """The system cannot answer now (its supervisor starting, restarting or gone)."""


# The supervisor's error types (class names) -> (status, code).
_UPSTREAM: dict[str, tuple[int, str]] = {
    "BadRequest": (400, "bad_request"),
    "UnknownMachineError": (400, "bad_request"),
    "TaskNotFoundError": (404, "not_found"),
    "AmbiguousTaskId": (409, "ambiguous_id"),  # a prefix of several tasks' ids: the error lists them
    "TokenNotFound": (404, "not_found"),
    "UnknownRequest": (404, "not_found"),
    "InvalidStateTransition": (409, "invalid_transition"),
    "StateEntryGateError": (409, "invalid_transition"),
    "TaskAlreadyInStateError": (409, "invalid_transition"),
    "RetryNotAllowedError": (409, "invalid_transition"),
    "IdempotencyConflict": (409, "idempotency_conflict"),
    "TaskTreeNotFinished": (409, "not_finished"),
    "TokenError": (409, "conflict"),
    "QueueFull": (429, "queue_full"),
    "MessageLimitReached": (409, "limit_reached"),
    "StoreUnavailable": (503, "unavailable"),
    "DiskFull": (503, "unavailable"),
    "StoreReplaced": (503, "unavailable"),
    "SystemStopping": (503, "unavailable"),
    "SystemNotRunning": (503, "unavailable"),
    "StartFailed": (503, "unavailable"),
}


def _upstream(error_type: str) -> tuple[int, str]:
    """A refusal's status: named above, else by its kind's name (``...NotFound``: 404); any other refusal
    of a request is the request's fault (400), an internal error or a store's the system's."""
    if error_type in _UPSTREAM:
        return _UPSTREAM[error_type]
    if error_type.endswith(("NotFound", "NotFoundError")):
        return 404, "not_found"
    if error_type == "InternalError":
        return 500, "internal"
    if error_type.startswith("Store"):
        return 503, "unavailable"
    return 400, "bad_request"


def api_error(exc: BaseException) -> ApiError:
    """The API's answer to an error raised while serving a request."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, Upstream):
        return ApiError(*_upstream(exc.error_type), exc.message)
    status, code = getattr(exc, "status", None), getattr(exc, "code", None)
    if isinstance(status, int) and 400 <= status < 600 and isinstance(code, str):  # an error that says its own
        return ApiError(status, code, str(getattr(exc, "message", None) or exc))  # (WebhookRefused)
    if isinstance(exc, ValidationError):  # a request the client's own model refused (a query parameter)
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "request"
        return ApiError(400, "bad_request", f"{where}: {first['msg']}")
    if isinstance(exc, NotReady):
        return ApiError(503, "unavailable", f"the system is not ready: {exc}", {"Retry-After": "1"})
    if isinstance(exc, TimeoutError):
        return ApiError(503, "unavailable", f"the system did not answer in time: {exc}", {"Retry-After": "1"})
    return ApiError(500, "internal", f"internal error: {type(exc).__name__}")
