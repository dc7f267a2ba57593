"""The errors a client's calls raise beyond the system's own, and the one place a refusal becomes one."""

from __future__ import annotations

from typing import Any

from actors import messages as m
from actors.runtime.spec import SystemNotRunningError, SystemStartError
from pegasus.errors import PegasusError, WebhookRefused


class SupervisorReplaced(SystemNotRunningError):
    """The supervisor a request went to died and was replaced before it answered (ask again)."""


class RequestError(PegasusError):
    """The supervisor refused a request; ``error_type`` names the kind of error."""

    def __init__(self, message: str, error_type: str | None, data: Any = None) -> None:
        self.error_type = error_type or "Error"
        self.data = data  # what the refusal says beyond its text (a webhook's status and code)
        super().__init__(message)


def refusal(reply: m.Reply, admin_port: int) -> Exception:
    """The exception a refused request raises, by the kind of error the reply names."""
    if reply.error_type == "SystemNotRunning":
        return SystemNotRunningError(reply.error or "not running", admin_port)
    if reply.error_type == "StartFailed":
        return SystemStartError(reply.error or "the system did not start", admin_port)
    if reply.error_type == "WebhookRefused" and isinstance(reply.data, dict):
        return WebhookRefused(int(reply.data["status"]), str(reply.data["code"]), reply.error or "")
    return RequestError(reply.error or "request failed", reply.error_type, reply.data)
