"""The task tree's request (issue 20): a task and its descendants, each with its states."""

from __future__ import annotations

from actors.messages.requests import Request


class Tree(Request):
    """The tree under ``task_id`` (Reply data: the task's node, its children nested)."""

    task_id: str
