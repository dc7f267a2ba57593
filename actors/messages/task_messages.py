"""Messages to a running task (``pegasus message``): the client's request, and the supervisor's hand-over
of the task's unread messages to the task actor that holds its run."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from actors.messages.requests import Request


class SendMessage(Request):
    """Client -> supervisor: add ``text`` to the task's conversation (Reply data: the task's view, and
    ``message``: its number and how it reaches the task)."""

    task_id: str
    text: str = Field(min_length=1)


@dataclass(frozen=True)
class MessageTask:
    """Supervisor -> task actor: the messages run ``run`` of the task has not taken, (number, text) each."""

    task_id: str
    run: int
    inbox: tuple[tuple[int, str], ...]
