"""The error root of Pegasus.  Every error Pegasus raises derives from PegasusError
and carries the data a caller needs (task id, state, event) as attributes."""

from __future__ import annotations


class PegasusError(Exception):
    """Root of every error Pegasus raises on purpose."""


class InvalidRequest(PegasusError, ValueError):
    """A request refused where it is built, before it is sent (a value out of its bounds): the message names
    each field, ``field`` the first.  The supervisor answers such a request ``BadRequest``, the API 400."""

    error_type = "BadRequest"
    status, code = 400, "bad_request"

    def __init__(self, message: str, field: str = "") -> None:
        self.field = field
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:  # picklable with its field
        return (type(self), (str(self), self.field))


class MessageLimitReached(PegasusError):
    """A task was sent as many messages (or bytes of them) as ``[runtime]`` allows: ``cap`` names the setting."""

    def __init__(self, task_id: str, cap: str, limit: int, message: str) -> None:
        self.task_id, self.cap, self.limit = task_id, cap, limit
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.task_id, self.cap, self.limit, str(self)))


class ConfigError(PegasusError):
    """A configuration file or environment override is invalid; names the key."""


class CodecError(PegasusError):
    """Bytes that are not a Pegasus record, or of an unknown version or type."""


class WebhookRefused(PegasusError):
    """A webhook delivery refused: the HTTP ``status`` to answer, a stable ``code`` and what was wrong."""

    def __init__(self, status: int, code: str, message: str) -> None:
        self.status, self.code = status, code
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:  # picklable with its fields
        return (type(self), (self.status, self.code, str(self)))
