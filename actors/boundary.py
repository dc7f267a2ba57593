"""An actor that outlives every error of its handlers: logged, never raised into Thespian (which would
re-deliver the message and answer PoisonMessage)."""

from __future__ import annotations

from typing import Any

from thespian.actors import ActorTypeDispatcher


class Boundary(ActorTypeDispatcher):
    error_event = "actor_error"  # the log event of an error a handler raised
    log: Any

    def receiveMessage(self, message: Any, sender: Any) -> None:
        try:
            super().receiveMessage(message, sender)
        except Exception:  # noqa: BLE001 - the boundary: the actor must outlive every error
            self.log.exception(self.error_event, message=type(message).__name__)
