"""The supervisor's side of messages to tasks (``pegasus message``; pegasus/admission/messages.py decides).

A mixin of ``actors.supervisor.Supervisor``.  The message is committed to the
store before the reply, so one the client was told is accepted survives a
SIGKILL of every process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors import messages as m
from actors.request_handler import request_handler


class TaskMessages:
    """The handler of ``SendMessage``."""

    admission: Any
    store: Any
    settings: Any
    _carry_out: Callable[[list[Any]], None]
    _view: Callable[[str], dict[str, Any]]

    @request_handler
    def receiveMsg_SendMessage(self, request: m.SendMessage, sender: Any) -> Any:
        assert self.admission is not None and self.store is not None and self.settings is not None
        limit = self.settings.runtime.max_input_bytes
        if not request.text.strip():
            raise ValueError("the message is empty")
        if len(request.text.encode()) > limit:
            raise ValueError(f"the message is over {limit} bytes")
        with self.store.group():  # the message and what it changes: one commit, before the reply
            message, effects = self.admission.message(request.task_id, request.text)
        self._carry_out(effects)
        return {**self._view(request.task_id), "message": message}
