"""The supervisor's hand-over of a task's unread messages to the task actor that holds its run (the client's
request is ``pegasus.requests.SendMessage``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MessageTask:
    """Supervisor -> task actor: the messages run ``run`` of the task has not taken, (number, text) each."""

    task_id: str
    run: int
    inbox: tuple[tuple[int, str], ...]
